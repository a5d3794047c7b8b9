"""Kernels of the summary ops: each returns a serialized TensorBoard ``Summary`` (bytes).

They run on the host only (``host_only=True``): their output is a string and their work is
protobuf encoding. What they compute matches TF 1.x, so TensorBoard draws the same pictures:

- ``HistogramSummary`` uses TF's fixed bucket edges (0, and +-1e-12 growing by 10% up to 1e20,
  closed by +-DBL_MAX); a value ``v`` counts in the first bucket whose limit exceeds it, and
  runs of empty buckets are written as one empty bucket ending at the run's last limit.
  Sums are accumulated in order in float64, as TF does. NaN and infinity are errors.
- ``ImageSummary`` writes float images scaled per image: by ``255 / max`` when no pixel is
  negative, else by ``127 / max|v|`` around 128; the result is truncated to uint8 and
  non-finite pixels get ``bad_color``. PNG encoding is Pillow's (a dependency of tensorboard).
"""

from __future__ import annotations

import io
import struct
import sys

import numpy as np

from dflab.framework import errors
from dflab.kernels.registry import kernel
from dflab.ops.summary_ops import INSTALL_HINT, datatype_enum, tb_proto

# --- histogram ------------------------------------------------------------------------------

_BUCKET_LIMITS: np.ndarray | None = None


def bucket_limits() -> np.ndarray:
    """TF's default histogram bucket limits (ascending), built once."""
    global _BUCKET_LIMITS
    if _BUCKET_LIMITS is None:
        positive = []
        v = 1.0e-12
        while v < 1.0e20:  # each edge 10% above the last, multiplied in order as TF does
            positive.append(v)
            v *= 1.1
        positive.append(sys.float_info.max)
        negative = [-x for x in reversed(positive)]
        _BUCKET_LIMITS = np.array(negative + [0.0] + positive, dtype=np.float64)
    return _BUCKET_LIMITS


def histogram_proto(values: np.ndarray, histogram_pb2=None):
    """A ``HistogramProto`` of the finite float64 ``values`` in TF's layout."""
    histogram_pb2 = histogram_pb2 or tb_proto("histogram_pb2")
    values = np.asarray(values, np.float64).ravel()
    limits = bucket_limits()
    counts = np.bincount(np.minimum(np.searchsorted(limits, values, side="right"),
                                    len(limits) - 1), minlength=len(limits))
    proto = histogram_pb2.HistogramProto(num=float(values.size))
    if values.size:
        proto.min = float(values.min())
        proto.max = float(values.max())
        # cumsum adds in order, so the sums match TF's running totals to the last bit.
        proto.sum = float(np.cumsum(values)[-1])
        proto.sum_squares = float(np.cumsum(values * values)[-1])
    else:
        proto.min, proto.max = sys.float_info.max, -sys.float_info.max
    for limit, count in _collapse_empty_runs(limits, counts):
        proto.bucket_limit.append(limit)
        proto.bucket.append(count)
    return proto


def _collapse_empty_runs(limits, counts):
    """(limit, count) per non-empty bucket, with each run of empty buckets as one empty
    bucket ending at the run's last limit."""
    nonzero = np.flatnonzero(counts)
    out, start = [], 0
    for i in nonzero.tolist():
        if i > start:
            out.append((float(limits[i - 1]), 0.0))
        out.append((float(limits[i]), float(counts[i])))
        start = i + 1
    if start < len(limits):
        out.append((float(limits[-1]), 0.0))
    return out


def _bytes(value) -> bytes:
    """A scalar string tensor's value (bytes, or a 0-d object array holding them)."""
    if isinstance(value, np.ndarray):
        value = value.item() if value.size == 1 else value
    if isinstance(value, str):
        return value.encode("utf-8")
    if not isinstance(value, bytes):
        raise errors.InvalidArgumentError(None, None, f"expected a scalar string, got {value!r}")
    return value


def _dims(shape) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def _tag(value) -> str:
    return _bytes(value).decode("utf-8", "replace")


@kernel("HistogramSummary", host_only=True)
def _histogram_summary(node, ctx):
    summary_pb2, histogram_pb2 = tb_proto("summary_pb2"), tb_proto("histogram_pb2")

    def summarize(tag, values):
        tag = _tag(tag)
        values = np.asarray(values, np.float64)
        if np.isnan(values).any():
            raise errors.InvalidArgumentError(None, None,
                                              f"Nan in summary histogram for: {tag}")
        if np.isinf(values).any():
            raise errors.InvalidArgumentError(None, None,
                                              f"Infinity in Histogram for: {tag}")
        summary = summary_pb2.Summary()
        summary.value.add(tag=tag, histo=histogram_proto(values, histogram_pb2))
        return summary.SerializeToString()

    return summarize


