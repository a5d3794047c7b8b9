"""Checkpoint ops: ``SaveV2``, ``RestoreV2``, ``MergeV2Checkpoints`` (TF's V2 checkpoint ops),
and the two string helpers a sharded save needs, ``ShardedFilename`` and ``StringJoin``.

They are graph ops, as in the paper: the ``Saver`` builds them once and every save or restore is
an ordinary step, so they are placed like any op (on the CPU of the variables' device: only CPU
kernels exist) and run under the session's cancellation and timeouts. All are stateful (they touch
the file system), so nothing prunes, folds or merges them. The file format lives with the kernels
(``dflab.kernels.io_kernels``).

``RestoreV2`` takes an optional ``shapes`` attribute (a dflab extension): the expected shapes,
which give its outputs static shapes and let the kernel reject a mismatched checkpoint naming the
file and the tensor.
"""

from __future__ import annotations

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.registry import NotDifferentiable, register_op
from dflab.framework.tensor_shape import TensorShape, as_shape, unknown_shape


def _check_string(t, what: str, op_type: str, rank=None) -> None:
    if t.dtype.base_dtype is not _dt.string:
        raise TypeError(f"{op_type}: {what} must be a string tensor, got {t.dtype.name}")
    if rank is not None and t.shape.ndims is not None and t.shape.ndims != rank:
        raise ValueError(f"{op_type}: {what} must have rank {rank}, got shape {t.shape}")


def _check_names(op, names, slices, n: int) -> None:
    _check_string(names, "tensor_names", op.type, 1)
    _check_string(slices, "shape_and_slices", op.type, 1)
    for t, what in ((names, "tensor_names"), (slices, "shape_and_slices")):
        dim = t.shape.as_list()[0] if t.shape.ndims == 1 else None
        if dim is not None and dim != n:
            raise ValueError(f"{op.type}: {what} has {dim} entries but there are {n} tensors")


def _save_infer(op):
    prefix, names, slices, *tensors = op.inputs
    _check_string(prefix, "prefix", op.type, 0)
    _check_names(op, names, slices, len(tensors))
    return []


def _restore_infer(op):
    prefix, names, slices = op.inputs
    dtypes = op.get_attr("dtypes")
    _check_string(prefix, "prefix", op.type, 0)
    _check_names(op, names, slices, len(dtypes))
    shapes = op.attrs.get("shapes") or [unknown_shape()] * len(dtypes)
    if len(shapes) != len(dtypes):
        raise ValueError(f"RestoreV2: {len(shapes)} shapes for {len(dtypes)} dtypes")
    return [(_dt.as_dtype(d).base_dtype, as_shape(s)) for d, s in zip(dtypes, shapes)]


def _merge_infer(op):
    prefixes, dest = op.inputs
    _check_string(prefixes, "checkpoint_prefixes", op.type, 1)
    _check_string(dest, "destination_prefix", op.type, 0)
    return []


def _sharded_filename_infer(op):
    base, shard, num = op.inputs
    _check_string(base, "basename", op.type, 0)
    for t in (shard, num):
        if t.dtype.base_dtype is not _dt.int32:
            raise TypeError(f"ShardedFilename: shard and num_shards must be int32, got "
                            f"{t.dtype.name}")
    return [(_dt.string, TensorShape([]))]


def _string_join_infer(op):
    shape = TensorShape([])
    for t in op.inputs:
        _check_string(t, "inputs", op.type)
        if t.shape.ndims != 0:
            shape = t.shape if shape.ndims == 0 else shape.merge_with(t.shape)
    return [(_dt.string, shape)]


register_op("SaveV2", _save_infer, stateful=True, expensive=True)
register_op("RestoreV2", _restore_infer, stateful=True, expensive=True)
register_op("MergeV2Checkpoints", _merge_infer, stateful=True)
register_op("ShardedFilename", _sharded_filename_infer)
register_op("StringJoin", _string_join_infer)
for _t in ("SaveV2", "RestoreV2", "MergeV2Checkpoints", "ShardedFilename", "StringJoin"):
    NotDifferentiable(_t)


def _strings(x, name):
    return _ops.convert_to_tensor(x, dtype=_dt.string, name=name)


def save_v2(prefix, tensor_names, shape_and_slices, tensors, name=None,
            checkpoint_format=None):
    """Write ``tensors`` under ``tensor_names`` to the checkpoint ``prefix``, in TF's format
    or, with ``checkpoint_format="safetensors"`` (a dflab extension, kept on the node as the
    attr ``_checkpoint_format``), in dflab's earlier one."""
    tensors = list(tensors)
    inputs = [_strings(prefix, "prefix"), _strings(tensor_names, "tensor_names"),
              _strings(shape_and_slices, "shape_and_slices")] + tensors
    attrs = {"dtypes": [t.dtype.base_dtype for t in tensors]}
    if checkpoint_format not in (None, "tf"):
        attrs["_checkpoint_format"] = str(checkpoint_format)
    return _ops.apply_op("SaveV2", inputs, attrs, name)


def restore_v2(prefix, tensor_names, shape_and_slices, dtypes, name=None, shapes=None):
    """Read the named tensors from the checkpoint ``prefix``; returns a list of tensors."""
    attrs = {"dtypes": [_dt.as_dtype(d).base_dtype for d in dtypes]}
    if shapes is not None:
        attrs["shapes"] = [as_shape(s) for s in shapes]
    op = _ops.apply_op("RestoreV2", [_strings(prefix, "prefix"),
                                     _strings(tensor_names, "tensor_names"),
                                     _strings(shape_and_slices, "shape_and_slices")], attrs, name)
    return list(op.outputs)


def merge_v2_checkpoints(checkpoint_prefixes, destination_prefix, delete_old_dirs=True,
                         name=None):
    """Merge the per-shard checkpoints into ``destination_prefix`` (writes its index last)."""
    return _ops.apply_op("MergeV2Checkpoints",
                         [_strings(checkpoint_prefixes, "checkpoint_prefixes"),
                          _strings(destination_prefix, "destination_prefix")],
                         {"delete_old_dirs": bool(delete_old_dirs)}, name)


def sharded_filename(basename, shard, num_shards, name=None):
    """``basename-0000shard-of-0000num_shards``."""
    return _ops.apply_op("ShardedFilename", [_strings(basename, "basename"),
                                             _ops.convert_to_tensor(shard, dtype=_dt.int32),
                                             _ops.convert_to_tensor(num_shards, dtype=_dt.int32)],
                         None, name).outputs[0]


def string_join(inputs, separator="", name=None):
    return _ops.apply_op("StringJoin", [_strings(x, "input") for x in inputs],
                         {"separator": separator}, name).outputs[0]


__all__: list[str] = []
