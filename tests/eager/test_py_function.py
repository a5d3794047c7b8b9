"""``tf.py_function`` beyond what the TF fixtures hold (tests/fixtures/tf_api/cases_misc.py):
its gradient with an integer input, repeated steps, and use inside a while loop's body."""

import numpy as np

import dflab as tf


def test_gradient_skips_integer_inputs():
    # TF's own gradient op fails at run time here (it converts 0.0 to int32); dflab gives the
    # integer input no gradient and the float one its tape's gradient.
    x = tf.placeholder(tf.float32, [2])
    n = tf.placeholder(tf.int32, [])
    y = tf.py_function(lambda a, k: a * a * tf.cast(k, tf.float32), [x, n], tf.float32)
    dx, dn = tf.gradients(y, [x, n])
    assert dn is None
    with tf.Session() as sess:
        for step in range(3):  # each run records a fresh tape
            value = np.array([1.0, step], np.float32)
            got = sess.run(dx, {x: value, n: 3})
            np.testing.assert_allclose(got, 6.0 * value)


def test_runs_eagerly_inside_a_loop_body():
    calls = []

    def body_fn(v):
        calls.append(float(v.numpy()))
        return v * 2.0

    def body(i, v):
        doubled = tf.py_function(body_fn, [v], tf.float32)
        doubled.set_shape([])  # its shape is unknown, as TF's
        return i + 1, doubled

    out = tf.while_loop(lambda i, v: i < 3, body, [tf.constant(0), tf.constant(1.0)])
    with tf.Session() as sess:
        assert sess.run(out[1]) == 8.0
    assert calls == [1.0, 2.0, 4.0]


def test_eagerly_with_a_tape():
    from dflab.eager.context import eager_mode

    with eager_mode():
        x = tf.constant([1.0, 2.0])
        np.testing.assert_array_equal(tf.py_function(lambda a: a * 3.0, [x], tf.float32).numpy(),
                                      [3.0, 6.0])
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.py_function(lambda a: a * a, [x], tf.float32)
        np.testing.assert_allclose(tape.gradient(y, x).numpy(), [2.0, 4.0])


def test_lookup_tables_run_eagerly_each_with_its_own_state():
    from dflab.eager.context import eager_mode

    with eager_mode():
        first = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(["a"], [1]), -1)
        second = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(["a"], [2]), -1)
        keys = tf.constant(["a", "b"])
        np.testing.assert_array_equal(first.lookup(keys).numpy(), [1, -1])
        np.testing.assert_array_equal(second.lookup(keys).numpy(), [2, -1])
        assert first.size().numpy() == 1
