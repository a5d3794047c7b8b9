"""Conditional accumulators: mean of the gradients applied, stale gradients dropped, takes that
wait for enough gradients, sparse rows averaged per index, TF errors for bad input."""

import threading

import numpy as np
import pytest

import dflab as tf


def test_take_returns_the_mean_and_advances_the_global_step_dropping_stale_gradients():
    acc = tf.ConditionalAccumulator(tf.float32, shape=[2])
    g = tf.placeholder(tf.float32, [2])
    step = tf.placeholder(tf.int64, [])
    apply, take, n = acc.apply_grad(g, local_step=step), acc.take_grad(2), acc.num_accumulated()
    total = tf.ConditionalAccumulator(tf.float32, shape=[2], reduction_type="SUM")
    apply_total, take_total = total.apply_grad(g), total.take_grad(1)
    with tf.Session() as s:
        s.run(apply, {g: [1, 2], step: 0})
        s.run(apply, {g: [3, 5], step: 0})
        assert s.run(n) == 2
        np.testing.assert_allclose(s.run(take), [2.0, 3.5])
        s.run(apply, {g: [9, 9], step: 0})  # computed at step 0, the accumulator is at 1
        assert s.run(n) == 0
        s.run(apply, {g: [1, 1], step: 1})
        assert s.run(n) == 1
        s.run(acc.set_global_step(5))
        s.run(apply, {g: [1, 1], step: 4})  # stale again
        assert s.run(n) == 1
        s.run(apply_total, {g: [1, 2]})
        np.testing.assert_allclose(s.run(take_total), [1.0, 2.0])


def test_a_take_waits_without_a_thread_until_enough_gradients_arrive():
    acc = tf.ConditionalAccumulator(tf.float32, shape=[])
    g = tf.placeholder(tf.float32, [])
    apply, take = acc.apply_grad(g), acc.take_grad(3)
    got = []
    with tf.Session(config=tf.ConfigProto(inter_op_parallelism_threads=1)) as s:
        t = threading.Thread(target=lambda: got.append(s.run(take)))
        t.start()
        for v in (1.0, 2.0, 6.0):
            s.run(apply, {g: v})
        t.join(10)
        assert got == [3.0]
        with pytest.raises(tf.errors.DeadlineExceededError):
            s.run(take, options=tf.RunOptions(timeout_in_ms=200))


def test_sparse_rows_are_averaged_per_index():
    acc = tf.SparseConditionalAccumulator(tf.float32, shape=[5, 2])
    idx = tf.placeholder(tf.int64, [None])
    vals = tf.placeholder(tf.float32, [None, 2])
    apply = acc.apply_grad(idx, vals)
    take = acc.take_indexed_slices_grad(2)
    with tf.Session() as s:
        s.run(apply, {idx: [0, 3], vals: [[1, 1], [2, 2]]})
        s.run(apply, {idx: [3], vals: [[4, 6]]})
        got = s.run(take)
    np.testing.assert_array_equal(got.indices, [0, 3])
    np.testing.assert_allclose(got.values, [[1, 1], [3, 4]])  # row 3: (2 + 4) / 2, (2 + 6) / 2
    np.testing.assert_array_equal(got.dense_shape, [5, 2])


def test_bad_input_gets_tf_errors():
    acc = tf.ConditionalAccumulator(tf.float32, shape=[2])
    with pytest.raises(ValueError, match="requested dtype float32"):
        acc.apply_grad(tf.constant([1, 2], tf.int32))
    with pytest.raises(ValueError, match="Shape mismatch"):
        acc.apply_grad(tf.constant([1.0, 2.0, 3.0]))
    with pytest.raises(ValueError, match="reduction_type"):
        tf.ConditionalAccumulator(tf.float32, reduction_type="MAX")
    g = tf.placeholder(tf.float32, None)
    apply, take = acc.apply_grad(g), acc.take_grad(0)
    with tf.Session() as s:
        with pytest.raises(tf.errors.InvalidArgumentError, match="Shape mismatch"):
            s.run(apply, {g: [1.0, 2.0, 3.0]})
        with pytest.raises(tf.errors.InvalidArgumentError, match="num_required must be"):
            s.run(take)
