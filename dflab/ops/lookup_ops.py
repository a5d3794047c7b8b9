"""Lookup tables (``tf.lookup``): stateful key -> value maps kept on their device, as TF's.

A table is a resource: ``HashTableV2`` outputs its handle (the table's state lives in the
device's ``ResourceMgr``, keyed by ``shared_name`` or the op's name, as a queue's does; see
``dflab.kernels.lookup_kernels``). It is filled once by an initializer op — ``LookupTableImportV2``
from two tensors (``KeyValueTensorInitializer``) or ``InitializeTableFromTextFileV2`` from a text
file (``TextFileInitializer``) — which joins the ``TABLE_INITIALIZERS`` collection, so
``tf.tables_initializer()`` runs them all. ``LookupTableFindV2`` maps keys (any shape) to values,
a missing key to the table's default; ``LookupTableSizeV2`` and ``LookupTableExportV2`` report
what the table holds. Every op on a table is colocated with the table's op.
``StaticVocabularyTable`` wraps a ``StaticHashTable`` and sends keys it lacks to hash buckets
(FarmHash's ``Fingerprint64``, as TF's), built from ordinary ops.
"""

from __future__ import annotations

import contextlib
import uuid

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework import sparse_tensor as _sparse
from dflab.framework.ops import GraphKeys
from dflab.framework.registry import NotDifferentiable, register_op
from dflab.framework.tensor_shape import TensorShape, unknown_shape
from dflab.ops import control_flow_ops, indexing_ops, math_ops, string_hash_ops, string_ops


# --- schemas ----------------------------------------------------------------------------------
def _table_infer(op):
    return [(_dt.resource, TensorShape([]))]


def _check_handle(op):
    h = op.inputs[0]
    if h.dtype.base_dtype is not _dt.resource:
        raise TypeError(f"{op.type}: input 0 must be a table handle (resource), got "
                        f"{h.dtype.name}")


def _import_infer(op):
    _check_handle(op)
    keys, values = op.inputs[1], op.inputs[2]
    if keys.shape.ndims not in (None, 1):
        raise ValueError(f"{op.type}: keys must be a vector, got shape {keys.shape}")
    if not keys.shape.is_compatible_with(values.shape):
        raise ValueError(f"{op.type}: keys and values must have the same size, got shapes "
                         f"{keys.shape} and {values.shape}")
    return []


def _text_init_infer(op):
    _check_handle(op)
    if op.inputs[1].shape.ndims not in (None, 0):
        raise ValueError(f"{op.type}: filename must be a scalar, got shape {op.inputs[1].shape}")
    return []


def _find_infer(op):
    _check_handle(op)
    keys, default = op.inputs[1], op.inputs[2]
    return [(default.dtype.base_dtype, keys.shape)]


def _size_infer(op):
    _check_handle(op)
    return [(_dt.int64, TensorShape([]))]


def _export_infer(op):
    _check_handle(op)
    return [(op.get_attr("Tkeys"), unknown_shape()), (op.get_attr("Tvalues"), unknown_shape())]


register_op("HashTableV2", _table_infer, stateful=True)
register_op("LookupTableImportV2", _import_infer, stateful=True)
register_op("InitializeTableV2", _import_infer, stateful=True)
register_op("InitializeTableFromTextFileV2", _text_init_infer, stateful=True)
register_op("LookupTableFindV2", _find_infer, stateful=True)
register_op("LookupTableSizeV2", _size_infer, stateful=True)
register_op("LookupTableExportV2", _export_infer, stateful=True)
for _t in ("HashTableV2", "LookupTableImportV2", "InitializeTableV2",
           "InitializeTableFromTextFileV2", "LookupTableFindV2", "LookupTableSizeV2",
           "LookupTableExportV2"):
    NotDifferentiable(_t)


def _with_table(handle):
    """Ops on a table are colocated with its op (eager ops have none: they run where the
    table's state is)."""
    if _ops.executing_eagerly():
        return contextlib.nullcontext()
    return _ops.colocate_with(handle.op)


class _KeyValueDtypes:
    """The ``key_dtype`` and ``value_dtype`` that a table and its initializer both report,
    read from the ``_key_dtype`` and ``_value_dtype`` their constructors set."""

    @property
    def key_dtype(self):
        return self._key_dtype

    @property
    def value_dtype(self):
        return self._value_dtype


