"""Queue kernels: ``FIFOQueueV2``, ``RandomShuffleQueueV2``, ``PaddingFIFOQueueV2``,
``PriorityQueueV2`` and the enqueue/dequeue/close/size ops on them.

A queue is a resource in its device's ``ResourceMgr`` (keyed by ``shared_name`` or the queue op's
name), so every step of the session, on any thread, sees the same queue. Its state is a
``QueueState``: the elements, a lock, and two FIFO lists of *pending attempts* (enqueues waiting
for room, dequeues waiting for elements).

Enqueue and dequeue are *asynchronous* kernels: an attempt that cannot complete at once is parked
in the queue with its ``done`` callback and holds no thread; whichever step later changes the
queue (an enqueue, a dequeue, a close) completes the parked attempts it makes possible, in FIFO
order. So a producer blocked on a full queue and a consumer blocked on an empty one can never
starve each other of inter-op threads. A watchdog thread (one per queue, alive only while
attempts are parked) polls every 50 ms and fails the attempts whose step was cancelled (a
``RunOptions(timeout_in_ms)`` deadline, an error elsewhere in the step) or whose session was
closed, so nothing waits forever. ``done`` is always called outside the queue's lock.

Semantics follow TF: once closed, enqueues fail with ``CancelledError`` and dequeues drain what
is left, then fail with ``OutOfRangeError`` (``dequeue_up_to`` returns a short final batch);
``close(cancel_pending_enqueues=True)`` also fails the parked enqueues. ``RandomShuffleQueue``
keeps ``min_after_dequeue`` elements back until it is closed, and draws with its own seeded
generator, so a seeded queue fed in the same order dequeues in the same order.
``PriorityQueue`` elements lead with an int64 scalar priority and leave lowest first (equal
priorities in the order they came).

Queues live in host memory and their kernels are registered for CPUs only, as in TF (elements
are NumPy arrays; a producer on another device reaches a queue through a ``_Send``/``_Recv``).
"""

from __future__ import annotations

import copy
import heapq
import itertools
import threading
import time
from collections import deque

import numpy as np

from dflab.framework import dtypes as _dt
from dflab.framework import errors
from dflab.framework.tensor_shape import TensorShape
from dflab.kernels.registry import kernel, register_kernel

_POLL_SECONDS = 0.05


class _Attempt:
    """One parked enqueue or dequeue: what it still needs, and how to report back."""

    __slots__ = ("execution", "done", "elements", "n", "allow_smaller", "ctx", "held")

    def __init__(self, execution, done, ctx, elements=None, n=0, allow_smaller=False):
        self.execution = execution
        self.done = done
        self.ctx = ctx
        self.elements = elements  # enqueue: deque of element tuples still to insert
        self.n = n  # dequeue: number of elements wanted (0: a single element, unbatched)
        self.allow_smaller = allow_smaller
        # dequeue: elements taken out of a full queue while it waits for more (see
        # QueueState._pump_dequeue); they go back to the queue if it does not complete.
        self.held: list = []

    def abandoned(self) -> str | None:
        if self.execution is not None and self.execution.cancelled.is_set():
            return "the step was cancelled"
        if self.ctx is not None and self.ctx.owner_closed:
            return "the session was closed"
        return None


class _PriorityItems:
    """A priority queue's elements: a heap on (priority, arrival), with the few list methods
    ``QueueState`` uses (``append`` to add, ``popleft`` for the lowest priority, ``extend``
    to put elements back); iterating gives the elements in the order they will leave."""

    def __init__(self, elements=()):
        self._heap: list = []
        self._arrival = itertools.count()
        self.extend(elements)

    def append(self, element) -> None:
        heapq.heappush(self._heap, (int(element[0]), next(self._arrival), element))

    def extend(self, elements) -> None:
        for e in elements:
            self.append(e)

    def popleft(self):
        return heapq.heappop(self._heap)[2]

    def __len__(self) -> int:
        return len(self._heap)

    def __iter__(self):
        return iter([e for _, _, e in sorted(self._heap, key=lambda t: t[:2])])


