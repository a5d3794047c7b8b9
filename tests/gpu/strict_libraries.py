"""Strict NumPy-backed stand-ins for the libraries a GPU device owns: nvmath-python's cuBLAS
bindings (``nvmath.bindings.cublas``) and nvidia-cudnn-frontend's graph API (``cudnn``), over
the strict CuPy stand-in's device memory.

Strict where the libraries are: a call takes device addresses (``array.data.ptr``) that must lie
inside live device arrays, a handle must have its stream and (cuBLAS) workspace set before use,
a cuDNN graph must go through validate, build_operation_graph, create_execution_plans,
check_support and build_plans before it executes, its tensors' dimensions and strides must agree
with the convolution's, and every tensor and a big enough workspace must be given to execute.
Results are computed with NumPy: in float64 and rounded to the data type, after rounding float32
inputs to TF32 where the handle or plan allows tensor-core math (as the hardware does). Each call
is one kernel launch of ``strict_cupy.counts``, and is recorded into its stream's capture when
that stream is capturing (a graph launch runs it again). Test code: dflab never imports it.
"""

from __future__ import annotations

import enum
import types

import numpy as np
import strict_cupy as sc


def tf32(a: np.ndarray) -> np.ndarray:
    """``a`` (float32) rounded to TF32: 10 mantissa bits, to nearest even."""
    bits = np.ascontiguousarray(a, np.float32).view(np.uint32)
    rounded = (bits + np.uint32(0xFFF) + ((bits >> np.uint32(13)) & np.uint32(1))) & \
        np.uint32(0xFFFFE000)
    finite = np.isfinite(a)
    return np.where(finite, rounded.view(np.float32), a)


def _launch(stream_ptr: int, name: str, fn, operands, read: int, written: int) -> None:
    """Run ``fn()`` as one kernel on the stream ``stream_ptr``: recorded while it captures."""
    stream = sc.stream_of(stream_ptr)
    if getattr(stream, "recording", None) is not None:
        sc.record_on(stream, lambda *_: fn(), ())
    elif not sc._capturing:
        sc.counts.add(name, read, written, False)
    fn()


# --- cuBLAS -------------------------------------------------------------------------------------
class Operation(enum.IntEnum):
    N = 0
    T = 1
    C = 2


class Math(enum.IntEnum):
    DEFAULT_MATH = 0
    TENSOR_OP_MATH = 1
    PEDANTIC_MATH = 2
    TF32_TENSOR_OP_MATH = 3


class _Handle:
    def __init__(self):
        self.stream = None
        self.workspace = None
        self.math = Math.DEFAULT_MATH


