"""``tf.summary``: TF1's summary ops and the writer of TensorBoard event files.

The builders (``scalar``, ``histogram``, ``image``, ``text``, ``tensor_summary``, ``merge``,
``merge_all``) add graph ops whose value is a serialized ``Summary``; ``FileWriter`` writes
those, the graph and traced runs' metadata into files TensorBoard reads. The proto classes TF
exposes here (``Summary``, ``Event``, ``SessionLog``, ``TaggedRunMetadata``,
``SummaryDescription``) are TensorBoard's, loaded on first use: nothing here imports
tensorboard until a summary is built or written.
"""

from __future__ import annotations

from dflab.ops.summary_ops import (
    audio,
    clean_tag,
    histogram,
    image,
    merge,
    merge_all,
    scalar,
    tb_proto,
    tensor_summary,
    text,
)
from dflab.summary.hooks import SummarySaverHook
from dflab.summary.writer import FileWriter, FileWriterCache

# TF1's name -> (TensorBoard proto module, class name).
_PROTO_CLASSES = {
    "Summary": ("summary_pb2", "Summary"),
    "SummaryDescription": ("summary_pb2", "SummaryDescription"),
    "SummaryMetadata": ("summary_pb2", "SummaryMetadata"),
    "Event": ("event_pb2", "Event"),
    "SessionLog": ("event_pb2", "SessionLog"),
    "TaggedRunMetadata": ("event_pb2", "TaggedRunMetadata"),
}


def __getattr__(name: str):
    if name in _PROTO_CLASSES:
        module, cls = _PROTO_CLASSES[name]
        return getattr(tb_proto(module), cls)
    raise AttributeError(f"module 'dflab.summary' has no attribute {name!r}")


__all__ = ["FileWriter", "FileWriterCache", "SummarySaverHook", "audio", "clean_tag", "histogram",
           "image",
           "merge", "merge_all", "scalar", "tensor_summary", "text", *_PROTO_CLASSES]
