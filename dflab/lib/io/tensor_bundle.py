"""TensorFlow's V2 checkpoint format, the *tensor bundle* (``tensorflow/core/util/
tensor_bundle``): what ``tf.train.Saver`` writes and reads by default.

A checkpoint ``prefix`` is:

* ``prefix.data-0000i-of-0000N``: the tensors' bytes, one after another (little-endian, C
  order; a string tensor is its lengths as varints, the masked CRC32C of those lengths, then
  the strings' bytes);
* ``prefix.index``: a table (``lib/io/table.py``) whose key ``""`` holds a
  ``BundleHeaderProto`` (number of shards, endianness, format version) and whose other keys,
  the tensor names, hold ``BundleEntryProto``s (dtype, shape, shard, offset, size and the
  masked CRC32C of the bytes).

Invariants: a tensor is returned only when its bytes match its checksum, its size matches
its dtype and shape, and its data file holds it; any damage is a ``DataLossError`` naming the
file and the tensor. Writing is atomic per file (``atomic_write`` is passed in by the caller,
which owns the crash-safety protocol); the index is the last file written.
"""

from __future__ import annotations

import functools
import os
import struct

import numpy as np

from dflab.framework import dtypes as _dt
from dflab.framework import errors
from dflab.lib import protos
from dflab.lib.io import crc32c
from dflab.lib.io.table import build_table, get_varint, is_table, put_varint, read_table

HEADER_KEY = b""
VERSION = 1  # TF's kTensorBundleVersion
MIN_CONSUMER = 0

# dflab dtype name <-> TF's DataType enum name.
_DT_NAMES = {
    "float32": "DT_FLOAT", "float64": "DT_DOUBLE", "int32": "DT_INT32", "uint8": "DT_UINT8",
    "int16": "DT_INT16", "int8": "DT_INT8", "string": "DT_STRING", "complex64": "DT_COMPLEX64",
    "int64": "DT_INT64", "bool": "DT_BOOL", "uint16": "DT_UINT16",
    "complex128": "DT_COMPLEX128", "float16": "DT_HALF", "uint32": "DT_UINT32",
    "uint64": "DT_UINT64",
}


@functools.cache
def _from_enum() -> dict[int, str]:
    # Built on first use: it reads protobuf's enum, which dflab.lib loads lazily.
    return {protos.data_type_enum(tf_name): name for name, tf_name in _DT_NAMES.items()}


def data_filename(prefix: str, shard: int = 0, num_shards: int = 1) -> str:
    return f"{prefix}.data-{shard:05d}-of-{num_shards:05d}"


def index_filename(prefix: str) -> str:
    return prefix + ".index"


def data_file_error(path: str, index: str, e: OSError) -> errors.OpError:
    """The TF error for a checkpoint data file ``path`` (of the index ``index``) that could not
    be read: missing, not permitted, or unreadable."""
    if isinstance(e, FileNotFoundError):
        return errors.NotFoundError(None, None, f"Checkpoint data file {path} is missing "
                                    f"(index {index})")
    if isinstance(e, PermissionError):
        return errors.PermissionDeniedError(None, None, f"Checkpoint data file {path}: "
                                            f"{e.strerror}")
    return errors.DataLossError(None, None, f"Checkpoint data file {path} cannot be read: "
                                f"{e.strerror}")


def is_bundle_index(data: bytes) -> bool:
    """Whether the bytes of an ``.index`` file are a tensor bundle's table."""
    return is_table(data)


def dtype_enum(dtype) -> int:
    """TF's ``DataType`` number of a dflab dtype; ``InvalidArgumentError`` for one a bundle
    cannot hold (resource, variant)."""
    name = _DT_NAMES.get(_dt.as_dtype(dtype).base_dtype.name)
    if name is None:
        raise errors.InvalidArgumentError(None, None, f"a checkpoint cannot hold a tensor of "
                                          f"dtype {_dt.as_dtype(dtype).name}")
    return protos.data_type_enum(name)


def dtype_of_enum(number: int):
    """The dflab dtype of TF's ``DataType`` number; None for one dflab lacks."""
    name = _from_enum().get(number)
    return None if name is None else _dt.as_dtype(name)


# --- encoding -----------------------------------------------------------------------------------
def _encode_strings(flat) -> tuple[bytes, int]:
    """A string tensor's bytes and its (unmasked) CRC32C, as TF's ``WriteStringTensor``: the
    checksum covers each length as a little-endian uint32 (uint64 when it does not fit), the
    masked checksum of the lengths, then the strings."""
    items = [x.encode("utf-8") if isinstance(x, str) else bytes(x) for x in flat]
    lengths = bytearray()
    crc = 0
    for item in items:
        put_varint(lengths, len(item))
        width = "<I" if len(item) <= 0xFFFFFFFF else "<Q"
        crc = crc32c.extend(crc, struct.pack(width, len(item)))
    length_crc = struct.pack("<I", crc32c.mask(crc))
    crc = crc32c.extend(crc, length_crc)
    for item in items:
        crc = crc32c.extend(crc, item)
    return bytes(lengths) + length_crc + b"".join(items), crc


