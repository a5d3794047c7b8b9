"""nn ops: forward vs NumPy references (convolution and pooling vs direct loop implementations
written here), inferred static shapes, gradients vs finite differences, and error classes."""

import math
import warnings

import numpy as np
import pytest
from op_test_util import check_forward, check_grads, evaluate

import dflab as tf

RNG = np.random.default_rng(2024)
SELU_SCALE, SELU_ALPHA = 1.0507009873554805, 1.6732632423543772


def rand(*shape, low=-2.0, high=2.0):
    return RNG.uniform(low, high, size=shape)


def away_from(x, kinks, gap=0.1):
    """Move entries of ``x`` at least ``gap`` away from the points where an op has a kink."""
    x = x.copy()
    for k in kinks:
        near = np.abs(x - k) < gap
        x[near] = k + np.where(x[near] >= k, gap, -gap) * 2
    return x


def run(t, feed=None):
    with tf.Session() as s:
        return s.run(t, feed)


def np_softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def np_log_softmax(x, axis=-1):
    return np.log(np_softmax(x, axis))


# --- activations ------------------------------------------------------------------------------
ACTIVATIONS = [
    ("relu", tf.nn.relu, lambda x: np.maximum(x, 0), [0.0]),
    ("relu6", tf.nn.relu6, lambda x: np.clip(x, 0, 6), [0.0, 6.0]),
    ("elu", tf.nn.elu, lambda x: np.where(x > 0, x, np.exp(x) - 1), [0.0]),
    ("selu", tf.nn.selu,
     lambda x: SELU_SCALE * np.where(x > 0, x, SELU_ALPHA * (np.exp(x) - 1)), [0.0]),
    ("leaky_relu", tf.nn.leaky_relu, lambda x: np.where(x > 0, x, 0.2 * x), [0.0]),
    ("leaky_relu_a", lambda x: tf.nn.leaky_relu(x, alpha=0.5),
     lambda x: np.where(x > 0, x, 0.5 * x), [0.0]),
    ("softplus", tf.nn.softplus, lambda x: np.log1p(np.exp(x)), []),
    ("softsign", tf.nn.softsign, lambda x: x / (1 + np.abs(x)), []),
    ("sigmoid", tf.nn.sigmoid, lambda x: 1 / (1 + np.exp(-x)), []),
    ("tanh", tf.nn.tanh, np.tanh, []),
]


