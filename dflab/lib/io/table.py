"""TensorFlow's immutable sorted tables (``tensorflow/core/lib/io/table*``, LevelDB's SSTable
format), which hold a checkpoint's ``.index``: a map from byte-string keys to values, written
once in key order.

Layout: data blocks, a (here empty) meta-index block, an index block naming each data block
by a key at or after its last key, and a 48-byte footer (the two blocks' handles, padding, the
magic number). A block is its entries (each key sharing a prefix with the one before, with a
full key every ``RESTART_INTERVAL`` entries), the restart offsets and their count, followed by
a compression byte (always 0: uncompressed, as TF's bundle writer asks) and the masked CRC32C
of the block and that byte.

Invariant: ``read_table`` returns entries only from blocks whose checksums match and whose
structure is within bounds; anything else is a ``DataLossError`` naming the file. Writing
follows TF's builder step by step (block size, restarts, separator keys), so an index written
here is byte for byte the one TF writes for the same entries.
"""

from __future__ import annotations

import struct

from dflab.framework import errors
from dflab.lib.io import crc32c

MAGIC = 0xDB4775248B80FB57
BLOCK_SIZE = 262144  # TF's table::Options::block_size
RESTART_INTERVAL = 16  # TF's table::Options::block_restart_interval
_MAX_HANDLE = 20  # two varint64s at most
FOOTER_SIZE = 2 * _MAX_HANDLE + 8
_TRAILER_SIZE = 5  # compression type byte + masked crc
_NO_COMPRESSION = 0