def encode_tensor(value) -> tuple[bytes, object, list[int], int]:
    """``(bytes, dflab dtype, shape, unmasked CRC32C)`` of a tensor as a bundle stores it."""
    arr = value if isinstance(value, np.ndarray) else np.asarray(value)
    dtype = _dt.string if arr.dtype == object or arr.dtype.kind in "SU" else \
        _dt.as_dtype(arr.dtype)
    if dtype is _dt.string:
        blob, crc = _encode_strings(arr.reshape(-1))
    else:
        little = arr.astype(arr.dtype.newbyteorder("<"), copy=False)
        blob = np.ascontiguousarray(little).tobytes()
        crc = crc32c.value(blob)
    return blob, dtype, list(arr.shape), crc


def _string_lengths(blob: bytes, n: int) -> tuple[list[int], int]:
    """The ``n`` lengths at the start of a stored string tensor, and where they end."""
    lengths, pos = [], 0
    try:
        for _ in range(n):
            length, pos = get_varint(blob, pos)
            lengths.append(length)
    except ValueError:
        raise ValueError("string lengths run past the tensor's bytes") from None
    if pos + 4 + sum(lengths) != len(blob):
        raise ValueError(f"string bytes: {len(blob) - pos - 4} stored, lengths say "
                         f"{sum(lengths)}")
    return lengths, pos


def _stored_crc(dtype, blob: bytes, n: int) -> int:
    """The CRC32C TF computes over a stored tensor's bytes (see ``_encode_strings``)."""
    if dtype is not _dt.string:
        return crc32c.value(blob)
    lengths, pos = _string_lengths(blob, n)
    crc = 0
    for length in lengths:
        crc = crc32c.extend(crc, struct.pack("<I" if length <= 0xFFFFFFFF else "<Q", length))
    return crc32c.extend(crc, blob[pos:])


def shape_proto(shape) -> object:
    return protos.TensorShapeProto(dim=[protos.TensorShapeProto.Dim(size=int(d))
                                        for d in shape])


def write_data_file(prefix: str, names, values, atomic_write, shard: int = 0,
                    num_shards: int = 1) -> dict:
    """Write the data file of one shard; returns ``{name: BundleEntryProto}`` for its index."""
    entries, chunks, offset = {}, [], 0
    for name, value in zip(names, values):
        if name in entries:
            raise errors.InvalidArgumentError(None, None, f"Duplicate tensor name {name!r} in "
                                              f"checkpoint {prefix}")
        blob, dtype, shape, crc = encode_tensor(value)
        entries[name] = protos.BundleEntryProto(
            dtype=dtype_enum(dtype), shape=shape_proto(shape), shard_id=shard, offset=offset,
            size=len(blob), crc32c=crc32c.mask(crc))
        chunks.append(blob)
        offset += len(blob)
    atomic_write(data_filename(prefix, shard, num_shards), b"".join(chunks))
    return entries


def index_bytes(entries: dict, num_shards: int) -> bytes:
    """The ``.index`` table of a bundle of ``num_shards`` shards holding ``entries``."""
    header = protos.BundleHeaderProto(num_shards=num_shards,
                                      endianness=protos.BundleHeaderProto.LITTLE,
                                      version=protos.VersionDef(producer=VERSION,
                                                                min_consumer=MIN_CONSUMER))
    rows = [(HEADER_KEY, header.SerializeToString())]
    rows += [(name.encode("utf-8"), entry.SerializeToString())
             for name, entry in entries.items()]
    return build_table(rows)


def write_index(prefix: str, entries: dict, num_shards: int, atomic_write) -> None:
    atomic_write(index_filename(prefix), index_bytes(entries, num_shards))


# --- decoding -----------------------------------------------------------------------------------
def _split_strings(blob: bytes, n: int) -> list[bytes]:
    lengths, pos = _string_lengths(blob, n)
    pos += 4  # the lengths' own checksum, covered by the entry's
    out = []
    for length in lengths:
        out.append(blob[pos:pos + length])
        pos += length
    return out


