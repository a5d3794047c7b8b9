"""Array ops: placeholders, shapes and reshaping, filling, stacking, transposing, concatenating
and splitting, slicing (``Tensor.__getitem__``), gathering and scattering, tiling, padding,
selection and masking.

Each op: schema (``register_op`` with its static shape rule), gradient and public builder, side by
side, with TF 1.x names, arguments and semantics. Kernels are in ``dflab.kernels.array_kernels``.
Shape rules infer as much as the graph tells at build time: index arguments that are constants
(or ``Pack``s of partly constant scalars) give known dims, the rest stay ``None``.
"""

from __future__ import annotations

import builtins
import collections
import numbers

import numpy as np

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.constant_op import constant, constant_value, constant_value_as_shape
from dflab.framework.registry import NotDifferentiable, RegisterGradient, register_op
from dflab.framework.tensor_shape import Dimension, TensorShape, as_shape, broadcast_shapes
from dflab.ops.op_util import check_same_dtype, scalar_int, unary_infer

newaxis = None
_py_slice = builtins.slice  # ``slice`` below is TF's builder


# --- helpers --------------------------------------------------------------------------------------
def _apply(op_type, inputs, attrs=None, name=None):
    return _ops.apply_op(op_type, inputs, attrs, name).outputs[0]


def _partial_ints(t):
    """Entries of a 1-D integer tensor known at build time (None where unknown).

    Returns None when not even the length is known.
    """
    v = constant_value(t)
    if v is not None:
        return [int(e) for e in np.ravel(v)]
    if t.op.type == "Pack" and all(i.shape.ndims == 0 for i in t.op.inputs):
        return [scalar_int(i) for i in t.op.inputs]
    dims = t.shape.as_tuple()
    if dims is not None and len(dims) == 1 and dims[0] is not None:
        return [None] * dims[0]
    if dims == ():  # a scalar where a vector is allowed
        return [None]
    return None


def _check_index_dtype(t, what):
    if t.dtype.base_dtype not in (_dt.int32, _dt.int64):
        raise TypeError(f"{what} must be int32 or int64, got {t.dtype.base_dtype.name}")


def _as_int_tensor(v, dtype=_dt.int32):
    """A 1-D (or scalar) integer tensor from a tensor, TensorShape, list or array of ints.

    Lists that mix Python ints and scalar tensors are packed with ``stack``.
    """
    if isinstance(v, _ops.Tensor):
        return v
    if hasattr(v, "_as_tensor"):
        return v._as_tensor()
    if isinstance(v, TensorShape):
        v = v.as_list()
    if isinstance(v, (list, tuple)) and any(isinstance(e, _ops.Tensor) for e in v):
        return stack_ints(v)
    if isinstance(v, (list, tuple)):
        v = [int(e) if isinstance(e, Dimension) else e for e in v]
    elif isinstance(v, Dimension):
        v = int(v)
    return constant(v, dtype=dtype)


def stack_ints(values):
    """Pack a list mixing Python ints and scalar int tensors into a 1-D int tensor."""
    dtype = _dt.int32
    if any(isinstance(v, _ops.Tensor) and v.dtype.base_dtype is _dt.int64 for v in values):
        dtype = _dt.int64
    out = []
    for v in values:
        if isinstance(v, _ops.Tensor):
            if v.dtype.base_dtype is not dtype:
                from dflab.ops import math_ops

                v = math_ops.cast(v, dtype)
            out.append(v)
        else:
            out.append(constant(int(v), dtype))
    return stack(out)


def _dense(grad):
    """A dense tensor for a gradient that may be an ``IndexedSlices``."""
    from dflab.ops import gradients  # gradients imports this module

    return gradients.as_dense(grad)


def _normalize_axis(axis, rank, what="axis"):
    if not -rank <= axis < rank:
        raise ValueError(f"{what} {axis} is out of range for a tensor of rank {rank} "
                         f"(expected [-{rank}, {rank}))")
    return axis % rank


# --- Placeholder -------------------------------------------------------------------------------
def _placeholder_infer(op):
    return [(op._attrs["dtype"], op._attrs["shape"])]


register_op("Placeholder", _placeholder_infer)
NotDifferentiable("Placeholder")


def placeholder(dtype, shape=None, name=None) -> _ops.Tensor:
    """A tensor that must be fed; ``shape=None`` accepts any shape."""
    attrs = {"dtype": _dt.as_dtype(dtype).base_dtype, "shape": as_shape(shape)}
    return _ops.get_default_graph()._create_op(
        "Placeholder", [], attrs, name, site=_ops._user_site()).outputs[0]


def _pwd_infer(op):
    t = op.inputs[0]
    shape = op._attrs["shape"]
    if not shape.is_compatible_with(t.shape):
        raise ValueError(f"default value shape {t.shape} is not compatible with {shape}")
    return [(t.dtype.base_dtype, shape)]


register_op("PlaceholderWithDefault", _pwd_infer)
NotDifferentiable("PlaceholderWithDefault")


def placeholder_with_default(input, shape, name=None):  # noqa: A002 - TF's argument name
    return _apply("PlaceholderWithDefault", [input], {"shape": as_shape(shape)}, name)


# --- Identity / StopGradient -------------------------------------------------------------------
def _identity_infer(op):
    t = op.inputs[0]
    return [(t.dtype.base_dtype, t.shape)]


register_op("Identity", _identity_infer)


@RegisterGradient("Identity")
def _identity_grad(op, grad):
    return [grad]


def identity(input, name=None):  # noqa: A002
    return _apply("Identity", [input], None, name)


register_op("StopGradient", unary_infer)
NotDifferentiable("StopGradient")


def stop_gradient(input, name=None):  # noqa: A002
    return _apply("StopGradient", [input], None, name)


# --- Shape / ShapeN / Size / Rank --------------------------------------------------------------
# TF1's builders return a constant when the answer is known statically (``optimize=True``).
def _check_out_type(op):
    dt = op._attrs["out_type"]
    if dt not in (_dt.int32, _dt.int64):
        raise TypeError(f"out_type must be int32 or int64, got {dt.name}")
    return dt


def _shape_infer(op):
    rank = op.inputs[0].shape.ndims
    return [(_check_out_type(op), TensorShape([rank]))]


register_op("Shape", _shape_infer)
NotDifferentiable("Shape")


def shape(input, name=None, out_type=_dt.int32):  # noqa: A002
    """The shape of ``input`` as a 1-D integer tensor."""
    return _shape_of(input, name, out_type)


def _shape_of(x, name=None, out_type=_dt.int32, optimize=True):
    # A private alias: builders whose arguments are called ``shape`` still need this.
    x = _ops.convert_to_tensor(x)
    out_type = _dt.as_dtype(out_type)
    if optimize and x.shape.is_fully_defined():
        return constant(x.shape.as_list(), dtype=out_type, name=name or "Shape")
    return _apply("Shape", [x], {"out_type": out_type}, name)


def _shape_n_infer(op):
    dt = _check_out_type(op)
    return [(dt, TensorShape([t.shape.ndims])) for t in op.inputs]


register_op("ShapeN", _shape_n_infer)
NotDifferentiable("ShapeN")


def shape_n(input, out_type=_dt.int32, name=None):  # noqa: A002
    """The shapes of a list of tensors (one ``ShapeN`` op)."""
    tensors = [_ops.convert_to_tensor(t) for t in input]
    return _ops.apply_op("ShapeN", tensors, {"out_type": _dt.as_dtype(out_type),
                                             "N": len(tensors)}, name).outputs


def _size_infer(op):
    return [(_check_out_type(op), TensorShape([]))]


register_op("Size", _size_infer)
NotDifferentiable("Size")


def size(input, name=None, out_type=_dt.int32):  # noqa: A002
    """The number of elements of ``input`` (a scalar)."""
    x = _ops.convert_to_tensor(input)
    out_type = _dt.as_dtype(out_type)
    if x.shape.is_fully_defined():
        return constant(x.shape.num_elements(), dtype=out_type, name=name or "Size")
    return _apply("Size", [x], {"out_type": out_type}, name)


def _rank_infer(op):
    return [(_dt.int32, TensorShape([]))]


register_op("Rank", _rank_infer)
NotDifferentiable("Rank")


def rank(input, name=None):  # noqa: A002
    """The number of dimensions of ``input`` (a scalar int32)."""
    x = _ops.convert_to_tensor(input)
    if x.shape.ndims is not None:
        return constant(x.shape.ndims, dtype=_dt.int32, name=name or "Rank")
    return _apply("Rank", [x], None, name)


