"""Finding and reading checkpoints: the text ``checkpoint`` state file, ``latest_checkpoint``,
``get_checkpoint_state``, ``list_variables``, ``load_variable`` and ``NewCheckpointReader``.

Every reader here takes a checkpoint in TF's format (written by TensorFlow or by dflab) or in
dflab's earlier safetensors format, telling them apart by the index's bytes
(``io_kernels.CheckpointReader``).

The state file uses TF's text format::

    model_checkpoint_path: "model-20"
    all_model_checkpoint_paths: "model-10"
    all_model_checkpoint_paths: "model-20"

It is written atomically and always *after* the checkpoint it names is complete, so it never
points at a half-written checkpoint. ``latest_checkpoint`` goes one step further than TF: if the
newest listed checkpoint has vanished (e.g. deleted by hand) it falls back to the newest listed
one that still exists, so the last good checkpoint stays usable.
"""

from __future__ import annotations

import glob
import json
import logging
import os
import re
import time

from dflab.framework import errors
from dflab.kernels import io_kernels
from dflab.kernels.io_kernels import CheckpointReader, atomic_write

_STATE_FILE = "checkpoint"
logger = logging.getLogger("dflab.train")


class CheckpointState:
    """TF's ``CheckpointState`` proto, as a plain object with the same field names."""

    def __init__(self, model_checkpoint_path="", all_model_checkpoint_paths=(),
                 all_model_checkpoint_timestamps=(), last_preserved_timestamp=0.0):
        self.model_checkpoint_path = model_checkpoint_path
        self.all_model_checkpoint_paths = list(all_model_checkpoint_paths)
        self.all_model_checkpoint_timestamps = list(all_model_checkpoint_timestamps)
        self.last_preserved_timestamp = last_preserved_timestamp

    def __repr__(self):
        return _format_state(self).strip()


def _quote(s: str) -> str:
    return json.dumps(s)  # a double-quoted string with \" and \\ escaped, as TF's text format


def _format_state(state: CheckpointState) -> str:
    lines = [f"model_checkpoint_path: {_quote(state.model_checkpoint_path)}"]
    lines += [f"all_model_checkpoint_paths: {_quote(p)}"
              for p in state.all_model_checkpoint_paths]
    lines += [f"all_model_checkpoint_timestamps: {t!r}"
              for t in state.all_model_checkpoint_timestamps]
    if state.last_preserved_timestamp:
        lines.append(f"last_preserved_timestamp: {state.last_preserved_timestamp!r}")
    return "\n".join(lines) + "\n"


def _parse_string(value: str) -> str:
    """A double-quoted string field's value (ValueError if it is not one)."""
    if not value.startswith('"'):
        raise ValueError(f"expected a quoted string, got {value[:40]!r}")
    parsed = json.loads(value)
    if not isinstance(parsed, str):
        raise ValueError(f"expected a quoted string, got {value[:40]!r}")
    return parsed


def _parse_state(text: str, path: str) -> CheckpointState:
    state = CheckpointState()
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        key, sep, value = line.partition(":")
        value = value.strip()
        try:
            if not sep:
                raise ValueError("expected 'field: value'")
            if key == "model_checkpoint_path":
                state.model_checkpoint_path = _parse_string(value)
            elif key == "all_model_checkpoint_paths":
                state.all_model_checkpoint_paths.append(_parse_string(value))
            elif key == "all_model_checkpoint_timestamps":
                state.all_model_checkpoint_timestamps.append(float(value))
            elif key == "last_preserved_timestamp":
                state.last_preserved_timestamp = float(value)
            else:
                raise ValueError(f"unknown field {key!r}")
        except ValueError as e:
            raise errors.DataLossError(None, None, f"{path}:{n}: cannot parse checkpoint state "
                                       f"({e})") from None
    if not isinstance(state.model_checkpoint_path, str):
        raise errors.DataLossError(None, None, f"{path}: model_checkpoint_path is not a string")
    return state


def _state_path(checkpoint_dir: str, latest_filename=None) -> str:
    return os.path.join(checkpoint_dir, latest_filename or _STATE_FILE)