def decode_tensor(blob: bytes, dtype, shape: list[int]) -> np.ndarray:
    """A tensor of ``dtype`` and ``shape`` from its stored bytes (``ValueError`` when they
    do not fit)."""
    n = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if dtype is _dt.string:
        flat = np.empty(n, dtype=object)
        flat[:] = _split_strings(blob, n)
        return flat.reshape(shape)
    np_type = np.dtype(dtype._np).newbyteorder("<")
    if len(blob) != n * np_type.itemsize:
        raise ValueError(f"{len(blob)} bytes stored, {dtype.name}{shape} needs "
                         f"{n * np_type.itemsize}")
    return np.frombuffer(blob, dtype=np_type).astype(dtype._np).reshape(shape)


class BundleReader:
    """Reads one tensor bundle: its index at once, each tensor when asked (checksummed)."""

    def __init__(self, prefix: str, index_data: bytes):
        self.prefix = prefix
        where = index_filename(prefix)
        rows = read_table(index_data, where)
        if not rows or rows[0][0] != HEADER_KEY:
            raise errors.DataLossError(None, None, f"{where}: corrupted checkpoint index: no "
                                       "bundle header")
        try:
            header = protos.BundleHeaderProto.FromString(rows[0][1])
            # Keys of a partitioned variable's slices start with a zero byte (TF's ordered
            # code); they are not tensors of their own.
            self.entries = {k.decode("utf-8"): protos.BundleEntryProto.FromString(v)
                            for k, v in rows[1:] if not k.startswith(b"\0")}
            self._slices = {k: protos.BundleEntryProto.FromString(v)
                            for k, v in rows[1:] if k.startswith(b"\0")}
        except Exception as e:  # noqa: BLE001 - protobuf's DecodeError, UnicodeDecodeError
            raise errors.DataLossError(None, None, f"{where}: corrupted checkpoint index: "
                                       f"{type(e).__name__}: {e}") from None
        self._check_header(header, where)
        self.num_shards = header.num_shards
        for name, entry in self.entries.items():
            self._check_entry(name, entry, where)

    def _check_header(self, header, where: str) -> None:
        if header.endianness != protos.BundleHeaderProto.LITTLE:
            raise errors.UnimplementedError(None, None, f"{where}: big-endian checkpoints are "
                                            "not supported")
        if header.version.min_consumer > VERSION or VERSION in header.version.bad_consumers:
            raise errors.InvalidArgumentError(
                None, None, f"{where}: checkpoint format version {header.version.producer} "
                f"needs a reader of version {header.version.min_consumer} or newer")
        if header.num_shards < 1:
            raise errors.DataLossError(None, None, f"{where}: corrupted checkpoint index: "
                                       f"{header.num_shards} shards")

    def _check_entry(self, name: str, entry, where: str) -> None:
        problem = None
        # A dtype TF has and dflab lacks (TF's iterator state, a variant) leaves the entry
        # listed with no dtype: reading it is refused, the other tensors are read as ever.
        if dtype_of_enum(entry.dtype) is None and not entry.slices and \
                protos.data_type_name(entry.dtype) is None:
            problem = f"dtype {entry.dtype} unknown"
        elif not 0 <= entry.shard_id < self.num_shards:
            problem = f"names shard {entry.shard_id} of {self.num_shards}"
        elif entry.offset < 0 or entry.size < 0:
            problem = "has a negative offset or size"
        elif any(d.size < 0 for d in entry.shape.dim) or entry.shape.unknown_rank:
            problem = "has no fully defined shape"
        if problem is not None:
            raise errors.DataLossError(None, None, f"{where}: corrupted checkpoint index: "
                                       f"tensor entry {name!r} {problem}")

    # --- what a checkpoint reader asks -------------------------------------------------------
    def dtype(self, name: str):
        return dtype_of_enum(self.entries[name].dtype)

    def shape(self, name: str) -> list[int]:
        return [int(d.size) for d in self.entries[name].shape.dim]

    def sliced(self, name: str) -> bool:
        return bool(self.entries[name].slices)

    def data_files(self) -> list[str]:
        return [data_filename(self.prefix, k, self.num_shards) for k in range(self.num_shards)]

    def read_bytes(self, name: str, entry=None) -> bytes:
        entry = self.entries[name] if entry is None else entry
        path = data_filename(self.prefix, entry.shard_id, self.num_shards)
        try:
            with open(path, "rb") as f:
                # Never ask for more than the file holds: a damaged size must not allocate.
                available = max(0, os.fstat(f.fileno()).st_size - entry.offset)
                f.seek(entry.offset)
                blob = f.read(min(entry.size, available))
        except OSError as e:
            raise data_file_error(path, index_filename(self.prefix), e) from None
        if len(blob) != entry.size:
            raise errors.DataLossError(
                None, None, f"Checkpoint {path}: tensor {name!r} is truncated: "
                f"{len(blob)} of {entry.size} bytes at offset {entry.offset}")
        return blob

    def get_tensor(self, name: str) -> np.ndarray:
        entry = self.entries[name]
        if entry.slices:
            return self._assemble(name, entry)
        return self._decode(name, entry, self.dtype(name), self.shape(name))

    def _decode(self, name: str, entry, dtype, shape: list[int]) -> np.ndarray:
        blob = self.read_bytes(name, entry)
        path = data_filename(self.prefix, entry.shard_id, self.num_shards)
        try:
            n = int(np.prod(shape, dtype=np.int64)) if shape else 1
            crc = _stored_crc(dtype, blob, n)
            if crc32c.mask(crc) != entry.crc32c:
                raise ValueError(f"Checksum does not match: stored {entry.crc32c} vs. "
                                 f"calculated on the restored bytes {crc32c.mask(crc)}")
            return decode_tensor(blob, dtype, shape)
        except ValueError as e:
            raise errors.DataLossError(None, None, f"Checkpoint {path}: tensor {name!r} is "
                                       f"corrupted ({e})") from None

    def _assemble(self, name: str, entry) -> np.ndarray:
        """A partitioned variable's full value from its slices (TF saves each under a key
        made of the name and the slice's extents)."""
        dtype, shape = self.dtype(name), self.shape(name)
        out = np.zeros(shape, dtype=object if dtype is _dt.string else dtype._np)
        for piece in entry.slices:
            if len(piece.extent) != len(shape):
                raise errors.DataLossError(None, None, f"Checkpoint {self.prefix}: a slice of "
                                           f"{name!r} has {len(piece.extent)} dimensions")
            bounds = [(e.start, e.length if e.HasField("length") else -1)
                      for e in piece.extent]
            where = tuple(slice(start, dim if length < 0 else start + length)
                          for (start, length), dim in zip(bounds, shape))
            slice_entry = self._slices.get(slice_key(name, bounds))
            if slice_entry is None:
                raise errors.DataLossError(None, None, f"Checkpoint {self.prefix}: the slice "
                                           f"{bounds} of {name!r} is missing")
            value = self._decode(name, slice_entry, dtype,
                                 [int(d.size) for d in slice_entry.shape.dim])
            try:
                out[where] = value
            except ValueError:
                raise errors.DataLossError(None, None, f"Checkpoint {self.prefix}: the slice "
                                           f"{bounds} of {name!r} does not fit its shape "
                                           f"{shape}") from None
        return out


