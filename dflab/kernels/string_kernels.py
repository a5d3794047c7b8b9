"""Kernels of ``dflab.ops.string_ops``: NumPy object arrays of ``bytes``, on the host only
(TF registers its string kernels for CPUs only)."""

from __future__ import annotations

import base64
import binascii
import gzip
import re
import zlib

import numpy as np

from dflab.framework import errors
from dflab.kernels.context import host
from dflab.kernels.registry import kernel


def _b(v) -> bytes:
    return v if isinstance(v, bytes) else str(v).encode()


def _objects(x) -> np.ndarray:
    return np.asarray(x, dtype=object)


def _map(fn, x, out_dtype=object):
    a = _objects(x)
    out = np.empty(a.shape, dtype=out_dtype)
    for idx in np.ndindex(a.shape):
        out[idx] = fn(_b(a[idx]))
    return out


def _length_fn(node):
    utf8 = node.attr["unit"] == "UTF8_CHAR"
    return lambda x: _map(lambda s: len(s.decode("utf-8", "replace")) if utf8 else len(s), x,
                          np.int32)


@kernel("StringLength", host_only=True)
def _length(node, ctx):
    return _length_fn(node)


def _ascii_case(s: bytes, upper: bool) -> bytes:
    return s.upper() if upper else s.lower()


def _case_kernel(upper: bool):
    def factory(node, ctx):
        unicode = node.attr.get("encoding", "") != ""

        def convert(s: bytes) -> bytes:
            if unicode:
                text = s.decode("utf-8", "replace")
                return (text.upper() if upper else text.lower()).encode("utf-8")
            return _ascii_case(s, upper)

        return lambda x: _map(convert, x)

    return factory


kernel("StringLower", host_only=True)(_case_kernel(False))
kernel("StringUpper", host_only=True)(_case_kernel(True))


@kernel("StringStrip", host_only=True)
def _strip(node, ctx):
    return lambda x: _map(lambda s: s.strip(b" \t\n\v\f\r"), x)


def _utf8_slice(s: bytes, pos: int, length: int) -> bytes:
    return s.decode("utf-8", "replace")[pos:pos + length].encode("utf-8")


@kernel("Substr", host_only=True)
def _substr(node, ctx):
    utf8 = node.attr["unit"] == "UTF8_CHAR"

    def substr(x, pos, length):
        a, p, n = np.broadcast_arrays(_objects(x), host(pos), host(length))
        out = np.empty(a.shape, dtype=object)
        for idx in np.ndindex(a.shape):
            s = _b(a[idx])
            size = len(s.decode("utf-8", "replace")) if utf8 else len(s)
            start = int(p[idx])
            if start < 0:
                start += size
            if not 0 <= start <= size:
                raise errors.InvalidArgumentError(
                    None, node, f"pos {int(p[idx])} out of range for string b'{s.decode()}' "
                    f"at index {idx[0] if idx else 0}")
            count = max(int(n[idx]), 0)
            out[idx] = _utf8_slice(s, start, count) if utf8 else s[start:start + count]
        return out

    return substr


@kernel("ReduceJoin", host_only=True, host_memory_inputs=(1,))
def _reduce_join(node, ctx):
    sep, keep = _b(node.attr["separator"]), node.attr["keep_dims"]

    def reduce_join(x, axes):
        a = _objects(x)
        rank = a.ndim
        order = []
        for ax in np.ravel(host(axes)).astype(int).tolist():
            if not -rank <= ax < max(rank, 1):
                raise errors.InvalidArgumentError(
                    None, node, f"Invalid reduction dimension {ax} for input with {rank} "
                    "dimensions.")
            ax %= max(rank, 1)
            if ax in order:
                raise errors.InvalidArgumentError(None, node,
                                                  f"Duplicate reduction dimension {ax}")
            order.append(ax)
        kept = [d for d in range(rank) if d not in order]
        # The first listed axis varies fastest within each joined group.
        moved = np.transpose(a, kept + order[::-1]) if rank else a
        groups = moved.reshape([a.shape[d] for d in kept] + [-1])
        out = np.empty(groups.shape[:-1], dtype=object)
        for idx in np.ndindex(out.shape):
            out[idx] = sep.join(_b(v) for v in groups[idx])
        if keep:
            out = out.reshape([1 if d in order else a.shape[d] for d in range(rank)])
        return out

    return reduce_join


def _regex(node, pattern) -> re.Pattern:
    try:
        return re.compile(_b(host(pattern, object).reshape(-1)[0]))
    except re.error as e:
        raise errors.InvalidArgumentError(None, node, f"Invalid pattern: {e}") from None


@kernel("RegexFullMatch", host_only=True)
def _regex_full_match(node, ctx):
    return lambda x, pattern: _map(_full_matcher(_regex(node, pattern)), x, np.bool_)


def _full_matcher(rx):
    return lambda s: rx.fullmatch(s) is not None


