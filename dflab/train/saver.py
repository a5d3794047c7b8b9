"""``tf.train.Saver``: checkpoints through ``SaveV2``/``RestoreV2`` graph ops.

Checkpoints are written in TF's own format (the V2 tensor bundle, ``dflab.lib.io``), so TF
restores them and dflab restores TF's; ``checkpoint_format="safetensors"`` (a dflab
extension) writes dflab's earlier format instead, which every reader still reads
(``io_kernels``).

The Saver builds its ops once, under a ``save`` name scope (TF's names: ``save/Const`` is the
filename, fed on every call; ``save/control_dependency`` the tensor a save fetches;
``save/restore_all`` the restore target). Save and restore ops sit on the CPU of the variables'
device (only CPU kernels exist); restored values reach the variables through ``Assign`` ops
colocated with them. With ``sharded=True`` each device writes its own shard into a temporary
directory and ``MergeV2Checkpoints`` moves the shards into place and writes the index last.

Before writing, ``save`` removes what earlier saves killed midway left in the directory: temp
files and sharded-save temp directories whose writing process is gone (never those of a live
writer, never anything not named as our temp files; the rule is in ``io_kernels``).

Order of a ``save`` (each write atomic): data files, index, ``.meta`` graph, then the ``checkpoint``
state file; only then are checkpoints beyond ``max_to_keep`` deleted. A crash at any point leaves
the state file naming complete checkpoints only.

``consistent=True`` (a dflab extension) takes the session's step gate (``step_gate.py``) around
each save and restore, so a checkpoint reflects one point between variable-changing steps even
while other threads train; a ``global_step`` tensor passed to ``save`` is read inside the gate,
so the file name matches the saved step.

Executing eagerly (``Saver(var_list)`` then ``save(None, path)``/``restore(None, path)``, as
TF's), the Saver builds nothing: each call runs ``SaveV2`` or ``RestoreV2`` on the spot over
the variables as they are then, writes no meta graph, and keeps the state file as in a graph.

On a cluster, every save and restore is also one snapshot across tasks: the session's worker
(``consistent_snapshot``, ``dflab.distributed.task_gate``) closes the step gates of the tasks
holding the saved variables, so no step of any client is half applied in the checkpoint (some
ps tasks after a step, others before it).
"""

from __future__ import annotations

import contextlib
import json
import logging
import numbers
import os
import time
import uuid

import numpy as np

from dflab.framework import dtypes as _dt
from dflab.framework import errors
from dflab.framework import ops as _ops
from dflab.framework.constant_op import constant
from dflab.framework.device_spec import DeviceSpec
from dflab.framework.op_kinds import VARIABLE_OPS
from dflab.framework.tensor_shape import TensorShape
from dflab.kernels import io_kernels
from dflab.ops import array_ops, control_flow_ops, io_ops, state_ops
from dflab.ops import variables as _variables
from dflab.train import checkpoint_utils, meta_graph
from dflab.train.step_gate import raw_session, step_gate

logger = logging.getLogger("dflab.train")


