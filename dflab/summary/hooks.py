"""``tf.train.SummarySaverHook``: evaluates the summary op every N steps or seconds of a
monitored session and writes the result, at the global step, to an event file.

It lives with the summary writer (above ``train``) and is attached to ``tf.train`` by the
package; ``MonitoredTrainingSession`` finds it through ``register_summary_support``.
"""

from __future__ import annotations

from dflab.ops.summary_ops import merge_all, tb_proto
from dflab.summary.writer import FileWriterCache
from dflab.train import monitored_session
from dflab.train.basic_session_run_hooks import SecondOrStepTimer, _global_step_tensor
from dflab.train.session_run_hook import SessionRunArgs, SessionRunHook


class SummarySaverHook(SessionRunHook):
    """Saves summaries every ``save_steps`` steps or ``save_secs`` seconds (exactly one), from
    ``summary_op`` (a tensor or a list of them) or the scaffold's summary op (exactly one)."""

    def __init__(self, save_steps=None, save_secs=None, output_dir=None, summary_writer=None,
                 scaffold=None, summary_op=None):
        if (scaffold is None) == (summary_op is None):
            raise ValueError("Exactly one of scaffold or summary_op must be provided.")
        self._summary_op = summary_op
        self._summary_writer = summary_writer
        self._output_dir = output_dir
        self._scaffold = scaffold
        self._timer = SecondOrStepTimer(every_secs=save_secs, every_steps=save_steps)

    def begin(self):
        if self._summary_writer is None and self._output_dir:
            self._summary_writer = FileWriterCache.get(self._output_dir)
        self._next_step = None
        self._global_step_tensor = _global_step_tensor()

    def _summary_ops(self) -> list:
        op = self._summary_op if self._summary_op is not None else self._scaffold.summary_op
        if op is None:
            return []
        return list(op) if isinstance(op, (list, tuple)) else [op]

    def before_run(self, run_context):
        self._request_summary = (self._next_step is None
                                 or self._timer.should_trigger_for_step(self._next_step))
        requests = {"global_step": self._global_step_tensor}
        if self._request_summary and self._summary_ops():
            requests["summary"] = self._summary_ops()
        return SessionRunArgs(requests)

    def after_run(self, run_context, run_values):
        if self._summary_writer is None:
            return
        global_step = int(run_values.results["global_step"]) + 1
        if self._next_step is None or self._request_summary:
            global_step = int(run_context.session.run(self._global_step_tensor))
        if self._next_step is None:
            start = tb_proto("event_pb2").SessionLog(
                status=tb_proto("event_pb2").SessionLog.START)
            self._summary_writer.add_session_log(start, global_step)
        if self._request_summary:
            self._timer.update_last_triggered_step(global_step)
            for summary in run_values.results.get("summary", []):
                self._summary_writer.add_summary(summary, global_step)
        self._next_step = global_step + 1

    def end(self, session=None):
        if self._summary_writer is not None:
            self._summary_writer.flush()


monitored_session.register_summary_support(merge_all, SummarySaverHook)
