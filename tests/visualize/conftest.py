"""Shared graphs and traced runs for the drawing tests."""

from __future__ import annotations

import types

import numpy as np
import pytest

import dflab as tf


@pytest.fixture
def two_cpu_run():
    """A graph split over /cpu:0 and /cpu:1, run once with full tracing and partition graphs."""
    g = tf.Graph()
    with g.as_default():
        with tf.device("/cpu:0"):
            x = tf.placeholder(tf.float32, [None, 16], name="x")
            w = tf.Variable(np.full((16, 16), 0.1, np.float32), name="w")
            h = tf.matmul(x, w, name="h")
        with tf.device("/cpu:1"), tf.name_scope("branch"):
            a = tf.tanh(h, name="a")
            s = tf.reduce_sum(tf.matmul(a, a, transpose_b=True), name="s")
        with tf.device("/cpu:0"):
            out = tf.identity(s * 3.0 + tf.reduce_sum(h), name="out")
        init = tf.global_variables_initializer()
    config = tf.ConfigProto(device_count={"CPU": 2})
    with tf.Session(graph=g, config=config) as sess:
        sess.run(init)
        md = tf.RunMetadata()
        opts = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE,
                             output_partition_graphs=True)
        value = sess.run(out, {x: np.ones((4, 16), np.float32)}, options=opts, run_metadata=md)
    return types.SimpleNamespace(graph=g, x=x, h=h, s=s, out=out, md=md, value=value,
                                 config=config)
