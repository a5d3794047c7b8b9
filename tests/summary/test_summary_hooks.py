"""Summaries in monitored training: ``SummarySaverHook`` and ``MonitoredTrainingSession``'s
default summaries, read back with TensorBoard's own reader."""

from __future__ import annotations

import numpy as np
import pytest
from tensorboard.backend.event_processing import event_accumulator

import dflab as tf


def _scalars(logdir, tag):
    acc = event_accumulator.EventAccumulator(logdir)
    acc.Reload()
    return [(e.step, e.value) for e in acc.Scalars(tag)]


def _model():
    gs = tf.train.get_or_create_global_step()
    w = tf.Variable(4.0)
    loss = tf.square(w)
    tf.summary.scalar("loss", loss)
    train = tf.train.GradientDescentOptimizer(0.25).minimize(loss, global_step=gs)
    return w, loss, train


def test_monitored_training_session_writes_summaries_every_n_steps(tmp_path):
    w, loss, train = _model()
    with tf.train.MonitoredTrainingSession(checkpoint_dir=str(tmp_path),
                                           save_summaries_steps=2,
                                           save_checkpoint_secs=None) as sess:
        for _ in range(5):
            sess.run(train)
    got = _scalars(str(tmp_path), "loss")
    # w halves every step (w -= 0.25 * 2w): loss before step k is (4 / 2**k)**2.
    assert [s for s, _ in got] == [1, 3, 5]
    for step, value in got:
        assert value == pytest.approx((4.0 / 2 ** (step - 1)) ** 2)


def test_a_summary_saver_hook_with_its_own_op_and_seconds_timer(tmp_path):
    w, loss, train = _model()
    doubled = tf.summary.scalar("doubled", 2 * loss)
    hook = tf.train.SummarySaverHook(save_secs=3600, output_dir=str(tmp_path),
                                     summary_op=doubled)
    with tf.train.MonitoredTrainingSession(hooks=[hook]) as sess:
        for _ in range(3):
            sess.run(train)
    got = _scalars(str(tmp_path), "doubled")
    assert [s for s, _ in got] == [1]  # the first step, then not again within the hour
    assert got[0][1] == pytest.approx(32.0)
    assert "loss" not in event_accumulator.EventAccumulator(str(tmp_path)).Reload().Tags()[
        "scalars"]


def test_the_hook_needs_exactly_one_source():
    with pytest.raises(ValueError, match="Exactly one of scaffold or summary_op"):
        tf.train.SummarySaverHook(save_steps=1)
    with pytest.raises(ValueError, match="exactly one of every_secs and every_steps"):
        tf.train.SummarySaverHook(summary_op=tf.summary.scalar("x", 1.0))
    np.testing.assert_equal(tf.train.SummarySaverHook(
        save_steps=1, summary_op=tf.summary.scalar("y", 1.0))._summary_ops()[0].dtype, tf.string)


def test_training_without_summaries_writes_no_event_file(tmp_path):
    gs = tf.train.get_or_create_global_step()
    train = tf.assign_add(gs, 1)
    with tf.train.MonitoredTrainingSession(checkpoint_dir=str(tmp_path),
                                           save_summaries_steps=1,
                                           save_checkpoint_secs=None) as sess:
        sess.run(train)
    assert not list(tmp_path.glob("events.out.tfevents.*"))


def test_monitored_training_runs_where_tensorboard_is_not_installed(tmp_path):
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent(f"""
        import sys
        sys.modules["tensorboard"] = None  # as if the summary extra were not installed
        import dflab as tf
        gs = tf.train.get_or_create_global_step()
        train = tf.assign_add(gs, 1)
        with tf.train.MonitoredTrainingSession(checkpoint_dir={str(tmp_path)!r}) as sess:
            sess.run(train)
        print("ok")
        """)
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-2000:]
