"""Partitioned variables: one logical variable stored as shards along one axis, so that a large
embedding table spreads over parameter-server tasks (TF1's ``PartitionedVariable`` and its
partitioners).

``tf.get_variable(name, shape, partitioner=p)`` asks ``p(shape=…, dtype=…)`` how many pieces
each axis gets (one axis at most may be split), then makes the shards ``name/part_0``, … (the
first ``dim % n`` shards one row larger, as TF), each an ordinary variable: a
``replica_device_setter`` puts them on ps tasks round-robin. Each shard carries its
``_save_slice_info`` (its place in the full variable), by which ``Saver`` saves and restores
the shards as the one variable ``name``. ``embedding_lookup`` takes the ``PartitionedVariable``
and gathers on each shard where it lives.
"""

from __future__ import annotations

import math

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.tensor_shape import TensorShape, as_shape


class SaveSliceInfo:
    """Where a shard sits in its full variable (TF's ``Variable.SaveSliceInfo``)."""

    def __init__(self, full_name, full_shape, var_offset, var_shape):
        self.full_name = full_name
        self.full_shape = list(full_shape)
        self.var_offset = list(var_offset)
        self.var_shape = list(var_shape)

    @property
    def spec(self) -> str:
        """TF's slice spec: "full shape" then "offset,length" per dimension."""
        dims = " ".join(str(d) for d in self.full_shape)
        slices = ":".join(f"{o},{n}" for o, n in zip(self.var_offset, self.var_shape))
        return f"{dims} {slices}"

    def __repr__(self):
        return f"<SaveSliceInfo {self.full_name} {self.spec}>"


class PartitionedVariable:
    """A variable stored as shards along one axis (iterate it for the shards)."""

    def __init__(self, name, shape, dtype, variable_list, partitions):
        self._name = name
        self._shape = as_shape(shape)
        self._dtype = _dt.as_dtype(dtype)
        self._variable_list = sorted(variable_list, key=lambda v: v._save_slice_info.var_offset)
        self._partitions = list(partitions)
        self._axis = next((i for i, p in enumerate(self._partitions) if p > 1), 0)
        self._concat = None

    def __iter__(self):
        return iter(self._variable_list)

    def __len__(self):
        return len(self._variable_list)

    def _get_variable_list(self) -> list:
        return list(self._variable_list)

    def _get_partitions(self) -> list:
        return list(self._partitions)

    @property
    def name(self) -> str:
        return self._name

    @property
    def dtype(self):
        return self._dtype

    @property
    def shape(self) -> TensorShape:
        return self._shape

    def get_shape(self) -> TensorShape:
        return self._shape

    @property
    def graph(self):
        return self._variable_list[0].graph

    def as_tensor(self):
        """The whole variable: the shards concatenated (where the consumer runs)."""
        from dflab.ops import array_ops

        with _ops.name_scope(None):
            if self._concat is None:
                self._concat = array_ops.concat([v.value() for v in self._variable_list],
                                                self._axis, name=f"{self._name}/ConcatPartitions")
            return self._concat

    def _as_tensor(self):  # what convert_to_tensor uses
        return self.as_tensor()

    def assign(self, value, use_locking=False, name=None):
        raise NotImplementedError("Assigning to a PartitionedVariable: assign to its shards")

    def __repr__(self):
        return (f"<PartitionedVariable '{self._name}' shape={self._shape} "
                f"partitions={self._partitions}>")


def _partition_sizes(dim: int, n: int) -> list:
    """Shard sizes along the split axis: the first ``dim % n`` one larger (TF's rule)."""
    base, extras = divmod(dim, n)
    return [base + 1 if i < extras else base for i in range(n)]


