"""``export_meta_graph`` / ``import_scoped_meta_graph``: a graph plus what is needed to resume
from it (``tf.train.import_meta_graph``, which also rebuilds the Saver, is in ``saver``).

A ``.meta`` file is JSON (never pickle): ``{"format": "dflab.meta_graph", "version": 1,
"graph_def": <graph JSON of dflab.framework.graph_io>, "saver_def": {...},
"collection_def": {key: [item, ...]}}``. Collection items are tagged: ``{"variable": <def>}``,
``{"op": name}``, ``{"tensor": name}``, ``{"queue_runner": <def>}``, ``{"saver": <SaverDef>}``,
``{"value": scalar}``, ``{"while_context": <def>}``, ``{"cond_context": <def>}``
(``dflab.ops.control_flow_io``);
items of other Python types cannot be described as data and are left out (TF does the same for
collections it cannot serialize).

Reading one checks every field: a file that is not such JSON, or an item of the wrong JSON type,
is a ``DataLossError``; an item naming an op or tensor the graph does not have is a
``NotFoundError``; each names the file and the collection item.
"""

from __future__ import annotations

import json
import os

from dflab.framework import errors
from dflab.framework import ops as _ops
from dflab.framework.graph_io import graph_def_from_json, import_graph_def, load_json
from dflab.framework.op_kinds import VARIABLE_OPS
from dflab.kernels.io_kernels import atomic_write
from dflab.ops import control_flow_io as _cfio
from dflab.ops.control_flow_grad import GradWhileContext
from dflab.ops.control_flow_ops import CondContext, WhileContext
from dflab.ops.variables import Variable

FORMAT = "dflab.meta_graph"
VERSION = 1


class MetaGraphDef:
    """TF's ``MetaGraphDef``: ``graph_def``, ``saver_def`` (a dict), ``collection_def``."""

    def __init__(self, graph_def, saver_def=None, collection_def=None, meta_info_def=None):
        self.graph_def = graph_def
        self.saver_def = saver_def
        self.collection_def = dict(collection_def or {})
        self.meta_info_def = dict(meta_info_def or {})
        self.source = "MetaGraphDef"  # where it was read from (a file path), named in errors

    def to_json(self) -> dict:
        return {"format": FORMAT, "version": VERSION, "graph_def": self.graph_def.to_json(),
                "saver_def": self.saver_def, "collection_def": self.collection_def,
                "meta_info_def": self.meta_info_def}

    def SerializeToString(self) -> bytes:  # noqa: N802 - TF name
        return json.dumps(self.to_json(), sort_keys=True).encode()

    @classmethod
    def from_json(cls, data, source: str | None = None) -> MetaGraphDef:
        """Parse and check a meta graph's JSON; ``source`` (a file path) is named in errors."""
        source = source or "MetaGraphDef"
        obj = load_json(data, source) if isinstance(data, (str, bytes, bytearray)) else data
        if not isinstance(obj, dict) or obj.get("format") != FORMAT or \
                obj.get("version") != VERSION:
            raise _corrupt(source, "not a dflab meta graph (format/version)")
        if "graph_def" not in obj:
            raise _corrupt(source, "no 'graph_def'")
        for key, kind in (("saver_def", dict), ("collection_def", dict),
                          ("meta_info_def", dict)):
            if obj.get(key) is not None and not isinstance(obj[key], kind):
                raise _corrupt(source, f"'{key}' must be a JSON object")
        for key, items in (obj.get("collection_def") or {}).items():
            if not isinstance(items, list):
                raise _corrupt(source, f"collection {key!r} must be a JSON array")
        meta = cls(graph_def_from_json(obj["graph_def"], source), obj.get("saver_def"),
                   obj.get("collection_def"), obj.get("meta_info_def"))
        meta.source = source
        return meta


def _corrupt(where: str, message: str) -> errors.DataLossError:
    return errors.DataLossError(None, None, f"{where}: {message}")


# --- collections --------------------------------------------------------------------------------
# Collection items of kinds defined above this module (savers, queue runners): their classes
# register how to rebuild one from its def (TF's ``ops.register_proto_function``), so this
# module never imports them. ``from_proto(value, graph, import_scope)``.
_FROM_PROTO: dict = {}


def register_proto_function(kind: str, from_proto) -> None:
    """Let ``import_meta_graph`` rebuild collection items of ``kind`` (``_META_KIND``)."""
    _FROM_PROTO[kind] = from_proto


