"""``ConfigProto``, ``RunOptions``, ``RunMetadata``: TF1's session configuration records, and
``DflabOptions``: dflab's own options.

TF's records are plain attribute containers with TF's field names, so TF1 code that builds them
by keyword or sets fields afterwards works unchanged. dflab's own options (simulated devices,
placement policy, step replay…) are one frozen, typed record, ``ConfigProto.dflab``, given as
``ConfigProto(dflab={...})``: every option is declared, typed and documented once, below; an
unknown name or a value of the wrong type is an error when the config is made, never a setting
silently ignored, and the runtime reads the options as attributes (``config.dflab.placement``).
"""

from __future__ import annotations

import dataclasses
import difflib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from dflab.framework.display import RichDisplay

PLACEMENT_POLICIES = ("tf", "cost_model")
COST_MODEL_OPTIONS = ("unknown_dim_size",)
# What a task's Ray actor may ask for: resources, and a node (its id or name) or labels.
RAY_TASK_OPTIONS = ("num_cpus", "num_gpus", "memory", "resources", "node", "labels")


def _doc(text: str) -> dict:
    return {"doc": text}


@dataclass(frozen=True)
class DflabOptions:
    """dflab's session options (``ConfigProto(dflab={...})``); see each field's ``doc``
    (``DflabOptions.describe()`` lists them). Frozen: change one with
    ``config.dflab = dataclasses.replace(config.dflab, gpu_step_replay=True)``."""

    simulated_devices: Mapping = field(default_factory=dict, metadata=_doc(
        "{device type: n}: exactly n simulated devices of that type, whatever the hardware "
        "(for 'CPU', the same as device_count)"))
    device_params: Mapping = field(default_factory=dict, metadata=_doc(
        "{'GPU' or 'GPU:1': {parameter: value}}: cost-model parameters of a device type or of "
        "one device (runtime.devices.PARAM_NAMES)"))
    placement: str = field(default="tf", metadata=_doc(
        f"placement policy, one of {PLACEMENT_POLICIES}: TF's rules, or the cost model for "
        "groups no rule pins"))
    cost_model: Mapping = field(default_factory=dict, metadata=_doc(
        f"options of the cost-model placer, among {COST_MODEL_OPTIONS}: the size assumed for "
        "an unknown dimension"))
    gpu_step_replay: bool = field(default=True, metadata=_doc(
        "capture a step that runs wholly on one CUDA GPU as a CUDA graph and replay it (a step "
        "that cannot be captured runs as usual; RunMetadata.step_replay says why)"))
    gpu_allow_tf32: bool = field(default=True, metadata=_doc(
        "as TensorFlow: float32 matrix products and convolutions on a GPU may round their "
        "inputs to TF32 on tensor cores (Ampere and later); False computes them in float32"))
    intra_op_split_products: bool = field(default=True, metadata=_doc(
        "with more than one intra-op thread (the default, 0, is every core), split matrix "
        "products among the intra-op threads (BLAS on one thread per call) rather than on "
        "BLAS's own threads"))
    onednn: bool = field(default=True, metadata=_doc(
        "run the heavy host kernels (convolutions and pooling, and their gradients; "
        "float32) through oneDNN when its library is installed "
        "(the 'onednn' extra; dflab.kernels.onednn.status() says whether it is), as TF's CPU "
        "build does; False: NumPy's kernels everywhere"))
    onednn_products: bool = field(default=True, metadata=_doc(
        "with onednn, run float32 matrix products (MatMul) of 1M multiply-adds and more "
        "through oneDNN too, as TF's CPU build does; False leaves them to NumPy's BLAS, "
        "which is faster on some CPUs and shapes (docs/cpu.md)"))
    retain_host_memory: bool = field(default=True, metadata=_doc(
        "keep the host memory that freed arrays held for the next step's arrays, as TF's "
        "allocator does, instead of glibc giving big blocks back to the system and the next "
        "step faulting them in again (process-wide once a session sets it; "
        "dflab.runtime.host_allocator)"))
    ray_namespace: str | None = field(default=None, metadata=_doc(
        "the Ray namespace of a server's task actors (else $DFLAB_RAY_NAMESPACE, else "
        "'dflab')"))
    ray_task: Mapping = field(default_factory=dict, metadata=_doc(
        f"what a server's task actor asks of Ray, among {RAY_TASK_OPTIONS}: num_cpus, "
        "num_gpus, memory (bytes) and custom resources ({name: amount}); node (a Ray node's "
        "id or name) or labels ({label: value}) to pin it"))

    def __post_init__(self):
        _check_counts("simulated_devices", self.simulated_devices)
        _check_mapping("device_params", self.device_params, Mapping)
        for name, params in self.device_params.items():
            _check_mapping(f"device_params[{name!r}]", params, (int, float))
        _check_choice("placement", self.placement, PLACEMENT_POLICIES,
                      "Unknown placement policy")
        _check_mapping("cost_model", self.cost_model, int)
        for key in self.cost_model:
            _check_choice("cost_model", key, COST_MODEL_OPTIONS, "Unknown cost_model option")
        _check_type("gpu_step_replay", self.gpu_step_replay, bool)
        _check_type("gpu_allow_tf32", self.gpu_allow_tf32, bool)
        _check_type("intra_op_split_products", self.intra_op_split_products, bool)
        _check_type("onednn", self.onednn, bool)
        _check_type("onednn_products", self.onednn_products, bool)
        _check_type("retain_host_memory", self.retain_host_memory, bool)
        if self.ray_namespace is not None:
            _check_type("ray_namespace", self.ray_namespace, str)
        _check_mapping("ray_task", self.ray_task, object)
        for key in self.ray_task:
            _check_choice("ray_task", key, RAY_TASK_OPTIONS, "Unknown ray_task option")
        # Copies: a caller's dict changed later changes nothing here.
        object.__setattr__(self, "simulated_devices", dict(self.simulated_devices))
        object.__setattr__(self, "device_params",
                           {k: dict(v) for k, v in self.device_params.items()})
        object.__setattr__(self, "cost_model", dict(self.cost_model))
        object.__setattr__(self, "ray_task", dict(self.ray_task))

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def describe(cls) -> str:
        """Every option with its default and what it does, one per line."""
        lines = []
        for f in dataclasses.fields(cls):
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
            lines.append(f"{f.name} (default {default!r}): {f.metadata['doc']}")
        return "\n".join(lines)

    @classmethod
    def from_value(cls, value) -> DflabOptions:
        """``value`` (None, a ``DflabOptions`` or a mapping of option names to values) as
        options; an unknown name is a ``TypeError`` naming the valid ones."""
        if value is None:
            return cls()
        if isinstance(value, cls):
            return value
        if not isinstance(value, Mapping):
            raise TypeError(f"ConfigProto(dflab=...) takes a dict of dflab options, not "
                            f"{type(value).__name__}")
        unknown = [k for k in value if k not in cls.names()]
        if unknown:
            raise TypeError(_unknown_message(unknown[0], cls.names()))
        return cls(**value)

    def get(self, name: str, default=None):
        """The option ``name`` (what reading the old ``dflab`` dict with ``.get`` gave, for
        code written against it); an unknown name is a ``TypeError`` as in ``from_value``.
        Every option has a value, so ``default`` is never returned."""
        if name not in self.names():
            raise TypeError(_unknown_message(name, self.names()))
        return getattr(self, name)


