"""Kernels of ``dflab.ops.sparse_ops``: ``SparseToDense`` scatters a coordinate list into a
dense array with the device's ``xp`` (indices and shapes read on the host, as TF keeps them in
host memory for its GPU kernels too); ``SparseTensorDenseMatMul`` and the ``SparseSegment*`` ops run
anywhere too (one product with a one-hot matrix sums the rows), as TF has GPU kernels for them;
the other ops on ``SparseTensor`` components are host-only, as TF's CPU kernels, and expect (or
check, where TF does) row-major ordered indices."""

from __future__ import annotations

import numpy as np

from dflab.framework import errors
from dflab.kernels.context import host
from dflab.kernels.registry import kernel


def _as_matrix(indices: np.ndarray, rank: int) -> np.ndarray:
    if indices.ndim == 0:
        return indices.reshape(1, 1)
    if indices.ndim == 1:
        return indices.reshape(-1, 1) if rank == 1 else indices.reshape(1, -1)
    return indices


def check_indices(node, idx: np.ndarray, shape, sorted_unique=True) -> None:
    """TF's checks of sparse indices: in bounds and, when asked, strictly increasing in
    row-major order (so neither out of order nor repeated)."""
    for i, row in enumerate(idx):
        if np.any(row < 0) or np.any(row >= shape):
            raise errors.InvalidArgumentError(
                None, node, f"indices[{i}] = [{','.join(map(str, row))}] is out of bounds: "
                f"need 0 <= index < [{','.join(map(str, shape))}]")
    if not sorted_unique or len(idx) < 2:
        return
    flat = np.ravel_multi_index(idx.T, shape) if len(shape) else np.zeros(len(idx))
    for i in range(1, len(flat)):
        if flat[i] == flat[i - 1]:
            raise errors.InvalidArgumentError(
                None, node, f"indices[{i}] = [{','.join(map(str, idx[i]))}] is repeated")
        if flat[i] < flat[i - 1]:
            raise errors.InvalidArgumentError(
                None, node, f"indices[{i}] = [{','.join(map(str, idx[i]))}] is out of order. "
                "Many sparse ops require sorted indices.\n    Use `tf.sparse.reorder` to "
                "create a correctly ordered copy.\n\n")


@kernel("SparseToDense", host_memory_inputs=(0, 1))
def _sparse_to_dense(node, ctx):
    xp, validate = ctx.xp, node.attr["validate_indices"]

    def run(indices, output_shape, values, default):
        shape = tuple(int(d) for d in np.ravel(host(output_shape)))
        idx = _as_matrix(host(indices, np.int64), len(shape))
        if idx.shape[1] != len(shape):
            raise errors.InvalidArgumentError(
                None, node, f"sparse_indices has {idx.shape[1]} columns for an output of rank "
                f"{len(shape)}")
        n = idx.shape[0]
        if values.ndim not in (0, 1) or (values.ndim == 1 and values.shape[0] != n):
            raise errors.InvalidArgumentError(
                None, node, f"sparse_values has incorrect shape {list(values.shape)}, should "
                f"be [] or [{n}]")
        check_indices(node, idx, shape, sorted_unique=validate)
        out = xp.full(shape, default, dtype=values.dtype)
        if n and out.size and shape:
            # A repeated index keeps the last value written, as TF's kernel: only each
            # position's last entry is scattered (an array library's scatter of repeated
            # positions may keep any of them).
            flat = np.ravel_multi_index(idx.T, shape)
            _, from_end = np.unique(flat[::-1], return_index=True)
            keep = np.sort(n - 1 - from_end)
            target = tuple(xp.asarray(idx[keep, k]) for k in range(len(shape)))
            out[target] = values if values.ndim == 0 else values[xp.asarray(keep)]
        return out

    return run


# --- ops on SparseTensor components (host-only, as TF's CPU kernels) ---------------------------
def indices_matrix(node, value, what="indices") -> np.ndarray:
    idx = np.asarray(host(value), dtype=np.int64)
    if idx.ndim != 2:
        raise errors.InvalidArgumentError(
            None, node, f"{what} should be a matrix but received shape {list(idx.shape)}")
    return idx


