"""Kernels for array ops, written against the device's array namespace (``ctx.xp``).

Data goes through ``xp`` (NumPy on CPUs, CuPy on GPUs); small host-side arguments (shapes,
axes, permutations, sizes, paddings: what TF keeps in host memory) are read with NumPy
(``_ints``), and the shape family (``Shape``, ``Size``, ``Rank``) produces host values, as TF's
kernels write those outputs to host memory.

Kernels check their arguments against TF's rules and raise ``InvalidArgumentError`` naming the
node (out-of-range indices, sizes that do not fit), never an anonymous NumPy error. They return
fresh arrays or read-only views of their inputs and never write into an input.
"""

from __future__ import annotations

import functools
import math
import os

import numpy as np

from dflab.framework import errors
from dflab.kernels.context import host, host_ints, outputs
from dflab.kernels.registry import kernel, register_kernel
from dflab.ops.array_ops import strided_slice_spec


def _bad(node, message):
    return errors.InvalidArgumentError(None, node, message)


def _ints(v):
    return list(host_ints(v))


def _axis(node, axis, ndim, what="axis"):
    a = host_ints(axis)[0]
    if not -ndim <= a < ndim:
        raise _bad(node, f"Expected {what} in the range [{-ndim}, {ndim}), but got {a}")
    return a % ndim


def _first_true(mask) -> tuple:
    """The index of the first true element of ``mask`` (any namespace's boolean array)."""
    return tuple(int(i[0]) for i in mask.nonzero()) if mask.ndim else ()


def _check_indices(node, idx, limit, what="indices"):
    if type(idx) is np.ndarray and idx.size <= 64:
        # A few host indices: their extremes in Python (a third of four NumPy passes' cost).
        values = idx.ravel().tolist()
        if not values or (min(values) >= 0 and max(values) < limit):
            return
    bad = (idx < 0) | (idx >= limit)
    if bad.any():
        pos = _first_true(bad)
        raise _bad(node, f"{what}[{','.join(map(str, pos))}] = {int(idx[pos])} is not in "
                       f"[0, {limit})")


# --- sources and identities -------------------------------------------------------------------
@kernel("Const")
def _const(node, ctx):
    value = ctx.xp.asarray(node.attr["value"])  # into the device's memory, once per plan
    return lambda: value


@kernel("Placeholder")
def _placeholder(node, ctx):
    dt, shape = node.attr["dtype"], node.attr["shape"]

    def must_feed():
        raise errors.InvalidArgumentError(
            None, node, f"You must feed a value for placeholder tensor '{node.name}' with dtype "
            f"{dt.name}" + (f" and shape {shape.as_list()}" if shape.ndims is not None else "")
        )

    return must_feed


def _identity(x):
    return x


def _read_ref(ref):
    return ref.read()


_read_ref.accepts_refs = True


@kernel("Identity", routes_only=True)
def _identity_k(node, ctx):
    return _read_ref if node.input_types[0].is_ref_dtype else _identity


register_kernel("PlaceholderWithDefault", fn=_identity, routes_only=True)
register_kernel("StopGradient", fn=_identity, routes_only=True)


def _no_op():
    return None


register_kernel("NoOp", fn=_no_op, routes_only=True)


# --- shapes -----------------------------------------------------------------------------------
# Shape, ShapeN, Size and Rank answer in host memory on every device (TF's HostMemory outputs
# on GPUs): their consumers (Reshape's shape, Slice's begin...) read them on the host, and a
# GPU kernel that needs one in device memory gets it copied there (``GPUDevice.bind_kernel``).
@kernel("Shape", host_memory_outputs=(0,))
def _shape(node, ctx):
    dt = node.attr["out_type"]._np
    return lambda x: np.array(x.shape, dtype=dt)


def _every_output(node_def) -> range:
    return range(len(node_def.output_types))


@kernel("ShapeN", host_memory_outputs=_every_output)
def _shape_n(node, ctx):
    dt = node.attr["out_type"]._np
    return lambda *xs: outputs(np.array(x.shape, dtype=dt) for x in xs)


@kernel("Size", host_memory_outputs=(0,))
def _size(node, ctx):
    dt = node.attr["out_type"]._np
    return lambda x: np.array(x.size, dtype=dt)


