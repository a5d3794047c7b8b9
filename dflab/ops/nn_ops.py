"""Neural-network ops with their own kernels: activations, softmax, the softmax cross-entropy
losses, bias add, ``L2Loss``, ``InTopKV2`` and ``TopKV2``; plus ``dropout``. Convolution and
pooling live in ``dflab.ops.conv_ops`` and are re-exported here (TF keeps them in nn_ops).

Each op: schema (shape and dtype rule), gradient and builder side by side, as in ``math_ops``.
Gradients that TF computes with a dedicated op (``ReluGrad``, ``BiasAddGrad``,
``Conv2DBackpropInput``, ``MaxPoolGrad``…) do so here too, so the backward graph reads like
TF's. Kernels are in ``dflab.kernels.nn_kernels`` (convolution and pooling in
``conv_kernels``); composite ops built from these and from math ops (moments, batch norm,
sigmoid cross-entropy…) are in ``dflab.ops.nn_impl``, except
``dropout``, which lives here as in TF. The public ``tf.nn`` names are gathered in
``dflab.nn``; none of these are top-level ``tf.*`` names.
"""

from __future__ import annotations

import collections
import numbers

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.constant_op import builder_constant, constant_value, index_constant
from dflab.framework.eager_tensor import EagerTensor
from dflab.framework.registry import NotDifferentiable, RegisterGradient, register_op
from dflab.framework.tensor_shape import TensorShape
from dflab.ops import array_ops, math_ops, random_ops
from dflab.ops.conv_ops import (  # noqa: F401 - conv and pool builders are tf.nn names too
    _apply,
    _check_data_format,
    _check_float,
    _check_real,
    avg_pool,
    conv2d,
    conv2d_backprop_filter,
    conv2d_backprop_input,
    conv2d_transpose,
    conv_output_size,
    max_pool,
)
from dflab.ops.op_util import as_data, check_same_dtype


def _norm_axis(axis, rank, what="axis"):
    if rank is None:
        return axis
    if not -rank <= axis < rank:
        raise ValueError(f"{what} {axis} is out of range for a tensor of rank {rank}")
    return axis % rank


# ==============================================================================================
# Activations
# ==============================================================================================
def _float_unary_infer(op):
    t = op.inputs[0]
    _check_float(op, t, "features")
    return [(t.dtype.base_dtype, t.shape)]


def _real_unary_infer(op):
    t = op.inputs[0]
    _check_real(op, t)
    return [(t.dtype.base_dtype, t.shape)]


def _activation_grad_infer(op):
    """``XxxGrad(gradients, features_or_outputs)``: same dtype, shapes must agree."""
    dt = check_same_dtype(op, ["gradients", "features"])
    shape = op.inputs[0].shape.merge_with(op.inputs[1].shape)
    return [(dt, shape)]


def _register_activation(op_type, infer, grad_from_output):
    """Register ``op_type`` and ``op_type + 'Grad'``; the gradient feeds the grad op the op's
    output (when the derivative is cheapest from it, as for Relu and Elu) or its input."""
    grad_type = op_type + "Grad"
    register_op(op_type, infer)
    register_op(grad_type, _activation_grad_infer)

    @RegisterGradient(op_type)
    def _grad(op, grad):
        src = op.outputs[0] if grad_from_output else op.inputs[0]
        return [_apply(grad_type, [grad, src], op.attrs)]

    return _grad


_register_activation("Relu", _real_unary_infer, grad_from_output=True)
_register_activation("Relu6", _real_unary_infer, grad_from_output=True)
_register_activation("Elu", _float_unary_infer, grad_from_output=True)
_register_activation("Selu", _float_unary_infer, grad_from_output=True)
_register_activation("LeakyRelu", _float_unary_infer, grad_from_output=False)
_register_activation("Softplus", _float_unary_infer, grad_from_output=False)
_register_activation("Softsign", _float_unary_infer, grad_from_output=False)


