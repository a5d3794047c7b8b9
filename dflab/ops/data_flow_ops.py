"""Queues (TF1's ``tf.FIFOQueue``, ``tf.RandomShuffleQueue``, ``tf.PaddingFIFOQueue``,
``tf.PriorityQueue``): the stateful input-pipeline ops of the paper.

The queue op (``FIFOQueueV2`` …) outputs a ``resource`` handle; ``QueueEnqueueV2``,
``QueueEnqueueManyV2``, ``QueueDequeueV2``, ``QueueDequeueManyV2``, ``QueueDequeueUpToV2``,
``QueueCloseV2``, ``QueueSizeV2`` and ``QueueIsClosedV2`` take it as input 0. Every op on a queue
is colocated with the queue op, so it runs on the queue's device where the queue's state lives
(see ``dflab.kernels.data_flow_kernels``). Dequeue outputs get their static shapes from the
queue's declared ``shapes`` (read from the handle's producer op).
"""

from __future__ import annotations

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework import random_seed
from dflab.framework.constant_op import constant_value
from dflab.framework.registry import NotDifferentiable, register_op
from dflab.framework.tensor_shape import TensorShape, as_shape, unknown_shape

_QUEUE_TYPES = ("FIFOQueueV2", "RandomShuffleQueueV2", "PaddingFIFOQueueV2", "PriorityQueueV2")


# --- schemas --------------------------------------------------------------------------------------
def _queue_infer(op):
    types = op.get_attr("component_types")
    shapes = op.attrs.get("shapes") or []
    if not types:
        raise ValueError("A queue needs at least one component type")
    if shapes and len(shapes) != len(types):
        raise ValueError(f"Queue has {len(types)} component types but {len(shapes)} shapes")
    if op.type == "PaddingFIFOQueueV2" and (not shapes or any(as_shape(s).ndims is None
                                                               for s in shapes)):
        raise ValueError("PaddingFIFOQueue needs a shape of known rank for every component")
    if op.type == "RandomShuffleQueueV2" and op.attrs.get("min_after_dequeue", 0) >= \
            max(op.attrs.get("capacity", 1), 1) and op.attrs.get("capacity", -1) > 0:
        raise ValueError("min_after_dequeue must be smaller than capacity")
    return [(_dt.resource, TensorShape([]))]


def _handle(op):
    h = op.inputs[0]
    if h.dtype.base_dtype is not _dt.resource:
        raise TypeError(f"{op.type}: input 0 must be a queue handle (resource), got "
                        f"{h.dtype.name}")
    return h


def _queue_signature(op):
    """(component dtypes, shapes) of the queue behind ``op``'s handle, if it can be seen."""
    src = _handle(op).op
    if src.type not in _QUEUE_TYPES:
        return None, None
    types = src.get_attr("component_types")
    shapes = src.attrs.get("shapes") or [unknown_shape()] * len(types)
    if src.type == "PriorityQueueV2":  # every element leads with its int64 priority
        types, shapes = [_dt.int64, *types], [TensorShape([]), *shapes]
    return types, [as_shape(s) for s in shapes]


def _enqueue_infer(op):
    types, shapes = _queue_signature(op)
    comps = op.inputs[1:]
    if types is not None:
        if len(comps) != len(types):
            raise ValueError(f"Queue expects {len(types)} components, got {len(comps)}")
        for k, (t, dt, sh) in enumerate(zip(comps, types, shapes)):
            if t.dtype.base_dtype is not dt:
                raise TypeError(f"Component {k} of the enqueued tuple has dtype "
                                f"{t.dtype.base_dtype.name}, the queue expects {dt.name}")
            elem = t.shape[1:] if op.type == "QueueEnqueueManyV2" and t.shape.ndims else t.shape
            if op.type == "QueueEnqueueManyV2" and t.shape.ndims == 0:
                raise ValueError(f"enqueue_many: component {k} must have a batch dimension")
            if not sh.is_compatible_with(elem):
                raise ValueError(f"Component {k} has shape {elem}, the queue expects {sh}")
    return []


def _dequeue_infer(op):
    types, shapes = _queue_signature(op)
    if types is None:
        types = op.get_attr("component_types")
        shapes = [unknown_shape()] * len(types)
    if op.type == "QueueDequeueV2":
        return [(dt, sh) for dt, sh in zip(types, shapes)]
    n = op.inputs[1]
    if n.dtype.base_dtype is not _dt.int32:
        raise TypeError(f"{op.type}: n must be int32, got {n.dtype.name}")
    k = constant_value(n)
    lead = None if k is None or op.type == "QueueDequeueUpToV2" else int(k)
    return [(dt, TensorShape([lead]).concatenate(sh)) for dt, sh in zip(types, shapes)]


def _close_infer(op):
    _handle(op)
    return []


def _scalar_infer(dtype):
    def infer(op):
        _handle(op)
        return [(dtype, TensorShape([]))]

    return infer


