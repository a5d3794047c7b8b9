"""A strict NumPy-backed stand-in for the ``cupy`` module, to run the GPU device's own code
without a GPU.

Strict where CuPy is strict: a device array (``ndarray`` here) refuses implicit conversion to
NumPy (``np.asarray(x)`` raises ``TypeError`` as CuPy's does), and the module's functions
refuse NumPy arrays as array arguments. NumPy functions called *on* device arrays dispatch to
this module (``__array_ufunc__``/``__array_function__``), as they do with CuPy. So a kernel that
reads a device array with NumPy fails here exactly as it would on a GPU.

What it models of ``cupy.cuda``: devices (the current one is thread-local), streams (the
current one is thread-local; every array records the stream and device it was made on),
events, a memory pool per device whose allocations are freed when arrays die, pinned host
memory, ``using_allocator``. Copies run at once; streams only record order. It is test code:
dflab never imports it.

It also counts what a GPU would do (``counts``, deterministic): every call that would launch a
kernel (a call whose result is not a view of its inputs, an in-place write, a dflab CUDA
program), the bytes each reads and writes, and which of them only move data (copies, casts,
gathers, padding: CuPy's ``cupy_copy`` and friends); and the bytes crossing between host and
device (``transfers`` counts the copies, ``transfer_bytes`` their bytes). A dflab CUDA program
(``cupy.RawKernel`` with a source from ``dflab.kernels.cuda.program``) runs as its NumPy
reference, after its arguments are checked as a CUDA launch would need them.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import threading
import types
import weakref

import numpy as np

_tls = threading.local()
IMPLICIT = ("Implicit conversion to a NumPy array is not allowed. Please use `.get()` to "
            "construct a NumPy array explicitly.")


class OutOfMemoryError(MemoryError):
    pass


# --- cupy.cuda --------------------------------------------------------------------------------

class Device:
    def __init__(self, index=0):
        self.id = index

    def __enter__(self):
        stack = _stack("devices")
        stack.append(self.id)
        return self

    def __exit__(self, *exc):
        _stack("devices").pop()

    def use(self):
        _tls.base_device = self.id


def _stack(name):
    s = getattr(_tls, name, None)
    if s is None:
        s = []
        setattr(_tls, name, s)
    return s


def current_device() -> int:
    s = _stack("devices")
    return s[-1] if s else getattr(_tls, "base_device", 0)


class Event:
    def __init__(self):
        self.recorded_on = None
        self.done = True

    def record(self, stream=None):
        self.recorded_on = stream
        self.done = True  # the stand-in's copies finish when issued

    def synchronize(self):
        pass


class Stream:
    null = None

    def __init__(self, non_blocking=False):
        self.non_blocking = non_blocking
        self.device = current_device()
        self.waits: list[Event] = []
        self.synchronized = 0
        self.ptr = next(_stream_ptrs)  # a cudaStream_t as libraries take it
        _streams[self.ptr] = self

    def __enter__(self):
        _stack("streams").append(self)
        return self

    def __exit__(self, *exc):
        _stack("streams").pop()

    def record(self, event=None):
        event = event or Event()
        event.record(self)
        return event

    def wait_event(self, event):
        self.waits.append(event)

    def synchronize(self):
        self.synchronized += 1

    # CUDA graph capture, as CUDA does it: work issued to a capturing stream is recorded, not
    # run. The stand-in computes each call while capturing (to give its outputs their shapes),
    # then end_capture puts every buffer that existed before the capture back as it was and
    # fills the buffers allocated during the capture with garbage: only a launch of the graph
    # computes. A launch re-runs the recorded calls into the very arrays they produced (the
    # same "pointers"). Host reads and host-to-device copies fail while capturing, as the CUDA
    # runtime refuses synchronous work then.
    def begin_capture(self):
        if getattr(self, "recording", None) is not None:
            raise RuntimeError("stream is already capturing")
        self.recording = []
        self._before = _snapshot()
        _capturing.add(self)

    def end_capture(self):
        graph, self.recording = Graph(self.recording), None
        _capturing.discard(self)
        _restore(self._before)
        self._before = None
        return graph

    def is_capturing(self):
        return getattr(self, "recording", None) is not None


class Graph:
    def __init__(self, calls):
        self.calls = calls
        self.launches = 0

    def launch(self, stream=None):
        self.launches += 1
        counts.graph_launches += 1
        counts.graph_kernels += len(self.calls)
        with _not_counted():
            for fn, args, kwargs, out, strict in self.calls:
                _assign(out, fn(*(_unwrap(a, strict) for a in args),
                                **{k: _unwrap(v, strict) for k, v in kwargs.items()}))


def _assign(out, value):
    if isinstance(out, tuple):
        for o, v in zip(out, value):
            _assign(o, v)
    elif isinstance(out, ndarray) and out._a.flags.writeable:  # (a broadcast view is not)
        out._a[...] = value


# --- what a capture leaves behind -------------------------------------------------------------
_capturing: set = set()  # streams capturing now
_stream_ptrs = itertools.count(0x5000)
_streams: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
_live = weakref.WeakValueDictionary()  # serial -> every device array alive
_serials = itertools.count()


def _root(a: np.ndarray) -> np.ndarray:
    """The array owning ``a``'s memory. A strided view (``as_strided``,
    ``sliding_window_view``) has NumPy's ``DummyArray`` as its base, which holds the viewed
    array in its own ``base``: followed too, as a window view's apparent extent (windows
    times window size) reaches far past the memory it views, into other arrays'."""
    while True:
        base = a.base
        if isinstance(base, np.ndarray):
            a = base
        elif isinstance(getattr(base, "base", None), np.ndarray):
            a = base.base
        else:
            return a


