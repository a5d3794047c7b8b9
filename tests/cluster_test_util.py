"""What the cluster tests share: a model spanning a ps and two workers, and a comparison with
the same model in one process."""

from __future__ import annotations

import numpy as np

import dflab as tf

FEED = np.arange(6, dtype=np.float32).reshape(3, 2) / 4


def cluster_model():
    """A variable on the ps, a matmul, a cond and a loop on worker 1, int and string tensors
    crossing tasks, the sums on worker 0: ``(x, w, fetches)``."""
    x = tf.placeholder(tf.float32, [3, 2], name="x")
    with tf.device("/job:ps/task:0"):
        w = tf.Variable(np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4), name="w")
        label = tf.constant(["ps", "made"], name="label")
    with tf.device("/job:worker/task:1"):
        y = tf.matmul(x, w)
        z = tf.cond(tf.reduce_sum(y) > 0, lambda: y * 2.0, lambda: y - 1.0)
        _, acc = tf.while_loop(lambda i, a: i < 4, lambda i, a: (i + 1, a + z),
                               [tf.constant(0), tf.zeros([3, 4])])
        n = tf.size(y)
    with tf.device("/job:worker/task:0"):
        out = tf.reduce_sum(acc) + tf.cast(n, tf.float32)
        text = tf.identity(label)
    return x, w, [out, y, acc, n, text]


def one_process_results(feed=FEED) -> list:
    """``cluster_model``'s fetches in one process, one task: the /job:... requests fall back
    to its CPU (soft placement)."""
    g = tf.Graph()
    with g.as_default():
        x, _, fetches = cluster_model()
        init = tf.global_variables_initializer()
    with tf.Session(graph=g, config=tf.ConfigProto(allow_soft_placement=True)) as s:
        s.run(init)
        return s.run(fetches, {x: feed})


def assert_bit_identical(got, want) -> None:
    for a, b in zip(got, want, strict=True):
        a, b = np.asarray(a), np.asarray(b)
        assert a.dtype == b.dtype and a.shape == b.shape
        if a.dtype == object:  # strings: compare the values, not the object pointers
            assert a.tolist() == b.tolist()
        else:
            assert a.tobytes() == b.tobytes()
