"""``tf.config``: the devices eager execution uses, how many threads, soft placement, and
whether ``tf.function`` runs its Python as written.

Physical devices are the machine's (the host CPU, one per real GPU); logical devices are the
eager context's. What is set before the eager context is made (visible GPUs, logical CPUs,
threads) goes into the config it is made with (``dflab.eager.context.context_config``), and
changing it afterwards is TF's ``RuntimeError``; soft placement and running functions eagerly
may change at any time. Sessions take their own ``ConfigProto`` as before.
"""

from __future__ import annotations

import collections
import sys
import types

from dflab.client.device_lib import list_local_devices
from dflab.eager import context as _context
from dflab.eager.function import functions_run_eagerly, run_functions_eagerly
from dflab.runtime.devices import physical_device_counts

PhysicalDevice = collections.namedtuple("PhysicalDevice", ["name", "device_type"])
LogicalDevice = collections.namedtuple("LogicalDevice", ["name", "device_type"])


class LogicalDeviceConfiguration(collections.namedtuple(
        "LogicalDeviceConfiguration",
        ["memory_limit", "experimental_priority", "experimental_device_ordinal"])):
    """One logical device to make from a physical one (TF's)."""

    def __new__(cls, memory_limit=None, experimental_priority=None,
                experimental_device_ordinal=None):
        return super().__new__(cls, memory_limit, experimental_priority,
                               experimental_device_ordinal)


VirtualDeviceConfiguration = LogicalDeviceConfiguration

_state = {"visible": None, "logical": {}, "memory_growth": {}, "jit": False,
          "optimizer_options": {"disable_model_pruning": False,
                                "disable_meta_optimizer": False}}


# --- devices ------------------------------------------------------------------------------------
def list_physical_devices(device_type=None) -> list:
    """The machine's devices: ``/physical_device:CPU:0`` and one per real GPU."""
    found = [PhysicalDevice(f"/physical_device:{dtype}:{i}", dtype)
             for dtype, n in physical_device_counts().items() for i in range(n)]
    return _of_type(found, device_type)


def list_logical_devices(device_type=None) -> list:
    """The eager context's devices (made now if it is not yet), ``/device:CPU:0`` …"""
    devices = _context.eager_context().devices.devices
    return _of_type([LogicalDevice(f"/device:{d.device_type}:{d.index}", d.device_type)
                     for d in devices], device_type)


def get_visible_devices(device_type=None) -> list:
    visible = _state["visible"]
    return _of_type(list_physical_devices() if visible is None else list(visible), device_type)


def set_visible_devices(devices, device_type=None) -> None:
    """The physical devices the eager context will use (of ``device_type``, if given; the
    others keep theirs). The host CPU cannot be hidden, and the visible GPUs are the first
    ones (dflab numbers GPU i after physical GPU i)."""
    devices = _as_list(devices)
    physical = list_physical_devices()
    for d in devices:
        if d not in physical:
            raise ValueError(f"Unrecognized device: {d!r}")
        if device_type is not None and d.device_type != device_type.upper():
            raise ValueError(f"Device {d.name} is not of type {device_type}")
    kept = [d for d in get_visible_devices()
            if device_type is not None and d.device_type != device_type.upper()]
    chosen = kept + devices
    if not any(d.device_type == "CPU" for d in chosen):
        raise ValueError("The host CPU cannot be hidden: CPU:0 runs every host kernel")
    if sorted(chosen) == sorted(get_visible_devices()):
        return  # (TF allows setting what is already set, even after initialization)
    _refuse_after_initialization("Visible devices")
    for dtype in {d.device_type for d in physical} - {"CPU"}:
        indices = sorted(int(d.name.rsplit(":", 1)[1]) for d in chosen if d.device_type == dtype)
        if indices != list(range(len(indices))):
            raise ValueError(f"dflab makes {dtype} i from physical {dtype} i: the visible "
                             f"{dtype}s must be the first ones, got indices {indices}")
        _context.context_config().device_count[dtype] = len(indices)
    _state["visible"] = chosen


def get_logical_device_configuration(device):
    return _state["logical"].get(_physical(device).name)


def set_logical_device_configuration(device, logical_devices) -> None:
    """Split the host CPU into ``len(logical_devices)`` logical CPUs (CPU:1 … are extra
    devices on the host, as dflab's other simulated CPUs: to place ops on and watch). A GPU
    gives one logical device here, its memory taken as needed."""
    device = _physical(device)
    logical = [LogicalDeviceConfiguration(*c) if not isinstance(
        c, LogicalDeviceConfiguration) else c for c in _as_list(logical_devices)]
    if logical == get_logical_device_configuration(device):
        return  # (what is set already: allowed after initialization too, as TF)
    _refuse_after_initialization("Virtual devices")
    if not logical:
        raise ValueError("set_logical_device_configuration needs at least one logical device")
    if device.device_type == "CPU":
        _context.context_config().device_count["CPU"] = len(logical)
    elif len(logical) != 1 or logical[0].memory_limit is not None:
        raise ValueError(f"{device.name}: dflab makes one logical device per GPU, its memory "
                         "taken as needed (no memory_limit)")
    _state["logical"][device.name] = logical


get_virtual_device_configuration = get_logical_device_configuration
set_virtual_device_configuration = set_logical_device_configuration


def get_soft_device_placement() -> bool:
    return _context.soft_placement()


def set_soft_device_placement(enabled: bool) -> None:
    """Whether an eager op whose ``tf.device`` request no device meets runs elsewhere (TF's
    default) or fails (``InvalidArgumentError``). Sessions keep ``allow_soft_placement``."""
    _context.set_soft_placement(enabled)


def _of_type(devices, device_type):
    if device_type is None:
        return list(devices)
    return [d for d in devices if d.device_type == device_type.upper()]


