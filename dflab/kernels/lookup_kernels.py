"""Lookup-table kernels: ``HashTableV2`` and the ops that fill and read a table.

A table is a resource in its device's ``ResourceMgr`` (keyed by ``shared_name`` or the table
op's name), so every step of a session sees the same table; its state is a ``TableState`` (a
dict from keys to values, filled once, under a lock). As TF's: a lookup before the table is
initialized is a ``FailedPreconditionError`` while its size is 0; initializing again with the
same entries does nothing and with different ones fails; a key given twice with different
values fails; a text file that is missing is a ``NotFoundError``, a line that cannot be read
an ``InvalidArgumentError`` naming the file and line.
"""

from __future__ import annotations

import threading

import numpy as np

from dflab.framework import errors
from dflab.kernels.registry import kernel


class TableState:
    """One hash table: its entries (``None`` until it is initialized)."""

    def __init__(self, name: str, key_dtype, value_dtype):
        self.name = name
        self.key_dtype = key_dtype
        self.value_dtype = value_dtype
        self.entries: dict | None = None
        self.lock = threading.Lock()

    def __repr__(self):
        size = "uninitialized" if self.entries is None else f"{len(self.entries)} entries"
        return f"<HashTable {self.name!r}: {size}>"

    def fill(self, keys, values, node) -> None:
        entries: dict = {}
        for k, v in zip(keys, values):
            if k in entries and entries[k] != v:
                raise errors.FailedPreconditionError(
                    None, node, f"HashTable has different value for same key. Key {_text(k)} "
                    f"has {_text(entries[k])} and trying to add value {_text(v)}")
            entries[k] = v
        with self.lock:
            if self.entries is None:
                self.entries = entries
            elif self.entries != entries:
                raise errors.FailedPreconditionError(
                    None, node, "Table was already initialized with different data.")


def _text(x) -> str:
    return x.decode(errors="replace") if isinstance(x, bytes) else str(x)


def _key(x):
    """A NumPy element as a hashable Python value (text as bytes: a fed string tensor may hold
    ``str`` objects)."""
    if isinstance(x, bytes):
        return x
    if isinstance(x, str):
        return x.encode()
    return x.item() if hasattr(x, "item") else x


@kernel("HashTableV2", host_only=True)
def _hash_table(node, ctx):
    a = node.attr
    key = a.get("shared_name") or node.name

    def create():
        return TableState(key, a["key_dtype"], a["value_dtype"])

    return lambda: ctx.resources.lookup_or_create("table", key, create,
                                                  a.get("container", ""))


def _import(node, ctx):
    def run(table, keys, values):
        keys, values = np.asarray(keys), np.asarray(values)
        if keys.shape != values.shape:
            raise errors.InvalidArgumentError(
                None, node, f"Expected shape {keys.shape} for value, got {values.shape}")
        table.fill([_key(k) for k in keys.ravel()], [_key(v) for v in values.ravel()], node)

    return run


kernel("LookupTableImportV2", host_only=True)(_import)
kernel("InitializeTableV2", host_only=True)(_import)


@kernel("InitializeTableFromTextFileV2", host_only=True)
def _init_from_text_file(node, ctx):
    a = node.attr
    key_index, value_index = int(a["key_index"]), int(a["value_index"])
    vocab_size, delimiter, offset = int(a.get("vocab_size", -1)), a.get("delimiter", "\t"), \
        int(a.get("offset", 0))

    def run(table, filename):
        path = _key(np.asarray(filename).item())
        path = path.decode() if isinstance(path, bytes) else str(path)
        try:
            with open(path, "rb") as f:
                lines = f.read().split(b"\n")
        except FileNotFoundError:
            raise errors.NotFoundError(None, node, f"{path}; No such file or directory") \
                from None
        if lines and lines[-1] == b"":
            lines.pop()  # the newline ending the last line
        lines = [ln[:-1] if ln.endswith(b"\r") else ln for ln in lines]
        if vocab_size > 0:
            if len(lines) < vocab_size:
                raise errors.InvalidArgumentError(
                    None, node, f"Invalid vocab_size in {path}: expected {vocab_size} but got "
                    f"{len(lines)}")
            lines = lines[:vocab_size]
        keys, values = [], []
        for number, line in enumerate(lines):
            keys.append(_field(line, number, key_index, table.key_dtype, path, node, delimiter))
            values.append(_field(line, number, value_index, table.value_dtype, path, node,
                                 delimiter, offset))
        table.fill(keys, values, node)

    return run


def _field(line: bytes, number: int, index: int, dtype, path: str, node, delimiter: str,
           offset: int = 0):
    """The key or value ``index`` names in ``line`` (the ``number``-th line), as ``dtype``."""
    if index == -1:  # TextFileIndex.LINE_NUMBER
        return number + offset
    if index == -2:  # TextFileIndex.WHOLE_LINE
        text = line
    else:
        parts = line.split(delimiter.encode()) if delimiter else line.split()
        if index >= len(parts):
            raise errors.InvalidArgumentError(
                None, node, f"Invalid number of columns in {path} line {number} "
                f"({line.decode(errors='replace')}) : expected {index + 1} got {len(parts)}")
        text = parts[index]
    if dtype.name == "string":
        return bytes(text)
    try:
        value = int(text) if dtype.is_integer else float(text)
        return _key(np.asarray(value, dtype=dtype.as_numpy_dtype))
    except (ValueError, OverflowError):
        raise errors.InvalidArgumentError(
            None, node, f"Field {text.decode(errors='replace')} in line {number} is not a "
            f"valid {dtype.name}.") from None


def _initialized(table: TableState, node) -> dict:
    entries = table.entries
    if entries is None:
        raise errors.FailedPreconditionError(None, node, "Table not initialized.")
    return entries


@kernel("LookupTableFindV2", host_only=True)
def _find(node, ctx):
    out_dtype = node.attr["Tout"].as_numpy_dtype

    def run(table, keys, default):
        entries = _initialized(table, node)
        keys = np.asarray(keys)
        default = _key(np.asarray(default).item() if np.ndim(default) == 0 else default)
        found = [entries.get(_key(k), default) for k in keys.ravel()]
        out = np.empty(keys.shape, dtype=object if out_dtype is object else out_dtype)
        out.ravel()[:] = found if found else []
        return out

    return run


@kernel("LookupTableSizeV2", host_only=True)
def _size(node, ctx):
    return lambda table: np.int64(len(table.entries or ()))


@kernel("LookupTableExportV2", host_only=True)
def _export(node, ctx):
    key_dtype = node.attr["Tkeys"].as_numpy_dtype
    value_dtype = node.attr["Tvalues"].as_numpy_dtype

    def run(table):
        with table.lock:
            items = list((table.entries or {}).items())
        keys = np.empty(len(items), dtype=key_dtype)
        values = np.empty(len(items), dtype=value_dtype)
        for i, (k, v) in enumerate(items):
            keys[i], values[i] = k, v
        return keys, values

    return run
