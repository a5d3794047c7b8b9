"""Where a model step's time goes: per-op-type totals from a traced step, dflab vs TF 1.x.

Usage: ``python benchmarks/profile_models.py cnn [--steps N] [--threads T]``. Runs the model of
``bench_models.py`` under ``RunOptions(trace_level=FULL_TRACE)`` in dflab and (when installed)
TensorFlow 1.x, and prints the median over steps of each op type's summed kernel time, sorted
by dflab's share. The figures are kernel times from each framework's own step stats, so they
leave out the executor's bookkeeping between kernels; the wall time of the traced step is
printed alongside.
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


def _profile(tf, name: str, steps: int) -> tuple[dict[str, float], float]:
    """Median per-op-type kernel milliseconds per step, and the median traced step time."""
    _, data, build, _, _ = bm.MODELS[name]
    model = build(tf, *data(np.random.default_rng(0)))
    sess, fetch, feed = model.session, model.fetch, model.feed
    types = _op_types(sess.graph)
    options = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)
    per_type: dict[str, list[float]] = collections.defaultdict(list)
    walls = []
    for _ in range(steps):
        meta = tf.RunMetadata()
        t0 = time.perf_counter()
        sess.run(fetch, feed, options=options, run_metadata=meta)
        walls.append(time.perf_counter() - t0)
        totals: dict[str, float] = collections.defaultdict(float)
        for dev in meta.step_stats.dev_stats:
            for ns in dev.node_stats:
                op_type = types.get(ns.node_name.split(":")[0], ns.node_name)
                totals[op_type] += (ns.op_end_rel_micros - ns.op_start_rel_micros) / 1e3
        for op_type, ms in totals.items():
            per_type[op_type].append(ms)
    medians = {k: statistics.median(v + [0.0] * (steps - len(v))) for k, v in per_type.items()}
    return medians, statistics.median(walls) * 1e3


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
        results = {k: _profile(tf, args.model, args.steps) for k, tf in frameworks.items()}
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


if __name__ == "__main__":
    main()