def _snapshot():
    """The contents of every device buffer alive now (by root array), and the next serial."""
    roots = {}
    for arr in list(_live.values()):
        r = _root(arr._a)
        roots.setdefault(id(r), (r, r.copy()))
    return next(_serials), roots


def _restore(before) -> None:
    first_new, roots = before
    for serial, arr in list(_live.items()):
        r = _root(arr._a)
        if serial > first_new and id(r) not in roots and r.flags.writeable:
            _garbage(r)
    for r, saved in roots.values():
        if r.flags.writeable:
            r[...] = saved


def _garbage(r: np.ndarray) -> None:
    """Fill ``r`` as uncomputed memory: NaN for floats, -1 for ints, True for bools."""
    if r.dtype.kind in "fc":
        r[...] = np.nan
    elif r.dtype.kind in "iub":
        r[...] = -1 if r.dtype.kind == "i" else ~np.zeros((), r.dtype)


def _refuse_while_capturing(what: str) -> None:
    if _capturing:
        raise _Runtime.CUDARuntimeError(
            f"cudaErrorStreamCaptureUnsupported: {what} is not permitted while a stream is "
            "capturing")


Stream.null = Stream()


def stream_of(ptr: int) -> Stream:
    """The stream whose ``ptr`` is ``ptr`` (what a library handle was set to)."""
    stream = _streams.get(ptr)
    if stream is None:
        raise ValueError(f"{ptr:#x} is not a live stream")
    return stream


def record_on(stream: Stream, fn, args) -> None:
    """Record ``fn(*args)`` (a library call writing into device arrays in ``args``) into
    ``stream``'s capture, if it is capturing: a graph launch calls it again."""
    if getattr(stream, "recording", None) is not None:
        stream.recording.append((fn, args, {}, None, False))


def get_current_stream():
    s = _stack("streams")
    return s[-1] if s else Stream.null


class MemoryPointer:
    def __init__(self, pool, nbytes, device):
        self.pool, self.size, self.device_id = pool, nbytes, device
        self.host = None  # the NumPy buffer standing for this device memory
        self._freed = False

    @property
    def mem(self):
        return self

    @property
    def ptr(self) -> int:
        """The device address of the array's first element: here, its host buffer's."""
        return int(self.host.__array_interface__["data"][0]) if self.host is not None else 0

    def free(self):
        if not self._freed:
            self._freed = True
            self.pool._free(self.size)

    def __del__(self):
        self.free()

    def copy_from_device_async(self, src, nbytes, stream=None):
        if stream is not get_current_stream() and stream is None:
            raise ValueError("copies are issued on a stream")
        dst_bytes = self.host.reshape(-1).view(np.uint8)
        dst_bytes[:nbytes] = src.host.reshape(-1).view(np.uint8)[:nbytes]
        self.copied_from = (src.device_id, stream)


