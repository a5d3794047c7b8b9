"""Where a model step's time goes: per-op-type totals from a traced step, dflab vs TF 1.x.

Usage: ``python benchmarks/profile_models.py cnn [--steps N] [--threads T]``. Runs the model of
``bench_models.py`` under ``RunOptions(trace_level=FULL_TRACE)`` in dflab and (when installed)
TensorFlow 1.x, one traced step of each in turn, and prints the median over steps of each op
type's summed kernel time, sorted by dflab's share, then summed by what bounds them
(GEMM-based ops, optimizer updates, pooling, the rest). The figures are kernel times from
each framework's own step stats, so they leave out the executor's bookkeeping between
kernels; the wall time of the traced step is printed alongside.
"""

from __future__ import annotations

import argparse
import collections
import statistics
import time

import _harness as h
import bench_models as bm
import numpy as np
from threadpoolctl import threadpool_limits

import dflab


def _op_types(graph) -> dict[str, str]:
    return {op.name: op.type for op in graph.get_operations()}


class _Traced:
    """One framework's model, traced step by step into per-op-type kernel times."""

    def __init__(self, tf, name: str):
        _, data, build, _, _ = bm.MODELS[name]
        self.tf = tf
        self.model = build(tf, *data(np.random.default_rng(0)))
        self.types = _op_types(self.model.session.graph)
        self.per_type: dict[str, list[float]] = collections.defaultdict(list)
        self.walls: list[float] = []

    def step(self) -> None:
        tf, model = self.tf, self.model
        options = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)
        meta = tf.RunMetadata()
        t0 = time.perf_counter()
        model.session.run(model.fetch, model.feed, options=options, run_metadata=meta)
        self.walls.append(time.perf_counter() - t0)
        totals: dict[str, float] = collections.defaultdict(float)
        for dev in meta.step_stats.dev_stats:
            for ns in dev.node_stats:
                op_type = self.types.get(ns.node_name.split(":")[0], ns.node_name)
                totals[op_type] += (ns.op_end_rel_micros - ns.op_start_rel_micros) / 1e3
        for op_type, ms in totals.items():
            self.per_type[op_type].append(ms)

    def medians(self) -> tuple[dict[str, float], float]:
        """Median per-op-type kernel milliseconds per step, and the median traced step."""
        n = len(self.walls)
        per = {k: statistics.median(v + [0.0] * (n - len(v))) for k, v in self.per_type.items()}
        return per, statistics.median(self.walls) * 1e3


def _profile(frameworks: dict, name: str, steps: int) -> dict:
    """Traced steps of every framework, interleaved (one step each in turn), so a change in
    the machine's load falls on all of them alike; a first untraced step each is dropped."""
    traced = {k: _Traced(tf, name) for k, tf in frameworks.items()}
    for t in traced.values():
        t.model.step()
    for _ in range(steps):
        for t in traced.values():
            t.step()
    return {k: t.medians() for k, t in traced.items()}


# Op types by what bounds their time, for the summary after the per-type table. TF fuses
# Conv2D + BiasAdd + Relu into one node reported as ``Relu``, so ``Relu`` counts as GEMM-based
# for TF (for dflab it is an elementwise op of a few ms at most).
GROUPS = {
    "GEMM-based (MatMul, Conv2D and its backprops)": {
        "MatMul", "Conv2D", "Conv2DBackpropFilter", "Conv2DBackpropInput", "_FusedConv2D",
        "_FusedMatMul"},
    "optimizer updates": {"ApplyAdam", "ResourceApplyAdam", "ApplyGradientDescent",
                          "ResourceApplyGradientDescent", "ScatterSub", "ScatterAdd",
                          "ResourceScatterSub", "ResourceScatterAdd"},
    "pooling and its gradient": {"MaxPool", "MaxPoolGrad", "AvgPool", "AvgPoolGrad"},
}


def _group_of(framework: str, op_type: str) -> str:
    if op_type == "Relu" and framework == "tf1":
        return "GEMM-based (MatMul, Conv2D and its backprops)"
    for group, types in GROUPS.items():
        if op_type in types:
            return group
    return "elementwise, reductions and the rest"


def _print_groups(results) -> None:
    totals: dict[str, dict[str, float]] = collections.defaultdict(dict)
    for framework, (per_type, _) in results.items():
        for op_type, ms in per_type.items():
            g = _group_of(framework, op_type)
            totals[g][framework] = totals[g].get(framework, 0.0) + ms
    print("  by group:")
    for g in list(GROUPS) + ["elementwise, reductions and the rest"]:
        cells = "".join(f"{totals[g].get(k, 0.0):>10.2f}" for k in results)
        print(f"  {g:<48}{cells}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model", choices=list(bm.MODELS))
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--threads", type=int, default=bm.THREADS)
    args = p.parse_args()
    bm.THREADS = args.threads
    frameworks = {"dflab": dflab}
    tf1 = h.optional_tf1()
    if tf1 is not None:
        frameworks["tf1"] = tf1
    with threadpool_limits(args.threads):
        results = _profile(frameworks, args.model, args.steps)
    types = sorted(set().union(*(r[0] for r in results.values())),
                   key=lambda k: -results["dflab"][0].get(k, 0.0))
    print(f"{args.model}: kernel ms per step by op type (median of {args.steps} traced steps, "
          f"{args.threads} threads)")
    print(f"  {'op type':<34}" + "".join(f"{k:>10}" for k in results))
    for t in types:
        cells = "".join(f"{r[0].get(t, 0.0):>10.2f}" for r in results.values())
        print(f"  {t:<34}{cells}")
    print(f"  {'sum of kernels':<34}" + "".join(f"{sum(r[0].values()):>10.2f}"
                                                for r in results.values()))
    print(f"  {'traced step, wall':<34}" + "".join(f"{r[1]:>10.2f}" for r in results.values()))
    _print_groups(results)


if __name__ == "__main__":
    main()