# Second derivatives. ReluGrad and friends are piecewise linear in their first input and
# piecewise constant in the second, so the backward op is the same grad op again.
def _piecewise_grad_grad(op, grad):
    return [_apply(op.type, [grad, op.inputs[1]], op.attrs),
            array_ops.zeros_like(op.inputs[1])]


for _t in ("ReluGrad", "Relu6Grad", "LeakyReluGrad"):
    RegisterGradient(_t)(_piecewise_grad_grad)


@RegisterGradient("EluGrad")
def _elu_grad_grad(op, grad):
    # EluGrad(g, y) = g * (y > 0 ? 1 : y + 1): d/dy = g where y <= 0.
    g, y = op.inputs
    neg = math_ops.cast(math_ops.less_equal(y, array_ops.zeros_like(y)), y.dtype.base_dtype)
    return [_apply("EluGrad", [grad, y]), math_ops.multiply(math_ops.multiply(grad, g), neg)]


@RegisterGradient("SoftplusGrad")
def _softplus_grad_grad(op, grad):
    # SoftplusGrad(g, x) = g * sigmoid(x): d/dx = g * s * (1 - s).
    g, x = op.inputs
    s = math_ops.sigmoid(x)
    ds = math_ops.multiply(s, math_ops.subtract(array_ops.ones_like(s), s))
    return [_apply("SoftplusGrad", [grad, x]),
            math_ops.multiply(math_ops.multiply(grad, g), ds)]


def relu(features, name=None):
    """max(features, 0)."""
    return _ops.apply_unary("Relu", features, name)


def relu6(features, name=None):
    """min(max(features, 0), 6)."""
    return _ops.apply_unary("Relu6", features, name)


def elu(features, name=None):
    """``features`` where positive, ``exp(features) - 1`` elsewhere."""
    return _ops.apply_unary("Elu", features, name)


def selu(features, name=None):
    """Scaled ELU with the self-normalising constants of Klambauer et al. (2017)."""
    return _ops.apply_unary("Selu", features, name)


def leaky_relu(features, alpha=0.2, name=None):
    """``features`` where positive, ``alpha * features`` elsewhere."""
    features = _ops.convert_to_tensor(features, name="features")
    if features.dtype.base_dtype.is_integer:
        features = math_ops.cast(features, _dt.float32)
    return _apply("LeakyRelu", [features], {"alpha": float(alpha)}, name)


def softplus(features, name=None):
    """log(exp(features) + 1), computed without overflow."""
    return _ops.apply_unary("Softplus", features, name)


def softsign(features, name=None):
    """features / (abs(features) + 1)."""
    return _ops.apply_unary("Softsign", features, name)


# ==============================================================================================
# Softmax and log-softmax
# ==============================================================================================
def _softmax_infer(op):
    t = op.inputs[0]
    _check_float(op, t, "logits")
    rank = t.shape.ndims
    if rank == 0:
        raise ValueError("logits must have rank at least 1")
    _norm_axis(op.get_attr("axis"), rank)
    return [(t.dtype.base_dtype, t.shape)]


# dflab's Softmax/LogSoftmax carry the reduction axis as an attribute (TF's op is fixed to the
# last axis and its Python wrapper transposes around it); the results are the same.
register_op("Softmax", _softmax_infer)
register_op("LogSoftmax", _softmax_infer)


@RegisterGradient("Softmax")
def _softmax_grad(op, grad):
    # dx = (g - sum(g * y, axis)) * y
    y, axis = op.outputs[0], op.get_attr("axis")
    inner = math_ops.reduce_sum(math_ops.multiply(grad, y), axis, keepdims=True)
    return [math_ops.multiply(math_ops.subtract(grad, inner), y)]


@RegisterGradient("LogSoftmax")
def _log_softmax_grad(op, grad):
    # dx = g - sum(g, axis) * softmax(x)
    axis = op.get_attr("axis")
    sm = math_ops.exp(op.outputs[0])
    return [math_ops.subtract(grad, math_ops.multiply(
        math_ops.reduce_sum(grad, axis, keepdims=True), sm))]


