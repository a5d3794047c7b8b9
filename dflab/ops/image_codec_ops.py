"""``tf.image`` (and ``tf.io``) codecs: PNG, JPEG, BMP, GIF and WebP decoding, PNG and JPEG
encoding, JPEG shape and cropped decoding, and the JPEG-quality augmentations.

The codec ops run on the host through Pillow (``dflab.kernels.image_codec_kernels``), as TF
registers them for CPUs only; Pillow is the ``image`` extra. ``decode_image`` picks the
format from the first bytes, like TF's ``DecodeImage``. Decoding a JPEG uses libjpeg's
accurate integer DCT whatever ``dct_method`` says (TF's default is the fast one, so TF's
default decode can differ from dflab's by a few levels; ``dct_method="INTEGER_ACCURATE"``
agrees exactly). Encoding a JPEG gives TF's bytes (libjpeg with TF's settings).
"""

from __future__ import annotations

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.registry import NotDifferentiable, register_op
from dflab.framework.tensor_shape import TensorShape
from dflab.ops import math_ops as _m
from dflab.ops import random_ops


def _contents(op):
    t = op.inputs[0]
    if t.dtype.base_dtype is not _dt.string:
        raise TypeError(f"{op.type}: contents must be a string, got {t.dtype.name}")
    t.shape.with_rank(0)


def _decode_infer(op, rank=3, channels=None):
    _contents(op)
    ch = op.get_attr("channels") if channels is None else channels
    dtype = op.get_attr("dtype") if "dtype" in op.attrs else _dt.uint8
    return [(dtype, TensorShape([None] * (rank - 1) + [ch or None]))]


register_op("DecodePng", _decode_infer)
register_op("DecodeJpeg", _decode_infer)
register_op("DecodeBmp", _decode_infer)
register_op("DecodeWebP", lambda op: _decode_infer(op, rank=4))
register_op("DecodeGif", lambda op: _decode_infer(op, rank=4, channels=3))


def _decode_image_infer(op):
    _contents(op)
    ch = op.get_attr("channels") or None
    dtype = op.get_attr("dtype")
    if op.get_attr("expand_animations"):
        return [(dtype, TensorShape(None))]
    return [(dtype, TensorShape([None, None, ch]))]


register_op("DecodeImage", _decode_image_infer)


def _decode_and_crop_infer(op):
    _contents(op)
    op.inputs[1].shape.with_rank(1)
    return [(_dt.uint8, TensorShape([None, None, op.get_attr("channels") or None]))]


register_op("DecodeAndCropJpeg", _decode_and_crop_infer)


def _encode_infer(op):
    image = op.inputs[0]
    image.shape.with_rank(3)
    return [(_dt.string, TensorShape([]))]


register_op("EncodePng", _encode_infer)
register_op("EncodeJpeg", _encode_infer)
register_op("EncodeJpegVariableQuality", _encode_infer)


def _jpeg_shape_infer(op):
    _contents(op)
    return [(op.get_attr("output_type"), TensorShape([3]))]


register_op("ExtractJpegShape", _jpeg_shape_infer)
CODEC_OPS = ("DecodePng", "DecodeJpeg", "DecodeBmp", "DecodeWebP", "DecodeGif", "DecodeImage",
             "DecodeAndCropJpeg", "EncodePng", "EncodeJpeg", "EncodeJpegVariableQuality",
             "ExtractJpegShape")
for _t in CODEC_OPS:
    NotDifferentiable(_t)


def _string(contents):
    return _ops.convert_to_tensor(contents, dtype=_dt.string, name="contents")


def _check_channels(channels, allowed):
    if channels not in allowed:
        raise ValueError(f"channels must be in {sorted(allowed)}, got {channels}")