def _rank(x):
    return np.array(np.ndim(x), dtype=np.int32)


register_kernel("Rank", fn=_rank, host_memory_outputs=(0,))


@kernel("Reshape", host_memory_inputs=(1,))
def _reshape(node, ctx):
    xp = ctx.xp

    def reshape(x, shape):
        target = host_ints(shape)
        try:
            return x.reshape(target)  # NumPy's rules are TF's; a refusal is explained below
        except (AttributeError, ValueError, TypeError):
            pass
        x, target = xp.asarray(x), list(target)
        if target.count(-1) > 1:
            raise _bad(node, f"only one input size may be -1, not both: {target}")
        if any(d < -1 for d in target):
            raise _bad(node, f"Size of a reshape target dimension must be >= -1, got {target}")
        known = math.prod(d for d in target if d != -1)
        if -1 in target:
            if known == 0 or x.size % known:
                raise _bad(node, f"Input to reshape is a tensor with {x.size} values, but the "
                               f"requested shape requires a multiple of {known}")
        elif known != x.size:
            raise _bad(node, f"Input to reshape is a tensor with {x.size} values, but the "
                           f"requested shape has {known}")
        return x.reshape(target)

    return reshape


@kernel("ExpandDims", host_memory_inputs=(1,))
def _expand_dims(node, ctx):
    xp = ctx.xp

    def expand_dims(x, dim):
        x = xp.asarray(x)
        a = _ints(dim)[0]
        if not -x.ndim - 1 <= a <= x.ndim:
            raise _bad(node, f"Tried to expand dim index {a} for tensor with {x.ndim} dimensions.")
        if a < 0:
            a += x.ndim + 1
        return x.reshape(x.shape[:a] + (1,) + x.shape[a:])  # a view (``expand_dims``'s)

    return expand_dims


@kernel("Squeeze")
def _squeeze(node, ctx):
    axes = node.attr["squeeze_dims"]
    xp = ctx.xp

    def squeeze(x):  # by reshapes: views, as ``xp.squeeze``'s, for a third of its cost
        x = xp.asarray(x)
        if not axes:
            return x.reshape(tuple(d for d in x.shape if d != 1))
        ndim = x.ndim
        norm = set()
        for a in axes:
            if not -ndim <= a < ndim:
                raise _bad(node, f"Expected axis in the range [{-ndim}, {ndim}), but got {a}")
            a %= ndim
            if x.shape[a] != 1:
                raise _bad(node, f"Can not squeeze dim[{a}], expected a dimension of 1, got "
                               f"{x.shape[a]}")
            norm.add(a)
        return x.reshape(tuple(d for i, d in enumerate(x.shape) if i not in norm))

    return squeeze


# --- filling ----------------------------------------------------------------------------------
@functools.cache  # (two system calls: a small fill's cost again)
def _physical_memory() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _check_allocation(node, dims, np_dtype) -> None:
    """Refuse a tensor larger than the machine's memory up front: with memory overcommit the
    allocation itself may succeed and the process be killed while filling it."""
    nbytes = math.prod(dims) * np.dtype(np_dtype).itemsize
    limit = _physical_memory()
    if limit is not None and nbytes > limit:
        raise errors.ResourceExhaustedError(
            None, node, f"OOM when allocating tensor with shape{list(dims)} and type "
            f"{np.dtype(np_dtype).name}: {nbytes} bytes, more than the {limit} bytes of memory")


# ``xp.zeros(x.shape, x.dtype)``: ``zeros_like``'s array without its Python layers (which cost
# a small eager op half its time); a fresh C-ordered array either way.
register_kernel("ZerosLike", xp=lambda xp, x: xp.zeros(x.shape, x.dtype))
register_kernel("OnesLike", xp=lambda xp, x: xp.ones(x.shape, x.dtype))


@kernel("Fill", host_memory_inputs=(0,))
def _fill(node, ctx):
    xp = ctx.xp
    dt = node.output_types[0]._np

    def fill(dims, value):
        dims = host_ints(dims)
        if dims and min(dims) < 0:
            raise _bad(node, f"dims must be non-negative, got {list(dims)}")
        _check_allocation(node, dims, dt)
        return xp.full(dims, value, dtype=dt)

    return fill


