"""The kernel of ``LMDBReader``: a reader state with the interface ``ReaderReadV2`` reads
through (``next_record``, ``start_file``, ``reset``, ``produced``), walking one LMDB database
at a time with a cursor of a read-only transaction (records are read as they are asked for,
so a database larger than memory streams). ``lmdb`` is imported when a reader first opens a
database: without it the read fails with ``UnimplementedError`` naming the extra."""

from __future__ import annotations

import os
import threading

import numpy as np

from dflab.framework import errors
from dflab.kernels.registry import kernel


def _lmdb():
    try:
        import lmdb
    except ImportError:
        raise errors.UnimplementedError(
            None, None, "LMDBReader needs the lmdb package: pip install 'dflab[lmdb]'") from None
    return lmdb


class LMDBState:
    """One reader: the open database and its cursor, and how many records were produced."""

    def __init__(self):
        self._lock = threading.Lock()
        self._env = None
        self._txn = None
        self._records = None  # the cursor's iterator over (key, value)
        self.produced = 0
        self.files_done = 0

    def _close(self) -> None:
        if self._env is not None:
            self._txn.abort()
            self._env.close()
        self._env = self._txn = self._records = None

    def start_file(self, name: str) -> None:
        lmdb = _lmdb()
        subdir = os.path.isdir(name)
        data = os.path.join(name, "data.mdb") if subdir else name
        if not os.path.exists(data):
            raise errors.NotFoundError(None, None, f"{data}; No such file or directory")
        try:
            env = lmdb.open(name, subdir=subdir, readonly=True, lock=False,
                            max_dbs=0)
            txn = env.begin(buffers=False)
        except lmdb.Error as e:
            raise errors.DataLossError(None, None, f"{name}: not a readable LMDB database: "
                                                   f"{e}") from None
        with self._lock:
            self._close()
            self._env, self._txn = env, txn
            self._records = txn.cursor().iternext(keys=True, values=True)
            self.files_done += 1

    def next_record(self):
        with self._lock:
            if self._records is None:
                return None
            lmdb = _lmdb()
            try:
                key, value = next(self._records)
            except StopIteration:
                self._close()
                return None
            except lmdb.Error as e:
                self._close()
                raise errors.DataLossError(None, None, f"LMDB database is damaged: {e}") \
                    from None
            self.produced += 1
        return np.array(bytes(key), dtype=object), np.array(bytes(value), dtype=object)

    def reset(self) -> None:
        with self._lock:
            self._close()
            self.produced = 0
            self.files_done = 0


@kernel("LMDBReader", host_only=True)
def _lmdb_reader(node, ctx):
    key = node.attr.get("shared_name") or node.name

    def reader():
        return ctx.resources.lookup_or_create("reader", key, LMDBState,
                                              node.attr.get("container", ""))

    return reader
