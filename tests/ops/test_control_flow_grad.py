"""Gradients through cond and while_loop: numerical differences and the unrolled graph."""

import numpy as np
import pytest
from op_test_util import check_grads

import dflab as tf

RNG = np.random.default_rng(7)


def _rnn_loop(h0, w, n=4, parallel=10):
    return tf.while_loop(lambda i, h: i < n, lambda i, h: (i + 1, tf.tanh(tf.matmul(h, w))),
                         [tf.constant(0), h0], parallel_iterations=parallel)[1]


def _rnn_unrolled(h0, w, n=4):
    h = h0
    for _ in range(n):
        h = tf.tanh(tf.matmul(h, w))
    return h


@pytest.mark.parametrize("parallel", [1, 10])
def test_while_gradient_matches_numerical(parallel):
    check_grads(lambda h, w: _rnn_loop(h, w, parallel=parallel),
                [RNG.standard_normal((2, 3)), RNG.standard_normal((3, 3)) / 2])


def test_while_gradient_equals_unrolled_graph():
    h0 = tf.constant(RNG.standard_normal((2, 3)))
    w = tf.constant(RNG.standard_normal((3, 3)) / 2)
    loop = tf.gradients(tf.reduce_sum(_rnn_loop(h0, w) ** 2), [h0, w])
    flat = tf.gradients(tf.reduce_sum(_rnn_unrolled(h0, w) ** 2), [h0, w])
    with tf.Session() as s:
        for a, b in zip(s.run(loop), s.run(flat)):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_gradient_with_data_dependent_trip_count():
    def f(x):
        return tf.while_loop(lambda i, v: tf.reduce_sum(v) < 50.0,
                             lambda i, v: (i + 1, v * 1.5 + 0.1), [tf.constant(0), x])[1]

    check_grads(f, [np.array([1.0, 2.0])])


def test_nested_loop_gradient():
    def f(x, w):
        def outer(i, v):
            inner = tf.while_loop(lambda j, u: j < i + 1, lambda j, u: (j + 1, tf.sin(u * w)),
                                  [tf.constant(0), v])[1]
            return i + 1, inner + v

        return tf.while_loop(lambda i, v: i < 3, outer, [tf.constant(0), x])[1]

    check_grads(f, [RNG.standard_normal(3), np.array(0.7)])


def test_cond_inside_loop_gradient():
    def f(x):
        def body(i, v):
            return i + 1, tf.cond(tf.equal(i % 2, 0), lambda: v * v, lambda: tf.sin(v))

        return tf.while_loop(lambda i, v: i < 5, body, [tf.constant(0), x])[1]

    check_grads(f, [np.array([0.3, 0.8, -0.5])])


@pytest.mark.parametrize("flag", [True, False])
def test_loop_inside_cond_gradient(flag):
    def f(x):
        return tf.cond(tf.constant(flag),
                       lambda: tf.while_loop(lambda i, v: i < 3,
                                             lambda i, v: (i + 1, v * x), [0, x])[1],
                       lambda: x * 2.0)

    check_grads(f, [np.array([0.5, -1.5])])


@pytest.mark.parametrize("flag", [True, False])
def test_cond_gradients(flag):
    def f(x, y):
        return tf.cond(tf.constant(flag), lambda: x * y + tf.exp(x), lambda: y * y)

    check_grads(f, [RNG.standard_normal(3), RNG.standard_normal(3)])


def test_cond_gradient_of_an_unused_branch_input_is_zero():
    x = tf.placeholder(tf.float64, [])
    y = tf.cond(x > 0, lambda: x * 3.0, lambda: tf.constant(1.0, tf.float64))
    g = tf.gradients(y, x)[0]
    with tf.Session() as s:
        assert s.run(g, {x: 2.0}) == 3.0 and s.run(g, {x: -2.0}) == 0.0


def test_maximum_iterations_gradient():
    check_grads(lambda x: tf.while_loop(lambda v: tf.reduce_sum(v) < 1e9, lambda v: v * 1.1,
                                        [x], maximum_iterations=6), [np.array([1.0, 2.0])])


def test_gather_gradient_inside_loop_is_densified():
    params = RNG.standard_normal((5, 2))

    def f(p):
        def body(i, acc):
            return i + 1, acc + tf.gather(p, i % 5)

        return tf.while_loop(lambda i, a: i < 7, body,
                             [tf.constant(0), tf.zeros([2], tf.float64)])[1]

    check_grads(f, [params])


