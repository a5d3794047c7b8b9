"""Kernels of the file readers and parsers: ``TextLineReaderV2``, ``WholeFileReaderV2``,
``TFRecordReaderV2``, ``ReaderReadV2`` (and its counters), ``DecodeCSV`` and ``ReadFile``.

A reader is a ``ReaderState`` in its device's ``ResourceMgr``: a FIFO of records not yet read
(filled one file at a time) and counters. ``ReaderReadV2`` is asynchronous: with records in hand
it answers at once; otherwise it parks a dequeue on the filename queue (holding no thread, see
``data_flow_kernels``) and, when a name arrives, reads that file and tries again. A closed,
empty queue's ``OutOfRangeError`` becomes the read's. Host-only, like the queues they read.
"""

from __future__ import annotations

import re
import threading
from collections import deque

import numpy as np

from dflab.framework import errors
from dflab.kernels.record_dataset_kernels import split_lines
from dflab.kernels.registry import kernel
from dflab.lib.io.tf_record import RecordReader

_MAX_EMPTY_FILES = 10_000  # files read in a row without a record before a read gives up


def _name(value) -> str:
    v = np.asarray(value, dtype=object).reshape(-1)
    if v.size != 1:
        raise errors.InvalidArgumentError(None, None, f"expected one file name, got {v.size}")
    v = v[0]
    return v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else str(v)


