"""Contraction fusion (``dflab.runtime.remapper``) and its kernels
(``dflab.kernels.contraction_kernels``): which patterns fuse (layers, sums of products), what
the fused node records, and its results against the unfused graph (NumPy's kernels, the
reference, and oneDNN's unfused ones).

Tolerances, relative to the largest magnitude of the NumPy result: 1e-5 for the contraction
(oneDNN sums in another order) with any activation (Elu, Tanh and Sigmoid are oneDNN's
approximations); NaN and infinities exactly where NumPy's kernels put them. The pass runs by
default only where oneDNN does; the fallback (the members' own kernels) runs with
``RewriterConfig.ON`` and oneDNN off, everywhere, and equals the unfused graph to the bit.
"""

from __future__ import annotations

import numpy as np
import pytest

import dflab as tf
from dflab.kernels import onednn
from dflab.runtime.remapper import fuse_contractions

HAVE_LIBRARY = onednn.library() is not None
needs_library = pytest.mark.skipif(not HAVE_LIBRARY, reason=onednn.status())
FUSED = ("_FusedMatMul", "_FusedConv2D", "_FusedMatMulSum")
ON, OFF, DEFAULT = tf.RewriterConfig.ON, tf.RewriterConfig.OFF, tf.RewriterConfig.DEFAULT


def _config(mode=DEFAULT, **dflab):
    return tf.ConfigProto(graph_options=tf.GraphOptions(
        rewrite_options=tf.RewriterConfig(remapping=mode)), dflab=dflab)


def _run(build, feeds_fn, mode=DEFAULT, **dflab):
    """``build()`` -> (fetches, placeholders) in a new graph, run once traced: (values,
    partition graph nodes, {node name: kernel type from the trace label})."""
    g = tf.Graph()
    with g.as_default():
        fetches, phs = build()
        init = tf.global_variables_initializer()
    with tf.Session(graph=g, config=_config(mode, **dflab)) as sess:
        sess.run(init)
        md = tf.RunMetadata()
        vals = sess.run(fetches, dict(zip(phs, feeds_fn())),
                        options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE,
                                              output_partition_graphs=True),
                        run_metadata=md)
    nodes = [n for pg in md.partition_graphs for n in pg.node]
    kernels = {ns.node_name: ns.timeline_label.split(" = ", 1)[1].split("(", 1)[0]
               for dev in md.step_stats.dev_stats for ns in dev.node_stats}
    return vals, nodes, kernels


def _fused(nodes):
    return {n.name: n for n in nodes if n.op in FUSED}


def _close(got, want, tol=1e-5):
    for g, w in zip(got, want):
        scale = max(1.0, float(np.max(np.abs(w)))) if np.size(w) else 1.0
        np.testing.assert_allclose(g, w, rtol=0, atol=tol * scale)


def _rng(seed=0):
    return np.random.default_rng(seed)


ACTIVATIONS = {
    None: lambda y: y,
    "Relu": tf.nn.relu,
    "Relu6": tf.nn.relu6,
    "LeakyRelu": lambda y: tf.nn.leaky_relu(y, alpha=0.3),
    "Elu": tf.nn.elu,
    "Tanh": tf.tanh,
    "Sigmoid": tf.sigmoid,
}


def _dense(act, ta=False, tb=False, bias_add=True, m=64, k=300, n=200, grads=True):
    def build():
        rng = _rng(1)
        x = tf.placeholder(tf.float32, [k, m] if ta else [m, k], name="x")
        w = tf.Variable(rng.standard_normal((n, k) if tb else (k, n)).astype(np.float32) * .1)
        b = tf.Variable(rng.standard_normal(n).astype(np.float32))
        y = tf.matmul(x, w, transpose_a=ta, transpose_b=tb, name="dense")
        y = tf.nn.bias_add(y, b, name="plus") if bias_add else tf.add(b, y, name="plus")
        y = ACTIVATIONS[act](y)
        return [y, tf.gradients(tf.reduce_sum(y * y), [w, b]) if grads else []], [x]

    def feeds():
        return [_rng(2).standard_normal((k, m) if ta else (m, k)).astype(np.float32)]

    return build, feeds


