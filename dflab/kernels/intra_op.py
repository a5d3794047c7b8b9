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
an idle 2-core machine (``benchmarks/RESULTS.md``, "Measured fairly"): the CNN took 87-95 ms
split against 115-137 ms on BLAS's threads; the MLP and the LSTM were 5-10% faster on BLAS's.

The setting is process-wide, as BLAS's own thread count is: a session sets it while it is open
(``set_threads``). With the default (0) nothing is split and BLAS keeps its own threads. Only
NumPy work is split: a GPU's kernels run on its stream.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable

import numpy as np

_lock = threading.Lock()
_threads = 1
_split_products = True  # matrix products in Python chunks (True) or on BLAS's threads
_workers: list = []  # every pool thread made so far (``_Worker``)
_idle: list = []  # those not running a chunk now

# Below this many multiply-adds a split costs more than it saves: handing a chunk to another
# thread and waiting for it costs about 12 us on an idle machine, and more on a loaded one.
MIN_WORK = 1 << 24
# Matrix products gain from a split sooner: a 20x400x800 product (6.4M multiply-adds, an LSTM
# cell's) took 255 us on one thread and 195 us split, a 20x200x800 one 110 against 117 us.
MIN_PRODUCT_WORK = 1 << 22
# Fewest rows per chunk of a product split by rows (see ``matmul``).
_MIN_CHUNK_ROWS = 64


def set_threads(n: int, split_products: bool = True) -> tuple[int, bool]:
    """Use ``n`` threads per splittable host op from now on, splitting matrix products too
    when ``split_products``; returns the previous setting (``set_threads(*previous)``
    restores it)."""
    global _threads, _split_products
    n = max(int(n), 1)
    with _lock:
        previous = _threads, _split_products
        _threads, _split_products = n, bool(split_products)
        while len(_workers) < n - 1:
            worker = _Worker()
            _workers.append(worker)
            _idle.append(worker)
    return previous


class _Worker:
    """A pool thread, handed one chunk at a time through two locks: a hand-off and its
    completion cost about 12 us this way, against 33 us through a ThreadPoolExecutor's
    future, and a split is worth making from a few hundred microseconds of work."""

    def __init__(self):
        self._go = threading.Lock()
        self._go.acquire()
        self._done = threading.Lock()
        self._done.acquire()
        self._task = None
        self._outcome = None
        threading.Thread(target=self._loop, name="dflab-intra-op", daemon=True).start()

    def _loop(self) -> None:
        while True:
            self._go.acquire()
            fn, lo, hi = self._task
            try:
                self._outcome = (fn(lo, hi), None)
            except BaseException as e:  # noqa: BLE001 - handed to the waiting caller
                self._outcome = (None, e)
            # Let the chunk's closure go before waiting for the next: it holds the op's arrays,
            # which would otherwise stay alive (and look held to an in-place update) until then.
            fn = self._task = None
            self._done.release()

    def start(self, fn, lo: int, hi: int) -> None:
        self._task = (fn, lo, hi)
        self._go.release()

    def wait(self) -> tuple:
        """(result, error) of the chunk started last."""
        self._done.acquire()
        outcome, self._outcome = self._outcome, None
        return outcome


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
    if k <= 1 or xp is not np or work < (MIN_PRODUCT_WORK if products else MIN_WORK) or (
            products and not _split_products):
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
    others on idle pool threads at the same time; a chunk no idle thread is left for (several
    ops splitting at once, on inter-op threads) runs on the caller after its own. The first
    error is raised after all chunks have finished."""
    if len(bounds) == 1:
        return [fn(*bounds[0])]
    with _lock:
        k = min(len(_idle), len(bounds) - 1)
        helpers = [_idle.pop() for _ in range(k)]
    for worker, (lo, hi) in zip(helpers, bounds[1:]):
        worker.start(fn, lo, hi)
    own = []  # the first chunk, then those no helper was free for
    for lo, hi in [bounds[0]] + bounds[1 + k:]:
        try:
            own.append((fn(lo, hi), None))
        except BaseException as e:  # noqa: BLE001 - raised below, after the others finish
            own.append((None, e))
    helped = [worker.wait() for worker in helpers]
    with _lock:
        _idle.extend(helpers)
    outcomes = own[:1] + helped + own[1:]  # in the order of ``bounds``
    error = next((e for _, e in outcomes if e is not None), None)
    if error is not None:
        raise error
    return [r for r, _ in outcomes]


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
            least = MIN_WORK // (PASS_WORK * _passes(args))
            for a in args:
                if getattr(a, "size", 0) >= least:
                    return split(args)
        return fn(*args)

    def split(args):
        shape = _broadcast_shape(args)
        if not shape or shape[0] < 2:
            return fn(*args)
        size = math.prod(shape)
        bounds = chunks(np, shape[0], float(size) * PASS_WORK * _passes(args))
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


def _passes(args) -> int:
    """Passes over the output an elementwise op of ``args`` makes: one per input after the
    first (an AddN of 20 terms makes 19), at least one."""
    return max(len(args) - 1, 1)


def _broadcast_shape(args) -> tuple | None:
    """The broadcast shape of ``args`` (NumPy arrays and scalars), or None when one is neither
    or the shapes do not broadcast (``fn`` itself then raises its usual error)."""
    if not all(isinstance(a, (np.ndarray, np.generic, int, float, bool)) for a in args):
        return None
    try:
        return np.broadcast_shapes(*(np.shape(a) for a in args))
    except ValueError:
        return None


def matmul(a, b):
    """``a @ b`` for 2-d NumPy arrays, split among the threads by rows of the output, or by
    columns when the row chunks would be under 64 rows and the output has more columns than
    rows: a chunk of a few rows against all of ``b`` is a slow GEMM (a dense layer's product
    at batch 64: 5.6 ms by rows, 3.8 ms by columns), while a column chunk writes a strided
    block, slow when the inner dimension is short (a 400x20x800 weight gradient: 148 us by
    rows, 219 us by columns). Each chunk writes its block of one output buffer. Unless
    products are split, one call on BLAS's threads."""
    if not splits_products() or a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        return np.matmul(a, b)  # nothing to split, or NumPy's own error for bad shapes
    (m, k), n = a.shape, b.shape[1]
    by_rows = m >= n or m >= _MIN_CHUNK_ROWS * _threads
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