# --- initializers -----------------------------------------------------------------------------
class TableInitializerBase(_KeyValueDtypes):
    """What fills a table: its key and value dtypes and the op that does it."""

    def __init__(self, key_dtype, value_dtype):
        self._key_dtype = _dt.as_dtype(key_dtype)
        self._value_dtype = _dt.as_dtype(value_dtype)

    def initialize(self, table):
        raise NotImplementedError

    def _check_table_dtypes(self, table) -> None:
        if self._key_dtype != table.key_dtype or self._value_dtype != table.value_dtype:
            raise TypeError(f"Invalid key/value dtypes: table uses "
                            f"{table.key_dtype}/{table.value_dtype}, initializer gives "
                            f"{self._key_dtype}/{self._value_dtype}")


class KeyValueTensorInitializer(TableInitializerBase):
    """Fills a table from a vector of keys and one of values."""

    def __init__(self, keys, values, key_dtype=None, value_dtype=None, name=None):
        with _ops.name_scope(name, "key_value_init", [keys, values]) as scope:
            self._keys = _ops.convert_to_tensor(keys, dtype=key_dtype, name="keys")
            self._values = _ops.convert_to_tensor(values, dtype=value_dtype, name="values")
            self._name = scope
        super().__init__(self._keys.dtype.base_dtype, self._values.dtype.base_dtype)

    def initialize(self, table):
        self._check_table_dtypes(table)
        with _ops.name_scope(self._name, values=[table.resource_handle, self._keys,
                                                 self._values]):
            with _with_table(table.resource_handle):
                op = _ops.apply_op("LookupTableImportV2",
                                   [table.resource_handle, self._keys, self._values],
                                   {"Tin": self._keys.dtype.base_dtype,
                                    "Tout": self._values.dtype.base_dtype},
                                   "LookupTableImportV2")
        _ops.add_to_collection(GraphKeys.TABLE_INITIALIZERS, op)
        return op


class TextFileIndex:
    """Which part of a line is a key or a value: the whole line, or its line number."""

    WHOLE_LINE = -2
    LINE_NUMBER = -1


class TextFileInitializer(TableInitializerBase):
    """Fills a table from a text file: one entry per line, the key and the value each the
    whole line (``TextFileIndex.WHOLE_LINE``, a string), the line number
    (``TextFileIndex.LINE_NUMBER``, an int64, from 0) or a column of the line split at
    ``delimiter`` (converted to the dtype). ``vocab_size`` reads only that many lines, and
    fails when the file has fewer."""

    def __init__(self, filename, key_dtype, key_index, value_dtype, value_index,
                 vocab_size=None, delimiter="\t", name=None, value_index_offset=0):
        if not isinstance(filename, _ops.Tensor) and not filename:
            raise ValueError("`filename` argument required for tf.lookup.TextFileInitializer")
        self._filename_arg = filename
        key_dtype = _dt.as_dtype(key_dtype)
        value_dtype = _dt.as_dtype(value_dtype)
        if key_index < -2:
            raise ValueError(f"`key_index` should be >= -2, received: {key_index}.")
        if key_index == TextFileIndex.LINE_NUMBER and key_dtype != _dt.int64:
            raise ValueError("`key_dtype` must be int64 if `key_index` is -1, received: "
                             f"{key_dtype}")
        if key_index == TextFileIndex.WHOLE_LINE and not (key_dtype.is_integer
                                                          or key_dtype == _dt.string):
            raise ValueError("`key_dtype` should be either integer or string for `key_index` "
                             f"-2, received: {key_dtype}")
        if value_index < -2:
            raise ValueError(f"`value_index` should be >= -2, received: {value_index}")
        if value_index == TextFileIndex.LINE_NUMBER and value_dtype != _dt.int64:
            raise ValueError("`value_dtype` must be int64 for `value_index` -1, received: "
                             f"{value_dtype}")
        if value_index == TextFileIndex.WHOLE_LINE and value_dtype != _dt.string:
            raise ValueError("`value_dtype` must be string for `value_index` -2, received: "
                             f"{value_dtype}")
        if vocab_size is not None and vocab_size <= 0:
            raise ValueError(f"`vocab_size` should be > 0, received: {vocab_size}")
        self._key_index = key_index
        self._value_index = value_index
        self._vocab_size = vocab_size
        self._delimiter = delimiter
        self._name = name
        self._offset = value_index_offset
        super().__init__(key_dtype, value_dtype)

    def initialize(self, table):
        self._check_table_dtypes(table)
        with _ops.name_scope(self._name, "text_file_init", [table.resource_handle]):
            filename = _ops.convert_to_tensor(self._filename_arg, _dt.string, name="asset_filepath")
            with _with_table(table.resource_handle):
                op = _ops.apply_op(
                    "InitializeTableFromTextFileV2", [table.resource_handle, filename],
                    {"key_index": self._key_index, "value_index": self._value_index,
                     "vocab_size": -1 if self._vocab_size is None else int(self._vocab_size),
                     "delimiter": self._delimiter, "offset": int(self._offset)},
                    "InitializeTableFromTextFileV2")
        _ops.add_to_collection(GraphKeys.TABLE_INITIALIZERS, op)
        return op