class QueueState:
    """The state of one queue; all methods are thread-safe."""

    def __init__(self, name, kind, dtypes, shapes, capacity, min_after_dequeue=0, seed=None):
        self.name = name
        self.kind = kind  # "fifo", "random_shuffle" or "padding_fifo"
        self.dtypes = list(dtypes)
        self.shapes = [TensorShape(s) if s is not None else TensorShape(None) for s in shapes] \
            if shapes else [TensorShape(None)] * len(self.dtypes)
        self.capacity = capacity if capacity and capacity > 0 else None
        self.min_after_dequeue = min_after_dequeue if kind == "random_shuffle" else 0
        self._rng = np.random.default_rng(seed) if kind == "random_shuffle" else None
        self._items = self._new_items()
        self._lock = threading.Lock()
        self._closed = False
        self._enqueues: deque[_Attempt] = deque()
        self._dequeues: deque[_Attempt] = deque()
        self._watchdog: threading.Thread | None = None

    def _new_items(self, elements=()):
        if self.kind == "priority":
            return _PriorityItems(elements)
        return list(elements) if self.kind == "random_shuffle" else deque(elements)

    def __repr__(self):
        return f"<QueueState {self.name} {self.kind} size={len(self._items)}>"

    # --- queries -------------------------------------------------------------------------------
    def size(self) -> int:
        if not self._enqueues and not self._dequeues:
            return len(self._items)
        # Settle attempts whose step is gone first: a cancelled dequeue's held elements are
        # back in the queue before anyone sees its size, not only when the watchdog looks.
        with self._lock:
            finished = self._pump()
            n = len(self._items)
        self._finish(finished)
        return n

    @property
    def closed(self) -> bool:
        return self._closed

    def contents(self) -> tuple:
        """What the queue holds: ``(elements, closed, shuffle generator state)``, a copy that
        ``restore`` can put back (elements are immutable tuples, shared, not copied)."""
        with self._lock:
            rng = None if self._rng is None else copy.deepcopy(self._rng.bit_generator.state)
            return tuple(self._items), self._closed, rng

    def restore(self, contents: tuple) -> None:
        """Make the queue hold ``contents`` (from ``contents()``) again. Attempts whose step is
        gone are settled first, so what a cancelled dequeue held is not put back on top."""
        items, closed, rng = contents
        with self._lock:
            finished = self._pump()
            self._items = self._new_items(items)
            self._closed = closed
            if rng is not None:
                self._rng.bit_generator.state = copy.deepcopy(rng)
            finished += self._pump()
        self._finish(finished)

    # --- public operations (called by the kernels) -------------------------------------------
    def enqueue(self, elements: list, execution, done, ctx) -> None:
        with self._lock:
            if self._closed:
                err = errors.CancelledError(None, None, f"Queue '{self.name}' is closed.")
                finished = [(done, None, err)]
            else:
                self._enqueues.append(_Attempt(execution, done, ctx, deque(elements)))
                finished = self._pump()
        self._finish(finished)

    def dequeue(self, n: int, allow_smaller: bool, execution, done, ctx) -> None:
        with self._lock:
            self._dequeues.append(_Attempt(execution, done, ctx, n=n,
                                           allow_smaller=allow_smaller))
            finished = self._pump()
        self._finish(finished)

    def close(self, cancel_pending_enqueues: bool) -> None:
        with self._lock:
            self._closed = True
            finished = []
            if cancel_pending_enqueues:
                while self._enqueues:
                    a = self._enqueues.popleft()
                    finished.append((a.done, None, errors.CancelledError(
                        None, None, f"Enqueue operation was cancelled: queue '{self.name}' "
                        "was closed with cancel_pending_enqueues=True")))
            finished += self._pump()
        self._finish(finished)

    # --- the core: complete every parked attempt that can complete, in FIFO order -----------
    def _pump(self) -> list:
        """Under the lock: returns ``[(done, outputs, error)]`` to call outside it."""
        finished = []
        progress = True
        while progress:
            progress = self._drop_abandoned(finished)
            progress |= self._pump_enqueue(finished)
            progress |= self._pump_dequeue(finished)
        if self._enqueues or self._dequeues:
            self._ensure_watchdog()
        return finished

    def _drop_abandoned(self, finished) -> bool:
        dropped = False
        for attempts in (self._enqueues, self._dequeues):
            for a in [a for a in attempts if a.abandoned()]:
                attempts.remove(a)
                self._put_back(a)
                finished.append((a.done, None, errors.CancelledError(
                    None, None, f"Queue '{self.name}' operation cancelled: {a.abandoned()}")))
                dropped = True
        return dropped

    def _pump_enqueue(self, finished) -> bool:
        progress = False
        while self._enqueues:
            a = self._enqueues[0]
            while a.elements and (self.capacity is None or len(self._items) < self.capacity):
                self._items.append(a.elements.popleft())
                progress = True
            if a.elements:
                break  # full: the head waits, and the ones behind it keep their turn
            self._enqueues.popleft()
            finished.append((a.done, None, None))
            progress = True
        return progress

    def _pump_dequeue(self, finished) -> bool:
        """Complete parked dequeues in order. A ``dequeue_many(n)`` with ``n`` above what the
        queue can hold takes the elements of a full queue as they come, as TF's queues do, so
        that enqueues go on (``batch(batch_size=100, capacity=32)`` fills, slowly, rather than
        waiting forever); what it holds goes back to the front if it fails or is cancelled."""
        progress = False
        while self._dequeues:
            a = self._dequeues[0]
            want = max(a.n, 1) - len(a.held)
            available = len(self._items) - (0 if self._closed else self.min_after_dequeue)
            if available >= want:
                take = want
            elif self._closed and not self._enqueues:
                self._put_back(a)
                if a.allow_smaller and len(self._items) > 0:
                    take = len(self._items)
                else:
                    self._dequeues.popleft()
                    finished.append((a.done, None, self._out_of_range(max(a.n, 1))))
                    progress = True
                    continue
            else:
                if a.n and available > 0 and self._full():
                    a.held.extend(self._pop(available))
                    progress = True
                break
            self._dequeues.popleft()
            finished.append((a.done, self._take(take, a.n == 0, a), None))
            progress = True
        return progress

    def _full(self) -> bool:
        return self.capacity is not None and len(self._items) >= self.capacity

    def _put_back(self, a: _Attempt) -> None:
        """Return what a dequeue held to the front of the queue (nothing is lost)."""
        if a.held:
            if self.kind in ("random_shuffle", "priority"):
                self._items.extend(a.held)
            else:
                self._items.extendleft(reversed(a.held))
            a.held = []

    def _out_of_range(self, want: int):
        return errors.OutOfRangeError(
            None, None, f"{self._display_kind()} '{self.name}' is closed and has insufficient "
            f"elements (requested {want}, current size {len(self._items)})")

    def _display_kind(self) -> str:
        return {"fifo": "FIFOQueue", "random_shuffle": "RandomShuffleQueue",
                "padding_fifo": "PaddingFIFOQueue", "priority": "PriorityQueue"}[self.kind]

    def _pop(self, k: int) -> list:
        if self.kind == "random_shuffle":
            elements = []
            for _ in range(k):
                i = int(self._rng.integers(len(self._items)))
                # Swap-remove: O(1) per element; the order left behind is random anyway.
                self._items[i], self._items[-1] = self._items[-1], self._items[i]
                elements.append(self._items.pop())
            return elements
        return [self._items.popleft() for _ in range(k)]

    def _take(self, k: int, single: bool, a: _Attempt):
        elements = a.held + self._pop(k)
        a.held = []
        if single:
            outs = elements[0]
        else:
            outs = tuple(self._batch([e[c] for e in elements], c)
                         for c in range(len(self.dtypes)))
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _batch(self, values: list, component: int) -> np.ndarray:
        dtype = self.dtypes[component]._np
        if self.kind == "padding_fifo":
            return _pad_stack(values, dtype)
        if not values:
            shape = self.shapes[component]
            dims = shape.as_list() if shape.is_fully_defined() else []
            return np.zeros([0] + dims, dtype=dtype)
        shapes = {np.shape(v) for v in values}
        if len(shapes) > 1:
            raise errors.InvalidArgumentError(
                None, None, f"Queue '{self.name}': cannot batch component {component} with "
                f"different shapes {sorted(shapes)}; use a PaddingFIFOQueue (dynamic_pad=True)")
        return np.stack([np.asarray(v, dtype=dtype) for v in values])

    # --- completion and cancellation ---------------------------------------------------------
    @staticmethod
    def _finish(finished: list) -> None:
        for done, outputs, error in finished:
            if error is not None:
                done(error=error)
            else:
                done(outputs)

    def _ensure_watchdog(self) -> None:
        if self._watchdog is None or not self._watchdog.is_alive():
            self._watchdog = threading.Thread(target=self._watch, daemon=True,
                                              name=f"dflab-queue-watchdog-{self.name}")
            self._watchdog.start()

    def _watch(self) -> None:
        """Fail parked attempts whose step or session is gone; exit once none is parked."""
        while True:
            time.sleep(_POLL_SECONDS)
            with self._lock:
                finished = []
                if any(a.abandoned() for a in list(self._enqueues) + list(self._dequeues)):
                    finished = self._pump()
                idle = not self._enqueues and not self._dequeues
                if idle:
                    self._watchdog = None
            self._finish(finished)
            if idle:
                return


