"""Parsing ``tf.train.Example`` protos and raw bytes: ``tf.parse_example``,
``tf.parse_single_example``, ``tf.parse_single_sequence_example`` with ``FixedLenFeature``,
``FixedLenSequenceFeature``, ``VarLenFeature`` and ``SparseFeature``, and ``tf.decode_raw``.

``ParseExampleV2`` parses a scalar or vector of serialized ``Example``s into one dense tensor
per dense feature (its keys, dtypes and shapes are attrs; a ``FixedLenSequenceFeature``'s shape
has a leading unknown dimension, padded across the batch with its default) and TF's sparse
triple (indices, values, dense shape) per ``sparse_keys`` entry, which a ``VarLenFeature``
becomes as a ``SparseTensor``; a ``SparseFeature`` parses its index and value keys so and
merges them (``sparse_merge``). ``ParseSingleSequenceExample`` parses one ``SequenceExample``:
context features as above, feature lists into ``[steps, ...]`` tensors (or a
``[steps, items]`` ``SparseTensor`` for a ``VarLenFeature``).
The kernels (``kernels/parsing_kernels.py``) raise TF's errors with TF's messages.
"""

from __future__ import annotations

import collections
import re

import numpy as np

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.registry import NotDifferentiable, register_op
from dflab.framework.sparse_tensor import SparseTensor
from dflab.framework.tensor_shape import TensorShape, as_shape, unknown_shape

_PARSE_TYPES = (_dt.float32, _dt.int64, _dt.string)
_RAW_TYPES = (_dt.float16, _dt.float32, _dt.float64, _dt.int32, _dt.uint16, _dt.uint8,
              _dt.int16, _dt.int8, _dt.int64, _dt.complex64, _dt.complex128, _dt.bool)


# --- feature configurations (TF's namedtuples) ----------------------------------------------------
class FixedLenFeature(collections.namedtuple(
        "FixedLenFeature", ["shape", "dtype", "default_value"])):
    """A feature of fixed shape: parsed into a dense tensor of ``shape`` (``default_value``
    when an example lacks it; without one the feature is required)."""

    def __new__(cls, shape, dtype, default_value=None):
        return super().__new__(cls, shape, dtype, default_value)


class FixedLenSequenceFeature(collections.namedtuple(
        "FixedLenSequenceFeature", ["shape", "dtype", "allow_missing", "default_value"])):
    """A variable number of ``shape``-sized items: ``[items, *shape]`` per example (padded
    with ``default_value`` across a batch), or ``[steps, *shape]`` per feature list."""

    def __new__(cls, shape, dtype, allow_missing=False, default_value=None):
        return super().__new__(cls, shape, dtype, allow_missing, default_value)


class VarLenFeature(collections.namedtuple("VarLenFeature", ["dtype"])):
    """A feature of any number of values: parsed into a ``SparseTensor`` (``[batch, n]``,
    or ``[n]`` for one example)."""


class SparseFeature(collections.namedtuple(
        "SparseFeature", ["index_key", "value_key", "dtype", "size", "already_sorted"])):
    """A ``SparseTensor`` of dense shape ``size`` built from an example's index feature(s)
    (``index_key``, a key or a list of keys, one per dimension) and value feature
    (``value_key``)."""

    def __new__(cls, index_key, value_key, dtype, size, already_sorted=False):
        return super().__new__(cls, index_key, value_key, dtype, size, already_sorted)


# --- schemas --------------------------------------------------------------------------------------
def _strings(t, what: str, op_type: str, max_rank: int | None = None) -> None:
    if t.dtype.base_dtype is not _dt.string:
        raise TypeError(f"{op_type}: {what} must be strings, got {t.dtype.name}")
    if max_rank is not None and t.shape.ndims is not None and t.shape.ndims > max_rank:
        raise ValueError(f"Shape must be at most rank {max_rank} but is rank {t.shape.ndims} "
                         f"for '{op_type}' ({what})")


