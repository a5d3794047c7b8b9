"""Math ops: elementwise arithmetic with broadcasting, matmul, reductions, casts, comparisons.

Each op: schema (shape rule), gradient and builder side by side; kernels live in
``dflab.kernels.math_kernels``. Gradients of broadcasting binary ops sum the incoming gradient
over the broadcast axes (``_unbroadcast``), statically when shapes are known, else with
``BroadcastGradientArgs``.
"""

from __future__ import annotations

import numpy as np

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.registry import NotDifferentiable, RegisterGradient, register_op
from dflab.framework.tensor_shape import TensorShape
from dflab.ops import array_ops
from dflab.ops.op_util import axis_list, broadcast_infer, check_same_dtype, unary_infer


def _binary(op_type, x, y, name):
    return _ops.apply_op(op_type, [x, y], None, name).outputs[0]


def _unary(op_type, x, name):
    return _ops.apply_op(op_type, [x], None, name).outputs[0]


# --- broadcasting gradient support --------------------------------------------------------------
def _bga_infer(op):
    return [(_dt.int32, TensorShape([None])), (_dt.int32, TensorShape([None]))]


register_op("BroadcastGradientArgs", _bga_infer)
NotDifferentiable("BroadcastGradientArgs")


def _static_reduction_axes(from_shape, to_shape):
    """Axes to sum so a gradient of ``from_shape`` becomes ``to_shape``; None if unknown."""
    f, t = from_shape.as_tuple(), to_shape.as_tuple()
    if f is None or t is None or None in f or None in t:
        return None
    lead = len(f) - len(t)
    axes = list(range(lead))
    for i, d in enumerate(t):
        if d == 1 and f[lead + i] != 1:
            axes.append(lead + i)
    return axes


def _unbroadcast(grad, x):
    """Sum ``grad`` over the axes along which ``x`` was broadcast; result has x's shape."""
    if grad is None:
        return None
    axes = _static_reduction_axes(grad.shape, x.shape)
    if axes is not None:
        if not axes:
            return grad
        out = reduce_sum(grad, axes)
        if out.shape.as_list() != x.shape.as_list():
            out = array_ops.reshape(out, x.shape.as_list())
        return out
    rx, _ = _ops.apply_op("BroadcastGradientArgs",
                          [array_ops.shape(x), array_ops.shape(grad)]).outputs
    return array_ops.reshape(reduce_sum(grad, rx), array_ops.shape(x))


# --- elementwise binary ---------------------------------------------------------------------------
for _t in ("AddV2", "Sub", "Mul", "RealDiv", "FloorDiv", "FloorMod", "Pow", "Maximum",
           "Minimum", "SquaredDifference"):
    register_op(_t, broadcast_infer)


def add(x, y, name=None):
    return _binary("AddV2", x, y, name)


def subtract(x, y, name=None):
    return _binary("Sub", x, y, name)


def multiply(x, y, name=None):
    return _binary("Mul", x, y, name)


def realdiv(x, y, name=None):
    return _binary("RealDiv", x, y, name)


@RegisterGradient("AddV2")
def _add_grad(op, grad):
    x, y = op.inputs
    return [_unbroadcast(grad, x), _unbroadcast(grad, y)]


@RegisterGradient("Sub")
def _sub_grad(op, grad):
    x, y = op.inputs
    return [_unbroadcast(grad, x), _unbroadcast(negative(grad), y)]


@RegisterGradient("Mul")
def _mul_grad(op, grad):
    x, y = op.inputs
    return [_unbroadcast(multiply(grad, y), x), _unbroadcast(multiply(x, grad), y)]


@RegisterGradient("RealDiv")
def _realdiv_grad(op, grad):
    x, y = op.inputs
    gx = realdiv(grad, y)
    gy = multiply(grad, realdiv(realdiv(negative(x), y), y))
    return [_unbroadcast(gx, x), _unbroadcast(gy, y)]


# --- elementwise unary ----------------------------------------------------------------------------
register_op("Neg", unary_infer)


@RegisterGradient("Neg")
def _neg_grad(op, grad):
    return [negative(grad)]


def negative(x, name=None):
    return _unary("Neg", x, name)


# --- AddN -----------------------------------------------------------------------------------------
def _addn_infer(op):
    dt = check_same_dtype(op)
    shape = TensorShape(None)
    for t in op.inputs:
        shape = shape.merge_with(t.shape)
    return [(dt, shape)]


register_op("AddN", _addn_infer)


@RegisterGradient("AddN")
def _addn_grad(op, grad):
    return [grad] * len(op.inputs)


def add_n(inputs, name=None):
    inputs = list(inputs)
    if not inputs:
        raise ValueError("inputs must be a non-empty list of tensors")
    if len(inputs) == 1:
        return array_ops.identity(inputs[0], name=name)
    return _ops.apply_op("AddN", inputs, {"N": len(inputs)}, name).outputs[0]


# --- Cast -----------------------------------------------------------------------------------------
def _cast_infer(op):
    return [(op._attrs["DstT"], op.inputs[0].shape)]


register_op("Cast", _cast_infer)