def decode_png(contents, channels=0, dtype=_dt.uint8, name=None):
    """A PNG as a ``[height, width, channels]`` uint8 or uint16 tensor (``channels`` 0: as
    stored; 1 grey, 2 grey+alpha, 3 RGB, 4 RGBA)."""
    _check_channels(channels, {0, 1, 2, 3, 4})
    dtype = _dt.as_dtype(dtype).base_dtype
    return _ops.apply_op("DecodePng", [_string(contents)],
                         {"channels": int(channels), "dtype": dtype}, name).outputs[0]


def decode_jpeg(contents, channels=0, ratio=1, fancy_upscaling=True,
                try_recover_truncated=False, acceptable_fraction=1, dct_method="",
                name=None):
    """A JPEG as ``[height, width, channels]`` uint8 (``ratio`` 1, 2, 4 or 8 scales down)."""
    _check_channels(channels, {0, 1, 3})
    if ratio not in (1, 2, 4, 8):
        raise ValueError(f"ratio must be 1, 2, 4 or 8, got {ratio}")
    attrs = {"channels": int(channels), "ratio": int(ratio),
             "fancy_upscaling": bool(fancy_upscaling),
             "try_recover_truncated": bool(try_recover_truncated),
             "acceptable_fraction": float(acceptable_fraction), "dct_method": dct_method}
    return _ops.apply_op("DecodeJpeg", [_string(contents)], attrs, name).outputs[0]


def decode_and_crop_jpeg(contents, crop_window, channels=0, ratio=1, fancy_upscaling=True,
                         try_recover_truncated=False, acceptable_fraction=1, dct_method="",
                         name=None):
    """``decode_jpeg`` of the window ``[y, x, height, width]`` only."""
    _check_channels(channels, {0, 1, 3})
    attrs = {"channels": int(channels), "ratio": int(ratio),
             "fancy_upscaling": bool(fancy_upscaling),
             "try_recover_truncated": bool(try_recover_truncated),
             "acceptable_fraction": float(acceptable_fraction), "dct_method": dct_method}
    window = _ops.convert_to_tensor(crop_window, dtype=_dt.int32, name="crop_window")
    return _ops.apply_op("DecodeAndCropJpeg", [_string(contents), window], attrs,
                         name).outputs[0]


def decode_bmp(contents, channels=0, name=None):
    _check_channels(channels, {0, 1, 3, 4})
    return _ops.apply_op("DecodeBmp", [_string(contents)], {"channels": int(channels)},
                         name).outputs[0]


def decode_gif(contents, name=None):
    """Every frame of a GIF: ``[frames, height, width, 3]`` uint8."""
    return _ops.apply_op("DecodeGif", [_string(contents)], None, name).outputs[0]


def decode_webp(contents, channels=0, dtype=_dt.uint8, name=None):
    """Every frame of a WebP: ``[frames, height, width, channels]``."""
    _check_channels(channels, {0, 3, 4})
    return _ops.apply_op("DecodeWebP", [_string(contents)],
                         {"channels": int(channels), "dtype": _dt.as_dtype(dtype).base_dtype},
                         name).outputs[0]


def decode_image(contents, channels=None, dtype=_dt.uint8, name=None, expand_animations=True):
    """Any of BMP, GIF, JPEG, PNG and WebP, by its first bytes; an animated GIF is 4-D
    unless ``expand_animations`` is False (then its first frame). ``dtype`` float32 scales
    to [0, 1)."""
    dtype = _dt.as_dtype(dtype).base_dtype
    if dtype not in (_dt.uint8, _dt.uint16, _dt.float32):
        raise ValueError(f"dtype must be uint8, uint16 or float32, got {dtype.name}")
    with _ops.name_scope(name, "decode_image"):
        op = _ops.apply_op("DecodeImage", [_string(contents)],
                           {"channels": int(channels or 0), "dtype": dtype,
                            "expand_animations": bool(expand_animations)}, "DecodeImage")
        return op.outputs[0]


def encode_png(image, compression=-1, name=None):
    """A uint8 or uint16 ``[height, width, channels]`` image as PNG bytes."""
    image = _ops.convert_to_tensor(image, name="image")
    if image.dtype.base_dtype not in (_dt.uint8, _dt.uint16):
        raise TypeError(f"encode_png takes uint8 or uint16 images, got {image.dtype.name}")
    return _ops.apply_op("EncodePng", [image], {"compression": int(compression)},
                         name).outputs[0]


