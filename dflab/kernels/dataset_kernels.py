"""``tf.data`` kernels: datasets as host objects, iterators as per-session resources.

A dataset op's kernel returns a *dataset value* (a subclass of ``DatasetValue``): the op's input
values plus what the transformation does. ``elements()`` starts one pass over it: a Python
generator of elements, each a tuple of NumPy arrays (one per flat component; strings are object
arrays of bytes). Nothing is read until an iterator asks, so a dataset over a large file or an
infinite ``repeat()`` costs nothing to build.

An iterator (``IteratorV2``, ``OneShotIterator``) is an ``IteratorState`` in its device's
``ResourceMgr``, keyed by ``shared_name`` or the op's name, so every step of a session sees the
same position; ``MakeIterator`` starts a new pass (re-initialisation), ``IteratorGetNext`` takes
one element or fails with ``OutOfRangeError`` at the end. ``AnonymousIterator`` (eager
iteration) makes a state kept by no name. ``SerializeIterator``/``DeserializeIterator`` write
an iterator's position as JSON data and replay a pass to it (a checkpoint's
``ITERATOR_STATE``). All of these are host-only ops.

Dataset functions (``map``, ``filter``, ``flat_map``/``interleave``, whose result is a
dataset value, and ``reduce``) arrive as plain data (``dflab.ops.dataset_ops``); a
``DatasetFunction`` binds their nodes' CPU kernels once, against the kernel's own context (so a
re-declared variable reads this device's state, at every call), and runs them in order,
propagating the deadness of an untaken ``tf.cond`` branch as the executor does.
"""

from __future__ import annotations

import contextvars
import functools
import gzip
import itertools
import json
import os
import secrets
import threading
import zlib

import numpy as np

from dflab.framework import errors
from dflab.framework.graph_io import FORMAT, VERSION, graph_def_from_json
from dflab.framework.op_kinds import MERGE_OPS
from dflab.framework.registry import get_op_def
from dflab.framework.tensor_shape import TensorShape
from dflab.kernels.control_flow_kernels import DEAD
from dflab.kernels.fp_errors import ignore_fp_errors, restore_fp_errors
from dflab.kernels.registry import get_kernel_def, kernel, register_kernel
from dflab.lib.io.tf_record import read_records
from dflab.ops.script_ops import registered_function


# --- dataset functions ----------------------------------------------------------------------------
class DatasetFunction:
    """A traced dataset function bound to CPU kernels: ``fn(args, captured)``."""

    def __init__(self, spec: dict, ctx, where: str):
        self.where = where
        graph = graph_def_from_json({"format": FORMAT, "version": VERSION, "node": spec["node"]})
        self._args = [a + ":0" for a in spec["args"]]
        self._captures = [c + ":0" for c in spec["captures"]]
        self._rets = list(spec["rets"])
        fed = set(spec["args"]) | set(spec["captures"])
        self._steps = [self._bind(nd, ctx) for nd in graph.node if nd.name not in fed]
        self._random = sorted({op for op in _op_types_within(graph.node) if _draws_random(op)})

    def check_replayable(self) -> None:
        """Refuse where the function draws random numbers: a replayed pass would draw others
        (and a filter keep other elements), as TF refuses to save such an iterator."""
        if self._random:
            raise errors.FailedPreconditionError(
                None, None, f"{self.where}: an iterator over a dataset whose function draws "
                f"random numbers ({', '.join(self._random)}) cannot be saved in a checkpoint: "
                "its position could not be replayed.")

    def _bind(self, nd, ctx):
        kd = get_kernel_def(nd, "CPU")
        if kd.is_async:
            raise errors.InvalidArgumentError(
                None, None, f"{self.where}: op {nd.op} ({nd.name}) cannot run inside a dataset "
                "function")
        fn = kd.factory(nd, ctx)
        if kd.takes_step:  # no step here: a function's call op runs its body in one of its own
            fn = functools.partial(fn, None)
        ref_inputs = get_op_def(nd.op).ref_inputs
        deref = [] if getattr(fn, "accepts_refs", False) else [
            i for i, t in enumerate(nd.input_types) if t.is_ref_dtype and i not in ref_inputs]
        inputs = [s if ":" in s else s + ":0" for s in nd.input if not s.startswith("^")]
        controls = [s[1:] for s in nd.input if s.startswith("^")]
        merge = nd.op in MERGE_OPS
        return nd.name, fn, inputs, controls, deref, len(nd.output_types), merge

    def __call__(self, args, captured) -> list:
        # Silent at inf and NaN as the executor's kernels are: the function runs inside
        # ``IteratorGetNext``, whose own guard depends on the element's dtypes.
        token = ignore_fp_errors()
        try:
            return self._run(args, captured)
        finally:
            restore_fp_errors(token)

    def _run(self, args, captured) -> list:
        env = dict(zip(self._args, args))
        env.update(zip(self._captures, captured))
        dead: set[str] = set()  # ops skipped on an untaken tf.cond branch
        for name, fn, inputs, controls, deref, n_out, merge in self._steps:
            values = [env[k] for k in inputs]
            if merge:
                live = [(i, v) for i, v in enumerate(values) if v is not DEAD]
                out = fn(live[0][1], live[0][0]) if live else None
            elif any(v is DEAD for v in values) or any(c in dead for c in controls):
                out = None
            else:
                for i in deref:
                    values[i] = values[i].read()
                out = fn(*values)
            if out is None and n_out:
                # Deadness as the executor propagates it: a node with a dead input is dead.
                dead.add(name)
                out = DEAD if n_out == 1 else (DEAD,) * n_out
            if n_out == 1:
                env[name + ":0"] = out
            elif n_out > 1:
                for k, v in enumerate(out):
                    env[f"{name}:{k}"] = v
        # (a dataset a function returns, ``flat_map``'s, is passed on as it is)
        return [v if isinstance(v, DatasetValue) else np.asarray(v)
                for v in (env[r] for r in self._rets)]