# Control-flow contexts (their defs let gradients be built on an imported graph).
_CONTEXTS = {WhileContext: ("while_context", _cfio.while_to_proto),
             GradWhileContext: ("while_context", _cfio.while_to_proto),
             CondContext: ("cond_context", _cfio.cond_to_proto)}
register_proto_function("while_context", _cfio.while_from_proto)
register_proto_function("cond_context", _cfio.cond_from_proto)


def _import_order(item) -> int:
    """A context def's ``seq``; -1 for any other item (imported first)."""
    if isinstance(item, dict) and len(item) == 1:
        (kind, value), = item.items()
        if kind in ("while_context", "cond_context") and isinstance(value, dict):
            seq = value.get("seq", -1)
            return seq if isinstance(seq, int) else -1
    return -1


def _encode_item(item):
    if isinstance(item, Variable):
        return {"variable": item.to_proto()}
    if isinstance(item, _ops.Operation):
        return {"op": item.name}
    if isinstance(item, _ops.Tensor):
        return {"tensor": item.name}
    kind = getattr(type(item), "_META_KIND", None)
    if kind in ("queue_runner", "saver"):
        return {kind: item.to_proto()}
    context = _CONTEXTS.get(type(item))
    if context is not None:
        proto = context[1](item)
        return None if proto is None else {context[0]: proto}
    if isinstance(item, (bool, int, float, str)):
        return {"value": item}
    return None


def _scoped(name: str, prefix: str) -> str:
    return prefix + name if name else name


_VARIABLE_FIELDS = {"variable_name": str, "initializer_name": str, "snapshot_name": str,
                    "initial_value_name": str, "trainable": bool, "is_resource": bool}


def lookup(graph, name, where: str, want_op: bool = False):
    """The graph's op (``want_op``) or tensor called ``name``; a name that is not a string is
    a ``DataLossError`` and a missing element a ``NotFoundError``, both naming ``where``."""
    if not isinstance(name, str):
        raise _corrupt(where, f"expected an op or tensor name, got {name!r}")
    if want_op != (":" not in name):
        what = "an op name" if want_op else "a tensor name ('op:index')"
        raise _corrupt(where, f"{name!r} is not {what}")
    try:
        return graph.get_operation_by_name(name) if want_op else graph.get_tensor_by_name(name)
    except (KeyError, ValueError) as e:
        reason = e.args[0] if e.args else e
        raise errors.NotFoundError(None, None, f"{where}: {reason}") from None


def _decode_variable(value, graph, prefix: str, where: str):
    if not isinstance(value, dict):
        raise _corrupt(where, "a variable def must be a JSON object")
    for field, kind in _VARIABLE_FIELDS.items():
        required = field not in ("initial_value_name", "trainable", "is_resource")
        if (required and field not in value) or \
                (field in value and not isinstance(value[field], kind)):
            raise _corrupt(where, f"variable def field {field!r} must be a "
                                  f"{'string' if kind is str else 'boolean'}")
    d = {k: _scoped(v, prefix) if k.endswith("_name") else v for k, v in value.items()
         if k in _VARIABLE_FIELDS}
    var = lookup(graph, d["variable_name"], where)
    if var.op.type not in VARIABLE_OPS:
        raise errors.InvalidArgumentError(None, None, f"{where}: {d['variable_name']!r} is a "
                                          f"{var.op.type}, not a variable")
    # The kind follows the op the def names (a handle is a resource variable), whatever the
    # def's own flag says.
    d["is_resource"] = var.op.type == "VarHandleOp"
    lookup(graph, d["initializer_name"], where, want_op=True)
    lookup(graph, d["snapshot_name"], where)
    if d.get("initial_value_name"):
        lookup(graph, d["initial_value_name"], where)
    with graph.as_default():
        return Variable.from_proto(d)


def _decode_item(item, graph, scope: str | None, where: str):
    if not isinstance(item, dict) or len(item) != 1:
        raise _corrupt(where, "a collection item must be a JSON object with one key")
    (kind, value), = item.items()
    prefix = f"{scope}/" if scope else ""
    if kind == "variable":
        return _decode_variable(value, graph, prefix, where)
    if kind in ("op", "tensor"):
        if not isinstance(value, str):
            raise _corrupt(where, f"an {kind} item must name it with a string")
        return lookup(graph, prefix + value, where, want_op=kind == "op")
    if kind in _FROM_PROTO:
        if not isinstance(value, dict):
            raise _corrupt(where, f"a {kind} def must be a JSON object")
        try:
            with graph.as_default():
                return _FROM_PROTO[kind](value, graph, scope)
        except errors.OpError as e:  # add where the def came from
            raise type(e)(None, None, f"{where}: {e.message}") from None
    if kind == "value":
        if isinstance(value, (bool, int, float, str)):
            return value
        raise _corrupt(where, "a value item must be a JSON scalar")
    raise _corrupt(where, f"unknown collection item kind {kind!r}")


