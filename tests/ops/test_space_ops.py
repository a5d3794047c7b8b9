"""space_to_depth / depth_to_space in NCHW (TF runs these on GPUs only, so the TF fixtures
cannot hold them), and the run-time errors of the space/batch ops naming their node."""

import numpy as np
import pytest
from op_test_util import check_grads

import dflab as tf
from dflab.framework import errors


@pytest.fixture(autouse=True)
def _fresh_graph():
    tf.reset_default_graph()
    yield
    tf.reset_default_graph()


def _nchw(a):
    return np.transpose(a, (0, 3, 1, 2))


def test_space_to_depth_nchw_is_nhwc_transposed():
    x = np.random.default_rng(0).standard_normal((2, 4, 6, 3))
    nhwc = tf.space_to_depth(tf.constant(x), 2)
    nchw = tf.space_to_depth(tf.constant(_nchw(x)), 2, data_format="NCHW")
    assert nchw.shape.as_list() == [2, 12, 2, 3]
    back = tf.depth_to_space(nchw, 2, data_format="NCHW")
    with tf.Session() as sess:
        a, b, c = sess.run([nhwc, nchw, back])
    np.testing.assert_array_equal(b, _nchw(a))
    np.testing.assert_array_equal(c, _nchw(x))


def test_depth_space_nchw_gradients():
    x = np.random.default_rng(1).standard_normal((1, 8, 2, 3))
    check_grads(lambda t: tf.depth_to_space(t, 2, data_format="NCHW"), [x])
    y = np.random.default_rng(2).standard_normal((1, 2, 4, 6))
    check_grads(lambda t: tf.space_to_depth(t, 2, data_format="NCHW"), [y])


def test_run_time_errors_name_the_node():
    x = tf.placeholder(tf.float32, [None, None, None, 1])
    y = tf.space_to_batch_nd(x, [2, 2], [[0, 0], [0, 0]], name="s2b")
    z = tf.extract_image_patches(x, [2, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1], "VALID",
                                 name="patches")
    with tf.Session() as sess:
        with pytest.raises(errors.InvalidArgumentError, match="s2b"):
            sess.run(y, {x: np.zeros([1, 3, 2, 1])})
        with pytest.raises(errors.InvalidArgumentError, match="ksizes across space"):
            sess.run(z, {x: np.zeros([1, 3, 2, 1])})
