"""The CUDA GPU device, on CuPy: one ``GPUDevice`` per visible CUDA device, as ``/gpu:N``.

A GPU device computes with ``xp = cupy``: its kernels are the CPU's kernels bound to CuPy
(``dflab.kernels.gpu_kernels``). What it adds to a ``Device``:

* **Streams.** Its own CUDA streams: ``compute`` (every kernel of the device runs there:
  ``bind_kernel`` wraps each kernel when a plan binds it so that it is issued with this device
  and stream current, whichever executor thread calls it), ``host_to_device`` and
  ``device_to_host`` for transfers, so copies overlap compute. The streams are *blocking*
  streams (not ``non_blocking``): work a user issues on CuPy's legacy default stream stays
  ordered with dflab's.
* **Transfers ordered with events.** ``from_host`` copies the host value once, straight from
  the (C-contiguous) host array into device memory on the host-to-device stream, and makes the
  compute stream wait for the copy's event; the host array is kept until that event has
  completed (a feed is never staged through a second, pinned buffer: that would copy twice).
  ``to_host`` makes the device-to-host stream wait for the compute stream, then copies once
  into the NumPy result.
  ``copy_to`` another GPU copies device to device on the destination's stream after the source's
  compute event.
* **Memory from a CuPy memory pool of its own.** Every array a kernel allocates comes from the
  device's pool (through ``cupy.cuda.using_allocator``), so ``memory.stats()`` reports the
  pool's bytes in use and reserved and the peak seen at each allocation.
  ``GPUOptions.per_process_gpu_memory_fraction`` caps the pool at that fraction of the device's
  memory; only with that fraction *and* ``allow_growth=False`` is the fraction reserved up front
  (TF's behaviour). By default nothing is reserved and the pool grows on demand: dflab does not
  take a GPU's memory before it needs it (a deliberate deviation from TF's default).

``cupy`` is a parameter of the device, never imported at ``import dflab``: the backend imports
it the first time a session counts GPUs, and a machine without CuPy or without a CUDA device
has no real GPUs (simulated ones still work). Tests pass a strict NumPy-backed stand-in for
the module (``tests/gpu/strict_cupy.py``) to run this very code without a GPU.

**Host memory.** As TF's ``HostMemory`` kernels, shapes, sizes, int32 constants and the shape
arithmetic on them stay NumPy values: each kernel declares at registration which of its inputs
it reads on the host (``register_kernel(..., host_memory_inputs=...)``), and ``bind_kernel``
moves a host value to the device only where it reaches any other input.

Invariant: a value of this device is a CuPy array on its CUDA device, produced on its compute
stream, or a host-memory value (a NumPy array or scalar); every value that leaves the device
leaves after the compute work issued before it.
"""

from __future__ import annotations

import contextlib
import threading

import numpy as np

from dflab.framework.constant_op import is_constant_value
from dflab.framework.registry import get_op_def
from dflab.kernels.context import HOST
from dflab.kernels.cuda.libraries import GPUKernelContext, GPULibraries, probe_libraries
from dflab.kernels.registry import get_kernel_def, has_kernel
from dflab.runtime.devices import (
    LOCAL_TASK,
    Device,
    DeviceMemory,
    Stream,
    _is_array,
    register_backend,
)


class CudaStream(Stream):
    """A host-side ``Stream`` (the executor's one-kernel-at-a-time order) around a CUDA
    stream; ``synchronize`` also waits for the work issued to the CUDA stream."""

    def __init__(self, name: str, cuda_stream):
        super().__init__(name)
        self.cuda = cuda_stream

    def synchronize(self) -> None:
        super().synchronize()
        self.cuda.synchronize()


class _Entered(threading.local):
    depth = 0  # how many runs of this thread are inside the scope
    left = None  # what the outermost one entered, to exit in turn


