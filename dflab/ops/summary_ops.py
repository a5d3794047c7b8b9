"""Summary ops: TF1's ``tf.summary`` builders and the schemas of the ops they create.

Each summary op outputs one scalar string: a serialized TensorBoard ``Summary`` proto, computed
when the op runs (``dflab.kernels.summary_kernels``). ``ScalarSummary`` and
``HistogramSummary`` carry simple values and histograms, ``ImageSummary`` PNG images,
``TensorSummaryV2`` a whole tensor plus plugin metadata (``tf.summary.text`` is one with the
text plugin's name), and ``MergeSummary`` joins the values of many summaries into one.

Names follow TF: a summary's op is named after its name scope (``outer/loss``, ``loss_1`` for a
repeat) and its tag is that scope, with ``family/`` put in front when a family is given, so
TensorBoard files it under that tab. Builders add their op to ``GraphKeys.SUMMARIES`` unless
told other ``collections``.

The proto classes come from the ``tensorboard`` package, imported only when a summary is
serialized (``tb_proto``), so ``import dflab`` never loads it; without it, a clear
``ImportError`` names the extra to install. Summary ops compute nothing differentiable.
"""

from __future__ import annotations

import importlib
import re

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.constant_op import constant
from dflab.framework.registry import NotDifferentiable, register_op
from dflab.framework.tensor_shape import TensorShape

SUMMARY_OP_TYPES = ("ScalarSummary", "HistogramSummary", "ImageSummary", "TensorSummaryV2",
                    "MergeSummary", "AudioSummaryV2")

INSTALL_HINT = ("dflab's summaries are TensorBoard protos: install the 'summary' extra "
                "(pip install 'dflab[summary]', which brings the tensorboard package)")


def tb_proto(module: str):
    """TensorBoard's compiled proto module ``module`` (``"summary_pb2"``, ``"event_pb2"``…),
    imported on first use; an ``ImportError`` naming the extra when tensorboard is missing."""
    try:
        return importlib.import_module(f"tensorboard.compat.proto.{module}")
    except ImportError as e:
        raise ImportError(f"{INSTALL_HINT}: {e}") from e


# dflab dtype name -> the suffix of TF's DataType enum name (DT_<suffix>).
_DATATYPE_NAMES = {
    "float16": "HALF", "float32": "FLOAT", "float64": "DOUBLE", "bfloat16": "BFLOAT16",
    "int8": "INT8", "int16": "INT16", "int32": "INT32", "int64": "INT64",
    "uint8": "UINT8", "uint16": "UINT16", "uint32": "UINT32", "uint64": "UINT64",
    "bool": "BOOL", "complex64": "COMPLEX64", "complex128": "COMPLEX128", "string": "STRING",
    "resource": "RESOURCE", "variant": "VARIANT",
}


def datatype_enum(dtype) -> int:
    """TF's ``DataType`` enum value of a dflab dtype (``DT_INVALID`` for one TF lacks)."""
    dtype = _dt.as_dtype(dtype)
    suffix = _DATATYPE_NAMES.get(dtype.base_dtype.name)
    types_pb2 = tb_proto("types_pb2")
    if suffix is None:
        return types_pb2.DT_INVALID
    return types_pb2.DataType.Value(f"DT_{suffix}{'_REF' if dtype.is_ref_dtype else ''}")


# --- schemas ------------------------------------------------------------------------------

def _scalar_string(op):
    return [(_dt.string, TensorShape([]))]


for _op_type in SUMMARY_OP_TYPES:
    register_op(_op_type, _scalar_string)
    NotDifferentiable(_op_type)


# --- names ----------------------------------------------------------------------------------

_INVALID_TAG_CHARACTERS = re.compile(r"[^-/\w\.]")


def clean_tag(name):
    """TF's tag cleaning: characters outside ``[-/\\w.]`` become ``_``; leading ``/`` go."""
    if name is None:
        return None
    cleaned = _INVALID_TAG_CHARACTERS.sub("_", str(name)).lstrip("/")
    return cleaned


class _SummaryScope:
    """``with _SummaryScope(name, family) as (tag, scope)``: the name scope a summary op is
    created in (``family/name`` when a family is given) and the tag it reports."""

    def __init__(self, name, family=None, values=None):
        self._name = clean_tag(name)
        self._family = clean_tag(family)
        self._values = values
        self._scope = None

    def __enter__(self):
        scoped = self._name if self._family is None else f"{self._family}/{self._name}"
        self._scope = _ops.name_scope(scoped, values=self._values)
        scope = self._scope.__enter__()
        tag = scope.rstrip("/")
        if self._family is not None:
            tag = f"{self._family}/{tag}"  # repeated so TensorBoard files it under the family
        return tag, scope

    def __exit__(self, *exc):
        return self._scope.__exit__(*exc)


def _collect(summary, collections, default_collections) -> None:
    for key in default_collections if collections is None else collections:
        _ops.add_to_collection(key, summary)


def _string_const(value, name):
    return constant(value, dtype=_dt.string, name=name)


# --- builders ------------------------------------------------------------------------------

def scalar(name, tensor, collections=None, family=None):
    """A summary of one real number: TensorBoard's scalars dashboard plots it per step."""
    tensor = _ops.convert_to_tensor(tensor)
    _check_real(tensor, "scalar")  # a non-scalar fails when it runs, as in TF
    with _SummaryScope(name, family, values=[tensor]) as (tag, scope):
        tags = _string_const(tag, "tags")
        val = _ops.apply_op("ScalarSummary", [tags, tensor], {}, scope).outputs[0]
        _collect(val, collections, [_ops.GraphKeys.SUMMARIES])
    return val


