"""Devices of a session: names, types, array namespaces and resource containers.

Each device has a full TF name (``/job:localhost/replica:0/task:0/device:CPU:0``), a type used
to look up kernels, an array namespace ``xp`` its kernels compute with, and a ``ResourceMgr``
holding its variables. ``ConfigProto(device_count={"CPU": n})`` creates n CPU devices.
"""

from __future__ import annotations

import numpy as np

from dflab.framework.device_spec import DeviceSpec
from dflab.runtime.executor import KernelContext
from dflab.runtime.resources import ResourceMgr

LOCAL_TASK = "/job:localhost/replica:0/task:0"


class Device:
    def __init__(self, device_type: str, index: int, xp=np, simulated: bool = False,
                 task: str = LOCAL_TASK, session=None):
        self.device_type = device_type
        self.index = index
        self.name = f"{task}/device:{device_type}:{index}"
        self.spec = DeviceSpec.from_string(self.name)
        self.xp = xp
        self.simulated = simulated
        self.resources = ResourceMgr(self.name)
        self.context = KernelContext(self.name, device_type, xp, self.resources, session)

    def __repr__(self):
        sim = " (simulated)" if self.simulated else ""
        return f"<Device {self.name}{sim}>"


class DeviceAttributes:
    """What ``Session.list_devices`` returns (TF field names)."""

    def __init__(self, device: Device):
        self.name = device.name
        self.device_type = device.device_type
        self.memory_limit_bytes = 0
        self.incarnation = id(device)


class DeviceSet:
    def __init__(self, devices: list[Device]):
        self.devices = devices
        self._by_name = {d.name: d for d in devices}

    @classmethod
    def from_config(cls, config, session=None) -> DeviceSet:
        n_cpu = int(config.device_count.get("CPU", 1))
        if n_cpu < 1:
            raise ValueError("device_count['CPU'] must be at least 1")
        return cls([Device("CPU", i, session=session) for i in range(n_cpu)])

    def list(self):
        return [DeviceAttributes(d) for d in self.devices]

    def __iter__(self):
        return iter(self.devices)

    def __getitem__(self, name: str) -> Device:
        return self._by_name[name]

    def kernel_context(self, name: str) -> KernelContext:
        return self._by_name[name].context

    def matching(self, spec: DeviceSpec) -> list[Device]:
        return [d for d in self.devices if _matches(spec, d.spec)]

    def close(self) -> None:
        for d in self.devices:
            d.resources.clear()


def _matches(req: DeviceSpec, dev: DeviceSpec) -> bool:
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
