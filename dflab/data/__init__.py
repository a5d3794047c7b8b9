"""``tf.data`` (TF 1.x, ``tf.compat.v1.data``): datasets, their transformations and iterators.

See docs/data.md for what is supported and how it differs from TensorFlow.
"""

from dflab.data import experimental
from dflab.data.dataset import (
    AUTOTUNE,
    INFINITE_CARDINALITY,
    UNKNOWN_CARDINALITY,
    Dataset,
    FixedLengthRecordDataset,
    TextLineDataset,
    TFRecordDataset,
)
from dflab.data.iterator import (
    Iterator,
    NumpyIterator,
    get_output_classes,
    get_output_shapes,
    get_output_types,
    make_initializable_iterator,
    make_one_shot_iterator,
)
from dflab.data.options import Options, ThreadingOptions

__all__ = ["AUTOTUNE", "Dataset", "Iterator", "NumpyIterator", "TFRecordDataset", "TextLineDataset",
           "experimental", "FixedLengthRecordDataset", "INFINITE_CARDINALITY", "Options",
           "ThreadingOptions", "UNKNOWN_CARDINALITY",
           "get_output_classes", "get_output_shapes", "get_output_types",
           "make_initializable_iterator", "make_one_shot_iterator"]
