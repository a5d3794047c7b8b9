"""Stateless random ops and ``tf.random.categorical``: the same seed gives the same numbers in
every run and session (TF's numbers are checked in ``test_tf_api.py``), other seeds other
numbers; categorical is the stateful ``Multinomial`` with TF1's seed rules."""

import numpy as np
import pytest

import dflab as tf
from dflab.framework import errors
from dflab.framework.registry import get_op_def
from dflab.kernels import philox


def _run(build, runs=2):
    g = tf.Graph()
    with g.as_default():
        t = build()
        with tf.Session(graph=g) as s:
            return [s.run(t) for _ in range(runs)]


@pytest.mark.parametrize("build", [
    lambda s: tf.random.stateless_uniform([4, 5], s),
    lambda s: tf.random.stateless_normal([7], s, dtype=tf.float64),
    lambda s: tf.random.stateless_truncated_normal([3, 3], s),
    lambda s: tf.random.stateless_categorical(tf.zeros([2, 9]), 6, s),
    lambda s: tf.random.stateless_uniform([6], s, minval=0, maxval=100, dtype=tf.int64),
])
def test_same_seed_same_numbers_other_seed_other_numbers(build):
    a, b = _run(lambda: build([1, 2]))
    (c,) = _run(lambda: build([1, 2]), runs=1)
    (d,) = _run(lambda: build([2, 1]), runs=1)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, c)
    assert not np.array_equal(a, d)


def test_stateless_ops_are_not_stateful_and_shapes_are_static():
    g = tf.Graph()
    with g.as_default():
        t = tf.random.stateless_normal([2, 3], seed=[1, 2])
        assert t.shape.as_list() == [2, 3] and t.dtype == tf.float32
        ops = [op.type for op in g.get_operations() if get_op_def(op.type).stateful]
    assert ops == []  # pure functions of their inputs: constant folding and CSE may apply


def test_truncated_normal_bounds_and_moments():
    (x,) = _run(lambda: tf.random.stateless_truncated_normal([20000], [3, 9]), runs=1)
    assert np.all(np.abs(x) < 2)
    assert abs(x.mean()) < 0.03 and abs(x.std() - 0.8796) < 0.02


def test_categorical_frequencies_match_softmax():
    logits = np.log(np.array([[0.1, 0.6, 0.3]], np.float32))
    (x,) = _run(lambda: tf.random.stateless_categorical(logits, 20000, [4, 4]), runs=1)
    np.testing.assert_allclose(np.bincount(x[0], minlength=3) / 20000, [0.1, 0.6, 0.3],
                               atol=0.015)


def test_stateful_categorical_follows_seed_rules():
    def build():
        tf.set_random_seed(5)
        return tf.random.categorical(tf.math.log([[0.5, 0.5], [0.9, 0.1]]), 8,
                                     dtype=tf.int32)

    a, b = _run(build)
    (c,) = _run(build, runs=1)
    assert a.dtype == np.int32 and a.shape == (2, 8)
    np.testing.assert_array_equal(a, c)
    assert not np.array_equal(a, b)  # a stateful op draws anew on each run
    with tf.Graph().as_default():
        assert tf.random.categorical([[0.0, 1.0]], 2).op.name == "categorical/Multinomial"


def test_bad_seed_at_run_time_names_the_op():
    g = tf.Graph()
    with g.as_default():
        s = tf.placeholder(tf.int64, [None])
        t = tf.random.stateless_uniform([2], s)
        with tf.Session() as sess:
            with pytest.raises(errors.InvalidArgumentError, match="seed must have shape"):
                sess.run(t, {s: [1, 2, 3]})


def test_threefry_is_refused_and_algorithm_enum():
    assert tf.random.Algorithm.PHILOX.value == 1
    with tf.Graph().as_default():
        t = tf.random.stateless_uniform([2], [1, 2], alg=tf.random.Algorithm.THREEFRY)
        with tf.Session() as sess, pytest.raises(errors.InvalidArgumentError):
            sess.run(t)
        p = tf.random.stateless_uniform([5], [1, 2], alg="philox")
        q = tf.random.stateless_uniform([5], [1, 2])
        with tf.Session() as sess:
            a, b = sess.run([p, q])
    np.testing.assert_array_equal(a, b)


def test_philox_known_answer():
    # Random123's published known-answer vector for Philox4x32-10 (counter and key all ones).
    ones = 0xFFFFFFFF
    got = philox.philox_blocks([ones, ones], [ones] * 4, 1)[0]
    assert [hex(int(v)) for v in got] == ["0x408f276d", "0x41c83b0e", "0xa20bc7c6",
                                          "0x6d5451fd"]
    # The counter is 128-bit: a skip carries into the high words.
    a = philox.philox_blocks([1, 2], [ones, ones, 0, 0], 2)
    b = philox.philox_blocks([1, 2], [0, 0, 1, 0], 1)
    np.testing.assert_array_equal(a[1], b[0])


def test_generator_state_moves_and_eager_reset():
    with tf.Graph().as_default():
        g = tf.random.Generator.from_seed(3)
        x = g.normal([4])
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            a, b = sess.run(x), sess.run(x)
            assert not np.array_equal(a, b)  # the state moved on
            assert sess.run(g.state).tolist() == [3 + 2 * 4 * 256, 0, 0]
            sess.run(g.state.assign([3, 0, 0]))
            np.testing.assert_array_equal(sess.run(x), a)  # the same state, the same numbers
    with pytest.raises(ValueError):
        tf.random.Generator.from_seed(1, alg="threefry")
    with pytest.raises(ValueError):
        tf.random.Generator(state=[1, 2], alg="philox")


def test_generator_split_and_global_generator():
    with tf.Graph().as_default():
        g = tf.random.Generator.from_seed(5)
        kids = g.split(2)
        draws = [k.normal([3]) for k in kids]
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            a, b = sess.run(draws)
            assert not np.array_equal(a, b)
            # A child starts at counter 0 under its own key; three outputs moved it 3 * 256.
            assert sess.run(kids[0].state)[:2].tolist() == [768, 0]
        old = tf.random.get_global_generator()
        assert tf.random.get_global_generator() is old
        mine = tf.random.Generator.from_seed(9)
        tf.random.set_global_generator(mine)
        try:
            assert tf.random.get_global_generator() is mine
        finally:
            tf.random.set_global_generator(old)
