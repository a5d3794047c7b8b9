"""Kernels of the ops on sparse sequences and sets (``dflab.ops.sparse_text_ops``,
``dflab.ops.sets_ops``, ``tf.sparse.bincount``) and of sparse serialization
(``dflab.ops.sparse_io_ops``): host-only, as TF's CPU kernels, reading the coordinate lists
with the helpers of ``sparse_kernels``."""

from __future__ import annotations

import itertools

import numpy as np

from dflab.framework import dtypes as _dt
from dflab.framework import errors
from dflab.kernels.registry import kernel
from dflab.kernels.sparse_kernels import (
    check_indices,
    indices_matrix,
    row_major_keys,
    row_major_order,
    shape_vector,
)
from dflab.lib import tensor_proto as _tp
from dflab.lib.io.tensor_bundle import dtype_of_enum


# --- text: EditDistance, StringSplit, StringSplitV2 --------------------------------------------
def _levenshtein(a: list, b: list) -> int:
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i]
        for j, y in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y)))
        prev = cur
    return prev[-1]


def _sequences(idx, vals, outer) -> dict:
    """Each sequence (keyed by its row-major outer position) as its values in index order."""
    seqs: dict = {}
    for k in row_major_order(idx):
        seqs.setdefault(int(row_major_keys(idx[k:k + 1, :-1], outer)[0]), []).append(vals[k])
    return seqs


@kernel("EditDistance", host_only=True)
def _edit_distance(node, ctx):
    normalize = node.attr["normalize"]

    def run(h_indices, h_values, h_shape, t_indices, t_values, t_shape):
        h_idx, t_idx = indices_matrix(node, h_indices), indices_matrix(node, t_indices)
        h_shape, t_shape = shape_vector(h_shape), shape_vector(t_shape)
        if h_shape.size != t_shape.size or h_shape.size < 1:
            raise errors.InvalidArgumentError(
                None, node, f"hypothesis and truth must have the same rank (at least 1), got "
                f"{h_shape.size} and {t_shape.size}")
        outer = np.maximum(h_shape[:-1], t_shape[:-1])
        hyp = _sequences(h_idx, list(np.asarray(h_values).ravel()), outer)
        truth = _sequences(t_idx, list(np.asarray(t_values).ravel()), outer)
        out = np.zeros(int(np.prod(outer)), dtype=np.float32)
        for pos in set(hyp) | set(truth):
            h, t = hyp.get(pos, []), truth.get(pos, [])
            dist = _levenshtein(h, t)
            if normalize:
                dist = dist / len(t) if t else (np.inf if h else 0.0)
            out[pos] = dist
        return out.reshape(tuple(int(d) for d in outer))

    return run


def _split_rows(rows: list) -> tuple:
    indices = [[i, j] for i, r in enumerate(rows) for j in range(len(r))]
    values = np.empty(sum(len(r) for r in rows), dtype=object)
    values[:] = [p for r in rows for p in r]
    longest = max((len(r) for r in rows), default=0)
    return (np.asarray(indices, dtype=np.int64).reshape(-1, 2), values,
            np.asarray([len(rows), longest], dtype=np.int64))


def _as_bytes(s) -> bytes:
    return s.encode() if isinstance(s, str) else bytes(s)


@kernel("StringSplit", host_only=True)
def _string_split(node, ctx):
    skip_empty = node.attr["skip_empty"]

    def run(source, delimiter):
        src = [_as_bytes(s) for s in np.asarray(source, dtype=object).reshape(-1)]
        delim = _as_bytes(np.asarray(delimiter, dtype=object).reshape(()).item())
        rows = []
        for s in src:
            if not delim:  # an empty delimiter splits into characters (bytes)
                parts = [s[k:k + 1] for k in range(len(s))]
            else:
                # Every byte of the delimiter is a split point (TF's StringSplit).
                parts, cur = [], bytearray()
                for ch in s:
                    if ch in delim:
                        parts.append(bytes(cur))
                        cur = bytearray()
                    else:
                        cur.append(ch)
                parts.append(bytes(cur))
            rows.append([p for p in parts if p or not skip_empty] if s else [])
        return _split_rows(rows)

    return run


@kernel("StringSplitV2", host_only=True)
def _string_split_v2(node, ctx):
    maxsplit = node.attr["maxsplit"]

    def run(source, sep):
        src = [_as_bytes(s) for s in np.asarray(source, dtype=object).reshape(-1)]
        sep = _as_bytes(np.asarray(sep, dtype=object).reshape(()).item())
        limit = -1 if maxsplit < 0 else maxsplit
        # An empty separator splits on runs of whitespace, as Python's str.split().
        rows = [(s.split(None, limit) if not sep else s.split(sep, limit)) if s else []
                for s in src]
        return _split_rows(rows)

    return run


