"""Kernels of the image codecs (``dflab.ops.image_codec_ops``), through Pillow, host only.

Pillow is imported when a codec first runs; without it the op fails naming the ``image``
extra. Bytes Pillow cannot read are TF's ``InvalidArgumentError``.
"""

from __future__ import annotations

import io

import numpy as np

from dflab.framework import errors
from dflab.kernels.context import host
from dflab.kernels.registry import kernel

INSTALL_HINT = "the image codecs need Pillow: pip install 'dflab[image]'"


def _pil():
    try:
        from PIL import Image
    except ImportError as e:  # pragma: no cover - Pillow is a dev dependency
        raise ImportError(f"{INSTALL_HINT}: {e}") from e
    return Image


def _bytes(contents) -> bytes:
    v = host(contents, object).reshape(-1)
    if v.size != 1:
        raise ValueError("contents must be a scalar string")
    v = v[0]
    return v if isinstance(v, bytes) else str(v).encode()


def _open(node, data: bytes, what: str):
    Image = _pil()
    try:
        im = Image.open(io.BytesIO(data))
        im.load()
    except Exception as e:  # noqa: BLE001 - any decoder failure is bad input data
        raise errors.InvalidArgumentError(None, node, f"Invalid {what} data or size.: {e}") \
            from None
    return im


_MODES = {1: "L", 2: "LA", 3: "RGB", 4: "RGBA"}


def _as_channels(im, channels: int) -> np.ndarray:
    """The image's pixels with ``channels`` channels (0: as stored), ``[h, w, c]``."""
    if channels == 0:
        if im.mode in ("L", "LA", "RGB", "RGBA"):
            arr = np.asarray(im)
        elif im.mode in ("I;16", "I;16B", "I;16L", "I"):
            arr = np.asarray(im)
        elif im.mode == "P":
            arr = np.asarray(im.convert("RGBA" if "transparency" in im.info else "RGB"))
        elif im.mode == "1":
            arr = np.asarray(im.convert("L"))
        elif im.mode == "CMYK":
            arr = np.asarray(im)
        else:
            arr = np.asarray(im.convert("RGB"))
    else:
        arr = np.asarray(im.convert(_MODES[channels]))
    if arr.ndim == 2:
        arr = arr[:, :, None]
    return arr


def _png_gray(im) -> np.ndarray:
    """Grey (and alpha) from a colour PNG as libpng computes it for TF: ITU-R 601 weights
    in 1/32768ths, rounded down."""
    rgba = np.asarray(im.convert("RGBA")).astype(np.int64)
    gray = (9798 * rgba[..., 0] + 19235 * rgba[..., 1] + 3735 * rgba[..., 2]) >> 15
    return gray.astype(np.uint8), rgba[..., 3].astype(np.uint8)


def _png_pixels(node, data: bytes, channels: int, dtype) -> np.ndarray:
    im = _open(node, data, "PNG")
    if channels in (1, 2) and im.mode in ("RGB", "RGBA", "P"):
        gray, alpha = _png_gray(im)
        arr = gray[:, :, None] if channels == 1 else np.stack([gray, alpha], axis=2)
        return arr.astype(np.uint16) * 257 if dtype == np.uint16 else arr
    sixteen = im.mode.startswith("I")
    if sixteen:
        arr = np.asarray(im).astype(np.uint16)[:, :, None]
        if channels in (3, 4):
            arr = np.repeat(arr, 3, axis=2)
            if channels == 4:
                arr = np.concatenate([arr, np.full(arr.shape[:2] + (1,), 65535, np.uint16)],
                                     axis=2)
        if dtype == np.uint8:
            arr = (arr >> 8).astype(np.uint8)
        return arr
    arr = _as_channels(im, channels)
    if dtype == np.uint16:
        return arr.astype(np.uint16) * 257
    return arr.astype(np.uint8)


@kernel("DecodePng", host_only=True)
def _decode_png(node, ctx):
    channels, dtype = node.attr["channels"], node.attr["dtype"]._np
    return lambda contents: _png_pixels(node, _bytes(contents), channels, dtype)


