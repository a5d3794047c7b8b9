"""tf.layers' Layer base class (build, call, add_weight, reuse, variable and update lists) and
the layer functions' argument errors; outputs against TF are in cases_layers.py."""

import numpy as np
import pytest

import dflab as tf


class Scale(tf.layers.Layer):
    """A user layer: one trainable weight per input column and a non-trainable counter."""

    def build(self, input_shape):
        self.w = self.add_weight("w", [input_shape[-1]], initializer=tf.ones_initializer())
        self.count = self.add_weight("count", [], initializer=tf.zeros_initializer(),
                                     trainable=False)

    def call(self, inputs):
        self.add_update(tf.assign_add(self.count, 1.0))
        return inputs * self.w


def test_user_layer_builds_once_and_reuses_its_variables():
    with tf.Graph().as_default():
        layer = Scale()
        x = tf.constant([[1.0, 2.0], [3.0, 4.0]])
        y1, y2 = layer(x), layer(x * 2.0)
        assert layer.name == "scale"
        assert [v.name for v in tf.global_variables()] == ["scale/w:0", "scale/count:0"]
        assert [v.name for v in layer.trainable_weights] == ["scale/w:0"]
        assert [v.name for v in layer.non_trainable_weights] == ["scale/count:0"]
        assert len(layer.variables) == 2 and len(layer.updates) == 2
        assert len(tf.get_collection(tf.GraphKeys.UPDATE_OPS)) == 2
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            sess.run(tf.assign(layer.w, [2.0, 3.0]))
            a, b = sess.run([y1, y2])
            sess.run(layer.updates)
            assert sess.run(layer.count) == 2.0
        np.testing.assert_allclose(a, [[2.0, 6.0], [6.0, 12.0]])
        np.testing.assert_allclose(b, 2 * a)


def test_two_layer_objects_get_their_own_scopes():
    with tf.Graph().as_default():
        x = tf.zeros([1, 3])
        tf.layers.Dense(2)(x)
        tf.layers.Dense(2, name="head")(x)
        tf.layers.Dense(2)(x)
        assert sorted(v.name for v in tf.trainable_variables()) == [
            "dense/bias:0", "dense/kernel:0", "dense_1/bias:0", "dense_1/kernel:0",
            "head/bias:0", "head/kernel:0"]


def test_class_rejects_unknown_argument():
    with pytest.raises(TypeError, match="units_typo"):
        tf.layers.Dense(2, units_typo=3)


def test_batch_normalization_argument_errors():
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="fused=True"):
            tf.layers.batch_normalization(tf.zeros([4, 3]), fused=True)
        with pytest.raises(NotImplementedError, match="renormalization"):
            tf.layers.batch_normalization(tf.zeros([4, 3]), renorm=True)
        with pytest.raises(ValueError, match="undefined `axis`"):
            tf.layers.batch_normalization(tf.placeholder(tf.float32, [4, None]))


def test_batch_normalization_without_training_adds_no_updates():
    with tf.Graph().as_default():
        tf.layers.batch_normalization(tf.ones([4, 3]), training=False)
        assert tf.get_collection(tf.GraphKeys.UPDATE_OPS) == []
        assert len(tf.global_variables()) == 4 and len(tf.trainable_variables()) == 2
