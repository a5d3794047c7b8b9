"""TensorFlow's protocol buffers that its file formats carry: ``tf.train.Example`` and its
parts (``feature.proto``, ``example.proto``) and the tensor bundle's index entries
(``tensor_bundle.proto`` with the ``TensorShapeProto``, ``TensorSliceProto``, ``VersionDef``
and ``DataType`` it uses), and ``TensorProto`` (``tensor.proto``, with the
``ResourceHandleProto`` it names): what ``tf.make_tensor_proto`` builds and
``tf.serialize_tensor`` writes; and ``TrackableObjectGraph``, the object graph an object-based
checkpoint (``tf.train.Checkpoint``) stores beside its tensors.

The message definitions are TF's own, written here as ``FileDescriptorProto`` text (the same
file names, package ``tensorflow``, field numbers, types and options as TF 2.21's compiled
descriptors, which ``tests/ops/test_parsing_ops.py`` compares when TensorFlow is installed) and
built into a private ``DescriptorPool``: no generated code, no ``protoc``, and no clash with
another library registering the same files in protobuf's default pool. Serialization is
protobuf's, so bytes written here are bytes TF reads and the other way round.
"""

from __future__ import annotations

from google.protobuf import (
    descriptor_pb2,
    descriptor_pool,
    message_factory,
    text_format,
    wrappers_pb2,
)

_TYPES = """
name: "tensorflow/core/framework/types.proto" package: "tensorflow" syntax: "proto3"
enum_type { name: "DataType"
  value { name: "DT_INVALID" number: 0 }   value { name: "DT_FLOAT" number: 1 }
  value { name: "DT_DOUBLE" number: 2 }    value { name: "DT_INT32" number: 3 }
  value { name: "DT_UINT8" number: 4 }     value { name: "DT_INT16" number: 5 }
  value { name: "DT_INT8" number: 6 }      value { name: "DT_STRING" number: 7 }
  value { name: "DT_COMPLEX64" number: 8 } value { name: "DT_INT64" number: 9 }
  value { name: "DT_BOOL" number: 10 }     value { name: "DT_QINT8" number: 11 }
  value { name: "DT_QUINT8" number: 12 }   value { name: "DT_QINT32" number: 13 }
  value { name: "DT_BFLOAT16" number: 14 } value { name: "DT_QINT16" number: 15 }
  value { name: "DT_QUINT16" number: 16 }  value { name: "DT_UINT16" number: 17 }
  value { name: "DT_COMPLEX128" number: 18 } value { name: "DT_HALF" number: 19 }
  value { name: "DT_RESOURCE" number: 20 } value { name: "DT_VARIANT" number: 21 }
  value { name: "DT_UINT32" number: 22 }   value { name: "DT_UINT64" number: 23 }
}
"""

_TENSOR_SHAPE = """
name: "tensorflow/core/framework/tensor_shape.proto" package: "tensorflow" syntax: "proto3"
message_type { name: "TensorShapeProto"
  field { name: "dim" number: 2 label: LABEL_REPEATED type: TYPE_MESSAGE
          type_name: ".tensorflow.TensorShapeProto.Dim" }
  field { name: "unknown_rank" number: 3 label: LABEL_OPTIONAL type: TYPE_BOOL }
  nested_type { name: "Dim"
    field { name: "size" number: 1 label: LABEL_OPTIONAL type: TYPE_INT64 }
    field { name: "name" number: 2 label: LABEL_OPTIONAL type: TYPE_STRING }
  }
}
"""

_TENSOR_SLICE = """
name: "tensorflow/core/framework/tensor_slice.proto" package: "tensorflow" syntax: "proto3"
message_type { name: "TensorSliceProto"
  field { name: "extent" number: 1 label: LABEL_REPEATED type: TYPE_MESSAGE
          type_name: ".tensorflow.TensorSliceProto.Extent" }
  nested_type { name: "Extent"
    field { name: "start" number: 1 label: LABEL_OPTIONAL type: TYPE_INT64 }
    field { name: "length" number: 2 label: LABEL_OPTIONAL type: TYPE_INT64 oneof_index: 0 }
    oneof_decl { name: "has_length_hack" }
  }
}
"""

