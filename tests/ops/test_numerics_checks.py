"""check_numerics' messages and gradient, add_check_numerics_ops' chain, and the build-time
checks (assert_same_float_dtype, assert_proper_iterable, is_numeric_tensor,
assert_rank_in's errors) and assert_variables_initialized, as TF behaves."""

import numpy as np
import pytest

import dflab as tf
from dflab.framework import errors


@pytest.fixture(autouse=True)
def _fresh_graph():
    tf.reset_default_graph()
    yield
    tf.reset_default_graph()


@pytest.mark.parametrize("value,what", [([1.0, np.nan], "NaN"), ([np.inf, 1.0], "Inf"),
                                        ([np.nan, -np.inf], "Inf and NaN")])
def test_check_numerics_message_names_what_it_found(value, what):
    x = tf.placeholder(tf.float32, [2])
    y = tf.check_numerics(x, "boom", name="chk")
    with tf.Session() as sess:
        with pytest.raises(errors.InvalidArgumentError,
                           match=f"boom : Tensor had {what} values") as e:
            sess.run(y, {x: value})
    assert e.value.op.name == "chk"


def test_check_numerics_gradient_is_checked_too():
    x = tf.placeholder(tf.float32, [2])
    y = tf.check_numerics(x, "fwd")
    g = tf.gradients(y * tf.constant([1.0, np.inf]), x)[0]
    assert g.op.type == "CheckNumerics"
    assert g.op.get_attr("message") == ("Not a number (NaN) or infinity (Inf) values detected "
                                        "in gradient. fwd")
    with tf.Session() as sess:
        with pytest.raises(errors.InvalidArgumentError, match="detected in gradient. fwd"):
            sess.run(g, {x: [1.0, 2.0]})


def test_add_check_numerics_ops_chains_the_float_tensors_in_creation_order():
    a = tf.placeholder(tf.float32, [2], name="a")
    b = a * 2.0
    tf.constant(3)  # not floating: not checked
    group = tf.add_check_numerics_ops()
    checks = [op for op in tf.get_default_graph().get_operations()
              if op.type == "CheckNumerics"]
    assert [c.inputs[0] for c in checks] == [a, b.op.inputs[1], b]
    assert [c.get_attr("message") for c in checks] == ["a:0", b.op.inputs[1].name, b.name]
    assert list(checks[0].control_inputs) == []
    assert list(checks[1].control_inputs) == [checks[0]]
    assert list(checks[2].control_inputs) == [checks[1]]
    assert list(group.control_inputs) == [checks[2]]


def test_add_check_numerics_ops_refuses_control_flow():
    a = tf.placeholder(tf.float32, [2])
    tf.cond(a[0] > 0, lambda: a, lambda: a * 2.0)
    with pytest.raises(ValueError, match="not compatible with TensorFlow control flow"):
        tf.add_check_numerics_ops()


def test_assert_rank_in_errors():
    x = tf.placeholder(tf.float32, [None, 3])
    assert tf.assert_rank_in(x, (2, 4)).type == "NoOp"
    with pytest.raises(ValueError, match=r"msg\.  Tensor .* must have rank in \(1, 3\)\.  "
                                         r"Received rank 2"):
        tf.assert_rank_in(x, (1, 3), message="msg")
    with pytest.raises(TypeError, match="must be of type int32"):
        tf.assert_rank_in(x, (tf.constant(1, tf.int64),))


def test_assert_same_float_dtype():
    x = tf.placeholder(tf.float32)
    assert tf.assert_same_float_dtype([x, None]) == tf.float32
    assert tf.assert_same_float_dtype() == tf.float32
    assert tf.assert_same_float_dtype(None, tf.float64) == tf.float64
    with pytest.raises(ValueError, match="must be of the same type"):
        tf.assert_same_float_dtype([x, tf.constant(1.0, tf.float64)])
    with pytest.raises(ValueError, match="Expected floating point type"):
        tf.assert_same_float_dtype([tf.constant(1)])
    with pytest.raises(ValueError, match="must be of the same type"):
        tf.debugging.assert_same_float_dtype([x], tf.float64)


@pytest.mark.parametrize("value", [[1], (1,), {1: 2}, iter([1]), {3}])
def test_assert_proper_iterable_accepts(value):
    tf.assert_proper_iterable(value)


@pytest.mark.parametrize("value,match", [(np.zeros(2), "proper"), ("ab", "proper"),
                                         (b"a", "proper"), (3, "iterable")])
def test_assert_proper_iterable_refuses(value, match):
    with pytest.raises(TypeError, match=match):
        tf.assert_proper_iterable(value)
    with pytest.raises(TypeError, match="proper"):
        tf.assert_proper_iterable(tf.constant([1]))


def test_is_numeric_tensor():
    got = [tf.is_numeric_tensor(t) for t in (
        tf.placeholder(tf.float32), tf.constant(True), tf.constant("s"),
        tf.constant(1, tf.int64), tf.constant(1j), tf.constant(1, tf.uint8), 1.0, np.zeros(1))]
    assert got == [True, False, False, True, True, True, False, False]


@pytest.mark.parametrize("use_resource", [True, False])
def test_assert_variables_initialized(use_resource):
    assert tf.assert_variables_initialized() is None
    v1 = tf.Variable(1.0, use_resource=use_resource)
    tf.Variable([1.0, 2.0], use_resource=use_resource)
    both = tf.assert_variables_initialized()
    one = tf.assert_variables_initialized([v1])
    with tf.Session() as sess:
        with pytest.raises(errors.FailedPreconditionError):
            sess.run(both)
        sess.run(v1.initializer)
        assert sess.run(one) == 0
        with pytest.raises(errors.FailedPreconditionError):
            sess.run(both)
        sess.run(tf.global_variables_initializer())
        np.testing.assert_array_equal(sess.run(both), [0, 1])
