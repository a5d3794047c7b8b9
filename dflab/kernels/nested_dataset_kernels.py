"""``tf.data`` kernels of nested and structural datasets: ``flat_map``/``interleave``,
``unbatch``, ``shard``, ``window``, ``cache`` (in memory), ``reduce`` and ``DatasetCardinality``.

They read datasets within datasets (the one a function makes of each element, a window's
components) or change how elements are cut, on the dataset values of ``dataset_kernels``, with
its ``DatasetFunction`` and its ``Failure`` (a failed element travels in its element's place).
A dataset a function makes is pulled detached from the iterator (``_detached``): a shuffle in
it draws as its own dataset's, a fresh one per call. An interleave whose function makes a
dataset that could not be replayed (a Python generator, random numbers, an unseeded shuffle)
refuses to have its iterator saved. All of these are host-only ops.
"""

from __future__ import annotations

import os
import threading

import numpy as np

from dflab.framework import errors
from dflab.kernels.dataset_kernels import (
    _PULLING,
    DatasetFunction,
    DatasetValue,
    Failure,
    _dataset_values,
    _failed,
    _made,
    _Shuffle,
)
from dflab.kernels.registry import kernel, register_kernel


def _detached(elements):
    """The elements of a dataset a function made (``flat_map``, ``reduce``...), pulled with
    no iterator about: a shuffle in it draws as its own dataset's (a fresh one per call,
    so a seeded one repeats its order, as TF's), not as one of the iterator's shuffles."""
    while True:
        token = _PULLING.set(None)
        try:
            element = next(elements, None)
        finally:
            _PULLING.reset(token)
        if element is None:
            return
        yield element