class SaverDef:
    """TF's ``SaverDef`` as a plain record (also its JSON form in a ``.meta`` file)."""

    V1, V2 = 1, 2
    _FIELDS = ("filename_tensor_name", "save_tensor_name", "restore_op_name", "max_to_keep",
               "sharded", "keep_checkpoint_every_n_hours", "version", "consistent",
               "checkpoint_format")

    def __init__(self, filename_tensor_name="", save_tensor_name="", restore_op_name="",
                 max_to_keep=5, sharded=False, keep_checkpoint_every_n_hours=10000.0,
                 version=2, consistent=False, checkpoint_format="tf"):
        self.filename_tensor_name = filename_tensor_name
        self.save_tensor_name = save_tensor_name
        self.restore_op_name = restore_op_name
        self.max_to_keep = max_to_keep
        self.sharded = sharded
        self.keep_checkpoint_every_n_hours = keep_checkpoint_every_n_hours
        self.version = version
        self.consistent = consistent
        self.checkpoint_format = checkpoint_format

    def to_json(self) -> dict:
        return {f: getattr(self, f) for f in self._FIELDS}

    # JSON types of the fields; None means "keep every checkpoint" for max_to_keep.
    _TYPES = {"filename_tensor_name": (str,), "save_tensor_name": (str,),
              "restore_op_name": (str,), "max_to_keep": (int, type(None)), "sharded": (bool,),
              "keep_checkpoint_every_n_hours": (int, float), "version": (int,),
              "consistent": (bool,), "checkpoint_format": (str,)}
    _REQUIRED = ("filename_tensor_name", "save_tensor_name", "restore_op_name")

    @classmethod
    def from_json(cls, d: dict) -> SaverDef:
        """A SaverDef from its JSON object; a missing name or a field of the wrong type is an
        ``InvalidArgumentError`` naming the field."""
        if not isinstance(d, dict):
            raise errors.InvalidArgumentError(None, None, "saver_def must be a JSON object")
        for f in cls._FIELDS:
            if f not in d:
                if f in cls._REQUIRED:
                    raise errors.InvalidArgumentError(None, None, f"saver_def has no {f!r}")
                continue
            v, kinds = d[f], cls._TYPES[f]
            if not isinstance(v, kinds) or (isinstance(v, bool) and bool not in kinds):
                names = " or ".join("null" if k is type(None) else k.__name__ for k in kinds)
                raise errors.InvalidArgumentError(None, None, f"saver_def field {f!r} must be "
                                                  f"{names}, got {v!r}")
        if d.get("checkpoint_format", "tf") not in io_kernels.CHECKPOINT_FORMATS:
            raise errors.InvalidArgumentError(
                None, None, f"saver_def field 'checkpoint_format' must be one of "
                f"{io_kernels.CHECKPOINT_FORMATS}, got {d['checkpoint_format']!r}")
        return cls(**{f: d[f] for f in cls._FIELDS if f in d})

    def scoped(self, prefix: str) -> SaverDef:
        """This def with its tensor and op names under ``prefix`` (an import scope + "/")."""
        d = self.to_json()
        for f in ("filename_tensor_name", "save_tensor_name", "restore_op_name"):
            d[f] = prefix + d[f]
        return SaverDef.from_json(d)


def _var_name(v) -> str:
    op = v.op if hasattr(v, "op") else None
    if op is None or op.type not in VARIABLE_OPS:
        raise TypeError(f"Variable to save is not a Variable: {v!r}")
    return op.name


class _SlicedVariable:
    """The shards of a partitioned variable (``dflab.ops.partitioned_variables``) as the one
    tensor a checkpoint holds: saved as their concatenation under the full name, restored by
    assigning each shard its slice, so a checkpoint does not depend on how it was split."""

    def __init__(self, name: str, shards: list):
        self.name = name
        self.shards = sorted(shards, key=lambda v: v._save_slice_info.var_offset)
        info = self.shards[0]._save_slice_info
        self.shape = TensorShape(info.full_shape)
        self.dtype = self.shards[0].dtype
        self.device = self.shards[0].device
        self.axis = next((i for i, (a, b) in enumerate(zip(info.var_shape, info.full_shape))
                          if a != b), 0)
        covered = sum(v._save_slice_info.var_shape[self.axis] for v in self.shards)
        if covered != info.full_shape[self.axis]:
            raise ValueError(f"The shards of {name} cover {covered} of its "
                             f"{info.full_shape[self.axis]} rows: save all of them")

    def value(self):
        return array_ops.concat([v.value() for v in self.shards], self.axis)

    def restore_ops(self, value) -> list:
        ops = []
        for v in self.shards:
            info = v._save_slice_info
            piece = array_ops.slice(value, info.var_offset, info.var_shape)
            ref = _ref_of(v)
            with _ops.colocate_with(ref.op):
                ops.append(state_ops.assign(ref, piece, name="Assign").op)
        return ops