def _op_types_within(node_defs):
    """The op types of ``node_defs`` and of the bodies of the functions they call (a loop in a
    dataset function runs in a called function)."""
    for nd in node_defs:
        yield nd.op
        body = nd.attr.get("_body")
        if body is not None:
            yield from _op_types_within(graph_def_from_json(body["graph_def"]).node)


def _draws_random(op_type: str) -> bool:
    return not op_type.startswith("Stateless") and (
        "Random" in op_type or op_type in ("TruncatedNormal", "Multinomial"))


# --- dataset values -------------------------------------------------------------------------------
# TF's cardinalities of an endless dataset and of one that cannot be counted without reading it.
INFINITE, UNKNOWN = -1, -2


class DatasetValue:
    """What a dataset op outputs at run time; ``elements()`` starts a pass over it."""

    # As a component of an element (a window's), a dataset is a scalar: TF's variant.
    shape, ndim = (), 0

    def elements(self):
        raise NotImplementedError

    def inputs(self) -> list:
        """The dataset values this one reads (an iterator's checkpoint walks them)."""
        found = [getattr(self, a, None) for a in ("source", "first", "second")]
        found += list(getattr(self, "sources", ()))
        return [v for v in found if isinstance(v, DatasetValue)]

    def check_saveable(self) -> None:
        """Raise where a pass over this value cannot be saved and replayed to a position (it
        reads a Python generator, or draws random numbers in a function)."""

    def cardinality(self) -> int:
        """How many elements a pass gives, by TF's rules per transformation: the count,
        ``INFINITE`` or, where it cannot be known without reading, ``UNKNOWN``."""
        return UNKNOWN

    def batches(self, size: int, drop_remainder: bool):
        """A pass of whole batches made at once, or None where only ``batch``'s stacking of
        elements one by one can make them."""
        return None

    def __repr__(self):
        return f"<{type(self).__name__}>"


class Failure:
    """An element whose making failed (a map function's error, a batch of unequal shapes): it
    travels down the pipeline in the element's place, and the iterator raises its error where
    it would have handed the element out; the pass goes on with the next one (TF's)."""

    __slots__ = ("error",)

    def __init__(self, error: errors.OpError):
        self.error = error


def _failed(parts) -> Failure | None:
    return next((p for p in parts if isinstance(p, Failure)), None)


def _made(make, *args):
    """``make(*args)``, or the ``Failure`` of the error it raised."""
    try:
        return make(*args)
    except errors.OpError as e:
        return Failure(e)


def _counted(elements, count: int):
    """The first ``count`` elements, as TF's take counts them: a failure is passed on and not
    counted."""
    if count <= 0:
        return
    for element in elements:
        yield element
        if not isinstance(element, Failure):
            count -= 1
            if count == 0:
                return


class _Tensors(DatasetValue):
    def __init__(self, components):
        self.components = tuple(np.asarray(c) for c in components)

    def elements(self):
        yield self.components

    def cardinality(self) -> int:
        return 1


class _TensorSlices(DatasetValue):
    def __init__(self, components, name):
        self.components = [np.asarray(c) for c in components]
        sizes = {c.shape[0] if c.ndim else None for c in self.components}
        if None in sizes or len(sizes) != 1:
            raise errors.InvalidArgumentError(
                None, None, f"{name}: all components must have the same size in dimension 0, "
                f"got shapes {[list(c.shape) for c in self.components]}")
        self.n = sizes.pop()

    def elements(self):
        for i in range(self.n):
            # dtype kept: a slice of a string (object) array stays an object array of bytes
            yield tuple(np.asarray(c[i], dtype=c.dtype) for c in self.components)

    def cardinality(self) -> int:
        return self.n

    def batches(self, size: int, drop_remainder: bool):
        # One copy of rows per component, where stacking ``size`` elements cost a Python
        # step each (an MNIST epoch of 64-row batches: 5.4 ms, 0.3 ms by hand in NumPy).
        for lo in range(0, self.n, size):
            hi = min(lo + size, self.n)
            if drop_remainder and hi - lo < size:
                return
            yield tuple(c[lo:hi].copy() for c in self.components)


