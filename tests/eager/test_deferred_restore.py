"""tf.train.Checkpoint's deferred restoration: a value whose object does not exist when
``restore`` runs is restored when the object is made and attached (a module's variable made on
its first call, a layer's weights when it is built, an optimizer's slots and Adam's beta powers
on its first update), and the load status's assertions count those values as TF's do.

Expected values are TF 2.21's for the same programs (``tf.compat.v1`` eagerly)."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import dflab as tf
from dflab.eager import eager_mode


@pytest.fixture
def eager():
    with eager_mode():
        yield


class _Lin(tf.Module):
    def __call__(self, x):
        if not hasattr(self, "w"):
            self.w = tf.Variable(tf.zeros([2, 1]))
        return tf.matmul(x, self.w)


class _Bag(tf.Module):
    pass


def _saved_lin(tmp_path):
    m = _Lin()
    m(tf.ones([1, 2]))
    m.w.assign([[3.0], [4.0]])
    return tf.train.Checkpoint(model=m).save(str(tmp_path / "lin"))


def test_adams_slots_and_beta_powers_made_after_restore_take_their_values(eager, tmp_path):
    w = tf.Variable([1.0, 2.0])
    opt = tf.train.AdamOptimizer(0.1)
    opt.minimize(lambda: tf.reduce_sum(w * w))
    path = tf.train.Checkpoint(w=w, optimizer=opt).save(str(tmp_path / "c"))
    w2, opt2 = tf.Variable([0.0, 0.0]), tf.train.AdamOptimizer(0.1)
    status = tf.train.Checkpoint(w=w2, optimizer=opt2).restore(path)
    np.testing.assert_allclose(w2.numpy(), [0.9, 1.9])
    status.assert_existing_objects_matched()
    with pytest.raises(AssertionError, match=r"Unresolved object in checkpoint "
                                             r"\(root\)\.optimizer\.beta1_power"):
        status.assert_consumed()
    opt2.minimize(lambda: tf.reduce_sum(w2 * w2))
    opt.minimize(lambda: tf.reduce_sum(w * w))
    # TF: the resumed step is the uninterrupted one ([0.8004126, 1.8001668]).
    np.testing.assert_allclose(w2.numpy(), [0.8004126, 1.8001668], rtol=1e-6)
    np.testing.assert_array_equal(w2.numpy(), w.numpy())
    np.testing.assert_allclose(opt2.get_slot(w2, "m").numpy(), [0.36000007, 0.7400001],
                               rtol=1e-6)
    b1, b2 = opt2._get_beta_accumulators()
    np.testing.assert_allclose([b1.numpy(), b2.numpy()], [0.729, 0.997003], rtol=1e-6)
    status.assert_consumed()


def test_momentum_slot_made_after_restore(eager, tmp_path):
    w = tf.Variable([1.0, 2.0])
    opt = tf.train.MomentumOptimizer(0.1, 0.9)
    opt.minimize(lambda: tf.reduce_sum(w * w))
    path = tf.train.Checkpoint(w=w, optimizer=opt).save(str(tmp_path / "c"))
    w2, opt2 = tf.Variable([0.0, 0.0]), tf.train.MomentumOptimizer(0.1, 0.9)
    status = tf.train.Checkpoint(w=w2, optimizer=opt2).restore(path)
    opt2.minimize(lambda: tf.reduce_sum(w2 * w2))
    np.testing.assert_allclose(w2.numpy(), [0.46, 0.92], rtol=1e-6)  # TF's
    status.assert_consumed()


def test_a_modules_lazily_made_variable_is_restored_when_set(eager, tmp_path):
    path = _saved_lin(tmp_path)
    m2 = _Lin()
    status = tf.train.Checkpoint(model=m2).restore(path)
    status.assert_existing_objects_matched()
    with pytest.raises(AssertionError, match=r"\(root\)\.model\.w"):
        status.assert_consumed()
    np.testing.assert_array_equal(m2(tf.ones([1, 2])).numpy(), [[7.0]])  # the first call's
    np.testing.assert_array_equal(m2.w.numpy().ravel(), [3.0, 4.0])
    status.assert_consumed()


def test_a_variable_made_inside_a_traced_function_is_restored(eager, tmp_path):
    path = _saved_lin(tmp_path)
    m2 = _Lin()
    tf.train.Checkpoint(model=m2).restore(path)
    f = tf.function(lambda x: m2(x))
    np.testing.assert_array_equal(f(tf.ones([1, 2])).numpy(), [[7.0]])
    np.testing.assert_array_equal(m2.w.numpy().ravel(), [3.0, 4.0])


def test_submodules_attached_later_and_attributes_of_the_checkpoint(eager, tmp_path):
    m = _Bag()
    m.sub = _Bag()
    m.sub.v = tf.Variable([1.0, 2.0])
    path = tf.train.Checkpoint(model=m).save(str(tmp_path / "e"))
    # A submodule with its variable, attached after restore.
    m2 = _Bag()
    tf.train.Checkpoint(model=m2).restore(path)
    sub = _Bag()
    sub.v = tf.Variable([0.0, 0.0])
    m2.sub = sub
    np.testing.assert_array_equal(m2.sub.v.numpy(), [1.0, 2.0])
    # A submodule attached first, its variable later.
    m3 = _Bag()
    tf.train.Checkpoint(model=m3).restore(path)
    m3.sub = _Bag()
    m3.sub.v = tf.Variable([0.0, 0.0])
    np.testing.assert_array_equal(m3.sub.v.numpy(), [1.0, 2.0])
    # The checkpoint's own attribute, set after restore.
    ckpt = tf.train.Checkpoint()
    ckpt.restore(path)
    ckpt.model = _Bag()
    ckpt.model.sub = _Bag()
    ckpt.model.sub.v = tf.Variable([0.0, 0.0])
    np.testing.assert_array_equal(ckpt.model.sub.v.numpy(), [1.0, 2.0])
    # A list does not stand for a module: nothing matches (TF's too).
    m4 = _Bag()
    m4.sub = [_Bag()]
    status = tf.train.Checkpoint(model=m4).restore(path)
    with pytest.raises(AssertionError, match=r"\(root\)\.model\.sub\.v"):
        status.assert_consumed()
    m4.sub[0].v = tf.Variable([0.0, 0.0])
    np.testing.assert_array_equal(m4.sub[0].v.numpy(), [0.0, 0.0])
    with pytest.raises(AssertionError, match="not bound to checkpointed values"):
        status.assert_existing_objects_matched()
    assert status.expect_partial() is status


def test_values_of_two_restores_both_wait(eager, tmp_path):
    m = _Bag()
    m.sub = _Bag()
    m.sub.v = tf.Variable([1.0, 2.0])
    first = tf.train.Checkpoint(model=m).save(str(tmp_path / "e"))
    other = _Bag()
    other.a = tf.Variable(1.0)
    second = tf.train.Checkpoint(model=other).save(str(tmp_path / "d"))
    mm = _Bag()
    ckpt = tf.train.Checkpoint(model=mm)
    ckpt.restore(first)
    ckpt.restore(second)
    mm.a = tf.Variable(0.0)
    mm.sub = _Bag()
    mm.sub.v = tf.Variable([0.0, 0.0])
    assert mm.a.numpy() == 1.0
    np.testing.assert_array_equal(mm.sub.v.numpy(), [1.0, 2.0])


def test_a_new_variable_without_a_value_fails_the_existing_objects_check(eager, tmp_path):
    m = _Bag()
    m.a = tf.Variable(1.0)
    path = tf.train.Checkpoint(model=m).save(str(tmp_path / "d"))
    m2 = _Bag()
    status = tf.train.Checkpoint(model=m2).restore(path)
    status.assert_existing_objects_matched().assert_nontrivial_match()
    m2.b = tf.Variable(7.0)
    with pytest.raises(AssertionError, match="Found 1 Python objects that were not bound to "
                                             "checkpointed values"):
        status.assert_existing_objects_matched()
    m2.a = tf.Variable(0.0)
    assert m2.a.numpy() == 1.0
    with pytest.raises(AssertionError, match="not bound"):
        status.assert_consumed()


def test_a_layer_built_after_restore_computes_with_the_restored_weights(eager, tmp_path):
    layer = tf.layers.Dense(1, name="saved")  # (named: the default names stay unused)
    layer(tf.ones([1, 2]))
    layer.kernel.assign([[5.0], [6.0]])
    layer.bias.assign([0.5])
    path = tf.train.Checkpoint(model=layer).save(str(tmp_path / "f"))
    fresh = tf.layers.Dense(1, name="fresh")
    status = tf.train.Checkpoint(model=fresh).restore(path)
    np.testing.assert_array_equal(fresh(tf.ones([1, 2])).numpy(), [[11.5]])
    status.assert_consumed()


def test_a_variable_made_in_a_graph_is_left_waiting(eager, tmp_path):
    path = _saved_lin(tmp_path)
    m2 = _Lin()
    status = tf.train.Checkpoint(model=m2).restore(path)
    with tf.Graph().as_default():
        m2.w = tf.Variable(tf.zeros([2, 1]))  # nothing would run a restoring op
    with pytest.raises(AssertionError, match=r"\(root\)\.model\.w"):
        status.assert_consumed()
    m2.w = tf.Variable(tf.zeros([2, 1]))
    np.testing.assert_array_equal(m2.w.numpy().ravel(), [3.0, 4.0])


def test_an_optimizer_attached_after_restore_gets_its_slots(eager, tmp_path):
    w = tf.Variable([1.0, 2.0])
    opt = tf.train.MomentumOptimizer(0.1, 0.9)
    opt.minimize(lambda: tf.reduce_sum(w * w))
    path = tf.train.Checkpoint(w=w, optimizer=opt).save(str(tmp_path / "m"))
    w2 = tf.Variable([0.0, 0.0])
    ckpt = tf.train.Checkpoint(w=w2)
    status = ckpt.restore(path)
    ckpt.optimizer = tf.train.MomentumOptimizer(0.1, 0.9)
    ckpt.optimizer.minimize(lambda: tf.reduce_sum(w2 * w2))
    np.testing.assert_allclose(w2.numpy(), [0.46, 0.92], rtol=1e-6)  # TF's
    status.assert_consumed()
    # A module's variable and optimizer, both made after restore.
    m = _Bag()
    m.w = tf.Variable([1.0, 2.0])
    m.opt = tf.train.MomentumOptimizer(0.1, 0.9)
    m.opt.minimize(lambda: tf.reduce_sum(m.w * m.w))
    path = tf.train.Checkpoint(model=m).save(str(tmp_path / "n"))
    m2 = _Bag()
    tf.train.Checkpoint(model=m2).restore(path).assert_existing_objects_matched()
    m2.w = tf.Variable([0.0, 0.0])
    m2.opt = tf.train.MomentumOptimizer(0.1, 0.9)
    m2.opt.minimize(lambda: tf.reduce_sum(m2.w * m2.w))
    np.testing.assert_allclose(m2.w.numpy(), [0.46, 0.92], rtol=1e-6)


def test_values_never_restored_are_warned_of_unless_partial_is_expected(eager, tmp_path,
                                                                         caplog):
    path = _saved_lin(tmp_path)
    caplog.set_level("WARNING", logger="dflab.train")
    status = tf.train.Checkpoint(model=_Lin()).restore(path)
    del status
    gc.collect()
    assert "being deleted with unrestored values" in caplog.text
    assert "could not be found in the restored object: (root).model.w" in caplog.text
    caplog.clear()
    tf.train.Checkpoint(model=_Lin()).restore(path).expect_partial()
    gc.collect()
    assert caplog.text == ""
    m = _Lin()
    tf.train.Checkpoint(model=m).restore(path)
    m(tf.ones([1, 2]))  # every value restored: nothing to say
    del m
    gc.collect()
    assert caplog.text == ""


def test_restoring_nothing_fails_every_assertion(eager):
    status = tf.train.Checkpoint(v=tf.Variable(1.0)).restore(None)
    for check in (status.assert_consumed, status.assert_existing_objects_matched,
                  status.assert_nontrivial_match):
        with pytest.raises(AssertionError, match=r"No checkpoint specified \(save_path=None\); "
                                                 "nothing is being restored."):
            check()
    assert status.expect_partial() is status


def test_a_value_of_another_shape_is_tfs_value_error(eager, tmp_path):
    path = tf.train.Checkpoint(v=tf.Variable(1.0)).save(str(tmp_path / "c"))
    with pytest.raises(ValueError, match=r"Received incompatible tensor with shape \(\) when "
                                         r"attempting to restore variable with shape \(2,\) "
                                         "and name Variable:0."):
        tf.train.Checkpoint(v=tf.Variable([1.0, 2.0])).restore(path)
