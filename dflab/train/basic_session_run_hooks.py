"""The standard hooks: ``StopAtStepHook``, ``CheckpointSaverHook``, ``NanTensorHook``,
``LoggingTensorHook``, ``StepCounterHook`` (TF1's ``basic_session_run_hooks``), and the timer
they share.

Hooks that depend on the global step read it in ``before_run`` (fetched with the caller's
fetches, so its value is the one *before* the step's update, as in TF) and check it again with
a separate read only when a decision hangs on it.
"""

from __future__ import annotations

import logging
import os
import time

import numpy as np

from dflab.train import training_util
from dflab.train.session_run_hook import SessionRunArgs, SessionRunHook

logger = logging.getLogger("dflab.train")


class SecondOrStepTimer:
    """Triggers every ``every_secs`` seconds or every ``every_steps`` steps (exactly one)."""

    def __init__(self, every_secs=None, every_steps=None):
        if (every_secs is None) == (every_steps is None):
            raise ValueError("exactly one of every_secs and every_steps should be provided.")
        self._every_secs = every_secs
        self._every_steps = every_steps
        self.reset()

    def reset(self):
        self._last_time = None
        self._last_step = None

    def should_trigger_for_step(self, step) -> bool:
        if self._last_step is None:
            return True
        if self._last_step == step:
            return False
        if self._every_secs is not None:
            return time.time() >= self._last_time + self._every_secs
        return step >= self._last_step + self._every_steps

    def update_last_triggered_step(self, step):
        now = time.time()
        elapsed = None if self._last_time is None else (now - self._last_time,
                                                        step - self._last_step)
        self._last_time, self._last_step = now, step
        return elapsed

    def last_triggered_step(self):
        return self._last_step


def _global_step_tensor():
    step = training_util.get_global_step()
    if step is None:
        raise RuntimeError("Global step should be created to use this hook.")
    return step


class StopAtStepHook(SessionRunHook):
    """Requests a stop once the global step reaches ``last_step`` (or start + ``num_steps``)."""

    def __init__(self, num_steps=None, last_step=None):
        if (num_steps is None) == (last_step is None):
            raise ValueError("One of num_steps or last_step must be specified.")
        if num_steps is not None and num_steps < 0:
            raise ValueError("num_steps must be non-negative")
        self._num_steps = num_steps
        self._last_step = last_step

    def begin(self):
        self._global_step_tensor = _global_step_tensor()

    def after_create_session(self, session, coord):
        step = int(session.run(self._global_step_tensor))
        if self._last_step is None:
            self._last_step = step + self._num_steps

    def before_run(self, run_context):
        return SessionRunArgs(self._global_step_tensor)

    def after_run(self, run_context, run_values):
        if int(run_values.results) + 1 >= self._last_step:
            # The fetched value predates this step's update: read the step again to be sure.
            if int(run_context.session.run(self._global_step_tensor)) >= self._last_step:
                run_context.request_stop()