@pytest.mark.parametrize("name,fn,ref,kinks", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_activation_forward(name, fn, ref, kinks, dtype):
    x = rand(3, 4, low=-8, high=8).astype(dtype)
    got = check_forward(fn, [x], ref, rtol=1e-5 if dtype == np.float32 else 1e-12)
    assert got.dtype == dtype


@pytest.mark.parametrize("name,fn,ref,kinks", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
def test_activation_grad(name, fn, ref, kinks):
    x = away_from(rand(3, 4, low=-4, high=8), kinks)
    check_grads(fn, [x])


@pytest.mark.parametrize("fn,kinks", [(tf.nn.relu, [0.0]), (tf.nn.relu6, [0.0, 6.0]),
                                      (tf.nn.elu, [0.0]), (tf.nn.softplus, []),
                                      (tf.nn.leaky_relu, [0.0])])
def test_activation_second_derivative(fn, kinks):
    """The gradients of ReluGrad, EluGrad, SoftplusGrad… (second-order differentiation)."""
    x = away_from(rand(5, low=-3, high=8), kinks)

    def first_derivative(t):
        return tf.gradients(tf.reduce_sum(tf.square(fn(t))), [t])[0]

    check_grads(first_derivative, [x])


def test_relu_accepts_ints_softplus_does_not():
    assert run(tf.nn.relu(tf.constant([-2, 3]))).tolist() == [0, 3]
    with pytest.raises(TypeError):
        tf.nn.softplus(tf.constant([1, 2]))


# Small inputs compare against a 0-d zero, (16, 16) and up against a row of zeros; the last
# shape splits among threads.
@pytest.mark.parametrize("shape,dtype", [
    (shape, dtype) for shape in [(), (10,), (3, 10), (16, 16)]
    for dtype in (np.float32, np.float16, np.float64)] + [((600, 1000), np.float32)])
def test_relu_special_values_bit_for_bit(shape, dtype):
    special = np.array([-0.0, 0.0, np.nan, -np.nan, np.inf, -np.inf, 1e-45, -1e-45, 3.0, -2.0],
                       dtype)
    x = np.resize(special, shape).astype(dtype)
    cfg = tf.ConfigProto(intra_op_parallelism_threads=2)
    with tf.Graph().as_default(), tf.device("/cpu:0"):
        t = tf.constant(x)
        y = tf.nn.relu(t)
        (dx,) = tf.gradients(y, t, grad_ys=tf.constant(np.resize(special[::-1], shape)))
        with tf.Session(config=cfg) as s, warnings.catch_warnings():
            warnings.simplefilter("error")  # TF returns these silently; so must NumPy
            got, _ = s.run([y, dx])
    want = np.maximum(x, dtype(0))  # NumPy's own rules for NaN and signed zeros
    assert got.shape == want.shape and got.dtype == want.dtype
    bits = {2: np.int16, 4: np.int32, 8: np.int64}[want.itemsize]
    np.testing.assert_array_equal(np.asarray(got).view(bits), want.view(bits))


def test_softplus_is_stable_for_large_inputs():
    got = run(tf.nn.softplus(tf.constant([-1000.0, 0.0, 1000.0], tf.float64)))
    np.testing.assert_allclose(got, [0.0, math.log(2), 1000.0])


# --- softmax ----------------------------------------------------------------------------------
@pytest.mark.parametrize("axis", [-1, 0, 1])
@pytest.mark.parametrize("log", [False, True])
def test_softmax_forward_and_grad(axis, log):
    x = rand(3, 4, 2, low=-5, high=5)

    def fn(t):
        return tf.nn.log_softmax(t, axis=axis) if log else tf.nn.softmax(t, axis=axis)

    def ref(v):
        return np_log_softmax(v, axis) if log else np_softmax(v, axis)

    check_forward(fn, [x], ref, rtol=1e-10)
    check_grads(fn, [x])


def test_softmax_legacy_dim_and_large_logits():
    x = np.array([[1000.0, 1001.0], [-1000.0, -1000.0]])
    got, _ = evaluate(lambda t: tf.nn.softmax(t, dim=-1), x)
    np.testing.assert_allclose(got, np_softmax(x))
    with pytest.raises(ValueError):
        tf.nn.softmax(tf.constant([1.0, 2.0]), axis=1)


# --- cross-entropy losses ---------------------------------------------------------------------
def _labels(shape, axis=-1):
    return np_softmax(rand(*shape), axis)


@pytest.mark.parametrize("shape,axis", [((4, 5), -1), ((2, 3, 4), -1), ((4, 3), 0)])
def test_softmax_xent_v2_forward_and_grads(shape, axis):
    logits, labels = rand(*shape, low=-3, high=3), _labels(shape, axis)

    def fn(lab, lg):
        return tf.nn.softmax_cross_entropy_with_logits_v2(labels=lab, logits=lg, axis=axis)

    check_forward(fn, [labels, logits],
                  lambda lab, lg: -np.sum(lab * np_log_softmax(lg, axis), axis=axis), rtol=1e-10)
    check_grads(fn, [labels, logits])  # gradients into both labels and logits


def test_softmax_xent_v1_stops_label_gradient():
    labels = tf.constant(_labels((2, 3)))
    logits = tf.constant(rand(2, 3))
    loss = tf.nn.softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    g_labels, g_logits = tf.gradients(loss, [labels, logits])
    assert g_labels is None
    lv, gv = run([loss, g_logits])
    lab, lg = run([labels, logits])
    np.testing.assert_allclose(lv, -np.sum(lab * np_log_softmax(lg), -1))
    np.testing.assert_allclose(gv, np_softmax(lg) - lab)


def test_softmax_xent_needs_named_args_and_matching_shapes():
    with pytest.raises(ValueError, match="named arguments"):
        tf.nn.softmax_cross_entropy_with_logits(tf.constant([[1.0]]), tf.constant([[1.0]]))
    with pytest.raises(ValueError):
        tf.nn.softmax_cross_entropy_with_logits_v2(labels=tf.zeros([2, 3]),
                                                   logits=tf.zeros([2, 4]))


def test_softmax_xent_second_order():
    """Differentiating the gradient (e.g. for Hessian-vector products) uses grad_grad."""
    labels = _labels((2, 4))

    def logits_grad(lg):
        loss = tf.nn.softmax_cross_entropy_with_logits_v2(labels=tf.constant(labels), logits=lg)
        return tf.gradients(tf.reduce_sum(loss), [lg])[0]

    check_grads(logits_grad, [rand(2, 4)])


@pytest.mark.parametrize("batch", [(5,), (2, 3)])
@pytest.mark.parametrize("ldtype", [np.int32, np.int64])
def test_sparse_softmax_xent(batch, ldtype):
    k = 4
    logits = rand(*batch, k, low=-3, high=3)
    labels = RNG.integers(0, k, size=batch).astype(ldtype)

    def fn(lab, lg):
        return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=lab, logits=lg)

    def ref(lab, lg):
        return -np.take_along_axis(np_log_softmax(lg), lab[..., None], -1)[..., 0]

    check_forward(fn, [labels, logits], ref, rtol=1e-10)
    check_grads(fn, [labels, logits])


@pytest.mark.parametrize("threads", [1, 2])
def test_sparse_softmax_xent_of_a_big_batch_split_among_threads(monkeypatch, threads):
    # The host kernel's rows split among intra-op threads; extreme logits included: -inf off
    # the label, huge values, and a row where the label's logit is the only finite one.
    from dflab.kernels import intra_op

    monkeypatch.setattr(intra_op, "MIN_WORK", 1)
    rng = np.random.default_rng(3)
    logits = rng.normal(0, 5, (2, 150, 40)).astype(np.float32)
    labels = rng.integers(0, 40, (2, 150)).astype(np.int64)
    logits[0, 0, :] = -np.inf
    logits[0, 0, labels[0, 0]] = 3.0
    logits[1, 7, 5] = 1e30
    lg, lab = tf.constant(logits), tf.constant(labels)
    loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=lab, logits=lg)
    (grad,) = tf.gradients(tf.reduce_sum(loss), [lg])
    with tf.Session(config=tf.ConfigProto(intra_op_parallelism_threads=threads)) as sess:
        got_loss, got_grad = sess.run([loss, grad])
    shifted = logits.astype(np.float64) - logits.max(axis=-1, keepdims=True)
    log_p = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    want_loss = -np.take_along_axis(log_p, labels[..., None], -1)[..., 0]
    onehot = np.eye(40)[labels]
    assert got_loss.dtype == np.float32 and got_loss.shape == (2, 150)
    np.testing.assert_allclose(got_loss, want_loss, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got_grad, np.exp(log_p) - onehot, rtol=1e-5, atol=1e-6)
    assert got_loss[0, 0] == 0.0 and got_grad[0, 0, labels[0, 0]] == 0.0


@pytest.mark.parametrize("bad", [4, -1])
def test_sparse_softmax_xent_out_of_range_label(bad):
    labels = tf.placeholder(tf.int32, [2])
    loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=tf.zeros([2, 4]))
    with tf.Session() as s:
        with pytest.raises(tf.errors.InvalidArgumentError, match="outside the valid range"):
            s.run(loss, {labels: [0, bad]})