def _host_parallelism() -> int:
    """TF's ``AUTOTUNE`` cycle length of an ``interleave``: the CPUs this process may use."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # (no affinity on this platform)
        return os.cpu_count() or 1


def _replay_problem(dataset: DatasetValue) -> errors.OpError | None:
    """Why a pass over ``dataset``, a value a function made, could not be replayed (a
    checkpoint of the iterator reading it), or None: it reads a Python generator, draws random
    numbers, or shuffles with a key drawn at random (not saved: the value is made afresh)."""
    for v in _dataset_values(dataset):
        try:
            v.check_saveable()
        except errors.FailedPreconditionError as e:
            return e
        if isinstance(v, _Shuffle) and v.random_key:
            return errors.FailedPreconditionError(
                None, None, "An iterator over a dataset whose function makes an unseeded "
                "shuffle cannot be saved in a checkpoint: its order could not be replayed.")
    return None


class _Interleave(DatasetValue):
    """``interleave``/``flat_map``: ``fn`` makes a dataset of each input element; ``cycle``
    of them are read at a time, ``block`` elements from each in turn, a finished one's place
    taken by the next input's (TF's ``InterleaveDataset`` order; ``flat_map`` is a cycle of
    one). A failed element is raised and not counted in its block; a failed input, or a
    function that fails on one, is raised and leaves its place to the next input (TF's)."""

    def __init__(self, source, fn, captured, cycle, block):
        self.source, self.fn, self.captured = source, fn, captured
        self.cycle, self.block = int(cycle), int(block)
        if self.cycle == -1:  # AUTOTUNE
            self.cycle = _host_parallelism()
        if self.cycle <= 0:
            raise errors.InvalidArgumentError(None, None,
                                              "cycle_length must be greater than zero.")
        if self.block <= 0:
            raise errors.InvalidArgumentError(None, None,
                                              "block_length must be greater than zero.")
        self._unreplayable = None

    def check_saveable(self) -> None:
        self.fn.check_replayable()
        if self._unreplayable is not None:
            raise self._unreplayable

    def _dataset_of(self, element) -> DatasetValue:
        dataset = self.fn(element, self.captured)[0]
        if self._unreplayable is None:
            self._unreplayable = _replay_problem(dataset)
        return dataset

    def elements(self):
        inputs = self.source.elements()
        slots = [None] * self.cycle
        index = given = opened = 0  # the slot read, what its block has given, slots open
        inputs_left = True
        while inputs_left or opened:
            if slots[index] is not None:
                element = next(slots[index], None)
                if element is None:  # this input's dataset is done: on to the next slot
                    slots[index], opened = None, opened - 1
                    index, given = (index + 1) % self.cycle, 0
                    continue
                if element.__class__ is not Failure:
                    given += 1
                    if given == self.block:
                        index, given = (index + 1) % self.cycle, 0
                yield element
            elif inputs_left:
                element = next(inputs, None)
                if element is None:
                    inputs_left = False
                    continue
                if element.__class__ is not Failure:
                    element = _made(self._dataset_of, element)
                if element.__class__ is Failure:
                    yield element
                    continue
                slots[index], opened = _detached(element.elements()), opened + 1
            else:
                index, given = (index + 1) % self.cycle, 0


class _Unbatch(DatasetValue):
    """Each element cut along its first dimension into that many elements."""

    def __init__(self, source):
        self.source = source

    def elements(self):
        for element in self.source.elements():
            if element.__class__ is Failure:
                yield element
                continue
            size = _made(_batch_size, element)
            if size.__class__ is Failure:
                yield size
                continue
            for i in range(size):
                yield tuple(c[i] for c in element)


def _batch_size(element) -> int:
    if any(c.ndim == 0 for c in element):
        raise errors.InvalidArgumentError(
            None, None, "Input element must have a non-scalar value in each component.")
    sizes = [c.shape[0] for c in element]
    for k, n in enumerate(sizes[1:], 1):
        if n != sizes[0]:
            raise errors.InvalidArgumentError(
                None, None, "Input element must have the same batch size in each component. "
                f"Component 0 had size {sizes[0]} but component {k} had size, {n}.")
    return sizes[0]


class _Shard(DatasetValue):
    """Every ``num_shards``-th element from ``index`` on. As TF's, it skips to its next
    element each time; a failure met while skipping is raised and loses the count of the
    elements skipped before it in that skip (so the shard shifts, as TF's does)."""

    def __init__(self, source, num_shards, index):
        self.source, self.shards, self.index = source, int(num_shards), int(index)
        if self.shards <= 0:
            raise errors.InvalidArgumentError(
                None, None, "Number of shards must be greater than zero (currently "
                f"num_shards = {self.shards}).")
        if not 0 <= self.index < self.shards:
            raise errors.InvalidArgumentError(
                None, None, f"Index must be between 0 and {self.shards - 1} (currently "
                f"index = {self.index}).")

    def elements(self):
        it = self.source.elements()
        position = 0  # the input position the shard believes it is at
        while True:
            skipped, failed = 0, None
            for _ in range((self.index - position) % self.shards):
                element = next(it, None)
                if element is None:
                    return
                if element.__class__ is Failure:
                    failed = element
                    break
                skipped += 1
            if failed is not None:
                yield failed
                continue
            position += skipped
            element = next(it, None)
            if element is None:
                return
            if element.__class__ is not Failure:
                position += 1
            yield element

    def cardinality(self) -> int:
        n = self.source.cardinality()
        if n < 0:
            return n
        return n // self.shards + (1 if self.index < n % self.shards else 0)


class _Window(DatasetValue):
    """Windows of ``size`` elements taken every ``stride``-th, one starting every ``shift``
    elements; each a dataset per component (TF's ``WindowDataset``: a buffer of the
    ``(size - 1) * stride + 1`` elements a window spans; at the end, the windows starting in
    what is left, shorter, unless ``drop_remainder``). A window holding a failed element fails
    and is passed over."""

    def __init__(self, source, size, shift, stride, drop_remainder):
        self.source, self.drop = source, bool(drop_remainder)
        self.size, self.shift, self.stride = int(size), int(shift), int(stride)
        for what, v in (("size", self.size), ("shift", self.shift), ("stride", self.stride)):
            if v <= 0:
                raise errors.InvalidArgumentError(
                    None, None, f"Window {what} must be greater than zero.")

    def elements(self):
        it = self.source.elements()
        span = (self.size - 1) * self.stride + 1
        buffer, more = [], True
        while True:
            while more and len(buffer) < span:
                element = next(it, None)
                if element is None:
                    more = False
                else:
                    buffer.append(element)
            if not buffer or (self.drop and len(buffer) < span):
                return
            window = buffer[::self.stride][:self.size]
            if len(buffer) <= self.shift:
                for _ in range(self.shift - len(buffer)):  # the elements between windows
                    if more and next(it, None) is None:
                        more = False
                buffer = []
            else:
                buffer = buffer[self.shift:]
            yield _failed(window) or tuple(
                _WindowComponent([e[c] for e in window]) for c in range(len(window[0])))

    def cardinality(self) -> int:
        n = self.source.cardinality()
        if n < 0:
            return n
        if self.drop:
            rest = n - ((self.size - 1) * self.stride + 1)
            return 0 if rest < 0 else rest // self.shift + 1
        return -(-n // self.shift)


class _WindowComponent(DatasetValue):
    """One component of a window: a dataset of its values."""

    def __init__(self, values):
        self.values = values

    def elements(self):
        for v in self.values:
            yield (v,)

    def cardinality(self) -> int:
        return len(self.values)


class _Cache(DatasetValue):
    """The source's elements, kept in memory by the first pass that reads them all; every
    pass after reads the memory (TF's in-memory ``cache``). A pass left unfinished keeps
    nothing; failed elements are raised and not kept (TF's)."""

    def __init__(self, source):
        self.source = source
        self._kept = None
        self._lock = threading.Lock()

    def elements(self):
        with self._lock:
            kept = self._kept
        if kept is not None:
            yield from kept
            return
        reading = []
        for element in self.source.elements():
            if element.__class__ is not Failure:
                reading.append(element)
            yield element
        with self._lock:
            if self._kept is None:  # the first pass to finish fills the cache
                self._kept = reading

    def cardinality(self) -> int:
        return self.source.cardinality()


# --- dataset kernels ------------------------------------------------------------------------------
@kernel("FlatMapDataset", host_only=True)
def _flat_map(node, ctx):
    fn = DatasetFunction(node.attr["f"], ctx, node.name)
    return lambda source, *captured: _Interleave(source, fn, captured, 1, 1)


@kernel("InterleaveDataset", host_only=True)
def _interleave(node, ctx):
    fn = DatasetFunction(node.attr["f"], ctx, node.name)
    return lambda source, *rest: _Interleave(source, fn, rest[:-2], rest[-2], rest[-1])


@kernel("ReduceDataset", host_only=True)
def _reduce(node, ctx):
    """The state ``f`` folds over the elements, from the initial state (TF's: a failed
    element fails the whole reduction)."""
    fn = DatasetFunction(node.attr["f"], ctx, node.name)
    n = len(node.attr["output_types"])

    def reduce(source, *rest):
        state, captured = list(rest[:n]), rest[n:]
        for element in _detached(source.elements()):
            if element.__class__ is Failure:
                raise element.error
            state = fn([*state, *element], captured)
        return state[0] if n == 1 else tuple(state)

    return reduce


register_kernel("DatasetCardinality", host_only=True,
                fn=lambda dataset: np.int64(dataset.cardinality()))
register_kernel("UnbatchDataset", host_only=True, fn=_Unbatch)
register_kernel("ShardDataset", host_only=True, fn=_Shard)
register_kernel("WindowDataset", host_only=True, fn=_Window)


@kernel("CacheDataset", host_only=True)
def _cache(node, ctx):
    def cache(source, filename):
        name = np.asarray(filename, dtype=object).item()
        if name not in (b"", ""):
            raise errors.UnimplementedError(
                None, None, f"{node.name}: caching a dataset in files ({name!r}) is not "
                "supported by dflab; cache() with no filename keeps it in memory.")
        return _Cache(source)

    return cache