def _axis_or_dim(axis, dim, default=-1):
    if dim is not None:
        if axis is not None:
            raise ValueError("Cannot specify both 'axis' and 'dim'")
        axis = dim
    return default if axis is None else int(axis)


def _axis_attrs(axis):
    """``{"axis": axis}``, made once per axis: an eager softmax takes the fast path."""
    attrs = _AXIS_ATTRS.get(axis)
    if attrs is None:
        attrs = _AXIS_ATTRS[axis] = _ops.FrozenAttrs(axis=axis)
    return attrs


_AXIS_ATTRS: dict = {}


def softmax(logits, axis=None, name=None, dim=None):
    """exp(logits) / sum(exp(logits), axis)."""
    return _ops.apply_unary("Softmax", logits, name, _axis_attrs(_axis_or_dim(axis, dim)))


def log_softmax(logits, axis=None, name=None, dim=None):
    """logits - log(sum(exp(logits), axis))."""
    return _ops.apply_unary("LogSoftmax", logits, name, _axis_attrs(_axis_or_dim(axis, dim)))


# ==============================================================================================
# Softmax cross-entropy losses
# ==============================================================================================
def _xent_infer(op):
    logits, labels = op.inputs
    dt = check_same_dtype(op, ["features", "labels"])
    _check_float(op, logits, "features")
    try:
        shape = logits.shape.merge_with(labels.shape)
    except ValueError:
        raise ValueError(f"logits and labels must have the same shape, got logits shape "
                         f"{logits.shape} and labels shape {labels.shape}") from None
    if shape.ndims == 0:
        raise ValueError("logits and labels must have rank at least 1")
    if shape.ndims is None:
        return [(dt, TensorShape(None)), (dt, shape)]
    axis = _norm_axis(op.get_attr("axis"), shape.ndims, "dim")
    dims = shape.as_list()
    return [(dt, TensorShape(dims[:axis] + dims[axis + 1:])), (dt, shape)]


register_op("SoftmaxCrossEntropyWithLogits", _xent_infer)


def _broadcast_mul(vec, mat, axis):
    """``vec`` (``mat``'s shape without ``axis``) times ``mat``, broadcast along ``axis``."""
    return math_ops.multiply(array_ops.expand_dims(vec, axis), mat)


def _is_zeros(t):
    if isinstance(t, _ops.Tensor) and t.is_eager:
        return _const_is_zero(t)
    return isinstance(t, _ops.Tensor) and t.op.type in ("ZerosLike", "Fill") and (
        t.op.type == "ZerosLike" or _const_is_zero(t.op.inputs[1]))


def _const_is_zero(t):
    v = constant_value(t)
    return v is not None and not v.any()


def _xent_logits_grad(op, grad_loss, grad_grad, axis):
    """Gradient of a softmax cross-entropy op w.r.t. its logits; includes the second-order
    term when something differentiates the op's ``backprop`` output."""
    logits = op.inputs[0]
    grad = _broadcast_mul(grad_loss, op.outputs[1], axis)
    if grad_grad is not None and not _is_zeros(grad_grad):
        sm = softmax(logits, axis=axis)
        inner = math_ops.reduce_sum(math_ops.multiply(grad_grad, sm), axis, keepdims=True)
        grad = math_ops.add(grad, math_ops.multiply(math_ops.subtract(grad_grad, inner), sm))
    return grad


@RegisterGradient("SoftmaxCrossEntropyWithLogits")
def _xent_grad(op, grad_loss, grad_grad):
    axis = op.get_attr("axis")
    logits = op.inputs[0]
    grad_logits = _xent_logits_grad(op, grad_loss, grad_grad, axis)
    grad_labels = _broadcast_mul(grad_loss, math_ops.negative(log_softmax(logits, axis)), axis)
    return [grad_logits, grad_labels]


def _sentinel_check(sentinel, fn_name):
    if sentinel is not None:
        raise ValueError(f"Only call `{fn_name}` with named arguments (labels=..., "
                         "logits=..., ...)")


