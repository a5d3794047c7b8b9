"""``tf.data`` (TF 1.x, ``tf.compat.v1.data``): datasets, their transformations and iterators.

See docs/data.md for what is supported and how it differs from TensorFlow.
"""

from dflab.data import experimental
from dflab.data.dataset import AUTOTUNE, Dataset, TextLineDataset, TFRecordDataset
from dflab.data.iterator import (
    Iterator,
    get_output_classes,
    get_output_shapes,
    get_output_types,
    make_initializable_iterator,
    make_one_shot_iterator,
)

__all__ = ["AUTOTUNE", "Dataset", "Iterator", "TFRecordDataset", "TextLineDataset",
           "experimental",
           "get_output_classes", "get_output_shapes", "get_output_types",
           "make_initializable_iterator", "make_one_shot_iterator"]
