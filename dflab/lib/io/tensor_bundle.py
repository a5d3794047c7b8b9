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
_FROM_ENUM = {protos.data_type_enum(tf_name): name for name, tf_name in _DT_NAMES.items()}


def data_filename(prefix: str, shard: int = 0, num_shards: int = 1) -> str:
    return f"{prefix}.data-{shard:05d}-of-{num_shards:05d}"


def index_filename(prefix: str) -> str:
    return prefix + ".index"


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
    name = _FROM_ENUM.get(number)
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
            self.entries = {k.decode("utf-8"): protos.BundleEntryProto.FromString(v)
                            for k, v in rows[1:]}
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
        if dtype_of_enum(entry.dtype) is None and not entry.slices:
            problem = f"dtype {protos.data_type_name(entry.dtype) or entry.dtype} unsupported"
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

    def read_bytes(self, name: str) -> bytes:
        entry = self.entries[name]
        path = data_filename(self.prefix, entry.shard_id, self.num_shards)
        try:
            with open(path, "rb") as f:
                # Never ask for more than the file holds: a damaged size must not allocate.
                available = max(0, os.fstat(f.fileno()).st_size - entry.offset)
                f.seek(entry.offset)
                blob = f.read(min(entry.size, available))
        except FileNotFoundError:
            raise errors.NotFoundError(None, None, f"Checkpoint data file {path} is missing "
                                       f"(index {index_filename(self.prefix)})") from None
        except PermissionError as e:
            raise errors.PermissionDeniedError(None, None, f"Checkpoint data file {path}: "
                                               f"{e.strerror}") from None
        except OSError as e:
            raise errors.DataLossError(None, None, f"Checkpoint data file {path} cannot be "
                                       f"read: {e.strerror}") from None
        if len(blob) != entry.size:
            raise errors.DataLossError(
                None, None, f"Checkpoint {path}: tensor {name!r} is truncated: "
                f"{len(blob)} of {entry.size} bytes at offset {entry.offset}")
        return blob

    def get_tensor(self, name: str) -> np.ndarray:
        entry = self.entries[name]
        if entry.slices:
            raise errors.UnimplementedError(
                None, None, f"Checkpoint {self.prefix}: tensor {name!r} was saved in slices "
                "(a partitioned variable); reading slices is not supported")
        blob = self.read_bytes(name)
        path = data_filename(self.prefix, entry.shard_id, self.num_shards)
        dtype, shape = self.dtype(name), self.shape(name)
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