class KernelScope:
    """A GPU's CUDA device, compute stream and memory pool made current on the calling thread
    for a whole run of a partition (``Device.kernel_scope``; re-entrant on one thread): its
    kernels (``GPUDevice.launch``) then skip entering the three, which cost a third of a small
    kernel's launch on a real GPU."""

    __slots__ = ("_enter", "here")

    def __init__(self, enter):
        self._enter = enter  # () -> the context managers to enter, in order
        self.here = _Entered()

    def __enter__(self):
        here = self.here
        if not here.depth:
            entered = []
            try:
                for cm in self._enter():
                    cm.__enter__()
                    entered.append(cm)
            except BaseException:
                _exit_all(entered)
                raise
            here.left = entered
        here.depth += 1
        return self

    def __exit__(self, *exc):
        here = self.here
        here.depth -= 1
        if not here.depth:
            left, here.left = here.left, None
            _exit_all(left)


def _exit_all(entered) -> None:
    for cm in reversed(entered):
        cm.__exit__(None, None, None)


class PoolMemory(DeviceMemory):
    """A GPU's memory account read from its CuPy memory pool: bytes in use and reserved are
    the pool's, the peak is the largest in-use figure seen at an allocation."""

    __slots__ = ("pool",)

    def __init__(self, pool, bytes_limit: int = 0):
        super().__init__(bytes_limit)
        self.pool = pool

    def observe(self) -> None:
        """Fold the pool's current use into the peak (called after each allocation)."""
        used = self.pool.used_bytes()
        if used > self.peak_bytes_in_use:
            with self._lock:
                self.peak_bytes_in_use = max(self.peak_bytes_in_use, used)

    def stats(self) -> dict:
        out = super().stats()
        used = self.pool.used_bytes()
        out.update(bytes_in_use=used, bytes_reserved=self.pool.total_bytes(),
                   peak_bytes_in_use=max(out["peak_bytes_in_use"], used))
        return out


def memory_limit(total_bytes: int, gpu_options) -> int:
    """The pool's cap in bytes under ``gpu_options`` (0: none)."""
    fraction = float(getattr(gpu_options, "per_process_gpu_memory_fraction", 0.0) or 0.0)
    if fraction < 0 or fraction > 1:
        raise ValueError("per_process_gpu_memory_fraction must be in [0, 1], got "
                         f"{fraction}")
    return int(total_bytes * fraction)


def reserves_up_front(gpu_options) -> bool:
    """TF reserves the whole fraction at start unless ``allow_growth``; dflab does so only when
    a fraction was asked for (without one, reserving would take the whole GPU)."""
    fraction = float(getattr(gpu_options, "per_process_gpu_memory_fraction", 0.0) or 0.0)
    return fraction > 0 and not getattr(gpu_options, "allow_growth", False)


