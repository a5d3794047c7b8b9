"""Python objects that traced functions and AutoGraph treat as values of the graph.

The engine's lower layers (``eager``, ``autograph``) meet objects of the layers above them
(``tf.data``'s datasets and iterators) only through these two interfaces, so they import
nothing from above:

* a ``CompositeArgument`` enters a ``tf.function`` as tensors (``_flat_tensors``), is traced
  by ``_trace_key`` (not by identity: a new epoch's dataset reuses the trace) and is rebuilt
  inside the trace around the argument placeholders (``_over_tensors``), as TF's composite
  tensors are;
* a ``GraphIterable`` can be looped over by ops (``_graph_loop``): AutoGraph turns a ``for``
  over one, while a function is being traced, into a ``while_loop`` that carries an
  *optional* next element; ``iter()``, ``enumerate()`` and ``zip()`` of one become what
  its ``_graph_iter``/``_graph_enumerate``/``_graph_zip`` give (an iterator started in the
  graph, a dataset's ``enumerate``, ``Dataset.zip``).
"""

from __future__ import annotations


class CompositeArgument:
    """An argument of a traced function made of tensors (see the module docstring)."""

    def _flat_tensors(self) -> list:
        """The tensors that enter the function for this object."""
        raise NotImplementedError

    def _placeholder_specs(self) -> list:
        """``(dtype, shape)`` of each of ``_flat_tensors``, for the argument placeholders."""
        raise NotImplementedError

    def _trace_key(self) -> tuple:
        """What traces are keyed by (hashable; ``key[0]`` names the kind, ``key[2]`` its
        components' dtypes, for messages)."""
        raise NotImplementedError

    def _over_tensors(self, tensors: list):
        """The same kind of object, with the same structure, over ``tensors``."""
        raise NotImplementedError


class GraphLoop:
    """One pass of a loop over a ``GraphIterable`` built as ops: ``next_optional()`` builds the
    op that asks for the next element (a scalar variant, empty past the last), ``has_value``
    and ``value`` read such an optional."""

    def next_optional(self):
        raise NotImplementedError

    def has_value(self, optional):
        raise NotImplementedError

    def value(self, optional):
        raise NotImplementedError


class GraphIterable:
    """An object AutoGraph can loop over with ops (see the module docstring)."""

    def _graph_loop(self) -> GraphLoop:
        """Start a pass (ops added to the default graph) and return its loop."""
        raise NotImplementedError

    def _graph_iter(self):
        """An iterator whose ``next()`` builds the op reading the next element (a new pass
        started in the graph being built), or None: Python's ``iter``."""
        return None

    def _graph_enumerate(self, start):
        """A ``GraphIterable`` of ``(index, element)`` pairs, or None: Python's ``enumerate``."""
        return None

    def _graph_zip(self, iterables):
        """A ``GraphIterable`` of ``iterables`` (this one first) side by side, or None."""
        return None
