"""Fused batch normalization (``FusedBatchNormV3`` and its gradient op): forward against NumPy in
every layout, TF's outputs (unbiased variance, reserve spaces, exponential averaging), first
and second derivatives against finite differences, graph and eager, the older op names, and
errors."""

import numpy as np
import pytest
from op_test_util import check_forward, check_grads, evaluate

import dflab as tf
from dflab.eager import eager_mode
from dflab.ops.normalization_ops import fused_bn_channel_axis

RNG = np.random.default_rng(7)
LAYOUTS = [("NHWC", (2, 3, 3, 4)), ("NCHW", (2, 4, 3, 3)), ("NDHWC", (2, 2, 3, 2, 3)),
           ("NCDHW", (2, 3, 2, 3, 2))]


def rand(*shape, low=-2.0, high=2.0):
    return RNG.uniform(low, high, size=shape)


def per_channel(v, fmt):
    shape = [1] * len(fmt)
    shape[fused_bn_channel_axis(fmt, len(fmt))] = -1
    return np.reshape(v, shape)


def batch_stats(x, fmt):
    axes = tuple(i for i in range(x.ndim) if i != fused_bn_channel_axis(fmt, x.ndim))
    return x.mean(axis=axes), x.var(axis=axes), x.size // x.shape[
        fused_bn_channel_axis(fmt, x.ndim)]


def normalise(x, mean, var, scale, offset, eps, fmt):
    return (per_channel(scale, fmt) * (x - per_channel(mean, fmt))
            / np.sqrt(per_channel(var, fmt) + eps) + per_channel(offset, fmt))


def channels(fmt, shape):
    return shape[fused_bn_channel_axis(fmt, len(shape))]


@pytest.mark.parametrize("fmt,shape", LAYOUTS)
def test_training_forward_matches_numpy(fmt, shape):
    c = channels(fmt, shape)
    x, scale, offset = rand(*shape), rand(c), rand(c)

    def ref(a, s, o):
        m, v, n = batch_stats(a, fmt)
        return [normalise(a, m, v, s, o, 1e-3, fmt), m, v * n / (n - 1)]

    check_forward(lambda a, s, o: list(tf.nn.fused_batch_norm(
        a, s, o, epsilon=1e-3, data_format=fmt)), [x, scale, offset], ref, rtol=1e-10)


@pytest.mark.parametrize("fmt,shape", LAYOUTS)
def test_inference_forward_matches_numpy(fmt, shape):
    c = channels(fmt, shape)
    x, scale, offset, mean, var = rand(*shape), rand(c), rand(c), rand(c), rand(c, low=0.5)
    check_forward(lambda *a: list(tf.nn.fused_batch_norm(
        *a, epsilon=1e-2, data_format=fmt, is_training=False)), [x, scale, offset, mean, var],
        lambda a, s, o, m, v: [normalise(a, m, v, s, o, 1e-2, fmt), m, v], rtol=1e-10)


def test_one_op_with_tf_outputs_and_reserve_spaces():
    x, scale, offset = rand(2, 3, 3, 4), rand(4), rand(4)
    with tf.Graph().as_default() as g:
        y, _, _ = tf.nn.fused_batch_norm(tf.constant(x), tf.constant(scale),
                                         tf.constant(offset), epsilon=1e-6)
        assert [op.type for op in g.get_operations()].count("FusedBatchNormV3") == 1
        op = y.op
        assert op.type == "FusedBatchNormV3" and len(op.outputs) == 6
        assert op.get_attr("epsilon") == 1e-6 and op.get_attr("is_training") is True
        assert [o.shape.as_list() for o in op.outputs[1:5]] == [[4]] * 4
        with tf.Session() as s:
            got = s.run(op.outputs)
    m, v, _ = batch_stats(x, "NHWC")
    # TF's CPU convention: the batch mean and the biased variance saved for the gradient.
    np.testing.assert_allclose(got[3], m, rtol=1e-12)
    np.testing.assert_allclose(got[4], v, rtol=1e-12)
    assert got[5].shape == (0,)


def test_exponential_average_factor_blends_the_running_statistics():
    x, scale, offset = rand(2, 3, 3, 4), rand(4), rand(4)
    mean, var = rand(4), rand(4, low=0.5)

    def ref(a, s, o, m0, v0):
        m, v, n = batch_stats(a, "NHWC")
        return [normalise(a, m, v, s, o, 1e-3, "NHWC"), 0.75 * m0 + 0.25 * m,
                0.75 * v0 + 0.25 * v * n / (n - 1)]

    check_forward(lambda *a: list(tf.nn.fused_batch_norm(
        *a, epsilon=1e-3, exponential_avg_factor=0.25)), [x, scale, offset, mean, var], ref,
        rtol=1e-10)