class GPUDevice(Device):
    """One CUDA device (see the module docstring)."""

    def __init__(self, index: int, cupy, owner=None, params: dict | None = None,
                 task: str = LOCAL_TASK, gpu_options=None, cublas=None, cudnn=None,
                 allow_tf32: bool = True, missing: dict | None = None):
        cuda = cupy.cuda
        self.cupy = cupy
        self.cuda_device = cuda.Device(index)
        with self.cuda_device:
            total = int(cuda.runtime.memGetInfo()[1])
            self.pool = cuda.MemoryPool()
            limit = memory_limit(total, gpu_options)
            if limit:
                self.pool.set_limit(size=limit)
            streams = {k: cuda.Stream(non_blocking=False)
                       for k in ("compute", "host_to_device", "device_to_host")}
        name = _device_name(cuda, index)
        super().__init__("GPU", index, xp=cupy, owner=owner, task=task, params=params,
                         description=name, memory_limit=limit)
        self.memory = PoolMemory(self.pool, limit)
        self.streams = {k: CudaStream(f"{self.short_name}/{k}", s) for k, s in streams.items()}
        # Host buffers of copies still in flight, with the event that ends each.
        self._in_flight: list = []
        self._in_flight_lock = threading.Lock()
        self._retained: list | None = None  # blocks kept for a capture in progress
        self._capture_lock = threading.Lock()
        # Held while work is issued to the device from Python (a kernel, a copy), and for the
        # whole of a capture: a capture records everything issued to the compute stream, and
        # CUDA refuses synchronous calls from any thread while one is in progress, so another
        # thread's step waits for the capture to end instead of joining it.
        self._issue = threading.RLock()
        if limit and reserves_up_front(gpu_options):
            self._reserve(limit)
        # The libraries its kernels call (cuBLAS on a handle of its own, cuDNN), reached by
        # kernels through their context.
        with self.cuda_device:
            self.libraries = GPULibraries(cupy, streams["compute"], self._allocate, cublas,
                                          cudnn, allow_tf32, missing)
        self._kernel_scope = KernelScope(lambda: (
            self.cuda_device, self.streams["compute"].cuda,
            self.cupy.cuda.using_allocator(self._allocate)))
        self.context = GPUKernelContext(self.name, self.kernel_device_type, cupy,
                                        self.resources, owner, self.bind_kernel,
                                        gpu=self.libraries)

    # --- where work runs ------------------------------------------------------------------------
    def _allocate(self, nbytes: int):
        mem = self.pool.malloc(nbytes)
        self.memory.observe()
        retained = self._retained
        if retained is not None:
            retained.append(mem)
        return mem

    @contextlib.contextmanager
    def retaining_allocations(self):
        """Keep every block allocated on this device inside the block alive (yields their
        list): a captured CUDA graph writes into the blocks its kernels allocated on every
        replay, so none may go back to the pool while the graph lives. One capture at a time
        per device."""
        with self._capture_lock, self._issue:
            self._retained = blocks = []
            try:
                yield blocks
            finally:
                self._retained = None

    @property
    def kernel_scope(self) -> KernelScope:
        return self._kernel_scope

    def issuing(self):
        """The lock held while work is issued to this device from Python (a kernel, a copy,
        a graph launch): work issued under it is ordered on the compute stream as one whole,
        as a real device's stream orders kernels (see ``__init__``)."""
        return self._issue

    def bind_kernel(self, kernel_def, node_def, fn):
        """``fn`` as this GPU runs it (``launch``), with the inputs ``kernel_def`` declares host
        memory left on the host and its host kernel as the twin for integer shape arithmetic.
        An asynchronous kernel (a ``_Recv``) is left as it is: it computes nothing, and its
        wait must hold no stream. So is one that only routes values (``routes_only``: a loop's
        Merge, Enter, an Identity, a ``_Send``): it takes a host value (a loop counter) as it
        is, so that the loop's condition is never read back from the device, and saves a
        launch's bookkeeping on every node of every iteration; one that reads a routed value
        on the host (a ``Switch``'s predicate: its host-memory inputs) does it under the issue
        lock alone (``_issued``). (A ``_Send`` holding the lock would deadlock two GPUs sending
        host values to each other: each copy takes the receiver's lock.)"""
        if kernel_def.is_async:
            return fn
        if kernel_def.routes_only:
            return self._issued(fn) if kernel_def.host_inputs(node_def) else fn
        lead = 1 if kernel_def.takes_step else 0  # fn(step, *inputs)
        if _only_device_values(node_def):
            # No input can be a host value (those are integers: shapes, sizes, int32
            # constants): nothing to move and no shape arithmetic, decided once per plan.
            return self.launch(fn)
        return self.launch(fn, kernel_def.host_inputs(node_def), lead,
                           _host_twin(node_def))

    def _issued(self, fn):
        """``fn`` (a kernel that only routes values) under this device's issue lock alone: it
        takes its values where they are, but may read a device predicate or index on the host
        (a ``Switch`` on a device boolean), which must wait while another thread captures."""
        issue = self._issue

        def routed(*args):
            with issue:
                return fn(*args)

        routed.__name__ = getattr(fn, "__name__", "kernel")
        routed.__wrapped__ = fn
        return routed

    def launch(self, fn, host_inputs: frozenset | None = None, lead: int = 0,
               host_twin=None):
        """``fn`` (a bound kernel) issued with this CUDA device, its compute stream and its
        memory pool current: a kernel runs where its device's values live, whichever executor
        thread calls it.

        With ``host_inputs`` (the positions of the kernel's inputs it reads on the host, after
        ``lead`` leading arguments), host values (a ``Shape``'s output, an int32 constant:
        TF's host-memory values) reaching other inputs go to the device: a 0-d one written by
        a fill kernel (the value passed by value), a bigger one copied to device memory.
        ``host_twin()`` gives the op's host kernel: a call whose inputs are all integer host
        values (shape arithmetic) runs there, as TF runs int32 ops on a GPU in host memory."""
        device, stream = self.cuda_device, self.streams["compute"].cuda
        using_allocator, allocate = self.cupy.cuda.using_allocator, self._allocate
        to_device = self._inputs_to_device
        issue = self._issue
        here = self._kernel_scope.here
        twin = [None]
        copies: dict = {}  # input position -> (frozen host array, its device copy)

        def on_device(*args):
            if host_twin is not None and _all_host_integers(args, lead):
                if twin[0] is None:
                    twin[0] = host_twin()
                out = twin[0](*args)
                if _stays_on_host(out):
                    return out
                # A Cast of shape arithmetic to float, or a mask (``time >= lengths`` in
                # dynamic_rnn): it goes to the device once, where its consumers (a product,
                # a Select) read it (see ``_stays_on_host``).
                with issue, device, stream, using_allocator(allocate):
                    return self._to_device_unless_host(out)
            if here.depth:  # a run of this device's partition: all three are current
                with issue:
                    if host_inputs is not None:
                        args = to_device(args, host_inputs, lead, copies)
                    return fn(*args)
            with issue, device, stream, using_allocator(allocate):
                if host_inputs is not None:
                    args = to_device(args, host_inputs, lead, copies)
                return fn(*args)

        on_device.__name__ = getattr(fn, "__name__", "kernel")
        on_device.__wrapped__ = fn
        return on_device

    def _inputs_to_device(self, args, host_inputs, lead, copies):
        """``args`` with each host numeric array outside ``host_inputs`` moved to this device
        (within ``launch``, on the current stream).
        A constant's value (an int32 constant's: ``is_constant_value``) cannot change: its
        copy is kept in ``copies`` and reused while the same array arrives (so a captured step,
        which may not copy from the host, still finds it on the device)."""
        out = None
        for i, a in enumerate(args):
            if type(a) is np.ndarray and i >= lead and (i - lead) not in host_inputs and \
                    a.dtype.kind in "biufc":
                if out is None:
                    out = list(args)
                out[i] = self._device_copy(a, i, copies)
        return args if out is None else out

    def _to_device_unless_host(self, out):
        """A host kernel's outputs with each one that does not stay in host memory
        (``_stays_on_host``) moved to this device."""
        if isinstance(out, (tuple, list)):
            return type(out)(self._to_device_unless_host(o) for o in out)
        return out if _stays_on_host(out) else self._to_device(np.asarray(out))

    def _device_copy(self, a: np.ndarray, i: int, copies: dict):
        # Only a constant's value is known never to change: a frozen host array may still be
        # written (a host ref variable's buffer, which its scatters unfreeze and write).
        if not a.flags.writeable and is_constant_value(a):
            kept = copies.get(i)
            if kept is None or kept[0] is not a:
                kept = copies[i] = (a, self._to_device(a))
            return kept[1]
        return self._to_device(a)

    def _to_device(self, a: np.ndarray):
        # A 0-d value is written by a fill kernel that takes it by value: no copy from host
        # memory, so a captured step can make it (it is a shape's function, fixed per
        # signature); a bigger one is copied.
        if a.ndim == 0:
            return self.cupy.full((), a[()], a.dtype)
        return self.cupy.asarray(a)

    def _reserve(self, nbytes: int) -> None:
        # One block of the whole limit, freed back to the pool: the pool keeps it reserved.
        with self.cuda_device:
            block = self.pool.malloc(nbytes)
            del block

    # --- memory: host <-> device ----------------------------------------------------------------
    def from_host(self, value):
        """A host array as an array on this GPU: one copy, straight from the host array into
        new device memory on the host-to-device stream (``copy_from_host``)."""
        if not _is_array(value):
            return value
        host = np.asarray(value, order="C")  # (ascontiguousarray would make 0-d values 1-d)
        out = self.empty(host.shape, host.dtype)
        self.copy_from_host(out, host)
        return out

    def accept(self, value):
        """A host value arriving on this GPU (a feed, a tensor received from a host device):
        an int32 one stays in host memory, as TF keeps a GPU's int32 tensors (shapes, sizes,
        lengths), so that a fed sequence length bounds a loop on the host and the loop's
        condition is never read back from the device (a kernel that needs it on the device
        copies it there: ``launch``); any other is copied here (``from_host``)."""
        if isinstance(value, (np.ndarray, np.generic)) and value.dtype == np.int32:
            return value
        return self.from_host(value)

    def empty(self, shape, dtype):
        """An uninitialized array on this GPU, from its memory pool."""
        with self.cuda_device, self.cupy.cuda.using_allocator(self._allocate):
            return self.cupy.empty(shape, dtype)

    def copy_from_host(self, out, host: np.ndarray, reused: bool = False) -> None:
        """Copy the C-contiguous host array ``host`` into the device array ``out`` (same shape
        and dtype): one copy, issued on the host-to-device stream, and the compute stream waits
        for its event, so the copy overlaps earlier compute and no later kernel starts before it
        ends. No pinned staging copy: the copy reads the host array itself, which is kept
        alive until the copy's event has completed. ``reused``: ``out`` is a buffer earlier
        kernels may still read (a captured step's static input), so the copy first waits for
        the work issued to the compute stream."""
        copy = self.streams["host_to_device"].cuda
        with self._issue, self.cuda_device, copy:
            if reused:
                copy.wait_event(self.streams["compute"].cuda.record())
            out.set(host, stream=copy)
            done = copy.record()
        self.streams["compute"].cuda.wait_event(done)
        self._keep_until(done, host)

    def to_host(self, value):
        """An array of this GPU as a host NumPy array: one copy, on the device-to-host stream,
        after everything issued to the compute stream."""
        if not isinstance(value, self.cupy.ndarray):
            return value  # a host value this device holds as is (a NumPy scalar, a string)
        copy = self.streams["device_to_host"].cuda
        with self._issue, self.cuda_device:
            copy.wait_event(self.streams["compute"].cuda.record())
            out = np.empty(value.shape, value.dtype)
            value.get(stream=copy, out=out)
            copy.synchronize()
        return out

    def copy_to(self, value, dst: Device):
        """``value`` on ``dst``: the same array on this device, a direct device-to-device copy
        to another GPU, a copy to the host otherwise (then ``dst.from_host``)."""
        if dst is self or not _is_array(value):
            return value
        if isinstance(value, (np.ndarray, np.generic)):  # a host value (a token, a shape)
            return dst.accept(value)
        if isinstance(dst, GPUDevice) and dst.cupy is self.cupy:
            return self._copy_to_gpu(value, dst)
        return dst.accept(self.to_host(value))

    def _copy_to_gpu(self, value, dst: GPUDevice):
        produced = self.streams["compute"].cuda.record()
        copy = dst.streams["host_to_device"].cuda
        with dst.cuda_device, copy, self.cupy.cuda.using_allocator(dst._allocate):
            copy.wait_event(produced)
            out = self.cupy.empty(value.shape, value.dtype)
            out.data.copy_from_device_async(value.data, value.nbytes, copy)
            done = copy.record()
        dst.streams["compute"].cuda.wait_event(done)
        return out

    def _keep_until(self, event, buffer) -> None:
        """Hold ``buffer`` (host memory a copy reads) until ``event``; drop finished ones."""
        with self._in_flight_lock:
            self._in_flight = [(e, b) for e, b in self._in_flight if not e.done]
            self._in_flight.append((event, buffer))

    @property
    def copies_in_flight(self) -> int:
        with self._in_flight_lock:
            return sum(not e.done for e, _ in self._in_flight)

    def sync(self) -> None:
        for stream in self.streams.values():
            stream.synchronize()