def _as_list(devices) -> list:
    if devices is None:
        return []
    if isinstance(devices, (PhysicalDevice, LogicalDeviceConfiguration)):
        return [devices]
    return list(devices)


def _physical(device) -> PhysicalDevice:
    if device not in list_physical_devices():
        raise ValueError(f"Unrecognized device: {device!r}")
    return device


def _refuse_after_initialization(what: str) -> None:
    if _context.context_initialized():
        raise RuntimeError(f"{what} cannot be modified after being initialized")


# --- threads ------------------------------------------------------------------------------------
def get_intra_op_parallelism_threads() -> int:
    return _context.context_config().intra_op_parallelism_threads


def set_intra_op_parallelism_threads(num_threads: int) -> None:
    """Threads one eager kernel may use (0: every core), before the eager context is made
    (afterwards only the value it has, as TF)."""
    _set_threads("intra_op_parallelism_threads", "Intra op", num_threads)


def get_inter_op_parallelism_threads() -> int:
    return _context.context_config().inter_op_parallelism_threads


def set_inter_op_parallelism_threads(num_threads: int) -> None:
    """Kernels run at once (0: one per core), before the eager context is made (afterwards
    only the value it has, as TF)."""
    _set_threads("inter_op_parallelism_threads", "Inter op", num_threads)


def _set_threads(field: str, what: str, num_threads) -> None:
    num_threads = int(num_threads)
    if num_threads < 0:
        raise ValueError(f"The number of threads must be >= 0, got {num_threads}")
    config = _context.context_config()
    if num_threads == getattr(config, field):
        return
    if _context.context_initialized():
        raise RuntimeError(f"{what} parallelism cannot be modified after initialization.")
    setattr(config, field, num_threads)


# --- GPU memory and the optimizer's hints -------------------------------------------------------
def get_memory_growth(device) -> bool:
    device = _physical(device)
    return _state["memory_growth"].get(device.name, False)


def set_memory_growth(device, enable: bool) -> None:
    """Accepted for GPUs, as TF's: dflab's GPU memory pool takes memory as it is needed
    whichever way this is set (it never reserves the whole card)."""
    device = _physical(device)
    if device.device_type != "GPU":
        raise ValueError("Cannot set memory growth on non-GPU and non-Pluggable devices")
    _refuse_after_initialization("Physical devices")
    _state["memory_growth"][device.name] = bool(enable)


def get_device_details(device) -> dict:
    """TF's details of a physical device: a GPU's name (empty for the host CPU)."""
    device = _physical(device)
    if device.device_type == "CPU":
        return {}
    index = device.name.rsplit(":", 1)[1]
    for d in list_local_devices():
        if d.device_type == device.device_type and d.name.endswith(":" + index):
            return {"device_name": d.physical_device_desc.split("name: ", 1)[-1]}
    return {}


def get_jit() -> str:
    """TF's XLA switch: dflab has no XLA (its graphs fuse elementwise chains whatever the
    setting); what was set is given back, as TF gives it."""
    return "autoclustering" if _state["jit"] else ""


def set_jit(enabled) -> None:
    _state["jit"] = bool(enabled) and enabled != ""


def get_experimental_options() -> dict:
    """Grappler's switches as set (dflab runs no Grappler passes; they are kept, as TF keeps
    them, so that code that saves and restores them works)."""
    return dict(_state["optimizer_options"])


def set_experimental_options(options: dict) -> None:
    _state["optimizer_options"].update(dict(options))


# --- the namespaces -----------------------------------------------------------------------------
experimental_run_functions_eagerly = run_functions_eagerly
experimental_functions_run_eagerly = functions_run_eagerly


def _namespace(name: str, doc: str, **members) -> types.ModuleType:
    module = types.ModuleType(f"{__name__}.{name}", doc)
    for key, value in members.items():
        setattr(module, key, value)
    sys.modules[module.__name__] = module
    return module


threading = _namespace(
    "threading", "``tf.config.threading``: eager execution's thread counts.",
    get_intra_op_parallelism_threads=get_intra_op_parallelism_threads,
    set_intra_op_parallelism_threads=set_intra_op_parallelism_threads,
    get_inter_op_parallelism_threads=get_inter_op_parallelism_threads,
    set_inter_op_parallelism_threads=set_inter_op_parallelism_threads)
optimizer = _namespace(
    "optimizer", "``tf.config.optimizer``: TF's XLA and Grappler switches, kept as set.",
    get_jit=get_jit, set_jit=set_jit, get_experimental_options=get_experimental_options,
    set_experimental_options=set_experimental_options)
experimental = _namespace(
    "experimental", "``tf.config.experimental``: TF 2.0's names for the device settings.",
    list_physical_devices=list_physical_devices, list_logical_devices=list_logical_devices,
    get_visible_devices=get_visible_devices, set_visible_devices=set_visible_devices,
    get_memory_growth=get_memory_growth, set_memory_growth=set_memory_growth,
    get_device_details=get_device_details,
    get_virtual_device_configuration=get_logical_device_configuration,
    set_virtual_device_configuration=set_logical_device_configuration,
    VirtualDeviceConfiguration=LogicalDeviceConfiguration)

__all__ = ["LogicalDevice", "LogicalDeviceConfiguration", "PhysicalDevice", "experimental",
           "experimental_functions_run_eagerly", "experimental_run_functions_eagerly",
           "functions_run_eagerly", "get_logical_device_configuration",
           "get_soft_device_placement", "get_visible_devices", "list_logical_devices",
           "list_physical_devices", "optimizer", "run_functions_eagerly",
           "set_logical_device_configuration", "set_soft_device_placement",
           "set_visible_devices", "threading"]
