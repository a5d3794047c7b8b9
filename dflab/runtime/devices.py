"""Devices of a worker: device *types* (policy), devices (behaviour) and the set a worker owns.

A ``DeviceType`` says what every device of one type implies, so that no code elsewhere tests a
type's name: its placement ``priority`` (TF's DeviceFactory priorities: GPU 210, CPU 100),
whether it runs its kernels one at a time on one stream (``serial``, as TF's GPU devices do) or
independent ops in parallel on the inter-op threads, whether the elementwise fusion pass runs on
it by default, whether it is an ``accelerator`` (TF keeps CPU-only ops and string tensors off
those), and its cost-model parameters. ``register_device_type`` adds a type; CPU and GPU are
registered here.

A ``Device`` is one device with behaviour: a full TF name
(``/job:localhost/replica:0/task:0/device:GPU:0``), its type, the type its kernels are looked up
under (``kernel_type``: a *simulated* GPU is GPU-typed but runs the CPU kernels), the array
namespace ``xp`` those kernels compute with, a ``memory_space`` (devices that share one exchange
values without a copy), ``streams``, a ``DeviceMemory`` account, a ``ResourceMgr`` holding its
variables and queues, a process-independent ``incarnation``, and ``from_host`` / ``to_host`` /
``copy_to`` / ``sync``. CPU and simulated devices implement them with NumPy in host memory;
an accelerator (the CuPy GPU) overrides them.

Where devices come from (``DeviceSet.from_config``):

* ``ConfigProto(device_count={"CPU": n})``: n CPU devices on the host (default 1). CPU:0 is the
  host; CPU:1… are extra devices on the same cores and are labelled simulated.
* ``device_count={"GPU": n}``: n GPUs. Real ones come from a registered backend
  (``register_backend("GPU", count, make)``, e.g. a CuPy backend making devices with
  ``xp=cupy``); those the machine lacks are *simulated*: GPU-typed devices that run the CPU
  (NumPy) kernels. Without a GPU backend, TF's default of "all GPUs present" is 0.
* ``ConfigProto(dflab={"simulated_devices": {"GPU": 2}})``: exactly that many devices of the
  type, all simulated, whatever the hardware (for lessons that must look the same everywhere).
  It overrides ``device_count`` for that type; for "CPU" it means the same as ``device_count``
  (CPU:0 is always the host).
* ``dflab={"device_params": {"GPU": {...}, "GPU:1": {...}}}``: cost-model parameters of a device
  type or of one device (see ``DeviceType.params``); ``cost_model`` reads them.

Invariant: a device's name, type, kernel type and incarnation never change after construction,
and every device in a set has a distinct name.
"""

from __future__ import annotations

import secrets
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from dflab.framework.device_spec import DeviceSpec
from dflab.kernels.context import KernelContext
from dflab.runtime.memory_table import MemoryTable
from dflab.runtime.resources import ResourceMgr

LOCAL_TASK = "/job:localhost/replica:0/task:0"
HOST_MEMORY = "host"


@dataclass(frozen=True)
class DeviceType:
    """What a device type implies for placement, scheduling, fusion and cost (see module doc)."""

    name: str
    priority: int = 0
    serial: bool = False
    fuses_by_default: bool = False
    accelerator: bool = False
    params: dict = field(default_factory=dict)


# Cost-model parameters. They describe what the devices *are* here: a simulated GPU computes with
# NumPy on the host cores, so it shares the CPU's throughput; its transfers are modelled as a
# PCIe 3.0 x16 link (≈12 GB/s, ≈10 µs), while extra CPU devices exchange tensors in host memory.
# Override per type or per device through dflab={"device_params": ...} (e.g. flops_per_s=10e12
# to teach with a fast GPU).
_CPU_PARAMS = {
    "flops_per_s": 5e10,  # dense float32 math on one core with a SIMD BLAS
    "bytes_per_s": 5e9,  # memory-bound kernels (copies, elementwise, reductions)
    "op_overhead_s": 5e-6,  # per-op dispatch cost of the executor
    "bandwidth_bytes_per_s": 2e10,  # device-to-device copies in host memory
    "latency_s": 2e-6,  # rendezvous hand-off between devices
}
PARAM_NAMES = tuple(_CPU_PARAMS)

_DEVICE_TYPES: dict[str, DeviceType] = {}


