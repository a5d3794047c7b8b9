"""``tf.train.summary_iterator``: the ``Event`` protos of an event file, in order.

An event file is a TFRecord file of serialized ``Event``s (TensorBoard's protos), so this is
``tf_record_iterator`` plus parsing; a damaged file raises TF's ``DataLossError``.
"""

from __future__ import annotations

from collections.abc import Iterator

from dflab.lib.io.tf_record import tf_record_iterator
from dflab.ops.summary_ops import tb_proto


def summary_iterator(path) -> Iterator:
    """Yield each ``Event`` of the event file at ``path`` (opened on the first ``next``)."""
    event_class = tb_proto("event_pb2").Event
    for record in tf_record_iterator(path):
        yield event_class.FromString(record)
