"""Conditional accumulator kernels (``dflab.ops.accumulator_ops``).

An accumulator is a resource in its device's ``ResourceMgr`` (keyed by ``shared_name`` or the
op's name), so every client session on the task shares it — the workers of synchronous
replication all apply to the ps's accumulator. ``take_grad`` is an asynchronous kernel: a take
that cannot complete yet is parked with its ``done`` callback and holds no thread; the apply
that brings the count to what it needs completes it. A watchdog (alive only while takes are
parked) fails the takes whose step was cancelled or whose session closed, as the queues do.
Host memory only, as TF's (the gradients are NumPy arrays).
"""

from __future__ import annotations

import threading
import time
from collections import deque

import numpy as np

from dflab.framework import errors
from dflab.kernels.data_flow_kernels import _POLL_SECONDS, _Attempt
from dflab.kernels.registry import kernel, register_kernel


class AccumulatorState:
    """One accumulator's sum, count, global step and parked takes; thread-safe."""

    def __init__(self, name: str, dtype, shape, reduction: str, sparse: bool):
        self.name = name
        self.dtype = dtype._np
        self.shape = shape
        self.mean = reduction == "MEAN"
        self.sparse = sparse
        self.global_step = 0
        self.count = 0
        self._sum = None  # dense: the running sum; sparse: {row index: (sum, count)}
        self._rows: dict = {}
        self._dense_shape = None
        self._lock = threading.Lock()
        self._takes: deque[_Attempt] = deque()
        self._watchdog = None

    # --- applying ------------------------------------------------------------------------
    def apply(self, local_step: int, grad, indices=None, dense_shape=None) -> None:
        """Add a gradient unless it is stale (computed before the current global step)."""
        grad = np.asarray(grad)
        if grad.dtype != self.dtype:
            raise errors.InvalidArgumentError(
                None, None, f"Accumulator '{self.name}' holds {np.dtype(self.dtype).name}, "
                f"got a gradient of {grad.dtype.name}")
        with self._lock:
            if local_step < self.global_step:
                return  # stale: a straggler's gradient for a step already taken
            if self.sparse:
                self._apply_rows(np.asarray(indices, np.int64), grad, dense_shape)
            else:
                self._apply_dense(grad)
            self.count += 1
            finished = self._pump()
        _finish(finished)

    def _apply_dense(self, grad) -> None:
        if self.shape.ndims is not None and not self.shape.is_compatible_with(grad.shape):
            raise errors.InvalidArgumentError(
                None, None, f"Shape mismatch: accumulator '{self.name}' expects "
                f"{self.shape.as_list()}, got a gradient of shape {list(grad.shape)}")
        if self._sum is None:
            self._sum = np.array(grad, copy=True)
        elif self._sum.shape != grad.shape:
            raise errors.InvalidArgumentError(
                None, None, f"Shape mismatch: accumulator '{self.name}' holds gradients of "
                f"shape {list(self._sum.shape)}, got {list(grad.shape)}")
        else:
            self._sum += grad

    def _apply_rows(self, indices, values, dense_shape) -> None:
        if values.ndim == 0 or len(indices) != values.shape[0]:
            raise errors.InvalidArgumentError(
                None, None, f"Accumulator '{self.name}': {len(indices)} indices for values of "
                f"shape {list(values.shape)}")
        if dense_shape is not None:
            dense_shape = tuple(int(d) for d in np.asarray(dense_shape))
            if self._dense_shape is not None and self._dense_shape != dense_shape:
                raise errors.InvalidArgumentError(
                    None, None, f"Shape mismatch: accumulator '{self.name}' holds gradients "
                    f"of shape {list(self._dense_shape)}, got {list(dense_shape)}")
            self._dense_shape = dense_shape
        for i, row in zip(indices.tolist(), values):
            held = self._rows.get(i)
            self._rows[i] = (np.array(row, copy=True), 1) if held is None else \
                (held[0] + row, held[1] + 1)

    def set_global_step(self, step: int) -> None:
        with self._lock:
            self.global_step = max(int(step), 0)

    # --- taking --------------------------------------------------------------------------
    def take(self, num_required: int, execution, done, ctx) -> None:
        if num_required < 1:
            raise errors.InvalidArgumentError(
                None, None, f"Argument num_required must be positive, but was {num_required}")
        with self._lock:
            self._takes.append(_Attempt(execution, done, ctx, n=num_required))
            finished = self._pump()
        _finish(finished)

    def _pump(self) -> list:
        """Under the lock: complete the head take if enough gradients are in; drop abandoned
        ones. Returns ``[(done, outputs, error)]`` to call outside the lock."""
        finished = []
        for a in [a for a in self._takes if a.abandoned()]:
            self._takes.remove(a)
            finished.append((a.done, None, errors.CancelledError(
                None, None, f"TakeGrad of accumulator '{self.name}' cancelled: "
                f"{a.abandoned()}")))
        while self._takes and self.count >= self._takes[0].n:
            a = self._takes.popleft()
            finished.append((a.done, self._take_locked(), None))
        if self._takes:
            self._ensure_watchdog()
        return finished

    def _take_locked(self):
        self.global_step += 1
        count, self.count = self.count, 0
        if not self.sparse:
            out, self._sum = self._sum, None
            return out / np.asarray(count, out.dtype) if self.mean else out
        rows, self._rows = self._rows, {}
        indices = np.array(sorted(rows), np.int64)
        if len(indices):
            values = np.stack([rows[i][0] / rows[i][1] if self.mean else rows[i][0]
                               for i in indices.tolist()]).astype(self.dtype, copy=False)
        else:
            values = np.zeros((0,), self.dtype)
        shape = self._dense_shape
        if shape is None and self.shape.is_fully_defined():
            shape = tuple(self.shape.as_list())
        if shape is None:
            shape = (int(indices.max()) + 1 if len(indices) else 0,) + values.shape[1:]
        return indices, values, np.array(shape, np.int64)

    def num_accumulated(self) -> int:
        with self._lock:
            return self.count

    def _ensure_watchdog(self) -> None:
        if self._watchdog is None or not self._watchdog.is_alive():
            self._watchdog = threading.Thread(target=self._watch, daemon=True,
                                              name=f"dflab-accumulator-watchdog-{self.name}")
            self._watchdog.start()

    def _watch(self) -> None:
        while True:
            time.sleep(_POLL_SECONDS)
            with self._lock:
                finished = self._pump() if any(a.abandoned() for a in self._takes) else []
                idle = not self._takes
                if idle:
                    self._watchdog = None
            _finish(finished)
            if idle:
                return