def encode_jpeg(image, format="", quality=95, progressive=False,  # noqa: A002 - TF's name
                optimize_size=False, chroma_downsampling=True, density_unit="in",
                x_density=300, y_density=300, xmp_metadata="", name=None):
    """A uint8 ``[height, width, 1 or 3]`` image as JPEG bytes, with TF's defaults."""
    image = _ops.convert_to_tensor(image, name="image")
    if image.dtype.base_dtype is not _dt.uint8:
        raise TypeError(f"encode_jpeg takes uint8 images, got {image.dtype.name}")
    if format not in ("", "grayscale", "rgb"):
        raise ValueError(f"format must be '', 'grayscale' or 'rgb', got {format!r}")
    if not 0 <= quality <= 100:
        raise ValueError(f"quality must be in [0, 100], got {quality}")
    if density_unit not in ("in", "cm"):
        raise ValueError(f"density_unit must be 'in' or 'cm', got {density_unit!r}")
    attrs = {"format": format, "quality": int(quality), "progressive": bool(progressive),
             "optimize_size": bool(optimize_size),
             "chroma_downsampling": bool(chroma_downsampling), "density_unit": density_unit,
             "x_density": int(x_density), "y_density": int(y_density),
             "xmp_metadata": xmp_metadata}
    return _ops.apply_op("EncodeJpeg", [image], attrs, name).outputs[0]


def extract_jpeg_shape(contents, output_type=_dt.int32, name=None):
    """``[height, width, channels]`` of a JPEG, read from its header only."""
    return _ops.apply_op("ExtractJpegShape", [_string(contents)],
                         {"output_type": _dt.as_dtype(output_type).base_dtype},
                         name).outputs[0]


def is_jpeg(contents, name=None):
    """Whether ``contents`` starts like a JPEG (``FF D8 FF``)."""
    from dflab.ops.string_ops import substr

    with _ops.name_scope(name, "is_jpeg"):
        return _m.equal(substr(_string(contents), 0, 3), b"\xff\xd8\xff", name=name)


def adjust_jpeg_quality(image, jpeg_quality, dct_method="", name=None):
    """The image after a JPEG round trip at ``jpeg_quality`` (0-100), in its dtype."""
    from dflab.ops.image_color_ops import convert_image_dtype

    with _ops.name_scope(name, "adjust_jpeg_quality", [image]):
        image = _ops.convert_to_tensor(image, name="image")
        channels = image.shape.as_list()[-1]
        orig = image.dtype.base_dtype
        u8 = convert_image_dtype(image, _dt.uint8, saturate=True)
        quality = _ops.convert_to_tensor(jpeg_quality, dtype=_dt.int32)
        encoded = _ops.apply_op("EncodeJpegVariableQuality", [u8, quality]).outputs[0]
        decoded = decode_jpeg(encoded, channels=channels or 0, dct_method=dct_method)
        return convert_image_dtype(decoded, orig, saturate=True)


def random_jpeg_quality(image, min_jpeg_quality, max_jpeg_quality, seed=None):
    """``adjust_jpeg_quality`` with a quality drawn uniformly from [min, max)."""
    if min_jpeg_quality < 0 or max_jpeg_quality < 0 or min_jpeg_quality > 100 or \
            max_jpeg_quality > 100:
        raise ValueError("jpeg encoding range must be between 0 and 100.")
    if min_jpeg_quality >= max_jpeg_quality:
        raise ValueError("`min_jpeg_quality` must be less than `max_jpeg_quality`.")
    quality = random_ops.random_uniform([], min_jpeg_quality, max_jpeg_quality, seed=seed,
                                        dtype=_dt.int32)
    return adjust_jpeg_quality(image, quality)


__all__: list[str] = []  # reached as tf.image.* and tf.io.* (see dflab.namespaces)