class _Range(DatasetValue):
    def __init__(self, start, stop, step):
        self.start, self.stop, self.step = int(start), int(stop), int(step)
        if self.step == 0:
            raise errors.InvalidArgumentError(None, None, "RangeDataset: step must be != 0")

    def elements(self):
        for v in range(self.start, self.stop, self.step):
            yield (np.int64(v),)

    def cardinality(self) -> int:
        return len(range(self.start, self.stop, self.step))


class _Generator(DatasetValue):
    def __init__(self, make_flat_iterator):
        self.make = make_flat_iterator

    def elements(self):
        yield from self.make()

    def check_saveable(self) -> None:
        # A Python generator's position cannot be written down, nor replayed faithfully (it
        # may read anything): TF refuses too.
        raise errors.FailedPreconditionError(
            None, None, "An iterator over a dataset made by from_generator cannot be saved in "
            "a checkpoint: a Python generator's position cannot be written down.")


class _Map(DatasetValue):
    def __init__(self, source, fn, captured):
        self.source, self.fn, self.captured = source, fn, captured

    def check_saveable(self) -> None:
        self.fn.check_replayable()

    def elements(self):
        fn, captured = self.fn, self.captured
        for element in self.source.elements():
            if element.__class__ is Failure:
                yield element
                continue
            try:  # (inline, not ``_made``: a call per element shows in a long pipeline)
                out = tuple(fn(element, captured))
            except errors.OpError as e:
                out = Failure(e)
            yield out


class _Filter(DatasetValue):
    def __init__(self, source, fn, captured):
        self.source, self.fn, self.captured = source, fn, captured

    def check_saveable(self) -> None:
        self.fn.check_replayable()

    def elements(self):
        keeps = self._keeps
        for element in self.source.elements():
            if element.__class__ is Failure:
                yield element
                continue
            try:
                if keeps(element):
                    yield element
            except errors.OpError as e:
                yield Failure(e)

    def _keeps(self, element) -> bool:
        keep = self.fn(element, self.captured)[0]
        if keep.shape != () or keep.dtype != np.bool_:
            raise errors.InvalidArgumentError(
                None, None, f"{self.fn.where}: the predicate must return a scalar bool, got "
                f"{keep.dtype} of shape {list(keep.shape)}")
        return bool(keep)


def _stack(values: list, c: int) -> np.ndarray:
    first = values[0].shape
    for k, v in enumerate(values[1:], 1):
        if v.shape != first:
            raise errors.InvalidArgumentError(
                None, None, f"Cannot batch tensors with different shapes in component {c}. "
                f"First element had shape {list(first)} and element {k} had shape "
                f"{list(v.shape)}.")
    return np.stack(values)


class _Batch(DatasetValue):
    def __init__(self, source, batch_size, drop_remainder, pad=None):
        self.source, self.size, self.drop = source, int(batch_size), bool(drop_remainder)
        if self.size <= 0:
            raise errors.InvalidArgumentError(None, None, "Batch size must be greater than "
                                              f"zero, got {self.size}")
        self.pad = pad  # (padded shapes, padding values) for padded_batch

    def elements(self):
        whole = self.source.batches(self.size, self.drop) if self.pad is None else None
        if whole is not None:
            yield from whole
            return
        it = self.source.elements()
        if self.pad is not None:
            yield from self._padded(it)
            return
        while True:
            chunk = list(itertools.islice(it, self.size))
            # A failed element fails its batch, a short last one too; the batch's other
            # elements are gone (TF's).
            failed = _failed(chunk)
            if failed is not None:
                yield failed
                continue
            if not chunk or (self.drop and len(chunk) < self.size):
                return
            yield _made(self._combine, chunk)

    def cardinality(self) -> int:
        n = self.source.cardinality()
        if n < 0:
            return n
        return n // self.size if self.drop else -(-n // self.size)

    def _padded(self, it):
        """``padded_batch``: a failed element fails the batch at once, the elements gathered
        before it are gone and the next batch starts after it (TF 2.21's, where ``batch``
        reads its whole batch first)."""
        chunk = []
        for element in it:
            if element.__class__ is Failure:
                chunk = []
                yield element
                continue
            chunk.append(element)
            if len(chunk) == self.size:
                yield _made(self._combine, chunk)
                chunk = []
        if chunk and not self.drop:
            yield _made(self._combine, chunk)

    def _combine(self, chunk) -> tuple:
        columns = [[e[c] for e in chunk] for c in range(len(chunk[0]))]
        if self.pad is None:
            return tuple(_stack(col, c) for c, col in enumerate(columns))
        return tuple(_pad(col, c, self.pad[0][c], self.pad[1][c])
                     for c, col in enumerate(columns))


