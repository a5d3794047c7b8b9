"""Intra-op parallelism on the host: a kernel's big work runs on
``ConfigProto.intra_op_parallelism_threads`` threads (the default, 0: every usable core).

One pool per worker does all of it, as TensorFlow's CPU runtime runs everything on one Eigen
pool:

* **Matrix products** (MatMul, and the GEMM of each convolution and its backprops) split into
  row or column chunks (convolutions over the batch), one per thread, with BLAS pinned to one
  thread per call (``IntraOpPool.matmul``, ``chunks(..., products=True)``). Those a kernel
  library takes (oneDNN's float32 convolutions and products) run on the library's threads.
* **Everything else that is big** splits the same way: elementwise ops over their first axis
  (``elementwise``), pooling and its gradient over the batch, dense optimizer updates over
  blocks (``chunks``/``run_chunks``). A waiting thread blocks.

A split pays for a hand-off: waking a blocked pool thread and joining it. Each pool measures
what its splits cost beyond their work and splits only work that repays that cost
(``IntraOpPool.min_work``): a few microseconds on an idle workstation, 80-150 us on a VM whose
idle vCPUs halt at once, more on a loaded machine.

Why not BLAS's own threads for the products: an OpenBLAS worker busy-waits for about 0.1 s
after each threaded call, so on a machine with few cores it takes a core from whatever runs
next: this pool's chunks (an Adam update on two threads took 10.3 ms, 18.9 ms right after a
threaded GEMM), or another framework in the same process. Products alone are somewhat faster
on BLAS's threads (a 128x784x512 product: 0.60 ms against 0.73 ms split), so
``ConfigProto(dflab={"intra_op_split_products": False})`` keeps them there, for graphs made
almost only of matrix products. Whole training steps, each configuration in its own process on
an idle 2-core machine (``benchmarks/RESULTS.md``, "Measured fairly"): the CNN took 87-95 ms
split against 115-137 ms on BLAS's threads; the MLP and the LSTM were 5-10% faster on BLAS's.

Each worker owns its pool (``IntraOpPool``), made from its session's config, with its own
threads and its own split-products setting; kernels reach it through their context
(``ctx.intra_op``, read once when a plan binds them), so two sessions with different settings
never see each other's. With the default (0 threads) a session's pool has every usable core,
as TF's default does, and oneDNN's kernels run on all of them (``library_threads``); an eager
context's pool has one thread, which never splits, BLAS and oneDNN keeping every core. The
pool also carries the session's ``onednn`` option to the kernels (see
``dflab.kernels.onednn``).

BLAS's thread count is the one process-wide part. A pool of a session that asked for intra-op
threads sets it while it is open (``hold_blas``: one thread per call when it splits products),
the most recently opened pool's wish winning, and the process's own setting comes back when the
last such pool closes. A default session sets it to one thread only while a step with
expensive kernels runs (``pin_blas``), so that the user's NumPy code between steps keeps
BLAS's threads. Only NumPy work is split: a GPU's kernels run on its stream.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections import deque
from collections.abc import Callable

import numpy as np

from dflab.kernels.fp_errors import ignore_fp_errors

# Below this many multiply-adds a split costs more than it saves where handing a chunk to
# another thread and waiting for it costs ``REFERENCE_HANDOFF_S``; a pool that measures its
# splits costing more wants the work its extra cost would have done (``IntraOpPool.min_work``).
MIN_WORK = 1 << 24
# Matrix products gain from a split sooner: a 20x400x800 product (6.4M multiply-adds, an LSTM
# cell's) took 255 us on one thread and 195 us split, a 20x200x800 one 110 against 117 us.
MIN_PRODUCT_WORK = 1 << 22
# Fewest rows per chunk of a product split by rows (see ``matmul``).
_MIN_CHUNK_ROWS = 64

# What a split's hand-off and join cost where the thresholds above were measured (an idle
# 2-core machine whose idle cores wake in microseconds). On a VM whose idle vCPUs halt at once
# (no guest halt-polling, as Firecracker's), waking a blocked pool thread costs 80-150 us
# instead: the blocked 784x512 SGD update took 200 us on one thread and 380 us split.
REFERENCE_HANDOFF_S = 12e-6
# Splits whose overhead a pool's estimate averages, less the worst one (a descheduled hand-off
# on a loaded machine). The mean, not the median: on a halting VM a split right after another
# costs ~5 us and one after a pause ~100 us, and what a split costs is their mix.
_HANDOFF_SAMPLES = 15
# A split's overhead counts at most this much: beyond it the threads were descheduled (a loaded
# machine, a noisy neighbour), which says more about that moment than about hand-offs.
_HANDOFF_CAP_S = 300e-6
# One in this many splits declined only for the measured cost is made anyway, so that the
# estimate follows a machine that became quiet (otherwise no split would measure it again).
_PROBE_EVERY = 32


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
        self.thread = threading.Thread(target=self._loop, name="dflab-intra-op", daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        ignore_fp_errors()  # for good: this thread runs parts of kernels only
        while True:
            self._go.acquire()
            if self._task is None:  # ``stop``: the pool closed
                return
            fn, lo, hi = self._task
            start = time.perf_counter()
            try:
                result = (fn(lo, hi), None)
            except BaseException as e:  # noqa: BLE001 - handed to the waiting caller
                result = (None, e)
            self._outcome = result + (time.perf_counter() - start,)
            # Let the chunk's closure go before waiting for the next: it holds the op's arrays,
            # which would otherwise stay alive (and look held to an in-place update) until then.
            fn = self._task = None
            self._done.release()

    def start(self, fn, lo: int, hi: int) -> None:
        self._task = (fn, lo, hi)
        self._go.release()

    def wait(self) -> tuple:
        """(result, error, seconds it ran) of the chunk started last."""
        self._done.acquire()
        outcome, self._outcome = self._outcome, None
        return outcome

    def stop(self) -> None:
        """End the thread (it is idle: no chunk started and not waited for)."""
        self._task = None
        self._go.release()



class IntraOpPool:
    """The intra-op threads of one worker: ``threads`` per splittable host op (the caller and
    ``threads - 1`` pool threads, started on first use), splitting matrix products too when
    ``split_products``. Kernels get it as ``ctx.intra_op``; ``close`` ends its threads.

    It also carries how the worker's host kernels may use a kernel library
    (``dflab.kernels.onednn``): whether they may (``onednn``, the session's option of that
    name; ``onednn_products`` for matrix products) and on how many threads the library runs
    each op (``library_threads``: the session's ``intra_op_parallelism_threads``, or with 0,
    TF's default, every core the process may use)."""

    def __init__(self, threads: int = 1, split_products: bool = True, *,
                 library_threads: int | None = None, onednn: bool = True,
                 onednn_products: bool = True):
        self.threads = max(int(threads), 1)
        self.split_products = bool(split_products)
        self._library_threads = self.threads if library_threads is None else library_threads
        self.onednn = bool(onednn)
        self.onednn_products = bool(onednn_products)
        self._lock = threading.Lock()
        self._workers: list[_Worker] = []  # every pool thread started
        self._idle: list[_Worker] = []  # those not running a chunk now
        self._closed = False
        # The overheads of the pool's last splits (wall time beyond the longest chunk), and
        # what they make of a split's cost; see ``min_work``.
        self._handoffs: deque[float] = deque(maxlen=_HANDOFF_SAMPLES)
        self._handoff_s = REFERENCE_HANDOFF_S
        self._declined = 0  # splits declined for the measured cost only (``_PROBE_EVERY``)

    def __repr__(self):
        how = "products split" if self.splits_products else "products on BLAS's threads"
        cost = f", splits cost {self._handoff_s * 1e6:.0f} us" if self.threads > 1 else ""
        return f"<IntraOpPool {self.threads} threads, {how}{cost}>"

    @property
    def splits_products(self) -> bool:
        """Whether matrix products are split in Python chunks (else BLAS threads them)."""
        return self.split_products and self.threads > 1

    @property
    def library_threads(self) -> int:
        """Threads a library kernel (oneDNN) runs each op on."""
        return self._library_threads or usable_cores()

    @property
    def blas_threads(self) -> int:
        """BLAS's threads per call under this pool: one where products are split into chunks
        (each chunk a single-threaded call), else the pool's thread count."""
        return 1 if self.splits_products else self.threads

    # --- BLAS's process-wide thread count ---------------------------------------------------
    def hold_blas(self) -> None:
        """Set BLAS's threads to ``blas_threads`` while this pool is open (``close``)."""
        with _blas_lock:
            _blas_holders.append(self)
            _apply_blas(rescan=True)

    def close(self) -> None:
        """End the pool's threads (a chunk running finishes first) and let go of BLAS."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.stop()
        with _blas_lock:
            if self in _blas_holders:
                _blas_holders.remove(self)
                _apply_blas(rescan=True)

    # --- splitting ----------------------------------------------------------------------------
    @property
    def handoff_s(self) -> float:
        """What a split costs this pool beyond its work, as measured: the mean of its last
        splits' overheads less the worst one (``REFERENCE_HANDOFF_S`` before any)."""
        return self._handoff_s

    def min_work(self, products: bool = False) -> float:
        """The least work ``chunks`` splits: ``MIN_PRODUCT_WORK`` (``MIN_WORK``) where a split
        costs ``REFERENCE_HANDOFF_S``, plus the work that a split's extra measured cost would
        have done, thrice (two threads save at most half an op's time, and two halves that
        share the memory bus or a core each take ~0.65 of the whole). TF's Eigen pool sidesteps
        the cost by spinning its threads between ops; a Python thread cannot wait for work
        without blocking (or holding the GIL), so this pool splits only what repays a wake-up
        on the machine it runs on."""
        extra = max(self._handoff_s - REFERENCE_HANDOFF_S, 0.0)
        if products:
            return MIN_PRODUCT_WORK + 3 * extra * PRODUCT_WORK_PER_S
        return MIN_WORK + 3 * extra * PASS_WORK_PER_S

    def chunks(self, xp, n: int, work: float, products: bool = False) -> list[tuple[int, int]]:
        """Contiguous ``[lo, hi)`` bounds splitting ``range(n)`` among the pool's threads, or
        one chunk when there is one thread, ``xp`` is not NumPy or ``work`` is too small for
        what a split costs here (``min_work``). Work that is mostly matrix products
        (``products``) is one chunk unless products are split: BLAS threads it."""
        k = min(self.threads, n)
        if k <= 1 or xp is not np or (products and not self.split_products):
            return [(0, n)]
        if work < self.min_work(products) and not self._probe(
                work >= (MIN_PRODUCT_WORK if products else MIN_WORK)):
            return [(0, n)]
        step, extra = divmod(n, k)
        bounds, lo = [], 0
        for i in range(k):
            hi = lo + step + (i < extra)
            bounds.append((lo, hi))
            lo = hi
        return bounds

    def _probe(self, worth_at_reference: bool) -> bool:
        """Whether to make a split the measured cost declines anyway, to measure it again:
        one in ``_PROBE_EVERY`` of those that would pay at the reference cost."""
        if not worth_at_reference:
            return False
        self._declined += 1  # a lost count between racing callers only shifts a probe
        return self._declined % _PROBE_EVERY == 0

    def _record_handoff(self, seconds: float) -> None:
        with self._lock:
            self._handoffs.append(min(max(seconds, 0.0), _HANDOFF_CAP_S))
            kept = sorted(self._handoffs)[:-1] or list(self._handoffs)  # less the worst one
        self._handoff_s = sum(kept) / len(kept)

    def run_chunks(self, fn: Callable[[int, int], object], bounds: list[tuple[int, int]]) -> list:
        """``[fn(lo, hi) for (lo, hi) in bounds]``, the first chunk on the calling thread and
        the others on idle pool threads at the same time; a chunk no idle thread is left for
        (several ops splitting at once, on inter-op threads) runs on the caller after its own.
        The first error is raised after all chunks have finished."""
        if len(bounds) == 1:
            return [fn(*bounds[0])]
        helpers = self._take_helpers(len(bounds) - 1)
        k = len(helpers)
        start = time.perf_counter()
        for worker, (lo, hi) in zip(helpers, bounds[1:]):
            worker.start(fn, lo, hi)
        own_start = time.perf_counter()
        own = []  # the first chunk, then those no helper was free for
        for lo, hi in [bounds[0]] + bounds[1 + k:]:
            try:
                own.append((fn(lo, hi), None))
            except BaseException as e:  # noqa: BLE001 - raised below, after the others finish
                own.append((None, e))
        own_s = time.perf_counter() - own_start
        helped = [worker.wait() for worker in helpers]
        wall = time.perf_counter() - start
        self._give_back(helpers)
        if helped:  # what the split cost beyond its longest share of the work
            self._record_handoff(wall - max(own_s, max(s for _, _, s in helped)))
        outcomes = own[:1] + [(r, e) for r, e, _ in helped] + own[1:]  # ``bounds``' order
        error = next((e for _, e in outcomes if e is not None), None)
        if error is not None:
            raise error
        return [r for r, _ in outcomes]

    def _take_helpers(self, wanted: int) -> list[_Worker]:
        with self._lock:
            if self._closed:
                return []
            while len(self._workers) < self.threads - 1:  # started on first use
                worker = _Worker()
                self._workers.append(worker)
                self._idle.append(worker)
            k = min(len(self._idle), wanted)
            return [self._idle.pop() for _ in range(k)]

    def _give_back(self, helpers: list[_Worker]) -> None:
        with self._lock:
            if not self._closed:
                self._idle.extend(helpers)
                return
        for worker in helpers:  # the pool closed while they ran
            worker.stop()

    def elementwise(self, fn: Callable) -> Callable:
        """``fn``, an elementwise host kernel that takes ``out=`` (a ufunc, or a function of
        ufuncs: output element i depends on its inputs' elements i only, with NumPy
        broadcasting), split among the pool's threads over its output's first axis when the
        output is big, each thread writing its rows of one output buffer. TF's CPU kernels do
        the same with Eigen's thread pool: such an op is bound by memory bandwidth, which one
        core does not draw in full (a bias add over 1.6M float32: 1.9 ms on one thread, 0.7 ms
        on two). The same elements go through the same NumPy calls, so the results are the
        same bits; small ops, and anything not made of arrays of one broadcast shape, call
        ``fn`` as it is."""
        threads = self.threads

        def split_fn(*args):
            # The common case, a small op, returns after one cheap look at each argument.
            if threads > 1:
                least = _least_split_size(len(args))
                for a in args:
                    if getattr(a, "size", 0) >= least:
                        return split(args)
            return fn(*args)

        def split(args):
            shape = _broadcast_shape(args)
            if not shape or shape[0] < 2:
                return fn(*args)
            wide = _widened(args, shape)
            if wide is not None:
                return split_rows(*wide).reshape(shape)
            return split_rows(args, shape)

        def split_rows(args, shape):
            size = math.prod(shape)
            bounds = self.chunks(np, shape[0], float(size) * PASS_WORK * _passes(args))
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
            self.run_chunks(lambda lo, hi: fn(*rows(lo, hi), out=out[lo:hi]), bounds)
            return out

        split_fn.__name__ = getattr(fn, "__name__", "elementwise")
        return split_fn

    def matmul(self, a, b):
        """``a @ b`` for 2-d NumPy arrays, split among the threads by rows of the output, or
        by columns when the row chunks would be under 64 rows and the output has more columns
        than rows: a chunk of a few rows against all of ``b`` is a slow GEMM (a dense layer's
        product at batch 64: 5.6 ms by rows, 3.8 ms by columns), while a column chunk writes a
        strided block, slow when the inner dimension is short (a 400x20x800 weight gradient:
        148 us by rows, 219 us by columns). Each chunk writes its block of one output buffer.
        Unless products are split, one call on BLAS's threads."""
        if not self.splits_products or a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
            return np.matmul(a, b)  # nothing to split, or NumPy's own error for bad shapes
        (m, k), n = a.shape, b.shape[1]
        by_rows = m >= n or m >= _MIN_CHUNK_ROWS * self.threads
        bounds = self.chunks(np, m if by_rows else n, float(m) * k * n, products=True)
        if len(bounds) == 1:
            return np.matmul(a, b)
        out = np.empty((m, n), dtype=np.result_type(a, b))

        def rows(lo, hi):
            np.matmul(a[lo:hi], b, out=out[lo:hi])

        def columns(lo, hi):
            np.matmul(a, b[:, lo:hi], out=out[:, lo:hi])

        self.run_chunks(rows if by_rows else columns, bounds)
        return out


def usable_cores() -> int:
    """The cores this process may run on (its affinity where the system tells it)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


# Kernels bound without a worker's pool (the host context of fused kernels' steps, tests) run
# on their caller alone; a library kernel runs on every core, as with the default config.
SERIAL = IntraOpPool(1, library_threads=0)

# BLAS's thread count is process-wide. Two things set it: the pools holding it while they are
# open (``hold_blas``: sessions with intra-op threads), oldest first, the newest one's wish in
# force; and the steps running now of sessions that pin it to one thread while they run
# (``pin_blas``: default sessions), which win while any runs. The counts from before either
# began come back once neither does.
_blas_lock = threading.Lock()
_blas_holders: list[IntraOpPool] = []
_pinned_steps = 0
_blas_before: list[tuple[object, int]] | None = None  # (library, its own count), as found
_blas_libraries = None  # threadpoolctl's controllers of the BLAS libraries loaded, found once


def pin_blas() -> None:
    """Put BLAS on one thread until the matching ``unpin_blas``, for a step whose pool splits
    its products: each chunk is then a single-threaded call, and no BLAS worker spins after a
    threaded call on a core the step's next kernels need. Steps nest and overlap (a count),
    and NumPy code between a default session's steps keeps BLAS's threads. About 2 us a step
    (``ctypes`` calls on cached controllers, not threadpoolctl's library scan)."""
    global _pinned_steps
    with _blas_lock:
        _pinned_steps += 1
        if _pinned_steps == 1:
            _apply_blas()


def unpin_blas() -> None:
    """End a ``pin_blas``; the last one running puts BLAS where the holders say."""
    global _pinned_steps
    with _blas_lock:
        _pinned_steps -= 1
        if _pinned_steps == 0:
            _apply_blas()


def _apply_blas(rescan: bool = False) -> None:
    """Put BLAS's threads where the pins and holders say (called with ``_blas_lock`` held).
    ``rescan``: look for BLAS libraries loaded since the last look (a pool opening or
    closing; steps use the libraries found before)."""
    global _blas_before, _blas_libraries
    if _blas_libraries is None or rescan:
        from threadpoolctl import ThreadpoolController

        _blas_libraries = [lib for lib in ThreadpoolController().lib_controllers
                           if lib.user_api == "blas"]
    if not (_pinned_steps or _blas_holders):
        for lib, threads in _blas_before or ():
            lib.set_num_threads(threads)
        _blas_before = None
        return
    if _blas_before is None:
        _blas_before = []
    known = {lib.filepath for lib, _ in _blas_before}
    _blas_before += [(lib, lib.get_num_threads()) for lib in _blas_libraries
                     if lib.filepath not in known]
    threads = 1 if _pinned_steps else _blas_holders[-1].blas_threads
    for lib in _blas_libraries:
        lib.set_num_threads(threads)


# Work (in multiply-adds, as MIN_WORK) of one element of one memory-bound elementwise pass:
# such a pass moves a few bytes per element where a BLAS product does dozens of multiply-adds.
# An elementwise op starts to gain from a split at about 512K elements (measured: a 256K-element
# add took 0.11 ms whole, 0.15 ms split; at 512K both 0.22 ms; at 1.6M 1.7 against 1.0 ms).
PASS_WORK = 32

# Work one core does per second (``min_work``): a BLAS product's multiply-adds (a 128x784x512
# product in 1.2 ms, a 20x400x800 one in 0.2 ms), and elementwise passes at ~0.3 ns an element
# (a 1M-element add in 0.18 ms, 3.2M in 1.5 ms).
PRODUCT_WORK_PER_S = 3e10
PASS_WORK_PER_S = PASS_WORK / 0.3e-9


def never_split(output_shapes, n_inputs: int) -> bool:
    """Whether an elementwise op of ``n_inputs`` inputs whose static output shapes are
    ``output_shapes`` is too small for ``IntraOpPool.elementwise`` ever to split it: no input
    is bigger than the (fully known) output, and the output is below what the split's first
    look lets through. Unknown shapes may be big."""
    if len(output_shapes) != 1 or not output_shapes[0].is_fully_defined():
        return False
    return output_shapes[0].num_elements() < _least_split_size(n_inputs)


def _least_split_size(n_args: int) -> int:
    """The fewest elements an argument of an elementwise op of ``n_args`` arguments must have
    for ``IntraOpPool.elementwise`` to consider splitting it (``MIN_WORK``'s worth of passes)."""
    return MIN_WORK // (PASS_WORK * max(n_args - 1, 1))


def _passes(args) -> int:
    """Passes over the output an elementwise op of ``args`` makes: one per input after the
    first (an AddN of 20 terms makes 19), at least one."""
    return max(len(args) - 1, 1)


# A row of a widened elementwise op has at least this many elements (see ``_widened``).
_WIDE_ROW = 1024


def _widened(args, shape):
    """``args`` of an elementwise op whose other operands are vectors along its last axis
    (a bias add over NHWC activations: ``x + b``, ``b`` of shape (C,)), viewed as rows of at
    least ``_WIDE_ROW`` elements, and their broadcast shape: each full-shape array as rows of
    m * C elements, each vector tiled m times. NumPy loops over the last axis innermost; over
    32 channels its per-row overhead made a 1.6M-element bias add 3.2 times a same-shape add,
    over 1,024 elements 2.1 times. The same element pairs meet: the same bits. None where
    this does not apply."""
    channels = shape[-1]
    if len(shape) < 2 or channels >= _WIDE_ROW or channels < 1:
        return None
    rows = math.prod(shape[:-1])
    m = 1
    while rows % (2 * m) == 0 and channels * m < _WIDE_ROW:
        m *= 2
    if m == 1:
        return None
    out, vectors = [], False
    for a in args:
        if not isinstance(a, np.ndarray) or a.ndim == 0:
            out.append(a)
        elif a.shape == shape and a.flags.c_contiguous:
            out.append(a.reshape(rows // m, channels * m))
        elif a.size == channels and a.shape[-1] == channels:
            out.append(np.tile(a.reshape(channels), m))
            vectors = True
        else:
            return None
    return (out, (rows // m, channels * m)) if vectors else None


def _broadcast_shape(args) -> tuple | None:
    """The broadcast shape of ``args`` (NumPy arrays and scalars), or None when one is neither
    or the shapes do not broadcast (``fn`` itself then raises its usual error)."""
    if not all(isinstance(a, (np.ndarray, np.generic, int, float, bool)) for a in args):
        return None
    try:
        return np.broadcast_shapes(*(np.shape(a) for a in args))
    except ValueError:
        return None