class MemoryPool:
    """Counts bytes; a freed block stays reserved (``total_bytes``) as in CuPy's pool."""

    def __init__(self):
        self._used = self._total = self._limit = 0
        self._lock = threading.Lock()
        self.mallocs = 0

    def malloc(self, nbytes):
        with self._lock:
            if self._limit and self._used + nbytes > self._limit:
                raise OutOfMemoryError(f"Out of memory allocating {nbytes} bytes "
                                       f"(limit {self._limit})")
            self._used += nbytes
            self._total = max(self._total, self._used)
            self.mallocs += 1
        return MemoryPointer(self, nbytes, current_device())

    def _free(self, nbytes):
        with self._lock:
            self._used -= nbytes

    def used_bytes(self):
        return self._used

    def total_bytes(self):
        return self._total

    def set_limit(self, size=None, fraction=None):
        self._limit = int(size or 0)

    def get_limit(self):
        return self._limit

    def free_all_blocks(self):
        self._total = self._used


_default_pool = MemoryPool()


@contextlib.contextmanager
def using_allocator(allocator=None):
    _stack("allocators").append(allocator)
    try:
        yield
    finally:
        _stack("allocators").pop()


def _malloc(nbytes):
    s = _stack("allocators")
    alloc = s[-1] if s and s[-1] is not None else _default_pool.malloc
    return alloc(nbytes)


pinned_allocations: list[int] = []
# Copies between host and device memory, by direction ("host_to_device", "device_to_host"):
# what the tests count to show which values cross and how often.
transfers: collections.Counter = collections.Counter()
transfer_bytes: collections.Counter = collections.Counter()


def _read_on_host(array) -> None:
    """A device value read on the host (``bool(x)``, ``int(x)``, ``x.item()``): on a GPU a
    copy to the host that waits for the stream, so it counts as one."""
    _refuse_while_capturing("reading a device value on the host")
    transfers["device_to_host"] += 1
    transfer_bytes["device_to_host"] += array.nbytes


def alloc_pinned_memory(nbytes):
    pinned_allocations.append(nbytes)
    return bytearray(nbytes)


class _Runtime:
    device_count = 1
    total_memory = 16 << 30

    class CUDARuntimeError(RuntimeError):
        pass

    def getDeviceCount(self):
        return self.device_count

    def memGetInfo(self):
        return (self.total_memory, self.total_memory)

    def getDeviceProperties(self, index):
        return {"name": b"Strict stand-in GPU"}


# --- ndarray ----------------------------------------------------------------------------------

