"""``tf.LMDBReader``: a reader of LMDB databases for queue-based input pipelines, as TF 1.x's.

Each work item of the filename queue is an LMDB database: a data file (opened without a
subdirectory) or a directory holding ``data.mdb``. A read yields the records of its main
database in the database's key order (LMDB's cursor order: bytewise), the record's key as
the key and its data as the value; then the next database. It reads through
``ReaderReadV2`` / ``ReaderReadUpToV2`` like the other readers (``dflab.ops.reader_ops``);
the kernel (``dflab.kernels.lmdb_reader_kernels``) needs the optional ``lmdb`` package
(``pip install 'dflab[lmdb]'``). TF 2.21 still builds the op but its kernel is gone; TF 1.x's
aborted the process on a missing or damaged file, where dflab fails the read with
``NotFoundError`` or ``DataLossError``.
"""

from __future__ import annotations

import importlib.util

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.registry import NotDifferentiable, register_op
from dflab.framework.tensor_shape import TensorShape
from dflab.ops.reader_ops import ReaderBase

MISSING_LMDB = ("tf.LMDBReader needs the lmdb package, which dflab installs only on request: "
                "pip install 'dflab[lmdb]'")


def _reader_infer(op):
    return [(_dt.resource, TensorShape([]))]


register_op("LMDBReader", _reader_infer, stateful=True)
NotDifferentiable("LMDBReader")


class LMDBReader(ReaderBase):
    """Reads the ``(key, value)`` records of LMDB databases, in key order (see the module
    docstring). ``options`` is accepted and unused, as in TF."""

    def __init__(self, name=None, options=None):
        if importlib.util.find_spec("lmdb") is None:
            raise ImportError(MISSING_LMDB)
        op = _ops.apply_op("LMDBReader", [], {"shared_name": "", "container": ""},
                           name or "LMDBReader")
        super().__init__(op.outputs[0])


__all__ = ["LMDBReader"]
