"""Kernels that show values: ``Print`` (TF1's ``tf.Print``), ``PrintV2`` (``tf.print``) and the
text of a failed ``Assert``.

Values are written the way TF's kernels write them, so printed logs read the same:
``summarize_flat`` is TF1's ``Tensor::SummarizeValue`` (the first *n* entries, flattened,
space-separated, ``...`` when some are left out; strings raw) used by ``Print`` and ``Assert``;
``summarize_nested`` is ``tf.print``'s form, TF's ``SummarizeValue(n, print_v2=true)``
(``string_kernels.summarize_v2``), keeping *n* entries at each end of every long axis. The
stream is looked up when the op runs, not at import: Jupyter swaps ``sys.stderr`` for its own
stream per kernel.
"""

from __future__ import annotations

import itertools
import sys

import numpy as np

from dflab.framework import errors
from dflab.kernels.registry import kernel
from dflab.kernels.string_kernels import summarize_v2


def _text(x) -> str:
    return x.decode("utf-8", "replace") if isinstance(x, bytes) else str(x)


def summarize_flat(value, n: int) -> str:
    """TF1's ``SummarizeValue``: ``n`` < 0 shows every entry."""
    flat = np.asarray(value).ravel()
    shown = flat if n < 0 else flat[:n]
    out = " ".join(_text(x) if isinstance(x, (bytes, str)) else _scalar(x) for x in shown)
    return out + ("..." if len(shown) < len(flat) else "")


def _scalar(x) -> str:
    # NumPy's shortest round-trip repr, without the type name of a NumPy scalar.
    return np.format_float_positional(x, trim="-") if isinstance(x, np.floating) else str(x)


def summarize_nested(value, n: int) -> str:
    """``tf.print``'s form of a value: TF's ``SummarizeValue`` for printing (nested brackets,
    ``n`` entries at each end of every axis longer than ``2 n``, floats in their shortest
    round-trip form, bools as 1 and 0, strings quoted inside arrays); a scalar string raw."""
    arr = np.asarray(value)
    if arr.ndim == 0 and (arr.dtype == object or arr.dtype.kind in "SU"):
        return _text(arr.item())
    return summarize_v2(value, n).decode("utf-8", "replace")


def _first_n(first_n: int):
    """A predicate true for the first ``first_n`` calls (always, for ``first_n`` < 0).
    ``next`` on an ``itertools.count`` is atomic, so concurrent runs count each call once."""
    if first_n < 0:
        return lambda: True
    calls = itertools.count()
    return lambda: next(calls) < first_n


@kernel("Print", host_only=True)
def _print(node, ctx):
    message = node.attr.get("message", "")
    summarize = node.attr.get("summarize", 3)
    due = _first_n(node.attr.get("first_n", -1))

    def print_and_pass(x, *data):
        if due():
            text = message + "".join(f"[{summarize_flat(d, summarize)}]" for d in data)
            print(text, file=sys.stderr, flush=True)
        return x

    return print_and_pass


@kernel("PrintV2", host_only=True)
def _print_v2(node, ctx):
    parts = node.attr["parts"]  # literal text, or None where the next input goes
    stream = node.attr.get("output_stream", "stderr")
    sep, end = node.attr.get("sep", " "), node.attr.get("end", "\n")
    summarize = node.attr.get("summarize", 3)

    def print_values(*inputs):
        values = iter(inputs)

        def piece(p):
            return p if p is not None else summarize_nested(next(values), summarize)

        # A part is literal text, a value (None), or a structure's pieces (a list).
        text = sep.join("".join(map(piece, p)) if isinstance(p, list) else piece(p)
                        for p in parts)
        out = sys.stdout if stream == "stdout" else sys.stderr
        out.write(text + end)
        out.flush()

    return print_values


# --- CheckNumerics ------------------------------------------------------------------------------
@kernel("CheckNumerics")
def _check_numerics(node, ctx):
    xp = ctx.xp
    message = node.attr["message"]

    def check_numerics(x):
        nan, inf = bool(xp.isnan(x).any()), bool(xp.isinf(x).any())
        if nan or inf:
            what = "Inf and NaN" if nan and inf else ("NaN" if nan else "Inf")
            raise errors.InvalidArgumentError(None, node,
                                              f"{message} : Tensor had {what} values")
        return x

    return check_numerics
