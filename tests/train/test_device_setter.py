"""tf.train.replica_device_setter: variables on ps tasks, the rest on the worker (TF's rules)."""

import pytest

import dflab as tf


def test_round_robin_puts_variables_on_ps_tasks_and_the_rest_on_the_worker():
    setter = tf.train.replica_device_setter(ps_tasks=2, worker_device="/job:worker/task:1")
    with tf.device(setter):
        a = tf.Variable(1.0, name="a")
        b = tf.Variable(2.0, name="b")
        c = tf.Variable(3.0, name="c")
        y = a + b
    assert [v.op.device for v in (a, b, c)] == ["/job:ps/task:0", "/job:ps/task:1",
                                                "/job:ps/task:0"]
    assert y.op.device == "/job:worker/task:1"
    # The variable's initial value and initializer are not ps ops: they run on the worker
    # side of the request, then the placer colocates the assign with its variable.
    assert a.initial_value.op.device == "/job:worker/task:1"


def test_inner_scopes_merge_and_pinned_jobs_win():
    setter = tf.train.replica_device_setter(cluster={"ps": ["p0:1", "p1:1", "p2:1"],
                                                     "worker": ["w0:1"]})
    with tf.device(setter):
        with tf.device("/cpu:0"):
            v = tf.Variable(1.0, name="v")  # device type merged into the ps task
            x = tf.constant(1.0)
        with tf.device("/job:chief/task:0"):
            pinned = tf.Variable(1.0, name="pinned")  # another job: left as it is
    assert v.op.device == "/job:ps/task:0/device:CPU:0"
    assert x.op.device == "/job:worker/device:CPU:0"
    assert pinned.op.device == "/job:chief/task:0"


def test_greedy_load_balancing_by_bytes():
    strategy = tf.train.GreedyLoadBalancingStrategy(2, tf.train.byte_size_load_fn)
    with tf.device(tf.train.replica_device_setter(ps_tasks=2, ps_strategy=strategy)):
        big = tf.Variable(tf.zeros([1000]), name="big")
        small1 = tf.Variable(tf.zeros([10]), name="small1")
        small2 = tf.Variable(tf.zeros([10]), name="small2")
        medium = tf.Variable(tf.zeros([500]), name="medium")
    # big -> 0; then task 1 is lighter until it holds more than 4000 bytes.
    assert [v.op.device for v in (big, small1, small2, medium)] == [
        "/job:ps/task:0", "/job:ps/task:1", "/job:ps/task:1", "/job:ps/task:1"]


def test_no_ps_tasks_gives_no_device_function_and_bad_input_is_refused():
    assert tf.train.replica_device_setter(ps_tasks=0) is None
    assert tf.train.replica_device_setter(cluster={"worker": ["w0:1"]}) is None
    with pytest.raises(ValueError, match="num_tasks"):
        tf.train.GreedyLoadBalancingStrategy(0)
    with pytest.raises(ValueError, match="not fully defined"):
        with tf.device(tf.train.replica_device_setter(
                ps_tasks=2, ps_strategy=tf.train.GreedyLoadBalancingStrategy(2))):
            # A resource variable's shape is its initial value's (TF 2.21): unknown here.
            tf.Variable(tf.placeholder(tf.float32, [None]), validate_shape=False,
                        name="unknown")
