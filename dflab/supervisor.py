"""``tf.train.Supervisor``: TF 1.x's training-loop helper (before ``MonitoredTrainingSession``).

It finds or makes the ops a training program needs (init, local init, ready check, saver,
summary op, global step: the graph's collections first, as TF does), finalizes the graph, and
hands out sessions through a ``SessionManager``: the chief restores the latest checkpoint of
``logdir`` or initializes the model, writes the graph, and starts the standard services, each
a ``LooperThread`` on the supervisor's coordinator: summaries every ``save_summaries_secs``
(with a steps-per-second summary), a checkpoint every ``save_model_secs`` (the first at once);
queue runners start too. ``managed_session`` is the usual way in: on leaving it the services
stop and the session closes; an exception raised inside it is handed to the coordinator,
whose ``join`` (in ``stop``) re-raises it unless it is a clean stop (``OutOfRangeError``: the
input ran out), as in TF.

It lives at the package level, not in ``dflab.train``, because it writes summaries
(``dflab.summary``), which sits above the training layer.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.ops import GraphKeys
from dflab.ops import control_flow_ops, lookup_ops, variables
from dflab.ops.summary_ops import tb_proto
from dflab.summary import FileWriter, merge_all
from dflab.train import coordinator, training_util
from dflab.train.saver import Saver
from dflab.train.session_manager import SessionManager

logger = logging.getLogger("dflab.train")


class Supervisor:
    """Creates sessions, restores or initializes the model, saves checkpoints and writes
    summaries in background threads (see the module docstring)."""

    # A value for the constructor's arguments: "find or make the usual one".
    USE_DEFAULT = 0

    def __init__(self, graph=None, ready_op=USE_DEFAULT, ready_for_local_init_op=USE_DEFAULT,
                 is_chief=True, init_op=USE_DEFAULT, init_feed_dict=None,
                 local_init_op=USE_DEFAULT, logdir=None, summary_op=USE_DEFAULT,
                 saver=USE_DEFAULT, global_step=USE_DEFAULT, save_summaries_secs=120,
                 save_model_secs=600, recovery_wait_secs=30, stop_grace_secs=120,
                 checkpoint_basename="model.ckpt", session_manager=None,
                 summary_writer=USE_DEFAULT, init_fn=None, local_init_run_options=None):
        graph = graph or _ops.get_default_graph()
        with graph.as_default():
            self._ready_op = self._found_or(ready_op, GraphKeys.READY_OP,
                                            variables.report_uninitialized_variables)
            self._ready_for_local_init_op = (
                self._first(GraphKeys.READY_FOR_LOCAL_INIT_OP)
                if ready_for_local_init_op is Supervisor.USE_DEFAULT
                else ready_for_local_init_op)
            self._init_op = self._found_or(init_op, GraphKeys.INIT_OP,
                                           variables.global_variables_initializer)
            self._init_feed_dict = init_feed_dict
            self._local_init_op = self._found_or(local_init_op, GraphKeys.LOCAL_INIT_OP,
                                                 self._default_local_init_op)
            self._saver = self._found_or(
                saver, GraphKeys.SAVERS,
                lambda: Saver() if variables.global_variables() else None)
            self._summary_op = self._found_or(summary_op, GraphKeys.SUMMARY_OP, merge_all)
            self._global_step = self._found_or(global_step, GraphKeys.GLOBAL_STEP,
                                               self._default_global_step_tensor)
        self._graph = graph
        self._is_chief = is_chief
        self._coord = coordinator.Coordinator()
        self._recovery_wait_secs = recovery_wait_secs
        self._stop_grace_secs = stop_grace_secs
        self._init_fn = init_fn
        self._local_init_run_options = local_init_run_options
        self._logdir = None
        self._save_summaries_secs = None
        self._save_model_secs = None
        self._save_path = None
        self._summary_writer = None
        self._graph_added_to_summary = False
        if is_chief:
            self._logdir = logdir
            self._save_summaries_secs = save_summaries_secs
            self._save_model_secs = save_model_secs
            if logdir:
                self._save_path = os.path.join(logdir, checkpoint_basename)
            if summary_writer is Supervisor.USE_DEFAULT:
                if logdir:
                    self._summary_writer = FileWriter(logdir)
            else:
                self._summary_writer = summary_writer
        self._session_manager = session_manager or SessionManager(
            local_init_op=self._local_init_op, ready_op=self._ready_op,
            ready_for_local_init_op=self._ready_for_local_init_op, graph=graph,
            recovery_wait_secs=recovery_wait_secs,
            local_init_run_options=local_init_run_options)
        self._verify_setup()
        graph.finalize()

    # --- finding the ops ------------------------------------------------------------------------
    @staticmethod
    def _first(key):
        found = _ops.get_collection(key)
        if len(found) > 1:
            logger.info("Found %d %s operations. Returning the first one.", len(found), key)
        return found[0] if found else None

    def _found_or(self, given, key, make):
        if given is not Supervisor.USE_DEFAULT:
            return given
        found = self._first(key)
        if found is None:
            found = make()
            if found is not None:
                _ops.add_to_collection(key, found)
        return found

    @staticmethod
    def _default_local_init_op():
        return control_flow_ops.group(variables.local_variables_initializer(),
                                      lookup_ops.tables_initializer())

    @staticmethod
    def _default_global_step_tensor():
        try:
            gs = _ops.get_default_graph().get_tensor_by_name("global_step:0")
        except (KeyError, ValueError):
            return None
        if gs.dtype.base_dtype in (_dt.int32, _dt.int64):
            return gs
        logger.warning("Found 'global_step' is not an int type: %s", gs.dtype)
        return None

    def _verify_setup(self):
        if self._is_chief:
            return
        for op in self._graph.get_operations():
            if op.type in ("Variable", "VariableV2") and not op.device:
                raise ValueError(f"When using replicas, all Variables must have their device "
                                 f"set: {op}")

    # --- properties -----------------------------------------------------------------------------
    is_chief = property(lambda self: self._is_chief)
    session_manager = property(lambda self: self._session_manager)
    coord = property(lambda self: self._coord)
    init_op = property(lambda self: self._init_op)
    init_feed_dict = property(lambda self: self._init_feed_dict)
    ready_op = property(lambda self: self._ready_op)
    ready_for_local_init_op = property(lambda self: self._ready_for_local_init_op)
    summary_writer = property(lambda self: self._summary_writer)
    summary_op = property(lambda self: self._summary_op)
    save_summaries_secs = property(lambda self: self._save_summaries_secs)
    global_step = property(lambda self: self._global_step)
    saver = property(lambda self: self._saver)
    save_model_secs = property(lambda self: self._save_model_secs)
    save_path = property(lambda self: self._save_path)

    # --- sessions and services ------------------------------------------------------------------
    def _write_graph(self):
        if self._graph_added_to_summary:
            return
        if self._summary_writer:
            self._summary_writer.add_graph(self._graph)
            self._graph_added_to_summary = True

    def start_standard_services(self, sess):
        """Start the summary, step-counter and checkpoint threads; returns them."""
        if not self._is_chief:
            raise RuntimeError("Only chief supervisor can start standard services. Because "
                               "only chief supervisors can write events.")
        if not self._logdir:
            logger.warning("Standard services need a 'logdir' passed to the SessionManager")
            return []
        if self._global_step is not None and self._summary_writer:
            step = training_util.global_step(sess, self._global_step)
            log = tb_proto("event_pb2").SessionLog
            self._summary_writer.add_session_log(log(status=log.START), step)
        threads = []
        if self._save_summaries_secs and self._summary_writer:
            if self._summary_op is not None:
                threads.append(_SummaryThread(self, sess))
            if self._global_step is not None:
                threads.append(_StepCounterThread(self, sess))
        if self._saver and self._save_model_secs:
            threads.append(_CheckpointThread(self, sess))
        for t in threads:
            t.start()
        return threads

    def prepare_or_wait_for_session(self, master="", config=None, wait_for_checkpoint=False,
                                    max_wait_secs=7200, start_standard_services=True):
        """The chief's restored or initialized session (services started), or, for another
        worker, a session once the chief has made the model ready."""
        self._coord.clear_stop()
        if self._summary_writer:
            self._summary_writer.reopen()
        if self._is_chief:
            sess = self._session_manager.prepare_session(
                master, init_op=self._init_op, saver=self._saver,
                checkpoint_dir=self._logdir, wait_for_checkpoint=wait_for_checkpoint,
                max_wait_secs=max_wait_secs, config=config,
                init_feed_dict=self._init_feed_dict, init_fn=self._init_fn)
            self._write_graph()
            if start_standard_services:
                logger.info("Starting standard services.")
                self.start_standard_services(sess)
        else:
            sess = self._session_manager.wait_for_session(master, config=config,
                                                          max_wait_secs=max_wait_secs)
        if start_standard_services:
            logger.info("Starting queue runners.")
            self.start_queue_runners(sess)
        return sess

    def start_queue_runners(self, sess, queue_runners=None):
        """Start the queue runners (default: the graph's) on the supervisor's coordinator."""
        if queue_runners is None:
            queue_runners = self._graph.get_collection(GraphKeys.QUEUE_RUNNERS)
        threads = []
        for qr in queue_runners:
            threads.extend(qr.create_threads(sess, coord=self._coord, daemon=True,
                                             start=True))
        return threads

    def loop(self, timer_interval_secs, target, args=None, kwargs=None):
        """Call ``target`` every ``timer_interval_secs`` (repeatedly if None) in a thread the
        supervisor stops with the others."""
        looper = coordinator.LooperThread(self._coord, timer_interval_secs, target=target,
                                          args=args, kwargs=kwargs)
        looper.start()
        return looper

    def stop(self, threads=None, close_summary_writer=True, ignore_live_threads=False):
        """Stop the services and queue runners and wait for them (the session stays open)."""
        self._coord.request_stop()
        try:
            self._coord.join(threads, stop_grace_period_secs=self._stop_grace_secs,
                             ignore_live_threads=ignore_live_threads)
        finally:
            if close_summary_writer and self._summary_writer:
                log = tb_proto("event_pb2").SessionLog
                self._summary_writer.add_session_log(log(status=log.STOP))
                self._summary_writer.close()
                self._graph_added_to_summary = False

    def request_stop(self, ex=None):
        self._coord.request_stop(ex=ex)

    def should_stop(self):
        return self._coord.should_stop()

    def stop_on_exception(self):
        return self._coord.stop_on_exception()

    def wait_for_stop(self):
        self._coord.wait_for_stop()

    def summary_computed(self, sess, summary, global_step=None):
        """Write a summary computed by the caller (with the current global step)."""
        if not self._summary_writer:
            raise RuntimeError("Writing a summary requires a summary writer.")
        if global_step is None and self._global_step is not None:
            global_step = training_util.global_step(sess, self._global_step)
        self._summary_writer.add_summary(summary, global_step)

    @contextlib.contextmanager
    def managed_session(self, master="", config=None, start_standard_services=True,
                        close_summary_writer=True):
        """A session for a ``with`` block; the services stop and the session closes after
        it. An exception inside is recorded on the coordinator and re-raised by ``stop``
        unless it is a clean stop (``OutOfRangeError``)."""
        sess = None
        try:
            sess = self.prepare_or_wait_for_session(
                master=master, config=config, start_standard_services=start_standard_services)
            yield sess
        except Exception as e:  # noqa: BLE001 - handed to the coordinator, as TF does
            self.request_stop(e)
        finally:
            try:
                self.stop(close_summary_writer=close_summary_writer)
            finally:
                if sess is not None:
                    with contextlib.suppress(Exception):
                        sess.close()

    # TF's camel-case aliases.
    PrepareSession = prepare_or_wait_for_session
    StartQueueRunners = start_queue_runners
    StartStandardServices = start_standard_services
    Stop = stop
    RequestStop = request_stop
    Loop = loop
    ShouldStop = should_stop
    StopOnException = stop_on_exception
    WaitForStop = wait_for_stop
    SummaryComputed = summary_computed


class _SummaryThread(coordinator.LooperThread):
    def __init__(self, sv, sess):
        super().__init__(sv.coord, sv.save_summaries_secs)
        self._sv, self._sess = sv, sess

    def run_loop(self):
        if self._sv.global_step is not None:
            summary, step = self._sess.run([self._sv.summary_op, self._sv.global_step])
        else:
            summary, step = self._sess.run(self._sv.summary_op), None
        if self._sv.summary_writer:
            logger.info("Recording summary at step %s.", step)
            self._sv.summary_writer.add_summary(summary, step)


class _StepCounterThread(coordinator.LooperThread):
    def __init__(self, sv, sess):
        super().__init__(sv.coord, sv.save_summaries_secs)
        self._sv, self._sess = sv, sess
        self._tag = f"{sv.global_step.op.name}/sec"
        self._last_time = 0.0
        self._last_step = 0

    def start_loop(self):
        self._last_time = time.time()
        self._last_step = training_util.global_step(self._sess, self._sv.global_step)

    def run_loop(self):
        step = training_util.global_step(self._sess, self._sv.global_step)
        now = time.time()
        elapsed = now - self._last_time
        rate = (step - self._last_step) / elapsed if elapsed > 0 else float("inf")
        self._last_step, self._last_time = step, now
        if self._sv.summary_writer:
            summary = tb_proto("summary_pb2").Summary
            self._sv.summary_writer.add_summary(
                summary(value=[summary.Value(tag=self._tag, simple_value=rate)]), step)


class _CheckpointThread(coordinator.LooperThread):
    def __init__(self, sv, sess):
        super().__init__(sv.coord, sv.save_model_secs)
        self._sv, self._sess = sv, sess

    def run_loop(self):
        logger.info("Saving checkpoint to path %s", self._sv.save_path)
        self._sv.saver.save(self._sess, self._sv.save_path, global_step=self._sv.global_step)
        if self._sv.summary_writer and self._sv.global_step is not None:
            step = training_util.global_step(self._sess, self._sv.global_step)
            log = tb_proto("event_pb2").SessionLog
            self._sv.summary_writer.add_session_log(
                log(status=log.CHECKPOINT, checkpoint_path=self._sv.save_path), step)