_VERSIONS = """
name: "tensorflow/core/framework/versions.proto" package: "tensorflow" syntax: "proto3"
message_type { name: "VersionDef"
  field { name: "producer" number: 1 label: LABEL_OPTIONAL type: TYPE_INT32 }
  field { name: "min_consumer" number: 2 label: LABEL_OPTIONAL type: TYPE_INT32 }
  field { name: "bad_consumers" number: 3 label: LABEL_REPEATED type: TYPE_INT32 }
}
"""

_TENSOR_BUNDLE = """
name: "tensorflow/core/protobuf/tensor_bundle.proto" package: "tensorflow" syntax: "proto3"
dependency: "tensorflow/core/framework/tensor_shape.proto"
dependency: "tensorflow/core/framework/tensor_slice.proto"
dependency: "tensorflow/core/framework/types.proto"
dependency: "tensorflow/core/framework/versions.proto"
message_type { name: "BundleHeaderProto"
  field { name: "num_shards" number: 1 label: LABEL_OPTIONAL type: TYPE_INT32 }
  field { name: "endianness" number: 2 label: LABEL_OPTIONAL type: TYPE_ENUM
          type_name: ".tensorflow.BundleHeaderProto.Endianness" }
  field { name: "version" number: 3 label: LABEL_OPTIONAL type: TYPE_MESSAGE
          type_name: ".tensorflow.VersionDef" }
  enum_type { name: "Endianness" value { name: "LITTLE" number: 0 }
                                 value { name: "BIG" number: 1 } }
}
message_type { name: "BundleEntryProto"
  field { name: "dtype" number: 1 label: LABEL_OPTIONAL type: TYPE_ENUM
          type_name: ".tensorflow.DataType" }
  field { name: "shape" number: 2 label: LABEL_OPTIONAL type: TYPE_MESSAGE
          type_name: ".tensorflow.TensorShapeProto" }
  field { name: "shard_id" number: 3 label: LABEL_OPTIONAL type: TYPE_INT32 }
  field { name: "offset" number: 4 label: LABEL_OPTIONAL type: TYPE_INT64 }
  field { name: "size" number: 5 label: LABEL_OPTIONAL type: TYPE_INT64 }
  field { name: "crc32c" number: 6 label: LABEL_OPTIONAL type: TYPE_FIXED32 }
  field { name: "slices" number: 7 label: LABEL_REPEATED type: TYPE_MESSAGE
          type_name: ".tensorflow.TensorSliceProto" }
}
"""

_FEATURE = """
name: "tensorflow/core/example/feature.proto" package: "tensorflow" syntax: "proto3"
message_type { name: "BytesList"
  field { name: "value" number: 1 label: LABEL_REPEATED type: TYPE_BYTES }
}
message_type { name: "FloatList"
  field { name: "value" number: 1 label: LABEL_REPEATED type: TYPE_FLOAT
          options { packed: true } }
}
message_type { name: "Int64List"
  field { name: "value" number: 1 label: LABEL_REPEATED type: TYPE_INT64
          options { packed: true jstype: JS_STRING } }
}
message_type { name: "Feature"
  field { name: "bytes_list" number: 1 label: LABEL_OPTIONAL type: TYPE_MESSAGE
          type_name: ".tensorflow.BytesList" oneof_index: 0 }
  field { name: "float_list" number: 2 label: LABEL_OPTIONAL type: TYPE_MESSAGE
          type_name: ".tensorflow.FloatList" oneof_index: 0 }
  field { name: "int64_list" number: 3 label: LABEL_OPTIONAL type: TYPE_MESSAGE
          type_name: ".tensorflow.Int64List" oneof_index: 0 }
  oneof_decl { name: "kind" }
}
message_type { name: "Features"
  field { name: "feature" number: 1 label: LABEL_REPEATED type: TYPE_MESSAGE
          type_name: ".tensorflow.Features.FeatureEntry" }
  nested_type { name: "FeatureEntry" options { map_entry: true }
    field { name: "key" number: 1 label: LABEL_OPTIONAL type: TYPE_STRING }
    field { name: "value" number: 2 label: LABEL_OPTIONAL type: TYPE_MESSAGE
            type_name: ".tensorflow.Feature" }
  }
}
message_type { name: "FeatureList"
  field { name: "feature" number: 1 label: LABEL_REPEATED type: TYPE_MESSAGE
          type_name: ".tensorflow.Feature" }
}
message_type { name: "FeatureLists"
  field { name: "feature_list" number: 1 label: LABEL_REPEATED type: TYPE_MESSAGE
          type_name: ".tensorflow.FeatureLists.FeatureListEntry" }
  nested_type { name: "FeatureListEntry" options { map_entry: true }
    field { name: "key" number: 1 label: LABEL_OPTIONAL type: TYPE_STRING }
    field { name: "value" number: 2 label: LABEL_OPTIONAL type: TYPE_MESSAGE
            type_name: ".tensorflow.FeatureList" }
  }
}
"""