def _pad_stack(values: list, dtype) -> np.ndarray:
    """Stack arrays of equal rank, padding each to the largest size per dimension."""
    arrays = [np.asarray(v, dtype=dtype) for v in values]
    if not arrays:
        return np.zeros((0,), dtype=dtype)
    ranks = {a.ndim for a in arrays}
    if len(ranks) > 1:
        raise errors.InvalidArgumentError(None, None, f"PaddingFIFOQueue: elements of ranks "
                                          f"{sorted(ranks)} cannot be padded together")
    shape = np.max([a.shape for a in arrays], axis=0) if arrays[0].ndim else ()
    pad = b"" if dtype == np.object_ else 0
    out = np.full((len(arrays),) + tuple(int(s) for s in shape), pad, dtype=dtype)
    for k, a in enumerate(arrays):
        out[(k,) + tuple(slice(0, s) for s in a.shape)] = a
    return out


# --- kernels ------------------------------------------------------------------------------------
def _queue_factory(kind: str):
    def factory(node, ctx):
        a = node.attr
        key = a.get("shared_name") or node.name
        seed = None
        if kind == "random_shuffle" and (a.get("seed") or a.get("seed2")):
            seed = [int(a.get("seed") or 0), int(a.get("seed2") or 0)]

        types, shapes = a["component_types"], a.get("shapes")
        if kind == "priority":  # the priority leads every element
            types, shapes = [_dt.int64, *types], [TensorShape([]), *(shapes or [])]

        def create():
            return QueueState(key, kind, types, shapes, a.get("capacity", -1),
                              a.get("min_after_dequeue", 0), seed)

        def queue():
            return ctx.resources.lookup_or_create("queue", key, create,
                                                  a.get("container", ""))

        return queue

    return factory