def make_cublas() -> types.ModuleType:
    """A fresh stand-in for ``nvmath.bindings.cublas``; ``handles`` lists the ones created."""
    mod = types.ModuleType("strict_cublas")
    handles: dict[int, _Handle] = {}
    mod.handles = handles
    mod.Operation, mod.Math = Operation, Math

    def create():
        h = 0x7000 + len(handles)
        handles[h] = _Handle()
        return h

    def handle(h) -> _Handle:
        if h not in handles:
            raise ValueError(f"{h:#x} is not a cuBLAS handle")
        return handles[h]

    def set_stream(h, stream):
        sc.stream_of(stream)
        handle(h).stream = stream

    def set_workspace(h, ptr, size):
        sc.array_at(ptr, (size,), np.uint8)
        handle(h).workspace = (ptr, size)

    def set_math_mode(h, mode):
        handle(h).math = Math(mode)

    def destroy(h):
        handles.pop(h)

    def _matrix(ptr, trans, rows, cols, ld, dtype, stride=0, batch=1):
        """op(X) of a column-major operand: (batch, rows, cols) as NumPy."""
        r, c = (rows, cols) if trans == Operation.N else (cols, rows)
        if ld < max(r, 1):
            raise ValueError(f"leading dimension {ld} < {r}")
        item = np.dtype(dtype).itemsize
        x = sc.array_at(ptr, (batch, c, r), dtype, (stride * item, ld * item, item))
        x = np.swapaxes(x, 1, 2)  # column-major (r, c)
        return x if trans == Operation.N else np.swapaxes(x, 1, 2)

    def gemm(dtype, h, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
             sa=0, sb=0, sc_=0, batch=1):
        hd = handle(h)
        if hd.stream is None or hd.workspace is None:
            raise RuntimeError("cuBLAS handle used before its stream and workspace were set")
        al = np.ctypeslib.as_array((np.ctypeslib.as_ctypes_type(dtype) * 1).from_address(alpha))
        be = np.ctypeslib.as_array((np.ctypeslib.as_ctypes_type(dtype) * 1).from_address(beta))
        av = _matrix(a, Operation(transa), m, k, lda, dtype, sa, batch)
        bv = _matrix(b, Operation(transb), k, n, ldb, dtype, sb, batch)
        item = np.dtype(dtype).itemsize
        cv = np.swapaxes(sc.array_at(c, (batch, n, m), dtype, (sc_ * item, ldc * item, item)),
                         1, 2)
        alpha_v, beta_v = float(al[0]), float(be[0])
        fast = hd.math == Math.TF32_TENSOR_OP_MATH and np.dtype(dtype) == np.float32

        def run():
            x, y = (tf32(av), tf32(bv)) if fast else (av, bv)
            prod = np.matmul(x.astype(np.float64), y.astype(np.float64)) * alpha_v
            if beta_v:
                prod += beta_v * cv
            cv[...] = prod.astype(dtype)

        _launch(hd.stream, "cublas_gemm", run, (), av.nbytes + bv.nbytes, cv.nbytes)

    mod.create, mod.destroy, mod.set_stream = create, destroy, set_stream
    mod.set_workspace, mod.set_math_mode = set_workspace, set_math_mode
    mod.sgemm = lambda *a: gemm(np.float32, *a)
    mod.dgemm = lambda *a: gemm(np.float64, *a)

    def strided(dtype, h, ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc_,
                batch):
        gemm(dtype, h, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, sa, sb, sc_, batch)

    mod.sgemm_strided_batched = lambda *a: strided(np.float32, *a)
    mod.dgemm_strided_batched = lambda *a: strided(np.float64, *a)
    return mod


# --- cuDNN frontend -----------------------------------------------------------------------------
class data_type(enum.Enum):  # noqa: N801 - the frontend's names
    FLOAT = np.float32
    DOUBLE = np.float64
    HALF = np.float16


class heur_mode(enum.Enum):  # noqa: N801
    A = 0
    B = 1
    FALLBACK = 2


class numerical_note(enum.Enum):  # noqa: N801
    TENSOR_CORE = 0
    DOWN_CONVERT_INPUTS = 1
    REDUCED_PRECISION_REDUCTION = 2


class cudnnGraphNotSupportedError(RuntimeError):  # noqa: N801, N818
    pass


class Handle:
    def __init__(self):
        self.stream = None


class Tensor:
    def __init__(self, name, dim, stride, data_type_, virtual=False):
        self.name, self.dim, self.stride = name, list(dim), list(stride) if stride else None
        self.data_type, self.is_output, self.virtual = data_type_, False, virtual

    def set_output(self, value):
        self.is_output = bool(value)
        return self

    def set_data_type(self, dt):
        self.data_type = dt
        return self

    def set_dim(self, dim):
        self.dim = list(dim)
        return self

    def set_stride(self, stride):
        self.stride = list(stride)
        return self


_STAGES = ("created", "validated", "lowered", "planned", "supported", "built")
WORKSPACE_BYTES = 4096  # what a stand-in plan asks for: the caller must give it


