"""Convolutions through cuDNN's graph API (nvidia-cudnn-frontend): forward, input gradient and
filter gradient, in TensorFlow's layouts (NHWC or NCHW data, HWIO filters), strides, dilations
and padding.

A ``ConvPlan`` is one cuDNN graph for one (operation, shapes, dtype, strides, dilations,
padding, layout): validated, lowered, planned by cuDNN's heuristics, built once and kept in the
device's cache (``Dnn.plan``), with a workspace of its own from the device's pool, allocated
when the plan is built (outside any capture). The handle's stream is set once, to the device's
compute stream, so an execution is captured with the step. A shape cuDNN cannot serve is
remembered as such and that operation falls back to the im2col kernels.

cuDNN takes data as NCHW *dimensions* with any strides, so NHWC data is passed as is (strides
``[HWC, 1, WC, C]``); filters it takes as KCRS dimensions in KRSC (or KCRS) memory, so TF's
HWIO filter is transposed to KRSC (one small copy) before the forward and data-gradient
products, and the filter gradient is written in KRSC and transposed back.

Invariant: a plan is executed only with arrays of exactly the shapes and layout it was built
for, on the device that built it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

FPROP, DGRAD, WGRAD = "fprop", "dgrad", "wgrad"


@dataclass(frozen=True)
class ConvGeometry:
    """What a plan is built for. Shapes are logical NCHW (``x``: N, C, H, W; ``w``: K, C, R, S;
    ``y``: N, K, P, Q); ``nhwc`` says how the data is laid out in memory."""

    kind: str
    x: tuple
    w: tuple
    y: tuple
    dtype: str
    pre: tuple
    post: tuple
    stride: tuple
    dilation: tuple
    nhwc: bool

    def data_strides(self, dims) -> list[int]:
        n, c, h, w = dims
        if self.nhwc:
            return [h * w * c, 1, w * c, c]
        return [c * h * w, h * w, w, 1]

    @staticmethod
    def filter_strides(dims) -> list[int]:  # KRSC memory
        k, c, r, s = dims
        return [r * s * c, 1, s * c, c]


class ConvPlan:
    """A built cuDNN graph for one ``ConvGeometry`` and its workspace."""

    def __init__(self, dnn: Dnn, geo: ConvGeometry):
        cudnn = dnn.cudnn
        dt = _data_type(cudnn, geo.dtype)
        g = cudnn.pygraph(io_data_type=dt, intermediate_data_type=dt, compute_data_type=dt,
                          handle=dnn.handle, is_cuda_graph_replay_expected=True)
        attrs = dict(pre_padding=list(geo.pre), post_padding=list(geo.post),
                     stride=list(geo.stride), dilation=list(geo.dilation),
                     compute_data_type=dt)

        def data(name, dims):
            return g.tensor(name=name, dim=list(dims), stride=geo.data_strides(dims),
                            data_type=dt)

        def weights(name):
            return g.tensor(name=name, dim=list(geo.w), stride=geo.filter_strides(geo.w),
                            data_type=dt)

        if geo.kind == FPROP:
            x, w = data("x", geo.x), weights("w")
            out = g.conv_fprop(image=x, weight=w, name="fprop", **attrs)
            out.set_output(True).set_data_type(dt).set_dim(list(geo.y)).set_stride(
                geo.data_strides(geo.y))
            self.tensors = (x, w, out)
        elif geo.kind == DGRAD:
            w, y = weights("w"), data("dy", geo.y)
            out = g.conv_dgrad(loss=y, filter=w, name="dgrad", **attrs)
            out.set_output(True).set_data_type(dt).set_dim(list(geo.x)).set_stride(
                geo.data_strides(geo.x))
            self.tensors = (out, w, y)
        else:
            x, y = data("x", geo.x), data("dy", geo.y)
            out = g.conv_wgrad(image=x, loss=y, name="wgrad", **attrs)
            out.set_output(True).set_data_type(dt).set_dim(list(geo.w)).set_stride(
                geo.filter_strides(geo.w))
            self.tensors = (x, out, y)
        g.validate()
        g.build_operation_graph()
        g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
        if geo.dtype == "float32" and not dnn.allow_tf32:
            note = cudnn.numerical_note
            g.deselect_numeric_notes([note.TENSOR_CORE, note.DOWN_CONVERT_INPUTS])
        g.check_support()
        g.build_plans()
        self.graph = g
        self.geometry = geo
        self.workspace = dnn.libs.device_buffer(g.get_workspace_size())
        self.handle = dnn.handle

    def execute(self, x, w, y) -> None:
        """Run the plan on device arrays ``x``, ``w`` (KRSC), ``y`` of the plan's shapes: the
        output among them (by the plan's kind) is written."""
        tx, tw, ty = self.tensors
        self.graph.execute({tx: x.data.ptr, tw: w.data.ptr, ty: y.data.ptr},
                           self.workspace.data.ptr, handle=self.handle)


class Dnn:
    """A device's cuDNN handle (its stream set once) and its cache of built plans."""

    def __init__(self, cudnn, libs):
        self.cudnn = cudnn
        self.libs = libs
        self.allow_tf32 = libs.allow_tf32
        self.handle = cudnn.create_handle()
        cudnn.set_stream(self.handle, libs.stream.ptr)
        self._plans: dict[ConvGeometry, ConvPlan | None] = {}
        self._lock = threading.Lock()
        self.declined: dict[ConvGeometry, str] = {}  # geometries cuDNN cannot serve, and why

    def supports(self, dtype) -> bool:
        return str(np.dtype(dtype)) in ("float32", "float64", "float16")

    def plan(self, geo: ConvGeometry) -> ConvPlan | None:
        """The built plan of ``geo`` (built on first use), or None where cuDNN declines it."""
        try:
            return self._plans[geo]
        except KeyError:
            pass
        with self._lock:
            if geo not in self._plans:
                try:
                    self._plans[geo] = ConvPlan(self, geo)
                except Exception as e:  # noqa: BLE001 - not supported: the im2col path runs
                    self._plans[geo] = None
                    self.declined[geo] = f"{type(e).__name__}: {e}"
            return self._plans[geo]


def _data_type(cudnn, dtype: str):
    return {"float32": cudnn.data_type.FLOAT, "float64": cudnn.data_type.DOUBLE,
            "float16": cudnn.data_type.HALF}[dtype]
