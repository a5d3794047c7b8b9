"""3-D and depthwise convolutions, 3-D pools, max_pool_with_argmax and dilation2d beyond what the
TF fixtures (``cases_nn_conv.py``) cover: channels-first layouts (TF's CPU kernels refuse them;
here they must agree with the channels-last result), dilated depthwise convolution against a
direct loop, integer dilation, static shapes, and the run-time errors of the kernels."""

import numpy as np
import pytest
from op_test_util import check_grads

import dflab as tf
from dflab.framework import errors
from dflab.framework import ops as _ops

RNG = np.random.default_rng(7)


def run(t, feed=None):
    with tf.Session() as s:
        return s.run(t, feed)


def _to_first(a):
    return np.moveaxis(a, -1, 1)


def _to_last(a):
    return np.moveaxis(a, 1, -1)


def test_conv3d_channels_first_matches_channels_last():
    x = RNG.standard_normal((2, 4, 5, 6, 3))
    f = RNG.standard_normal((2, 3, 2, 3, 4))
    last = run(tf.nn.conv3d(x, f, [1, 2, 1, 2, 1], "SAME"))
    first = run(tf.nn.conv3d(_to_first(x), f, [1, 1, 2, 1, 2], "SAME", data_format="NCDHW"))
    np.testing.assert_allclose(_to_last(first), last, rtol=1e-12, atol=1e-12)
    check_grads(lambda a, b: tf.nn.conv3d(a, b, [1, 1, 2, 1, 2], "SAME", data_format="NCDHW"),
                [_to_first(x), f])


def test_pool3d_channels_first_matches_channels_last():
    x64 = RNG.standard_normal((2, 5, 4, 6, 3))
    # MaxPool3D takes float32 (and float16) only, as TF's; AvgPool3D float64 too.
    for pool, x in ((tf.nn.max_pool3d, x64.astype(np.float32)), (tf.nn.avg_pool3d, x64)):
        p = tf.placeholder(x.dtype, x.shape)
        q = tf.placeholder(x.dtype, _to_first(x).shape)
        last = pool(p, [1, 2, 3, 2, 1], [1, 2, 2, 1, 1], "SAME")
        first = pool(q, [1, 1, 2, 3, 2], [1, 1, 2, 2, 1], "SAME", data_format="NCDHW")
        outs = run([last, first, tf.gradients(last, p)[0], tf.gradients(first, q)[0]],
                   {p: x, q: _to_first(x)})
        np.testing.assert_allclose(_to_last(outs[1]), outs[0], rtol=1e-6)
        np.testing.assert_allclose(_to_last(outs[3]), outs[2], rtol=1e-6)
    check_grads(lambda a: tf.nn.avg_pool3d(a, 2, [1, 1, 2, 1, 2], "SAME", data_format="NCDHW"),
                [_to_first(x64)])
    with pytest.raises(TypeError, match="float64"):
        tf.nn.max_pool3d(x64, 2, 2, "SAME")