def _dense_output_shape(batch: TensorShape, shape: TensorShape) -> TensorShape:
    return batch.concatenate(shape)


def _parse_example_infer(op):
    a = op.attrs
    serialized = op.inputs[0]
    _strings(serialized, "serialized", op.type, max_rank=1)
    batch = serialized.shape if serialized.shape.ndims is not None else unknown_shape()
    if batch.ndims is None:
        dense = [unknown_shape() for _ in a["Tdense"]]
    else:
        dense = [_dense_output_shape(batch, s) for s in a["dense_shapes"]]
    rank = None if batch.ndims is None else batch.ndims + 1
    n = len(a["sparse_types"])
    return ([(_dt.int64, TensorShape([None, rank]))] * n
            + [(t, TensorShape([None])) for t in a["sparse_types"]]
            + [(_dt.int64, TensorShape([rank]))] * n
            + list(zip(a["Tdense"], dense)))


def _parse_sequence_infer(op):
    a = op.attrs
    _strings(op.inputs[0], "serialized", op.type, max_rank=0)
    n_ctx, n_seq = len(a["context_sparse_types"]), len(a["feature_list_sparse_types"])
    return ([(_dt.int64, TensorShape([None, 1]))] * n_ctx
            + [(t, TensorShape([None])) for t in a["context_sparse_types"]]
            + [(_dt.int64, TensorShape([1]))] * n_ctx
            + list(zip(a["Tcontext_dense"], a["context_dense_shapes"]))
            + [(_dt.int64, TensorShape([None, 2]))] * n_seq
            + [(t, TensorShape([None])) for t in a["feature_list_sparse_types"]]
            + [(_dt.int64, TensorShape([2]))] * n_seq
            + [(t, TensorShape([None]).concatenate(s)) for t, s in
               zip(a["feature_list_dense_types"], a["feature_list_dense_shapes"])])


def _decode_raw_infer(op):
    _strings(op.inputs[0], "input_bytes", "DecodeRaw")
    shape = op.inputs[0].shape
    out = unknown_shape() if shape.ndims is None else shape.concatenate([None])
    return [(op.attrs["out_type"], out)]


register_op("ParseExampleV2", _parse_example_infer)
register_op("ParseSingleSequenceExample", _parse_sequence_infer)
register_op("DecodeRaw", _decode_raw_infer)
for _t in ("ParseExampleV2", "ParseSingleSequenceExample", "DecodeRaw"):
    NotDifferentiable(_t)


# --- building the parse ops -----------------------------------------------------------------------
def _check_dtype(dtype, key: str):
    dtype = _dt.as_dtype(dtype).base_dtype
    if dtype not in _PARSE_TYPES:
        raise TypeError(f"Value passed to parameter 'dense_defaults' has DataType {dtype.name} "
                        "not in list of allowed values: float32, int64, string")
    return dtype


def _op_name(key: str) -> str:
    # A feature key may hold characters an op name cannot: TF's substitution.
    return re.sub(r"[^A-Za-z0-9_.\-/]", "_", key)


def _default_tensor(value, dtype, shape: TensorShape, key: str):
    """The default of a dense feature: an empty tensor when it has none (required)."""
    if value is None:
        return _ops.convert_to_tensor(np.zeros([0], dtype=object if dtype is _dt.string
                                               else dtype._np), dtype=dtype,
                                      name=f"key_{_op_name(key)}")
    arr = np.asarray(value, dtype=object if dtype is _dt.string else dtype._np)
    want = int(np.prod(shape.as_list())) if shape.ndims else 1
    if arr.size != want:
        raise ValueError(f"Cannot reshape a tensor with {arr.size} elements to shape "
                         f"{shape.as_list()} ({want} elements) for the default of feature "
                         f"{key!r}")
    return _ops.convert_to_tensor(arr.reshape(shape.as_list()), dtype=dtype,
                                  name=f"key_{_op_name(key)}")