@kernel("RegexReplace", host_only=True)
def _regex_replace(node, ctx):
    count = 0 if node.attr["replace_global"] else 1

    def replace(x, pattern, rewrite):
        rx = _regex(node, pattern)
        rw = _b(host(rewrite, object).reshape(-1)[0])
        return _map(lambda s: rx.sub(rw, s, count=count), x)

    return replace


@kernel("AsString", host_only=True)
def _as_string(node, ctx):
    a = node.attr
    kind = node.input_types[0]
    spec = "%" + (a["fill"] or "")
    if a["width"] > -1:
        spec += str(a["width"])
    if a["precision"] > -1:
        spec += "." + str(a["precision"])
    if kind.is_floating:
        spec += "g" if a["shortest"] else "e" if a["scientific"] else "f"
    elif kind.is_complex:
        part = spec + ("g" if a["shortest"] else "e" if a["scientific"] else "f")
        spec = None

        def fmt_complex(v):
            return f"({part % v.real},{part % v.imag})".encode()
    else:
        spec += "d"

    def fmt(v):
        if kind.is_bool:
            return b"true" if v else b"false"
        if spec is None:
            return fmt_complex(v)
        return (spec % (float(v) if kind.is_floating else int(v))).encode()

    def as_string(x):
        arr = np.asarray(host(x))
        out = np.empty(arr.shape, dtype=object)
        for idx in np.ndindex(arr.shape):
            out[idx] = fmt(arr[idx])
        return out

    return as_string


_NUMBER = re.compile(rb"\s*[-+]?(inf(inity)?|nan|(\d+\.?\d*|\.\d+)(e[-+]?\d+)?)\s*", re.I)


@kernel("StringToNumber", host_only=True)
def _to_number(node, ctx):
    dtype = np.dtype(node.attr["out_type"]._np).type

    def parse(s: bytes):
        try:
            if np.issubdtype(dtype, np.integer):
                text = s.strip()
                if not re.fullmatch(rb"[-+]?\d+", text):
                    raise ValueError
                value = int(text)
                info = np.iinfo(dtype)
                if not info.min <= value <= info.max:
                    raise ValueError
                return dtype(value)
            if not _NUMBER.fullmatch(s):
                raise ValueError
            return dtype(float(s))
        except ValueError:
            raise errors.InvalidArgumentError(
                None, node, f"StringToNumberOp could not correctly convert string: "
                f"{s.decode(errors='replace')}") from None

    return lambda x: _map(parse, x, dtype)


@kernel("EncodeBase64", host_only=True)
def _encode_base64(node, ctx):
    pad = node.attr["pad"]

    def encode(s: bytes) -> bytes:
        out = base64.urlsafe_b64encode(s)
        return out if pad else out.rstrip(b"=")

    return lambda x: _map(encode, x)


@kernel("DecodeBase64", host_only=True)
def _decode_base64(node, ctx):
    def decode(s: bytes) -> bytes:
        try:
            return base64.urlsafe_b64decode(s + b"=" * (-len(s) % 4))
        except (binascii.Error, ValueError):
            raise errors.InvalidArgumentError(None, node, "Invalid character found in base64.") \
                from None

    return lambda x: _map(decode, x)


@kernel("DecodeCompressed", host_only=True)
def _decode_compressed(node, ctx):
    kind = node.attr["compression_type"]

    def decode(s: bytes) -> bytes:
        try:
            if kind == "ZLIB":
                return zlib.decompress(s)
            if kind == "GZIP":
                return gzip.decompress(s)
            return s
        except (OSError, zlib.error, EOFError) as e:
            raise errors.DataLossError(None, node, f"{kind} data is corrupt: {e}") from None

    return lambda x: _map(decode, x)


_CODECS = {"UTF-8": "utf-8", "UTF-16-BE": "utf-16-be", "UTF-32-BE": "utf-32-be",
           "UTF-16-LE": "utf-16-le", "UTF-32-LE": "utf-32-le", "ISO-8859-1": "latin-1",
           "US-ASCII": "ascii", "UTF-16": "utf-16", "UTF-32": "utf-32"}


@kernel("UnicodeTranscode", host_only=True)
def _unicode_transcode(node, ctx):
    a = node.attr
    src = _CODECS.get(a["input_encoding"].upper(), a["input_encoding"])
    dst = _CODECS.get(a["output_encoding"].upper(), a["output_encoding"])
    mode, replacement = a["errors"], chr(a["replacement_char"])
    controls = a["replace_control_characters"]

    def transcode(s: bytes) -> bytes:
        try:
            text = s.decode(src, "strict" if mode == "strict" else
                            "ignore" if mode == "ignore" else "replace")
        except UnicodeDecodeError as e:
            raise errors.InvalidArgumentError(
                None, node, f"Invalid formatting on input string: {e}") from None
        if mode == "replace" and replacement != "\ufffd":
            text = text.replace("\ufffd", replacement)
        if controls:
            text = "".join(replacement if ord(c) < 32 else c for c in text)
        return text.encode(dst)

    return lambda x: _map(transcode, x)


