"""Strings built from sequences along the last axis (``tf.strings.ngrams``,
``tf.strings.unicode_encode``), for dense tensors: TF's ``StringNGrams`` and
``UnicodeEncode`` ops, which take their rows as flat values plus row splits (TF's ragged
layout). TF gives a dense result for a dense input, as here; dflab has no ``RaggedTensor``,
so ragged inputs and results are not offered.

Host-only, as in TF; kernels in ``dflab.kernels.string_sequence_kernels``. Not
differentiable.
"""

from __future__ import annotations

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.registry import NotDifferentiable, register_op
from dflab.framework.tensor_shape import TensorShape
from dflab.ops import array_ops
from dflab.ops import math_ops as _m

_ENCODINGS = ("UTF-8", "UTF-16-BE", "UTF-32-BE")
_ERRORS = ("ignore", "replace", "strict")


def _encode_infer(op):
    splits = op.inputs[1]
    n = splits.shape.as_list()[0] if splits.shape.ndims == 1 else None
    return [(_dt.string, TensorShape([None if n is None else n - 1]))]


def _ngrams_infer(op):
    splits = op.inputs[1]
    return [(_dt.string, TensorShape([None])), (splits.dtype.base_dtype, splits.shape)]


register_op("UnicodeEncode", _encode_infer)
register_op("StringNGrams", _ngrams_infer)
NotDifferentiable("UnicodeEncode")
NotDifferentiable("StringNGrams")


def _row_splits(rows, width, dtype=_dt.int64):
    """Splits of ``rows`` rows of ``width`` values each: ``[0, w, 2w, ...]``."""
    return _m.cast(_m.multiply(_m.range(_m.add(rows, 1)), width), dtype)


def _as_rows(x):
    """``x`` ``[..., n]`` as flat values and the splits of its rows."""
    shape = array_ops.shape(x)
    n = shape[-1]
    flat = array_ops.reshape(x, [-1])
    rows = _m.reduce_prod(shape[:-1]) if x.shape.ndims > 1 else 1
    return flat, _row_splits(rows, n)


def unicode_encode(input, output_encoding, errors="replace",  # noqa: A002 - TF's names
                   replacement_char=65533, name=None):
    """Each row of code points ``input[..., :]`` encoded as one string (``[...]``).
    Invalid code points are replaced (``errors="replace"``), dropped (``"ignore"``) or an
    error (``"strict"``)."""
    if output_encoding not in _ENCODINGS:
        raise ValueError(f"Attr 'output_encoding' of 'UnicodeEncode' Op passed string "
                         f"'{output_encoding}' not in: "
                         f"{', '.join(repr(e).replace(chr(39), chr(34)) for e in _ENCODINGS)}.")
    if errors not in _ERRORS:
        raise ValueError(f"Attr 'errors' of 'UnicodeEncode' Op passed string '{errors}' not "
                         f"in: {', '.join(repr(e).replace(chr(39), chr(34)) for e in _ERRORS)}.")
    with _ops.name_scope(name, "UnicodeEncode", [input]):
        x = _ops.convert_to_tensor(input, dtype=_dt.int32)
        if x.shape.ndims is None:
            raise ValueError("Rank of input_tensor must be statically known.")
        if x.shape.ndims == 0:
            raise ValueError("input_tensor's rank must be at least 1.")
        flat, splits = _as_rows(x)
        attrs = {"output_encoding": output_encoding, "errors": errors,
                 "replacement_char": int(replacement_char), "Tsplits": _dt.int64}
        out = _ops.apply_op("UnicodeEncode", [flat, splits], attrs, None).outputs[0]
        if x.shape.ndims == 1:
            return array_ops.reshape(out, [])
        return array_ops.reshape(out, array_ops.shape(x)[:-1])


def _pads(pad_values):
    if pad_values is None:
        return "", ""
    if isinstance(pad_values, (list, tuple)):
        if not all(isinstance(p, (str, bytes)) for p in pad_values[:2]):
            raise TypeError("pad_values must be a string, tuple of strings, or None.")
        return pad_values[0], pad_values[1]
    if not isinstance(pad_values, (str, bytes)):
        raise TypeError("pad_values must be a string, tuple of strings, or None.")
    return pad_values, pad_values


def _text(v):
    return v.decode() if isinstance(v, bytes) else v


def ngrams(data, ngram_width, separator=" ", pad_values=None, padding_width=None,
           preserve_short_sequences=False, name=None):
    """The n-grams of each row ``data[..., :]`` (for each width in ``ngram_width``, in
    order), joined by ``separator``; with ``pad_values`` each row is padded at both ends
    (by ``padding_width``, or width - 1). Returns ``[..., num_ngrams]``."""
    with _ops.name_scope(name, "StringNGrams", [data]):
        left, right = _pads(pad_values)
        if padding_width is not None and padding_width < 1:
            raise ValueError("padding_width must be greater than 0.")
        if padding_width is not None and pad_values is None:
            raise ValueError("pad_values must be provided if padding_width is set.")
        x = _ops.convert_to_tensor(data, dtype=_dt.string, name="data")
        if x.shape.ndims is None:
            raise ValueError("Rank of data must be known.")
        if x.shape.ndims == 0:
            raise ValueError("Data must have rank>0")
        if pad_values is None:
            padding_width = 0
        elif padding_width is None:
            padding_width = -1
        widths = list(ngram_width) if isinstance(ngram_width, (list, tuple)) else [ngram_width]
        for w in widths:
            if w < 1:
                raise ValueError(f"All ngram_widths must be greater than 0. Got {ngram_width}")
        flat, splits = _as_rows(x)
        attrs = {"separator": _text(separator), "ngram_widths": [int(w) for w in widths],
                 "left_pad": _text(left), "right_pad": _text(right),
                 "pad_width": int(padding_width),
                 "preserve_short_sequences": bool(preserve_short_sequences),
                 "Tsplits": _dt.int64}
        out = _ops.apply_op("StringNGrams", [flat, splits], attrs, None).outputs[0]
        if x.shape.ndims == 1:
            return out
        return array_ops.reshape(out, array_ops.concat([array_ops.shape(x)[:-1], [-1]], 0))


__all__: list = []
