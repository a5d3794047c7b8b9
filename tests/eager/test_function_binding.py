"""How calls bind to traced functions, as TF 2's: a concrete function's keywords by name, its
dtypes checked and Python values converted; an ``input_signature`` converting Python values
and fixing the other parameters to their defaults; NumPy scalars as tensors. Expected values
and error classes were read off TF 2.21."""

from __future__ import annotations

import numpy as np
import pytest

import dflab as tf
from dflab.eager import eager_mode


@pytest.fixture(autouse=True)
def eager():
    with eager_mode():
        yield


def test_a_concrete_function_binds_keywords_by_parameter_name():
    @tf.function
    def f(b, a):
        return b - a

    cf = f.get_concrete_function(tf.TensorSpec([]), tf.TensorSpec([]))
    assert float(cf(b=tf.constant(10.0), a=tf.constant(1.0))) == 9.0  # not sorted: -9
    assert float(cf(tf.constant(10.0), a=tf.constant(1.0))) == 9.0
    assert float(cf(10.0, np.float64(1.0))) == 9.0  # Python and NumPy values converted
    with pytest.raises(TypeError, match="missing a required argument: 'a'"):
        cf(tf.constant(10.0))
    with pytest.raises(TypeError, match="too many positional arguments"):
        cf(tf.constant(1.0), tf.constant(2.0), tf.constant(3.0))
    with pytest.raises(TypeError, match="unexpected keyword argument 'c'"):
        cf(b=tf.constant(10.0), c=tf.constant(1.0))


def test_a_concrete_function_checks_dtypes_and_converts_values():
    @tf.function
    def g(x):
        return x * 2

    cg = g.get_concrete_function(tf.TensorSpec([None], tf.float32))
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"input #0\(zero-based\) was expected to be a float32 tensor but "
                             "is a int32 tensor"):
        cg(tf.constant([3, 4]))
    for value in (np.array([3, 4]), [3.0, 4.0]):
        out = cg(value)
        assert out.dtype == tf.float32 and out.numpy().dtype == np.float32
        np.testing.assert_allclose(out.numpy(), [6.0, 8.0])
    assert (cg.output_dtypes, cg.output_shapes.as_list()) == (tf.float32, [None])


def test_a_concrete_function_keeps_its_python_arguments():
    @tf.function
    def h(x, n):
        return x * n

    ch = h.get_concrete_function(tf.TensorSpec([], tf.float32), 3)
    assert float(ch(tf.constant(2.0))) == 6.0
    assert float(ch(x=tf.constant(2.0), n=3)) == 6.0
    with pytest.raises(TypeError, match="traced as 3"):
        ch(tf.constant(2.0), 4)


def test_an_input_signature_converts_python_values_and_fixes_other_arguments():
    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32)])
    def f(x, training=False):
        return x * 10.0 if training else x

    np.testing.assert_allclose(f([1.0, 2.0]).numpy(), [1.0, 2.0])
    np.testing.assert_allclose(f(np.array([1, 2]), training=False).numpy(), [1.0, 2.0])
    with pytest.raises(TypeError, match="training=True is outside the input_signature"):
        f(tf.constant([1.0]), training=True)  # it had run the training=False trace

    @tf.function(input_signature=[{"a": tf.TensorSpec([2], tf.float32),
                                   "b": tf.TensorSpec([], tf.int32)}, tf.TensorSpec([])])
    def g(d, s):
        return tf.reduce_sum(d["a"]) * tf.cast(d["b"], tf.float32) + s

    assert float(g({"b": 2, "a": [1.0, 2.0]}, 3.0)) == 9.0
    assert g.experimental_get_tracing_count() == 1


def test_numpy_scalars_are_tensors_to_tracing():
    @tf.function
    def step(x, lr):
        return x * lr

    for lr in (np.float32(0.5), np.float32(0.25), np.float32(0.1)):
        np.testing.assert_allclose(float(step(tf.constant(2.0), lr)), 2.0 * lr, rtol=1e-6)
    assert step.experimental_get_tracing_count() == 1
    for lr in (np.float64(0.5), np.float64(0.2)):  # (a float subclass: not a Python value)
        step(tf.constant(2.0, tf.float64), lr)
    assert step.experimental_get_tracing_count() == 2


