"""``tf.train.batch`` and ``tf.train.shuffle_batch``: batching input pipelines built on queues.

Each call builds a queue (a ``FIFOQueue``, a ``PaddingFIFOQueue`` for ``dynamic_pad=True``, or
a ``RandomShuffleQueue``), one enqueue op per thread, and registers a ``QueueRunner`` in the
``QUEUE_RUNNERS`` collection; ``start_queue_runners`` starts the threads. The result has the
structure of ``tensors`` (a tensor, a list, or a dict) with a batch dimension in front.
"""

from __future__ import annotations

from dflab.framework import ops as _ops
from dflab.framework.tensor_shape import TensorShape, as_shape
from dflab.ops import data_flow_ops
from dflab.train.queue_runner import QueueRunner, add_queue_runner


def _flatten(tensors):
    """(list of tensors, rebuild function) for a tensor, list/tuple or dict."""
    if isinstance(tensors, dict):
        keys = sorted(tensors)
        return [_ops.convert_to_tensor(tensors[k]) for k in keys], \
            lambda out: dict(zip(keys, out))
    if isinstance(tensors, (list, tuple)):
        if not tensors:
            raise ValueError("Cannot batch an empty list of tensors")
        return [_ops.convert_to_tensor(t) for t in tensors], list
    return [_ops.convert_to_tensor(tensors)], lambda out: out[0]


def _element_shapes(tensors, shapes, enqueue_many, dynamic_pad):
    if shapes is not None:
        shapes = [as_shape(s) for s in shapes]
        if len(shapes) != len(tensors):
            raise ValueError(f"shapes has {len(shapes)} entries for {len(tensors)} tensors")
        return shapes
    out = []
    for t in tensors:
        shape = t.shape[1:] if enqueue_many and t.shape.ndims else t.shape
        if enqueue_many and t.shape.ndims == 0:
            raise ValueError(f"enqueue_many=True needs a batch dimension: {t.name} is a scalar")
        if dynamic_pad:
            if shape.ndims is None:
                raise ValueError(f"dynamic_pad needs a known rank: {t.name} has shape {shape}")
        elif not shape.is_fully_defined():
            raise ValueError(f"All shapes must be fully defined: {t.name} has shape {shape} "
                             "(pass shapes=, or dynamic_pad=True)")
        out.append(shape)
    return out


def _finish(queue, tensors, num_threads, enqueue_many, batch_size, allow_smaller):
    enqueue = queue.enqueue_many if enqueue_many else queue.enqueue
    ops = [enqueue(tensors) for _ in range(max(int(num_threads), 1))]
    add_queue_runner(QueueRunner(queue, ops))
    if allow_smaller:
        out = queue.dequeue_up_to(batch_size)
    else:
        out = queue.dequeue_many(batch_size)
    return out if isinstance(out, list) else [out]


def batch(tensors, batch_size, num_threads=1, capacity=32, enqueue_many=False, shapes=None,
          dynamic_pad=False, allow_smaller_final_batch=False, shared_name=None, name=None):
    """Batches of ``batch_size`` from ``tensors``, in order, fed by ``num_threads`` threads."""
    flat, rebuild = _flatten(tensors)
    with _ops.name_scope(name, "batch", flat):
        elem_shapes = _element_shapes(flat, shapes, enqueue_many, dynamic_pad)
        dtypes = [t.dtype.base_dtype for t in flat]
        if dynamic_pad:
            queue = data_flow_ops.PaddingFIFOQueue(capacity, dtypes, elem_shapes,
                                                   shared_name=shared_name)
        else:
            queue = data_flow_ops.FIFOQueue(capacity, dtypes, elem_shapes,
                                            shared_name=shared_name)
        out = _finish(queue, flat, num_threads, enqueue_many, batch_size,
                      allow_smaller_final_batch)
    return rebuild(_with_static_batch(out, batch_size, allow_smaller_final_batch))


def shuffle_batch(tensors, batch_size, capacity, min_after_dequeue, num_threads=1, seed=None,
                  enqueue_many=False, shapes=None, allow_smaller_final_batch=False,
                  shared_name=None, name=None):
    """Random batches drawn from a ``RandomShuffleQueue`` holding at least
    ``min_after_dequeue`` elements (until its input runs out)."""
    flat, rebuild = _flatten(tensors)
    with _ops.name_scope(name, "shuffle_batch", flat):
        elem_shapes = _element_shapes(flat, shapes, enqueue_many, False)
        dtypes = [t.dtype.base_dtype for t in flat]
        queue = data_flow_ops.RandomShuffleQueue(capacity, min_after_dequeue, dtypes,
                                                 elem_shapes, seed=seed,
                                                 shared_name=shared_name)
        out = _finish(queue, flat, num_threads, enqueue_many, batch_size,
                      allow_smaller_final_batch)
    return rebuild(_with_static_batch(out, batch_size, allow_smaller_final_batch))


def _with_static_batch(out, batch_size, allow_smaller):
    if allow_smaller or not isinstance(batch_size, int):
        return out
    for t in out:
        if t.shape.ndims is not None:
            t.set_shape(TensorShape([batch_size]).concatenate(t.shape[1:]))
    return out