# --- sets: SetSize and the set operations over the last dimension ------------------------------
def _sparse_sets(node, idx, vals, shape, validate) -> dict:
    """{group position (row-major over all but the last dimension): set of values}."""
    if shape.size < 2:
        raise errors.InvalidArgumentError(
            None, node, f"Invalid input rank {shape.size}, should be >= 2.")
    if validate:
        check_indices(node, idx, tuple(int(d) for d in shape))
    groups = row_major_keys(idx[:, :-1], shape[:-1])
    sets: dict = {}
    for g, v in zip(groups, vals):
        sets.setdefault(int(g), set()).add(v)
    return sets


def _dense_sets(node, dense) -> tuple:
    if dense.ndim < 2:
        raise errors.InvalidArgumentError(
            None, node, f"Invalid input rank {dense.ndim}, should be >= 2.")
    rows = dense.reshape(-1, dense.shape[-1])
    return {g: set(r.tolist()) for g, r in enumerate(rows) if r.size}, np.array(
        dense.shape[:-1], dtype=np.int64)


_SET_OPS = {"intersection": lambda a, b: a & b, "union": lambda a, b: a | b,
            "a-b": lambda a, b: a - b, "b-a": lambda a, b: b - a}


def _set_result(node, sets_a, sets_b, group_a, group_b, how, dtype):
    if not np.array_equal(group_a, group_b):
        raise errors.InvalidArgumentError(
            None, node, f"Shapes mismatch: the group shapes {group_a.tolist()} and "
            f"{group_b.tolist()} of the two sets differ")
    fn = _SET_OPS.get(how)
    if fn is None:
        raise errors.InvalidArgumentError(None, node, f"Invalid set_operation {how}.")
    indices, values, longest = [], [], 0
    for g in sorted(set(sets_a) | set(sets_b)):
        out = sorted(fn(sets_a.get(g, set()), sets_b.get(g, set())))
        longest = max(longest, len(out))
        pos = np.unravel_index(g, tuple(int(d) for d in group_a)) if group_a.size else ()
        indices.extend([*map(int, pos), j] for j in range(len(out)))
        values.extend(out)
    vals = np.empty(len(values), dtype=np.dtype(dtype))
    vals[:] = values
    return (np.array(indices, dtype=np.int64).reshape(len(values), group_a.size + 1), vals,
            np.append(group_a, longest).astype(np.int64))


@kernel("SetSize", host_only=True)
def _set_size(node, ctx):
    validate = node.attr["validate_indices"]

    def run(indices, values, shape):
        shape = shape_vector(shape)
        sets = _sparse_sets(node, indices_matrix(node, indices), list(np.asarray(values).ravel()),
                            shape, validate)
        out = np.zeros(int(np.prod(shape[:-1])), dtype=np.int32)
        for g, s in sets.items():
            out[g] = len(s)
        return out.reshape(tuple(int(d) for d in shape[:-1]))

    return run


@kernel("DenseToDenseSetOperation", host_only=True)
def _dense_dense_sets(node, ctx):
    how = node.attr["set_operation"]

    def run(a, b):
        a, b = np.asarray(a), np.asarray(b)
        (sa, ga), (sb, gb) = _dense_sets(node, a), _dense_sets(node, b)
        return _set_result(node, sa, sb, ga, gb, how, a.dtype)

    return run


@kernel("DenseToSparseSetOperation", host_only=True)
def _dense_sparse_sets(node, ctx):
    how, validate = node.attr["set_operation"], node.attr["validate_indices"]

    def run(a, b_indices, b_values, b_shape):
        a = np.asarray(a)
        sa, ga = _dense_sets(node, a)
        b_shape = shape_vector(b_shape)
        sb = _sparse_sets(node, indices_matrix(node, b_indices), list(np.asarray(b_values).ravel()),
                          b_shape, validate)
        return _set_result(node, sa, sb, ga, b_shape[:-1], how, a.dtype)

    return run