def _names_to_variables(var_list) -> dict:
    """``{checkpoint name: variable}`` from a list or dict (TF's rules, duplicates rejected);
    the shards of a partitioned variable become one entry under its full name."""
    if isinstance(var_list, dict):
        out = {}
        for name, v in var_list.items():
            if hasattr(v, "_get_variable_list"):
                out[str(name)] = _SlicedVariable(str(name), v._get_variable_list())
                continue
            _var_name(v)
            out[str(name)] = v
        return out
    out, sliced = {}, {}
    for v in var_list:
        for shard in (v._get_variable_list() if hasattr(v, "_get_variable_list") else [v]):
            info = getattr(shard, "_save_slice_info", None)
            if info is not None:
                sliced.setdefault(info.full_name, {})[id(shard)] = shard
                continue
            name = _var_name(shard)
            if name in out:
                if out[name] is shard:
                    continue
                raise ValueError(f"At least two variables have the same name: {name}")
            out[name] = shard
    for name, shards in sliced.items():
        if name in out:
            raise ValueError(f"At least two variables have the same name: {name}")
        out[name] = _SlicedVariable(name, list(shards.values()))
    return out


def _value_of(v):
    """A value tensor of ``v`` (its ``read`` snapshot): safe to send across devices."""
    if hasattr(v, "value") and callable(v.value):
        return v.value()
    return array_ops.identity(v)


def _ref_of(v):
    r = getattr(v, "_ref", None)
    return r() if callable(r) else v


def _io_device(device: str) -> str:
    """The CPU of the task that holds ``device``: where its save/restore ops go."""
    if not device:
        return ""
    spec = DeviceSpec.from_string(device)
    if spec.device_type in (None, "CPU"):
        return spec.to_string()
    return spec.replace(device_type="CPU", device_index=0).to_string()


def _op_timeout(sess) -> float | None:
    """The session's ``operation_timeout_in_ms`` in seconds (None: no limit)."""
    config = getattr(raw_session(sess), "_config", None)
    ms = getattr(config, "operation_timeout_in_ms", 0) or 0
    return ms / 1000.0 if ms else None


def _remove_stale_temp_files(save_dir: str) -> None:
    # Before the save rather than after: a disk filled by dead saves' leftovers must not make
    # this save fail too.
    for path in io_kernels.remove_stale_temp_files(save_dir):
        logger.info("Removed %s, left by a checkpoint save that did not finish", path)


def _make_checkpoint_dir(save_dir: str, save_path: str) -> None:
    """Create the checkpoint's own directory if missing, as TF's save op does; a missing parent
    of that directory is TF's ValueError."""
    if not save_dir or os.path.isdir(save_dir):
        return
    if not os.path.isdir(os.path.dirname(os.path.abspath(save_dir))):
        raise ValueError(f"Parent directory of {save_path} doesn't exist, can't save.")
    os.makedirs(save_dir, exist_ok=True)


# --- deleting old checkpoints -------------------------------------------------------------------
# Before the state file drops the checkpoints ``max_to_keep`` pushes out, their names go into
# ``<state file>.pending_deletes`` (JSON); the file is removed once they are deleted. A save
# killed in between leaves it behind and the next save in that directory finishes the job,
# deleting only the checkpoints it names that the state file no longer lists.
_PENDING_FORMAT = "dflab.pending_deletes"


def _pending_path(save_dir: str, latest_filename: str) -> str:
    return os.path.join(save_dir, f"{latest_filename}.pending_deletes")


def _write_pending_deletes(save_dir: str, latest_filename: str, prefixes: list[str],
                           meta_suffix: str) -> str | None:
    if not prefixes:
        return None
    path = _pending_path(save_dir, latest_filename)
    # Each checkpoint's files are listed too: a save killed after deleting an index still
    # leaves enough to find the data files it named.
    record = {"format": _PENDING_FORMAT, "meta_suffix": meta_suffix,
              "checkpoints": {os.path.basename(p): [os.path.basename(f) for f in
                                                    io_kernels.checkpoint_files(p)]
                              for p in prefixes}}
    io_kernels.atomic_write(path, json.dumps(record).encode())
    return path