def _dense_params(features: dict, sequence_ok: bool, where: str):
    """(keys, dtypes, shapes, defaults) of the dense features, in sorted key order."""
    keys, types, shapes, defaults = [], [], [], []
    for key in sorted(features):
        feature = features[key]
        if isinstance(feature, (VarLenFeature, SparseFeature)):
            continue  # parsed by _sparse_params
        if isinstance(feature, FixedLenFeature):
            shape = as_shape(feature.shape)
            if shape.ndims and shape.as_list()[0] is None:
                raise ValueError(f"First dimension of shape for feature {key} unknown. "
                                 "Consider using FixedLenSequenceFeature. Received "
                                 f"feature={feature}.")
            if not shape.is_fully_defined():
                raise ValueError(f"All dimensions of shape for feature {key} need to be "
                                 f"known but received {shape}.")
            dtype = _check_dtype(feature.dtype, key)
            default = _default_tensor(feature.default_value, dtype, shape, key)
        elif isinstance(feature, FixedLenSequenceFeature) and sequence_ok:
            if not feature.allow_missing:
                raise ValueError("Unsupported: FixedLenSequenceFeature requires "
                                 "allow_missing to be True.")
            item = as_shape(feature.shape)
            if not item.is_fully_defined():
                raise ValueError(f"All dimensions of shape for feature {key} need to be "
                                 f"known but received {item}.")
            dtype = _check_dtype(feature.dtype, key)
            default = _sequence_default(feature.default_value, dtype, key)
            shape = TensorShape([None]).concatenate(item)
        else:
            raise ValueError(f"Unsupported {type(feature).__name__} {feature} for key "
                             f"'{key}'{where}")
        keys.append(key)
        types.append(dtype)
        shapes.append(shape)
        defaults.append(default)
    return keys, types, shapes, defaults


def _sparse_params(features: dict):
    """(keys, dtypes) of the sparse outputs to parse, in sorted key order: each
    ``VarLenFeature``, and the index and value keys of each ``SparseFeature``."""
    wanted: dict = {}

    def want(key, dtype, why):
        dtype = _check_dtype(dtype, key)
        if key in wanted and wanted[key] is not dtype:
            raise ValueError(f"Conflicting type {dtype.name} vs {wanted[key].name} for "
                             f"feature {key}.")
        if key in features and not isinstance(features[key], (VarLenFeature, SparseFeature)) \
                and why:
            raise ValueError(f"Conflicting keys for feature {key}: it is both a "
                             f"{type(features[key]).__name__} and the {why} of a "
                             "SparseFeature.")
        wanted[key] = dtype

    for key in sorted(features):
        feature = features[key]
        if isinstance(feature, VarLenFeature):
            want(key, feature.dtype, "")
        elif isinstance(feature, SparseFeature):
            if feature.index_key is None or feature.value_key is None:
                raise ValueError(f"Missing index_key or value_key for feature {key}: "
                                 f"{feature}")
            index_keys = ([feature.index_key] if isinstance(feature.index_key, str)
                          else list(feature.index_key))
            for k in index_keys:
                want(k, _dt.int64, "index key")
            want(feature.value_key, feature.dtype, "value key")
    keys = sorted(wanted)
    return keys, [wanted[k] for k in keys]


def _composite_features(features: dict, parsed: dict) -> dict:
    """The parsed outputs keyed by ``features``: each ``SparseFeature`` merged from its
    index and value ``SparseTensor``s, helper keys dropped (TF's rule)."""
    from dflab.ops.sparse_compose_ops import sparse_merge

    out = dict(parsed)
    for key in sorted(features):
        feature = features[key]
        if isinstance(feature, SparseFeature):
            ids = (parsed[feature.index_key] if isinstance(feature.index_key, str)
                   else [parsed[k] for k in feature.index_key])
            size = feature.size if isinstance(feature.index_key, str) else list(feature.size)
            out[key] = sparse_merge(ids, parsed[feature.value_key], size,
                                    already_sorted=feature.already_sorted)
    return {k: v for k, v in out.items() if k in features}


