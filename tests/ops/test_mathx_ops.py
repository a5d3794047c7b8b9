"""Error paths and stateful behaviour of the segment, scatter, sort and counting ops that the
TF-reference cases (``tests/fixtures/tf_api/cases_mathx.py``) cannot express."""

import numpy as np
import pytest

import dflab as tf
from dflab.framework import errors


@pytest.mark.parametrize("use_resource", [False, True])
def test_variable_scatter_nd_index_out_of_range_names_the_op(use_resource):
    with tf.Graph().as_default():
        v = tf.Variable(np.zeros((3, 2), np.float32), use_resource=use_resource)
        up = tf.scatter_nd_update(v, [[1, 0], [3, 1]], [1.0, 2.0], name="bad_update")
        with tf.Session() as sess:
            sess.run(v.initializer)
            with pytest.raises(errors.InvalidArgumentError, match="bad_update"):
                sess.run(up)
            np.testing.assert_array_equal(sess.run(v), np.zeros((3, 2)))


def test_scatter_nd_update_shape_mismatch_fails_at_build():
    with tf.Graph().as_default():
        v = tf.Variable(np.zeros((3, 2), np.float32), use_resource=False)
        with pytest.raises(ValueError, match="updates"):
            tf.scatter_nd_update(v, [[1], [2]], [1.0, 2.0])


def test_resource_scatter_nd_keeps_an_earlier_read():
    # A value read before the scatter in the same step keeps its buffer (copy on write).
    with tf.Graph().as_default():
        v = tf.Variable(np.zeros(3, np.float32), use_resource=True)
        before = tf.identity(v.read_value())
        with tf.control_dependencies([before]):
            after = tf.scatter_nd_add(v, [[0]], [5.0])
        with tf.Session() as sess:
            sess.run(v.initializer)
            b, a = sess.run([before, after])
        np.testing.assert_array_equal(b, [0, 0, 0])
        np.testing.assert_array_equal(a, [5, 0, 0])


def test_segment_ids_unsorted_is_invalid_argument():
    with tf.Graph().as_default():
        out = tf.segment_max([1.0, 2.0, 3.0], [1, 0, 1], name="seg")
        with tf.Session() as sess, pytest.raises(errors.InvalidArgumentError, match="seg"):
            sess.run(out)
