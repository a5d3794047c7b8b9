"""TFRecord files: ``tf.python_io.TFRecordWriter``, ``tf_record_iterator``, ``TFRecordOptions``
and the record reader the ``TFRecordDataset`` and ``TFRecordReader`` kernels use.

A TFRecord file is a sequence of records, each::

    uint64 length            (little-endian)
    uint32 masked_crc32c(length bytes)
    byte   data[length]
    uint32 masked_crc32c(data)

optionally compressed as a whole, as one zlib or gzip stream (``TFRecordOptions``). Offsets
(in errors and in a reader's keys) count bytes of the uncompressed stream, as TF's do.

Invariant: a record is returned only when both of its checksums match; a short or damaged
record is a ``DataLossError`` naming the offset (TF's messages: ``truncated record at N``,
``corrupted record at N``), and a clean end of file ends the iteration.
"""

from __future__ import annotations

import re
import struct
import zlib
from collections.abc import Iterator

from dflab.framework import errors
from dflab.lib.io import crc32c

_HEADER = struct.Struct("<QI")  # length, masked crc of the length
_FOOTER = struct.Struct("<I")  # masked crc of the data
HEADER_SIZE = _HEADER.size  # 12
FOOTER_SIZE = _FOOTER.size  # 4
_READ_CHUNK = 1 << 16


class TFRecordCompressionType:
    """How a TFRecord file is compressed (TF's enum values)."""

    NONE = 0
    ZLIB = 1
    GZIP = 2


class TFRecordOptions:
    """Options of a TFRecord file: the compression and zlib's settings (TF1's
    ``tf.python_io.TFRecordOptions``). Options other than ``compression_type`` only affect
    writing, and only when the file is compressed; None keeps zlib's default."""

    compression_type_map = {
        TFRecordCompressionType.ZLIB: "ZLIB",
        TFRecordCompressionType.GZIP: "GZIP",
        TFRecordCompressionType.NONE: "",
    }

    def __init__(self, compression_type=None, flush_mode=None, input_buffer_size=None,
                 output_buffer_size=None, window_bits=None, compression_level=None,
                 compression_method=None, mem_level=None, compression_strategy=None):
        self.get_compression_type_string(compression_type)  # validates
        self.compression_type = compression_type
        self.flush_mode = flush_mode
        self.input_buffer_size = input_buffer_size
        self.output_buffer_size = output_buffer_size
        self.window_bits = window_bits
        self.compression_level = compression_level
        self.compression_method = compression_method
        self.mem_level = mem_level
        self.compression_strategy = compression_strategy

    @classmethod
    def get_compression_type_string(cls, options) -> str:
        """``"ZLIB"``, ``"GZIP"`` or ``""`` from options, an enum value or a string; a
        ``ValueError`` for anything else."""
        if not options:
            return ""
        if isinstance(options, TFRecordOptions):
            return cls.get_compression_type_string(options.compression_type)
        if isinstance(options, bytes):
            options = options.decode("utf-8", "replace")
        if not isinstance(options, bool) and options in cls.compression_type_map:
            return cls.compression_type_map[options]
        if options in cls.compression_type_map.values():
            return options
        raise ValueError(f'Not a valid compression_type: "{options}"')


def compression_of(options) -> str:
    """The compression string of whatever TF accepts as TFRecord options."""
    return TFRecordOptions.get_compression_type_string(options)


# --- writing ------------------------------------------------------------------------------------
def encode_record(data: bytes) -> bytes:
    """One record with its framing: length, its checksum, the data, the data's checksum."""
    length = struct.pack("<Q", len(data))
    return b"".join([length, struct.pack("<I", crc32c.masked_value(length)), data,
                     _FOOTER.pack(crc32c.masked_value(data))])


def _compressor(compression: str, options: TFRecordOptions | None):
    def opt(name, default):
        value = getattr(options, name, None) if options is not None else None
        return default if value is None else value

    window = opt("window_bits", zlib.MAX_WBITS)
    if compression == "GZIP":
        window += 16  # zlib's flag for a gzip header and trailer, as TF's writer asks
    return zlib.compressobj(opt("compression_level", zlib.Z_DEFAULT_COMPRESSION),
                            opt("compression_method", zlib.DEFLATED), window,
                            opt("mem_level", 9), opt("compression_strategy",
                                                     zlib.Z_DEFAULT_STRATEGY))


class TFRecordWriter:
    """Writes records to a TFRecord file (TF1's ``tf.python_io.TFRecordWriter``; also
    ``tf.io.TFRecordWriter``). ``options``: a ``TFRecordOptions`` or a compression string."""

    def __init__(self, path, options=None):
        self._path = str(path.decode() if isinstance(path, bytes) else path)
        self._options = options if isinstance(options, TFRecordOptions) else None
        compression = compression_of(options)
        try:
            self._file = open(self._path, "wb")  # noqa: SIM115 - closed by close()
        except FileNotFoundError:
            raise errors.NotFoundError(None, None, f"{self._path}; No such file or "
                                       "directory") from None
        except OSError as e:
            raise errors.UnknownError(None, None, f"{self._path}: {e}") from None
        self._zip = _compressor(compression, self._options) if compression else None
        flush_mode = getattr(self._options, "flush_mode", None)
        self._flush_each = flush_mode if flush_mode not in (None, zlib.Z_NO_FLUSH) else None

    def _put(self, data: bytes) -> None:
        if self._file is None:
            raise errors.FailedPreconditionError(None, None, "Writer is closed.")
        if self._zip is None:
            self._file.write(data)
            return
        self._file.write(self._zip.compress(data))
        if self._flush_each is not None:
            self._file.write(self._zip.flush(self._flush_each))

    def write(self, record) -> None:
        """Append one record (bytes; a str is written as its UTF-8 bytes)."""
        if isinstance(record, str):
            record = record.encode("utf-8")
        self._put(encode_record(bytes(record)))

    def flush(self) -> None:
        """Push what was written so far to the file (a compressed stream is sync-flushed,
        so a reader sees every record written before the flush)."""
        if self._file is None:
            raise errors.FailedPreconditionError(None, None, "Writer is closed.")
        if self._zip is not None:
            self._file.write(self._zip.flush(zlib.Z_SYNC_FLUSH))
        self._file.flush()

    def close(self) -> None:
        """Finish the file (the compressed stream's end) and close it; idempotent."""
        if self._file is None:
            return
        try:
            if self._zip is not None:
                self._file.write(self._zip.flush(zlib.Z_FINISH))
        finally:
            self._file.close()
            self._file = None

    def __enter__(self) -> TFRecordWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        if getattr(self, "_file", None) is not None:
            self.close()


