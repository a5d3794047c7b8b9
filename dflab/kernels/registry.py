"""Kernel registry: implementations per (op type, device type), kept apart from op schemas.

A kernel is registered in one of three forms:

- ``factory(node_def, ctx) -> fn``: reads the node's attributes and input/output dtypes once,
  when a plan is built, from its typed ``NodeDef`` (plain data: a kernel never sees the user's
  ``Operation``, so a partition's kernels can be rebuilt in another process), and returns the
  callable the executor invokes on every step. ``ctx`` is a ``KernelContext``
  (``dflab.kernels.context``): the device, its array namespace ``xp``, its resources.
- ``xp="name"``: the device's array namespace's function of that name (``AddV2`` is
  ``xp.add``), looked up once per plan: ``numpy.add`` on a CPU, ``cupy.add`` on a GPU;
  ``xp=f`` (a function ``f(xp, *inputs)``): ``f`` with the device's namespace bound first.
- ``fn=f``: one function for every device, for kernels that compute nothing with arrays
  (identities, references, Python-side bookkeeping).

A kernel returns one value for a single-output op and a tuple otherwise. Kernels write array
math against ``ctx.xp`` wherever NumPy and CuPy agree; small host-side arguments (shapes, axes,
sizes: what TF keeps in host memory) are read with NumPy.

The placer asks ``has_kernel`` which device types can run an op; a missing kernel is an error
naming the op type and device.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from dflab.framework import errors
from dflab.kernels import intra_op
from dflab.kernels.context import HOST


@dataclass(frozen=True)
class KernelDef:
    op_type: str
    device_type: str
    factory: Callable  # (node_def, ctx) -> callable
    takes_step: bool  # called as fn(step, *inputs): needs the per-step context (cancellation…)
    site: str
    # Called as fn(step, done, *inputs); calls done(outputs) or done(error=e) exactly once,
    # from any thread, so that waiting (a Recv) holds no thread.
    is_async: bool = False


_KERNELS: dict[tuple[str, str], KernelDef] = {}

# Registers a kernel for every device type, present and future (e.g. _Send/_Recv, which
# compute nothing): a device type plugged in later needs no registration of its own.
ANY_DEVICE = "*"


def register_kernel(op_type: str, device_types=("CPU",), *, fn: Callable | None = None,
                    xp: str | Callable | None = None, factory: Callable | None = None,
                    quiet_fp: bool = False, elementwise: bool = False, takes_step: bool = False,
                    is_async: bool = False) -> None:
    """Register a kernel for ``op_type`` on ``device_types`` (see the module docstring for the
    forms). ``quiet_fp``: the op may legitimately produce inf/NaN (see ``quiet``).
    ``elementwise`` (with ``xp=``): the function is elementwise and takes ``out=``, so that on
    the host a big one is split among the intra-op threads (``intra_op.elementwise``)."""
    if sum(f is not None for f in (fn, xp, factory)) != 1:
        raise TypeError("register_kernel needs exactly one of fn=, xp= or factory=")
    if elementwise and xp is None:
        raise TypeError("elementwise= goes with xp=")
    if fn is not None:
        factory = _constant_factory(quiet(fn) if quiet_fp else fn)
    elif xp is not None:
        factory = _xp_factory(xp, quiet_fp, elementwise)
    elif quiet_fp:
        raise TypeError("quiet_fp= goes with fn= or xp=; a factory wraps its own fn in quiet()")
    if isinstance(device_types, str):
        device_types = (device_types,)
    # sys._getframe, not inspect.stack(): the latter reads source files for every frame.
    frame = sys._getframe(1)
    site = f"{frame.f_code.co_filename}:{frame.f_lineno}"
    for dt in device_types:
        key = (op_type, dt.upper())
        if key in _KERNELS:
            raise KeyError(f"Kernel for {op_type} on {dt} already registered at "
                           f"{_KERNELS[key].site}")
        _KERNELS[key] = KernelDef(op_type, dt.upper(), factory, takes_step or is_async, site,
                                  is_async)


def _constant_factory(fn: Callable) -> Callable:
    def factory(node_def, ctx):
        return fn

    return factory


def _xp_factory(xp_fn: str | Callable, quiet_fp: bool, elementwise: bool) -> Callable:
    def factory(node_def, ctx):
        namespace = ctx.xp
        if isinstance(xp_fn, str):
            fn = getattr(namespace, xp_fn)
        else:
            fn = functools.partial(xp_fn, namespace)
        if quiet_fp:
            fn = quiet(fn)
        # Each split part runs fn (quiet included: NumPy's error state is per thread). A plan
        # built with one intra-op thread (the session sets the count before it builds plans)
        # calls fn bare: the split's check costs a small op about a fifth of its time.
        if elementwise and namespace is np and intra_op.threads() > 1:
            return intra_op.elementwise(fn)
        return fn

    return factory


def kernel(op_type: str, device_types=("CPU",), takes_step: bool = False,
           is_async: bool = False):
    """Decorator form: registers the decorated *factory* ``(node_def, ctx) -> fn``."""

    def deco(factory):
        register_kernel(op_type, device_types, factory=factory, takes_step=takes_step,
                        is_async=is_async)
        return factory

    return deco


def _lookup(op_type: str, device_type: str) -> KernelDef | None:
    return _KERNELS.get((op_type, device_type.upper())) or _KERNELS.get((op_type, ANY_DEVICE))


def has_kernel(op_type: str, device_type: str) -> bool:
    return _lookup(op_type, device_type) is not None


def kernel_device_types(op_type: str) -> list[str]:
    return sorted(dt for (t, dt) in _KERNELS if t == op_type)


def get_kernel_def(node_def, device_type: str) -> KernelDef:
    kd = _lookup(node_def.op, device_type)
    if kd is None:
        raise errors.NotFoundError(
            None, node_def, f"No registered '{node_def.op}' OpKernel for {device_type} devices "
            f"compatible with node {node_def.name}. Registered devices: "
            f"{kernel_device_types(node_def.op)}"
        )
    return kd


def quiet(fn: Callable) -> Callable:
    """``fn`` with NumPy's floating-point warnings silenced: TF returns inf/NaN silently, so
    kernels of ops that can legitimately produce them (division, log, sqrt…) use this."""

    def quiet_fn(*args, **kwargs):
        with np.errstate(all="ignore"):
            return fn(*args, **kwargs)

    quiet_fn.__name__ = getattr(fn, "__name__", "quiet")
    return quiet_fn


def registered_fn(op_type: str, ctx=HOST) -> Callable:
    """The function registered with ``fn=`` or ``xp=`` for ``op_type`` (kernels that read no
    attributes), bound for ``ctx`` (the host's NumPy by default): lets fused kernels call
    exactly what the unfused op would."""
    return _lookup(op_type, ctx.device_type).factory(None, ctx)
