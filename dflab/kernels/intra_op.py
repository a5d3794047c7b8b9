"""Intra-op parallelism on the host: with ``ConfigProto.intra_op_parallelism_threads`` above
one, a kernel's work runs on that many threads.

Two kinds of work, two ways:

* **Matrix products** (MatMul, and the GEMM of each convolution and its backprops) run on
  BLAS's own threads: BLAS is given the configured count and each product is one call. On an
  idle 2-core machine this is the faster way: an MLP step took 10.8 ms against 16.4 ms split
  in Python chunks, an LSTM step 183 against 233 ms, and the CNN's products alone 107 against
  132 ms (``benchmarks/RESULTS.md``, "Intra-op threads").
* **Everything else that is big** (pooling and its gradient, which BLAS does not do) splits
  into one coarse chunk per thread (``chunks``/``run_chunks``); a waiting thread blocks.

``ConfigProto(dflab={"intra_op_split_products": True})`` splits the products too, into row or
column chunks on those threads with BLAS pinned to one thread per call. That is the better
choice on a machine whose cores are busy with other processes: OpenBLAS synchronises its
workers many times inside one GEMM and lets idle workers spin between calls, so under a load
of 7-16 on two cores a dense layer's product took 63.8 ms on two BLAS threads against 11.9 ms
on one.

The setting is process-wide, as BLAS's own thread count is: a session sets it while it is open
(``set_threads``). With the default (0) nothing is split and BLAS keeps its own threads. Only
NumPy work is split: a GPU's kernels run on its stream.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

_lock = threading.Lock()
_threads = 1
_split_products = False  # matrix products in Python chunks (True) or on BLAS's threads
_pool: ThreadPoolExecutor | None = None

# Below this many multiply-adds a split costs more than it saves: handing a chunk to another
# thread and waiting for it costs tens of microseconds on an idle machine and milliseconds on
# a loaded one (the LSTM step's 20x400x800 products lost time when split).
MIN_WORK = 1 << 24


def set_threads(n: int, split_products: bool = False) -> tuple[int, bool]:
    """Use ``n`` threads per splittable host op from now on, splitting matrix products too
    when ``split_products``; returns the previous setting (``set_threads(*previous)``
    restores it)."""
    global _threads, _split_products, _pool
    n = max(int(n), 1)
    with _lock:
        previous = _threads, _split_products
        _threads, _split_products = n, bool(split_products)
        if n > 1 and (_pool is None or _pool._max_workers < n - 1):
            old, _pool = _pool, ThreadPoolExecutor(n - 1, thread_name_prefix="dflab-intra-op")
            if old is not None:
                old.shutdown(wait=False)
    return previous


def threads() -> int:
    return _threads


def splits_products() -> bool:
    """Whether matrix products are split in Python chunks (else BLAS threads them)."""
    return _split_products and _threads > 1


def chunks(xp, n: int, work: float, products: bool = False) -> list[tuple[int, int]]:
    """Contiguous ``[lo, hi)`` bounds splitting ``range(n)`` among the configured threads, or
    one chunk when there is one thread, ``xp`` is not NumPy or ``work`` is too small. Work
    that is mostly matrix products (``products``) is one chunk unless products are split:
    BLAS threads it."""
    k = min(_threads, n)
    if k <= 1 or xp is not np or work < MIN_WORK or (products and not _split_products):
        return [(0, n)]
    step, extra = divmod(n, k)
    bounds, lo = [], 0
    for i in range(k):
        hi = lo + step + (i < extra)
        bounds.append((lo, hi))
        lo = hi
    return bounds


def run_chunks(fn: Callable[[int, int], object], bounds: list[tuple[int, int]]) -> list:
    """``[fn(lo, hi) for (lo, hi) in bounds]``, the first chunk on the calling thread and the
    others on the pool at the same time; the first error is raised after all have finished."""
    if len(bounds) == 1:
        return [fn(*bounds[0])]
    pool = _pool
    futures = [pool.submit(fn, lo, hi) for lo, hi in bounds[1:]]
    results, error = [], None
    try:
        results.append(fn(*bounds[0]))
    except BaseException as e:  # noqa: BLE001 - re-raised below, after the others finish
        error = e
    for f in futures:
        try:
            results.append(f.result())
        except BaseException as e:  # noqa: BLE001
            error = error or e
    if error is not None:
        raise error
    return results


def matmul(a, b):
    """``a @ b`` for 2-d NumPy arrays, split among the threads along the output's longer side:
    its rows, or its columns for a short, wide product (a dense layer's forward product and
    input gradient at a small batch: split by rows, each chunk's GEMM got a few rows of ``a``
    against all of ``b`` and ran slower than the whole product on one thread). Each chunk
    writes its block of one output buffer. Unless products are split, one call on BLAS's
    threads."""
    if not splits_products() or a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        return np.matmul(a, b)  # nothing to split, or NumPy's own error for bad shapes
    (m, k), n = a.shape, b.shape[1]
    by_rows = m >= n
    bounds = chunks(np, m if by_rows else n, float(m) * k * n, products=True)
    if len(bounds) == 1:
        return np.matmul(a, b)
    out = np.empty((m, n), dtype=np.result_type(a, b))

    def rows(lo, hi):
        np.matmul(a[lo:hi], b, out=out[lo:hi])

    def columns(lo, hi):
        np.matmul(a, b[:, lo:hi], out=out[:, lo:hi])

    run_chunks(rows if by_rows else columns, bounds)
    return out
