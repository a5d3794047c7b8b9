"""``tf.train.ExponentialMovingAverage`` executing eagerly, as TF's: a shadow starts from its
variable's value when ``apply`` first sees it (TF's ``cond(initialized, read, initial)``),
not from the initial value; only variables are averaged. Values are TF 2.21's."""

from __future__ import annotations

import numpy as np
import pytest

import dflab as tf
from dflab.eager import eager_mode


@pytest.fixture
def eager():
    with eager_mode():
        yield


def test_the_shadow_starts_from_the_current_value(eager):
    v = tf.Variable(1.0)
    v.assign(5.0)
    ema = tf.train.ExponentialMovingAverage(0.5)
    ema.apply([v])
    assert ema.average(v).numpy() == 5.0
    w = tf.Variable([1.0, 2.0])
    w.assign([3.0, 4.0])
    ema = tf.train.ExponentialMovingAverage(0.9)
    ema.apply([w])
    w.assign([13.0, 14.0])
    ema.apply([w])
    np.testing.assert_allclose(ema.average(w).numpy(), [4.0, 5.0])


def test_with_num_updates(eager):
    v = tf.Variable(1.0)
    v.assign(5.0)
    ema = tf.train.ExponentialMovingAverage(0.5, num_updates=tf.Variable(3))
    ema.apply([v])
    assert ema.average(v).numpy() == 5.0
    v.assign(1.0)
    ema.apply([v])  # decay min(0.5, 4 / 13)
    np.testing.assert_allclose(ema.average(v).numpy(), 2.2307692, rtol=1e-6)


def test_a_tensor_is_refused_eagerly(eager):
    ema = tf.train.ExponentialMovingAverage(0.5, zero_debias=True)
    with pytest.raises(TypeError, match="does not support non-Variable tensors when eager "
                                        "execution is enabled"):
        ema.apply([tf.constant(4.0)])
