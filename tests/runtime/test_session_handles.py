"""Session handles as session state (beyond the TF fixtures of cases_misc.py): a kept tensor
outlives the run that made it and is fed back by handle, by string or by the TensorHandle
itself, through ``run`` and ``make_callable``; a loop keeps its running value in the session."""

import numpy as np
import pytest

import dflab as tf


def test_running_total_kept_between_runs():
    x = tf.placeholder(tf.float32, [2])
    with tf.Session() as sess:
        kept = sess.run(tf.get_session_handle(tf.zeros([2])))
        holder, previous = tf.get_session_tensor(kept.handle, tf.float32)
        step = tf.get_session_handle(previous + x)
        total = np.zeros(2, np.float32)
        for i in range(4):
            batch = np.array([i, 2 * i], np.float32)
            kept = sess.run(step, {holder: kept, x: batch})  # the TensorHandle itself
            total += batch
            assert type(kept).__name__ == "TensorHandle"
            np.testing.assert_array_equal(kept.eval(), total)


def test_make_callable_returns_handles():
    a = tf.placeholder(tf.int64, [])
    h = tf.get_session_handle(a * 3)
    with tf.Session() as sess:
        call = sess.make_callable(h, [a])
        kept = call(7)
        assert kept.dtype == tf.int64 and kept.eval() == 21
        kept.delete()
        with pytest.raises(tf.errors.InvalidArgumentError, match="not in the session store"):
            kept.eval()


def test_eval_builds_its_reader_once():
    with tf.Session() as sess:
        kept = sess.run(tf.get_session_handle(tf.constant([1.0, 2.0])))
        kept.eval()
        count = len(sess.graph.get_operations())
        for _ in range(3):
            np.testing.assert_array_equal(kept.eval(), [1.0, 2.0])
        assert len(sess.graph.get_operations()) == count