def _delete_checkpoints(prefixes: list[str], meta_suffix: str,
                        files: dict[str, list[str]] | None = None) -> None:
    for prefix in prefixes:
        io_kernels.delete_checkpoint_files(prefix, (files or {}).get(prefix))
        with contextlib.suppress(OSError):
            os.unlink(f"{prefix}.{meta_suffix}")


def _is_plain_name(name) -> bool:
    """A file name inside the directory (no path, nothing odd): all a record may name."""
    return isinstance(name, str) and name not in ("", ".", "..") and "\0" not in name \
        and os.path.basename(name) == name


def _read_pending_deletes(path: str) -> tuple[dict[str, list[str]], str] | None:
    """``({checkpoint name: [file names]}, meta suffix)`` from a pending-deletes record; None
    (and a log line) if it is not one we wrote: nothing is deleted on the word of a corrupt
    file."""
    try:
        with open(path, "rb") as f:
            record = json.loads(f.read().decode("utf-8"))
        checkpoints, suffix = record["checkpoints"], record["meta_suffix"]
        if record.get("format") != _PENDING_FORMAT or not isinstance(suffix, str) or \
                not isinstance(checkpoints, dict):
            raise ValueError("not a pending-deletes record")
    except FileNotFoundError:
        return None
    except (OSError, ValueError, RecursionError, KeyError, TypeError) as e:
        logger.warning("Ignoring %s: unreadable (%s)", path, e)
        return None
    plain = {name: [f for f in files if _is_plain_name(f)]
             for name, files in checkpoints.items()
             if _is_plain_name(name) and isinstance(files, list)}
    return plain, suffix if _is_plain_name(suffix) else "meta"


def _finish_pending_deletes(save_dir: str, latest_filename: str) -> None:
    path = _pending_path(save_dir, latest_filename)
    pending = _read_pending_deletes(path)
    if pending is None:
        return
    try:
        state = checkpoint_utils.get_checkpoint_state(save_dir or ".", latest_filename)
    except errors.DataLossError:
        return  # without a readable state file, nothing can be judged unused
    listed = set() if state is None else {
        os.path.abspath(p) for p in [state.model_checkpoint_path,
                                     *state.all_model_checkpoint_paths]}
    checkpoints, suffix = pending
    doomed, files = [], {}
    for name, names in checkpoints.items():
        prefix = os.path.join(save_dir, name)
        if os.path.abspath(prefix) in listed:
            continue
        doomed.append(prefix)
        files[prefix] = [os.path.join(save_dir, f) for f in names]
        logger.info("Deleting %s, left behind by a save that did not finish", prefix)
    _delete_checkpoints(doomed, suffix, files)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