# --- varints ------------------------------------------------------------------------------------
def put_varint(out: bytearray, value: int) -> None:
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def get_varint(data, pos: int, limit: int | None = None) -> tuple[int, int]:
    """``(value, position after it)``; ``ValueError`` when it runs past ``limit``."""
    limit = len(data) if limit is None else limit
    result = shift = 0
    while True:
        if pos >= limit or shift > 63:
            raise ValueError("bad varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def _handle(offset: int, size: int) -> bytes:
    out = bytearray()
    put_varint(out, offset)
    put_varint(out, size)
    return bytes(out)


# --- writing ------------------------------------------------------------------------------------
class _BlockBuilder:
    def __init__(self):
        self.buffer = bytearray()
        self.restarts = [0]
        self.counter = 0
        self.last_key = b""

    def add(self, key: bytes, value: bytes) -> None:
        shared = 0
        if self.counter < RESTART_INTERVAL:
            n = min(len(self.last_key), len(key))
            while shared < n and self.last_key[shared] == key[shared]:
                shared += 1
        else:
            self.restarts.append(len(self.buffer))
            self.counter = 0
        put_varint(self.buffer, shared)
        put_varint(self.buffer, len(key) - shared)
        put_varint(self.buffer, len(value))
        self.buffer += key[shared:]
        self.buffer += value
        self.last_key = key
        self.counter += 1

    def size_estimate(self) -> int:
        return len(self.buffer) + 4 * len(self.restarts) + 4

    def empty(self) -> bool:
        return not self.buffer

    def finish(self) -> bytes:
        tail = b"".join(struct.pack("<I", r) for r in self.restarts)
        return bytes(self.buffer) + tail + struct.pack("<I", len(self.restarts))


def _shortest_separator(start: bytes, limit: bytes) -> bytes:
    """A short key >= ``start`` and < ``limit`` (TF's ``FindShortestSeparator``)."""
    n = min(len(start), len(limit))
    i = 0
    while i < n and start[i] == limit[i]:
        i += 1
    if i < n and start[i] < 0xFF and start[i] + 1 < limit[i]:
        return start[:i] + bytes([start[i] + 1])
    return start


def _short_successor(key: bytes) -> bytes:
    """A short key >= ``key`` (TF's ``FindShortSuccessor``)."""
    for i, byte in enumerate(key):
        if byte != 0xFF:
            return key[:i] + bytes([byte + 1])
    return key


class TableBuilder:
    """Builds a table in memory from entries added in strictly increasing key order."""

    def __init__(self):
        self._out = bytearray()
        self._data = _BlockBuilder()
        self._index = _BlockBuilder()
        self._last_key: bytes | None = None
        self._pending_handle: bytes | None = None

    def add(self, key: bytes, value: bytes) -> None:
        if self._last_key is not None and key <= self._last_key:
            raise ValueError(f"table keys must be added in increasing order: {key!r} after "
                             f"{self._last_key!r}")
        if self._pending_handle is not None:
            self._index.add(_shortest_separator(self._last_key, key), self._pending_handle)
            self._pending_handle = None
        self._last_key = key
        self._data.add(key, value)
        if self._data.size_estimate() >= BLOCK_SIZE:
            self._flush()

    def _flush(self) -> None:
        if self._data.empty():
            return
        self._pending_handle = self._write_block(self._data)
        self._data = _BlockBuilder()

    def _write_block(self, block: _BlockBuilder) -> bytes:
        contents = block.finish()
        handle = _handle(len(self._out), len(contents))
        kind = bytes([_NO_COMPRESSION])
        crc = crc32c.mask(crc32c.extend(crc32c.value(contents), kind))
        self._out += contents + kind + struct.pack("<I", crc)
        return handle

    def finish(self) -> bytes:
        """The whole table file."""
        self._flush()
        metaindex = self._write_block(_BlockBuilder())
        if self._pending_handle is not None:
            self._index.add(_short_successor(self._last_key), self._pending_handle)
            self._pending_handle = None
        index = self._write_block(self._index)
        footer = (metaindex + index).ljust(2 * _MAX_HANDLE, b"\0")
        self._out += footer + struct.pack("<Q", MAGIC)
        return bytes(self._out)


def build_table(entries) -> bytes:
    """A table of ``(key, value)`` pairs (sorted here)."""
    builder = TableBuilder()
    for key, value in sorted(entries):
        builder.add(key, value)
    return builder.finish()


# --- reading ------------------------------------------------------------------------------------
def is_table(data: bytes) -> bool:
    """Whether ``data`` ends like a table (its footer's magic number)."""
    return len(data) >= FOOTER_SIZE and struct.unpack("<Q", data[-8:])[0] == MAGIC


def _read_handle(data, pos: int, limit: int) -> tuple[int, int, int]:
    offset, pos = get_varint(data, pos, limit)
    size, pos = get_varint(data, pos, limit)
    return offset, size, pos


def _block(data: bytes, offset: int, size: int) -> bytes:
    end = offset + size
    if offset < 0 or size < 0 or end + _TRAILER_SIZE > len(data) - FOOTER_SIZE:
        raise ValueError(f"block at {offset} of {size} bytes runs past the end of the file")
    contents = data[offset:end]
    kind = data[end:end + 1]
    stored = struct.unpack("<I", data[end + 1:end + _TRAILER_SIZE])[0]
    if crc32c.mask(crc32c.extend(crc32c.value(contents), kind)) != stored:
        raise ValueError(f"block checksum mismatch at {offset}")
    if kind[0] != _NO_COMPRESSION:
        raise ValueError(f"block at {offset} is compressed (type {kind[0]}); only "
                         "uncompressed tables are supported")
    return contents


def _block_entries(block: bytes) -> list[tuple[bytes, bytes]]:
    if len(block) < 4:
        raise ValueError("block too short")
    num_restarts = struct.unpack("<I", block[-4:])[0]
    limit = len(block) - 4 - 4 * num_restarts
    if num_restarts == 0 or limit < 0:
        raise ValueError("bad restart array")
    entries, pos, key = [], 0, b""
    while pos < limit:
        shared, pos = get_varint(block, pos, limit)
        non_shared, pos = get_varint(block, pos, limit)
        length, pos = get_varint(block, pos, limit)
        if shared > len(key) or pos + non_shared + length > limit:
            raise ValueError("block entry out of bounds")
        key = key[:shared] + block[pos:pos + non_shared]
        pos += non_shared
        entries.append((key, block[pos:pos + length]))
        pos += length
    return entries


def read_table(data: bytes, where: str) -> list[tuple[bytes, bytes]]:
    """Every ``(key, value)`` of the table ``data`` in key order; ``where`` (the file) names
    it in a ``DataLossError``."""
    try:
        if not is_table(data):
            raise ValueError("not an sstable (bad magic number)")
        footer = len(data) - FOOTER_SIZE
        _, _, pos = _read_handle(data, footer, footer + 2 * _MAX_HANDLE)
        offset, size, _ = _read_handle(data, pos, footer + 2 * _MAX_HANDLE)
        entries = []
        for _, handle in _block_entries(_block(data, offset, size)):
            block_offset, block_size, _ = _read_handle(handle, 0, len(handle))
            entries += _block_entries(_block(data, block_offset, block_size))
    except (ValueError, struct.error) as e:
        raise errors.DataLossError(None, None, f"{where}: corrupted table: {e}") from None
    keys = [k for k, _ in entries]
    if any(b <= a for a, b in zip(keys, keys[1:])):
        raise errors.DataLossError(None, None, f"{where}: corrupted table: keys out of order")
    return entries
