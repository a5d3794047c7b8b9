"""The GPU's one-launch kernels (``dflab.kernels.cuda``: nn ops, pooling, optimizer updates) on
the strict stand-in, where each runs as its NumPy reference: the same numbers as the CPU's
kernels, one launch per op, and TF's GPU behaviour where it differs from the CPU's."""

import numpy as np
import pytest

import dflab as tf
from dflab.runtime.config import ConfigProto, GraphOptions, RewriterConfig

RNG = np.random.default_rng(11)


def _config():
    return ConfigProto(graph_options=GraphOptions(rewrite_options=RewriterConfig(
        remapping=RewriterConfig.OFF)), dflab={"gpu_allow_tf32": False, "gpu_step_replay": False})


def _on(device, build):
    g = tf.Graph()
    with g.as_default(), tf.device(device):
        fetches = build()
    return g, fetches


def _compare(build, counts, rtol=1e-5, feeds=None):
    """Run ``build()``'s fetches on the CPU and on the stand-in GPU; returns the GPU's launch
    counts of the second run."""
    g, fetches = _on("/cpu:0", build)
    with tf.Session(graph=g) as s:
        want = s.run(fetches)
    g, fetches = _on("/gpu:0", build)
    with tf.Session(graph=g, config=_config()) as s:
        s.run(fetches)
        counts.reset()
        got = s.run(fetches)
    for a, b in zip(got, want):
        finite = np.abs(b[np.isfinite(b)])
        scale = finite.max() if finite.size else 1.0
        np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol * max(scale, 1e-30))
    return counts.by_name


def test_relu_gradient_is_one_launch(strict_gpu, counts):
    x = RNG.normal(size=(33, 17)).astype(np.float32)

    def build():
        t = tf.constant(x)
        y = tf.nn.relu(t)
        return [tf.gradients(tf.reduce_sum(y * y), t)[0]]

    launched = _compare(build, counts)
    assert launched["dflab_relu_grad_float32"] == 1


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_and_cross_entropies_are_one_launch_each(strict_gpu, counts, dtype):
    logits = (RNG.normal(size=(6, 300)) * 4).astype(dtype)
    labels = RNG.dirichlet(np.ones(300), 6).astype(dtype)
    labels[0, :5] = 0
    ids = RNG.integers(0, 300, 6)

    def build():
        t = tf.constant(logits)
        dense = tf.nn.softmax_cross_entropy_with_logits_v2(labels=tf.constant(labels), logits=t)
        sparse = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.constant(ids),
                                                                logits=t)
        loss = tf.reduce_sum(dense) + tf.reduce_sum(sparse)
        return [tf.nn.softmax(t), dense, sparse, tf.gradients(loss, t)[0]]

    launched = _compare(build, counts, rtol=1e-5 if dtype == np.float32 else 1e-12)
    name = np.dtype(dtype).name
    assert launched[f"dflab_softmax_{name}"] == 1
    assert launched[f"dflab_softmax_xent_{name}"] == 1
    assert launched[f"dflab_sparse_xent_int64_{name}"] == 1


def test_an_out_of_range_label_is_nan_on_the_gpu_as_in_tf(strict_gpu):
    labels = tf.placeholder(tf.int32, [3])
    with tf.device("/gpu:0"):
        loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                              logits=tf.zeros([3, 4]))
        grad = tf.gradients(tf.reduce_sum(loss), loss.op.inputs[0])[0]
    with tf.Session(config=_config()) as s:
        got, g = s.run([loss, grad], {labels: [1, 4, -1]})
    np.testing.assert_allclose(got[0], np.log(4.0), rtol=1e-6)
    assert np.isnan(got[1:]).all() and np.isnan(g[1:]).all() and not np.isnan(g[0]).any()


@pytest.mark.parametrize("shape,launches", [((7, 5), 1), ((4, 6, 6, 9), 1), ((2, 3, 1030), 1),
                                            ((64, 28, 28, 32), 2), ((9000, 70), 2)])
def test_bias_add_gradient_is_one_launch_or_two_over_many_rows(strict_gpu, counts, shape,
                                                                launches):
    """Many rows and few channels: chunks' sums, then their sum, so that the GPU is filled."""
    x = RNG.normal(size=shape).astype(np.float32)

    def build():
        t = tf.constant(x)
        b = tf.constant(np.zeros(shape[-1], np.float32))
        y = tf.nn.bias_add(t, b)
        return [tf.gradients(tf.reduce_sum(y * y), b)[0]]

    launched = _compare(build, counts, rtol=1e-4)
    assert launched["dflab_bias_add_grad_float32"] == launches


