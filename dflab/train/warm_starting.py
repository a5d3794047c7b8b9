"""``tf.train.init_from_checkpoint``: variables initialized from a checkpoint instead of their
initializers. Each variable named by the assignment map gets a new initializer op, an assign
from a ``RestoreV2`` (of its slice, for a shard of a partitioned variable) on the CPU, so
``tf.global_variables_initializer()`` (or a Scaffold) loads the checkpoint's values, as TF's
does; nothing is read until that initializer runs.

The map pairs checkpoint names with variables: ``{"ckpt/name": var or "var/name"}`` one to
one, ``{"ckpt_scope/": "scope/"}`` every ``get_variable`` variable of a scope, ``"/"`` the
root. Names are looked up in the ``get_variable`` store, as in TF.
"""

from __future__ import annotations

import logging
from collections import abc

from dflab.framework import ops as _ops
from dflab.ops import array_ops, io_ops
from dflab.ops import variable_scope as _vs
from dflab.ops import variables as _variables
from dflab.ops.partitioned_variables import PartitionedVariable
from dflab.train import checkpoint_utils

logger = logging.getLogger("dflab.train")


def _is_variable(x) -> bool:
    return isinstance(x, _variables.Variable)


def _checkpoint_file(ckpt_dir_or_file) -> str:
    import os

    if os.path.isdir(str(ckpt_dir_or_file)):
        return checkpoint_utils.latest_checkpoint(ckpt_dir_or_file)
    return str(ckpt_dir_or_file)


def _collect_partitioned_variable(name, store_vars):
    if name + "/part_0" not in store_vars:
        return None
    shards, i = [], 0
    while f"{name}/part_{i}" in store_vars:
        shards.append(store_vars[f"{name}/part_{i}"])
        i += 1
    return shards


def _set_checkpoint_initializer(variable, ckpt_file, tensor_name, slice_info=None,
                                name="checkpoint_initializer"):
    """Make ``variable``'s initializer an assign of ``tensor_name`` (the part ``slice_info``
    places the shard at, for a shard: dflab's RestoreV2 reads whole tensors, so the shard's
    slice is cut from it)."""
    base_type = variable.dtype.base_dtype
    # On the CPU, where RestoreV2 runs, and not colocated with the variable: colocating would
    # pull the variable (and everything colocated with it) onto the CPU too.
    with _ops.device(variable.device), _ops.device("/cpu:0"):
        restore = io_ops.restore_v2(ckpt_file, [tensor_name], [""], [base_type],
                                    name=name)[0]
        if slice_info is not None:
            restore.set_shape(slice_info.full_shape)
            restore = array_ops.slice(restore, slice_info.var_offset, slice_info.var_shape)
    restore.set_shape(variable.shape)
    assign = variable.assign(restore)
    variable._initializer_op = assign if isinstance(assign, _ops.Operation) else assign.op
    variable._initial_value = restore


def _set_variable_or_list_initializer(variable_or_list, ckpt_file, tensor_name):
    if isinstance(variable_or_list, (list, tuple, PartitionedVariable)):
        slice_name = None
        for v in variable_or_list:
            info = v._save_slice_info
            if slice_name is None:
                slice_name = info.full_name
            elif slice_name != info.full_name:
                raise ValueError(f"Slices must all be from the same tensor: {slice_name} != "
                                 f"{info.full_name}")
            _set_checkpoint_initializer(v, ckpt_file, tensor_name, info)
    else:
        _set_checkpoint_initializer(variable_or_list, ckpt_file, tensor_name)


def init_from_checkpoint(ckpt_dir_or_file, assignment_map) -> None:
    """Initialize the variables ``assignment_map`` names from the checkpoint (a directory's
    latest, or a prefix); see the module docstring for the map's forms."""
    ckpt_file = _checkpoint_file(ckpt_dir_or_file)
    reader = checkpoint_utils.load_checkpoint(ckpt_dir_or_file)
    variable_map = reader.get_variable_to_shape_map()
    if isinstance(assignment_map, abc.Mapping):
        assignment_map = assignment_map.items()
    store_vars = _vs._get_default_variable_store()._vars
    for tensor_name_in_ckpt, current in sorted(assignment_map, key=lambda pair: pair[0]):
        if _is_variable(current) or isinstance(current, PartitionedVariable) or (
                isinstance(current, list) and all(_is_variable(v) for v in current)):
            var = current
        else:
            var = store_vars.get(current)
            if var is None:
                var = _collect_partitioned_variable(current, store_vars)
        if var is not None:
            _init_one(var, ckpt_dir_or_file, ckpt_file, tensor_name_in_ckpt, variable_map)
        else:
            _init_scope(current, tensor_name_in_ckpt, store_vars, ckpt_dir_or_file, ckpt_file,
                        variable_map)


def _init_one(var, ckpt_dir_or_file, ckpt_file, tensor_name, variable_map) -> None:
    if tensor_name not in variable_map:
        raise ValueError(f"Tensor {tensor_name} is not found in {ckpt_dir_or_file} checkpoint "
                         f"{variable_map}")
    if _is_variable(var) and not var.get_shape().is_compatible_with(variable_map[tensor_name]):
        raise ValueError(f"Shape of variable {var.name} ({var.get_shape()}) doesn't match with "
                         f"shape of tensor {tensor_name} ({variable_map[tensor_name]}) from "
                         "checkpoint reader.")
    _set_variable_or_list_initializer(var, ckpt_file, tensor_name)
    logger.debug("Initialize variable %s from checkpoint %s with %s", var, ckpt_dir_or_file,
                 tensor_name)


def _init_scope(current, tensor_name_in_ckpt, store_vars, ckpt_dir_or_file, ckpt_file,
                variable_map) -> None:
    """A scope-to-scope entry: every store variable under ``current``'s scope."""
    scopes = current[:current.rindex("/")] if "/" in current else ""
    if not tensor_name_in_ckpt.endswith("/"):
        raise ValueError(f"Assignment map with scope only name {scopes} should map to scope "
                         f"only {tensor_name_in_ckpt}. Should be 'scope/': 'other_scope/'.")
    scope_variables = set()
    for var_name in store_vars:
        if not scopes or var_name.startswith(scopes + "/"):
            if "/part_" in var_name:  # a shard stands for its partitioned variable
                var_name = var_name[:var_name.index("/part_")]
            scope_variables.add(var_name)
    for var_name in sorted(scope_variables):
        full_tensor_name = var_name[len(scopes):]
        if current != "/":
            full_tensor_name = full_tensor_name[1:]
        if tensor_name_in_ckpt != "/":
            full_tensor_name = tensor_name_in_ckpt + full_tensor_name
        if full_tensor_name.endswith("/"):
            full_tensor_name = full_tensor_name[:-1]
        if full_tensor_name not in variable_map:
            raise ValueError(f"Tensor {full_tensor_name} ({var_name[len(scopes) + 1:]} in "
                             f"{tensor_name_in_ckpt}) is not found in {ckpt_dir_or_file} "
                             "checkpoint")
        var = store_vars.get(var_name)
        if var is None:
            var = _collect_partitioned_variable(var_name, store_vars)
        _set_variable_or_list_initializer(var, ckpt_file, full_tensor_name)
