"""A variable as the target of ``GradientTape.gradient``, as TF's: its handle is the target,
so d v/d v is one of the variable's shape (watched or not, as a source that is a target
always gets its gradient) and a read on the tape adds its part. Expected values read off
TensorFlow 2.21."""

from __future__ import annotations

import numpy as np
import pytest

import dflab as tf
from dflab.eager import eager_mode


@pytest.fixture(autouse=True)
def eager():
    with eager_mode():
        yield


def test_a_variable_target_is_its_own_gradient_plus_its_reads():
    v = tf.Variable(3.0)
    with tf.GradientTape(persistent=True) as tape:
        y = v * 2.0
    assert float(tape.gradient(v, v)) == 1.0
    assert float(tape.gradient([y, v], v)) == 3.0
    assert float(tape.gradient(v, v, output_gradients=tf.constant(5.0))) == 5.0


def test_a_vector_variable_target():
    w = tf.Variable([1.0, 2.0])
    v = tf.Variable(3.0)
    with tf.GradientTape(persistent=True) as tape:
        z = tf.reduce_sum(w * w)
    np.testing.assert_array_equal(tape.gradient(w, w).numpy(), [1.0, 1.0])
    np.testing.assert_array_equal(tape.gradient([z, w], w).numpy(), [3.0, 5.0])
    assert tape.gradient(w, v) is None
    zero = tape.gradient(w, v, unconnected_gradients=tf.UnconnectedGradients.ZERO)
    assert float(zero) == 0.0


def test_a_target_that_is_a_source_needs_no_watching():
    u = tf.Variable(1.0)
    with tf.GradientTape(watch_accessed_variables=False) as tape:
        q = u * 3.0
    assert float(tape.gradient(u, u)) == 1.0
    with tf.GradientTape() as tape:
        q = u * 3.0
    assert tape.gradient(u, q) is None
    x = tf.constant(2.0)
    with tf.GradientTape() as tape:
        _ = x * 3
    assert float(tape.gradient(x, x)) == 1.0


def test_jacobian_of_a_variable_by_itself():
    v = tf.Variable([1.0, 2.0])
    with tf.GradientTape(persistent=True) as tape:
        y = v * v
    np.testing.assert_array_equal(tape.jacobian(v, v).numpy(), [[1.0, 0.0], [0.0, 1.0]])
    np.testing.assert_array_equal(tape.jacobian(y, v).numpy(), [[2.0, 0.0], [0.0, 4.0]])