POOLS = [
    # (input NHWC, ksize, strides, padding)
    ((2, 8, 8, 3), 2, 2, "SAME"),
    ((2, 7, 9, 4), 2, 2, "SAME"),
    ((3, 9, 9, 2), 3, 2, "SAME"),
    ((1, 10, 7, 5), 3, 2, "VALID"),
    ((2, 6, 6, 1), 3, 1, "SAME"),
]


@pytest.mark.parametrize("case", range(len(POOLS)))
def test_pools_and_their_gradients_are_one_launch_each(strict_gpu, counts, case):
    shape, k, s, padding = POOLS[case]
    x = RNG.normal(size=shape).astype(np.float32)
    x[:, :, 1::3] = x[:, :, 0::3][:, :, :x[:, :, 1::3].shape[2]]  # ties between neighbours:
    x[:, 2::3] = x[:, 1::3][:, :x[:, 2::3].shape[1]]  # the first maximum takes the gradient

    def build():
        t = tf.constant(x)
        mx = tf.nn.max_pool(t, [1, k, k, 1], [1, s, s, 1], padding)
        av = tf.nn.avg_pool(t, [1, k, k, 1], [1, s, s, 1], padding)
        loss = tf.reduce_sum(mx * mx) + tf.reduce_sum(av * av * av)
        return [mx, av, tf.gradients(loss, t)[0]]

    launched = _compare(build, counts)
    for name in ("max_pool", "avg_pool", "max_pool_grad", "avg_pool_grad"):
        assert launched[f"dflab_{name}_float32"] == 1, name


def test_the_max_pool_gradient_goes_to_a_nan_as_on_the_cpu(strict_gpu, counts):
    x = RNG.normal(size=(1, 4, 4, 2)).astype(np.float32)
    x[0, 1, 1, 0] = np.nan
    x[0, 0, 0, 1] = x[0, 0, 1, 1] = x[0, 1, 0, 1] = 5.0  # a three-way tie

    def build():
        t = tf.constant(x)
        return [tf.gradients(tf.reduce_sum(tf.nn.max_pool(t, [1, 2, 2, 1], [1, 2, 2, 1],
                                                          "VALID")), t)[0]]

    g, fetches = _on("/gpu:0", build)
    with tf.Session(graph=g, config=_config()) as s:
        (dx,) = s.run(fetches)
    assert dx[0, 1, 1, 0] == 1 and dx[0, 0, 0, 0] == 0
    assert dx[0, 0, 0, 1] == 1 and dx[0, 0, 1, 1] == 0 and dx[0, 1, 0, 1] == 0
    _compare(build, counts)


OPTIMIZERS = {
    "sgd": lambda: tf.train.GradientDescentOptimizer(0.1),
    "momentum": lambda: tf.train.MomentumOptimizer(0.1, 0.9),
    "nesterov": lambda: tf.train.MomentumOptimizer(0.1, 0.9, use_nesterov=True),
    "adagrad": lambda: tf.train.AdagradOptimizer(0.1),
    "rmsprop": lambda: tf.train.RMSPropOptimizer(0.01, momentum=0.5),
    "adam": lambda: tf.train.AdamOptimizer(0.05),
}
OP_OF = {"sgd": "sgd", "momentum": "momentum", "nesterov": "momentum", "adagrad": "adagrad",
         "rmsprop": "rms_prop", "adam": "adam"}


