"""Session.run: fetch structures, feeds, pruning, caching, partial runs, errors."""

import collections
import os
import time

import numpy as np
import pytest

import dflab as tf


def test_fetch_structures_round_trip():
    a = tf.constant(1.0, name="a")
    b = tf.constant([2, 3], name="b")
    noop = tf.no_op()
    Pair = collections.namedtuple("Pair", "x y")
    with tf.Session() as s:
        out = s.run({"k": [a, (b, noop)], "p": Pair(a, "b:0")})
    assert out["k"][0] == 1.0 and isinstance(out["k"][1], tuple)
    np.testing.assert_array_equal(out["k"][1][0], [2, 3])
    assert out["k"][1][1] is None
    assert isinstance(out["p"], Pair) and out["p"].x == 1.0
    np.testing.assert_array_equal(out["p"].y, [2, 3])


def test_scalar_fetch_is_numpy_scalar():
    with tf.Session() as s:
        v = s.run(tf.constant(3.0))
    assert isinstance(v, np.float32) and v == 3.0


def test_tensor_fetched_twice_computed_once():
    calls = []
    x = tf.placeholder(tf.float32, [])
    y = x * 2.0
    with tf.Session() as s:
        out = s.run([y, y, [y]], {x: 3.0})
        calls.append(out)
        plan = next(iter(s._master._plans.values()))
    assert out == [6.0, 6.0, [6.0]]
    assert len(plan.executor_plan.fetches) == 1


def test_only_needed_subgraph_runs():
    v = tf.Variable(0.0)
    inc = v.assign_add(1.0)
    other = tf.constant(5.0)
    with tf.Session() as s:
        s.run(v.initializer)
        s.run(other)
        s.run(other)
        assert s.run(v) == 0.0  # the assign was never run
        s.run(inc)
        assert s.run(v) == 1.0


def test_feeding_intermediate_tensor_cuts_graph():
    x = tf.placeholder(tf.float32, [])
    y = x * 2.0
    z = y + 1.0
    with tf.Session() as s:
        assert s.run(z, {y: 10.0}) == 11.0  # x is never needed
        with pytest.raises(tf.errors.InvalidArgumentError, match="must feed"):
            s.run(z)


def test_a_control_dependency_on_a_fed_placeholder_is_satisfied_by_the_feed():
    # TF hands a fed placeholder's control edges to the feed: nothing asks x to run.
    x = tf.placeholder(tf.float32, [], name="x")
    with tf.control_dependencies([x]):
        y = tf.constant(2.0) * 3.0
    with tf.device("/cpu:1"):
        with tf.control_dependencies([x.op]):
            z = tf.identity(y) + x  # another partition, and a data edge from x too
    config = tf.ConfigProto(device_count={"CPU": 2})
    with tf.Session(config=config) as s:
        assert s.run(y, {x: 1.0}) == 6.0
        assert s.run(z, {x: 1.0}) == 7.0
        h = s.partial_run_setup([y], [x])
        assert s.partial_run(h, y, {x: 1.0}) == 6.0
        with pytest.raises(tf.errors.InvalidArgumentError, match="must feed"):
            s.run(y)  # not fed: the placeholder runs, and fails as TF's does


def test_feed_checks():
    x = tf.placeholder(tf.float32, [None, 2], name="x")
    i = tf.placeholder(tf.int32, [], name="i")
    y = x * 2.0
    with tf.Session() as s:
        with pytest.raises(ValueError, match="shape"):
            s.run(y, {x: np.zeros((2, 3))})
        with pytest.raises(TypeError):
            s.run(i + 1, {i: 1.5})
        with pytest.raises(TypeError):
            s.run(y, {x: tf.constant([[1.0, 2.0]])})
        with pytest.raises(TypeError):
            s.run(y, {"nope:0": 1.0})
        assert s.run(i + 1, {"i:0": 2.0}) == 3  # integral floats are fine, names work
        out = s.run(y, {x: [[1, 2]]})
    assert out.dtype == np.float32


