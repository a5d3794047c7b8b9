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


def test_a_helper_is_converted_once():
    assert convert(sign_of) is convert(functools.partial(sign_of)).func  # per function
    closures = []
    for scale in (2.0, 3.0):
        def scaled(x, scale=scale):
            return x * scale
        closures.append(convert(scaled))
    assert closures[0] is not closures[1]  # two functions of one ``def``: one code object
    assert closures[0].__code__ is closures[1].__code__
    assert closures[1](1.0) == 3.0 and closures[0](1.0) == 2.0
    assert closures[0].__code__.co_qualname.endswith("scaled")  # tracebacks name the user's


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


# --- what the review of converted calls found (each compared with TF 2.21) --------------------
def with_default_lambda(x, key=lambda v: -v):
    return x + sorted([3.0, 1.0, 2.0], key=key)[0]


def with_default_comprehension(n, names=[k for k in "ab"]):  # noqa: B006
    return n + len(names)


def returns_early(x, flag):
    if flag:
        x = x + 1.0
        return x
    return x


def found_in_rows(rows, target):
    for row in rows:
        for value in row:
            if value == target:
                return value * 10
    return -1


class _Private:
    def __init__(self):
        self.__weight = 5.0

    def scaled(self, x):
        text = """a
            b"""
        if x > 0:
            y = x * self.__weight
        else:
            y = x
        return y, text


class _StaticCall:
    @staticmethod
    def __call__(x):
        if x > 0:
            y = x * 2.0
        else:
            y = -x
        return y


class _ClassCall:
    scale = 3.0

    @classmethod
    def __call__(cls, x):
        if x > 0:
            y = x * cls.scale
        else:
            y = -x
        return y


def test_helpers_convert_as_their_python_runs():
    @tf.function
    def f(x):
        return (with_default_lambda(x), with_default_comprehension(x),
                returns_early(x, True), returns_early(x, False))

    # (the first had run the default's lambda as the helper; the second had crashed)
    assert [float(v) for v in f(tf.constant(1.0))] == [4.0, 3.0, 2.0, 1.0]
    rows = [[1, 2], [3, 4]]
    assert int(tf.function(lambda t: found_in_rows(rows, t))(3)) == 30
    value, text = tf.function(lambda x: _Private().scaled(x))(tf.constant(2.0))
    assert float(value) == 10.0  # ``self.__weight``: the class's mangled name
    assert text.numpy() == b"a\n            b"  # a multi-line string as written
    assert float(tf.function(lambda x: _StaticCall()(x))(tf.constant(-2.0))) == 2.0
    assert float(tf.function(lambda x: _ClassCall()(x))(tf.constant(2.0))) == 6.0


def test_installed_packages_are_called_as_written():
    import linecache

    filename = "/usr/lib/python3/site-packages/some_library/module.py"
    source = "def branchy(x):\n    if x > 0:\n        return 1\n    return 2\n"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"__name__": "some_library.module"}
    exec(compile(source, filename, "exec"), namespace)
    assert converted_call(namespace["branchy"]) is namespace["branchy"]
    namespace["__name__"] = "__main__"  # the same code in the user's own file is converted
    user_file = "/home/user/project/model.py"
    linecache.cache[user_file] = (len(source), None, source.splitlines(True), user_file)
    exec(compile(source, user_file, "exec"), namespace)
    assert converted_call(namespace["branchy"]).__dflab_autograph__


class _Watched:
    """An attribute behind a property: how often it is read and set."""

    def __init__(self):
        self.reads = self.writes = 0
        self._h = 1.0

    @property
    def h(self):
        self.reads += 1
        return self._h

    @h.setter
    def h(self, value):
        self.writes += 1
        self._h = value


def set_when(obj, flag):
    if flag:
        obj.h = 5.0
    return obj.writes


def test_a_python_statement_reads_and_sets_attributes_only_as_python_does():
    watched = _Watched()
    assert int(tf.function(lambda: set_when(watched, True))()) == 1  # TF 2.21: 1 (it was 3)
    assert watched.reads == 0 and watched.h == 5.0

    class Cell:
        def __init__(self):
            self.h = tf.constant(5.0)  # made eagerly, assigned in one branch of a tensor if

        @tf.function
        def run(self, x):
            if x > 0:
                self.h = x
            return self.h

    assert float(Cell().run(tf.constant(-2.0))) == 5.0  # TF 2.21: 5.0 (it had crashed)
    assert float(Cell().run(tf.constant(2.0))) == 2.0
    e = tf.constant(3.0)
    picked = tf.function(lambda x: tf.cond(x > 0, lambda: e, lambda: x))
    assert float(picked(tf.constant(1.0))) == 3.0  # an eager tensor a branch returns


