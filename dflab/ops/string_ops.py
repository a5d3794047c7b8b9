"""String ops (``tf.strings`` and TF 1.x's top-level spellings): substrings, lengths, case,
stripping, joining, regular expressions, number conversion, base64, decompression, Unicode
transcoding and segment joins.

Strings are byte strings, as in TF; ``unit="UTF8_CHAR"`` counts characters. Regular
expressions are RE2's in TF; dflab runs them with Python's ``re``, which reads the common
syntax the same way (RE2's rewrite ``\\1`` is Python's too). The ops are host-only (strings
never reach an accelerator); kernels in ``dflab.kernels.string_kernels``. None is
differentiable.
"""

from __future__ import annotations

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.registry import NotDifferentiable, register_op
from dflab.framework.tensor_shape import TensorShape, broadcast_shapes
from dflab.ops.op_util import axis_list
from dflab.ops.reduction_ops import _axis_arg, _keepdims_arg


def _strings(x, name="input"):
    return _ops.convert_to_tensor(x, dtype=_dt.string, name=name)


def _check_string(op, i=0):
    t = op.inputs[i]
    if t.dtype.base_dtype is not _dt.string:
        raise TypeError(f"{op.type}: input {i} must be a string tensor, got {t.dtype.name}")


def _same_shape(out_dtype):
    def infer(op):
        _check_string(op)
        return [(out_dtype, op.inputs[0].shape)]

    return infer


_ELEMENTWISE = {
    "StringLength": _dt.int32, "StringLower": _dt.string, "StringUpper": _dt.string,
    "StringStrip": _dt.string, "RegexFullMatch": _dt.bool, "RegexReplace": _dt.string,
    "EncodeBase64": _dt.string, "DecodeBase64": _dt.string, "DecodeCompressed": _dt.string,
    "UnicodeTranscode": _dt.string,
}
for _t, _dtype in _ELEMENTWISE.items():
    register_op(_t, _same_shape(_dtype))


def _to_number_infer(op):
    _check_string(op)
    return [(op.get_attr("out_type"), op.inputs[0].shape)]


def _as_string_infer(op):
    return [(_dt.string, op.inputs[0].shape)]


def _substr_infer(op):
    _check_string(op)
    s, pos, length = op.inputs
    if pos.dtype.base_dtype is not length.dtype.base_dtype or not pos.dtype.is_integer:
        raise TypeError("pos and len must be integers of the same type")
    if not pos.shape.is_compatible_with(length.shape):
        raise ValueError(f"pos and len should have the same shape, got {pos.shape} vs "
                         f"{length.shape}")
    return [(_dt.string, broadcast_shapes(s.shape, broadcast_shapes(pos.shape, length.shape)))]


def _reduce_join_infer(op):
    _check_string(op)
    x = op.inputs[0]
    from dflab.framework.constant_op import constant_value

    axes = constant_value(op.inputs[1])
    keep = op.get_attr("keep_dims")
    if x.shape.ndims is None or axes is None:
        return [(_dt.string, TensorShape(None))]
    rank = x.shape.ndims
    axes = axis_list(axes, rank)
    if axes is None:
        axes = list(range(rank))
    dims = x.shape.as_list()
    out = [1 if i in axes else d for i, d in enumerate(dims)] if keep else \
        [d for i, d in enumerate(dims) if i not in axes]
    return [(_dt.string, TensorShape(out))]


def _segment_join_infer(op):
    _check_string(op)
    x, ids, _ = op.inputs
    from dflab.framework.constant_op import constant_value

    n = constant_value(op.inputs[2])
    rest = x.shape.as_list()[ids.shape.ndims:] if x.shape.ndims is not None and \
        ids.shape.ndims is not None else None
    if rest is None:
        return [(_dt.string, TensorShape(None))]
    return [(_dt.string, TensorShape([None if n is None else int(n)] + rest))]


register_op("StringToNumber", _to_number_infer)
register_op("AsString", _as_string_infer)
register_op("Substr", _substr_infer)
register_op("ReduceJoin", _reduce_join_infer)
register_op("UnsortedSegmentJoin", _segment_join_infer)
register_op("StringFormat", lambda op: [(_dt.string, TensorShape([]))])
STRING_OPS = tuple(_ELEMENTWISE) + ("StringToNumber", "AsString", "Substr", "ReduceJoin",
                                    "UnsortedSegmentJoin", "StringFormat")
