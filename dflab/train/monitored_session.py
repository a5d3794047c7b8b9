"""``MonitoredSession``, ``MonitoredTrainingSession``, ``SingularMonitoredSession``,
``Scaffold`` and the session creators: training with hooks, automatic checkpoints and recovery.

A ``MonitoredSession`` owns a raw ``Session`` made by a *session creator*: the
``ChiefSessionCreator`` finalizes the ``Scaffold`` (init ops, ready op, saver), then restores the
variables from the newest checkpoint in ``checkpoint_dir`` if there is one, or initializes them.
On creation the queue runners start under a ``Coordinator`` and hooks get
``after_create_session``. Each ``run`` merges the hooks' fetches and feeds with the caller's.

Recovery: when a run fails with ``AbortedError`` or ``UnavailableError`` (a lost worker, a
preempted device), the session is closed and created again (so the variables come back from the
latest checkpoint) and the run is retried; the caller only sees the step repeat.

dflab's default saver (made by the scaffold) is consistent (``Saver(consistent=True)``): each
checkpoint is one point between training steps even when several threads run steps.
"""

from __future__ import annotations

import copy
import logging
import time

from dflab.framework import errors
from dflab.framework import ops as _ops
from dflab.framework.ops import GraphKeys
from dflab.ops import control_flow_ops, lookup_ops
from dflab.ops import variables as _variables
from dflab.runtime.config import RunMetadata
from dflab.runtime.session import Session
from dflab.train import basic_session_run_hooks as _hooks
from dflab.train import checkpoint_utils
from dflab.train.coordinator import Coordinator
from dflab.train.queue_runner import start_queue_runners
from dflab.train.saver import Saver
from dflab.train.session_run_hook import SessionRunContext, SessionRunValues
from dflab.train.step_gate import step_gate

logger = logging.getLogger("dflab.train")

_RECOVERABLE = (errors.AbortedError, errors.UnavailableError)
USE_DEFAULT = object()

# Summaries live above train (dflab.summary, which imports TensorBoard's protos lazily); it
# registers here how to merge a graph's summaries and its SummarySaverHook, so a scaffold gets
# TF's default summary op and MonitoredTrainingSession its summary hook.
_SUMMARY_SUPPORT: dict = {"merge_all": None, "saver_hook": None}


def register_summary_support(merge_all, saver_hook) -> None:
    _SUMMARY_SUPPORT.update(merge_all=merge_all, saver_hook=saver_hook)


def _has_summaries(graph, scaffold) -> bool:
    return bool(scaffold.summary_op is not None or graph.get_collection(GraphKeys.SUMMARY_OP)
                or graph.get_collection(GraphKeys.SUMMARIES))