_EXAMPLE = """
name: "tensorflow/core/example/example.proto" package: "tensorflow" syntax: "proto3"
dependency: "tensorflow/core/example/feature.proto"
message_type { name: "Example"
  field { name: "features" number: 1 label: LABEL_OPTIONAL type: TYPE_MESSAGE
          type_name: ".tensorflow.Features" }
}
message_type { name: "SequenceExample"
  field { name: "context" number: 1 label: LABEL_OPTIONAL type: TYPE_MESSAGE
          type_name: ".tensorflow.Features" }
  field { name: "feature_lists" number: 2 label: LABEL_OPTIONAL type: TYPE_MESSAGE
          type_name: ".tensorflow.FeatureLists" }
}
"""

_RESOURCE_HANDLE = """
name: "tensorflow/core/framework/resource_handle.proto" package: "tensorflow" syntax: "proto3"
dependency: "tensorflow/core/framework/tensor_shape.proto"
dependency: "tensorflow/core/framework/types.proto"
message_type { name: "ResourceHandleProto"
  field { name: "device" number: 1 label: LABEL_OPTIONAL type: TYPE_STRING }
  field { name: "container" number: 2 label: LABEL_OPTIONAL type: TYPE_STRING }
  field { name: "name" number: 3 label: LABEL_OPTIONAL type: TYPE_STRING }
  field { name: "hash_code" number: 4 label: LABEL_OPTIONAL type: TYPE_UINT64 }
  field { name: "maybe_type_name" number: 5 label: LABEL_OPTIONAL type: TYPE_STRING }
  field { name: "dtypes_and_shapes" number: 6 label: LABEL_REPEATED type: TYPE_MESSAGE
          type_name: ".tensorflow.ResourceHandleProto.DtypeAndShape" }
  nested_type { name: "DtypeAndShape"
    field { name: "dtype" number: 1 label: LABEL_OPTIONAL type: TYPE_ENUM
            type_name: ".tensorflow.DataType" }
    field { name: "shape" number: 2 label: LABEL_OPTIONAL type: TYPE_MESSAGE
            type_name: ".tensorflow.TensorShapeProto" }
  }
  reserved_range { start: 7 end: 8 }
}
"""

