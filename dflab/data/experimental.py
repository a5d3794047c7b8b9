"""``tf.data.experimental``: the constant that TF1 programs use from it."""

from dflab.data.dataset import AUTOTUNE

__all__ = ["AUTOTUNE"]