@pytest.mark.parametrize("use_resource", [False, True])
@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_each_dense_update_is_one_launch_per_variable(strict_gpu, counts, name, use_resource):
    w0 = RNG.normal(size=(5, 3)).astype(np.float32)
    b0 = RNG.normal(size=(3,)).astype(np.float32)
    x = RNG.normal(size=(8, 5)).astype(np.float32)

    def train(device):
        g = tf.Graph()
        with g.as_default(), tf.device(device):
            w = tf.Variable(w0, use_resource=use_resource)
            b = tf.Variable(b0, use_resource=use_resource)
            loss = tf.reduce_mean(tf.square(tf.matmul(tf.constant(x), w) + b))
            step = OPTIMIZERS[name]().minimize(loss)
            init = tf.global_variables_initializer()
        config = _config() if device.startswith("/gpu") else None
        with tf.Session(graph=g, config=config) as s:
            s.run(init)
            s.run(step)
            counts.reset()
            s.run(step)
            launched = dict(counts.by_name)
            for _ in range(3):
                s.run(step)
            return s.run([w, b]), launched

    (w_gpu, b_gpu), launched = train("/gpu:0")
    (w_cpu, b_cpu), _ = train("/cpu:0")
    np.testing.assert_allclose(w_gpu, w_cpu, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(b_gpu, b_cpu, rtol=1e-5, atol=1e-6)
    assert launched[f"dflab_apply_{OP_OF[name]}_float32"] == 2  # one per variable


def test_sigmoid_is_one_launch(strict_gpu, counts):
    x = np.concatenate([RNG.normal(size=50) * 30, [0.0, -0.0, np.inf, -np.inf, np.nan]])
    x = x.astype(np.float32)
    launched = _compare(lambda: [tf.sigmoid(tf.constant(x))], counts, rtol=1e-6)
    assert launched["dflab_sigmoid_float32"] == 1 and len(launched) == 1


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sigmoid_and_tanh_gradients_are_one_launch_each(strict_gpu, counts, dtype):
    x = RNG.normal(size=(9, 14)).astype(dtype) * 3
    w = RNG.normal(size=(9, 14)).astype(dtype)

    def build():
        t = tf.constant(x)
        # Fusion is off here (_config), as in a loop's gradient, where each value is kept.
        loss = tf.reduce_sum(tf.sigmoid(t) * w) + tf.reduce_sum(tf.tanh(t) * w)
        return [tf.gradients(loss, t)[0]]

    launched = _compare(build, counts, rtol=1e-6 if dtype == np.float32 else 1e-12)
    name = np.dtype(dtype).name
    assert launched[f"dflab_sigmoid_grad_{name}"] == 1
    assert launched[f"dflab_tanh_grad_{name}"] == 1
    s = 1 / (1 + np.exp(-x))
    want = s * (1 - s) * w + (1 - np.tanh(x) ** 2) * w  # the NumPy reference, besides the CPU's
    g, fetches = _on("/gpu:0", build)
    with tf.Session(graph=g, config=_config()) as sess:
        np.testing.assert_allclose(sess.run(fetches)[0], want, rtol=1e-5)


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_an_optimizers_updates_are_one_launch_for_all_its_variables(strict_gpu, counts, name):
    shapes = [(5, 3), (3,), (3, 4), (4,)]
    inits = [RNG.normal(size=s).astype(np.float32) for s in shapes]
    x = RNG.normal(size=(8, 5)).astype(np.float32)

    def train(device, config):
        g = tf.Graph()
        with g.as_default(), tf.device(device):
            w1, b1, w2, b2 = (tf.Variable(v, use_resource=True) for v in inits)
            h = tf.tanh(tf.matmul(tf.constant(x), w1) + b1)
            loss = tf.reduce_mean(tf.square(tf.matmul(h, w2) + b2))
            step = OPTIMIZERS[name]().minimize(loss)
            init = tf.global_variables_initializer()
        with tf.Session(graph=g, config=config) as s:
            s.run(init)
            s.run(step)
            counts.reset()
            s.run(step)
            launched = dict(counts.by_name)
            plan = next(p for p in s._master._plans.values() if step in p.placement)
            types = [n.op for n in plan.specs[0].graph_def.node] if plan.specs else []
            for _ in range(3):
                s.run(step)
            return s.run([w1, b1, w2, b2]), launched, types

    # The grouping pass runs where fusion does: a GPU's default.
    got, launched, types = train("/gpu:0", tf.ConfigProto(dflab={
        "gpu_allow_tf32": False, "gpu_step_replay": False}))
    want, _, _ = train("/cpu:0", None)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-6)
    assert launched[f"dflab_apply_{OP_OF[name]}_float32_x4"] == 1
    assert types.count("_MultiApply") == 1
    assert not any(t.startswith("ResourceApply") for t in types)


@pytest.mark.parametrize("shape,axes,keep,launches", [
    ((64, 28, 28, 32), [0, 1, 2], False, 2),  # a convolution's bias added with +: chunked
    ((7, 5), [0], True, 1),
    ((4, 6, 6, 9), [0, 1], False, 1),
    ((3, 4, 5), [-3], False, 1),
])
def test_a_sum_over_leading_axes_runs_as_column_sums(strict_gpu, counts, shape, axes, keep,
                                                     launches):
    """CuPy gives each output of a reduction one block: a few channels over many rows would
    leave a GPU idle, so the GPU's Sum runs the column-sum program (chunked over many rows)."""
    x = RNG.normal(size=shape).astype(np.float32)
    launched = _compare(lambda: [tf.reduce_sum(tf.constant(x), axes, keepdims=keep)], counts,
                        rtol=1e-4)
    assert launched["dflab_bias_add_grad_float32"] == launches


def test_other_sums_keep_the_shared_kernel(strict_gpu, counts):
    x = RNG.normal(size=(4, 6, 5)).astype(np.float32)
    launched = _compare(lambda: [tf.reduce_sum(tf.constant(x), [1]),
                                 tf.reduce_sum(tf.constant(x), [0, 2]),
                                 tf.reduce_sum(tf.constant(x.astype(np.int32)), [0])], counts)
    assert "dflab_bias_add_grad_float32" not in launched