def _conv(act, fmt="NHWC", strides=(1, 1), padding="SAME", bias_add=True):
    c_in, c_out, hw = 3, 16, 12

    def build():
        rng = _rng(3)
        shape = [4, hw, hw, c_in] if fmt == "NHWC" else [4, c_in, hw, hw]
        x = tf.placeholder(tf.float32, shape, name="x")
        f = tf.Variable(rng.standard_normal((3, 3, c_in, c_out)).astype(np.float32) * .2)
        b = tf.Variable(rng.standard_normal(c_out).astype(np.float32))
        s = [1, *strides, 1] if fmt == "NHWC" else [1, 1, *strides]
        y = tf.nn.conv2d(x, f, s, padding, data_format=fmt, name="conv")
        y = tf.nn.bias_add(y, b, data_format=fmt, name="plus") if bias_add else y + b
        y = ACTIVATIONS[act](y)
        return [y, tf.gradients(tf.reduce_sum(y * y), [f, b])], [x]

    def feeds():
        shape = (4, hw, hw, c_in) if fmt == "NHWC" else (4, c_in, hw, hw)
        return [_rng(4).standard_normal(shape).astype(np.float32)]

    return build, feeds


def _flat(vals):
    out = []
    for v in vals:
        out.extend(_flat(v) if isinstance(v, list) else [v])
    return out


# --- the pass ---------------------------------------------------------------------------------
@needs_library
@pytest.mark.parametrize("act", list(ACTIVATIONS))
@pytest.mark.parametrize("grads", [True, False])
def test_dense_layers_fuse_and_match_numpy_and_the_unfused_library(act, grads):
    build, feeds = _dense(act, grads=grads)
    fused, nodes, kernels = _run(build, feeds)
    numpy_vals, numpy_nodes, _ = _run(build, feeds, onednn=False)
    unfused, _, _ = _run(build, feeds, OFF)
    # LeakyRelu's gradient reads the sum, which then stays computed: the activation apart.
    joins = act is not None and not (act == "LeakyRelu" and grads)
    last = act if joins else "plus"
    [node] = _fused(nodes).values()
    assert node.op == "_FusedMatMul" and node.name == last
    assert node.attr["fused_types"] == ["MatMul", "BiasAdd"] + ([act] if joins else [])
    assert kernels[last] == "_MklFusedMatMul"
    assert not _fused(numpy_nodes)  # without oneDNN the default leaves the graph as it is
    _close(_flat(fused), _flat(numpy_vals))
    _close(_flat(fused), _flat(unfused))


@needs_library
@pytest.mark.parametrize("ta,tb", [(True, False), (False, True), (True, True)])
def test_transposed_operands_and_an_add_of_a_vector_fuse(ta, tb):
    build, feeds = _dense("Relu", ta, tb, bias_add=False)
    fused, nodes, kernels = _run(build, feeds)
    numpy_vals, _, _ = _run(build, feeds, onednn=False)
    [node] = _fused(nodes).values()
    assert node.attr["fused_types"] == ["MatMul", "AddV2", "Relu"]
    assert node.attr["transpose_a"] == ta and node.attr["transpose_b"] == tb
    assert kernels["Relu"] == "_MklFusedMatMul"
    _close(_flat(fused), _flat(numpy_vals))


@needs_library
@pytest.mark.parametrize("act", list(ACTIVATIONS))
@pytest.mark.parametrize("fmt,strides,padding", [("NHWC", (1, 1), "SAME"),
                                                 ("NHWC", (2, 2), "VALID"),
                                                 ("NCHW", (1, 1), "SAME")])
def test_convolutions_fuse_and_match_numpy(act, fmt, strides, padding):
    build, feeds = _conv(act, fmt, strides, padding)
    fused, nodes, kernels = _run(build, feeds)
    numpy_vals, _, _ = _run(build, feeds, onednn=False)
    [node] = _fused(nodes).values()
    assert node.op == "_FusedConv2D"
    assert node.attr["data_format"] == fmt and node.attr["padding"] == padding
    assert kernels[node.name] == "_MklFusedConv2D"
    _close(_flat(fused), _flat(numpy_vals))