class ndarray:  # noqa: N801 - CuPy's name
    """A device array: a NumPy array in "device memory", with the stream and device that made
    it. Converting it to NumPy implicitly is an error, as on CuPy."""

    __array_priority__ = 100

    def __init__(self, host: np.ndarray, _check=True):
        self._a = host
        self.device_id = current_device()
        self.stream = get_current_stream()
        self.data = _malloc(host.nbytes)
        self.data.host = host
        _live[next(_serials)] = self

    # strictness
    def __array__(self, *args, **kwargs):
        raise TypeError(IMPLICIT)

    def get(self, stream=None, out=None):
        _refuse_while_capturing("a device-to-host copy")
        transfers["device_to_host"] += 1
        transfer_bytes["device_to_host"] += self._a.nbytes
        if out is not None:
            out[...] = self._a
            return out
        return self._a.copy()

    def set(self, arr, stream=None):
        if isinstance(arr, ndarray):
            raise TypeError("set() takes a NumPy array")
        _refuse_while_capturing("a host-to-device copy")
        transfers["host_to_device"] += 1
        transfer_bytes["host_to_device"] += self._a.nbytes
        self._a[...] = arr

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return _wrap_call(getattr(ufunc, method), inputs, kwargs, strict=True)

    def __array_function__(self, func, types_, args, kwargs):
        return _wrap_call(func, args, kwargs, strict=True)

    # attributes
    shape = property(lambda self: self._a.shape)
    dtype = property(lambda self: self._a.dtype)
    ndim = property(lambda self: self._a.ndim)
    size = property(lambda self: self._a.size)
    nbytes = property(lambda self: self._a.nbytes)
    strides = property(lambda self: self._a.strides)
    T = property(lambda self: _wrap(self._a.T))
    flags = property(lambda self: self._a.flags)
    real = property(lambda self: _wrap(self._a.real))
    imag = property(lambda self: _wrap(self._a.imag))

    def __getattr__(self, name):
        if name.startswith("__"):  # __array_interface__ and friends: no host view
            raise AttributeError(name)
        attr = getattr(self._a, name)  # methods: reshape, astype, sum, copy, ...
        if not callable(attr):
            return attr
        return lambda *a, **k: _wrap_call(attr, a, k, strict=True)

    def __len__(self):
        return len(self._a)

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __repr__(self):
        return f"strict_cupy.ndarray({self._a!r})"

    # CuPy allows these (they synchronize), except while a stream is capturing
    def __float__(self):
        _read_on_host(self)
        return float(self._a)

    def __int__(self):
        _read_on_host(self)
        return int(self._a)

    def __index__(self):
        _read_on_host(self)
        return self._a.__index__()

    def __bool__(self):
        _read_on_host(self)
        return bool(self._a)

    def __complex__(self):
        _read_on_host(self)
        return complex(self._a)

    def item(self):
        _read_on_host(self)
        return self._a.item()

    def tolist(self):
        _refuse_while_capturing("reading a device value on the host")
        return self._a.tolist()

    # Indexing and item assignment are kernels too: recorded while capturing.
    def __getitem__(self, key):
        return _wrap_call(_getitem, (self, key), {}, strict=False)

    def __setitem__(self, key, value):
        _unwrap(value, strict=True)  # a NumPy array as the value is refused
        _wrap_call(_setitem, (self, key, value), {}, strict=False)


def _getitem(a, key):
    return a[key]


def _device_array(a, dtype=None, copy=True, ndmin=0):
    return np.array(a, dtype=dtype, copy=True, ndmin=ndmin)


_device_array.__name__ = "copy"


def _setitem(a, key, value):
    a[key] = value


def _binary(name):
    op = getattr(np.ndarray, name)

    def method(self, *args):
        return _wrap_call(op, (self, *args), {}, strict=True)

    method.__name__ = name
    return method


for _name in ("add", "radd", "sub", "rsub", "mul", "rmul", "truediv", "rtruediv", "floordiv",
              "rfloordiv", "mod", "rmod", "pow", "rpow", "matmul", "rmatmul", "and", "rand",
              "or", "ror", "xor", "rxor", "lt", "le", "gt", "ge", "eq", "ne", "neg", "pos",
              "abs", "invert", "iadd", "isub", "imul", "itruediv", "lshift", "rshift"):
    setattr(ndarray, f"__{_name}__", _binary(f"__{_name}__"))
ndarray.__hash__ = None


def _wrap(value):
    if isinstance(value, np.ndarray):
        return ndarray(value)
    if isinstance(value, np.generic):  # CuPy returns 0-d arrays where NumPy returns scalars
        return ndarray(np.asarray(value))
    if isinstance(value, tuple):
        return tuple(_wrap(v) for v in value)
    if isinstance(value, list):
        return [_wrap(v) for v in value]
    return value


def _unwrap(value, strict: bool):
    if isinstance(value, ndarray):
        return value._a
    if strict and isinstance(value, np.ndarray) and value.ndim > 0:
        raise TypeError(f"Unsupported type {type(value)}: a NumPy array passed where CuPy "
                        "takes device arrays")
    if isinstance(value, (tuple, list)):
        return type(value)(_unwrap(v, strict) for v in value)
    if isinstance(value, slice):
        return slice(_unwrap(value.start, strict), _unwrap(value.stop, strict),
                     _unwrap(value.step, strict))
    return value


