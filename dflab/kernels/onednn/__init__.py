"""oneDNN as the host's kernel library: matrix products (MatMul, BatchMatMulV2), convolution and
both of its gradients, max and average pooling and their gradients, and big dense Adam updates
run through Intel's oneDNN, as TensorFlow's CPU build runs them, when it is installed (the
``onednn`` extra: ``pip install dflab[onednn]``); NumPy's kernels (and its BLAS) are the
portable fallback and the reference the tests compare against. Products run on oneDNN from a
million multiply-adds (a library call costs more than smaller ones:
``math_kernels.ONEDNN_MIN_PRODUCT``); ``ConfigProto(dflab={"onednn_products": False})`` keeps
them all on BLAS. Which is faster depends on the CPU (docs/cpu.md, "Matrix products").

A kernel asks ``for_kernel(ctx, dtype)`` when a plan binds it: a ``Backend`` when oneDNN
computes that kernel's dtype (float32) on that device (one computing with NumPy) and the
session allows it (``ConfigProto(dflab={"onednn": False})`` turns it off, carried to kernels
by their intra-op pool), else None. The library is loaded on that first call, never at
``import dflab``; when it cannot be, every kernel keeps NumPy's path and ``status()`` says
why. A kernel running on oneDNN names itself in traces as TF's do (``_MklConv2D``: oneDNN
was MKL-DNN), through the ``kernel_label`` attribute of the function its factory returns.

Results agree with NumPy's within float32 rounding (oneDNN sums in another order; the tests
in tests/kernels/test_onednn.py say how closely, op by op); routing choices are exact (a max
pool's gradient goes to the first maximum of its window in row-major order, as TF's CPU
kernel); the Adam update computes NumPy's operations in NumPy's order, so its bits are
NumPy's. Inputs oneDNN handles differently are sent to NumPy: a max pool over a NaN or -inf
(oneDNN never picks a NaN and starts from the lowest finite float).
"""

from __future__ import annotations

import threading

import numpy as np

# A kernel on oneDNN labels itself as TF's oneDNN kernels do: "_Mkl" + the op type.
LABEL_PREFIX = "_Mkl"

_lock = threading.Lock()
_library = None  # the loaded capi.Library, once loaded
_error: str | None = None  # why it could not be loaded, once tried


def library():
    """The loaded oneDNN library (loading it on the first call), or None when it is not
    installed or does not load (``status()`` says why)."""
    global _library, _error
    if _library is None and _error is None:
        with _lock:
            if _library is None and _error is None:
                from dflab.kernels.onednn import capi  # ctypes: only once it is wanted

                try:
                    _library = capi.load()
                except (OSError, capi.OneDnnError) as e:
                    _error = str(e)
    return _library


def status() -> str:
    """One line: the oneDNN library in use (version and file), or why there is none."""
    lib = library()
    if lib is None:
        return f"oneDNN not in use (NumPy kernels): {_error}"
    return "oneDNN {}.{}.{} from {}".format(*lib.version, lib.path)


def label(op_type: str) -> str:
    """The trace label of ``op_type``'s kernel when it runs on oneDNN."""
    return LABEL_PREFIX + op_type


class Backend:
    """oneDNN for one kernel: the library and the threads its primitives run on (the
    session's intra-op setting: ``IntraOpPool.library_threads``). Each method computes one
    op on NumPy arrays and returns its result, or None when oneDNN has no fast
    implementation for these shapes: the kernel then computes it with NumPy."""

    __slots__ = ("lib", "threads", "_ops", "_unsupported")

    def __init__(self, lib, threads: int):
        from dflab.kernels.onednn import ops, plans

        self.lib = lib
        self.threads = threads
        self._ops = ops
        self._unsupported = plans.UnsupportedError

    def __repr__(self):
        return f"<onednn.Backend {self.threads} threads>"

    def geometry(self, win):
        """``win`` (a window with kh, kw, sh, sw, dh, dw and pt, pb, pl, pr: the NumPy
        kernels' ``_Window``) as oneDNN's ``ops.Geometry``."""
        return self._ops.Geometry(win.kh, win.kw, win.sh, win.sw, win.dh, win.dw, win.pt,
                                  win.pb, win.pl, win.pr)

    def _call(self, fn, *args):
        try:
            return fn(self.lib, self.threads, *args)
        except self._unsupported:
            return None

    def matmul(self, a, b, bias=None, activation=None, into=None):
        """``a @ b``; with ``bias`` and ``activation`` (``ops._epilogue``) fused into it, or
        added into ``into`` (``into += a @ b``, returning ``into``)."""
        return self._call(self._ops.matmul, a, b, bias, activation, into)

    def conv2d(self, x, f, fmt, win, bias=None, activation=None):
        return self._call(self._ops.conv2d, x, f, fmt, self.geometry(win), (win.oh, win.ow),
                          bias, activation)

    def conv2d_backprop_input(self, input_shape, f, dy, fmt, win):
        return self._call(self._ops.conv2d_backprop_input, tuple(input_shape), f, dy, fmt,
                          self.geometry(win))

    def conv2d_backprop_filter(self, x, filter_shape, dy, fmt, win):
        return self._call(self._ops.conv2d_backprop_filter, x, tuple(filter_shape), dy, fmt,
                          self.geometry(win))

    def pool(self, kind, x, fmt, win):
        return self._call(self._ops.pool, kind, x, fmt, self.geometry(win), (win.oh, win.ow))

    def pool_grad(self, kind, x_shape, x, g, fmt, win):
        return self._call(self._ops.pool_grad, kind, tuple(x_shape), x, g, fmt,
                          self.geometry(win))

    def batch_norm(self, x, scale, offset, mean, variance, fmt, epsilon, training):
        return self._call(self._ops.batch_norm, x, scale, offset, mean, variance, fmt,
                          epsilon, training)

    def batch_norm_grad(self, dy, x, scale, mean, variance, fmt, epsilon, training):
        return self._call(self._ops.batch_norm_grad, dy, x, scale, mean, variance, fmt,
                          epsilon, training)

    def adam(self, arrays, grad, outs, consts) -> bool:
        """The Adam update into ``outs`` (see ``ops.adam``); False: not done, NumPy's turn."""
        try:
            self._ops.adam(self.lib, self.threads, arrays, grad, outs, consts)
        except self._unsupported:
            return False
        return True


def for_kernel(ctx, dtype) -> Backend | None:
    """oneDNN for a kernel computing ``dtype`` bound on ``ctx``, or None: NumPy's kernel.
    Only float32 on a device computing with NumPy, and only where the kernel's intra-op pool
    (its session's config) allows it."""
    pool = ctx.intra_op
    if ctx.xp is not np or np.dtype(dtype) != np.float32 or not pool.onednn:
        return None
    lib = library()
    if lib is None:
        return None
    return Backend(lib, pool.library_threads)