def test_the_fallback_computes_what_the_unfused_kernels_do_to_the_bit():
    for build, feeds in (_dense("Relu"), _dense("Tanh", bias_add=False), _conv("Elu"),
                         _conv("Relu6", "NCHW"), _dense("LeakyRelu", m=2, k=3, n=4),
                         _unrolled(steps=3, batch=4, n_in=5, n_out=6), _unrolled(steps=4)):
        fused, nodes, kernels = _run(build, feeds, ON, onednn=False)
        plain, _, _ = _run(build, feeds, OFF, onednn=False)
        [node] = _fused(nodes).values()
        assert kernels[node.name] == node.op  # no library label: the members' kernels ran
        for a, b in zip(_flat(fused), _flat(plain)):
            np.testing.assert_array_equal(a, b)


@needs_library
@pytest.mark.parametrize("case", ["layer", "sum of products"])
def test_small_products_run_the_members_and_keep_no_library_label(case):
    build, feeds = _dense("Relu", m=2, k=3, n=4) if case == "layer" else \
        _unrolled(steps=3, batch=4, n_in=5, n_out=6)
    fused, nodes, kernels = _run(build, feeds)
    plain, _, _ = _run(build, feeds, OFF)
    [node] = _fused(nodes).values()
    assert kernels[node.name] == node.op  # no product took oneDNN
    for a, b in zip(_flat(fused), _flat(plain)):
        np.testing.assert_array_equal(a, b)


def _pattern_graph():
    """A few contractions, each with something that keeps part of it out of a fusion."""
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [8, 16], name="x")
        w = tf.constant(np.ones((16, 16), np.float32))
        b = tf.constant(np.ones(16, np.float32))
        shared = tf.matmul(x, w, name="shared")  # read twice: no fusion
        s1 = tf.nn.bias_add(shared, b, name="s1")
        s2 = tf.nn.relu(shared, name="s2")
        leaky_in = tf.nn.bias_add(tf.matmul(x, w, name="mm_l"), b, name="leaky_in")
        leaky = tf.nn.leaky_relu(leaky_in, name="leaky")
        leaky_also = tf.identity(leaky_in, name="leaky_also")  # the sum is read again
        fetched = tf.matmul(x, w, name="fetched")
        fetched_sum = tf.nn.relu(tf.nn.bias_add(fetched, b), name="fetched_sum")
        row = tf.matmul(x, w, name="mm_row") + tf.ones([8, 1])  # not a vector along channels
        twice = tf.matmul(x, w, name="mm_twice")
        twice = tf.add(twice, twice, name="twice")
        d64 = tf.nn.relu(tf.matmul(tf.cast(x, tf.float64), tf.cast(w, tf.float64)) +
                         tf.cast(b, tf.float64), name="d64")
        ctl = tf.matmul(x, w, name="mm_ctl")
        ctl_sum = tf.nn.bias_add(ctl, b, name="ctl_sum")
        with tf.control_dependencies([ctl_sum]):
            after = tf.identity(x, name="after")
        conv_in = tf.placeholder(tf.float32, [1, 4, 4, 16], name="img")
        nchw_add = tf.nn.conv2d(tf.transpose(conv_in, [0, 3, 1, 2]), tf.ones([1, 1, 16, 4]),
                                [1, 1, 1, 1], "SAME", data_format="NCHW", name="conv_nchw")
        nchw_add = tf.add(nchw_add, tf.ones([4]), name="nchw_add")  # broadcasts along W
    fetches = [s1, s2, leaky, leaky_also, fetched, fetched_sum, row, twice, d64, after,
               nchw_add]
    return g, fetches, x, conv_in


