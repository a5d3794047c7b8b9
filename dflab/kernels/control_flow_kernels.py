"""Kernels of the control-flow primitives, and the *dead* marker.

Deadness is the executor's business: a node with a dead input produces dead outputs without
running its kernel, a ``Merge`` runs on whichever input is live, and frames route ``Enter``,
``Exit`` and ``NextIteration`` values. What is left for the kernels is small: ``Switch`` sends its
input to the port its predicate selects (the other port gets ``DEAD``), ``Merge`` forwards the
live input the executor chose with its index, and the frame ops forward their input.
"""

from __future__ import annotations

import threading

import numpy as np

from dflab.framework import errors
from dflab.kernels.context import host
from dflab.kernels.logging_kernels import summarize_flat
from dflab.kernels.registry import ANY_DEVICE, kernel, register_kernel


class _Dead:
    """The value of a tensor on an untaken branch. A single shared instance."""

    __slots__ = ()

    def __repr__(self):
        return "DEAD"


DEAD = _Dead()

# Control-flow kernels only route values: every device type runs them (ANY_DEVICE).


def _forward(x):
    return x


# A variable's reference travels through frames and branches as itself (TF's RefEnter,
# RefSwitch): consumers read or update the variable, not a snapshot taken at the boundary.
_forward.accepts_refs = True


for _op in ("Enter", "RefEnter", "Exit", "RefExit", "NextIteration", "RefNextIteration"):
    register_kernel(_op, ANY_DEVICE, fn=_forward, routes_only=True)


def _predicate(node, pred) -> bool:
    shape = getattr(pred, "shape", ())  # any namespace's array or scalar (hot: every Switch)
    if shape != ():
        raise errors.InvalidArgumentError(
            None, node, f"The predicate of {node.name} must be a scalar, got shape {shape}")
    return bool(pred)


# A predicate, a loop condition and an iteration index are read on the host (TF's HostMemory
# ports on GPUs): a device value arriving there is read under the device's issue lock.
@kernel("Switch", ANY_DEVICE, routes_only=True, host_memory_inputs=(1,))
@kernel("RefSwitch", ANY_DEVICE, routes_only=True, host_memory_inputs=(1,))
def _switch(node, ctx):
    def switch(data, pred):
        return (DEAD, data) if _predicate(node, pred) else (data, DEAD)

    switch.accepts_refs = True
    return switch


@kernel("LoopCond", ANY_DEVICE, routes_only=True, host_memory_inputs=(0,))
def _loop_cond(node, ctx):
    def loop_cond(pred):
        # A host boolean, as TF's LoopCond answers in host memory on a GPU: the loop's Switches
        # (and a fused loop's test) read it without a trip to the device.
        return np.bool_(_predicate(node, pred))

    return loop_cond


def _merge(value, index):
    return value, np.int32(index)


register_kernel("Merge", ANY_DEVICE, fn=_merge, routes_only=True)
register_kernel("RefMerge", ANY_DEVICE, fn=_merge, routes_only=True)


@kernel("Assert", host_only=True)
def _assert(node, ctx):
    summarize = node.attr.get("summarize", 3)

    def check(condition, *data):
        if not bool(host(condition)):
            shown = " ".join(f"[{summarize_flat(d, summarize)}]" for d in data)
            raise errors.InvalidArgumentError(None, node, f"assertion failed: {shown}")

    return check


# --- accumulators of forward values for loop gradients (dflab.ops.control_flow_grad) ---------
class _Accumulator:
    """Values of one forward tensor, per tuple of forward iteration indices, for one step."""

    __slots__ = ("values", "lock", "name")

    def __init__(self, name):
        self.values = {}
        self.lock = threading.Lock()
        self.name = name

    def __repr__(self):
        return f"<accumulator of {self.name}: {len(self.values)} values>"


@kernel("_LoopAccumulator", routes_only=True)
def _accumulator_kernel(node, ctx):
    name = node.attr.get("tensor_name", node.name)
    return lambda: _Accumulator(name)


def _push(acc, value, *index):
    if any(i is DEAD for i in index):  # the iteration that ends the loop: nothing to save
        return np.int32(0)
    with acc.lock:
        acc.values[tuple(int(i) for i in index)] = value
    return np.int32(0)


register_kernel("_LoopAccumulatorPush", fn=_push, routes_only=True,
                host_memory_inputs=lambda node_def: range(2, len(node_def.input)))


@kernel("_LoopAccumulatorGet", routes_only=True,
        host_memory_inputs=lambda node_def: range(1, len(node_def.input)))
def _get_kernel(node, ctx):
    def get(acc, *index):
        key = tuple(int(i) for i in index)
        try:
            return acc.values[key]
        except KeyError:
            raise errors.InternalError(
                None, node, f"No forward value of {acc.name} saved for iteration {key}") from None

    return get
