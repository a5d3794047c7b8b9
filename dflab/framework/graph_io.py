"""Graph (de)serialization: ``GraphDef``/``NodeDef`` objects and a versioned JSON format.

The JSON form is the one canonical text form of a graph: diffable, importable, renderable.
Attribute values are tagged (dtype, shape, tensor, list, plain scalar); tensors are stored as
dtype + shape + flat list (base64 of raw little-endian bytes for large numeric tensors).
Loading validates everything and never evaluates code. Two kinds of failure, both naming the
source (a file path where there is one) and the node and attribute:

* text that is not a well-formed graph (not JSON, not UTF-8, nested absurdly deep, a field of the
  wrong JSON type, a tensor whose values do not fit its dtype or shape) is a ``DataLossError``;
* a well-formed graph that does not make a valid graph when imported (unknown op type, a name the
  normal API would reject, an input that does not exist, an attribute the op cannot use) is a
  ``GraphDefImportError``: an ``InvalidArgumentError`` that is also the ``ValueError`` TF's
  ``import_graph_def`` raises, so code written against either catches it.
"""

from __future__ import annotations

import base64
import contextlib
import json
import math
import os
import re

import numpy as np

from dflab.framework import dtypes as _dt
from dflab.framework import errors, ops
from dflab.framework.op_kinds import BACK_EDGE_OPS, MERGE_OPS
from dflab.framework.registry import registered_ops
from dflab.framework.tensor import relax_shape
from dflab.framework.tensor_shape import TensorShape

FORMAT = "dflab.graph"
VERSION = 1

# Attribute values nest (lists of lists, dicts); graphs never need more than a few levels, and a
# bound keeps a hostile file from exhausting the stack.
MAX_ATTR_DEPTH = 32

# A node name as the graph-building API can make it (scope names may start with "_" or "-";
# dflab.framework.graph), and an input reference: ``name``, ``name:index`` or ``^name``.
_NAME = r"[A-Za-z0-9_.\->]+(?:/[A-Za-z0-9_.\->]+)*"
_NODE_NAME = re.compile(f"^{_NAME}$")
_INPUT_REF = re.compile(f"^(\\^)?({_NAME})(?::(\\d+))?$")


class GraphDefImportError(errors.InvalidArgumentError, ValueError):
    """A GraphDef that cannot be imported. TF's ``import_graph_def`` raises ``ValueError`` for
    these; being an ``InvalidArgumentError`` too, this class is caught by either spelling."""


def load_json(data, source: str):
    """Parse JSON text (str or UTF-8 bytes) read from ``source``; text that is not UTF-8, not
    JSON, or nested too deeply for the parser is a ``DataLossError`` naming ``source``."""
    try:
        if isinstance(data, (bytes, bytearray)):
            data = bytes(data).decode("utf-8")
        return json.loads(data)
    except UnicodeDecodeError as e:
        raise errors.DataLossError(None, None, f"{source}: not UTF-8 text ({e})") from None
    except RecursionError:
        raise errors.DataLossError(None, None, f"{source}: JSON nested too deeply") from None
    except ValueError as e:
        raise errors.DataLossError(None, None, f"{source}: not valid JSON ({e})") from None


class NodeDef:
    """TF's NodeDef: ``name``, ``op``, ``input`` (``^name`` for control inputs), ``device``,
    ``attr`` (a dict of plain Python values), plus where the user created it (``site``).

    A *typed* node def (what a partition is made of, and what a kernel is built from) also
    carries its data inputs' dtypes (``input_types``, ref dtypes included), its outputs' dtypes
    (``output_types``) and static shapes (``output_shapes``): enough to rebuild and run the
    node without the graph it came from. They are empty for a node def of a user graph, whose
    types come from shape inference when it is imported."""

    def __init__(self, name="", op="", input=None, device="", attr=None, site="",  # noqa: A002
                 input_types=(), output_types=(), output_shapes=()):
        self.name = name
        self.op = op
        self.input = list(input or [])
        self.device = device
        self.attr = dict(attr or {})
        self.site = site
        self.input_types = tuple(input_types)
        self.output_types = tuple(output_types)
        self.output_shapes = tuple(output_shapes)

    @property
    def creation_site(self) -> str:
        return self.site

    def get_attr(self, name):
        if name not in self.attr:
            raise ValueError(f"Operation {self.name!r} has no attr named {name!r}.")
        return self.attr[name]

    def __repr__(self):
        return f"NodeDef(name={self.name!r}, op={self.op!r}, input={self.input!r})"

    def to_json(self) -> dict:
        d = {"name": self.name, "op": self.op}
        if self.input:
            d["input"] = list(self.input)
        if self.device:
            d["device"] = self.device
        if self.attr:
            d["attr"] = {k: encode_attr(v) for k, v in sorted(self.attr.items())}
        if self.site:
            d["site"] = self.site
        if self.input_types or self.output_types:
            d["input_types"] = [t.name for t in self.input_types]
            d["output_types"] = [t.name for t in self.output_types]
            d["output_shapes"] = [encode_attr(s)["shape"] for s in self.output_shapes]
        return d