def get_checkpoint_state(checkpoint_dir, latest_filename=None) -> CheckpointState | None:
    """The parsed state file of ``checkpoint_dir`` (relative paths made absolute), or None."""
    path = _state_path(checkpoint_dir, latest_filename)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return None
    except UnicodeDecodeError as e:
        raise errors.DataLossError(None, None, f"{path}: checkpoint state file is not UTF-8 "
                                   f"text ({e})") from None
    state = _parse_state(text, path)
    if not state.model_checkpoint_path:
        return None

    def absolute(p):
        return p if os.path.isabs(p) else os.path.join(checkpoint_dir, p)

    state.model_checkpoint_path = absolute(state.model_checkpoint_path)
    state.all_model_checkpoint_paths = [absolute(p) for p in state.all_model_checkpoint_paths]
    return state


def update_checkpoint_state(save_dir, model_checkpoint_path, all_model_checkpoint_paths=None,
                            latest_filename=None, all_model_checkpoint_timestamps=None,
                            last_preserved_timestamp=None, save_relative_paths=False) -> None:
    """Atomically (re)write the state file, as TF's: ``model_checkpoint_path`` is listed last;
    with ``save_relative_paths`` absolute paths are written relative to ``save_dir``, and for
    a relative ``save_dir`` relative paths are made relative to it
    (``generate_checkpoint_state_proto``), so that ``get_checkpoint_state`` finds them."""
    paths = list(all_model_checkpoint_paths or [])
    if not paths or paths[-1] != model_checkpoint_path:
        paths = [p for p in paths if p != model_checkpoint_path] + [model_checkpoint_path]
    if save_relative_paths:
        def rel(p):
            return os.path.relpath(p, save_dir) if os.path.isabs(p) else p

        model_checkpoint_path = rel(model_checkpoint_path)
        paths = [rel(p) for p in paths]
    state = generate_checkpoint_state_proto(save_dir or os.curdir, model_checkpoint_path, paths,
                                            all_model_checkpoint_timestamps or [],
                                            last_preserved_timestamp or 0.0)
    os.makedirs(save_dir or ".", exist_ok=True)
    atomic_write(_state_path(save_dir, latest_filename), _format_state(state).encode())


def latest_checkpoint(checkpoint_dir, latest_filename=None) -> str | None:
    """The prefix of the newest complete checkpoint listed in the state file, or None."""
    try:
        state = get_checkpoint_state(checkpoint_dir, latest_filename)
    except errors.DataLossError:
        return None
    if state is None:
        return None
    candidates = [state.model_checkpoint_path] + state.all_model_checkpoint_paths[::-1]
    for prefix in candidates:
        if checkpoint_exists(prefix):
            return prefix
    return None


def checkpoint_exists(checkpoint_prefix) -> bool:
    """Whether a complete checkpoint (its index, written last) exists at the prefix."""
    return io_kernels.checkpoint_exists(str(checkpoint_prefix))


def get_checkpoint_mtimes(checkpoint_prefixes) -> list[float]:
    return [os.path.getmtime(io_kernels.index_filename(p)) for p in checkpoint_prefixes
            if checkpoint_exists(p)]


def _resolve(ckpt_dir_or_file) -> str:
    """A checkpoint prefix from a directory (via its state file) or a prefix."""
    path = str(ckpt_dir_or_file)
    if os.path.isdir(path):
        prefix = latest_checkpoint(path)
        if prefix is None:
            raise ValueError(f"Couldn't find 'checkpoint' file or checkpoints in given "
                             f"directory {path}")
        return prefix
    return path


class PublicCheckpointReader:
    """TF's public checkpoint reader over the kernels' (``io_kernels.CheckpointReader``, whose
    ``get_tensor`` gives every tensor as an array, as the restore kernels want it): here a
    scalar comes back as a NumPy scalar and a scalar string as ``bytes``, as TF's
    ``get_tensor`` gives them (``reader.get_tensor("global_step")``, an object graph to
    parse); the other methods are the kernels' reader's."""

    def __init__(self, reader: CheckpointReader):
        self._reader = reader

    def get_tensor(self, name: str):
        value = self._reader.get_tensor(name)
        return value[()] if value.ndim == 0 else value

    def __getattr__(self, name):
        return getattr(self._reader, name)


def NewCheckpointReader(filepattern) -> PublicCheckpointReader:  # noqa: N802 - TF's name
    """A reader of the checkpoint at the prefix ``filepattern`` (``get_tensor``,
    ``has_tensor``, ``get_variable_to_shape_map``, ``get_variable_to_dtype_map``,
    ``debug_string``)."""
    return PublicCheckpointReader(CheckpointReader(str(filepattern)))


def load_checkpoint(ckpt_dir_or_file) -> PublicCheckpointReader:
    return PublicCheckpointReader(CheckpointReader(_resolve(ckpt_dir_or_file)))


