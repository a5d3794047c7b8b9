"""``tf.summary.FileWriter``: events for TensorBoard, written as TensorBoard's event files.

The files themselves (``events.out.tfevents.*``, TFRecord framing with CRCs, a first event
naming the file version, a background thread flushing every ``flush_secs``) are the
``tensorboard`` package's ``EventFileWriter``; this module turns what a TF1 program hands
over (serialized summaries, dflab graphs, dflab ``RunMetadata``) into ``Event`` protos.

Adding a graph writes two events, as TF's writer does: the ``GraphDef`` and a ``MetaGraphDef``
holding it (``summary/protos.py`` says what of a dflab graph TF's protos can express).

As TF's writer does, the plugin metadata of a summary value is written only the first time
its tag is seen (TensorBoard reads it from there), and a ``tagged_run_metadata`` tag may be
used once per writer. A writer that is dropped or still open when the interpreter exits is
closed then, so what it queued reaches the file even without ``close()``.
"""

from __future__ import annotations

import threading
import time
import weakref

from dflab.framework import ops as _ops
from dflab.ops.summary_ops import INSTALL_HINT, tb_proto
from dflab.summary.protos import graph_def_proto, meta_graph_def_proto, run_metadata_proto


def _event_file_writer_class():
    try:
        from tensorboard.summary.writer.event_file_writer import EventFileWriter
    except ImportError as e:
        raise ImportError(f"tf.summary.FileWriter needs tensorboard; {INSTALL_HINT}: {e}") \
            from e
    return EventFileWriter


