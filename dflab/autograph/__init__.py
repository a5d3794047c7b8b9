"""AutoGraph: Python control flow turned into graph control flow when its conditions are
tensors being traced (``tf.function``), and left as Python otherwise (TF's rule).

``convert(fn)`` rewrites ``fn``'s source (``transformer``); the rewritten code calls the
run-time ``operators``, which pick ``tf.cond``/``tf.while_loop``/a print op or the Python
statement depending on what they are given. This layer sits on the op builders only.
"""

from dflab.autograph.operators import ConversionError, Undefined
from dflab.autograph.transformer import convert

__all__ = ["ConversionError", "Undefined", "convert", "to_graph"]


def to_graph(fn, recursive=True, experimental_optional_features=None):
    """TF's ``tf.autograph.to_graph``: ``fn`` with its control flow converted."""
    return convert(fn)