class Saver:
    """Saves and restores variables (TF1's ``tf.train.Saver``)."""

    _META_KIND = "saver"

    def __init__(self, var_list=None, reshape=False, sharded=False, max_to_keep=5,
                 keep_checkpoint_every_n_hours=10000.0, name=None, restore_sequentially=False,
                 saver_def=None, builder=None, defer_build=False, allow_empty=False,
                 write_version=2, pad_step_number=False, save_relative_paths=False,
                 filename=None, consistent=False, checkpoint_format="tf"):
        if reshape:
            raise NotImplementedError("Saver(reshape=True) is not supported")
        if checkpoint_format not in io_kernels.CHECKPOINT_FORMATS:
            raise ValueError(f"checkpoint_format must be one of "
                             f"{io_kernels.CHECKPOINT_FORMATS}, got {checkpoint_format!r}")
        self._checkpoint_format = checkpoint_format
        self._var_list = var_list
        self._sharded = bool(sharded)
        self._max_to_keep = max_to_keep
        self._keep_every_n_hours = keep_checkpoint_every_n_hours
        self._name = name
        self._allow_empty = allow_empty
        self._pad_step_number = pad_step_number
        self._save_relative_paths = save_relative_paths
        self._filename = filename
        self._consistent = bool(consistent)
        self._last_checkpoints: list[tuple[str, float]] = []
        self._checkpoints_to_be_deleted: list[tuple[str, float]] = []
        self._next_preserve_time = time.time() + self._keep_every_n_hours * 3600
        self._graph = _ops.get_default_graph()
        self.saver_def = saver_def if not isinstance(saver_def, dict) else \
            SaverDef.from_json(saver_def)
        if self.saver_def is not None:
            # A Saver over an existing def keeps what the def says (as TF does).
            self._consistent = bool(self.saver_def.consistent)
            self._checkpoint_format = self.saver_def.checkpoint_format
            self._max_to_keep = self.saver_def.max_to_keep
            self._sharded = bool(self.saver_def.sharded)
            self._keep_every_n_hours = self.saver_def.keep_checkpoint_every_n_hours
            self._next_preserve_time = time.time() + self._keep_every_n_hours * 3600
        elif _ops.executing_eagerly():
            # Eagerly, a save or restore runs its ops on the spot (TF's ``_build_eager``): the
            # variables are named now, nothing is built.
            if var_list is None:
                raise RuntimeError("When eager execution is enabled, `var_list` must specify a "
                                   "list or dict of variables to save")
        elif not defer_build:
            self.build()

    # --- building ----------------------------------------------------------------------------
    def build(self) -> None:
        if self.saver_def is not None:
            return
        var_list = self._var_list
        if var_list is None:
            var_list = _variables.global_variables()
        names = _names_to_variables(var_list)
        if not names and not self._allow_empty:
            raise ValueError("No variables to save")
        self._names = names
        with _ops.name_scope(self._name, "save") as scope:
            filename = constant(self._filename or "model", dtype=_dt.string, name="Const")
            if not names:
                save_tensor, restore_op = filename, control_flow_ops.no_op(name="restore_all")
            elif self._sharded:
                save_tensor, restore_op = self._build_sharded(filename, names)
            else:
                save_tensor, restore_op = self._build_single(filename, names)
        del scope
        self.saver_def = SaverDef(filename.name, save_tensor.name, restore_op.name,
                                  self._max_to_keep, self._sharded, self._keep_every_n_hours,
                                  2, self._consistent, self._checkpoint_format)

    def _build_single(self, filename, names):
        items = sorted(names.items())
        first_device = next((v.device for _, v in items if v.device), "")
        with _ops.device(_io_device(first_device)):
            save = self._save_op(filename, items)
            with _ops.control_dependencies([save]):
                save_tensor = array_ops.identity(filename, name="control_dependency")
        assigns = self._restore_ops(filename, items, first_device)
        return save_tensor, control_flow_ops.group(*assigns, name="restore_all")

    def _build_sharded(self, filename, names):
        by_device: dict[str, list] = {}
        for name, v in sorted(names.items()):
            by_device.setdefault(_io_device(v.device), []).append((name, v))
        devices = sorted(by_device)
        n = len(devices)
        # A fresh name per Saver; who writes into it is recorded inside it at run time.
        temp_dir = f"{io_kernels.TEMP_DIR_INFIX}{uuid.uuid4().hex}"
        tmp_base = io_ops.string_join([filename, f"{temp_dir}/part"], name="StringJoin")
        parts, saves, assigns = [], [], []
        for k, device in enumerate(devices):
            with _ops.device(device):
                part = io_ops.sharded_filename(tmp_base, k, n, name="ShardedFilename")
                parts.append(part)
                saves.append(self._save_op(part, by_device[device]))
            assigns += self._restore_ops(filename, by_device[device], device)
        with _ops.control_dependencies(saves):
            with _ops.device(devices[0]):
                merge = io_ops.merge_v2_checkpoints(array_ops.stack(parts), filename,
                                                    delete_old_dirs=True)
        with _ops.control_dependencies([merge]):
            save_tensor = array_ops.identity(filename, name="control_dependency")
        return save_tensor, control_flow_ops.group(*assigns, name="restore_all")

    def _save_op(self, prefix, items):
        tensor_names = constant([n for n, _ in items], dtype=_dt.string, name="tensor_names")
        slices = constant([""] * len(items), dtype=_dt.string, name="shape_and_slices")
        return io_ops.save_v2(prefix, tensor_names, slices, [_value_of(v) for _, v in items],
                              name="SaveV2", checkpoint_format=self._checkpoint_format)

    @staticmethod
    def _restore_ops(filename, items, device):
        with _ops.device(_io_device(device)):
            tensor_names = constant([n for n, _ in items], dtype=_dt.string,
                                    name="RestoreV2/tensor_names")
            slices = constant([""] * len(items), dtype=_dt.string,
                              name="RestoreV2/shape_and_slices")
            values = io_ops.restore_v2(filename, tensor_names, slices,
                                       [v.dtype.base_dtype for _, v in items], name="RestoreV2",
                                       shapes=[v.shape for _, v in items])
        assigns = []
        for (_, v), value in zip(items, values):
            if isinstance(v, _SlicedVariable):
                assigns += v.restore_ops(value)
                continue
            ref = _ref_of(v)
            with _ops.colocate_with(ref.op):
                assigns.append(state_ops.assign(ref, value, validate_shape=ref.shape.ndims
                                                is not None, name="Assign").op)
        return assigns

    # --- saving ------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _gate(self, sess):
        """The session's own gate (``consistent``), then, on a cluster, the gates of the tasks
        holding the variables (always: other clients' steps would be cut in half)."""
        with contextlib.ExitStack() as stack:
            if self._consistent:
                stack.enter_context(step_gate(sess).exclusive())
            worker = getattr(raw_session(sess), "worker", None)
            snapshot = getattr(worker, "consistent_snapshot", None)
            if snapshot is not None:
                stack.enter_context(snapshot(self._variable_devices(), _op_timeout(sess)))
            yield

    def _variable_devices(self) -> list[str]:
        """Where the saved variables live (from the restore op when built from a def)."""
        names = getattr(self, "_names", None)
        if names is not None:
            return sorted({shard.device for v in names.values()
                           for shard in (v.shards if isinstance(v, _SlicedVariable) else [v])})
        found, todo = set(), [self._graph.get_operation_by_name(
            self.saver_def.restore_op_name)]
        while todo:
            op = todo.pop()
            if op.type == "NoOp":
                todo += op.control_inputs
            else:
                found.add(op.device)
        return sorted(found)

    def save(self, sess, save_path, global_step=None, latest_filename=None,
             meta_graph_suffix="meta", write_meta_graph=True, write_state=True,
             strip_default_attrs=False, save_debug_info=False):
        """Write a checkpoint; returns its prefix (``save_path-global_step``)."""
        latest_filename = latest_filename or "checkpoint"
        if os.path.split(latest_filename)[0]:
            raise ValueError("'latest_filename' must not contain path components")
        save_path = os.fspath(save_path)
        save_dir = os.path.dirname(save_path)
        _make_checkpoint_dir(save_dir, save_path)
        _remove_stale_temp_files(save_dir)
        if write_state:
            _finish_pending_deletes(save_dir, latest_filename)
        sd = self.saver_def
        eager = sd is None and _ops.executing_eagerly()
        with contextlib.nullcontext() if eager else self._gate(sess):
            step = global_step
            if step is not None and not isinstance(step, numbers.Integral):
                step = int(step.numpy()) if eager else int(sess.run(step))
            prefix = save_path
            if step is not None:
                prefix = f"{save_path}-{int(step):08d}" if self._pad_step_number \
                    else f"{save_path}-{int(step)}"
            if eager:
                out = self._save_eagerly(prefix)
            else:
                out = sess.run(sd.save_tensor_name, {sd.filename_tensor_name: prefix})
        path = io_kernels.as_str(out)
        if write_meta_graph and not eager:  # (TF writes no meta graph eagerly)
            self.export_meta_graph(f"{path}.{meta_graph_suffix}")
        if write_state:
            self._record_last_checkpoint(path)
            doomed = self._select_for_deletion()
            # The list of checkpoints to delete is on disk before the state file stops naming
            # them: a save killed in between leaves it for the next save to finish.
            journal = _write_pending_deletes(save_dir, latest_filename, doomed,
                                             meta_graph_suffix)
            checkpoint_utils.update_checkpoint_state(
                save_dir, path, self.last_checkpoints, latest_filename,
                [t for _, t in self._last_checkpoints],
                save_relative_paths=self._save_relative_paths)
            _delete_checkpoints(doomed, meta_graph_suffix)
            if journal:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(journal)
        return path

    def _record_last_checkpoint(self, path: str) -> None:
        if not self._max_to_keep:
            return
        self._last_checkpoints = [(p, t) for p, t in self._last_checkpoints if p != path]
        self._last_checkpoints.append((path, time.time()))
        while len(self._last_checkpoints) > self._max_to_keep:
            self._checkpoints_to_be_deleted.append(self._last_checkpoints.pop(0))

    def _select_for_deletion(self) -> list[str]:
        """The checkpoints pushed out by ``max_to_keep``, less those that
        ``keep_checkpoint_every_n_hours`` keeps for good."""
        doomed = []
        while self._checkpoints_to_be_deleted:
            path, stamp = self._checkpoints_to_be_deleted.pop(0)
            if stamp >= self._next_preserve_time:
                self._next_preserve_time = stamp + self._keep_every_n_hours * 3600
                continue
            doomed.append(path)
        return doomed

    @property
    def last_checkpoints(self) -> list[str]:
        return [p for p, _ in self._last_checkpoints]

    def set_last_checkpoints(self, last_checkpoints) -> None:
        self._last_checkpoints = [(p, time.time()) for p in last_checkpoints]

    def set_last_checkpoints_with_time(self, last_checkpoints_with_time) -> None:
        self._last_checkpoints = [(p, float(t)) for p, t in last_checkpoints_with_time]

    def recover_last_checkpoints(self, checkpoint_paths) -> None:
        """Adopt the existing checkpoints among ``checkpoint_paths`` (e.g. after a restart)."""
        paths = [p for p in checkpoint_paths if checkpoint_utils.checkpoint_exists(p)]
        mtimes = checkpoint_utils.get_checkpoint_mtimes(paths)
        self.set_last_checkpoints_with_time(list(zip(paths, mtimes)))

    # --- restoring ---------------------------------------------------------------------------
    def restore(self, sess, save_path) -> None:
        """Assign every variable its value from the checkpoint ``save_path``."""
        if save_path is None:
            raise ValueError("Can't load save_path when it is None.")
        save_path = os.fspath(save_path)
        if not checkpoint_utils.checkpoint_exists(save_path):
            raise errors.NotFoundError(
                None, None, f"The passed save_path is not a valid checkpoint: {save_path} "
                f"(no {save_path}.index)")
        sd = self.saver_def
        if sd is None and _ops.executing_eagerly():
            self._restore_eagerly(save_path)
            return
        with self._gate(sess):
            sess.run(sd.restore_op_name, {sd.filename_tensor_name: save_path})

    # --- executing eagerly -------------------------------------------------------------------
    def _eager_items(self) -> list:
        """``(checkpoint name, variable)`` pairs of ``var_list`` as it is now."""
        names = _names_to_variables(self._var_list)
        if not names and not self._allow_empty:
            raise ValueError("No variables to save")
        return sorted(names.items())

    def _save_eagerly(self, prefix: str) -> str:
        items = self._eager_items()
        if items:
            io_ops.save_v2(prefix, [n for n, _ in items], [""] * len(items),
                           [_value_of(v) for _, v in items],
                           checkpoint_format=self._checkpoint_format)
        return prefix

    def _restore_eagerly(self, save_path: str) -> None:
        items = self._eager_items()
        if not items:
            return
        values = io_ops.restore_v2(save_path, [n for n, _ in items], [""] * len(items),
                                   [v.dtype.base_dtype for _, v in items])
        for (name, v), value in zip(items, values):
            if not v.shape.is_compatible_with(value.shape):
                raise ValueError(f"Received incompatible tensor with shape {value.shape} when "
                                 f"attempting to restore variable with shape {v.shape} and "
                                 f"name {name}.")
        for (_, v), value in zip(items, values):
            if isinstance(v, _SlicedVariable):
                for shard in v.shards:
                    info = shard._save_slice_info
                    shard.assign(array_ops.slice(value, info.var_offset, info.var_shape))
            else:
                v.assign(value)

    # --- (de)serialization -------------------------------------------------------------------
    def as_saver_def(self) -> SaverDef:
        return self.saver_def

    def to_proto(self, export_scope=None) -> dict:
        return self.saver_def.to_json()

    @staticmethod
    def from_proto(saver_def, import_scope=None) -> Saver:
        """A Saver over an existing save/restore subgraph; ``import_scope`` is the scope the
        graph was imported under (its names are prefixed with it, as TF does)."""
        if isinstance(saver_def, dict):
            saver_def = SaverDef.from_json(saver_def)
        if import_scope:
            saver_def = saver_def.scoped(f"{import_scope}/")
        return Saver(saver_def=saver_def)

    def export_meta_graph(self, filename=None, collection_list=None, as_text=False,
                          export_scope=None, clear_devices=False,
                          clear_extraneous_savers=False, strip_default_attrs=False,
                          save_debug_info=False):
        return meta_graph.export_meta_graph(filename=filename, graph=self._graph,
                                 saver_def=self.saver_def, collection_list=collection_list,
                                 clear_devices=clear_devices)