# --- Reshape / ExpandDims / Squeeze ------------------------------------------------------------
def _reshape_infer(op):
    x, s = op.inputs
    _check_index_dtype(s, "shape")
    if s.shape.ndims not in (None, 1):
        raise ValueError(f"shape must be a vector, got shape {s.shape}")
    target = _partial_ints(s)
    if target is None:
        return [(x.dtype.base_dtype, TensorShape(None))]
    if target.count(-1) > 1:
        raise ValueError("Cannot infer multiple unknown dimensions in reshape: "
                         f"{[('?' if d is None else d) for d in target]}")
    for d in target:
        if d is not None and d < -1:
            raise ValueError(f"Size of a reshape target dimension must be >= -1, got {d}")
    n_in = x.shape.num_elements()
    dims = [None if d in (None, -1) else d for d in target]
    known = [d for d in dims if d is not None]
    product = int(np.prod(known)) if known else 1
    unknown = len(dims) - len(known)
    if n_in is not None:
        if unknown == 0 and product != n_in:
            raise ValueError(f"Cannot reshape a tensor with {n_in} elements to shape "
                             f"{target} ({product} elements)")
        if unknown == 1 and product == 0:
            if -1 in target:
                raise ValueError("Reshape cannot infer the missing input size for an empty "
                                 f"tensor unless all specified sizes are non-zero: {target}")
        elif unknown == 1:
            if n_in % product:
                raise ValueError(f"Cannot reshape a tensor with {n_in} elements to shape "
                                 f"{target}")
            dims = [n_in // product if d is None else d for d in dims]
    elif unknown == 0 and x.shape.ndims is not None:
        # The input's known dims must divide the target's size.
        part = [d for d in x.shape.as_list() if d is not None]
        p = int(np.prod(part)) if part else 1
        if p and product % p:
            raise ValueError(f"Cannot reshape a tensor of shape {x.shape} to shape {target}")
    return [(x.dtype.base_dtype, TensorShape(dims))]


register_op("Reshape", _reshape_infer)


@RegisterGradient("Reshape")
def _reshape_grad(op, grad):
    return [reshape(_dense(grad), _shape_of(op.inputs[0])), None]


def reshape(tensor, shape, name=None):  # noqa: F811 - TF's argument name
    """``tensor`` with the same values in a new shape (one entry may be -1)."""
    return _apply("Reshape", [tensor, _as_int_tensor(shape)], None, name)


def _expand_dims_infer(op):
    x, dim = op.inputs
    _check_index_dtype(dim, "axis")
    if dim.shape.num_elements() not in (None, 1):
        raise ValueError(f"axis must be a scalar, got shape {dim.shape}")
    a = constant_value(dim)
    rank = x.shape.ndims
    if rank is None:
        return [(x.dtype.base_dtype, TensorShape(None))]
    if a is None:
        return [(x.dtype.base_dtype, TensorShape([None] * (rank + 1)))]
    a = int(np.ravel(a)[0])
    if not -rank - 1 <= a <= rank:
        raise ValueError(f"axis {a} is out of range for expanding a rank-{rank} tensor "
                         f"(expected [{-rank - 1}, {rank}])")
    if a < 0:
        a += rank + 1
    dims = x.shape.as_list()
    dims.insert(a, 1)
    return [(x.dtype.base_dtype, TensorShape(dims))]


register_op("ExpandDims", _expand_dims_infer)


@RegisterGradient("ExpandDims")
def _expand_dims_grad(op, grad):
    return [reshape(_dense(grad), _shape_of(op.inputs[0])), None]


def expand_dims(input, axis=None, name=None, dim=None):  # noqa: A002
    """Insert a dimension of size 1 at ``axis`` (TF1's legacy ``dim`` is accepted too)."""
    if dim is not None:
        if axis is not None:
            raise ValueError("Cannot specify both 'axis' and 'dim'")
        axis = dim
    if axis is None:
        raise ValueError("Must specify an axis argument to tf.expand_dims()")
    return _apply("ExpandDims", [input, _as_int_tensor(axis)], None, name)


def _squeeze_infer(op):
    x = op.inputs[0]
    axes = op._attrs["squeeze_dims"]
    dt = x.dtype.base_dtype
    rank = x.shape.ndims
    if rank is None:
        return [(dt, TensorShape(None))]
    dims = x.shape.as_list()
    if axes:
        norm = {_normalize_axis(a, rank) for a in axes}
        for a in sorted(norm):
            if dims[a] is not None and dims[a] != 1:
                raise ValueError(f"Can not squeeze dim[{a}], expected a dimension of 1, "
                                 f"got {dims[a]}")
        return [(dt, TensorShape([d for i, d in enumerate(dims) if i not in norm]))]
    if any(d is None for d in dims):
        return [(dt, TensorShape(None))]  # which dims go depends on run-time sizes
    return [(dt, TensorShape([d for d in dims if d != 1]))]


register_op("Squeeze", _squeeze_infer)


@RegisterGradient("Squeeze")
def _squeeze_grad(op, grad):
    return [reshape(_dense(grad), _shape_of(op.inputs[0]))]


def squeeze(input, axis=None, name=None, squeeze_dims=None):  # noqa: A002
    """Remove dimensions of size 1 (all of them, or those listed in ``axis``)."""
    if squeeze_dims is not None:
        if axis is not None:
            raise ValueError("Cannot specify both 'squeeze_dims' and 'axis'")
        axis = squeeze_dims
    if axis is None:
        axis = []
    elif isinstance(axis, numbers.Integral):
        axis = [axis]
    return _apply("Squeeze", [input], {"squeeze_dims": [int(a) for a in axis]}, name)


# --- Pack / Unpack (stack / unstack) ------------------------------------------------------------
def _pack_infer(op):
    dt = check_same_dtype(op)
    n = len(op.inputs)
    shape = TensorShape(None)
    for t in op.inputs:
        try:
            shape = shape.merge_with(t.shape)
        except ValueError:
            raise ValueError(f"Shapes of all inputs must match: {op.inputs[0].shape} != "
                             f"{t.shape}") from None
    axis = op._attrs["axis"]
    if shape.ndims is None:
        return [(dt, TensorShape(None))]
    rank = shape.ndims + 1
    if not -rank <= axis < rank:
        raise ValueError(f"axis {axis} out of range for stacking rank-{rank - 1} tensors")
    dims = shape.as_list()
    dims.insert(axis % rank, n)
    return [(dt, TensorShape(dims))]


register_op("Pack", _pack_infer)


@RegisterGradient("Pack")
def _pack_grad(op, grad):
    return unstack(_dense(grad), num=len(op.inputs), axis=op._attrs["axis"])


def stack(values, axis=0, name="stack"):
    """Stack rank-R tensors into one rank-(R+1) tensor along a new ``axis``."""
    values = list(values)
    if not values:
        raise ValueError("stack needs at least one value")
    return _apply("Pack", values, {"axis": int(axis), "N": len(values)}, name)


def _unpack_infer(op):
    x = op.inputs[0]
    axis, num = op._attrs["axis"], op._attrs["num"]
    if x.shape.ndims is None:
        return [(x.dtype.base_dtype, TensorShape(None))] * num
    dims = x.shape.as_list()
    a = _normalize_axis(axis, len(dims))
    if dims[a] is not None and dims[a] != num:
        raise ValueError(f"cannot unstack {dims[a]} slices into {num} outputs")
    del dims[a]
    return [(x.dtype.base_dtype, TensorShape(dims))] * num


register_op("Unpack", _unpack_infer)


@RegisterGradient("Unpack")
def _unpack_grad(op, *grads):
    grads = [_dense(g) if g is not None else zeros_like(t) for g, t in zip(grads, op.outputs)]
    return [stack(grads, axis=op._attrs["axis"])]


def unstack(value, num=None, axis=0, name="unstack"):
    """Split ``value`` along ``axis`` into a list of ``num`` tensors of one rank lower."""
    value = _ops.convert_to_tensor(value)
    if num is None:
        if value.shape.ndims is None:
            raise ValueError(f"Cannot infer num from shape {value.shape}")
        num = value.shape.as_list()[_normalize_axis(axis, value.shape.ndims)]
        if num is None:
            raise ValueError(f"Cannot infer num from shape {value.shape}")
    return _ops.apply_op("Unpack", [value], {"axis": int(axis), "num": int(num)}, name).outputs


# --- ZerosLike / OnesLike / Fill ---------------------------------------------------------------
register_op("ZerosLike", unary_infer)
register_op("OnesLike", unary_infer)
NotDifferentiable("ZerosLike")
NotDifferentiable("OnesLike")


def zeros_like(tensor, dtype=None, name=None, optimize=True):
    t = _ops.convert_to_tensor(tensor)
    if dtype is not None and _dt.as_dtype(dtype) is not t.dtype.base_dtype:
        from dflab.ops import math_ops

        return math_ops.cast(_apply("ZerosLike", [t], None, name), dtype)
    return _apply("ZerosLike", [t], None, name)


def ones_like(tensor, dtype=None, name=None, optimize=True):
    t = _ops.convert_to_tensor(tensor)
    if dtype is not None and _dt.as_dtype(dtype) is not t.dtype.base_dtype:
        from dflab.ops import math_ops

        return math_ops.cast(_apply("OnesLike", [t], None, name), dtype)
    return _apply("OnesLike", [t], None, name)


def _fill_infer(op):
    dims, value = op.inputs
    _check_index_dtype(dims, "dims")
    if value.shape.ndims not in (None, 0):
        raise ValueError(f"value must be a scalar, got shape {value.shape}")
    return [(value.dtype.base_dtype, constant_value_as_shape(dims))]


register_op("Fill", _fill_infer)


@RegisterGradient("Fill")
def _fill_grad(op, grad):
    from dflab.ops import math_ops

    return [None, math_ops.reduce_sum(_dense(grad))]


def fill(dims, value, name=None):
    """A tensor of shape ``dims`` filled with the scalar ``value``."""
    return _apply("Fill", [_as_int_tensor(dims), value], None, name)


def _has_tensor(shape):
    return isinstance(shape, _ops.Tensor) or (isinstance(shape, (list, tuple)) and any(
        isinstance(e, _ops.Tensor) for e in shape))


def zeros(shape, dtype=_dt.float32, name=None):
    dtype = _dt.as_dtype(dtype)
    if _has_tensor(shape):
        with _ops.name_scope(name, "zeros") as scope:
            return fill(shape, constant(0, dtype=dtype), name=scope)
    return constant(np.zeros(as_shape(shape).as_list(), dtype=dtype._np), dtype=dtype,
                    name=name or "zeros")


def ones(shape, dtype=_dt.float32, name=None):
    dtype = _dt.as_dtype(dtype)
    if _has_tensor(shape):
        with _ops.name_scope(name, "ones") as scope:
            return fill(shape, constant(1, dtype=dtype), name=scope)
    return constant(np.ones(as_shape(shape).as_list(), dtype=dtype._np), dtype=dtype,
                    name=name or "ones")


# --- Transpose / InvertPermutation ---------------------------------------------------------------
def _check_perm(perm, rank):
    if sorted(perm) != list(range(rank)):
        raise ValueError(f"{perm} is not a valid permutation of {rank} dimensions")


def _transpose_infer(op):
    x, perm = op.inputs
    _check_index_dtype(perm, "perm")
    p = _partial_ints(perm)
    rank = x.shape.ndims
    dt = x.dtype.base_dtype
    if p is None:
        return [(dt, TensorShape(None if rank is None else [None] * rank))]
    if rank is not None and len(p) != rank:
        raise ValueError(f"transpose expects a vector of size {rank}, but perm has {len(p)} "
                         "entries")
    if rank is None:
        return [(dt, TensorShape([None] * len(p)))]
    if None not in p:
        _check_perm(p, rank)
    dims = x.shape.as_list()
    return [(dt, TensorShape([None if i is None else dims[i] for i in p]))]


register_op("Transpose", _transpose_infer)
register_op("ConjugateTranspose", _transpose_infer)


def _inverse_perm(perm):
    p = constant_value(perm)
    if p is not None:
        return constant(np.argsort(np.ravel(p)).astype(p.dtype), dtype=perm.dtype.base_dtype)
    return invert_permutation(perm)


@RegisterGradient("Transpose")
def _transpose_grad(op, grad):
    return [transpose(_dense(grad), _inverse_perm(op.inputs[1])), None]


@RegisterGradient("ConjugateTranspose")
def _conjugate_transpose_grad(op, grad):
    return [transpose(_dense(grad), _inverse_perm(op.inputs[1]), conjugate=True), None]


def transpose(a, perm=None, name="transpose", conjugate=False):
    """Permute the dimensions of ``a`` (default: reverse them); ``conjugate`` also conjugates
    complex values."""
    a = _ops.convert_to_tensor(a)
    if perm is None:
        rank_a = a.shape.ndims
        if rank_a is not None:
            perm = list(range(rank_a - 1, -1, -1))
        else:
            perm = reverse(_range(0, rank(a)), [0])
    op_type = "ConjugateTranspose" if conjugate and a.dtype.is_complex else "Transpose"
    return _apply(op_type, [a, _as_int_tensor(perm)], None, name)


def _range(start, limit):
    """``start..limit-1`` as an int32 tensor (for ranks known only at run time)."""
    return _apply("Range", [_as_int_tensor(start), _as_int_tensor(limit),
                            constant(1, _dt.int32)])


def matrix_transpose(a, name="matrix_transpose", conjugate=False):
    """Transpose the last two dimensions of ``a``."""
    a = _ops.convert_to_tensor(a)
    rank_a = a.shape.ndims
    if rank_a is None:
        raise ValueError("matrix_transpose needs a tensor of known rank")
    if rank_a < 2:
        raise ValueError(f"Argument 'a' should be a (batch) matrix, with rank >= 2. Found: "
                         f"{a.shape}")
    perm = list(range(rank_a - 2)) + [rank_a - 1, rank_a - 2]
    return transpose(a, perm, name=name, conjugate=conjugate)


def _invert_permutation_infer(op):
    x = op.inputs[0]
    _check_index_dtype(x, "x")
    return [(x.dtype.base_dtype, x.shape.with_rank(1))]


register_op("InvertPermutation", _invert_permutation_infer)
NotDifferentiable("InvertPermutation")


def invert_permutation(x, name=None):
    """``y`` with ``y[x[i]] = i``."""
    return _apply("InvertPermutation", [_as_int_tensor(x)], None, name)


# --- ConcatV2 / Split / SplitV -------------------------------------------------------------------
def _concat_infer(op):
    values, axis_t = op.inputs[:-1], op.inputs[-1]
    _check_index_dtype(axis_t, "axis")
    dt = values[0].dtype.base_dtype
    for t in values[1:]:
        if t.dtype.base_dtype is not dt:
            raise TypeError(f"Tensors in list passed to 'values' of 'ConcatV2' Op have types "
                            f"[{', '.join(v.dtype.base_dtype.name for v in values)}] that don't "
                            "all match.")
    ranks = {t.shape.ndims for t in values} - {None}
    if len(ranks) > 1:
        raise ValueError("Shape must have the same rank for all inputs to concat: "
                         f"{[str(t.shape) for t in values]}")
    if not ranks:
        return [(dt, TensorShape(None))]
    rank = ranks.pop()
    if rank == 0:
        raise ValueError("Can't concatenate scalars (use tf.stack instead)")
    a = scalar_int(axis_t)
    if a is None:
        return [(dt, TensorShape([None] * rank))]
    a = _normalize_axis(a, rank, "concat axis")
    out = [None] * rank
    total = 0
    for t in values:
        if t.shape.ndims is None:
            total = None
            continue
        dims = t.shape.as_list()
        for i, d in enumerate(dims):
            if i == a:
                continue
            if out[i] is not None and d is not None and out[i] != d:
                raise ValueError(f"Dimension {i} in both shapes must be equal, but are {out[i]} "
                                 f"and {d}. Shapes are {values[0].shape} and {t.shape}")
            if out[i] is None:
                out[i] = d
        total = None if total is None or dims[a] is None else total + dims[a]
    out[a] = total
    return [(dt, TensorShape(out))]


register_op("ConcatV2", _concat_infer)


def _dim_sizes_along(tensors, axis):
    """Sizes of ``tensors`` along ``axis``: a list when all are known, else an int32 tensor."""
    sizes = [t.shape.as_list()[axis] if t.shape.ndims is not None else None for t in tensors]
    if None not in sizes:
        return sizes
    return stack_ints([s if s is not None else _slice_helper(_shape_of(t), axis)
                       for s, t in zip(sizes, tensors)])


@RegisterGradient("ConcatV2")
def _concat_grad(op, grad):
    values, axis_t = op.inputs[:-1], op.inputs[-1]
    grad = _dense(grad)
    if len(values) == 1:
        return [grad, None]
    a = scalar_int(axis_t)
    rank_v = values[0].shape.ndims
    if a is not None and rank_v is not None:
        a %= rank_v
        sizes = _dim_sizes_along(values, a)
    else:  # axis or rank known only at run time
        a = _apply("FloorMod", [axis_t, rank(values[0])])
        sizes = stack([gather(s, a) for s in shape_n(values, out_type=axis_t.dtype)])
    return split(grad, sizes, axis=a) + [None]


def concat(values, axis, name="concat"):
    """Join a list of tensors along ``axis`` (negative counts from the end)."""
    if not isinstance(values, (list, tuple)):
        values = [values]
    values = list(values)
    if not values:
        raise ValueError("concat needs at least one value")
    if len(values) == 1:
        # TF1 returns the single input (checking the axis is a valid scalar).
        t = _ops.convert_to_tensor(values[0])
        a = axis if not isinstance(axis, _ops.Tensor) else constant_value(axis)
        if a is not None and t.shape.ndims is not None:
            _normalize_axis(int(np.ravel(a)[0]), t.shape.ndims, "concat axis")
        return identity(t, name=name)
    values = [v._as_tensor() if hasattr(v, "_as_tensor") else v for v in values]
    first = next((v for v in values if isinstance(v, _ops.Tensor)), None)
    dtype = first.dtype.base_dtype if first is not None else None
    # Python values take the tensors' dtype; mismatched tensors are the shape rule's TypeError.
    values = [v if isinstance(v, _ops.Tensor) else _ops.convert_to_tensor(v, dtype=dtype)
              for v in values]
    return _apply("ConcatV2", values + [_as_int_tensor(axis)], {"N": len(values)}, name)


def _split_infer(op):
    axis_t, x = op.inputs
    _check_index_dtype(axis_t, "axis")
    n = op._attrs["num_split"]
    dt = x.dtype.base_dtype
    if n <= 0:
        raise ValueError(f"num_split must be positive, got {n}")
    rank_x = x.shape.ndims
    a = scalar_int(axis_t)
    if rank_x is None:
        return [(dt, TensorShape(None))] * n
    if a is None:
        return [(dt, TensorShape([None] * rank_x))] * n
    a = _normalize_axis(a, rank_x, "split axis")
    dims = x.shape.as_list()
    if dims[a] is not None:
        if dims[a] % n:
            raise ValueError(f"Dimension size must be evenly divisible by {n} but is {dims[a]} "
                             f"for 'split' along axis {a}")
        dims[a] //= n
    return [(dt, TensorShape(dims))] * n


register_op("Split", _split_infer)


@RegisterGradient("Split")
def _split_grad(op, *grads):
    return [None, concat([_dense(g) for g in grads], op.inputs[0])]


def _split_v_infer(op):
    x, sizes_t, axis_t = op.inputs
    _check_index_dtype(sizes_t, "size_splits")
    _check_index_dtype(axis_t, "axis")
    n = op._attrs["num_split"]
    dt = x.dtype.base_dtype
    sizes = _partial_ints(sizes_t)
    if sizes is not None and len(sizes) != n:
        raise ValueError(f"size_splits has {len(sizes)} entries but num_split is {n}")
    if sizes is None:
        sizes = [None] * n
    if sizes.count(-1) > 1:
        raise ValueError("Only one of the size_splits may be -1")
    rank_x = x.shape.ndims
    a = scalar_int(axis_t)
    if rank_x is None:
        return [(dt, TensorShape(None))] * n
    if a is None:
        return [(dt, TensorShape([None] * rank_x))] * n
    a = _normalize_axis(a, rank_x, "split axis")
    d = x.shape.as_list()[a]
    known = [s for s in sizes if s is not None and s != -1]
    if any(s < -1 for s in known):
        raise ValueError(f"size_splits must be >= -1, got {sizes}")
    if d is not None and None not in sizes:
        if -1 in sizes:
            rest = d - sum(known)
            if rest < 0:
                raise ValueError(f"size_splits {sizes} exceed the dimension {d} being split")
            sizes = [rest if s == -1 else s for s in sizes]
        elif sum(sizes) != d:
            raise ValueError(f"Determined shape must either match input shape along split_dim "
                             f"exactly if fully specified, or be less than the size of the "
                             f"input along split_dim if not fully specified.  Got: {sum(sizes)} "
                             f"vs. {d}")
    out = []
    for s in sizes:
        dims = x.shape.as_list()
        dims[a] = None if s in (None, -1) else s
        out.append((dt, TensorShape(dims)))
    return out


register_op("SplitV", _split_v_infer)


@RegisterGradient("SplitV")
def _split_v_grad(op, *grads):
    return [concat([_dense(g) for g in grads], op.inputs[2]), None, None]


def split(value, num_or_size_splits, axis=0, num=None, name="split"):
    """Split ``value`` along ``axis`` into equal parts (an int) or parts of the given sizes
    (a list or 1-D tensor; one size may be -1). Returns a list of tensors."""
    value = _ops.convert_to_tensor(value)
    axis_t = _as_int_tensor(axis)
    if isinstance(num_or_size_splits, (numbers.Integral, Dimension)) and not isinstance(
            num_or_size_splits, bool):
        n = int(num_or_size_splits)
        return _ops.apply_op("Split", [axis_t, value], {"num_split": n}, name).outputs
    sizes = _as_int_tensor(num_or_size_splits)
    if num is None:
        dims = sizes.shape.as_tuple()
        if dims is None or len(dims) != 1 or dims[0] is None:
            raise ValueError(f"Cannot infer num from shape {sizes.shape}")
        num = dims[0]
    return _ops.apply_op("SplitV", [value, sizes, axis_t], {"num_split": int(num)}, name).outputs


# --- Slice ---------------------------------------------------------------------------------------
def _slice_infer(op):
    x, begin, size_t = op.inputs
    _check_index_dtype(begin, "begin")
    if size_t.dtype.base_dtype is not begin.dtype.base_dtype:
        raise TypeError(f"begin and size must have the same dtype, got {begin.dtype.name} and "
                        f"{size_t.dtype.name}")
    dt = x.dtype.base_dtype
    b, s = _partial_ints(begin), _partial_ints(size_t)
    rank_x = x.shape.ndims
    for v, what in ((b, "begin"), (s, "size")):
        if v is not None and rank_x is not None and len(v) != rank_x:
            raise ValueError(f"Expected {what} argument to be a vector of length {rank_x} "
                             f"but got length {len(v)}")
        if v is not None:
            rank_x = len(v)
    if rank_x is None:
        return [(dt, TensorShape(None))]
    dims = x.shape.as_list() if x.shape.ndims is not None else [None] * rank_x
    b = b or [None] * rank_x
    s = s or [None] * rank_x
    out = []
    for i, (d, bi, si) in enumerate(zip(dims, b, s)):
        if bi is not None and (bi < 0 or (d is not None and bi > d)):
            raise ValueError(f"Expected begin[{i}] in [0, {d}], but got {bi}")
        if si is None:
            out.append(None)
        elif si == -1:
            out.append(None if d is None or bi is None else d - bi)
        else:
            if si < 0:
                raise ValueError(f"Expected size[{i}] >= -1, but got {si}")
            if d is not None and bi is not None and bi + si > d:
                raise ValueError(f"Expected size[{i}] in [0, {d - bi}], but got {si}")
            out.append(si)
    return [(dt, TensorShape(out))]


register_op("Slice", _slice_infer)


@RegisterGradient("Slice")
def _slice_grad(op, grad):
    x, begin = op.inputs[0], op.inputs[1]
    grad = _dense(grad)
    bv = constant_value(begin)
    in_dims, out_dims = x.shape.as_tuple(), op.outputs[0].shape.as_tuple()
    if bv is not None and x.shape.is_fully_defined() and op.outputs[0].shape.is_fully_defined():
        bv = np.ravel(bv)
        after = np.asarray(in_dims) - np.asarray(out_dims) - bv
        paddings = np.stack([bv, after], axis=1).astype(np.int64)
    else:
        from dflab.ops import math_ops

        dt = begin.dtype.base_dtype
        after = math_ops.subtract(math_ops.subtract(_shape_of(x, out_type=dt),
                                                    _shape_of(op.outputs[0], out_type=dt)),
                                  begin)
        paddings = stack([begin, after], axis=1)
    return [pad(grad, paddings), None, None]


def slice(input_, begin, size, name=None):  # noqa: A001 - TF's public name
    """The ``size``-shaped block of ``input_`` starting at ``begin`` (size -1: to the end)."""
    begin = _as_int_tensor(begin)
    size_t = _as_int_tensor(size, dtype=begin.dtype.base_dtype)
    return _apply("Slice", [input_, begin, size_t], None, name)


# --- StridedSlice / StridedSliceGrad ---------------------------------------------------------
_MASKS = ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")


def strided_slice_spec(attrs, begin, end, strides):
    """The sparse slice spec of a ``StridedSlice``, one item per entry of ``begin``.

    Items: ``("ellipsis",)``, ``("newaxis",)``, ``("index", b)`` (a shrunk axis) and
    ``("slice", b, e, s, begin_masked, end_masked)``. Values are ints, or None where unknown at
    build time; masked begins/ends are None too. Shared by the shape rule and the kernels so
    that both read the masks the same way (TF's precedence: ellipsis, new axis, shrink).
    """
    n = len(begin)
    if len(end) != n or len(strides) != n:
        raise ValueError(f"begin, end and strides must have the same length, got {len(begin)}, "
                         f"{len(end)} and {len(strides)}")
    bm, em, elm, nm, sm = (attrs[k] for k in _MASKS)
    if bin(elm & ((1 << n) - 1)).count("1") > 1:
        raise ValueError("Multiple ellipses in slice spec not allowed")
    items = []
    for i in range(n):
        bit = 1 << i
        s = strides[i]
        if elm & bit:
            items.append(("ellipsis",))
        elif nm & bit:
            items.append(("newaxis",))
        elif sm & bit:
            if s is not None and s <= 0:
                raise ValueError("only stride 1 allowed on non-range indexing.")
            items.append(("index", begin[i]))
        else:
            if s == 0:
                raise ValueError(f"strides[{i}] must be non-zero")
            items.append(("slice", None if bm & bit else begin[i], None if em & bit else end[i],
                          s, bool(bm & bit), bool(em & bit)))
    return items


def _slice_length(d, b, e, s, begin_masked, end_masked):
    if d is None or s is None or (b is None and not begin_masked) or (
            e is None and not end_masked):
        return None
    return len(range(*_py_slice(b, e, s).indices(d)))


def strided_slice_shape(in_shape, items):
    """Output shape of a strided slice of ``in_shape`` (partial) given its sparse spec."""
    if in_shape.ndims is None:
        return TensorShape(None)
    dims = in_shape.as_list()
    consuming = sum(1 for it in items if it[0] in ("index", "slice"))
    if not any(it[0] == "ellipsis" for it in items):
        items = list(items) + [("ellipsis",)]  # unlisted trailing dims are kept whole
    n_ellipsis = len(dims) - consuming
    if n_ellipsis < 0:
        raise ValueError(f"Index out of range using input dim {len(dims)}; input has only "
                         f"{len(dims)} dims")
    out, k = [], 0
    for it in items:
        if it[0] == "ellipsis":
            out += dims[k:k + n_ellipsis]
            k += n_ellipsis
        elif it[0] == "newaxis":
            out.append(1)
        elif it[0] == "index":
            d, b = dims[k], it[1]
            if d is not None and b is not None and not -d <= b < d:
                raise ValueError(f"slice index {b} of dimension {k} out of bounds.")
            k += 1
        else:
            out.append(_slice_length(dims[k], *it[1:]))
            k += 1
    return TensorShape(out)


def _strided_slice_items(op, begin, end, strides):
    for t in (begin, end, strides):
        _check_index_dtype(t, "begin, end and strides")
        if t.shape.ndims not in (None, 1):
            raise ValueError(f"begin, end and strides must be vectors, got shape {t.shape}")
    b, e, s = _partial_ints(begin), _partial_ints(end), _partial_ints(strides)
    if b is None or e is None or s is None:
        return None
    return strided_slice_spec(op._attrs, b, e, s)


def _strided_slice_infer(op):
    x, begin, end, strides = op.inputs
    items = _strided_slice_items(op, begin, end, strides)
    if items is None:
        return [(x.dtype.base_dtype, TensorShape(None))]
    return [(x.dtype.base_dtype, strided_slice_shape(x.shape, items))]


register_op("StridedSlice", _strided_slice_infer)


def _masks_of(op):
    return {k: op._attrs[k] for k in _MASKS}


@RegisterGradient("StridedSlice")
def _strided_slice_grad(op, grad):
    x, begin, end, strides = op.inputs
    x_shape = _shape_of(x, out_type=begin.dtype.base_dtype)
    dx = _apply("StridedSliceGrad", [x_shape, begin, end, strides, _dense(grad)], _masks_of(op))
    return [dx, None, None, None]


def _strided_slice_grad_infer(op):
    shape_t, begin, end, strides, dy = op.inputs
    _check_index_dtype(shape_t, "shape")
    items = _strided_slice_items(op, begin, end, strides)
    out = constant_value_as_shape(shape_t)
    if items is not None and out.ndims is not None:
        want = strided_slice_shape(out, items)
        if not want.is_compatible_with(dy.shape):
            raise ValueError(f"dy has shape {dy.shape}, but the slice has shape {want}")
    return [(dy.dtype.base_dtype, out)]


register_op("StridedSliceGrad", _strided_slice_grad_infer)


@RegisterGradient("StridedSliceGrad")
def _strided_slice_grad_grad(op, grad):
    _, begin, end, strides, _ = op.inputs
    return [None, None, None, None,
            strided_slice(_dense(grad), begin, end, strides, **_masks_of(op))]


def strided_slice(input_, begin, end, strides=None, begin_mask=0, end_mask=0, ellipsis_mask=0,
                  new_axis_mask=0, shrink_axis_mask=0, var=None, name=None):
    """NumPy-style basic slicing with TF's begin/end/strides vectors and bit masks."""
    begin = _as_int_tensor(begin)
    dt = begin.dtype.base_dtype
    end = _as_int_tensor(end, dtype=dt)
    if strides is None:
        n = _partial_ints(begin)
        if n is None:
            strides = ones_like(begin)
        else:
            strides = [1] * len(n)
    strides = _as_int_tensor(strides, dtype=dt)
    attrs = {"begin_mask": int(begin_mask), "end_mask": int(end_mask),
             "ellipsis_mask": int(ellipsis_mask), "new_axis_mask": int(new_axis_mask),
             "shrink_axis_mask": int(shrink_axis_mask)}
    return _apply("StridedSlice", [input_, begin, end, strides], attrs, name)


def _check_index(idx):
    """TF1 accepts ints, scalar int32/int64 tensors (and, in slices, None) as indices."""
    if isinstance(idx, (numbers.Integral, Dimension)):
        return
    if isinstance(idx, _ops.Tensor):
        if idx.dtype.base_dtype in (_dt.int32, _dt.int64) and idx.shape.ndims in (None, 0):
            return
    raise TypeError("Only integers, slices (`:`), ellipsis (`...`), tf.newaxis (`None`) and "
                    f"scalar tf.int32/tf.int64 tensors are valid indices, got {idx!r}")


def _slice_helper(tensor, slice_spec, var=None):
    """``tensor[slice_spec]``: ints (shrink an axis), slices with steps, ``...``, ``tf.newaxis``
    and scalar integer tensors, combined as in NumPy basic indexing (one ``StridedSlice``)."""
    tensor = _ops.convert_to_tensor(tensor)
    if isinstance(slice_spec, list):  # TF1 has no fancy indexing
        _check_index(slice_spec)
    if not isinstance(slice_spec, tuple):
        slice_spec = (slice_spec,)
    begin, end, strides = [], [], []
    masks = dict.fromkeys(_MASKS, 0)
    for i, s in enumerate(slice_spec):
        bit = 1 << i
        if isinstance(s, _py_slice):
            for part in (s.start, s.stop, s.step):
                if part is not None:
                    _check_index(part)
            begin.append(0 if s.start is None else s.start)
            end.append(0 if s.stop is None else s.stop)
            strides.append(1 if s.step is None else s.step)
            if s.start is None:
                masks["begin_mask"] |= bit
            if s.stop is None:
                masks["end_mask"] |= bit
        elif s is Ellipsis:
            begin.append(0)
            end.append(0)
            strides.append(1)
            masks["ellipsis_mask"] |= bit
        elif s is None:
            begin.append(0)
            end.append(0)
            strides.append(1)
            masks["new_axis_mask"] |= bit
        else:
            _check_index(s)
            begin.append(s)
            # The kernel ignores the end of a shrunk axis; TF's index + 1 would cost an op.
            end.append(s + 1 if not isinstance(s, _ops.Tensor) else s)
            strides.append(1)
            masks["shrink_axis_mask"] |= bit
    with _ops.name_scope(None, "strided_slice", [tensor]) as scope:
        packed = []
        for vals in (begin, end, strides):
            if any(isinstance(v, _ops.Tensor) for v in vals):
                packed.append(stack_ints(vals))
            else:
                packed.append(None if not vals else [int(v) for v in vals])
        dt = packed[0].dtype.base_dtype if isinstance(packed[0], _ops.Tensor) else (
            packed[1].dtype.base_dtype if isinstance(packed[1], _ops.Tensor) else _dt.int32)
        packed = [constant(np.asarray(p if p is not None else [], dtype=dt._np), dtype=dt)
                  if not isinstance(p, _ops.Tensor) else p for p in packed]
        if len({p.dtype.base_dtype for p in packed}) > 1:
            from dflab.ops import math_ops

            packed = [math_ops.cast(p, _dt.int64) for p in packed]
        return _apply("StridedSlice", [tensor] + packed, masks, name=scope)


# --- GatherV2 / GatherNd / ScatterNd -------------------------------------------------------------
def _gather_infer(op):
    params, indices, axis_t = op.inputs
    _check_index_dtype(indices, "indices")
    _check_index_dtype(axis_t, "axis")
    if op._attrs.get("batch_dims", 0):
        raise ValueError("batch_dims other than 0 is not supported")
    dt = params.dtype.base_dtype
    pr, ir = params.shape.ndims, indices.shape.ndims
    if pr == 0:
        raise ValueError("params must be at least 1 dimensional")
    a = scalar_int(axis_t)
    if pr is None or ir is None:
        return [(dt, TensorShape(None))]
    if a is None:
        return [(dt, TensorShape([None] * (pr - 1 + ir)))]
    a = _normalize_axis(a, pr)
    p = params.shape.as_list()
    return [(dt, TensorShape(p[:a] + indices.shape.as_list() + p[a + 1:]))]


register_op("GatherV2", _gather_infer)


@RegisterGradient("GatherV2")
def _gather_grad(op, grad):
    """Axis 0: an ``IndexedSlices`` (one row of gradient per index, as TF gives). Other axes:
    move the gathered axis to the front, scatter-add the rows, move it back."""
    from dflab.ops.gradients import IndexedSlices

    params, indices, axis_t = op.inputs
    grad = _dense(grad)
    pr = params.shape.ndims
    a = scalar_int(axis_t)
    if a is not None and pr is not None:
        a %= pr
    params_shape = _shape_of(params)
    p = params.shape.as_tuple()
    if a == 0:
        if p is not None and None not in p[1:] and indices.shape.is_fully_defined():
            values_shape = [indices.shape.num_elements()] + list(p[1:])
        else:
            values_shape = concat([expand_dims(size(indices), 0),
                                   _slice_helper(params_shape, _py_slice(1, None))], 0)
        values = reshape(grad, values_shape)
        return [IndexedSlices(values, reshape(indices, [-1]), params_shape), None, None]
    # Flatten the indices so their rank does not matter: grad becomes P[:a] + [n] + P[a+1:].
    n_idx = indices.shape.num_elements()
    n_idx_t = [n_idx] if n_idx is not None else expand_dims(size(indices), 0)
    flat_indices = expand_dims(reshape(indices, [-1]), -1)
    if a is not None and pr is not None:
        rest = list(p[:a]) + list(p[a + 1:])
        if None not in rest and n_idx is not None:
            values_shape = list(p[:a]) + [n_idx] + list(p[a + 1:])
            target = [p[a]] + rest
        else:
            values_shape = concat([_slice_helper(params_shape, _py_slice(None, a)), n_idx_t,
                                   _slice_helper(params_shape, _py_slice(a + 1, None))], 0)
            target = concat([_slice_helper(params_shape, _py_slice(a, a + 1)),
                             _slice_helper(params_shape, _py_slice(None, a)),
                             _slice_helper(params_shape, _py_slice(a + 1, None))], 0)
        front = [a] + list(range(a)) + list(range(a + 1, pr))
        back = list(range(1, a + 1)) + [0] + list(range(a + 1, pr))
    else:  # the axis or the rank of params is known only at run time
        from dflab.ops import math_ops

        r = rank(params)
        a = _apply("FloorMod", [math_ops.cast(axis_t, _dt.int32), r])
        a1 = math_ops.add(a, 1)
        outer = _slice_helper(params_shape, _py_slice(None, a))
        inner = _slice_helper(params_shape, _py_slice(a1, None))
        values_shape = concat([outer, n_idx_t, inner], 0)
        target = concat([_slice_helper(params_shape, _py_slice(a, a1)), outer, inner], 0)
        front = concat([expand_dims(a, 0), _range(0, a), _range(a1, r)], 0)
        back = concat([_range(1, a1), [0], _range(a1, r)], 0)
    moved = transpose(reshape(grad, values_shape), front)  # the gathered axis first
    dense = scatter_nd(flat_indices, moved, target)  # rows of repeated indices add up
    return [transpose(dense, back), None, None]


def gather(params, indices, validate_indices=None, name=None, axis=None, batch_dims=0):
    """Slices of ``params`` along ``axis`` at ``indices`` (out-of-range indices are an error)."""
    if axis is None:
        axis = 0
    params = _ops.convert_to_tensor(params)
    indices = _as_int_tensor(indices)
    if batch_dims:
        raise ValueError("gather: batch_dims other than 0 is not supported")
    return _apply("GatherV2", [params, indices, _as_int_tensor(axis)], {"batch_dims": 0}, name)


def _gather_nd_infer(op):
    params, indices = op.inputs
    _check_index_dtype(indices, "indices")
    dt = params.dtype.base_dtype
    idims = indices.shape.as_tuple()
    if idims is None or params.shape.ndims is None:
        return [(dt, TensorShape(None))]
    if not idims:
        raise ValueError("indices must be at least a vector")
    k = idims[-1]
    if k is None:
        return [(dt, TensorShape(None))]
    if k > params.shape.ndims:
        raise ValueError(f"index innermost dimension length must be <= params rank; saw: {k} "
                         f"vs. {params.shape.ndims}")
    return [(dt, TensorShape(list(idims[:-1]) + params.shape.as_list()[k:]))]


register_op("GatherNd", _gather_nd_infer)


@RegisterGradient("GatherNd")
def _gather_nd_grad(op, grad):
    params, indices = op.inputs
    return [scatter_nd(indices, _dense(grad), _shape_of(params, out_type=indices.dtype)), None]


def gather_nd(params, indices, name=None, batch_dims=0):
    """Gather slices of ``params`` addressed by the last axis of ``indices``."""
    if batch_dims:
        raise ValueError("gather_nd: batch_dims other than 0 is not supported")
    return _apply("GatherNd", [_ops.convert_to_tensor(params), _as_int_tensor(indices)], None,
                  name)


def _scatter_nd_infer(op):
    indices, updates, shape_t = op.inputs
    _check_index_dtype(indices, "indices")
    _check_index_dtype(shape_t, "shape")
    out = constant_value_as_shape(shape_t)
    idims, udims = indices.shape.as_tuple(), updates.shape.as_tuple()
    if idims is not None and len(idims) == 0:
        raise ValueError("indices must be at least a vector")
    if idims is not None and idims[-1] is not None and out.ndims is not None:
        k = idims[-1]
        if k > out.ndims:
            raise ValueError(f"The inner {k} dimensions of indices exceed the rank "
                             f"{out.ndims} of shape")
        want = TensorShape(list(idims[:-1]) + out.as_list()[k:])
        if udims is not None and not want.is_compatible_with(updates.shape):
            raise ValueError(f"updates has shape {updates.shape}, expected {want} "
                             f"(indices.shape[:-1] + shape[{k}:])")
    return [(updates.dtype.base_dtype, out)]


register_op("ScatterNd", _scatter_nd_infer)


@RegisterGradient("ScatterNd")
def _scatter_nd_grad(op, grad):
    indices = op.inputs[0]
    return [None, gather_nd(_dense(grad), indices), None]


def scatter_nd(indices, updates, shape, name=None):
    """A zero tensor of ``shape`` with ``updates`` added at ``indices`` (repeats are summed)."""
    indices = _as_int_tensor(indices)
    return _apply("ScatterNd", [indices, updates, _as_int_tensor(shape, indices.dtype)], None,
                  name)


# --- Tile / BroadcastTo / ReverseV2 ----------------------------------------------------------
def _tile_infer(op):
    x, multiples = op.inputs
    _check_index_dtype(multiples, "multiples")
    dt = x.dtype.base_dtype
    m = _partial_ints(multiples)
    rank_x = x.shape.ndims
    if m is not None and rank_x is not None and len(m) != rank_x:
        raise ValueError(f"Shape must be rank {rank_x} but is rank {len(m)} for multiples")
    if m is None:
        return [(dt, TensorShape(None if rank_x is None else [None] * rank_x))]
    if any(v is not None and v < 0 for v in m):
        raise ValueError(f"multiples must be non-negative, got {m}")
    dims = x.shape.as_list() if rank_x is not None else [None] * len(m)
    out = [0 if v == 0 else (None if d is None or v is None else d * v)
           for d, v in zip(dims, m)]
    return [(dt, TensorShape(out))]


register_op("Tile", _tile_infer)


@RegisterGradient("Tile")
def _tile_grad(op, grad):
    """Each input element was copied to every tile: view the gradient as
    [m0, d0, m1, d1, ...] and sum over the tile axes."""
    from dflab.ops import math_ops

    x, multiples = op.inputs
    grad = _dense(grad)
    mv = constant_value(multiples)
    if mv is not None and x.shape.is_fully_defined():
        split_shape = [int(v) for pair in zip(np.ravel(mv), x.shape.as_list()) for v in pair]
    else:
        input_shape = _shape_of(x, out_type=multiples.dtype.base_dtype)
        split_shape = reshape(transpose(stack([multiples, input_shape])), [-1])
    if x.shape.ndims is not None:
        axes = list(range(0, 2 * x.shape.ndims, 2))
    else:
        axes = _apply("Range", [constant(0), size(split_shape), constant(2)])
    out = math_ops.reduce_sum(reshape(grad, split_shape), axes)
    return [out, None]


def tile(input, multiples, name=None):  # noqa: A002
    """Repeat ``input`` ``multiples[i]`` times along each axis i."""
    return _apply("Tile", [input, _as_int_tensor(multiples)], None, name)


def _broadcast_to_infer(op):
    x, shape_t = op.inputs
    _check_index_dtype(shape_t, "shape")
    target = constant_value_as_shape(shape_t)
    dt = x.dtype.base_dtype
    if target.ndims is None or x.shape.ndims is None:
        return [(dt, target)]
    xd, td = x.shape.as_list(), target.as_list()
    if len(xd) > len(td):
        raise ValueError(f"Rank of input ({len(xd)}) must be no greater than rank of output "
                         f"shape ({len(td)})")
    out = list(td)
    lead = len(td) - len(xd)
    for i, d in enumerate(xd):
        t = td[lead + i]
        if d is not None and d != 1 and t is not None and d != t:
            raise ValueError(f"Incompatible shapes for broadcasting: {x.shape} and {target}")
        if t is None and d is not None and d != 1:
            out[lead + i] = d
    return [(dt, TensorShape(out))]


register_op("BroadcastTo", _broadcast_to_infer)


def _sum_to(grad, x):
    """Sum ``grad`` over the axes along which ``x`` was broadcast; the result has x's shape."""
    from dflab.ops import math_ops

    gd, xd = grad.shape.as_tuple(), x.shape.as_tuple()
    if gd is not None and xd is not None and None not in gd and None not in xd:
        lead = len(gd) - len(xd)
        axes = list(range(lead)) + [lead + i for i, d in enumerate(xd)
                                    if d == 1 and gd[lead + i] != 1]
        out = math_ops.reduce_sum(grad, axes) if axes else grad
        if tuple(out.shape.as_list()) != xd:
            out = reshape(out, list(xd))
        return out
    rx = _ops.apply_op("BroadcastGradientArgs", [_shape_of(x), _shape_of(grad)]).outputs[0]
    return reshape(math_ops.reduce_sum(grad, rx), _shape_of(x))


@RegisterGradient("BroadcastTo")
def _broadcast_to_grad(op, grad):
    return [_sum_to(_dense(grad), op.inputs[0]), None]


def broadcast_to(input, shape, name=None):  # noqa: A002
    """``input`` broadcast (NumPy rules) to ``shape``."""
    return _apply("BroadcastTo", [input, _as_int_tensor(shape)], None, name)


def _reverse_infer(op):
    x, axis_t = op.inputs
    _check_index_dtype(axis_t, "axis")
    ax = _partial_ints(axis_t)
    rank_x = x.shape.ndims
    if ax is not None and rank_x is not None:
        known = [_normalize_axis(a, rank_x) for a in ax if a is not None]
        if len(set(known)) != len(known):
            raise ValueError(f"axis {ax} specifies the same dimension more than once")
    return [(x.dtype.base_dtype, x.shape)]


register_op("ReverseV2", _reverse_infer)


@RegisterGradient("ReverseV2")
def _reverse_grad(op, grad):
    return [reverse(_dense(grad), op.inputs[1]), None]


def reverse(tensor, axis, name=None):
    """``tensor`` with the order of elements reversed along each axis in ``axis``."""
    return _apply("ReverseV2", [tensor, _as_int_tensor(axis)], None, name)


reverse_v2 = reverse


# --- Pad / PadV2 / MirrorPad ---------------------------------------------------------------------
def _pad_infer(op):
    x, paddings = op.inputs[0], op.inputs[1]
    _check_index_dtype(paddings, "paddings")
    dt = x.dtype.base_dtype
    if op.type == "PadV2":
        cv = op.inputs[2]
        if cv.dtype.base_dtype is not dt:
            raise TypeError(f"constant_values must have the dtype of the tensor ({dt.name}), "
                            f"got {cv.dtype.base_dtype.name}")
        if cv.shape.ndims not in (None, 0):
            raise ValueError(f"constant_values must be a scalar, got shape {cv.shape}")
    rank_x = x.shape.ndims
    ps = paddings.shape.as_tuple()
    if ps is not None:
        if len(ps) != 2 or (ps[1] is not None and ps[1] != 2):
            raise ValueError(f"paddings must be a matrix with 2 columns, got shape "
                             f"{paddings.shape}")
        if rank_x is not None and ps[0] is not None and ps[0] != rank_x:
            raise ValueError(f"The first dimension of paddings must be the rank of inputs "
                             f"({rank_x}), got {ps[0]}")
        if rank_x is None and ps[0] is not None:
            rank_x = ps[0]
    if rank_x is None:
        return [(dt, TensorShape(None))]
    dims = x.shape.as_list() if x.shape.ndims is not None else [None] * rank_x
    pv = constant_value(paddings)
    if pv is None:
        return [(dt, TensorShape([None] * rank_x))]
    pv = np.asarray(pv).reshape(rank_x, 2)
    if (pv < 0).any():
        raise ValueError(f"paddings must be non-negative, got {pv.tolist()}")
    mode = op._attrs.get("mode")
    out = []
    for i, (d, (a, b)) in enumerate(zip(dims, pv.tolist())):
        if d is not None and mode is not None:
            limit = d - (1 if mode == "REFLECT" else 0)
            if a > limit or b > limit:
                raise ValueError(f"paddings must be no greater than the dimension size "
                                 f"{limit} in {mode} mode: {a}, {b} for dimension {i}")
        out.append(None if d is None else d + a + b)
    return [(dt, TensorShape(out))]


for _t in ("Pad", "PadV2", "MirrorPad"):
    register_op(_t, _pad_infer)


def _pad_begin(paddings):
    pv = constant_value(paddings)
    if pv is not None:
        return constant(np.asarray(pv)[:, 0], dtype=paddings.dtype.base_dtype)
    return _slice_helper(paddings, (_py_slice(None), 0))


def _crop(grad, x, paddings):
    """The part of a padded tensor's gradient that lies over the original ``x``."""
    size_t = _shape_of(x, out_type=paddings.dtype.base_dtype)
    return slice(_dense(grad), _pad_begin(paddings), size_t)


@RegisterGradient("Pad")
def _pad_grad(op, grad):
    return [_crop(grad, op.inputs[0], op.inputs[1]), None]


@RegisterGradient("PadV2")
def _pad_v2_grad(op, grad):
    return [_crop(grad, op.inputs[0], op.inputs[1]), None, None]


@RegisterGradient("MirrorPad")
def _mirror_pad_grad(op, grad):
    x, paddings = op.inputs
    g = _apply("MirrorPadGrad", [_dense(grad), paddings], {"mode": op._attrs["mode"]})
    return [g, None]


def _mirror_pad_grad_infer(op):
    g, paddings = op.inputs
    _check_index_dtype(paddings, "paddings")
    rank_g = g.shape.ndims
    pv = constant_value(paddings)
    if rank_g is None or pv is None:
        return [(g.dtype.base_dtype, TensorShape(None if rank_g is None else [None] * rank_g))]
    pv = np.asarray(pv).reshape(rank_g, 2)
    out = [None if d is None else d - int(a) - int(b)
           for d, (a, b) in zip(g.shape.as_list(), pv)]
    if any(d is not None and d < 0 for d in out):
        raise ValueError(f"paddings {pv.tolist()} exceed the gradient's shape {g.shape}")
    return [(g.dtype.base_dtype, TensorShape(out))]


register_op("MirrorPadGrad", _mirror_pad_grad_infer)


@RegisterGradient("MirrorPadGrad")
def _mirror_pad_grad_grad(op, grad):
    return [_apply("MirrorPad", [_dense(grad), op.inputs[1]], {"mode": op._attrs["mode"]}),
            None]


def pad(tensor, paddings, mode="CONSTANT", name=None, constant_values=0):
    """Pad ``tensor`` by ``paddings[i] = [before, after]`` along each axis; ``mode`` is
    CONSTANT (with ``constant_values``), REFLECT or SYMMETRIC (case-insensitive)."""
    tensor = _ops.convert_to_tensor(tensor)
    paddings = _as_int_tensor(paddings)
    mode = str(mode).upper()
    if mode == "CONSTANT":
        if not isinstance(constant_values, _ops.Tensor) and np.all(
                np.asarray(constant_values) == 0):
            return _apply("Pad", [tensor, paddings], None, name)
        cv = _ops.convert_to_tensor(constant_values, dtype=tensor.dtype.base_dtype)
        return _apply("PadV2", [tensor, paddings, cv], None, name)
    if mode in ("REFLECT", "SYMMETRIC"):
        return _apply("MirrorPad", [tensor, paddings], {"mode": mode}, name)
    raise ValueError(f"Unknown padding mode: {mode}")


# --- OneHot --------------------------------------------------------------------------------------
def _one_hot_infer(op):
    indices, depth, on_value, off_value = op.inputs
    if indices.dtype.base_dtype not in (_dt.uint8, _dt.int32, _dt.int64):
        raise TypeError(f"indices must be uint8, int32 or int64, got "
                        f"{indices.dtype.base_dtype.name}")
    if depth.dtype.base_dtype is not _dt.int32:
        raise TypeError(f"depth must be int32, got {depth.dtype.base_dtype.name}")
    dt = on_value.dtype.base_dtype
    if off_value.dtype.base_dtype is not dt:
        raise TypeError(f"on_value ({dt.name}) and off_value "
                        f"({off_value.dtype.base_dtype.name}) must have the same dtype")
    for t, what in ((depth, "depth"), (on_value, "on_value"), (off_value, "off_value")):
        if t.shape.ndims not in (None, 0):
            raise ValueError(f"{what} must be a scalar, got shape {t.shape}")
    d = scalar_int(depth)
    if d is not None and d < 0:
        raise ValueError(f"depth must be non-negative, got {d}")
    axis = op._attrs["axis"]
    if indices.shape.ndims is None:
        return [(dt, TensorShape(None))]
    dims = indices.shape.as_list()
    if not -1 <= axis <= len(dims):
        raise ValueError(f"Expected axis to be -1 or between [0, {len(dims)}].  But received: "
                         f"{axis}")
    dims.insert(len(dims) if axis == -1 else axis, d)
    return [(dt, TensorShape(dims))]


register_op("OneHot", _one_hot_infer)
NotDifferentiable("OneHot")


def one_hot(indices, depth, on_value=None, off_value=None, axis=None, dtype=None, name=None):
    """One-hot vectors of length ``depth`` along a new ``axis`` (default last): ``on_value``
    where the index matches, ``off_value`` elsewhere (indices outside [0, depth) are all off)."""
    with _ops.name_scope(name, "one_hot") as scope:
        on_t = _ops.convert_to_tensor(on_value, name="on_value") if on_value is not None \
            else None
        off_t = _ops.convert_to_tensor(off_value, name="off_value") if off_value is not None \
            else None
        dtype = _dt.as_dtype(dtype).base_dtype if dtype is not None else None
        if on_t is not None or off_t is not None:
            if dtype is not None:
                for t, what in ((on_t, "on_value"), (off_t, "off_value")):
                    if t is not None and t.dtype.base_dtype is not dtype:
                        raise TypeError(f"dtype {t.dtype.base_dtype.name} of {what} does not "
                                        f"match dtype parameter {dtype.name}")
            else:
                dtype = (on_t if on_t is not None else off_t).dtype.base_dtype
        elif dtype is None:
            dtype = _dt.float32
        if on_t is None:
            on_t = constant(1, dtype=dtype, name="on_value")
        if off_t is None:
            off_t = constant(0, dtype=dtype, name="off_value")
        if on_t.dtype.base_dtype is not off_t.dtype.base_dtype:
            raise TypeError(f"dtype {on_t.dtype.base_dtype.name} of on_value does not match "
                            f"dtype {off_t.dtype.base_dtype.name} of off_value")
        indices = _as_int_tensor(indices, dtype=_dt.int64)
        depth = _as_int_tensor(depth)
        axis = -1 if axis is None else int(axis)
        return _apply("OneHot", [indices, depth, on_t, off_t], {"axis": axis}, name=scope)


# --- Select / SelectV2 / Where ---------------------------------------------------------------
def _select_infer(op):
    cond, x, y = op.inputs
    if cond.dtype.base_dtype is not _dt.bool:
        raise TypeError(f"condition must be bool, got {cond.dtype.base_dtype.name}")
    if x.dtype.base_dtype is not y.dtype.base_dtype:
        raise TypeError(f"x and y must have the same dtype, got {x.dtype.base_dtype.name} and "
                        f"{y.dtype.base_dtype.name}")
    try:
        out = x.shape.merge_with(y.shape)
    except ValueError:
        raise ValueError(f"x and y must have the same shape, got {x.shape} and "
                         f"{y.shape}") from None
    c = cond.shape
    # TF1 Select: a scalar condition picks x or y whole; a vector one picks rows of x or y.
    if c.ndims is not None and c.ndims != 0 and out.ndims is not None:
        if c.ndims == out.ndims:
            try:
                out = out.merge_with(c)
            except ValueError:
                raise ValueError(f"condition of shape {c} does not match x's shape "
                                 f"{out}") from None
        elif c.ndims == 1 and out.ndims > 1:
            if not c[0].is_compatible_with(out[0]):
                raise ValueError(f"condition of shape {c} must match the first dimension of "
                                 f"x's shape {out}")
            if out.as_list()[0] is None:
                out = TensorShape([c.as_list()[0]] + out.as_list()[1:])
        else:
            raise ValueError(f"condition must be a scalar, a vector matching x's first "
                             f"dimension, or x's shape; got {c} for x of shape {out}")
    return [(x.dtype.base_dtype, out)]


register_op("Select", _select_infer)


@RegisterGradient("Select")
def _select_grad(op, grad):
    c, x = op.inputs[0], op.inputs[1]
    grad = _dense(grad)
    zeros_t = zeros_like(x)
    return [None, where(c, grad, zeros_t), where(c, zeros_t, grad)]


def _select_v2_infer(op):
    cond, x, y = op.inputs
    if cond.dtype.base_dtype is not _dt.bool:
        raise TypeError(f"condition must be bool, got {cond.dtype.base_dtype.name}")
    if x.dtype.base_dtype is not y.dtype.base_dtype:
        raise TypeError(f"x and y must have the same dtype, got {x.dtype.base_dtype.name} and "
                        f"{y.dtype.base_dtype.name}")
    out = broadcast_shapes(broadcast_shapes(cond.shape, x.shape), y.shape)
    return [(x.dtype.base_dtype, out)]


register_op("SelectV2", _select_v2_infer)


@RegisterGradient("SelectV2")
def _select_v2_grad(op, grad):
    c, x, y = op.inputs
    grad = _dense(grad)
    zeros_t = zeros_like(grad)
    gx = _apply("SelectV2", [c, grad, zeros_t])
    gy = _apply("SelectV2", [c, zeros_t, grad])
    return [None, _sum_to(gx, x), _sum_to(gy, y)]


def _where_infer(op):
    x = op.inputs[0]
    return [(_dt.int64, TensorShape([None, x.shape.ndims]))]


register_op("Where", _where_infer)
NotDifferentiable("Where")


def where(condition, x=None, y=None, name=None):
    """TF1 ``tf.where``: with ``x`` and ``y``, elements of x where ``condition`` is true and of
    y elsewhere (condition has x's shape, or is a vector over x's first dimension, or a
    scalar); without them, the int64 coordinates [N, rank] of the true elements."""
    if x is None and y is None:
        return _apply("Where", [_as_bool_tensor(condition)], None, name)
    if x is None or y is None:
        raise ValueError("x and y must both be non-None or both be None.")
    cond = _as_bool_tensor(condition)
    x, y = _convert_pair(x, y)
    return _apply("Select", [cond, x, y], None, name)


def where_v2(condition, x=None, y=None, name=None):
    """``tf.where_v2``: like ``where`` but ``condition``, x and y broadcast together."""
    if x is None and y is None:
        return where(condition, name=name)
    if x is None or y is None:
        raise ValueError("x and y must both be non-None or both be None.")
    cond = _as_bool_tensor(condition)
    x, y = _convert_pair(x, y)
    return _apply("SelectV2", [cond, x, y], None, name)


def _as_bool_tensor(condition):
    # Tensors keep their dtype so that a non-bool one is the shape rule's TypeError (as TF).
    if isinstance(condition, _ops.Tensor) or hasattr(condition, "_as_tensor"):
        return _ops.convert_to_tensor(condition)
    return _ops.convert_to_tensor(condition, dtype=_dt.bool)


def _convert_pair(x, y):
    """x and y as tensors; a Python value takes the dtype of the other, tensor, argument."""
    if isinstance(x, _ops.Tensor) or hasattr(x, "_as_tensor"):
        x = _ops.convert_to_tensor(x)
        return x, _ops.convert_to_tensor(y, dtype=x.dtype.base_dtype) if not isinstance(
            y, _ops.Tensor) else y
    y = _ops.convert_to_tensor(y)
    return _ops.convert_to_tensor(x, dtype=y.dtype.base_dtype), y


# --- boolean_mask / sequence_mask ------------------------------------------------------------
def boolean_mask(tensor, mask, name="boolean_mask", axis=None):
    """The elements (or slices) of ``tensor`` where ``mask`` is true, flattened along the
    masked dims: ``mask`` covers dims [axis, axis + mask.ndim) of ``tensor``.

    Built as TF builds it (reshape, ``where``, ``gather``), so its gradient is gather's.
    """
    with _ops.name_scope(name, "boolean_mask", [tensor, mask]):
        tensor = _ops.convert_to_tensor(tensor, name="tensor")
        mask = _ops.convert_to_tensor(mask, name="mask")
        if mask.dtype.base_dtype is not _dt.bool:
            raise TypeError(f"mask must be a bool tensor, got {mask.dtype.base_dtype.name}")
        shape_mask = mask.shape
        ndims_mask = shape_mask.ndims
        shape_tensor = tensor.shape
        if ndims_mask == 0:
            raise ValueError("mask cannot be scalar.")
        if ndims_mask is None:
            raise ValueError("Number of mask dimensions must be specified, even if some "
                             "dimensions are None.  E.g. shape=[None] is ok, but shape=None "
                             "is not.")
        axis = 0 if axis is None else int(axis)
        if shape_tensor.ndims is not None:
            if axis < 0:
                axis += shape_tensor.ndims
            if not 0 <= axis <= shape_tensor.ndims - ndims_mask:
                raise ValueError(f"mask of rank {ndims_mask} at axis {axis} does not fit a "
                                 f"tensor of rank {shape_tensor.ndims}")
            shape_tensor[axis:axis + ndims_mask].assert_is_compatible_with(shape_mask)
        elif axis < 0:
            raise ValueError("a negative axis needs a tensor of known rank")
        first_dim = shape_tensor[axis:axis + ndims_mask].num_elements()
        if first_dim is None:
            first_dim = shape_mask.num_elements()
        if shape_tensor.is_fully_defined():
            dims = shape_tensor.as_list()
            new_shape = dims[:axis] + [first_dim] + dims[axis + ndims_mask:]
        else:
            # mask has the shape of the dims it covers, so their product is size(mask).
            full = _shape_of(tensor)
            new_shape = concat([_slice_helper(full, _py_slice(None, axis)),
                                expand_dims(size(mask), 0),
                                _slice_helper(full, _py_slice(axis + ndims_mask, None))], 0)
        flat = reshape(tensor, new_shape)
        if shape_tensor.ndims is not None:
            flat.set_shape(shape_tensor[:axis].concatenate([first_dim]).concatenate(
                shape_tensor[axis + ndims_mask:]))
        indices = squeeze(where(reshape(mask, [-1])), axis=[1])
        return gather(flat, indices, axis=axis)


def _sequence_mask_infer(op):
    lengths = op.inputs[0]
    _check_index_dtype(lengths, "lengths")
    maxlen = None
    if len(op.inputs) > 1:
        m = op.inputs[1]
        _check_index_dtype(m, "maxlen")
        if m.shape.ndims not in (None, 0):
            raise ValueError(f"maxlen must be scalar for sequence_mask, got shape {m.shape}")
        maxlen = scalar_int(m)
    return [(op._attrs["dtype"], lengths.shape.concatenate([maxlen]))]


register_op("SequenceMask", _sequence_mask_infer)
NotDifferentiable("SequenceMask")


def sequence_mask(lengths, maxlen=None, dtype=_dt.bool, name=None):
    """``mask[i..., j] = j < lengths[i...]`` for j in [0, maxlen) (default: max(lengths)).

    One ``SequenceMask`` op (TF composes Range and Less; the values are the same).
    """
    lengths = _as_int_tensor(lengths)
    inputs = [lengths]
    if maxlen is not None:
        inputs.append(_as_int_tensor(maxlen, dtype=lengths.dtype.base_dtype))
    return _apply("SequenceMask", inputs, {"dtype": _dt.as_dtype(dtype).base_dtype},
                  name or "SequenceMask")


# --- Unique --------------------------------------------------------------------------------------
def _unique_infer(op):
    x = op.inputs[0]
    try:
        x.shape.with_rank(1)
    except ValueError:
        raise ValueError(f"unique expects a 1-D vector, got shape {x.shape}") from None
    out_idx = op._attrs["out_idx"]
    if out_idx not in (_dt.int32, _dt.int64):
        raise TypeError(f"out_idx must be int32 or int64, got {out_idx.name}")
    return [(x.dtype.base_dtype, TensorShape([None])), (out_idx, x.shape.with_rank(1))]


register_op("Unique", _unique_infer)
NotDifferentiable("Unique")

UniqueOutput = collections.namedtuple("Unique", ["y", "idx"])


def unique(x, out_idx=_dt.int32, name=None):
    """The distinct values of a vector in order of first appearance (``y``) and, for each
    element, the position of its value in ``y`` (``idx``)."""
    op = _ops.apply_op("Unique", [x], {"out_idx": _dt.as_dtype(out_idx)}, name)
    return UniqueOutput(*op.outputs)


__all__ = [
    "placeholder", "placeholder_with_default", "identity", "stop_gradient", "shape", "shape_n",
    "size", "rank", "reshape", "expand_dims", "squeeze", "zeros_like", "ones_like", "fill",
    "zeros", "ones", "stack", "unstack", "newaxis", "transpose", "matrix_transpose",
    "invert_permutation", "concat", "split", "slice", "strided_slice", "gather", "gather_nd",
    "scatter_nd", "tile", "broadcast_to", "reverse", "reverse_v2", "pad", "one_hot", "where",
    "where_v2", "boolean_mask", "sequence_mask", "unique",
]