def read_whole(name: str, what: str) -> bytes:
    try:
        with open(name, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise errors.NotFoundError(None, None, f"{name}; No such file or directory") from None
    except IsADirectoryError:
        raise errors.FailedPreconditionError(None, None, f"{name}; Is a directory") from None
    except OSError as e:
        raise errors.UnknownError(None, None, f"{what}: {name}: {e}") from None


class ReaderState:
    """One reader: records pending from the current file, and how many were produced."""

    def __init__(self, kind: str, skip_header_lines: int = 0, compression: str = ""):
        self.kind = kind  # "text_line", "whole_file", "tf_record" or "identity"
        self.skip = skip_header_lines
        self.compression = compression
        self._records: deque = deque()
        self._lock = threading.Lock()
        self.produced = 0
        self.files_done = 0
        self._stream: RecordReader | None = None  # the TFRecord file being read
        self._stream_name = ""

    def _close_stream(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None

    def _pull_record(self) -> None:
        """Move the next record of the TFRecord file being read into the FIFO, or close the
        file at its end (a damaged record raises)."""
        try:
            record = self._stream.read()
        except errors.OpError:
            self._close_stream()
            raise
        if record is None:
            self._close_stream()
            return
        offset, data = record
        self._records.append((f"{self._stream_name}:{offset}".encode(), data))

    def next_record(self):
        with self._lock:
            if not self._records and self._stream is not None:
                self._pull_record()
            if not self._records:
                return None
            self.produced += 1
            key, value = self._records.popleft()
        return np.array(key, dtype=object), np.array(value, dtype=object)

    def start_file(self, name: str) -> None:
        if self.kind == "tf_record":
            # Records are read (and checked) one at a time, as TF's reader does: a damaged
            # record fails the read that reaches it, after the good ones before it.
            stream = RecordReader(name, self.compression)
            with self._lock:
                self._close_stream()
                self._stream, self._stream_name = stream, name
                self.files_done += 1
            return
        if self.kind == "identity":  # the work item is the record: key and value
            work = name.encode("utf-8", "surrogateescape")
            with self._lock:
                self._records.append((work, work))
                self.files_done += 1
            return
        data = read_whole(name, "ReaderRead")
        if self.kind == "whole_file":
            records = [(name.encode(), data)]
        else:
            lines = split_lines(data)
            records = [(f"{name}:{i + 1}".encode(), line)
                       for i, line in enumerate(lines) if i >= self.skip]
        with self._lock:
            self._records.extend(records)
            self.files_done += 1

    def reset(self) -> None:
        with self._lock:
            self._close_stream()
            self._records.clear()
            self.produced = 0
            self.files_done = 0


def _reader_factory(kind: str):
    def factory(node, ctx):
        key = node.attr.get("shared_name") or node.name
        skip = int(node.attr.get("skip_header_lines", 0))
        compression = node.attr.get("compression_type", "")

        def reader():
            return ctx.resources.lookup_or_create(
                "reader", key, lambda: ReaderState(kind, skip, compression),
                node.attr.get("container", ""))

        return reader

    return factory


kernel("TextLineReaderV2", host_only=True)(_reader_factory("text_line"))
kernel("WholeFileReaderV2", host_only=True)(_reader_factory("whole_file"))
kernel("TFRecordReaderV2", host_only=True)(_reader_factory("tf_record"))
kernel("IdentityReaderV2", host_only=True)(_reader_factory("identity"))


def _read_across_files(node, ctx, execution, done, reader, queue, take) -> None:
    """Call ``take()`` on the current file until it gives a result (then ``done(result)``),
    dequeuing the next filename each time it gives None (the file is used up), as TF's
    ``ReaderBase``; ``_MAX_EMPTY_FILES`` files in a row without a result end the read."""
    empty_files = [0]

    def attempt():
        try:
            result = take()
        except errors.OpError as e:
            done(error=e)
            return
        if result is not None:
            done(result)
            return
        if empty_files[0] >= _MAX_EMPTY_FILES:
            done(error=errors.OutOfRangeError(
                None, None, f"{node.name}: {_MAX_EMPTY_FILES} files in a row had no records"))
            return
        queue.dequeue(0, False, execution, on_filename, ctx)

    def on_filename(outputs=None, error=None):
        if error is not None:
            done(error=error)
            return
        try:
            reader.start_file(_name(outputs))
        except errors.OpError as e:
            done(error=e)
            return
        empty_files[0] += 1
        attempt()

    attempt()


@kernel("ReaderReadV2", host_only=True, is_async=True)
def _read(node, ctx):
    def read(execution, done, reader, queue):
        _read_across_files(node, ctx, execution, done, reader, queue, reader.next_record)

    return read


@kernel("ReaderReadUpToV2", host_only=True, is_async=True)
def _read_up_to(node, ctx):
    def read(execution, done, reader, queue, num_records):
        wanted = int(num_records)
        if wanted < 0:
            done(error=errors.InvalidArgumentError(
                None, None, f"{node.name}: num_records must be >= 0, got {wanted}"))
            return
        keys, values = [], []

        def take():
            # TF's ReaderBase::ReadUpTo: records of the current file until it ends or there
            # are enough; only a call that got none goes on to the next file.
            while len(keys) < wanted:
                record = reader.next_record()
                if record is None:
                    break
                keys.append(record[0].item())
                values.append(record[1].item())
            if not keys and wanted:
                return None
            return (np.array(keys, dtype=object).reshape(-1),
                    np.array(values, dtype=object).reshape(-1))

        _read_across_files(node, ctx, execution, done, reader, queue, take)

    return read


@kernel("ReaderNumRecordsProducedV2", host_only=True)
def _num_records(node, ctx):
    return lambda reader: np.int64(reader.produced)


@kernel("ReaderResetV2", host_only=True)
def _reset(node, ctx):
    def reset(reader):
        reader.reset()

    return reset


@kernel("ReadFile", host_only=True)
def _read_file(node, ctx):
    return lambda filename: np.array(read_whole(_name(filename), "ReadFile"), dtype=object)


# --- CSV --------------------------------------------------------------------------------------
def split_csv(record: bytes, delim: bytes, quoted: bool, index: int) -> list[bytes]:
    """The fields of one CSV record; a quoted field may hold the delimiter and ``""``."""
    if not quoted:
        return record.split(delim)
    fields, i, n = [], 0, len(record)
    while True:
        if i < n and record[i:i + 1] == b'"':
            field, i = _quoted_field(record, i + 1, delim, index)
        else:
            end = record.find(delim, i)
            end = n if end < 0 else end
            field = record[i:end]
            if b'"' in field:
                raise errors.InvalidArgumentError(
                    None, None, f"Unquoted fields cannot have quotes inside (record {index})")
            i = end
        fields.append(field)
        if i >= n:
            return fields
        i += 1  # past the delimiter
        if i == n:
            fields.append(b"")
            return fields


def _quoted_field(record: bytes, i: int, delim: bytes, index: int):
    out = bytearray()
    n = len(record)
    while True:
        if i >= n:
            raise errors.InvalidArgumentError(
                None, None, f"Quoted field has to end with quote followed by delim or end "
                f"(record {index})")
        c = record[i:i + 1]
        if c != b'"':
            out += c
            i += 1
            continue
        if record[i + 1:i + 2] == b'"':
            out += b'"'
            i += 2
            continue
        if i + 1 < n and record[i + 1:i + 2] != delim:
            raise errors.InvalidArgumentError(
                None, None, "Quote inside a string has to be escaped by another quote")
        return bytes(out), i + 1


_INT = re.compile(r"[+-]?[0-9]+")
_INT_RANGE = {"int32": (-2**31, 2**31 - 1), "int64": (-2**63, 2**63 - 1)}


def _parse_int(text: str, dtype_name: str) -> int:
    if not _INT.fullmatch(text):
        raise ValueError(text)
    value = int(text)
    low, high = _INT_RANGE[dtype_name]
    if not low <= value <= high:
        raise ValueError(text)  # out of range is "not a valid int32", as in TF
    return value


def _parse_float(text: str, dtype_name: str) -> float:
    if "_" in text:  # Python's float() takes digit separators; CSV numbers have none
        raise ValueError(text)
    return float(text)


_PARSERS = {"int32": _parse_int, "int64": _parse_int, "float32": _parse_float,
            "float64": _parse_float}
_KIND = {"int32": "int32", "int64": "int64", "float32": "float", "float64": "double"}


def _convert(field: bytes, dtype, default, col: int, index: int, na_value: bytes):
    if field == b"" or (na_value and field == na_value):
        if default.size == 0:
            raise errors.InvalidArgumentError(
                None, None, f"Field {col} is required but missing in record {index}!")
        return default.reshape(-1)[0]
    if dtype.name == "string":
        return field
    try:
        text = field.decode()
        if text != text.strip():
            raise ValueError(text)
        return _PARSERS[dtype.name](text, dtype.name)
    except (ValueError, UnicodeDecodeError):
        raise errors.InvalidArgumentError(
            None, None, f"Field {col} in record {index} is not a valid {_KIND[dtype.name]}: "
            f"{field.decode('utf-8', 'replace')}") from None


@kernel("DecodeCSV", host_only=True)
def _decode_csv(node, ctx):
    a = node.attr
    types = list(a["OUT_TYPE"])
    delim = a.get("field_delim", ",").encode()
    quoted = bool(a.get("use_quote_delim", True))
    na_value = a.get("na_value", "").encode()
    select = list(a.get("select_cols") or [])

    def decode_csv(records, *defaults):
        recs = np.asarray(records, dtype=object)
        defaults = [np.asarray(d, dtype=t._np if t.name != "string" else object)
                    for d, t in zip(defaults, types)]
        for k, d in enumerate(defaults):
            if d.size > 1:
                raise errors.InvalidArgumentError(
                    None, None, f"record_defaults[{k}] must have at most one element")
        outs = [np.empty(recs.shape, dtype=object if t.name == "string" else t._np)
                for t in types]
        for index, rec in enumerate(recs.reshape(-1)):
            rec = rec if isinstance(rec, bytes) else str(rec).encode()
            fields = split_csv(rec, delim, quoted, index)
            if select:
                if select[-1] >= len(fields):
                    raise errors.InvalidArgumentError(
                        None, None, f"Expect {select[-1] + 1} fields but have {len(fields)} "
                        f"in record {index}")
                fields = [fields[c] for c in select]
            elif len(fields) != len(types):
                raise errors.InvalidArgumentError(
                    None, None, f"Expect {len(types)} fields but have {len(fields)} in record "
                    f"{index}")
            for col, (field, t) in enumerate(zip(fields, types)):
                outs[col].reshape(-1)[index] = _convert(field, t, defaults[col], col, index,
                                                        na_value)
        return outs[0] if len(outs) == 1 else tuple(outs)

    return decode_csv