def list_variables(ckpt_dir_or_file) -> list[tuple[str, list]]:
    """``[(name, shape)]`` of every tensor in the checkpoint, sorted by name."""
    reader = load_checkpoint(ckpt_dir_or_file)
    return sorted(reader.get_variable_to_shape_map().items())


def load_variable(ckpt_dir_or_file, name: str):
    """The value of tensor ``name`` (a trailing ``:0`` is ignored): a NumPy array, a scalar
    as a NumPy scalar (a string as bytes), as TF's."""
    if name.endswith(":0"):
        name = name[:-2]
    return load_checkpoint(ckpt_dir_or_file).get_tensor(name)


def wait_for_new_checkpoint(checkpoint_dir, last_checkpoint=None, seconds_to_sleep=1,
                            timeout=None):
    """Poll until a checkpoint other than ``last_checkpoint`` appears; None on timeout."""
    stop = None if timeout is None else time.time() + timeout
    while True:
        path = latest_checkpoint(checkpoint_dir)
        if path is not None and path != last_checkpoint:
            return path
        if stop is not None and time.time() + seconds_to_sleep > stop:
            return None
        time.sleep(seconds_to_sleep)


def checkpoints_iterator(checkpoint_dir, min_interval_secs=0, timeout=None, timeout_fn=None):
    """Yield each new checkpoint of ``checkpoint_dir`` as it appears (at most one per
    ``min_interval_secs``); after ``timeout`` seconds without one, stop unless ``timeout_fn``
    returns False (then keep waiting), as TF's evaluation loops use it."""
    checkpoint_path = None
    while True:
        new_path = wait_for_new_checkpoint(checkpoint_dir, checkpoint_path, timeout=timeout)
        if new_path:
            start = time.time()
            checkpoint_path = new_path
            yield checkpoint_path
            wait = start + min_interval_secs - time.time()
            if wait > 0:
                time.sleep(wait)
        elif timeout_fn is None:
            logger.info("Timed-out waiting for a checkpoint (without timeout_fn).")
            return
        if timeout_fn is not None and timeout_fn():
            logger.info("Done. No new checkpoints will be generated.")
            return


def generate_checkpoint_state_proto(save_dir, model_checkpoint_path,
                                    all_model_checkpoint_paths=None,
                                    all_model_checkpoint_timestamps=None,
                                    last_preserved_timestamp=None) -> CheckpointState:
    """The ``CheckpointState`` ``update_checkpoint_state`` would write: the model path listed
    last, and, for a relative ``save_dir``, relative paths made relative to it."""
    paths = all_model_checkpoint_paths if all_model_checkpoint_paths is not None else []
    if not paths or paths[-1] != model_checkpoint_path:
        paths.append(model_checkpoint_path)  # TF appends to the caller's list too
    if all_model_checkpoint_timestamps and len(all_model_checkpoint_timestamps) != len(paths):
        raise ValueError("Checkpoint timestamps, if provided, must match checkpoint paths (got "
                         f"paths {paths} and timestamps {all_model_checkpoint_timestamps})")
    if not os.path.isabs(save_dir):
        if not os.path.isabs(model_checkpoint_path):
            model_checkpoint_path = os.path.relpath(model_checkpoint_path, save_dir)
        for i, p in enumerate(paths):
            if not os.path.isabs(p):
                paths[i] = os.path.relpath(p, save_dir)
    return CheckpointState(model_checkpoint_path, paths, all_model_checkpoint_timestamps or (),
                           last_preserved_timestamp or 0.0)


def remove_checkpoint(checkpoint_prefix, checkpoint_format_version=2, meta_graph_suffix="meta"):
    """Delete a checkpoint's files: its meta graph, and its index and data files (format V2,
    the default) or the single file a V1 checkpoint is; missing files are no error."""
    base = re.sub(r"-[\d?]+-of-\d+$", "", checkpoint_prefix)
    patterns = [f"{glob.escape(base)}.{meta_graph_suffix}"]
    if checkpoint_format_version == 2:
        escaped = glob.escape(checkpoint_prefix)
        patterns += [escaped + ".index", escaped + ".data-?????-of-?????"]
    else:
        patterns.append(glob.escape(checkpoint_prefix))
    for pattern in patterns:
        for path in glob.glob(pattern):
            try:
                os.remove(path)
            except FileNotFoundError:
                logger.warning("Hit NotFoundError when deleting '%s', possibly because another "
                               "process/thread is also deleting/moving the same file", path)
