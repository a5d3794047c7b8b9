"""``tf.train.init_from_checkpoint``: variables initialized from a checkpoint instead of their
initializers. Each variable named by the assignment map gets a new initializer op, an assign
from a ``RestoreV2`` (of its slice, for a shard of a partitioned variable) on the CPU, so
``tf.global_variables_initializer()`` (or a Scaffold) loads the checkpoint's values, as TF's
does; nothing is read until that initializer runs.

The map pairs checkpoint names with variables: ``{"ckpt/name": var or "var/name"}`` one to
one, ``{"ckpt_scope/": "scope/"}`` every ``get_variable`` variable of a scope, ``"/"`` the
root. Names are looked up in the ``get_variable`` store, as in TF.

``tf.train.warm_start`` selects variables by regex or list and initializes them the same way,
or, with a ``VocabInfo``, through a remapping of their rows (or columns) from an old to a new
vocabulary (TF's ``GenerateVocabRemapping`` + ``LoadAndRemapMatrix``, composed here of
``RestoreV2``, gathers and a select). Where TF reads the vocabulary files when the
initializer runs, dflab reads them when the graph is built; and since the number of entries
the backup initializer fills is then known, any initializer serves as backup (TF's must
accept a shape computed at run time). Object-based checkpoints are not searched for renames.
"""

from __future__ import annotations

import collections
import logging
from collections import abc

import numpy as np

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.ops import array_ops, init_ops, io_ops
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


# --- warm_start and vocabulary remapping ------------------------------------------------------
class VocabInfo(collections.namedtuple("VocabInfo", [
        "new_vocab", "new_vocab_size", "num_oov_buckets", "old_vocab", "old_vocab_size",
        "backup_initializer", "axis"])):
    """How to warm-start a variable whose rows (``axis=0``, an embedding) or columns
    (``axis=1``, an output layer) follow a vocabulary that changed: each new entry takes the
    old row/column of the same token, and entries without one (and the ``num_oov_buckets``
    extra rows/columns) take ``backup_initializer`` (zeros by default)."""

    def __new__(cls, new_vocab, new_vocab_size, num_oov_buckets, old_vocab, old_vocab_size=-1,
                backup_initializer=None, axis=0):
        if axis not in (0, 1):
            raise ValueError("The only supported values for the axis argument are 0 and 1.  "
                             f"Provided axis: {axis}")
        return super().__new__(cls, new_vocab, new_vocab_size, num_oov_buckets, old_vocab,
                               old_vocab_size, backup_initializer, axis)


def _vocab_lines(path: str) -> list[bytes]:
    """A vocabulary file's entries, one per line (a final newline ends the last one)."""
    with open(path, "rb") as f:
        lines = f.read().split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return [line[:-1] if line.endswith(b"\r") else line for line in lines]


def _vocab_remapping(new_vocab, old_vocab, offset, count, old_vocab_size=-1) -> np.ndarray:
    """Per new vocabulary entry ``offset .. offset+count-1``, its index in the old vocabulary
    (the first ``old_vocab_size`` entries, all with -1), or -1 (TF's GenerateVocabRemapping;
    the files are read when the graph is built)."""
    old = _vocab_lines(old_vocab)
    if old_vocab_size != -1:
        old = old[:old_vocab_size]
    index = {}
    for i, token in enumerate(old):
        index.setdefault(token, i)
    new = _vocab_lines(new_vocab)[offset:offset + count]
    return np.array([index.get(token, -1) for token in new], dtype=np.int64)


def _remapped_matrix(ckpt_path, old_tensor_name, offset, num_rows, num_cols, initializer,
                     row_remap, col_remap, num_row_oov, num_col_oov):
    """TF's LoadAndRemapMatrix: the old tensor's entries at the remapped rows and columns;
    each missing entry takes the next of ``initializer([missing, 1])`` in row-major order;
    then the OOV rows and columns from ``initializer``."""
    rows = row_remap if row_remap is not None else np.arange(offset, offset + num_rows)
    cols = col_remap if col_remap is not None else np.arange(num_cols)
    present = (rows >= 0)[:, None] & (cols >= 0)[None, :]
    missing = int((~present).sum())
    with _ops.device("/cpu:0"):
        old = io_ops.restore_v2(ckpt_path, [old_tensor_name], [""], [_dt.float32])[0]
    picked = array_ops.gather(array_ops.gather(old, np.maximum(rows, 0)), np.maximum(cols, 0),
                              axis=1)
    fill = array_ops.reshape(_ops.convert_to_tensor(initializer([missing, 1])), [missing])
    # Missing cell k (row-major) takes fill[k]; present cells point past the end, at a zero.
    order = np.where(present, missing, np.cumsum(~present).reshape(present.shape) - 1)
    padded = array_ops.concat([fill, array_ops.zeros([1], _dt.float32)], 0)
    out = array_ops.where(present, picked, array_ops.gather(padded, order.astype(np.int32)))
    if num_row_oov > 0:
        out = array_ops.concat([out, initializer([num_row_oov, num_cols])], 0)
    if num_col_oov > 0:
        out = array_ops.concat([out, initializer([num_rows + num_row_oov, num_col_oov])], 1)
    return out


