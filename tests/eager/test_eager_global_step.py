"""The global step executing eagerly, as TF's: ``get_or_create_global_step`` makes it once
per eager context and returns that variable again, ``get_global_step`` finds it, and
``global_step(None, step)`` reads it (TF 2.21's results for the same program)."""

from __future__ import annotations

import numpy as np
import pytest

import dflab as tf
from dflab.eager import eager_mode
from dflab.train import training_util


@pytest.fixture
def eager():
    # The step belongs to the process's eager context: each test starts without one.
    steps = getattr(training_util, "_EAGER_STEPS", {})
    with eager_mode():
        steps.pop(tf.get_default_graph(), None)
        yield
        steps.pop(tf.get_default_graph(), None)


def test_one_global_step_per_eager_context(eager):
    assert tf.train.get_global_step() is None
    with tf.variable_scope("s"):
        step = tf.train.get_or_create_global_step()
    assert step.name == "s/global_step:0" and step.dtype == tf.int64
    assert step.shape == () and not step.trainable and step.device.endswith("CPU:0")
    assert tf.train.get_global_step() is step
    assert tf.train.get_or_create_global_step() is step
    assert tf.global_variables() == []
    with pytest.raises(ValueError, match='"global_step" already exists.'):
        tf.train.create_global_step()
    w = tf.Variable(1.0)
    opt = tf.train.GradientDescentOptimizer(0.1)
    opt.minimize(lambda: w * 2.0, global_step=tf.train.get_or_create_global_step())
    assert int(step.numpy()) == 1 and tf.train.global_step(None, step) == 1


def test_a_graph_keeps_its_own(eager):
    step = tf.train.get_or_create_global_step()
    with tf.Graph().as_default():
        in_graph = tf.train.get_or_create_global_step()
        assert in_graph.name == "global_step:0" and in_graph is not step
        assert tf.train.get_global_step() is in_graph
    assert tf.train.get_global_step() is step


def test_a_traced_function_finds_the_eager_step(eager):
    step = tf.train.get_or_create_global_step()
    w = tf.Variable(1.0)
    opt = tf.train.GradientDescentOptimizer(0.1)
    seen = []

    @tf.function
    def train():
        seen.append(tf.train.get_global_step())
        opt.minimize(lambda: w * 2.0, global_step=tf.train.get_or_create_global_step())

    train()
    train()
    assert seen and all(s is step for s in seen)
    assert int(step.numpy()) == 2 and w.numpy() == np.float32(0.6)  # TF's