def shape_vector(value) -> np.ndarray:
    return np.asarray(host(value), dtype=np.int64).reshape(-1)


def row_major_order(idx: np.ndarray) -> np.ndarray:
    """The stable permutation that puts ``idx``'s rows in row-major order."""
    if idx.shape[0] == 0 or idx.shape[1] == 0:
        return np.arange(idx.shape[0])
    return np.lexsort(idx.T[::-1])


def row_major_keys(idx: np.ndarray, dims) -> np.ndarray:
    """One integer per row of ``idx``: its row-major position within ``dims``."""
    if idx.shape[1] == 0:
        return np.zeros(idx.shape[0], dtype=np.int64)
    return np.ravel_multi_index(tuple(idx.T), tuple(int(d) for d in dims))


def _same_shapes(node, a_shape, b_shape) -> None:
    if a_shape.shape != b_shape.shape:
        raise errors.InvalidArgumentError(
            None, node, f"Operands do not have the same ranks; got shapes: "
            f"{list(a_shape)} and {list(b_shape)}")
    if np.any(a_shape != b_shape):
        raise errors.InvalidArgumentError(
            None, node, f"Operands' shapes do not match: got {list(a_shape)} and "
            f"{list(b_shape)}")


# The ops TF also runs on GPUs read and write their indices and shapes in host memory and
# move the values with the device's ``xp``.
@kernel("SparseReorder", host_memory_inputs=(0, 2), host_memory_outputs=(0,))
def _sparse_reorder(node, ctx):
    xp = ctx.xp

    def run(indices, values, shape):
        idx = indices_matrix(node, indices, "Input indices")
        perm = row_major_order(idx)
        return idx[perm], values[xp.asarray(perm)]

    return run


def _sum_rows(xp, rows: np.ndarray, n: int, parts):
    """``parts``' rows summed into ``n`` rows by ``rows`` (host indices; repeats add up): one
    product with a one-hot matrix, so the same code runs with NumPy and on a GPU."""
    onehot = np.zeros((n, len(rows)), dtype=parts.dtype)
    onehot[rows, np.arange(len(rows))] = 1
    return xp.asarray(onehot) @ parts


@kernel("SparseTensorDenseMatMul", host_memory_inputs=(0, 2))
def _sparse_dense_matmul(node, ctx):
    xp, adj_a, adj_b = ctx.xp, node.attr["adjoint_a"], node.attr["adjoint_b"]

    def run(a_indices, a_values, a_shape, b):
        idx, shape = indices_matrix(node, a_indices), shape_vector(a_shape)
        if b.ndim != 2:
            raise errors.InvalidArgumentError(None, node, "Tensor 'b' is not a matrix")
        if shape.size != 2:
            raise errors.InvalidArgumentError(None, node, "Tensor 'a_shape' is not a vector "
                                              "of length 2")
        rows, cols = (idx[:, 1], idx[:, 0]) if adj_a else (idx[:, 0], idx[:, 1])
        out_rows, inner = (int(shape[1]), int(shape[0])) if adj_a else (int(shape[0]),
                                                                         int(shape[1]))
        b = xp.conj(b.T) if adj_b else b
        if b.shape[0] != inner:
            raise errors.InvalidArgumentError(
                None, node, f"Cannot multiply A and B because inner dimension does not match: "
                f"{inner} vs. {b.shape[0]}.  Did you forget a transpose?  Dimensions of A: "
                f"[{shape[0]}, {shape[1]}).  Dimensions of B: {list(b.shape)}")
        bad = np.flatnonzero((rows < 0) | (rows >= out_rows) | (cols < 0) | (cols >= inner))
        if len(bad):
            k = int(bad[0])
            raise errors.InvalidArgumentError(
                None, node, f"index[{k}] = [{', '.join(map(str, idx[k]))}] is out of bounds "
                f"of A's shape [{shape[0]}, {shape[1]}]")
        vals = xp.conj(a_values) if adj_a else a_values
        parts = vals[:, None] * b[xp.asarray(cols)]
        return _sum_rows(xp, rows, out_rows, parts.astype(vals.dtype, copy=False))

    return run