# --- scalar ---------------------------------------------------------------------------------

@kernel("ScalarSummary", host_only=True)
def _scalar_summary(node, ctx):
    summary_pb2 = tb_proto("summary_pb2")

    def summarize(tags, values):
        tags, values = np.asarray(tags, dtype=object), np.asarray(values)
        if tags.shape != values.shape:
            raise errors.InvalidArgumentError(
                None, None, f"tags and values are not the same shape: {_dims(tags.shape)} != "
                f"{_dims(values.shape)} (tag '{_tag(tags.ravel()[0]) if tags.size else ''}')")
        summary = summary_pb2.Summary()
        for tag, value in zip(tags.ravel().tolist(), values.ravel().tolist()):
            summary.value.add(tag=_tag(tag), simple_value=float(value))
        return summary.SerializeToString()

    return summarize


# --- image ----------------------------------------------------------------------------------

def _png(pixels: np.ndarray) -> bytes:
    """PNG bytes of a [height, width, channels] uint8 array."""
    try:
        from PIL import Image
    except ImportError as e:
        raise ImportError(f"{INSTALL_HINT}: {e}") from e
    mode = {1: "L", 3: "RGB", 4: "RGBA"}[pixels.shape[-1]]
    data = pixels[:, :, 0] if pixels.shape[-1] == 1 else pixels
    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(data), mode=mode).save(buf, format="PNG")
    return buf.getvalue()


def float_image_to_uint8(img: np.ndarray, bad_color: np.ndarray) -> np.ndarray:
    """TF's per-image scaling of a float image into uint8 (see the module docstring)."""
    finite = np.isfinite(img)
    shown = img[finite]
    lo = np.float32(shown.min()) if shown.size else np.float32(np.inf)
    hi = np.float32(shown.max()) if shown.size else np.float32(-np.inf)
    zero = np.float32(1e-6)
    if lo < 0:
        max_val = max(abs(lo), abs(hi))
        scale = np.float32(0.0) if max_val < zero else np.float32(127.0) / max_val
        offset = np.float32(128.0)
    else:
        scale = np.float32(0.0) if hi < zero else np.float32(255.0) / hi
        offset = np.float32(0.0)
    t = img.dtype.type
    with np.errstate(invalid="ignore"):
        out = (img * t(scale) + t(offset)).astype(np.uint8)
    pixel_ok = finite.all(axis=-1)
    out[~pixel_ok] = bad_color[: img.shape[-1]]
    return out


@kernel("ImageSummary", host_only=True)
def _image_summary(node, ctx):
    summary_pb2 = tb_proto("summary_pb2")
    max_images = int(node.attr.get("max_images", 3))
    bad_color = np.asarray(node.attr.get("bad_color", [255, 0, 0, 255]), np.uint8)

    def summarize(tag, images):
        tag = _tag(tag)
        images = np.asarray(images)
        if images.ndim != 4 or images.shape[-1] not in (1, 3, 4):
            raise errors.InvalidArgumentError(
                None, None, f"Tensor must be 4-D with last dim 1, 3, or 4, not "
                f"{_dims(images.shape)} (image summary {tag})")
        summary = summary_pb2.Summary()
        for i in range(min(images.shape[0], max_images)):
            img = images[i]
            if img.dtype != np.uint8:
                img = float_image_to_uint8(img, bad_color)
            name = f"{tag}/image" if max_images == 1 else f"{tag}/image/{i}"
            summary.value.add(tag=name, image=summary_pb2.Summary.Image(
                height=img.shape[0], width=img.shape[1], colorspace=img.shape[2],
                encoded_image_string=_png(img)))
        return summary.SerializeToString()

    return summarize


# --- audio ----------------------------------------------------------------------------------

def wav_s16le(samples: np.ndarray, sample_rate: int) -> bytes:
    """A WAV file of ``[frames, channels]`` float samples as 16-bit PCM, as TF's ``wav_io``
    writes it: each sample times 2^15, rounded half away from zero, clipped to int16."""
    frames, channels = samples.shape
    scaled = np.asarray(samples, np.float32) * np.float32(1 << 15)
    rounded = np.sign(scaled) * np.floor(np.abs(scaled) + np.float32(0.5))
    pcm = np.clip(rounded, -32768, 32767).astype("<i2").tobytes()
    header = b"".join([
        b"RIFF", struct.pack("<I", 36 + len(pcm)), b"WAVE",
        b"fmt ", struct.pack("<IHHIIHH", 16, 1, channels, sample_rate,
                             sample_rate * channels * 2, channels * 2, 16),
        b"data", struct.pack("<I", len(pcm))])
    return header + pcm