# --- stacking, transposing, concatenating, splitting ------------------------------------------
@kernel("Pack")
def _pack(node, ctx):
    axis = node.attr["axis"]
    xp = ctx.xp

    def pack(*xs):  # each input given its new axis by a reshape (a view), then joined:
        if xp is not np:  # ``xp.stack``'s work without its Python layers
            xs = [xp.asarray(x) for x in xs]  # (a host scalar among them: on the device)
        shape = xs[0].shape
        for x in xs:
            if x.shape != shape:
                raise _bad(node, f"Shapes of all inputs must match: "
                               f"{sorted({tuple(x.shape) for x in xs})}")
        a = axis + len(shape) + 1 if axis < 0 else axis
        if not 0 <= a <= len(shape):
            raise _bad(node, f"axis = {axis} not in [{-len(shape) - 1}, {len(shape) + 1})")
        parts = [x.reshape(shape[:a] + (1,) + shape[a:]) for x in xs]
        if not _capturing(xp):
            return xp.concatenate(parts, axis=a)
        return _join_on_device(xp, parts, a)

    return pack


def _capturing(xp) -> bool:
    """Whether this kernel runs inside a CUDA stream capture (a GPU's step being recorded)."""
    return xp is not np and xp.cuda.get_current_stream().is_capturing()


def _join_on_device(xp, xs, axis):
    """``xs`` concatenated along ``axis`` by one copy per input into the result, for a step
    being captured: CuPy's own concatenation of many inputs copies a table of their addresses
    from host memory, which a capturing stream refuses."""
    shape = list(xs[0].shape)
    shape[axis] = sum(x.shape[axis] for x in xs)
    out = xp.empty(shape, xs[0].dtype)
    lead, start = (slice(None),) * axis, 0
    for x in xs:
        out[lead + (slice(start, start + x.shape[axis]),)] = x
        start += x.shape[axis]
    return out


@kernel("Unpack")
def _unpack(node, ctx):
    axis, num = node.attr["axis"], node.attr["num"]
    xp = ctx.xp

    def unpack(x):
        x = xp.asarray(x)
        if x.shape[axis] != num:
            raise _bad(node, f"Input has {x.shape[axis]} slices along axis {axis}, expected {num}")
        return outputs(x if axis in (0, -x.ndim) else xp.moveaxis(x, axis, 0))  # (rows: views)

    return unpack


def _check_perm(node, perm, ndim):
    if len(perm) != ndim:
        raise _bad(node, f"transpose expects a vector of size {ndim}. But input(1) is a vector "
                       f"of size {len(perm)}")
    if sorted(perm) != list(range(ndim)):
        raise _bad(node, f"{perm} is not a valid permutation of {ndim} dimensions")


@kernel("Transpose", host_memory_inputs=(1,))
def _transpose(node, ctx):
    xp = ctx.xp

    def transpose(x, perm):
        x = xp.asarray(x)
        perm = _ints(perm)
        _check_perm(node, perm, x.ndim)
        return xp.transpose(x, perm)

    return transpose


@kernel("ConjugateTranspose", host_memory_inputs=(1,))
def _conjugate_transpose(node, ctx):
    xp = ctx.xp

    def conjugate_transpose(x, perm):
        x = xp.asarray(x)
        perm = _ints(perm)
        _check_perm(node, perm, x.ndim)
        return xp.conj(xp.transpose(x, perm))

    return conjugate_transpose


@kernel("InvertPermutation")
def _invert_permutation(node, ctx):
    xp = ctx.xp

    def invert_permutation(p):
        p = xp.asarray(p)
        if p.ndim != 1 or not bool(xp.array_equal(xp.sort(p), xp.arange(p.size))):
            raise _bad(node, f"{p.tolist()} is not a permutation of 0..{p.size - 1}")
        inv = xp.empty_like(p)
        inv[p] = xp.arange(p.size, dtype=p.dtype)
        return inv

    return invert_permutation