def create_partitioned_variable(make_shard, name, shape, dtype, partitioner):
    """Shards of ``name`` as ``partitioner`` splits ``shape``; ``make_shard(shard name, shard
    shape, offset)`` creates one (``get_variable``'s single-variable path)."""
    shape = as_shape(shape)
    if not shape.is_fully_defined():
        raise ValueError(f"Partitioned variable {name}: the shape must be fully defined, got "
                         f"{shape}")
    dims = shape.as_list()
    partitions = list(partitioner(shape=shape, dtype=_dt.as_dtype(dtype)))
    if len(partitions) != len(dims) or any(not isinstance(p, int) or p < 1
                                           for p in partitions):
        raise ValueError(f"Partitioner for {name} returned {partitions}: one positive integer "
                         f"per dimension of {dims} is needed")
    split = [i for i, p in enumerate(partitions) if p > 1]
    if len(split) > 1:
        raise ValueError(f"Partitioner for {name} splits several axes ({partitions}): only one "
                         "may be partitioned")
    axis = split[0] if split else 0
    n = partitions[axis]
    if n > dims[axis]:
        raise ValueError(f"Cannot partition {name} ({dims}) into {n} pieces along axis {axis}")
    shards, offset = [], 0
    for i, size in enumerate(_partition_sizes(dims[axis], n)):
        shard_shape = list(dims)
        shard_shape[axis] = size
        start = [0] * len(dims)
        start[axis] = offset
        v = make_shard(f"{name}/part_{i}", shard_shape, start)
        v._save_slice_info = SaveSliceInfo(name, dims, start, shard_shape)
        shards.append(v)
        offset += size
    return PartitionedVariable(name, dims, dtype, shards, partitions)


# --- partitioners (TF's functions, same arguments and results) ------------------------------
def fixed_size_partitioner(num_shards, axis=0):
    """Split ``axis`` into ``num_shards`` pieces."""
    def partitioner(shape, dtype=None, **unused):
        shape = as_shape(shape)
        if axis >= shape.ndims:
            raise ValueError(f"Cannot partition along axis {axis} a variable of shape {shape}")
        out = [1] * shape.ndims
        out[axis] = int(num_shards)
        return out

    return partitioner


def variable_axis_size_partitioner(max_shard_bytes, axis=0, bytes_per_string_element=16,
                                   max_shards=None):
    """As many pieces along ``axis`` as keep each shard under ``max_shard_bytes``."""
    if max_shard_bytes < 1 or bytes_per_string_element < 1:
        raise ValueError("Both max_shard_bytes and bytes_per_string_element must be positive")
    if max_shards is not None and max_shards < 1:
        raise ValueError("max_shards must be positive")

    def partitioner(shape, dtype, **unused):
        shape = as_shape(shape)
        dtype = _dt.as_dtype(dtype).base_dtype
        dims = shape.as_list()
        elem = bytes_per_string_element if dtype is _dt.string else dtype.size
        slice_bytes = elem * math.prod(d for i, d in enumerate(dims) if i != axis)
        slices_per_shard = max(1, max_shard_bytes // max(slice_bytes, 1))
        shards = int(math.ceil(dims[axis] / slices_per_shard))
        if max_shards is not None:
            shards = min(shards, max_shards)
        out = [1] * len(dims)
        out[axis] = max(1, min(shards, dims[axis]))
        return out

    return partitioner


def min_max_variable_partitioner(max_partitions=1, axis=0, min_slice_size=256 << 10,
                                 bytes_per_string_element=16):
    """Pieces of at least ``min_slice_size`` bytes along ``axis``, at most ``max_partitions``."""
    if min_slice_size <= 0:
        raise ValueError("min_slice_size must be positive")

    def partitioner(shape, dtype, **unused):
        shape = as_shape(shape)
        dtype = _dt.as_dtype(dtype).base_dtype
        dims = shape.as_list()
        elem = bytes_per_string_element if dtype is _dt.string else dtype.size
        total = math.prod(dims) * elem
        pieces = max(1, min(max_partitions, dims[axis], math.ceil(total / min_slice_size)))
        out = [1] * len(dims)
        out[axis] = int(pieces)
        return out

    return partitioner


__all__ = ["PartitionedVariable", "fixed_size_partitioner", "min_max_variable_partitioner",
           "variable_axis_size_partitioner"]
