"""Kernels of ``ParseExampleV2``, ``ParseSingleSequenceExample`` and ``DecodeRaw``.

Examples are parsed with protobuf (``dflab.lib.protos``: TF's own message definitions), one
feature at a time; every check raises ``InvalidArgumentError`` with TF 2.21's message, which
differs between a scalar input (TF's single-example path: ``Key: f.  ...``) and a batch
(``Name: <unknown>, Key: f, Index: 0.  ...``). Host-only, as TF's parsing kernels are.
"""

from __future__ import annotations

import numpy as np

from dflab.framework import dtypes as _dt
from dflab.framework import errors
from dflab.kernels.registry import kernel
from dflab.lib import protos

# Feature kind -> (dtype, TF's type name, the word TF's count messages use).
_KINDS = {"float_list": (_dt.float32, "float", "float"),
          "int64_list": (_dt.int64, "int64", "int64"),
          "bytes_list": (_dt.string, "string", "bytes")}
_TYPE_NAME = {dtype: name for dtype, name, _ in _KINDS.values()}


def _invalid(message: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, message)


def _text(data: bytes) -> str:
    return data.decode("utf-8", "backslashreplace")


def _parse(message_class, data, what: str):
    data = data if isinstance(data, bytes) else str(data).encode()
    try:
        return message_class.FromString(data)
    except Exception:  # noqa: BLE001 - protobuf's DecodeError (its class differs by backend)
        raise _invalid(f"Could not parse {what} input, value: '{_text(data)}'") from None


def _values(feature, dtype) -> np.ndarray | None:
    """The feature's values as an array of ``dtype``; None when it holds another type (a
    feature with no list set is empty, whatever the type asked)."""
    kind = feature.WhichOneof("kind")
    if kind is None:
        return np.zeros(0, dtype=object if dtype is _dt.string else dtype._np)
    if _KINDS[kind][0] is not dtype:
        return None
    values = getattr(feature, kind).value
    if dtype is _dt.string:
        out = np.empty(len(values), dtype=object)
        out[:] = list(values)
        return out
    return np.asarray(values, dtype=dtype._np)


def _kind_name(feature) -> str:
    return _KINDS[feature.WhichOneof("kind")][1]


def _fmt_shape(dims) -> str:
    return "[" + ",".join("?" if d is None or d < 0 else str(d) for d in dims) + "]"


class _Where:
    """How messages name an example: TF's single-example path names only the key."""

    def __init__(self, single: bool, names, index: int):
        self.single = single
        self.index = index
        name = names[index] if len(names) > index else None
        self.name = _text(name) if isinstance(name, bytes) else (name or "<unknown>")

    def key(self, key: str) -> str:
        if self.single:
            return f"Key: {key}.  "
        return f"Name: {self.name}, Key: {key}, Index: {self.index}.  "

    def prefix(self) -> str:
        return "" if self.single else f"Name: {self.name}, "


def _dense_value(features, key, dtype, shape, default, where: _Where) -> np.ndarray:
    """One example's value of a ``FixedLenFeature``."""
    feature = features.get(key)
    if feature is None or key not in features:
        if default.size == 0:
            raise _invalid(f"{where.prefix()}Feature: {key} (data type: {_TYPE_NAME[dtype]}) "
                           "is required but could not be found.")
        return default.reshape(shape)
    values = _values(feature, dtype)
    if values is None:
        raise _invalid(f"{where.key(key)}Data types don't match. Data type: "
                       f"{_kind_name(feature)} but expected type: {_TYPE_NAME[dtype]}")
    want = int(np.prod(shape)) if shape else 1
    if values.size != want:
        if where.single:
            kind = feature.WhichOneof("kind") or "float_list"
            raise _invalid(f"Key: {key}.  Can't parse serialized Example: Some {kind} slice "
                           "was not parsed.")
        word = _KINDS[feature.WhichOneof("kind")][2]
        raise _invalid(f"{where.key(key)}Number of {word} values != expected.  Values size: "
                       f"{values.size} but output shape: {_fmt_shape(shape)}")
    return values.reshape(shape)


