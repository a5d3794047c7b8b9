"""Eager execution and traced functions on a GPU device (the strict CuPy stand-in runs the GPU
device's own code): ops go to the GPU as TF's eager placement puts them, values come back to
the host with numpy(), tapes and traced calls run there too."""

from __future__ import annotations

import numpy as np

import dflab as tf
from dflab.eager import EagerContext


def test_eager_ops_run_on_the_gpu_and_values_come_back(strict_gpu):
    ctx = EagerContext(tf.ConfigProto())
    try:
        with ctx.as_default():
            a = tf.constant([[1.0, 2.0], [3.0, 4.0]])
            assert a.device.endswith("CPU:0")  # a constant lives on the host
            b = tf.matmul(a, a) + 1.0  # the GPU has priority where it has a kernel
            assert b.device.endswith("GPU:0")
            again = tf.matmul(a, a) + 1.0  # kernels met again: the host input still copied
            assert again.device.endswith("GPU:0")
            np.testing.assert_array_equal(again.numpy(), b.numpy())
            assert not isinstance(b.value_in_memory(), np.ndarray)  # a device array
            np.testing.assert_allclose(b.numpy(), [[8.0, 11.0], [16.0, 23.0]])
            with tf.device("/cpu:0"):
                c = b * 2.0  # read from the GPU onto the host
            assert c.device.endswith("CPU:0")
            np.testing.assert_allclose(c.numpy(), [[16.0, 22.0], [32.0, 46.0]])

            w = tf.Variable([1.0, 2.0])
            assert w.handle.device.endswith("GPU:0")
            with tf.GradientTape() as tape:
                y = tf.reduce_sum(w * w)
            np.testing.assert_allclose(tape.gradient(y, w).numpy(), [2.0, 4.0])

            @tf.function
            def f(x):
                return tf.reduce_sum(x * w)

            assert float(f(tf.constant([3.0, 4.0]))) == 11.0
    finally:
        ctx.close()
