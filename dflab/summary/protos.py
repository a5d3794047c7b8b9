"""dflab's graphs and run metadata as TensorBoard protos (``GraphDef``, ``RunMetadata``).

``graph_def_proto`` turns a dflab ``Graph`` (or its JSON-side ``GraphDef``) into the
``GraphDef`` proto TensorBoard's graph dashboard reads: per node its name, op type, inputs
(``name:k`` and ``^control``), device and the attributes that have an ``AttrValue`` form
(dtypes, shapes, tensors, numbers, strings and lists of them), plus ``_output_shapes`` when
shapes are known, as TF's writer adds them. Attributes with no proto form are left out.

``meta_graph_def_proto`` gives TF's ``MetaGraphDef`` of a graph (what ``FileWriter`` writes
after the graph, as TF's does) or of a dflab meta graph: the ``GraphDef`` above, the op names
used (``stripped_op_list``: names only, dflab's op schemas have no ``OpDef`` form), the saver
def, and the collections whose items TF's protos can hold (op and tensor names, variables as
``VariableDef``s, savers, numbers and strings); queue runners have no proto here and are left
out.

``run_metadata_proto`` copies a dflab ``RunMetadata`` (step stats, cost graph, partition
graphs) field by field into TF's proto, walking the proto's own field list, so a field both
sides share is never forgotten and dflab-only fields (``fused_ops``, ``transfers``) are simply
not written.
"""

from __future__ import annotations

import numpy as np

from dflab.framework import dtypes as _dt
from dflab.framework.graph_io import GraphDef
from dflab.framework.tensor_shape import TensorShape
from dflab.kernels.summary_kernels import tensor_proto
from dflab.ops.summary_ops import datatype_enum, tb_proto

# --- GraphDef ------------------------------------------------------------------------------


def shape_proto(shape):
    """A ``TensorShapeProto`` of a dflab ``TensorShape`` (unknown sizes are -1)."""
    shape_pb2 = tb_proto("tensor_shape_pb2")
    shape = shape if isinstance(shape, TensorShape) else TensorShape(shape)
    if shape.ndims is None:
        return shape_pb2.TensorShapeProto(unknown_rank=True)
    return shape_pb2.TensorShapeProto(dim=[
        shape_pb2.TensorShapeProto.Dim(size=-1 if d is None else int(d))
        for d in shape.as_list()])


def attr_value(value):
    """The ``AttrValue`` of a dflab attribute value, or None when it has no proto form."""
    attr_value_pb2 = tb_proto("attr_value_pb2")
    if isinstance(value, _dt.DType):
        return attr_value_pb2.AttrValue(type=datatype_enum(value))
    if isinstance(value, TensorShape):
        return attr_value_pb2.AttrValue(shape=shape_proto(value))
    if isinstance(value, np.ndarray):
        dtype = _dt.string if value.dtype == object else _dt.as_dtype(value.dtype)
        return attr_value_pb2.AttrValue(tensor=tensor_proto(value, dtype))
    scalar = _scalar_attr(value)
    if scalar is not None:
        return attr_value_pb2.AttrValue(**scalar)
    if isinstance(value, (list, tuple)):
        items = _list_attr(value)
        return None if items is None else attr_value_pb2.AttrValue(list=items)
    return None


def _scalar_attr(value) -> dict | None:
    if isinstance(value, (bool, np.bool_)):
        return {"b": bool(value)}
    if isinstance(value, (int, np.integer)):
        return {"i": int(value)}
    if isinstance(value, (float, np.floating)):
        return {"f": float(value)}
    if isinstance(value, str):
        return {"s": value.encode("utf-8")}
    if isinstance(value, bytes):
        return {"s": value}
    return None


def _list_attr(values):
    """A ``ListValue`` of items of one kind; None for a mixed list or an unknown kind."""
    list_value = tb_proto("attr_value_pb2").AttrValue.ListValue()
    if not values:
        return list_value
    if all(isinstance(v, _dt.DType) for v in values):
        list_value.type.extend(datatype_enum(v) for v in values)
        return list_value
    if all(isinstance(v, TensorShape) for v in values):
        list_value.shape.extend(shape_proto(v) for v in values)
        return list_value
    scalars = [_scalar_attr(v) for v in values]
    kinds = {next(iter(s)) for s in scalars if s is not None}
    if None in scalars or len(kinds) != 1:
        return None
    kind = kinds.pop()
    getattr(list_value, kind).extend(s[kind] for s in scalars)
    return list_value


def node_def_proto(node, output_shapes=None):
    """A ``NodeDef`` proto of a dflab ``NodeDef``; ``output_shapes``: its outputs' shapes."""
    node_def_pb2 = tb_proto("node_def_pb2")
    proto = node_def_pb2.NodeDef(name=node.name, op=node.op, input=list(node.input),
                                 device=node.device or "")
    for key, value in sorted(node.attr.items()):
        converted = attr_value(value)
        if converted is not None:
            proto.attr[key].CopyFrom(converted)
    shapes = output_shapes if output_shapes is not None else node.output_shapes
    if shapes and "_output_shapes" not in proto.attr:
        proto.attr["_output_shapes"].list.shape.extend(shape_proto(s) for s in shapes)
    return proto