# CuPy joins many arrays in one kernel that reads a table of their addresses, copied from host
# memory: a capturing stream refuses that copy (seen on an H200 for 20 arrays; 2 join by copies).
_JOINS = frozenset({"concatenate", "stack", "hstack", "vstack", "concat"})
_JOINED_BY_COPIES = 4


def _wrap_call(fn, args, kwargs, strict: bool):
    if getattr(fn, "__name__", "") in _JOINS and args and isinstance(args[0], (list, tuple)) \
            and len(args[0]) > _JOINED_BY_COPIES:
        _refuse_while_capturing(f"joining {len(args[0])} arrays (their address table)")
    raw_args = tuple(_unwrap(a, strict) for a in args)
    raw_kwargs = {k: _unwrap(v, strict) for k, v in kwargs.items()}
    result = fn(*raw_args, **raw_kwargs)
    out = _wrap(result)
    stream = get_current_stream()
    if getattr(stream, "recording", None) is not None:
        stream.recording.append((fn, args, kwargs, out, strict))
    elif not _capturing:
        _count_call(fn, raw_args, raw_kwargs, result)
    return out


# --- what a GPU would launch ------------------------------------------------------------------
class Counts:
    """Kernel launches and bytes of one run of the stand-in (see the module docstring);
    ``reset`` starts again. Graph launches count once each (``graph_launches``), the kernels
    they replay apart (``graph_kernels``)."""

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        self.launches = 0
        self.copy_launches = 0
        self.bytes_moved = 0
        self.copy_bytes = 0
        self.graph_launches = 0
        self.graph_kernels = 0
        self.by_name: collections.Counter = collections.Counter()
        self.bytes_by_name: collections.Counter = collections.Counter()
        self._off = 0

    def add(self, name: str, read: int, written: int, copy: bool) -> None:
        if self._off:
            return
        self.launches += 1
        self.bytes_moved += read + written
        self.by_name[name] += 1
        self.bytes_by_name[name] += read + written
        if copy:
            self.copy_launches += 1
            self.copy_bytes += read + written

    def snapshot(self) -> dict:
        return {k: getattr(self, k) for k in ("launches", "copy_launches", "bytes_moved",
                                              "copy_bytes", "graph_launches", "graph_kernels")}


counts = Counts()


@contextlib.contextmanager
def _not_counted():
    counts._off += 1
    try:
        yield
    finally:
        counts._off -= 1


# Calls that launch no kernel whatever they return (allocation without initialisation, shape
# queries); calls that only move data (CuPy's copy kernels: casts, gathers, padding, stacking,
# and any view-making call that had to copy).
_NO_KERNEL = frozenset({"empty", "empty_like", "shape", "ndim", "size", "result_type",
                        "may_share_memory", "shares_memory"})
_COPIES = frozenset({
    "copy", "astype", "ascontiguousarray", "asarray", "array", "copyto", "pad", "concatenate",
    "stack", "hstack", "vstack", "tile", "repeat", "take", "take_along_axis", "put_along_axis",
    "setitem", "getitem", "reshape", "ravel", "flatten", "transpose", "swapaxes", "moveaxis",
    "broadcast_to", "flip", "roll", "squeeze", "expand_dims", "as_strided",
    "sliding_window_view", "split", "array_split", "put", "diagonal", "atleast_1d",
    "atleast_2d", "concat"})
# Calls that write into an argument and may return None or that argument.
_WRITES = frozenset({"copyto", "setitem", "at", "put_along_axis", "put", "fill"})


def _arrays(value, out: list) -> list:
    if isinstance(value, np.ndarray):
        out.append(value)
    elif isinstance(value, (tuple, list)):
        for v in value:
            _arrays(v, out)
    return out