class GraphDef:
    def __init__(self, node=None, versions=None):
        self.node = list(node or [])
        self.versions = versions or {"producer": VERSION}
        self.source = ""  # where it was read from (a file path), named in errors

    def to_json(self) -> dict:
        return {"format": FORMAT, "version": VERSION, "node": [n.to_json() for n in self.node]}

    def SerializeToString(self) -> bytes:  # noqa: N802 - TF name
        return json.dumps(self.to_json(), sort_keys=True).encode()

    @classmethod
    def FromString(cls, data) -> GraphDef:  # noqa: N802 - TF name
        return graph_def_from_json(data)

    def ParseFromString(self, data) -> None:  # noqa: N802 - TF name
        other = graph_def_from_json(data)
        self.node, self.versions, self.source = other.node, other.versions, other.source

    def __str__(self):
        return json.dumps(self.to_json(), indent=1, sort_keys=True)


# --- attribute encoding ------------------------------------------------------------------------
def encode_attr(v):
    if isinstance(v, _dt.DType):
        return {"type": v.name}
    if isinstance(v, TensorShape):
        return {"shape": None if v.ndims is None else v.as_list()}
    if isinstance(v, np.ndarray):
        return {"tensor": encode_tensor(v)}
    if isinstance(v, (list, tuple)):
        return {"list": [encode_attr(x) for x in v]}
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, bytes):
        return {"bytes": base64.b64encode(v).decode()}
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, dict):
        return {"dict": {str(k): encode_attr(x) for k, x in v.items()}}
    raise TypeError(f"Cannot serialize attribute value of type {type(v).__name__}")


def decode_attr(v, depth: int = 0):
    """The Python value of an encoded attribute; ``ValueError`` says what is malformed."""
    if depth > MAX_ATTR_DEPTH:
        raise ValueError(f"attribute value nested more than {MAX_ATTR_DEPTH} levels deep")
    if isinstance(v, dict):
        if len(v) != 1:
            raise ValueError(f"malformed attribute {_short(v)}: expected one tag")
        (tag, x), = v.items()
        if tag == "type":
            return _decode_dtype(x)
        if tag == "shape":
            return TensorShape(_decode_dims(x, allow_unknown=True))
        if tag == "tensor":
            return decode_tensor(x)
        if tag == "list":
            return [decode_attr(e, depth + 1) for e in _expect(x, list, "a list value")]
        if tag == "bytes":
            try:
                return base64.b64decode(_expect(x, str, "a bytes value"), validate=True)
            except ValueError as e:
                raise ValueError(f"bytes value is not base64 ({e})") from None
        if tag == "dict":
            return {k: decode_attr(e, depth + 1)
                    for k, e in _expect(x, dict, "a dict value").items()}
        raise ValueError(f"unknown attribute tag {tag!r}")
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    raise ValueError(f"malformed attribute {_short(v)}")


def _short(v) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _expect(x, kind, what: str):
    if not isinstance(x, kind) or (kind is int and isinstance(x, bool)):
        raise ValueError(f"{what} must be a JSON {_JSON_NAMES[kind]}, got {_short(x)}")
    return x


_JSON_NAMES = {list: "array", dict: "object", str: "string", int: "integer"}


def _decode_dtype(x) -> _dt.DType:
    try:
        return _dt.as_dtype(_expect(x, str, "a dtype"))
    except TypeError as e:
        raise ValueError(str(e)) from None