def softmax_cross_entropy_with_logits_v2(labels, logits, axis=None, name=None, dim=None):
    """-sum(labels * log_softmax(logits), axis); gradients flow into labels as well."""
    axis = _axis_or_dim(axis, dim)
    with _ops.name_scope(name, "softmax_cross_entropy_with_logits",
                         [v for v in (labels, logits) if _ops.is_tensor_like(v)]) as scope:
        logits = _ops.convert_to_tensor(logits, name="logits")
        labels = _ops.convert_to_tensor(labels, dtype=None if _ops.is_tensor_like(labels)
                                        else logits.dtype.base_dtype, name="labels")
        if labels.dtype.base_dtype is not logits.dtype.base_dtype:
            labels = math_ops.cast(labels, logits.dtype.base_dtype)
        op = _ops.apply_op("SoftmaxCrossEntropyWithLogits", [logits, labels], {"axis": axis},
                           scope)
        return op.outputs[0]


def softmax_cross_entropy_with_logits(_sentinel=None, labels=None, logits=None, dim=-1,
                                      name=None):
    """TF1's (deprecated) softmax cross-entropy: like ``_v2`` but no gradient into labels."""
    _sentinel_check(_sentinel, "softmax_cross_entropy_with_logits")
    with _ops.name_scope(name, "softmax_cross_entropy_with_logits_sg",
                         [v for v in (labels, logits) if _ops.is_tensor_like(v)]) as scope:
        labels = array_ops.stop_gradient(labels, name="labels_stop_gradient")
        return softmax_cross_entropy_with_logits_v2(labels=labels, logits=logits, axis=dim,
                                                    name=scope)


def _sparse_xent_infer(op):
    logits, labels = op.inputs
    _check_float(op, logits, "features")
    dt = logits.dtype.base_dtype
    if labels.dtype.base_dtype not in (_dt.int32, _dt.int64):
        raise TypeError(f"labels must be int32 or int64, got {labels.dtype.name}")
    ls, lb = logits.shape, labels.shape
    if ls.ndims == 0:
        raise ValueError("logits must have rank at least 1")
    if ls.ndims is not None and lb.ndims is not None and lb.ndims != ls.ndims - 1:
        raise ValueError(f"Rank mismatch: Rank of labels (received {lb.ndims}) should equal "
                         f"rank of logits minus 1 (received {ls.ndims}).")
    batch = lb
    if ls.ndims is not None:
        try:
            batch = lb.merge_with(TensorShape(ls.as_list()[:-1]))
        except ValueError:
            raise ValueError(f"Shape mismatch: The shape of labels (received {lb}) should "
                             f"equal the shape of logits except for the last dimension "
                             f"(received {ls}).") from None
        backprop = TensorShape(batch.as_list() + [ls.as_list()[-1]])
    else:
        backprop = TensorShape(None) if batch.ndims is None else TensorShape(
            batch.as_list() + [None])
    return [(dt, batch), (dt, backprop)]


# dflab's op accepts any batch rank (TF's is 2-D and its wrapper reshapes around it).
register_op("SparseSoftmaxCrossEntropyWithLogits", _sparse_xent_infer)


@RegisterGradient("SparseSoftmaxCrossEntropyWithLogits")
def _sparse_xent_grad(op, grad_loss, grad_grad):
    return [_xent_logits_grad(op, grad_loss, grad_grad, -1), None]


def sparse_softmax_cross_entropy_with_logits(_sentinel=None, labels=None, logits=None,
                                             name=None):
    """-log_softmax(logits)[labels] for integer class labels; a label outside
    [0, num_classes) is an InvalidArgumentError at run time."""
    _sentinel_check(_sentinel, "sparse_softmax_cross_entropy_with_logits")
    with _ops.name_scope(name, "SparseSoftmaxCrossEntropyWithLogits",
                         [v for v in (labels, logits) if _ops.is_tensor_like(v)]) as scope:
        logits = _ops.convert_to_tensor(logits, name="logits")
        labels = _ops.convert_to_tensor(labels, name="labels")
        op = _ops.apply_op("SparseSoftmaxCrossEntropyWithLogits", [logits, labels], None,
                           scope)
        return op.outputs[0]


