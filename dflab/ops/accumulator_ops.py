"""Conditional accumulators (TF1's ``tf.ConditionalAccumulator`` and
``tf.SparseConditionalAccumulator``): where synchronous replicas meet.

An accumulator sums the gradients applied to it and, on ``take_grad(num_required)``, waits
until ``num_required`` have arrived, returns their mean (or sum) and starts over. It keeps a
global step: a gradient computed at a ``local_step`` older than that step is *stale* and
dropped, which is how the paper's synchronous replication discards the late gradients of
stragglers and backup workers. Every take advances the step by one; ``set_global_step`` sets
it (the chief does, when it starts).

The accumulator op outputs a ``resource`` handle; the ops on it take it as input 0 and are
colocated with it (its state lives on its device: ``dflab.kernels.accumulator_kernels``).
"""

from __future__ import annotations

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.registry import NotDifferentiable, register_op
from dflab.framework.tensor_shape import TensorShape, as_shape, unknown_shape
from dflab.ops.gradients import IndexedSlices

_DENSE, _SPARSE = "ConditionalAccumulator", "SparseConditionalAccumulator"


def _accumulator_infer(op):
    if op.get_attr("reduction_type") not in ("MEAN", "SUM"):
        raise ValueError(f"reduction_type must be 'MEAN' or 'SUM', got "
                         f"{op.get_attr('reduction_type')!r}")
    return [(_dt.resource, TensorShape([]))]


def _source(op):
    h = op.inputs[0]
    if h.dtype.base_dtype is not _dt.resource:
        raise TypeError(f"{op.type}: input 0 must be an accumulator handle, got "
                        f"{h.dtype.name}")
    return h.op if h.op.type in (_DENSE, _SPARSE) else None


def _check_local_step(t):
    if t.dtype.base_dtype is not _dt.int64:
        raise TypeError(f"local_step must be int64, got {t.dtype.base_dtype.name}")


def _apply_infer(op):
    src = _source(op)
    _check_local_step(op.inputs[1])
    # (handle, local_step, gradient) and (handle, local_step, indices, values[, shape])
    grad = op.inputs[2] if op.type == "AccumulatorApplyGradient" else op.inputs[3]
    if src is not None:
        dtype = src.get_attr("dtype")
        if grad.dtype.base_dtype is not dtype:
            raise TypeError(f"{op.type}: the accumulator holds {dtype.name}, the gradient is "
                            f"{grad.dtype.base_dtype.name}")
        shape = as_shape(src.get_attr("shape"))
        if op.type == "AccumulatorApplyGradient" and not shape.is_compatible_with(grad.shape):
            raise ValueError(f"Shape mismatch: the accumulator expects {shape}, the gradient "
                             f"has {grad.shape}")
    return []


def _take_infer(op):
    src = _source(op)
    n = op.inputs[1]
    if n.dtype.base_dtype is not _dt.int32:
        raise TypeError(f"{op.type}: num_required must be int32, got {n.dtype.name}")
    dtype = src.get_attr("dtype") if src is not None else op.get_attr("dtype")
    shape = as_shape(src.get_attr("shape")) if src is not None else unknown_shape()
    if op.type == "AccumulatorTakeGradient":
        return [(dtype, shape)]
    rows = shape[1:] if shape.ndims else unknown_shape()
    return [(_dt.int64, TensorShape([None])),
            (dtype, TensorShape([None]).concatenate(rows)),
            (_dt.int64, TensorShape([None]))]


def _num_infer(op):
    _source(op)
    return [(_dt.int32, TensorShape([]))]


def _set_step_infer(op):
    _source(op)
    _check_local_step(op.inputs[1])
    return []


register_op(_DENSE, _accumulator_infer, stateful=True)
register_op(_SPARSE, _accumulator_infer, stateful=True)
register_op("AccumulatorApplyGradient", _apply_infer, stateful=True)
register_op("SparseAccumulatorApplyGradient", _apply_infer, stateful=True)
register_op("AccumulatorTakeGradient", _take_infer, stateful=True)
register_op("SparseAccumulatorTakeGradient", _take_infer, stateful=True)
register_op("AccumulatorNumAccumulated", _num_infer, stateful=True)
register_op("AccumulatorSetGlobalStep", _set_step_infer, stateful=True)
for _t in (_DENSE, _SPARSE, "AccumulatorApplyGradient", "SparseAccumulatorApplyGradient",
           "AccumulatorTakeGradient", "SparseAccumulatorTakeGradient",
           "AccumulatorNumAccumulated", "AccumulatorSetGlobalStep"):
    NotDifferentiable(_t)


