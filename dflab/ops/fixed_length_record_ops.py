"""``tf.FixedLengthRecordReader``: a reader of files made of fixed-size binary records (the
CIFAR-10 binary format: one label byte and 3072 pixel bytes per record).

Each file: ``header_bytes`` skipped, then records of ``record_bytes`` while a whole record
fits before the ``footer_bytes`` at the end; with ``hop_bytes`` the records start
``hop_bytes`` apart (and may overlap). Keys are ``b"<file>:<index>"``, counting from 0 in
each file, as TF's. The file may be ``"GZIP"`` or ``"ZLIB"`` compressed (``encoding``). It
reads through ``ReaderReadV2`` like the other readers (``dflab.ops.reader_ops``); the kernel
is in ``dflab.kernels.fixed_length_record_kernels``.
"""

from __future__ import annotations

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.registry import NotDifferentiable, register_op
from dflab.framework.tensor_shape import TensorShape
from dflab.ops.reader_ops import ReaderBase


def _reader_infer(op):
    return [(_dt.resource, TensorShape([]))]


register_op("FixedLengthRecordReaderV2", _reader_infer, stateful=True)
NotDifferentiable("FixedLengthRecordReaderV2")


class FixedLengthRecordReader(ReaderBase):
    """Reads fixed-length records from binary files (see the module docstring)."""

    def __init__(self, record_bytes, header_bytes=None, footer_bytes=None, hop_bytes=None,
                 name=None, encoding=None):
        if int(record_bytes) <= 0:
            raise ValueError(f"record_bytes must be > 0, got {record_bytes}")
        encoding = encoding or ""
        if encoding not in ("", "GZIP", "ZLIB"):
            raise ValueError(f"encoding must be '', 'GZIP' or 'ZLIB', got {encoding!r}")
        attrs = {"record_bytes": int(record_bytes), "header_bytes": int(header_bytes or 0),
                 "footer_bytes": int(footer_bytes or 0), "hop_bytes": int(hop_bytes or 0),
                 "encoding": encoding, "shared_name": "", "container": ""}
        op = _ops.apply_op("FixedLengthRecordReaderV2", [], attrs,
                           name or "FixedLengthRecordReaderV2")
        super().__init__(op.outputs[0])


__all__ = ["FixedLengthRecordReader"]
