"""``tf.data`` file readers: ``TextLineDataset``, ``TFRecordDataset`` and
``FixedLengthRecordDatasetV2``.

Each kernel returns a dataset value (``dataset_kernels.DatasetValue``) naming its files; a file
is opened only when a pass reaches it, so building the dataset reads nothing. Text and
fixed-length record files are read whole (``_open_text``, GZIP or ZLIB decompressed), TFRecord
files record by record, each checked as it is read (``dflab.lib.io.tf_record``). With
``num_parallel_reads`` above one, TFRecord and fixed-length readers read that many files at a
time, one record from each in turn.
A missing file is TF's ``NotFoundError``, corrupt data its ``DataLossError``. ``split_lines``
is TF's line splitting, shared with the queue-based ``TextLineReader`` (``reader_kernels``).
All of these are host-only ops.
"""

from __future__ import annotations

import gzip
import zlib

import numpy as np

from dflab.framework import errors
from dflab.kernels.dataset_kernels import DatasetValue
from dflab.kernels.registry import kernel, register_kernel
from dflab.lib.io.tf_record import read_records


def _open_text(name: str, compression: str):
    try:
        with open(name, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise errors.NotFoundError(None, None, f"{name}; No such file or directory") from None
    except OSError as e:
        raise errors.UnknownError(None, None, f"{name}: {e}") from None
    try:
        if compression == "GZIP":
            return gzip.decompress(data)
        if compression == "ZLIB":
            return zlib.decompress(data)
    except (OSError, zlib.error, EOFError) as e:
        raise errors.DataLossError(None, None, f"{name}: not valid {compression} data: {e}") \
            from None
    return data


def split_lines(data: bytes) -> list[bytes]:
    """Lines of a text file without their ``\\n`` (or ``\\r\\n``), as TF's line readers give."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return [line[:-1] if line.endswith(b"\r") else line for line in lines]


class _TextLines(DatasetValue):
    def __init__(self, filenames, compression):
        self.files = [f.decode() if isinstance(f, bytes) else str(f)
                      for f in np.asarray(filenames, dtype=object).reshape(-1)]
        compression = np.asarray(compression, dtype=object).reshape(-1)[0]
        self.compression = compression.decode() if isinstance(compression, bytes) \
            else str(compression)
        if self.compression not in ("", "GZIP", "ZLIB"):
            raise errors.InvalidArgumentError(None, None, "Unsupported compression_type: "
                                              f"{self.compression!r}")

    def elements(self):
        for name in self.files:
            for line in split_lines(_open_text(name, self.compression)):
                yield (np.array(line, dtype=object),)


class _TFRecords(_TextLines):
    """The records of TFRecord files, checked as they are read; with ``cycle`` files above
    one, read ``cycle`` files at a time, one record from each in turn, a finished file's
    place taken by the next (TF's ``num_parallel_reads``: an interleave, block length 1)."""

    def __init__(self, filenames, compression, cycle: int = 1):
        super().__init__(filenames, compression)
        self.cycle = max(1, int(cycle))

    def _records(self, name: str):
        for record in read_records(name, self.compression):
            yield (np.array(record, dtype=object),)

    def elements(self):
        if self.cycle == 1:
            for name in self.files:
                yield from self._records(name)
            return
        pending = iter(self.files)
        slots = [None] * self.cycle
        position, files_left = 0, True
        while files_left or any(s is not None for s in slots):
            if slots[position] is None and files_left:
                name = next(pending, None)
                files_left = name is not None
                slots[position] = self._records(name) if files_left else None
            if slots[position] is not None:
                element = next(slots[position], None)
                if element is None:
                    slots[position] = None
                else:
                    yield element
            position = (position + 1) % self.cycle


class _FixedLengthRecords(_TFRecords):
    """The fixed-length records of binary files after a header, before a footer (TF's
    ``FixedLengthRecordDatasetV2``). As in TF, a plain file whose body is no whole number of
    records yields nothing and fails (``InvalidArgumentError``); a compressed one yields its
    whole records first, then fails (``DataLossError``)."""

    def __init__(self, filenames, header_bytes, record_bytes, footer_bytes, compression,
                 cycle: int = 1):
        super().__init__(filenames, compression, cycle)
        self.layout = [int(np.asarray(v)) for v in (header_bytes, record_bytes, footer_bytes)]
        if self.layout[1] <= 0:
            raise errors.InvalidArgumentError(None, None,
                                              f"record_bytes must be > 0 not {self.layout[1]}")
        if self.layout[0] < 0 or self.layout[2] < 0:
            raise errors.InvalidArgumentError(None, None,
                                              "header_bytes and footer_bytes must be >= 0")

    def _records(self, name: str):
        header, record, footer = self.layout
        data = _open_text(name, self.compression)
        body = max(len(data) - header - footer, 0)
        whole = body - body % record
        bad = (f"Excluding the header ({header} bytes) and footer ({footer} bytes), input file "
               f"\"{name}\" has body length {body} bytes, which is not an exact multiple of the "
               f"record length ({record} bytes).")
        if whole != body and not self.compression:
            raise errors.InvalidArgumentError(None, None, bad)
        for pos in range(header, header + whole, record):
            yield (np.array(data[pos:pos + record], dtype=object),)
        if whole != body:
            raise errors.DataLossError(None, None, bad)


# --- dataset kernels ------------------------------------------------------------------------------
register_kernel("TextLineDataset", host_only=True, fn=lambda files, compression, buffer_size:
                _TextLines(files, compression))


@kernel("TFRecordDataset", host_only=True)
def _tf_record_dataset(node, ctx):
    cycle = int(node.attr.get("num_parallel_reads", 1))
    return lambda files, compression, buffer_size: _TFRecords(files, compression, cycle)


@kernel("FixedLengthRecordDatasetV2", host_only=True)
def _fixed_length_record_dataset(node, ctx):
    cycle = int(node.attr.get("num_parallel_reads", 1))
    return lambda files, header, record, footer, buffer_size, compression: \
        _FixedLengthRecords(files, header, record, footer, compression, cycle)
