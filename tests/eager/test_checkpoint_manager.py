"""tf.train.CheckpointManager as TF 2.21's: numbering by the save counter or a given number,
max_to_keep (files deleted, the state file TF's, with relative paths and timestamps),
keep_checkpoint_every_n_hours, checkpoint_interval with a step counter, a later manager
adopting the directory, restore_or_initialize, and TF's refusals; and an eager variable's
Python conversions (int, float, bool, complex, iteration) as TF's."""

from __future__ import annotations

import os

import numpy as np
import pytest

import dflab as tf
from dflab.eager import eager_mode
from dflab.train import checkpoint_manager


@pytest.fixture
def eager():
    with eager_mode():
        yield


def _files(directory):
    return sorted(os.listdir(directory))


def test_numbering_and_max_to_keep_delete_old_files(eager, tmp_path):
    d = str(tmp_path / "run")
    v = tf.Variable(1.0)
    ckpt = tf.train.Checkpoint(v=v)
    manager = tf.train.CheckpointManager(ckpt, d, max_to_keep=2)
    assert manager.latest_checkpoint is None and manager.checkpoints == []
    assert manager.directory == d
    paths = []
    for _ in range(4):
        v.assign_add(1.0)
        paths.append(manager.save())
    assert paths == [os.path.join(d, f"ckpt-{i}") for i in range(1, 5)]
    assert manager.checkpoints == paths[2:] and manager.latest_checkpoint == paths[3]
    assert _files(d) == ["checkpoint", "ckpt-3.data-00000-of-00001", "ckpt-3.index",
                         "ckpt-4.data-00000-of-00001", "ckpt-4.index"]
    lines = open(os.path.join(d, "checkpoint")).read().splitlines()
    assert lines[:3] == ['model_checkpoint_path: "ckpt-4"',
                         'all_model_checkpoint_paths: "ckpt-3"',
                         'all_model_checkpoint_paths: "ckpt-4"']
    assert [x.split(":")[0] for x in lines[3:]] == ["all_model_checkpoint_timestamps"] * 2 + \
        ["last_preserved_timestamp"]
    assert tf.train.latest_checkpoint(d) == paths[3]
    # A given number names the file; the save counter counts it all the same.
    assert manager.save(checkpoint_number=100) == os.path.join(d, "ckpt-100")
    assert int(ckpt.save_counter) == 5
    assert manager.save(checkpoint_number=tf.Variable(7, dtype=tf.int64)).endswith("ckpt-7")
    assert manager.checkpoints == [os.path.join(d, "ckpt-100"), os.path.join(d, "ckpt-7")]


def test_a_later_manager_adopts_the_directory_and_restores(eager, tmp_path):
    d = str(tmp_path)
    v = tf.Variable([1.0, 2.0])
    first = tf.train.CheckpointManager(tf.train.Checkpoint(v=v), d, max_to_keep=3)
    for _ in range(3):
        v.assign_add([1.0, 1.0])
        first.save()
    os.remove(os.path.join(d, "ckpt-1.index"))  # a checkpoint gone meanwhile is not adopted
    w = tf.Variable([0.0, 0.0])
    later = tf.train.CheckpointManager(tf.train.Checkpoint(v=w), d, max_to_keep=3,
                                       checkpoint_name="model")
    assert later.latest_checkpoint == os.path.join(d, "ckpt-3")
    assert later.checkpoints == [os.path.join(d, "ckpt-2"), os.path.join(d, "ckpt-3")]
    assert later.restore_or_initialize() == os.path.join(d, "ckpt-3")
    np.testing.assert_array_equal(w.numpy(), [4.0, 5.0])
    assert later.save() == os.path.join(d, "model-4")  # the save counter was restored too
    assert len(later.checkpoints) == 3


def test_a_relative_directory_is_written_relative_to_itself(eager, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(v=tf.Variable(1.0)),
                                         os.path.join("a", "b"), max_to_keep=None)
    assert manager.save() == os.path.join("a", "b", "ckpt-1")
    assert 'model_checkpoint_path: "ckpt-1"' in open("a/b/checkpoint").read()
    assert tf.train.CheckpointManager(
        tf.train.Checkpoint(v=tf.Variable(0.0)), "a/b", 1).latest_checkpoint == "a/b/ckpt-1"