def test_what_is_needed_elsewhere_is_never_fused():
    g, fetches, x, img = _pattern_graph()
    with tf.Session(graph=g, config=_config(ON)) as sess:
        md = tf.RunMetadata()
        vals = sess.run(fetches, {x: np.ones((8, 16), np.float32),
                                  img: np.ones((1, 4, 4, 16), np.float32)},
                        options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE,
                                              output_partition_graphs=True), run_metadata=md)
    fused = _fused([n for pg in md.partition_graphs for n in pg.node])
    # Only the LeakyRelu's contraction and bias (its sum is read again: no activation) fuse.
    assert {n: f.attr["fused_ops"] for n, f in fused.items()} == {
        "leaky_in": ["mm_l", "leaky_in"]}
    with tf.Session(graph=g, config=_config(OFF)) as sess:
        plain = sess.run(fetches, {x: np.ones((8, 16), np.float32),
                                   img: np.ones((1, 4, 4, 16), np.float32)})
    for a, b in zip(vals, plain):
        np.testing.assert_array_equal(a, b)


def test_the_fused_node_keeps_the_members_controls_inputs_and_position():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [2, 3], name="x")
        w = tf.constant(np.ones((3, 4), np.float32), name="w")
        gate = tf.no_op(name="gate")
        y = tf.matmul(x, w, name="mm")
        with tf.control_dependencies([gate]):
            y = tf.nn.bias_add(y, tf.constant(np.arange(4, dtype=np.float32)), name="y")
        z = tf.nn.relu(y, name="z")
    ops = g.get_operations()
    nodes, made = fuse_contractions(ops, "/cpu:0", keep=[z])
    [node] = made
    assert node.name == "z" and node.type == "_FusedMatMul"
    assert [t.name for t in node.inputs] == ["x:0", "w:0", "Const:0"]
    assert [c.name for c in node.control_inputs] == ["gate"]
    assert node.outputs[0] is z and node.fused_ops == [g.get_operation_by_name(n)
                                                        for n in ("mm", "y", "z")]
    names = [n.name for n in nodes]
    assert "mm" not in names and "y" not in names and names.index("z") > names.index("gate")
    # A fetched intermediate value stays computed: a fused node ends there, or none is made.
    _, made = fuse_contractions(ops, "/cpu:0", keep=[y])
    assert [m.attrs["fused_ops"] for m in made] == [["mm", "y"]]
    _, made = fuse_contractions(ops, "/cpu:0", keep=[g.get_tensor_by_name("mm:0")])
    assert made == []


def test_off_never_fuses_and_onednn_off_keeps_the_default_graph():
    build, feeds = _dense("Relu")
    for mode, opts in ((OFF, {}), (DEFAULT, {"onednn": False})):
        _, nodes, kernels = _run(build, feeds, mode, **opts)
        assert not _fused(nodes)
        assert kernels["Relu"] == "Relu"


@needs_library
def test_products_left_to_blas_fuse_only_convolutions():
    build, feeds = _dense("Relu")
    _, nodes, _ = _run(build, feeds, onednn_products=False)
    assert not _fused(nodes)
    build, feeds = _conv("Relu")
    _, nodes, _ = _run(build, feeds, onednn_products=False)
    assert [n.op for n in _fused(nodes).values()] == ["_FusedConv2D"]


@needs_library
def test_a_training_run_equals_the_unfused_one():
    """A small CNN trained ten steps with Adam, fused and not: the same weights."""
    def train(mode):
        g = tf.Graph()
        with g.as_default():
            tf.set_random_seed(5)
            x = tf.placeholder(tf.float32, [16, 8, 8, 1])
            y = tf.placeholder(tf.int32, [16])
            h = tf.layers.conv2d(x, 8, 3, padding="same", activation=tf.nn.relu)
            h = tf.layers.dense(tf.reshape(h, [16, 8 * 8 * 8]), 32, activation=tf.nn.relu)
            logits = tf.layers.dense(h, 10)
            loss = tf.losses.sparse_softmax_cross_entropy(y, logits)
            step = tf.train.AdamOptimizer(1e-2).minimize(loss)
            init = tf.global_variables_initializer()
        rng = _rng(9)
        xs = rng.standard_normal((16, 8, 8, 1)).astype(np.float32)
        ys = rng.integers(0, 10, 16).astype(np.int32)
        with tf.Session(graph=g, config=_config(mode)) as sess:
            sess.run(init)
            for _ in range(10):
                sess.run(step, {x: xs, y: ys})
            return sess.run(g.get_collection(tf.GraphKeys.TRAINABLE_VARIABLES))

    for a, b in zip(train(DEFAULT), train(OFF)):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-5 * max(1.0, np.abs(b).max()))


