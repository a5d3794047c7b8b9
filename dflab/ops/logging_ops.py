"""Printing from inside a graph: TF1's ``tf.Print`` and ``tf.print``.

``tf.Print(input_, data)`` is an identity of ``input_`` that writes ``message`` and the values of
``data`` to stderr whenever it runs (the first ``first_n`` times only, when given); the
gradient flows to ``input_`` alone. ``tf.print(*inputs)`` returns an op that writes its
arguments (tensors and plain Python values) when it runs, so in graph mode it must be fetched
or made a control dependency, as in TF. Both run on the CPU only. The kernels and the text
format are in ``dflab.kernels.logging_kernels``.
"""

from __future__ import annotations

import sys

from dflab.framework import ops as _ops
from dflab.framework.registry import NotDifferentiable, RegisterGradient, register_op


def _print_infer(op):
    x = op.inputs[0]
    return [(x.dtype.base_dtype, x.shape)]


register_op("Print", _print_infer, stateful=True)
register_op("PrintV2", lambda op: [], stateful=True)
NotDifferentiable("PrintV2")


@RegisterGradient("Print")
def _print_grad(op, grad):
    return [grad] + [None] * (len(op.inputs) - 1)


def Print(input_, data, message=None, first_n=None, summarize=None, name=None):  # noqa: N802
    """``input_``, unchanged, printing ``message`` and ``data`` to stderr when it is computed.
    ``summarize`` entries per tensor (3 by default, -1 for all)."""
    inputs = [_ops.convert_to_tensor(input_)] + [_ops.convert_to_tensor(d) for d in data or []]
    attrs = {"message": str(message or ""),
             "first_n": -1 if first_n is None else int(first_n),
             "summarize": 3 if summarize is None else int(summarize)}
    return _ops.apply_op("Print", inputs, attrs, name or "Print").outputs[0]




def _stream_name(output_stream) -> str:
    if output_stream is sys.stderr or output_stream == "stderr":
        return "stderr"
    if output_stream is sys.stdout or output_stream == "stdout":
        return "stdout"
    raise ValueError(f"tf.print: output_stream must be sys.stdout or sys.stderr, got "
                     f"{output_stream!r}")


def print_v2(*inputs, output_stream=sys.stderr, summarize=3, sep=" ", end="\n", name=None):
    """TF's ``tf.print``: an op that prints ``inputs`` (tensors as TF's ``SummarizeValue``
    writes them, ``summarize`` entries at each end of a long axis; a scalar string raw; a list,
    tuple or dict holding tensors as Python writes it with each tensor's value in its place;
    other values as ``str``)."""
    parts, tensors = [], []
    for x in inputs:
        if _ops.is_tensor_like(x):
            parts.append(None)
            tensors.append(_ops.convert_to_tensor(x))
        elif isinstance(x, (list, tuple, dict)) and _holds_tensors(x):
            parts.append(_structure_pieces(x, tensors))
        else:
            parts.append(str(x))
    attrs = {"parts": parts, "output_stream": _stream_name(output_stream), "sep": str(sep),
             "end": str(end), "summarize": -1 if summarize is None else int(summarize)}
    return _ops.apply_op("PrintV2", tensors, attrs, name or "PrintV2")


def _holds_tensors(x) -> bool:
    from dflab.framework import nest

    return any(_ops.is_tensor_like(v) for v in nest.flatten(x))


class _Slot:
    """Stands for a tensor inside a printed structure: Python's ``str`` of the structure writes
    its token where the tensor's value goes."""

    def __init__(self, token: str):
        self.token = token

    def __repr__(self) -> str:
        return self.token


def _keys_sorted(x):
    """``x`` with every dict's keys in sorted order, as TF writes a printed structure."""
    if isinstance(x, dict):
        return type(x)((k, _keys_sorted(x[k])) for k in sorted(x))
    if isinstance(x, list):
        return [_keys_sorted(v) for v in x]
    if isinstance(x, tuple):
        items = [_keys_sorted(v) for v in x]
        return type(x)(*items) if hasattr(x, "_fields") else tuple(items)
    return x


def _structure_pieces(x, tensors: list) -> list:
    """``str(x)`` as pieces: literal text, and None where each tensor's value goes (in
    ``nest.flatten``'s order, which is the order TF writes them: dicts by sorted key)."""
    from dflab.framework import nest

    token = "\x00dflab-print-slot\x00"
    flat = nest.flatten(x)
    slots = [_Slot(token) if _ops.is_tensor_like(v) else v for v in flat]
    text = str(_keys_sorted(nest.pack_sequence_as(x, slots)))
    pieces = []
    for i, literal in enumerate(text.split(token)):
        if i:
            pieces.append(None)
        if literal:
            pieces.append(literal)
    tensors.extend(_ops.convert_to_tensor(v) for v in flat if _ops.is_tensor_like(v))
    return pieces


__all__ = ["Print"]