# --- tables -----------------------------------------------------------------------------------
class StaticHashTable(_KeyValueDtypes):
    """A table filled once by ``initializer`` and read-only afterwards; a key it lacks looks up
    ``default_value`` (TF1's ``tf.lookup.StaticHashTable``: its initializer op joins
    ``TABLE_INITIALIZERS``)."""

    def __init__(self, initializer, default_value, name=None, experimental_is_anonymous=False):
        self._initializer = initializer
        self._key_dtype = initializer.key_dtype
        self._value_dtype = initializer.value_dtype
        self._default_value = _ops.convert_to_tensor(default_value, dtype=self._value_dtype)
        self._default_value.get_shape().merge_with(TensorShape([]))
        eager = _ops.executing_eagerly()
        # An eager table has no op to name its state by: a name of its own, as TF 2's.
        shared_name = f"hash_table_{uuid.uuid4()}" if eager else ""
        self._resource_handle = _ops.apply_op(
            "HashTableV2", [],
            {"container": "", "shared_name": shared_name, "use_node_name_sharing": not eager,
             "key_dtype": self._key_dtype, "value_dtype": self._value_dtype},
            name or "hash_table").outputs[0]
        self._name = (name or "hash_table") if eager else \
            self._resource_handle.op.name.split("/")[-1]
        self._init_op = initializer.initialize(self)

    @property
    def name(self) -> str:
        return self._name

    @property
    def resource_handle(self):
        return self._resource_handle

    @property
    def initializer(self):
        """The op that fills the table."""
        return self._init_op

    init = initializer

    @property
    def default_value(self):
        return self._default_value

    def _op(self, op_type, inputs, attrs, name, default):
        with _ops.name_scope(name, f"{self._name}_{default}", [self._resource_handle]):
            with _with_table(self._resource_handle):
                return _ops.apply_op(op_type, [self._resource_handle, *inputs], attrs, op_type)

    def lookup(self, keys, name=None):
        """The values of ``keys`` (any shape), ``default_value`` where a key is missing."""
        keys = _ops.convert_to_tensor(keys, name="keys")
        if keys.dtype.base_dtype != self._key_dtype:
            raise TypeError(f"Dtype of argument `keys` must be {self._key_dtype}, received: "
                            f"{keys.dtype}")
        op = self._op("LookupTableFindV2", [keys, self._default_value],
                      {"Tin": self._key_dtype, "Tout": self._value_dtype}, name, "Lookup")
        return op.outputs[0]

    def size(self, name=None):
        """The number of entries (0 before the table is initialized)."""
        return self._op("LookupTableSizeV2", [], {}, name, "Size").outputs[0]

    def export(self, name=None):
        """(keys, values): every entry of the table, in no particular order."""
        op = self._op("LookupTableExportV2", [],
                      {"Tkeys": self._key_dtype, "Tvalues": self._value_dtype}, name,
                      "Export")
        return op.outputs[0], op.outputs[1]


