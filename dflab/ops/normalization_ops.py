"""Normalization ops: local response normalization (``tf.nn.lrn``), the normalization AlexNet
and the CIFAR-10 tutorial use (each value divided by ``(bias + alpha * sum of squares over
depth_radius neighbours along the last axis) ** beta``), and fused batch normalization
(``tf.nn.fused_batch_norm``: TF's ``FusedBatchNormV3`` and its gradient op, one kernel each
where the composite is a dozen ops).

Schemas, gradients (the ``LRNGrad`` and ``FusedBatchNormGradV3`` ops, as TF's) and builders side
by side; kernels in ``dflab.kernels.normalization_kernels``.
"""

from __future__ import annotations

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.constant_op import constant
from dflab.framework.registry import NotDifferentiable, RegisterGradient, register_op
from dflab.framework.tensor_shape import TensorShape
from dflab.ops import array_ops, math_ops

_LRN_ATTRS = ("depth_radius", "bias", "alpha", "beta")


def _lrn_infer(op):
    x = op.inputs[0]
    if x.dtype.base_dtype not in (_dt.float16, _dt.float32):  # TF has no float64 LRN
        raise TypeError(f"Value passed to parameter 'input' has DataType "
                        f"{x.dtype.base_dtype.name} not in list of allowed values: float16, "
                        "float32")
    x.shape.with_rank(4)
    return [(x.dtype.base_dtype, x.shape)]


def _lrn_grad_infer(op):
    grads, image, out = op.inputs
    for t in op.inputs:
        t.shape.with_rank(4)
    return [(image.dtype.base_dtype, image.shape)]


register_op("LRN", _lrn_infer)
register_op("LRNGrad", _lrn_grad_infer)
NotDifferentiable("LRNGrad")


@RegisterGradient("LRN")
def _lrn_grad(op, grad):
    attrs = {k: op.get_attr(k) for k in _LRN_ATTRS}
    return [_ops.apply_op("LRNGrad", [grad, op.inputs[0], op.outputs[0]], attrs).outputs[0]]


def local_response_normalization(input, depth_radius=5, bias=1.0, alpha=1.0,  # noqa: A002
                                 beta=0.5, name=None):
    """``input / (bias + alpha * sqr_sum) ** beta`` where ``sqr_sum[..., d]`` sums the
    squares of ``input[..., d - depth_radius : d + depth_radius + 1]`` (4-D input)."""
    x = _ops.convert_to_tensor(input)
    attrs = {"depth_radius": int(depth_radius), "bias": float(bias), "alpha": float(alpha),
             "beta": float(beta)}
    return _ops.apply_op("LRN", [x], attrs, name).outputs[0]


lrn = local_response_normalization


# --- fused batch normalization -------------------------------------------------------------
# TF's three generations of the op: V2 lets the parameters' type ``U`` differ from the input's
# (float32 statistics of a float16 input), V3 adds a sixth output. dflab builds V3; the others
# are here for GraphDefs that name them (graphs of older TFs, converted).
FUSED_BATCH_NORMS = {"FusedBatchNorm": 5, "FusedBatchNormV2": 5, "FusedBatchNormV3": 6}
FUSED_BATCH_NORM_GRADS = {"FusedBatchNormGrad": 5, "FusedBatchNormGradV2": 5,
                          "FusedBatchNormGradV3": 6}
_CHANNEL_AXES = {"NHWC": -1, "NDHWC": -1, "NCHW": 1, "NCDHW": 1}


def fused_bn_attrs(attrs):
    """``(epsilon, exponential_avg_factor, data_format, is_training)`` of a fused batch norm
    node, with TF's defaults for what an imported node leaves out."""
    fmt = attrs.get("data_format", "NHWC")
    fmt = fmt.decode() if isinstance(fmt, bytes) else fmt
    return (float(attrs.get("epsilon", 1e-4)), float(attrs.get("exponential_avg_factor", 1.0)),
            fmt, bool(attrs.get("is_training", True)))


def fused_bn_channel_axis(fmt: str, rank: int) -> int:
    return _CHANNEL_AXES[fmt] % rank