def _depthwise_loop(x, f, stride, rate, padding):
    """Direct NHWC depthwise convolution (dilated), TF's SAME split."""
    n, h, w, c = x.shape
    kh, kw, _, m = f.shape
    eh, ew = (kh - 1) * rate + 1, (kw - 1) * rate + 1
    if padding == "VALID":
        oh, ow, pt, pl = (h - eh) // stride + 1, (w - ew) // stride + 1, 0, 0
    else:
        oh, ow = -(-h // stride), -(-w // stride)
        pt = max((oh - 1) * stride + eh - h, 0) // 2
        pl = max((ow - 1) * stride + ew - w, 0) // 2
    out = np.zeros((n, oh, ow, c, m))
    for i in range(oh):
        for j in range(ow):
            for a in range(kh):
                for b in range(kw):
                    r, q = i * stride + a * rate - pt, j * stride + b * rate - pl
                    if 0 <= r < h and 0 <= q < w:
                        out[:, i, j] += x[:, r, q, :, None] * f[a, b]
    return out.reshape(n, oh, ow, c * m)


@pytest.mark.parametrize("stride,rate,padding", [(1, 2, "SAME"), (2, 1, "SAME"),
                                                 (1, 3, "VALID")])
def test_depthwise_native_against_a_loop_both_layouts(stride, rate, padding):
    x = RNG.standard_normal((2, 7, 8, 3))
    f = RNG.standard_normal((3, 2, 3, 2))
    want = _depthwise_loop(x, f, stride, rate, padding)
    got = run(tf.nn.depthwise_conv2d_native(x, f, [1, stride, stride, 1], padding,
                                            dilations=[1, rate, rate, 1]))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    first = run(tf.nn.depthwise_conv2d_native(_to_first(x), f, [1, 1, stride, stride], padding,
                                              data_format="NCHW",
                                              dilations=[1, 1, rate, rate]))
    np.testing.assert_allclose(_to_last(first), want, rtol=1e-12, atol=1e-12)
    check_grads(lambda a, b: tf.nn.depthwise_conv2d_native(
        a, b, [1, 1, stride, stride], padding, data_format="NCHW",
        dilations=[1, 1, rate, rate]), [_to_first(x), f])


def test_static_shapes():
    x = tf.placeholder(tf.float32, [None, 9, 8, 7, 3])
    assert tf.nn.conv3d(x, tf.zeros([3, 3, 3, 3, 5]), [1, 2, 2, 2, 1], "VALID").shape.as_list() \
        == [None, 4, 3, 3, 5]
    assert tf.nn.max_pool3d(x, 2, 2, "SAME").shape.as_list() == [None, 5, 4, 4, 3]
    y = tf.placeholder(tf.float32, [2, None, 6, 4])
    assert tf.nn.depthwise_conv2d(y, tf.zeros([3, 3, 4, 2]), [1, 1, 1, 1],
                                  "SAME").shape.as_list() == [2, None, 6, 8]
    v, a = tf.nn.max_pool_with_argmax(y, [1, 2, 2, 1], [1, 2, 2, 1], "SAME")
    assert v.shape.as_list() == a.shape.as_list() == [2, None, 3, 4]
    assert a.dtype == tf.int64
    d = tf.nn.dilation2d(y, tf.zeros([2, 3, 4]), [1, 1, 1, 1], [1, 2, 1, 1], "VALID")
    assert d.shape.as_list() == [2, None, 4, 4]


def test_integer_dilation2d_against_a_loop():
    x = RNG.integers(-50, 50, (2, 5, 6, 2)).astype(np.int32)
    f = RNG.integers(-5, 5, (2, 3, 2)).astype(np.int32)
    got = run(tf.nn.dilation2d(x, f, [1, 1, 1, 1], [1, 1, 1, 1], "VALID"))
    want = np.full((2, 4, 4, 2), np.iinfo(np.int32).min)
    for a in range(2):
        for b in range(3):
            want = np.maximum(want, x[:, a:a + 4, b:b + 4, :] + f[a, b])
    np.testing.assert_array_equal(got, want)
    assert got.dtype == np.int32


def test_kernel_errors_name_the_op():
    x = tf.placeholder(tf.float64, [None, None, None, None, None])
    f = tf.placeholder(tf.float64, [None, None, None, None, None])
    y = tf.nn.conv3d(x, f, [1, 1, 1, 1, 1], "SAME", name="my_conv")
    with pytest.raises(errors.InvalidArgumentError, match="my_conv"):
        run(y, {x: np.zeros((1, 3, 3, 3, 2)), f: np.zeros((1, 1, 1, 3, 1))})
    v = tf.placeholder(tf.float64, [1, 4, 4, 1])
    g = tf.placeholder(tf.float64, [1, 2, 2, 1])
    arg = tf.placeholder(tf.int64, [1, 2, 2, 1])
    dx = _ops.apply_op_output("MaxPoolGradWithArgmax", [v, g, arg],
                              {"ksize": [1, 2, 2, 1], "strides": [1, 2, 2, 1],
                               "padding": "VALID", "include_batch_in_index": False},
                              name="route")
    with pytest.raises(errors.InvalidArgumentError, match="route"):
        run(dx, {v: np.zeros((1, 4, 4, 1)), g: np.ones((1, 2, 2, 1)),
                 arg: np.array([0, 1, 2, 99]).reshape(1, 2, 2, 1)})


def test_argmax_and_its_gradient_pick_the_first_maximum():
    x = np.array([[1.0, 3.0, 3.0, 0.0], [3.0, 2.0, 0.0, 3.0]]).reshape(1, 2, 4, 1)
    p = tf.placeholder(tf.float64, x.shape)
    v, a = tf.nn.max_pool_with_argmax(p, [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
    dx = tf.gradients(v, p, grad_ys=np.array([10.0, 20.0]).reshape(1, 1, 2, 1))[0]
    got_v, got_a, got_dx = run([v, a, dx], {p: x})
    np.testing.assert_array_equal(got_v.ravel(), [3.0, 3.0])
    np.testing.assert_array_equal(got_a.ravel(), [1, 2])  # row-major first of the ties
    np.testing.assert_array_equal(got_dx.ravel(), [0, 10, 20, 0, 0, 0, 0, 0])


def test_generic_conv_groups_and_channels_first():
    # TF's CPU kernel refuses both; dflab computes them: each group is a conv2d of its own
    # channels, and channels-first data gives the channels-last result transposed.
    x = RNG.standard_normal((2, 3, 5, 6, 4))
    f = RNG.standard_normal((3, 2, 2, 6))
    got = run(tf.conv(x, f, [1, 1, 1, 1], "SAME", batch_dims=2, groups=2))
    flat = x.reshape(6, 5, 6, 4)
    halves = [run(tf.nn.conv2d(flat[..., 2 * g:2 * g + 2], f[..., 3 * g:3 * g + 3],
                               [1, 1, 1, 1], "SAME")) for g in range(2)]
    np.testing.assert_allclose(got.reshape(6, 5, 6, 6), np.concatenate(halves, -1),
                               rtol=1e-12, atol=1e-12)
    last = run(tf.conv(flat, f, [1, 2, 1, 1], "EXPLICIT", explicit_paddings=[0, 0, 1, 2, 0, 1,
                                                                              0, 0], groups=2))
    first = run(tf.conv(_to_first(flat), f, [1, 1, 2, 1], "EXPLICIT",
                        explicit_paddings=[0, 0, 0, 0, 1, 2, 0, 1],
                        data_format="CHANNELS_FIRST", groups=2))
    np.testing.assert_allclose(_to_last(first), last, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="Depth of input"):
        tf.conv(flat, f, [1, 1, 1, 1], "SAME", groups=3)
    unknown = tf.placeholder(tf.float64, [None, None, None, None])
    with pytest.raises(errors.InvalidArgumentError, match="groups"):
        run(tf.conv(unknown, f, [1, 1, 1, 1], "SAME", groups=3), {unknown: flat})
