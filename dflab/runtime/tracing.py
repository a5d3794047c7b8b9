"""Step tracing: an executor observer that records when each node ran, where, on which thread.

Attached only when ``RunOptions.trace_level`` asks for it, so untraced runs pay nothing. Fills
``RunMetadata.step_stats`` with TF's field names (``dev_stats[k].node_stats[m]`` …).
"""

from __future__ import annotations

import threading
import time

from dflab.runtime.config import DeviceStepStats, NodeExecStats


class StepTracer:
    def __init__(self, plan):
        self.plan = plan
        self.records: dict[int, list] = {}
        self._lock = threading.Lock()
        self._t0_wall = time.time()
        self._t0 = time.perf_counter()

    def _micros(self) -> int:
        return int((self._t0_wall + (time.perf_counter() - self._t0)) * 1e6)

    def node_start(self, execution, node) -> None:
        self.records[node.index] = [self._micros(), 0, threading.get_ident()]

    def node_end(self, execution, node) -> None:
        rec = self.records[node.index]
        rec[1] = self._micros()
        outs = execution.slots[node.out_base:node.out_base + node.n_out]
        rec.append(sum(int(getattr(o, "nbytes", 0)) for o in outs if o is not None))

    def fill(self, run_metadata, options) -> None:
        by_device: dict[str, DeviceStepStats] = {}
        for i, rec in sorted(self.records.items(), key=lambda kv: kv[1][0]):
            node = self.plan.executor_plan.nodes[i]
            dev = self.plan.placement[node.op].device
            ds = by_device.setdefault(dev, DeviceStepStats(dev))
            start, end, tid = rec[0], rec[1], rec[2]
            nbytes = rec[3] if len(rec) > 3 else 0
            ds.node_stats.append(NodeExecStats(
                node_name=node.op.name, all_start_micros=start, op_start_rel_micros=0,
                op_end_rel_micros=end - start, all_end_rel_micros=end - start,
                thread_id=tid, output=[{"bytes": nbytes}],
                timeline_label=f"{node.op.name} = {node.op.type}()",
            ))
        run_metadata.step_stats.dev_stats.extend(by_device.values())
        if options.output_partition_graphs:
            run_metadata.partition_graphs.append(_plan_graph_def(self.plan))


def _plan_graph_def(plan):
    from dflab.framework.graph_io import GraphDef, node_def_of

    nodes = []
    for op in plan.ops:
        nd = node_def_of(op)
        nd.device = plan.placement[op].device
        nodes.append(nd)
    return GraphDef(nodes)

