"""File readers and parsers for queue-based input pipelines (TF 1.x): ``tf.TextLineReader``,
``tf.WholeFileReader``, ``tf.TFRecordReader``, ``tf.decode_csv`` and ``tf.read_file``.

A reader is a resource (``TextLineReaderV2``, ``WholeFileReaderV2``) whose state — the records
of the file it is working on, and counters — lives on the host; ``ReaderReadV2`` takes the
reader's handle and a queue of filenames (``tf.train.string_input_producer``) and outputs one
``(key, value)`` record, dequeuing the next filename when the current file is used up; after the
queue is closed and drained it fails with ``OutOfRangeError`` like a dequeue. Keys are
``b"<file>:<line>"`` (1-based) for lines, ``b"<file>:<offset>"`` (of the record in the
uncompressed stream) for TFRecords, and the file name for whole files.
"""

from __future__ import annotations

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.registry import NotDifferentiable, register_op
from dflab.framework.tensor_shape import TensorShape
from dflab.lib.io.tf_record import TFRecordOptions

_READERS = ("TextLineReaderV2", "WholeFileReaderV2", "TFRecordReaderV2", "IdentityReaderV2")


# --- schemas --------------------------------------------------------------------------------------
def _reader_infer(op):
    return [(_dt.resource, TensorShape([]))]


def _handle(op, i=0, what="reader"):
    h = op.inputs[i]
    if h.dtype.base_dtype is not _dt.resource:
        raise TypeError(f"{op.type}: input {i} must be a {what} handle (resource), got "
                        f"{h.dtype.name}")


def _read_infer(op):
    _handle(op, 0)
    _handle(op, 1, "queue")
    return [(_dt.string, TensorShape([])), (_dt.string, TensorShape([]))]


def _read_up_to_infer(op):
    _handle(op, 0)
    _handle(op, 1, "queue")
    n = op.inputs[2]
    if n.dtype.base_dtype is not _dt.int64:
        raise TypeError(f"ReaderReadUpToV2: num_records must be int64, got {n.dtype.name}")
    if not n.shape.is_compatible_with(TensorShape([])):
        raise ValueError(f"ReaderReadUpToV2: num_records must be a scalar, got shape {n.shape}")
    return [(_dt.string, TensorShape([None])), (_dt.string, TensorShape([None]))]


def _num_records_infer(op):
    _handle(op)
    return [(_dt.int64, TensorShape([]))]


def _reset_infer(op):
    _handle(op)
    return []


def _decode_csv_infer(op):
    records = op.inputs[0]
    if records.dtype.base_dtype is not _dt.string:
        raise TypeError(f"DecodeCSV: records must be strings, got {records.dtype.name}")
    out_types = op.get_attr("OUT_TYPE")
    for k, d in enumerate(op.inputs[1:]):
        if d.dtype.base_dtype is not out_types[k]:
            raise TypeError(f"DecodeCSV: record_defaults[{k}] has dtype {d.dtype.name}, "
                            f"expected {out_types[k].name}")
        if d.shape.ndims is not None and d.shape.ndims > 1:
            raise ValueError(f"DecodeCSV: record_defaults[{k}] must have rank 0 or 1, got "
                             f"shape {d.shape}")
    return [(t, records.shape) for t in out_types]


def _read_file_infer(op):
    if op.inputs[0].dtype.base_dtype is not _dt.string:
        raise TypeError(f"ReadFile: filename must be a string, got {op.inputs[0].dtype.name}")
    if not op.inputs[0].shape.is_compatible_with(TensorShape([])):
        raise ValueError(f"ReadFile: filename must be a scalar, got shape {op.inputs[0].shape}")
    return [(_dt.string, TensorShape([]))]


for _t in _READERS:
    register_op(_t, _reader_infer, stateful=True)
register_op("ReaderReadV2", _read_infer, stateful=True)
register_op("ReaderReadUpToV2", _read_up_to_infer, stateful=True)
register_op("ReaderNumRecordsProducedV2", _num_records_infer, stateful=True)
register_op("ReaderResetV2", _reset_infer, stateful=True)
register_op("DecodeCSV", _decode_csv_infer)
register_op("ReadFile", _read_file_infer, stateful=True)
for _t in _READERS + ("ReaderReadV2", "ReaderReadUpToV2", "ReaderNumRecordsProducedV2",
                      "ReaderResetV2", "DecodeCSV", "ReadFile"):
    NotDifferentiable(_t)

READER_OPS = _READERS + ("ReaderReadV2", "ReaderReadUpToV2", "ReaderNumRecordsProducedV2",
                         "ReaderResetV2", "ReadFile")


# --- the Python classes ---------------------------------------------------------------------------
def _queue_handle(queue):
    ref = getattr(queue, "queue_ref", queue)
    return _ops.convert_to_tensor(ref)