def graph_def_proto(graph_or_graph_def):
    """TensorBoard's ``GraphDef`` proto of a dflab ``Graph`` or ``GraphDef``."""
    graph_pb2 = tb_proto("graph_pb2")
    if isinstance(graph_or_graph_def, GraphDef):
        graph_def, shapes = graph_or_graph_def, {}
    else:
        graph = graph_or_graph_def
        graph_def = graph.as_graph_def()
        shapes = {op.name: [t.shape for t in op.outputs] for op in graph.get_operations()}
    proto = graph_pb2.GraphDef()
    for node in graph_def.node:
        proto.node.append(node_def_proto(node, shapes.get(node.name)))
    return proto


# --- MetaGraphDef --------------------------------------------------------------------------


def meta_graph_def_proto(source):
    """TF's ``MetaGraphDef`` proto of a dflab ``Graph``, ``GraphDef`` or meta graph (what
    ``tf.train.export_meta_graph`` returns)."""
    from dflab.train.meta_graph import MetaGraphDef

    meta_graph_pb2 = tb_proto("meta_graph_pb2")
    proto = meta_graph_pb2.MetaGraphDef()
    meta = source if isinstance(source, MetaGraphDef) else None
    graph_def = graph_def_proto(meta.graph_def if meta is not None else source)
    proto.graph_def.CopyFrom(graph_def)
    for op_type in sorted({node.op for node in graph_def.node}):
        proto.meta_info_def.stripped_op_list.op.add(name=op_type)
    if meta is None:
        return proto
    if meta.saver_def:
        proto.saver_def.CopyFrom(_saver_def_proto(meta.saver_def))
    for key, items in sorted(meta.collection_def.items()):
        _add_collection(proto.collection_def[key], items)
        if not proto.collection_def[key].ListFields():
            del proto.collection_def[key]  # nothing in it has a proto form
    return proto


def _saver_def_proto(saver_def: dict):
    saver_pb2 = tb_proto("saver_pb2")
    fields = {f.name for f in saver_pb2.SaverDef.DESCRIPTOR.fields}
    return saver_pb2.SaverDef(**{k: v for k, v in saver_def.items()
                                 if k in fields and v is not None})


def _variable_def_proto(value: dict):
    variable_pb2 = tb_proto("variable_pb2")
    fields = {f.name for f in variable_pb2.VariableDef.DESCRIPTOR.fields}
    return variable_pb2.VariableDef(**{k: v for k, v in value.items() if k in fields})


def _add_collection(collection, items) -> None:
    """Fill a ``CollectionDef`` from dflab's tagged items, all of one kind as TF's are: names
    in ``node_list``, defs serialized in ``bytes_list``, numbers in ``int64``/``float`` lists."""
    for item in items:
        (kind, value), = item.items()
        if kind in ("op", "tensor"):
            collection.node_list.value.append(value)
        elif kind == "variable":
            collection.bytes_list.value.append(_variable_def_proto(value).SerializeToString())
        elif kind == "saver":
            collection.bytes_list.value.append(_saver_def_proto(value).SerializeToString())
        elif kind == "value" and isinstance(value, bool | int):
            collection.int64_list.value.append(int(value))
        elif kind == "value" and isinstance(value, float):
            collection.float_list.value.append(value)
        elif kind == "value" and isinstance(value, str):
            collection.bytes_list.value.append(value.encode())


# --- RunMetadata ---------------------------------------------------------------------------


def run_metadata_proto(run_metadata):
    """TF's ``RunMetadata`` proto of a dflab ``RunMetadata`` (or such a proto, unchanged)."""
    config_pb2 = tb_proto("config_pb2")
    if isinstance(run_metadata, config_pb2.RunMetadata):
        return run_metadata
    proto = config_pb2.RunMetadata()
    _copy_fields(run_metadata.step_stats, proto.step_stats)
    _copy_fields(run_metadata.cost_graph, proto.cost_graph)
    for graph_def in getattr(run_metadata, "partition_graphs", []):
        proto.partition_graphs.append(graph_def_proto(graph_def))
    return proto


def _copy_fields(source, message) -> None:
    """Copy every field of proto ``message`` that ``source`` (a dflab message) has too."""
    for field in message.DESCRIPTOR.fields:
        if not hasattr(source, field.name):
            continue
        value = getattr(source, field.name)
        if value is None:
            continue
        if _is_map(field):
            getattr(message, field.name).update(value)
        elif field.message_type is not None and _is_repeated(field):
            for item in value:
                _copy_fields(item, getattr(message, field.name).add())
        elif field.message_type is not None:
            _copy_fields(value, getattr(message, field.name))
        elif _is_repeated(field):
            getattr(message, field.name).extend(_plain(field, v) for v in value)
        else:
            setattr(message, field.name, _plain(field, value))


def _is_repeated(field) -> bool:
    is_repeated = getattr(field, "is_repeated", None)  # newer protobuf
    if is_repeated is not None:
        return bool(is_repeated)
    return field.label == field.LABEL_REPEATED


def _is_map(field) -> bool:
    message_type = field.message_type
    return (message_type is not None and _is_repeated(field)
            and message_type.GetOptions().map_entry)


def _plain(field, value):
    """A scalar field's value: a dflab dtype becomes TF's enum."""
    if field.enum_type is not None and field.enum_type.name == "DataType":
        return datatype_enum(value) if isinstance(value, _dt.DType) else int(value or 0)
    if isinstance(value, np.generic):
        return value.item()
    return value