def _check_fused_bn_input(op, x, fmt):
    if fmt not in _CHANNEL_AXES:
        raise ValueError(f"{op.type}: invalid data_format {fmt!r} (NHWC, NCHW, NDHWC or NCDHW)")
    if x.dtype.base_dtype not in (_dt.float16, _dt.float32, _dt.float64):
        raise TypeError(f"Value passed to parameter 'x' of '{op.type}' has DataType "
                        f"{x.dtype.base_dtype.name} not in list of allowed values: float16, "
                        "float32, float64")
    if x.shape.ndims is not None and x.shape.ndims != len(fmt):
        raise ValueError(f"{op.type}: input must be {len(fmt)}-dimensional for data_format "
                         f"{fmt}, got shape {x.shape}")


def _check_params(op, params, names, x_dtype):
    """The per-channel inputs share a float type ``U``: float32, or the input's own."""
    u = params[0].dtype.base_dtype
    if u not in (_dt.float32, x_dtype):
        raise TypeError(f"Value passed to parameter '{names[0]}' of '{op.type}' has DataType "
                        f"{u.name}: expected float32 or the input's {x_dtype.name}")
    for t, nm in zip(params[1:], names[1:]):
        if t.dtype.base_dtype is not u:
            raise TypeError(f"Input '{nm}' of '{op.type}' Op has type {t.dtype.base_dtype.name} "
                            f"that does not match type {u.name} of argument '{names[0]}'")
    return u


def _channels(op, x, fmt, vectors, names):
    """The channel count, merged from ``x`` and each 1-D per-channel input."""
    channels = TensorShape([None])
    if x.shape.ndims is not None:
        channels = TensorShape([x.shape[fused_bn_channel_axis(fmt, x.shape.ndims)].value])
    for t, nm in zip(vectors, names):
        try:
            channels = channels.merge_with(t.shape.with_rank(1))
        except ValueError:
            raise ValueError(f"{op.type}: {nm} must be a vector of the {channels[0].value} "
                             f"channels, got shape {t.shape}") from None
    return channels


def _fused_bn_infer(op):
    x, scale, offset, mean, variance = op.inputs
    _, factor, fmt, training = fused_bn_attrs(op.attrs)
    _check_fused_bn_input(op, x, fmt)
    u = _check_params(op, [scale, offset, mean, variance],
                      ["scale", "offset", "mean", "variance"], x.dtype.base_dtype)
    # Training with a factor of 1 reads no statistics: TF passes empty vectors.
    stats = [] if training and factor == 1.0 else [mean, variance]
    c = _channels(op, x, fmt, [scale, offset] + stats,
                  ["scale", "offset", "mean", "variance"])
    outs = [(x.dtype.base_dtype, x.shape)] + [(u, c)] * 4
    return outs + [(u, TensorShape(None))] * (FUSED_BATCH_NORMS[op.type] - 5)


def _fused_bn_grad_infer(op):
    dy, x, scale, mean, variance = op.inputs[:5]
    _, _, fmt, _ = fused_bn_attrs(op.attrs)
    _check_fused_bn_input(op, x, fmt)
    if dy.dtype.base_dtype is not x.dtype.base_dtype:
        raise TypeError(f"Input 'x' of '{op.type}' Op has type {x.dtype.base_dtype.name} that "
                        f"does not match type {dy.dtype.base_dtype.name} of argument "
                        "'y_backprop'")
    u = _check_params(op, [scale, mean, variance],
                      ["scale", "reserve_space_1", "reserve_space_2"], x.dtype.base_dtype)
    c = _channels(op, x, fmt, [scale, mean, variance],
                  ["scale", "reserve_space_1", "reserve_space_2"])
    shape = x.shape.merge_with(dy.shape)
    return [(x.dtype.base_dtype, shape), (u, c), (u, c), (u, TensorShape([0])),
            (u, TensorShape([0]))]


for _name in FUSED_BATCH_NORMS:
    register_op(_name, _fused_bn_infer)
for _name in FUSED_BATCH_NORM_GRADS:
    register_op(_name, _fused_bn_grad_infer)


