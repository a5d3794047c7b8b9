"""Variables shared by name, executing eagerly: ``tf.layers`` objects own their variables
(eagerly and in traced functions), ``variable_scope`` names eager variables, ``get_variable``
keeps nothing outside an ``EagerVariableStore`` and reuses everything inside one (TF 1.x's
rules, checked against ``tensorflow.compat.v1``'s ``variable_scope`` module)."""

from __future__ import annotations

import numpy as np
import pytest

import dflab as tf
from dflab.eager import eager_mode
from dflab.ops.variable_scope import _VariableStore

RNG = np.random.default_rng(7)


@pytest.fixture
def eager():
    with eager_mode():
        yield


def _batch(rows=4, cols=3):
    return tf.constant(RNG.standard_normal((rows, cols)).astype(np.float32))


def test_a_dense_layer_makes_its_variables_once_and_trains(eager):
    x, y = _batch(), tf.constant(RNG.standard_normal((4, 2)).astype(np.float32))
    dense = tf.layers.Dense(2, activation=tf.nn.relu)
    first = dense(x).numpy()
    np.testing.assert_array_equal(dense(x).numpy(), first)
    assert [v.name for v in dense.variables] == ["dense/kernel:0", "dense/bias:0"]
    assert dense.kernel is dense.variables[0] and dense.bias is dense.variables[1]
    assert len(dense.trainable_variables) == 2 and dense.non_trainable_variables == []
    want = np.maximum(x.numpy() @ dense.kernel.numpy() + dense.bias.numpy(), 0)
    np.testing.assert_allclose(first, want, rtol=1e-6)
    other = tf.layers.Dense(2)
    other(x)
    assert [v.name for v in other.variables] == ["dense_1/kernel:0", "dense_1/bias:0"]
    with pytest.raises(ValueError, match="expected axis -1 of input shape to have value 3"):
        dense(_batch(cols=4))
    deep = _batch(rows=6).numpy().reshape(2, 3, 3)  # a rank-3 input: over its last axis
    np.testing.assert_allclose(dense(tf.constant(deep)).numpy(),
                               np.maximum(deep @ dense.kernel.numpy() + dense.bias.numpy(), 0),
                               rtol=1e-6)
    plain = tf.layers.Dense(2, use_bias=False)
    plain(x)
    np.testing.assert_allclose(plain(x).numpy(), x.numpy() @ plain.kernel.numpy(), rtol=1e-6)

    opt = tf.train.GradientDescentOptimizer(0.1)
    linear = tf.layers.Dense(2)

    def loss():
        return tf.reduce_mean(tf.square(linear(x) - y))

    before = float(loss())
    for _ in range(50):
        opt.minimize(loss)
    assert float(loss()) < 0.5 * before
    assert len(linear.variables) == 2  # minimize's calls made no new ones


def test_a_layer_called_in_a_traced_function_keeps_its_variables_across_traces(eager):
    dense = tf.layers.Dense(3)

    @tf.function
    def f(x):
        return dense(x)

    x = _batch()
    eager_out = dense(x).numpy()
    np.testing.assert_allclose(f(x).numpy(), eager_out, rtol=1e-6)
    wide = _batch(rows=2)
    np.testing.assert_allclose(f(wide).numpy(), dense(wide).numpy(), rtol=1e-6)
    assert f.experimental_get_tracing_count() == 2 and len(dense.variables) == 2

    fresh = tf.layers.Dense(3)

    @tf.function
    def g(x):
        return fresh(x)

    out = g(x)  # the first trace makes the variables (lifted out), the second reuses them
    np.testing.assert_allclose(out.numpy(), fresh(x).numpy(), rtol=1e-6)
    np.testing.assert_allclose(g(wide).numpy(), fresh(wide).numpy(), rtol=1e-6)
    assert len(fresh.variables) == 2


