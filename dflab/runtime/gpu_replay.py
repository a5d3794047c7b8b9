"""Whole-step replay on a GPU: capture a step's kernels once as a CUDA graph, replay it after.

A CUDA graph replays the recorded kernel launches with the recorded pointers, so a step can be
replayed only when nothing about it changes between steps but the *contents* of its inputs:

* **what is static**: the shapes and dtypes of the step's inputs (the ``signature``), the
  device buffers the inputs are copied into before each replay, and every buffer the captured
  kernels allocate (they stay owned by the capture, so the pointers remain valid);
* **what is not eligible** (``ineligible_reason``): a step with control flow (the kernels run
  depend on values), with blocking or asynchronous kernels (queues, ``_Recv``: a transfer from
  another device happens outside the device's stream), with ops whose output *shape* depends
  on values (``Where``, ``Unique``, ``DynamicPartition``, ``BooleanMask``…), with kernels that
  do host work on every step (random numbers drawn on the host, ``Print``), or with ops that
  install new arrays in variables (dense ``Assign``: the next step would read the old pointer);
* **when to re-capture**: when the signature changes (a feed of a new shape or dtype); a
  replayed graph keeps its capture for each signature seen, up to ``max_captures``.

``StepReplay`` holds that logic for one plan on one device and is written against the device's
CuPy-like module (``begin_capture``/``end_capture`` on a stream, ``Graph.launch``), so the
tests run it on the strict stand-in. It is opt-in and not yet chosen by ``Session.run``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence

# Ops whose output shapes depend on input values: a captured graph could not size them.
DATA_DEPENDENT_SHAPES = frozenset({
    "Where", "Unique", "UniqueV2", "DynamicPartition", "BooleanMask", "SparseToDense",
    "ListDiff", "SetDiff1d", "NonMaxSuppression", "NonMaxSuppressionV3",
})
# Kernels that compute on the host on every step (the draw would be replayed, not redone).
HOST_WORK_EACH_STEP = frozenset({
    "RandomStandardNormal", "RandomUniform", "RandomUniformInt", "TruncatedNormal",
    "Multinomial", "Print", "PrintV2",
})
# Updates that install a new array in a variable instead of writing into its buffer.
INSTALLS_NEW_ARRAYS = frozenset({"Assign", "AssignAdd", "AssignSub"})
CONTROL_FLOW = frozenset({"Switch", "Merge", "Enter", "Exit", "NextIteration", "LoopCond",
                          "RefSwitch", "RefMerge", "RefEnter", "RefExit"})


def ineligible_reason(op_types: Sequence[str], has_blocking: bool = False) -> str | None:
    """Why a step of these op types cannot be captured, or None when it can."""
    if has_blocking:
        return "the step waits on blocking or asynchronous kernels (queues, transfers)"
    for op_type in op_types:
        if op_type in CONTROL_FLOW:
            return f"the step has control flow ({op_type})"
        if op_type in DATA_DEPENDENT_SHAPES:
            return f"{op_type}'s output shape depends on its input values"
        if op_type in HOST_WORK_EACH_STEP:
            return f"{op_type} does host work on every step"
        if op_type in INSTALLS_NEW_ARRAYS:
            return f"{op_type} installs a new array in a variable"
        if op_type in ("_Send", "_Recv"):
            return "the step exchanges tensors with another device"
    return None


def signature(inputs: Sequence) -> tuple:
    """What a capture is valid for: each input's shape and dtype."""
    return tuple((tuple(x.shape), str(x.dtype)) for x in inputs)


class _Capture:
    __slots__ = ("graph", "static_inputs", "static_outputs")

    def __init__(self, graph, static_inputs, static_outputs):
        self.graph = graph
        self.static_inputs = static_inputs
        self.static_outputs = static_outputs


class StepReplay:
    """Capture ``step`` (device inputs -> device outputs) on ``stream`` per input signature
    and replay it (see the module docstring). ``captures`` and ``replays`` count what
    happened, for tests and traces."""

    def __init__(self, cupy, stream, step: Callable, max_captures: int = 4):
        self.cupy = cupy
        self.stream = stream
        self.step = step
        self.max_captures = max_captures
        self._captures: OrderedDict[tuple, _Capture] = OrderedDict()
        self.captures = 0
        self.replays = 0

    def __call__(self, *inputs):
        key = signature(inputs)
        cap = self._captures.get(key)
        if cap is None:
            cap = self._capture(inputs)
            self._captures[key] = cap
            if len(self._captures) > self.max_captures:
                self._captures.popitem(last=False)  # the least recently captured signature
        else:
            self._captures.move_to_end(key)
            self._load(cap, inputs)
            with self.stream:
                cap.graph.launch(self.stream)
            self.replays += 1
        return cap.static_outputs

    def _capture(self, inputs) -> _Capture:
        # Static input buffers first (allocated outside the capture), then one uncaptured run
        # so the memory pool holds the step's blocks, then the capture itself.
        with self.stream:
            static_inputs = [self.cupy.empty(x.shape, x.dtype) for x in inputs]
        cap = _Capture(None, static_inputs, None)
        self._load(cap, inputs)
        with self.stream:
            self.step(*static_inputs)
            self.stream.begin_capture()
            try:
                outputs = self.step(*static_inputs)
            finally:
                graph = self.stream.end_capture()
        cap.graph = graph
        cap.static_outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        self.captures += 1
        return cap

    def _load(self, cap: _Capture, inputs) -> None:
        """Copy this step's inputs into the capture's static buffers (on the stream)."""
        with self.stream:
            for buf, x in zip(cap.static_inputs, inputs):
                buf[...] = x