for _t in STRING_OPS:
    NotDifferentiable(_t)


def _unit(unit):
    if unit not in ("BYTE", "UTF8_CHAR"):
        raise ValueError(f"unit must be 'BYTE' or 'UTF8_CHAR', got {unit!r}")
    return unit


def substr(input, pos, len, name=None, unit="BYTE"):  # noqa: A002 - TF's names
    """``input[pos : pos + len]`` (negative ``pos`` counts from the end); out-of-range
    ``pos`` is an error. ``pos`` and ``len`` broadcast against ``input``."""
    pos = _ops.convert_to_tensor(pos)
    length = _ops.convert_to_tensor(len, dtype=pos.dtype.base_dtype)
    return _ops.apply_op("Substr", [_strings(input), pos, length], {"unit": _unit(unit)},
                         name).outputs[0]


def length(input, name=None, unit="BYTE"):  # noqa: A002
    """The length of each string in bytes or UTF-8 characters (int32)."""
    return _ops.apply_op("StringLength", [_strings(input)], {"unit": _unit(unit)},
                         name).outputs[0]


def lower(input, encoding="", name=None):  # noqa: A002
    """ASCII (or, with ``encoding="utf-8"``, Unicode) lower case."""
    return _ops.apply_op("StringLower", [_strings(input)], {"encoding": encoding},
                         name).outputs[0]


def upper(input, encoding="", name=None):  # noqa: A002
    return _ops.apply_op("StringUpper", [_strings(input)], {"encoding": encoding},
                         name).outputs[0]


def strip(input, name=None):  # noqa: A002
    """Leading and trailing whitespace removed."""
    return _ops.apply_op("StringStrip", [_strings(input)], None, name).outputs[0]


def join(inputs, separator="", name=None):
    """Elementwise concatenation of the tensors in ``inputs`` (scalars broadcast)."""
    from dflab.ops.io_ops import string_join as _string_join  # the op a sharded save uses

    return _string_join([_strings(t) for t in inputs], separator=separator, name=name)


def reduce_join(inputs, axis=None, keep_dims=None, separator="", name=None,
                reduction_indices=None, keepdims=None):
    """Join the strings along ``axis`` (all axes by default) with ``separator``."""
    inputs = _strings(inputs, "inputs")
    axis = _axis_arg(axis, reduction_indices)
    keep = _keepdims_arg(keepdims, keep_dims)
    if axis is None:
        if inputs.shape.ndims is None:
            from dflab.ops import array_ops, sequence_ops

            axis = sequence_ops.range(array_ops.rank(inputs) - 1, -1, -1)
        else:
            axis = list(range(inputs.shape.ndims - 1, -1, -1))
    axis = _ops.convert_to_tensor(axis, dtype=_dt.int32, name="reduction_indices")
    return _ops.apply_op("ReduceJoin", [inputs, axis],
                         {"keep_dims": keep, "separator": separator}, name).outputs[0]


def regex_full_match(input, pattern, name=None):  # noqa: A002
    """Whether each whole string matches ``pattern``."""
    return _ops.apply_op("RegexFullMatch", [_strings(input), _strings(pattern, "pattern")],
                         None, name).outputs[0]


def regex_replace(input, pattern, rewrite, replace_global=True, name=None):  # noqa: A002
    """Replace matches of ``pattern`` with ``rewrite`` (``\\1`` refers to groups); only the
    first match unless ``replace_global``."""
    return _ops.apply_op("RegexReplace", [_strings(input), _strings(pattern, "pattern"),
                                          _strings(rewrite, "rewrite")],
                         {"replace_global": bool(replace_global)}, name).outputs[0]


def as_string(input, precision=-1, scientific=False, shortest=False, width=-1,  # noqa: A002
              fill="", name=None):
    """Numbers (and bools) formatted as strings, as C's printf would (``%g``-like floats
    with ``shortest``, ``%e`` with ``scientific``, ``precision`` digits)."""
    x = _ops.convert_to_tensor(input)
    if scientific and shortest:
        raise ValueError("Cannot select both scientific and shortest notation")
    if len(fill) > 1:
        raise ValueError(f"Fill string must be one or fewer characters: {fill!r}")
    attrs = {"precision": int(precision), "scientific": bool(scientific),
             "shortest": bool(shortest), "width": int(width), "fill": fill}
    return _ops.apply_op("AsString", [x], attrs, name).outputs[0]