@kernel("SparseToSparseSetOperation", host_only=True)
def _sparse_sparse_sets(node, ctx):
    how, validate = node.attr["set_operation"], node.attr["validate_indices"]

    def run(a_indices, a_values, a_shape, b_indices, b_values, b_shape):
        a_shape, b_shape = shape_vector(a_shape), shape_vector(b_shape)
        a_vals = np.asarray(a_values)
        sa = _sparse_sets(node, indices_matrix(node, a_indices), list(a_vals.ravel()), a_shape,
                          validate)
        sb = _sparse_sets(node, indices_matrix(node, b_indices), list(np.asarray(b_values).ravel()),
                          b_shape, validate)
        return _set_result(node, sa, sb, a_shape[:-1], b_shape[:-1], how, a_vals.dtype)

    return run


@kernel("SparseCrossV2", host_only=True)
def _sparse_cross(node, ctx):
    n = node.attr["N"]

    def text(v) -> bytes:
        return v if isinstance(v, bytes) else (v.encode() if isinstance(v, str)
                                               else str(int(v)).encode())

    def run(*args):
        sep = _as_bytes(np.asarray(args[-1], dtype=object).reshape(()).item())
        idxs = [indices_matrix(node, a) for a in args[:n]]
        vals = [list(np.asarray(v).ravel()) for v in args[n:2 * n]]
        shapes = [shape_vector(s) for s in args[2 * n:3 * n]]
        dense = [np.asarray(d) for d in args[3 * n:-1]]
        batch = int(shapes[0][0]) if shapes else (dense[0].shape[0] if dense else 0)
        # Each row's features per input: sparse inputs first, then dense (TF's order).
        columns = []
        for idx, v in zip(idxs, vals):
            rows = [[] for _ in range(batch)]
            for k in row_major_order(idx):
                rows[int(idx[k, 0])].append(text(v[k]))
            columns.append(rows)
        for d in dense:
            columns.append([[text(x) for x in np.ravel(d[r])] for r in range(batch)])
        out_rows = [[sep.join(combo) for combo in itertools.product(*(c[r] for c in columns))]
                    for r in range(batch)]
        return _split_rows(out_rows)

    return run


# --- counts: DenseCountSparseOutput, SparseCountSparseOutput -------------------------------------
def _counts(node, batch, values, weights, out_dtype):
    """TF's count ops: per (batch row, value) the count (or weight sum, or 1 when binary) of
    the non-negative values below ``maxlength``."""
    a = node.attr
    minlength, maxlength, binary = a["minlength"], a["maxlength"], a["binary_output"]
    if np.any(values < 0):
        raise errors.InvalidArgumentError(
            None, node, "Input values must all be non-negative")
    keep = values < maxlength if maxlength >= 0 else np.ones(len(values), bool)
    sums: dict = {}
    for k in np.flatnonzero(keep):
        key = (int(batch[k]) if batch is not None else 0, int(values[k]))
        add = 1 if binary or weights is None else weights[k]
        sums[key] = 1 if binary else sums.get(key, 0) + add
    # TF's output size: maxlength when given, else the largest value + 1, at least minlength.
    size = int(values[keep].max()) + 1 if keep.any() else 0
    size = maxlength if maxlength > 0 else max(size, minlength)
    keys = sorted(sums)
    if batch is None:
        idx = np.array([[v] for _, v in keys], dtype=np.int64).reshape(-1, 1)
        shape = np.array([size], dtype=np.int64)
    else:
        rows = int(batch.max()) + 1 if len(batch) else 0
        idx = np.array([list(k) for k in keys], dtype=np.int64).reshape(-1, 2)
        shape = np.array([rows, size], dtype=np.int64)
    return idx, np.array([sums[k] for k in keys], dtype=out_dtype), shape


@kernel("DenseCountSparseOutput", host_only=True)
def _dense_count(node, ctx):
    def run(values, weights):
        values, weights = np.asarray(values), np.asarray(weights)
        if values.ndim not in (1, 2):
            raise errors.InvalidArgumentError(
                None, node, f"Input must be a 1 or 2-dimensional tensor. Got: "
                f"{values.ndim}")
        if weights.size and weights.shape != values.shape:
            raise errors.InvalidArgumentError(
                None, node, f"Weights and values must have the same shape. Weight shape: "
                f"{list(weights.shape)}; values shape: {list(values.shape)}")
        batch = None if values.ndim == 1 else np.repeat(np.arange(values.shape[0]),
                                                        values.shape[1])
        out = _counts(node, batch, values.ravel(), weights.ravel() if weights.size else None,
                      weights.dtype)
        if values.ndim == 2:  # every row counts, even one with no kept values
            out[2][0] = values.shape[0]
        return out

    return run