def _sequence_default(value, dtype, key: str):
    """A sequence feature's padding value: a scalar (0 or b"" when none is given)."""
    if value is None:
        value = b"" if dtype is _dt.string else 0
    arr = np.asarray(value, dtype=object if dtype is _dt.string else dtype._np)
    if arr.size != 1:
        raise ValueError(f"Cannot reshape a tensor with {arr.size} elements to shape [] "
                         f"(1 elements) for the default of feature {key!r}")
    return _ops.convert_to_tensor(arr.reshape([]), dtype=dtype, name=f"padding_{_op_name(key)}")


def _check_features(features) -> None:
    if not features:
        raise ValueError("Invalid argument: features cannot be empty.")
    if not isinstance(features, dict):
        raise TypeError(f"features must be a dict of feature configurations, got "
                        f"{type(features).__name__}")


def parse_example(serialized, features, name=None, example_names=None) -> dict:
    """Parse a vector (or scalar) of serialized ``Example``s: ``{key: dense tensor}`` with a
    leading batch dimension (none for a scalar)."""
    _check_features(features)
    with _ops.name_scope(name, "ParseExample"):
        serialized = _ops.convert_to_tensor(serialized, dtype=_dt.string, name="serialized")
        if serialized.shape.ndims is not None and serialized.shape.ndims > 1:
            raise ValueError(f"Shape must be at most rank 1 but is rank "
                             f"{serialized.shape.ndims} for 'ParseExampleV2' (serialized)")
        keys, types, shapes, defaults = _dense_params(features, True, "")
        sp_keys, sp_types = _sparse_params(features)
        names = _ops.convert_to_tensor(example_names if example_names is not None else [],
                                       dtype=_dt.string, name="names")
        attrs = {"dense_keys": keys, "Tdense": types, "dense_shapes": shapes,
                 "sparse_keys": sp_keys, "sparse_types": sp_types}
        op = _ops.apply_op("ParseExampleV2", [serialized, names, *defaults], attrs,
                           "ParseExampleV2")
        n = len(sp_keys)
        outs = list(op.outputs)
        parsed = {k: SparseTensor(outs[i], outs[n + i], outs[2 * n + i])
                  for i, k in enumerate(sp_keys)}
        parsed.update(zip(keys, outs[3 * n:]))
        return _composite_features(features, parsed)


def parse_single_example(serialized, features, name=None, example_names=None) -> dict:
    """Parse one serialized ``Example`` (a scalar string): ``{key: dense tensor}``."""
    _check_features(features)
    with _ops.name_scope(name, "ParseSingleExample"):
        serialized = _ops.convert_to_tensor(serialized, dtype=_dt.string, name="serialized")
        if serialized.shape.ndims not in (None, 0):
            raise ValueError("Input serialized must be a scalar")
        return parse_example(serialized, features, example_names=example_names)