def _jpeg_pixels(node, data: bytes, channels: int, ratio: int, window=None):
    im = _open(node, data, "JPEG") if ratio == 1 else None
    if im is None:
        Image = _pil()
        try:
            im = Image.open(io.BytesIO(data))
            im.draft(im.mode, (im.size[0] // ratio, im.size[1] // ratio))
            im.load()
        except Exception as e:  # noqa: BLE001
            raise errors.InvalidArgumentError(None, node, f"Invalid JPEG data or size.: {e}") \
                from None
    if channels == 1 and im.mode != "L":
        im = im.convert("L")
    arr = _as_channels(im, channels)
    if window is not None:
        y, x, h, w = (int(v) for v in window)
        if y < 0 or x < 0 or h <= 0 or w <= 0 or y + h > arr.shape[0] or x + w > arr.shape[1]:
            raise errors.InvalidArgumentError(
                None, node, f"Invalid JPEG data or crop window, data size {len(data)}")
        arr = arr[y:y + h, x:x + w]
    return np.ascontiguousarray(arr.astype(np.uint8))


@kernel("DecodeJpeg", host_only=True)
def _decode_jpeg(node, ctx):
    channels, ratio = node.attr["channels"], node.attr["ratio"]
    return lambda contents: _jpeg_pixels(node, _bytes(contents), channels, ratio)


@kernel("DecodeAndCropJpeg", host_only=True)
def _decode_and_crop_jpeg(node, ctx):
    channels, ratio = node.attr["channels"], node.attr["ratio"]
    return lambda contents, window: _jpeg_pixels(node, _bytes(contents), channels, ratio,
                                                 np.ravel(host(window)))


@kernel("DecodeBmp", host_only=True)
def _decode_bmp(node, ctx):
    channels = node.attr["channels"]
    return lambda contents: _as_channels(_open(node, _bytes(contents), "BMP"),
                                         channels).astype(np.uint8)


@kernel("DecodeWebP", host_only=True)
def _decode_webp(node, ctx):
    channels, dtype = node.attr["channels"], node.attr["dtype"]._np

    def decode(contents):
        return _webp_frames(node, _bytes(contents), channels, dtype)

    return decode


def _webp_frames(node, data: bytes, channels: int, dtype) -> np.ndarray:
    """Every frame of a WebP, ``[frames, height, width, channels]`` (TF's DecodeWebP)."""
    im = _open(node, data, "WebP")
    frames = []
    for i in range(getattr(im, "n_frames", 1)):
        im.seek(i)
        frames.append(_as_channels(im, channels or (4 if im.mode == "RGBA" else 3)))
    arr = np.stack(frames)
    return arr.astype(dtype) * (257 if dtype == np.uint16 else 1)


def _gif_frames(node, data: bytes) -> np.ndarray:
    im = _open(node, data, "GIF")
    frames = []
    for i in range(getattr(im, "n_frames", 1)):
        im.seek(i)
        frames.append(np.asarray(im.convert("RGB")))
    return np.stack(frames).astype(np.uint8)


@kernel("DecodeGif", host_only=True)
def _decode_gif(node, ctx):
    return lambda contents: _gif_frames(node, _bytes(contents))


def _format(data: bytes) -> str:
    if data[:3] == b"\xff\xd8\xff":
        return "jpeg"
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return "png"
    if data[:3] == b"GIF":
        return "gif"
    if data[:2] == b"BM":
        return "bmp"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "webp"
    return ""


@kernel("DecodeImage", host_only=True)
def _decode_image(node, ctx):
    channels, expand = node.attr["channels"], node.attr["expand_animations"]
    dtype = node.attr["dtype"]._np

    def decode(contents):
        data = _bytes(contents)
        kind = _format(data)
        if kind == "png":
            return _scaled(_png_pixels(node, data, channels,
                                       np.uint16 if dtype == np.uint16 else np.uint8), dtype)
        if kind == "jpeg":
            arr = _jpeg_pixels(node, data, channels, 1)
        elif kind == "gif":
            arr = _gif_frames(node, data)
            if not expand:
                arr = arr[0]
            if channels == 1:
                raise errors.InvalidArgumentError(
                    None, node, "channels must be 0 or 3 for GIF, got 1")
        elif kind == "webp":
            arr = _webp_frames(node, data, channels, np.uint8)
            if not expand:
                arr = arr[0]
        elif kind == "bmp":
            arr = _as_channels(_open(node, data, "BMP"), channels).astype(np.uint8)
        else:
            raise errors.InvalidArgumentError(
                None, node, "Unknown image file format. One of JPEG, PNG, GIF, BMP required.")
        return _scaled(arr, dtype)

    return decode


def _scaled(arr: np.ndarray, dtype) -> np.ndarray:
    """uint8/uint16 pixels in ``dtype``: uint16 from uint8 by 257, float32 in [0, 1]."""
    if dtype == np.float32:
        return arr.astype(np.float32) / np.float32(np.iinfo(arr.dtype).max)
    if dtype == np.uint16 and arr.dtype == np.uint8:
        return arr.astype(np.uint16) * 257
    return arr.astype(dtype)


@kernel("EncodePng", host_only=True)
def _encode_png(node, ctx):
    level = node.attr["compression"]

    def encode(image):
        arr = host(image)
        if arr.ndim != 3 or arr.shape[2] not in (1, 2, 3, 4):
            raise errors.InvalidArgumentError(
                None, node, f"image must be 3-dimensional with 1-4 channels, got "
                f"{list(arr.shape)}")
        Image = _pil()
        if arr.dtype == np.uint16:
            if arr.shape[2] != 1:
                raise errors.UnimplementedError(
                    None, node, "16-bit PNGs of more than one channel are not supported")
            im = Image.fromarray(np.ascontiguousarray(arr[:, :, 0]))  # mode I;16
        else:
            data = arr[:, :, 0] if arr.shape[2] == 1 else arr
            im = Image.fromarray(np.ascontiguousarray(data), mode=_MODES[arr.shape[2]])
        buf = io.BytesIO()
        im.save(buf, format="PNG", compress_level=6 if level < 0 else level)
        return np.array(buf.getvalue(), dtype=object)

    return encode


def _jpeg_bytes(node, arr: np.ndarray, quality: int) -> bytes:
    if arr.ndim != 3 or arr.shape[2] not in (1, 3):
        raise errors.InvalidArgumentError(
            None, node, f"image must be 3-dimensional with 1 or 3 channels, got "
            f"{list(arr.shape)}")
    attr = node.attr
    fmt = attr.get("format", "")
    if fmt == "grayscale" and arr.shape[2] != 1 or fmt == "rgb" and arr.shape[2] != 3:
        raise errors.InvalidArgumentError(None, node, f"format {fmt} does not match "
                                          f"{arr.shape[2]} channels")
    Image = _pil()
    im = Image.fromarray(np.ascontiguousarray(arr[:, :, 0] if arr.shape[2] == 1 else arr))
    scale = 2.54 if attr.get("density_unit", "in") == "cm" else 1.0
    options = {"quality": int(quality), "dpi": (attr.get("x_density", 300) * scale,
                                                attr.get("y_density", 300) * scale),
               # Chroma subsampling concerns colour images only (it changes a grey JPEG's
               # tables in Pillow, not in TF's libjpeg settings).
               **({"subsampling": 2 if attr.get("chroma_downsampling", True) else 0}
                  if arr.shape[2] == 3 else {}),
               "progressive": bool(attr.get("progressive", False)),
               "optimize": bool(attr.get("optimize_size", False))}
    if attr.get("xmp_metadata"):
        options["xmp"] = attr["xmp_metadata"].encode()
    buf = io.BytesIO()
    im.save(buf, format="JPEG", **options)
    return buf.getvalue()


@kernel("EncodeJpeg", host_only=True)
def _encode_jpeg(node, ctx):
    quality = node.attr["quality"]
    return lambda image: np.array(_jpeg_bytes(node, host(image), quality), dtype=object)


@kernel("EncodeJpegVariableQuality", host_only=True)
def _encode_jpeg_variable(node, ctx):
    def encode(image, quality):
        q = int(host(quality))
        if not 0 <= q <= 100:
            raise errors.InvalidArgumentError(None, node, f"quality must be in [0,100], got {q}")
        return np.array(_jpeg_bytes(node, host(image), q), dtype=object)

    return encode


@kernel("ExtractJpegShape", host_only=True)
def _extract_jpeg_shape(node, ctx):
    dtype = node.attr["output_type"]._np
    Image = None

    def shape(contents):
        nonlocal Image
        Image = Image or _pil()
        data = _bytes(contents)
        try:
            im = Image.open(io.BytesIO(data))
            if im.format != "JPEG":
                raise ValueError(f"not a JPEG but {im.format}")
        except Exception as e:  # noqa: BLE001
            raise errors.InvalidArgumentError(None, node, f"Invalid JPEG data or size.: {e}") \
                from None
        channels = {"L": 1, "RGB": 3, "CMYK": 4}.get(im.mode, 3)
        return np.array([im.size[1], im.size[0], channels], dtype=dtype)

    return shape