class CheckpointSaverHook(SessionRunHook):
    """Saves a checkpoint every ``save_secs`` seconds or ``save_steps`` steps, and at the end."""

    def __init__(self, checkpoint_dir, save_secs=None, save_steps=None, saver=None,
                 checkpoint_basename="model.ckpt", scaffold=None, listeners=None):
        if saver is not None and scaffold is not None:
            raise ValueError("You cannot provide both saver and scaffold.")
        self._checkpoint_dir = checkpoint_dir
        self._save_path = os.path.join(checkpoint_dir, checkpoint_basename)
        self._saver = saver
        self._scaffold = scaffold
        self._timer = SecondOrStepTimer(every_secs=save_secs, every_steps=save_steps)
        self._listeners = list(listeners or [])

    def begin(self):
        self._global_step_tensor = _global_step_tensor()
        os.makedirs(self._checkpoint_dir, exist_ok=True)
        for listener in self._listeners:
            listener.begin()

    def after_create_session(self, session, coord):
        step = int(session.run(self._global_step_tensor))
        # A checkpoint at the start (TF does too), so even a run killed at once can resume.
        self._save(session, step)
        self._timer.update_last_triggered_step(step)

    def before_run(self, run_context):
        return SessionRunArgs(self._global_step_tensor)

    def after_run(self, run_context, run_values):
        stale = int(run_values.results)
        if self._timer.should_trigger_for_step(stale + 1):
            step = int(run_context.session.run(self._global_step_tensor))
            if self._timer.should_trigger_for_step(step):
                self._timer.update_last_triggered_step(step)
                if self._save(run_context.session, step):
                    run_context.request_stop()

    def end(self, session):
        step = int(session.run(self._global_step_tensor))
        if step != self._timer.last_triggered_step():
            self._save(session, step)
        for listener in self._listeners:
            listener.end(session, step)

    def _get_saver(self):
        if self._saver is not None:
            return self._saver
        if self._scaffold is not None:
            return self._scaffold.saver
        from dflab.framework import ops as _ops

        savers = _ops.get_collection(_ops.GraphKeys.SAVERS)
        if len(savers) != 1:
            raise RuntimeError(f"Expected exactly one saver in the SAVERS collection, found "
                               f"{len(savers)}; pass saver= or scaffold=")
        return savers[0]

    def _save(self, session, step) -> bool:
        """Save; True when a listener asks to stop training."""
        for listener in self._listeners:
            listener.before_save(session, step)
        # The step tensor, not ``step``: a consistent saver reads it inside its gate, so the
        # file name matches the saved state even while other threads train.
        path = self._get_saver().save(session, self._save_path,
                                      global_step=self._global_step_tensor)
        logger.info("Saved checkpoint for step %d: %s", step, path)
        stop = False
        for listener in self._listeners:
            if listener.after_save(session, step):
                stop = True
        return stop


class CheckpointSaverListener:
    def begin(self):
        pass

    def before_save(self, session, global_step_value):
        pass

    def after_save(self, session, global_step_value):
        return False

    def end(self, session, global_step_value):
        pass


class NanLossDuringTrainingError(RuntimeError):
    def __str__(self):
        return "NaN loss during training."


class NanTensorHook(SessionRunHook):
    """Fails (or stops) training when ``loss_tensor`` is NaN."""

    def __init__(self, loss_tensor, fail_on_nan_loss=True):
        self._loss_tensor = loss_tensor
        self._fail_on_nan_loss = fail_on_nan_loss

    def before_run(self, run_context):
        return SessionRunArgs(self._loss_tensor)

    def after_run(self, run_context, run_values):
        if np.isnan(run_values.results).any():
            if self._fail_on_nan_loss:
                raise NanLossDuringTrainingError
            logger.warning("Model diverged with loss = NaN.")
            run_context.request_stop()


def _as_named(tensors):
    if isinstance(tensors, dict):
        return dict(tensors), sorted(tensors)
    tensors = list(tensors)
    names = [getattr(t, "name", str(t)) for t in tensors]
    return dict(zip(names, tensors)), names


class LoggingTensorHook(SessionRunHook):
    """Logs the values of ``tensors`` every N steps or seconds (and/or at the end)."""

    def __init__(self, tensors, every_n_iter=None, every_n_secs=None, at_end=False,
                 formatter=None):
        if not at_end and (every_n_iter is None) == (every_n_secs is None):
            raise ValueError("either at_end and/or exactly one of every_n_iter and "
                             "every_n_secs must be provided.")
        if every_n_iter is not None and every_n_iter <= 0:
            raise ValueError(f"invalid every_n_iter={every_n_iter}.")
        self._tensors, self._tag_order = _as_named(tensors)
        self._timer = None if (every_n_iter is None and every_n_secs is None) else \
            SecondOrStepTimer(every_secs=every_n_secs, every_steps=every_n_iter)
        self._formatter = formatter
        self._log_at_end = at_end
        self.logged = []  # the values logged, newest last (handy in notebooks and tests)

    def begin(self):
        self._iter_count = 0
        if self._timer is not None:
            self._timer.reset()

    def before_run(self, run_context):
        self._should_trigger = self._timer is not None and \
            self._timer.should_trigger_for_step(self._iter_count)
        return SessionRunArgs(self._tensors) if self._should_trigger else None

    def _log(self, values):
        self.logged.append(values)
        if self._formatter is not None:
            logger.info(self._formatter(values))
        else:
            logger.info(", ".join(f"{tag} = {values[tag]}" for tag in self._tag_order))

    def after_run(self, run_context, run_values):
        if self._should_trigger:
            self._timer.update_last_triggered_step(self._iter_count)
            self._log(run_values.results)
        self._iter_count += 1

    def end(self, session):
        if self._log_at_end:
            self._log(session.run(self._tensors))


