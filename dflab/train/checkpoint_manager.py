"""``tf.train.CheckpointManager``: numbered object-based checkpoints in one directory, the
newest ``max_to_keep`` kept.

Each ``save`` writes ``<directory>/<checkpoint_name>-N`` through ``Checkpoint.write`` (N: the
checkpoint's ``save_counter``, incremented first, or the number given), then keeps the
directory's ``checkpoint`` state file as TF's manager does: relative paths, one timestamp per
kept checkpoint and the last preserved timestamp. The state is written with the new checkpoint
*before* older ones are deleted and again after, so a process killed between the two leaves
the new checkpoint named as the latest; a manager made later over the directory adopts the
kept checkpoints newer than the last preserved one, as TF's, and of those only the ones still
on disk (TF does not look).
``keep_checkpoint_every_n_hours`` keeps, among those pushed out, one per that many hours for
good (no longer listed, never deleted); ``checkpoint_interval`` with a ``step_counter`` skips
a save until the step has advanced that far since the last one.
"""

from __future__ import annotations

import collections
import os
import time

from dflab.kernels import io_kernels
from dflab.train import checkpoint_utils


class CheckpointManager:
    """Saves ``checkpoint`` (a ``tf.train.Checkpoint``) under ``directory`` and deletes the
    old checkpoints beyond ``max_to_keep`` (None: keep all); see the module docstring."""

    def __init__(self, checkpoint, directory, max_to_keep, keep_checkpoint_every_n_hours=None,
                 checkpoint_name="ckpt", step_counter=None, checkpoint_interval=None,
                 init_fn=None, last_checkpoint_step=None):
        if max_to_keep is not None and max_to_keep <= 0:
            raise ValueError("Expected a positive integer or `None` for `max_to_keep`, got "
                             f"{max_to_keep}.")
        if checkpoint_interval is not None and step_counter is None:
            raise ValueError("`step_counter` should be passed if `checkpoint_interval` is not "
                             "None.")
        self._checkpoint = checkpoint
        self._directory = os.fspath(directory)
        self._max_to_keep = max_to_keep
        self._keep_every_n_hours = keep_checkpoint_every_n_hours
        self._prefix = os.path.join(self._directory, checkpoint_name)
        self._step_counter = step_counter
        self._checkpoint_interval = checkpoint_interval
        self._init_fn = init_fn
        self._last_saved_step = None if checkpoint_interval is None else last_checkpoint_step
        self._kept: collections.OrderedDict[str, float] = collections.OrderedDict()
        self._latest = None
        self._recover(time.time())

    def _recover(self, now: float) -> None:
        """Adopt what an earlier manager (or process) recorded in the directory: the kept
        checkpoints newer than the last preserved one (a clock that went back is trusted
        no further than now)."""
        state = checkpoint_utils.get_checkpoint_state(self._directory)
        if state is None:
            self._last_preserved = now - 1.0  # (TF's: a manager re-made at once keeps it)
            return
        self._latest = state.model_checkpoint_path
        self._last_preserved = min(state.last_preserved_timestamp, now)
        stamps = state.all_model_checkpoint_timestamps or \
            [self._last_preserved] * len(state.all_model_checkpoint_paths)
        for path, stamp in zip(state.all_model_checkpoint_paths, stamps):
            stamp = min(stamp, now)
            if stamp > self._last_preserved and checkpoint_utils.checkpoint_exists(path):
                self._kept[path] = stamp

    # --- what TF's manager exposes -------------------------------------------------------------
    @property
    def directory(self) -> str:
        return self._directory

    @property
    def checkpoint(self):
        return self._checkpoint

    @property
    def checkpoint_interval(self):
        return self._checkpoint_interval

    @property
    def latest_checkpoint(self) -> str | None:
        """The prefix of the newest checkpoint saved here (None before any)."""
        return self._latest

    @property
    def checkpoints(self) -> list[str]:
        """The kept checkpoints, oldest first."""
        return list(self._kept)

    # --- saving --------------------------------------------------------------------------------
    def save(self, checkpoint_number=None, check_interval=True, options=None) -> str | None:
        """Write a new checkpoint and delete what ``max_to_keep`` pushes out; returns its
        prefix, or None where ``checkpoint_interval`` says it is too early."""
        step = None
        if self._checkpoint_interval is not None:
            step = int(_value(self._step_counter))
            # One checkpoint a step, whatever check_interval says (TF's).
            if self._last_saved_step is not None and (step == self._last_saved_step or (
                    check_interval
                    and step - self._last_saved_step < self._checkpoint_interval)):
                return None
        counter = self._checkpoint.save_counter
        counter.assign_add(1)
        number = int(_value(counter)) if checkpoint_number is None else \
            int(_value(checkpoint_number))
        path = self._checkpoint.write(f"{self._prefix}-{number}")
        self._kept.pop(path, None)  # an overwritten checkpoint moves to the end of the queue
        self._kept[path] = time.time()
        self._latest = path
        if step is not None:
            self._last_saved_step = step
        self._record_state()  # the new checkpoint is named before anything is deleted
        if self._sweep():
            self._record_state()
        return path

    def _sweep(self) -> bool:
        """Drop the oldest checkpoints beyond ``max_to_keep``, deleting their files unless
        ``keep_checkpoint_every_n_hours`` preserves them; whether any was dropped."""
        if not self._max_to_keep or len(self._kept) <= self._max_to_keep:
            return False
        while len(self._kept) > self._max_to_keep:
            path, stamp = self._kept.popitem(last=False)
            if self._keep_every_n_hours and \
                    stamp - self._keep_every_n_hours * 3600.0 >= self._last_preserved:
                self._last_preserved = stamp  # kept for good, no longer listed
                continue
            io_kernels.delete_checkpoint_files(path)
        return True

    def _record_state(self) -> None:
        # Absolute paths in, relative ones out: the state file names them from the directory
        # (which may itself be relative to the working directory).
        checkpoint_utils.update_checkpoint_state(
            os.path.abspath(self._directory), os.path.abspath(self._latest),
            [os.path.abspath(p) for p in self._kept],
            all_model_checkpoint_timestamps=list(self._kept.values()),
            last_preserved_timestamp=self._last_preserved, save_relative_paths=True)

    # --- restoring -----------------------------------------------------------------------------
    def restore_or_initialize(self) -> str | None:
        """Restore the latest checkpoint and return its prefix; without one, run ``init_fn``
        (if given) and return None."""
        if self._latest is not None:
            self._checkpoint.restore(self._latest)
            if self._checkpoint_interval is not None:  # the interval counts from there
                self._last_saved_step = int(_value(self._step_counter))
            return self._latest
        if self._init_fn is not None:
            self._init_fn()
        return None

    def sync(self) -> None:
        """Nothing to wait for: every save is written before ``save`` returns."""


def _value(v):
    """A Python number from a number, an eager tensor or a variable."""
    return v.numpy() if hasattr(v, "numpy") else v