def parse_single_sequence_example(serialized, context_features=None, sequence_features=None,
                                  example_name=None, name=None) -> tuple[dict, dict]:
    """Parse one serialized ``SequenceExample``: ``(context, sequences)``, the context's
    features as ``parse_single_example`` gives them and each feature list as a
    ``[steps, *shape]`` tensor (a missing list is an error unless ``allow_missing``)."""
    if not context_features and not sequence_features:
        raise ValueError("Both context_features and sequence_features are None, but at least "
                         "one should have values.")
    context_features = dict(context_features or {})
    sequence_features = dict(sequence_features or {})
    with _ops.name_scope(name, "ParseSingleSequenceExample"):
        serialized = _ops.convert_to_tensor(serialized, dtype=_dt.string, name="serialized")
        c_keys, c_types, c_shapes, c_defaults = _dense_params(context_features, False, "")
        cs_keys, cs_types = _var_len_params(context_features)
        ss_keys, ss_types = _var_len_params(sequence_features)
        s_keys, s_types, s_shapes, missing_ok = [], [], [], []
        for key in sorted(sequence_features):
            feature = sequence_features[key]
            if isinstance(feature, VarLenFeature):
                continue
            if not isinstance(feature, FixedLenSequenceFeature):
                raise ValueError(f"Unsupported {type(feature).__name__} {feature} for key "
                                 f"'{key}'")
            shape = as_shape(feature.shape)
            if not shape.is_fully_defined():
                raise ValueError(f"All dimensions of shape for feature {key} need to be "
                                 f"known but received {shape}.")
            s_keys.append(key)
            s_types.append(_check_dtype(feature.dtype, key))
            s_shapes.append(shape)
            missing_ok.append(bool(feature.allow_missing))
        debug_name = _ops.convert_to_tensor(example_name or "", dtype=_dt.string,
                                            name="debug_name")
        attrs = {"context_dense_keys": c_keys, "Tcontext_dense": c_types,
                 "context_dense_shapes": c_shapes, "context_sparse_keys": cs_keys,
                 "context_sparse_types": cs_types, "feature_list_dense_keys": s_keys,
                 "feature_list_dense_types": s_types, "feature_list_dense_shapes": s_shapes,
                 "feature_list_dense_missing_assumed_empty":
                     [k for k, ok in zip(s_keys, missing_ok) if ok],
                 "feature_list_sparse_keys": ss_keys, "feature_list_sparse_types": ss_types}
        op = _ops.apply_op("ParseSingleSequenceExample",
                           [serialized, debug_name, *c_defaults], attrs,
                           "ParseSingleSequenceExample")
    outs = list(op.outputs)
    context, outs = _take_sparse(cs_keys, outs)
    context.update(zip(c_keys, outs[:len(c_keys)]))
    sequences, outs = _take_sparse(ss_keys, outs[len(c_keys):])
    sequences.update(zip(s_keys, outs))
    return context, sequences


def _var_len_params(features: dict):
    keys = [k for k in sorted(features) if isinstance(features[k], VarLenFeature)]
    return keys, [_check_dtype(features[k].dtype, k) for k in keys]


def _take_sparse(keys, outs):
    """``{key: SparseTensor}`` of the first ``3 * len(keys)`` outputs, and the rest."""
    n = len(keys)
    return ({k: SparseTensor(outs[i], outs[n + i], outs[2 * n + i])
             for i, k in enumerate(keys)}, outs[3 * n:])


def decode_raw(input_bytes=None, out_type=None, little_endian=True, name=None, bytes=None):  # noqa: A002 - TF's keyword
    """Reinterpret each string of ``input_bytes`` as a vector of ``out_type``: the output has
    the input's shape plus one dimension (every string must have the same length)."""
    if input_bytes is None:
        input_bytes = bytes
    elif bytes is not None:
        raise ValueError("Cannot specify both 'input_bytes' and 'bytes'")
    out_type = _dt.as_dtype(out_type).base_dtype
    if out_type not in _RAW_TYPES:
        raise TypeError(f"Value passed to parameter 'out_type' has DataType {out_type.name} "
                        "not in list of allowed values: float16, float32, float64, int32, "
                        "uint16, uint8, int16, int8, int64, complex64, complex128, bool")
    input_bytes = _ops.convert_to_tensor(input_bytes, dtype=_dt.string, name="input_bytes")
    return _ops.apply_op("DecodeRaw", [input_bytes], {"out_type": out_type,
                                                      "little_endian": bool(little_endian)},
                         name or "DecodeRaw").outputs[0]


__all__ = ["FixedLenFeature", "FixedLenSequenceFeature", "SparseFeature", "VarLenFeature",
           "decode_raw", "parse_example",
           "parse_single_example", "parse_single_sequence_example"]
