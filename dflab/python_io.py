"""``tf.python_io``: reading and writing TFRecord files (see ``dflab.lib.io.tf_record``)."""

from dflab.lib.io.tf_record import (
    TFRecordCompressionType,
    TFRecordOptions,
    TFRecordWriter,
    tf_record_iterator,
)

__all__ = ["TFRecordCompressionType", "TFRecordOptions", "TFRecordWriter",
           "tf_record_iterator"]