def _sequence_value(features, key, dtype, item_shape, where: _Where) -> np.ndarray:
    """One example's rows of a ``FixedLenSequenceFeature`` (``[rows, *item_shape]``)."""
    stride = int(np.prod(item_shape)) if item_shape else 1
    feature = features.get(key) if key in features else None
    if feature is None:
        return np.zeros([0, *item_shape], dtype=object if dtype is _dt.string else dtype._np)
    values = _values(feature, dtype)
    if values is None:
        raise _invalid(f"{where.key(key)}Data types don't match. Data type: "
                       f"{_kind_name(feature)} but expected type: {_TYPE_NAME[dtype]}")
    if stride == 0 or values.size % stride:
        if where.single:
            raise _invalid(f"Error while parsing feature with key {key}: number of elements "
                           f"should be divisible by {stride}, found {values.size} instead")
        word = _KINDS[feature.WhichOneof("kind")][2]
        raise _invalid(f"{where.key(key)}Number of {word} values is not a multiple of stride "
                       f"length. Saw {values.size} values but output shape is: "
                       f"{_fmt_shape([None, *item_shape])}")
    return values.reshape([values.size // stride, *item_shape])


def _pad_rows(rows: list[np.ndarray], item_shape, default, dtype) -> np.ndarray:
    longest = max((r.shape[0] for r in rows), default=0)
    out = np.empty([len(rows), longest, *item_shape], dtype=object if dtype is _dt.string
                   else dtype._np)
    out[...] = np.asarray(default).reshape(())
    for i, r in enumerate(rows):
        out[i, :r.shape[0]] = r
    return out


def _sparse(rows: list[np.ndarray], dtype, batched: bool):
    """TF's sparse triple of per-example value lists: indices, values, dense shape."""
    indices = [[i, j] if batched else [j] for i, r in enumerate(rows) for j in range(r.size)]
    longest = max((r.size for r in rows), default=0)
    values = np.concatenate(rows) if rows else np.zeros(0, dtype._np)
    width = 2 if batched else 1
    shape = [len(rows), longest] if batched else [longest]
    return (np.asarray(indices, dtype=np.int64).reshape(-1, width),
            values.astype(object if dtype is _dt.string else dtype._np),
            np.asarray(shape, dtype=np.int64))


@kernel("ParseExampleV2", host_only=True)
def _parse_example(node, ctx):
    a = node.attr
    dense_keys, dense_types = list(a["dense_keys"]), list(a["Tdense"])
    dense_shapes = [s.as_list() for s in a["dense_shapes"]]
    sparse_keys, sparse_types = list(a.get("sparse_keys") or []), list(a["sparse_types"])

    def parse(serialized, names, *defaults):
        batch = np.asarray(serialized, dtype=object)
        single = batch.ndim == 0
        names = list(np.asarray(names, dtype=object).reshape(-1))
        examples = [_parse(protos.Example, s, "example").features.feature
                    for s in batch.reshape(-1)]
        dense = []
        for key, dtype, shape, default in zip(dense_keys, dense_types, dense_shapes,
                                              defaults):
            default = np.asarray(default)
            wheres = [_Where(single, names, i) for i in range(len(examples))]
            if shape and shape[0] is None:
                rows = [_sequence_value(f, key, dtype, shape[1:], w)
                        for f, w in zip(examples, wheres)]
                out = _pad_rows(rows, shape[1:], default, dtype)
            else:
                out = np.stack([_dense_value(f, key, dtype, shape, default, w)
                                for f, w in zip(examples, wheres)]) if examples else \
                    np.zeros([0, *shape], dtype=object if dtype is _dt.string else dtype._np)
            dense.append(out[0] if single else out)
        sparse = [_sparse([_var_len(f, key, dtype, _Where(single, names, i))
                           for i, f in enumerate(examples)], dtype, not single)
                  for key, dtype in zip(sparse_keys, sparse_types)]
        outs = ([s[0] for s in sparse] + [s[1] for s in sparse] + [s[2] for s in sparse]
                + dense)
        return outs[0] if len(outs) == 1 else tuple(outs)

    return parse


def _var_len(features, key, dtype, where: _Where) -> np.ndarray:
    if key not in features:
        return np.zeros(0, dtype=object if dtype is _dt.string else dtype._np)
    values = _values(features[key], dtype)
    if values is None:
        raise _invalid(f"{where.key(key)}Data types don't match. Data type: "
                       f"{_kind_name(features[key])} but expected type: {_TYPE_NAME[dtype]}")
    return values


# --- SequenceExample --------------------------------------------------------------------------
def _context_value(features, key, dtype, shape, default) -> np.ndarray:
    want = int(np.prod(shape)) if shape else 1
    if key not in features:
        if default.size == 0:
            raise _invalid(f"Inconsistent max number of elements for feature {key}: expected "
                           f"{want}, but found 0")
        return default.reshape(shape)
    return _dense_value(features, key, dtype, shape, default, _Where(False, [], 0))


def _feature_list_value(lists, key, dtype, shape, missing_ok: bool, name: str) -> np.ndarray:
    want = int(np.prod(shape)) if shape else 1
    np_type = object if dtype is _dt.string else dtype._np
    if key not in lists:
        if not missing_ok:
            raise _invalid(f"Name: {name}, Feature list '{key}' is required but could not be "
                           "found.  Did you mean to include it in "
                           "feature_list_dense_missing_assumed_empty or "
                           "feature_list_dense_defaults?")
        return np.zeros([0, *shape], dtype=np_type)
    steps = []
    for t, feature in enumerate(lists[key].feature):
        values = _values(feature, dtype)
        if values is None:
            raise _invalid(f"Name: {name}, Feature list: {key}, Index: {t}.  Data types "
                           f"don't match. Expected type: {_TYPE_NAME[dtype]}")
        if values.size != want:
            raise _invalid(f"Name: {name}, Key: {key}, Index: {t}.  Number of values != "
                           f"expected.  values size: {values.size} but output shape: "
                           f"{_fmt_shape(shape)}")
        steps.append(values.reshape(shape))
    return np.stack(steps) if steps else np.zeros([0, *shape], dtype=np_type)


def _feature_list_sparse(lists, key, dtype, name: str):
    """A feature list as TF's sparse triple: entry [step, j] for the j-th value of a step
    (an absent list is empty, of dense shape [0, 0])."""
    steps = []
    for t, feature in enumerate(lists[key].feature if key in lists else []):
        values = _values(feature, dtype)
        if values is None:
            raise _invalid(f"Name: {name}, Feature list: {key}, Index: {t}.  Data types "
                           f"don't match. Expected type: {_TYPE_NAME[dtype]}")
        steps.append(values)
    return _sparse(steps, dtype, True)


@kernel("ParseSingleSequenceExample", host_only=True)
def _parse_sequence_example(node, ctx):
    a = node.attr
    c_keys, c_types = list(a["context_dense_keys"]), list(a["Tcontext_dense"])
    c_shapes = [s.as_list() for s in a["context_dense_shapes"]]
    s_keys, s_types = list(a["feature_list_dense_keys"]), list(a["feature_list_dense_types"])
    s_shapes = [s.as_list() for s in a["feature_list_dense_shapes"]]
    missing_ok = set(a.get("feature_list_dense_missing_assumed_empty") or [])
    cs_keys, cs_types = list(a.get("context_sparse_keys") or []), list(
        a.get("context_sparse_types") or [])
    ss_keys, ss_types = list(a.get("feature_list_sparse_keys") or []), list(
        a.get("feature_list_sparse_types") or [])

    def parse(serialized, debug_name, *defaults):
        data = np.asarray(serialized, dtype=object).reshape(-1)[0]
        name = _text(np.asarray(debug_name, dtype=object).reshape(-1)[0] or b"") or \
            "<unknown>"
        example = _parse(protos.SequenceExample, data, "sequence example")
        context, lists = example.context.feature, example.feature_lists.feature_list
        c_sparse = [_sparse([_var_len(context, k, t, _Where(True, [name], 0))], t, False)
                    for k, t in zip(cs_keys, cs_types)]
        s_sparse = [_feature_list_sparse(lists, k, t, name) for k, t in zip(ss_keys, ss_types)]
        outs = [part for k in range(3) for part in (sp[k] for sp in c_sparse)]
        outs += [_context_value(context, k, t, s, np.asarray(d))
                 for k, t, s, d in zip(c_keys, c_types, c_shapes, defaults)]
        outs += [part for k in range(3) for part in (sp[k] for sp in s_sparse)]
        outs += [_feature_list_value(lists, k, t, s, k in missing_ok, name)
                 for k, t, s in zip(s_keys, s_types, s_shapes)]
        return outs[0] if len(outs) == 1 else tuple(outs)

    return parse


# --- DecodeRaw ------------------------------------------------------------------------------------
@kernel("DecodeRaw", host_only=True)
def _decode_raw(node, ctx):
    dtype = node.attr["out_type"]
    order = "<" if node.attr.get("little_endian", True) else ">"
    np_type = np.dtype(dtype._np).newbyteorder(order) if np.dtype(dtype._np).itemsize > 1 \
        else np.dtype(dtype._np)
    size = np_type.itemsize

    def decode(input_bytes):
        arr = np.asarray(input_bytes, dtype=object)
        flat = [b if isinstance(b, bytes) else str(b).encode() for b in arr.reshape(-1)]
        width = len(flat[0]) if flat else 0
        if width % size:
            raise _invalid(f"Input to DecodeRaw has length {width} that is not a multiple of "
                           f"{size}, the size of {_raw_name(dtype)}")
        for i, b in enumerate(flat):
            if len(b) != width:
                raise _invalid(f"DecodeRaw requires input strings to all be the same size, "
                               f"but element {i} has size {len(b)} != {width}")
        data = np.frombuffer(b"".join(flat), dtype=np_type).astype(dtype._np)
        return data.reshape([*arr.shape, width // size])

    return decode


def _raw_name(dtype) -> str:
    return {"float32": "float", "float64": "double", "float16": "half"}.get(dtype.name,
                                                                           dtype.name)