def test_pretty_printed_concrete_signatures_use_tfs_layout():
    @tf.function
    def g(x):
        return x * 2

    g.get_concrete_function(tf.TensorSpec([None], tf.float32))
    text = g.pretty_printed_concrete_signatures()
    assert text.splitlines()[0] == "Input Parameters:"
    assert "  x (POSITIONAL_OR_KEYWORD): TensorSpec(shape=(None,), dtype=tf.float32" in text
    assert "Output Type:\n  TensorSpec(shape=(None,), dtype=tf.float32, name=None)" in text
    assert text.endswith("Captures:\n  None")


class _Scaled:
    def __init__(self, k):
        self.k = k

    @tf.function
    def f(self, x):
        return x * self.k


class _Slotted:
    __slots__ = ("k",)

    def __init__(self, k):
        self.k = k

    @tf.function
    def f(self, x):
        return x * self.k


def test_a_method_traces_per_instance_and_copies_get_their_own():
    import copy
    import gc
    import weakref

    a = _Scaled(2.0)
    assert float(a.f(tf.constant(1.0))) == 2.0
    b = copy.copy(a)
    b.k = 100.0
    assert float(b.f(tf.constant(1.0))) == 100.0  # (it had run a's trace: 2.0)
    c = copy.deepcopy(a)  # (the instance's __dict__ holds no traced function)
    c.k = 7.0
    assert float(c.f(tf.constant(1.0))) == 7.0
    s = _Slotted(3.0)
    assert float(s.f(tf.constant(1.0))) == 3.0
    assert float(s.f(tf.constant(2.0))) == 6.0
    gone = weakref.ref(a)
    del a
    gc.collect()
    assert gone() is None  # the traced function keeps no instance alive


def test_a_callable_object_has_its_call_converted():
    class Gate:
        def __call__(self, x):
            if tf.reduce_sum(x) > 0:  # a tensor condition: AutoGraph's cond
                return x * 2.0
            return -x

    f = tf.function(Gate())
    assert float(f(tf.constant(3.0))) == 6.0
    assert float(f(tf.constant(-3.0))) == 3.0


def test_a_variable_made_from_the_arguments_is_assigned_by_the_first_call():
    made = []

    @tf.function
    def g(x):
        if not made:
            made.append(tf.Variable(x))
        made[0].assign_add(x)
        return made[0].read_value()

    assert float(g(tf.constant(1.0))) == 2.0  # (TF's: initialized to x, then x added)
    assert float(g(tf.constant(1.0))) == 3.0
    assert float(g(tf.constant(5.0))) == 8.0  # (the trace that assigns it ran once)

    class Scale(tf.Module):
        @tf.function
        def __call__(self, x):
            if not hasattr(self, "s"):
                self.s = tf.Variable(tf.ones_like(x[0]) * 2.0)  # shaped from the input
            return x * self.s

    scale = Scale()
    assert scale(tf.ones([2, 3])).numpy().tolist() == [[2.0] * 3] * 2
    assert scale.s.numpy().tolist() == [2.0] * 3


def test_a_variable_made_from_the_arguments_needs_eager_calls_and_a_known_shape():
    @tf.function
    def unknown(x):
        v = tf.Variable(x)
        return v.read_value()

    with pytest.raises(ValueError, match=r"depends on the function's arguments and its shape "):
        unknown.get_concrete_function(tf.TensorSpec([None]))
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [2])
        with pytest.raises(ValueError, match="depends on the function's arguments"):
            tf.function(lambda x: tf.Variable(x * 2.0).read_value())(x)