# --- reading ------------------------------------------------------------------------------------
_ZLIB_ERROR = re.compile(r"Error (-?\d+) while [a-z ]+ data: (.*)")


def _inflate_error(e: zlib.error) -> errors.DataLossError:
    m = _ZLIB_ERROR.match(str(e))
    text = f"inflate() failed with error {m[1]}: {m[2]}" if m else f"inflate() failed: {e}"
    return errors.DataLossError(None, None, text)


class _Inflater:
    """A file read through zlib: ``read(n)`` gives up to ``n`` uncompressed bytes (fewer only
    at the end). Gzip files of several members are read through, as gzip tools do."""

    def __init__(self, file, compression: str):
        self._file = file
        self._wbits = zlib.MAX_WBITS + (16 if compression == "GZIP" else 0)
        self._gzip = compression == "GZIP"
        self._obj = None  # the stream (gzip member) being inflated; None between members
        self._carry = b""  # compressed bytes read past the end of the last member
        self._out = bytearray()
        self._done = False

    def _fill(self, n: int) -> None:
        while len(self._out) < n and not self._done:
            data, self._carry = self._carry or self._file.read(_READ_CHUNK), b""
            if not data:
                self._done = True
                if self._obj is not None and not self._obj.eof:
                    raise errors.DataLossError(None, None, "inflate() failed: the compressed "
                                               "stream ends before its end marker")
                return
            if self._obj is None:
                self._obj = zlib.decompressobj(self._wbits)
            try:
                self._out += self._obj.decompress(data)
            except zlib.error as e:
                raise _inflate_error(e) from None
            if self._obj.eof:
                if not self._gzip:
                    self._done = True  # a zlib stream is the whole file
                    return
                self._carry, self._obj = self._obj.unused_data, None

    def read(self, n: int) -> bytes:
        self._fill(n)
        out = bytes(self._out[:n])
        del self._out[:n]
        return out


class RecordReader:
    """Reads the records of one TFRecord file in order: ``read()`` -> ``(offset, data)`` or
    None at the end. ``compression``: ``""``, ``"ZLIB"`` or ``"GZIP"``."""

    def __init__(self, path: str, compression: str = ""):
        if compression not in ("", "ZLIB", "GZIP"):
            raise errors.InvalidArgumentError(None, None, "Unsupported compression_type: "
                                              f"{compression!r}")
        self.path = path
        try:
            self._file = open(path, "rb")  # noqa: SIM115 - closed by close()
        except FileNotFoundError:
            raise errors.NotFoundError(None, None, f"{path}; No such file or directory") \
                from None
        except IsADirectoryError:
            raise errors.FailedPreconditionError(None, None, f"{path}; Is a directory") \
                from None
        except OSError as e:
            raise errors.UnknownError(None, None, f"{path}: {e}") from None
        self._stream = _Inflater(self._file, compression) if compression else self._file
        self.offset = 0

    def read(self) -> tuple[int, bytes] | None:
        start = self.offset
        header = self._stream.read(HEADER_SIZE)
        if not header:
            return None
        if len(header) < HEADER_SIZE:
            raise errors.DataLossError(None, None, f"truncated record at {start}")
        length, length_crc = _HEADER.unpack(header)
        if crc32c.masked_value(header[:8]) != length_crc:
            hint = " (Is this even a TFRecord file?)" if start == 0 else ""
            raise errors.DataLossError(None, None, f"corrupted record at {start}{hint}")
        body = self._stream.read(length + FOOTER_SIZE)
        if len(body) < length + FOOTER_SIZE:
            raise errors.DataLossError(None, None, f"truncated record at {start}")
        data = body[:length]
        if crc32c.masked_value(data) != _FOOTER.unpack(body[length:])[0]:
            raise errors.DataLossError(None, None,
                                       f"corrupted record at {start + HEADER_SIZE}")
        self.offset = start + HEADER_SIZE + length + FOOTER_SIZE
        return start, data

    def close(self) -> None:
        self._file.close()

    def __iter__(self) -> Iterator[bytes]:
        try:
            while (record := self.read()) is not None:
                yield record[1]
        finally:
            self.close()


def read_records(path: str, compression: str = "") -> Iterator[bytes]:
    """The records of the file at ``path``, checked and in order."""
    return iter(RecordReader(path, compression))


def tf_record_iterator(path, options=None) -> Iterator[bytes]:
    """The records of a TFRecord file, one ``bytes`` at a time (TF1's
    ``tf.python_io.tf_record_iterator``); a damaged file raises ``DataLossError``."""
    compression = compression_of(options)
    path = path.decode() if isinstance(path, bytes) else str(path)
    reader = RecordReader(path, compression)  # opened now: a missing file fails at the call
    return iter(reader)