def _reduce_groups(node, idx, shape, axes, keep_dims):
    """(group of each entry, kept-dims output shape, output shape, kept dims mask)."""
    rank = shape.size
    axes = np.asarray(host(axes), dtype=np.int64).reshape(-1)
    for a in axes:
        if not -rank <= a < rank:
            raise errors.InvalidArgumentError(
                None, node, f"Invalid reduction dimension {a}, for input with {rank} "
                "dimensions.")
    reduced = np.zeros(rank, dtype=bool)
    reduced[axes % rank if rank else axes] = True
    kept_shape = np.where(reduced, 1, shape)
    groups = row_major_keys(np.where(reduced, 0, idx), kept_shape)
    out_shape = kept_shape if keep_dims else shape[~reduced]
    return groups, kept_shape, out_shape, reduced


def _reduce_values(values, groups, how: str):
    uniq, first = np.unique(groups, return_inverse=True)
    out = np.zeros(len(uniq), dtype=values.dtype)
    if how == "sum":
        np.add.at(out, first, values)
    else:
        low = -np.inf if values.dtype.kind in "fc" else np.iinfo(values.dtype).min
        out[:] = low
        np.maximum.at(out, first, values)
    return uniq, out


def _reduce_kernel(how: str, sparse_out: bool):
    def factory(node, ctx):
        keep = node.attr["keep_dims"]

        def run(indices, values, shape, axes):
            idx, shape = indices_matrix(node, indices, "input_indices"), shape_vector(shape)
            groups, kept, out_shape, reduced = _reduce_groups(node, idx, shape, axes, keep)
            values = np.asarray(values)
            # Each group's entries in row-major order (TF sorts before reducing).
            uniq, red = _reduce_values(values, groups, how)
            if sparse_out:
                out_idx = np.array(np.unravel_index(uniq, kept), dtype=np.int64).T.reshape(
                    len(uniq), kept.size)
                if not keep:
                    out_idx = out_idx[:, ~reduced]
                return out_idx, red, out_shape.astype(np.int64)
            dense = np.zeros(int(np.prod(kept)), dtype=values.dtype)
            dense[uniq] = red
            return dense.reshape(tuple(int(d) for d in out_shape))

        return run

    return factory


for _how, _sparse_out, _name in (("sum", False, "SparseReduceSum"),
                                 ("sum", True, "SparseReduceSumSparse"),
                                 ("max", False, "SparseReduceMax"),
                                 ("max", True, "SparseReduceMaxSparse")):
    kernel(_name, host_only=True)(_reduce_kernel(_how, _sparse_out))


@kernel("SparseAdd", host_only=True)
def _sparse_add(node, ctx):
    def run(a_indices, a_values, a_shape, b_indices, b_values, b_shape, thresh):
        a_idx, b_idx = indices_matrix(node, a_indices), indices_matrix(node, b_indices)
        a_shape, b_shape = shape_vector(a_shape), shape_vector(b_shape)
        _same_shapes(node, a_shape, b_shape)
        a_vals, b_vals = np.asarray(a_values), np.asarray(b_values)
        idx, vals, combined = _merge(a_idx, a_vals, b_idx, b_vals, np.add)
        # As TF's kernel: only a sum of two entries is dropped, when |sum| < thresh.
        keep = ~combined | (np.abs(vals) >= np.asarray(host(thresh)))
        return idx[keep], vals[keep], a_shape

    return run