def to_number(string_tensor=None, out_type=_dt.float32, name=None, input=None):  # noqa: A002
    """Parse each string as a number of ``out_type``; an unparsable one is an error."""
    x = _strings(input if string_tensor is None else string_tensor, "string_tensor")
    return _ops.apply_op("StringToNumber", [x], {"out_type": _dt.as_dtype(out_type).base_dtype},
                         name).outputs[0]


def encode_base64(input, pad=False, name=None):  # noqa: A002
    """Web-safe base64 (``-`` and ``_``), unpadded unless ``pad``."""
    return _ops.apply_op("EncodeBase64", [_strings(input)], {"pad": bool(pad)},
                         name).outputs[0]


def decode_base64(input, name=None):  # noqa: A002
    return _ops.apply_op("DecodeBase64", [_strings(input)], None, name).outputs[0]


def decode_compressed(bytes, compression_type="", name=None):  # noqa: A002 - TF's name
    """Decompress ZLIB or GZIP bytes ("" leaves them as they are)."""
    if compression_type not in ("", "ZLIB", "GZIP"):
        raise ValueError(f"compression_type must be '', 'ZLIB' or 'GZIP', got "
                         f"{compression_type!r}")
    return _ops.apply_op("DecodeCompressed", [_strings(bytes, "bytes")],
                         {"compression_type": compression_type}, name).outputs[0]


def unicode_transcode(input, input_encoding, output_encoding, errors="replace",  # noqa: A002
                      replacement_char=65533, replace_control_characters=False, name=None):
    """Re-encode each string (UTF-8, UTF-16-BE, UTF-32-BE, ...), replacing, ignoring or
    refusing (``errors="strict"``) bad input."""
    if errors not in ("strict", "replace", "ignore"):
        raise ValueError(f"errors must be 'strict', 'replace' or 'ignore', got {errors!r}")
    attrs = {"input_encoding": input_encoding, "output_encoding": output_encoding,
             "errors": errors, "replacement_char": int(replacement_char),
             "replace_control_characters": bool(replace_control_characters)}
    return _ops.apply_op("UnicodeTranscode", [_strings(input)], attrs, name).outputs[0]


def unsorted_segment_join(inputs, segment_ids, num_segments, separator="", name=None):
    """Join the strings of each segment (in order) with ``separator``; empty segments give
    ``""``."""
    ids = _ops.convert_to_tensor(segment_ids)
    n = _ops.convert_to_tensor(num_segments, dtype=ids.dtype.base_dtype
                               if ids.dtype.base_dtype in (_dt.int32, _dt.int64) else None)
    return _ops.apply_op("UnsortedSegmentJoin", [_strings(inputs, "inputs"), ids, n],
                         {"separator": separator}, name).outputs[0]


def format(template, inputs, placeholder="{}", summarize=3, name=None):  # noqa: A001
    """``template`` with each ``placeholder`` replaced by the next input tensor, written
    as ``tf.print`` writes it (nested brackets, ``summarize`` entries at each end of a long
    axis, strings quoted); a scalar string."""
    if not isinstance(inputs, (list, tuple)):
        inputs = [inputs]
    inputs = [_ops.convert_to_tensor(t) for t in inputs]
    expected = template.count(placeholder)
    if expected != len(inputs):
        raise ValueError(f"The template expects {expected} tensors, but the inputs only has "
                         f"{len(inputs)}. Please ensure the number of placeholders in template "
                         f"matches inputs length.")
    attrs = {"T": [t.dtype.base_dtype for t in inputs], "template": template,
             "placeholder": placeholder, "summarize": int(summarize)}
    return _ops.apply_op("StringFormat", inputs, attrs, name).outputs[0]


# TF 1.x's top-level spellings.
string_join = join
string_strip = strip
string_to_number = to_number

__all__ = ["as_string", "decode_base64", "decode_compressed", "encode_base64", "reduce_join",
           "regex_replace", "string_join", "string_strip", "string_to_number", "substr"]
