"""AutoGraph converts the functions a converted function calls (TF's ``converted_call``): the
user's helpers, methods, callable objects, decorated functions and lambdas, each once per code
object, bound to their own closures; dflab's functions, the libraries', builtins, generators
and ``do_not_convert`` functions are called as written. Expected values were read off
TensorFlow 2.21 running the same programs."""

from __future__ import annotations

import functools
import inspect

import numpy as np
import pytest

import dflab as tf
from dflab.autograph import ConversionError, convert
from dflab.autograph.conversion import converted_call
from dflab.eager import eager_mode


@pytest.fixture(autouse=True)
def _eager():
    with eager_mode():
        yield


def _op_types(fn, *args):
    concrete = fn.get_concrete_function(*args)
    return {op.type for op in concrete.graph.get_operations()}


def sign_of(x):
    if x > 0:
        s = 1.0
    else:
        s = -1.0
    return s


def halvings(x):
    n = tf.constant(0)
    while x > 1.0:
        x = x / 2.0
        n += 1
    return n, sign_of(x)


def test_a_helpers_tensor_if_and_while_become_graph_control_flow():
    @tf.function
    def f(x):
        n, s = halvings(x)
        return tf.cast(n, tf.float32) * s

    assert float(f(tf.constant(9.0))) == 4.0  # TF 2.21: 4.0 and -0.0
    assert float(f(tf.constant(-3.0))) == 0.0
    assert np.signbit(f(tf.constant(-3.0)).numpy())
    assert f.experimental_get_tracing_count() == 1  # one graph for both signs
    assert {"Switch", "Merge", "Enter", "Exit", "LoopCond"} <= _op_types(
        f, tf.TensorSpec([], tf.float32))


class Policy:
    def __init__(self, threshold):
        self.threshold = threshold

    def act(self, q):
        if tf.reduce_max(q) > self.threshold:
            a = tf.argmax(q)
        else:
            a = tf.constant(-1, tf.int64)
        return a

    def __call__(self, q):
        return self.act(q)


def test_methods_and_callable_objects_are_converted():
    policy = Policy(0.5)

    @tf.function
    def g(q):
        return policy(q), policy.act(q * 0.0)

    got = [int(t) for t in g(tf.constant([0.1, 0.9, 0.3]))]
    assert got == [1, -1]  # TF 2.21: [1, -1]


def test_a_converted_function_reads_and_writes_its_closure_as_it_is_now():
    scale = 1.0
    calls = 0

    def h(x):
        nonlocal calls
        calls += 1
        if x > 0:
            y = x * scale
        else:
            y = x
        return y

    traced = tf.function(h)
    assert float(traced(tf.constant(2.0))) == 2.0
    scale = 3.0  # read by the next trace, as TF's (6.0), not the value at conversion
    assert float(traced(tf.constant(2.0, tf.float64))) == 6.0
    assert calls == 2  # ``nonlocal`` wrote the function's own cell, once per trace


def times_ten(fn):
    @functools.wraps(fn)
    def wrapper(*args):
        return fn(*args) * 10.0
    return wrapper


@times_ten
def decorated_abs(x):
    if x > 0:
        y = x
    else:
        y = -x
    return y


def test_a_decorated_function_runs_its_decorator_and_converts_what_it_wraps():
    # The wrapper is converted, not the source ``__wrapped__`` points at (which would drop
    # the decorator's own code); the function it calls is converted in turn.
    assert float(tf.function(decorated_abs)(tf.constant(-2.0))) == 20.0  # TF 2.21: 20.0

    @tf.function
    def k(x):
        return times_ten(sign_of)(x)

    assert float(k(tf.constant(-2.0))) == -10.0  # TF 2.21: -10.0


def test_a_lambda_is_converted_and_converts_its_calls():
    f = tf.function(lambda v: halvings(v)[1] * v)
    assert float(f(tf.constant(-1.5))) == 1.5
    g = tf.function(lambda v: halvings(v * v)[1] * v * v)
    x = tf.constant(-1.5)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = g(x)
    grad = float(tape.gradient(y, x))  # TF 2.21: -3.0
    eps = 1e-2
    numeric = (float(g(tf.constant(-1.5 + eps))) - float(g(tf.constant(-1.5 - eps)))) / (2 * eps)
    assert grad == pytest.approx(-3.0) and grad == pytest.approx(numeric, rel=1e-3)
    twins = [lambda x: sign_of(x), lambda x: -sign_of(x)]  # two alike on one line: as written
    with pytest.raises(TypeError, match="Python `bool`"):
        tf.function(twins[1])(tf.constant(1.0))