# TensorProto: what tf.make_tensor_proto builds and tf.serialize_tensor writes.
_TENSOR = """
name: "tensorflow/core/framework/tensor.proto" package: "tensorflow" syntax: "proto3"
dependency: "tensorflow/core/framework/resource_handle.proto"
dependency: "tensorflow/core/framework/tensor_shape.proto"
dependency: "tensorflow/core/framework/types.proto"
message_type { name: "TensorProto"
  field { name: "dtype" number: 1 label: LABEL_OPTIONAL type: TYPE_ENUM
          type_name: ".tensorflow.DataType" }
  field { name: "tensor_shape" number: 2 label: LABEL_OPTIONAL type: TYPE_MESSAGE
          type_name: ".tensorflow.TensorShapeProto" }
  field { name: "version_number" number: 3 label: LABEL_OPTIONAL type: TYPE_INT32 }
  field { name: "tensor_content" number: 4 label: LABEL_OPTIONAL type: TYPE_BYTES }
  field { name: "half_val" number: 13 label: LABEL_REPEATED type: TYPE_INT32
          options { packed: true } }
  field { name: "float_val" number: 5 label: LABEL_REPEATED type: TYPE_FLOAT
          options { packed: true } }
  field { name: "double_val" number: 6 label: LABEL_REPEATED type: TYPE_DOUBLE
          options { packed: true } }
  field { name: "int_val" number: 7 label: LABEL_REPEATED type: TYPE_INT32
          options { packed: true } }
  field { name: "string_val" number: 8 label: LABEL_REPEATED type: TYPE_BYTES }
  field { name: "scomplex_val" number: 9 label: LABEL_REPEATED type: TYPE_FLOAT
          options { packed: true } }
  field { name: "int64_val" number: 10 label: LABEL_REPEATED type: TYPE_INT64
          options { packed: true } }
  field { name: "bool_val" number: 11 label: LABEL_REPEATED type: TYPE_BOOL
          options { packed: true } }
  field { name: "dcomplex_val" number: 12 label: LABEL_REPEATED type: TYPE_DOUBLE
          options { packed: true } }
  field { name: "resource_handle_val" number: 14 label: LABEL_REPEATED type: TYPE_MESSAGE
          type_name: ".tensorflow.ResourceHandleProto" }
  field { name: "variant_val" number: 15 label: LABEL_REPEATED type: TYPE_MESSAGE
          type_name: ".tensorflow.VariantTensorDataProto" }
  field { name: "uint32_val" number: 16 label: LABEL_REPEATED type: TYPE_UINT32
          options { packed: true } }
  field { name: "uint64_val" number: 17 label: LABEL_REPEATED type: TYPE_UINT64
          options { packed: true } }
  field { name: "float8_val" number: 18 label: LABEL_OPTIONAL type: TYPE_BYTES }
}
message_type { name: "VariantTensorDataProto"
  field { name: "type_name" number: 1 label: LABEL_OPTIONAL type: TYPE_STRING }
  field { name: "metadata" number: 2 label: LABEL_OPTIONAL type: TYPE_BYTES }
  field { name: "tensors" number: 3 label: LABEL_REPEATED type: TYPE_MESSAGE
          type_name: ".tensorflow.TensorProto" }
}
"""

# What an object-based checkpoint stores under ``_CHECKPOINTABLE_OBJECT_GRAPH``: the objects
# from the root, each with its children by name, its saved tensors and an optimizer's slots.
_TRACKABLE_OBJECT_GRAPH = """
name: "tensorflow/core/protobuf/trackable_object_graph.proto" package: "tensorflow"
syntax: "proto3" dependency: "google/protobuf/wrappers.proto"
message_type { name: "TrackableObjectGraph"
  field { name: "nodes" number: 1 label: LABEL_REPEATED type: TYPE_MESSAGE
          type_name: ".tensorflow.TrackableObjectGraph.TrackableObject" }
  nested_type { name: "TrackableObject"
    field { name: "children" number: 1 label: LABEL_REPEATED type: TYPE_MESSAGE
            type_name: ".tensorflow.TrackableObjectGraph.TrackableObject.ObjectReference" }
    field { name: "attributes" number: 2 label: LABEL_REPEATED type: TYPE_MESSAGE
            type_name: ".tensorflow.TrackableObjectGraph.TrackableObject.SerializedTensor" }
    field { name: "slot_variables" number: 3 label: LABEL_REPEATED type: TYPE_MESSAGE
            type_name:
              ".tensorflow.TrackableObjectGraph.TrackableObject.SlotVariableReference" }
    field { name: "registered_saver" number: 4 label: LABEL_OPTIONAL type: TYPE_MESSAGE
            type_name: ".tensorflow.RegisteredSaver" }
    field { name: "has_checkpoint_values" number: 5 label: LABEL_OPTIONAL type: TYPE_MESSAGE
            type_name: ".google.protobuf.BoolValue" }
    nested_type { name: "ObjectReference"
      field { name: "node_id" number: 1 label: LABEL_OPTIONAL type: TYPE_INT32 }
      field { name: "local_name" number: 2 label: LABEL_OPTIONAL type: TYPE_STRING }
    }
    nested_type { name: "SerializedTensor"
      field { name: "name" number: 1 label: LABEL_OPTIONAL type: TYPE_STRING }
      field { name: "full_name" number: 2 label: LABEL_OPTIONAL type: TYPE_STRING }
      field { name: "checkpoint_key" number: 3 label: LABEL_OPTIONAL type: TYPE_STRING }
      reserved_range { start: 4 end: 5 } reserved_name: "optional_restore"
    }
    nested_type { name: "SlotVariableReference"
      field { name: "original_variable_node_id" number: 1 label: LABEL_OPTIONAL
              type: TYPE_INT32 }
      field { name: "slot_name" number: 2 label: LABEL_OPTIONAL type: TYPE_STRING }
      field { name: "slot_variable_node_id" number: 3 label: LABEL_OPTIONAL type: TYPE_INT32 }
    }
  }
}
message_type { name: "RegisteredSaver"
  field { name: "name" number: 1 label: LABEL_OPTIONAL type: TYPE_STRING }
  field { name: "object_name" number: 2 label: LABEL_OPTIONAL type: TYPE_STRING }
}
"""