def _decode_dims(x, allow_unknown: bool):
    """A shape's dims: a list of non-negative ints (None for unknown dims or rank if allowed)."""
    if x is None and allow_unknown:
        return None
    dims = _expect(x, list, "a shape")
    for d in dims:
        if d is None and allow_unknown:
            continue
        if _expect(d, int, "a dimension") < 0:
            raise ValueError(f"negative dimension {d} in shape {dims}")
    return dims


def _check_values(values: list, dt: _dt.DType) -> None:
    """Each JSON value must be of the dtype's kind: no strings in a float tensor, no floats in
    an int tensor (NumPy would convert or truncate them without a word)."""
    if dt.is_bool:
        ok = (bool,)
    elif dt.is_integer:
        ok = (int,)
    elif dt.is_floating or dt.is_complex:
        ok = (int, float)
    else:
        ok = (bool, int, float)
    for x in values:
        if not isinstance(x, ok) or (bool not in ok and isinstance(x, bool)):
            raise ValueError(f"value {_short(x)} does not fit dtype {dt.name}")


def decode_tensor(d: dict) -> np.ndarray:
    _expect(d, dict, "a tensor")
    if "dtype" not in d or "shape" not in d:
        raise ValueError("a tensor needs 'dtype' and 'shape'")
    dt = _decode_dtype(d["dtype"])
    shape = tuple(_decode_dims(d["shape"], allow_unknown=False))
    n = math.prod(shape)
    if dt is _dt.string:
        vals = _expect(d.get("values"), list, "a string tensor's values")
        for x in vals:
            _expect(x, str, "a string tensor's value")
        arr = np.array([x.encode("utf-8", "surrogateescape") for x in vals], dtype=object)
    elif "b64" in d:
        try:
            raw = base64.b64decode(_expect(d["b64"], str, "a tensor's b64"), validate=True)
        except ValueError as e:
            raise ValueError(f"tensor data is not base64 ({e})") from None
        itemsize = dt._np.itemsize
        if len(raw) != n * itemsize:
            raise ValueError(f"tensor has {len(raw)} bytes but shape {list(shape)} of "
                             f"{dt.name} needs {n * itemsize}")
        arr = np.frombuffer(raw, dtype=dt._np.newbyteorder("<")).astype(dt._np)
    else:
        vals = _expect(d.get("values"), list, "a tensor's values")
        _check_values(vals, dt)
        try:
            arr = np.array(vals, dtype=dt._np)
        except (ValueError, TypeError, OverflowError) as e:
            raise ValueError(f"values do not fit dtype {dt.name} ({e})") from None
    if arr.size != n or arr.ndim > 1:
        raise ValueError(f"tensor has {arr.size} values but shape {list(shape)} needs {n}")
    arr = arr.reshape(shape)
    arr.flags.writeable = False
    return arr


def encode_tensor(arr: np.ndarray) -> dict:
    dt = _dt.as_dtype(arr.dtype)
    if dt is _dt.string:
        vals = [x.decode("utf-8", "surrogateescape") if isinstance(x, bytes) else str(x)
                for x in arr.ravel()]
        return {"dtype": dt.name, "shape": list(arr.shape), "values": vals}
    if arr.size <= 16:
        return {"dtype": dt.name, "shape": list(arr.shape), "values": arr.ravel().tolist()}
    raw = np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()
    return {"dtype": dt.name, "shape": list(arr.shape), "b64": base64.b64encode(raw).decode()}


# --- graph -> def ------------------------------------------------------------------------------
def node_def_of(op) -> NodeDef:
    """The (untyped) node def of a node: an ``Operation`` or a runtime ``Node``."""
    inputs = [t.op.name if t.value_index == 0 else t.name for t in op.inputs]
    inputs += ["^" + c.name for c in op.control_inputs]
    attr = dict(op.attrs)
    if isinstance(op, ops.Operation) and op._colocation:
        attr["_class"] = list(op._colocation)
    return NodeDef(op.name, op.type, inputs, op.device, attr, op.creation_site)


def graph_to_def(graph, add_shapes=False) -> GraphDef:
    nodes = []
    for op in graph.get_operations():
        nd = node_def_of(op)
        if add_shapes:
            nd.attr["_output_shapes"] = [t.shape for t in op.outputs]
        nodes.append(nd)
    return GraphDef(nodes)