for _t in _QUEUE_TYPES:
    register_op(_t, _queue_infer, stateful=True)
register_op("QueueEnqueueV2", _enqueue_infer, stateful=True)
register_op("QueueEnqueueManyV2", _enqueue_infer, stateful=True)
register_op("QueueDequeueV2", _dequeue_infer, stateful=True)
register_op("QueueDequeueManyV2", _dequeue_infer, stateful=True)
register_op("QueueDequeueUpToV2", _dequeue_infer, stateful=True)
register_op("QueueCloseV2", _close_infer, stateful=True)
register_op("QueueSizeV2", _scalar_infer(_dt.int32), stateful=True)
register_op("QueueIsClosedV2", _scalar_infer(_dt.bool), stateful=True)
for _t in _QUEUE_TYPES + ("QueueEnqueueV2", "QueueEnqueueManyV2", "QueueDequeueV2",
                          "QueueDequeueManyV2", "QueueDequeueUpToV2", "QueueCloseV2",
                          "QueueSizeV2", "QueueIsClosedV2"):
    NotDifferentiable(_t)


# --- the Python classes ---------------------------------------------------------------------------
def _as_type_list(dtypes):
    if isinstance(dtypes, (list, tuple)):
        return [_dt.as_dtype(d).base_dtype for d in dtypes]
    return [_dt.as_dtype(dtypes).base_dtype]


def _as_shape_list(shapes, n):
    if shapes is None:
        return None
    # One shape given bare (TF's rule: a TensorShape, or a list of ints and Nones; ``()`` is
    # the one scalar shape of a single component).
    if isinstance(shapes, TensorShape) or (
            isinstance(shapes, (list, tuple)) and n == 1
            and all(d is None or isinstance(d, int) for d in shapes)):
        shapes = [shapes]
    shapes = [as_shape(s) for s in shapes]
    if len(shapes) != n:
        raise ValueError(f"Queue shapes must have the same length as dtypes ({len(shapes)} vs "
                         f"{n})")
    return shapes


class QueueBase:
    """Base class of the queues: wraps the handle, builds the ops on it (TF1's QueueBase)."""

    def __init__(self, dtypes, shapes, names, queue_ref):
        self._dtypes = list(dtypes)
        self._shapes = shapes if shapes is not None else [unknown_shape()] * len(dtypes)
        self._names = list(names) if names is not None else None
        self._queue_ref = queue_ref
        self._name = queue_ref.op.name.split("/")[-1]

    @staticmethod
    def from_list(index, queues):
        raise NotImplementedError("QueueBase.from_list is not supported")

    @property
    def queue_ref(self):
        return self._queue_ref

    @property
    def name(self) -> str:
        return self._queue_ref.op.name

    @property
    def dtypes(self):
        return list(self._dtypes)

    @property
    def shapes(self):
        return list(self._shapes)

    @property
    def names(self):
        return self._names

    def _scope(self, name, default):
        return _ops.name_scope(name, f"{self._name}_{default}", [self._queue_ref])

    def _components(self, vals):
        """``vals`` (a tensor, list, tuple or dict keyed by ``names``) as a list of tensors."""
        if isinstance(vals, dict):
            if self._names is None:
                raise ValueError("Queue must have names to enqueue a dictionary")
            if sorted(self._names) != sorted(vals):
                raise ValueError(f"Keys in dictionary to enqueue {sorted(vals)} do not match "
                                 f"the names of the queue {sorted(self._names)}")
            vals = [vals[k] for k in self._names]
        elif not isinstance(vals, (list, tuple)):
            vals = [vals]
        if len(vals) != len(self._dtypes):
            raise ValueError(f"Expected {len(self._dtypes)} components, got {len(vals)}")
        return [_ops.convert_to_tensor(v, dtype=dt, name=f"component_{i}")
                for i, (v, dt) in enumerate(zip(vals, self._dtypes))]

    def _op(self, op_type, inputs, attrs, name):
        with _ops.colocate_with(self._queue_ref.op):
            return _ops.apply_op(op_type, [self._queue_ref, *inputs], attrs, name)

    def _outputs(self, op):
        outs = list(op.outputs)
        if self._names is not None:
            return dict(zip(self._names, outs))
        return outs[0] if len(outs) == 1 else outs

    def enqueue(self, vals, name=None):
        with self._scope(name, "enqueue") as scope:
            comps = self._components(vals)
            return self._op("QueueEnqueueV2", comps, {"Tcomponents": self._dtypes,
                                                      "timeout_ms": -1}, scope or None)

    def enqueue_many(self, vals, name=None):
        with self._scope(name, "EnqueueMany") as scope:
            comps = self._components(vals)
            return self._op("QueueEnqueueManyV2", comps, {"Tcomponents": self._dtypes,
                                                          "timeout_ms": -1}, scope or None)

    def dequeue(self, name=None):
        with self._scope(name, "dequeue") as scope:
            op = self._op("QueueDequeueV2", [], {"component_types": self._dtypes,
                                                 "timeout_ms": -1}, scope or None)
        return self._outputs(op)

    def _dequeue_n(self, op_type, n, name, default):
        with self._scope(name, default) as scope:
            n = _ops.convert_to_tensor(n, dtype=_dt.int32, name="n")
            op = self._op(op_type, [n], {"component_types": self._dtypes, "timeout_ms": -1},
                          scope or None)
        return self._outputs(op)

    def dequeue_many(self, n, name=None):
        return self._dequeue_n("QueueDequeueManyV2", n, name, "DequeueMany")

    def dequeue_up_to(self, n, name=None):
        return self._dequeue_n("QueueDequeueUpToV2", n, name, "DequeueUpTo")

    def close(self, cancel_pending_enqueues=False, name=None):
        with self._scope(name, "Close") as scope:
            return self._op("QueueCloseV2", [], {"cancel_pending_enqueues":
                                                 bool(cancel_pending_enqueues)}, scope or None)

    def is_closed(self, name=None):
        with self._scope(name, "IsClosed") as scope:
            return self._op("QueueIsClosedV2", [], {}, scope or None).outputs[0]

    def size(self, name=None):
        with self._scope(name, "Size") as scope:
            return self._op("QueueSizeV2", [], {}, scope or None).outputs[0]