# --- the keys of slices: TF's ordered code ------------------------------------------------------
def _num_increasing(value: int) -> bytes:
    body = value.to_bytes((value.bit_length() + 7) // 8, "big") if value else b""
    return bytes([len(body)]) + body


def _string_increasing(text: bytes) -> bytes:
    return text.replace(b"\x00", b"\x00\xff").replace(b"\xff", b"\xff\x00") + b"\x00\x01"


_SIGNED_HEADER = [(0, 0), (0x80, 0), (0xC0, 0), (0xE0, 0), (0xF0, 0), (0xF8, 0), (0xFC, 0),
                  (0xFE, 0), (0xFF, 0), (0xFF, 0x80), (0xFF, 0xC0)]


def _signed_increasing(value: int) -> bytes:
    """TF's ``OrderedCode::WriteSignedNumIncreasing``."""
    x = ~value if value < 0 else value
    if x < 64:
        return bytes([(0x80 ^ value) & 0xFF])
    length = (x.bit_length() + 1 + 6) // 7  # one byte per 7 bits, the sign included
    raw = bytearray(value.to_bytes(10, "big", signed=True)[10 - length:])
    raw[0] ^= _SIGNED_HEADER[length][0]
    raw[1] ^= _SIGNED_HEADER[length][1]
    return bytes(raw)


def slice_key(name: str, bounds) -> bytes:
    """The index key of the slice ``bounds`` (``(start, length)`` per dimension, length -1
    for a whole dimension) of the tensor ``name`` (TF's ``EncodeTensorNameSlice``)."""
    key = _num_increasing(0) + _string_increasing(name.encode("utf-8"))
    key += _num_increasing(len(bounds))
    for start, length in bounds:
        key += _signed_increasing(start) + _signed_increasing(length)
    return key


def read_index_file(prefix: str) -> bytes | None:
    """The bytes of ``prefix.index``; None when it is missing."""
    try:
        with open(index_filename(prefix), "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


def data_files_of(prefix: str) -> list[str]:
    """The data files the bundle index at ``prefix`` names (none if it is not readable)."""
    data = read_index_file(prefix)
    if data is None or not is_bundle_index(data):
        return []
    try:
        return BundleReader(prefix, data).data_files()
    except errors.OpError:
        return []


__all__ = ["BundleReader", "data_filename", "data_files_of", "decode_tensor", "dtype_enum",
           "encode_tensor", "index_bytes", "index_filename", "is_bundle_index",
           "read_index_file", "write_data_file", "write_index"]
