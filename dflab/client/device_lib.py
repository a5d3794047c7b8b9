"""``device_lib.list_local_devices``: the devices a session made here would have, as TF's
``tensorflow.python.client.device_lib`` lists them (``DeviceAttributes`` with TF's fields)."""

from __future__ import annotations

from dataclasses import dataclass, field

from dflab.runtime.config import ConfigProto
from dflab.runtime.devices import DeviceSet


@dataclass
class DeviceAttributes:
    """TF's ``DeviceAttributes`` proto's fields (``simulated``: dflab's, for devices backed
    by NumPy)."""

    name: str
    device_type: str
    memory_limit: int
    incarnation: int
    physical_device_desc: str
    locality: dict = field(default_factory=dict)
    xla_global_id: int = -1
    simulated: bool = False


def list_local_devices(session_config: ConfigProto | None = None) -> list[DeviceAttributes]:
    """The local devices, CPUs first, named ``/device:TYPE:N`` as TF names them here.
    ``session_config``'s device counts and dflab's simulated devices are honoured."""
    devices = DeviceSet.from_config(session_config or ConfigProto())
    try:
        return [DeviceAttributes(
            name=f"/device:{d.device_type}:{d.index}", device_type=d.device_type,
            memory_limit=d.memory.bytes_limit, incarnation=d.incarnation,
            physical_device_desc=(f"device: {d.index}, name: {d.description}"
                                  if d.device_type != "CPU" else ""),
            simulated=d.simulated) for d in devices.devices]
    finally:
        devices.close()