def _finish(finished) -> None:
    for done, outputs, error in finished:
        if error is not None:
            done(error=error)
        else:
            done(outputs)


def _accumulator_factory(sparse: bool):
    def factory(node, ctx):
        a = node.attr
        key = a.get("shared_name") or node.name

        def create():
            return AccumulatorState(key, a["dtype"], a["shape"], a["reduction_type"], sparse)

        return lambda: ctx.resources.lookup_or_create("accumulator", key, create,
                                                      a.get("container", ""))

    return factory


register_kernel("ConditionalAccumulator", host_only=True, factory=_accumulator_factory(False))
register_kernel("SparseConditionalAccumulator", host_only=True, factory=_accumulator_factory(True))


@kernel("AccumulatorApplyGradient", host_only=True)
def _apply(node, ctx):
    def apply(acc, local_step, grad):
        acc.apply(int(local_step), grad)

    return apply


@kernel("SparseAccumulatorApplyGradient", host_only=True)
def _apply_sparse(node, ctx):
    def apply(acc, local_step, indices, values, shape=None):
        acc.apply(int(local_step), values, indices, shape)

    return apply


def _take_factory(node, ctx):
    def take(execution, done, acc, num_required):
        acc.take(int(num_required), execution, done, ctx)

    return take


register_kernel("AccumulatorTakeGradient", host_only=True, factory=_take_factory,
                is_async=True)
register_kernel("SparseAccumulatorTakeGradient", host_only=True, factory=_take_factory,
                is_async=True)


@kernel("AccumulatorNumAccumulated", host_only=True)
def _num(node, ctx):
    return lambda acc: np.int32(acc.num_accumulated())


@kernel("AccumulatorSetGlobalStep", host_only=True)
def _set_step(node, ctx):
    def set_step(acc, step):
        acc.set_global_step(int(step))

    return set_step
