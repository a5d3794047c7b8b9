"""``tf.data`` kernels, the core: dataset values, dataset functions and the element-wise datasets.

A dataset op's kernel returns a *dataset value* (a subclass of ``DatasetValue``): the op's input
values plus what the transformation does. ``elements()`` starts one pass over it: a Python
generator of elements, each a tuple of NumPy arrays (one per flat component; strings are object
arrays of bytes). Nothing is read until an iterator asks, so a dataset over a large file or an
infinite ``repeat()`` costs nothing to build. An element whose making failed travels down the
pipeline as a ``Failure`` in its place, raised where the iterator would have handed it out.

This module holds the base and the element-wise datasets (tensors, slices, range, generator,
map, filter, batch, padded batch, shuffle, repeat, take, skip, zip, concatenate); the rest build
on it, and it imports none of them: the file readers in ``record_dataset_kernels``, the nested
and structural datasets (``flat_map``/``interleave``, ``unbatch``, ``shard``, ``window``,
``cache``, ``reduce``, cardinality) in ``nested_dataset_kernels``, and the iterators, which
hand the elements out and save their position, in ``iterator_kernels``. An iterator pulling an
element sets itself in ``_PULLING``, so the shuffles of its pass draw with its own key and
pass numbers. All of these are host-only ops.

Dataset functions (``map``, ``filter``, ``flat_map``/``interleave``, whose result is a
dataset value, and ``reduce``) arrive as plain data (``dflab.ops.dataset_ops``); a
``DatasetFunction`` binds their nodes' CPU kernels once, against the kernel's own context (so a
re-declared variable reads this device's state, at every call), and runs them in order,
propagating the deadness of an untaken ``tf.cond`` branch as the executor does.
"""

from __future__ import annotations

import contextvars
import functools
import itertools
import secrets
import threading

import numpy as np

from dflab.framework import errors
from dflab.framework.graph_io import FORMAT, VERSION, graph_def_from_json
from dflab.framework.op_kinds import MERGE_OPS
from dflab.framework.registry import get_op_def
from dflab.kernels.control_flow_kernels import DEAD
from dflab.kernels.fp_errors import ignore_fp_errors, restore_fp_errors
from dflab.kernels.registry import get_kernel_def, kernel, register_kernel
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


def _dataset_values(dataset: DatasetValue) -> list:
    """``dataset`` and every value it reads, depth first (a checkpoint's order)."""
    out, stack = [], [dataset]
    while stack:
        v = stack.pop()
        out.append(v)
        stack.extend(reversed(v.inputs()))
    return out


# The iterator whose ``next`` runs (set around it): shuffles ask it for their key and pass.
_PULLING: contextvars.ContextVar = contextvars.ContextVar("dataset_iterator", default=None)


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
