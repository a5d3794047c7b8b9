"""Recovery on a cluster (the paper's user-level fault tolerance): the ps task dies and comes
back empty mid-training; the chief's MonitoredTrainingSession sees UnavailableError, creates
its session again, restores the ps's variables from its latest checkpoint and trains on to the
step it was asked for."""

import numpy as np

import dflab as tf


def test_training_survives_a_restarted_ps_losing_nothing_before_the_last_checkpoint(tmp_path):
    spec = tf.train.ClusterSpec({"ps": ["rec-ps:0"], "worker": ["rec-w0:0"]})
    ps = tf.train.Server(spec, job_name="ps", task_index=0)
    worker = tf.train.Server(spec, job_name="worker", task_index=0)
    try:
        with tf.device(tf.train.replica_device_setter(cluster=spec)):
            step = tf.train.get_or_create_global_step()
            w = tf.Variable(10.0, name="w")
            train = tf.train.GradientDescentOptimizer(0.5).minimize(w * 1.0, global_step=step)
            step_now = tf.identity(step)
            w_now = tf.identity(w)
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
                    ps.stop()  # its variables are gone with it...
                    ps.start()  # ...and it comes back empty
                    killed.append(True)
            assert sess.recoveries == 1
            final_step, final_w = sess.run([step_now, w_now])
        # Steps 11 and 12 were lost with the ps (the checkpoint had step 10): trained again.
        assert seen[:12] == list(range(1, 13)) and seen[12] == 11
        assert final_step == 20
        np.testing.assert_allclose(final_w, 10.0 - 0.5 * 20)
    finally:
        ps.stop()
        worker.stop()
