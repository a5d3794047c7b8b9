"""Recovery on a cluster (the paper's user-level fault tolerance): the ps task (or the worker
task the chief's session runs on) dies and comes back empty mid-training; the chief's
MonitoredTrainingSession sees UnavailableError, creates its session again, restores the
variables from its latest checkpoint and trains on to the step it was asked for. (The Ray
version: tests/distributed/test_ray_recovery.py.)"""

import numpy as np
import pytest
from cluster_test_util import recovery_model

import dflab as tf


@pytest.mark.parametrize("victim", ["ps", "worker"])
def test_training_survives_a_restarted_task_losing_nothing_before_the_last_checkpoint(
        tmp_path, caplog, victim):
    spec = tf.train.ClusterSpec({"ps": [f"rec-ps-{victim}:0"], "worker": [f"rec-w0-{victim}:0"]})
    ps = tf.train.Server(spec, job_name="ps", task_index=0)
    worker = tf.train.Server(spec, job_name="worker", task_index=0)
    lost = ps if victim == "ps" else worker
    try:
        train, step_now, w_now = recovery_model(spec)
        seen, killed = [], []
        hooks = [tf.train.StopAtStepHook(last_step=20)]
        with tf.train.MonitoredTrainingSession(
                master=worker.target, is_chief=True, checkpoint_dir=str(tmp_path),
                save_checkpoint_steps=5, save_checkpoint_secs=None, hooks=hooks,
                log_step_count_steps=0) as sess:
            while not sess.should_stop():
                sess.run(train)
                seen.append(int(sess.run(step_now)))
                if seen[-1] == 12 and not killed:
                    lost.stop()  # its state is gone with it...
                    lost.start()  # ...and it comes back empty
                    killed.append(True)
            assert sess.recoveries == 1
            final_step, final_w = sess.run([step_now, w_now])
        # Steps 11 and 12 were lost with the ps (the checkpoint had step 10): trained again.
        assert seen[:12] == list(range(1, 13)) and seen[12] == 11
        assert final_step == 20
        np.testing.assert_allclose(final_w, 10.0 - 0.5 * 20)
        # The failed step named the lost task.
        assert any(f"/job:{victim}/replica:0/task:0 is unavailable" in r.getMessage()
                   for r in caplog.records), [r.getMessage() for r in caplog.records]
    finally:
        ps.stop()
        worker.stop()
