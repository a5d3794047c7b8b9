"""AutoGraph: Python control flow turned into graph control flow when its conditions are
tensors being traced (``tf.function``), and left as Python otherwise (TF's rule).

``convert(fn)`` rewrites ``fn``'s source (``transformer``); the rewritten code calls the
run-time ``operators``, which pick ``tf.cond``/``tf.while_loop``/a print op or the Python
statement depending on what they are given. This layer sits on the op builders only.
"""

from dflab.autograph import experimental
from dflab.autograph.conversion import convert, to_code
from dflab.autograph.operators import ConversionError, StructureError, Undefined

__all__ = ["ConversionError", "StructureError", "Undefined", "convert", "experimental",
           "set_verbosity", "to_code", "to_graph", "trace"]


def to_graph(fn, recursive=True, experimental_optional_features=None):
    """TF's ``tf.autograph.to_graph``: ``fn`` with its control flow converted (with
    ``recursive``, the user's functions it calls too, when they are called)."""
    return convert(fn, recursive)


def set_verbosity(level, alsologtostdout=False) -> None:
    """TF's ``tf.autograph.set_verbosity``: AutoGraph here logs nothing (its refusals are
    errors naming the line), so the level is accepted and kept for ``get_verbosity``."""
    global _verbosity
    _verbosity = int(level)


def get_verbosity() -> int:
    return _verbosity


_verbosity = 0


def trace(*args) -> None:
    """TF's ``tf.autograph.trace``: prints its arguments when the code runs as Python, that
    is, once per trace inside a traced function (tensors there print symbolically)."""
    print(*args)