def test_float16_input_takes_float32_parameters_and_computes_in_float32():
    x = rand(2, 3, 3, 4).astype(np.float16)
    scale, offset = rand(4).astype(np.float32), rand(4).astype(np.float32)
    (y, m, v), (ty, tm, _) = evaluate(lambda a, s, o: tf.nn.fused_batch_norm(a, s, o), x,
                                      scale, offset)
    assert ty.dtype == tf.float16 and tm.dtype == tf.float32
    assert y.dtype == np.float16 and m.dtype == np.float32
    bm, bv, _ = batch_stats(x.astype(np.float32), "NHWC")
    want = normalise(x.astype(np.float32), bm, bv, scale, offset, 1e-3, "NHWC")
    np.testing.assert_allclose(y.astype(np.float32), want, rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(m, bm, rtol=1e-6)


@pytest.mark.parametrize("fmt,shape", LAYOUTS[:2])
@pytest.mark.parametrize("training", [True, False])
def test_gradients_match_finite_differences(fmt, shape, training):
    c = channels(fmt, shape)
    x, scale, offset = rand(*shape), rand(c), rand(c)
    if training:
        check_grads(lambda a, s, o: tf.nn.fused_batch_norm(a, s, o, data_format=fmt)[0],
                    [x, scale, offset])
    else:
        mean, var = rand(c), rand(c, low=0.5)
        check_grads(lambda a, s, o: tf.nn.fused_batch_norm(
            a, s, o, tf.constant(mean), tf.constant(var), data_format=fmt,
            is_training=False)[0], [x, scale, offset])


@pytest.mark.parametrize("fmt,shape", LAYOUTS[:2])
@pytest.mark.parametrize("training", [True, False])
def test_second_derivatives_match_finite_differences(fmt, shape, training):
    """The gradient op's own gradient, with respect to the input, the upstream gradient and
    the scale, each of its three outputs weighted."""
    c = channels(fmt, shape)
    x, dy, scale, offset = rand(*shape), rand(*shape), rand(c), rand(c)
    mean, var = rand(c), rand(c, low=0.5)

    def first_order(a, g, s):
        stats = {} if training else {"mean": tf.constant(mean), "variance": tf.constant(var)}
        y, _, _ = tf.nn.fused_batch_norm(a, s, tf.constant(offset), data_format=fmt,
                                         is_training=training, **stats)
        grads = tf.gradients(y, [a, s, y.op.inputs[2]], grad_ys=g)
        assert grads[0].op.type == "FusedBatchNormGradV3"
        return grads

    check_grads(first_order, [x, dy, scale], rtol=2e-4, atol=1e-5)


def test_gradients_into_the_statistics_outputs_are_ignored_as_in_tf():
    x, scale, offset = rand(2, 3, 3, 4), rand(4), rand(4)
    with tf.Graph().as_default():
        xt = tf.constant(x)
        y, m, v = tf.nn.fused_batch_norm(xt, tf.constant(scale), tf.constant(offset))
        with_stats = tf.gradients(tf.reduce_sum(y * y) + tf.reduce_sum(m) * 3, xt)[0]
        alone = tf.gradients(tf.reduce_sum(y * y), xt)[0]
        with tf.Session() as s:
            a, b = s.run([with_stats, alone])
    np.testing.assert_array_equal(a, b)


def test_eager_and_tape_agree_with_the_graph_to_second_order():
    x, scale, offset = (rand(2, 3, 3, 4).astype(np.float32), rand(4).astype(np.float32),
                        rand(4).astype(np.float32))

    def graph_values():
        with tf.Graph().as_default():
            xt, st = tf.constant(x), tf.constant(scale)
            y, m, v = tf.nn.fused_batch_norm(xt, st, tf.constant(offset))
            dx, ds = tf.gradients(tf.reduce_sum(y * y * y), [xt, st])
            ddx, dds = tf.gradients(tf.reduce_sum(dx * dx), [xt, st])
            with tf.Session() as s:
                return s.run([y, m, v, dx, ds, ddx, dds])

    want = graph_values()
    with eager_mode():
        xt, st = tf.constant(x), tf.constant(scale)
        with tf.GradientTape(persistent=True) as outer:
            outer.watch([xt, st])
            with tf.GradientTape() as inner:
                inner.watch([xt, st])
                y, m, v = tf.nn.fused_batch_norm(xt, st, tf.constant(offset))
                loss = tf.reduce_sum(y * y * y)
            dx, ds = inner.gradient(loss, [xt, st])
            second = tf.reduce_sum(dx * dx)
        ddx, dds = outer.gradient(second, [xt, st])
        got = [t.numpy() for t in (y, m, v, dx, ds, ddx, dds)]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=1e-4)