@kernel("UnsortedSegmentJoin", host_only=True)
def _unsorted_segment_join(node, ctx):
    sep = _b(node.attr["separator"])

    def segment_join(x, ids, num_segments):
        a, seg = _objects(x), host(ids).astype(np.int64)
        n = int(host(num_segments))
        if seg.shape != a.shape[:seg.ndim]:
            raise errors.InvalidArgumentError(
                None, node, f"segment_ids.shape {list(seg.shape)} is not a prefix of "
                f"inputs.shape {list(a.shape)}")
        rest = a.shape[seg.ndim:]
        parts = [[[] for _ in range(int(np.prod(rest, dtype=np.int64)))] for _ in range(n)]
        flat = a.reshape(seg.size, -1)
        for i, s in enumerate(seg.reshape(-1)):
            if not 0 <= s < n:
                raise errors.InvalidArgumentError(
                    None, node, "segment_ids are not allowed to exceed num_segments or to "
                    "have negative values.")
            for j, v in enumerate(flat[i]):
                parts[s][j].append(_b(v))
        out = np.empty((n, len(parts[0]) if n else 0), dtype=object)
        for s in range(n):
            for j, vals in enumerate(parts[s]):
                out[s, j] = sep.join(vals)
        return out.reshape((n,) + rest)

    return segment_join


# --- StringFormat: tensors written as TF's SummarizeValue writes them for tf.print ----------
def _c_escape(s: bytes) -> bytes:
    """Abseil's ``Utf8SafeCEscape``: C escapes, octal for other control bytes, bytes of
    0x80 and above as they are."""
    named = {0x0A: b"\\n", 0x0D: b"\\r", 0x09: b"\\t", 0x22: b'\\"', 0x27: b"\\'",
             0x5C: b"\\\\"}
    out = bytearray()
    for c in s:
        if c in named:
            out += named[c]
        elif c < 0x20 or c == 0x7F:
            out += b"\\%03o" % c
        else:
            out.append(c)
    return bytes(out)


def _float_text(x, digits: int, more: int, ftype) -> str:
    """TF's ``FloatToBuffer``/``DoubleToBuffer``: ``%.{digits}g``, or more digits when that
    does not read back as the same value. TF runs kernels with denormals flushed to zero."""
    x = ftype(x)
    if x != 0 and np.isfinite(x) and abs(x) < np.finfo(ftype).tiny:
        x = ftype(0.0) * np.sign(x)
    text = f"{float(x):.{digits}g}"
    if np.isfinite(x) and ftype(float(text)) != x:
        text = f"{float(x):.{more}g}"
    return text


def _element_text(x, dtype) -> bytes:
    if dtype.kind == "O":
        return b'"' + _c_escape(_b(x)) + b'"'
    if dtype.kind == "b":
        return b"1" if x else b"0"
    if dtype.kind == "c":
        return b"?"
    if dtype == np.float64:
        return _float_text(x, 15, 17, np.float64).encode()
    if dtype.kind == "f":
        return _float_text(x, 6, 9, np.float32).encode()
    return str(int(x)).encode()


def summarize_v2(value, summarize: int) -> bytes:
    """TF's ``Tensor::SummarizeValue(n, print_v2=true)``: nested brackets, ``n`` entries at
    each end of a longer axis with ``...`` between (``n`` < 0: all)."""
    a = np.asarray(value)
    num = a.size
    limit = num if summarize < 0 else min(summarize, num)
    flat = a.reshape(-1)
    if a.ndim == 0:
        return _element_text(flat[0], a.dtype) if limit else b"..."
    out = []

    def spacing(dim):
        if dim == a.ndim - 1:
            out.append(b" ")
        else:
            out.append(b"\n" * (a.ndim - dim - 1) + b" " * (dim + 1))

    def one_dim(dim, index):
        if dim == a.ndim:
            out.append(_element_text(flat[index], a.dtype))
            return
        out.append(b"[")
        count = a.shape[dim]
        per = int(np.prod(a.shape[dim + 1:], dtype=np.int64))
        for i in range(min(limit, count)):
            if i > 0:
                spacing(dim)
            one_dim(dim + 1, index + per * i)
        if count > 2 * limit:
            spacing(dim)
            out.append(b"...")
        for i in range(max(limit, count - limit), count):
            spacing(dim)
            one_dim(dim + 1, index + per * i)
        out.append(b"]")

    one_dim(0, 0)
    return b"".join(out)


@kernel("StringFormat", host_only=True)
def _string_format(node, ctx):
    template = node.attr["template"].encode()
    placeholder = node.attr["placeholder"].encode()
    summarize = int(node.attr["summarize"])
    pieces = template.split(placeholder)

    def run(*inputs):
        if len(pieces) - 1 != len(inputs):
            raise errors.InvalidArgumentError(
                None, node, f"num placeholders in template and num inputs must match: "
                f"{len(pieces) - 1} vs. {len(inputs)}")
        out = [pieces[0]]
        for value, piece in zip(inputs, pieces[1:]):
            out += [summarize_v2(host(value), summarize), piece]
        return np.array(b"".join(out), dtype=object)

    return run