class ReaderBase:
    """A reader handle and the ops on it (TF1's ``ReaderBase``)."""

    def __init__(self, reader_ref, supports_serialize=False):
        self._reader_ref = reader_ref
        self._supports_serialize = supports_serialize

    @property
    def reader_ref(self):
        return self._reader_ref

    @property
    def supports_serialize(self) -> bool:
        return self._supports_serialize

    def _op(self, op_type, inputs, name, default):
        with _ops.colocate_with(self._reader_ref.op):
            return _ops.apply_op(op_type, [self._reader_ref, *inputs], {}, name or default)

    def read(self, queue, name=None):
        """``(key, value)``: the next record, from the next file of ``queue`` when needed."""
        op = self._op("ReaderReadV2", [_queue_handle(queue)], name, "ReaderReadV2")
        return op.outputs[0], op.outputs[1]

    def read_up_to(self, queue, num_records, name=None):
        """``(keys, values)``: up to ``num_records`` records (int64), all from one file: fewer
        when that file ends first, as TF's (the next call goes on with the next file)."""
        num_records = _ops.convert_to_tensor(num_records, dtype=_dt.int64, name="num_records")
        op = self._op("ReaderReadUpToV2", [_queue_handle(queue), num_records], name,
                      "ReaderReadUpToV2")
        return op.outputs[0], op.outputs[1]

    def num_records_produced(self, name=None):
        return self._op("ReaderNumRecordsProducedV2", [], name,
                        "ReaderNumRecordsProducedV2").outputs[0]

    def reset(self, name=None):
        return self._op("ReaderResetV2", [], name, "ReaderResetV2")


class TextLineReader(ReaderBase):
    """Reads files line by line; the first ``skip_header_lines`` of each file are skipped."""

    def __init__(self, skip_header_lines=None, name=None):
        op = _ops.apply_op("TextLineReaderV2", [], {"skip_header_lines":
                                                    int(skip_header_lines or 0),
                                                    "shared_name": "", "container": ""},
                           name or "TextLineReaderV2")
        super().__init__(op.outputs[0])


class WholeFileReader(ReaderBase):
    """Reads each file whole: the key is its name, the value its contents."""

    def __init__(self, name=None):
        op = _ops.apply_op("WholeFileReaderV2", [], {"shared_name": "", "container": ""},
                           name or "WholeFileReaderV2")
        super().__init__(op.outputs[0])


class TFRecordReader(ReaderBase):
    """Reads the records of TFRecord files; ``options``: a ``TFRecordOptions`` or a
    compression string (``""``, ``"ZLIB"``, ``"GZIP"``)."""

    def __init__(self, name=None, options=None):
        compression = TFRecordOptions.get_compression_type_string(options)
        op = _ops.apply_op("TFRecordReaderV2", [], {"shared_name": "", "container": "",
                                                    "compression_type": compression},
                           name or "TFRecordReaderV2")
        super().__init__(op.outputs[0])


class IdentityReader(ReaderBase):
    """Outputs each work item of the queue as one record, as both its key and its value."""

    def __init__(self, name=None):
        op = _ops.apply_op("IdentityReaderV2", [], {"shared_name": "", "container": ""},
                           name or "IdentityReaderV2")
        super().__init__(op.outputs[0])


def decode_csv(records, record_defaults, field_delim=",", use_quote_delim=True, name=None,
               na_value="", select_cols=None):
    """Parse CSV ``records`` into one tensor per column (the shape of ``records``).

    ``record_defaults[i]`` gives column i's dtype and the value of an empty field (or one equal
    to ``na_value``); an empty default makes the column required. With ``select_cols`` only
    those (increasing) columns are read, and ``record_defaults`` describes them.
    """
    if len(field_delim) != 1:
        raise ValueError("field_delim should be only 1 char")
    if select_cols is not None:
        cols = [int(c) for c in select_cols]
        if any(b <= a for a, b in zip(cols, cols[1:])) or (cols and cols[0] < 0):
            raise ValueError("select_cols must be non-negative and strictly increasing")
        if len(cols) != len(record_defaults):
            raise ValueError(f"Length of select_cols ({len(cols)}) and record_defaults "
                             f"({len(record_defaults)}) should match")
    with _ops.name_scope(name, "DecodeCSV"):
        records = _ops.convert_to_tensor(records, dtype=_dt.string, name="records")
        defaults = []
        for k, d in enumerate(record_defaults):
            t = _ops.convert_to_tensor(d, name=f"record_default_{k}")
            if t.dtype.base_dtype not in (_dt.float32, _dt.float64, _dt.int32, _dt.int64,
                                          _dt.string):
                raise TypeError(f"decode_csv: record_defaults[{k}] has unsupported dtype "
                                f"{t.dtype.name}")
            defaults.append(t)
        attrs = {"OUT_TYPE": [d.dtype.base_dtype for d in defaults],
                 "field_delim": field_delim, "use_quote_delim": bool(use_quote_delim),
                 "na_value": na_value, "select_cols": list(select_cols or [])}
        op = _ops.apply_op("DecodeCSV", [records, *defaults], attrs, "DecodeCSV")
    return list(op.outputs)


def read_file(filename, name=None):
    """The whole contents of the file ``filename`` as a scalar string."""
    filename = _ops.convert_to_tensor(filename, dtype=_dt.string, name="filename")
    return _ops.apply_op("ReadFile", [filename], {}, name or "ReadFile").outputs[0]


__all__ = ["IdentityReader", "ReaderBase", "TFRecordReader", "TextLineReader",
           "WholeFileReader", "decode_csv", "read_file"]