class Scaffold:
    """The ops a monitored session needs; ``finalize`` fills in defaults and freezes the graph.

    ``copy_from_scaffold=other`` takes every field not given here (left None) from ``other``,
    as it stands when this scaffold is made (finalized or not), as TF does."""

    _FIELDS = ("init_op", "init_feed_dict", "init_fn", "ready_op", "ready_for_local_init_op",
               "local_init_op", "summary_op", "saver")

    def __init__(self, init_op=None, init_feed_dict=None, init_fn=None, ready_op=None,
                 ready_for_local_init_op=None, local_init_op=None, summary_op=None, saver=None,
                 copy_from_scaffold=None):
        given = {"init_op": init_op, "init_feed_dict": init_feed_dict, "init_fn": init_fn,
                 "ready_op": ready_op, "ready_for_local_init_op": ready_for_local_init_op,
                 "local_init_op": local_init_op, "summary_op": summary_op, "saver": saver}
        if copy_from_scaffold is not None:
            given = self._fill_from(copy_from_scaffold, given)
        for field in self._FIELDS:
            setattr(self, "_" + field, given[field])

    @classmethod
    def _fill_from(cls, other, given: dict) -> dict:
        """``given`` with its None fields taken from the scaffold ``other``."""
        if not isinstance(other, Scaffold):
            raise TypeError(f"copy_from_scaffold is not a Scaffold instance: {other!r}")
        return {f: given[f] if given[f] is not None else getattr(other, "_" + f)
                for f in cls._FIELDS}

    def finalize(self):
        """Fill in what was not given, as TF does: from the graph's collections (``INIT_OP``,
        ``READY_OP``, ``LOCAL_INIT_OP``, ``SAVERS``) where an earlier scaffold left them, else
        by building defaults (and recording them there); then finalize the graph. A second
        scaffold on an already finalized graph finds the first one's ops."""
        graph = _ops.get_default_graph()
        self._init_op = self._get_or_default(
            graph, self._init_op, GraphKeys.INIT_OP, _variables.global_variables_initializer)
        self._ready_op = self._get_or_default(
            graph, self._ready_op, GraphKeys.READY_OP,
            _variables.report_uninitialized_variables)
        self._local_init_op = self._get_or_default(
            graph, self._local_init_op, GraphKeys.LOCAL_INIT_OP,
            lambda: control_flow_ops.group(_variables.local_variables_initializer(),
                                           lookup_ops.tables_initializer(),
                                           name="local_init"))
        self._saver = self._get_or_default(
            graph, self._saver, GraphKeys.SAVERS,
            lambda: Saver(sharded=True, allow_empty=True, consistent=True))
        self._summary_op = self._default_summary_op(graph, self._summary_op)
        if not graph.finalized:
            graph.finalize()
        return self

    @staticmethod
    def _default_summary_op(graph, given):
        """The given op, else the graph's ``SUMMARY_OP``, else all its summaries merged (None
        when it has none: nothing is recorded then, as in TF)."""
        if given is not None:
            return given
        found = graph.get_collection(GraphKeys.SUMMARY_OP)
        if found:
            return found[0]
        merge_all = _SUMMARY_SUPPORT["merge_all"]
        if merge_all is None or graph.finalized:
            return None
        op = merge_all()
        if op is not None:
            graph.add_to_collection(GraphKeys.SUMMARY_OP, op)
        return op

    @staticmethod
    def _get_or_default(graph, given, key, default):
        if given is not None:
            return given
        found = graph.get_collection(key)
        if found:
            return found[0]
        if graph.finalized:
            raise RuntimeError(
                f"Graph is finalized and has no {key!r} in its collections: build the "
                "MonitoredSession's scaffold before finalizing the graph.")
        value = default()
        graph.add_to_collection(key, value)
        return value

    init_op = property(lambda self: self._init_op)
    init_feed_dict = property(lambda self: self._init_feed_dict)
    init_fn = property(lambda self: self._init_fn)
    ready_op = property(lambda self: self._ready_op)
    ready_for_local_init_op = property(lambda self: self._ready_for_local_init_op)
    local_init_op = property(lambda self: self._local_init_op)
    summary_op = property(lambda self: self._summary_op)
    saver = property(lambda self: self._saver)


def _merge_run_options(options, extra):
    """The caller's RunOptions with a hook's requests added, as TF's hooked session merges
    them: the higher trace level, the shorter timeout, partition graphs if either asks."""
    if options is None:
        return copy.copy(extra)
    merged = copy.copy(options)
    merged.trace_level = max(options.trace_level, extra.trace_level)
    if extra.timeout_in_ms and (not options.timeout_in_ms
                                or extra.timeout_in_ms < options.timeout_in_ms):
        merged.timeout_in_ms = extra.timeout_in_ms
    merged.output_partition_graphs = (options.output_partition_graphs
                                      or extra.output_partition_graphs)
    merged.report_tensor_allocations_upon_oom = (
        options.report_tensor_allocations_upon_oom or extra.report_tensor_allocations_upon_oom)
    return merged


class SessionCreator:
    """A factory of sessions for ``MonitoredSession`` (the base of ``ChiefSessionCreator`` and
    ``WorkerSessionCreator``)."""

    def create_session(self):
        raise NotImplementedError("create_session is not implemented for "
                                  f"{type(self).__name__}.")


