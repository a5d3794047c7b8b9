"""``tf.data`` iterator kernels: iterators as per-session resources, their saved positions, and
the optionals ``IteratorGetNextAsOptional`` hands out.

An iterator (``IteratorV2``, ``OneShotIterator``) is an ``IteratorState`` in its device's
``ResourceMgr``, keyed by ``shared_name`` or the op's name, so every step of a session sees the
same position; ``MakeIterator`` starts a new pass (re-initialisation), ``IteratorGetNext`` takes
one element or fails with ``OutOfRangeError`` at the end. ``AnonymousIterator`` (eager
iteration) makes a state kept by no name. ``SerializeIterator``/``DeserializeIterator`` write
an iterator's position as JSON data and replay a pass to it (a checkpoint's
``ITERATOR_STATE``); a saved position is read as data and checked, never run. While it pulls
an element an iterator is ``dataset_kernels._PULLING``: the shuffles of its pass draw with the
key and pass numbers it holds (and saves). All of these are host-only ops.
"""

from __future__ import annotations

import json
import threading

import numpy as np

from dflab.framework import errors
from dflab.framework.tensor_shape import TensorShape
from dflab.kernels.dataset_kernels import _PULLING, DatasetValue, Failure, _dataset_values
from dflab.kernels.registry import kernel, register_kernel

# --- iterators ------------------------------------------------------------------------------------
_STATE_FORMAT = "dflab-iterator-state-2"


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