def _host_twin(node_def):
    """A function building ``node_def``'s host (CPU) kernel, for a GPU to run it on host values
    (shape arithmetic): None for a stateful op or one without a CPU kernel."""
    op_def = get_op_def(node_def.op)
    if op_def.stateful or op_def.ref_inputs or not has_kernel(node_def.op, "CPU"):
        return None

    def build():
        return get_kernel_def(node_def, "CPU").factory(node_def, HOST)

    return build


def _only_device_values(node_def) -> bool:
    """Whether every input of ``node_def`` is known to be a floating-point (or complex)
    tensor: host-memory values are integers, so such a kernel's inputs are all on the
    device."""
    types = node_def.input_types
    n_inputs = sum(not name.startswith("^") for name in node_def.input)
    if not types or len(types) != n_inputs:
        return False
    return all(not t.is_ref_dtype and t.as_numpy_dtype is not None
               and np.dtype(t.as_numpy_dtype).kind in "fc" for t in types)


def _stays_on_host(out) -> bool:
    """Whether a host kernel's outputs ``out`` (run on integer host values: shape arithmetic)
    all stay in host memory on a GPU: integers (shapes, sizes, counters) and boolean scalars
    (the predicate of a loop or a branch, read on the host). A float or a boolean mask goes
    to the device, where its consumers read it: copied once there, not once per consumer."""
    if isinstance(out, (tuple, list)):
        return all(_stays_on_host(o) for o in out)
    if not isinstance(out, (np.ndarray, np.generic)):
        return True
    kind = out.dtype.kind
    return kind in "iu" or (kind == "b" and out.ndim == 0)


