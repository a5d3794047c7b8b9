"""tf.GradientTape: gradients against central differences, and the tape's rules (persistent,
watch, watched accessed variables, nested tapes for higher order, IndexedSlices, errors)."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import dflab as tf
from dflab.eager import eager_mode

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "ops"))
import test_array_ops as array_cases  # noqa: E402
import test_math_ops as math_cases  # noqa: E402

RNG = np.random.default_rng(3)


@pytest.fixture(autouse=True)
def _eager():
    with eager_mode():
        yield


def _numeric(fn, args, k, w, delta=1e-6):
    """d sum(fn(args) * w) / d args[k], by central differences (float64)."""
    x = args[k]
    grad = np.zeros_like(x)
    it = np.nditer(x, flags=["multi_index"])
    for _ in it:
        idx = it.multi_index
        outs = []
        for sign in (1, -1):
            xs = [a.copy() for a in args]
            xs[k][idx] += sign * delta
            y = fn(*[tf.constant(a) for a in xs])
            ys = y if isinstance(y, (list, tuple)) else [y]
            outs.append(sum(float(np.sum(np.asarray(v.numpy()) * wi))
                            for v, wi in zip(ys, w)))
        grad[idx] = (outs[0] - outs[1]) / (2 * delta)
    return grad


def _check(fn, args):
    args = [np.asarray(a, np.float64) for a in args]
    consts = [tf.constant(a) for a in args]
    with tf.GradientTape(persistent=True) as tape:
        for c in consts:
            tape.watch(c)
        y = fn(*consts)
        ys = y if isinstance(y, (list, tuple)) else [y]
        w = [RNG.standard_normal(np.shape(v.numpy())) for v in ys]
        target = tf.add_n([tf.reduce_sum(v * wi) for v, wi in zip(ys, w)])
    got = tape.gradient(target, consts)
    for k, g in enumerate(got):
        want = _numeric(fn, args, k, w)
        assert g is not None
        np.testing.assert_allclose(np.asarray(tf.convert_to_tensor(g).numpy()), want,
                                   rtol=1e-4, atol=1e-6)


GRAD_CASES = [(f"array/{n}", fn, args) for n, fn, args in array_cases.GRADS[:20]]
GRAD_CASES += [(f"unary/{fn.__name__}", fn, [gen((2, 3))])
               for fn, _, gen, diff in math_cases.UNARY if diff]
GRAD_CASES += [(f"binary/{fn.__name__}", fn, [math_cases.rand((2, 3)), gen((3,))])
               for fn, _, gen, diff, _ in math_cases.BINARY if diff]
GRAD_CASES += [
    ("matmul", tf.matmul, [RNG.standard_normal((3, 4)), RNG.standard_normal((4, 2))]),
    ("softmax_xent", lambda a, b: tf.nn.softmax_cross_entropy_with_logits_v2(
        labels=tf.nn.softmax(b), logits=a), [RNG.standard_normal((2, 4))] * 2),
    ("conv2d", lambda a, b: tf.nn.conv2d(a, b, [1, 1, 1, 1], "SAME"),
     [RNG.standard_normal((1, 4, 4, 2)), RNG.standard_normal((3, 3, 2, 2))]),
    ("reduce_mean", lambda a: tf.reduce_mean(a, 1), [RNG.standard_normal((3, 4))]),
    ("gather", lambda a: tf.gather(a, [0, 2, 2]), [RNG.standard_normal((3, 2))]),
]


@pytest.mark.parametrize("name,fn,args", GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_tape_gradient_matches_central_differences(name, fn, args):
    _check(fn, args)


def test_persistent_tape_gives_several_gradients_a_plain_one_only_one():
    x = tf.constant(3.0)
    with tf.GradientTape(persistent=True) as t:
        t.watch(x)
        y = x * x
        z = y * y
    assert float(t.gradient(y, x)) == 6.0
    assert float(t.gradient(z, x)) == 108.0
    with tf.GradientTape() as t:
        t.watch(x)
        y = x * x
    t.gradient(y, x)
    with pytest.raises(RuntimeError, match="non-persistent"):
        t.gradient(y, x)


def test_unwatched_tensors_have_no_gradient_and_unconnected_can_be_zero():
    x, u = tf.constant(2.0), tf.constant(5.0)
    with tf.GradientTape(persistent=True) as t:
        y = x * x
    assert t.gradient(y, x) is None
    with tf.GradientTape(persistent=True) as t:
        t.watch(x)
        y = x * x
    assert t.gradient(y, u) is None
    assert float(t.gradient(y, u, unconnected_gradients=tf.UnconnectedGradients.ZERO)) == 0.0


def test_accessed_trainable_variables_are_watched_unless_turned_off():
    v = tf.Variable(2.0)
    frozen = tf.Variable(3.0, trainable=False)
    with tf.GradientTape() as t:
        y = v * frozen
    assert float(t.gradient(y, v)) == 3.0
    assert t.watched_variables() == (v,)
    with tf.GradientTape(watch_accessed_variables=False) as t:
        y = v * v
    assert t.gradient(y, v) is None
    with tf.GradientTape(watch_accessed_variables=False) as t:
        t.watch(v)
        y = v * v
    assert float(t.gradient(y, v)) == 4.0


def test_nested_tapes_give_second_and_third_derivatives():
    x = tf.constant(1.5, tf.float64)
    with tf.GradientTape() as t3:
        t3.watch(x)
        with tf.GradientTape() as t2:
            t2.watch(x)
            with tf.GradientTape() as t1:
                t1.watch(x)
                y = tf.sin(x) * x
            dy = t1.gradient(y, x)
        d2y = t2.gradient(dy, x)
    d3y = t3.gradient(d2y, x)
    xv = 1.5
    np.testing.assert_allclose(float(dy), np.cos(xv) * xv + np.sin(xv))
    np.testing.assert_allclose(float(d2y), -np.sin(xv) * xv + 2 * np.cos(xv))
    np.testing.assert_allclose(float(d3y), -np.cos(xv) * xv - 3 * np.sin(xv))


def test_gather_of_a_variable_gives_indexed_slices():
    table = tf.Variable(np.arange(12.0).reshape(4, 3))
    with tf.GradientTape() as t:
        rows = tf.gather(table, [1, 3, 1])
        loss = tf.reduce_sum(rows * rows)
    g = t.gradient(loss, table)
    assert isinstance(g, tf.IndexedSlices)
    np.testing.assert_array_equal(g.indices.numpy(), [1, 3, 1])
    dense = np.zeros((4, 3))
    for i in (1, 3, 1):
        dense[i] += 2 * np.arange(12.0).reshape(4, 3)[i]
    np.testing.assert_allclose(tf.convert_to_tensor(g).numpy(), dense)
    opt = tf.train.GradientDescentOptimizer(0.5)
    opt.apply_gradients([(g, table)])
    np.testing.assert_allclose(table.numpy(), np.arange(12.0).reshape(4, 3) - 0.5 * dense)


def test_stop_recording_and_jacobian():
    x = tf.constant([1.0, 2.0, 3.0])
    with tf.GradientTape(persistent=True) as t:
        t.watch(x)
        y = x * x
        with t.stop_recording():
            z = y * 2.0
    assert t.gradient(z, x) is None
    jac = t.jacobian(y, x)
    np.testing.assert_allclose(jac.numpy(), np.diag([2.0, 4.0, 6.0]))


def test_jacobians_of_a_plain_tape_batch_jacobians_and_hessians():
    # TF 2.21's jacobian needs no persistent tape (one jacobian, as one gradient).
    x = tf.constant([1.0, 2.0, 3.0])
    with tf.GradientTape() as t:
        t.watch(x)
        y = x * x
    np.testing.assert_allclose(t.jacobian(y, x).numpy(), np.diag([2.0, 4.0, 6.0]))
    with pytest.raises(RuntimeError, match="non-persistent GradientTape"):
        t.jacobian(y, x)

    xb = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    with tf.GradientTape() as t:
        t.watch(xb)
        y = tf.sin(xb) * xb
    got = t.batch_jacobian(y, xb).numpy()
    want = np.zeros((2, 2, 2))
    values = xb.numpy()
    for b in range(2):
        for i in range(2):
            want[b, i, i] = np.cos(values[b, i]) * values[b, i] + np.sin(values[b, i])
    np.testing.assert_allclose(got, want, rtol=1e-5)

    def numeric_hessian(v, delta=1e-3):
        def grad(u):
            return 3 * u ** 2
        return np.stack([(grad(v + delta * e) - grad(v - delta * e)) / (2 * delta)
                         for e in np.eye(3)], axis=1)

    with tf.GradientTape() as outer:
        outer.watch(x)
        with tf.GradientTape() as inner:
            inner.watch(x)
            y = tf.reduce_sum(x ** 3)
        g = inner.gradient(y, x)
    np.testing.assert_allclose(outer.jacobian(g, x).numpy(),
                               numeric_hessian(np.array([1.0, 2.0, 3.0])), rtol=1e-5)

    @tf.function
    def traced(v):
        with tf.GradientTape() as tape:
            tape.watch(v)
            out = tf.tanh(v)
        return tape.jacobian(out, v)

    np.testing.assert_allclose(traced(x).numpy(), np.diag(1 - np.tanh([1.0, 2.0, 3.0]) ** 2),
                               rtol=1e-5)


def test_batch_jacobian_and_jacobian_refuse_as_tf_does():
    x = tf.constant([[1.0, 2.0]])
    z = tf.constant([[3.0, 4.0]])
    with tf.GradientTape(persistent=True) as t:
        t.watch([x, z])
        y = x * 2.0
        flat = tf.reshape(x, [2])
    np.testing.assert_array_equal(t.batch_jacobian(y, z).numpy(), np.zeros((1, 2, 2)))
    with pytest.raises(ValueError, match="must have rank at least 2"):
        t.batch_jacobian(flat, flat)
    with tf.GradientTape() as plain:
        plain.watch(x)
        y = x * 2.0
    with pytest.raises(RuntimeError, match="persistent=True to compute the jacobian"):
        plain.jacobian(y, x, experimental_use_pfor=False)


def test_vectorized_map_is_map_fn_over_rows():
    rows = tf.constant([[1.0, 2.0], [-3.0, 4.0]])
    sums, positive = tf.vectorized_map(lambda r: (tf.reduce_sum(r * r), r[0] > 0), rows)
    np.testing.assert_allclose(sums.numpy(), [5.0, 25.0])
    np.testing.assert_array_equal(positive.numpy(), [True, False])
    assert tf.vectorized_map(lambda r: r * 2.0, tf.zeros([0, 3])).numpy().size == 0
    with pytest.raises(tf.errors.InvalidArgumentError, match="same size in dimension 0"):
        tf.vectorized_map(lambda p: p[0] + p[1], (tf.ones([2]), tf.ones([3])))
    counter = tf.Variable(0)

    @tf.function
    def counted(rows):  # one increment per row, none for the trace that learns the dtypes
        return tf.vectorized_map(lambda r: r + tf.cast(counter.assign_add(1), tf.float32) * 0,
                                 rows)

    counted(tf.ones([3]))
    assert int(counter.numpy()) == 3
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [3, 2])
        y = tf.vectorized_map(lambda r: tf.reduce_sum(r * r), x)
        (dx,) = tf.gradients(y, x)
        with tf.Session() as sess:
            values, grads = sess.run([y, dx], {x: [[1, 2], [-3, 4], [5, 6]]})
        np.testing.assert_allclose(values, [5.0, 25.0, 61.0])
        np.testing.assert_allclose(grads, [[2, 4], [-6, 8], [10, 12]])


def test_vectorized_map_runs_its_python_function_once():
    calls = []

    def squared(r):  # traced once, as TF's pfor traces it: its Python runs once
        calls.append(r.shape.as_list())
        return r * r

    x = tf.constant([[1.0, 2.0], [-3.0, 4.0], [5.0, 6.0]])
    np.testing.assert_allclose(tf.vectorized_map(squared, x).numpy(), x.numpy() ** 2)
    assert calls == [[2]]
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = tf.vectorized_map(squared, x)
    np.testing.assert_allclose(tape.gradient(y, x).numpy(), 2 * x.numpy())


def test_output_gradients_weight_the_target():
    x = tf.constant([1.0, 2.0])
    with tf.GradientTape() as t:
        t.watch(x)
        y = x * 3.0
    np.testing.assert_allclose(t.gradient(y, x, output_gradients=tf.constant([2.0, -1.0])).numpy(),
                               [6.0, -3.0])


def test_a_tape_in_graph_mode_differentiates_the_graph():
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [2])
        v = tf.Variable([1.0, 2.0])
        with tf.GradientTape() as t:
            y = tf.reduce_sum(x * v)
        gx, gv = t.gradient(y, [x, v])
        assert t.watched_variables() == (v,)
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            a, b = s.run([gx, gv], {x: [3.0, 4.0]})
    np.testing.assert_allclose(a, [1.0, 2.0])
    np.testing.assert_allclose(b, [3.0, 4.0])


def test_tf_gradients_is_refused_when_executing_eagerly():
    x = tf.constant(1.0)
    with pytest.raises(RuntimeError, match="GradientTape"):
        tf.gradients(x * x, x)


@pytest.mark.parametrize("op", ["matmul", "batch_matmul", "conv2d"])
def test_a_tape_skips_the_gradients_of_unwatched_inputs(op, monkeypatch):
    # As TF's tape (skip_input_indices): a layer's data input leads to no source, so its
    # gradient (a whole product per layer and step) is not computed; the watched input's is.
    from dflab.ops import conv_ops, math_ops

    if op == "conv2d":
        xv, wv = RNG.standard_normal((2, 5, 5, 3)), RNG.standard_normal((3, 3, 3, 4))
        fn = lambda x, w: tf.nn.conv2d(x, w, [1, 1, 1, 1], "SAME")  # noqa: E731
        builder = (conv_ops, "conv2d_backprop_input")  # the image's gradient only
    else:
        shapes = [(2, 4, 3), (2, 3, 5)] if op == "batch_matmul" else [(4, 3), (3, 5)]
        xv, wv = (RNG.standard_normal(s) for s in shapes)
        fn = tf.matmul
        builder = (math_ops, "matmul")  # each input's gradient is one product
    made = []
    real = getattr(*builder)
    monkeypatch.setattr(*builder, lambda *a, **k: made.append(1) or real(*a, **k))
    x, w = tf.constant(xv), tf.Variable(wv)
    gy = RNG.standard_normal(fn(x, w).shape.as_list())
    want_x, want_w = (_numeric(fn, [xv, wv], k, [gy]) for k in (0, 1))
    with tf.GradientTape() as t:
        y = tf.reduce_sum(fn(x, w) * gy)
    made.clear()
    np.testing.assert_allclose(t.gradient(y, w).numpy(), want_w, rtol=1e-5, atol=1e-7)
    unwatched = len(made)
    with tf.GradientTape() as t:  # x watched: its gradient is made too
        t.watch(x)
        y = tf.reduce_sum(fn(x, w) * gy)
    made.clear()
    gx, gw = t.gradient(y, [x, w])
    assert len(made) == unwatched + 1
    np.testing.assert_allclose(gx.numpy(), want_x, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(gw.numpy(), want_w, rtol=1e-5, atol=1e-7)


def test_a_tape_differentiates_tensor_arrays_once_per_call():
    """Eager TensorArray writes and reads are recorded; each ``gradient`` call sums into
    gradient arrays of its own, so a persistent tape gives the same gradient twice."""
    w = tf.Variable([1.0, 2.0])
    with tf.GradientTape(persistent=True) as t:
        ta = tf.TensorArray(tf.float32, size=3, clear_after_read=False)
        ta = ta.write(0, w * 2.0).write(1, w * w)
        ta = ta.write(2, ta.read(0) * 3.0)
        y = tf.reduce_sum(ta.stack())
    for _ in range(2):  # d/dw (2w + w^2 + 6w) = 8 + 2w
        np.testing.assert_array_equal(t.gradient(y, w).numpy(), [10.0, 12.0])
    with tf.name_scope("gradients"):  # a scope of that name changes nothing
        for _ in range(2):
            np.testing.assert_array_equal(t.gradient(y, w).numpy(), [10.0, 12.0])


def test_a_persistent_tape_records_its_own_gradient_for_a_higher_order():
    """Inside its block a persistent tape records the ops of its gradient (TF's), so a
    second gradient on the same tape differentiates the first; a plain tape stops first."""
    z = tf.constant(2.0)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(z)
        y = z * z * z
        dy = tape.gradient(y, z)
    assert (float(dy), float(tape.gradient(dy, z))) == (12.0, 12.0)

    @tf.function
    def cube(x):
        return x * x * x

    with tf.GradientTape(persistent=True) as tape:
        tape.watch(z)
        dy = tape.gradient(cube(z), z)
    assert float(tape.gradient(dy, z)) == 12.0
    with tf.GradientTape() as plain:
        plain.watch(z)
        dy = plain.gradient(z * z * z, z)
    assert float(dy) == 12.0