def test_restore_or_initialize_without_a_checkpoint_runs_init_fn(eager, tmp_path):
    calls = []
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(v=tf.Variable(1.0)),
                                         str(tmp_path), max_to_keep=None,
                                         init_fn=lambda: calls.append(1))
    assert manager.restore_or_initialize() is None and calls == [1]
    for _ in range(7):
        manager.save()
    assert len(manager.checkpoints) == 7  # None keeps every one


def test_checkpoint_interval_follows_the_step_counter(eager, tmp_path):
    step = tf.Variable(0, dtype=tf.int64)
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(step=step), str(tmp_path),
                                         max_to_keep=5, step_counter=step,
                                         checkpoint_interval=10)
    saved = []
    for s in [0, 5, 10, 12, 25]:
        step.assign(s)
        saved.append(manager.save() is not None)
    assert saved == [True, False, True, False, True]
    step.assign(26)
    assert manager.save(check_interval=False) is not None
    assert manager.save(check_interval=False) is None  # one checkpoint a step (TF's)
    assert manager.checkpoint_interval == 10
    # A manager restoring counts the interval from the restored step; one given
    # last_checkpoint_step counts from that.
    step.assign(0)
    again = tf.train.CheckpointManager(tf.train.Checkpoint(step=step), str(tmp_path),
                                       max_to_keep=5, step_counter=step,
                                       checkpoint_interval=10)
    assert again.restore_or_initialize() is not None and int(step) == 26
    step.assign(30)
    assert again.save() is None
    step.assign(36)
    assert again.save() is not None
    other = tf.train.CheckpointManager(tf.train.Checkpoint(step=step), str(tmp_path / "b"),
                                       max_to_keep=5, step_counter=step,
                                       checkpoint_interval=10, last_checkpoint_step=30)
    assert other.save() is None


def test_keep_checkpoint_every_n_hours_preserves_files_it_stops_listing(
        eager, tmp_path, monkeypatch):
    clock = [1_000_000.0]
    monkeypatch.setattr(checkpoint_manager.time, "time", lambda: clock[0])
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(v=tf.Variable(1.0)),
                                         str(tmp_path), max_to_keep=1,
                                         keep_checkpoint_every_n_hours=1)
    for _ in range(4):
        clock[0] += 40 * 60  # a save every 40 minutes
        manager.save()
    # Pushed out: ckpt-1 (40 min after the manager began: deleted), ckpt-2 (80 min, an hour
    # past the start: kept for good), ckpt-3 (120 min, not an hour past ckpt-2: deleted).
    kept = [f for f in _files(tmp_path) if f.endswith(".index")]
    assert kept == ["ckpt-2.index", "ckpt-4.index"]
    assert manager.checkpoints == [os.path.join(str(tmp_path), "ckpt-4")]


def test_tfs_refusals(eager, tmp_path):
    ckpt = tf.train.Checkpoint(v=tf.Variable(1.0))
    for bad in (0, -1):
        with pytest.raises(ValueError, match="positive integer or `None`"):
            tf.train.CheckpointManager(ckpt, str(tmp_path), max_to_keep=bad)
    with pytest.raises(ValueError, match="step_counter"):
        tf.train.CheckpointManager(ckpt, str(tmp_path), max_to_keep=2, checkpoint_interval=5)


def test_an_eager_variables_python_conversions(eager):
    i, f, m = tf.Variable(3), tf.Variable(2.5), tf.Variable([1.0, 2.0])
    assert int(i) == 3 and float(f) == 2.5 and int(f) == 2 and complex(f) == 2.5 + 0j
    assert complex(tf.constant(2.5)) == 2.5 + 0j  # an eager tensor, as TF's
    assert bool(i) is True and bool(tf.Variable(0.0)) is False
    assert [float(x) for x in m] == [1.0, 2.0]
    with pytest.raises(ValueError, match="ambiguous"):
        bool(m)


def test_a_graph_variable_has_no_python_value():
    with tf.Graph().as_default():
        v = tf.Variable(3)
        for convert in (int, float, bool, iter):
            with pytest.raises(TypeError):
                convert(v)
