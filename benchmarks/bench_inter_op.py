"""Benchmark 4: inter-op parallelism on two independent matmuls (target >= 1.6x speed-up).

Two independent 1024x1024 float32 matmul branches, BLAS limited to one thread with
threadpoolctl, so any speed-up comes from the executor running the branches on two threads
at once (NumPy releases the GIL inside BLAS). Compares sessions with
``inter_op_parallelism_threads`` 2 and 1, next to NumPy sequentially and NumPy on a hand-made
two-thread pool (the best two threads can do here).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import _harness as h
import numpy as np
from _harness import ONE_THREAD
from threadpoolctl import threadpool_limits

import dflab as tf

N = 1024
TARGET_SPEEDUP = 1.6


def main() -> h.Result:
    args = h.parse_args(__doc__.splitlines()[0])
    result = h.Result("inter_op", f"4. Two independent {N}x{N} matmuls, BLAS at 1 thread")
    rng = np.random.default_rng(0)
    a, b, c, d = (rng.standard_normal((N, N)).astype(np.float32) for _ in range(4))

    graph = tf.Graph()
    with graph.as_default():
        left = tf.matmul(tf.constant(a), tf.constant(b))
        right = tf.matmul(tf.constant(c), tf.constant(d))
    sessions = {
        threads: tf.Session(graph=graph, config=tf.ConfigProto(
            inter_op_parallelism_threads=threads, **ONE_THREAD))
        for threads in (1, 2)
    }
    pool = ThreadPoolExecutor(2)

    def numpy_two_threads():
        f1 = pool.submit(np.matmul, a, b)
        f2 = pool.submit(np.matmul, c, d)
        return f1.result(), f2.result()

    with threadpool_limits(1):
        got = sessions[2].run([left, right])
        np.testing.assert_allclose(got[0], a @ b, rtol=1e-4, atol=1e-3)
        candidates = {
            "numpy sequential": lambda: (a @ b, c @ d),
            "numpy 2-thread pool": numpy_two_threads,
            "dflab inter_op=1": lambda: sessions[1].run([left, right]),
            "dflab inter_op=2": lambda: sessions[2].run([left, right]),
        }
        times = h.compare(candidates, repeat=h.repeats(args, 15), sample_s=0.3)
    pool.shutdown()

    base = times["dflab inter_op=1"]
    for label, seconds in times.items():
        result.add(label, seconds * 1e3, "ms/run", f"{base / seconds:.2f}x vs inter_op=1")
    speedup = base / times["dflab inter_op=2"]
    result.target = f"inter_op=2 >= {TARGET_SPEEDUP:g}x faster than inter_op=1"
    result.measured = f"{speedup:.2f}x"
    result.met = speedup >= TARGET_SPEEDUP
    seq = times["numpy sequential"]
    result.notes.append(
        f"vs numpy sequential: inter_op=1 {seq / base:.2f}x, "
        f"inter_op=2 {seq / times['dflab inter_op=2']:.2f}x, "
        f"numpy 2-thread pool {seq / times['numpy 2-thread pool']:.2f}x")
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count() or 1
    if usable < 2:
        result.met = None
        result.notes.append("fewer than 2 usable cores: speed-up not judged")
    h.report(result, args)
    return result


if __name__ == "__main__":
    main()
