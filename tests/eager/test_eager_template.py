"""``tf.make_template`` made executing eagerly (TF's ``EagerTemplate``): the first call's
``get_variable`` variables are kept by the template and found again by later calls."""

import numpy as np
import pytest

import dflab as tf
from dflab.eager import eager_mode


@pytest.fixture(autouse=True)
def eager():
    with eager_mode():
        yield


def test_an_eager_template_shares_its_variables():
    def linear(x):
        w = tf.get_variable("w", [3, 2], initializer=tf.random_normal_initializer(seed=1))
        b = tf.get_variable("b", [2], initializer=tf.zeros_initializer(), trainable=False)
        return tf.matmul(x, w) + b

    t = tf.make_template("linear", linear)
    x = tf.ones([1, 3])
    first = t(x).numpy()
    np.testing.assert_array_equal(t(x).numpy(), first)  # each call had made new variables
    assert [v.name for v in t.variables] == ["linear/b:0", "linear/w:0"]
    assert [v.name for v in t.trainable_variables] == ["linear/w:0"]
    t.trainable_variables[0].assign(tf.ones([3, 2]))
    np.testing.assert_array_equal(t(x).numpy(), [[3.0, 3.0]])
    other = tf.make_template("linear", linear)  # its own variables
    assert not np.array_equal(other(x).numpy(), [[3.0, 3.0]])
