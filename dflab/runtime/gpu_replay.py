"""Whole-step replay on a GPU: capture a step's kernels once as a CUDA graph, replay it after.

A CUDA graph replays the recorded kernel launches with the recorded pointers, so a step can be
replayed only when nothing about it changes between steps but the *contents* of its inputs and
of the variables it reads and writes:

* **what is static**: the shapes and dtypes of the step's inputs (the ``signature``), the
  device buffers the inputs are copied into before each replay, every buffer the captured
  kernels allocate (kept alive with the capture, so the pointers stay valid), and the
  variables' buffers (a GPU's dense variable updates write into them, see
  ``dflab.kernels.state_kernels.write_variable``);
* **what is not eligible** (``ineligible_reason``): a step with control flow (the kernels run
  depend on values), with blocking or asynchronous kernels (queues, ``_Recv``: a transfer from
  another device happens outside the device's stream), with ops whose output *shape* depends
  on values (``Where``, ``Unique``, ``DynamicPartition``, ``BooleanMask``…), or with kernels
  that do host work on every step (random numbers drawn on the host, ``Print``). A step that
  turns out to read a device value on the host while it is captured (a kernel that checks a
  value, a device value reaching an input read on the host) fails to capture; the step then
  runs uncaptured and the reason is recorded;
* **when to capture**: the first step of a signature runs uncaptured (it warms the memory
  pool, so the capture allocates from blocks the pool already holds); the second is captured
  and launched; later ones are launched. A new signature (a feed of a new shape or dtype)
  starts again; up to ``max_captures`` graphs are kept, the least recently used dropped.

Every call runs the step exactly once: capturing runs nothing (as in CUDA), the launch that
follows does. ``StepReplay`` holds that logic for one step function on one stream, written
against a CuPy-like module (``begin_capture``/``end_capture`` on a stream, ``Graph.launch``),
so the tests run it on the strict stand-in. ``PartitionReplay`` is what ``Session.run`` uses
for a registered partition when ``ConfigProto(dflab={"gpu_step_replay": True})`` asks for it.
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence

from dflab.framework.op_kinds import CONTROL_FLOW_OPS, TRANSFER_OPS

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


def ineligible_reason(op_types: Sequence[str], has_blocking: bool = False) -> str | None:
    """Why a step of these op types cannot be captured, or None when it can."""
    if any(op_type in TRANSFER_OPS for op_type in op_types):
        return "the step exchanges tensors with another device"
    if has_blocking:
        return "the step waits on blocking or asynchronous kernels (queues, transfers)"
    for op_type in op_types:
        if op_type in CONTROL_FLOW_OPS:
            return f"the step has control flow ({op_type})"
        if op_type in DATA_DEPENDENT_SHAPES:
            return f"{op_type}'s output shape depends on its input values"
        if op_type in HOST_WORK_EACH_STEP:
            return f"{op_type} does host work on every step"
        if op_type.startswith("TensorArray"):
            return f"{op_type} keeps its elements in a per-step Python structure"
    return None


def signature(inputs: Sequence) -> tuple:
    """What a capture is valid for: each input's shape and dtype."""
    return tuple((tuple(x.shape), str(x.dtype)) for x in inputs)


class CaptureFailedError(Exception):
    """A step could not be captured (the error it raised while capturing is the cause)."""


class _Capture:
    __slots__ = ("graph", "static_inputs", "static_outputs", "allocations")

    def __init__(self, graph, static_inputs, static_outputs, allocations):
        self.graph = graph
        self.static_inputs = static_inputs
        self.static_outputs = static_outputs
        self.allocations = allocations  # every block the captured kernels allocated


def _copy_into(buf, x) -> None:
    buf[...] = x


class StepReplay:
    """Run ``step`` (device inputs -> tuple of outputs) on ``stream``, capturing it per input
    signature and replaying the capture (see the module docstring).

    ``load(buffer, x)`` copies a step input into a static device buffer (default: a device
    copy), ``to_device(x)`` gives a step input as a device array for an uncaptured run
    (default: as is), ``empty(shape, dtype)`` allocates a static input buffer (default:
    ``cupy.empty``), ``retain()`` is a context manager yielding the list of every block
    allocated inside it (default: none kept; a real GPU must keep them, see ``GPUDevice``).
    ``captures``, ``replays`` (graph launches) and ``uncaptured`` count what happened."""

    def __init__(self, cupy, stream, step: Callable, max_captures: int = 4,
                 load: Callable = _copy_into, to_device: Callable | None = None,
                 retain: Callable | None = None, empty: Callable | None = None):
        self.cupy = cupy
        self.empty = empty or cupy.empty
        self.stream = stream
        self.step = step
        self.max_captures = max_captures
        self.load = load
        self.to_device = to_device
        self.retain = retain or _no_retention
        self._captures: OrderedDict[tuple, _Capture] = OrderedDict()
        self._warm: OrderedDict[tuple, None] = OrderedDict()  # signatures run once uncaptured
        self.captures = 0
        self.replays = 0
        self.uncaptured = 0

    def __call__(self, *inputs) -> tuple:
        key = signature(inputs)
        cap = self._captures.get(key)
        if cap is None:
            if key not in self._warm:
                return self._run_uncaptured(key, inputs)
            cap = self._capture(inputs)
            self._captures[key] = cap
            if len(self._captures) > self.max_captures:
                self._captures.popitem(last=False)  # the least recently used signature
        else:
            self._captures.move_to_end(key)
            self._load(cap, inputs)
        with self.stream:
            cap.graph.launch(self.stream)
        self.replays += 1
        return cap.static_outputs

    def _run_uncaptured(self, key, inputs) -> tuple:
        if self.to_device is not None:
            inputs = [self.to_device(x) for x in inputs]
        outputs = self.step(*inputs)
        self._warm[key] = None
        if len(self._warm) > 4 * self.max_captures:
            self._warm.popitem(last=False)
        self.uncaptured += 1
        return outputs if isinstance(outputs, tuple) else (outputs,)

    def _capture(self, inputs) -> _Capture:
        """Capture one step into a graph (nothing runs: the caller launches it)."""
        with self.stream:
            static_inputs = [self.empty(x.shape, x.dtype) for x in inputs]
        cap = _Capture(None, static_inputs, None, None)
        self._load(cap, inputs)
        with self.retain() as allocations, self.stream:
            self.stream.begin_capture()
            try:
                outputs = self.step(*static_inputs)
            except Exception as e:
                self.stream.end_capture()  # ends the capture; the graph is dropped
                raise CaptureFailedError(f"{type(e).__name__}: {e}") from e
            graph = self.stream.end_capture()
        cap.graph, cap.allocations = graph, allocations
        cap.static_outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        self.captures += 1
        return cap

    def _load(self, cap: _Capture, inputs) -> None:
        """Copy this step's inputs into the capture's static buffers."""
        for buf, x in zip(cap.static_inputs, inputs):
            self.load(buf, x)


