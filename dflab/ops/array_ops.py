"""Array ops: placeholders, identity, shapes and reshaping, stacking, filling, transposing
and concatenating; with the rest of the array family re-exported, so that every array op is
reachable from here (``array_ops.gather``, ``from dflab.ops.array_ops import *``).

Each op: schema (``register_op`` with its static shape rule), gradient and public builder, side by
side, with TF 1.x names, arguments and semantics. Kernels are in ``dflab.kernels.array_kernels``.
Shape rules infer as much as the graph tells at build time: index arguments that are constants
(or ``Pack``s of partly constant scalars) give known dims, the rest stay ``None``.

The rest of the family, by concern: ``slicing_ops`` (Slice, StridedSlice and
``Tensor.__getitem__``, Split, Pad), ``indexing_ops`` (Gather/Scatter, OneHot, Select/Where,
masks, Unique) and ``manip_ops`` (Tile, BroadcastTo, ReverseV2). They build on the helpers and
ops defined here and import them from this module, so this module imports them only at its end,
once everything they need is defined; a few functions here (``transpose``, ``concat``'s gradient)
call their ops through those re-exports at run time. Other modules import array ops from here,
never from those modules: one imported before this module would be a circular import.
"""

from __future__ import annotations

import builtins
import math
import numbers

import numpy as np

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.constant_op import (
    builder_constant,
    constant,
    constant_value,
    constant_value_as_shape,
    index_constant,
)
from dflab.framework.eager_tensor import EagerTensor
from dflab.framework.registry import NotDifferentiable, RegisterGradient, register_op
from dflab.framework.tensor_shape import Dimension, TensorShape, as_shape
from dflab.ops.op_util import as_data, check_same_dtype, scalar_int, unary_infer

newaxis = None
_py_slice = builtins.slice  # ``slice`` below is TF's builder


# --- helpers --------------------------------------------------------------------------------------
def _apply(op_type, inputs, attrs=None, name=None):
    return _ops.apply_op_output(op_type, inputs, attrs, name)


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
    if type(v) is int:  # Python ints, first: an axis, ``reshape(x, [-1])``
        return index_constant(v, dtype)
    if type(v) is list or type(v) is tuple:
        for e in v:
            if type(e) is not int:
                break
        else:
            return index_constant(tuple(v), dtype)
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
        if all(type(e) is int for e in v):  # (executing eagerly: a cached constant)
            return index_constant(tuple(v), dtype)
    elif isinstance(v, Dimension):
        v = int(v)
    if type(v) is int:
        return index_constant(v, dtype)
    return builder_constant(v, dtype=dtype)  # (rows of ints: paddings, crops)


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
            out.append(builder_constant(int(v), dtype))
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
    return [(op.get_attr("dtype"), op.get_attr("shape"))]


register_op("Placeholder", _placeholder_infer)
NotDifferentiable("Placeholder")


def placeholder(dtype, shape=None, name=None) -> _ops.Tensor:
    """A tensor that must be fed; ``shape=None`` accepts any shape."""
    if _ops.executing_eagerly():  # nothing would ever feed it
        raise RuntimeError("tf.placeholder() is not compatible with eager execution.")
    attrs = {"dtype": _dt.as_dtype(dtype).base_dtype, "shape": as_shape(shape)}
    return _ops.apply_op("Placeholder", [], attrs, name).outputs[0]


def _pwd_infer(op):
    t = op.inputs[0]
    shape = op.get_attr("shape")
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
    return _ops.apply_unary("Identity", input, name)


register_op("StopGradient", unary_infer)
NotDifferentiable("StopGradient")


def stop_gradient(input, name=None):  # noqa: A002
    return _ops.apply_unary("StopGradient", input, name)


# --- Shape / ShapeN / Size / Rank --------------------------------------------------------------
# TF1's builders return a constant when the answer is known statically (``optimize=True``).
def _check_out_type(op):
    dt = op.get_attr("out_type")
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
    return _ops.apply_binary("Reshape", as_data(tensor, "tensor"), _as_int_tensor(shape), name)


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
    return _apply("ExpandDims", [as_data(input), _as_int_tensor(axis)], None, name)


def _squeeze_infer(op):
    x = op.inputs[0]
    axes = op.get_attr("squeeze_dims")
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
    axis = op.get_attr("axis")
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
    return unstack(_dense(grad), num=len(op.inputs), axis=op.get_attr("axis"))