def op_to_text(op) -> str:
    """One canonical line of text per op, used by reprs, errors and tests."""
    ins = ", ".join([t.name for t in op.inputs] + ["^" + c.name for c in op.control_inputs])
    outs = ", ".join(f"{t.dtype.name}{t.shape}" for t in op.outputs)
    dev = f" @{op.device}" if op.device else ""
    return f"{op.name} = {op.type}({ins}) -> [{outs}]{dev}"


def graph_def_from_json(data, source: str | None = None) -> GraphDef:
    """A ``GraphDef`` from its JSON (text, bytes or the parsed object). ``source`` (a file
    path, say) is named in errors; anything malformed is a ``DataLossError``."""
    source = source or "GraphDef"
    obj = load_json(data, source) if isinstance(data, (str, bytes, bytearray)) else data
    if not isinstance(obj, dict) or obj.get("format") != FORMAT:
        raise errors.DataLossError(None, None, f"{source}: not a dflab graph (missing format "
                                   "tag)")
    if obj.get("version") != VERSION:
        raise errors.DataLossError(None, None, f"{source}: unsupported graph version "
                                   f"{_short(obj.get('version'))}")
    node_list = obj.get("node", [])
    if not isinstance(node_list, list):
        raise errors.DataLossError(None, None, f"{source}: 'node' must be a JSON array")
    gd = GraphDef([_node_from_json(n, i, source) for i, n in enumerate(node_list)])
    gd.source = source
    return gd


def _node_from_json(n, i: int, source: str) -> NodeDef:
    where = f"node #{i}"
    key = None
    try:
        _expect(n, dict, "a node")
        name = _expect(n.get("name"), str, "a node's name")
        where = f"node {name!r}"
        op = _expect(n.get("op"), str, "a node's op")
        inputs = [_expect(x, str, "an input") for x in _expect(n.get("input", []), list,
                                                                 "a node's input")]
        device = _expect(n.get("device", ""), str, "a node's device")
        site = _expect(n.get("site", ""), str, "a node's site")
        attr = {}
        for key, v in _expect(n.get("attr", {}), dict, "a node's attr").items():
            attr[key] = decode_attr(v)
        key = None
        input_types = [_decode_dtype(t) for t in _expect(n.get("input_types", []), list,
                                                         "input_types")]
        output_types = [_decode_dtype(t) for t in _expect(n.get("output_types", []), list,
                                                          "output_types")]
        output_shapes = [TensorShape(_decode_dims(x, allow_unknown=True))
                         for x in _expect(n.get("output_shapes", []), list, "output_shapes")]
    except ValueError as e:
        at = f", attr {key!r}" if key is not None else ""
        raise errors.DataLossError(None, None, f"{source}: malformed {where}{at}: {e}") from None
    return NodeDef(name, op, inputs, device, attr, site, input_types, output_types,
                   output_shapes)


# --- def -> graph ------------------------------------------------------------------------------
def _parse_input(s: str):
    if s.startswith("^"):
        return s[1:], None
    name, sep, idx = s.rpartition(":")
    if sep and idx.isdigit():
        return name, int(idx)
    return s, 0


def _import_error(source: str, node: str, message: str) -> GraphDefImportError:
    return GraphDefImportError(None, None, f"{source}: node {node!r}: {message}")


# Attributes that hold a dtype wherever they occur, and ops whose ``N`` counts their data
# inputs: ``N * per + extra`` inputs (ConcatV2 has its axis after the N values).
_DTYPE_ATTRS = ("dtype", "T", "Tidx", "SrcT", "DstT")
_N_COUNTS = {"AddN": (1, 0), "Pack": (1, 0), "ShapeN": (1, 0), "Einsum": (1, 0),
             "ConcatV2": (1, 1), "DynamicStitch": (2, 0)}