class StepCounterHook(SessionRunHook):
    """Measures global steps per second every N steps or seconds (logged; last value kept)."""

    def __init__(self, every_n_steps=100, every_n_secs=None, output_dir=None,
                 summary_writer=None):
        if (every_n_steps is None) == (every_n_secs is None):
            raise ValueError("exactly one of every_n_steps and every_n_secs should be provided.")
        self._timer = SecondOrStepTimer(every_steps=every_n_steps, every_secs=every_n_secs)
        self.steps_per_sec = None

    def begin(self):
        self._global_step_tensor = _global_step_tensor()

    def before_run(self, run_context):
        return SessionRunArgs(self._global_step_tensor)

    def after_run(self, run_context, run_values):
        step = int(run_values.results) + 1
        if self._timer.should_trigger_for_step(step):
            elapsed = self._timer.update_last_triggered_step(step)
            if elapsed is not None and elapsed[0] > 0:
                self.steps_per_sec = elapsed[1] / elapsed[0]
                logger.info("global_step/sec: %g", self.steps_per_sec)


class FeedFnHook(SessionRunHook):
    """Feeds ``feed_fn()`` (a dict) into every run."""

    def __init__(self, feed_fn):
        self.feed_fn = feed_fn

    def before_run(self, run_context):
        return SessionRunArgs(fetches=None, feed_dict=self.feed_fn())


class FinalOpsHook(SessionRunHook):
    """Runs ``final_ops`` (a tensor, list or dict) once when the session ends cleanly; their
    values are then ``final_ops_values``."""

    def __init__(self, final_ops, final_ops_feed_dict=None):
        self._final_ops = final_ops
        self._final_ops_feed_dict = final_ops_feed_dict
        self._final_ops_values = None

    @property
    def final_ops_values(self):
        return self._final_ops_values

    def end(self, session):
        if self._final_ops is None:
            return
        from dflab.framework import errors

        try:
            self._final_ops_values = session.run(self._final_ops,
                                                 feed_dict=self._final_ops_feed_dict)
        except (errors.OutOfRangeError, StopIteration) as e:
            logger.warning("An OutOfRangeError or StopIteration exception is raised by the "
                           "code in FinalOpsHook. This typically means the Ops running by the "
                           "FinalOpsHook have a dependency back to some input source, which "
                           "should not happen. For example, for metrics in "
                           "tf.estimator.Estimator, all metrics functions return two Ops: "
                           "`value_op` and  `update_op`. Estimator.evaluate calls the "
                           "`update_op` for each batch of the data in input source and, once "
                           "it is exhausted, it call the `value_op` to get the metric values. "
                           "The `value_op` here should have dependency back to variables "
                           "reading only, rather than reading another batch from input. "
                           "Otherwise, the `value_op`, executed by `FinalOpsHook`, triggers "
                           "another data reading, which ends OutOfRangeError/StopIteration. "
                           "Please fix that.")
            raise e


class GlobalStepWaiterHook(SessionRunHook):
    """Holds this worker's first run until the global step reaches ``wait_until_step`` (read
    every half second): workers of an asynchronous job start one after another, so a slow
    start does not train on barely initialized variables."""

    def __init__(self, wait_until_step):
        self._wait_until_step = wait_until_step

    def begin(self):
        self._worker_is_started = False
        self._global_step_tensor = training_util.get_global_step()
        if self._global_step_tensor is None:
            raise RuntimeError("Global step should be created to use _GlobalStepWaiterHook.")

    def before_run(self, run_context):
        if self._worker_is_started:
            return None
        if self._wait_until_step <= 0:
            self._worker_is_started = True
            return None
        logger.info("Waiting for global step %d before starting training.",
                    self._wait_until_step)
        last_logged_step = 0
        while True:
            current_step = run_context.session.run(self._global_step_tensor)
            if current_step >= self._wait_until_step:
                self._worker_is_started = True
                return None
            if current_step - last_logged_step > 1000:
                logger.info("Waiting for global step %d before starting training. Current "
                            "step is %d.", self._wait_until_step, current_step)
                last_logged_step = current_step
            time.sleep(0.5)