register_kernel("FIFOQueueV2", host_only=True, factory=_queue_factory("fifo"))
register_kernel("RandomShuffleQueueV2", host_only=True, factory=_queue_factory("random_shuffle"))
register_kernel("PaddingFIFOQueueV2", host_only=True, factory=_queue_factory("padding_fifo"))
register_kernel("PriorityQueueV2", host_only=True, factory=_queue_factory("priority"))


def _check_component(q: QueueState, c: int, value, batched: bool) -> np.ndarray:
    arr = np.asarray(value)
    shape = q.shapes[c]
    elem_shape = arr.shape[1:] if batched else arr.shape
    if shape.ndims is not None and not shape.is_compatible_with(TensorShape(list(elem_shape))):
        raise errors.InvalidArgumentError(
            None, None, f"Shape mismatch in tuple component {c} of queue '{q.name}'. "
            f"Expected {shape.as_list()}, got {list(elem_shape)}")
    return arr


def _elements(q: QueueState, components, batched: bool) -> list:
    if len(components) != len(q.dtypes):
        raise errors.InvalidArgumentError(None, None, f"Queue '{q.name}' expects "
                                          f"{len(q.dtypes)} components, got {len(components)}")
    arrays = [_check_component(q, c, v, batched) for c, v in enumerate(components)]
    if not batched:
        return [tuple(arrays)]
    sizes = {a.shape[0] if a.ndim else None for a in arrays}
    if len(sizes) != 1 or None in sizes:
        raise errors.InvalidArgumentError(
            None, None, f"EnqueueMany on queue '{q.name}' needs components with the same first "
            f"dimension, got shapes {[list(a.shape) for a in arrays]}")
    # Copies: an element must not alias the caller's batch (kernels never share mutable data).
    return [tuple(np.array(a[i]) for a in arrays) for i in range(sizes.pop())]


def _enqueue_factory(batched: bool):
    def factory(node, ctx):

        def enqueue(execution, done, queue, *components):
            queue.enqueue(_elements(queue, components, batched), execution, done, ctx)

        return enqueue

    return factory


register_kernel("QueueEnqueueV2", host_only=True, factory=_enqueue_factory(False), is_async=True)
register_kernel("QueueEnqueueManyV2", host_only=True, factory=_enqueue_factory(True), is_async=True)


def _check_n(n) -> int:
    n = int(np.asarray(n))
    if n < 0:
        raise errors.InvalidArgumentError(None, None, f"Dequeue requested {n} < 0 elements")
    return n


@kernel("QueueDequeueV2", host_only=True, is_async=True)
def _dequeue(node, ctx):

    def dequeue(execution, done, queue):
        queue.dequeue(0, False, execution, done, ctx)

    return dequeue


def _dequeue_many_factory(allow_smaller: bool):
    def factory(node, ctx):

        def dequeue_many(execution, done, queue, n):
            k = _check_n(n)
            if k == 0:
                done(tuple(queue._batch([], c) for c in range(len(queue.dtypes)))
                     if len(queue.dtypes) > 1 else queue._batch([], 0))
                return
            queue.dequeue(k, allow_smaller, execution, done, ctx)

        return dequeue_many

    return factory


register_kernel("QueueDequeueManyV2", host_only=True, factory=_dequeue_many_factory(False),
                is_async=True)
register_kernel("QueueDequeueUpToV2", host_only=True, factory=_dequeue_many_factory(True),
                is_async=True)


@kernel("QueueCloseV2", host_only=True)
def _close(node, ctx):
    cancel = bool(node.attr.get("cancel_pending_enqueues", False))

    def close(queue):
        queue.close(cancel)

    return close


@kernel("QueueSizeV2", host_only=True)
def _size(node, ctx):
    return lambda queue: np.int32(queue.size())


@kernel("QueueIsClosedV2", host_only=True)
def _is_closed(node, ctx):
    return lambda queue: np.bool_(queue.closed)
