"""Short printable text for anything a drawing shows: names, dtypes, shapes, attributes, values.

Invariant: every function returns plain text that is safe *as text* (no control characters, no
lone surrogates, bounded length). It is never markup; whoever puts it into DOT or SVG escapes it
there (``dflab.visualize.dot.html_text`` for Graphviz, ElementTree for SVG).
"""

from __future__ import annotations

import re
import sys

import numpy as np

from dflab.framework.device_spec import DeviceSpec
from dflab.framework.dtypes import DType
from dflab.framework.tensor_shape import TensorShape

# Characters XML 1.0 cannot carry at all, plus the other C0/C1 controls and line breaks that
# would break a one-line label.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\ufffe\uffff\ud800-\udfff]")
ELLIPSIS = "\u2026"


def _escape_char(m: re.Match) -> str:
    c = m.group()
    return {"\n": "\\n", "\t": "\\t", "\r": "\\r"}.get(c, f"\\x{ord(c):02x}" if ord(c) < 256
                                                        else f"\\u{ord(c):04x}")


def printable(value, limit: int = 80) -> str:
    """``value`` as one line of at most ``limit`` characters; bytes are decoded leniently."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "backslashreplace")
    text = _UNPRINTABLE.sub(_escape_char, str(value))
    if len(text) > limit:
        text = text[: max(limit - 1, 0)] + ELLIPSIS
    return text


def dtype_text(dtype) -> str:
    """``float32``, ``float32_ref`` …; empty when unknown."""
    if dtype is None:
        return ""
    if isinstance(dtype, DType):
        return dtype.name
    return printable(getattr(dtype, "name", dtype), 24)


def shape_text(shape) -> str:
    """``[?,784]`` for a partial shape, ``[]`` for a scalar, ``[?…]`` for an unknown rank.

    Accepts a ``TensorShape``, a list of sizes (None or -1 for unknown) or None (unknown rank).
    """
    if isinstance(shape, TensorShape):
        shape = None if shape.ndims is None else shape.as_list()
    if shape is None:
        return "[?" + ELLIPSIS + "]"
    dims = ["?" if d is None or (isinstance(d, int) and d < 0) else str(d) for d in shape]
    return "[" + ",".join(dims) + "]"


def value_text(arr, limit: int = 40) -> str:
    """A constant's value as short text: ``3.5``, ``[1, 2, 3]``, ``'abc'``, ``float32 [784,10]``.

    Small arrays show their values; large ones only their dtype and shape (never their data).
    """
    arr = np.asarray(arr)
    if arr.size > 8:
        return printable(f"{arr.dtype} {shape_text(list(arr.shape))}", limit)
    if arr.dtype == object or arr.dtype.kind in "SU":
        items = [printable(x, limit) for x in arr.ravel().tolist()]
        text = ", ".join(repr(s) for s in items)
        text = text if arr.ndim == 0 else f"[{text}]"
    else:
        text = np.array2string(arr, separator=", ", threshold=8, precision=4)
    return printable(" ".join(text.split()), limit)


def attr_text(value, limit: int = 60) -> str:
    """One attribute value as short printable text."""
    if isinstance(value, DType):
        return value.name
    if isinstance(value, TensorShape):
        return shape_text(value)
    if isinstance(value, np.ndarray):
        return value_text(value, limit)
    if isinstance(value, (list, tuple)):
        inner = ", ".join(attr_text(v, limit) for v in value[:8])
        more = ", " + ELLIPSIS if len(value) > 8 else ""
        return printable(f"[{inner}{more}]", limit)
    if isinstance(value, (bytes, str)):
        return printable(value, limit)
    return printable(repr(value) if isinstance(value, float) else value, limit)


def short_device(device: str) -> str:
    """``CPU:1`` for ``/job:localhost/replica:0/task:0/device:CPU:1`` or ``/cpu:1``; another job
    or task is kept (``ps/1/GPU:0``); empty stays empty, unparseable text is shown as is."""
    if not device:
        return ""
    try:
        spec = DeviceSpec.from_string(device)
    except (ValueError, TypeError):
        return printable(device, 60)
    parts = []
    if spec.job not in (None, "localhost") or spec.task not in (None, 0):
        parts += [spec.job or "*", str(spec.task if spec.task is not None else "*")]
    if spec.device_type:
        index = "*" if spec.device_index is None else spec.device_index
        parts.append(f"{spec.device_type}:{index}")
    return printable("/".join(parts) or device, 60)


def format_micros(us: float) -> str:
    """``850 µs``, ``12.5 ms``, ``1.25 s``."""
    if us < 1000:
        return f"{us:.3g} \u00b5s"
    if us < 1_000_000:
        return f"{us / 1000:.3g} ms"
    return f"{us / 1e6:.3g} s"


def format_bytes(n: float) -> str:
    """``512 B``, ``3.1 KiB``, ``12 MiB``."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.3g} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.3g} GiB"


def readable_site(site: str) -> str:
    """``file:line`` as a reader knows it: code typed into a notebook cell (which IPython
    compiles under a generated file name) becomes ``Cell In[n], line k``."""
    if not site:
        return site
    ipython = sys.modules.get("IPython")  # only when IPython is already running this code
    shell = ipython.get_ipython() if ipython is not None else None
    format_name = getattr(getattr(shell, "compile", None), "format_code_name", None)
    file, _, line = site.rpartition(":")
    named = format_name(file) if file and format_name is not None else None
    return f"{named[0]} {named[1]}, line {line}" if named else site