def _merge(a_idx, a_vals, b_idx, b_vals, combine, fill=None):
    """Two ordered coordinate lists merged in row-major order: (indices, values, whether
    each entry combined one of each side). Entries at the same index are combined; an entry
    on one side only is combined with ``fill`` when given."""
    both = np.concatenate([a_idx, b_idx]).reshape(-1, max(a_idx.shape[1], b_idx.shape[1]))
    vals = np.concatenate([a_vals, b_vals])
    side = np.concatenate([np.zeros(len(a_vals), bool), np.ones(len(b_vals), bool)])
    perm = row_major_order(both)
    both, vals, side = both[perm], vals[perm], side[perm]
    out_idx, out_vals, combined = [], [], []
    i = 0
    while i < len(vals):
        pair = (i + 1 < len(vals) and np.array_equal(both[i], both[i + 1])
                and side[i] != side[i + 1])
        if pair:
            out_vals.append(combine(vals[i], vals[i + 1]))
        else:
            out_vals.append(vals[i] if fill is None else combine(vals[i], fill))
        out_idx.append(both[i])
        combined.append(pair)
        i += 2 if pair else 1
    idx = np.array(out_idx, dtype=np.int64).reshape(len(out_idx), both.shape[1])
    return (idx, np.array(out_vals, dtype=vals.dtype).reshape(len(out_vals)),
            np.array(combined, dtype=bool))


@kernel("SparseAddGrad", host_only=True)
def _sparse_add_grad(node, ctx):
    def run(grad, a_indices, b_indices, sum_indices):
        grad = np.asarray(grad)
        where = {tuple(r): k for k, r in enumerate(indices_matrix(node, sum_indices))}

        def pick(indices):
            rows = indices_matrix(node, indices)
            out = np.zeros(len(rows), dtype=grad.dtype)
            for k, r in enumerate(rows):
                j = where.get(tuple(r))
                if j is not None:
                    out[k] = grad[j]
            return out

        return pick(a_indices), pick(b_indices)

    return run


@kernel("SparseTensorDenseAdd", host_only=True)
def _sparse_dense_add(node, ctx):
    def run(a_indices, a_values, a_shape, b):
        idx, shape, b = indices_matrix(node, a_indices), shape_vector(a_shape), np.asarray(b)
        if tuple(shape) != b.shape:
            raise errors.InvalidArgumentError(
                None, node, f"Dimension mismatch: the sparse tensor's shape {list(shape)} is "
                f"not the dense tensor's {list(b.shape)}")
        check_indices(node, idx, tuple(shape), sorted_unique=False)
        out = b.copy()
        np.add.at(out, tuple(idx.T), np.asarray(a_values))
        return out

    return run


def _cwise_kernel(fn):
    def factory(node, ctx):
        def run(indices, values, shape, dense):
            idx, shape = indices_matrix(node, indices), shape_vector(shape)
            dense = np.asarray(dense)
            if dense.ndim > shape.size:
                raise errors.InvalidArgumentError(
                    None, node, f"Dense tensor of rank {dense.ndim} cannot broadcast to a "
                    f"SparseTensor of rank {shape.size}")
            # The dense operand broadcast to the sparse shape, read at each entry's index.
            full = np.broadcast_to(dense, tuple(int(d) for d in shape))
            picked = full[tuple(idx.T)] if idx.shape[1] else np.broadcast_to(full, (len(idx),))
            return fn(np.asarray(values), picked).astype(np.asarray(values).dtype, copy=False)

        return run

    return factory


kernel("SparseDenseCwiseMul", host_only=True)(_cwise_kernel(np.multiply))
kernel("SparseDenseCwiseAdd", host_only=True)(_cwise_kernel(np.add))
def _divide(x, y):
    if x.dtype.kind not in "iu":
        return np.true_divide(x, y)
    # Integer division truncates toward zero, as C++'s (and TF's kernel).
    q = np.abs(x) // np.abs(y)
    return np.where((x < 0) != (y < 0), -q, q)


kernel("SparseDenseCwiseDiv", host_only=True)(_cwise_kernel(_divide))


