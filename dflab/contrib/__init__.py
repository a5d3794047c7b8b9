"""``tf.contrib``: the TF 1.x contrib modules dflab has (only ``tf.contrib.eager``)."""

from dflab.contrib import eager  # noqa: F401