def stack(values, axis=0, name="stack"):
    """Stack rank-R tensors into one rank-(R+1) tensor along a new ``axis``."""
    values = list(values)
    if not values:
        raise ValueError("stack needs at least one value")
    return _apply("Pack", values, _ops.frozen_attrs(axis=int(axis), N=len(values)), name)


def _first_dtype(values):
    for v in values:
        if isinstance(v, (list, tuple)):
            found = _first_dtype(v)
            if found is not None:
                return found
        elif _ops.is_tensor_like(v):
            return _ops.convert_to_tensor(v).dtype.base_dtype
    return None


def _autopack(values, dtype=None, name=None):
    """``convert_to_tensor`` of a nested list holding tensors: a ``Pack`` per level, named
    "packed" as TF's; numbers take the tensors' dtype."""
    dtype = _dt.as_dtype(dtype).base_dtype if dtype is not None else _first_dtype(values)
    with _ops.name_scope(name or "packed") as scope:
        elems = []
        for i, v in enumerate(values):
            if isinstance(v, (list, tuple)) and _ops._holds_tensor(v):
                elems.append(_autopack(v, dtype, str(i)))
            elif _ops.is_tensor_like(v):
                t = _ops.convert_to_tensor(v)
                if dtype is not None and t.dtype.base_dtype is not dtype:
                    raise TypeError(f"Cannot convert a list containing a tensor of dtype "
                                    f"{t.dtype.base_dtype.name} to {dtype.name} (Tensor is: "
                                    f"{t!r})")
                elems.append(t)
            else:
                elems.append(_ops.convert_to_tensor(v, dtype=dtype))
        return stack(elems, name=scope)


_ops._autopack_builder = _autopack


def _unpack_infer(op):
    x = op.inputs[0]
    axis, num = op.get_attr("axis"), op.get_attr("num")
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
    return [stack(grads, axis=op.get_attr("axis"))]


def unstack(value, num=None, axis=0, name="unstack"):
    """Split ``value`` along ``axis`` into a list of ``num`` tensors of one rank lower."""
    value = _ops.convert_to_tensor(value)
    if num is None:
        if value.shape.ndims is None:
            raise ValueError(f"Cannot infer num from shape {value.shape}")
        num = value.shape.as_list()[_normalize_axis(axis, value.shape.ndims)]
        if num is None:
            raise ValueError(f"Cannot infer num from shape {value.shape}")
    return _ops.apply_op("Unpack", [value], _ops.frozen_attrs(axis=int(axis), num=int(num)),
                         name).outputs


# --- ZerosLike / OnesLike / Fill ---------------------------------------------------------------
register_op("ZerosLike", unary_infer)
register_op("OnesLike", unary_infer)
NotDifferentiable("ZerosLike")
NotDifferentiable("OnesLike")


def zeros_like(tensor, dtype=None, name=None, optimize=True):
    t = _ops.convert_to_tensor(tensor)
    if dtype is not None and _dt.as_dtype(dtype) is not t.dtype.base_dtype:
        from dflab.ops import math_ops

        return math_ops.cast(_apply("ZerosLike", [t], None, name or "zeros_like"), dtype)
    return _apply("ZerosLike", [t], None, name or "zeros_like")


def ones_like(tensor, dtype=None, name=None, optimize=True):
    t = _ops.convert_to_tensor(tensor)
    if dtype is not None and _dt.as_dtype(dtype) is not t.dtype.base_dtype:
        from dflab.ops import math_ops

        return math_ops.cast(_apply("OnesLike", [t], None, name or "ones_like"), dtype)
    return _apply("OnesLike", [t], None, name or "ones_like")


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
    # The value keeps its own dtype (a Python float makes a float32 tensor), not the dims'.
    if not isinstance(value, _ops.Tensor):
        value = builder_constant(value) if type(value) in (int, float, bool) else \
            _ops.convert_to_tensor(value)
    return _apply("Fill", [_as_int_tensor(dims), value], None, name)


def _has_tensor(shape):
    return isinstance(shape, _ops.Tensor) or (isinstance(shape, (list, tuple)) and any(
        isinstance(e, _ops.Tensor) for e in shape))


