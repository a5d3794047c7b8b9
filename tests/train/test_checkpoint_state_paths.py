"""The ``checkpoint`` state file names checkpoints as TF's does: ``tf.train.Checkpoint.save``
writes its latest path alone, relative to the directory, and relative save directories give
paths relative to them (``Saver`` as well), so a directory can be moved or named relative to
the working directory. Expected contents are TF 2.21's for the same programs."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

import dflab as tf
from dflab.eager import eager_mode


@pytest.fixture
def eager():
    with eager_mode():
        yield


def _state(directory) -> str:
    with open(os.path.join(directory, "checkpoint")) as f:
        return f.read()


def test_checkpoint_save_writes_its_path_relative_and_alone(eager, tmp_path):
    v = tf.Variable(1.0)
    ckpt = tf.train.Checkpoint(v=v)
    ckpt.save(str(tmp_path / "d" / "ckpt"))
    v.assign(2.0)
    assert ckpt.save(str(tmp_path / "d" / "ckpt")) == str(tmp_path / "d" / "ckpt-2")
    # TF's file, byte for byte.
    assert _state(tmp_path / "d") == ('model_checkpoint_path: "ckpt-2"\n'
                                      'all_model_checkpoint_paths: "ckpt-2"\n')
    shutil.move(str(tmp_path / "d"), str(tmp_path / "moved"))
    latest = tf.train.latest_checkpoint(str(tmp_path / "moved"))
    assert latest == str(tmp_path / "moved" / "ckpt-2")
    again = tf.Variable(0.0)
    tf.train.Checkpoint(v=again).restore(latest).assert_consumed()
    assert again.numpy() == np.float32(2.0)


def test_relative_prefixes_are_written_relative_to_their_directory(eager, tmp_path,
                                                                    monkeypatch):
    monkeypatch.chdir(tmp_path)
    ckpt = tf.train.Checkpoint(v=tf.Variable(1.0))
    assert ckpt.save("ck/c") == "ck/c-1"
    assert ckpt.save("ck/c") == "ck/c-2"
    assert _state("ck") == 'model_checkpoint_path: "c-2"\nall_model_checkpoint_paths: "c-2"\n'
    assert tf.train.latest_checkpoint("ck") == "ck/c-2"
    assert ckpt.save("c") == "c-3"  # in the working directory itself
    assert _state(".") == 'model_checkpoint_path: "c-3"\nall_model_checkpoint_paths: "c-3"\n'


def test_a_savers_relative_directory_is_found_again(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with tf.Graph().as_default():
        tf.Variable(1.0)
        saver = tf.train.Saver()
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            saver.save(sess, "ck/model", global_step=1)
            assert saver.save(sess, "ck/model", global_step=2) == "ck/model-2"
    lines = _state("ck").splitlines()
    # TF's paths (dflab's Saver also records each checkpoint's time).
    assert lines[:3] == ['model_checkpoint_path: "model-2"',
                         'all_model_checkpoint_paths: "model-1"',
                         'all_model_checkpoint_paths: "model-2"']
    assert tf.train.latest_checkpoint("ck") == "ck/model-2"