class FileWriter:
    """TF1's ``tf.summary.FileWriter(logdir, graph=None, max_queue=10, flush_secs=120,
    graph_def=None, filename_suffix=None, session=None)``: creates ``logdir`` and a new
    event file in it, writing ``graph`` first when given."""

    def __init__(self, logdir: str, graph=None, max_queue: int = 10, flush_secs: float = 120,
                 graph_def=None, filename_suffix: str | None = None, session=None):
        if session is not None:
            raise NotImplementedError("tf.summary.FileWriter(session=...) (TF2's summary "
                                      "writer resource) is not supported; pass a logdir")
        self._logdir = str(logdir)
        self._options = (int(max_queue), float(flush_secs), filename_suffix or "")
        self._writer = self._open()
        self._lock = threading.Lock()
        self._closed = False
        self._seen_summary_tags: set[str] = set()
        self._run_metadata_tags: set[str] = set()
        if graph is not None or graph_def is not None:
            self.add_graph(graph, graph_def=graph_def)

    def _open(self):
        max_queue, flush_secs, suffix = self._options
        writer = _event_file_writer_class()(self._logdir, max_queue_size=max_queue,
                                            flush_secs=flush_secs, filename_suffix=suffix)
        # Closes the file when this object is collected or at exit, whichever comes first;
        # holds the file writer only, so it does not keep this object alive.
        self._close_at_exit = weakref.finalize(self, writer.close)
        return writer

    # --- what a program adds ------------------------------------------------------------
    def add_summary(self, summary, global_step: int | None = None) -> None:
        """Add a ``Summary`` (a proto or the bytes a summary op returned) at ``global_step``."""
        summary_pb2 = tb_proto("summary_pb2")
        if isinstance(summary, bytes):
            parsed = summary_pb2.Summary()
            parsed.ParseFromString(summary)
            summary = parsed
        elif not isinstance(summary, summary_pb2.Summary):
            raise TypeError(f"add_summary expects a Summary proto or its serialized bytes, "
                            f"got {type(summary).__name__}")
        else:
            summary = _copy(summary)
        with self._lock:
            for value in summary.value:
                if not value.HasField("metadata"):
                    continue
                if value.tag in self._seen_summary_tags:
                    value.ClearField("metadata")  # written with the tag's first value
                else:
                    self._seen_summary_tags.add(value.tag)
        self.add_event(tb_proto("event_pb2").Event(summary=summary), global_step)

    def add_graph(self, graph, global_step: int | None = None, graph_def=None) -> None:
        """Add a dflab ``Graph`` (or ``graph_def``: a dflab ``GraphDef`` or a ``GraphDef``
        proto) for TensorBoard's graph dashboard."""
        graph_pb2 = tb_proto("graph_pb2")
        if graph is not None and graph_def is not None:
            raise ValueError("Please pass only graph, or graph_def (deprecated), but not both.")
        source = graph if graph is not None else graph_def
        if source is None:
            raise ValueError("add_graph needs a graph (or graph_def)")
        proto = source if isinstance(source, graph_pb2.GraphDef) else graph_def_proto(source)
        event = tb_proto("event_pb2").Event(graph_def=proto.SerializeToString())
        self.add_event(event, global_step)
        # TF's writer follows the graph with a meta graph holding it.
        meta = tb_proto("meta_graph_pb2").MetaGraphDef()
        meta.graph_def.CopyFrom(proto)
        if not isinstance(source, graph_pb2.GraphDef):
            meta.meta_info_def.CopyFrom(meta_graph_def_proto(source).meta_info_def)
        self.add_meta_graph(meta, global_step)

    def add_meta_graph(self, meta_graph_def, global_step: int | None = None) -> None:
        """Add a ``MetaGraphDef``: TF's proto, or a dflab meta graph (from
        ``tf.train.export_meta_graph``), written as TF's proto."""
        from dflab.train.meta_graph import MetaGraphDef

        if isinstance(meta_graph_def, MetaGraphDef):
            meta_graph_def = meta_graph_def_proto(meta_graph_def)
        elif not isinstance(meta_graph_def, tb_proto("meta_graph_pb2").MetaGraphDef):
            raise TypeError(f"meta_graph_def must be type MetaGraphDef, saw type: "
                            f"{type(meta_graph_def)}")
        event = tb_proto("event_pb2").Event(meta_graph_def=meta_graph_def.SerializeToString())
        self.add_event(event, global_step)

    def add_run_metadata(self, run_metadata, tag: str, global_step: int | None = None) -> None:
        """Add the step stats of a traced ``Session.run`` under ``tag`` (the graph
        dashboard's per-run compute-time and memory view)."""
        with self._lock:
            if tag in self._run_metadata_tags:
                raise ValueError("The provided tag was already used for this event type")
            self._run_metadata_tags.add(tag)
        event_pb2 = tb_proto("event_pb2")
        tagged = event_pb2.TaggedRunMetadata(
            tag=tag, run_metadata=run_metadata_proto(run_metadata).SerializeToString())
        self.add_event(event_pb2.Event(tagged_run_metadata=tagged), global_step)

    def add_session_log(self, session_log, global_step: int | None = None) -> None:
        """Add a ``SessionLog`` proto (e.g. ``SessionLog.START`` after a restart)."""
        self.add_event(tb_proto("event_pb2").Event(session_log=session_log), global_step)

    def add_event(self, event, step: int | None = None) -> None:
        """Write an ``Event`` proto (its wall time set now when unset)."""
        if step is not None:
            event.step = int(step)
        if not event.wall_time:
            event.wall_time = time.time()
        with self._lock:
            if self._closed:
                raise RuntimeError(f"FileWriter for {self._logdir} is closed; call reopen()")
            self._writer.add_event(event)

    # --- the file --------------------------------------------------------------------------
    def get_logdir(self) -> str:
        return self._logdir

    def flush(self) -> None:
        """Write every pending event to disk."""
        with self._lock:
            if not self._closed:
                self._writer.flush()

    def close(self) -> None:
        """Flush and close the event file; ``reopen`` starts a new one."""
        with self._lock:
            if not self._closed:
                self._close_at_exit.detach()
                self._writer.close()
                self._closed = True

    def reopen(self) -> None:
        """After ``close``: open a new event file in the same directory."""
        with self._lock:
            if self._closed:
                self._writer = self._open()
                self._closed = False

    def __enter__(self) -> FileWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _copy(message):
    clone = type(message)()
    clone.CopyFrom(message)
    return clone


class FileWriterCache:
    """One ``FileWriter`` per log directory, shared by everyone asking for it (TF1's
    ``tf.summary.FileWriterCache``); a new one starts with the default graph, as TF's."""

    _cache: dict[str, FileWriter] = {}
    _lock = threading.Lock()

    @classmethod
    def get(cls, logdir: str) -> FileWriter:
        with cls._lock:
            writer = cls._cache.get(str(logdir))
            if writer is None:
                writer = cls._cache[str(logdir)] = FileWriter(
                    logdir, graph=_ops.get_default_graph())
            return writer

    @classmethod
    def clear(cls) -> None:
        """Close and forget every cached writer."""
        with cls._lock:
            for writer in cls._cache.values():
                writer.close()
            cls._cache.clear()