def _pad(values: list, c: int, padded_shape, pad_value) -> np.ndarray:
    ranks = {v.ndim for v in values}
    if len(ranks) != 1 or ranks.pop() != len(padded_shape):
        raise errors.InvalidArgumentError(
            None, None, f"padded_batch: component {c} has elements of rank "
            f"{sorted({v.ndim for v in values})}, padded_shapes asks for rank "
            f"{len(padded_shape)}")
    dims = []
    for d, want in enumerate(padded_shape):
        biggest = max(v.shape[d] for v in values)
        if want < 0:
            dims.append(biggest)
        elif biggest > want:
            raise errors.InvalidArgumentError(
                None, None, f"Attempted to pad to a smaller size than the input element: "
                f"component {c} dimension {d} has size {biggest} > {want}")
        else:
            dims.append(int(want))
    out = np.full([len(values)] + dims, pad_value, dtype=values[0].dtype)
    for k, v in enumerate(values):
        out[(k,) + tuple(slice(0, s) for s in v.shape)] = v
    return out


class _Shuffle(DatasetValue):
    """TF's buffer shuffle: fill ``buffer_size`` elements, emit a random one, refill its slot.
    A pass draws from a generator keyed by the seeds (and, when reshuffling, the pass's
    number), so a seeded pipeline gives the same order in every run of the program. Under an
    iterator, the iterator holds the key and numbers its own passes (a number drawn once from
    the dataset's, then each epoch of a ``repeat`` the next): what its checkpoint saves."""

    def __init__(self, source, buffer_size, seed, seed2, reshuffle):
        self.source, self.size = source, int(buffer_size)
        if self.size <= 0:
            raise errors.InvalidArgumentError(None, None, "buffer_size must be greater than "
                                              f"zero, got {self.size}")
        seed, seed2 = int(seed), int(seed2)
        self.random_key = seed == 0 and seed2 == 0
        if self.random_key:
            seed, seed2 = secrets.randbits(63), secrets.randbits(63)
        self.key = [seed & (2**63 - 1), seed2 & (2**63 - 1)]
        self.reshuffle = bool(reshuffle)
        self.next_pass = 0
        self._lock = threading.Lock()

    def cardinality(self) -> int:
        return self.source.cardinality()

    def take_pass(self) -> int:
        """The next pass number of this dataset."""
        with self._lock:
            n, self.next_pass = self.next_pass, self.next_pass + 1
            return n

    def pass_taken(self, n: int) -> None:
        """Pass ``n`` is a restored iterator's: later ones draw past it."""
        with self._lock:
            self.next_pass = max(self.next_pass, n + 1)

    def elements(self):
        pulling = _PULLING.get()
        if pulling is not None:
            key, seed = pulling.shuffle_pass(self)
        else:
            key, seed = self.key, [self.take_pass()]
        rng = np.random.default_rng(key + seed if self.reshuffle else key)
        it = self.source.elements()
        buffer = []
        for element in it:  # a failed element is raised as it comes, never buffered (TF's)
            if element.__class__ is Failure:
                yield element
                continue
            buffer.append(element)
            if len(buffer) == self.size:
                break
        while buffer:
            i = int(rng.integers(len(buffer)))
            out = buffer[i]
            refill = next(it, None)
            while refill is not None and refill.__class__ is Failure:
                yield refill
                refill = next(it, None)
            if refill is None:
                buffer[i] = buffer[-1]
                buffer.pop()
            else:
                buffer[i] = refill
            yield out


class _Repeat(DatasetValue):
    def __init__(self, source, count):
        self.source, self.count = source, int(count)

    def elements(self):
        epochs = itertools.count() if self.count < 0 else range(self.count)
        for _ in epochs:
            produced = False
            for element in self.source.elements():
                produced = True
                yield element
            if not produced:
                return  # an empty input repeated forever is empty, not a hang

    def cardinality(self) -> int:
        n = self.source.cardinality()
        if self.count < 0:  # (TF's: forever over an uncounted input is infinite too)
            return 0 if n == 0 else INFINITE
        if self.count == 0 or n < 0:
            return 0 if self.count == 0 else n
        return self.count * n