@RegisterGradient("Cast")
def _cast_grad(op, grad):
    src = op.inputs[0].dtype.base_dtype
    if src.is_floating or src.is_complex:
        if not (op._attrs["DstT"].is_floating or op._attrs["DstT"].is_complex):
            return [None]
        return [cast(grad, src)]
    return [None]


def cast(x, dtype, name=None):
    x = _ops.convert_to_tensor(x)
    dtype = _dt.as_dtype(dtype).base_dtype
    if x.dtype.base_dtype is dtype:
        return x
    return _ops.apply_op("Cast", [x], {"DstT": dtype, "SrcT": x.dtype.base_dtype},
                         name).outputs[0]


def to_float(x, name="ToFloat"):
    return cast(x, _dt.float32, name)


def to_int32(x, name="ToInt32"):
    return cast(x, _dt.int32, name)


def to_int64(x, name="ToInt64"):
    return cast(x, _dt.int64, name)


# --- MatMul ---------------------------------------------------------------------------------------
def _matmul_infer(op):
    dt = check_same_dtype(op, ["a", "b"])
    a, b = op.inputs
    ta, tb = op._attrs["transpose_a"], op._attrs["transpose_b"]
    sa, sb = a.shape.with_rank(2), b.shape.with_rank(2)
    m, k1 = (sa[1], sa[0]) if ta else (sa[0], sa[1])
    k2, n = (sb[1], sb[0]) if tb else (sb[0], sb[1])
    if not k1.is_compatible_with(k2):
        raise ValueError(f"Dimensions must be equal, but are {k1} and {k2}")
    return [(dt, TensorShape([m.value, n.value]))]


register_op("MatMul", _matmul_infer, expensive=True)


@RegisterGradient("MatMul")
def _matmul_grad(op, grad):
    a, b = op.inputs
    ta, tb = op._attrs["transpose_a"], op._attrs["transpose_b"]
    if not ta and not tb:
        return [matmul(grad, b, transpose_b=True), matmul(a, grad, transpose_a=True)]
    if not ta and tb:
        return [matmul(grad, b), matmul(grad, a, transpose_a=True)]
    if ta and not tb:
        return [matmul(b, grad, transpose_b=True), matmul(a, grad)]
    return [matmul(b, grad, transpose_a=True, transpose_b=True),
            matmul(grad, a, transpose_a=True, transpose_b=True)]


def _batch_matmul_infer(op):
    dt = check_same_dtype(op, ["x", "y"])
    a, b = op.inputs
    if a.shape.ndims is None or b.shape.ndims is None:
        return [(dt, TensorShape(None))]
    sa, sb = a.shape.as_list(), b.shape.as_list()
    if len(sa) < 2 or len(sb) < 2:
        raise ValueError("batched matmul needs tensors of rank >= 2")
    adj_a, adj_b = op._attrs["adj_x"], op._attrs["adj_y"]
    m, k1 = (sa[-1], sa[-2]) if adj_a else (sa[-2], sa[-1])
    k2, n = (sb[-1], sb[-2]) if adj_b else (sb[-2], sb[-1])
    if k1 is not None and k2 is not None and k1 != k2:
        raise ValueError(f"Dimensions must be equal, but are {k1} and {k2}")
    from dflab.framework.tensor_shape import broadcast_shapes

    batch = broadcast_shapes(TensorShape(sa[:-2]), TensorShape(sb[:-2]))
    return [(dt, batch.concatenate([m, n]))]


register_op("BatchMatMulV2", _batch_matmul_infer, expensive=True)


@RegisterGradient("BatchMatMulV2")
def _batch_matmul_grad(op, grad):
    a, b = op.inputs
    adj_a, adj_b = op._attrs["adj_x"], op._attrs["adj_y"]
    if not adj_a and not adj_b:
        ga, gb = matmul(grad, b, adjoint_b=True), matmul(a, grad, adjoint_a=True)
    elif not adj_a and adj_b:
        ga, gb = matmul(grad, b), matmul(grad, a, adjoint_a=True)
    elif adj_a and not adj_b:
        ga, gb = matmul(b, grad, adjoint_b=True), matmul(a, grad)
    else:
        ga = matmul(b, grad, adjoint_a=True, adjoint_b=True)
        gb = matmul(grad, a, adjoint_a=True, adjoint_b=True)
    return [_unbroadcast_batch(ga, a), _unbroadcast_batch(gb, b)]


def _unbroadcast_batch(grad, x):
    axes = _static_reduction_axes(grad.shape, x.shape)
    if axes == []:
        return grad
    return _unbroadcast(grad, x)


def matmul(a, b, transpose_a=False, transpose_b=False, adjoint_a=False, adjoint_b=False,
           a_is_sparse=False, b_is_sparse=False, name=None):
    a = _ops.convert_to_tensor(a)
    b = _ops.convert_to_tensor(b, dtype=a.dtype.base_dtype)
    ta, tb = transpose_a or adjoint_a, transpose_b or adjoint_b
    ra, rb = a.shape.ndims, b.shape.ndims
    if ra == 2 and rb == 2:
        return _ops.apply_op("MatMul", [a, b], {"transpose_a": bool(ta), "transpose_b": bool(tb)},
                             name).outputs[0]
    return _ops.apply_op("BatchMatMulV2", [a, b], {"adj_x": bool(ta), "adj_y": bool(tb)},
                         name).outputs[0]


