"""Intra-op parallelism on the host: with ``ConfigProto.intra_op_parallelism_threads`` above
one, a kernel's big work runs on that many threads.

One pool does all of it, as TensorFlow's CPU runtime runs everything on one Eigen pool:

* **Matrix products** (MatMul, and the GEMM of each convolution and its backprops) split into
  row or column chunks (convolutions over the batch), one per thread, with BLAS pinned to one
  thread per call (``matmul``, ``chunks(..., products=True)``).
* **Everything else that is big** splits the same way: elementwise ops over their first axis
  (``elementwise``), pooling and its gradient over the batch, dense optimizer updates over
  blocks (``chunks``/``run_chunks``). A waiting thread blocks.

Why not BLAS's own threads for the products: an OpenBLAS worker busy-waits for about 0.1 s
after each threaded call, so on a machine with few cores it takes a core from whatever runs
next: this pool's chunks (an Adam update on two threads took 10.3 ms, 18.9 ms right after a
threaded GEMM), or another framework in the same process. Products alone are somewhat faster
on BLAS's threads (a 128x784x512 product: 0.60 ms against 0.73 ms split), so
``ConfigProto(dflab={"intra_op_split_products": False})`` keeps them there, for graphs made
almost only of matrix products. Whole training steps, each configuration in its own process on
an idle 2-core machine (``benchmarks/RESULTS.md``, "Intra-op threads"): the CNN took 87-95 ms
split against 115-137 ms on BLAS's threads; the MLP and the LSTM were 5-10% faster on BLAS's.

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


def set_threads(n: int, split_products: bool = True) -> tuple[int, bool]:
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


# Work (in multiply-adds, as MIN_WORK) of one element of one memory-bound elementwise pass:
# such a pass moves a few bytes per element where a BLAS product does dozens of multiply-adds.
# An elementwise op starts to gain from a split at about 512K elements (measured: a 256K-element
# add took 0.11 ms whole, 0.15 ms split; at 512K both 0.22 ms; at 1.6M 1.7 against 1.0 ms).
PASS_WORK = 32

def elementwise(fn: Callable) -> Callable:
    """``fn``, an elementwise host kernel that takes ``out=`` (a ufunc, or a function of
    ufuncs: output element i depends on its inputs' elements i only, with NumPy broadcasting),
    split among the intra-op threads over its output's first axis when the output is big,
    each thread writing its rows of one output buffer. TF's CPU kernels do the same with
    Eigen's thread pool: such an op is bound by memory bandwidth, which one core does not
    draw in full (a bias add over 1.6M float32: 1.9 ms on one thread, 0.7 ms on two). The
    same elements go through the same NumPy calls, so the results are the same bits; small
    ops, and anything not made of arrays of one broadcast shape, call ``fn`` as it is."""

    def split_fn(*args):
        # The common case, a small op, returns after one cheap look at each argument.
        if _threads > 1:
            least = MIN_WORK // PASS_WORK
            for a in args:
                if getattr(a, "size", 0) >= least:
                    return split(args)
        return fn(*args)

    def split(args):
        shape = _broadcast_shape(args)
        if not shape or shape[0] < 2:
            return fn(*args)
        size = _product(shape)
        bounds = chunks(np, shape[0], float(size) * PASS_WORK)
        if len(bounds) == 1:
            return fn(*args)
        cut = [isinstance(a, np.ndarray) and a.ndim == len(shape) and a.shape[0] == shape[0]
               for a in args]

        def rows(lo, hi):
            return [a[lo:hi] if c else a for a, c in zip(args, cut)]

        trial = fn(*rows(0, 1))  # the result's dtype, and that fn maps rows to rows
        if not isinstance(trial, np.ndarray) or trial.shape != (1,) + shape[1:]:
            return fn(*args)
        out = np.empty(shape, trial.dtype)
        run_chunks(lambda lo, hi: fn(*rows(lo, hi), out=out[lo:hi]), bounds)
        return out

    split_fn.__name__ = getattr(fn, "__name__", "elementwise")
    return split_fn


def _broadcast_shape(args) -> tuple | None:
    """The broadcast shape of ``args`` (NumPy arrays and scalars), or None when one is neither
    or the shapes do not broadcast (``fn`` itself then raises its usual error)."""
    if not all(isinstance(a, (np.ndarray, np.generic, int, float, bool)) for a in args):
        return None
    try:
        return np.broadcast_shapes(*(np.shape(a) for a in args))
    except ValueError:
        return None


def _product(shape) -> int:
    size = 1
    for d in shape:
        size *= d
    return size


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