def register_device_type(device_type: DeviceType) -> DeviceType:
    """Add a device type; its ``params`` must name every cost parameter (``PARAM_NAMES``)."""
    name = device_type.name.upper()
    if name != device_type.name:
        raise ValueError(f"Device type names are upper case: {device_type.name!r}")
    if name in _DEVICE_TYPES:
        raise KeyError(f"Device type {name} is already registered")
    missing = [p for p in PARAM_NAMES if p not in device_type.params]
    if missing:
        raise ValueError(f"Device type {name} lacks cost parameters {missing}")
    _DEVICE_TYPES[name] = device_type
    return device_type


def get_device_type(name: str) -> DeviceType:
    """The registered type ``name``; an unknown type behaves as a CPU-like type of lowest
    priority (TF ranks unknown types below CPU)."""
    name = name.upper()
    found = _DEVICE_TYPES.get(name)
    if found is None:
        return DeviceType(name, 0, params=dict(_CPU_PARAMS))
    return found


CPU = register_device_type(DeviceType("CPU", priority=100, params=_CPU_PARAMS))
GPU = register_device_type(DeviceType(
    "GPU", priority=210, serial=True, fuses_by_default=True, accelerator=True,
    params={**_CPU_PARAMS, "bandwidth_bytes_per_s": 1.2e10, "latency_s": 1e-5}))  # PCIe 3 x16

# Cost-model defaults per type (kept for readers of the table; the types own them).
DEFAULT_PARAMS = {t.name: t.params for t in (CPU, GPU)}


class Stream:
    """An ordered queue of work on a device. Work on one stream runs one item at a time, in the
    order it was issued; ``synchronize`` returns once everything issued has finished.

    Host devices have no streams of their own (their kernels run on the inter-op threads and
    finish before they return), so this class is the order of a *serial* device: the executor
    holds a serial device's compute stream while it runs an expensive kernel there. An
    accelerator backend subclasses it around its own streams (e.g. a CuPy stream).
    """

    def __init__(self, name: str):
        self.name = name
        self._order = threading.Lock()

    def __enter__(self):
        self._order.acquire()
        return self

    def __exit__(self, *exc):
        self._order.release()

    def synchronize(self) -> None:
        with self._order:
            pass

    def __repr__(self):
        return f"<Stream {self.name}>"


def _is_array(value) -> bool:
    return hasattr(value, "shape") and hasattr(value, "dtype")


class DeviceMemory:

    """Bytes a device holds: current and peak, updated by ``allocate``/``free`` (thread-safe).

    Accounting only; nothing is allocated here. ``limit`` (0 = none) is reported, not enforced.
    """

    __slots__ = ("_lock", "bytes_in_use", "peak_bytes_in_use", "num_allocs",
                 "largest_alloc_size", "bytes_limit", "steps", "last_step_peak_bytes",
                 "total_bytes_allocated")

    def __init__(self, bytes_limit: int = 0):
        self._lock = threading.Lock()
        self.bytes_in_use = 0
        self.peak_bytes_in_use = 0
        self.num_allocs = 0
        self.largest_alloc_size = 0
        self.bytes_limit = int(bytes_limit)
        self.steps = 0  # traced steps recorded with record_step
        self.last_step_peak_bytes = 0
        self.total_bytes_allocated = 0

    def record_step(self, peak_bytes: int, bytes_allocated: int) -> None:
        """Fold one traced step's figures for this device into the session's account."""
        with self._lock:
            self.steps += 1
            self.last_step_peak_bytes = int(peak_bytes)
            self.total_bytes_allocated += int(bytes_allocated)
            self.peak_bytes_in_use = max(self.peak_bytes_in_use, int(peak_bytes))

    def allocate(self, nbytes: int) -> None:
        nbytes = int(nbytes)
        if nbytes < 0:
            raise ValueError(f"cannot allocate a negative number of bytes ({nbytes})")
        with self._lock:
            self.bytes_in_use += nbytes
            self.num_allocs += 1
            if nbytes > self.largest_alloc_size:
                self.largest_alloc_size = nbytes
            if self.bytes_in_use > self.peak_bytes_in_use:
                self.peak_bytes_in_use = self.bytes_in_use

    def free(self, nbytes: int) -> None:
        nbytes = int(nbytes)
        with self._lock:
            if nbytes < 0 or nbytes > self.bytes_in_use:
                raise ValueError(f"cannot free {nbytes} bytes: {self.bytes_in_use} in use")
            self.bytes_in_use -= nbytes

    def reset_peak(self) -> None:
        with self._lock:
            self.peak_bytes_in_use = self.bytes_in_use

    def stats(self) -> dict:
        """A consistent snapshot (names as TF's ``AllocatorStats``)."""
        with self._lock:
            return {"bytes_in_use": self.bytes_in_use,
                    "peak_bytes_in_use": self.peak_bytes_in_use,
                    "num_allocs": self.num_allocs,
                    "largest_alloc_size": self.largest_alloc_size,
                    "bytes_limit": self.bytes_limit, "steps": self.steps,
                    "last_step_peak_bytes": self.last_step_peak_bytes,
                    "total_bytes_allocated": self.total_bytes_allocated}

    def __repr__(self):
        return f"<DeviceMemory in use {self.bytes_in_use} B, peak {self.peak_bytes_in_use} B>"