@kernel("SparseSoftmax", host_only=True)
def _sparse_softmax(node, ctx):
    def run(indices, values, shape):
        idx, shape, vals = indices_matrix(node, indices), shape_vector(shape), np.asarray(values)
        if shape.size < 2:
            raise errors.InvalidArgumentError(
                None, node, f"Input should have rank >= 2, but received shape: {list(shape)}")
        groups = row_major_keys(idx[:, :-1], shape[:-1])
        out = np.empty_like(vals)
        for g in np.unique(groups):
            sel = groups == g
            e = np.exp(vals[sel] - vals[sel].max())
            out[sel] = e / e.sum()
        return out

    return run


@kernel("SparseReshape", host_memory_inputs=(0, 1, 2), host_memory_outputs=(0, 1))
def _sparse_reshape(node, ctx):
    def run(indices, shape, new_shape):
        idx, shape = indices_matrix(node, indices, "Input indices"), shape_vector(shape)
        target = shape_vector(new_shape).copy()
        total = int(np.prod(shape))
        unknown = np.flatnonzero(target == -1)
        if len(unknown) > 1:
            raise errors.InvalidArgumentError(
                None, node, f"only one output dimension may be -1, not both {unknown[0]} and "
                f"{unknown[1]}")
        known = int(np.prod(target[target != -1]))
        if len(unknown):
            if known == 0 or total % known:
                raise errors.InvalidArgumentError(
                    None, node, f"Input to reshape is a SparseTensor with {total} dense values, "
                    f"but the requested shape requires a multiple of {known}. "
                    f"input_shape={list(shape)} output_shape={list(target)}")
            target[unknown[0]] = total // known
        elif known != total:
            raise errors.InvalidArgumentError(
                None, node, f"Input to reshape is a tensor with {total} dense values, but the "
                f"requested shape has {known}. input_shape={list(shape)} "
                f"output_shape={list(target)}")
        flat = row_major_keys(idx, shape) if len(idx) else np.zeros(0, np.int64)
        out = np.array(np.unravel_index(flat, tuple(int(d) for d in target)),
                       dtype=np.int64).T.reshape(len(idx), target.size)
        return out, target

    return run


def _concat_host_inputs(node_def):
    n = node_def.attr["N"]
    return [*range(n), *range(2 * n, 3 * n)]


@kernel("SparseConcat", host_memory_inputs=_concat_host_inputs, host_memory_outputs=(0, 2))
def _sparse_concat(node, ctx):
    xp, n, dim = ctx.xp, node.attr["N"], node.attr["concat_dim"]

    def run(*args):
        idxs = [indices_matrix(node, a) for a in args[:n]]
        vals = list(args[n:2 * n])
        shapes = [shape_vector(s) for s in args[2 * n:]]
        rank = shapes[0].size
        d = dim + rank if dim < 0 else dim
        if not 0 <= d < rank:
            raise errors.InvalidArgumentError(
                None, node, f"Concat dimension must be in range [{-rank}, {rank}), got {dim}")
        for k, s in enumerate(shapes[1:], 1):
            if s.size != rank or np.any(np.delete(s, d) != np.delete(shapes[0], d)):
                raise errors.InvalidArgumentError(
                    None, node, f"Input shapes must match: got {list(shapes[0])} and "
                    f"{list(s)} for input {k}, concat_dim = {dim}")
        offsets = np.cumsum([0] + [int(s[d]) for s in shapes[:-1]])
        moved = []
        for idx, off in zip(idxs, offsets):
            idx = idx.copy()
            idx[:, d] += off
            moved.append(idx)
        out_idx = np.concatenate(moved).reshape(-1, rank)
        out_vals = xp.concatenate(vals)
        perm = row_major_order(out_idx)
        out_shape = shapes[0].copy()
        out_shape[d] = sum(int(s[d]) for s in shapes)
        return out_idx[perm], out_vals[xp.asarray(perm)], out_shape

    return run


def _slice_bounds(node, shape, start, size):
    start, size = shape_vector(start), shape_vector(size)
    if start.size != shape.size or size.size != shape.size:
        raise errors.InvalidArgumentError(
            None, node, f"Expected start and size to have {shape.size} elements, got "
            f"{start.size} and {size.size}")
    lo = np.minimum(start, shape)
    hi = np.minimum(start + size, shape)
    return lo, hi