def histogram(name, values, collections=None, family=None):
    """A histogram of every entry of ``values`` (TF's exponential bucket layout)."""
    values = _ops.convert_to_tensor(values)
    _check_real(values, "histogram")
    with _SummaryScope(name, family, values=[values]) as (tag, scope):
        tag_t = _string_const(tag, "tag")
        val = _ops.apply_op("HistogramSummary", [tag_t, values], {}, scope).outputs[0]
        _collect(val, collections, [_ops.GraphKeys.SUMMARIES])
    return val


_IMAGE_DTYPES = ("uint8", "float16", "float32", "float64")


def image(name, tensor, max_outputs=3, collections=None, family=None):
    """Up to ``max_outputs`` images from a ``[batch, height, width, channels]`` tensor
    (channels 1, 3 or 4, checked when it runs, as in TF), PNG-encoded. Float images are
    scaled per image into 0..255 (see the kernel); non-finite pixels are drawn red."""
    tensor = _ops.convert_to_tensor(tensor)
    if tensor.dtype.base_dtype.name not in _IMAGE_DTYPES:
        raise TypeError(f"tf.summary.image: {tensor.name} has dtype {tensor.dtype.name}; "
                        f"expected one of {', '.join(_IMAGE_DTYPES)}")
    if int(max_outputs) < 1:
        raise ValueError(f"tf.summary.image: max_outputs must be at least 1, got {max_outputs}")
    with _SummaryScope(name, family, values=[tensor]) as (tag, scope):
        tag_t = _string_const(tag, "tag")
        attrs = {"max_images": int(max_outputs), "bad_color": [255, 0, 0, 255]}
        val = _ops.apply_op("ImageSummary", [tag_t, tensor], attrs, scope).outputs[0]
        _collect(val, collections, [_ops.GraphKeys.SUMMARIES])
    return val


def audio(name, tensor, sample_rate, max_outputs=3, collections=None, family=None):
    """Up to ``max_outputs`` clips from a float32 ``[batch, frames]`` or ``[batch, frames,
    channels]`` tensor of samples in [-1, 1] (clipped), 16-bit PCM WAV-encoded at
    ``sample_rate`` Hz, for TensorBoard's audio dashboard."""
    tensor = _ops.convert_to_tensor(tensor, dtype=_dt.float32)
    with _SummaryScope(name, family, values=[tensor]) as (tag, scope):
        sample_rate = _ops.convert_to_tensor(sample_rate, dtype=_dt.float32,
                                             name="sample_rate")
        tag_t = _string_const(tag, "tag")
        val = _ops.apply_op("AudioSummaryV2", [tag_t, tensor, sample_rate],
                            {"max_outputs": int(max_outputs)}, scope).outputs[0]
        _collect(val, collections, [_ops.GraphKeys.SUMMARIES])
    return val


def tensor_summary(name, tensor, summary_description=None, collections=None,
                   summary_metadata=None, family=None, display_name=None):
    """The whole ``tensor`` with plugin metadata (``summary_metadata``: a TensorBoard
    ``SummaryMetadata`` proto, or its serialized bytes)."""
    tensor = _ops.convert_to_tensor(tensor)
    if summary_metadata is None:
        summary_metadata = tb_proto("summary_pb2").SummaryMetadata()
    if not isinstance(summary_metadata, bytes):
        if summary_description is not None:
            summary_metadata.summary_description = summary_description
        if display_name is not None:
            summary_metadata.display_name = display_name
        summary_metadata = summary_metadata.SerializeToString()
    with _SummaryScope(name, family, values=[tensor]) as (tag, scope):
        tag_t = _string_const(tag, "tag")
        meta_t = _string_const(summary_metadata, "serialized_summary_metadata")
        val = _ops.apply_op("TensorSummaryV2", [tag_t, tensor, meta_t], {}, scope).outputs[0]
        _collect(val, collections, [_ops.GraphKeys.SUMMARIES])
    return val


def text(name, tensor, collections=None):
    """A string tensor for TensorBoard's text dashboard (markdown is rendered there)."""
    tensor = _ops.convert_to_tensor(tensor)
    if tensor.dtype.base_dtype != _dt.string:
        raise ValueError(f"Expected tensor {tensor.name} to have dtype string, got "
                         f"{tensor.dtype.name}")
    summary_pb2 = tb_proto("summary_pb2")
    metadata = summary_pb2.SummaryMetadata(
        plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="text"))
    return tensor_summary(name, tensor, summary_metadata=metadata, collections=collections)


def merge(inputs, collections=None, name=None):
    """One summary holding the values of all ``inputs`` (serialized ``Summary`` strings);
    running it fails on a tag that two inputs share."""
    inputs = [_ops.convert_to_tensor(x) for x in inputs]
    for x in inputs:
        if x.dtype.base_dtype != _dt.string:
            raise TypeError(f"tf.summary.merge: input {x.name} has dtype {x.dtype.name}, "
                            f"expected string")
    with _ops.name_scope(name, "Merge", inputs):
        val = _ops.apply_op("MergeSummary", inputs, {"N": len(inputs)},
                            name or "MergeSummary").outputs[0]
        _collect(val, collections, [])
    return val


def merge_all(key=_ops.GraphKeys.SUMMARIES, scope=None, name=None):
    """``merge`` of every summary in collection ``key`` (matching ``scope``), or None when
    there is none."""
    summaries = _ops.get_collection(key, scope=scope)
    if not summaries:
        return None
    return merge(summaries, name=name)


def _check_real(tensor, what: str) -> None:
    dtype = tensor.dtype.base_dtype
    if not (dtype.is_floating or dtype.is_integer):
        raise TypeError(f"tf.summary.{what}: {tensor.name} has dtype {dtype.name}, expected a "
                        f"real number type")


__all__: list[str] = []  # reached as tf.summary.*, not at the top level
