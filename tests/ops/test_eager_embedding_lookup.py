"""Embedding lookups executing eagerly on tensors, not only variables: one shard or several
("mod" and "div"), ``max_norm``, the sampled losses built on them, and their gradient.
Expected values read off TensorFlow 2.21."""

from __future__ import annotations

import numpy as np
import pytest

import dflab as tf
from dflab.eager import eager_mode


@pytest.fixture(autouse=True)
def eager():
    with eager_mode():
        yield


PARAMS = [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]


def test_lookup_in_a_tensor_and_in_shards():
    params = tf.constant(PARAMS)
    np.testing.assert_array_equal(tf.nn.embedding_lookup(params, [[2, 0]]).numpy(),
                                  [[[5.0, 6.0], [1.0, 2.0]]])
    p0, p1 = tf.constant([[1.0, 1.0], [2.0, 2.0]]), tf.constant([[3.0, 3.0]])
    np.testing.assert_array_equal(tf.nn.embedding_lookup([p0, p1], [0, 1, 2]).numpy(),
                                  [[1.0, 1.0], [3.0, 3.0], [2.0, 2.0]])
    np.testing.assert_array_equal(
        tf.nn.embedding_lookup([p0, p1], [0, 1, 2], partition_strategy="div").numpy(),
        [[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]])
    np.testing.assert_allclose(tf.nn.embedding_lookup(params, [2], max_norm=1.0).numpy(),
                               [[0.6401844, 0.76822126]], rtol=1e-6)
    normalized = tf.nn.l2_normalize(tf.Variable(params), 1)
    np.testing.assert_allclose(tf.nn.embedding_lookup(normalized, [1]).numpy(), [[0.6, 0.8]])


def test_gradient_of_a_lookup_in_a_tensor():
    params = tf.constant(PARAMS)
    with tf.GradientTape() as tape:
        tape.watch(params)
        y = tf.reduce_sum(tf.nn.embedding_lookup(params, [2, 2]))
    grad = tf.convert_to_tensor(tape.gradient(y, params))
    np.testing.assert_array_equal(grad.numpy(), [[0.0, 0.0], [0.0, 0.0], [2.0, 2.0]])


def test_sampled_losses_on_tensors():
    sampled = (tf.constant([1, 3], tf.int64), tf.constant([[0.5]]), tf.constant([0.25, 0.5]))
    weights = tf.reshape(tf.range(15, dtype=tf.float32), [5, 3]) / 10.0
    inputs = tf.reshape(tf.range(6, dtype=tf.float32), [2, 3]) / 5.0
    labels = tf.constant([[0], [1]], tf.int64)
    ssl = tf.nn.sampled_softmax_loss(weights, tf.zeros([5]), labels, inputs, 2, 5,
                                     sampled_values=sampled)
    np.testing.assert_allclose(ssl.numpy(), [1.6312857, 1.6526308], rtol=1e-6)
    nce = tf.nn.nce_loss(weights, tf.zeros([5]), labels, inputs, 2, 5, sampled_values=sampled)
    np.testing.assert_allclose(nce.numpy(), [3.7797403, 5.81893], rtol=1e-6)
