"""``ApproxTopK``: the top (or bottom) ``k`` entries along one dimension, behind
``tf.nn.approx_max_k`` and ``tf.nn.approx_min_k``.

TF's op trades recall for speed on TPUs; its CPU kernel is exact (the sorted top k, lower index
first among ties), and so is dflab's, for any dimension and for the minimum too (TF's CPU
kernel computes only the maximum along the last dimension). Schema, gradient and builders here;
the kernel is in ``dflab.kernels.nn_kernels``.
"""

from __future__ import annotations

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.registry import RegisterGradient, register_op
from dflab.framework.tensor_shape import TensorShape
from dflab.ops import array_ops, indexing_ops, math_ops, reduction_ops

_TYPES = (_dt.float16, _dt.float32)


def _axis(op, rank):
    axis = op.get_attr("reduction_dimension")
    if not -rank <= axis < rank:
        raise ValueError(f"reduction_dimension {axis} is out of range for an input of rank "
                         f"{rank}")
    return axis % rank


def _approx_top_k_infer(op):
    x = op.inputs[0]
    dt = x.dtype.base_dtype
    if dt not in _TYPES:
        raise TypeError(f"Value passed to parameter 'input' has DataType {dt.name} not in list "
                        "of allowed values: float16, bfloat16, float32")
    k = op.get_attr("k")
    if x.shape.ndims is None:
        return [(dt, TensorShape(None)), (_dt.int32, TensorShape(None))]
    dims = x.shape.as_list()
    axis = _axis(op, len(dims))
    if dims[axis] is not None and dims[axis] < k:
        raise ValueError(f"k={k} is larger than the reduction dimension's size {dims[axis]}")
    dims[axis] = k
    return [(dt, TensorShape(dims)), (_dt.int32, TensorShape(dims))]


register_op("ApproxTopK", _approx_top_k_infer, expensive=True)


@RegisterGradient("ApproxTopK")
def _approx_top_k_grad(op, grad, _grad_indices):
    # Each selected entry's gradient goes back to where it came from along the axis.
    x, idx = op.inputs[0], op.outputs[1]
    rank = x.shape.ndims
    axis = _axis(op, rank)
    perm = [d for d in range(rank) if d != axis] + [axis]
    back = [perm.index(d) for d in range(rank)]
    n = x.shape.as_list()[axis]
    depth = n if n is not None else array_ops.shape(x)[axis]
    hot = indexing_ops.one_hot(array_ops.transpose(idx, perm), depth,
                               dtype=grad.dtype.base_dtype)
    g = math_ops.multiply(array_ops.expand_dims(array_ops.transpose(grad, perm), -1), hot)
    return [array_ops.transpose(reduction_ops.reduce_sum(g, -2), back)]


def _approx_top_k(operand, k, reduction_dimension, recall_target, is_max_k,
                  reduction_input_size_override, aggregate_to_topk, name):
    attrs = {"k": int(k), "reduction_dimension": int(reduction_dimension),
             "recall_target": float(recall_target), "is_max_k": is_max_k,
             "reduction_input_size_override": int(reduction_input_size_override),
             "aggregate_to_topk": bool(aggregate_to_topk)}
    op = _ops.apply_op("ApproxTopK", [operand], attrs, name)
    return op.outputs[0], op.outputs[1]


def approx_max_k(operand, k, reduction_dimension=-1, recall_target=0.95,
                 reduction_input_size_override=-1, aggregate_to_topk=True, name=None):
    """The ``k`` largest entries along ``reduction_dimension`` (sorted) and their int32
    indices; exact here."""
    return _approx_top_k(operand, k, reduction_dimension, recall_target, True,
                         reduction_input_size_override, aggregate_to_topk, name)


def approx_min_k(operand, k, reduction_dimension=-1, recall_target=0.95,
                 reduction_input_size_override=-1, aggregate_to_topk=True, name=None):
    """The ``k`` smallest entries along ``reduction_dimension`` (sorted ascending) and their
    int32 indices; exact here."""
    return _approx_top_k(operand, k, reduction_dimension, recall_target, False,
                         reduction_input_size_override, aggregate_to_topk, name)


__all__: list[str] = []