def test_training_through_a_loop_converges():
    x = tf.placeholder(tf.float64, [None, 3])
    target = tf.placeholder(tf.float64, [None, 3])
    w = tf.Variable(np.eye(3) * 0.5)
    out = _rnn_loop(x, w, n=3)
    loss = tf.reduce_mean((out - target) ** 2)
    step = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
    xs = RNG.standard_normal((16, 3))
    w_true = RNG.standard_normal((3, 3)) / 2
    ys = xs
    for _ in range(3):
        ys = np.tanh(ys @ w_true)
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        first = s.run(loss, {x: xs, target: ys})
        for _ in range(200):
            s.run(step, {x: xs, target: ys})
        assert s.run(loss, {x: xs, target: ys}) < first / 10


def test_back_prop_false_gives_no_gradient():
    x = tf.constant(1.0)
    y = tf.while_loop(lambda v: v < 10, lambda v: v * 2, [x], back_prop=False)
    assert tf.gradients(y, x) == [None]


@pytest.mark.parametrize("use_resource", [False, True])
def test_gradients_taken_inside_a_loop_body_for_outside_values(use_resource):
    """tf.gradients inside a while body, for a variable and a tensor from outside: each
    iteration's own gradient (TF 1.x: 27.0 for this program; it had been None)."""
    with tf.Graph().as_default():
        x = tf.Variable(2.0, use_resource=use_resource)
        c = tf.constant(3.0)

        def body(i, acc):
            y = x * x * tf.cast(i, tf.float32) + c * x
            gx, gc = tf.gradients(y, [x, c])
            return i + 1, acc + gx + gc

        out = tf.while_loop(lambda i, a: i < 3, body, [tf.constant(0), tf.constant(0.0)])
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            # d/dx = 2*x*i + c, d/dc = x, summed over i = 0, 1, 2
            assert sess.run(out)[1] == sum(2 * 2.0 * i + 3.0 + 2.0 for i in range(3))


def test_a_conditional_training_step_differentiates_a_loss_built_outside_the_cond():
    """TF 1.x: minimize() inside a cond branch, of a loss built before the cond (w becomes
    2.4); and a gradient in a loop body through a value computed outside it (8.0)."""
    with tf.Graph().as_default():
        w = tf.get_variable("w", initializer=3.0, use_resource=True)
        loss = w * w
        p = tf.placeholder(tf.bool, [])
        opt = tf.train.GradientDescentOptimizer(0.1)

        def train():
            with tf.control_dependencies([opt.minimize(loss)]):
                return tf.identity(loss)

        step = tf.cond(p, train, lambda: tf.identity(loss))
        x = tf.constant(3.0)
        y = x * x

        def body(i, acc):
            z = y + x * 2.0
            return i + 1, acc + tf.gradients(z, x)[0]

        _, acc = tf.while_loop(lambda i, a: i < 1, body, [0, 0.0])
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            sess.run(step, {p: True})
            np.testing.assert_allclose(sess.run(w), 2.4)
            assert sess.run(acc) == 8.0


def test_a_second_order_gradient_through_a_while_loop_is_refused_as_tf1s():
    """TF 1.x: ``TypeError: Second-order gradient for while loops not supported`` (dflab's
    had come out zero where the first gradient was read through a TensorArray)."""
    x = tf.constant([1.0, 2.0])
    ta = tf.TensorArray(tf.float32, size=2, clear_after_read=False)
    _, ta = tf.while_loop(lambda i, ta: i < 2, lambda i, ta: (i + 1, ta.write(i, x[i] ** 3)),
                          [0, ta])
    g = tf.gradients(tf.reduce_sum(ta.stack()), x)[0]
    with tf.Session() as sess:
        np.testing.assert_allclose(sess.run(g), [3.0, 12.0])
    with pytest.raises(TypeError, match="Second-order gradient for while loops"):
        tf.gradients(tf.reduce_sum(g * g), x)


def test_an_op_making_an_int_and_a_float_loop_value_is_differentiated():
    """One op gives the next counter and the next float value (``identity_n``, or a traced
    function as the body): its gradient had waited on the counter's back edge and come out
    zero (TF: the gradient)."""
    x = tf.constant([1.0, 2.0])

    def body(i, a):
        return tuple(tf.identity_n([i + 1, a * 2.0]))

    _, r = tf.while_loop(lambda i, a: i < 3, body, [tf.constant(0), x])
    (g,) = tf.gradients(tf.reduce_sum(r * r), x)
    with tf.Session() as sess:
        values, grads = sess.run([r, g])
    np.testing.assert_allclose(values, [8.0, 16.0])
    np.testing.assert_allclose(grads, [128.0, 256.0])  # d/dx of sum((8x)^2) = 128x
