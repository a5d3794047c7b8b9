"""Kernels of the session-handle ops: ``GetSessionHandle`` keeps a value in the session's
tensor store on its device, ``GetSessionTensor`` reads one back, ``DeleteSessionTensor`` drops
one.

The store is a resource of the device's ``ResourceMgr``, which belongs to the session's worker,
so handles live as long as the session (TF's per-session ``SessionState``) and another session
never sees them. A handle is ``"<op name>;<id>;<device>"`` with ids counted per store. Reading a
handle the store does not hold is an ``InvalidArgumentError``, and reading it as another dtype an
``InternalError``, as TF's kernels report them.
"""

from __future__ import annotations

import itertools
import threading

import numpy as np

from dflab.framework import dtypes as _dt
from dflab.framework import errors
from dflab.kernels.registry import kernel


class SessionTensorStore:
    """The tensors a session keeps between runs, by handle."""

    def __init__(self):
        self._tensors: dict[str, object] = {}
        self._ids = itertools.count()
        self._lock = threading.Lock()

    def keep(self, name: str, device: str, value) -> str:
        with self._lock:
            handle = f"{name};{next(self._ids)};{device}"
            self._tensors[handle] = value
        return handle

    def get(self, handle: str, node):
        with self._lock:
            if handle in self._tensors:
                return self._tensors[handle]
        raise errors.InvalidArgumentError(
            None, node, f"The tensor with handle '{handle}' is not in the session store.")

    def delete(self, handle: str, node) -> None:
        with self._lock:
            if self._tensors.pop(handle, _MISSING) is not _MISSING:
                return
        raise errors.InvalidArgumentError(
            None, node, f"The tensor with handle '{handle}' is not in the session store.")


_MISSING = object()


def _store(ctx) -> SessionTensorStore:
    return ctx.resources.lookup_or_create("session_tensors", "", SessionTensorStore)


def _handle_text(value) -> str:
    h = np.asarray(value).item()
    return h.decode() if isinstance(h, bytes) else str(h)


@kernel("GetSessionHandle", host_memory_outputs=(0,))
def _get_session_handle(node, ctx):
    def run(value):
        return np.asarray(_store(ctx).keep(node.name, ctx.device, value), dtype=object)

    return run


@kernel("GetSessionTensor", host_memory_inputs=(0,))
def _get_session_tensor(node, ctx):
    dtype = node.attr["dtype"]

    def run(handle):
        value = _store(ctx).get(_handle_text(handle), node)
        kept = _dt.as_dtype(value.dtype) if hasattr(value, "dtype") and \
            np.dtype(value.dtype).kind not in "OSU" else _dt.string
        if kept != dtype:
            raise errors.InternalError(
                None, node, f"Output 0 of type {kept.name} does not match declared output type "
                f"{dtype.name} for node {node.name}")
        return value

    return run


@kernel("DeleteSessionTensor", host_memory_inputs=(0,))
def _delete_session_tensor(node, ctx):
    return lambda handle: _store(ctx).delete(_handle_text(handle), node)