class Device:
    """One device (see the module docstring). ``kernel_type`` defaults to ``device_type``; a
    simulated GPU passes "CPU" so that the NumPy kernels are bound while the device stays
    GPU-typed. A real accelerator passes its own ``xp`` (e.g. ``cupy``), keeps ``kernel_type``
    equal to its type, and overrides the host-transfer methods."""

    def __init__(self, device_type: str, index: int, xp=np, simulated: bool = False,
                 task: str = LOCAL_TASK, owner=None, kernel_device_type: str | None = None,
                 description: str = "", params: dict | None = None, memory_limit: int = 0):
        self.type = get_device_type(device_type)
        self.device_type = self.type.name
        self.index = index
        self.name = f"{task}/device:{self.device_type}:{index}"
        self.spec = DeviceSpec.from_string(self.name)
        self.xp = xp
        self.simulated = simulated
        self.kernel_type = get_device_type(kernel_device_type or self.device_type)
        self.kernel_device_type = self.kernel_type.name
        self.description = description or (
            f"simulated {self.device_type} (NumPy)" if simulated else self.device_type)
        self.params = {**self.type.params, **(params or {})}
        # Devices computing with NumPy share the host's memory: values cross without a copy.
        self.memory_space = HOST_MEMORY if xp is np else self.name
        # Unique per device object, and meaningful across processes (TF draws it at random).
        self.incarnation = secrets.randbits(63) or 1
        self.memory = DeviceMemory(memory_limit)
        self.resources = ResourceMgr(self.name)
        self.streams = {"compute": Stream(f"{self.short_name}/compute")}
        # The executor looks kernels up under ctx.device_type: give it the lookup type.
        self.context = KernelContext(self.name, self.kernel_device_type, xp, self.resources,
                                     owner, self.bind_kernel)

    @property
    def short_name(self) -> str:
        return f"{self.device_type}:{self.index}"

    @property
    def priority(self) -> int:
        return self.type.priority

    @property
    def compute_stream(self) -> Stream | None:
        """The stream a serial device runs its kernels on; None where ops run in parallel."""
        return self.streams["compute"] if self.type.serial else None

    def bind_kernel(self, kernel_def, node_def, fn):
        """``fn``, the kernel ``kernel_def``'s factory built for ``node_def``, as this device
        runs it: called once per plan, when the kernel is bound. A host device runs it as it
        is; an accelerator wraps it (its stream, its inputs' memory: see ``GPUDevice``), reading
        what the kernel declared at registration (``KernelDef.host_inputs``...)."""
        return fn

    @property
    def fuses_by_default(self) -> bool:
        """Whether the fusion pass runs here under ``RewriterConfig.DEFAULT``: a policy of the
        kernels the device runs (a simulated GPU runs the CPU's, and is not fused)."""
        return self.kernel_type.fuses_by_default

    # --- memory: host <-> device ---------------------------------------------------------------
    def from_host(self, value):
        """``value`` (a host NumPy array) as an array in this device's memory."""
        if self.memory_space == HOST_MEMORY or not _is_array(value):
            return value
        return self.xp.asarray(value)

    @property
    def kernel_scope(self):
        """What a thread running this device's kernels enters once per run of a partition
        (a context manager, re-entrant on one thread), or None: nothing (host devices)."""
        return None

    def accept(self, value):
        """A host value arriving on this device (a step's feed, a tensor received from a host
        device) where this device keeps it: in its memory (``from_host``), but for what an
        accelerator keeps in host memory (a GPU's int32 tensors)."""
        return self.from_host(value)

    def to_host(self, value):
        """``value`` (an array of this device) as a host NumPy array."""
        if self.memory_space == HOST_MEMORY or not _is_array(value):
            return value
        asnumpy = getattr(self.xp, "asnumpy", None)
        return asnumpy(value) if asnumpy is not None else np.asarray(value)

    def copy_to(self, value, dst: Device):
        """``value`` (on this device) as a value on ``dst``: the same object where the two share
        a memory space (values are immutable by convention), else a copy through the host that
        an accelerator may replace with a direct one."""
        if dst.memory_space == self.memory_space or not _is_array(value):
            return value
        return dst.accept(self.to_host(value))

    def sync(self) -> None:
        """Wait for everything issued to this device's streams."""
        for stream in self.streams.values():
            stream.synchronize()

    def __getattr__(self, name):
        # bandwidth_bytes_per_s, latency_s, flops_per_s… read as attributes.
        params = self.__dict__.get("params")
        if params is not None and name in params:
            return params[name]
        raise AttributeError(name)

    def __repr__(self):
        sim = " (simulated)" if self.simulated else ""
        return f"<Device {self.name}{sim}>"