class ChiefSessionCreator(SessionCreator):
    """Creates a session and restores it from the latest checkpoint, or initializes it."""

    def __init__(self, scaffold=None, master="", config=None, checkpoint_dir=None,
                 checkpoint_filename_with_path=None):
        self._scaffold = scaffold or Scaffold()
        self._master = master
        self._config = config
        self._checkpoint_dir = checkpoint_dir
        self._checkpoint_path = checkpoint_filename_with_path

    def _latest(self):
        if self._checkpoint_path:
            return self._checkpoint_path
        if self._checkpoint_dir:
            return checkpoint_utils.latest_checkpoint(self._checkpoint_dir)
        return None

    def _adopt_old_checkpoints(self, saver):
        # TF's SessionManager does this too: max_to_keep then also covers earlier runs' files.
        state = checkpoint_utils.get_checkpoint_state(self._checkpoint_dir) \
            if self._checkpoint_dir else None
        if state is not None:
            saver.recover_last_checkpoints(state.all_model_checkpoint_paths)

    def create_session(self):
        sc = self._scaffold.finalize()
        sess = Session(self._master, graph=_ops.get_default_graph(), config=self._config)
        step_gate(sess)  # before any thread runs a step: consistent saves track every step
        try:
            path = self._latest()
            if path is not None:
                sc.saver.restore(sess, path)
                self._adopt_old_checkpoints(sc.saver)
                logger.info("Restored from checkpoint %s", path)
            else:
                sess.run(sc.init_op, feed_dict=sc.init_feed_dict)
                if sc.init_fn is not None:
                    sc.init_fn(sc, sess)
            if sc.local_init_op is not None:
                sess.run(sc.local_init_op)
            not_ready = sess.run(sc.ready_op) if sc.ready_op is not None else []
            if len(not_ready):
                names = ", ".join(n.decode() if isinstance(n, bytes) else str(n)
                                  for n in not_ready)
                raise RuntimeError(f"Init operations did not make model ready. Variables not "
                                   f"initialized: {names}")
        except BaseException:
            sess.close()
            raise
        return sess


class WorkerSessionCreator(SessionCreator):
    """Creates a session for a non-chief worker: waits until the chief has initialized (or
    restored) the model, then runs the local init op (TF's ``WorkerSessionCreator``)."""

    def __init__(self, scaffold=None, master="", config=None, max_wait_secs=30 * 60):
        self._scaffold = scaffold or Scaffold()
        self._master = master
        self._config = config
        self._max_wait_secs = max_wait_secs

    def create_session(self):
        sc = self._scaffold.finalize()
        sess = Session(self._master, graph=_ops.get_default_graph(), config=self._config)
        try:
            self._wait_until(sess, sc.ready_for_local_init_op, "local init")
            if sc.local_init_op is not None:
                sess.run(sc.local_init_op)
            self._wait_until(sess, sc.ready_op, "use")
        except BaseException:
            sess.close()
            raise
        return sess

    def _wait_until(self, sess, ready_op, what: str) -> None:
        """Poll ``ready_op`` (the uninitialized variables' names) until it is empty."""
        if ready_op is None:
            return
        deadline = time.monotonic() + self._max_wait_secs
        while True:
            not_ready = sess.run(ready_op)
            if not len(not_ready):
                return
            if time.monotonic() > deadline:
                names = ", ".join(n.decode() if isinstance(n, bytes) else str(n)
                                  for n in not_ready)
                raise errors.DeadlineExceededError(
                    None, None, f"Session was not ready for {what} after "
                    f"{self._max_wait_secs} s: variables not initialized: {names}")
            time.sleep(0.05)