def test_argument_placeholders_are_named_as_their_parameters():
    @tf.function
    def f(x, pair, steps=2):
        return x * pair[0] + pair[1]

    cf = f.get_concrete_function(tf.TensorSpec([2]), (tf.TensorSpec([]), tf.TensorSpec([])))
    assert [t.name for t in cf.inputs] == ["x:0", "pair:0", "pair_1:0"]

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32, name="values")])
    def g(v):
        return v + 1.0

    assert [t.name for t in g.get_concrete_function().inputs] == ["values:0"]
    assert isinstance(g.input_signature, tuple)


def test_second_order_gradients_through_a_traced_function_under_nested_tapes():
    @tf.function
    def cube(x):
        return x * x * x

    @tf.function
    def mlp(x, w):
        return tf.reduce_sum(tf.tanh(tf.matmul(x, w)) ** 2)

    z = tf.constant(2.0)
    with tf.GradientTape() as outer:
        outer.watch(z)
        with tf.GradientTape() as inner:
            inner.watch(z)
            y = cube(z)
        dy = inner.gradient(y, z)
    assert (float(dy), float(outer.gradient(dy, z))) == (12.0, 12.0)  # 3z^2, 6z

    x = tf.constant([[0.5, -1.0]])
    w = tf.constant([[0.3], [0.2]])

    def penalty(fn):  # a gradient penalty: the norm of d loss / d x, differentiated for w
        with tf.GradientTape() as outer:
            outer.watch(w)
            with tf.GradientTape() as inner:
                inner.watch(x)
                loss = fn(x, w)
            gx = inner.gradient(loss, x)
            p = tf.reduce_sum(gx * gx)
        return float(p), outer.gradient(p, w).numpy()

    traced, plain = penalty(mlp), penalty(mlp.python_function)
    np.testing.assert_allclose(traced[0], plain[0], rtol=1e-6)
    np.testing.assert_allclose(traced[1], plain[1], rtol=1e-5)


def test_a_variable_from_the_arguments_of_a_function_called_by_another():
    class M(tf.Module):
        def __init__(self):
            super().__init__()
            self.v = None

        @tf.function
        def __call__(self, x):
            if self.v is None:
                self.v = tf.Variable(x * 2.0)
            self.v.assign_add(tf.ones_like(x))
            return self.v.read_value()

    m = M()

    @tf.function
    def outer(x):
        return m(x)

    assert outer(tf.constant([1.0, 2.0])).numpy().tolist() == [3.0, 5.0]  # (TF's; zeros + 1)
    assert outer(tf.constant([5.0, 5.0])).numpy().tolist() == [4.0, 6.0]
    fresh = M()
    with pytest.raises(ValueError, match="call the function once before taking a concrete"):
        fresh.__call__.get_concrete_function(tf.TensorSpec([2]))


def test_a_second_order_gradient_reaches_a_captured_variable():
    v = tf.Variable(2.0)

    @tf.function
    def f(x):
        return x * x * v

    x = tf.constant(3.0)
    with tf.GradientTape() as outer:
        with tf.GradientTape() as inner:
            inner.watch(x)
            y = f(x)
        gx = inner.gradient(y, x)  # 2xv
    assert (float(gx), float(outer.gradient(gx, v))) == (12.0, 6.0)


def test_parameters_that_are_no_node_names_and_unhashable_instances():
    import dataclasses

    @tf.function
    def f(_x):
        return _x * 2.0

    assert float(f(tf.constant(1.0))) == 2.0  # ('_x' is no valid node name: "Placeholder")

    @tf.function(input_signature=[tf.TensorSpec([], tf.float32, name="in put")])
    def g(x):
        return x * 3.0

    assert float(g(tf.constant(1.0))) == 3.0

    @dataclasses.dataclass
    class P:
        k: float = 2.0

        @tf.function
        def f(self, x):
            return x * self.k

    p = P()
    assert float(p.f(tf.constant(3.0))) == 6.0  # (a dataclass is unhashable)
    cf = p.f.get_concrete_function(tf.TensorSpec([], tf.float32))
    assert float(cf(tf.constant(4.0))) == 8.0
    assert float(P(7.0).f(tf.constant(1.0))) == 7.0  # (a temporary instance lives its call)
