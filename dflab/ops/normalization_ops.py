"""Local response normalization (``tf.nn.lrn``, ``tf.nn.local_response_normalization``), the
normalization AlexNet and the CIFAR-10 tutorial use: each value divided by ``(bias + alpha *
sum of squares over depth_radius neighbours along the last axis) ** beta``.

Schema, gradient (the ``LRNGrad`` op, as TF's) and builder side by side; kernels in
``dflab.kernels.normalization_kernels``.
"""

from __future__ import annotations

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.registry import NotDifferentiable, RegisterGradient, register_op

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

__all__: list[str] = []  # reached as tf.nn.* (see dflab.namespaces)
