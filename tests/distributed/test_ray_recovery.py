"""Recovery on the Ray transport (the paper's user-level fault tolerance): a task's actor is
killed mid-training and Ray brings it back empty; the chief's MonitoredTrainingSession sees the
step fail naming the task, creates its session again, restores the variables from its latest
checkpoint and trains on to the step it was asked for, losing only the steps after that
checkpoint."""

import time
import uuid

import numpy as np
import pytest
from cluster_test_util import recovery_model

import dflab as tf
from dflab.distributed.ray import client as ray_client
from dflab.distributed.ray import launcher as ray_launcher
from dflab.distributed.ray.targets import target_of

LAST_STEP = 12
KILL_AT = 8  # the latest checkpoint then holds step 5: steps 6 to 8 are trained again


def _incarnation(actor):
    import ray

    try:
        return ray.get(actor.ping.remote(), timeout=30)
    except ray_client.TASK_GONE:
        return None


def _wait_for_restart(actor, before, limit=120.0):
    deadline = time.monotonic() + limit
    while _incarnation(actor) in (None, before):
        assert time.monotonic() < deadline, "the killed actor did not come back"
        time.sleep(0.2)


@pytest.mark.parametrize("victim", ["ps", "worker"])
def test_training_survives_a_killed_ray_task(tmp_path, ray_instance, victim, caplog):
    import ray

    namespace = f"rec-{uuid.uuid4().hex[:8]}"
    spec = tf.train.ClusterSpec({"ps": ["ps0:1"], "worker": ["w0:1"]})
    # Both tasks may be restarted once by Ray (empty: a new process).
    actors = {job: ray_launcher.start_task(spec, job, 0, namespace, max_restarts=1)
              for job in ("ps", "worker")}
    target = target_of(namespace, "worker", 0)
    try:
        train, step_now, w_now = recovery_model(spec)
        seen, killed = [], []
        hooks = [tf.train.StopAtStepHook(last_step=LAST_STEP)]
        config = tf.ConfigProto(operation_timeout_in_ms=60000)
        with tf.train.MonitoredTrainingSession(
                master=target, is_chief=True, checkpoint_dir=str(tmp_path),
                save_checkpoint_steps=5, save_checkpoint_secs=None, hooks=hooks,
                log_step_count_steps=0, config=config) as sess:
            while not sess.should_stop() and len(seen) < 3 * LAST_STEP:  # a guard on loops
                sess.run(train)
                seen.append(int(sess.run(step_now)))
                if seen[-1] == KILL_AT and not killed:
                    before = _incarnation(actors[victim])
                    ray.kill(actors[victim], no_restart=False)
                    _wait_for_restart(actors[victim], before)
                    killed.append(victim)
            assert sess.recoveries == 1
            final_step, final_w = sess.run([step_now, w_now])
        assert seen[:KILL_AT] == list(range(1, KILL_AT + 1))
        assert seen[KILL_AT:] == list(range(6, LAST_STEP + 1))
        assert final_step == LAST_STEP
        np.testing.assert_allclose(final_w, 10.0 - 0.5 * LAST_STEP)
        # The failed step said which task was lost.
        assert any(f"/job:{victim}/replica:0/task:0" in r.getMessage() and
                   ("restarted" in r.getMessage() or "unavailable" in r.getMessage())
                   for r in caplog.records), [r.getMessage() for r in caplog.records]
    finally:
        for actor in actors.values():
            ray.kill(actor, no_restart=True)


def test_a_step_on_a_killed_ps_fails_naming_it_within_the_timeout(ray_instance):
    """Without a MonitoredTrainingSession the error reaches the client: UnavailableError
    naming the task, not a hang."""
    import ray

    namespace = f"rec-{uuid.uuid4().hex[:8]}"
    spec = tf.train.ClusterSpec({"ps": ["ps0:1"], "worker": ["w0:1"]})
    actors = {job: ray_launcher.start_task(spec, job, 0, namespace) for job in ("ps", "worker")}
    try:
        with tf.device("/job:ps/task:0"):
            v = tf.Variable(1.0)
        with tf.device("/job:worker/task:0"):
            inc = v.assign_add(1.0)
        config = tf.ConfigProto(operation_timeout_in_ms=30000)
        with tf.Session(target_of(namespace, "worker", 0), config=config) as s:
            s.run(v.initializer)
            assert s.run(inc) == 2.0
            ray.kill(actors["ps"], no_restart=True)
            start = time.monotonic()
            with pytest.raises(tf.errors.UnavailableError,
                               match=r"/job:ps/replica:0/task:0 \(on [^)]+\) is unavailable"):
                while time.monotonic() - start < 30:  # until the kill has landed
                    s.run(inc)
            assert time.monotonic() - start < 30
    finally:
        for actor in actors.values():
            ray.kill(actor, no_restart=True)