def _all_host_integers(args, lead: int) -> bool:
    """Whether every input in ``args`` (after ``lead``) is an integer or boolean host value,
    and there is one at least."""
    if len(args) <= lead:
        return False
    for a in args[lead:]:
        if not isinstance(a, (np.ndarray, np.generic)) or a.dtype.kind not in "iub":
            return False
    return True


def _device_name(cuda, index: int) -> str:
    try:
        props = cuda.runtime.getDeviceProperties(index)
        name = props["name"]
        return name.decode() if isinstance(name, bytes) else str(name)
    except Exception:  # noqa: BLE001 - the name is only a description
        return f"CUDA device {index}"


# --- the backend ------------------------------------------------------------------------------

_cupy_module = None
_probe_lock = threading.Lock()


def cupy_or_none():
    """The ``cupy`` module when it imports and sees a CUDA device, else None (imported on first
    use: ``import dflab`` never imports CuPy)."""
    global _cupy_module
    with _probe_lock:
        if _cupy_module is None:
            try:
                import cupy
                _cupy_module = cupy if cupy.cuda.runtime.getDeviceCount() > 0 else False
            except Exception:  # noqa: BLE001 - no CuPy, no driver, no device: no real GPU
                _cupy_module = False
        return _cupy_module or None


def cupy_gpu_count(cupy=None) -> int:
    cupy = cupy or cupy_or_none()
    return 0 if cupy is None else int(cupy.cuda.runtime.getDeviceCount())


