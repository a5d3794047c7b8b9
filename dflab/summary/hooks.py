"""``tf.train.SummarySaverHook``: evaluates the summary op every N steps or seconds of a
monitored session and writes the result, at the global step, to an event file; and
``tf.train.ProfilerHook``: traces a step every N steps or seconds and writes its Chrome-trace
timeline (``timeline-<step>.json``) and its run metadata (to the event file).

They live with the summary writer and the timeline (above ``train``) and are attached to
``tf.train`` by the package; ``MonitoredTrainingSession`` finds the summary hook through
``register_summary_support``.
"""

from __future__ import annotations

import logging
import os

from dflab.client import timeline
from dflab.ops.summary_ops import merge_all, tb_proto
from dflab.runtime.config import RunOptions
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


class ProfilerHook(SessionRunHook):
    """Every ``save_steps`` steps or ``save_secs`` seconds (exactly one), runs a step with
    ``FULL_TRACE`` and writes its timeline to ``<output_dir>/timeline-<global step>.json``
    (``Timeline.generate_chrome_trace_format(show_dataflow, show_memory)``, for
    chrome://tracing or Perfetto) and its run metadata to the event file of ``output_dir``,
    under ``step_<global step>``. The first step is never traced: the timer starts there."""

    def __init__(self, save_steps=None, save_secs=None, output_dir="", show_dataflow=True,
                 show_memory=False):
        self._output_file = os.path.join(output_dir, "timeline-{}.json")
        self._file_writer = FileWriterCache.get(output_dir)
        self._show_dataflow = show_dataflow
        self._show_memory = show_memory
        self._timer = SecondOrStepTimer(every_secs=save_secs, every_steps=save_steps)

    def begin(self):
        self._next_step = None
        try:
            self._global_step_tensor = _global_step_tensor()
        except RuntimeError:
            raise RuntimeError("Global step should be created to use ProfilerHook.") from None

    def before_run(self, run_context):
        self._request_summary = (self._next_step is not None
                                 and self._timer.should_trigger_for_step(self._next_step))
        options = (RunOptions(trace_level=RunOptions.FULL_TRACE)
                   if self._request_summary else None)
        return SessionRunArgs({"global_step": self._global_step_tensor}, options=options)

    def after_run(self, run_context, run_values):
        stale_global_step = int(run_values.results["global_step"])
        if self._next_step is None:
            # The timer starts at the first step, so that it fires N steps or seconds later.
            self._timer.update_last_triggered_step(stale_global_step)
        global_step = stale_global_step + 1
        if self._request_summary:
            global_step = int(run_context.session.run(self._global_step_tensor))
            self._timer.update_last_triggered_step(global_step)
            self._save(global_step, self._output_file.format(global_step),
                       run_values.run_metadata.step_stats)
            self._file_writer.add_run_metadata(run_values.run_metadata, f"step_{global_step}")
        self._next_step = global_step + 1

    def _save(self, step, save_path, step_stats):
        logging.getLogger("dflab.train").info("Saving timeline for %d into '%s'.", step,
                                              save_path)
        trace = timeline.Timeline(step_stats)
        with open(save_path, "w") as f:
            f.write(trace.generate_chrome_trace_format(show_dataflow=self._show_dataflow,
                                                       show_memory=self._show_memory))


monitored_session.register_summary_support(merge_all, SummarySaverHook)
