"""Benchmark 19: the models' matrix products on oneDNN against NumPy's BLAS, shape by shape.

Every MatMul shape of ``bench_models.py``'s LSTM, MLP and CNN dense layers (transposed operands
as the gradients take them: views read through their strides), timed through the paths the
MatMul kernel can take: NumPy's BLAS on one thread and on ``--threads`` threads, dflab's
``IntraOpPool.matmul`` (the product split into row or column chunks on Python threads, BLAS on
one thread each), and oneDNN's matmul primitive (``onednn.Backend.matmul``) on one thread and
on ``--threads``. Each path's samples are taken together, after a pause for the previous
path's spinning threads to stop (``_times_apart``). The ratio per shape is BLAS's best
over oneDNN's at ``--threads``: above 1, oneDNN is faster. Reported, not judged: the figures
behind the MatMul kernel's size range for oneDNN and the ``onednn_products`` option
(docs/cpu.md, "Matrix products").
"""

from __future__ import annotations

import argparse
import time

import _harness as h
import numpy as np
from threadpoolctl import ThreadpoolController, threadpool_limits

from dflab.kernels import intra_op, onednn

# name: (a's shape as stored, b's shape as stored, transpose_a, transpose_b)
SHAPES = {
    "LSTM cell forward (20x400 @ 400x800)": ((20, 400), (400, 800), False, False),
    "LSTM cell input gradient": ((20, 800), (400, 800), False, True),
    "LSTM cell weight gradient": ((20, 400), (20, 800), True, False),
    "LSTM softmax forward (400x200 @ 200x10000)": ((400, 200), (200, 10000), False, False),
    "LSTM softmax input gradient": ((400, 10000), (200, 10000), False, True),
    "LSTM softmax weight gradient": ((400, 200), (400, 10000), True, False),
    "MLP layer 1 forward (128x784 @ 784x512)": ((128, 784), (784, 512), False, False),
    "MLP layer 1 weight gradient": ((128, 784), (128, 512), True, False),
    "MLP layer 2 input gradient": ((128, 512), (512, 512), False, True),
    "CNN dense forward (64x3136 @ 3136x1024)": ((64, 3136), (3136, 1024), False, False),
    "CNN dense weight gradient": ((64, 3136), (64, 1024), True, False),
    "CNN dense input gradient": ((64, 1024), (3136, 1024), False, True),
}


def _operands(rng, a_shape, b_shape, ta, tb):
    a = rng.standard_normal(a_shape, dtype=np.float32)
    b = rng.standard_normal(b_shape, dtype=np.float32)
    return (a.T if ta else a), (b.T if tb else b)


class _Paths:
    """The paths a MatMul can take, as candidates for ``_harness.compare``."""

    def __init__(self, lib, threads: int):
        self.threads = threads
        self.dnn1, self.dnn_n = onednn.Backend(lib, 1), onednn.Backend(lib, threads)
        self.pool = intra_op.IntraOpPool(threads, split_products=True)
        self._blas = [c for c in ThreadpoolController().lib_controllers if c.user_api == "blas"]

    def set_blas_threads(self, k: int) -> None:
        for c in self._blas:  # ~1 us: a threadpool_limits block costs ~0.5 ms per call
            c.set_num_threads(k)

    def candidates(self, a, b) -> dict:
        n = self.threads

        def blas(threads):
            def run():
                self.set_blas_threads(threads)
                np.matmul(a, b)
            return run

        def split():
            self.set_blas_threads(1)
            self.pool.matmul(a, b)

        # BLAS's threads last: they spin for a while after each call, taking a core from
        # whatever runs next (the pause before each sample lets them stop).
        return {"oneDNN 1": lambda: self.dnn1.matmul(a, b),
                f"oneDNN {n}": lambda: self.dnn_n.matmul(a, b), f"split {n}": split,
                "BLAS 1": blas(1), f"BLAS {n}": blas(n)}


def _times_apart(candidates: dict, repeat: int) -> dict:
    """Median seconds per call of each candidate, its samples taken together after a pause:
    interleaved samples measured each path under the previous one's spinning threads (BLAS's
    for ~0.2 s after a threaded call, OpenMP's briefly), which on two cores halved the next
    path's speed."""
    times = {}
    for label, fn in candidates.items():
        time.sleep(0.3)
        times[label] = h.compare({label: fn}, repeat=repeat, sample_s=0.02)[label]
    return times


def main() -> h.Result:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--quick", action="store_true", help="few samples: a smoke run")
    p.add_argument("--json", metavar="PATH", help="also write the result as JSON to PATH")
    args = p.parse_args()
    lib = onednn.library()
    n = args.threads
    result = h.Result("products", f"19. Matrix products: oneDNN vs BLAS ({n} threads)")
    if lib is None:
        result.notes.append(onednn.status())
        h.report(result, args)
        return result
    paths = _Paths(lib, n)
    rng = np.random.default_rng(0)
    ratios = []
    with threadpool_limits(n):  # leaving it puts BLAS's threads back as they were
        for name, shape in SHAPES.items():
            a, b = _operands(rng, *shape)
            np.testing.assert_allclose(paths.dnn_n.matmul(a, b), a @ b, rtol=1e-4, atol=1e-3)
            times = _times_apart(paths.candidates(a, b), h.repeats(args, 9))
            ratio = min(times[f"BLAS {n}"], times[f"split {n}"]) / times[f"oneDNN {n}"]
            ratios.append(ratio)
            note = ", ".join(f"{k} {v * 1e3:.3f}" for k, v in times.items())
            result.add(name, ratio, "x", f"ms: {note}")
    paths.pool.close()
    result.target = f"BLAS's best / oneDNN's at {n} threads, per shape (reported)"
    result.measured = f"{min(ratios):.2f}x to {max(ratios):.2f}x"
    h.report(result, args)
    return result


if __name__ == "__main__":
    main()
