"""``Tensor``: a symbolic handle to one output of an ``Operation`` in a graph.

A tensor is plain data: its op, output index, dtype and (possibly partial) static shape, plus the
ops that consume it. It holds no value; ``eval()`` runs it in a session. It satisfies
``OutputLike`` (``dflab.framework.node_protocol``), as the runtime's ``NodeOutput`` does.
Invariant: a tensor is created only by ``Graph._create_op`` with its op's outputs, and
``_consumers`` has one entry per input position of each op that reads it (kept so by the graph's
edits). Two functions here serve the op builders: ``override_operator`` (``math_ops`` gives
tensors their Python operators) and ``relax_shape`` (a loop variable takes its shape invariant).
Re-exported by ``dflab.framework.ops``, the module the rest of dflab imports it from.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from dflab.framework import dtypes as _dt
from dflab.framework.display import RichDisplay
from dflab.framework.tensor_shape import TensorShape, as_shape

if TYPE_CHECKING:
    from dflab.framework.graph import Graph
    from dflab.framework.operation import Operation


class Tensor(RichDisplay):
    """A symbolic handle to output ``value_index`` of ``op``."""

    # Make NumPy defer to our operators (``np_array + tensor`` builds an op).
    __array_priority__ = 100

    __slots__ = ("_op", "_value_index", "_dtype", "_shape", "_consumers", "__weakref__")

    # A symbolic tensor; ``dflab.framework.eager_tensor.EagerTensor`` holds a value instead.
    is_eager = False

    def __init__(self, op: Operation, value_index: int, dtype: _dt.DType, shape: TensorShape):
        self._op = op
        self._value_index = value_index
        self._dtype = dtype
        self._shape = shape
        self._consumers: list[Operation] = []

    @property
    def op(self) -> Operation:
        return self._op

    @property
    def value_index(self) -> int:
        return self._value_index

    @property
    def dtype(self) -> _dt.DType:
        return self._dtype

    @property
    def graph(self) -> Graph:
        return self._op.graph

    @property
    def name(self) -> str:
        return f"{self._op.name}:{self._value_index}"

    @property
    def device(self) -> str:
        return self._op.device

    @property
    def shape(self) -> TensorShape:
        return self._shape

    def get_shape(self) -> TensorShape:
        return self._shape

    def set_shape(self, shape) -> None:
        try:
            self._shape = self._shape.merge_with(as_shape(shape))
        except ValueError as e:
            raise ValueError(f"Tensor {self.name}: {e}") from None

    def consumers(self) -> list[Operation]:
        return list(self._consumers)

    def eval(self, feed_dict=None, session=None):
        # The session lookup lives in ops, which imports this module: reach it at call time.
        from dflab.framework.ops import _run_with_default_session

        return _run_with_default_session(self, feed_dict, session)

    def __repr__(self):
        return f"<tf.Tensor '{self.name}' shape={self._shape} dtype={self._dtype.name}>"

    __str__ = __repr__

    def __hash__(self):
        return id(self)

    def __eq__(self, other):  # TF1 graph mode: identity, not elementwise
        return self is other

    def __bool__(self):
        raise TypeError(
            "Using a `tf.Tensor` as a Python `bool` is not allowed. Use `if t is not None:` "
            "to test for None, or tf.cond to branch on the tensor's value."
        )

    def __iter__(self):
        raise TypeError("Tensor objects are not iterable in graph mode; use tf.unstack.")

    def __len__(self):
        raise TypeError(f"len is not well defined for symbolic Tensors ({self.name}).")

    @classmethod
    def _override_operator(cls, operator: str, func: Callable) -> None:
        # TF's name, kept for code written against TF; dflab's builders use the function.
        override_operator(operator, func)


def override_operator(operator: str, func: Callable) -> None:
    """Make ``func`` the ``Tensor`` method ``operator`` (``"__add__"``…): how ``math_ops``
    gives tensors their Python operators without the IR importing the op builders."""
    setattr(Tensor, operator, func)


def relax_shape(t: Tensor, shape) -> None:
    """Give ``t`` the static ``shape``, which may be *less* specific than the shape its op
    inferred (``Tensor.set_shape`` only refines). For control-flow builders: a loop
    variable's ``Enter`` takes the loop's shape invariant. ``shape`` must be compatible with
    the inferred shape."""
    shape = as_shape(shape)
    if not shape.is_compatible_with(t._shape):
        raise ValueError(f"Tensor {t.name}: shape {shape} is not compatible with {t._shape}")
    t._shape = shape
