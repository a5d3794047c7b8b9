"""``tf.autograph.experimental``: loop options, opting a function out of conversion, and the
names of AutoGraph's optional features."""

from __future__ import annotations

import enum
import functools

from dflab.autograph.conversion import DO_NOT_CONVERT
from dflab.autograph.operators import set_loop_options

__all__ = ["Feature", "do_not_convert", "set_loop_options"]


class Feature(enum.Enum):
    """TF's optional AutoGraph features (accepted by ``to_graph``; the control flow, builtins
    and equality operators are always converted here)."""

    ALL = "ALL"
    AUTO_CONTROL_DEPS = "AUTO_CONTROL_DEPS"
    ASSERT_STATEMENTS = "ASSERT_STATEMENTS"
    BUILTIN_FUNCTIONS = "BUILTIN_FUNCTIONS"
    EQUALITY_OPERATORS = "EQUALITY_OPERATORS"
    LISTS = "LISTS"
    NAME_SCOPES = "NAME_SCOPES"


def do_not_convert(func=None):
    """TF's decorator: ``func`` runs as written inside a traced function, its Python ``if``
    and ``while`` never turned into graph control flow (a tensor condition there is then
    Python's error)."""
    if func is None:
        return do_not_convert

    @functools.wraps(func)
    def unconverted(*args, **kwargs):
        return func(*args, **kwargs)

    setattr(unconverted, DO_NOT_CONVERT, True)
    return unconverted
