"""``tf.graph_util``: TF1's GraphDef rewrites -- freezing variables into constants, extracting
the subgraph that computes given nodes, removing training-only nodes -- and placement helpers.

Every rewrite takes a ``GraphDef`` and returns a new one made of copies of its nodes, in the
original order; the input is never modified. A frozen graph imports and runs in a fresh graph
without any variable or initializer.
"""

from __future__ import annotations

import copy
import re

import numpy as np

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.graph_io import GraphDef, NodeDef, import_graph_def

_REF_VARIABLE_OPS = ("Variable", "VariableV2")
# The ops TF pins to the CPU when variables are (graph_util.must_run_on_cpu).
_VARIABLE_OPS = frozenset({"Assign", "AssignAdd", "AssignSub", "Queue", "ScatterAdd",
                           "ScatterSub", "ScatterUpdate", "TruncatedNormal", "Variable",
                           "VariableV2"})


def _node_name(name: str) -> str:
    """``"^x"``, ``"x:1"`` -> ``"x"``."""
    if name.startswith("^"):
        name = name[1:]
    return name.split(":")[0]


def _check_graph_def(graph_def) -> None:
    if not isinstance(graph_def, GraphDef):
        raise TypeError(f"graph_def must be a GraphDef proto, but got type {type(graph_def)}.")


def _copy_node(n: NodeDef, **changes) -> NodeDef:
    out = copy.copy(n)
    out.input = list(n.input)
    out.attr = dict(n.attr)
    for k, v in changes.items():
        setattr(out, k, v)
    return out


def _new_graph_def(graph_def: GraphDef, nodes: list) -> GraphDef:
    return GraphDef(nodes, versions=dict(graph_def.versions))


def extract_sub_graph(graph_def: GraphDef, dest_nodes) -> GraphDef:
    """The nodes ``dest_nodes`` need (data and control inputs, transitively), in their order
    in ``graph_def``."""
    _check_graph_def(graph_def)
    if isinstance(dest_nodes, str):
        raise TypeError("dest_nodes must be an iterable of strings.")
    by_name = {n.name: n for n in graph_def.node}
    for d in dest_nodes:
        if d not in by_name:
            raise AssertionError(f"{d} is not in graph")
    keep, stack = set(), list(dest_nodes)
    while stack:
        name = stack.pop()
        if name in keep:
            continue
        keep.add(name)
        stack.extend(_node_name(i) for i in by_name[name].input if _node_name(i) in by_name)
    return _new_graph_def(graph_def, [_copy_node(n) for n in graph_def.node if n.name in keep])


def _read_of_handle(graph, handle_name: str):
    """A tensor reading the resource variable ``handle_name`` in the live graph."""
    candidates = [op for op in graph.get_operations()
                  if op.type == "ReadVariableOp" and op.inputs[0].op.name == handle_name]
    if not candidates:
        raise ValueError(f"Cannot read the value of resource variable {handle_name!r}: no "
                         "ReadVariableOp of it in the session's graph.")
    preferred = [op for op in candidates if op.name == handle_name + "/Read/ReadVariableOp"]
    return (preferred or candidates)[0].outputs[0]


def convert_variables_to_constants(sess, input_graph_def: GraphDef, output_node_names,
                                   variable_names_whitelist=None,
                                   variable_names_blacklist=None) -> GraphDef:
    """Freeze: the subgraph computing ``output_node_names`` with each variable replaced by a
    ``Const`` of its current value in ``sess`` (reads of resource variables become
    ``Identity`` nodes of that constant); names are kept, so outputs are fetched as before."""
    sub = extract_sub_graph(input_graph_def, output_node_names)
    white = None if variable_names_whitelist is None else set(variable_names_whitelist)
    black = set(variable_names_blacklist or ())
    chosen, fetches = [], []
    for n in sub.node:
        if n.op not in _REF_VARIABLE_OPS + ("VarHandleOp",):
            continue
        if (white is not None and n.name not in white) or n.name in black:
            continue
        chosen.append(n.name)
        fetches.append(n.name + ":0" if n.op in _REF_VARIABLE_OPS
                       else _read_of_handle(sess.graph, n.name))
    values = dict(zip(chosen, sess.run(fetches) if fetches else []))
    resources = {n.name for n in sub.node if n.op == "VarHandleOp" and n.name in values}
    nodes = []
    for n in sub.node:
        if n.name in values:
            dtype = n.attr["dtype"]
            value = np.asarray(values[n.name], dtype=_dt.as_dtype(dtype).as_numpy_dtype)
            nodes.append(NodeDef(n.name, "Const", [], n.device,
                                 {"value": value, "dtype": dtype}, n.site))
        elif n.op == "ReadVariableOp" and _node_name(n.input[0]) in resources:
            attr = {k: v for k, v in n.attr.items() if k == "_class"}
            nodes.append(_copy_node(n, op="Identity", attr=attr))
        else:
            nodes.append(_copy_node(n))
    return _new_graph_def(sub, nodes)