def _warm_start_var_with_vocab(var, vocab_info, prev_ckpt, prev_tensor_name):
    if not (vocab_info.new_vocab and vocab_info.new_vocab_size and prev_ckpt
            and vocab_info.old_vocab):
        raise ValueError("Invalid args: Must provide all of [current_vocab_path, "
                         "current_vocab_size, prev_ckpt, prev_vocab_path}.")
    shards = list(var) if isinstance(var, (list, tuple, PartitionedVariable)) else [var]
    prev_tensor_name = prev_tensor_name or _full_name(shards)
    initializer = vocab_info.backup_initializer or init_ops.zeros_initializer()
    ckpt_path = _checkpoint_file(prev_ckpt)
    total_rows = sum(v.get_shape().as_list()[0] for v in shards)
    for v in shards:
        rows, cols = v.get_shape().as_list()
        info = v._save_slice_info
        offset = info.var_offset[0] if info is not None else 0
        if vocab_info.axis == 0:
            vocab_size, row_oov = vocab_info.new_vocab_size, vocab_info.num_oov_buckets
            num_cols, col_oov = cols, 0
        else:
            vocab_size, row_oov = total_rows, 0
            num_cols, col_oov = vocab_info.new_vocab_size, vocab_info.num_oov_buckets
        if cols != num_cols + col_oov:
            raise ValueError(f"Expected 2nd dim of shape to be new_col_vocab_size ({num_cols})"
                             f" + num_col_oov_buckets ({col_oov}) = {num_cols + col_oov}, but "
                             f"received shape: {[rows, cols]}")
        if offset + rows > vocab_size + row_oov:
            raise ValueError(f"Trying to initialize {rows} additional rows after {offset} rows "
                             "have already been initialized, which would exceed expected total"
                             f" row count of new_row_vocab_size ({vocab_size}) + "
                             f"num_row_oov_buckets ({row_oov}) = {vocab_size + row_oov}.")
        oov_here = min(rows, max(0, offset + rows - vocab_size))
        to_load = rows - oov_here
        row_remap = col_remap = None
        if vocab_info.axis == 0:
            row_remap = _vocab_remapping(vocab_info.new_vocab, vocab_info.old_vocab, offset,
                                         to_load, vocab_info.old_vocab_size)
        else:
            col_remap = _vocab_remapping(vocab_info.new_vocab, vocab_info.old_vocab, 0,
                                         num_cols)
        with _ops.name_scope(None, "warm_start"):
            value = _remapped_matrix(ckpt_path, prev_tensor_name, offset, to_load, num_cols,
                                     initializer, row_remap, col_remap, oov_here, col_oov)
        assign = v.assign(value)
        v._initializer_op = assign if isinstance(assign, _ops.Operation) else assign.op


def _full_name(shards) -> str:
    info = shards[0]._save_slice_info
    return info.full_name if info is not None else shards[0].op.name


def _grouped_variables(vars_to_warm_start) -> dict:
    if isinstance(vars_to_warm_start, str) or vars_to_warm_start is None:
        found = _ops.get_collection(_ops.GraphKeys.TRAINABLE_VARIABLES,
                                    scope=vars_to_warm_start)
    elif isinstance(vars_to_warm_start, list):
        if all(isinstance(v, str) for v in vars_to_warm_start):
            found = []
            for pattern in vars_to_warm_start:
                found += _ops.get_collection(_ops.GraphKeys.GLOBAL_VARIABLES, scope=pattern)
        elif all(_is_variable(v) for v in vars_to_warm_start):
            found = vars_to_warm_start
        else:
            raise ValueError("If `vars_to_warm_start` is a list, it must be all `Variable` or "
                             f"all `str`.  Given types are {[type(v) for v in vars_to_warm_start]}")
    else:
        raise ValueError("`vars_to_warm_start must be a `list` or `str`.  Given type is "
                         f"{type(vars_to_warm_start)}")
    grouped: dict = {}
    for v in found:
        grouped.setdefault(_full_name([v]), []).append(v)
    return grouped


def warm_start(ckpt_to_initialize_from, vars_to_warm_start=".*", var_name_to_vocab_info=None,
               var_name_to_prev_var_name=None) -> None:
    """Initialize the variables ``vars_to_warm_start`` selects (a regex over the trainable
    variables, a list of regexes over all variables, or a list of variables) from the
    checkpoint: by name (``var_name_to_prev_var_name`` renames), or through a ``VocabInfo``
    where a vocabulary changed. Name-based checkpoints only."""
    grouped = _grouped_variables(vars_to_warm_start)
    vocab_infos = var_name_to_vocab_info or {}
    prev_names = var_name_to_prev_var_name or {}
    prev_used, vocab_used, vocabless = set(), set(), {}
    for var_name, variable in grouped.items():
        prev_name = prev_names.get(var_name)
        if prev_name:
            prev_used.add(var_name)
        vocab_info = vocab_infos.get(var_name)
        if vocab_info:
            vocab_used.add(var_name)
            _warm_start_var_with_vocab(variable, vocab_info, ckpt_to_initialize_from, prev_name)
        elif vars_to_warm_start:
            var = variable[0] if len(variable) == 1 else variable
            tensor_name = prev_name or var_name
            if tensor_name in vocabless:
                init_from_checkpoint(ckpt_to_initialize_from, vocabless)
                vocabless.clear()
            vocabless[tensor_name] = var
    if vocabless:
        init_from_checkpoint(ckpt_to_initialize_from, vocabless)
    unused_prev = set(prev_names) - prev_used
    unused_vocab = set(vocab_infos) - vocab_used
    if unused_prev:
        raise ValueError("You provided the following variables in var_name_to_prev_var_name "
                         f"that were not used: {unused_prev}.  Perhaps you misspelled them?  "
                         f"Here is the list of viable variable names: {grouped.keys()}")
    if unused_vocab:
        raise ValueError("You provided the following variables in var_name_to_vocab_info that "
                         f"were not used: {unused_vocab}.  Perhaps you misspelled them?  Here "
                         f"is the list of viable variable names: {grouped.keys()}")
