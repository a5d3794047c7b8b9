"""Kernels of the control-flow primitives, and the *dead* marker.

Deadness is the executor's business: a node with a dead input produces dead outputs without
running its kernel, a ``Merge`` runs on whichever input is live, and frames route ``Enter``,
``Exit`` and ``NextIteration`` values. What is left for the kernels is small: ``Switch`` sends its
input to the port its predicate selects (the other port gets ``DEAD``), ``Merge`` forwards the
live input the executor chose with its index, and the frame ops forward their input.
"""

from __future__ import annotations

import numpy as np

from dflab.framework import errors
from dflab.kernels.registry import kernel, register_kernel


class _Dead:
    """The value of a tensor on an untaken branch. A single shared instance."""

    __slots__ = ()

    def __repr__(self):
        return "DEAD"


DEAD = _Dead()

_ALL_DEVICES = ("CPU",)


def _forward(x):
    return x


for _op in ("Enter", "RefEnter", "Exit", "RefExit", "NextIteration", "RefNextIteration"):
    register_kernel(_op, _ALL_DEVICES, fn=_forward)


def _predicate(op, pred) -> bool:
    p = np.asarray(pred)
    if p.shape != ():
        raise errors.InvalidArgumentError(
            None, op, f"The predicate of {op.name} must be a scalar, got shape {p.shape}")
    return bool(p)


@kernel("Switch", _ALL_DEVICES)
@kernel("RefSwitch", _ALL_DEVICES)
def _switch(op, ctx):
    def switch(data, pred):
        return (DEAD, data) if _predicate(op, pred) else (data, DEAD)

    return switch


@kernel("LoopCond", _ALL_DEVICES)
def _loop_cond(op, ctx):
    def loop_cond(pred):
        _predicate(op, pred)
        return pred

    return loop_cond


def _merge(value, index):
    return value, np.int32(index)


register_kernel("Merge", _ALL_DEVICES, fn=_merge)
register_kernel("RefMerge", _ALL_DEVICES, fn=_merge)


@kernel("Assert")
def _assert(op, ctx):
    summarize = op._attrs.get("summarize", 3)

    def check(condition, *data):
        if not bool(np.asarray(condition)):
            shown = ", ".join(np.array2string(np.asarray(d).ravel()[:summarize], separator=",")
                              for d in data)
            raise errors.InvalidArgumentError(
                None, op, f"assertion failed: [{shown}]")

    return check
