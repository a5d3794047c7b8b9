"""GPU matrix products through the device's own cuBLAS handle (``libraries.Blas``): one GEMM
per ``MatMul``, one strided-batched GEMM per ``BatchMatMulV2`` whose batches line up, issued on
the device's compute stream, so a step of them can be captured as a CUDA graph (CuPy's own
cuBLAS calls refuse a capturing stream). Without the handle, or for other dtypes and
broadcasting batches, the shared kernels (``cupy.matmul``) run.
"""

from __future__ import annotations

import numpy as np

from dflab.framework import errors
from dflab.kernels.cuda.libraries import gpu_libraries
from dflab.kernels.registry import get_kernel_def, kernel

GPU = "GPU"


def _shared(node, ctx):
    return get_kernel_def(node, "CPU").factory(node, ctx)


def _blas_for(node, ctx):
    libs = gpu_libraries(ctx)
    if libs is None or libs.blas is None or not node.output_types:
        return None
    dtype = np.dtype(node.output_types[0].as_numpy_dtype)
    return libs.blas if libs.blas.supports(dtype) else None


def _contiguous(xp, a):
    return a if a.flags.c_contiguous else xp.ascontiguousarray(a)


def _incompatible(node, a, b):
    return errors.InvalidArgumentError(
        None, node, f"Matrix size-incompatible: In[0]: {list(a.shape)}, In[1]: "
        f"{list(b.shape)}")


@kernel("MatMul", GPU)
def _matmul_gpu(node, ctx):
    blas = _blas_for(node, ctx)
    if blas is None:
        return _shared(node, ctx)
    ta, tb = bool(node.attr["transpose_a"]), bool(node.attr["transpose_b"])
    xp = ctx.xp

    def matmul(a, b):
        if a.ndim != 2 or b.ndim != 2:
            raise errors.InvalidArgumentError(None, node, "In[0] and In[1] must be matrices, "
                                              f"got shapes {list(a.shape)}, {list(b.shape)}")
        m, k = (a.shape[1], a.shape[0]) if ta else a.shape
        k2, n = (b.shape[1], b.shape[0]) if tb else b.shape
        if k != k2:
            raise _incompatible(node, a, b)
        if a.dtype != b.dtype:
            raise errors.InvalidArgumentError(None, node, f"MatMul of {a.dtype} and {b.dtype}")
        if m == 0 or n == 0 or k == 0:
            return xp.zeros((m, n), a.dtype)
        out = xp.empty((m, n), a.dtype)
        blas.gemm(_contiguous(xp, a), _contiguous(xp, b), out, ta, tb)
        return out

    return matmul


@kernel("BatchMatMulV2", GPU)
def _batch_matmul_gpu(node, ctx):
    shared = _shared(node, ctx)
    blas = _blas_for(node, ctx)
    if blas is None:
        return shared
    ta, tb = bool(node.attr["adj_x"]), bool(node.attr["adj_y"])
    xp = ctx.xp

    def bmm(a, b):
        # The common cases: equal batch shapes, or a batch of matrices times one matrix.
        if a.ndim < 2 or b.ndim < 2 or a.dtype != b.dtype:
            return shared(a, b)
        m, k = (a.shape[-1], a.shape[-2]) if ta else a.shape[-2:]
        k2, n = (b.shape[-1], b.shape[-2]) if tb else b.shape[-2:]
        if k != k2:
            raise _incompatible(node, a, b)
        if b.ndim == 2 and not ta and a.ndim > 2:
            flat = _contiguous(xp, a).reshape(-1, k)
            out = xp.empty((flat.shape[0], n), a.dtype)
            if out.size and k:
                blas.gemm(flat, _contiguous(xp, b), out, False, tb)
            elif out.size:
                out[...] = 0
            return out.reshape(a.shape[:-1] + (n,))
        if a.shape[:-2] != b.shape[:-2] or a.ndim < 3:
            return shared(a, b)
        batch = a.shape[:-2]
        count = int(np.prod(batch))
        if count == 0 or m == 0 or n == 0 or k == 0:
            return xp.zeros(batch + (m, n), a.dtype)
        a3 = _contiguous(xp, a).reshape((count,) + a.shape[-2:])
        b3 = _contiguous(xp, b).reshape((count,) + b.shape[-2:])
        out = xp.empty((count, m, n), a.dtype)
        blas.gemm_batched(a3, b3, out, ta, tb)
        return out.reshape(batch + (m, n))

    return bmm