def _check_node(n: NodeDef, source: str, known) -> None:
    """What a node must satisfy before it is built: everything a shape rule or kernel would
    otherwise trip over with a raw Python error."""
    if not _NODE_NAME.match(n.name):
        raise _import_error(source, n.name, "Node name contains invalid characters")
    if n.op not in known:
        raise _import_error(source, n.name, f"Op type not registered '{n.op}' in binary")
    for s in n.input:
        if not _INPUT_REF.match(s):
            raise _import_error(source, n.name, f"malformed input {s!r} (expected 'name', "
                                "'name:index' or '^name')")
    for key in _DTYPE_ATTRS:
        if key in n.attr and not isinstance(n.attr[key], _dt.DType):
            raise _import_error(source, n.name, f"attr {key!r} must be a type, got "
                                f"{_short(n.attr[key])}")
    if n.op == "Const":
        _check_const(n, source)
    if n.op in _N_COUNTS:
        _check_n(n, source)


def _check_const(n: NodeDef, source: str) -> None:
    value, dtype = n.attr.get("value"), n.attr.get("dtype")
    if not isinstance(value, np.ndarray):
        raise _import_error(source, n.name, "Const needs a tensor attr 'value'")
    if not isinstance(dtype, _dt.DType):
        raise _import_error(source, n.name, "Const needs a type attr 'dtype'")
    if _dt.as_dtype(value.dtype) is not dtype.base_dtype:
        raise _import_error(source, n.name, f"value of dtype {_dt.as_dtype(value.dtype).name} "
                            f"does not match attr 'dtype' {dtype.name}")


def _check_n(n: NodeDef, source: str) -> None:
    count = n.attr.get("N")
    per, extra = _N_COUNTS[n.op]
    data = sum(1 for s in n.input if not s.startswith("^"))
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise _import_error(source, n.name, f"attr 'N' must be a positive integer, got "
                            f"{_short(count)}")
    if count * per + extra != data:
        raise _import_error(source, n.name, f"attr 'N' is {count} but the node has {data} "
                            f"data inputs (expected {count * per + extra})")


def _topo_order(nodes: list[NodeDef], source: str) -> list[NodeDef]:
    by_name = {}
    for n in nodes:
        if n.name in by_name:
            raise _import_error(source, n.name, "duplicate node name in GraphDef")
        by_name[n.name] = n
    state, order = {}, []
    for root in nodes:
        if root.name in state:
            continue
        stack = [(root, iter(root.input))]
        state[root.name] = 1
        while stack:
            node, it = stack[-1]
            for inp in it:
                dep = _parse_input(inp)[0]
                if dep not in by_name or by_name[dep].op in BACK_EDGE_OPS:
                    continue  # a loop's back edge does not order nodes
                if state.get(dep) == 1:
                    raise _import_error(source, node.name, f"GraphDef contains a cycle "
                                        f"through node {dep!r}")
                if dep not in state:
                    state[dep] = 1
                    stack.append((by_name[dep], iter(by_name[dep].input)))
                    break
            else:
                stack.pop()
                state[node.name] = 2
                order.append(node)
    return order


def _output_of(created: dict, node: str, s: str, source: str):
    """The tensor an input reference ``s`` of ``node`` names, among the ops built so far."""
    src, idx = _parse_input(s)
    if src not in created:
        raise _import_error(source, node, f"input {s!r} not found in the GraphDef")
    outputs = created[src].outputs
    if idx >= len(outputs):
        raise _import_error(source, node, f"input {s!r} out of range: {src!r} has "
                            f"{len(outputs)} outputs")
    return outputs[idx]


def _build_node(g, n: NodeDef, inputs, controls, prefix: str, source: str):
    attr = dict(n.attr)
    colocation = attr.pop("_class", None)
    shapes = attr.pop("_output_shapes", None)
    if colocation is not None and not (isinstance(colocation, list)
                                       and all(isinstance(c, str) for c in colocation)):
        raise _import_error(source, n.name, "attr '_class' must be a list of strings")
    try:
        op = g._create_op(n.op, inputs, attr, prefix + n.name + "/", site=n.site or "",
                          extra_control=controls)
    except GraphDefImportError:
        raise
    except (ValueError, TypeError, KeyError, AttributeError, IndexError, ArithmeticError,
            errors.InvalidArgumentError) as e:
        # A shape rule fed attrs or inputs it cannot use fails in any of these ways; the
        # culprit is the node's data, which the message names (the cause stays chained).
        raise _import_error(source, n.name, f"{type(e).__name__}: {e}") from e
    if shapes is not None:
        _take_shapes(op, shapes, source, n.name)
    if n.device:
        op._set_device(n.device)
    if colocation:
        op._colocation = [
            "loc:@" + prefix + c[5:] if c.startswith("loc:@") else c for c in colocation
        ]
    return op