# TF's rule for zeros/ones of a static shape: fewer elements than this become a Const, more a
# Fill, so building (and serializing) a graph never allocates a large tensor; the memory is
# taken when the Fill runs, where running out is a ResourceExhaustedError naming the op.
_SMALL_CONSTANT = 1000


def _filled(shape, value: int, dtype, name, default_name: str):
    dtype = _dt.as_dtype(dtype)
    if type(shape) in (list, tuple) and len(shape) <= 8 and all(type(d) is int for d in shape):
        g = _ops.get_default_graph()
        if g.executes_eagerly and 0 <= math.prod(shape) < _SMALL_CONSTANT and min(shape,
                                                                                  default=0) >= 0:
            return g.fresh(g.cached_constant(("filled", tuple(shape), value, dtype),
                                             lambda: constant(np.full(shape, value,
                                                                      dtype=dtype._np),
                                                              dtype=dtype)))
    scalar = np.full((), value, dtype=dtype._np)
    dims = None if _has_tensor(shape) else as_shape(shape).as_list()
    if dims is not None and math.prod(dims) < _SMALL_CONSTANT:
        return constant(np.full(dims, scalar, dtype=dtype._np), dtype=dtype,
                        name=name or default_name)
    with _ops.name_scope(name, default_name) as scope:
        if dims is not None:
            index_dt = _dt.int32 if all(d < 2**31 for d in dims) else _dt.int64
            shape = constant(dims, dtype=index_dt, name="shape_as_tensor")
        return fill(shape, constant(scalar, dtype=dtype), name=scope)


def zeros(shape, dtype=_dt.float32, name=None):
    return _filled(shape, 0, dtype, name, "zeros")


def ones(shape, dtype=_dt.float32, name=None):
    return _filled(shape, 1, dtype, name, "ones")


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
                            builder_constant(1, _dt.int32)])


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


# --- ConcatV2 -------------------------------------------------------------------------------------
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
    if type(axis) is int and all(type(v) is EagerTensor for v in values):
        # Eager tensors (of one dtype, or the kernel's build says otherwise): nothing to read.
        return _apply("ConcatV2", [*values, index_constant(axis)],
                      _ops.frozen_attrs(N=len(values)), name)
    values = [v._as_tensor() if hasattr(v, "_as_tensor") else v for v in values]
    first = next((v for v in values if isinstance(v, _ops.Tensor)), None)
    dtype = first.dtype.base_dtype if first is not None else None
    # Python values take the tensors' dtype; mismatched tensors are the shape rule's TypeError.
    values = [v if isinstance(v, _ops.Tensor) else _ops.convert_to_tensor(v, dtype=dtype)
              for v in values]
    return _apply("ConcatV2", values + [_as_int_tensor(axis)], _ops.frozen_attrs(N=len(values)),
                  name)


# --- the rest of the family (see the module docstring), imported last: they import this module --
from dflab.ops.indexing_ops import (  # noqa: E402
    UniqueOutput,  # noqa: F401
    boolean_mask,
    dynamic_partition,
    dynamic_stitch,
    gather,
    gather_nd,
    one_hot,
    scatter_nd,
    sequence_mask,
    unique,
    where,
    where_v2,
)
from dflab.ops.manip_ops import broadcast_to, reverse, reverse_v2, tile  # noqa: E402
from dflab.ops.slicing_ops import (  # noqa: E402
    _slice_helper,
    pad,
    slice,  # noqa: A004 - TF's public name
    split,
    strided_slice,
    strided_slice_shape,  # noqa: F401
    strided_slice_spec,  # noqa: F401 - the StridedSlice kernel shares it
)

__all__ = [
    "placeholder", "placeholder_with_default", "identity", "stop_gradient", "shape", "shape_n",
    "size", "rank", "reshape", "expand_dims", "squeeze", "zeros_like", "ones_like", "fill",
    "zeros", "ones", "stack", "unstack", "newaxis", "transpose", "matrix_transpose",
    "invert_permutation", "concat", "split", "slice", "strided_slice", "gather", "gather_nd",
    "scatter_nd", "tile", "broadcast_to", "reverse", "reverse_v2", "pad", "one_hot", "where",
    "where_v2", "boolean_mask", "sequence_mask", "unique", "dynamic_partition", "dynamic_stitch",
]