@contextlib.contextmanager
def _no_retention():
    yield None


# --- Session.run's use of it -------------------------------------------------------------------

def replay_status(parts) -> dict[str, str]:
    """Per partition where whole-step replay applies (a registered partition with a
    ``replay`` or a ``replay_reason``): "replayed", or why not."""
    out = {}
    for part in parts:
        replay, reason = getattr(part, "replay", None), getattr(part, "replay_reason", None)
        if replay is not None or reason is not None:
            out[getattr(part, "device", "") or "(unpartitioned)"] = reason or "replayed"
    return out


def replay_applies(part, devices) -> bool:
    """Whether whole-step replay concerns ``part`` at all: it runs on a CUDA GPU (a device
    that can capture), or unpartitioned over devices among which there is one."""
    names = [part.device] if part.device else {
        getattr(n.op, "assigned_device", "") for n in part.executor_plan.nodes}
    return any(hasattr(devices[d], "retaining_allocations") for d in names if d)


def partition_ineligible_reason(part, device) -> str | None:
    """Why ``part`` (a ``RegisteredPartition``) cannot be replayed on ``device``, or None."""
    if not part.device:
        return "the plan runs unpartitioned over several devices"
    if not hasattr(device, "retaining_allocations"):
        return f"{part.device} is not a CUDA GPU"
    eplan = part.executor_plan
    if eplan.cf:
        return "the step has control flow"
    return ineligible_reason([n.op.type for n in eplan.nodes], eplan.has_blocking)


class PartitionReplay:
    """Runs a registered GPU partition's steps through a ``StepReplay``: host feeds are copied
    once, straight into the capture's static input buffers, and fetched values come back to
    the host. ``reason`` is why replay stopped (a capture failed), None while it applies."""

    def __init__(self, part, device, max_captures: int = 4):
        from dflab.runtime.executor import Execution

        self.part = part
        self.device = device
        self.reason: str | None = None
        eplan = part.executor_plan

        def step(*inputs):
            ex = Execution(eplan, inputs)
            ex.run_inline()
            return tuple(ex.slots[s] for s in eplan.fetch_slots)

        self._lock = threading.Lock()  # one step of this partition at a time on its stream
        self.replay = StepReplay(device.cupy, device.streams["compute"].cuda, step,
                                 max_captures, load=self._load_feed,
                                 to_device=device.from_host,
                                 retain=device.retaining_allocations, empty=device.empty)

    def _load_feed(self, buffer, host) -> None:
        # The previous replay may still read the static buffer (a step whose fetches do not
        # wait for the device): the copy waits for the compute stream first.
        self.device.copy_from_host(buffer, host, reused=True)

    @property
    def captures(self) -> int:
        return self.replay.captures

    @property
    def replays(self) -> int:
        return self.replay.replays

    def run(self, feed_values) -> list | None:
        """The step's fetched values in host memory, or None when it cannot be replayed (the
        reason is recorded; the caller runs the step as usual)."""
        import numpy as np

        if self.reason is not None:
            return None
        feeds = [np.asarray(feed_values[k], order="C") for k in self.part.feed_index]
        # The graph launches on this device, issued as a whole (as one kernel is): another
        # thread's kernels come before or after it on the stream, never inside.
        with self._lock, self.device.issuing(), self.device.cuda_device:
            try:
                outputs = self.replay(*feeds)
            except CaptureFailedError as e:
                self.reason = f"capturing the step failed ({e})"
                return None
            return [self._to_client(v) for v in outputs]

    def _to_client(self, value):
        from dflab.runtime.executor import to_client_value

        if hasattr(value, "read") and not hasattr(value, "shape"):  # a variable's reference
            value = value.read()
        return to_client_value(self.device.to_host(value))
