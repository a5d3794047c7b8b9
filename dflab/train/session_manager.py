"""``tf.train.SessionManager``: make a session whose model is ready, TF 1.x's way.

The chief calls ``prepare_session``: restore the latest checkpoint of ``checkpoint_dir`` (or
the file given), else run ``init_op`` and ``init_fn``; then run the local init op once the
model is ready for it, and check that the model is ready (``ready_op``: the names of the
variables still uninitialized, empty when ready). Other workers call ``wait_for_session``,
which polls until the chief has made the model ready; ``recover_session`` only restores.
"""

from __future__ import annotations

import logging
import time

import numpy as np

from dflab.framework import errors
from dflab.framework import ops as _ops
from dflab.runtime.session import Session
from dflab.train import checkpoint_utils

logger = logging.getLogger("dflab.train")


def _not_ready_names(value) -> str:
    return ", ".join(v.decode("utf-8") if isinstance(v, bytes) else str(v)
                     for v in np.ravel(value))


class SessionManager:
    """Creates sessions for a graph, restoring or initializing the model."""

    def __init__(self, local_init_op=None, ready_op=None, ready_for_local_init_op=None,
                 graph=None, recovery_wait_secs=30, local_init_run_options=None,
                 local_init_feed_dict=None):
        self._local_init_op = local_init_op
        self._ready_op = ready_op
        self._ready_for_local_init_op = ready_for_local_init_op
        self._graph = graph or _ops.get_default_graph()
        self._recovery_wait_secs = recovery_wait_secs
        self._local_init_run_options = local_init_run_options
        self._local_init_feed_dict = local_init_feed_dict
        self._target = None
        if ready_for_local_init_op is not None and local_init_op is None:
            raise ValueError("If you pass a ready_for_local_init_op you must also pass a "
                             f"local_init_op , ready_for_local_init_op "
                             f"[{ready_for_local_init_op}]")

    def _restore_checkpoint(self, master, saver=None, checkpoint_dir=None,
                            checkpoint_filename_with_path=None, wait_for_checkpoint=False,
                            max_wait_secs=7200, config=None):
        """(session, whether a checkpoint was restored)."""
        self._target = master
        sess = Session(master, graph=self._graph, config=config)
        if checkpoint_dir and checkpoint_filename_with_path:
            raise ValueError("Can not provide both checkpoint_dir and "
                             "checkpoint_filename_with_path.")
        if not saver or not (checkpoint_dir or checkpoint_filename_with_path):
            return sess, False
        if checkpoint_filename_with_path:
            saver.restore(sess, checkpoint_filename_with_path)
            return sess, True
        waited = 0.0
        state = checkpoint_utils.get_checkpoint_state(checkpoint_dir)
        while not state or not state.model_checkpoint_path:
            if wait_for_checkpoint and waited < max_wait_secs:
                logger.info("Waiting for checkpoint to be available.")
                time.sleep(self._recovery_wait_secs)
                waited += self._recovery_wait_secs
                state = checkpoint_utils.get_checkpoint_state(checkpoint_dir)
            else:
                return sess, False
        saver.restore(sess, state.model_checkpoint_path)
        saver.recover_last_checkpoints(state.all_model_checkpoint_paths)
        return sess, True

    def prepare_session(self, master, init_op=None, saver=None, checkpoint_dir=None,
                        checkpoint_filename_with_path=None, wait_for_checkpoint=False,
                        max_wait_secs=7200, config=None, init_feed_dict=None, init_fn=None):
        """A session with the model restored or initialized, and ready."""
        sess, loaded = self._restore_checkpoint(
            master, saver, checkpoint_dir=checkpoint_dir,
            checkpoint_filename_with_path=checkpoint_filename_with_path,
            wait_for_checkpoint=wait_for_checkpoint, max_wait_secs=max_wait_secs,
            config=config)
        try:
            if not loaded:
                if init_op is None and not init_fn and self._local_init_op is None:
                    raise RuntimeError("Model is not initialized and no init_op or init_fn "
                                       "or local_init_op was given")
                if init_op is not None:
                    sess.run(init_op, feed_dict=init_feed_dict)
                if init_fn:
                    init_fn(sess)
            ok, msg = self._try_run_local_init_op(sess)
            if not ok:
                raise RuntimeError("Init operations did not make model ready for local_init. "
                                   f"Init op: {_name(init_op)}, init fn: {init_fn}, error: "
                                   f"{msg}")
            ready, msg = self._model_ready(sess)
            if not ready:
                raise RuntimeError("Init operations did not make model ready. Init op: "
                                   f"{_name(init_op)}, init fn: {init_fn}, local_init_op: "
                                   f"{self._local_init_op}, error: {msg}")
        except BaseException:
            sess.close()
            raise
        return sess

    def recover_session(self, master, saver=None, checkpoint_dir=None,
                        checkpoint_filename_with_path=None, wait_for_checkpoint=False,
                        max_wait_secs=7200, config=None):
        """(session, whether the model was restored and is ready)."""
        sess, loaded = self._restore_checkpoint(
            master, saver, checkpoint_dir=checkpoint_dir,
            checkpoint_filename_with_path=checkpoint_filename_with_path,
            wait_for_checkpoint=wait_for_checkpoint, max_wait_secs=max_wait_secs,
            config=config)
        ok, msg = self._try_run_local_init_op(sess)
        if not loaded:
            return sess, False
        if not ok:
            logger.info("Restoring model from %s did not make model ready for local init: %s",
                        checkpoint_dir or checkpoint_filename_with_path, msg)
            return sess, False
        ready, msg = self._model_ready(sess)
        if not ready:
            logger.info("Restoring model from %s did not make model ready: %s",
                        checkpoint_dir or checkpoint_filename_with_path, msg)
            return sess, False
        logger.info("Restored model from %s", checkpoint_dir or checkpoint_filename_with_path)
        return sess, True

    def wait_for_session(self, master, config=None, max_wait_secs=float("inf")):
        """A session once another process (the chief) has made the model ready."""
        self._target = master
        start = time.time()
        while True:
            sess = Session(master, graph=self._graph, config=config)
            ok, not_ready_local = self._try_run_local_init_op(sess)
            not_ready = None
            if ok:
                ready, not_ready = self._model_ready(sess)
                if ready:
                    return sess
            sess.close()
            remaining = max_wait_secs - (time.time() - start)
            if remaining < self._recovery_wait_secs:
                raise errors.DeadlineExceededError(
                    None, None, f"Session was not ready after waiting {max_wait_secs} secs.")
            logger.info("Waiting for model to be ready. Ready_for_local_init_op: %s, ready: %s",
                        not_ready_local, not_ready)
            time.sleep(self._recovery_wait_secs)

    def _try_run_local_init_op(self, sess):
        if self._local_init_op is None:
            return True, None
        ready, msg = self._ready(self._ready_for_local_init_op, sess,
                                 "Model not ready for local init")
        if not ready:
            return False, msg
        logger.info("Running local_init_op.")
        sess.run(self._local_init_op, feed_dict=self._local_init_feed_dict,
                 options=self._local_init_run_options)
        logger.info("Done running local_init_op.")
        return True, None

    def _model_ready(self, sess):
        return self._ready(self._ready_op, sess, "Model not ready")

    @staticmethod
    def _ready(op, sess, msg):
        if op is None:
            return True, None
        try:
            value = sess.run(op)
        except errors.FailedPreconditionError as e:
            if "uninitialized" not in str(e):
                logger.warning("%s : error [%s]", msg, e)
                raise
            return False, str(e)
        value = np.asarray(value)
        if value.dtype == np.int32 or value.size == 0:
            return True, None
        return False, "Variables not initialized: " + _not_ready_names(value)


def _name(op):
    return getattr(op, "name", op)


__all__ = ["SessionManager"]