def test_convolution_and_pooling_layers_keep_their_variables_eagerly(eager):
    images = tf.constant(RNG.standard_normal((2, 6, 6, 3)).astype(np.float32))
    conv = tf.layers.Conv2D(4, 3, activation=tf.nn.relu)
    pool = tf.layers.MaxPooling2D(2, 2)
    first = pool(conv(images)).numpy()
    np.testing.assert_array_equal(pool(conv(images)).numpy(), first)
    assert [v.name for v in conv.variables] == ["conv2d/kernel:0", "conv2d/bias:0"]
    assert pool.variables == [] and first.shape == (2, 2, 2, 4)
    want = tf.nn.max_pool(tf.nn.relu(tf.nn.conv2d(images, conv.kernel, [1, 1, 1, 1], "VALID")
                                     + conv.bias), [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
    np.testing.assert_allclose(first, want.numpy(), rtol=1e-5, atol=1e-6)

    @tf.function
    def traced(x):
        return pool(conv(x))

    np.testing.assert_allclose(traced(images).numpy(), first, rtol=1e-5, atol=1e-6)
    assert len(conv.variables) == 2


def test_a_built_layer_takes_its_own_variables_and_hides_them_from_other_layers(eager):
    """A built layer's eager call gives its function the layer's own variables; a layer the
    call runs meanwhile (here one built by the activation) still makes and finds its own,
    and a call that fails leaves nothing behind for the next."""
    x = tf.constant(RNG.standard_normal((2, 6, 6, 3)).astype(np.float32))

    def activation(t):  # a 1x1 convolution of its own inside the outer one's call
        return tf.layers.conv2d(t, 2, 1, name="inner", reuse=tf.AUTO_REUSE)

    with tf.contrib.eager.EagerVariableStore().as_default():
        conv = tf.layers.Conv2D(4, 3, padding="same", activation=activation)
        first = conv(x).numpy()
        again = conv(x).numpy()
    np.testing.assert_array_equal(first, again)
    assert first.shape == (2, 6, 6, 2)
    assert conv.kernel.shape.as_list() == [3, 3, 3, 4]
    with pytest.raises(tf.errors.InvalidArgumentError):
        conv(tf.zeros([2, 6, 6, 5]))
    dense = tf.layers.Dense(2)
    dense(tf.zeros([1, 5]))
    bn = tf.layers.BatchNormalization()
    bn(x, training=True)
    assert [v.name for v in bn.variables][0].startswith("batch_normalization")
    np.testing.assert_array_equal(bn(x, training=False).numpy(), bn(x, training=False).numpy())


def test_batch_normalization_updates_its_moving_statistics_eagerly(eager):
    bn = tf.layers.BatchNormalization(momentum=0.5)
    x = _batch(rows=8)
    bn(x, training=True)
    names = [v.name.split("/")[-1] for v in bn.variables]
    assert names == ["gamma:0", "beta:0", "moving_mean:0", "moving_variance:0"]
    assert [v.name.split("/")[-1] for v in bn.trainable_variables] == ["gamma:0", "beta:0"]
    np.testing.assert_allclose(bn.moving_mean.numpy(), 0.5 * x.numpy().mean(axis=0),
                               rtol=1e-5, atol=1e-6)
    bn(x, training=True)
    np.testing.assert_allclose(bn.moving_mean.numpy(), 0.75 * x.numpy().mean(axis=0),
                               rtol=1e-5, atol=1e-6)
    assert len(bn.variables) == 4


def _bn_steps_in_a_graph(x, init, axis, steps, training):
    """The same layer, the same steps, in a graph: outputs, gamma's gradients, statistics."""
    with tf.Graph().as_default():
        bn = tf.layers.BatchNormalization(axis=axis, momentum=0.8, gamma_initializer=init)
        xt = tf.constant(x)
        y = bn(xt, training=training)
        grad = tf.gradients(tf.reduce_sum(y * y * y), bn.gamma)[0]
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            outs = [s.run([y, grad] + bn.updates)[:2] for _ in range(steps)]
            return outs, s.run([bn.moving_mean, bn.moving_variance])


@pytest.mark.parametrize("axis", [-1, 1])
def test_fused_batch_normalization_eagerly_steps_as_the_graph_does(axis):
    """A 4-D input takes the fused op; executing eagerly the op averages the moving statistics
    itself (TF's eager layer), in a graph the update ops do: the same numbers either way."""
    x = RNG.standard_normal((4, 3, 3, 5)).astype(np.float32)
    init = tf.constant_initializer(np.linspace(0.5, 1.5, 3 if axis == 1 else 5))
    want, want_stats = _bn_steps_in_a_graph(x, init, axis, 3, True)
    with eager_mode():
        bn = tf.layers.BatchNormalization(axis=axis, momentum=0.8, gamma_initializer=init)
        xt = tf.constant(x)
        for k in range(3):
            with tf.GradientTape() as tape:
                y = bn(xt, training=np.bool_(True))
                loss = tf.reduce_sum(y * y * y)
            grad = tape.gradient(loss, bn.gamma)
            np.testing.assert_allclose(y.numpy(), want[k][0], rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(grad.numpy(), want[k][1], rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(bn.moving_mean.numpy(), want_stats[0], rtol=1e-5,
                                   atol=1e-6)
        np.testing.assert_allclose(bn.moving_variance.numpy(), want_stats[1], rtol=1e-5)
        inference = bn(xt, training=False).numpy()
    mean, var = (s.reshape((1, -1, 1, 1) if axis == 1 else -1) for s in want_stats)
    gamma = np.linspace(0.5, 1.5, 3 if axis == 1 else 5).reshape(mean.shape)
    np.testing.assert_allclose(inference, gamma * (x - mean) / np.sqrt(var + 1e-3),
                               rtol=1e-5, atol=1e-5)


def test_a_float16_batch_normalizes_with_float32_statistics(eager):
    x = (RNG.standard_normal((4, 3, 3, 8)) * 4 + 100).astype(np.float16)
    bn = tf.layers.BatchNormalization(momentum=0.0)
    y = bn(tf.constant(x), training=True)
    assert y.dtype == tf.float16 and bn.moving_mean.dtype.base_dtype == tf.float16
    wide = x.astype(np.float32)
    mean, var = wide.mean(axis=(0, 1, 2)), wide.var(axis=(0, 1, 2))
    np.testing.assert_allclose(y.numpy().astype(np.float32),
                               (wide - mean) / np.sqrt(var + 1e-3), atol=5e-3)
    np.testing.assert_allclose(bn.moving_mean.numpy().astype(np.float32), mean, rtol=1e-3)


def test_variable_scopes_name_eager_variables_and_get_variable_keeps_none(eager):
    with tf.variable_scope("outer"):
        with tf.variable_scope("inner"):
            v = tf.get_variable("w", [2])
            assert tf.get_variable_scope().name == "outer/inner"
    assert v.name == "outer/inner/w:0" and tf.get_variable_scope().name == ""
    # TF's rule: no store keeps eager variables, so every call makes a new one, reuse or not
    a, b = tf.get_variable("w", [2]), tf.get_variable("w", [2])
    with tf.variable_scope("", reuse=True):
        c = tf.get_variable("w", [3])
    assert a is not b and a.name == b.name == "w:0" and c.shape.as_list() == [3]


def test_eager_name_scopes_name_variables_and_unwind(eager):
    """Executing eagerly a name scope names variables only; ``values`` are not looked at (TF
    ignores them eagerly); a scope left by an exception is left."""
    with tf.name_scope("a"):
        with tf.name_scope(None, "b", [tf.constant(1.0)]) as scope:
            assert scope == "a/b/"
            v = tf.Variable(1.0, name="v")
        with pytest.raises(RuntimeError):
            with tf.name_scope("c"):
                raise RuntimeError
        w = tf.Variable(1.0, name="w")
        with tf.name_scope("a/b/"):  # an exact scope, re-entered
            u = tf.Variable(1.0, name="u")
    assert (v.name, w.name, u.name) == ("a/b/v:0", "a/w:0", "a/b/u:0")
    assert tf.Variable(1.0, name="x").name == "x:0"
    with pytest.raises(ValueError, match="not a valid scope name"):
        with tf.name_scope("bad name!"):
            pass
    with pytest.raises(ValueError, match="At least one of name and default_name"):
        tf.name_scope(None, None, [])


def test_an_eager_variable_store_reuses_what_it_keeps(eager):
    store = tf.contrib.eager.EagerVariableStore()
    with store.as_default():
        q = tf.get_variable("q", [2])
        assert tf.get_variable("q", [2]) is q  # every scope reuses here (TF's AUTO_REUSE)
        with tf.variable_scope("", reuse=True):
            assert tf.get_variable("q", [2]) is q
        with pytest.raises(ValueError, match="specified shape \\(3,\\) and found shape"):
            tf.get_variable("q", [3])
        with tf.variable_scope("s"):
            r = tf.get_variable("r", [1], trainable=False)
        with tf.Graph().as_default():  # a graph made inside keeps its own store
            assert tf.get_variable("q", [2]) is not q
    assert tf.get_variable("q", [2]) is not q  # outside the block: nothing kept
    assert [v.name for v in store.variables()] == ["q:0", "s/r:0"]
    assert store.trainable_variables() == [q] and store.non_trainable_variables() == [r]

    copied = store.copy()
    assert [v.name for v in copied.variables()] == ["q:0", "s/r:0"]
    twin = copied.variables()[0]
    assert twin is not q
    np.testing.assert_array_equal(twin.numpy(), q.numpy())
    twin.assign(twin + 1.0)
    assert not np.allclose(twin.numpy(), q.numpy())
    with pytest.raises(ValueError, match="does not keep eager variables"):
        tf.contrib.eager.EagerVariableStore(_VariableStore())  # a graph's kind of store


def test_a_layers_variables_are_checkpointed_under_tfs_keys(eager, tmp_path):
    dense = tf.layers.Dense(2)
    x = _batch()
    dense(x)
    ckpt = tf.train.Checkpoint(model=dense)
    path = ckpt.save(str(tmp_path / "ckpt"))
    keys = set(tf.train.load_checkpoint(path).get_variable_to_shape_map())
    assert keys == {"model/kernel/.ATTRIBUTES/VARIABLE_VALUE",
                    "model/bias/.ATTRIBUTES/VARIABLE_VALUE",
                    "save_counter/.ATTRIBUTES/VARIABLE_VALUE",
                    "_CHECKPOINTABLE_OBJECT_GRAPH"}  # TF's object graph, as TF writes it
    saved = dense(x).numpy()
    dense.kernel.assign(tf.zeros_like(dense.kernel))
    tf.train.Checkpoint(model=dense).restore(path).assert_consumed()
    np.testing.assert_array_equal(dense(x).numpy(), saved)


def test_graph_mode_layers_still_use_the_graphs_collections():
    with tf.Graph().as_default():
        dense = tf.layers.Dense(2)
        x = tf.placeholder(tf.float32, [None, 3])
        dense(x), dense(x)
        assert [v.name for v in tf.global_variables()] == ["dense/kernel:0", "dense/bias:0"]
        assert dense.variables == tf.global_variables() and dense.kernel is dense.variables[0]