class pygraph:  # noqa: N801
    """The classic graph API calls dflab makes, checked and computed with NumPy."""

    graphs_built = 0

    def __init__(self, name="graph", io_data_type=None, intermediate_data_type=None,
                 compute_data_type=None, handle=None, **kw):
        self.handle = handle
        self.io_data_type = io_data_type
        self.tensors: list[Tensor] = []
        self.op = None
        self.stage = "created"
        self.deselected: set = set()

    def _advance(self, frm, to):
        if self.stage != frm:
            raise RuntimeError(f"cuDNN graph: {to} after {self.stage}, expected after {frm}")
        self.stage = to

    def tensor(self, dim, stride=None, data_type=None, name="", **kw):
        t = Tensor(name, dim, stride, data_type or self.io_data_type)
        self.tensors.append(t)
        return t

    def _conv(self, kind, a, b, pre_padding, post_padding, stride, dilation,
              compute_data_type=None, name=""):
        if self.op is not None:
            raise RuntimeError("the stand-in graph holds one convolution")
        out = Tensor(f"{name}::out", [], None, self.io_data_type, virtual=True)
        self.op = (kind, a, b, out, list(pre_padding), list(post_padding), list(stride),
                   list(dilation))
        self.tensors.append(out)
        return out

    def conv_fprop(self, image, weight, **kw):
        return self._conv("fprop", image, weight, **kw)

    def conv_dgrad(self, loss, filter, **kw):  # noqa: A002 - the frontend's name
        return self._conv("dgrad", loss, filter, **kw)

    def conv_wgrad(self, image, loss, **kw):
        return self._conv("wgrad", image, loss, **kw)

    def validate(self):
        self._advance("created", "validated")
        kind, a, b, out, pre, post, stride, dil = self.op
        if not out.is_output or not out.dim or not out.stride:
            raise RuntimeError("the output needs set_output, set_dim and set_stride")
        x, w, y = self._xwy()
        n, c, h, wd = x.dim
        k, ci, r, s = w.dim
        p = (h + pre[0] + post[0] - ((r - 1) * dil[0] + 1)) // stride[0] + 1
        q = (wd + pre[1] + post[1] - ((s - 1) * dil[1] + 1)) // stride[1] + 1
        if c != ci or y.dim != [n, k, p, q]:
            raise cudnnGraphNotSupportedError(
                f"conv {kind}: x {x.dim}, w {w.dim}, y {y.dim} do not agree (expected y "
                f"{[n, k, p, q]})")
        for t in (x, y):
            if t.stride not in (_nhwc(t.dim), _nchw(t.dim)):
                raise cudnnGraphNotSupportedError(f"{t.name}: unsupported strides {t.stride}")
        if w.stride not in (_nhwc(w.dim), _nchw(w.dim)):
            raise cudnnGraphNotSupportedError(f"filter strides {w.stride}: KRSC or KCRS only")
        if any(t.data_type != self.io_data_type for t in (x, w, y)):
            raise cudnnGraphNotSupportedError("mixed data types")

    def _xwy(self):
        kind, a, b, out = self.op[:4]
        return {"fprop": (a, b, out), "dgrad": (out, b, a), "wgrad": (a, out, b)}[kind]

    def build_operation_graph(self):
        self._advance("validated", "lowered")

    def create_execution_plans(self, heuristics):
        if not heuristics or not all(isinstance(h, heur_mode) for h in heuristics):
            raise TypeError("create_execution_plans takes a list of heur_mode")
        self._advance("lowered", "planned")

    def deselect_numeric_notes(self, notes):
        if self.stage not in ("lowered", "planned"):
            raise RuntimeError("numeric notes are deselected before the plans are built")
        self.deselected.update(notes)
        return self

    def check_support(self):
        self._advance("planned", "supported")

    def build_plans(self, *args, **kw):
        self._advance("supported", "built")
        pygraph.graphs_built += 1

    def get_workspace_size(self):
        if self.stage != "built":
            raise RuntimeError("Call build() first")
        return WORKSPACE_BYTES

    @property
    def uses_tf32(self) -> bool:
        return (self.io_data_type is data_type.FLOAT
                and numerical_note.TENSOR_CORE not in self.deselected)

    def execute(self, variant_pack, workspace=None, handle=None, **kw):
        if self.stage != "built":
            raise RuntimeError("execute before build")
        h = handle or self.handle
        if h is None or h.stream is None:
            raise RuntimeError("cuDNN handle without a stream")
        inputs = [t for t in self.tensors if not t.virtual or t.is_output]
        if set(map(id, variant_pack)) != set(map(id, inputs)):
            raise ValueError("the variant pack must give every tensor of the graph")
        if not isinstance(workspace, int):
            raise TypeError("workspace must be a device address")
        sc.array_at(workspace, (WORKSPACE_BYTES,), np.uint8)
        views = {}
        for t in inputs:
            dt = np.dtype(t.data_type.value)
            item = dt.itemsize
            views[id(t)] = sc.array_at(variant_pack[t], t.dim, dt, [s * item for s in t.stride])
        kind, a, b, out, pre, post, stride, dil = self.op
        x, w, y = (views[id(t)] for t in self._xwy())
        fast = self.uses_tf32

        def run():
            _conv_numpy(kind, x, w, y, pre, post, stride, dil, fast)

        read = sum(v.nbytes for t, v in ((t, views[id(t)]) for t in inputs) if t is not out)
        _launch(h.stream, f"cudnn_conv_{kind}", run, (), read, views[id(out)].nbytes)