class StaticVocabularyTable(_KeyValueDtypes):
    """Keys to int64 ids: a key the initializer's table holds maps to its value, any other key
    to ``vocab_size + Fingerprint64(key) % num_oov_buckets`` (an integer key hashed as its
    decimal string), as TF1's ``tf.lookup.StaticVocabularyTable``. Without an initializer
    every key goes to a bucket. The table part is a ``StaticHashTable`` with default -1; the
    rest is a composition of ordinary ops, as TF's is."""

    def __init__(self, initializer, num_oov_buckets, lookup_key_dtype=None, name=None,
                 experimental_is_anonymous=False):
        if num_oov_buckets <= 0:
            raise ValueError("`num_oov_buckets` must be > 0; use StaticHashTable.")
        if name:
            name = name.rstrip("/")
        if initializer:
            lookup_key_dtype = _check_vocabulary_dtypes(initializer, lookup_key_dtype)
            self._table = StaticHashTable(initializer, default_value=-1)
            name = name or self._table.name
        else:
            lookup_key_dtype = _dt.string
            self._table = None
            name = name or "hash_bucket"
        if not lookup_key_dtype.is_integer and lookup_key_dtype != _dt.string:
            raise TypeError(f"Invalid `key_dtype`, expected integer or string, got "
                            f"{lookup_key_dtype}")
        self._num_oov_buckets = num_oov_buckets
        self._table_name = name.split("/")[-1]
        self._key_dtype = lookup_key_dtype
        self._value_dtype = _dt.int64

    @property
    def name(self) -> str:
        return self._table_name

    @property
    def resource_handle(self):
        """The vocabulary table's handle (None without an initializer)."""
        return None if self._table is None else self._table.resource_handle

    @property
    def initializer(self):
        """The op that fills the vocabulary table (a fresh no-op without one)."""
        if self._table is not None:
            return self._table.initializer
        with _ops.name_scope(None, "init"):
            return control_flow_ops.no_op()

    def size(self, name=None):
        """The vocabulary's size plus ``num_oov_buckets``."""
        with _ops.name_scope(name, f"{self.name}_Size"):
            if self._table is not None:
                size = self._table.size()
            else:
                size = _ops.convert_to_tensor(0, dtype=_dt.int64)
            return size + self._num_oov_buckets

    def lookup(self, keys, name=None):
        """The ids of ``keys`` (a tensor of any shape, or a ``SparseTensor`` whose values are
        looked up)."""
        if keys.dtype.base_dtype != self._key_dtype:
            raise TypeError(f"Dtype of argument `keys` must be {self._key_dtype}, received: "
                            f"{keys.dtype}")
        sparse = isinstance(keys, _sparse.SparseTensor)
        values = keys.values if sparse else keys
        if self._table is not None and self._table.key_dtype.base_dtype == _dt.int64:
            values = math_ops.cast(values, _dt.int64)
        with _ops.name_scope(name, f"{self.name}_Lookup"):
            if values.dtype.base_dtype != _dt.string:
                values_str = string_ops.as_string(values)
            else:
                values_str = values
            ids = string_hash_ops.string_to_hash_bucket_fast(
                values_str, num_buckets=self._num_oov_buckets, name="hash_bucket")
            if self._table is not None:
                found = self._table.lookup(values)
                buckets = math_ops.add(ids, self._table.size())
                known = math_ops.not_equal(found, self._table.default_value)
                ids = indexing_ops.where_v2(known, found, buckets)
        if sparse:
            return _sparse.SparseTensor(keys.indices, ids, keys.dense_shape)
        return ids

    def __getitem__(self, keys):
        return self.lookup(keys)


def _check_vocabulary_dtypes(initializer, lookup_key_dtype):
    """The lookup key dtype a vocabulary table takes, after TF's checks of the initializer."""
    lookup_key_dtype = initializer.key_dtype if lookup_key_dtype is None else \
        _dt.as_dtype(lookup_key_dtype)
    supported = (_dt.int64, _dt.string)
    if initializer.key_dtype not in supported:
        raise TypeError(f"Invalid `key_dtype`, expected one of (tf.int64, tf.string), but got "
                        f"{initializer.key_dtype}.")
    if initializer.key_dtype.is_integer != lookup_key_dtype.is_integer:
        wanted = "integer" if lookup_key_dtype.is_integer else "non-integer"
        raise TypeError(f"Invalid `key_dtype`, expected {wanted} but got "
                        f"{initializer.key_dtype}.")
    if initializer.value_dtype != _dt.int64:
        raise TypeError(f"Invalid `value_dtype`, expected {_dt.int64} but got "
                        f"{initializer.value_dtype}.")
    return lookup_key_dtype


def tables_initializer(name="init_all_tables"):
    """One op that runs every table initializer of the graph (``TABLE_INITIALIZERS``)."""
    initializers = _ops.get_collection(GraphKeys.TABLE_INITIALIZERS)
    if initializers:
        return control_flow_ops.group(*initializers, name=name)
    return control_flow_ops.no_op(name=name)


initialize_all_tables = tables_initializer

__all__ = ["tables_initializer", "initialize_all_tables"]