@kernel("ConcatV2", host_memory_inputs=(-1,))
def _concat(node, ctx):
    xp = ctx.xp

    def concat(*args):
        xs = [xp.asarray(x) for x in args[:-1]]
        ndim = xs[0].ndim
        if ndim == 0:
            raise _bad(node, "Can't concatenate scalars (use tf.stack instead)")
        a = _axis(node, args[-1], ndim, "concat axis")
        for k, x in enumerate(xs[1:], 1):
            if x.ndim != ndim or x.shape[:a] + x.shape[a + 1:] != \
                    xs[0].shape[:a] + xs[0].shape[a + 1:]:
                raise _bad(node, f"ConcatOp : Dimensions of inputs should match: shape[0] = "
                               f"{list(xs[0].shape)} vs. shape[{k}] = {list(x.shape)}")
        if not _capturing(xp) or len(xs) == 1:
            return xp.concatenate(xs, axis=a)
        return _join_on_device(xp, xs, a)

    return concat


@kernel("Split", host_memory_inputs=(0,))
def _split(node, ctx):
    n = node.attr["num_split"]
    xp = ctx.xp

    def split(axis, x):
        x = xp.asarray(x)
        a = _axis(node, axis, x.ndim, "split axis")
        if x.shape[a] % n:
            raise _bad(node, f"Number of ways to split should evenly divide the split dimension, "
                           f"but got split_dim {a} (size = {x.shape[a]}) and num_split {n}")
        return _pieces(x, a, range(0, x.shape[a], x.shape[a] // n) if x.shape[a] else [0] * n,
                       x.shape[a] // n)

    return split


def _pieces(x, axis, starts, size):
    """Views of ``x``'s ``size``-long pieces from each of ``starts`` along ``axis``: basic
    slices, as ``np.split`` makes them, without its Python layers (a small split: 8 us)."""
    index = [slice(None)] * x.ndim
    out = []
    for s in starts:
        index[axis] = slice(s, s + size)
        out.append(x[tuple(index)])
    return outputs(out)


@kernel("SplitV", host_memory_inputs=(1, 2))
def _split_v(node, ctx):
    n = node.attr["num_split"]
    xp = ctx.xp

    def split_v(x, size_splits, axis):
        x = xp.asarray(x)
        a = _axis(node, axis, x.ndim, "split axis")
        sizes = _ints(size_splits)
        d = x.shape[a]
        if len(sizes) != n or sizes.count(-1) > 1 or any(s < -1 for s in sizes):
            raise _bad(node, f"invalid size_splits {sizes} for {n} outputs")
        if -1 in sizes:
            rest = d - sum(s for s in sizes if s != -1)
            sizes = [rest if s == -1 else s for s in sizes]
        if sum(sizes) != d or any(s < 0 for s in sizes):
            raise _bad(node, f"Determined shape must either match input shape along split_dim "
                           f"exactly if fully specified, or be less than the size of the input "
                           f"along split_dim if not fully specified.  Got: {sum(sizes)} vs. {d}")
        return outputs(xp.split(x, np.cumsum(sizes)[:-1].tolist(), axis=a))

    return split_v


# --- slicing ----------------------------------------------------------------------------------
@kernel("Slice", host_memory_inputs=(1, 2))
def _slice(node, ctx):
    xp = ctx.xp

    def slice_(x, begin, size):
        x = xp.asarray(x)
        begin, size = _ints(begin), _ints(size)
        if len(begin) != x.ndim or len(size) != x.ndim:
            raise _bad(node, f"Expected begin and size arguments to be 1-D tensors of size "
                           f"{x.ndim}, but got shapes {len(begin)} and {len(size)} instead.")
        index = []
        for i, (d, b, s) in enumerate(zip(x.shape, begin, size)):
            if s == -1:
                s = d - b
            if not 0 <= b <= d:
                raise _bad(node, f"Expected begin[{i}] in [0, {d}], but got {b}")
            if not 0 <= s <= d - b:
                raise _bad(node, f"Expected size[{i}] in [0, {d - b}], but got {s}")
            index.append(slice(b, b + s))
        return x[tuple(index)]

    return slice_


def _numpy_index(node, shape, begin, end, strides):
    """The NumPy basic index that a StridedSlice's vectors and masks describe."""
    try:
        items = strided_slice_spec(node.attr, _ints(begin), _ints(end), _ints(strides))
    except ValueError as e:
        raise _bad(node, str(e)) from None
    ndim = len(shape)
    n_ellipsis = ndim - sum(1 for it in items if it[0] in ("index", "slice"))
    if n_ellipsis < 0:
        raise _bad(node, f"Index out of range using input dim {ndim}; input has only {ndim} dims")
    index, k = [], 0
    for it in items:
        if it[0] == "ellipsis":
            index.append(Ellipsis)
            k += n_ellipsis
        elif it[0] == "newaxis":
            index.append(None)
        elif it[0] == "index":
            b, d = it[1], shape[k]
            if not -d <= b < d:
                raise _bad(node, f"slice index {b} of dimension {k} out of bounds.")
            index.append(b)
            k += 1
        else:
            index.append(slice(it[1], it[2], it[3]))
            k += 1
    return tuple(index)


@kernel("StridedSlice", host_memory_inputs=(1, 2, 3))
def _strided_slice(node, ctx):
    xp = ctx.xp
    # The NumPy index of each (vectors, shape) met: most slices are one constant's, and
    # working the index out costs a small slice several times the slicing.
    known: dict = {}

    def strided_slice(x, begin, end, strides):
        x = xp.asarray(x)
        key = (host_ints(begin), host_ints(end), host_ints(strides), x.shape)
        index = known.get(key)
        if index is None:
            index = _numpy_index(node, x.shape, begin, end, strides)
            if len(known) < 256:
                known[key] = index
        return x[index]

    return strided_slice


@kernel("StridedSliceGrad", host_memory_inputs=(0, 1, 2, 3))
def _strided_slice_grad(node, ctx):
    xp = ctx.xp

    def strided_slice_grad(shape, begin, end, strides, dy):
        shape = tuple(_ints(shape))
        dy = xp.asarray(dy)
        index = _numpy_index(node, shape, begin, end, strides)
        out = xp.zeros(shape, dtype=dy.dtype)
        if out[index].shape != dy.shape:
            raise _bad(node, f"dy has shape {list(dy.shape)}, but the slice of a tensor of shape "
                           f"{list(shape)} has shape {list(out[index].shape)}")
        out[index] = dy  # `out` is this kernel's own fresh array
        return out

    return strided_slice_grad


# --- gathering and scattering -----------------------------------------------------------------
@kernel("GatherV2", host_memory_inputs=(2,))
def _gather(node, ctx):
    xp = ctx.xp

    def gather(params, indices, axis):
        params, idx = xp.asarray(params), xp.asarray(indices)
        if params.ndim == 0:
            raise _bad(node, "params must be at least 1 dimensional")
        a = _axis(node, axis, params.ndim)
        _check_indices(node, idx, params.shape[a])
        return xp.take(params, idx, axis=a)

    return gather


def _check_nd_indices(xp, node, idx, shape):
    k = idx.shape[-1]
    bad = ((idx < 0) | (idx >= xp.asarray(shape[:k], dtype=np.int64))).any(axis=-1)
    if bad.any():
        pos = _first_true(bad)
        raise _bad(node, f"indices[{','.join(map(str, pos))}] = {idx[pos].tolist()} does not "
                       f"index into param shape {list(shape)}")


@kernel("GatherNd")
def _gather_nd(node, ctx):
    xp = ctx.xp

    def gather_nd(params, indices):
        params, idx = xp.asarray(params), xp.asarray(indices)
        if idx.ndim == 0:
            raise _bad(node, "indices must be at least a vector")
        k = idx.shape[-1]
        if k > params.ndim:
            raise _bad(node, f"index innermost dimension length must be <= params rank; saw: "
                           f"{k} vs. {params.ndim}")
        if k == 0:  # every index picks the whole of params
            return xp.array(xp.broadcast_to(params, idx.shape[:-1] + params.shape))
        _check_nd_indices(xp, node, idx, params.shape)
        return params[tuple(xp.moveaxis(idx, -1, 0))]

    return gather_nd


@kernel("ScatterNd", host_memory_inputs=(2,))
def _scatter_nd(node, ctx):
    xp = ctx.xp

    def scatter_nd(indices, updates, shape):
        idx, updates = xp.asarray(indices), xp.asarray(updates)
        shape = tuple(_ints(shape))
        if any(d < 0 for d in shape):
            raise _bad(node, f"shape must be non-negative, got {list(shape)}")
        if idx.ndim == 0:
            raise _bad(node, "indices must be at least a vector")
        k = idx.shape[-1]
        if k > len(shape):
            raise _bad(node, f"The inner {k} dimensions of indices exceed the rank {len(shape)} "
                           f"of shape")
        want = idx.shape[:-1] + shape[k:]
        if updates.shape != want:
            raise _bad(node, f"updates has shape {list(updates.shape)}, expected {list(want)}")
        _check_nd_indices(xp, node, idx, shape)
        out = xp.zeros(shape, dtype=updates.dtype)
        if k == 0:
            out += updates.reshape((-1,) + shape).sum(axis=0, dtype=updates.dtype)
        else:
            xp.add.at(out, tuple(xp.moveaxis(idx, -1, 0)), updates)  # repeats are summed
        return out

    return scatter_nd


# --- tiling, broadcasting, reversing, padding -------------------------------------------------
@kernel("Tile", host_memory_inputs=(1,))
def _tile(node, ctx):
    xp = ctx.xp

    def tile(x, multiples):
        x = xp.asarray(x)
        m = _ints(multiples)
        if len(m) != x.ndim:
            raise _bad(node, f"Expected multiples argument to be a vector of length {x.ndim} but "
                           f"got length {len(m)}")
        if any(v < 0 for v in m):
            raise _bad(node, f"Expected multiples to be non-negative, got {m}")
        return xp.tile(x, m) if x.ndim else x.copy()

    return tile


@kernel("BroadcastTo", host_memory_inputs=(1,))
def _broadcast_to(node, ctx):
    xp = ctx.xp

    def broadcast_to(x, shape):
        target = tuple(_ints(shape))
        try:
            view = xp.broadcast_to(x, target)
        except ValueError:
            raise _bad(node, f"Incompatible shapes: {list(np.shape(x))} vs. "
                           f"{list(target)}") from None
        # A copy: a zero-stride view would surprise whoever fetches the result.
        out = xp.empty(target, view.dtype)
        xp.copyto(out, view)
        return out

    return broadcast_to


@kernel("ReverseV2", host_memory_inputs=(1,))
def _reverse(node, ctx):
    xp = ctx.xp

    def reverse(x, axis):
        x = xp.asarray(x)
        axes = [_axis(node, a, x.ndim) for a in _ints(axis)]
        if len(set(axes)) != len(axes):
            raise _bad(node, f"axis {_ints(axis)} specifies the same dimension more than once")
        return xp.flip(x, axis=tuple(axes)) if axes else x

    return reverse


def _paddings(node, x, paddings, limit_offset=None):
    shape = np.shape(paddings)
    if shape != (x.ndim, 2):
        raise _bad(node, f"paddings must be a matrix with 2 columns and {x.ndim} rows: "
                       f"{list(shape)}")
    flat = host_ints(paddings)
    pairs = list(zip(flat[::2], flat[1::2]))
    if flat and min(flat) < 0:
        raise _bad(node, f"Paddings must be non-negative: {[list(p) for p in pairs]}")
    if limit_offset is not None:
        for i, (a, b) in enumerate(pairs):
            limit = x.shape[i] - limit_offset
            if a > limit or b > limit:
                raise _bad(node, f"paddings must be no greater than the dimension size: {a}, {b} "
                               f"greater than {limit} for dimension {i}")
    return pairs


def _pad_constant(xp, x, pairs, value):
    """``x`` padded with ``value``: a filled array with ``x`` written into its middle, for
    arrays of numbers (``np.pad``'s Python layers cost a small pad 20 us); strings through
    ``xp.pad``."""
    if x.dtype.kind not in "biufc":
        return xp.pad(x, pairs, mode="constant", constant_values=value)
    shape = tuple(d + a + b for d, (a, b) in zip(x.shape, pairs))
    out = xp.zeros(shape, x.dtype) if value == 0 else xp.full(shape, value, x.dtype)
    out[tuple(slice(a, a + d) for d, (a, _) in zip(x.shape, pairs))] = x
    return out


@kernel("Pad", host_memory_inputs=(1,))
def _pad(node, ctx):
    xp = ctx.xp

    def pad(x, paddings):
        x = xp.asarray(x)
        return _pad_constant(xp, x, _paddings(node, x, paddings), 0)

    return pad


@kernel("PadV2", host_memory_inputs=(1,))
def _pad_v2(node, ctx):
    xp = ctx.xp

    def pad_v2(x, paddings, constant_values):
        x = xp.asarray(x)
        return _pad_constant(xp, x, _paddings(node, x, paddings), constant_values.item())

    return pad_v2


_MIRROR_OFFSET = {"REFLECT": 1, "SYMMETRIC": 0}  # REFLECT does not repeat the edge element


@kernel("MirrorPad", host_memory_inputs=(1,))
def _mirror_pad(node, ctx):
    mode = node.attr["mode"]
    offset = _MIRROR_OFFSET[mode]
    xp = ctx.xp

    def mirror_pad(x, paddings):
        x = xp.asarray(x)
        return xp.pad(x, _paddings(node, x, paddings, offset), mode=mode.lower())

    return mirror_pad


def _mirror_sources(n, before, after, offset):
    """For each position of a mirror-padded axis, the input position it copies."""
    j = np.arange(before + n + after) - before
    src = np.where(j < 0, -j - 1 + offset, j)
    return np.where(j >= n, 2 * n - j - 1 - offset, src)


@kernel("MirrorPadGrad", host_memory_inputs=(1,))
def _mirror_pad_grad(node, ctx):
    offset = _MIRROR_OFFSET[node.attr["mode"]]
    xp = ctx.xp

    def mirror_pad_grad(grad, paddings):
        out = xp.asarray(grad)
        p = host(paddings)
        if p.shape != (out.ndim, 2) or (p < 0).any():
            raise _bad(node, f"invalid paddings {p.tolist()} for a gradient of rank {out.ndim}")
        for ax, (a, b) in enumerate(p.tolist()):
            if a == 0 and b == 0:
                continue
            n = out.shape[ax] - a - b
            if n < 0 or max(a, b) > n - offset:
                raise _bad(node, f"paddings {a}, {b} too large for dimension {ax} of size {n}")
            moved = xp.moveaxis(out, ax, 0)
            acc = xp.zeros((n,) + moved.shape[1:], dtype=moved.dtype)
            # Fold the mirrored parts (the positions are small host data).
            xp.add.at(acc, xp.asarray(_mirror_sources(n, a, b, offset)), moved)
            out = xp.moveaxis(acc, 0, ax)
        return out

    return mirror_pad_grad


# --- one-hot, selection, masks ----------------------------------------------------------------
@kernel("OneHot", host_memory_inputs=(1,))
def _one_hot(node, ctx):
    axis = node.attr["axis"]
    dt = node.output_types[0]._np
    xp = ctx.xp

    def one_hot(indices, depth, on_value, off_value):
        idx = xp.asarray(indices)
        depth = _ints(depth)[0]
        if depth < 0:
            raise _bad(node, f"depth must be non-negative, got: {depth}")
        hot = idx[..., None] == xp.arange(depth)
        out = xp.where(hot, xp.asarray(on_value, dtype=dt), xp.asarray(off_value, dtype=dt))
        return out if axis == -1 else xp.moveaxis(out, -1, axis)

    return one_hot


@kernel("Select")
def _select(node, ctx):
    xp = ctx.xp

    def select(cond, x, y):
        cond, x, y = xp.asarray(cond), xp.asarray(x), xp.asarray(y)
        if x.shape != y.shape:
            raise _bad(node, f"'then' and 'else' must have the same size.  but received: "
                           f"{list(x.shape)} vs. {list(y.shape)}")
        if cond.ndim == 0:
            return x if cond else y
        if cond.shape == x.shape:
            return xp.where(cond, x, y)
        if cond.ndim == 1 and x.ndim > 1 and cond.shape[0] == x.shape[0]:
            return xp.where(cond.reshape((-1,) + (1,) * (x.ndim - 1)), x, y)
        raise _bad(node, f"condition must be a scalar, a vector of size x.shape[0], or have the "
                       f"shape of x: {list(cond.shape)} vs. {list(x.shape)}")

    return select


@kernel("SelectV2")
def _select_v2(node, ctx):
    xp = ctx.xp

    def select_v2(cond, x, y):
        try:
            return xp.where(cond, x, y)
        except ValueError:
            raise _bad(node, f"condition, x and y must be broadcastable: {list(np.shape(cond))}, "
                           f"{list(np.shape(x))}, {list(np.shape(y))}") from None

    return select_v2


def _where(xp, x):
    return xp.argwhere(x).astype(np.int64)


register_kernel("Where", xp=_where)


@kernel("SequenceMask", host_memory_inputs=(1,))
def _sequence_mask(node, ctx):
    dt = node.attr["dtype"]._np
    xp = ctx.xp

    def sequence_mask(lengths, maxlen=None):
        lengths = xp.asarray(lengths)
        if maxlen is None:
            m = int(lengths.max()) if lengths.size else 0
        else:
            m = _ints(maxlen)[0]
        if m < 0:
            raise _bad(node, f"maxlen must be non-negative, got {m}")
        return (xp.arange(m) < lengths[..., None]).astype(dt)

    return sequence_mask


@kernel("DynamicPartition")
def _dynamic_partition(node, ctx):
    n = node.attr["num_partitions"]
    xp = ctx.xp

    def dynamic_partition(data, partitions):
        data, parts = xp.asarray(data), xp.asarray(partitions)
        if data.shape[:parts.ndim] != parts.shape:
            raise _bad(node, f"partitions.shape {list(parts.shape)} must be a prefix of "
                             f"data.shape {list(data.shape)}")
        bad = (parts < 0) | (parts >= n)
        if bad.any():
            raise _bad(node, f"partitions has a value outside [0, {n}): "
                             f"{int(parts[bad].ravel()[0])}")
        flat = parts.reshape(-1)
        rows = data.reshape((flat.size,) + data.shape[parts.ndim:])
        return outputs(rows[flat == k] for k in range(n))

    return dynamic_partition


@kernel("DynamicStitch")
def _dynamic_stitch(node, ctx):
    n = node.attr["N"]
    xp = ctx.xp

    def dynamic_stitch(*args):
        indices = [xp.asarray(i) for i in args[:n]]
        data = [xp.asarray(d) for d in args[n:]]
        rows = None
        for i, d in zip(indices, data):
            if d.shape[:i.ndim] != i.shape:
                raise _bad(node, f"data shape {list(d.shape)} does not start with indices "
                                 f"shape {list(i.shape)}")
            if rows is None and i.size:
                rows = d.shape[i.ndim:]
        sizes = [int(i.max()) + 1 for i in indices if i.size]
        total = max(sizes) if sizes else 0
        if rows is None:
            rows = data[0].shape[indices[0].ndim:]
        # Rows no index names stay zero (TF's kernels zero-fill them too).
        out = xp.zeros((total,) + tuple(rows), dtype=data[0].dtype)
        for i, d in zip(indices, data):
            if (i < 0).any():
                raise _bad(node, "indices must be non-negative")
            flat = i.reshape(-1)
            out[flat] = d.reshape((flat.size,) + tuple(rows))
        return out

    return dynamic_stitch


@kernel("Unique")
def _unique(node, ctx):
    idx_dt = node.attr["out_idx"]._np
    xp = ctx.xp

    def unique(x):
        x = xp.asarray(x)
        if x.size == 0:
            return x.copy(), xp.zeros(0, dtype=idx_dt)
        values, first, inverse = xp.unique(x, return_index=True, return_inverse=True)
        # TF lists values in order of first appearance, NumPy sorted: renumber.
        order = xp.argsort(first, kind="stable")
        position = xp.empty_like(order)
        position[order] = xp.arange(order.size)
        return values[order], position[inverse.ravel()].astype(idx_dt)

    return unique
