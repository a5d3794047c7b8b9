"""``tf.Module``: a named container of variables and other modules, as TF's.

A module takes a name (by default its class's name in snake case; it must be a Python
identifier) and opens a name scope of that name once, when it is made (so in a graph the
second ``Dense`` is ``dense_1``); ``name_scope`` re-enters that very scope, and methods
decorated with ``Module.with_name_scope`` run inside it. ``variables``,
``trainable_variables``, ``non_trainable_variables`` and ``submodules`` walk the attributes
as TF does: a module's own attributes in sorted order (into lists, tuples and dicts, a dict's
keys sorted too), then each module found there walked the same way, each object once. A
``tf.train.Checkpoint`` saves a module's variables by attribute path, as any object's, and
restores one set after ``restore`` as it is set.
"""

from __future__ import annotations

import functools
import re

from dflab.framework import ops as _ops
from dflab.ops import variables as _variables

_IDENTIFIER = re.compile(r"^[a-zA-Z_]([a-zA-Z0-9_])*$")


def _camel_to_snake(name: str) -> str:
    """TF's rule: ``MLP`` -> ``mlp``, ``MyModel`` -> ``my_model``, ``Dense2D`` -> ``dense2d``."""
    name = re.sub(r"((?<=[a-z0-9])[A-Z]|(?!^)[A-Z](?=[a-z]))", r"_\1", name)
    return name.lower()


class _ModuleScope:
    """A module's name scope, re-entered by its full name (``name``: ``"outer/dense/"``)."""

    def __init__(self, name: str):
        self.name = name
        self._scope = None

    def __enter__(self):
        self._scope = _ops.name_scope(self.name)
        return self._scope.__enter__()

    def __exit__(self, *exc):
        scope, self._scope = self._scope, None
        return scope.__exit__(*exc)


class Module:
    """``tf.Module`` (see the module docstring)."""

    def __init__(self, name=None):
        if name is None:
            name = _camel_to_snake(type(self).__name__)
        elif not isinstance(name, str) or not _IDENTIFIER.match(name):
            raise ValueError(f"{name!r} is not a valid module name. Module names must be valid "
                             "Python identifiers (e.g. a valid class name).")
        self._name = name
        with _ops.name_scope(name) as scope:
            self._scope_name = scope

    def __setattr__(self, name, value):
        super().__setattr__(name, value)
        # A checkpoint restored before this attribute existed may hold its value (TF's
        # deferred restoration: dflab.train.object_checkpoint).
        held = self.__dict__.get("_dflab_restorations")
        if held and not name.startswith("_dflab_"):
            for restoration, path in list(held):
                restoration.attach(path, name, value)

    @property
    def name(self) -> str:
        return self._name

    @property
    def name_scope(self) -> _ModuleScope:
        """The scope the module opened when it was made; ``with module.name_scope:``."""
        return _ModuleScope(self._scope_name)

    @property
    def variables(self) -> tuple:
        """Every variable this module and its submodules hold (each once)."""
        return tuple(self._flatten(predicate=_is_variable))

    @property
    def trainable_variables(self) -> tuple:
        return tuple(self._flatten(predicate=lambda v: _is_variable(v) and v.trainable))

    @property
    def non_trainable_variables(self) -> tuple:
        return tuple(self._flatten(predicate=lambda v: _is_variable(v) and not v.trainable))

    @property
    def submodules(self) -> tuple:
        """The modules inside this one, at any depth (each level's own first)."""
        return tuple(self._flatten(predicate=lambda v: isinstance(v, Module)))

    def _flatten(self, recursive=True, predicate=None, seen=None):
        """The objects reached from this module's attributes for which ``predicate`` holds:
        its own attributes (sorted) first, then each module found there, walked the same way
        in turn (TF's order), each object once."""
        predicate = predicate or (lambda _: True)
        seen = {id(self)} if seen is None else seen
        found = []
        for key in sorted(vars(self)):
            for leaf in _leaves(vars(self)[key]):
                if id(leaf) in seen:
                    continue
                seen.add(id(leaf))
                if predicate(leaf):
                    yield leaf
                if recursive and isinstance(leaf, Module):
                    found.append(leaf)
        for module in found:
            yield from module._flatten(recursive, predicate, seen)

    @classmethod
    def with_name_scope(cls, method):
        """Decorator: ``method`` runs inside its module's name scope."""

        @functools.wraps(method)
        def in_scope(self, *args, **kwargs):
            with self.name_scope:
                return method(self, *args, **kwargs)

        return in_scope


def _is_variable(v) -> bool:
    return isinstance(v, _variables.Variable)


def _leaves(value):
    """The objects a module's attribute holds: into lists, tuples and dicts (keys sorted)."""
    if isinstance(value, (list, tuple)):
        for item in value:
            yield from _leaves(item)
    elif isinstance(value, dict):
        for key in sorted(value, key=str):
            yield from _leaves(value[key])
    else:
        yield value
