"""The placer: assign every op of a pruned graph to a device, keeping the reason.

TF's rules, in order: ops in one colocation group (a variable with its initializer, reads and
updates; ``colocate_with``) share a device; a group's explicit device requests are merged; a
device must match the merged request and have a kernel for every op in the group; without
``allow_soft_placement`` an unsatisfiable request is an ``InvalidArgumentError`` naming the op
and device, with it the request is relaxed. Among candidates the first device wins (devices are
ordered so that this is TF's preference).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from dflab.framework import errors
from dflab.framework.device_spec import DeviceSpec
from dflab.kernels.registry import has_kernel, kernel_device_types


@dataclass
class Placement:
    device: str
    reason: str


def _group_key(op) -> str:
    return op._colocation[0] if op._colocation else f"loc:@{op.name}"


def place(ops, devices, config) -> dict:
    groups: dict[str, list] = {}
    for op in ops:
        groups.setdefault(_group_key(op), []).append(op)
    result = {}
    for key, members in groups.items():
        device, reason = _place_group(key, members, devices, config)
        for op in members:
            why = reason if len(members) == 1 else f"{reason}; colocation group {key[5:]}"
            result[op] = Placement(device, why)
            if config.log_device_placement:
                print(f"{op.name}: ({op.type}): {device}", file=sys.stderr)
    return result


def _place_group(key, members, devices, config):
    request = DeviceSpec()
    requesters = []
    for op in members:
        if not op.device:
            continue
        spec = DeviceSpec.from_string(op.device)
        if not request.is_compatible_with(spec) and not config.allow_soft_placement:
            raise errors.InvalidArgumentError(
                None, op, f"Cannot colocate nodes {requesters[0].name} and {op.name}: "
                f"conflicting device requests {request.to_string()} and {op.device}"
            )
        request = request.make_merged_spec(spec)
        requesters.append(op)
    capable = [d for d in devices if all(has_kernel(op.type, d.device_type) for op in members)]
    if not capable:
        op = next(o for o in members if not any(has_kernel(o.type, d.device_type)
                                                 for d in devices))
        raise errors.InvalidArgumentError(
            None, op, f"No kernel for op {op.type} on any available device "
            f"(kernels exist for {kernel_device_types(op.type)})"
        )
    matching = [d for d in capable if _compatible(request, d.spec)]
    if matching:
        if requesters:
            return matching[0].name, f"explicit request {request.to_string()} by " + \
                ", ".join(o.name for o in requesters[:3])
        return matching[0].name, "no constraint: default device"
    if config.allow_soft_placement:
        return capable[0].name, (f"soft placement: requested {request.to_string()} is not "
                                 "available")
    op = requesters[0]
    available = ", ".join(d.name for d in devices)
    raise errors.InvalidArgumentError(
        None, op, f"Cannot assign a device for operation {op.name}: Operation was explicitly "
        f"assigned to {op.device} but available devices are [ {available} ]. Make sure the "
        "device specification refers to a valid device."
    )


def _compatible(req: DeviceSpec, dev: DeviceSpec) -> bool:
    return all(
        getattr(req, f) is None or getattr(req, f) == getattr(dev, f)
        for f in ("job", "replica", "task", "device_type", "device_index")
    )