class MonitoredSession:
    """A session with hooks, queue runners and recovery from Aborted/Unavailable errors."""

    def __init__(self, session_creator=None, hooks=None, stop_grace_period_secs=120):
        self._creator = session_creator or ChiefSessionCreator()
        self._hooks = list(hooks or [])
        self._stop_grace_period_secs = stop_grace_period_secs
        self._graph = _ops.get_default_graph()
        for h in self._hooks:
            h.begin()
        self._sess = None
        self._coord = None
        self._threads = []
        self._stop_requested = False
        self._closed = False
        self.recoveries = 0  # how many times the session was recreated (visible to tests/UI)
        self._create()

    # --- session lifecycle ------------------------------------------------------------------
    def _create(self):
        self._sess = self._creator.create_session()
        self._coord = Coordinator()
        self._threads = start_queue_runners(self._sess, self._coord, daemon=True)
        for h in self._hooks:
            h.after_create_session(self._sess, self._coord)

    def _teardown(self, raise_errors: bool):
        """Stop the queue runners and close the raw session."""
        sess, coord, threads = self._sess, self._coord, self._threads
        self._sess, self._threads = None, []
        try:
            if coord is not None:
                coord.request_stop()
                coord.join(threads, stop_grace_period_secs=self._stop_grace_period_secs,
                           ignore_live_threads=True)
        except Exception:
            if raise_errors:
                raise
        finally:
            if sess is not None:
                sess.close()

    def _recover(self, error):
        logger.warning("%s: %s — recreating the session from the latest checkpoint.",
                       type(error).__name__, error)
        self._teardown(raise_errors=False)
        self.recoveries += 1
        self._create()

    # --- running ----------------------------------------------------------------------------
    @property
    def graph(self):
        return self._graph

    def _tf_sess(self):
        return self._sess

    def should_stop(self) -> bool:
        return self._closed or self._stop_requested or \
            (self._coord is not None and self._coord.should_stop())

    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        if self._closed:
            raise RuntimeError("Run called even after should_stop requested.")
        while True:
            try:
                return self._run_with_hooks(fetches, feed_dict, options, run_metadata)
            except _RECOVERABLE as e:
                self._recover(e)

    def _run_with_hooks(self, fetches, feed_dict, options, run_metadata):
        from dflab.train.session_run_hook import SessionRunArgs

        ctx = SessionRunContext(SessionRunArgs(fetches, feed_dict, options), self._sess)
        hook_fetches, feeds = {}, dict(feed_dict or {})
        for k, h in enumerate(self._hooks):
            args = h.before_run(ctx)
            if args is None:
                continue
            if args.fetches is not None:
                hook_fetches[k] = args.fetches
            for key, value in (args.feed_dict or {}).items():
                if key in feeds:
                    raise RuntimeError(f"Same tensor is fed by a SessionRunHook and user: "
                                       f"{key}")
                feeds[key] = value
            if args.options is not None:
                options = _merge_run_options(options, args.options)
        if run_metadata is None and options is not None and options.trace_level:
            # A hook asked for a trace: it reads it from its SessionRunValues, as in TF.
            run_metadata = RunMetadata()
        out = self._sess.run({"caller": fetches, "hooks": hook_fetches}, feed_dict=feeds,
                             options=options, run_metadata=run_metadata)
        for k, h in enumerate(self._hooks):
            h.after_run(ctx, SessionRunValues(out["hooks"].get(k), options, run_metadata))
        if ctx.stop_requested:
            self._stop_requested = True
        if self._coord is not None:
            self._coord.raise_requested_exception()
        return out["caller"]

    def run_step_fn(self, step_fn):
        """``step_fn(step_context)`` with ``step_context.session`` and ``run_with_hooks``."""
        outer = self

        class _StepContext:
            session = property(lambda self: outer._sess)

            def run_with_hooks(self, *args, **kwargs):
                return outer.run(*args, **kwargs)

            def request_stop(self):
                outer._stop_requested = True

        return step_fn(_StepContext())

    # --- closing ------------------------------------------------------------------------------
    def close(self):
        self._close_internal(None)

    def _close_internal(self, exception_type):
        if self._closed:
            return
        try:
            if exception_type is None and self._sess is not None:
                for h in self._hooks:
                    h.end(self._sess)
        finally:
            self._closed = True
            self._teardown(raise_errors=exception_type is None)

    def __enter__(self):
        return self

    def __exit__(self, exception_type, exception_value, traceback):
        if exception_type in (errors.OutOfRangeError, StopIteration):
            exception_type = None  # the input ran dry: a normal end of training
        self._close_internal(exception_type)
        return exception_type is None


