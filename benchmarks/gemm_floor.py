"""The CNN step's matrix products alone, in NumPy, beside TensorFlow's whole step.

Usage: ``python benchmarks/gemm_floor.py [--threads T]``. dflab's CPU convolutions are im2col
plus one BLAS product (NumPy's OpenBLAS), so a CNN step can be no faster than its products:
this times exactly those products (on prebuilt, contiguous operands: no im2col, no
elementwise ops, no executor) with BLAS at ``T`` threads, and split in ``T`` row or column
chunks on ``T`` Python threads by dflab's own ``IntraOpPool.matmul``, interleaved with
TensorFlow 1.x's complete training step when TensorFlow is installed. What is left of 1.5x
TensorFlow's step after the products is what all the rest of a dflab step may take to meet
the 1.5x goal.
"""

from __future__ import annotations

import argparse

import _harness as h
import bench_models as bm
import numpy as np
from threadpoolctl import threadpool_limits

from dflab.kernels import intra_op

B = bm.CNN_BATCH
# (M, K, N) of every product of one training step of bench_models' CNN, NHWC, im2col layout.
PRODUCTS = {
    "conv1 forward": (B * 28 * 28, 25, 32),
    "conv1 filter gradient": (25, B * 28 * 28, 32),
    "conv2 forward": (B * 14 * 14, 800, 64),
    "conv2 filter gradient": (800, B * 14 * 14, 64),
    "conv2 input gradient (a stride-1 convolution)": (B * 14 * 14, 1600, 32),
    "fc1 forward": (B, 3136, 1024),
    "fc1 weight gradient": (3136, B, 1024),
    "fc1 input gradient": (B, 1024, 3136),
    "fc2 forward, weight and input gradients": (B, 1024, 10),
}


def _operands(rng):
    return {name: (rng.standard_normal((m, k), dtype=np.float32),
                   rng.standard_normal((k, n), dtype=np.float32))
            for name, (m, k, n) in PRODUCTS.items()}


def main() -> h.Result:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=bm.THREADS)
    args = p.parse_args()
    ops = _operands(np.random.default_rng(0))
    fc2 = 3  # the fc2 products are tiny; counted three times (forward and two gradients)
    pool = intra_op.IntraOpPool(args.threads, split_products=True)  # the split candidate's

    def products(split):
        def run():
            # BLAS's own threads for the unsplit products, one per chunk for the split ones.
            with threadpool_limits(1 if split else args.threads):
                for name, (a, b) in ops.items():
                    for _ in range(fc2 if name.startswith("fc2") else 1):
                        if split:
                            pool.matmul(a, b)  # dflab's row or column chunks
                        else:
                            np.matmul(a, b)
        return run

    result = h.Result("gemm_floor", "CNN step: its matrix products alone (NumPy) vs TF's step")
    candidates = {"NumPy products, BLAS threads": products(False),
                  "NumPy products, split on Python threads": products(True)}
    tf1 = h.optional_tf1()
    if tf1 is not None:
        bm.THREADS = args.threads
        candidates["TensorFlow 1.x: whole training step"] = \
            bm.cnn_tf(tf1, *bm.cnn_data(np.random.default_rng(0))).step
    times = h.compare(candidates, repeat=9, settle_s=bm.SETTLE_S)
    for label, t in times.items():
        result.add(label, t * 1e3, "ms")
    floor = min(times["NumPy products, BLAS threads"],
                times["NumPy products, split on Python threads"])
    if tf1 is not None:
        tf_step = times["TensorFlow 1.x: whole training step"]
        ratio = floor / tf_step
        # Reported, not judged: what is left of 1.5x TF's step for everything but products.
        result.target = "products alone vs TF's whole step (a floor for dflab's CNN step)"
        result.measured = (f"{ratio:.2f}x, leaving {(1.5 - ratio) * tf_step * 1e3:.0f} ms of a "
                           f"1.5x step for im2col, pooling, elementwise ops, Adam, the executor")
    h.report(result, argparse.Namespace(quick=False, json=None))
    return result


if __name__ == "__main__":
    main()
