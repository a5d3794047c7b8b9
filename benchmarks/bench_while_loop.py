"""Benchmark 6: while_loop cost per iteration, and overlapping iterations.

Part 1: a ``while_loop`` of 10,000 iterations of a small body (a counter, ``x * 0.5 + 1``,
the test ``i < n``): time per iteration beside a Python loop calling the same NumPy functions
on the same scalars (target <= 3x), and beside TensorFlow 1.x's ``while_loop`` when installed.
Each dflab iteration runs about a dozen dataflow nodes (Merge, Switch, Identity, NextIteration,
Exit per loop variable, the condition, LoopCond and the body), each with frame bookkeeping.

Part 2: a loop of 16 iterations whose body multiplies its own input slice by two weight
matrices in a chain (two matmuls, 384x384, BLAS at one thread); nothing in an iteration waits
for another iteration's matmuls. With ``parallel_iterations=1`` iterations run one after
another, with ``10`` they overlap on the inter-op threads. Reported: the speed-up, and from a
traced run the largest number of iterations whose matmuls were running at the same moment.
"""

from __future__ import annotations

import _harness as h
import numpy as np
from threadpoolctl import threadpool_limits

import dflab as tf
from dflab.client.timeline import parse_timeline_label

N_ITER = 10_000
TARGET_RATIO = 3.0
MM_SIZE = 384
MM_ITERS = 16


def _scalar_loop():
    graph = tf.Graph()
    with graph.as_default():
        n = tf.placeholder(tf.int32, [], name="n")
        out = tf.while_loop(lambda i, x: i < n, lambda i, x: (i + 1, x * 0.5 + 1.0),
                            [tf.constant(0), tf.constant(0.0, tf.float64)])
    return graph, n, out


def _numpy_scalar_loop(n):
    i, x = np.int32(0), np.float64(0.0)
    one, half, step = np.int32(1), np.float64(0.5), np.float64(1.0)
    while np.less(i, n):
        i, x = np.add(i, one), np.add(np.multiply(x, half), step)
    return i, x


def _matmul_loop(parallel):
    rng = np.random.default_rng(0)
    graph = tf.Graph()
    with graph.as_default():
        xs = tf.constant(rng.standard_normal((MM_ITERS, MM_SIZE, MM_SIZE)) / MM_SIZE ** 0.5)
        w1 = tf.constant(rng.standard_normal((MM_SIZE, MM_SIZE)) / MM_SIZE ** 0.5)
        w2 = tf.constant(rng.standard_normal((MM_SIZE, MM_SIZE)) / MM_SIZE ** 0.5)

        def body(i, acc):
            h1 = tf.matmul(tf.gather(xs, i), w1)
            return i + 1, acc + tf.reduce_sum(tf.matmul(h1, w2))

        out = tf.while_loop(lambda i, acc: i < MM_ITERS, body,
                            [tf.constant(0), tf.constant(0.0, tf.float64)],
                            parallel_iterations=parallel)[1]
    return graph, out


def _max_overlapping_iterations(run_metadata) -> int:
    spans = []
    for dev in run_metadata.step_stats.dev_stats:
        for ns in dev.node_stats:
            if "MatMul" in ns.node_name:
                *_, frame, it = parse_timeline_label(ns.timeline_label)
                start = ns.all_start_micros
                spans.append((start, start + ns.all_end_rel_micros, (frame, it)))
    best = 0
    for s, _, _ in spans:
        live = {it for a, b, it in spans if a <= s < b}
        best = max(best, len(live))
    return best


def _tf1_scalar_loop(tf1):
    g = tf1.Graph()
    with g.as_default():
        n = tf1.placeholder(tf1.int32, [])
        out = tf1.while_loop(lambda i, x: i < n, lambda i, x: (i + 1, x * 0.5 + 1.0),
                             [tf1.constant(0), tf1.constant(0.0, tf1.float64)])
    return tf1.Session(graph=g), n, out


def main() -> h.Result:
    args = h.parse_args(__doc__.splitlines()[0])
    result = h.Result("while_loop", f"6. while_loop of {N_ITER:,} small iterations; "
                                    "overlapping iterations")
    n_iter = 1000 if args.quick else N_ITER
    with threadpool_limits(1):
        graph, n, out = _scalar_loop()
        sess = tf.Session(graph=graph)
        got = sess.run(out, {n: n_iter})
        want = _numpy_scalar_loop(n_iter)
        assert got[0] == want[0] and np.isclose(got[1], want[1])
        candidates = {
            "numpy python loop": lambda: _numpy_scalar_loop(n_iter),
            "dflab while_loop": lambda: sess.run(out, {n: n_iter}),
        }
        tf1 = h.optional_tf1()
        if tf1 is not None:
            s1, n1, out1 = _tf1_scalar_loop(tf1)
            candidates["tensorflow 1.x while_loop"] = lambda: s1.run(out1, {n1: n_iter})
        times = h.compare(candidates, repeat=h.repeats(args, 7), sample_s=0.2, warmup=1)
        base = times["numpy python loop"]
        for label, seconds in times.items():
            result.add(label, seconds / n_iter * 1e6, "us/iter", f"{seconds / base:.2f}x numpy")
        if tf1 is None:
            result.add("tensorflow 1.x while_loop", None, "us/iter", "not installed")

        config = tf.ConfigProto(inter_op_parallelism_threads=2)
        runs = {}
        overlap = {}
        for parallel in (1, 10):
            g, y = _matmul_loop(parallel)
            s = tf.Session(graph=g, config=config)
            runs[parallel] = (s, y)
            md = tf.RunMetadata()
            s.run(y, options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE),
                  run_metadata=md)
            overlap[parallel] = _max_overlapping_iterations(md)
        np.testing.assert_allclose(runs[1][0].run(runs[1][1]), runs[10][0].run(runs[10][1]))
        mm = h.compare({f"parallel_iterations={p}": (lambda s=s, y=y: s.run(y))
                        for p, (s, y) in runs.items()},
                       repeat=h.repeats(args, 7), sample_s=0.3, warmup=1)
        for s, _ in runs.values():
            s.close()
    for p in (1, 10):
        result.add(f"matmul loop, parallel_iterations={p}", mm[f"parallel_iterations={p}"] * 1e3,
                   "ms/run", f"iterations overlapping in the trace: {overlap[p]}")
    speedup = mm["parallel_iterations=1"] / mm["parallel_iterations=10"]
    ratio = times["dflab while_loop"] / base
    result.target = f"dflab / numpy loop <= {TARGET_RATIO:g}x per iteration"
    result.measured = f"{ratio:.2f}x"
    result.met = ratio <= TARGET_RATIO
    result.notes.append(f"matmul loop: parallel_iterations=10 is {speedup:.2f}x faster than 1 "
                        f"(inter_op=2, BLAS at 1 thread)")
    h.report(result, args)
    return result


if __name__ == "__main__":
    main()
