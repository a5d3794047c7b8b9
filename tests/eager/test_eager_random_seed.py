"""``tf.set_random_seed`` eagerly, as TF's ``context.set_global_seed``: the same seed gives the
same draws again in one process (op seeds drawn from a sequence the seed starts, every random
op's stream started again), for random ops, initializers and dropout."""

import numpy as np
import pytest

import dflab as tf
from dflab.eager import eager_mode


@pytest.fixture(autouse=True)
def eager():
    with eager_mode():
        yield
        tf.set_random_seed(None)  # (the process's eager context outlives the test)


def _draws():
    return [tf.random_normal([3]).numpy(), tf.random_uniform([2], seed=5).numpy(),
            tf.glorot_uniform_initializer()([2, 2]).numpy(),
            tf.nn.dropout(tf.ones([8]), keep_prob=0.5).numpy()]


def test_the_same_seed_draws_the_same_numbers_again():
    tf.set_random_seed(42)
    first = _draws()
    again = _draws()  # the streams go on: other numbers
    tf.set_random_seed(42)
    second = _draws()
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(first[0], again[0])
    assert not np.array_equal(first[1], again[1])  # (an op seed's stream goes on too)
    tf.set_random_seed(7)
    assert not np.array_equal(_draws()[0], first[0])