def test_errors_name_the_member_that_failed():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, None], name="x")
        w = tf.constant(np.ones((3, 4), np.float32))
        y = tf.nn.relu(tf.nn.bias_add(tf.matmul(x, w, name="product"), tf.ones([4])))
    with tf.Session(graph=g, config=_config(ON)) as sess:
        with pytest.raises(tf.errors.InvalidArgumentError) as e:
            sess.run(y, {x: np.ones((2, 5), np.float32)})
    assert e.value.op is not None and e.value.op.name == "product"
    assert "test_contraction_fusion.py" in str(e.value)


def test_fused_nodes_inside_loops_and_on_each_device_of_a_partitioned_plan():
    rng = _rng(11)
    w_np = rng.standard_normal((32, 32)).astype(np.float32) * .2
    b_np = rng.standard_normal(32).astype(np.float32)
    x_np = rng.standard_normal((4, 32)).astype(np.float32)

    def build():
        x = tf.placeholder(tf.float32, [4, 32], name="x")
        w, b = tf.constant(w_np), tf.constant(b_np)
        with tf.device("/cpu:1"):
            far = tf.nn.relu(tf.nn.bias_add(tf.matmul(x, w), b), name="far")

        def body(i, h):
            return i + 1, tf.tanh(tf.matmul(h, w) + b, name="layer")

        _, looped = tf.while_loop(lambda i, h: i < 3, body, [tf.constant(0), far])
        return [far, looped, tf.gradients(tf.reduce_sum(looped), x)], [x]

    def run(mode):
        g = tf.Graph()
        with g.as_default():
            fetches, (x,) = build()
        config = _config(mode)
        config.device_count["CPU"] = 2
        with tf.Session(graph=g, config=config) as sess:
            md = tf.RunMetadata()
            vals = sess.run(fetches, {x: x_np},
                            options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE,
                                                  output_partition_graphs=True),
                            run_metadata=md)
        return vals, md

    fused_vals, md = run(ON)
    plain_vals, _ = run(OFF)
    by_device = {}
    for pg in md.partition_graphs:
        for n in pg.node:
            if n.op in FUSED:
                by_device.setdefault(n.device.rsplit(":", 1)[-1], []).append(n.name)
    assert by_device.get("1") == ["far"]
    assert any("layer" in name for name in by_device.get("0", []))
    for a, b in zip(_flat(fused_vals), _flat(plain_vals)):
        np.testing.assert_array_equal(a, b)


@needs_library
@pytest.mark.parametrize("act", [a for a in ACTIVATIONS if a])
@pytest.mark.parametrize("layer", ["dense", "conv"])
def test_nan_and_infinities_come_out_as_numpys(act, layer):
    """oneDNN's own Relu turns a NaN into 0: the fused kernel keeps TF's and NumPy's NaN."""
    rng = _rng(13)
    if layer == "dense":
        x_np = rng.standard_normal((64, 300)).astype(np.float32)
        x_np[0, 0], x_np[1, :], x_np[2, 5] = np.nan, np.inf, -np.inf
        w_np = np.abs(rng.standard_normal((300, 200))).astype(np.float32)
    else:
        x_np = rng.standard_normal((2, 9, 9, 3)).astype(np.float32)
        x_np[0, 4, 4, 0], x_np[1, 0, :, :] = np.nan, -np.inf
        w_np = np.abs(rng.standard_normal((3, 3, 3, 8))).astype(np.float32)

    b_np = rng.standard_normal(w_np.shape[-1]).astype(np.float32)

    def build():
        x = tf.placeholder(tf.float32, x_np.shape)
        w, b = tf.constant(w_np), tf.constant(b_np)
        y = tf.matmul(x, w) if layer == "dense" else tf.nn.conv2d(x, w, [1, 1, 1, 1], "SAME")
        return [ACTIVATIONS[act](tf.nn.bias_add(y, b))], [x]

    fused, nodes, kernels = _run(build, lambda: [x_np])
    plain, _, _ = _run(build, lambda: [x_np], onednn=False)
    [node] = _fused(nodes).values()
    assert kernels[node.name].startswith("_MklFused")
    got, want = fused[0], plain[0]
    assert np.isnan(want).any()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    finite = np.isfinite(want)
    _close([got[finite]], [want[finite]])


