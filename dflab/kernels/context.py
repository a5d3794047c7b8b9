"""``KernelContext``: what a kernel factory sees of the device it is bound to.

Kernels are built from a typed ``NodeDef`` (``dflab.framework.graph_io``) and a context, never
from a live ``Operation``: a partition's kernels can be rebuilt in another process from its
serialized graph. The context names the device and its kernel type, gives the device's array
namespace ``xp`` (NumPy on CPUs, CuPy on GPUs, anything NumPy-like on a plugged-in device),
its resource manager (variables, queues, tensor arrays), its ``owner`` (the session or
worker whose ``closed`` flag blocking kernels watch), and ``bind_kernel``: the device's one
hook on a kernel it runs, ``bind_kernel(kernel_def, node_def, fn) -> fn``, called once per
plan with the kernel a factory returned (``Device.bind_kernel``: the identity on host devices;
a GPU wraps the kernel so that it runs on that device's own stream, with the inputs the kernel
does not declare host memory moved to the device), and ``intra_op``: the intra-op pool of the
worker running the device's kernels (``dflab.kernels.intra_op.IntraOpPool``), which a host
kernel splits its big work with (one thread, no splitting, unless the worker's config asks for
threads; ``SERIAL`` for kernels bound outside a worker), and which says whether a host kernel
may run on oneDNN and on how many threads.
"""

from __future__ import annotations

import numpy as np

from dflab.framework.constant_op import is_constant_value
from dflab.kernels.intra_op import SERIAL, IntraOpPool


class KernelContext:
    __slots__ = ("device", "device_type", "xp", "resources", "owner", "bind_kernel", "intra_op")

    def __init__(self, device: str, device_type: str, xp, resources, owner=None,
                 bind_kernel=None, intra_op: IntraOpPool = SERIAL):
        self.device = device
        self.device_type = device_type
        self.xp = xp
        self.resources = resources
        self.owner = owner
        self.bind_kernel = bind_kernel or _as_is
        self.intra_op = intra_op

    @property
    def owner_closed(self) -> bool:
        """Whether the session or worker running this device's kernels was closed."""
        return bool(getattr(self.owner, "closed", False))


def _as_is(kernel_def, node_def, fn):
    """A host device runs a kernel as its factory returned it."""
    return fn


# The host's context without a device: kernels bound outside a plan (the fused kernels' NumPy
# steps, tests) compute with NumPy.
HOST = KernelContext("", "CPU", np, None)


def outputs(values):
    """What a kernel whose op has a variable number of outputs (``num``, ``num_split``, ``N``)
    returns: a tuple of them, but the value itself when there is one (the executor's
    convention for every op of one output: a 1-tuple would be taken for the value)."""
    values = tuple(values)
    return values[0] if len(values) == 1 else values


def host(value, dtype=None) -> np.ndarray:
    """A kernel's small host-side argument (a shape, axes, a size, an index) as a NumPy array.
    On a GPU it arrives as a device array: it is copied to the host (CuPy's ``.get()``; CuPy
    refuses ``np.asarray`` on device arrays), as TF keeps such inputs in host memory."""
    if not isinstance(value, np.ndarray) and hasattr(value, "get") and hasattr(value, "dtype"):
        value = value.get()
    return np.asarray(value, dtype=dtype)


def host_ints(value) -> tuple:
    """A kernel's small host-side integer argument (a shape, axes, a slice's vector) as a tuple
    of Python ints, flattened. Such arguments are most often a constant's value, the same
    array at every call, which nothing writes (``is_constant_value``): it is remembered by
    identity, since reading it again costs a small op as much as the op itself (a 2x2
    reshape: 1.3 us, of which reading its shape is 0.6). The memo holds the array, so its id
    cannot be reused while remembered. Any other array (fed, computed, a variable's, which an
    update may write in place) is read at every call."""
    known = _KNOWN_INTS.get(id(value))
    if known is not None and known[0] is value:
        return known[1]
    values = np.asarray(host(value)).ravel()
    ints = tuple(values.tolist() if values.dtype.kind in "iu" else [int(e) for e in values])
    if type(value) is np.ndarray and value.size <= _KNOWN_MAX_SIZE and \
            not value.flags.writeable and is_constant_value(value):  # (frozen: the cheap test)
        if len(_KNOWN_INTS) >= _KNOWN_MAX:
            _KNOWN_INTS.clear()
        _KNOWN_INTS[id(value)] = (value, ints)
    return ints


_KNOWN_INTS: dict = {}  # id of a constant's value -> (the array, its ints)
_KNOWN_MAX = 4096
_KNOWN_MAX_SIZE = 64