def _colocated_name(entry: str) -> str:
    return entry[len("loc:@"):] if entry.startswith("loc:@") else entry


def remove_training_nodes(input_graph: GraphDef, protected_nodes=None) -> GraphDef:
    """Drops ``CheckNumerics`` nodes (and the inputs naming them) and splices out ``Identity``
    nodes, except protected ones, ones with control inputs, ones used as control inputs and
    ones others are colocated with -- TF1's rules, node for node."""
    protected = set(protected_nodes or ())
    removed = {n.name for n in input_graph.node
               if n.op == "CheckNumerics" and n.name not in protected}
    after_removal = [
        _copy_node(n, input=[i for i in n.input if re.sub(r"^\^", "", i) not in removed])
        for n in input_graph.node if n.name not in removed]

    control_inputs, with_control, colocated = set(), set(), set()
    for n in after_removal:
        for i in n.input:
            if "^" in i:
                control_inputs.add(i.replace("^", ""))
                with_control.add(n.name)
        colocated.update(_colocated_name(c) for c in n.attr.get("_class", ()))
    splice = {n.name: n.input[0] for n in after_removal
              if n.op == "Identity" and n.name not in protected and n.name not in colocated
              and n.name not in with_control and n.name not in control_inputs}

    nodes = []
    for n in after_removal:
        if n.name in splice:
            continue
        inputs = []
        for full in n.input:
            name = re.sub(r"^\^", "", full)
            while name in splice:
                full = splice[name]
                name = re.sub(r"^\^", "", full)
            inputs.append(full)
        nodes.append(_copy_node(n, input=inputs))
    return _new_graph_def(input_graph, nodes)


def must_run_on_cpu(node, pin_variables_on_cpu: bool = False) -> bool:
    """Whether TF1's placement rules keep ``node`` (an Operation or NodeDef) on the CPU:
    int32 and string constants, int32 stitches and casts, and variable ops when pinned."""
    if isinstance(node, _ops.Operation):
        op, attr = node.type, dict(node.attrs)
        if op in ("DynamicStitch", "ParallelDynamicStitch"):
            attr.setdefault("T", node.outputs[0].dtype)  # dflab's stitch infers T, TF's names it
    else:
        if not isinstance(node, NodeDef):
            raise AssertionError(f"Expected an Operation or a NodeDef, got {type(node)}")
        op, attr = node.op, node.attr
    if pin_variables_on_cpu and op in _VARIABLE_OPS:
        return True
    if op == "Const":
        return _dt.as_dtype(attr["dtype"]) in (_dt.string, _dt.int32)
    if op in ("DynamicStitch", "ParallelDynamicStitch"):
        return "T" in attr and _dt.as_dtype(attr["T"]) == _dt.int32
    if op == "Cast":
        return _dt.as_dtype(attr["SrcT"]) == _dt.int32
    return False


def tensor_shape_from_node_def_name(graph, input_name: str):
    """The static shape of tensor ``input_name`` (output 0 when no ``:n`` is given)."""
    canonical = input_name if ":" in input_name else input_name + ":0"
    return graph.get_tensor_by_name(canonical).get_shape()


__all__ = ["convert_variables_to_constants", "extract_sub_graph", "import_graph_def",
           "must_run_on_cpu", "remove_training_nodes", "tensor_shape_from_node_def_name"]
