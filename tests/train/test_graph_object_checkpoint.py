"""``tf.train.Checkpoint`` in a graph, as TF 1.x's: ``save`` and ``write`` run in a session,
``restore`` builds the restoring ops, which the status's ``run_restore_ops`` or
``initialize_or_restore`` runs, those of values restored later (an optimizer's slots made by
``minimize`` after ``restore``) included. Values are TF 2.21's (``tf.compat.v1``, graph mode)
for the same program."""

from __future__ import annotations

import numpy as np
import pytest

import dflab as tf


def _saved(tmp_path):
    with tf.Graph().as_default():
        v = tf.Variable([1.0, 2.0], name="v")
        opt = tf.train.AdamOptimizer(0.1)
        train = opt.minimize(tf.reduce_sum(v * v))
        ckpt = tf.train.Checkpoint(v=v, optimizer=opt)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            sess.run(train)
            path = ckpt.save(str(tmp_path / "c"), session=sess)
            assert path == str(tmp_path / "c-1")
            assert ckpt.save(str(tmp_path / "c")) == str(tmp_path / "c-2")  # default session
    with open(tmp_path / "checkpoint") as f:
        assert f.read() == 'model_checkpoint_path: "c-2"\nall_model_checkpoint_paths: "c-2"\n'
    return path


def test_initialize_or_restore_restores_slots_made_after_restore(tmp_path):
    path = _saved(tmp_path)
    with tf.Graph().as_default():
        v = tf.Variable([0.0, 0.0], name="v")
        opt = tf.train.AdamOptimizer(0.1)
        ckpt = tf.train.Checkpoint(v=v, optimizer=opt)
        status = ckpt.restore(path)
        train = opt.minimize(tf.reduce_sum(v * v))
        with tf.Session() as sess:
            status.initialize_or_restore(sess)
            np.testing.assert_allclose(sess.run(v), [0.9, 1.9], rtol=1e-6)
            np.testing.assert_allclose(sess.run(opt.get_slot(v, "m")), [0.2, 0.4], rtol=1e-6)
            status.assert_consumed()
            sess.run(train)
            # TF: the resumed step is the uninterrupted one.
            np.testing.assert_allclose(sess.run(v), [0.8004126, 1.8001668], rtol=1e-6)
            assert ckpt.save(str(tmp_path / "again"), session=sess).endswith("again-2")


def test_run_restore_ops_and_the_assertions(tmp_path):
    path = _saved(tmp_path)
    with tf.Graph().as_default():
        v = tf.Variable([0.0, 0.0], name="v")
        status = tf.train.Checkpoint(v=v).restore(path)
        with tf.Session() as sess:
            status.run_restore_ops(sess)
            np.testing.assert_allclose(sess.run(v), [0.9, 1.9], rtol=1e-6)
        status.assert_existing_objects_matched()
        with pytest.raises(AssertionError, match=r"Unresolved object in checkpoint "
                                                 r"\(root\)\.optimizer\.beta1_power"):
            status.assert_consumed()
        status.expect_partial()


def test_a_graph_checkpoint_needs_a_session(tmp_path):
    with tf.Graph().as_default():
        ckpt = tf.train.Checkpoint(v=tf.Variable(1.0))
        with pytest.raises(ValueError, match="runs its ops in a session"):
            ckpt.save(str(tmp_path / "c"))


def test_a_modules_variable_made_in_the_graph_after_restore(tmp_path):
    class Lin(tf.Module):
        def __call__(self, x):
            if not hasattr(self, "w"):
                self.w = tf.Variable(tf.zeros([2, 1]))
            return tf.matmul(x, self.w)

    with tf.Graph().as_default():
        m = Lin()
        y = m(tf.ones([1, 2]))
        set_w = m.w.assign([[3.0], [4.0]])
        ckpt = tf.train.Checkpoint(model=m)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            sess.run(set_w)
            path = ckpt.save(str(tmp_path / "c"), session=sess)
    with tf.Graph().as_default():
        fresh = Lin()
        status = tf.train.Checkpoint(model=fresh).restore(path)
        y = fresh(tf.ones([1, 2]))
        with tf.Session() as sess:
            status.initialize_or_restore(sess)
            np.testing.assert_array_equal(sess.run(y), [[7.0]])  # TF's
        status.assert_consumed()