def _grad_op_type(op_type):
    return op_type.replace("FusedBatchNorm", "FusedBatchNormGrad")


@RegisterGradient("FusedBatchNorm")
@RegisterGradient("FusedBatchNormV2")
@RegisterGradient("FusedBatchNormV3")
def _fused_bn_grad(op, grad_y, *unused):
    """TF's rule: only ``y``'s gradient flows back (the statistics' outputs feed moving
    averages, not the loss); training reads the batch statistics the forward op saved in its
    reserve spaces, inference the population statistics it was given."""
    x, scale = op.inputs[0], op.inputs[1]
    _, _, _, training = fused_bn_attrs(op.attrs)
    if training:
        saved = [op.outputs[3], op.outputs[4]] + list(op.outputs[5:])
    else:
        saved = [op.inputs[3], op.inputs[4]] + list(op.outputs[5:])
    attrs = {k: op.get_attr(k) for k in ("epsilon", "data_format", "is_training")
             if k in op.attrs}
    grad = _ops.apply_op(_grad_op_type(op.type), [grad_y, x, scale] + saved, attrs)
    return [grad.outputs[0], grad.outputs[1], grad.outputs[2], None, None]


@RegisterGradient("FusedBatchNormGrad")
@RegisterGradient("FusedBatchNormGradV2")
@RegisterGradient("FusedBatchNormGradV3")
def _fused_bn_grad_grad(op, grad_dx, grad_dscale, grad_doffset, *unused):
    """Second order: the gradient op's adjoint, in closed form from ordinary ops (so a tape
    and ``tf.gradients`` both take it). TF's rule for what depends on what: training, the
    statistics are the batch's, recomputed from ``x``; inference, the given population ones,
    constants (no gradient into them, as TF)."""
    dy, x, scale, mean, variance = op.inputs[:5]
    epsilon, _, fmt, training = fused_bn_attrs(op.attrs)
    u, t = scale.dtype.base_dtype, x.dtype.base_dtype
    axis = fused_bn_channel_axis(fmt, len(fmt))
    axes = [i for i in range(len(fmt)) if i != axis]

    def wide(v):  # a per-channel vector against the input
        return array_ops.reshape(v, [-1 if i == axis else 1 for i in range(len(fmt))])

    def total(v):
        return math_ops.reduce_sum(v, axes)

    def given(g, like):
        return array_ops.zeros_like(like) if g is None else math_ops.cast(g, u)

    xf, dyf = math_ops.cast(x, u), math_ops.cast(dy, u)
    a, b, o = given(grad_dx, xf), given(grad_dscale, scale), given(grad_doffset, scale)
    eps = constant(epsilon, dtype=u)
    if training:
        d_dy, d_x, d_scale = _training_adjoint(xf, dyf, scale, a, b, eps, wide, total)
    else:
        r = math_ops.rsqrt(math_ops.add(variance, eps))
        br = wide(math_ops.multiply(b, r))
        d_dy = math_ops.add(math_ops.multiply(wide(math_ops.multiply(scale, r)), a),
                            math_ops.multiply(br, math_ops.subtract(xf, wide(mean))))
        d_x = math_ops.multiply(br, dyf)
        d_scale = math_ops.multiply(r, total(math_ops.multiply(a, dyf)))
    d_dy = math_ops.add(d_dy, wide(o))
    return ([math_ops.cast(d_dy, t), math_ops.cast(d_x, t), d_scale]
            + [None] * (len(op.inputs) - 3))


