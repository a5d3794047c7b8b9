"""Consistent snapshots hold for every driver of a step: the stepper and partial runs too."""

import gc
import threading

import numpy as np
import pytest

import dflab as tf
from dflab.runtime.stepping import StepRun
from dflab.train.checkpoint_utils import load_variable
from dflab.train.step_gate import step_gate


@pytest.fixture(autouse=True, params=["resource", "reference"])
def _variable_kind(request):
    """Every driver is checked with both kinds of variable (the root conftest restores the
    default afterwards)."""
    if request.param == "resource":
        tf.enable_resource_variables()
    else:
        tf.disable_resource_variables()
    return request.param


def _two_updates():
    """A step that adds 1 to a, then (after it) to b: a save between them would see a != b."""
    a = tf.Variable(0.0, name="a")
    b = tf.Variable(0.0, name="b")
    inc_a = tf.assign_add(a, 1.0)
    with tf.control_dependencies([inc_a]):
        inc_b = tf.assign_add(b, 1.0)
    return a, b, inc_a, inc_b


def _paused_mid_step(sess, inc_a, inc_b):
    """A stepped step that has updated a and not yet b: it holds the session's step gate."""
    sess.run(tf.global_variables_initializer())
    gate = step_gate(sess)
    run = StepRun(sess, inc_b)
    run.run_to(inc_a.op.name)
    return gate, run


def _save_in_thread(saver, sess, path):
    done = threading.Event()
    out = {}

    def save():
        out["path"] = saver.save(sess, path)
        done.set()

    t = threading.Thread(target=save, daemon=True)
    t.start()
    return t, done, out


def test_a_consistent_save_waits_for_a_stepped_training_step(tmp_path):
    a, b, inc_a, inc_b = _two_updates()
    saver = tf.train.Saver(consistent=True)
    with tf.Session() as sess:
        _, run = _paused_mid_step(sess, inc_a, inc_b)
        assert sess.run(a) == 1.0 and sess.run(b) == 0.0
        t, done, out = _save_in_thread(saver, sess, str(tmp_path / "m"))
        assert not done.wait(0.3), "the save ran in the middle of the stepped step"
        run.resume()
        assert run.finished
        assert done.wait(10)
        t.join()
        assert load_variable(out["path"], "a") == load_variable(out["path"], "b") == 1.0


def test_the_stepping_thread_cannot_deadlock_itself_and_close_releases(tmp_path):
    a, b, inc_a, inc_b = _two_updates()
    saver = tf.train.Saver(consistent=True)
    with tf.Session() as sess:
        _, run = _paused_mid_step(sess, inc_a, inc_b)
        with pytest.raises(tf.errors.FailedPreconditionError, match="StepRun"):
            saver.save(sess, str(tmp_path / "m"))
        run.close()
        path = saver.save(sess, str(tmp_path / "m"))
        assert load_variable(path, "a") == 1.0 and load_variable(path, "b") == 0.0


def test_an_abandoned_stepped_step_releases_the_gate_when_collected(tmp_path):
    a, b, inc_a, inc_b = _two_updates()
    saver = tf.train.Saver(consistent=True)
    with tf.Session() as sess:
        gate, run = _paused_mid_step(sess, inc_a, inc_b)
        assert gate.steps_in_flight == 1
        del run
        gc.collect()
        assert gate.steps_in_flight == 0
        saver.save(sess, str(tmp_path / "m"))


def test_read_only_stepping_and_failed_steps_do_not_hold_the_gate():
    a, b, inc_a, inc_b = _two_updates()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        gate = step_gate(sess)
        run = StepRun(sess, a + b)
        run.step()
        assert gate.steps_in_flight == 0
        v = tf.Variable(np.ones(3, np.float32), name="v")
        sess.run(v.initializer)
        p = tf.placeholder(tf.float32, [None])
        bad = tf.assign(v, p * 2.0)
        failing = StepRun(sess, bad, {p: np.ones(4, np.float32)})
        with pytest.raises(tf.errors.OpError):
            failing.resume()
        assert gate.steps_in_flight == 0


def test_partial_runs_that_change_variables_pass_the_gate():
    a, b, inc_a, inc_b = _two_updates()
    x = tf.placeholder(tf.float32, [])
    with tf.control_dependencies([inc_b]):
        y = tf.identity(x * 2.0)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        gate = step_gate(sess)
        h = sess.partial_run_setup([y], [x])
        started, finished = threading.Event(), threading.Event()

        def partial():
            started.set()
            sess.partial_run(h, y, {x: 3.0})
            finished.set()

        with gate.exclusive():
            t = threading.Thread(target=partial, daemon=True)
            t.start()
            assert started.wait(5)
            assert not finished.wait(0.3), "a partial run changed variables during a save"
            assert sess.run(b) == 0.0
        assert finished.wait(10)
        t.join()
        assert sess.run([a, b]) == [1.0, 1.0]
