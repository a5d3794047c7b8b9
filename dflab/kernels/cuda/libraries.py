"""The libraries a GPU's kernels call besides CuPy, owned by the device: cuBLAS on a handle of
its own (nvmath-python's bindings) and cuDNN (nvidia-cudnn-frontend's graph API).

CuPy's own cuBLAS calls cannot be captured in a CUDA graph (its wrappers refuse to set a stream
that is capturing), so a GPU device makes its own handle: created once, its stream set once to
the device's compute stream, a fixed workspace from the device's memory pool given to it once,
by its first product (cuBLAS would otherwise allocate one of its own during a capture; a
device takes no memory before it needs it), and its math mode set from the TF32 switch.
Kernels reach these through their context (``GPUKernelContext.gpu``); a kernel whose library
is missing falls back to its CuPy path.

TF32, as TensorFlow does it: float32 matrix products and convolutions may round their inputs
to TF32 (10 mantissa bits) on tensor cores, on Ampere and later, unless
``ConfigProto(dflab={"gpu_allow_tf32": False})`` turns it off (cuBLAS's default math mode;
cuDNN plans with tensor-core or down-converting numerics deselected).

Invariant: a library's handle runs on its device's compute stream and nothing else, and every
buffer it writes besides the operands (its workspace) lives as long as the device.
"""

from __future__ import annotations

import numpy as np

from dflab.kernels.context import KernelContext

# cuBLAS's workspace: what its docs recommend on Hopper (32 MiB; 4 MiB before), one per handle.
CUBLAS_WORKSPACE_BYTES = 32 << 20


class GPUKernelContext(KernelContext):
    """A GPU's kernel context: a ``KernelContext`` with the device's ``GPULibraries``."""

    __slots__ = ("gpu",)

    def __init__(self, *args, gpu=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.gpu = gpu


def gpu_libraries(ctx):
    """The ``GPULibraries`` of ``ctx``'s device, or None (a host, a simulated GPU)."""
    return getattr(ctx, "gpu", None)


class GPULibraries:
    """One device's library handles (see the module docstring). ``blas`` and ``dnn`` are None
    where the library is not installed (``missing`` says why)."""

    def __init__(self, cupy, stream, allocate, cublas=None, cudnn=None,
                 allow_tf32: bool = True, missing: dict | None = None):
        self.cupy = cupy
        self.stream = stream  # the device's compute stream (a CuPy stream)
        self.allocate = allocate  # the device pool's allocation function
        self.allow_tf32 = bool(allow_tf32)
        self.missing = dict(missing or {})
        self.blas = self._make(Blas, "cublas", cublas)
        from dflab.kernels.cuda.dnn import Dnn  # (dnn imports this module)

        self.dnn = self._make(Dnn, "cudnn", cudnn)

    def _make(self, cls, name, module):
        if module is None:
            self.missing.setdefault(name, "not installed")
            return None
        try:
            return cls(module, self)
        except Exception as e:  # noqa: BLE001 - a library that cannot start is not used
            self.missing[name] = f"{type(e).__name__}: {e}"
            return None

    def device_buffer(self, nbytes: int):
        """``nbytes`` of device memory from the device's pool, for a library's workspace."""
        with self.cupy.cuda.using_allocator(self.allocate):
            return self.cupy.empty(max(int(nbytes), 1), np.uint8)


def probe_libraries() -> tuple[object, object, dict]:
    """(cuBLAS bindings, cuDNN frontend, why each missing one is missing), imported on first
    use of a real GPU."""
    missing: dict = {}
    try:
        from nvmath.bindings import cublas
    except Exception as e:  # noqa: BLE001 - absent or unloadable: CuPy's products are used
        cublas, missing["cublas"] = None, f"nvmath-python: {type(e).__name__}: {e}"
    try:
        import cudnn
    except Exception as e:  # noqa: BLE001 - absent or unloadable: convolutions use im2col
        cudnn, missing["cudnn"] = None, f"nvidia-cudnn-frontend: {type(e).__name__}: {e}"
    return cublas, cudnn, missing


class Blas:
    """cuBLAS on a handle of the device's own: row-major products written as column-major
    GEMMs (C = A B is C^T = B^T A^T), alpha and beta passed from host memory."""

    def __init__(self, cublas, libs: GPULibraries):
        self.cublas = cublas
        self.libs = libs
        self.handle = cublas.create()
        cublas.set_stream(self.handle, libs.stream.ptr)
        self.workspace = None  # taken from the pool by the first product, not before
        math = cublas.Math.TF32_TENSOR_OP_MATH if libs.allow_tf32 else cublas.Math.DEFAULT_MATH
        cublas.set_math_mode(self.handle, int(math))
        # Host scalars read when a call is issued (pointer mode host): captured by value.
        self._scalars = {np.dtype(t): (np.ones(1, t), np.zeros(1, t))
                         for t in (np.float32, np.float64)}
        self._n, self._t = int(cublas.Operation.N), int(cublas.Operation.T)

    def supports(self, dtype) -> bool:
        return np.dtype(dtype) in self._scalars

    def _ready(self) -> None:
        # The first product runs in a step's uncaptured warm-up (a capture comes second).
        if self.workspace is None:
            self.workspace = self.libs.device_buffer(CUBLAS_WORKSPACE_BYTES)
            self.cublas.set_workspace(self.handle, self.workspace.data.ptr,
                                      self.workspace.nbytes)

    def gemm(self, a, b, out, transpose_a: bool, transpose_b: bool) -> None:
        """``out = op(a) @ op(b)`` for C-contiguous 2-D ``a``, ``b``, ``out`` of one dtype."""
        self._ready()
        m, n = out.shape
        k = a.shape[0] if transpose_a else a.shape[1]
        one, zero = self._scalars[np.dtype(out.dtype)]
        fn = self.cublas.sgemm if out.dtype == np.float32 else self.cublas.dgemm
        fn(self.handle, self._t if transpose_b else self._n, self._t if transpose_a else self._n,
           n, m, k, one.ctypes.data, b.data.ptr, b.shape[1], a.data.ptr, a.shape[1],
           zero.ctypes.data, out.data.ptr, n)

    def gemm_batched(self, a, b, out, transpose_a: bool, transpose_b: bool) -> None:
        """``out[i] = op(a[i]) @ op(b[i])`` over the leading axis of 3-D C-contiguous arrays."""
        self._ready()
        batch, m, n = out.shape
        k = a.shape[1] if transpose_a else a.shape[2]
        one, zero = self._scalars[np.dtype(out.dtype)]
        fn = (self.cublas.sgemm_strided_batched if out.dtype == np.float32
              else self.cublas.dgemm_strided_batched)
        fn(self.handle, self._t if transpose_b else self._n, self._t if transpose_a else self._n,
           n, m, k, one.ctypes.data, b.data.ptr, b.shape[2], b.shape[1] * b.shape[2],
           a.data.ptr, a.shape[2], a.shape[1] * a.shape[2], zero.ctypes.data, out.data.ptr,
           n, m * n, batch)