def test_sparse_softmax_xent_shape_errors():
    with pytest.raises(ValueError, match="Rank mismatch"):
        tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.zeros([2, 3], tf.int32),
                                                       logits=tf.zeros([2, 3]))
    with pytest.raises(ValueError):
        tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.zeros([3], tf.int32),
                                                       logits=tf.zeros([2, 3]))
    with pytest.raises(TypeError):
        tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.zeros([2]),
                                                       logits=tf.zeros([2, 3]))


def _np_sigmoid_xent(z, x):
    return np.maximum(x, 0) - x * z + np.log1p(np.exp(-np.abs(x)))


def test_sigmoid_xent_forward_grads_and_stability():
    logits, labels = rand(3, 4, low=-4, high=4), RNG.uniform(0, 1, size=(3, 4))

    def fn(z, x):
        return tf.nn.sigmoid_cross_entropy_with_logits(labels=z, logits=x)

    check_forward(fn, [labels, logits],
                  lambda z, x: -z * np.log(1 / (1 + np.exp(-x)))
                  - (1 - z) * np.log(1 - 1 / (1 + np.exp(-x))), rtol=1e-9)
    check_grads(fn, [labels, logits])
    big = np.array([-800.0, 800.0])
    got, _ = evaluate(fn, np.array([1.0, 0.0]), big)
    np.testing.assert_allclose(got, [800.0, 800.0])
    with pytest.raises(ValueError):
        tf.nn.sigmoid_cross_entropy_with_logits(labels=tf.zeros([2]), logits=tf.zeros([3]))


def test_weighted_xent():
    logits, labels = rand(3, 4, low=-4, high=4), RNG.uniform(0, 1, size=(3, 4))
    q = 2.5

    def fn(z, x):
        return tf.nn.weighted_cross_entropy_with_logits(labels=z, logits=x, pos_weight=q)

    def ref(z, x):
        s = 1 / (1 + np.exp(-x))
        return -q * z * np.log(s) - (1 - z) * np.log(1 - s)

    check_forward(fn, [labels, logits], ref, rtol=1e-9)
    check_grads(fn, [labels, logits])


# --- bias add ---------------------------------------------------------------------------------
@pytest.mark.parametrize("shape,fmt", [((2, 3), "NHWC"), ((2, 3, 4, 5), "NHWC"),
                                       ((2, 5, 3, 4), "NCHW"), ((2, 5, 3), "NCHW")])
def test_bias_add(shape, fmt):
    x = rand(*shape)
    c = shape[-1] if fmt == "NHWC" or len(shape) < 3 else shape[len(shape) - 3]
    b = rand(c)

    def ref(v, bias):
        if fmt == "NHWC" or v.ndim < 3:
            return v + bias
        return v + bias.reshape((-1,) + (1,) * 2)

    def fn(v, bias):
        return tf.nn.bias_add(v, bias, data_format=fmt)

    check_forward(fn, [x, b], ref, rtol=1e-12)
    check_grads(fn, [x, b])


def test_bias_add_grad_op_and_its_gradient():
    x = tf.placeholder(tf.float64, [2, 3, 4])
    y = tf.nn.bias_add(x, tf.zeros([4], tf.float64))
    gb = tf.gradients(y, [y.op.inputs[1]])[0]
    assert gb.op.type == "BiasAddGrad" and gb.shape.as_list() == [4]
    # BiasAddGrad is linear; its own gradient broadcasts back (second-order through BiasAdd)
    check_grads(_bias_add_grad_of, [rand(2, 3, 4)])


def _bias_add_grad_of(g):
    b = tf.zeros([4], tf.float64)
    y = tf.nn.bias_add(tf.zeros([2, 3, 4], tf.float64), b)
    return tf.gradients(y, [b], grad_ys=[g])[0]


def test_bias_add_bad_inputs():
    with pytest.raises(ValueError):
        tf.nn.bias_add(tf.zeros([2, 3]), tf.zeros([4]))
    with pytest.raises(ValueError):
        tf.nn.bias_add(tf.zeros([3]), tf.zeros([3]))
    with pytest.raises(ValueError):
        tf.nn.bias_add(tf.zeros([2, 3]), tf.zeros([3]), data_format="NCWH")