class DeviceAttributes:
    """What ``Session.list_devices`` returns (TF field names, plus ``simulated``)."""

    def __init__(self, device: Device):
        self.name = device.name
        self.device_type = device.device_type
        self.memory_limit_bytes = device.memory.bytes_limit
        self.incarnation = device.incarnation
        self.simulated = device.simulated
        self.physical_device_desc = ("simulated (NumPy)" if device.simulated
                                     and device.xp is np else device.description)

    def __repr__(self):
        sim = ", simulated" if self.simulated else ""
        return (f"_DeviceAttributes({self.name}, {self.device_type}, "
                f"{self.memory_limit_bytes}, {self.incarnation}{sim})")


@dataclass
class Backend:
    """A source of real devices of one type: how many the machine has, and how to make one."""

    count: Callable[[], int]
    make: Callable[..., Device]  # make(index, owner=..., params=..., task=...) -> Device
    takes_config: bool = False  # make(..., config=ConfigProto) too (e.g. GPU memory options)


def _host_cpu_count() -> int:
    return 1


def _make_cpu(index: int, owner=None, params=None, task: str = LOCAL_TASK) -> Device:
    # Every CPU device runs on the same host cores; only CPU:0 stands for real hardware.
    return Device("CPU", index, owner=owner, simulated=index > 0, params=params, task=task,
                  description="host CPU" if index == 0 else "extra CPU device on the host")


_BACKENDS: dict[str, Backend] = {"CPU": Backend(_host_cpu_count, _make_cpu)}


def register_backend(device_type: str, count: Callable[[], int],
                     make: Callable[..., Device], takes_config: bool = False) -> None:
    """Plug in real devices of ``device_type`` (e.g. the CuPy GPU backend of
    ``dflab.runtime.gpu``). ``takes_config``: ``make`` also receives ``config=`` (the session's
    ``ConfigProto``)."""
    device_type = device_type.upper()
    if device_type in _BACKENDS and device_type != "CPU":
        raise KeyError(f"A device backend for {device_type} is already registered")
    _BACKENDS[device_type] = Backend(count, make, takes_config)


def physical_device_counts() -> dict[str, int]:
    """How many real devices of each registered type this machine has (one host CPU)."""
    return {dtype: backend.count() for dtype, backend in _BACKENDS.items()}


def _simulated(device_type: str, index: int, owner=None, params=None,
               task: str = LOCAL_TASK) -> Device:
    if device_type == "CPU":
        return Device("CPU", index, owner=owner, simulated=True, params=params, task=task,
                      description="simulated CPU (NumPy)")
    return Device(device_type, index, owner=owner, simulated=True, params=params, task=task,
                  kernel_device_type="CPU")


