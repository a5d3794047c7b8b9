"""GPU convolution kernels: Conv2D and its two gradients through cuDNN plans
(``dflab.kernels.cuda.dnn``), one cuDNN execution per op plus the transposes of the (small)
filter between TF's HWIO and cuDNN's KRSC.

Where the device has no cuDNN, the dtype is not one cuDNN computes, or cuDNN declines a
geometry, the op runs the shared im2col kernel (``conv_kernels``) bound to CuPy, as before.
Shape errors are the shared kernels' (the same messages on every device).
"""

from __future__ import annotations

import numpy as np

from dflab.kernels.context import host
from dflab.kernels.cuda.dnn import DGRAD, FPROP, WGRAD, ConvGeometry
from dflab.kernels.cuda.libraries import gpu_libraries
from dflab.kernels.registry import get_kernel_def, kernel
from dflab.ops.conv_ops import conv_output_size

GPU = "GPU"


def _im2col(node, ctx):
    """The shared kernel of ``node`` (im2col + GEMM), bound to this context."""
    return get_kernel_def(node, "CPU").factory(node, ctx)


def _hw(vals, fmt):
    return (int(vals[1]), int(vals[2])) if fmt == "NHWC" else (int(vals[2]), int(vals[3]))


class _Conv:
    """What a node's kernels read once: its layout, strides, dilations and padding, and the
    device's cuDNN (None: none)."""

    def __init__(self, node, ctx):
        a = node.attr
        self.node = node
        self.fmt = a["data_format"]
        self.stride = _hw(a["strides"], self.fmt)
        self.dilation = _hw(a["dilations"], self.fmt)
        self.padding = a["padding"]
        libs = gpu_libraries(ctx)
        self.dnn = libs.dnn if libs is not None else None
        self.xp = ctx.xp

    def nchw(self, shape) -> tuple:
        """A data shape (in the node's layout) as logical NCHW."""
        n, *rest = (int(d) for d in shape)
        if self.fmt == "NHWC":
            h, w, c = rest
        else:
            c, h, w = rest
        return (n, c, h, w)

    def geometry(self, kind, x, w, dtype) -> ConvGeometry | None:
        """The plan geometry of a convolution of NCHW ``x`` with KCRS ``w``, or None when the
        shapes are inconsistent (the shared kernel then reports it)."""
        n, c, h, wd = x
        k, ci, r, s = w
        if c != ci or min(x) <= 0 or min(w) <= 0:
            return None
        try:
            p, pt, pb = conv_output_size(h, r, self.stride[0], self.dilation[0], self.padding)
            q, pl, pr = conv_output_size(wd, s, self.stride[1], self.dilation[1], self.padding)
        except ValueError:
            return None
        if p <= 0 or q <= 0:
            return None
        return ConvGeometry(kind, x, w, (n, k, p, q), str(np.dtype(dtype)), (pt, pl),
                            (pb, pr), self.stride, self.dilation, self.fmt == "NHWC")

    def plan(self, geo):
        if geo is None or self.dnn is None:
            return None
        return self.dnn.plan(geo)

    def data_shape(self, nchw) -> tuple:
        n, c, h, w = nchw
        return (n, h, w, c) if self.fmt == "NHWC" else (n, c, h, w)

    def to_krsc(self, f):
        """An HWIO filter as a C-contiguous KRSC array (one copy)."""
        return self.xp.ascontiguousarray(self.xp.transpose(f, (3, 0, 1, 2)))


def _contiguous(xp, a):
    return a if a.flags.c_contiguous else xp.ascontiguousarray(a)


def _uses_cudnn(ctx, node) -> bool:
    libs = gpu_libraries(ctx)
    dtype = node.output_types[0] if node.output_types else None
    return (libs is not None and libs.dnn is not None and dtype is not None
            and libs.dnn.supports(np.dtype(dtype.as_numpy_dtype)))


@kernel("Conv2D", GPU)
def _conv2d_gpu(node, ctx):
    fallback = _im2col(node, ctx)
    if not _uses_cudnn(ctx, node):
        return fallback
    conv, xp = _Conv(node, ctx), ctx.xp

    def conv2d(x, f):
        if x.ndim != 4 or f.ndim != 4 or x.dtype != f.dtype:
            return fallback(x, f)
        r, s, ci, k = (int(d) for d in f.shape)
        plan = conv.plan(conv.geometry(FPROP, conv.nchw(x.shape), (k, ci, r, s), x.dtype))
        if plan is None:
            return fallback(x, f)
        y = xp.empty(conv.data_shape(plan.geometry.y), x.dtype)
        plan.execute(_contiguous(xp, x), conv.to_krsc(f), y)
        return y

    return conv2d


@kernel("Conv2DBackpropInput", GPU, host_memory_inputs=(0,))
def _conv2d_backprop_input_gpu(node, ctx):
    fallback = _im2col(node, ctx)
    if not _uses_cudnn(ctx, node):
        return fallback
    conv, xp = _Conv(node, ctx), ctx.xp

    def backprop_input(sizes, f, dy):
        shape = tuple(int(d) for d in np.ravel(host(sizes)))
        if len(shape) != 4 or f.ndim != 4 or dy.ndim != 4 or f.dtype != dy.dtype:
            return fallback(sizes, f, dy)
        r, s, ci, k = (int(d) for d in f.shape)
        geo = conv.geometry(DGRAD, conv.nchw(shape), (k, ci, r, s), dy.dtype)
        if geo is None or conv.data_shape(geo.y) != tuple(dy.shape):
            return fallback(sizes, f, dy)
        plan = conv.plan(geo)
        if plan is None:
            return fallback(sizes, f, dy)
        dx = xp.empty(shape, dy.dtype)
        plan.execute(dx, conv.to_krsc(f), _contiguous(xp, dy))
        return dx

    return backprop_input


@kernel("Conv2DBackpropFilter", GPU, host_memory_inputs=(1,))
def _conv2d_backprop_filter_gpu(node, ctx):
    fallback = _im2col(node, ctx)
    if not _uses_cudnn(ctx, node):
        return fallback
    conv, xp = _Conv(node, ctx), ctx.xp

    def backprop_filter(x, sizes, dy):
        fshape = tuple(int(d) for d in np.ravel(host(sizes)))
        if len(fshape) != 4 or x.ndim != 4 or dy.ndim != 4 or x.dtype != dy.dtype:
            return fallback(x, sizes, dy)
        r, s, ci, k = fshape
        geo = conv.geometry(WGRAD, conv.nchw(x.shape), (k, ci, r, s), x.dtype)
        if geo is None or conv.data_shape(geo.y) != tuple(dy.shape):
            return fallback(x, sizes, dy)
        plan = conv.plan(geo)
        if plan is None:
            return fallback(x, sizes, dy)
        dw = xp.empty((k, r, s, ci), x.dtype)  # KRSC
        plan.execute(_contiguous(xp, x), dw, _contiguous(xp, dy))
        return xp.ascontiguousarray(xp.transpose(dw, (1, 2, 3, 0)))  # HWIO

    return backprop_filter
