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
    """TF's ``tf.print``: an op that prints ``inputs`` (tensors, nested as NumPy does without
    commas, ``summarize`` entries at each end of a long axis; other values as ``str``)."""
    parts, tensors = [], []
    for x in inputs:
        if _ops.is_tensor_like(x):
            parts.append(None)
            tensors.append(_ops.convert_to_tensor(x))
        else:
            parts.append(str(x))
    attrs = {"parts": parts, "output_stream": _stream_name(output_stream), "sep": str(sep),
             "end": str(end), "summarize": -1 if summarize is None else int(summarize)}
    return _ops.apply_op("PrintV2", tensors, attrs, name or "PrintV2")


__all__ = ["Print"]