@kernel("SparseSlice", host_memory_inputs=(0, 2, 3, 4), host_memory_outputs=(0, 2))
def _sparse_slice(node, ctx):
    xp = ctx.xp

    def run(indices, values, shape, start, size):
        idx, shape = indices_matrix(node, indices), shape_vector(shape)
        lo, hi = _slice_bounds(node, shape, start, size)
        inside = np.all((idx >= lo) & (idx < hi), axis=1) if len(idx) else np.zeros(0, bool)
        out_shape = np.maximum(hi - lo, 0)
        kept = values[xp.asarray(np.flatnonzero(inside))]
        return (idx[inside] - lo).reshape(-1, shape.size), kept, out_shape

    return run


@kernel("SparseSliceGrad", host_memory_inputs=(1, 2, 3))
def _sparse_slice_grad(node, ctx):
    xp = ctx.xp

    def run(grad, input_indices, input_start, output_indices):
        idx = indices_matrix(node, input_indices)
        start = shape_vector(input_start)
        where = {tuple(r + start): k for k, r in enumerate(indices_matrix(node, output_indices))}
        pairs = [(k, where[tuple(r)]) for k, r in enumerate(idx) if tuple(r) in where]
        out = xp.zeros(len(idx), dtype=grad.dtype)
        if pairs:
            dst, src = (np.array(p, dtype=np.int64) for p in zip(*pairs))
            out[xp.asarray(dst)] = grad[xp.asarray(src)]
        return out

    return run


def _split_host_outputs(node_def):
    n = node_def.attr["num_split"]
    return [*range(n), *range(2 * n, 3 * n)]


@kernel("SparseSplit", host_memory_inputs=(0, 1, 3), host_memory_outputs=_split_host_outputs)
def _sparse_split(node, ctx):
    xp, n = ctx.xp, node.attr["num_split"]

    def run(split_dim, indices, values, shape):
        idx, shape, vals = indices_matrix(node, indices), shape_vector(shape), values
        rank = shape.size
        d = int(host(split_dim))
        d = d + rank if d < 0 else d
        if not 0 <= d < rank:
            raise errors.InvalidArgumentError(
                None, node, f"Input split_dim should be between 0 and rank ({rank}), got "
                f"{int(host(split_dim))}")
        if n > shape[d]:
            raise errors.InvalidArgumentError(
                None, node, f"Input num_split should be between 1 and the splitting dimension "
                f"size ({shape[d]}), got {n}")
        # TF's split: the first (size % n) pieces are one longer.
        base, extra = divmod(int(shape[d]), n)
        sizes = [base + (1 if k < extra else 0) for k in range(n)]
        starts = np.cumsum([0] + sizes[:-1])
        outs_i, outs_v, outs_s = [], [], []
        for start, size in zip(starts, sizes):
            sel = (idx[:, d] >= start) & (idx[:, d] < start + size)
            piece = idx[sel].copy()
            piece[:, d] -= start
            shp = shape.copy()
            shp[d] = size
            outs_i.append(piece.reshape(-1, rank))
            outs_v.append(vals[xp.asarray(np.flatnonzero(sel))])
            outs_s.append(shp)
        return (*outs_i, *outs_v, *outs_s)

    return run