class _Take(DatasetValue):
    def __init__(self, source, count):
        self.source, self.count = source, int(count)

    def elements(self):
        it = self.source.elements()
        yield from it if self.count < 0 else _counted(it, self.count)

    def cardinality(self) -> int:
        n = self.source.cardinality()
        if n == UNKNOWN:
            return UNKNOWN
        if n == INFINITE:
            return INFINITE if self.count < 0 else self.count
        return n if self.count < 0 else min(n, self.count)


class _Skip(DatasetValue):
    def __init__(self, source, count):
        self.source, self.count = source, int(count)

    def elements(self):
        it = self.source.elements()
        if self.count < 0:
            for _ in it:
                pass
            return
        skipped = 0
        while skipped < self.count:  # a failure met while skipping is raised, not counted
            element = next(it, None)  # (TF 1.x's; TF 2 loses the count skipped before it)
            if element is None:
                return
            if isinstance(element, Failure):
                yield element
            else:
                skipped += 1
        yield from it

    def cardinality(self) -> int:
        n = self.source.cardinality()
        if n < 0:
            return n
        return 0 if self.count < 0 else max(0, n - self.count)


class _Zip(DatasetValue):
    def __init__(self, sources):
        self.sources = sources

    def elements(self):
        for parts in zip(*[s.elements() for s in self.sources]):
            yield _failed(parts) or tuple(itertools.chain.from_iterable(parts))

    def cardinality(self) -> int:
        counts = [s.cardinality() for s in self.sources]
        if UNKNOWN in counts:
            return UNKNOWN
        finite = [n for n in counts if n != INFINITE]
        return min(finite) if finite else INFINITE


class _Concatenate(DatasetValue):
    def __init__(self, first, second):
        self.first, self.second = first, second

    def elements(self):
        yield from self.first.elements()
        yield from self.second.elements()

    def cardinality(self) -> int:
        counts = (self.first.cardinality(), self.second.cardinality())
        if INFINITE in counts:
            return INFINITE
        return UNKNOWN if UNKNOWN in counts else sum(counts)


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