def _make_queue(op_type, dtypes, shapes, names, name, default_name, extra_attrs):
    dtypes = _as_type_list(dtypes)
    shapes = _as_shape_list(shapes, len(dtypes))
    if names is not None:
        names = list(names) if isinstance(names, (list, tuple)) else [names]
        if len(names) != len(dtypes):
            raise ValueError("Queue names must have the same length as dtypes")
    attrs = {"component_types": dtypes, "shapes": shapes or [], "container": ""}
    attrs.update(extra_attrs)
    op = _ops.apply_op(op_type, [], attrs, name or default_name)
    return dtypes, shapes, names, op.outputs[0]


class FIFOQueue(QueueBase):
    def __init__(self, capacity, dtypes, shapes=None, names=None, shared_name=None,
                 name="fifo_queue"):
        parts = _make_queue("FIFOQueueV2", dtypes, shapes, names, name, "fifo_queue",
                            {"capacity": int(capacity), "shared_name": shared_name or ""})
        super().__init__(*parts)


class PaddingFIFOQueue(QueueBase):
    def __init__(self, capacity, dtypes, shapes, names=None, shared_name=None,
                 name="padding_fifo_queue"):
        parts = _make_queue("PaddingFIFOQueueV2", dtypes, shapes, names, name,
                            "padding_fifo_queue",
                            {"capacity": int(capacity), "shared_name": shared_name or ""})
        super().__init__(*parts)


class RandomShuffleQueue(QueueBase):
    def __init__(self, capacity, min_after_dequeue, dtypes, shapes=None, names=None, seed=None,
                 shared_name=None, name="random_shuffle_queue"):
        seed1, seed2 = random_seed.get_seed(seed)
        if seed1 is None and seed2 is None:
            seed1, seed2 = 0, 0
        parts = _make_queue("RandomShuffleQueueV2", dtypes, shapes, names, name,
                            "random_shuffle_queue",
                            {"capacity": int(capacity), "min_after_dequeue":
                             int(min_after_dequeue), "seed": int(seed1 or 0),
                             "seed2": int(seed2 or 0), "shared_name": shared_name or ""})
        super().__init__(*parts)


class PriorityQueue(QueueBase):
    """A queue that dequeues its elements lowest priority first: each element's first
    component is its ``int64`` scalar priority, ahead of the components of ``types``
    (``shapes``, fully defined, are required). Elements of equal priority leave in the order
    they came."""

    def __init__(self, capacity, types, shapes=None, names=None, shared_name=None,
                 name="priority_queue"):
        types = _as_type_list(types)
        if shapes is None:
            raise TypeError("Expected list for 'shapes' argument to 'priority_queue_v2' Op, "
                            "not None.")
        shapes = _as_shape_list(shapes, len(types))
        if not all(s.is_fully_defined() for s in shapes):
            raise ValueError(f"All shapes must be fully defined: {shapes}")
        if names is not None:
            names = list(names) if isinstance(names, (list, tuple)) else [names]
            if len(names) != len(types) + 1:
                raise ValueError(f"Queue names must have the same length as dtypes, received "
                                 f"len(names)={len(names)}, len(dtypes)={len(types) + 1}")
        attrs = {"component_types": types, "shapes": shapes, "container": "",
                 "capacity": int(capacity), "shared_name": shared_name or ""}
        op = _ops.apply_op("PriorityQueueV2", [], attrs, name or "priority_queue")
        super().__init__([_dt.int64, *types], [TensorShape([]), *shapes], names,
                         op.outputs[0])


__all__ = ["QueueBase", "FIFOQueue", "PaddingFIFOQueue", "RandomShuffleQueue", "PriorityQueue"]
