"""SyncReplicasOptimizer: gradients go through the accumulators, the chief's queue runner makes
one update from replicas_to_aggregate of them and hands out tokens, stale gradients are
dropped (TF's protocol, checked step by step in one process)."""

import threading
import time

import numpy as np
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


# --- between-graph replication on an in-process cluster ------------------------------------------
def _replica(spec, server, index, m, n, delay, barrier, report):
    """One worker's client: its own graph, the variables on the ps, TF's sync training loop
    until the global step reaches LAST_STEP."""
    g = tf.Graph()
    with g.as_default():
        with tf.device(tf.train.replica_device_setter(
                cluster=spec, worker_device=f"/job:worker/task:{index}")):
            gs = tf.train.get_or_create_global_step()
            w = tf.Variable(1.0, name="w")
            opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.1), m, n)
            train = opt.minimize(w * 1.0, global_step=gs)  # every gradient is 1
            pending = opt._accumulator_list[0][0].num_accumulated()
            # The end of training lets a replica still waiting for a token go (its dequeue of
            # the closed token queue fails with OutOfRangeError).
            stop_tokens = opt._sync_token_queue.close(cancel_pending_enqueues=True)
            w_now = tf.identity(w)
        hooks = [opt.make_session_run_hook(is_chief=index == 0),
                 tf.train.StopAtStepHook(last_step=LAST_STEP)]
        steps = 0
        with tf.train.MonitoredTrainingSession(
                master=server.target, is_chief=index == 0, hooks=hooks,
                config=tf.ConfigProto(operation_timeout_in_ms=20000),
                stop_grace_period_secs=2) as s:
            barrier.wait(60)  # every replica's session is up, the chief's tokens are in
            try:
                while not s.should_stop():
                    time.sleep(delay)
                    s.run(train)
                    steps += 1
            except tf.errors.OutOfRangeError:
                pass  # another replica ended training
            s.run(stop_tokens)
            report[index] = (steps, *s.run([gs, w_now, pending]))


LAST_STEP = 6


def _train_on_cluster(n, m, delays):
    spec = tf.train.ClusterSpec({"ps": ["sync-ps:0"],
                                 "worker": [f"sync-w{i}:0" for i in range(n)]})
    servers = [tf.train.Server(spec, job_name="ps", task_index=0)]
    servers += [tf.train.Server(spec, job_name="worker", task_index=i) for i in range(n)]
    report, failures, barrier = {}, [], threading.Barrier(n)

    def run(i):
        try:
            _replica(spec, servers[1 + i], i, m, n, delays[i], barrier, report)
        except BaseException as e:  # noqa: BLE001 - reported below
            failures.append((i, e))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    finally:
        for s in servers:
            s.stop()
    assert not failures, failures
    return report


def test_backup_workers_drop_a_stragglers_gradients_and_every_update_is_a_mean():
    report = _train_on_cluster(n=3, m=2, delays=[0.0, 0.0, 0.15])
    steps = sum(r[0] for r in report.values())
    updates, w, pending = max(r[1] for r in report.values()), None, None
    for r in report.values():
        if r[1] == updates:
            w, pending = r[2], r[3]
    assert updates >= LAST_STEP
    # The mean of two gradients of 1 is 1: w moved by exactly 0.1 per update.
    want = np.float32(1.0)
    for _ in range(updates):
        want = np.float32(want - np.float32(0.1))
    assert w == pytest.approx(want, abs=1e-6)
    # Gradients run = two per update + those still pending + those dropped as stale.
    assert steps - 2 * updates - pending >= 1
