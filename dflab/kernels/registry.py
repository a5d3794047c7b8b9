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

What a kernel needs of its device is declared where it is registered, as TF's
``REGISTER_KERNEL_BUILDER(Name(..).Device(DEVICE_GPU).HostMemory("shape"))``:
``host_memory_inputs`` (the inputs it reads on the host: shapes, axes, sizes), and
``host_memory_outputs`` (outputs it leaves in host memory: a ``Shape``'s), each as input or
output positions or, for the rare kernel where they depend on the node, a function of its node
def; ``host_only``: the op runs only on host devices (TF registers it only for CPUs: queues,
save/restore, summaries…); ``routes_only``: the kernel only passes values on (control flow,
identities, loop accumulators), so on an accelerator it issues no work and takes each value
where it is (TF registers such kernels on GPUs with every int32 port in host memory): a loop
counter stays on the host and its condition is never read back from the device. A device reads
these when it binds the kernel (``Device.bind_kernel``); nothing else keeps lists of op names.

The placer asks ``has_kernel`` which device types can run an op; a missing kernel is an error
naming the op type and device.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from dflab.framework import errors
from dflab.kernels import intra_op
from dflab.kernels.context import HOST
from dflab.kernels.fp_errors import quiet  # noqa: F401 - kernels import it from here

# Where a kernel's host-memory inputs or outputs are: positions (negative ones count from the
# end: ConcatV2's axis is its last input), or a function of the node def giving them.
HostMemory = tuple[int, ...] | Callable[..., Iterable[int]]


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
    # TF's HostMemory: inputs the kernel reads on the host and outputs it leaves there (see
    # the module docstring); on a host device every value is in host memory anyway.
    host_memory_inputs: HostMemory = ()
    host_memory_outputs: HostMemory = ()
    # Registered for host devices only, never mirrored onto accelerators (TF: CPU-only).
    host_only: bool = False
    # Only passes values on: no launch wrapper on an accelerator (see the module docstring).
    routes_only: bool = False

    def host_inputs(self, node_def) -> frozenset[int]:
        """The positions of ``node_def``'s data inputs this kernel reads in host memory."""
        n = sum(not name.startswith("^") for name in node_def.input)
        return _positions(self.host_memory_inputs, node_def, n)

    def host_outputs(self, node_def) -> frozenset[int]:
        """The positions of ``node_def``'s outputs this kernel leaves in host memory."""
        return _positions(self.host_memory_outputs, node_def, len(node_def.output_types))


def _positions(spec: HostMemory, node_def, n: int) -> frozenset[int]:
    """``spec``'s positions among ``n`` (0: a count the node def does not say)."""
    if callable(spec):
        spec = spec(node_def)
    if not n:
        return frozenset(i for i in spec if i >= 0)
    return frozenset(i % n for i in spec if -n <= i < n)


_KERNELS: dict[tuple[str, str], KernelDef] = {}

# Registers a kernel for every device type, present and future (e.g. _Send/_Recv, which
# compute nothing): a device type plugged in later needs no registration of its own.
ANY_DEVICE = "*"


def register_kernel(op_type: str, device_types=("CPU",), *, fn: Callable | None = None,
                    xp: str | Callable | None = None, factory: Callable | None = None,
                    quiet_fp: bool = False, elementwise: bool = False, takes_step: bool = False,
                    is_async: bool = False, host_memory_inputs: HostMemory = (),
                    host_memory_outputs: HostMemory = (), host_only: bool = False,
                    routes_only: bool = False) -> None:
    """Register a kernel for ``op_type`` on ``device_types`` (see the module docstring for the
    forms and the host-memory declarations). ``quiet_fp``: the op may legitimately produce
    inf/NaN (see ``quiet``). ``elementwise`` (with ``xp=``): the function is elementwise and
    takes ``out=``, so that on the host a big one is split among the intra-op threads
    (``ctx.intra_op.elementwise``)."""
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
    # sys._getframe, not inspect.stack(): the latter reads source files for every frame.
    frame = sys._getframe(1)
    _register(op_type, device_types, factory, takes_step, is_async, host_memory_inputs,
              host_memory_outputs, host_only, f"{frame.f_code.co_filename}:{frame.f_lineno}",
              routes_only)


def _register(op_type, device_types, factory, takes_step, is_async, host_memory_inputs,
              host_memory_outputs, host_only, site, routes_only=False) -> None:
    if isinstance(device_types, str):
        device_types = (device_types,)
    device_types = tuple(dt.upper() for dt in device_types)
    if host_only and device_types != ("CPU",):
        raise TypeError(f"Kernel for {op_type}: host_only=True goes with a CPU kernel only, "
                        f"not {device_types}")
    inputs = _host_memory(op_type, host_memory_inputs)
    outputs = _host_memory(op_type, host_memory_outputs)
    for dt in device_types:
        key = (op_type, dt)
        if key in _KERNELS:
            raise KeyError(f"Kernel for {op_type} on {dt} already registered at "
                           f"{_KERNELS[key].site}")
        _KERNELS[key] = KernelDef(op_type, dt, factory, takes_step or is_async, site,
                                  is_async, inputs, outputs, host_only, routes_only)


def _host_memory(op_type: str, spec: HostMemory) -> HostMemory:
    if callable(spec):
        return spec
    spec = tuple(spec)
    if not all(isinstance(i, int) for i in spec):
        raise TypeError(f"Kernel for {op_type}: host memory is given as positions or a "
                        f"function of the node def, not {spec!r}")
    return spec


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
        if not elementwise:
            return fn
        split = split_elementwise(fn, node_def, ctx)
        if quiet_fp and split is not fn:
            split.quiet_fp = True  # each part runs the quiet fn
        return split

    return factory


def split_elementwise(fn: Callable, node_def, ctx) -> Callable:
    """``fn``, an elementwise host function taking ``out=``, split among the intra-op threads
    when big (``ctx.intra_op.elementwise``); each part runs fn (quiet included: NumPy's error
    state is per thread). A plan bound with one intra-op thread (its worker's pool), an op its
    static shape says is too small ever to split, or a device computing with another namespace
    calls fn bare: the split's check costs a 100-element op about as much as the op itself
    (0.28 us)."""
    pool = ctx.intra_op
    if (ctx.xp is np and pool.threads > 1
            and not intra_op.never_split(node_def.output_shapes, len(node_def.input_types))):
        return pool.elementwise(fn)
    return fn


def kernel(op_type: str, device_types=("CPU",), takes_step: bool = False,
           is_async: bool = False, *, host_memory_inputs: HostMemory = (),
           host_memory_outputs: HostMemory = (), host_only: bool = False,
           routes_only: bool = False):
    """Decorator form: registers the decorated *factory* ``(node_def, ctx) -> fn`` (the other
    arguments as ``register_kernel``'s)."""
    frame = sys._getframe(1)  # where the decorator is applied: what a duplicate names
    site = f"{frame.f_code.co_filename}:{frame.f_lineno}"

    def deco(factory):
        _register(op_type, device_types, factory, takes_step, is_async, host_memory_inputs,
                  host_memory_outputs, host_only, site, routes_only)
        return factory

    return deco


def mirror_kernels(src: str, dst: str) -> list[str]:
    """Register every ``src`` kernel for ``dst`` devices too, unless it is ``host_only`` or the
    op already has a ``dst`` (or any-device) kernel of its own; returns the op types
    registered. Kernels written once against ``ctx.xp`` run anywhere: a GPU binds a CPU
    kernel's factory with ``xp = cupy``."""
    src, dst = src.upper(), dst.upper()
    added = []
    for (op_type, device_type), kd in sorted(_KERNELS.items()):
        if device_type != src or kd.host_only:
            continue
        if (op_type, dst) in _KERNELS or (op_type, ANY_DEVICE) in _KERNELS:
            continue
        _KERNELS[(op_type, dst)] = dataclasses.replace(kd, device_type=dst)
        added.append(op_type)
    return added


def _lookup(op_type: str, device_type: str) -> KernelDef | None:
    return _KERNELS.get((op_type, device_type.upper())) or _KERNELS.get((op_type, ANY_DEVICE))


def has_kernel(op_type: str, device_type: str) -> bool:
    return _lookup(op_type, device_type) is not None


def kernel_device_types(op_type: str) -> list[str]:
    return sorted(dt for (t, dt) in _KERNELS if t == op_type)


def is_host_only(op_type: str) -> bool:
    """Whether ``op_type``'s kernel says it runs on host devices only (``host_only``): TF has
    no accelerator kernel for it, so the placer keeps it off every accelerator, simulated
    ones included."""
    kd = _lookup(op_type, "CPU")
    return kd is not None and kd.host_only


def kernel_defs() -> list[KernelDef]:
    """Every registered kernel, by op type and device type."""
    return [kd for _, kd in sorted(_KERNELS.items())]


def get_kernel_def(node_def, device_type: str) -> KernelDef:
    kd = _lookup(node_def.op, device_type)
    if kd is None:
        raise errors.NotFoundError(
            None, node_def, f"No registered '{node_def.op}' OpKernel for {device_type} devices "
            f"compatible with node {node_def.name}. Registered devices: "
            f"{kernel_device_types(node_def.op)}"
        )
    return kd


def registered_fn(op_type: str, ctx=HOST) -> Callable:
    """The function registered with ``fn=`` or ``xp=`` for ``op_type`` (kernels that read no
    attributes; a factory that reads only dtypes takes no node too), bound for ``ctx`` (the
    host's NumPy by default): lets fused kernels call exactly what the unfused op would."""
    return _lookup(op_type, ctx.device_type).factory(None, ctx)
