"""AutoGraph: Python control flow becomes cond/while_loop/print ops when its conditions are
tensors being traced, stays Python otherwise, and what cannot convert is refused naming the
line."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import dflab as tf
from dflab.autograph import ConversionError, convert
from dflab.eager import eager_mode


@pytest.fixture(autouse=True)
def _eager():
    with eager_mode():
        yield


def _op_types(fn, *args):
    concrete = fn.get_concrete_function(*args)
    return [op.type for op in concrete.graph.get_operations()]


def collatz_steps(n):
    steps = 0
    while n > 1:
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        steps += 1
    return steps


def _py_collatz(n):
    steps = 0
    while n > 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps


def test_a_tensor_while_and_if_become_a_while_loop_with_a_cond():
    f = tf.function(collatz_steps)
    for n in (1, 6, 27, 97):
        assert int(f(tf.constant(n))) == _py_collatz(n)
    types = _op_types(f, tf.constant(27))
    assert {"Enter", "Exit", "LoopCond", "NextIteration", "Switch", "Merge"} <= set(types)
    # One trace serves every n: the loop is in the graph.
    assert f.experimental_get_tracing_count() == 1


def test_python_conditions_stay_python():
    f = tf.function(collatz_steps)
    assert int(f(27)) == _py_collatz(27)  # a Python int: the loop unrolls at trace time
    types = _op_types(f, 27)
    assert "LoopCond" not in types and "Switch" not in types


def test_for_over_tf_range_with_break_and_continue():
    def odd_sum_until(n, limit):
        total = tf.constant(0)
        for i in tf.range(n):
            if i % 2 == 0:
                continue
            if total > limit:
                break
            total += i
        return total

    f = tf.function(odd_sum_until)

    def ref(n, limit):
        total = 0
        for i in range(n):
            if i % 2 == 0:
                continue
            if total > limit:
                break
            total += i
        return total

    for n, limit in ((10, 100), (20, 12), (0, 5)):
        assert int(f(tf.constant(n), tf.constant(limit))) == ref(n, limit)
    assert "LoopCond" in _op_types(f, tf.constant(10), tf.constant(5))


def test_for_over_a_tensor_iterates_its_rows():
    def row_norms(m):
        out = tf.constant(0.0)
        for row in m:
            out += tf.reduce_sum(row * row)
        return out

    m = np.arange(6.0, dtype=np.float32).reshape(3, 2)
    f = tf.function(row_norms, input_signature=[tf.TensorSpec([None, 2])])
    assert float(f(m)) == float((m * m).sum())


def test_early_returns_become_a_cond_and_boolean_operators_convert():
    def clip_sign(x):
        if x > 0 and x < 10:
            return x
        if not x > -10:
            return tf.constant(-10.0)
        return tf.minimum(x, 10.0)

    f = tf.function(clip_sign)
    for v, want in ((3.0, 3.0), (30.0, 10.0), (-30.0, -10.0), (-3.0, -3.0)):
        assert float(f(tf.constant(v))) == want
    assert "Merge" in _op_types(f, tf.constant(1.0))


def test_print_on_a_traced_tensor_is_a_print_op(capfd):
    def show(x):
        for i in tf.range(3):
            print("step", i)
        print("python side")
        return x

    f = tf.function(show)
    f(tf.constant(1.0))
    out = capfd.readouterr().out
    assert "python side" in out  # printed once, while tracing
    assert "step 0" in out and "step 2" in out  # printed by the graph's op, each iteration
    f(tf.constant(2.0))
    out = capfd.readouterr().out
    assert "python side" not in out and "step 1" in out


def test_a_variable_defined_in_one_branch_only_is_refused_naming_the_line():
    def bad(x):
        if x > 0:
            y = x
        return y

    line = inspect.getsourcelines(bad)[1] + 1
    with pytest.raises(ConversionError, match=f"'y' must also be initialized in the else "
                                              f"branch .*test_autograph.py:{line}"):
        tf.function(bad)(tf.constant(1.0))


def test_a_return_inside_a_tensor_loop_is_refused_naming_the_line():
    def bad(n):
        i = tf.constant(0)
        while i < n:
            if i > 3:
                return i
            i += 1
        return i

    line = inspect.getsourcelines(bad)[1] + 2
    with pytest.raises(ConversionError, match=f"`while` at .*test_autograph.py:{line}.*"
                                              "its body returns"):
        tf.function(bad)(tf.constant(10))
    assert int(bad(tf.constant(10))) == 4  # eagerly, the same code is plain Python


def test_converted_code_keeps_the_users_line_numbers():
    def fails(x):
        if x > 0:
            y = tf.reshape(x, [3])  # a static shape error while tracing
        else:
            y = x
        return y

    line = inspect.getsourcelines(fails)[1] + 2
    with pytest.raises(ValueError) as info:
        tf.function(fails)(tf.constant(1.0))
    assert f"test_autograph.py:{line}" in str(info.value)


def test_convert_leaves_what_it_cannot_read_as_it_is():
    lam = lambda x: x + 1  # noqa: E731
    assert convert(lam) is lam
    assert convert(len) is len


def test_closures_and_defaults_survive_conversion():
    k = 3.0

    def scale(x, n=2):
        total = x
        for _ in range(n):
            total = total * k
        return total

    f = tf.function(scale)
    assert float(f(tf.constant(1.0))) == 9.0
    assert float(f(tf.constant(1.0), 3)) == 27.0