def _training_adjoint(x, dy, scale, a, b, eps, wide, total):
    """With per channel ``c = x - E[x]``, ``r = (E[c^2] + eps)^-1/2``, ``dy' = dy - E[dy]``,
    ``q = E[dy c]``, the gradient op computes ``dx = scale r (dy' - r^2 q c)``,
    ``dscale = N r q``; contracted with the incoming ``a`` (for ``dx``) and ``b`` (for
    ``dscale``) the derivatives are
    ``d/d dy = scale r (a - E[a] - r^2 E[a c] c) + b r c``,
    ``d/dx = scale r^3 ((3 r^2 q E[a c] - E[a dy']) c - E[a c] dy' - q (a - E[a]))
    + b r (dy' - r^2 q c)`` and ``d/dscale = r (sum(a dy') - r^2 q sum(a c))``."""
    mul, sub, add, div = math_ops.multiply, math_ops.subtract, math_ops.add, math_ops.truediv
    n = math_ops.cast(div(array_ops.size(x), array_ops.size(scale)), scale.dtype.base_dtype)
    c = sub(x, wide(div(total(x), n)))
    r = math_ops.rsqrt(add(div(total(mul(c, c)), n), eps))
    r2 = mul(r, r)
    dy_c = sub(dy, wide(div(total(dy), n)))
    q = div(total(mul(dy, c)), n)
    sum_ac, sum_ady = total(mul(a, c)), total(mul(a, dy_c))
    a_c = sub(a, wide(div(total(a), n)))
    d_dy = add(mul(wide(mul(scale, r)), sub(a_c, mul(c, wide(div(mul(sum_ac, r2), n))))),
               mul(wide(mul(b, r)), c))
    d_x = add(
        mul(wide(mul(scale, mul(r2, r))),
            sub(sub(mul(c, wide(div(sub(mul(mul(3.0, r2), mul(q, sum_ac)), sum_ady), n))),
                    mul(dy_c, wide(div(sum_ac, n)))),
                mul(wide(q), a_c))),
        mul(wide(mul(b, r)), sub(dy_c, mul(c, wide(mul(r2, q))))))
    d_scale = mul(r, sub(sum_ady, mul(mul(r2, q), sum_ac)))
    return d_dy, d_x, d_scale


def fused_batch_norm(x, scale, offset, mean=None, variance=None, epsilon=0.001,
                     data_format="NHWC", is_training=True, name=None,
                     exponential_avg_factor=1.0):
    """Batch normalization of a 4-D (``NHWC``/``NCHW``) or 5-D (``NDHWC``/``NCDHW``) tensor over
    all axes but the channel's, in one op (TF's ``FusedBatchNormV3``); returns ``(y, mean,
    variance)``.

    Training: the batch statistics normalise ``x``; the variance returned is the unbiased
    (n / (n - 1)) estimate, for moving averages, and with ``exponential_avg_factor`` f < 1 both
    come back averaged with the given ``mean`` and ``variance``: ``(1 - f) * old + f * batch``.
    Inference: the given ``mean`` and ``variance`` normalise ``x`` and are returned. A float16
    ``x`` takes float32 parameters and computes in float32, as TF."""
    if (not is_training or exponential_avg_factor != 1.0) and (mean is None or variance is None):
        raise ValueError("Both 'mean' and 'variance' must be a 1D tensor when is_training is "
                         f"False or exponential_avg_factor != 1.0. Got mean={mean!r} and "
                         f"variance={variance!r}")
    fmt = data_format.decode() if isinstance(data_format, bytes) else str(data_format)
    with _ops.name_scope(name, "FusedBatchNormV3",
                         [t for t in (x, scale, offset, mean, variance)
                          if _ops.is_tensor_like(t)]) as scope:
        x = _ops.convert_to_tensor(x, name="input")
        scale = _ops.convert_to_tensor(scale, name="scale")
        offset = _ops.convert_to_tensor(offset, dtype=scale.dtype.base_dtype, name="offset")
        u = scale.dtype.base_dtype
        mean = constant([], dtype=u) if mean is None else _ops.convert_to_tensor(mean, dtype=u)
        variance = (constant([], dtype=u) if variance is None
                    else _ops.convert_to_tensor(variance, dtype=u))
        attrs = {"epsilon": float(epsilon), "exponential_avg_factor": float(
            exponential_avg_factor), "data_format": fmt, "is_training": bool(is_training)}
        op = _ops.apply_op("FusedBatchNormV3", [x, scale, offset, mean, variance], attrs, scope)
        return op.outputs[0], op.outputs[1], op.outputs[2]

__all__: list[str] = []  # reached as tf.nn.* (see dflab.namespaces)