def _count_call(fn, raw_args, raw_kwargs, result) -> None:
    name = (getattr(fn, "__name__", "") or "").strip("_")  # __matmul__ is a matmul
    if name in _NO_KERNEL or counts._off:
        return
    inputs = _arrays(list(raw_args) + [v for k, v in raw_kwargs.items() if k != "out"], [])
    owner = getattr(fn, "__self__", None)  # an array method: the array is an input
    if isinstance(owner, np.ndarray):
        inputs.append(owner)
    outputs = _arrays(raw_kwargs.get("out"), [])
    if name in _WRITES and inputs:
        target = inputs[0] if name != "setitem" else _setitem_target(raw_args)
        outputs.append(target)
        inputs = inputs[1:]
    elif not outputs:
        outputs = _arrays(result, [])
        if not outputs or all(any(np.may_share_memory(o, i) for i in inputs)
                              for o in outputs):
            return  # a view (or a host value): no kernel
    read = sum(a.nbytes for a in inputs)
    written = sum(o.nbytes for o in outputs)
    counts.add(name, read, written, name in _COPIES)


def _setitem_target(raw_args):
    a, key, _ = raw_args
    try:
        return a[key]
    except Exception:  # noqa: BLE001 - the write itself raised already otherwise
        return a


# --- the module -------------------------------------------------------------------------------

# Functions that take host data by design.
_FROM_HOST = ("asarray", "array", "ascontiguousarray")
# Module attributes passed through unchanged: dtypes, constants, type predicates.
_PASS = {"float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16",
         "uint32", "uint64", "bool_", "complex64", "complex128", "dtype", "newaxis", "inf", "nan",
         "pi", "e", "finfo", "iinfo", "issubdtype", "result_type", "promote_types",
         "can_cast", "floating", "integer", "signedinteger", "unsignedinteger", "number",
         "bool", "generic", "errstate", "complexfloating", "inexact", "ndim"}


class _Ufunc:
    def __init__(self, ufunc):
        self._u = ufunc
        self.__name__ = ufunc.__name__
        self.nin, self.nout = ufunc.nin, ufunc.nout

    def __call__(self, *a, **k):
        return _wrap_call(self._u, a, k, strict=True)

    def __getattr__(self, name):  # reduce, accumulate, at, outer
        attr = getattr(self._u, name)
        return (lambda *a, **k: _wrap_call(attr, a, k, strict=True)) if callable(attr) else attr


def _check_launch(name, grid, block, shared_mem) -> None:
    if not (isinstance(grid, tuple) and isinstance(block, tuple) and 1 <= len(grid) <= 3
            and 1 <= len(block) <= 3):
        raise TypeError(f"{name}: grid and block are tuples of 1 to 3 ints")
    threads = int(np.prod(block))
    if not 1 <= threads <= 1024 or any(int(g) < 1 for g in grid) or int(grid[0]) > 2 ** 31 - 1:
        raise ValueError(f"{name}: invalid launch configuration grid={grid} block={block}")
    if not 0 <= int(shared_mem) <= 48 * 1024:
        raise ValueError(f"{name}: {shared_mem} bytes of dynamic shared memory")


def run_program(program, args) -> None:
    """Run a dflab CUDA program's NumPy reference on device arrays, as a launch on the
    current stream: recorded while the stream captures, counted otherwise."""
    stream = get_current_stream()
    if getattr(stream, "recording", None) is not None:
        stream.recording.append((program.reference, tuple(args), {}, None, False))
    elif not _capturing:
        read = sum(a.nbytes for a, p in zip(args, program.params) if p.is_pointer and p.is_const)
        written = sum(a.nbytes for a, p in zip(args, program.params)
                      if p.is_pointer and not p.is_const)
        counts.add(program.name, read, written, program.kind == "copy")
    program.reference(*(_unwrap(a, False) for a in args))


