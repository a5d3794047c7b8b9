"""``Operation``: one node of the graph IR.

An operation is an op type applied to input tensors, with attributes, control inputs, a
*requested* device (the placer decides the real one) and the user's file:line where it was
created. Nothing here executes. Invariant: operations are created only by ``Graph._create_op``;
the edits that rewire one after creation (control inputs, a loop Merge's back edge) keep both
ends of each edge in step and bump the graph's version and plan epoch, so cached plans are
dropped. Re-exported by ``dflab.framework.ops``, the module the rest of dflab imports it from.
"""

from __future__ import annotations

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
        self._control_inputs: list[Operation] = list(control_inputs)
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
        return list(self._outputs)

    def values(self) -> tuple:
        return tuple(self._outputs)

    @property
    def control_inputs(self) -> list[Operation]:
        return list(self._control_inputs)

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
        if name == "_class":
            return [c.encode() for c in self._colocation]
        if name not in self._attrs:
            raise ValueError(f"Operation {self._name!r} has no attr named {name!r}.")
        return self._attrs[name]

    @property
    def attrs(self) -> dict:
        return dict(self._attrs)

    def colocation_groups(self) -> list[bytes]:
        if self._colocation:
            return [c.encode() for c in self._colocation]
        return [f"loc:@{self._name}".encode()]

    def run(self, feed_dict=None, session=None) -> None:
        # The session lookup lives in ops, which imports this module: reach it at call time.
        from dflab.framework.ops import _run_with_default_session

        _run_with_default_session(self, feed_dict, session)

    def _add_control_input(self, op: Operation) -> None:
        if op not in self._control_inputs:
            self._control_inputs.append(op)
            op._control_outputs.append(self)
            self._graph._version += 1
            self._graph._plan_epoch += 1

    def _add_control_inputs(self, ops) -> None:
        for op in ops:
            self._add_control_input(op)

    def _remove_control_input(self, op: Operation) -> None:
        if op in self._control_inputs:
            self._control_inputs.remove(op)
            op._control_outputs.remove(self)
            self._graph._version += 1
            self._graph._plan_epoch += 1

    def _update_input(self, index: int, tensor: Tensor) -> None:
        """Rewire input ``index`` (a while loop's Merge gets its back edge this way)."""
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

    def _get_control_flow_context(self):
        return self._control_flow_context

    def _set_control_flow_context(self, ctx) -> None:
        self._control_flow_context = ctx

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