def test_builtins_of_variables_and_chained_comparisons():
    v = tf.Variable([1.0, 2.0, 3.0])
    n = tf.Variable(3)

    @tf.function
    def f():
        total = tf.constant(0)
        for i in range(n):  # a variable's range: a while_loop
            total += i
        return len(v), int(v[0] * 3.0), float(n), abs(-v[2]), total

    assert [float(t) for t in f()] == [3.0, 3.0, 3.0, 3.0, 3.0]
    between = tf.function(lambda x: 0 < x < 5)
    assert bool(between(tf.constant(3))) and not bool(between(tf.constant(7)))
    assert bool(tf.function(lambda x: 1 == x != 2)(tf.constant(1)))


class _Doubler:
    def __call__(self, x):
        if x > 2:
            y = x * 2
        else:
            y = x
        return y


def test_dataset_functions_may_be_callable_objects():
    assert [int(e) for e in tf.data.Dataset.range(4).map(_Doubler())] == [0, 1, 2, 6]


# --- the second review's findings (each compared with TF 2.21) --------------------------------
def scaled_by_default(x, k=1.0):
    if x > 0:
        y = x * k
    else:
        y = x
    return y


class _Box:
    pass


def test_what_the_second_review_found():
    @tf.function
    def named(x):
        return x * 2.0, named.__name__  # its own name, inside its body (a KeyError before)

    value, name = named(tf.constant(1.0))
    assert float(value) == 2.0 and name.numpy() == b"named"
    first = tf.function(lambda x: scaled_by_default(x))
    assert float(first(tf.constant(2.0))) == 2.0
    scaled_by_default.__defaults__ = (10.0,)  # the memo follows the function's defaults
    try:
        assert float(tf.function(lambda x: scaled_by_default(x))(tf.constant(2.0))) == 20.0
    finally:
        scaled_by_default.__defaults__ = (1.0,)

    @tf.function
    def both_return(x):  # a global's value in a tensor if that returns from both branches
        global _COUNT
        if x > 0:
            _COUNT += 1
            return x + _COUNT
        else:
            _COUNT += 10
            return x - _COUNT

    assert float(both_return(tf.constant(-1.0))) == -11.0 and _COUNT == 0  # TF 2.21 too

    @tf.function
    def made_in_loop(x):
        s = tf.constant(0.0)
        for _ in tf.range(3):
            box = _Box()
            box.v = x
            s += box.v
        return s

    assert float(made_in_loop(tf.constant(2.0))) == 6.0
    e = tf.constant(5.0)

    @tf.function
    def loop_gives_eager(n):
        return tf.while_loop(lambda i, v: i < n, lambda i, v: (i + 1, e), [0, 0.0])

    assert [float(t) for t in loop_gives_eager(tf.constant(3))] == [3.0, 5.0]


_COUNT = 0


def clip_or_flip(v):
    if v > 2:
        r = v * 10
    else:
        r = -v
    return r


def every_other(i, acc):
    if i % 2 == 0:  # unconverted, ``==`` of tensors is identity (False): nothing summed
        acc = acc + i
    return i + 1, acc


def three_steps():
    s = tf.constant(0.0)
    for i in tf.range(3):
        s += tf.cast(i, tf.float32)
    return s


def test_functions_given_to_control_flow_builders_are_converted():
    @tf.function
    def f(x):
        mapped = tf.map_fn(clip_or_flip, x)
        picked = tf.cond(x[0] > 0, three_steps, lambda: tf.constant(-1.0))
        summed = tf.while_loop(lambda i, acc: i < 5, every_other, [0, 0])[1]
        folded = tf.foldl(lambda acc, v: acc + clip_or_flip(v), x, initializer=0.0)
        return mapped, picked, summed, folded

    mapped, picked, summed, folded = f(tf.constant([1.0, 3.0]))
    assert mapped.numpy().tolist() == [-1.0, 30.0]  # TF 2.21: the same
    assert (float(picked), int(summed), float(folded)) == (3.0, 6, 29.0)