# --- sums of products ---------------------------------------------------------------------------
def _unrolled(steps=6, batch=20, n_in=400, n_out=800, seed=21):
    """An unrolled RNN's weight gradient: one MatMul per step, summed by an AddN."""
    rng = _rng(seed)
    xs_np = rng.standard_normal((steps, batch, n_in)).astype(np.float32)
    w_np = (rng.standard_normal((n_in, n_out)) / 20).astype(np.float32)

    def build():
        xs = tf.placeholder(tf.float32, xs_np.shape, name="xs")
        w = tf.Variable(w_np, name="w")
        loss = tf.add_n([tf.reduce_sum(tf.tanh(tf.matmul(xs[t], w))) for t in range(steps)])
        return [loss, tf.gradients(loss, [w, xs])], [xs]

    return build, lambda: [xs_np]


@needs_library
def test_an_unrolled_weight_gradient_is_one_sum_of_products():
    build, feeds = _unrolled()
    fused, nodes, kernels = _run(build, feeds)
    plain, _, plain_kernels = _run(build, feeds, OFF)
    numpy_vals, _, _ = _run(build, feeds, onednn=False)
    [node] = _fused(nodes).values()
    assert node.attr["fused_types"] == ["MatMul"] * 6 + ["AddN"]
    assert node.attr["transpose_a"] == [True] * 6 and node.attr["N"] == 6
    assert kernels[node.name] == "_MklFusedMatMulSum"
    assert plain_kernels[node.name] == "AddN"
    _close(_flat(fused), _flat(numpy_vals))
    _close(_flat(fused), _flat(plain))


def test_only_sums_of_products_read_by_the_sum_alone_fuse():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [8, 8], name="x")
        w = tf.constant(np.ones((8, 8), np.float32))
        p1, p2, p3 = (tf.matmul(x, w, name=f"p{k}") for k in range(1, 4))
        mixed = tf.add_n([p1, x], name="mixed")  # not every term a product
        shared = tf.add_n([p2, tf.matmul(w, x, name="p4")], name="shared")
        also = tf.identity(p2, name="also")  # p2 is read twice
        twice = tf.add_n([p3, p3], name="twice")  # one product, twice
        good = tf.add_n([tf.matmul(x, w, name="q1"), tf.matmul(w, x, transpose_b=True,
                                                              name="q2")], name="good")
        dbl = tf.add_n([tf.matmul(tf.cast(x, tf.float64), tf.cast(w, tf.float64)),
                        tf.matmul(tf.cast(w, tf.float64), tf.cast(x, tf.float64))], name="dbl")
    fetches = [mixed, shared, also, twice, good, dbl]
    ops = g.get_operations()
    _, made = fuse_contractions(ops, "/cpu:0", keep=fetches)
    assert [(m.name, m.attrs["fused_ops"]) for m in made] == [("good", ["q1", "q2", "good"])]
    assert made[0].attrs["transpose_b"] == [False, True]
    _, made = fuse_contractions(ops, "/cpu:0", keep=fetches, contractions=("Conv2D",))
    assert made == []  # products left to BLAS: no sums either
    xv = _rng(2).standard_normal((8, 8)).astype(np.float32)
    with tf.Session(graph=g, config=_config(ON)) as sess:
        got = sess.run(fetches, {x: xv})
    with tf.Session(graph=g, config=_config(OFF)) as sess:
        want = sess.run(fetches, {x: xv})
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
