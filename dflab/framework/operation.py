"""``Operation``: one node of the graph IR.

An operation is an op type applied to input tensors, with attributes, control inputs, a
*requested* device (the placer decides the real one) and the user's file:line where it was
created. Nothing here executes. It satisfies ``NodeLike`` (``dflab.framework.node_protocol``),
the read interface it shares with the runtime's ``Node``: ``inputs`` and ``control_inputs`` are
its own tuples, ``outputs`` its own list, ``attrs`` a read-only view, none of them copied.

Invariant: operations are created only by ``Graph._create_op``; the public edits that rewire
one after creation (``add_control_input``, ``remove_control_input``, ``update_input``: control
dependencies, a loop Merge's back edge) keep both ends of each edge in step and bump the graph's
version and plan epoch, so cached plans are dropped. Re-exported by ``dflab.framework.ops``, the
module the rest of dflab imports it from.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING

from dflab.framework.device_spec import DeviceSpec
from dflab.framework.display import RichDisplay
from dflab.framework.registry import get_op_def

if TYPE_CHECKING:
    from dflab.framework.graph import Graph
    from dflab.framework.tensor import Tensor


class Operation(RichDisplay):
    """A node: an op type applied to input tensors, with attributes and a requested device."""

    __slots__ = (
        "_graph", "_name", "_type", "_inputs", "_outputs", "_control_inputs", "_control_outputs",
        "_attrs", "_device", "_id", "_site", "_op_def", "_colocation", "_control_flow_context",
        "_cf_info", "__weakref__",
    )

    def __init__(self, graph, name, op_type, inputs, attrs, device, control_inputs, site):
        self._graph = graph
        self._name = name
        self._type = op_type
        self._inputs = tuple(inputs)
        self._outputs: list[Tensor] = []
        # A tuple, handed out as is: edits (rare) build a new one.
        self._control_inputs: tuple[Operation, ...] = tuple(control_inputs)
        self._control_outputs: list[Operation] = []
        self._attrs = dict(attrs or {})
        self._device = device
        self._id = 0
        self._site = site
        self._op_def = get_op_def(op_type)
        self._colocation: list[str] = []
        # The cond branch or while loop body this op was built in (None: outside any).
        self._control_flow_context = None
        self._cf_info = None  # a cond Merge's predicate; a loop Exit's WhileContext

    # --- TF API ------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._name

    @property
    def type(self) -> str:
        return self._type

    @property
    def graph(self) -> Graph:
        return self._graph

    @property
    def inputs(self) -> tuple:
        return self._inputs

    @property
    def outputs(self) -> list[Tensor]:
        """The output tensors: the op's own list, as TF returns it (never modify it)."""
        return self._outputs

    def values(self) -> tuple:
        return tuple(self._outputs)

    @property
    def control_inputs(self) -> tuple[Operation, ...]:
        """The ops that must run before this one (the op's own tuple; TF returns a list)."""
        return self._control_inputs

    @property
    def control_outputs(self) -> tuple[Operation, ...]:
        """The ops that have this op as a control input."""
        return tuple(self._control_outputs)

    @property
    def creation_index(self) -> int:
        """This op's position in its graph's creation order (deterministic orders break ties
        by it)."""
        return self._id

    @property
    def device(self) -> str:
        return self._device

    def _set_device(self, device) -> None:
        self._device = _device_string(device)

    @property
    def node_def(self):
        from dflab.framework.graph_io import node_def_of

        return node_def_of(self)

    @property
    def op_def(self):
        return self._op_def

    @property
    def creation_site(self) -> str:
        """``file:line`` of the user code that created this op."""
        return self._site

    @property
    def traceback(self) -> str:
        return self._site

    def get_attr(self, name: str):
        """The value of attribute ``name`` (``_class``: the colocation groups, as TF)."""
        if name == "_class":
            return [c.encode() for c in self._colocation]
        try:  # shape functions call this for every op built: one lookup
            return self._attrs[name]
        except KeyError:
            raise ValueError(f"Operation {self._name!r} has no attr named {name!r}.") from None

    @property
    def attrs(self) -> MappingProxyType:
        """The attributes by name: a read-only view, not a copy (``_class`` aside, see
        ``get_attr``)."""
        return MappingProxyType(self._attrs)

    def colocation_groups(self) -> list[bytes]:
        if self._colocation:
            return [c.encode() for c in self._colocation]
        return [f"loc:@{self._name}".encode()]

    def run(self, feed_dict=None, session=None) -> None:
        # The session lookup lives in ops, which imports this module: reach it at call time.
        from dflab.framework.ops import _run_with_default_session

        _run_with_default_session(self, feed_dict, session)

    # --- edits (graph builders: control dependencies, control flow, graph import) ------------
    def add_control_input(self, op: Operation) -> None:
        """Make ``op`` run before this op (no-op if it already does)."""
        if op not in self._control_inputs:
            self._control_inputs += (op,)
            op._control_outputs.append(self)
            self._graph._version += 1
            self._graph._plan_epoch += 1

    def add_control_inputs(self, ops) -> None:
        for op in ops:
            self.add_control_input(op)

    def remove_control_input(self, op: Operation) -> None:
        """Drop the control edge from ``op`` (no-op if there is none)."""
        if op in self._control_inputs:
            self._control_inputs = tuple(c for c in self._control_inputs if c is not op)
            op._control_outputs.remove(self)
            self._graph._version += 1
            self._graph._plan_epoch += 1

    def update_input(self, index: int, tensor: Tensor) -> None:
        """Rewire input ``index`` to ``tensor`` of the same dtype (a while loop's Merge gets its
        back edge this way, once the loop body that computes it exists)."""
        old = self._inputs[index]
        if tensor.dtype.base_dtype != old.dtype.base_dtype:
            raise TypeError(f"Cannot update input {index} of {self._name} from {old.dtype} to "
                            f"{tensor.dtype}")
        inputs = list(self._inputs)
        inputs[index] = tensor
        self._inputs = tuple(inputs)
        old._consumers.remove(self)  # one entry per input position, as at creation
        tensor._consumers.append(self)
        self._graph._version += 1
        self._graph._plan_epoch += 1

    # --- control flow (set by the builders of dflab.ops.control_flow_ops) --------------------
    @property
    def control_flow_context(self):
        """The cond branch or while loop body (a ``ControlFlowContext``) this op was built in,
        or None outside any."""
        return self._control_flow_context

    @control_flow_context.setter
    def control_flow_context(self, ctx) -> None:
        self._control_flow_context = ctx

    @property
    def control_flow_info(self):
        """What a control-flow builder recorded on this op for its gradient: a ``cond``
        Merge's predicate, a ``while_loop`` Exit's ``WhileContext``; None otherwise."""
        return self._cf_info

    @control_flow_info.setter
    def control_flow_info(self, info) -> None:
        self._cf_info = info

    def __repr__(self):
        return f"<tf.Operation '{self._name}' type={self._type}>"

    def __str__(self):
        from dflab.framework.graph_io import op_to_text

        return op_to_text(self)

    def __hash__(self):
        return id(self)

    def __eq__(self, other):
        return self is other


def _device_string(device) -> str:
    if device is None:
        return ""
    if isinstance(device, DeviceSpec):
        return device.to_string()
    return DeviceSpec.from_string(device).to_string()
