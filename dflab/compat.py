"""``tf.compat.v1``: dflab *is* the v1 API, so ``v1`` is the package itself."""

import os
import sys

import numpy as np

from dflab.eager.context import (  # noqa: F401 - TF 1.x's switches, re-exported
    disable_eager_execution,
    enable_eager_execution,
    executing_eagerly,
    executing_eagerly_outside_functions,
)
from dflab.ops.resource_variable_ops import disable_resource_variables, enable_resource_variables

# --- TF 2.x's behaviour switches, as TF1 programs run under TF 2.x call them ---------------


def disable_v2_behavior() -> None:
    """TF1 behaviour: reference variables by default (graph mode is dflab's only mode)."""
    disable_resource_variables()


def enable_v2_behavior() -> None:
    """TF 2.x ``compat.v1`` behaviour that applies to graphs: resource variables."""
    enable_resource_variables()


def disable_control_flow_v2() -> None:
    """dflab's control flow is TF1's (Switch/Merge/Enter/Exit), the paper's: nothing to do."""


def control_flow_v2_enabled() -> bool:
    return False


def disable_tensor_equality() -> None:
    """Tensors compare by identity, as in TF1: nothing to do."""


def disable_v2_tensorshape() -> None:
    """TensorShape already behaves as TF1's here: nothing to do."""


class _V1:
    def __getattr__(self, name):
        return getattr(sys.modules["dflab"], name)


v1 = _V1()


def as_bytes(bytes_or_text, encoding="utf-8") -> bytes:
    if isinstance(bytes_or_text, bytearray):
        return bytes(bytes_or_text)
    if isinstance(bytes_or_text, str):
        return bytes_or_text.encode(encoding)
    if isinstance(bytes_or_text, bytes):
        return bytes_or_text
    raise TypeError(f"Expected binary or unicode string, got {bytes_or_text!r}")


def as_text(bytes_or_text, encoding="utf-8") -> str:
    if isinstance(bytes_or_text, str):
        return bytes_or_text
    if isinstance(bytes_or_text, bytes):
        return bytes_or_text.decode(encoding)
    raise TypeError(f"Expected binary or unicode string, got {bytes_or_text!r}")


as_str = as_text


def as_str_any(value) -> str:
    return as_str(value) if isinstance(value, bytes) else str(value)


def path_to_str(path):
    return os.fspath(path) if hasattr(path, "__fspath__") else path


def dimension_value(dimension):
    """The int (or None) of a TensorShape dimension, whatever the TensorShape behaviour."""
    return getattr(dimension, "value", dimension)


def dimension_at_index(shape, index):
    from dflab.framework.tensor_shape import Dimension, as_shape

    shape = as_shape(shape)
    if shape.ndims is None:
        return Dimension(None)
    return shape.dims[index] if hasattr(shape, "dims") else Dimension(shape.as_list()[index])


bytes_or_text_types = (bytes, str)
integral_types = (int, np.integer)
real_types = (int, float, np.integer, np.floating)
complex_types = (int, float, complex, np.number)