# --- reductions -----------------------------------------------------------------------------------
def _reduction_infer(op):
    x, axes = op.inputs
    from dflab.framework.constant_op import constant_value

    keep = op._attrs["keep_dims"]
    rank = x.shape.ndims
    av = constant_value(axes)
    dt = x.dtype.base_dtype
    if op.type in ("Any", "All"):
        if dt is not _dt.bool:
            raise TypeError(f"{op.type} needs a bool input, got {dt.name}")
    if rank is None or av is None:
        if av is not None and keep:
            return [(dt, TensorShape(None))]
        return [(dt, TensorShape(None))]
    ax = axis_list(av, rank)
    dims = x.shape.as_list()
    if keep:
        out = [1 if i in ax else d for i, d in enumerate(dims)]
    else:
        out = [d for i, d in enumerate(dims) if i not in ax]
    return [(dt, TensorShape(out))]


for _t in ("Sum", "Mean", "Max", "Min", "Prod", "Any", "All"):
    register_op(_t, _reduction_infer)


def _reduce(op_type, input_tensor, axis, keepdims, name, keep_dims=None):
    x = _ops.convert_to_tensor(input_tensor)
    if keep_dims is not None:
        keepdims = keep_dims
    if axis is None:
        if x.shape.ndims is not None:
            axis = list(range(x.shape.ndims))
        else:  # unknown rank: all axes, computed at run time
            axis = _ops.apply_op("Range", [0, array_ops.rank(x), 1], None).outputs[0]
    axis_t = axis if isinstance(axis, _ops.Tensor) else _ops.convert_to_tensor(
        np.asarray(axis, dtype=np.int32))
    return _ops.apply_op(op_type, [x, axis_t], {"keep_dims": bool(keepdims)}, name).outputs[0]


def reduce_sum(input_tensor, axis=None, keepdims=False, name=None, reduction_indices=None,
               keep_dims=None):
    axis = reduction_indices if axis is None else axis
    return _reduce("Sum", input_tensor, axis, keepdims, name, keep_dims)


def _reduced_shape_keepdims(op):
    """The input's shape with reduced axes set to 1 (list or tensor)."""
    x, axes = op.inputs
    from dflab.framework.constant_op import constant_value

    av = constant_value(axes)
    if x.shape.is_fully_defined() and av is not None:
        ax = axis_list(av, x.shape.ndims)
        return [1 if i in ax else d for i, d in enumerate(x.shape.as_list())]
    return _ops.apply_op("ReducedShape", [array_ops.shape(x), axes]).outputs[0]


def _reduced_shape_infer(op):
    return [(_dt.int32, op.inputs[0].shape)]


register_op("ReducedShape", _reduced_shape_infer)
NotDifferentiable("ReducedShape")


@RegisterGradient("Sum")
def _sum_grad(op, grad):
    x = op.inputs[0]
    if not op._attrs["keep_dims"]:
        grad = array_ops.reshape(grad, _reduced_shape_keepdims(op))
    return [_broadcast_to_like(grad, x), None]


def _broadcast_to_like(grad, x):
    if x.shape.is_fully_defined() and grad.shape.is_fully_defined() and \
            grad.shape.as_list() == x.shape.as_list():
        return grad
    return multiply(grad, array_ops.ones_like(x))


# --- Tensor operator overloads (TF1: == and != stay identity comparisons) -----------------------
def _overload(name, builder_name, reverse=False):
    def binary(a, b):
        fn = globals()[builder_name]
        if reverse:
            b = _ops.convert_to_tensor(b, dtype=a.dtype.base_dtype)
            return fn(b, a)
        return fn(a, b)

    binary.__name__ = name
    _ops.Tensor._override_operator(name, binary)


def _install_operators():
    table = {
        "add": "add", "sub": "subtract", "mul": "multiply", "truediv": "truediv",
        "floordiv": "floordiv", "mod": "floormod", "pow": "pow", "matmul": "matmul",
        "and": "logical_and", "or": "logical_or", "xor": "logical_xor", "div": "div",
    }
    for op, builder in table.items():
        _overload(f"__{op}__", builder)
        _overload(f"__r{op}__", builder, reverse=True)
    for op, builder in {"lt": "less", "le": "less_equal", "gt": "greater",
                        "ge": "greater_equal"}.items():
        _overload(f"__{op}__", builder)
    _ops.Tensor._override_operator("__neg__", lambda a: negative(a))
    _ops.Tensor._override_operator("__abs__", lambda a: globals()["abs"](a))
    _ops.Tensor._override_operator("__invert__", lambda a: globals()["logical_not"](a))
    _ops.Tensor._override_operator(
        "__getitem__", lambda a, key: array_ops._slice_helper(a, key))


__all__ = [
    "add", "subtract", "multiply", "negative", "add_n", "cast", "to_float", "to_int32",
    "to_int64", "matmul", "reduce_sum",
]