def _take_shapes(op, shapes, source: str, name: str) -> None:
    """Give ``op``'s outputs the static shapes the graph def recorded (``add_shapes``): a
    loop variable's shape invariant (a loop's ``Merge`` would otherwise take its ``Enter``'s
    shape, the back edge not yet wired) and shapes set by hand. Nodes are built in order, so
    the ops after it infer from these."""
    if not isinstance(shapes, list) or len(shapes) != len(op.outputs):
        raise _import_error(source, name, "attr '_output_shapes' must list one shape per "
                                          "output")
    for t, shape in zip(op.outputs, shapes):
        try:
            relax_shape(t, shape)
        except (TypeError, ValueError) as e:
            raise _import_error(source, name, f"attr '_output_shapes': {e}") from None


def import_graph_def(graph_def, input_map=None, return_elements=None, name=None,
                     op_dict=None, producer_op_list=None):
    """Import ``graph_def`` into the default graph under scope ``name`` (default "import").

    A graph def that cannot be imported raises ``GraphDefImportError`` (a ``ValueError``, as
    in TF, and an ``InvalidArgumentError``) naming its source and the node."""
    if isinstance(graph_def, (str, bytes, dict)):
        graph_def = graph_def_from_json(graph_def)
    source = getattr(graph_def, "source", None) or "GraphDef"
    g = ops.get_default_graph()
    input_map = dict(input_map or {})
    for k, v in list(input_map.items()):
        if not isinstance(v, ops.Tensor):
            input_map[k] = ops.convert_to_tensor(v)
        key_name, idx = _parse_input(k)
        input_map[f"{key_name}:{idx}"] = input_map.pop(k)
    known = registered_ops()
    for n in graph_def.node:
        _check_node(n, source, known)
    order = _topo_order(graph_def.node, source)
    created: dict[str, ops.Operation] = {}
    back_edges = []  # (op, input position, source NodeDef input): a loop Merge's NextIteration
    used_map = set()
    scope_name = "import" if name is None else name
    with g.name_scope(scope_name) if scope_name else contextlib.nullcontext() as scope:
        prefix = scope or ""
        for n in order:
            inputs, controls = [], []
            for s in n.input:
                src, idx = _parse_input(s)
                if idx is None:
                    if src not in created:
                        raise _import_error(source, n.name, f"control input {src!r} not found")
                    controls.append(created[src])
                    continue
                key = f"{src}:{idx}"
                if key in input_map:
                    inputs.append(input_map[key])
                    used_map.add(key)
                    continue
                if src not in created and n.op in MERGE_OPS and inputs:
                    back_edges.append((n.name, len(inputs), s))  # wired once src exists
                    inputs.append(inputs[0])
                    continue
                inputs.append(_output_of(created, n.name, s, source))
            created[n.name] = _build_node(g, n, inputs, controls, prefix, source)
        for name_, pos, s in back_edges:
            created[name_].update_input(pos, _output_of(created, name_, s, source))
    missing = set(input_map) - used_map
    if missing:
        raise ValueError(f"Attempted to map inputs that were not found in graph_def: {missing}")
    if return_elements is None:
        return None
    out = []
    for r in return_elements:
        src, idx = _parse_input(r)
        if src not in created:
            raise ValueError(f"Requested return_element {r!r} not found in graph_def.")
        out.append(created[src].outputs[idx] if ":" in r else created[src])
    return out


def write_graph(graph_or_graph_def, logdir, name, as_text=True) -> str:
    """Write the graph as JSON (atomically) and return the path."""
    gd = graph_or_graph_def
    if isinstance(gd, ops.Graph):
        gd = gd.as_graph_def()
    os.makedirs(logdir, exist_ok=True)
    path = os.path.join(logdir, name)
    text = str(gd) if as_text else gd.SerializeToString().decode()
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path


def read_graph(path) -> GraphDef:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise errors.NotFoundError(None, None, f"Graph file {path} not found") from None
    return graph_def_from_json(data, source=os.fspath(path))