# ==============================================================================================
# BiasAdd
# ==============================================================================================
def bias_channel_axis(rank, data_format):
    """Axis that a bias is added along: last for NHWC, third from last for NCHW (TF)."""
    if data_format == "NCHW" and rank >= 3:
        return rank - 3
    return rank - 1


def _bias_add_infer(op):
    value, bias = op.inputs
    dt = check_same_dtype(op, ["value", "bias"])
    if not dt.is_numeric:
        raise TypeError(f"BiasAdd needs numeric inputs, got {dt.name}")
    vs = value.shape.with_rank_at_least(2)
    bs = bias.shape.with_rank(1)
    if vs.ndims is None:
        return [(dt, vs)]
    c = bias_channel_axis(vs.ndims, op.get_attr("data_format"))
    dims = vs.as_list()
    if dims[c] is not None and bs[0].value is not None and dims[c] != bs[0].value:
        raise ValueError(f"Dimensions must be equal, but are {dims[c]} and {bs[0].value}: "
                         "bias size must match the channel dimension of value")
    if dims[c] is None:
        dims[c] = bs[0].value
    return [(dt, TensorShape(dims))]


def _bias_add_grad_infer(op):
    g = op.inputs[0]
    gs = g.shape.with_rank_at_least(2)
    c = None if gs.ndims is None else gs.as_list()[
        bias_channel_axis(gs.ndims, op.get_attr("data_format"))]
    return [(g.dtype.base_dtype, TensorShape([c]))]


register_op("BiasAdd", _bias_add_infer)
register_op("BiasAddGrad", _bias_add_grad_infer)


@RegisterGradient("BiasAdd")
def _bias_add_grad(op, grad):
    fmt = op.get_attr("data_format")
    return [grad, _apply("BiasAddGrad", [grad], {"data_format": fmt})]


@RegisterGradient("BiasAddGrad")
def _bias_add_grad_grad(op, grad):
    # BiasAddGrad sums over every axis but the channel axis: its adjoint broadcasts back.
    x = op.inputs[0]
    rank = x.shape.ndims
    fmt = op.get_attr("data_format")
    if rank is not None and bias_channel_axis(rank, fmt) != rank - 1:
        grad = array_ops.reshape(grad, [-1] + [1] * (rank - 1 - bias_channel_axis(rank, fmt)))
    return [math_ops.add(array_ops.zeros_like(x), grad)]


# BiasAdd's attributes per data format, made once: an eager bias add takes the fast path.
_BIAS_ATTRS = {fmt: _ops.FrozenAttrs(data_format=fmt) for fmt in ("NHWC", "NCHW")}


def bias_add(value, bias, data_format=None, name=None):
    """``value + bias`` with ``bias`` (1-D) added along the channel axis."""
    if type(value) is EagerTensor and type(bias) is not EagerTensor and \
            hasattr(bias, "_as_tensor"):
        bias = bias._as_tensor()  # an eager variable: its read
    if type(value) is EagerTensor and type(bias) is EagerTensor and value.dtype is bias.dtype:
        attrs = _BIAS_ATTRS.get(data_format or "NHWC")
        if attrs is not None:  # executing eagerly: nothing to convert, no scope to name ops
            return _ops.apply_binary("BiasAdd", value, bias, name, attrs)
    fmt = _check_data_format(data_format or "NHWC")
    with _ops.name_scope(name, "BiasAdd", [v for v in (value, bias)
                                           if _ops.is_tensor_like(v)]) as scope:
        value = _ops.convert_to_tensor(value, name="input")
        bias = _ops.convert_to_tensor(bias, dtype=value.dtype.base_dtype, name="bias")
        return _ops.apply_binary("BiasAdd", value, bias, scope, _BIAS_ATTRS[fmt])


# ==============================================================================================
# L2Loss, InTopK, TopK
# ==============================================================================================
def _l2_loss_infer(op):
    t = op.inputs[0]
    _check_float(op, t, "t")
    return [(t.dtype.base_dtype, TensorShape([]))]