def test_fed_array_is_not_mutated_or_captured():
    x = tf.placeholder(tf.float32, [2])
    v = tf.Variable([0.0, 0.0])
    set_v = v.assign(x)
    arr = np.array([1.0, 2.0], dtype=np.float32)
    with tf.Session() as s:
        s.run(set_v, {x: arr})
        arr[0] = 100.0  # the caller keeps using their buffer
        np.testing.assert_array_equal(s.run(v), [1.0, 2.0])
        got = s.run(v)
        got[1] = -1.0  # fetched values never alias variable state
        np.testing.assert_array_equal(s.run(v), [1.0, 2.0])


def test_unknown_and_foreign_fetches():
    g = tf.Graph()
    with g.as_default():
        other = tf.constant(1.0)
    tf.constant(2.0, name="mine")
    with tf.Session() as s:
        with pytest.raises(ValueError):
            s.run(other)
        with pytest.raises(ValueError, match="nope:0"):
            s.run("nope:0")
        with pytest.raises(TypeError):
            s.run(3)
        assert s.run("mine:0") == 2.0


def test_uninitialized_variable_error_names_variable_and_site():
    w = tf.Variable(tf.zeros([2]), name="weights")
    y = w * 2.0
    with tf.Session() as s:
        with pytest.raises(tf.errors.FailedPreconditionError) as e:
            s.run(y)
    assert "uninitialized value weights" in str(e.value)
    assert os.path.basename(__file__) in str(e.value)


def test_runtime_error_names_node_and_site():
    x = tf.placeholder(tf.float32, [None])
    y = tf.placeholder(tf.float32, [None])
    z = tf.add(x, y, name="the_add")
    with tf.Session() as s:
        with pytest.raises(tf.errors.InvalidArgumentError) as e:
            s.run(z, {x: [1.0, 2.0], y: [1.0, 2.0, 3.0]})
    assert e.value.op is z.op
    assert "the_add" in str(e.value) and os.path.basename(__file__) in str(e.value)


def test_cycle_is_rejected():
    a = tf.identity(tf.constant(1.0), name="a")
    b = tf.identity(a, name="b")
    a.op.add_control_input(b.op)
    with tf.Session() as s:
        with pytest.raises(tf.errors.InvalidArgumentError, match="cycle"):
            s.run(b)


def test_plan_cache_reused_and_invalidated():
    x = tf.placeholder(tf.float32, [])
    y = x + 1.0
    with tf.Session() as s:
        s.run(y, {x: 1.0})
        s.run(y, {x: 2.0})
        assert len(s._master._plans) == 1
        tf.constant(0.0)  # adding ops does not invalidate plans
        s.run(y, {x: 2.0})
        assert len(s._master._plans) == 1
        c = tf.no_op()
        y.op.add_control_input(c)
        s.run(y, {x: 2.0})
        assert len(s._master._plans) == 2


def test_make_callable():
    x = tf.placeholder(tf.float32, [None])
    y = tf.reduce_sum(x * 2.0)
    with tf.Session() as s:
        f = s.make_callable([y, x], feed_list=[x])
        out = f(np.array([1.0, 2.0]))
        assert out[0] == 6.0
        np.testing.assert_array_equal(out[1], [1.0, 2.0])
        with pytest.raises(ValueError):
            f()


def test_partial_run():
    a = tf.placeholder(tf.float32, [], name="a")
    b = tf.placeholder(tf.float32, [], name="b")
    c = tf.placeholder(tf.float32, [], name="c")
    r1 = tf.add(a, b)
    r2 = tf.multiply(r1, c)
    with tf.Session() as s:
        h = s.partial_run_setup([r1, r2], [a, b, c])
        assert s.partial_run(h, r1, {a: 1.0, b: 2.0}) == 3.0
        assert s.partial_run(h, r2, {c: 10.0}) == 30.0
        h2 = s.partial_run_setup([r1, r2], [a, b, c])
        with pytest.raises(tf.errors.InvalidArgumentError):
            s.partial_run(h2, r2, {a: 1.0, b: 2.0})  # c not fed yet
        with pytest.raises(tf.errors.InvalidArgumentError):
            s.partial_run(h2, r1, {a: 5.0})  # a already fed


