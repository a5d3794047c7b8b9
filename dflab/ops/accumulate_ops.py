"""Accumulations beyond sums and products: ``math.cumulative_logsumexp`` (a running
log-sum-exp along an axis, with TF's gradient) and ``accumulate_n`` (TF 1.x's n-ary sum,
which TF 2.x builds as ``add_n``).

Schema, gradient and builders side by side; the kernel is the scans' (``math_kernels``),
registered in ``dflab.kernels.bitwise_kernels``.
"""

from __future__ import annotations

import numpy as np

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.constant_op import constant
from dflab.framework.registry import RegisterGradient, register_op
from dflab.framework.tensor_shape import TensorShape, as_shape
from dflab.ops import array_ops
from dflab.ops import math_ops as _m
from dflab.ops.math_ops import _check_dtype, _is_float
from dflab.ops.reduction_ops import _scan, _scan_infer


def _logsumexp_infer(op):
    _check_dtype(op, op.inputs[0].dtype.base_dtype, _is_float)
    return _scan_infer(op)


register_op("CumulativeLogsumexp", _logsumexp_infer)


def cumulative_logsumexp(x, axis=0, exclusive=False, reverse=False, name=None):
    """``log(cumsum(exp(x)))`` along ``axis``, computed without overflow; ``exclusive``
    leaves out the current entry (giving -inf first)."""
    with _ops.name_scope(name, "CumulativeLogsumexp", [x]):
        return _scan("CumulativeLogsumexp", x, axis, exclusive, reverse, None)


@RegisterGradient("CumulativeLogsumexp")
def _cumulative_logsumexp_grad(op, grad):
    # TF's: the gradient split into its positive and negative parts, each accumulated in log
    # space so that the result stays finite.
    x, axis = op.inputs
    out = op.outputs[0]
    exclusive, reverse = op.get_attr("exclusive"), op.get_attr("reverse")
    dt = grad.dtype.base_dtype
    lowest = constant(np.finfo(dt.as_numpy_dtype).min, dtype=dt)
    zero = constant(0, dtype=dt)
    log_pos = array_ops.where_v2(_m.greater(grad, zero), _m.log(grad), lowest)
    log_neg = array_ops.where_v2(_m.less(grad, zero), _m.log(_m.negative(grad)), lowest)

    def part(log_grad):
        acc = cumulative_logsumexp(_m.subtract(log_grad, out), axis=axis, reverse=not reverse,
                                   exclusive=exclusive)
        return _m.exp(_m.add(acc, x))

    return [_m.subtract(part(log_pos), part(log_neg)), None]


def accumulate_n(inputs, shape=None, tensor_dtype=None, name=None):
    """The elementwise sum of a list of tensors of one dtype and shape (TF 1.x's checks, then
    ``add_n``)."""
    if not inputs or not isinstance(inputs, (list, tuple)):
        raise ValueError("inputs must be a list of at least one Tensor with the same dtype "
                         "and shape")
    inputs = [_ops.convert_to_tensor(t) for t in inputs]
    if not all(t.dtype.base_dtype is inputs[0].dtype.base_dtype for t in inputs):
        raise ValueError("inputs must be a list of at least one Tensor with the same dtype "
                         "and shape")
    merged = as_shape(shape) if shape is not None else TensorShape(None)
    for t in inputs:
        merged = merged.merge_with(t.shape)
    if tensor_dtype is None:
        tensor_dtype = inputs[0].dtype.base_dtype
    if _dt.as_dtype(tensor_dtype).base_dtype is not inputs[0].dtype.base_dtype:
        raise TypeError(f"tensor_dtype is {_dt.as_dtype(tensor_dtype).name}, but input is of "
                        f"type {inputs[0].dtype.base_dtype.name}")
    if len(inputs) == 1:
        return inputs[0] if name is None else array_ops.identity(inputs[0], name=name)
    return _m.add_n(inputs, name=name)


__all__ = ["accumulate_n"]
# Only in tf.math (dflab.namespaces puts it there): cumulative_logsumexp.
