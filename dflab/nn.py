"""``tf.nn``: neural-network ops (activations, losses, convolution, pooling…)."""