class DeviceSet:
    """The devices of a session: ``devices`` in creation order (CPUs first, as TF lists them),
    ``prioritized`` in TF's placement preference order (type priority, then index)."""

    def __init__(self, devices: list[Device]):
        names = [d.name for d in devices]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate device names in {names}")
        self.devices = list(devices)
        self.prioritized = sorted(devices, key=lambda d: (-d.priority, d.device_type, d.index))
        self._by_name = {d.name: d for d in devices}
        self._by_short = {d.short_name: d for d in devices}

    @classmethod
    def from_config(cls, config, owner=None, task: str = LOCAL_TASK) -> DeviceSet:
        """The devices ``config`` asks for, named under ``task`` (``/job:ps/replica:0/task:1``
        for a task of a cluster)."""
        opts = config.dflab
        counts = {k.upper(): int(v) for k, v in (config.device_count or {}).items()}
        forced = {k.upper(): v for k, v in opts.simulated_devices.items()}
        for k, v in list(counts.items()) + list(forced.items()):
            if v < 0:
                raise ValueError(f"device count for {k} must be >= 0, got {v}")
        if counts.get("CPU", 1) < 1 or forced.get("CPU", 1) < 1:
            raise ValueError("device_count['CPU'] must be at least 1")
        params = opts.device_params
        devices = []
        for dtype in dict.fromkeys(["CPU", *_BACKENDS, *counts, *forced]):
            backend = _BACKENDS.get(dtype)
            physical = backend.count() if backend else 0
            if dtype in forced and dtype != "CPU":
                n, n_real = forced[dtype], 0
            elif dtype == "CPU":
                # CPU:0 is always the host; extra CPUs are simulated either way.
                n, n_real = forced.get("CPU", counts.get("CPU", 1)), 1
            else:
                n = counts.get(dtype, physical)
                n_real = min(n, physical)
            for i in range(n):
                p = {**params.get(dtype, {}), **params.get(f"{dtype}:{i}", {})}
                _check_params(dtype, i, p)
                if i < n_real:
                    extra = {"config": config} if backend.takes_config else {}
                    devices.append(backend.make(i, owner=owner, params=p, task=task, **extra))
                else:
                    devices.append(_simulated(dtype, i, owner=owner, params=p, task=task))
        out = cls(devices)
        if getattr(config, "log_device_placement", False):
            out.log_mapping()
        return out

    def log_mapping(self, file=None) -> None:
        """TF's "Device mapping:" banner, listing the accelerators (simulated ones marked)."""
        file = file or sys.stderr
        accel = [d for d in self.devices if d.type.accelerator]
        if not accel:
            print("Device mapping: no known devices.", file=file)
            return
        print("Device mapping:", file=file)
        for d in accel:
            print(f"{d.name} -> device: {d.index}, name: {d.description}", file=file)

    def list(self):
        return [DeviceAttributes(d) for d in self.devices]

    def __iter__(self):
        return iter(self.devices)

    def __len__(self):
        return len(self.devices)

    def __getitem__(self, name: str) -> Device:
        dev = self._by_name.get(name) or self._by_short.get(name)
        if dev is None:
            dev = self._by_name.get(DeviceSpec.from_string(name).to_string())
        if dev is None:
            raise KeyError(name)
        return dev

    def kernel_context(self, name: str) -> KernelContext:
        return self._by_name[name].context

    def matching(self, spec: DeviceSpec) -> list[Device]:
        return [d for d in self.devices if spec_matches(spec, d.spec)]

    @property
    def host(self) -> Device:
        """Where fed values and fetched results live: the first CPU device."""
        return next(d for d in self.devices if d.type is CPU)

    def memory_stats(self) -> MemoryTable:
        return MemoryTable({d.name: d.memory.stats() for d in self.devices})

    def close(self) -> None:
        for d in self.devices:
            d.resources.clear()

    def clear_containers(self, containers) -> None:
        """``ResourceMgr.clear_containers`` on every device (TF's ``ClearContainers``)."""
        for d in self.devices:
            d.resources.clear_containers(containers)


def _check_params(dtype: str, index: int, params: dict) -> None:
    for k, v in params.items():
        if k not in PARAM_NAMES:
            raise ValueError(f"Unknown device parameter {k!r} for {dtype}:{index}; "
                             f"known: {', '.join(PARAM_NAMES)}")
        # Times may be zero; rates divide, so they must be positive.
        may_be_zero = k in ("latency_s", "op_overhead_s")
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and (
            v >= 0 if may_be_zero else v > 0)
        if not ok:
            raise ValueError(f"Device parameter {k} of {dtype}:{index} must be a "
                             f"{'non-negative' if may_be_zero else 'positive'} number, got {v!r}")


def spec_matches(req: DeviceSpec, dev: DeviceSpec) -> bool:
    """Whether device ``dev`` satisfies the (partial) request ``req``."""
    if req.job is not None and req.job != dev.job:
        return False
    if req.replica is not None and req.replica != dev.replica:
        return False
    if req.task is not None and req.task != dev.task:
        return False
    if req.device_type is not None and req.device_type != dev.device_type:
        return False
    if req.device_index is not None and req.device_index != dev.device_index:
        return False
    return True