class SingularMonitoredSession(MonitoredSession):
    def __init__(self, hooks=None, scaffold=None, master="", config=None, checkpoint_dir=None,
                 stop_grace_period_secs=120, checkpoint_filename_with_path=None):
        creator = ChiefSessionCreator(scaffold, master, config, checkpoint_dir,
                                      checkpoint_filename_with_path)
        super().__init__(creator, hooks, stop_grace_period_secs)

    def raw_session(self):
        return self._sess


def MonitoredTrainingSession(master="", is_chief=True, checkpoint_dir=None,  # noqa: N802
                             scaffold=None, hooks=None, chief_only_hooks=None,
                             save_checkpoint_secs=USE_DEFAULT, save_summaries_steps=USE_DEFAULT,
                             save_summaries_secs=USE_DEFAULT, config=None,
                             stop_grace_period_secs=120, log_step_count_steps=100,
                             max_wait_secs=7200, save_checkpoint_steps=USE_DEFAULT,
                             summary_dir=None):
    """A ``MonitoredSession`` set up for training (TF1's factory function and defaults): on the
    chief, a step counter, checkpoints every 10 minutes and summaries every 100 steps into
    ``checkpoint_dir`` (or ``summary_dir``)."""
    if save_summaries_steps is USE_DEFAULT and save_summaries_secs is USE_DEFAULT:
        save_summaries_steps, save_summaries_secs = 100, None
    elif save_summaries_secs is USE_DEFAULT:
        save_summaries_secs = None
    elif save_summaries_steps is USE_DEFAULT:
        save_summaries_steps = None
    if save_checkpoint_steps is USE_DEFAULT and save_checkpoint_secs is USE_DEFAULT:
        save_checkpoint_secs, save_checkpoint_steps = 600, None
    elif save_checkpoint_secs is USE_DEFAULT:
        save_checkpoint_secs = None
    elif save_checkpoint_steps is USE_DEFAULT:
        save_checkpoint_steps = None
    scaffold = scaffold or Scaffold()
    all_hooks = list(hooks or [])
    if is_chief:
        all_hooks += list(chief_only_hooks or [])
        if log_step_count_steps and log_step_count_steps > 0:
            all_hooks.append(_hooks.StepCounterHook(every_n_steps=log_step_count_steps))
        output_dir = summary_dir or checkpoint_dir
        saver_hook = _SUMMARY_SUPPORT["saver_hook"]
        # Only a graph with summaries gets the hook: writing them needs the optional
        # tensorboard package, which a graph without summaries must not require.
        if output_dir and saver_hook and (save_summaries_steps or save_summaries_secs) and \
                _has_summaries(_ops.get_default_graph(), scaffold):
            all_hooks.append(saver_hook(scaffold=scaffold, save_steps=save_summaries_steps or None,
                                        save_secs=save_summaries_secs or None,
                                        output_dir=output_dir))
        if checkpoint_dir and (save_checkpoint_secs or save_checkpoint_steps):
            all_hooks.append(_hooks.CheckpointSaverHook(
                checkpoint_dir, save_secs=save_checkpoint_secs or None,
                save_steps=save_checkpoint_steps or None, scaffold=scaffold))
    if is_chief:
        creator = ChiefSessionCreator(scaffold, master, config, checkpoint_dir)
    else:
        creator = WorkerSessionCreator(scaffold, master, config, max_wait_secs)
    return MonitoredSession(creator, all_hooks, stop_grace_period_secs)
