"""Building a graph never allocates a tensor's worth of memory: large zeros/ones are a Fill (TF's
rule: 1000 elements or more), a Fill too big for the machine fails when it runs, with
ResourceExhaustedError naming the op, and ``range`` with an infinite bound is refused."""

import numpy as np
import pytest

import dflab as tf


@pytest.mark.parametrize("make", [tf.zeros, tf.ones], ids=["zeros", "ones"])
def test_small_shapes_are_constants_large_ones_fills(make):
    assert make([999]).op.type == "Const"
    assert make([2, 3]).op.type == "Const"
    big = make([1000], name="big")
    assert big.op.type == "Fill" and big.op.name == "big"
    assert big.shape.as_list() == [1000]


@pytest.mark.parametrize("make,value", [(tf.zeros, 0), (tf.ones, 1)], ids=["zeros", "ones"])
@pytest.mark.parametrize("dtype", [tf.float32, tf.int64, tf.bool])
def test_fill_values_match_numpy(make, value, dtype):
    t = make([40, 30], dtype=dtype)
    with tf.Session() as sess:
        out = sess.run(t)
    np.testing.assert_array_equal(out, np.full([40, 30], value, dtype=dtype.as_numpy_dtype))
    assert out.dtype == dtype.as_numpy_dtype


def test_huge_shapes_build_without_allocating():
    z = tf.zeros([10**6, 10**6], name="z")
    o = tf.ones([10**6, 10**6], name="o")
    f = tf.fill([10**6, 10**6], 1.5, name="f")
    for t in (z, o, f):
        assert t.op.type == "Fill"
        assert t.shape.as_list() == [10**6, 10**6]
    # A shape beyond int32 keeps its size in an int64 shape tensor.
    assert tf.zeros([2**31, 1]).op.inputs[0].dtype == tf.int64


@pytest.mark.parametrize("make", [lambda: tf.zeros([10**6, 10**6], name="huge"),
                                  lambda: tf.fill([10**6, 10**6], 2.0, name="huge")],
                         ids=["zeros", "fill"])
def test_running_a_huge_fill_is_resource_exhausted_naming_the_op(make):
    t = make()
    with tf.Session() as sess, pytest.raises(tf.errors.ResourceExhaustedError) as info:
        sess.run(t)
    assert "huge" in str(info.value)
    assert "OOM when allocating tensor with shape[1000000, 1000000]" in str(info.value)


def test_fill_keeps_the_value_dtype():
    with tf.Session() as sess:
        assert sess.run(tf.fill([2], 1.5)).tolist() == [1.5, 1.5]
        assert tf.fill([2], 3).dtype == tf.int32


@pytest.mark.parametrize("limit", [float("inf"), float("-inf"), float("nan")])
def test_range_with_a_non_finite_bound_is_refused_at_build_time(limit):
    with pytest.raises(ValueError, match="Requires"):
        tf.range(0.0, limit, -1.0 if limit == float("-inf") else 1.0)


def test_range_with_an_infinite_fed_bound_fails_when_run():
    limit = tf.placeholder(tf.float32, [], name="limit")
    r = tf.range(0.0, limit, name="r")
    with tf.Session() as sess:
        with pytest.raises(tf.errors.InvalidArgumentError, match="Requires"):
            sess.run(r, {limit: np.inf})
        np.testing.assert_array_equal(sess.run(r, {limit: 3.0}), np.arange(3.0))