register_op("L2Loss", _l2_loss_infer)


@RegisterGradient("L2Loss")
def _l2_loss_grad(op, grad):
    return [math_ops.multiply(op.inputs[0], grad)]


def l2_loss(t, name=None):
    """sum(t ** 2) / 2."""
    return _ops.apply_unary("L2Loss", t, name)


def _in_top_k_infer(op):
    pred, targets, k = op.inputs
    _check_float(op, pred, "predictions")
    if targets.dtype.base_dtype not in (_dt.int32, _dt.int64):
        raise TypeError(f"targets must be int32 or int64, got {targets.dtype.name}")
    if k.dtype.base_dtype is not targets.dtype.base_dtype:
        raise TypeError("k must have the same dtype as targets")
    ps = pred.shape.with_rank(2)
    ts = targets.shape.with_rank(1)
    k.shape.with_rank(0)
    try:
        batch = ts.merge_with(TensorShape([ps.as_list()[0]]))
    except ValueError:
        raise ValueError(f"First dimension of predictions {ps[0].value} must match length of "
                         f"targets {ts[0].value}") from None
    return [(_dt.bool, batch)]


register_op("InTopKV2", _in_top_k_infer)
NotDifferentiable("InTopKV2")


def in_top_k(predictions, targets, k, name=None):
    """Whether ``targets[i]`` is among the top ``k`` of ``predictions[i]``; ties at the
    boundary count as in (TF); a non-finite row or out-of-range target gives False."""
    with _ops.name_scope(name, "in_top_k"):
        targets = _ops.convert_to_tensor(targets, name="targets")
        k = _ops.convert_to_tensor(k, dtype=targets.dtype.base_dtype, name="k")
        return _apply("InTopKV2", [predictions, targets, k])


def _top_k_infer(op):
    x, k = op.inputs
    _check_real(op, x, "input")
    if not k.dtype.base_dtype.is_integer:
        raise TypeError("k must be an integer")
    k.shape.with_rank(0)
    xs = x.shape.with_rank_at_least(1)
    kv = constant_value(k)
    kv = None if kv is None else int(kv)
    if kv is not None and kv < 0:
        raise ValueError(f"Need k >= 0, got {kv}")
    if xs.ndims is None:
        return [(x.dtype.base_dtype, TensorShape(None)), (_dt.int32, TensorShape(None))]
    dims = xs.as_list()
    if kv is not None and dims[-1] is not None and dims[-1] < kv:
        raise ValueError(f"input must have at least k={kv} columns, got {dims[-1]}")
    out = TensorShape(dims[:-1] + [kv])
    return [(x.dtype.base_dtype, out), (_dt.int32, out)]


register_op("TopKV2", _top_k_infer)


@RegisterGradient("TopKV2")
def _top_k_grad(op, grad, _grad_indices):
    # Scatter each row's gradients back to the positions the top k came from.
    x, idx = op.inputs[0], op.outputs[1]
    n = x.shape.as_list()[-1] if x.shape.ndims is not None else None
    depth = n if n is not None else array_ops.shape(x)[-1]
    hot = array_ops.one_hot(idx, depth, dtype=grad.dtype.base_dtype)
    return [math_ops.reduce_sum(math_ops.multiply(array_ops.expand_dims(grad, -1), hot), -2),
            None]


# TF's result types of several outputs: named tuples (``top_k(x).values``).
TopKOutput = collections.namedtuple("TopKV2", ["values", "indices"])


def top_k(input, k=1, sorted=True, name=None):  # noqa: A002
    """The ``k`` largest entries of the last axis and their indices (ties: lower index first)."""
    k = _ops.convert_to_tensor(k, dtype=_dt.int32, name="k")
    op = _ops.apply_op("TopKV2", [as_data(input), k], {"sorted": bool(sorted)}, name)
    return TopKOutput(op.outputs[0], op.outputs[1])


