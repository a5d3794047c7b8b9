"""``tf.data.Iterator`` (TF 1.x): iterator resources and the ops that read them.

An ``Iterator`` wraps an iterator handle (``IteratorV2`` or ``OneShotIterator``) and the element
structure it yields. ``get_next()`` builds an ``IteratorGetNext`` op whose outputs have the
structure's dtypes and static shapes; past the last element it fails with
``tf.errors.OutOfRangeError``. The position is per-session state on the host, like a queue's.

With eager execution on, ``for element in dataset`` (and ``iter``, ``make_one_shot_iterator``,
``tf.contrib.eager.Iterator``) reads through an ``OwnedIterator``: an ``AnonymousIterator``
started on the dataset when it is made, each ``next`` one ``IteratorGetNext`` run at once. Its
state belongs to its handle and goes with it, as TF 2's ``OwnedIterator``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from dflab.data import structure as _st
from dflab.framework import dtypes as _dt
from dflab.framework import errors
from dflab.framework import ops as _ops
from dflab.framework.composite import GraphIterable, GraphLoop
from dflab.framework.tensor_shape import as_shape, unknown_shape
from dflab.ops import dataset_ops as _dso

if TYPE_CHECKING:  # the dataset module builds iterators: no import back at run time
    from dflab.data.dataset import Dataset


class Iterator(_st.HasElementStructure):
    """Reads the elements of a dataset, one ``get_next()`` evaluation at a time."""

    def __init__(self, handle, initializer, structure, types, shapes):
        self._handle = handle
        self._initializer = initializer
        self._structure = structure
        self._types = list(types)
        self._shapes = list(shapes)

    @staticmethod
    def from_structure(output_types, output_shapes=None, shared_name=None,
                       output_classes=None) -> Iterator:
        """An iterator not bound to any dataset: ``make_initializer(ds)`` gives the op that
        (re)starts it on ``ds``, any dataset of a compatible structure."""
        types = [_dt.as_dtype(t).base_dtype for t in _st.flatten(output_types)]
        if output_shapes is None:
            shapes = [unknown_shape()] * len(types)
        else:
            if not _st.same_structure(output_types, output_shapes):
                raise TypeError("output_shapes must have the same structure as output_types")
            shapes = [as_shape(s) for s in _st.flatten_up_to(output_types, output_shapes,
                                                             "output_shapes")]
        handle = _dso.iterator_resource(shared_name, types, shapes)
        return Iterator(handle, None, output_types, types, shapes)

    @staticmethod
    def from_string_handle(string_handle, output_types, output_shapes=None,
                           output_classes=None):
        raise NotImplementedError("Iterator.from_string_handle is not supported by dflab")

    # --- ops ---------------------------------------------------------------------------------
    @property
    def initializer(self) -> _ops.Operation:
        if self._initializer is None:
            raise ValueError("Iterator does not have an initializer.")
        return self._initializer

    def make_initializer(self, dataset: Dataset, name=None) -> _ops.Operation:
        """The op that starts this iterator on ``dataset`` (again, if it ran before)."""
        if not _st.same_structure(self._structure, dataset._structure):
            raise ValueError(f"The two structures don't have the same nested structure: "
                             f"the iterator's {self.output_types}, the dataset's "
                             f"{dataset.output_types}.")
        if self._types != dataset._types:
            raise TypeError(f"Expected output types {self.output_types} but got dataset with "
                            f"output types {dataset.output_types}.")
        if not all(a.is_compatible_with(b) for a, b in zip(self._shapes, dataset._shapes)):
            raise TypeError(f"Expected output shapes compatible with {self.output_shapes} but "
                            f"got dataset with output shapes {dataset.output_shapes}.")
        return _dso.make_iterator(dataset._variant_tensor, self._handle, name)

    def get_next(self, name=None):
        """The next element (a structure of tensors): one ``IteratorGetNext`` op."""
        outs = _dso.iterator_get_next(self._handle, self._types, self._shapes, name)
        return _st.pack_element(self._structure, outs)

    def string_handle(self, name=None):
        raise NotImplementedError("Iterator.string_handle is not supported by dflab")


class _IteratorLoop(GraphLoop):
    """A loop over iterator ``handle`` built as ops (AutoGraph's ``for``): each element asked
    for as an optional; the first ask waits for ``started`` (the op starting the pass)."""

    def __init__(self, handle, like: _st.HasElementStructure, started=()):
        self._handle, self._like, self._started = handle, like, list(started)

    def next_optional(self):
        with _ops.control_dependencies(self._started):
            optional = _dso.iterator_get_next_as_optional(self._handle, self._like._types,
                                                          self._like._shapes)
        self._started = []
        return optional

    def has_value(self, optional):
        return _dso.optional_has_value(optional)

    def value(self, optional):
        return _st.pack_element(self._like._structure, _dso.optional_get_value(
            optional, self._like._types, self._like._shapes))


def graph_loop_over(dataset: Dataset) -> _IteratorLoop:
    """A new pass over ``dataset`` in the graph being built: an ``AnonymousIterator`` started
    on it, and the loop reading it."""
    handle = _dso.anonymous_iterator(dataset._types, dataset._shapes)
    return _IteratorLoop(handle, dataset, [_dso.make_iterator(dataset._variant_tensor, handle)])


class OwnedIterator(_st.ElementsArgument, GraphIterable):
    """An eager iterator over ``dataset`` (see the module docstring): a Python iterator whose
    elements are eager tensors in the dataset's structure; ``get_next()`` past the end raises
    ``tf.errors.OutOfRangeError`` where ``next()`` stops."""

    def __init__(self, dataset: Dataset):
        if not _ops.executing_eagerly() and not _ops.get_default_graph().is_function_graph:
            raise RuntimeError("tf.data.Iterator (an eager iterator) is only supported when "
                               "eager execution is enabled or inside a tf.function; in a "
                               "graph use tf.compat.v1.data.make_one_shot_iterator(dataset)")
        self._structure = dataset._structure
        self._types = list(dataset._types)
        self._shapes = list(dataset._shapes)
        self._handle = _dso.anonymous_iterator(self._types, self._shapes)
        _dso.make_iterator(dataset._variant_tensor, self._handle)

    # --- as a traced function's argument, and in AutoGraph's loops (``composite``) --------
    _KIND, _COMPONENT_DTYPE = "iterator", _dt.resource

    def _component(self):
        return self._handle

    def _over_tensors(self, tensors) -> OwnedIterator:
        """An iterator reading handle ``tensors[0]`` (a traced function's argument), with
        these elements."""
        it = type(self).__new__(type(self))
        it._structure, it._types, it._shapes = self._structure, self._types, self._shapes
        it._handle = tensors[0]
        return it

    def _graph_loop(self) -> _IteratorLoop:
        return _IteratorLoop(self._handle, self)

    def _graph_iter(self) -> OwnedIterator:
        return self  # ``iter(iterator)`` in a traced function: the same iterator

    def __iter__(self):
        # In a graph each ``next`` adds an op and none ever ends the loop: a ``for`` there
        # would unroll forever, so only an eager loop or AutoGraph's (which never asks).
        if not _ops.executing_eagerly():
            raise graph_iteration_error("an iterator", "or call next(iterator)")
        return self

    def __next__(self):
        try:
            return self.get_next()
        except errors.OutOfRangeError:
            raise StopIteration from None

    next = __next__  # (TF 1.x's name)

    def get_next(self, name=None):
        """The next element; ``tf.errors.OutOfRangeError`` past the last one."""
        outs = _dso.iterator_get_next(self._handle, self._types, self._shapes, name)
        return _st.pack_element(self._structure, outs)

    def __repr__(self):
        return f"<OwnedIterator shapes: {self.output_shapes}, types: {self.output_types}>"

    # --- in a ``tf.train.Checkpoint`` (TF's key: ``<path>/.ATTRIBUTES/ITERATOR_STATE``) ----
    def _checkpoint_values(self) -> dict:
        return {"ITERATOR_STATE": _IteratorPosition(self._handle)}


class _IteratorPosition:
    """An iterator's position as a checkpoint reads and assigns a variable's value: a string
    scalar (``SerializeIterator``; restoring replays the pass to there)."""

    dtype = _dt.string
    name = "Iterator:0"

    def __init__(self, handle):
        self._handle = handle

    def read_value(self):
        return _dso.serialize_iterator(self._handle)

    def assign(self, value):
        return _dso.deserialize_iterator(self._handle, value)


def graph_iteration_error(what: str, otherwise: str) -> RuntimeError:
    """Python iteration over a dataset or iterator while a graph is built, which only
    AutoGraph's ``for`` can turn into ops."""
    return RuntimeError(
        f"Python iteration over {what} is only supported in eager mode or, in a tf.function, "
        "as a `for x in ...:` statement (over the dataset, iter(dataset), an iterator, or "
        "enumerate() or zip() of datasets) that AutoGraph converts into a loop of ops. Not "
        "converted: comprehensions, and a loop whose body holds a `return`; "
        f"{otherwise}.")


def _element_value(t):
    """An element's array without a copy, as TF's: a view that cannot be written to (the
    tensor's array is shared)."""
    value = t._numpy() if hasattr(t, "_numpy") else t.numpy()
    if isinstance(value, np.ndarray):
        value = value.view()
        value.flags.writeable = False
    return value


class NumpyIterator:
    """``dataset.as_numpy_iterator()``: the eager iterator's elements as NumPy values (a
    scalar as a NumPy scalar, a string as ``bytes``) in the dataset's structure."""

    def __init__(self, dataset: Dataset):
        self._iterator = OwnedIterator(dataset)

    def __iter__(self):
        return self

    def __next__(self):
        return _st.pack(self._iterator._structure,
                        [_element_value(t) for t in _st.flatten(next(self._iterator))])

    next = __next__

    def __repr__(self):
        return f"NumpyIterator(iterator={self._iterator!r})"


def make_one_shot_iterator(dataset: Dataset) -> Iterator | OwnedIterator:
    """An iterator that starts on ``dataset`` by itself, the first time it is used in a session,
    and cannot be restarted; with eager execution on, an eager iterator (as TF 1.x's)."""
    if _ops.executing_eagerly():
        return OwnedIterator(dataset)
    handle = _dso.one_shot_iterator(dataset._variant_tensor, dataset._types, dataset._shapes)
    return Iterator(handle, None, dataset._structure, dataset._types, dataset._shapes)


def make_initializable_iterator(dataset: Dataset, shared_name=None) -> Iterator:
    """An iterator over ``dataset`` that its ``initializer`` op starts (and restarts)."""
    if _ops.executing_eagerly():
        raise RuntimeError("`make_initializable_iterator()` is not supported in eager mode. "
                           "Use Python-style iteration instead.")
    handle = _dso.iterator_resource(shared_name, dataset._types, dataset._shapes)
    init = _dso.make_iterator(dataset._variant_tensor, handle)
    return Iterator(handle, init, dataset._structure, dataset._types, dataset._shapes)


def get_output_types(dataset_or_iterator):
    return dataset_or_iterator.output_types


def get_output_shapes(dataset_or_iterator):
    return dataset_or_iterator.output_shapes


def get_output_classes(dataset_or_iterator):
    return dataset_or_iterator.output_classes