@pytest.mark.parametrize("op_type,outputs", [("FusedBatchNorm", 5), ("FusedBatchNormV2", 5)])
def test_older_op_names_of_imported_graphs_compute_the_same(op_type, outputs):
    """Nodes as older TFs wrote them: no V3 attributes (TF's defaults apply), five outputs."""
    x, scale, offset = rand(2, 3, 3, 4), rand(4), rand(4)
    with tf.Graph().as_default():
        args = [tf.constant(a) for a in (x, scale, offset)] + [tf.constant([], tf.float64)] * 2
        op = tf.get_default_graph().create_op(op_type, args, attrs={"epsilon": 1e-3})
        assert len(op.outputs) == outputs
        dx = tf.gradients(tf.reduce_sum(op.outputs[0] ** 2), args[0])[0]
        assert dx.op.type == op_type.replace("FusedBatchNorm", "FusedBatchNormGrad")
        y3, _, _ = tf.nn.fused_batch_norm(*args[:3], epsilon=1e-3)
        dx3 = tf.gradients(tf.reduce_sum(y3 ** 2), args[0])[0]
        with tf.Session() as s:
            a, b, c, d = s.run([op.outputs[0], y3, dx, dx3])
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(c, d)


def test_build_time_errors_name_the_problem():
    with tf.Graph().as_default():
        x = tf.zeros([2, 3, 3, 4])
        with pytest.raises(ValueError, match="scale must be a vector of the 4 channels"):
            tf.nn.fused_batch_norm(x, tf.ones([3]), tf.zeros([4]))
        with pytest.raises(ValueError, match="must be 4-dimensional"):
            tf.nn.fused_batch_norm(tf.zeros([2, 4]), tf.ones([4]), tf.zeros([4]))
        with pytest.raises(ValueError, match="invalid data_format"):
            tf.nn.fused_batch_norm(x, tf.ones([4]), tf.zeros([4]), data_format="HWNC")
        with pytest.raises(ValueError, match="must be a 1D tensor when is_training is False"):
            tf.nn.fused_batch_norm(x, tf.ones([4]), tf.zeros([4]), is_training=False)
        with pytest.raises(TypeError, match="int32 not in list of allowed values"):
            tf.nn.fused_batch_norm(tf.zeros([2, 3, 3, 4], tf.int32), tf.ones([4]),
                                   tf.zeros([4]))
        with pytest.raises(TypeError, match="expected float32 or the input's float32"):
            tf.nn.fused_batch_norm(x, tf.ones([4], tf.float64), tf.zeros([4], tf.float64))


def test_run_time_shape_errors_are_invalid_argument():
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, None, None, None])
        s = tf.placeholder(tf.float32, [None])
        y, _, _ = tf.nn.fused_batch_norm(x, s, s)
        with tf.Session() as sess:
            with pytest.raises(tf.errors.InvalidArgumentError,
                               match="scale must be a vector of the input's 4 channels"):
                sess.run(y, {x: np.zeros((2, 3, 3, 4)), s: np.ones(3)})


def test_a_graph_def_round_trip_keeps_the_attributes_and_the_gradient():
    x = rand(2, 3, 3, 4)
    with tf.Graph().as_default() as g:
        xt = tf.placeholder(tf.float64, x.shape, name="x")
        y, _, _ = tf.nn.fused_batch_norm(xt, tf.constant(rand(4)), tf.constant(rand(4)),
                                         epsilon=0.25, data_format="NHWC", name="bn")
        tf.identity(tf.gradients(tf.reduce_sum(y * y * y), xt)[0], name="dx")
        text = g.as_graph_def().SerializeToString()
        with tf.Session() as s:
            want = s.run(["bn:0", "dx:0"], {xt: x})
    graph_def = tf.GraphDef()
    graph_def.ParseFromString(text)
    with tf.Graph().as_default() as g2:
        tf.import_graph_def(graph_def, name="")
        op = g2.get_operation_by_name("bn")
        assert op.get_attr("epsilon") == 0.25 and op.get_attr("is_training") is True
        with tf.Session() as s:
            got = s.run(["bn:0", "dx:0"], {"x:0": x})
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
