"""Host utilities TF1 programs call through ``tf``: ``tf.logging`` and ``tf.gfile``."""