# --- convolution ------------------------------------------------------------------------------
def _pads(size, k, s, d, padding):
    eff = (k - 1) * d + 1
    if padding == "VALID":
        return (size - eff) // s + 1, 0
    out = -(-size // s)
    return out, max((out - 1) * s + eff - size, 0) // 2


def naive_conv2d(x, w, strides, padding, dilations=(1, 1)):
    """Direct convolution: one dot product per output pixel and filter tap."""
    n, h, wd, c = x.shape
    kh, kw, _, co = w.shape
    (sh, sw), (dh, dw) = strides, dilations
    oh, pt = _pads(h, kh, sh, dh, padding)
    ow, pl = _pads(wd, kw, sw, dw, padding)
    out = np.zeros((n, oh, ow, co))
    for i in range(oh):
        for j in range(ow):
            for a in range(kh):
                for b in range(kw):
                    r, q = i * sh + a * dh - pt, j * sw + b * dw - pl
                    if 0 <= r < h and 0 <= q < wd:
                        out[:, i, j, :] += x[:, r, q, :] @ w[a, b]
    return out


CONV_CASES = [
    # (input shape NHWC, filter shape, strides, padding, dilations)
    ((2, 5, 5, 3), (3, 3, 3, 4), (1, 1), "SAME", (1, 1)),
    ((2, 5, 5, 3), (3, 3, 3, 4), (1, 1), "VALID", (1, 1)),
    ((1, 7, 6, 2), (3, 2, 2, 3), (2, 2), "SAME", (1, 1)),
    ((1, 7, 6, 2), (3, 2, 2, 3), (2, 2), "VALID", (1, 1)),
    ((1, 8, 7, 2), (2, 3, 2, 2), (2, 1), "SAME", (1, 1)),
    ((2, 7, 7, 2), (3, 3, 2, 2), (1, 1), "SAME", (2, 2)),
    ((2, 7, 7, 2), (3, 3, 2, 2), (1, 1), "VALID", (2, 2)),
    ((1, 9, 8, 1), (2, 2, 1, 2), (2, 2), "SAME", (2, 2)),
    ((1, 6, 6, 2), (1, 1, 2, 3), (2, 2), "VALID", (1, 1)),
    ((1, 4, 4, 1), (4, 4, 1, 1), (1, 1), "SAME", (1, 1)),
    # stride 1 with few input channels: the input gradient scatters patches (col2im)
    ((2, 6, 5, 1), (3, 3, 1, 8), (1, 1), "SAME", (1, 1)),
    # the MNIST net's shapes, scaled down: 5x5 SAME, more output than input channels
    ((2, 7, 6, 4), (5, 5, 4, 6), (1, 1), "SAME", (1, 1)),
]


def _conv_id(case):
    xs, fs, s, p, d = case
    return f"{xs[1]}x{xs[2]}-k{fs[0]}x{fs[1]}-s{s[0]}{s[1]}-{p}-d{d[0]}"


@pytest.mark.parametrize("case", CONV_CASES, ids=[_conv_id(c) for c in CONV_CASES])
def test_conv2d_forward(case):
    xs, fs, s, p, d = case
    x, w = rand(*xs), rand(*fs)

    def fn(a, b):
        return tf.nn.conv2d(a, b, strides=[1, *s, 1], padding=p, dilations=[1, *d, 1])

    check_forward(fn, [x, w], lambda a, b: naive_conv2d(a, b, s, p, d), rtol=1e-10)


@pytest.mark.parametrize("case", CONV_CASES[:9:2] + [CONV_CASES[7]],
                         ids=[_conv_id(c) for c in CONV_CASES[:9:2] + [CONV_CASES[7]]])
def test_conv2d_grads(case):
    xs, fs, s, p, d = case
    xs = (1,) + xs[1:]

    def fn(a, b):
        return tf.nn.conv2d(a, b, strides=[1, *s, 1], padding=p, dilations=[1, *d, 1])

    check_grads(fn, [rand(*xs), rand(*fs)])


def test_conv2d_nchw_matches_nhwc():
    x, w = rand(2, 6, 5, 3), rand(3, 3, 3, 2)

    def fn(a, b):
        y = tf.nn.conv2d(tf.transpose(a, [0, 3, 1, 2]), b, strides=[1, 1, 2, 2],
                         padding="SAME", data_format="NCHW")
        return tf.transpose(y, [0, 2, 3, 1])

    check_forward(fn, [x, w], lambda a, b: naive_conv2d(a, b, (2, 2), "SAME"), rtol=1e-10)
    check_grads(fn, [rand(1, 5, 4, 2), rand(2, 2, 2, 2)])


def test_conv2d_strides_as_int_and_filters_keyword():
    x, w = rand(1, 5, 5, 1), rand(2, 2, 1, 1)
    got, t = evaluate(lambda a, b: tf.nn.conv2d(a, filters=b, strides=2, padding="VALID"), x, w)
    np.testing.assert_allclose(got, naive_conv2d(x, w, (2, 2), "VALID"))


@pytest.mark.parametrize("case", [CONV_CASES[2], CONV_CASES[6], CONV_CASES[0], CONV_CASES[10],
                                  CONV_CASES[11]],
                         ids=["s2", "d2", "s1-as-conv", "s1-col2im", "5x5-same"])
def test_conv2d_backprop_ops_and_their_gradients(case):
    xs, fs, s, p, d = case
    kw = dict(strides=[1, *s, 1], padding=p, dilations=[1, *d, 1])
    x, w = rand(*xs), rand(*fs)
    y_shape = naive_conv2d(x, w, s, p, d).shape
    dy = rand(*y_shape)
    # backprop_input is the adjoint of conv2d in x: <conv(x, w), dy> == <x, bp_input(dy)>
    dx, _ = evaluate(lambda f, g: tf.nn.conv2d_backprop_input(list(xs), f, g, **kw), w, dy)
    np.testing.assert_allclose(np.sum(naive_conv2d(x, w, s, p, d) * dy), np.sum(x * dx))
    dw, _ = evaluate(lambda a, g: tf.nn.conv2d_backprop_filter(a, list(fs), g, **kw), x, dy)
    np.testing.assert_allclose(np.sum(naive_conv2d(x, w, s, p, d) * dy), np.sum(w * dw))
    check_grads(lambda f, g: tf.nn.conv2d_backprop_input(list(xs), f, g, **kw),
                [w, dy])
    check_grads(lambda a, g: tf.nn.conv2d_backprop_filter(a, list(fs), g, **kw),
                [x, dy])


def test_conv2d_transpose_shape_and_values():
    x, w = rand(1, 3, 3, 2), rand(3, 3, 4, 2)  # filter: [h, w, out_channels, in_channels]
    out_shape = [1, 6, 6, 4]
    got, t = evaluate(lambda a, b: tf.nn.conv2d_transpose(a, b, out_shape, [1, 2, 2, 1]), x, w)
    assert t.shape.as_list() == out_shape
    probe = rand(*out_shape)
    # adjoint identity against the forward conv
    np.testing.assert_allclose(np.sum(got * probe),
                               np.sum(naive_conv2d(probe, w, (2, 2), "SAME") * x))


def test_conv2d_partial_static_shape():
    x = tf.placeholder(tf.float32, [None, 9, None, 3])
    y = tf.nn.conv2d(x, tf.zeros([3, 3, 3, 8]), strides=[1, 2, 2, 1], padding="SAME")
    assert y.shape.as_list() == [None, 5, None, 8]
    y = tf.nn.conv2d(x, tf.zeros([3, 3, 3, 8]), strides=[1, 2, 2, 1], padding="VALID")
    assert y.shape.as_list() == [None, 4, None, 8]
    y = tf.nn.conv2d(tf.placeholder(tf.float32), tf.zeros([3, 3, 3, 8]), [1, 1, 1, 1], "SAME")
    assert y.shape.as_list() == [None, None, None, 8]


def test_conv2d_bad_inputs():
    f = tf.zeros([3, 3, 3, 4])
    with pytest.raises(ValueError, match="rank 4"):
        tf.nn.conv2d(tf.zeros([5, 5, 3]), f, strides=[1, 1, 1, 1], padding="SAME")
    with pytest.raises(ValueError, match="rank 4"):
        tf.nn.conv2d(tf.zeros([1, 5, 5, 3]), tf.zeros([3, 3, 3]), [1, 1, 1, 1], "SAME")
    with pytest.raises(ValueError, match="Depth"):
        tf.nn.conv2d(tf.zeros([1, 5, 5, 2]), f, strides=[1, 1, 1, 1], padding="SAME")
    with pytest.raises(ValueError, match="padding"):
        tf.nn.conv2d(tf.zeros([1, 5, 5, 3]), f, strides=[1, 1, 1, 1], padding="FULL")
    with pytest.raises(ValueError):
        tf.nn.conv2d(tf.zeros([1, 5, 5, 3]), f, strides=[2, 1, 1, 1], padding="SAME")
    with pytest.raises(ValueError):
        tf.nn.conv2d(tf.zeros([1, 5, 5, 3]), f, strides=[1, 1, 1], padding="SAME")
    with pytest.raises(ValueError, match="negative"):
        tf.nn.conv2d(tf.zeros([1, 1, 1, 3]), tf.zeros([5, 5, 3, 1]), strides=[1, 2, 2, 1],
                     padding="VALID")
    with pytest.raises(TypeError):
        tf.nn.conv2d(tf.zeros([1, 5, 5, 3], tf.float64), f, [1, 1, 1, 1], "SAME")


def test_conv2d_runtime_channel_mismatch():
    x = tf.placeholder(tf.float32, [1, 4, 4, None])
    y = tf.nn.conv2d(x, tf.zeros([2, 2, 3, 1]), [1, 1, 1, 1], "SAME")
    with tf.Session() as s:
        with pytest.raises(tf.errors.InvalidArgumentError):
            s.run(y, {x: np.zeros((1, 4, 4, 2), np.float32)})


# --- pooling ----------------------------------------------------------------------------------
def naive_pool(x, k, s, padding, kind):
    n, h, w, c = x.shape
    oh, pt = _pads(h, k[0], s[0], 1, padding)
    ow, pl = _pads(w, k[1], s[1], 1, padding)
    out = np.zeros((n, oh, ow, c))
    for i in range(oh):
        for j in range(ow):
            r0, c0 = i * s[0] - pt, j * s[1] - pl
            win = x[:, max(r0, 0):r0 + k[0], max(c0, 0):c0 + k[1], :]
            out[:, i, j, :] = win.max(axis=(1, 2)) if kind == "max" else win.mean(axis=(1, 2))
    return out


POOL_CASES = [
    ((2, 4, 4, 3), (2, 2), (2, 2), "VALID"),
    ((2, 5, 5, 2), (2, 2), (2, 2), "SAME"),
    ((1, 5, 6, 2), (3, 3), (1, 1), "SAME"),
    ((1, 7, 5, 1), (3, 2), (2, 1), "VALID"),
    ((1, 6, 6, 2), (3, 3), (2, 2), "SAME"),
]


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("case", POOL_CASES)
def test_pool_forward_and_grad(kind, case):
    xs, k, s, p = case
    pool = tf.nn.max_pool if kind == "max" else tf.nn.avg_pool

    def fn(a):
        return pool(a, ksize=[1, *k, 1], strides=[1, *s, 1], padding=p)

    x = rand(*xs)
    check_forward(fn, [x], lambda a: naive_pool(a, k, s, p, kind), rtol=1e-12)
    check_grads(fn, [rand(*((1,) + xs[1:]))])


@pytest.mark.parametrize("kind", ["max", "avg"])
def test_pool_nchw(kind):
    pool = tf.nn.max_pool if kind == "max" else tf.nn.avg_pool
    x = rand(2, 5, 5, 3)

    def fn(a):
        y = pool(tf.transpose(a, [0, 3, 1, 2]), [1, 1, 2, 2], [1, 1, 2, 2], "SAME",
                 data_format="NCHW")
        return tf.transpose(y, [0, 2, 3, 1])

    check_forward(fn, [x], lambda a: naive_pool(a, (2, 2), (2, 2), "SAME", kind), rtol=1e-12)
    check_grads(fn, [rand(1, 4, 3, 2)])


def test_max_pool_grad_ties_go_to_first_max_and_overlaps_accumulate():
    x = np.ones((1, 3, 3, 1))
    y = tf.nn.max_pool(tf.constant(x), [1, 2, 2, 1], [1, 1, 1, 1], "VALID")
    g = run(tf.gradients(y, [y.op.inputs[0]])[0])
    # four overlapping windows, each sends its gradient to its top-left cell
    want = np.zeros((3, 3))
    want[0, 0] = want[0, 1] = want[1, 0] = want[1, 1] = 1
    np.testing.assert_array_equal(g[0, :, :, 0], want)


def test_max_pool_grad_disjoint_windows_ties_and_infinite_gradients():
    # Disjoint 2x2 windows: a tie goes to the window's first maximum in row-major order, and an
    # infinite incoming gradient lands only there (zeros elsewhere, never inf * 0 = NaN).
    x = np.array([[1, 4, 3, 3], [4, 2, 3, 3]], np.float32).reshape(1, 2, 4, 1)
    g_in = np.array([2, np.inf], np.float32).reshape(1, 1, 2, 1)
    xt = tf.constant(x)
    y = tf.nn.max_pool(xt, [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
    got = run(tf.gradients(y, [xt], grad_ys=[tf.constant(g_in)])[0])
    want = np.array([[0, 2, np.inf, 0], [0, 0, 0, 0]], np.float32)
    np.testing.assert_array_equal(got[0, :, :, 0], want)


def test_max_pool_and_grad_on_a_nan_window():
    # NumPy's maximum propagates NaN: the window's output is NaN and its gradient goes to the
    # NaN cell (the first one, as an argmax would pick it).
    x = np.array([[1, np.nan, 3, 0], [np.nan, 5, 3, 1]], np.float32).reshape(1, 2, 4, 1)
    xt = tf.constant(x)
    y = tf.nn.max_pool(xt, [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
    got_y, got_g = run([y, tf.gradients(y, [xt])[0]])
    assert np.isnan(got_y[0, 0, 0, 0]) and got_y[0, 0, 1, 0] == 3
    np.testing.assert_array_equal(got_g[0, :, :, 0], [[0, 1, 1, 0], [0, 0, 0, 0]])


def test_avg_pool_grad_second_order():
    def first(a):
        y = tf.nn.avg_pool(a, [1, 2, 2, 1], [1, 1, 1, 1], "SAME")
        return tf.gradients(tf.reduce_sum(y * y), [a])[0]

    check_grads(first, [rand(1, 3, 3, 1)])


def test_pool_bad_inputs():
    x = tf.zeros([1, 4, 4, 1])
    with pytest.raises(ValueError):
        tf.nn.max_pool(x, [1, 2, 2, 1], [1, 2, 2, 1], "same_ish")
    with pytest.raises(ValueError):
        tf.nn.max_pool(tf.zeros([4, 4, 1]), [1, 2, 2, 1], [1, 2, 2, 1], "SAME")
    with pytest.raises(ValueError):
        tf.nn.avg_pool(x, [2, 2, 2, 1], [1, 2, 2, 1], "SAME")
    with pytest.raises(TypeError):
        tf.nn.avg_pool(tf.zeros([1, 4, 4, 1], tf.int32), [1, 2, 2, 1], [1, 2, 2, 1], "SAME")


def test_pool_and_conv_are_expensive():
    from dflab.framework.registry import get_op_def

    for t in ("Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter", "MaxPool", "AvgPool",
              "MaxPoolGrad", "AvgPoolGrad"):
        assert get_op_def(t).expensive, t


# --- dropout ----------------------------------------------------------------------------------
def test_dropout_scales_and_keeps_about_keep_prob():
    x = np.full((200, 100), 3.0, np.float32)
    got, t = evaluate(lambda a: tf.nn.dropout(a, keep_prob=0.25), x)
    assert t.shape.as_list() == [200, 100]
    assert set(np.unique(got)) <= {0.0, np.float32(12.0)}
    assert abs(np.mean(got != 0) - 0.25) < 0.02


def test_dropout_rate_noise_shape_and_seed():
    x = np.ones((50, 8))
    tf.set_random_seed(5)
    got, _ = evaluate(lambda a: tf.nn.dropout(a, rate=0.5, noise_shape=[50, 1], seed=3), x)
    # one decision per row, shared across columns
    assert np.all((got == 0).all(axis=1) | (got == 2).all(axis=1))
    again, _ = evaluate(lambda a: tf.nn.dropout(a, rate=0.5, noise_shape=[50, 1], seed=3), x)
    np.testing.assert_array_equal(got, again)


def test_dropout_gradient():
    # Each run draws a new mask, so compare the gradient with the output of the same run:
    # d(sum(dropout(x) * w))/dx = w * mask / keep_prob = w * dropout(x) / x.
    x = tf.constant(rand(40, 5, low=0.5, high=2.0))
    w = tf.constant(rand(40, 5))
    y = tf.nn.dropout(x, 0.6)
    g = tf.gradients(tf.reduce_sum(y * w), [x])[0]
    xv, wv, yv, gv = run([x, w, y, g])
    np.testing.assert_allclose(gv, wv * yv / xv, rtol=1e-12)
    assert 0 < np.count_nonzero(gv) < gv.size


def test_eager_dropout_draws_and_differentiates_as_the_general_path():
    """An eager tensor with a Python probability takes a shorter path: the same ops, so the
    same numbers as the general path (taken here by naming the full noise shape) from the
    same seeds, and the same gradient."""
    from dflab.eager import EagerContext

    x = rand(6, 7, low=0.5, high=2.0).astype(np.float32)
    results = []
    for noise_shape in (None, [6, 7], None):
        c = EagerContext()
        with c.as_default():
            tf.set_random_seed(11)
            xt = tf.constant(x)
            with tf.GradientTape() as tape:
                tape.watch(xt)
                ys = [tf.nn.dropout(xt, rate=0.25, noise_shape=noise_shape, seed=4),
                      tf.nn.dropout(xt, 0.5, noise_shape=noise_shape, seed=4)]
                total = tf.add_n([tf.reduce_sum(y) for y in ys])
            grad = tape.gradient(total, xt).numpy()
            results.append([y.numpy() for y in ys] + [grad])
        c.close()
    fast, general, again = results
    for a, b, c_ in zip(fast, general, again):
        assert a.dtype == np.float32 and a.tobytes() == b.tobytes() == c_.tobytes()
    for y, keep in zip(fast[:2], (0.75, 0.5)):
        kept = y != 0
        np.testing.assert_allclose(y[kept], x[kept] / np.float32(keep), rtol=1e-6)
        assert 0 < kept.sum() < kept.size
    np.testing.assert_allclose(fast[2], (fast[0] + fast[1]) / x, rtol=1e-5)


def test_dropout_arguments():
    x = tf.ones([3])
    assert tf.nn.dropout(x, keep_prob=1.0) is x
    assert tf.nn.dropout(x, rate=0.0) is x
    with pytest.raises(ValueError):
        tf.nn.dropout(x, keep_prob=0.5, rate=0.5)
    with pytest.raises(ValueError):
        tf.nn.dropout(x)
    with pytest.raises(ValueError):
        tf.nn.dropout(x, keep_prob=1.5)
    with pytest.raises(ValueError):
        tf.nn.dropout(x, rate=1.0)
    with pytest.raises(ValueError):
        tf.nn.dropout(tf.ones([3], tf.int32), 0.5)
    kp = tf.placeholder(tf.float32, [])
    d = tf.nn.dropout(tf.ones([1000]), kp)
    r = tf.placeholder(tf.float32, [])
    dr = tf.nn.dropout(tf.ones([4000]), rate=r)
    with tf.Session() as s:
        np.testing.assert_array_equal(s.run(d, {kp: 1.0}), np.ones(1000))
        v = s.run(dr, {r: 0.75})
        assert set(np.unique(v)) <= {0.0, 4.0} and abs(np.mean(v != 0) - 0.25) < 0.03


# --- l2 loss / l2_normalize / moments / batch norm -------------------------------------------
def test_l2_loss():
    x = rand(3, 4)
    check_forward(tf.nn.l2_loss, [x], lambda a: np.sum(a * a) / 2, rtol=1e-12)
    check_grads(tf.nn.l2_loss, [x])


@pytest.mark.parametrize("axis", [None, 0, 1, [0, 1]])
def test_l2_normalize(axis):
    x = rand(3, 4)

    def ref(a):
        return a / np.sqrt(np.maximum(np.sum(a * a, axis=None if axis is None else tuple(
            np.atleast_1d(axis)), keepdims=True), 1e-12))

    check_forward(lambda a: tf.nn.l2_normalize(a, axis=axis), [x], ref, rtol=1e-12)
    check_grads(lambda a: tf.nn.l2_normalize(a, axis=axis), [x])


@pytest.mark.parametrize("axes,keep", [([0], False), ([0, 1, 2], False), ([1, 2], True),
                                       ([0, 2], True)])
def test_moments(axes, keep):
    x = rand(3, 4, 5)

    def fn(a):
        return list(tf.nn.moments(a, axes, keep_dims=keep))

    def ref(a):
        return [a.mean(axis=tuple(axes), keepdims=keep), a.var(axis=tuple(axes), keepdims=keep)]

    check_forward(fn, [x], ref, rtol=1e-12)
    check_grads(fn, [x])


def test_batch_normalization():
    x, mean, var = rand(4, 3), rand(3), rand(3, low=0.5, high=2)
    offset, scale = rand(3), rand(3)

    def fn(a, m, v, o, s):
        return tf.nn.batch_normalization(a, m, v, o, s, 1e-3)

    def ref(a, m, v, o, s):
        return s * (a - m) / np.sqrt(v + 1e-3) + o

    check_forward(fn, [x, mean, var, offset, scale], ref, rtol=1e-12)
    check_grads(fn, [x, mean, var, offset, scale])
    got, _ = evaluate(lambda a, m, v: tf.nn.batch_normalization(a, m, v, None, None, 1e-3),
                      x, mean, var)
    np.testing.assert_allclose(got, (x - mean) / np.sqrt(var + 1e-3))


def test_fused_batch_norm_training_and_inference():
    x, scale, offset = rand(2, 3, 3, 4), rand(4), rand(4)

    def train(a, s, o):
        return list(tf.nn.fused_batch_norm(a, s, o, epsilon=1e-3))

    def ref(a, s, o):
        m, v = a.mean(axis=(0, 1, 2)), a.var(axis=(0, 1, 2))
        n = a.size // a.shape[-1]
        return [s * (a - m) / np.sqrt(v + 1e-3) + o, m, v * n / (n - 1)]

    check_forward(train, [x, scale, offset], ref, rtol=1e-10)
    check_grads(lambda a, s, o: train(a, s, o)[0], [x, scale, offset])
    mean, var = rand(4), rand(4, low=0.5, high=1.5)
    got, _ = evaluate(lambda a, s, o, m, v: tf.nn.fused_batch_norm(
        a, s, o, m, v, epsilon=1e-3, is_training=False)[0], x, scale, offset, mean, var)
    np.testing.assert_allclose(got, scale * (x - mean) / np.sqrt(var + 1e-3) + offset)


# --- embedding lookup -------------------------------------------------------------------------
def test_embedding_lookup_single_tensor_and_gradient():
    params, ids = rand(6, 3), np.array([[0, 5], [2, 2]], np.int32)
    check_forward(lambda p, i: tf.nn.embedding_lookup(p, i), [params, ids],
                  lambda p, i: p[i], rtol=0)
    # ``p * 1.0`` makes the gradient reaching the placeholder dense: Session.run cannot fetch
    # an IndexedSlices (the sparse form itself is checked in the next test).
    check_grads(lambda p, i: tf.nn.embedding_lookup(p * 1.0, i), [params, ids])


def test_embedding_lookup_variable_gets_sparse_gradient():
    v = tf.Variable(rand(5, 2))
    y = tf.nn.embedding_lookup(v, tf.constant([1, 3, 1]))
    g = tf.gradients(tf.reduce_sum(y), [v])[0]
    assert isinstance(g, tf.IndexedSlices)
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        dense = s.run(tf.convert_to_tensor(g))
    np.testing.assert_allclose(dense, [[0, 0], [2, 2], [0, 0], [1, 1], [0, 0]])


@pytest.mark.parametrize("strategy", ["mod", "div"])
def test_embedding_lookup_sharded(strategy):
    table = rand(7, 2)
    n = 3
    if strategy == "mod":
        shards = [table[p::n] for p in range(n)]
    else:
        sizes = [3, 2, 2]  # the first 7 % 3 shards get one extra id
        shards = np.split(table, np.cumsum(sizes)[:-1])
    ids = np.array([6, 0, 3, 4, 1, 5, 2], np.int32)

    def fn(i, *ps):
        return tf.nn.embedding_lookup(list(ps), i, partition_strategy=strategy)

    check_forward(fn, [ids, *shards], lambda i, *ps: table[i], rtol=0)
    check_grads(fn, [ids, *shards])
    with pytest.raises(ValueError):
        tf.nn.embedding_lookup([tf.zeros([2, 2])], tf.constant([0]), partition_strategy="x")


def test_embedding_lookup_max_norm():
    params = np.array([[3.0, 4.0], [0.3, 0.4]])
    got, _ = evaluate(lambda p: tf.nn.embedding_lookup(p, [0, 1], max_norm=1.0), params)
    np.testing.assert_allclose(got, [[0.6, 0.8], [0.3, 0.4]])


# --- in_top_k / top_k / zero_fraction --------------------------------------------------------
def test_in_top_k_tie_breaking_and_invalid_rows():
    pred = np.array([[0.1, 0.3, 0.3, 0.2],     # tie at the boundary: both tied count as in
                     [0.4, 0.3, 0.2, 0.1],
                     [0.1, np.inf, 0.2, 0.3],  # non-finite row: never in top k
                     [0.5, 0.1, 0.2, 0.3]], np.float32)
    targets = np.array([2, 2, 3, 7], np.int32)  # 7 is out of range: False, not an error
    got, t = evaluate(lambda p, q: tf.nn.in_top_k(p, q, 1), pred, targets)
    assert got.tolist() == [True, False, False, False]
    assert t.shape.as_list() == [4] and t.dtype == tf.bool
    got, _ = evaluate(lambda p, q: tf.nn.in_top_k(p, q, 3), pred, np.array([2, 2, 3, 0]))
    assert got.tolist() == [True, True, False, True]


def test_top_k_values_indices_and_gradient():
    x = np.array([[1.0, 3.0, 3.0, 2.0], [5.0, 4.0, 4.0, 6.0]])
    (vals, idx), (tv, ti) = evaluate(lambda a: list(tf.nn.top_k(a, k=3)), x)
    np.testing.assert_array_equal(vals, [[3, 3, 2], [6, 5, 4]])
    np.testing.assert_array_equal(idx, [[1, 2, 3], [3, 0, 1]])  # ties: lower index first
    assert tv.shape.as_list() == [2, 3] and ti.dtype == tf.int32
    check_grads(lambda a: tf.nn.top_k(a, k=2)[0], [rand(3, 5)])
    with pytest.raises(ValueError):
        tf.nn.top_k(tf.zeros([2, 3]), k=4)


def test_results_of_several_outputs_are_tfs_named_tuples():
    # TF's types and field names (TopKV2, Qr, Lu, LogMatrixDeterminant, MaxPoolWithArgmax).
    m = tf.constant([[3.0, 1.0], [2.0, 5.0]])
    cases = [(tf.nn.top_k(m[0], 1), "TopKV2", ("values", "indices")),
             (tf.math.top_k(m[0], 1), "TopKV2", ("values", "indices")),
             (tf.linalg.qr(m), "Qr", ("q", "r")), (tf.linalg.lu(m), "Lu", ("lu", "p")),
             (tf.linalg.slogdet(m), "LogMatrixDeterminant", ("sign", "log_abs_determinant")),
             (tf.nn.max_pool_with_argmax(tf.ones([1, 2, 2, 1]), [1, 2, 2, 1], [1, 2, 2, 1],
                                         "VALID"), "MaxPoolWithArgmax", ("output", "argmax"))]
    for result, name, fields in cases:
        assert type(result).__name__ == name and result._fields == fields
    with tf.Session() as sess:
        top = sess.run(tf.nn.top_k(m[1], 1))
        assert top.values.tolist() == [5.0] and top.indices.tolist() == [1]


def test_zero_fraction():
    x = np.array([[0.0, 1.0], [0.0, 0.0]])
    got, t = evaluate(tf.nn.zero_fraction, x)
    assert got == pytest.approx(0.75) and t.dtype == tf.float32


def test_xw_plus_b():
    x, w, b = rand(3, 4), rand(4, 2), rand(2)
    check_forward(tf.nn.xw_plus_b, [x, w, b], lambda a, c, d: a @ c + d, rtol=1e-12)


@pytest.mark.parametrize("stride,padding,dilation", [(1, "SAME", 1), (2, "VALID", 1),
                                                     (1, "VALID", 2)])
def test_conv1d(stride, padding, dilation):
    x, w = rand(2, 9, 3), rand(3, 3, 4)

    def fn(a, b):
        return tf.nn.conv1d(a, b, stride=stride, padding=padding, dilations=dilation)

    def ref(a, b):
        return naive_conv2d(a[:, None], b[None], (1, stride), padding, (1, dilation))[:, 0]

    check_forward(fn, [x, w], ref, rtol=1e-10)
    check_grads(fn, [rand(1, 6, 2), rand(2, 2, 3)])


def test_pool2d_aliases():
    assert tf.nn.max_pool2d is tf.nn.max_pool and tf.nn.avg_pool2d is tf.nn.avg_pool