def _open_text(name: str, compression: str):
    try:
        with open(name, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise errors.NotFoundError(None, None, f"{name}; No such file or directory") from None
    except OSError as e:
        raise errors.UnknownError(None, None, f"{name}: {e}") from None
    try:
        if compression == "GZIP":
            return gzip.decompress(data)
        if compression == "ZLIB":
            return zlib.decompress(data)
    except (OSError, zlib.error, EOFError) as e:
        raise errors.DataLossError(None, None, f"{name}: not valid {compression} data: {e}") \
            from None
    return data


def split_lines(data: bytes) -> list[bytes]:
    """Lines of a text file without their ``\\n`` (or ``\\r\\n``), as TF's line readers give."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return [line[:-1] if line.endswith(b"\r") else line for line in lines]


class _TextLines(DatasetValue):
    def __init__(self, filenames, compression):
        self.files = [f.decode() if isinstance(f, bytes) else str(f)
                      for f in np.asarray(filenames, dtype=object).reshape(-1)]
        compression = np.asarray(compression, dtype=object).reshape(-1)[0]
        self.compression = compression.decode() if isinstance(compression, bytes) \
            else str(compression)
        if self.compression not in ("", "GZIP", "ZLIB"):
            raise errors.InvalidArgumentError(None, None, "Unsupported compression_type: "
                                              f"{self.compression!r}")

    def elements(self):
        for name in self.files:
            for line in split_lines(_open_text(name, self.compression)):
                yield (np.array(line, dtype=object),)


class _TFRecords(_TextLines):
    """The records of TFRecord files, checked as they are read; with ``cycle`` files above
    one, read ``cycle`` files at a time, one record from each in turn, a finished file's
    place taken by the next (TF's ``num_parallel_reads``: an interleave, block length 1)."""

    def __init__(self, filenames, compression, cycle: int = 1):
        super().__init__(filenames, compression)
        self.cycle = max(1, int(cycle))

    def _records(self, name: str):
        for record in read_records(name, self.compression):
            yield (np.array(record, dtype=object),)

    def elements(self):
        if self.cycle == 1:
            for name in self.files:
                yield from self._records(name)
            return
        pending = iter(self.files)
        slots = [None] * self.cycle
        position, files_left = 0, True
        while files_left or any(s is not None for s in slots):
            if slots[position] is None and files_left:
                name = next(pending, None)
                files_left = name is not None
                slots[position] = self._records(name) if files_left else None
            if slots[position] is not None:
                element = next(slots[position], None)
                if element is None:
                    slots[position] = None
                else:
                    yield element
            position = (position + 1) % self.cycle


class _FixedLengthRecords(_TFRecords):
    """The fixed-length records of binary files after a header, before a footer (TF's
    ``FixedLengthRecordDatasetV2``). As in TF, a plain file whose body is no whole number of
    records yields nothing and fails (``InvalidArgumentError``); a compressed one yields its
    whole records first, then fails (``DataLossError``)."""

    def __init__(self, filenames, header_bytes, record_bytes, footer_bytes, compression,
                 cycle: int = 1):
        super().__init__(filenames, compression, cycle)
        self.layout = [int(np.asarray(v)) for v in (header_bytes, record_bytes, footer_bytes)]
        if self.layout[1] <= 0:
            raise errors.InvalidArgumentError(None, None,
                                              f"record_bytes must be > 0 not {self.layout[1]}")
        if self.layout[0] < 0 or self.layout[2] < 0:
            raise errors.InvalidArgumentError(None, None,
                                              "header_bytes and footer_bytes must be >= 0")

    def _records(self, name: str):
        header, record, footer = self.layout
        data = _open_text(name, self.compression)
        body = max(len(data) - header - footer, 0)
        whole = body - body % record
        bad = (f"Excluding the header ({header} bytes) and footer ({footer} bytes), input file "
               f"\"{name}\" has body length {body} bytes, which is not an exact multiple of the "
               f"record length ({record} bytes).")
        if whole != body and not self.compression:
            raise errors.InvalidArgumentError(None, None, bad)
        for pos in range(header, header + whole, record):
            yield (np.array(data[pos:pos + record], dtype=object),)
        if whole != body:
            raise errors.DataLossError(None, None, bad)


# --- dataset kernels ------------------------------------------------------------------------------
register_kernel("TensorDataset", host_only=True, fn=lambda *components: _Tensors(components))


@kernel("TensorSliceDataset", host_only=True)
def _tensor_slices(node, ctx):
    return lambda *components: _TensorSlices(components, node.name)


register_kernel("RangeDataset", host_only=True, fn=_Range)
register_kernel("PrefetchDataset", host_only=True, fn=lambda source, buffer_size: source)
register_kernel("RepeatDataset", host_only=True, fn=_Repeat)
register_kernel("TakeDataset", host_only=True, fn=_Take)
register_kernel("SkipDataset", host_only=True, fn=_Skip)
register_kernel("ZipDataset", host_only=True, fn=lambda *sources: _Zip(sources))
register_kernel("ConcatenateDataset", host_only=True, fn=_Concatenate)
register_kernel("TextLineDataset", host_only=True, fn=lambda files, compression, buffer_size:
                _TextLines(files, compression))


@kernel("TFRecordDataset", host_only=True)
def _tf_record_dataset(node, ctx):
    cycle = int(node.attr.get("num_parallel_reads", 1))
    return lambda files, compression, buffer_size: _TFRecords(files, compression, cycle)


@kernel("FixedLengthRecordDatasetV2", host_only=True)
def _fixed_length_record_dataset(node, ctx):
    cycle = int(node.attr.get("num_parallel_reads", 1))
    return lambda files, header, record, footer, buffer_size, compression: \
        _FixedLengthRecords(files, header, record, footer, compression, cycle)


@kernel("GeneratorDataset", host_only=True)
def _generator(node, ctx):
    token = node.attr["token"]

    def generator():
        make = registered_function(token)
        if make is None:
            raise errors.FailedPreconditionError(
                None, None, f"{node.name}: the generator of this dataset is not registered in "
                "this process")
        return _Generator(make)

    return generator


def _function_factory(cls):
    def factory(node, ctx):
        fn = DatasetFunction(node.attr["f"], ctx, node.name)
        return lambda source, *captured: cls(source, fn, captured)

    return factory


register_kernel("MapDataset", host_only=True, factory=_function_factory(_Map))
register_kernel("FilterDataset", host_only=True, factory=_function_factory(_Filter))


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


@kernel("BatchDatasetV2", host_only=True)
def _batch(node, ctx):
    return lambda source, batch_size, drop: _Batch(source, batch_size, drop)


@kernel("PaddedBatchDatasetV2", host_only=True)
def _padded_batch(node, ctx):
    n = len(node.attr["output_types"])

    def padded_batch(source, batch_size, *rest):
        shapes = [np.asarray(s, dtype=np.int64).reshape(-1) for s in rest[:n]]
        values = [np.asarray(v) for v in rest[n:2 * n]]
        return _Batch(source, batch_size, rest[2 * n], pad=(shapes, values))

    return padded_batch


@kernel("ShuffleDataset", host_only=True)
def _shuffle(node, ctx):
    reshuffle = node.attr.get("reshuffle_each_iteration", True)
    return lambda source, size, seed, seed2: _Shuffle(source, size, seed, seed2, reshuffle)


# --- iterators ------------------------------------------------------------------------------------
def _dataset_values(dataset: DatasetValue) -> list:
    """``dataset`` and every value it reads, depth first (a checkpoint's order)."""
    out, stack = [], [dataset]
    while stack:
        v = stack.pop()
        out.append(v)
        stack.extend(reversed(v.inputs()))
    return out


_STATE_FORMAT = "dflab-iterator-state-2"
# The iterator whose ``next`` runs (set around it): shuffles ask it for their key and pass.
_PULLING: contextvars.ContextVar = contextvars.ContextVar("dataset_iterator", default=None)


class IteratorState:
    """One iterator's position: the pass in progress over the dataset it was initialised with.

    Its checkpoint (``serialize``) is how many elements the pass has handed out and, per
    shuffle in it, the key and pass number this iterator draws with (its own, so that other
    iterators over the dataset change nothing); restoring replays the pass to there, so the
    next element, and every epoch after, is the one the saved iterator would have given."""

    def __init__(self, name: str, types, shapes):
        self.name = name
        self.types = list(types)
        self.shapes = [TensorShape(s) for s in shapes]
        self._pass = None
        self._dataset = None
        self._shuffles: dict = {}  # id(shuffle) -> [key, pass number, epochs begun]
        self._given = 0
        self._ended = False
        self._lock = threading.Lock()

    @property
    def initialized(self) -> bool:
        return self._pass is not None

    def reset(self, dataset: DatasetValue) -> None:
        with self._lock:
            self._start_pass(dataset)

    def start_once(self, dataset: DatasetValue) -> None:
        """Start a pass over ``dataset`` unless one was started (a one-shot iterator)."""
        with self._lock:
            if self._pass is None:
                self._start_pass(dataset)

    def _start_pass(self, dataset: DatasetValue, shuffles=None) -> None:
        self._dataset, self._given, self._ended = dataset, 0, False
        self._shuffles = shuffles or {}
        self._pass = dataset.elements()

    def shuffle_pass(self, shuffle) -> tuple[list, list]:
        """The key and seed a shuffle's next epoch in this pass draws with: the iterator's
        pass number for it (taken from the dataset once), then the epoch within the pass."""
        drawn = self._shuffles.get(id(shuffle))
        if drawn is None:
            drawn = self._shuffles[id(shuffle)] = [list(shuffle.key), shuffle.take_pass(), 0]
        key, number, epoch = drawn
        drawn[2] += 1
        # (The first epoch seeds as the dataset's own pass would: a single pass's order is
        # the one it had before iterators numbered their epochs.)
        return key, [number] if epoch == 0 else [number, epoch]

    def _next(self):
        token = _PULLING.set(self)
        try:
            return next(self._pass)
        finally:
            _PULLING.reset(token)

    def serialize(self) -> bytes:
        """The iterator's position as JSON (see the class docstring)."""
        with self._lock:
            values = _dataset_values(self._dataset) if self._dataset is not None else []
            for v in values:
                v.check_saveable()
            shuffles = [None if id(v) not in self._shuffles else
                        {"key": self._shuffles[id(v)][0], "pass": self._shuffles[id(v)][1]}
                        for v in values]
            return json.dumps({
                "format": _STATE_FORMAT, "name": self.name,
                "dataset": [type(v).__name__ for v in values], "shuffles": shuffles,
                "given": self._given, "ended": self._ended}).encode()

    def deserialize(self, data: bytes) -> None:
        """Take back the position ``serialize`` wrote, for the same pipeline."""
        state = _read_state(data, self.name)
        with self._lock:
            if self._dataset is None:
                raise errors.FailedPreconditionError(
                    None, None, f"Iterator '{self.name}' has not been initialized: it needs "
                    "its dataset before a saved position can be restored into it.")
            values = _dataset_values(self._dataset)
            kinds = [type(v).__name__ for v in values]
            if kinds != state["dataset"] or len(state["shuffles"]) != len(values):
                raise errors.InvalidArgumentError(
                    None, None, f"The saved position of iterator '{state['name']}' is over "
                    f"another pipeline ({' <- '.join(state['dataset'])}) than this iterator's "
                    f"({' <- '.join(kinds)}).")
            shuffles = {}
            for v, saved in zip(values, state["shuffles"]):
                if saved is not None:
                    v.pass_taken(saved["pass"])
                    shuffles[id(v)] = [saved["key"], saved["pass"], 0]
            self._start_pass(self._dataset, shuffles)
            for _ in range(state["given"]):
                try:
                    self._next()
                except StopIteration:
                    break
                self._given += 1
            if state["ended"]:
                self._pass, self._ended = iter(()), True

    def get_next(self) -> tuple:
        with self._lock:
            if self._pass is None:
                raise errors.FailedPreconditionError(
                    None, None, f"GetNext() failed because the iterator '{self.name}' has not "
                    "been initialized. Ensure that you have run the initializer operation for "
                    "this iterator before getting the next element.")
            try:
                element = self._next()
            except StopIteration:
                self._ended = True
                raise errors.OutOfRangeError(None, None, "End of sequence") from None
            self._given += 1
        if isinstance(element, Failure):
            raise element.error
        self._check(element)
        return element

    def _check(self, element) -> None:
        if len(element) != len(self.types):
            raise errors.InvalidArgumentError(
                None, None, f"Iterator '{self.name}' expects {len(self.types)} components, the "
                f"dataset produced {len(element)}")
        for c, (v, shape) in enumerate(zip(element, self.shapes)):
            if not shape.is_compatible_with(TensorShape(list(v.shape))):
                raise errors.InvalidArgumentError(
                    None, None, f"Iterator '{self.name}': component {c} has shape "
                    f"{list(v.shape)}, expected {shape}")


def _iterator_factory(one_shot: bool):
    def factory(node, ctx):
        key = node.attr.get("shared_name") or node.name

        def create():
            return IteratorState(key, node.attr["output_types"], node.attr["output_shapes"])

        def lookup():
            return ctx.resources.lookup_or_create("iterator", key, create,
                                                  node.attr.get("container", ""))

        if not one_shot:
            return lookup

        def one_shot_iterator(dataset):
            state = lookup()
            if not state.initialized:
                state.start_once(dataset)
            return state

        return one_shot_iterator

    return factory


register_kernel("IteratorV2", host_only=True, factory=_iterator_factory(False))
register_kernel("OneShotIterator", host_only=True, factory=_iterator_factory(True))


def _read_state(data, name: str) -> dict:
    """A saved iterator position, checked: JSON data of the expected form, or a clear error
    (a file is read as data, never run)."""
    try:
        state = json.loads(bytes(np.asarray(data, dtype=object).item()).decode())
        ok = isinstance(state, dict) and state.get("format") == _STATE_FORMAT and \
            isinstance(state.get("dataset"), list) and isinstance(state.get("shuffles"), list) \
            and _whole(state.get("given")) and isinstance(state.get("ended"), bool) and \
            all(s is None or (isinstance(s, dict) and _whole(s.get("pass")) and
                              isinstance(s.get("key"), list) and len(s["key"]) == 2 and
                              all(_whole(k) and k < 2**63 for k in s["key"]))
                for s in state["shuffles"])
    except (ValueError, TypeError, UnicodeDecodeError, AttributeError):
        ok = False
    if not ok:
        raise errors.InvalidArgumentError(
            None, None, f"Could not restore iterator '{name}': the saved value is not an "
                        "iterator position dflab wrote (a corrupted or foreign checkpoint?).")
    return state


def _whole(v) -> bool:
    return type(v) is int and v >= 0


@kernel("SerializeIterator", host_only=True)
def _serialize_iterator(node, ctx):
    return lambda iterator: np.asarray(iterator.serialize(), dtype=object)


@kernel("DeserializeIterator", host_only=True)
def _deserialize_iterator(node, ctx):
    return lambda iterator, state: iterator.deserialize(state)


@kernel("AnonymousIterator", host_only=True)
def _anonymous_iterator(node, ctx):
    """A new iterator at every run, kept by no name: it lives as long as its handle (an eager
    iterator's tensor), so a loop over a dataset leaves nothing behind in the device."""
    types, shapes = node.attr["output_types"], node.attr["output_shapes"]
    return lambda: IteratorState("AnonymousIterator", types, shapes)


@kernel("MakeIterator", host_only=True)
def _make_iterator(node, ctx):
    def make_iterator(dataset, iterator):
        iterator.reset(dataset)

    return make_iterator


@kernel("IteratorGetNext", host_only=True)
def _get_next(node, ctx):
    single = len(node.attr["output_types"]) == 1

    def get_next(iterator):
        element = iterator.get_next()
        return element[0] if single else tuple(element)

    return get_next


class OptionalValue:
    """What ``IteratorGetNextAsOptional`` outputs: an element's components, or none."""

    def __init__(self, components: tuple | None):
        self.components = components

    def __repr__(self):
        return f"<Optional {'empty' if self.components is None else 'with a value'}>"


@kernel("IteratorGetNextAsOptional", host_only=True)
def _get_next_as_optional(node, ctx):
    def get_next_as_optional(iterator):
        try:
            return OptionalValue(tuple(iterator.get_next()))
        except errors.OutOfRangeError:
            return OptionalValue(None)

    return get_next_as_optional


@kernel("OptionalHasValue", host_only=True)
def _optional_has_value(node, ctx):
    return lambda optional: np.bool_(optional.components is not None)


@kernel("OptionalGetValue", host_only=True)
def _optional_get_value(node, ctx):
    single = len(node.attr["output_types"]) == 1

    def optional_get_value(optional):
        if optional.components is None:
            raise errors.InvalidArgumentError(None, node,
                                              "The optional does not have a value")
        return optional.components[0] if single else optional.components

    return optional_get_value