@kernel("SparseCountSparseOutput", host_only=True)
def _sparse_count(node, ctx):
    def run(indices, values, dense_shape, weights):
        idx, shape = indices_matrix(node, indices), shape_vector(dense_shape)
        values, weights = np.asarray(values), np.asarray(weights)
        if weights.size and weights.shape != values.shape:
            raise errors.InvalidArgumentError(
                None, node, "Weights and values must have the same shape.")
        batch = None if shape.size == 1 else idx[:, 0]
        out = _counts(node, batch, values, weights if weights.size else None, weights.dtype)
        if batch is not None:
            out[2][0] = shape[0]
        return out

    return run


# --- serialization: SerializeSparse, SerializeManySparse, DeserializeManySparse -----------------
def _serialized(idx, vals, shape, dtype) -> np.ndarray:
    out = np.empty(3, dtype=object)
    out[:] = [_tp.as_proto_tensor_content(idx, _dt.int64).SerializeToString(),
              _tp.as_proto_tensor_content(vals, dtype).SerializeToString(),
              _tp.as_proto_tensor_content(shape, _dt.int64).SerializeToString()]
    return out


@kernel("SerializeSparse", host_only=True)
def _serialize_sparse(node, ctx):
    dtype = node.attr["T"]

    def run(indices, values, shape):
        return _serialized(indices_matrix(node, indices), np.asarray(values),
                           shape_vector(shape), dtype)

    return run


@kernel("SerializeManySparse", host_only=True)
def _serialize_many_sparse(node, ctx):
    dtype = node.attr["T"]

    def run(indices, values, shape):
        idx, shape, vals = indices_matrix(node, indices), shape_vector(shape), np.asarray(values)
        if shape.size < 2:
            raise errors.InvalidArgumentError(
                None, node, f"Rank of input SparseTensor should be > 1, but saw rank: "
                f"{shape.size}")
        check_indices(node, idx, tuple(int(d) for d in shape))
        out = np.empty((int(shape[0]), 3), dtype=object)
        for row in range(int(shape[0])):
            sel = idx[:, 0] == row
            out[row] = _serialized(idx[sel, 1:], vals[sel], shape[1:], dtype)
        return out

    return run


@kernel("DeserializeManySparse", host_only=True)
def _deserialize_many_sparse(node, ctx):
    dtype = node.attr["dtype"]

    def parse(data: bytes, what: str, want: str):
        from google.protobuf.message import DecodeError  # protobuf is loaded on first use

        try:
            proto = _tp.TensorProto.FromString(bytes(data))
            dt = dtype_of_enum(proto.dtype)
            name = dt.name if dt is not None else None
            arr = _tp.make_ndarray(proto) if dt is not None else None
        except (DecodeError, ValueError, IndexError, TypeError):
            raise errors.InvalidArgumentError(
                None, node, f"Could not parse serialized_sparse[{what}]") from None
        if name != want:
            raise errors.InvalidArgumentError(
                None, node, f"Requested SparseTensor of type {want} but SparseTensor[{what}]"
                f".values.dtype() == {name}")
        return arr

    def run(serialized):
        rows = np.asarray(serialized, dtype=object)
        if rows.ndim != 2 or rows.shape[1] != 3:
            raise errors.InvalidArgumentError(
                None, node, f"Serialized sparse should be a matrix with 3 columns, got shape "
                f"{list(rows.shape)}")
        parts = []
        for k, (i, v, s) in enumerate(rows):
            parts.append((parse(i, f"{k}].indices", "int64"),
                          parse(v, f"{k}]", dtype.name), parse(s, f"{k}].shape", "int64")))
        if not parts:
            raise errors.InvalidArgumentError(None, node, "Serialized sparse is empty")
        rank = parts[0][2].size
        for k, (_, _, s) in enumerate(parts):
            if s.size != rank:
                raise errors.InvalidArgumentError(
                    None, node, f"Inconsistent rank across SparseTensors: rank prior to "
                    f"SparseTensor[{k}] was: {rank} but rank of SparseTensor[{k}] is: {s.size}")
        idx = np.concatenate([np.column_stack([np.full(len(i), k, np.int64),
                                               i.reshape(len(i), rank)])
                              for k, (i, _, _) in enumerate(parts)]).reshape(-1, rank + 1)
        vals = np.concatenate([v for _, v, _ in parts])
        shape = np.max(np.stack([s for _, _, s in parts]), axis=0)
        return idx, vals, np.concatenate([[len(parts)], shape]).astype(np.int64)

    return run