def test_what_is_not_the_users_code_is_called_as_written():
    for f in (len, tf.nn.relu, np.sum, functools.reduce, Policy, print, tf.function(sign_of)):
        assert converted_call(f) is f
    bound = Policy(0.5).act
    assert converted_call(bound).__func__.__dflab_autograph__

    def gen(x):
        for i in range(3):
            yield x * i

    assert converted_call(gen) is gen

    @tf.function
    def use_generator(x):
        return tf.add_n(list(gen(x)))

    assert float(use_generator(tf.constant(2.0))) == 6.0  # TF 2.21: 6.0

    @tf.autograph.experimental.do_not_convert
    def raw(x):
        if x > 0:
            return x
        return -x

    with pytest.raises(TypeError, match="Python `bool`"):  # TF 2.21: a TypeError too
        tf.function(lambda x: raw(x) + 1.0)(tf.constant(1.0))


def test_a_helper_is_converted_once_per_code_object():
    made = [convert(functools.partial(sign_of)).func for _ in range(2)]
    assert made[0] is not made[1] and made[0].__code__ is made[1].__code__
    assert made[0].__code__.co_qualname == "sign_of"  # tracebacks name the user's function


def loop_that_returns(x):
    while x > 0:
        x -= 1.0
        if x < 3:
            return x
    return x


def test_a_helpers_unconvertible_statement_is_refused_naming_its_line():
    line = inspect.getsourcelines(loop_that_returns)[1] + 1
    with pytest.raises(ConversionError, match=f"`while` at .*test_autograph_calls.py:{line} "
                                              "into graph control flow: its body returns"):
        tf.function(lambda x: loop_that_returns(x))(tf.constant(5.0))


def test_recursive_false_leaves_calls_as_written():
    code = tf.autograph.to_code(halvings)
    assert "ag__converted_call(sign_of)(x)" in code
    assert "ag__converted_call(tf.constant)" in code
    plain = tf.autograph.to_code(halvings, recursive=False)
    assert "converted_call" not in plain and "sign_of(x)" in plain
    with pytest.raises(TypeError, match="Python `bool`"):
        tf.function(tf.autograph.to_graph(halvings, recursive=False), autograph=False)(
            tf.constant(3.0))
    n, s = tf.function(tf.autograph.to_graph(halvings), autograph=False)(tf.constant(3.0))
    assert (int(n), float(s)) == (2, 1.0)


def spread(x):
    if x > 2:
        y = x * 10
    else:
        y = -x
    return y


def test_dataset_functions_are_converted_as_tfs_are():
    def keep(v):
        return v > 0 if v < 35 else False

    ds = tf.data.Dataset.range(5).map(spread)
    assert [int(e) for e in ds] == [0, -1, -2, 30, 40]  # TF 2.21
    assert [int(e) for e in ds.filter(keep)] == [30]  # TF 2.21
    with tf.Graph().as_default():  # a TF 1.x pipeline too (TF 2.21's compat.v1: the same)
        nxt = tf.data.make_one_shot_iterator(tf.data.Dataset.range(5).map(spread)).get_next()
        with tf.Session() as sess:
            assert [int(sess.run(nxt)) for _ in range(5)] == [0, -1, -2, 30, 40]


class FlipUnlessPositive(tf.layers.Layer):
    def call(self, x):
        if tf.reduce_sum(x) > 0:
            y = x
        else:
            y = -x
        return y


def test_a_subclassed_layers_call_is_converted_while_a_graph_is_built():
    # As TF's Keras 2 layers (TF 1.15-2.15) convert a subclassed layer's ``call``.
    layer = FlipUnlessPositive()
    f = tf.function(lambda x: layer(x))
    np.testing.assert_array_equal(f(tf.constant([1.0, -3.0])).numpy(), [-1.0, 3.0])
    np.testing.assert_array_equal(f(tf.constant([1.0, 3.0])).numpy(), [1.0, 3.0])
    np.testing.assert_array_equal(layer(tf.constant([-2.0])).numpy(), [2.0])  # eagerly
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [2])
        y = FlipUnlessPositive()(x)
        with tf.Session() as sess:
            np.testing.assert_array_equal(sess.run(y, {x: [-1.0, -2.0]}), [1.0, 2.0])


def test_lambdas_inside_converted_code_are_converted_with_it():
    # A lambda made by converted code (its calls already go through the converter) is not
    # converted again: that had failed ("duplicate argument") and fallen back with a warning.
    def helper(x):
        f = lambda v: tf.cond(v > 0, lambda: v * 2, lambda: -v)  # noqa: E731
        return f(x)

    @tf.function
    def g(x):
        h = lambda v: helper(v) + 1  # noqa: E731
        return h(x)

    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert float(g(tf.constant(3.0))) == 7.0 and float(g(tf.constant(-3.0))) == 4.0