def _collections(graph, collection_list) -> dict:
    keys = collection_list if collection_list is not None else graph.get_all_collection_keys()
    out = {}
    for key in keys:
        items = [_encode_item(x) for x in graph.get_collection(key)]
        items = [x for x in items if x is not None]
        if items:
            out[str(key)] = items
    return out


# --- export / import ----------------------------------------------------------------------------
def export_meta_graph(filename=None, meta_info_def=None, graph_def=None, saver_def=None,
                      collection_list=None, as_text=False, graph=None, export_scope=None,
                      clear_devices=False, clear_extraneous_savers=False,
                      strip_default_attrs=False, save_debug_info=False, **kwargs):
    """Describe ``graph`` (default graph) as a ``MetaGraphDef``; write it to ``filename``."""
    graph = graph or _ops.get_default_graph()
    # Static shapes recorded: an imported loop keeps its variables' shape invariants.
    gd = graph_def or graph.as_graph_def(add_shapes=True)
    if clear_devices:
        for n in gd.node:
            n.device = ""
    if saver_def is not None and not isinstance(saver_def, dict):
        saver_def = saver_def.to_json()
    collections = _collections(graph, collection_list)
    if graph_def is not None:
        _drop_contexts_outside(collections, {n.name for n in gd.node})
    meta = MetaGraphDef(gd, saver_def, collections, meta_info_def)
    if filename:
        directory = os.path.dirname(os.fspath(filename))
        if directory:
            os.makedirs(directory, exist_ok=True)
        text = json.dumps(meta.to_json(), sort_keys=True, indent=1 if as_text else None)
        atomic_write(os.fspath(filename), text.encode())
    return meta


def _drop_contexts_outside(collections: dict, names: set) -> None:
    """Leave out the contexts whose ops a given (pruned) graph def lacks: their loops and
    conds are not in it, and the imported graph would not have what they name."""
    for key in ("while_context", "cond_context"):
        items = collections.get(key)
        if items:
            kept = [i for i in items if _named_ops(next(iter(i.values()))) <= names]
            if kept:
                collections[key] = kept
            else:
                del collections[key]


def _named_ops(value) -> set:
    """The ops a context def names (its tensors' ops, its member ops)."""
    if isinstance(value, str):
        return {value.rsplit(":", 1)[0] if ":" in value else value}
    if isinstance(value, dict):
        value = [v for k, v in value.items() if k not in ("name", "site")]
    if isinstance(value, list):
        return set().union(*(_named_ops(v) for v in value)) if value else set()
    return set()


def read_meta_graph_file(filename) -> MetaGraphDef:
    try:
        with open(filename, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise errors.NotFoundError(None, None, f"Meta graph file {filename} not found") from None
    return MetaGraphDef.from_json(data, source=os.fspath(filename))


def import_scoped_meta_graph(meta_graph_or_file, clear_devices=False, import_scope=None):
    """Import a meta graph's graph and collections into the default graph; returns the
    ``MetaGraphDef`` (``tf.train.import_meta_graph`` adds its Saver: ``dflab.train.saver``)."""
    meta = meta_graph_or_file
    if isinstance(meta, (str, os.PathLike)):
        meta = read_meta_graph_file(meta)
    elif isinstance(meta, (bytes, dict)):
        meta = MetaGraphDef.from_json(meta)
    gd = meta.graph_def
    if clear_devices:
        for n in gd.node:
            n.device = ""
    graph = _ops.get_default_graph()
    import_graph_def(gd, name=import_scope or "")
    items = [(key, i, item) for key, items in meta.collection_def.items()
             for i, item in enumerate(items)]
    # Control-flow contexts in the order they were made (an inner one names its outer one);
    # every other item before them, in the file's order.
    items.sort(key=lambda e: _import_order(e[2]))
    for key, i, item in items:
        where = f"{meta.source}: collection {key!r} item #{i}"
        graph.add_to_collection(key, _decode_item(item, graph, import_scope, where))
    return meta
