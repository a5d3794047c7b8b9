"""Closing a session cancels its pending steps, wherever they wait: every blocking op fails
with CancelledError at once, in a session of its own, on an in-process cluster and on Ray;
a queue runner whose enqueue waits ends when its coordinator stops."""

import queue as pyqueue
import threading
import time
import uuid

import numpy as np
import pytest

import dflab as tf

WAIT_S = 0.4  # long enough for a step to park in its blocking op


def _dequeue():
    return tf.FIFOQueue(4, tf.float32, shapes=[[]]).dequeue()


def _dequeue_many():
    q = tf.FIFOQueue(4, tf.float32, shapes=[[]])
    with tf.control_dependencies([q.enqueue(1.0)]):
        return q.dequeue_many(3)


def _dequeue_up_to():
    return tf.FIFOQueue(4, tf.float32, shapes=[[]]).dequeue_up_to(3)


def _enqueue():
    q = tf.FIFOQueue(1, tf.float32, shapes=[[]])
    with tf.control_dependencies([q.enqueue(1.0)]):
        return q.enqueue(2.0)  # the queue is full: waits for room


def _enqueue_many():
    q = tf.FIFOQueue(2, tf.float32, shapes=[[]])
    return q.enqueue_many([[1.0, 2.0, 3.0]])


def _take():
    acc = tf.ConditionalAccumulator(tf.float32, shape=[2])
    return acc.take_grad(1)


def _take_sparse():
    acc = tf.SparseConditionalAccumulator(tf.float32, shape=[4, 2])
    return acc.take_indexed_slices_grad(1).values


_WAITING: pyqueue.Queue = pyqueue.Queue()


def _py_func():
    # A Python function that waits on a queue nobody fills until the test ends.
    return tf.py_func(lambda: np.float32(_WAITING.get(timeout=30)), [], tf.float32)


BLOCKING = {"dequeue": _dequeue, "dequeue_many": _dequeue_many,
            "dequeue_up_to": _dequeue_up_to, "enqueue": _enqueue,
            "enqueue_many": _enqueue_many, "take_grad": _take, "take_sparse": _take_sparse,
            "py_func": _py_func}


def _run_then_close(sess, fetch) -> BaseException | None:
    """Run ``fetch`` on a thread, close ``sess`` once it waits; the thread's error."""
    box = []

    def run():
        try:
            sess.run(fetch)
            box.append(None)
        except BaseException as e:  # noqa: BLE001 - the test inspects it
            box.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    time.sleep(WAIT_S)
    assert t.is_alive(), f"{fetch} did not wait"
    start = time.monotonic()
    sess.close()
    t.join(10)
    assert not t.is_alive(), "the step outlived its session"
    assert time.monotonic() - start < 5
    return box[0]


@pytest.mark.parametrize("kind", sorted(BLOCKING))
def test_closing_a_session_cancels_its_waiting_step(kind):
    g = tf.Graph()
    with g.as_default():
        fetch = BLOCKING[kind]()
    sess = tf.Session(graph=g)
    error = _run_then_close(sess, fetch)
    assert isinstance(error, tf.errors.CancelledError), repr(error)
    if kind == "py_func":
        _WAITING.put(0.0)  # let the Python function's own thread go


def _cluster(protocol=None, config=None):
    spec = tf.train.ClusterSpec({"ps": [f"cancel-ps-{uuid.uuid4().hex[:6]}:1"],
                                 "worker": [f"cancel-w-{uuid.uuid4().hex[:6]}:1"]})
    return [tf.train.Server(spec, job_name=j, task_index=0, protocol=protocol, config=config)
            for j in ("ps", "worker")]


def _on_ps_received_by_worker(kind):
    """``kind``'s blocking op on the ps; the worker's ``_Recv`` of its value waits too."""
    with tf.device("/job:ps/task:0"):
        blocked = BLOCKING[kind]()
    with tf.device("/job:worker/task:0"):
        return tf.reduce_sum(tf.cast(blocked, tf.float32)) if blocked.dtype != tf.string \
            else blocked


@pytest.mark.parametrize("kind", ["dequeue", "dequeue_many", "enqueue", "take_grad"])
def test_closing_a_cluster_session_cancels_the_step_on_every_task(kind):
    servers = _cluster()
    try:
        g = tf.Graph()
        with g.as_default():
            fetch = _on_ps_received_by_worker(kind) if kind != "enqueue" else None
            if fetch is None:
                with tf.device("/job:ps/task:0"):
                    fetch = _enqueue()
        sess = tf.Session(servers[1].target, graph=g)
        error = _run_then_close(sess, fetch)
        assert isinstance(error, tf.errors.CancelledError), repr(error)
        # The tasks serve on: a new session runs at once.
        with g.as_default(), tf.device("/job:ps/task:0"):
            ok = tf.constant(2.0) * 3.0
        with tf.Session(servers[1].target, graph=g) as s:
            assert s.run(ok) == 6.0
    finally:
        for s in servers:
            s.stop()


def test_a_queue_runner_waiting_in_a_take_ends_when_its_coordinator_stops():
    g = tf.Graph()
    with g.as_default():
        acc = tf.ConditionalAccumulator(tf.float32, shape=[2])
        q = tf.FIFOQueue(4, tf.float32, shapes=[[2]])
        qr = tf.train.QueueRunner(q, [q.enqueue(acc.take_grad(1))])
    with tf.Session(graph=g) as sess:
        coord = tf.train.Coordinator()
        threads = qr.create_threads(sess, coord=coord, start=True)
        time.sleep(WAIT_S)
        assert threads[0].is_alive()  # parked in the take: no gradient will come
        start = time.monotonic()
        coord.request_stop()
        coord.join(threads, stop_grace_period_secs=60)
        assert time.monotonic() - start < 5
    assert not any(t.is_alive() for t in threads) and qr.exceptions_raised == []


def test_join_gives_up_after_the_grace_period_and_names_the_threads(caplog):
    coord = tf.train.Coordinator()
    stuck = threading.Event()
    t = threading.Thread(target=stuck.wait, name="stuck-thread", daemon=True)
    coord.register_thread(t)
    t.start()
    coord.request_stop()
    start = time.monotonic()
    with pytest.raises(RuntimeError, match="stuck-thread"):
        coord.join(stop_grace_period_secs=0.2)
    assert time.monotonic() - start < 2
    coord.clear_stop()
    coord.register_thread(t)
    coord.request_stop()
    coord.join(stop_grace_period_secs=0.2, ignore_live_threads=True)
    assert "stuck-thread" in caplog.text
    stuck.set()


@pytest.mark.slow
def test_closing_a_ray_cluster_session_cancels_the_step_on_every_task(ray_instance):
    config = tf.ConfigProto(dflab={"ray_namespace": f"cancel-{uuid.uuid4().hex[:8]}"})
    servers = _cluster("ray", config)
    try:
        for kind in ("dequeue", "take_grad"):
            g = tf.Graph()
            with g.as_default():
                fetch = _on_ps_received_by_worker(kind)
            sess = tf.Session(servers[1].target, graph=g)
            error = _run_then_close(sess, fetch)
            assert isinstance(error, tf.errors.CancelledError), repr(error)
    finally:
        for s in servers:
            s.stop()