def _nhwc(dim):
    n, c, h, w = dim
    return [h * w * c, 1, w * c, c]


def _nchw(dim):
    n, c, h, w = dim
    return [c * h * w, h * w, w, 1]


def _conv_numpy(kind, x, w, y, pre, post, stride, dil, fast):
    """The convolution on NCHW-indexed views ``x`` (N,C,H,W), ``w`` (K,C,R,S), ``y``
    (N,K,P,Q): writes y (fprop), x (dgrad) or w (wgrad)."""
    out_dtype = {"fprop": y, "dgrad": x, "wgrad": w}[kind].dtype
    cast = (lambda a: tf32(a).astype(np.float64)) if fast else (lambda a: a.astype(np.float64))
    n, c, h, wd = x.shape
    k, _, r, s = w.shape
    _, _, p, q = y.shape
    hp, wp = h + pre[0] + post[0], wd + pre[1] + post[1]

    def tap(i, j):  # rows and columns of the padded input that filter tap (i, j) reads
        r0, c0 = i * dil[0], j * dil[1]
        return (slice(r0, r0 + stride[0] * (p - 1) + 1, stride[0]),
                slice(c0, c0 + stride[1] * (q - 1) + 1, stride[1]))

    if kind == "fprop":
        xp_ = np.zeros((n, c, hp, wp))
        xp_[:, :, pre[0]:pre[0] + h, pre[1]:pre[1] + wd] = cast(x)
        wf, acc = cast(w), np.zeros((n, k, p, q))
        for i in range(r):
            for j in range(s):
                rs, cs = tap(i, j)
                acc += np.einsum("nchw,kc->nkhw", xp_[:, :, rs, cs], wf[:, :, i, j])
        y[...] = acc.astype(out_dtype)
    elif kind == "dgrad":
        dx = np.zeros((n, c, hp, wp))
        dy, wf = cast(y), cast(w)
        for i in range(r):
            for j in range(s):
                rs, cs = tap(i, j)
                dx[:, :, rs, cs] += np.einsum("nkhw,kc->nchw", dy, wf[:, :, i, j])
        x[...] = dx[:, :, pre[0]:pre[0] + h, pre[1]:pre[1] + wd].astype(out_dtype)
    else:
        xp_ = np.zeros((n, c, hp, wp))
        xp_[:, :, pre[0]:pre[0] + h, pre[1]:pre[1] + wd] = cast(x)
        dy = cast(y)
        dw = np.zeros((k, c, r, s))
        for i in range(r):
            for j in range(s):
                rs, cs = tap(i, j)
                dw[:, :, i, j] = np.einsum("nchw,nkhw->kc", xp_[:, :, rs, cs], dy)
        w[...] = dw.astype(out_dtype)


def make_cudnn() -> types.ModuleType:
    """A fresh stand-in for the ``cudnn`` frontend module."""
    mod = types.ModuleType("strict_cudnn")
    mod.data_type, mod.heur_mode, mod.numerical_note = data_type, heur_mode, numerical_note
    mod.cudnnGraphNotSupportedError = cudnnGraphNotSupportedError
    mod.pygraph = pygraph
    mod.handles = []

    def create_handle():
        h = Handle()
        mod.handles.append(h)
        return h

    def set_stream(handle, stream):
        sc.stream_of(stream)
        handle.stream = stream

    mod.create_handle, mod.set_stream = create_handle, set_stream
    return mod


def make_libraries():
    """(cuBLAS bindings, cuDNN frontend) stand-ins, as ``make_cupy_gpu`` takes them."""
    return make_cublas(), make_cudnn()
