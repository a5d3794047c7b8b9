"""What crosses between a client and a task of another process, as plain data.

Errors: an ``OpError`` holds the op it names, which lives in the client's graph, so it travels
as ``(code, message, op name, creation site)`` and is rebuilt on the other side naming the
client's own op where the client has it (``error_info`` / ``error_from_info``).

Devices: a task describes each of its devices as a dict (``device_info``); the client places
and partitions against ``RemoteDevice``s built from those descriptions — name, type, priority,
kernel type, cost parameters and incarnation — while memory and state stay in the task.
"""

from __future__ import annotations

from dflab.framework import errors
from dflab.runtime.devices import Device

ErrorInfo = tuple  # (code, message, op name or None, creation site or None)


def error_info(error: BaseException) -> ErrorInfo:
    """``error`` as plain data."""
    code = getattr(error, "error_code", errors.UNKNOWN)
    message = getattr(error, "message", None) or f"{type(error).__name__}: {error}"
    op = getattr(error, "op", None)
    return int(code), str(message), getattr(op, "name", None), \
        getattr(op, "creation_site", None)


_ERROR_CLASSES = {cls.error_code: cls for cls in vars(errors).values()
                  if isinstance(cls, type) and issubclass(cls, errors.OpError)
                  and cls is not errors.OpError}


def error_from_info(info: ErrorInfo, ops=None) -> errors.OpError:
    """The error ``error_info`` described, naming the user's op where ``ops`` (op name ->
    the client's op) has it, else naming the node and where it was created in the text."""
    code, message, op_name, site = info
    op = (ops or {}).get(op_name)
    if op is None and op_name:
        where = f" (defined at {site})" if site else ""
        message = f"{message}\n\t [[node {op_name}{where}]]"
    return _ERROR_CLASSES.get(code, errors.UnknownError)(None, op, message)


def unavailable(task: str, why: str) -> errors.UnavailableError:
    """The error of a step that needs ``task`` while it cannot answer."""
    return errors.UnavailableError(None, None, f"Task {task} is unavailable: {why}")


def device_info(d: Device) -> dict:
    """A device as plain data: what a client needs to place ops on it."""
    return {"device_type": d.device_type, "index": d.index, "simulated": d.simulated,
            "kernel_device_type": d.kernel_device_type, "description": d.description,
            "params": dict(d.params), "incarnation": d.incarnation}


class RemoteDevice(Device):
    """A device of a task in another process, as its clients see it: built from
    ``device_info``; its memory and state live in the task."""

    def __init__(self, task: str, info: dict):
        super().__init__(info["device_type"], info["index"], simulated=info["simulated"],
                         task=task, kernel_device_type=info["kernel_device_type"],
                         description=info["description"], params=info["params"])
        self.incarnation = info["incarnation"]
        # Values cross to and from it only through its task: never a memory space of ours.
        self.memory_space = f"{task}/host"