@kernel("AudioSummaryV2", host_only=True)
def _audio_summary(node, ctx):
    summary_pb2 = tb_proto("summary_pb2")
    max_outputs = int(node.attr.get("max_outputs", 3))

    def summarize(tag, tensor, sample_rate):
        tag = _tag(tag)
        tensor = np.asarray(tensor, np.float32)
        if tensor.ndim not in (2, 3):
            raise errors.InvalidArgumentError(
                None, None, f"Tensor must be 3-D or 2-D, got: {_dims(tensor.shape)}")
        if np.ndim(sample_rate) != 0:
            raise errors.InvalidArgumentError(None, None, "sample_rate must be rank-0, got "
                                              f"shape {_dims(np.shape(sample_rate))}")
        rate = float(sample_rate)
        if not rate > 0.0:
            raise errors.InvalidArgumentError(None, None, "sample_rate must be > 0")
        clips = tensor if tensor.ndim == 3 else tensor[:, :, None]
        rate_int = max(int(np.rint(np.float32(rate))), 1)
        summary = summary_pb2.Summary()
        for i in range(min(max_outputs, clips.shape[0])):
            name = f"{tag}/audio/{i}" if max_outputs > 1 else f"{tag}/audio"
            summary.value.add(tag=name, audio=summary_pb2.Summary.Audio(
                sample_rate=rate, num_channels=clips.shape[2], length_frames=clips.shape[1],
                encoded_audio_string=wav_s16le(clips[i], rate_int),
                content_type="audio/wav"))
        return summary.SerializeToString()

    return summarize


# --- tensor (text) --------------------------------------------------------------------------

def tensor_proto(value: np.ndarray, dtype):
    """A ``TensorProto`` of ``value``: strings in ``string_val``, numbers as raw bytes."""
    tensor_pb2, shape_pb2 = tb_proto("tensor_pb2"), tb_proto("tensor_shape_pb2")
    value = np.asarray(value)
    proto = tensor_pb2.TensorProto(dtype=datatype_enum(dtype), tensor_shape=shape_pb2.
                                   TensorShapeProto(dim=[shape_pb2.TensorShapeProto.Dim(size=d)
                                                         for d in value.shape]))
    if value.dtype == object or value.dtype.kind in "SU":
        proto.string_val.extend(x if isinstance(x, bytes) else str(x).encode("utf-8")
                                for x in value.ravel().tolist())
    else:
        proto.tensor_content = np.ascontiguousarray(value).astype(
            value.dtype.newbyteorder("<")).tobytes()
    return proto


@kernel("TensorSummaryV2", host_only=True)
def _tensor_summary(node, ctx):
    summary_pb2 = tb_proto("summary_pb2")
    dtype = node.input_types[1]

    def summarize(tag, tensor, serialized_metadata):
        tag = _tag(tag)
        metadata = summary_pb2.SummaryMetadata()
        try:
            metadata.ParseFromString(_bytes(serialized_metadata))
        except Exception as e:  # protobuf's DecodeError: not worth importing its module
            raise errors.InvalidArgumentError(
                None, None, f"Could not parse the summary metadata of {tag}: {e}") from None
        summary = summary_pb2.Summary()
        summary.value.add(tag=tag, tensor=tensor_proto(tensor, dtype), metadata=metadata)
        return summary.SerializeToString()

    return summarize


# --- merge ----------------------------------------------------------------------------------

@kernel("MergeSummary", host_only=True)
def _merge_summary(node, ctx):
    summary_pb2 = tb_proto("summary_pb2")

    def merge(*inputs):
        merged, tags = summary_pb2.Summary(), set()
        for serialized in _serialized_summaries(inputs):
            part = summary_pb2.Summary()
            try:
                part.ParseFromString(serialized)
            except Exception:  # protobuf's DecodeError
                raise errors.InvalidArgumentError(
                    None, None, "Could not parse one of the summary inputs") from None
            for value in part.value:
                if value.tag and value.tag in tags:
                    raise errors.InvalidArgumentError(
                        None, None, f"Duplicate tag {value.tag} found in summary inputs")
                tags.add(value.tag)
                merged.value.append(value)
        return merged.SerializeToString()

    return merge


def _serialized_summaries(inputs):
    for x in inputs:
        if isinstance(x, bytes):
            yield x
            continue
        for item in np.asarray(x, dtype=object).ravel().tolist():
            if not isinstance(item, bytes):
                raise errors.InvalidArgumentError(
                    None, None, f"MergeSummary inputs must be serialized summaries (strings), "
                    f"got {type(item).__name__}")
            yield item