meta_graph.register_proto_function(
    "saver", lambda value, graph, scope: Saver.from_proto(value, import_scope=scope))


def import_meta_graph(meta_graph_or_file, clear_devices=False, import_scope=None, **kwargs):
    """Recreate the graph, collections and Saver of a meta graph in the default graph.

    Returns the Saver built from the saved ``saver_def`` (or a new Saver when the meta graph
    has variables but no saver), or None when there is nothing to save.
    """
    meta = meta_graph.import_scoped_meta_graph(meta_graph_or_file, clear_devices, import_scope)
    if meta.saver_def:
        prefix = f"{import_scope}/" if import_scope else ""
        where = f"{meta.source}: saver_def"
        try:
            saver_def = SaverDef.from_json(meta.saver_def).scoped(prefix)
        except errors.InvalidArgumentError as e:
            raise errors.InvalidArgumentError(None, None, f"{meta.source}: {e.message}") from None
        graph = _ops.get_default_graph()
        meta_graph.lookup(graph, saver_def.filename_tensor_name, where)
        meta_graph.lookup(graph, saver_def.save_tensor_name, where)
        meta_graph.lookup(graph, saver_def.restore_op_name, where, want_op=True)
        return Saver(saver_def=saver_def)
    if _ops.get_default_graph().get_collection(_ops.GraphKeys.GLOBAL_VARIABLES):
        return Saver()
    return None


def checkpoint_values(prefix: str) -> dict:
    """All tensors of a checkpoint as ``{name: ndarray}`` (a test and notebook helper)."""
    reader = io_kernels.CheckpointReader(prefix)
    return {n: np.asarray(reader.get_tensor(n)) for n in reader.tensor_names()}