def _unknown_message(name, valid) -> str:
    close = difflib.get_close_matches(str(name), valid, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"Unknown dflab option {name!r}{hint}; the options are: {', '.join(valid)}"


def _type_name(t) -> str:
    if isinstance(t, tuple):
        return " or ".join(_type_name(x) for x in t)
    return {Mapping: "dict"}.get(t, t.__name__)


def _check_type(name: str, value, expected) -> None:
    # A bool is an int to Python; an option that takes a number does not take True.
    ok = isinstance(value, expected) and (expected is bool or not isinstance(value, bool))
    if not ok:
        raise TypeError(f"dflab option {name} must be {_type_name(expected)}, not "
                        f"{type(value).__name__} ({value!r})")


def _check_mapping(name: str, value, value_type) -> None:
    _check_type(name, value, Mapping)
    for k, v in value.items():
        _check_type(f"{name} key", k, str)
        _check_type(f"{name}[{k!r}]", v, value_type)


def _check_counts(name: str, value) -> None:
    _check_mapping(name, value, int)
    for k, v in value.items():
        if v < 0:
            raise ValueError(f"dflab option {name}[{k!r}] must be >= 0, got {v}")


def _check_choice(name: str, value, choices, what: str) -> None:
    _check_type(name, value, str)
    if value not in choices:
        raise ValueError(f"{what} {value!r}; expected one of {choices}")


class GPUOptions:
    def __init__(self, allow_growth=False, per_process_gpu_memory_fraction=0.0,
                 visible_device_list=""):
        self.allow_growth = allow_growth
        self.per_process_gpu_memory_fraction = per_process_gpu_memory_fraction
        self.visible_device_list = visible_device_list


class OptimizerOptions:
    L1 = 0
    L0 = -1
    DEFAULT = 0
    # GlobalJitLevel (XLA's JIT levels; dflab compiles nothing, the values are kept as set).
    OFF = -1
    ON_1 = 1
    ON_2 = 2

    def __init__(self, opt_level=0, do_constant_folding=True,
                 do_common_subexpression_elimination=True, do_function_inlining=True,
                 global_jit_level=0):
        self.opt_level = opt_level
        self.do_constant_folding = do_constant_folding
        self.do_common_subexpression_elimination = do_common_subexpression_elimination
        self.do_function_inlining = do_function_inlining
        self.global_jit_level = global_jit_level


class RewriterConfig:
    """TF's graph-rewriter switches. ``remapping`` controls the fusing passes: elementwise
    fusion (``dflab.runtime.fusion``) and contraction fusion (``dflab.runtime.remapper``).
    ``DEFAULT`` fuses elementwise groups on real GPU devices and contractions with their bias
    and activation on host CPUs whose kernels run on oneDNN; ``ON`` fuses both on every device
    with CPU kernels too (the NumPy evaluator, the members' kernels); ``OFF`` never."""

    DEFAULT = 0
    ON = 1
    OFF = 2

    def __init__(self, remapping=DEFAULT):
        if remapping not in (self.DEFAULT, self.ON, self.OFF):
            raise ValueError(f"RewriterConfig.remapping must be DEFAULT, ON or OFF, not "
                             f"{remapping!r}")
        self.remapping = remapping


class GraphOptions:
    def __init__(self, optimizer_options=None, build_cost_model=0, infer_shapes=False,
                 place_pruned_graph=False, enable_recv_scheduling=False, rewrite_options=None):
        self.optimizer_options = optimizer_options or OptimizerOptions()
        self.rewrite_options = rewrite_options or RewriterConfig()
        self.build_cost_model = build_cost_model
        self.infer_shapes = infer_shapes
        self.place_pruned_graph = place_pruned_graph
        self.enable_recv_scheduling = enable_recv_scheduling


class ConfigProto:
    """Session configuration. ``intra_op_parallelism_threads=0`` means every usable core, and
    ``inter_op_parallelism_threads=0`` one per core; with both left at 0, expensive host kernels
    run one at a time, each on every core (``runtime/worker.py``, ``Worker._set_intra_op``)."""

    def __init__(self, device_count=None, intra_op_parallelism_threads=0,
                 inter_op_parallelism_threads=0, use_per_session_threads=False,
                 allow_soft_placement=False, log_device_placement=False, gpu_options=None,
                 graph_options=None, operation_timeout_in_ms=0, isolate_session_state=False,
                 device_filters=None, **extra):
        self.device_count = dict(device_count or {})
        self.intra_op_parallelism_threads = intra_op_parallelism_threads
        self.inter_op_parallelism_threads = inter_op_parallelism_threads
        self.use_per_session_threads = use_per_session_threads
        self.allow_soft_placement = allow_soft_placement
        self.log_device_placement = log_device_placement
        self.gpu_options = gpu_options or GPUOptions()
        self.graph_options = graph_options or GraphOptions()
        self.operation_timeout_in_ms = operation_timeout_in_ms
        self.isolate_session_state = isolate_session_state
        # A session on a cluster sees only the devices matching one of these ("/job:ps",
        # "/job:worker/task:1"…); none: every device of the cluster.
        self.device_filters = list(device_filters or [])
        # dflab's own options, typed and checked (``DflabOptions``).
        self.dflab = extra.pop("dflab", None)
        if extra:
            raise TypeError(f"ConfigProto got unexpected fields: {sorted(extra)}")

    @property
    def dflab(self) -> DflabOptions:
        return self._dflab

    @dflab.setter
    def dflab(self, value) -> None:
        self._dflab = DflabOptions.from_value(value)

    def inter_op_threads(self) -> int:
        return self.inter_op_parallelism_threads or (os.cpu_count() or 1)


class RunOptions:
    NO_TRACE = 0
    SOFTWARE_TRACE = 1
    HARDWARE_TRACE = 2
    FULL_TRACE = 3

    def __init__(self, trace_level=0, timeout_in_ms=0, output_partition_graphs=False,
                 inter_op_thread_pool=0, report_tensor_allocations_upon_oom=False):
        self.trace_level = trace_level
        self.timeout_in_ms = timeout_in_ms
        self.output_partition_graphs = output_partition_graphs
        self.inter_op_thread_pool = inter_op_thread_pool
        self.report_tensor_allocations_upon_oom = report_tensor_allocations_upon_oom


# --- run metadata: TF's StepStats / CostGraphDef messages ------------------------------------
# Plain records with the protobuf field names and defaults (0, "", empty lists), so code written
# against TF's generated classes (``ns.output[0].tensor_description.shape.dim[0].size``) works.


class _Message:
    """Keyword construction, field-wise equality and a protobuf-text-like ``repr``."""

    _fields: tuple = ()

    def __eq__(self, other):
        return type(self) is type(other) and all(
            getattr(self, f) == getattr(other, f) for f in self._fields)

    __hash__ = None

    def __repr__(self):
        parts = []
        for f in self._fields:
            v = getattr(self, f)
            if v:
                parts.append(f"{f}={v!r}")
        return f"{type(self).__name__}({', '.join(parts)})"


class TensorShapeProto(_Message):
    """``dim[k].size`` per dimension (-1 when unknown); ``unknown_rank`` when the rank is."""

    _fields = ("dim", "unknown_rank")

    class Dim(_Message):
        _fields = ("size", "name")

        def __init__(self, size=0, name=""):
            self.size = size
            self.name = name

    def __init__(self, dim=None, unknown_rank=False):
        self.dim = [d if isinstance(d, TensorShapeProto.Dim) else TensorShapeProto.Dim(int(d))
                    for d in (dim or [])]
        self.unknown_rank = unknown_rank

    def as_list(self) -> list:
        return [d.size for d in self.dim]


class AllocationDescription(_Message):
    """Where an output tensor's buffer came from.

    dflab fills ``allocated_bytes`` with what *this node* allocated for the output: 0 when the
    output forwards an existing buffer (Identity, a variable read, a constant); forwarded outputs
    keep the ``allocation_id`` of the buffer they share.
    """

    _fields = ("requested_bytes", "allocated_bytes", "allocator_name", "allocation_id",
               "has_single_reference", "ptr")

    def __init__(self, requested_bytes=0, allocated_bytes=0, allocator_name="", allocation_id=0,
                 has_single_reference=False, ptr=0):
        self.requested_bytes = requested_bytes
        self.allocated_bytes = allocated_bytes
        self.allocator_name = allocator_name
        self.allocation_id = allocation_id
        self.has_single_reference = has_single_reference
        self.ptr = ptr


class TensorDescription(_Message):
    """``dtype`` is a dflab ``DType`` (``tf.float32``), not TF's integer enum."""

    _fields = ("dtype", "shape", "allocation_description")

    def __init__(self, dtype=None, shape=None, allocation_description=None):
        self.dtype = dtype
        self.shape = shape if shape is not None else TensorShapeProto()
        self.allocation_description = allocation_description or AllocationDescription()


class NodeOutput(_Message):
    _fields = ("slot", "tensor_description")

    def __init__(self, slot=0, tensor_description=None):
        self.slot = slot
        self.tensor_description = tensor_description or TensorDescription()


class AllocatorMemoryUsed(_Message):
    """One allocator's use by one node: bytes it allocated (``total_bytes``), its own peak
    (``peak_bytes``), what it left allocated (``live_bytes``) and the allocator's peak use while
    it ran (``allocator_bytes_in_use``)."""

    _fields = ("allocator_name", "total_bytes", "peak_bytes", "live_bytes",
               "allocator_bytes_in_use", "allocation_records")

    def __init__(self, allocator_name="", total_bytes=0, peak_bytes=0, live_bytes=0,
                 allocator_bytes_in_use=0, allocation_records=None):
        self.allocator_name = allocator_name
        self.total_bytes = total_bytes
        self.peak_bytes = peak_bytes
        self.live_bytes = live_bytes
        self.allocator_bytes_in_use = allocator_bytes_in_use
        self.allocation_records = list(allocation_records or [])


class MemoryStats(_Message):
    _fields = ("temp_memory_size", "persistent_memory_size", "persistent_tensor_alloc_ids")

    def __init__(self, temp_memory_size=0, persistent_memory_size=0,
                 persistent_tensor_alloc_ids=None):
        self.temp_memory_size = temp_memory_size
        self.persistent_memory_size = persistent_memory_size
        self.persistent_tensor_alloc_ids = list(persistent_tensor_alloc_ids or [])


class NodeExecStats(_Message):
    """One execution of one node (a node inside a loop gets one entry per iteration)."""

    _fields = ("node_name", "all_start_micros", "op_start_rel_micros", "op_end_rel_micros",
               "all_end_rel_micros", "memory", "output", "timeline_label", "scheduled_micros",
               "thread_id", "referenced_tensor", "memory_stats", "all_start_nanos",
               "op_start_rel_nanos", "op_end_rel_nanos", "all_end_rel_nanos",
               "scheduled_nanos", "fused_ops")

    def __init__(self, node_name="", all_start_micros=0, op_start_rel_micros=0,
                 op_end_rel_micros=0, all_end_rel_micros=0, memory=None, output=None,
                 timeline_label="", scheduled_micros=0, thread_id=0, referenced_tensor=None,
                 memory_stats=None, all_start_nanos=0, op_start_rel_nanos=0,
                 op_end_rel_nanos=0, all_end_rel_nanos=0, scheduled_nanos=0, fused_ops=None):
        self.node_name = node_name
        self.all_start_micros = all_start_micros
        self.op_start_rel_micros = op_start_rel_micros
        self.op_end_rel_micros = op_end_rel_micros
        self.all_end_rel_micros = all_end_rel_micros
        self.memory: list[AllocatorMemoryUsed] = list(memory or [])
        self.output: list[NodeOutput] = list(output or [])
        self.timeline_label = timeline_label
        self.scheduled_micros = scheduled_micros
        self.thread_id = thread_id
        self.referenced_tensor: list[AllocationDescription] = list(referenced_tensor or [])
        self.memory_stats = memory_stats or MemoryStats()
        self.all_start_nanos = all_start_nanos
        self.op_start_rel_nanos = op_start_rel_nanos
        self.op_end_rel_nanos = op_end_rel_nanos
        self.all_end_rel_nanos = all_end_rel_nanos
        self.scheduled_nanos = scheduled_nanos
        # dflab: the ops a fused node ran (its time is theirs), in order; empty otherwise.
        self.fused_ops: list[str] = list(fused_ops or [])


class DeviceStepStats(_Message):
    _fields = ("device", "node_stats", "thread_names")

    def __init__(self, device="", node_stats=None, thread_names=None):
        self.device = device
        self.node_stats: list[NodeExecStats] = list(node_stats or [])
        self.thread_names: dict[int, str] = dict(thread_names or {})


class StepStats(_Message):
    """TF's ``StepStats``; ``step_id`` (a dflab addition) tells concurrent runs' traces apart."""

    _fields = ("dev_stats", "step_id")

    def __init__(self, dev_stats=None, step_id=0):
        self.dev_stats: list[DeviceStepStats] = list(dev_stats or [])
        self.step_id = step_id


class CostGraphDef(_Message):
    """TF's ``CostGraphDef``: per node its device, inputs, output sizes and measured cost."""

    _fields = ("node", "cost")

    class Node(_Message):
        _fields = ("name", "device", "id", "input_info", "output_info",
                   "temporary_memory_size", "persistent_memory_size", "compute_cost",
                   "compute_time", "memory_time", "is_final", "control_input", "inaccurate")

        class InputInfo(_Message):
            _fields = ("preceding_node", "preceding_port")

            def __init__(self, preceding_node=0, preceding_port=0):
                self.preceding_node = preceding_node
                self.preceding_port = preceding_port

        class OutputInfo(_Message):
            _fields = ("size", "alias_input_port", "shape", "dtype")

            def __init__(self, size=0, alias_input_port=-1, shape=None, dtype=None):
                self.size = size
                self.alias_input_port = alias_input_port
                self.shape = shape if shape is not None else TensorShapeProto()
                self.dtype = dtype

        def __init__(self, name="", device="", id=0, input_info=None,  # noqa: A002 - TF name
                     output_info=None, temporary_memory_size=0, persistent_memory_size=0,
                     compute_cost=0, compute_time=0, memory_time=0, is_final=False,
                     control_input=None, inaccurate=False):
            self.name = name
            self.device = device
            self.id = id
            self.input_info = list(input_info or [])
            self.output_info = list(output_info or [])
            self.temporary_memory_size = temporary_memory_size
            self.persistent_memory_size = persistent_memory_size
            self.compute_cost = compute_cost
            self.compute_time = compute_time
            self.memory_time = memory_time
            self.is_final = is_final
            self.control_input = list(control_input or [])
            self.inaccurate = inaccurate

    def __init__(self, node=None, cost=None):
        self.node: list[CostGraphDef.Node] = list(node or [])
        self.cost = list(cost or [])


class TransferStats(_Message):
    """One tensor that crossed tasks in a step (a dflab addition to ``RunMetadata``): its
    rendezvous ``key``, ``tensor`` (the sent edge's name), the two devices, its bytes, and
    when it left and arrived (microseconds since the epoch, as ``NodeExecStats``)."""

    _fields = ("key", "tensor", "src_device", "dst_device", "bytes", "start_micros",
               "end_micros")

    def __init__(self, key="", tensor="", src_device="", dst_device="", bytes=0,  # noqa: A002
                 start_micros=0, end_micros=0):
        self.key = key
        self.tensor = tensor
        self.src_device = src_device
        self.dst_device = dst_device
        self.bytes = bytes
        self.start_micros = start_micros
        self.end_micros = end_micros

    @property
    def duration_micros(self) -> int:
        return self.end_micros - self.start_micros


class RunMetadata(_Message, RichDisplay):
    """What a traced ``Session.run`` reports. Each traced run replaces the contents (as TF's
    ``ParseFromString`` does), so one object can be reused across runs. ``transfers`` (a
    dflab addition): the tensors that crossed tasks of a cluster (``TransferStats``)."""

    _fields = ("step_stats", "cost_graph", "partition_graphs", "transfers", "step_replay")

    def __init__(self, step_stats=None, cost_graph=None, partition_graphs=None,
                 transfers=None, step_replay=None):
        self.step_stats = step_stats if step_stats is not None else StepStats()
        self.cost_graph = cost_graph if cost_graph is not None else CostGraphDef()
        self.partition_graphs: list = list(partition_graphs or [])
        self.transfers: list[TransferStats] = list(transfers or [])
        # Per CUDA GPU partition of the plan (a dflab addition): "replayed" when its untraced
        # steps are replayed as a captured CUDA graph, else why they are not.
        self.step_replay: dict[str, str] = dict(step_replay or {})

    def Clear(self) -> None:  # noqa: N802 - TF name
        self.step_stats = StepStats()
        self.cost_graph = CostGraphDef()
        self.partition_graphs = []
        self.transfers = []
        self.step_replay = {}


# TF 2.x keeps log_device_placement in its context's config, which a Session made without a
# config starts from; dflab keeps just that flag (tf.debugging.set_log_device_placement).
_log_device_placement = False


def get_log_device_placement() -> bool:
    """Whether sessions made without a ``config`` log where each op is placed."""
    return _log_device_placement


def set_log_device_placement(enabled) -> None:
    """Make sessions created later without a ``config`` log op placements (``enabled``)."""
    global _log_device_placement
    _log_device_placement = bool(enabled)


def default_config() -> ConfigProto:
    """The config of a session made without one."""
    return ConfigProto(log_device_placement=_log_device_placement)
