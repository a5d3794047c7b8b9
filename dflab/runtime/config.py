"""``ConfigProto``, ``RunOptions``, ``RunMetadata``: TF1's session configuration records.

Plain attribute containers with TF's field names, so TF1 code that builds them by keyword or sets
fields afterwards works unchanged.
"""

from __future__ import annotations

import os


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

    def __init__(self, opt_level=0, do_constant_folding=True,
                 do_common_subexpression_elimination=True, do_function_inlining=True,
                 global_jit_level=0):
        self.opt_level = opt_level
        self.do_constant_folding = do_constant_folding
        self.do_common_subexpression_elimination = do_common_subexpression_elimination
        self.do_function_inlining = do_function_inlining
        self.global_jit_level = global_jit_level


class GraphOptions:
    def __init__(self, optimizer_options=None, build_cost_model=0, infer_shapes=False,
                 place_pruned_graph=False, enable_recv_scheduling=False):
        self.optimizer_options = optimizer_options or OptimizerOptions()
        self.build_cost_model = build_cost_model
        self.infer_shapes = infer_shapes
        self.place_pruned_graph = place_pruned_graph
        self.enable_recv_scheduling = enable_recv_scheduling


class ConfigProto:
    """Session configuration. ``inter_op_parallelism_threads=0`` means one per core."""

    def __init__(self, device_count=None, intra_op_parallelism_threads=0,
                 inter_op_parallelism_threads=0, use_per_session_threads=False,
                 allow_soft_placement=False, log_device_placement=False, gpu_options=None,
                 graph_options=None, operation_timeout_in_ms=0, isolate_session_state=False,
                 **extra):
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
        # dflab extensions (documented in the README): placement policy, simulated devices…
        self.dflab = dict(extra.pop("dflab", {}) or {})
        if extra:
            raise TypeError(f"ConfigProto got unexpected fields: {sorted(extra)}")

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


class NodeExecStats:
    def __init__(self, node_name="", all_start_micros=0, op_start_rel_micros=0,
                 op_end_rel_micros=0, all_end_rel_micros=0, thread_id=0, output=None,
                 timeline_label=""):
        self.node_name = node_name
        self.all_start_micros = all_start_micros
        self.op_start_rel_micros = op_start_rel_micros
        self.op_end_rel_micros = op_end_rel_micros
        self.all_end_rel_micros = all_end_rel_micros
        self.thread_id = thread_id
        self.output = list(output or [])
        self.timeline_label = timeline_label


class DeviceStepStats:
    def __init__(self, device=""):
        self.device = device
        self.node_stats: list[NodeExecStats] = []


class StepStats:
    def __init__(self):
        self.dev_stats: list[DeviceStepStats] = []


class RunMetadata:
    def __init__(self):
        self.step_stats = StepStats()
        self.partition_graphs: list = []
        self.cost_graph = None
