"""Kernel registry: implementations per (op type, device type), kept apart from op schemas.

A kernel is registered either as a plain function ``fn(*inputs) -> output(s)`` (for ops without
attributes, e.g. ``Add`` is ``np.add``) or as a *factory* ``factory(op, ctx) -> fn`` that reads the
op's attributes once, when a plan is built, and returns the callable the executor invokes on
every step. ``ctx`` gives the device, its array namespace ``xp`` and its resource manager. A kernel
returns one value for a single-output op and a tuple otherwise.

The placer asks ``has_kernel`` which device types can run an op; a missing kernel is an error
naming the op type and device.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from dflab.framework import errors


@dataclass(frozen=True)
class KernelDef:
    op_type: str
    device_type: str
    factory: Callable  # (op, ctx) -> callable
    takes_step: bool  # called as fn(step, *inputs): needs the per-step context (cancellation…)
    site: str
    # Called as fn(step, done, *inputs); calls done(outputs) or done(error=e) exactly once,
    # from any thread, so that waiting (a Recv) holds no thread.
    is_async: bool = False


_KERNELS: dict[tuple[str, str], KernelDef] = {}


def register_kernel(op_type: str, device_types=("CPU",), *, fn: Callable | None = None,
                    factory: Callable | None = None, takes_step: bool = False,
                    is_async: bool = False) -> None:
    if (fn is None) == (factory is None):
        raise TypeError("register_kernel needs exactly one of fn= or factory=")
    if factory is None:
        def factory(op, ctx, _fn=fn):
            return _fn
    if isinstance(device_types, str):
        device_types = (device_types,)
    frame = inspect.stack()[1]
    site = f"{frame.filename}:{frame.lineno}"
    for dt in device_types:
        key = (op_type, dt.upper())
        if key in _KERNELS:
            raise KeyError(f"Kernel for {op_type} on {dt} already registered at "
                           f"{_KERNELS[key].site}")
        _KERNELS[key] = KernelDef(op_type, dt.upper(), factory, takes_step or is_async, site,
                                  is_async)


def kernel(op_type: str, device_types=("CPU",), takes_step: bool = False,
           is_async: bool = False):
    """Decorator form: registers the decorated *factory* ``(op, ctx) -> fn``."""

    def deco(factory):
        register_kernel(op_type, device_types, factory=factory, takes_step=takes_step,
                        is_async=is_async)
        return factory

    return deco


def has_kernel(op_type: str, device_type: str) -> bool:
    return (op_type, device_type.upper()) in _KERNELS


def kernel_device_types(op_type: str) -> list[str]:
    return sorted(dt for (t, dt) in _KERNELS if t == op_type)


def get_kernel_def(op, device_type: str) -> KernelDef:
    kd = _KERNELS.get((op.type, device_type.upper()))
    if kd is None:
        raise errors.NotFoundError(
            None, op, f"No registered '{op.type}' OpKernel for {device_type} devices compatible "
            f"with node {op.name}. Registered devices: {kernel_device_types(op.type)}"
        )
    return kd


def quiet(fn: Callable) -> Callable:
    """``fn`` with NumPy's floating-point warnings silenced: TF returns inf/NaN silently, so
    kernels of ops that can legitimately produce them (division, log, sqrt…) use this."""

    def quiet_fn(*args):
        with np.errstate(all="ignore"):
            return fn(*args)

    quiet_fn.__name__ = getattr(fn, "__name__", "quiet")
    return quiet_fn


def registered_fn(op_type: str, device_type: str) -> Callable:
    """The plain function registered with ``fn=`` for ``op_type`` (kernels that read no
    attributes): lets fused kernels call exactly what the unfused op would."""
    kd = _KERNELS[(op_type, device_type.upper())]
    return kd.factory(None, None)
