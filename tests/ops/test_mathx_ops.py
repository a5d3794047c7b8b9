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


def test_nd_ffts_match_numpy():
    # TF 2.21 has GPU kernels only for the N-d transforms: NumPy is the reference here.
    rng = np.random.default_rng(0)
    re, im = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 3, 4))
    c = re + 1j * im
    with tf.Graph().as_default():
        x = tf.constant(c.astype(np.complex64))
        r = tf.constant(re)
        outs = [tf.fftnd(x, [3, 6], [0, 2]), tf.ifftnd(x, [4], [-2]),
                tf.rfftnd(r, [2, 5], [1, 2], Tcomplex=tf.complex128),
                tf.irfftnd(x, [3, 6], [0, 2]), tf.irfftnd(x, [4], [2], Treal=tf.float32)]
        assert outs[0].shape.as_list() == [3, 3, 6]
        assert outs[2].shape.as_list() == [2, 2, 3]
        with tf.Session() as sess:
            got = sess.run(outs)
    c64 = c.astype(np.complex64)
    want = [np.fft.fftn(c64, s=[3, 6], axes=[0, 2]), np.fft.ifftn(c64, s=[4], axes=[-2]),
            np.fft.rfftn(re, s=[2, 5], axes=[1, 2]), np.fft.irfftn(c64, s=[3, 6], axes=[0, 2]),
            np.fft.irfftn(c64, s=[4], axes=[2])]
    dtypes = [np.complex64, np.complex64, np.complex128, np.float32, np.float32]
    for g, w, dt in zip(got, want, dtypes):
        assert g.dtype == dt
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_nd_fft_lengths_and_axes_must_pair():
    with tf.Graph().as_default():
        out = tf.fftnd(tf.zeros([2, 3], tf.complex64), [2, 3], [0])
        with tf.Session() as sess, pytest.raises(errors.InvalidArgumentError):
            sess.run(out)


def test_approx_min_k_and_other_axes_are_exact():
    # TF 2.21's CPU kernel serves only approx_max_k along the last axis; here every form runs
    # and is exact (NumPy's stable sort as the reference).
    x = np.array([[3, 1, 4, 1], [5, 9, 2, 6], [5, 3, 5, 8]], np.float32)
    with tf.Graph().as_default():
        outs = [*tf.math.approx_min_k(x, 2), *tf.nn.approx_max_k(x, 2, reduction_dimension=0),
                *tf.nn.approx_min_k(x, 1, reduction_dimension=0)]
        with tf.Session() as sess:
            v, i, v0, i0, m0, j0 = sess.run(outs)
    np.testing.assert_array_equal(i, np.argsort(x, axis=1, kind="stable")[:, :2])
    np.testing.assert_array_equal(v, np.sort(x, axis=1)[:, :2])
    np.testing.assert_array_equal(v0, [[5, 9, 5, 8], [5, 3, 4, 6]])
    np.testing.assert_array_equal(i0, [[1, 1, 2, 2], [2, 2, 0, 1]])
    np.testing.assert_array_equal(m0, [[3, 1, 2, 1]])
    np.testing.assert_array_equal(j0, [[0, 0, 1, 0]])
    assert i.dtype == np.int32
