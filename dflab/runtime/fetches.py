"""Fetch mapping: nested fetch structures <-> a flat list of unique tensors and target ops.

``Session.run`` accepts a tensor, an op, a name, a Variable, an ``IndexedSlices`` (fetched as
an ``IndexedSlicesValue``), a ``SparseTensor`` (fetched as a ``SparseTensorValue``), or any
nesting of lists, tuples, dicts and namedtuples of them, and returns the same structure with
ops mapped to None. A tensor fetched twice is computed once. Mappers for plain (hashable)
fetches are cached per graph. Feeds are mapped here too: a ``SparseTensor`` key stands for
its three component tensors (``expand_feeds``).
"""

from __future__ import annotations

from collections.abc import Mapping

from dflab.framework import ops as _ops
from dflab.framework.sparse_tensor import SparseTensor, SparseTensorValue
from dflab.ops.gradients import IndexedSlices, IndexedSlicesValue
from dflab.ops.session_ops import handle_fetches


class _Mapper:
    __slots__ = ("tensors", "targets", "build", "handles")

    def __init__(self, tensors, targets, build):
        self.tensors = tensors
        self.targets = targets
        self.build = build
        # (position, dtype) of fetched session handles: returned as TensorHandles.
        self.handles = handle_fetches(tensors)


def _element(graph, x):
    if isinstance(x, bytes):
        x = x.decode("utf-8", "replace")  # TF accepts a name as bytes too
    try:
        el = graph.as_graph_element(x)
    except (KeyError, ValueError) as e:
        # TF reports an unknown name or output index as a ValueError, whatever the lookup
        # raised.
        reason = e.args[0] if isinstance(e, KeyError) and e.args else e
        raise ValueError(f"Fetch argument {x!r} cannot be interpreted as a Tensor. "
                         f"({reason})") from None
    except TypeError:
        raise TypeError(
            f"Fetch argument {x!r} has invalid type {type(x).__name__}, must be a string or "
            "Tensor. (Can not convert a {0} into a Tensor or Operation.)".format(
                type(x).__name__)
        ) from None
    return el


def mapper_for(graph, fetches) -> _Mapper:
    cache = graph.__dict__.setdefault("_fetch_mapper_cache", {})
    try:
        m = cache.get(fetches)
    except TypeError:  # unhashable structure
        m = None
        cacheable = False
    else:
        cacheable = True
    if m is not None:
        return m
    m = _build_mapper(graph, fetches)
    if cacheable and isinstance(fetches, (_ops.Tensor, _ops.Operation, str)):
        cache[fetches] = m
    return m


def _build_mapper(graph, fetches) -> _Mapper:
    tensors: list = []
    targets: list = []
    t_index: dict[int, int] = {}
    seen_targets: set[int] = set()

    def leaf(x):
        el = _element(graph, x)
        if isinstance(el, _ops.Operation):
            if id(el) not in seen_targets:
                seen_targets.add(id(el))
                targets.append(el)
            return lambda vals: None
        k = t_index.get(id(el))
        if k is None:
            k = t_index[id(el)] = len(tensors)
            tensors.append(el)
        return lambda vals, k=k: vals[k]

    def walk(x):
        if x is None:
            raise TypeError("Fetch argument None has invalid type <class 'NoneType'>")
        if isinstance(x, (list, tuple)) and not _is_namedtuple(x):
            parts = [walk(e) for e in x]
            kind = type(x)
            if kind is list:
                return lambda vals: [p(vals) for p in parts]
            if kind is tuple:
                return lambda vals: tuple(p(vals) for p in parts)
            return lambda vals: kind(p(vals) for p in parts)
        if _is_namedtuple(x):
            parts = [walk(e) for e in x]
            return lambda vals: type(x)(*[p(vals) for p in parts])
        if isinstance(x, IndexedSlices):
            parts = [walk(x.values), walk(x.indices)]
            shape = walk(x.dense_shape) if x.dense_shape is not None else (lambda vals: None)
            return lambda vals: IndexedSlicesValue(parts[0](vals), parts[1](vals), shape(vals))
        if isinstance(x, SparseTensor):
            parts = [walk(x.indices), walk(x.values), walk(x.dense_shape)]
            return lambda vals: SparseTensorValue(*(p(vals) for p in parts))
        if isinstance(x, Mapping):
            items = [(k, walk(v)) for k, v in x.items()]
            kind = type(x)
            return lambda vals: kind((k, p(vals)) for k, p in items)
        return leaf(x)

    build = walk(fetches)
    return _Mapper(tensors, targets, build)


def _is_namedtuple(x) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def expand_feeds(key, value):
    """The (tensor key, value) pairs that feeding ``value`` to ``key`` stands for: one pair,
    or for a ``SparseTensor`` key its components fed from a ``SparseTensorValue`` or an
    ``(indices, values, dense_shape)`` triple, as TF's session does."""
    if not isinstance(key, SparseTensor):
        return ((key, value),)
    if isinstance(value, SparseTensor):
        raise TypeError("The value of a feed cannot be a tf.Tensor object (feeding a "
                        "SparseTensor). Acceptable feed values include SparseTensorValue, "
                        "a tuple (indices, values, dense_shape) or numpy arrays.")
    try:
        parts = tuple(value)
    except TypeError:
        parts = ()
    if len(parts) != 3:
        raise TypeError(f"A SparseTensor must be fed a SparseTensorValue or a tuple of "
                        f"(indices, values, dense_shape), got {type(value).__name__}")
    return tuple(zip((key.indices, key.values, key.dense_shape), parts))


def feed_items(feed_dict):
    """A feed dict's (tensor key, value) pairs, ``SparseTensor`` keys expanded."""
    for key, value in feed_dict.items():
        yield from expand_feeds(key, value)