def test_default_session_eval_and_run():
    x = tf.constant([1.0, 2.0])
    y = x * 3.0
    with pytest.raises(ValueError, match="default session"):
        y.eval()
    with tf.Session():
        np.testing.assert_array_equal(y.eval(), [3.0, 6.0])
    sess = tf.InteractiveSession()
    try:
        assert tf.get_default_session() is sess
        v = tf.Variable(1.0)
        v.initializer.run()
        assert v.eval() == 1.0
    finally:
        sess.close()
    assert tf.get_default_session() is None


def test_closed_session_refuses():
    s = tf.Session()
    s.close()
    with pytest.raises(RuntimeError):
        s.run(tf.constant(1.0))


def _block_until_cancelled_op(x):
    """A test-only blocking op that waits until its step is cancelled (like a dequeue on an
    empty queue)."""
    from dflab.framework import registry
    from dflab.kernels.registry import register_kernel

    if "TestBlockUntilCancelled" not in registry.registered_ops():
        registry.register_op("TestBlockUntilCancelled",
                             lambda op: [(tf.float32, op.inputs[0].shape)],
                             blocking=True, stateful=True)

        def block(step, value):
            step.cancelled.wait(30)
            return value

        register_kernel("TestBlockUntilCancelled", takes_step=True, fn=block)
    g = tf.get_default_graph()
    return g._create_op("TestBlockUntilCancelled", [x], {}, None).outputs[0]


def test_timeout_raises_deadline_exceeded():
    x = tf.placeholder(tf.float32, [])
    y = _block_until_cancelled_op(x)
    opts = tf.RunOptions(timeout_in_ms=200)
    with tf.Session() as s:
        t0 = time.perf_counter()
        with pytest.raises(tf.errors.DeadlineExceededError):
            s.run(y, {x: 1.0}, options=opts)
        assert time.perf_counter() - t0 < 5
        # the session stays usable after a timed-out step
        assert s.run(x * 2.0, {x: 2.0}) == 4.0


def test_trace_fills_step_stats():
    a = tf.constant(np.ones((4, 4)))
    b = tf.matmul(a, a, name="mm")
    opts = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE, output_partition_graphs=True)
    md = tf.RunMetadata()
    with tf.Session() as s:
        s.run(b, options=opts, run_metadata=md)
    names = {ns.node_name for d in md.step_stats.dev_stats for ns in d.node_stats}
    assert "mm" in names
    dev = md.step_stats.dev_stats[0]
    assert dev.device.endswith("CPU:0")
    assert all(ns.all_end_rel_micros >= 0 for ns in dev.node_stats)
    assert md.partition_graphs and md.partition_graphs[0].node[0].device


def test_soft_placement_and_device_errors():
    with tf.device("/gpu:0"):
        a = tf.constant(1.0) * 2.0
    with tf.Session() as s:
        with pytest.raises(tf.errors.InvalidArgumentError, match="Cannot assign a device"):
            s.run(a)
    with tf.Session(config=tf.ConfigProto(allow_soft_placement=True)) as s:
        assert s.run(a) == 2.0


def test_list_devices_and_device_count():
    with tf.Session(config=tf.ConfigProto(device_count={"CPU": 3})) as s:
        names = [d.name for d in s.list_devices()]
    assert names == [f"/job:localhost/replica:0/task:0/device:CPU:{i}" for i in range(3)]


def test_fetch_indexed_slices():
    params = tf.constant(np.arange(12.0).reshape(4, 3))
    picked = tf.gather(params, [3, 1, 3])
    grad, = tf.gradients(tf.reduce_sum(picked * 2.0), [params])
    assert isinstance(grad, tf.IndexedSlices)
    with tf.Session() as s:
        val = s.run(grad)
    assert isinstance(val, tf.IndexedSlicesValue)
    np.testing.assert_array_equal(val.indices, [3, 1, 3])
    np.testing.assert_array_equal(val.values, np.full((3, 3), 2.0))
    np.testing.assert_array_equal(val.dense_shape, [4, 3])
