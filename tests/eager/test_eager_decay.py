"""``tf.train.*_decay`` executing eagerly, as TF's: every schedule is a ``functools.partial``
computing the rate of its step variable's value when called, and optimizers call it on each
update, so the rate decays (a tensor would hold the first step's rate for good). Expected
rates are TF 2.21's for the same schedules at steps 0..6."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import dflab as tf
from dflab.eager import eager_mode


@pytest.fixture
def eager():
    with eager_mode():
        yield


def _schedules(gs):
    t = tf.train
    return {
        "exp": t.exponential_decay(1.0, gs, 3, 0.5),
        "exp_stair": t.exponential_decay(1.0, gs, 3, 0.5, staircase=True),
        "inv": t.inverse_time_decay(1.0, gs, 2, 0.5),
        "nat": t.natural_exp_decay(1.0, gs, 2, 0.5),
        "poly": t.polynomial_decay(1.0, gs, 4, 0.1, power=2.0),
        "poly_cycle": t.polynomial_decay(1.0, gs, 2, 0.1, cycle=True),
        "pw": t.piecewise_constant(gs, [2, 4], [1.0, 0.5, 0.1]),
        "cos": t.cosine_decay(1.0, gs, 5, alpha=0.1),
        "cosr": t.cosine_decay_restarts(1.0, gs, 2),
        "lincos": t.linear_cosine_decay(1.0, gs, 5),
    }


TF_RATES = {  # TF 2.21, steps 0..6
    "exp": [1.0, 0.793701, 0.629961, 0.5, 0.39685, 0.31498, 0.25],
    "exp_stair": [1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.25],
    "inv": [1.0, 0.8, 0.666667, 0.571429, 0.5, 0.444444, 0.4],
    "nat": [1.0, 0.778801, 0.606531, 0.472367, 0.367879, 0.286505, 0.22313],
    "poly": [1.0, 0.60625, 0.325, 0.15625, 0.1, 0.1, 0.1],
    "poly_cycle": [1.0, 0.55, 0.1, 0.325, 0.1, 0.25, 0.1],
    "pw": [1.0, 1.0, 1.0, 0.5, 0.5, 0.1, 0.1],
    "cos": [1.0, 0.914058, 0.689058, 0.410942, 0.185942, 0.1, 0.1],
    "cosr": [1.0, 0.5, 1.0, 0.853553, 0.5, 0.146447, 1.0],
    "lincos": [1.001, 0.724607, 0.393705, 0.139197, 0.020098, 0.001, 0.001],
}


def test_every_schedule_is_a_callable_of_the_step(eager):
    gs = tf.Variable(0, dtype=tf.int64, trainable=False)
    schedules = _schedules(gs)
    schedules["noisy"] = tf.train.noisy_linear_cosine_decay(1.0, gs, 5)
    assert all(isinstance(s, functools.partial) for s in schedules.values())
    got = {k: [] for k in TF_RATES}
    for step in range(7):
        gs.assign(step)
        for k in TF_RATES:
            got[k].append(float(schedules[k]().numpy()))
        assert np.isfinite(schedules["noisy"]().numpy())
    for k, want in TF_RATES.items():
        np.testing.assert_allclose(got[k], want, rtol=1e-5, atol=1e-6, err_msg=k)


def test_optimizers_call_the_schedule_on_each_update(eager):
    gs = tf.Variable(0, dtype=tf.int64, trainable=False)
    w = tf.Variable(1.0)
    opt = tf.train.GradientDescentOptimizer(tf.train.exponential_decay(1.0, gs, 1, 0.5))
    for _ in range(3):
        opt.minimize(lambda: w * 1.0, global_step=gs)
    assert w.numpy() == -0.75  # rates 1, .5, .25 (TF's)
    gs.assign(0)
    w = tf.Variable(1.0)
    opt = tf.train.MomentumOptimizer(tf.train.exponential_decay(1.0, gs, 1, 0.5), 0.0)
    for _ in range(3):
        opt.minimize(lambda: w * 1.0, global_step=gs)
    assert w.numpy() == -0.75
    w = tf.Variable(1.0)
    opt = tf.train.AdamOptimizer(tf.train.piecewise_constant(gs, [4], [0.1, 0.01]))
    for _ in range(3):
        opt.minimize(lambda: w * 1.0, global_step=gs)
    np.testing.assert_allclose(w.numpy(), 0.79000044, rtol=1e-6)  # TF's


def test_checks_are_made_when_the_schedule_is_made(eager):
    gs = tf.Variable(0, dtype=tf.int64)
    with pytest.raises(ValueError, match="1 less than the length of values"):
        tf.train.piecewise_constant(gs, [2, 4], [1.0, 0.5])
    with pytest.raises(ValueError, match="must have the same dtype as x"):
        tf.train.piecewise_constant(gs, [2.0], [1.0, 0.5])


def test_a_graph_still_gets_the_rates_tensor():
    with tf.Graph().as_default():
        gs = tf.Variable(2, dtype=tf.int64, trainable=False)
        rate = tf.train.exponential_decay(1.0, gs, 2, 0.5)
        assert isinstance(rate, tf.Tensor)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            assert sess.run(rate) == 0.5