def make_cupy_gpu(index: int, owner=None, params=None, task: str = LOCAL_TASK, config=None,
                  cupy=None, libraries=None, allow_tf32: bool | None = None) -> GPUDevice:
    """The backend's ``make``: a ``GPUDevice`` on the real ``cupy`` with the cuBLAS bindings
    and cuDNN frontend found installed, or on the ``cupy`` passed with the ``libraries``
    passed (``(cublas, cudnn)``; None: none). TF32 as ``config`` says unless ``allow_tf32``
    is given."""
    if cupy is None:
        cupy = cupy_or_none()
        if cupy is None:
            raise RuntimeError("CuPy with a CUDA device is needed for a real GPU device")
        cublas, cudnn, missing = _probed_libraries()
    else:
        (cublas, cudnn), missing = libraries or (None, None), None
    if allow_tf32 is None:
        allow_tf32 = getattr(getattr(config, "dflab", None), "gpu_allow_tf32", True)
    return GPUDevice(index, cupy, owner=owner, params=params, task=task,
                     gpu_options=getattr(config, "gpu_options", None), cublas=cublas,
                     cudnn=cudnn, allow_tf32=allow_tf32, missing=missing)


_libraries = None


def _probed_libraries():
    global _libraries
    with _probe_lock:
        if _libraries is None:
            _libraries = probe_libraries()
        return _libraries


register_backend("GPU", cupy_gpu_count, make_cupy_gpu, takes_config=True)