# In dependency order: a file is added after the files it imports (protobuf's own
# ``wrappers.proto``, which the object graph imports, comes from protobuf).
FILES = (_TYPES, _TENSOR_SHAPE, _TENSOR_SLICE, _VERSIONS, _TENSOR_BUNDLE, _FEATURE, _EXAMPLE,
         _RESOURCE_HANDLE, _TENSOR, _TRACKABLE_OBJECT_GRAPH)


def _file_proto(text: str) -> descriptor_pb2.FileDescriptorProto:
    return text_format.Parse(text, descriptor_pb2.FileDescriptorProto())


def _build_pool() -> descriptor_pool.DescriptorPool:
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(wrappers_pb2.DESCRIPTOR.serialized_pb)
    for text in FILES:
        pool.Add(_file_proto(text))
    return pool


POOL = _build_pool()


def _message_class(full_name: str):
    descriptor = POOL.FindMessageTypeByName(full_name)
    get = getattr(message_factory, "GetMessageClass", None)
    if get is not None:
        return get(descriptor)
    return message_factory.MessageFactory(POOL).GetPrototype(descriptor)  # protobuf < 4.22


def file_descriptor_protos() -> list[descriptor_pb2.FileDescriptorProto]:
    """The files' descriptors (for comparing them with TF's)."""
    return [_file_proto(text) for text in FILES]


BytesList = _message_class("tensorflow.BytesList")
FloatList = _message_class("tensorflow.FloatList")
Int64List = _message_class("tensorflow.Int64List")
Feature = _message_class("tensorflow.Feature")
Features = _message_class("tensorflow.Features")
FeatureList = _message_class("tensorflow.FeatureList")
FeatureLists = _message_class("tensorflow.FeatureLists")
Example = _message_class("tensorflow.Example")
SequenceExample = _message_class("tensorflow.SequenceExample")

TensorShapeProto = _message_class("tensorflow.TensorShapeProto")
TensorSliceProto = _message_class("tensorflow.TensorSliceProto")
VersionDef = _message_class("tensorflow.VersionDef")
BundleHeaderProto = _message_class("tensorflow.BundleHeaderProto")
BundleEntryProto = _message_class("tensorflow.BundleEntryProto")
ResourceHandleProto = _message_class("tensorflow.ResourceHandleProto")
TensorProto = _message_class("tensorflow.TensorProto")
TrackableObjectGraph = _message_class("tensorflow.TrackableObjectGraph")

_DATA_TYPE = POOL.FindEnumTypeByName("tensorflow.DataType")


def data_type_enum(name: str) -> int:
    """The number of TF's ``DataType`` value ``name`` (``"DT_FLOAT"`` -> 1)."""
    return _DATA_TYPE.values_by_name[name].number


def data_type_name(number: int) -> str | None:
    """The name of TF's ``DataType`` numbered ``number``; None for one not in the enum."""
    value = _DATA_TYPE.values_by_number.get(number)
    return None if value is None else value.name