def array_at(ptr: int, shape, dtype, strides=None) -> np.ndarray:
    """The device memory at address ``ptr`` as a NumPy array of ``shape`` (a library call's
    operand): it must lie inside one live device array, as CUDA memory must be allocated."""
    dtype = np.dtype(dtype)
    shape = tuple(int(d) for d in shape)
    if strides is None:
        strides = tuple(int(s) for s in np.empty(shape, dtype).strides)
    extent = dtype.itemsize + sum((d - 1) * s for d, s in zip(shape, strides)) if \
        all(shape) else 0
    for arr in list(_live.values()):
        root = _root(arr._a)
        start = int(root.__array_interface__["data"][0])
        if start <= ptr and ptr + extent <= start + root.nbytes:
            # One block in memory order (a view of a copy would take a library's writes
            # away from device memory).
            block = root.reshape(-1, order="A")
            assert np.shares_memory(block, root), "a device allocation is one block"
            return np.ndarray(shape, dtype, buffer=block.view(np.uint8),
                              offset=ptr - start, strides=strides)
    raise ValueError(f"{ptr:#x}: {extent} bytes outside any live device allocation")


def make_module(device_count: int = 1, total_memory: int = 16 << 30) -> types.ModuleType:
    """A fresh stand-in ``cupy`` module with ``device_count`` devices."""
    mod = types.ModuleType("strict_cupy")
    runtime = _Runtime()
    runtime.device_count, runtime.total_memory = device_count, total_memory
    cuda = types.SimpleNamespace(
        Device=Device, Stream=Stream, Event=Event, MemoryPool=MemoryPool, runtime=runtime,
        using_allocator=using_allocator, alloc_pinned_memory=alloc_pinned_memory,
        get_current_stream=get_current_stream, memory=types.SimpleNamespace(
            OutOfMemoryError=OutOfMemoryError))
    mod.cuda = cuda
    mod.ndarray = ndarray
    mod.calls = collections.Counter()
    compiled = []
    mod.compiled_kernels = compiled

    def asarray(value, dtype=None, order=None):
        if isinstance(value, ndarray):
            return value if dtype is None or value.dtype == dtype else value.astype(dtype)
        _refuse_while_capturing("a host-to-device copy")
        transfers["host_to_device"] += 1
        host = np.array(value, dtype=dtype, copy=True)
        transfer_bytes["host_to_device"] += host.nbytes
        return ndarray(host)

    def array(value, dtype=None, copy=True, order="K", ndmin=0):
        if isinstance(value, ndarray):  # a device copy: a kernel (recorded while capturing)
            return _wrap_call(_device_array, (value,),
                              dict(dtype=dtype, copy=copy, ndmin=ndmin), strict=True)
        _refuse_while_capturing("a host-to-device copy")
        transfers["host_to_device"] += 1
        host = np.array(value, dtype=dtype, copy=True, ndmin=ndmin)
        transfer_bytes["host_to_device"] += host.nbytes
        return ndarray(host)

    def asnumpy(value, stream=None):
        return value.get() if isinstance(value, ndarray) else np.asarray(value)

    def empty(shape, dtype=float, order="C"):
        return ndarray(np.empty(shape, dtype))

    def get_array_module(*args):
        return mod

    class ElementwiseKernel:
        """Records what it was built from (the tests compile the source with NVRTC). A dflab
        fused kernel runs as its expression's NumPy evaluator (one launch); other CUDA C
        cannot run here."""

        def __init__(self, in_params, out_params, operation=None, name="kernel", **kw):
            self.args = dict(in_params=in_params, out_params=out_params, operation=operation,
                             name=name, **kw)
            compiled.append(self)

        def __call__(self, *args, axis=None, keepdims=False, **kwargs):
            from dflab.kernels.fused_kernels import REDUCTIONS, expression_for, numpy_evaluator

            expr = expression_for(self.args.get("preamble", ""))
            if expr is None:
                raise NotImplementedError("the strict cupy stand-in cannot run CUDA C")
            for a in args:
                if isinstance(a, np.ndarray) and a.ndim:
                    raise TypeError("a NumPy array passed to a CuPy kernel")
            evaluate = numpy_evaluator(expr)
            reduction = expr.reduction[0] if expr.reduction else None
            np_reduce = {"Sum": np.sum, "Prod": np.prod, "Max": np.max, "Min": np.min,
                         "Mean": np.mean}

            def fused(*raw):
                out = np.asarray(evaluate(*raw))
                if reduction is not None:
                    assert reduction in REDUCTIONS
                    out = np.asarray(np_reduce[reduction](out, axis=axis, keepdims=keepdims),
                                     dtype=out.dtype)
                return out

            fused.__name__ = "dflab_fused"
            return _wrap_call(fused, args, {}, strict=True)

    def sliding_window_view(x, window_shape, axis=None, **kw):
        return _wrap_call(np.lib.stride_tricks.sliding_window_view, (x, window_shape),
                          dict(axis=axis, **kw), strict=True)

    def as_strided(x, shape=None, strides=None, **kw):
        return _wrap_call(np.lib.stride_tricks.as_strided, (x,),
                          dict(shape=shape, strides=strides, **kw), strict=True)

    class RawKernel:
        """A dflab CUDA program: checked and run as its NumPy reference (any other CUDA C
        cannot run here)."""

        def __init__(self, code, name, options=(), **kw):
            from dflab.kernels.cuda.program import program_for

            self.code, self.name, self.options = code, name, tuple(options)
            self.program = program_for(code)
            if self.program is None or self.program.name != name:
                raise NotImplementedError(f"the strict cupy stand-in runs dflab's CUDA programs"
                                          f" only, not {name}")
            compiled.append(self)

        def __call__(self, grid, block, args, shared_mem=0, **kw):
            _check_launch(self.name, grid, block, shared_mem)
            for a, p in zip(args, self.program.params):
                if p.is_pointer and not isinstance(a, ndarray):
                    raise TypeError(f"{self.name}: {p.name} must be a device array, got "
                                    f"{type(a).__name__}")
            self.program.check_args(args)
            run_program(self.program, args)

    mod.RawKernel = RawKernel
    mod.lib = types.SimpleNamespace(stride_tricks=types.SimpleNamespace(
        sliding_window_view=sliding_window_view, as_strided=as_strided))
    def _linalg(name):
        def wrapped(*a, **k):
            mod.calls[f"linalg.{name}"] += 1
            return _wrap_call(getattr(np.linalg, name), a, k, strict=True)
        wrapped.__name__ = name
        return wrapped

    # cupy.linalg's batched decompositions and solvers (the ones dflab's kernels call).
    mod.linalg = types.SimpleNamespace(**{n: _linalg(n) for n in (
        "cholesky", "inv", "det", "slogdet", "solve", "qr", "svd", "eigh", "eigvalsh",
        "pinv")})
    def _fft(name):
        def wrapped(*a, **k):
            mod.calls[f"fft.{name}"] += 1
            return _wrap_call(getattr(np.fft, name), a, k, strict=True)
        wrapped.__name__ = name
        return wrapped

    # cupy.fft's N-d transforms (cuFFT plans; the ones dflab's kernels call).
    mod.fft = types.SimpleNamespace(**{n: _fft(n) for n in (
        "fftn", "ifftn", "rfftn", "irfftn")})
    mod.ElementwiseKernel = ElementwiseKernel
    mod.ReductionKernel = ElementwiseKernel
    def ascontiguousarray(value, dtype=None):
        if isinstance(value, ndarray):
            if value.flags.c_contiguous and (dtype is None or value.dtype == dtype):
                return value
            return _wrap_call(np.ascontiguousarray, (value,), {"dtype": dtype}, strict=True)
        return asarray(value, dtype)

    mod.asarray, mod.array, mod.ascontiguousarray = asarray, array, ascontiguousarray
    mod.asnumpy, mod.empty, mod.get_array_module = asnumpy, empty, get_array_module

    def module_getattr(name):
        if name in _PASS:
            return getattr(np, name)
        fn = getattr(np, name)
        if isinstance(fn, np.ufunc):
            wrapped = _Ufunc(fn)
        elif callable(fn) and not isinstance(fn, type):
            def wrapped(*a, **k):
                mod.calls[name] += 1
                return _wrap_call(fn, a, k, strict=True)
            wrapped.__name__ = name
        elif isinstance(fn, types.ModuleType):
            raise AttributeError(name)  # linalg, random... not modelled
        else:
            return fn
        setattr(mod, name, wrapped)
        return wrapped

    mod.__getattr__ = module_getattr
    return mod

