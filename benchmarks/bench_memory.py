"""Benchmark 5: peak memory of a 100-op chain over 64 MB tensors (target <= 4 x 64 MB).

A placeholder fed with a 64 MB float32 array goes through 100 dependent elementwise ops
(alternating add and multiply by scalars). The executor should free every intermediate at its
last use, so the peak should be about two live tensors (the op's input and its output), not
100. Peak is what tracemalloc sees allocated during one run of an already-planned graph (NumPy
reports its data buffers to tracemalloc); the fed array, allocated before, does not count, the
fetched result does. Baselines: the same chain as a NumPy loop, and NumPy in place.
"""

from __future__ import annotations

import gc
import tracemalloc

import _harness as h
import numpy as np
from _harness import ONE_THREAD
from threadpoolctl import threadpool_limits

import dflab as tf

MB = 1 << 20
N_ELEMS = 64 * MB // 4  # float32
N_OPS = 100
TARGET_X = 4.0


def _peak_bytes(fn) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        out = fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    del out
    return peak


def main() -> h.Result:
    args = h.parse_args(__doc__.splitlines()[0])
    result = h.Result("memory", f"5. Peak memory, {N_OPS}-op chain over 64 MB tensors")
    x_val = np.random.default_rng(0).random(N_ELEMS, dtype=np.float32)

    graph = tf.Graph()
    with graph.as_default():
        x = tf.placeholder(tf.float32, [N_ELEMS], name="x")
        y = x
        for i in range(N_OPS):
            y = tf.add(y, 0.5) if i % 2 == 0 else tf.multiply(y, 0.999)
    sess = tf.Session(graph=graph, config=tf.ConfigProto(**ONE_THREAD))

    def numpy_loop():
        y = x_val
        for i in range(N_OPS):
            y = y + np.float32(0.5) if i % 2 == 0 else y * np.float32(0.999)
        return y

    def numpy_in_place():
        y = x_val.copy()
        for i in range(N_OPS):
            if i % 2 == 0:
                y += np.float32(0.5)
            else:
                y *= np.float32(0.999)
        return y

    with threadpool_limits(1):
        np.testing.assert_allclose(sess.run(y, {x: x_val}), numpy_loop(), rtol=1e-5)
        peaks = {
            "numpy in place": _peak_bytes(numpy_in_place),
            "numpy loop (new array per op)": _peak_bytes(numpy_loop),
            "dflab sess.run": _peak_bytes(lambda: sess.run(y, {x: x_val})),
        }

    for label, peak in peaks.items():
        result.add(label, peak / MB, "MB", f"{peak / (64 * MB):.2f} x 64 MB")
    dflab_x = peaks["dflab sess.run"] / (64 * MB)
    result.target = f"peak <= {TARGET_X:g} x 64 MB"
    result.measured = f"{dflab_x:.2f} x 64 MB"
    result.met = dflab_x <= TARGET_X
    h.report(result, args)
    return result


if __name__ == "__main__":
    main()
