"""``tf.make_template``: a function whose variables are created on the first call and shared
by every later call, as TF1's templates do.

A ``Template`` owns one variable scope: made when the template is (``create_scope_now_``) or
on its first call, unique in the graph unless ``unique_name_`` names it. The first call runs
the function in that scope with ``reuse`` off, so its ``get_variable`` calls create the
variables; every later call enters the same scope with ``reuse=True`` (each under a new name
scope for its ops), so the same ``get_variable`` calls find them. A later call that creates a
new *trainable* variable (a ``tf.Variable`` where ``get_variable`` was meant) is an error, as
in TF. Made executing eagerly, a template keeps its variables in an ``EagerVariableStore`` of
its own (TF's ``EagerTemplate``): eager ``get_variable`` keeps none.
"""

from __future__ import annotations

import functools
import logging
import traceback

from dflab.framework import ops as _ops
from dflab.framework.ops import GraphKeys
from dflab.ops import variable_scope as _vs

# tf.logging's logger (dflab/platform/tf_logging.py writes to the same one).
_logger = logging.getLogger("dflab")


class Template:
    """Wraps ``func`` so that its ``get_variable`` variables are shared between calls."""

    def __init__(self, name: str, func, create_scope_now: bool = False,
                 unique_name: str | None = None, custom_getter=None):
        if name is None:
            raise ValueError("name cannot be None.")
        self._func = func
        self._stacktrace = traceback.format_stack()[:-2]
        self._name = name
        self._unique_name = unique_name
        self._custom_getter = custom_getter
        self._variable_scope = None
        if create_scope_now:
            scope_name = unique_name or _vs._get_unique_variable_scope(name)
            with _vs._pure_variable_scope(scope_name, custom_getter=custom_getter) as vs:
                self._variable_scope = vs
        # Whether a call has run to completion (the variables exist), as opposed to whether
        # the scope exists.
        self._variables_created = False
        self._first_call = True
        # Made executing eagerly: the template keeps its variables in a store of its own
        # (TF's ``EagerTemplate``), since eager ``get_variable`` keeps none.
        self._eager_store = _vs.EagerVariableStore() if _ops.executing_eagerly() else None

    def __call__(self, *args, **kwargs):
        if self._eager_store is not None:
            with self._eager_store.as_default():
                return self._scoped_call(args, kwargs)
        return self._scoped_call(args, kwargs)

    def _scoped_call(self, args, kwargs):
        if self._variable_scope is not None:
            with _vs.variable_scope(self._variable_scope, reuse=not self._first_call):
                return self._call_func(args, kwargs)
        with _vs.variable_scope(self._unique_name, self._name,
                                custom_getter=self._custom_getter) as vs:
            self._variable_scope = vs
            return self._call_func(args, kwargs)

    def _call_func(self, args, kwargs):
        try:
            if self._variables_created:
                return self._call_again(args, kwargs)
            if self._first_call:
                self._first_call = False
                try:
                    result = self._func(*args, **kwargs)
                except BaseException:
                    self._first_call = True
                    raise
                self._variables_created = True
                return result
            # Another thread is inside the first call.
            return self._func(*args, **kwargs)
        except Exception as exc:
            # Say where the template was made: the function runs far from its definition.
            trace = "".join(_skip_common(self._stacktrace, traceback.format_stack()))
            first = exc.args[0] if exc.args else ""
            exc.args = (f"{first}\n\noriginally defined at:\n{trace}",) + exc.args[1:]
            raise

    def _collection(self, key) -> list:
        if self._eager_store is None:
            return _ops.get_collection(key)
        if key == GraphKeys.TRAINABLE_VARIABLES:
            return self._eager_store.trainable_variables()
        return self._eager_store.variables() if key == GraphKeys.GLOBAL_VARIABLES else []

    def _call_again(self, args, kwargs):
        vars_at_start = len(self._collection(GraphKeys.GLOBAL_VARIABLES))
        trainable_at_start = len(self._collection(GraphKeys.TRAINABLE_VARIABLES))
        result = self._func(*args, **kwargs)
        trainable = self._collection(GraphKeys.TRAINABLE_VARIABLES)
        if trainable_at_start != len(trainable):
            raise ValueError(
                "Trainable variable created when calling a template after the first time, "
                "perhaps you used tf.Variable when you meant tf.get_variable: "
                f"{trainable[trainable_at_start:]}")
        variables = self._collection(GraphKeys.GLOBAL_VARIABLES)
        if vars_at_start != len(variables):
            _logger.info("New variables created when calling a template after the first "
                          "time, perhaps you used tf.Variable when you meant "
                          "tf.get_variable: %s", variables[vars_at_start:])
        return result

    @property
    def name(self) -> str:
        return self._name

    @property
    def func(self):
        return self._func

    @property
    def variable_scope(self):
        """The template's ``VariableScope`` (None before the first call unless it was made
        with ``create_scope_now_``)."""
        return self._variable_scope

    @property
    def var_scope(self):
        return self._variable_scope

    @property
    def variable_scope_name(self) -> str | None:
        if self._variable_scope is None:
            return None
        name = self._variable_scope.name
        return name if not name or name.endswith("/") else name + "/"

    def _scoped(self, key: str) -> list:
        if not self._variables_created:
            return []
        if self._eager_store is not None:
            return self._collection(key)
        return _ops.get_collection(key, self.variable_scope_name)

    @property
    def trainable_variables(self) -> list:
        return self._scoped(GraphKeys.TRAINABLE_VARIABLES)

    @property
    def global_variables(self) -> list:
        return self._scoped(GraphKeys.GLOBAL_VARIABLES)

    @property
    def local_variables(self) -> list:
        return self._scoped(GraphKeys.LOCAL_VARIABLES)

    @property
    def non_trainable_variables(self) -> list:
        trainable = {id(v) for v in self.trainable_variables}
        return [v for v in self.global_variables if id(v) not in trainable]

    @property
    def variables(self) -> list:
        return self.global_variables + self.local_variables

    weights = variables
    trainable_weights = trainable_variables
    non_trainable_weights = non_trainable_variables


def _skip_common(defined: list, current: list) -> list:
    """The frames of ``defined`` after the prefix it shares with ``current``."""
    i = 0
    for a, b in zip(defined, current):
        if a != b:
            break
        i += 1
    return defined[i:]


def make_template(name_: str, func_, create_scope_now_: bool = False,
                  unique_name_: str | None = None, custom_getter_=None, **kwargs) -> Template:
    """Wrap ``func_`` so that every call shares the variables its first call created with
    ``tf.get_variable`` (TF1's ``tf.make_template``). ``kwargs`` are bound to ``func_``."""
    if kwargs:
        func_ = functools.update_wrapper(functools.partial(func_, **kwargs), func_)
    return Template(name_, func_, create_scope_now=create_scope_now_,
                    unique_name=unique_name_, custom_getter=custom_getter_)


__all__ = ["make_template"]
