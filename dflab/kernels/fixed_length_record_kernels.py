"""The kernel of ``FixedLengthRecordReaderV2``: a reader state with the interface
``ReaderReadV2`` reads through (``next_record``, ``start_file``, ``reset``, ``produced``),
splitting each file into its fixed-length records (``dflab.ops.fixed_length_record_ops``)."""

from __future__ import annotations

import gzip
import threading
import zlib
from collections import deque

import numpy as np

from dflab.framework import errors
from dflab.kernels.reader_kernels import read_whole
from dflab.kernels.registry import kernel


def split_records(data: bytes, record_bytes: int, header_bytes: int, footer_bytes: int,
                  hop_bytes: int) -> list[bytes]:
    """The records of one file's bytes."""
    limit = len(data) - footer_bytes
    step = hop_bytes or record_bytes
    out = []
    pos = header_bytes
    while pos + record_bytes <= limit:
        out.append(data[pos:pos + record_bytes])
        pos += step
    return out


def _decompress(data: bytes, encoding: str, name: str) -> bytes:
    try:
        if encoding == "GZIP":
            return gzip.decompress(data)
        if encoding == "ZLIB":
            return zlib.decompress(data)
    except (OSError, zlib.error, EOFError) as e:
        raise errors.DataLossError(None, None, f"{name}: {encoding} data is corrupt: {e}") \
            from None
    return data


class FixedLengthRecordState:
    """One reader: the records not yet read of the current file, and counters."""

    def __init__(self, record_bytes, header_bytes, footer_bytes, hop_bytes, encoding):
        self._layout = (record_bytes, header_bytes, footer_bytes, hop_bytes)
        self._encoding = encoding
        self._records: deque = deque()
        self._lock = threading.Lock()
        self.produced = 0
        self.files_done = 0

    def next_record(self):
        with self._lock:
            if not self._records:
                return None
            self.produced += 1
            key, value = self._records.popleft()
        return np.array(key, dtype=object), np.array(value, dtype=object)

    def start_file(self, name: str) -> None:
        data = _decompress(read_whole(name, "ReaderRead"), self._encoding, name)
        records = split_records(data, *self._layout)
        with self._lock:
            self._records.extend((f"{name}:{i}".encode(), r) for i, r in enumerate(records))
            self.files_done += 1

    def reset(self) -> None:
        with self._lock:
            self._records.clear()
            self.produced = 0
            self.files_done = 0


@kernel("FixedLengthRecordReaderV2", host_only=True)
def _fixed_length_reader(node, ctx):
    key = node.attr.get("shared_name") or node.name
    layout = (int(node.attr["record_bytes"]), int(node.attr["header_bytes"]),
              int(node.attr["footer_bytes"]), int(node.attr["hop_bytes"]))
    encoding = node.attr.get("encoding", "")

    def reader():
        return ctx.resources.lookup_or_create(
            "reader", key, lambda: FixedLengthRecordState(*layout, encoding),
            node.attr.get("container", ""))

    return reader
