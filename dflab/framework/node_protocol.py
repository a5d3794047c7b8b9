"""The node interface: what every reader of a graph node may rely on, whoever made the node.

Two kinds of object are nodes. The user's ``Operation`` (``dflab.framework.operation``, whose
outputs are ``Tensor`` objects), and the runtime's ``Node`` (``dflab.runtime.node``, whose
outputs are ``NodeOutput`` objects): one device's view of a user op in a partition, a
``_Send``/``_Recv``, a node of a partition's control loop, a fused node. Whatever reads nodes —
pruning and ordering, the partitioner, fusion, the executor's plan builder, tracing, drawings,
error messages — is written against ``NodeLike`` and ``OutputLike`` below and so takes either,
with no conversion.

Reads are zero-copy: ``inputs`` and ``control_inputs`` are the node's own tuples, ``outputs``
its own list (as TF's ``Operation.outputs`` is), ``attrs`` a read-only view of its attributes.
Readers never mutate what they get; edits go through the owner's methods
(``Operation.add_control_input``, ``Operation.update_input``; ``Node.set_inputs`` for a node
still being built). Both protocols are ``runtime_checkable``, so a test can check that a class
satisfies them (``isinstance`` checks that the members exist, not their types).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from dflab.framework.dtypes import DType
    from dflab.framework.registry import OpDef
    from dflab.framework.tensor_shape import TensorShape


@runtime_checkable
class OutputLike(Protocol):
    """Output ``value_index`` of node ``op``: a ``Tensor`` or a ``NodeOutput``."""

    @property
    def op(self) -> NodeLike: ...

    @property
    def value_index(self) -> int: ...

    @property
    def dtype(self) -> DType: ...

    @property
    def shape(self) -> TensorShape: ...

    @property
    def name(self) -> str:
        """``"<op name>:<value_index>"``."""


@runtime_checkable
class NodeLike(Protocol):
    """A node of a dataflow graph: an ``Operation`` or a runtime ``Node``."""

    @property
    def name(self) -> str: ...

    @property
    def type(self) -> str:
        """The op type (``"MatMul"``): what ``op_def`` and the kernel registry are keyed by."""

    @property
    def device(self) -> str:
        """An ``Operation``'s *requested* device; a ``Node``'s assigned device."""

    @property
    def graph(self) -> Any:
        """The user's ``Graph`` the node comes from (None for a node rebuilt without it)."""

    @property
    def inputs(self) -> tuple[OutputLike, ...]:
        """The data inputs, in order: the node's own tuple."""

    @property
    def control_inputs(self) -> tuple[NodeLike, ...]:
        """The nodes that must run before this one: the node's own tuple."""

    @property
    def outputs(self) -> Sequence[OutputLike]:
        """The outputs, in order: the node's own list (never modify it)."""

    def values(self) -> tuple[OutputLike, ...]:
        """The outputs as a tuple (TF's ``Operation.values()``)."""

    @property
    def op_def(self) -> OpDef | None:
        """The op type's registered schema (None for an unregistered type)."""

    @property
    def attrs(self) -> Mapping[str, Any]:
        """The attributes by name, read-only and not copied."""

    def get_attr(self, name: str) -> Any:
        """One attribute's value; ``ValueError`` naming the node if it has none of that name."""

    @property
    def creation_site(self) -> str:
        """``file:line`` of the user code that created the op this node is or stands for."""
