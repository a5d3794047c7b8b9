"""What the cluster tests share: a model spanning a ps and two workers, a comparison with the
same model in one process, and the recovery tests' training model."""

from __future__ import annotations

import threading
import time

import numpy as np

import dflab as tf

FEED = np.arange(6, dtype=np.float32).reshape(3, 2) / 4


def cluster_model():
    """A variable on the ps, a matmul, a cond and a loop on worker 1, int and string tensors
    crossing tasks, the sums on worker 0: ``(x, w, fetches)``."""
    x = tf.placeholder(tf.float32, [3, 2], name="x")
    with tf.device("/job:ps/task:0"):
        w = tf.Variable(np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4), name="w")
        label = tf.constant(["ps", "made"], name="label")
    with tf.device("/job:worker/task:1"):
        y = tf.matmul(x, w)
        z = tf.cond(tf.reduce_sum(y) > 0, lambda: y * 2.0, lambda: y - 1.0)
        _, acc = tf.while_loop(lambda i, a: i < 4, lambda i, a: (i + 1, a + z),
                               [tf.constant(0), tf.zeros([3, 4])])
        n = tf.size(y)
    with tf.device("/job:worker/task:0"):
        out = tf.reduce_sum(acc) + tf.cast(n, tf.float32)
        text = tf.identity(label)
    return x, w, [out, y, acc, n, text]


def one_process_results(feed=FEED) -> list:
    """``cluster_model``'s fetches in one process, one task: the /job:... requests fall back
    to its CPU (soft placement)."""
    g = tf.Graph()
    with g.as_default():
        x, _, fetches = cluster_model()
        init = tf.global_variables_initializer()
    with tf.Session(graph=g, config=tf.ConfigProto(allow_soft_placement=True)) as s:
        s.run(init)
        return s.run(fetches, {x: feed})


def assert_bit_identical(got, want) -> None:
    for a, b in zip(got, want, strict=True):
        a, b = np.asarray(a), np.asarray(b)
        assert a.dtype == b.dtype and a.shape == b.shape
        if a.dtype == object:  # strings: compare the values, not the object pointers
            assert a.tolist() == b.tolist()
        else:
            assert a.tobytes() == b.tobytes()


def shared_variable_graph():
    """A client's own graph holding the ps variable "shared" and an update of it:
    ``(graph, variable, update)``; every client that builds it names the same state."""
    g = tf.Graph()
    with g.as_default(), tf.device("/job:ps/task:0"):
        v = tf.Variable(tf.zeros([2]), name="shared")
        inc = v.assign_add([1.0, 2.0])
    return g, v, inc


def two_clients_share_a_ps_variable(targets) -> tuple:
    """Client 1 initializes and updates "shared" through ``targets[0]``; client 2 (its own
    graph) reads the update through ``targets[1]`` and updates it again; a third session on
    ``targets[2]`` reads [2, 4]. Returns client 1's ``(graph, variable)``."""
    g1, v1, inc1 = shared_variable_graph()
    with g1.as_default():
        init = tf.global_variables_initializer()
    with tf.Session(targets[0], graph=g1) as s:
        s.run(init)
        s.run(inc1)
    g2, v2, inc2 = shared_variable_graph()
    with tf.Session(targets[1], graph=g2) as s:
        np.testing.assert_array_equal(s.run(v2), [1.0, 2.0])
        s.run(inc2)
    with tf.Session(targets[2], graph=g1) as s:
        np.testing.assert_array_equal(s.run(v1), [2.0, 4.0])
    return g1, v1


def recovery_model(spec):
    """A scalar trained by SGD on ``spec``'s ps (w = 10, step 0.5 per step, so w = 10 - 0.5 n
    after n steps): ``(train, step_now, w_now)``."""
    with tf.device(tf.train.replica_device_setter(cluster=spec)):
        step = tf.train.get_or_create_global_step()
        w = tf.Variable(10.0, name="w")
        train = tf.train.GradientDescentOptimizer(0.5).minimize(w * 1.0, global_step=step)
        return train, tf.identity(step), tf.identity(w)


def sync_replicas_client(cluster, target: str, index: int, is_chief: bool,
                         last_step: int = 30) -> tuple[int, int]:
    """One worker of synchronous replication (one gradient per update, two replicas) trained
    to ``last_step`` in a ``MonitoredTrainingSession``: ``(its steps, the last global step it
    fetched)``. The chief runs the sync queue runner, which after the last update waits in the
    accumulator's take for a gradient nobody will push: closing must end it."""
    g = tf.Graph()
    with g.as_default():
        with tf.device(tf.train.replica_device_setter(
                worker_device=f"/job:worker/task:{index}", cluster=cluster)):
            gs = tf.train.get_or_create_global_step()
            w = tf.Variable(0.0, name="w")
            loss = tf.square(w - 3.0)
            opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.1),
                                                 replicas_to_aggregate=1, total_num_replicas=2)
            train = opt.minimize(loss, global_step=gs)
        hooks = [opt.make_session_run_hook(is_chief), tf.train.StopAtStepHook(last_step=last_step)]
        steps, fetched = 0, -1
        with tf.train.MonitoredTrainingSession(master=target, is_chief=is_chief,
                                               hooks=hooks) as sess:
            while not sess.should_stop():
                fetched, _ = sess.run([gs, train])
                steps += 1
    return steps, int(fetched)


def run_sync_replicas(cluster, targets, worker_after_chief=False, timeout=60) -> dict:
    """``sync_replicas_client`` on two worker threads (``targets``: the two workers' session
    targets), at once or the second after the chief has finished; task index -> its result.
    A thread still running after ``timeout`` seconds is reported as ``"hung"``."""
    results: dict = {}

    def client(i):
        results[i] = sync_replicas_client(cluster, targets[i], i, is_chief=i == 0)

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(2)]
    threads[0].start()
    if worker_after_chief:
        threads[0].join(timeout)
    threads[1].start()
    deadline = time.monotonic() + timeout
    for i, t in enumerate(threads):
        t.join(max(deadline - time.monotonic(), 0))
        if t.is_alive():
            results[i] = "hung"
    return results
