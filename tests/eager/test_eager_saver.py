"""``tf.train.Saver`` executing eagerly, as TF's: ``Saver(var_list)`` builds nothing, and
``save(None, path)``/``restore(None, path)`` run the save and restore ops on the spot (names,
files, state file, global steps, ``max_to_keep`` and errors as TF 2.21 gives them)."""

from __future__ import annotations

import os

import numpy as np
import pytest

import dflab as tf
from dflab.eager import eager_mode


@pytest.fixture
def eager():
    with eager_mode():
        yield


def test_save_and_restore_eagerly(eager, tmp_path):
    v = tf.Variable([1.0, 2.0], name="v")
    w = tf.Variable(3.0, name="scope/w")
    u = tf.Variable(5)
    saver = tf.train.Saver([v, w, u])
    path = saver.save(None, str(tmp_path / "m"))
    assert path == str(tmp_path / "m")
    # TF's names and files (no meta graph eagerly).
    assert sorted(os.listdir(tmp_path)) == ["checkpoint", "m.data-00000-of-00001", "m.index"]
    assert tf.train.list_variables(path) == [("Variable", []), ("scope/w", []), ("v", [2])]
    assert tf.train.latest_checkpoint(str(tmp_path)) == path
    v.assign([0.0, 0.0])
    w.assign(0.0)
    assert saver.restore(None, path) is None
    np.testing.assert_array_equal(v.numpy(), [1.0, 2.0])
    assert w.numpy() == 3.0 and u.numpy() == 5
    # A global step as a variable or an int names the file.
    step = tf.Variable(7, dtype=tf.int64)
    assert saver.save(None, str(tmp_path / "m"), global_step=step) == str(tmp_path / "m-7")
    assert saver.save(None, str(tmp_path / "m"), global_step=9) == str(tmp_path / "m-9")


def test_a_dict_names_the_values_and_max_to_keep_deletes(eager, tmp_path):
    v = tf.Variable([1.0, 2.0], name="v")
    w = tf.Variable(3.0)
    by_name = tf.train.Saver({"a": v, "b": w})
    path = by_name.save(None, str(tmp_path / "n"))
    assert tf.train.list_variables(path) == [("a", [2]), ("b", [])]
    v.assign([9.0, 9.0])
    by_name.restore(None, path)
    np.testing.assert_array_equal(v.numpy(), [1.0, 2.0])
    x = tf.Variable([1.0, 2.0], name="x")
    kept = tf.train.Saver([x], max_to_keep=2)
    for i in range(4):
        kept.save(None, str(tmp_path / "k"), global_step=i)
    assert kept.last_checkpoints == [str(tmp_path / "k-2"), str(tmp_path / "k-3")]
    assert not os.path.exists(str(tmp_path / "k-1.index"))


def test_eager_saver_errors(eager, tmp_path):
    with pytest.raises(RuntimeError, match="`var_list` must specify a list or dict"):
        tf.train.Saver()
    x = tf.Variable([1.0, 2.0], name="x")
    path = tf.train.Saver([x]).save(None, str(tmp_path / "k"))
    narrow = tf.train.Saver([tf.Variable([1.0], name="x")])
    with pytest.raises(ValueError, match=r"Received incompatible tensor with shape \(2,\) when "
                                         r"attempting to restore variable with shape \(1,\) "
                                         "and name x."):
        narrow.restore(None, path)
    twins = tf.train.Saver([tf.Variable(1.0, name="y"), tf.Variable(2.0, name="y")])
    with pytest.raises(ValueError, match="same name: y"):  # when saving, as TF's
        twins.save(None, str(tmp_path / "twins"))
