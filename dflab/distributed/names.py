"""Task names: how a cluster's task and the devices it owns are named, in one place.

A task is ``/job:<job>/replica:0/task:<index>`` (TF's naming); its devices are named under it
(``/job:ps/replica:0/task:1/device:CPU:0``). Every question "which task owns this device?" is
answered here, with the parse of each distinct device name cached: steps ask it every time.
"""

from __future__ import annotations

import functools

from dflab.framework.device_spec import DeviceSpec


def task_name(job: str, index: int) -> str:
    """The name of task ``index`` of ``job``."""
    return f"/job:{job}/replica:0/task:{index}"


@functools.lru_cache(maxsize=4096)
def task_of_device(device: str) -> str:
    """The task owning ``device`` (a full device name, or a task name itself); ValueError for
    a name without a job and a task index."""
    d = DeviceSpec.from_string(device)
    if d.job is None or d.task is None:
        raise ValueError(f"Name a task as /job:<name>/task:<index>, not {device!r}")
    return task_name(d.job, d.task)


def task_or(device: str, default: str) -> str:
    """The task owning ``device``; ``default`` for an unplaced or job-less device name."""
    if not device:
        return default
    d = DeviceSpec.from_string(device)
    if d.job is None:
        return default
    return task_name(d.job, d.task if d.task is not None else 0)
