"""``SparseTensor``: a tensor held as a coordinate list, TF's composite of three tensors.

``indices`` (int64 ``[N, rank]``), ``values`` (``[N]``) and ``dense_shape`` (int64 ``[rank]``)
are ordinary graph tensors; the composite itself is plain Python and never an op input (TF's
``convert_to_tensor`` refuses it too). ``Session.run`` fetches one as a ``SparseTensorValue``
and feeds one from a ``SparseTensorValue`` or an ``(indices, values, dense_shape)`` triple
(``runtime/fetches.py``). Invariant: the three components live in one graph, and the static
``shape`` is the dense shape as far as it is known when built (or set with ``set_shape``).
"""

from __future__ import annotations

import collections

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.constant_op import constant_value_as_shape
from dflab.framework.tensor_shape import TensorShape


class SparseTensorValue(collections.namedtuple("SparseTensorValue",
                                               ["indices", "values", "dense_shape"])):
    """What ``Session.run`` returns for a fetched ``SparseTensor`` (NumPy arrays)."""

    __slots__ = ()


class SparseTensor:
    """A sparse tensor: ``dense[tuple(indices[i])] = values[i]``, zero elsewhere, of shape
    ``dense_shape``. Most ops expect ``indices`` in row-major order (``tf.sparse.reorder``)."""

    _is_composite_tensor = True  # convert_to_tensor refuses it, as TF's

    @classmethod
    def from_value(cls, sparse_tensor_value) -> SparseTensor:
        if not is_sparse(sparse_tensor_value):
            raise TypeError(f"Argument sparse_tensor_value={sparse_tensor_value} is neither a "
                            "SparseTensor nor SparseTensorValue.")
        if isinstance(sparse_tensor_value, SparseTensor):
            return sparse_tensor_value
        return SparseTensor(indices=sparse_tensor_value.indices,
                            values=sparse_tensor_value.values,
                            dense_shape=sparse_tensor_value.dense_shape)

    def __init__(self, indices, values, dense_shape):
        with _ops.name_scope(None, "SparseTensor"):
            indices = _ops.convert_to_tensor(indices, name="indices", dtype=_dt.int64)
            values = _ops.convert_to_tensor(values, name="values")
            dense_shape = _ops.convert_to_tensor(dense_shape, name="dense_shape",
                                                 dtype=_dt.int64)
        self._indices = indices
        self._values = values
        self._dense_shape = dense_shape
        self._dense_shape_default = constant_value_as_shape(dense_shape)
        indices_shape = indices.shape.with_rank(2)
        values_shape = values.shape.with_rank(1)
        dense_shape_shape = dense_shape.shape.with_rank(1)
        # As TF: the number of entries agrees, and each index has one column per dimension.
        indices_shape.dims[0].merge_with(values_shape.dims[0])
        indices_shape.dims[1].merge_with(dense_shape_shape.dims[0])

    # --- the components ---------------------------------------------------------------------
    @property
    def indices(self):
        return self._indices

    @property
    def values(self):
        return self._values

    @property
    def dense_shape(self):
        return self._dense_shape

    @property
    def op(self):
        """The op that produces ``values``."""
        return self._values.op

    @property
    def dtype(self):
        return self._values.dtype

    @property
    def graph(self):
        return self._indices.graph

    @property
    def shape(self) -> TensorShape:
        return self._dense_shape_default

    def get_shape(self) -> TensorShape:
        return self._dense_shape_default

    def set_shape(self, shape) -> None:
        if not isinstance(shape, TensorShape):
            shape = TensorShape(shape)
        self._dense_shape_default = self._dense_shape_default.merge_with(shape)

    def with_values(self, new_values) -> SparseTensor:
        """This tensor's indices and shape with other values."""
        return SparseTensor(self._indices, new_values, self._dense_shape)

    def consumers(self) -> list:
        """The ops that read any of the three components (each once)."""
        seen, out = set(), []
        for t in (self._indices, self._values, self._dense_shape):
            for op in t.consumers():
                if id(op) not in seen:
                    seen.add(id(op))
                    out.append(op)
        return out

    def eval(self, feed_dict=None, session=None) -> SparseTensorValue:
        """The value in the default (or given) session: a ``SparseTensorValue``."""
        return _ops._run_with_default_session(self, feed_dict, session)

    def __repr__(self):
        return (f"SparseTensor(indices={self._indices}, values={self._values}, "
                f"dense_shape={self._dense_shape})")

    __str__ = __repr__


def is_sparse(x) -> bool:
    """Whether ``x`` is a ``SparseTensor`` or a ``SparseTensorValue``."""
    return isinstance(x, (SparseTensor, SparseTensorValue))


def convert_to_tensor_or_sparse_tensor(value, dtype=None, name=None):
    """A ``SparseTensor`` for a ``SparseTensor``/``SparseTensorValue``, else a ``Tensor``."""
    if dtype is not None:
        dtype = _dt.as_dtype(dtype)
    if isinstance(value, SparseTensorValue):
        value = SparseTensor.from_value(value)
    if isinstance(value, SparseTensor):
        if dtype and not dtype.is_compatible_with(value.dtype):
            raise RuntimeError(f"Sparse dtype mismatch. Requested: {dtype.name},  Actual: "
                               f"{value.dtype.name}")
        return value
    return _ops.convert_to_tensor(value, dtype=dtype, name=name)


def convert_to_sparse_tensor(value) -> SparseTensor:
    """``value`` as a ``SparseTensor`` (what sparse ops take): TF's check and message."""
    if isinstance(value, SparseTensorValue):
        value = SparseTensor.from_value(value)
    if not isinstance(value, SparseTensor):
        raise TypeError(f"Input must be a SparseTensor. Received: {value!r}")
    return value
