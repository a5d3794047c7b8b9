"""SyncReplicasOptimizer: gradients go through the accumulators, the chief's queue runner makes
one update from replicas_to_aggregate of them and hands out tokens, stale gradients are
dropped (TF's protocol, checked step by step in one process)."""

import time

import pytest

import dflab as tf


def _wait_for(predicate, seconds=10.0):
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_each_update_averages_the_gradients_and_tokens_carry_the_new_step():
    gs = tf.train.get_or_create_global_step()
    w = tf.Variable(1.0, name="w")
    x = tf.placeholder(tf.float32, [])
    opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.5),
                                         replicas_to_aggregate=2, total_num_replicas=2)
    train = opt.minimize(w * x, global_step=gs)  # d/dw = x
    local = tf.identity(opt._local_step)
    tokens = opt._sync_token_queue.size()
    pending = opt._accumulator_list[0][0].num_accumulated()
    hook = opt.make_session_run_hook(is_chief=True)
    with tf.train.MonitoredTrainingSession(hooks=[hook], stop_grace_period_secs=1) as s:
        assert s.run([gs, local, tokens]) == [0, 0, 2]  # two tokens for the first step
        s.run(train, {x: 1.0})  # one gradient in, a start token taken
        assert s.run(pending) == 1
        s.run(train, {x: 3.0})  # the second: the chief's runner updates with their mean
        _wait_for(lambda: s.run(gs) == 1)
        assert s.run(w) == pytest.approx(1.0 - 0.5 * (1.0 + 3.0) / 2)
        assert s.run([tokens, pending]) == [2, 0]  # two tokens carrying step 1
        # The local step still says 0 (the start tokens): this gradient is stale, dropped.
        s.run(train, {x: 100.0})
        assert s.run([pending, local]) == [0, 1]
        s.run(train, {x: 5.0})
        assert s.run([pending, local]) == [1, 1]
        s.run(train, {x: 7.0})
        _wait_for(lambda: s.run(gs) == 2)
        assert s.run(w) == pytest.approx(0.0 - 0.5 * (5.0 + 7.0) / 2)


def test_bad_input_gets_clear_errors():
    opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.1), 2, 3)
    w = tf.Variable(1.0)
    with pytest.raises(ValueError, match="Global step is required"):
        opt.minimize(w * 2.0)
    with pytest.raises(ValueError, match="must be positive"):
        tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.1), 0)
    with pytest.raises(ValueError, match="apply_gradient should be called"):
        fresh = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.1), 2)
        fresh.make_session_run_hook(is_chief=True).begin()