# ==============================================================================================
# Dropout (TF keeps it in nn_ops too; it is built from random_uniform and floor)
# ==============================================================================================
def _noise_shape(x, noise_shape):
    if noise_shape is None:
        return array_ops.shape(x)
    if isinstance(noise_shape, (list, tuple)) and x.shape.ndims == len(noise_shape):
        # TF fills unknown noise dims from x's static shape.
        dims = x.shape.as_list()
        noise_shape = [d if n is None else n for n, d in zip(noise_shape, dims)]
        if any(d is None for d in noise_shape):
            sx = array_ops.shape(x)
            noise_shape = [sx[i] if d is None else d for i, d in enumerate(noise_shape)]
    return noise_shape


def dropout(x, keep_prob=None, noise_shape=None, seed=None, name=None, rate=None):
    """Keep each element with probability ``keep_prob`` (scaled by ``1 / keep_prob``), zero it
    otherwise. TF1 accepts ``keep_prob`` or ``rate = 1 - keep_prob``."""
    if keep_prob is not None and rate is not None:
        raise ValueError("Cannot specify both 'keep_prob' and 'rate'")
    if keep_prob is None and rate is None:
        raise ValueError("You must provide a rate to dropout.")
    if type(x) is EagerTensor and noise_shape is None and x.dtype.is_floating:
        keep = keep_prob if rate is None else None if type(rate) is not float else 1 - rate
        if type(keep) is float and 0 < keep < 1:
            return _eager_dropout(x, keep, seed)
    values = [v for v in (x, keep_prob, rate) if _ops.is_tensor_like(v)]
    with _ops.name_scope(name, "dropout", values) as scope:
        x = _ops.convert_to_tensor(x, name="x")
        dt = x.dtype.base_dtype
        if not dt.is_floating:
            raise ValueError("x has to be a floating point tensor since it's going to be "
                             f"scaled. Got a {dt.name} tensor instead.")
        if keep_prob is not None:
            if isinstance(keep_prob, numbers.Real) and not 0 < keep_prob <= 1:
                raise ValueError("keep_prob must be a scalar tensor or a float in the range "
                                 f"(0, 1], got {keep_prob:g}")
            keep = _ops.convert_to_tensor(keep_prob, dtype=dt, name="keep_prob")
        else:
            if isinstance(rate, numbers.Real) and not 0 <= rate < 1:
                raise ValueError("rate must be a scalar tensor or a float in the range [0, 1), "
                                 f"got {rate:g}")
            if isinstance(rate, numbers.Real):
                keep = builder_constant(1 - rate, dtype=dt, name="keep_prob")
            else:
                rate_t = _ops.convert_to_tensor(rate, dtype=dt, name="rate")
                keep = math_ops.subtract(builder_constant(1, dtype=dt), rate_t, name="keep_prob")
        if keep.shape.ndims not in (None, 0):
            raise ValueError(f"keep_prob must be a scalar, got shape {keep.shape}")
        kv = constant_value(keep)
        if kv is not None and float(kv) == 1.0:
            return x
        # floor(keep_prob + U[0, 1)) is 1 with probability keep_prob, else 0.
        random_tensor = math_ops.add(keep, random_ops.random_uniform(
            _noise_shape(x, noise_shape), seed=seed, dtype=dt))
        binary = math_ops.floor(random_tensor)
        ret = math_ops.multiply(math_ops.truediv(x, keep), binary, name=scope)
        ret.set_shape(x.shape)
        return ret


def _eager_dropout(x, keep: float, seed):
    """``dropout`` of an eager tensor with a Python probability: the ops of the graph's (so
    the same random numbers, bits and gradients), without its scopes, conversions and static
    checks (a small eager dropout: 42 against 13 us). ``random_uniform``'s ``* (1 - 0) + 0``
    is left out: it gives back the bits of its sample in [0, 1)."""
    dt = x.dtype
    keep_t = _ops.get_default_graph().scalar(keep, dt)
    sample = random_ops._standard_sample("RandomUniform", index_constant(x._value.shape), dt,
                                         seed)
    return math_ops.multiply(math_ops.truediv(x, keep_t),
                             math_ops.floor(math_ops.add(keep_t, sample)))


__all__: list[str] = []