@kernel("SparseFillEmptyRows", host_memory_inputs=(0, 2), host_memory_outputs=(0, 2, 3))
def _sparse_fill_empty_rows(node, ctx):
    xp = ctx.xp

    def run(indices, values, dense_shape, default_value):
        idx, shape = indices_matrix(node, indices), shape_vector(dense_shape)
        vals = values
        if shape.size == 0:
            raise errors.InvalidArgumentError(None, node, "dense_shape must be a vector")
        rows = int(shape[0])
        present = np.zeros(rows, dtype=bool)
        if len(idx):
            check_indices(node, idx, tuple(shape), sorted_unique=False)
            present[idx[:, 0]] = True
        empty = np.flatnonzero(~present)
        filler = np.zeros((len(empty), shape.size), dtype=np.int64)
        filler[:, 0] = empty
        all_idx = np.concatenate([idx, filler]).reshape(-1, shape.size)
        all_vals = xp.concatenate([vals, xp.full(len(empty), host(default_value).item(),
                                                 dtype=vals.dtype)])
        # Stable by row: the input's entries keep their order within a row.
        perm = np.argsort(all_idx[:, 0], kind="stable")
        reverse = np.empty(len(idx), dtype=np.int64)
        reverse[perm[perm < len(idx)]] = np.flatnonzero(perm < len(idx))
        return all_idx[perm], all_vals[xp.asarray(perm)], ~present, reverse

    return run


@kernel("SparseFillEmptyRowsGrad", host_memory_inputs=(0,))
def _sparse_fill_empty_rows_grad(node, ctx):
    xp = ctx.xp

    def run(reverse_index_map, grad_values):
        rev, grad = np.asarray(host(reverse_index_map), np.int64), grad_values
        d_values = grad[xp.asarray(rev)]
        return d_values, (grad.sum() - d_values.sum()).astype(grad.dtype)

    return run


def _min_max_kernel(fn):
    def factory(node, ctx):
        def run(a_indices, a_values, a_shape, b_indices, b_values, b_shape):
            a_shape, b_shape = shape_vector(a_shape), shape_vector(b_shape)
            _same_shapes(node, a_shape, b_shape)
            a_vals, b_vals = np.asarray(a_values), np.asarray(b_values)
            return _merge(indices_matrix(node, a_indices), a_vals, indices_matrix(node, b_indices),
                          b_vals, fn, fill=np.zeros((), a_vals.dtype))[:2]

        return run

    return factory


kernel("SparseSparseMaximum", host_only=True)(_min_max_kernel(np.maximum))
kernel("SparseSparseMinimum", host_only=True)(_min_max_kernel(np.minimum))


def _segment_kernel(how: str, with_num: bool):
    def factory(node, ctx):
        xp = ctx.xp

        def run(data, indices, segment_ids, *num):
            idx = np.asarray(host(indices), np.int64).reshape(-1)
            seg = np.asarray(host(segment_ids), np.int64).reshape(-1)
            if idx.size != seg.size:
                raise errors.InvalidArgumentError(
                    None, node, "segment_ids and indices should have same size.")
            if len(seg) and (np.any(np.diff(seg) < 0) or seg[0] < 0):
                raise errors.InvalidArgumentError(
                    None, node, "segment ids are not increasing")
            bad = np.flatnonzero((idx < 0) | (idx >= data.shape[0]))
            if len(bad):
                raise errors.InvalidArgumentError(
                    None, node, f"Bad: indices[{bad[0]}] == {idx[bad[0]]} out of range "
                    f"[0, {data.shape[0]})")
            n = int(host(num[0])) if with_num else (int(seg[-1]) + 1 if len(seg) else 0)
            if len(seg) and seg[-1] >= n:
                raise errors.InvalidArgumentError(
                    None, node, f"segment ids must be < num_segments ({n})")
            rows = data[xp.asarray(idx)].reshape(len(idx), -1)
            out = _sum_rows(xp, seg, n, rows)
            if how != "sum":
                scale = np.maximum(np.bincount(seg, minlength=n), 1).astype(data.dtype)
                scale = np.sqrt(scale) if how == "sqrt_n" else scale
                out = out / xp.asarray(scale.reshape(-1, 1))
            return out.astype(data.dtype, copy=False).reshape((n, *data.shape[1:]))

        return run

    return factory


for _how, _op in (("sum", "SparseSegmentSum"), ("mean", "SparseSegmentMean"),
                  ("sqrt_n", "SparseSegmentSqrtN")):
    kernel(_op, host_memory_inputs=(1, 2))(_segment_kernel(_how, False))
    kernel(_op + "WithNumSegments", host_memory_inputs=(1, 2, 3))(_segment_kernel(_how, True))