class ConditionalAccumulatorBase:
    """The ops every accumulator has (TF1's ``ConditionalAccumulatorBase``)."""

    def __init__(self, dtype, shape, accumulator_ref):
        self._dtype = dtype
        self._shape = shape
        self._accumulator_ref = accumulator_ref
        self._name = accumulator_ref.op.name.split("/")[-1]

    @property
    def accumulator_ref(self):
        return self._accumulator_ref

    @property
    def name(self) -> str:
        return self._accumulator_ref.op.name

    @property
    def dtype(self):
        return self._dtype

    def _op(self, op_type, inputs, attrs, name, default):
        with _ops.name_scope(name, f"{self._name}_{default}", [self._accumulator_ref]) as scope:
            with _ops.colocate_with(self._accumulator_ref.op):
                return _ops.apply_op(op_type, [self._accumulator_ref, *inputs], attrs,
                                     scope or None)

    def num_accumulated(self, name=None):
        """How many gradients the accumulator holds now."""
        return self._op("AccumulatorNumAccumulated", [], {}, name,
                        "NumAccumulated").outputs[0]

    def set_global_step(self, new_global_step, name=None):
        """Set the step below which applied gradients are stale."""
        step = _ops.convert_to_tensor(new_global_step, dtype=_dt.int64,
                                      name="new_global_step")
        return self._op("AccumulatorSetGlobalStep", [step], {}, name, "SetGlobalStep")


def _as_int64(value, name):
    from dflab.ops import math_ops

    t = _ops.convert_to_tensor(value, name=name)
    if not t.dtype.base_dtype.is_integer:
        raise TypeError(f"{name} must be integers, got {t.dtype.base_dtype.name}")
    return t if t.dtype.base_dtype is _dt.int64 else math_ops.cast(t, _dt.int64)


def _make(op_type, dtype, shape, shared_name, name, reduction_type):
    dtype = _dt.as_dtype(dtype).base_dtype
    shape = as_shape(shape) if shape is not None else unknown_shape()
    attrs = {"dtype": dtype, "shape": shape, "shared_name": shared_name or "",
             "container": "", "reduction_type": reduction_type}
    return dtype, shape, _ops.apply_op(op_type, [], attrs, name).outputs[0]


class ConditionalAccumulator(ConditionalAccumulatorBase):
    """A dense accumulator: ``apply_grad`` adds a gradient, ``take_grad`` returns the mean."""

    def __init__(self, dtype, shape=None, shared_name=None, name="conditional_accumulator",
                 reduction_type="MEAN"):
        super().__init__(*_make(_DENSE, dtype, shape, shared_name, name, reduction_type))

    def apply_grad(self, grad, local_step=0, name=None):
        """Add ``grad`` unless ``local_step`` is older than the accumulator's global step."""
        grad = _ops.convert_to_tensor(grad, dtype=self._dtype, name="grad")
        step = _as_int64(local_step, "local_step")
        return self._op("AccumulatorApplyGradient", [step, grad], {"dtype": self._dtype},
                        name, "ApplyGrad")

    def take_grad(self, num_required, name=None):
        """Wait for ``num_required`` gradients; return their mean (or sum) and start over."""
        n = _ops.convert_to_tensor(num_required, dtype=_dt.int32, name="num_required")
        return self._op("AccumulatorTakeGradient", [n], {"dtype": self._dtype}, name,
                        "TakeGrad").outputs[0]


class SparseConditionalAccumulator(ConditionalAccumulatorBase):
    """An accumulator of ``IndexedSlices`` gradients: rows are summed per index, and the mean
    divides each row by the number of gradients that touched it (TF's semantics)."""

    def __init__(self, dtype, shape=None, shared_name=None,
                 name="sparse_conditional_accumulator", reduction_type="MEAN"):
        super().__init__(*_make(_SPARSE, dtype, shape, shared_name, name, reduction_type))

    def apply_indexed_slices_grad(self, grad, local_step=0, name=None):
        return self.apply_grad(grad.indices, grad.values, grad.dense_shape, local_step, name)

    def apply_grad(self, grad_indices, grad_values, grad_shape=None, local_step=0, name=None):
        # Indices and shapes of any integer type, cast to int64 as TF's builder does.
        indices = _as_int64(grad_indices, "grad_indices")
        values = _ops.convert_to_tensor(grad_values, dtype=self._dtype, name="grad_values")
        step = _as_int64(local_step, "local_step")
        inputs = [step, indices, values]
        has_shape = grad_shape is not None
        if has_shape:
            inputs.append(_as_int64(grad_shape, "grad_shape"))
        return self._op("SparseAccumulatorApplyGradient", inputs,
                        {"dtype": self._dtype, "has_known_shape": has_shape}, name,
                        "ApplyGrad")

    def take_grad(self, num_required, name=None):
        """``(indices, values, dense_shape)`` of the mean of ``num_required`` gradients."""
        n = _ops.convert_to_tensor(num_required, dtype=_dt.int32, name="num_required")
        return self._op("SparseAccumulatorTakeGradient", [n], {"dtype": self._dtype}, name,
                        "TakeGrad").outputs

    def take_indexed_slices_grad(self, num_required, name=None):
        indices, values, shape = self.take_grad(num_required, name)
        return IndexedSlices(values, indices, shape)


__all__ = ["ConditionalAccumulator", "ConditionalAccumulatorBase",
           "SparseConditionalAccumulator"]
