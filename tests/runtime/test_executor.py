"""The executor: single steps, concurrency of independent branches, release of dead tensors,
cancellation on error, and many client threads sharing variables."""

import threading

import numpy as np
import pytest
from barrier_ops import BARRIERS, barrier

import dflab as tf
from dflab.framework import registry
from dflab.kernels.registry import register_kernel
from dflab.runtime.executor import Execution


def test_independent_branches_run_concurrently():
    BARRIERS["k"] = threading.Barrier(2, timeout=10)
    x = tf.placeholder(tf.float32, [])
    a = barrier(x + 1.0, "k")
    b = barrier(x + 2.0, "k")
    with tf.Session(config=tf.ConfigProto(inter_op_parallelism_threads=2)) as s:
        assert s.run(a + b, {x: 0.0}) == 3.0


def test_error_in_one_branch_cancels_step():
    BARRIERS["never"] = threading.Barrier(3, timeout=10)  # will never fill
    x = tf.placeholder(tf.float32, [None])
    y = tf.placeholder(tf.float32, [None])
    bad = tf.add(x, y, name="bad")
    ok = barrier(x, "never")
    with tf.Session(config=tf.ConfigProto(inter_op_parallelism_threads=2)) as s:
        with pytest.raises(tf.errors.InvalidArgumentError, match="bad"):
            s.run([ok, bad, barrier(y, "never")], {x: [1.0, 2.0], y: [1.0, 2.0, 3.0]})
    BARRIERS["never"].abort()


def _plan_for(sess, fetches, feeds=()):
    from dflab.runtime import fetches as fetch_mod

    m = fetch_mod.mapper_for(sess.graph, fetches)
    return sess.master.get_plan(m.tensors, m.targets, tuple(feeds)).executor_plan


def test_step_api_runs_one_node_at_a_time_and_matches_run():
    x = tf.constant(2.0, name="x")
    y = tf.constant(3.0, name="y")
    z = tf.multiply(x + y, y, name="z")
    with tf.Session() as s:
        plan = _plan_for(s, z)
        ex = Execution(plan)
        ready_names = sorted(plan.nodes[i].op.name for i in ex.ready_nodes)
        assert ready_names == ["x", "y"]
        # dataflow order is free: run y first
        yi = next(i for i in ex.ready_nodes if plan.nodes[i].op.name == "y")
        ex.step(yi)
        order = [plan.nodes[yi].op.name]
        while ex.ready:
            order.append(plan.nodes[ex.step()].op.name)
        assert ex.finished and order[0] == "y" and order[-1] == "z"
        assert ex.fetch_values() == [s.run(z)]
        with pytest.raises(tf.errors.OutOfRangeError):
            ex.step()


def test_tensors_released_at_last_use():
    x = tf.placeholder(tf.float32, [4])
    h = x
    for _ in range(5):
        h = h + 1.0
    with tf.Session() as s:
        plan = _plan_for(s, h, [x])
        ex = Execution(plan, [np.zeros(4, np.float32)])
        ex.run_inline()
        live = [v for v in ex.slots if v is not None]
        assert len(live) <= 2  # the fetched result (and constants' slots are released too)
        ex2 = Execution(plan, [np.zeros(4, np.float32)])
        while ex2.ready:
            ex2.step()
        assert sum(v is not None for v in ex2.slots) <= 2
        np.testing.assert_array_equal(ex2.fetch_values()[0], np.full(4, 5.0))


@pytest.mark.parametrize("with_loop", [False, True])
def test_an_output_nothing_reads_is_not_kept(with_loop):
    # A resource update ends in a read only control edges consume: an execution that kept that
    # value would hold the variable's buffer, and the next in-place update would copy it whole.
    v = tf.Variable(np.zeros([1000, 8], np.float32), use_resource=True)
    update = tf.scatter_add(v, [3], np.ones([1, 8], np.float32))
    extra = [tf.while_loop(lambda i: i < 2, lambda i: i + 1, [0])] if with_loop else []
    with tf.Session() as s:
        s.run(v.initializer)
        plan = _plan_for(s, [update.op] + extra)
        drivers = ["step"] if with_loop else ["step", "inline"]
        for driver in drivers:
            ex = Execution(plan)
            if driver == "step":
                while ex.ready:
                    ex.step()
            else:
                ex.run_inline()
            held = [x for x in ex.slots if isinstance(x, np.ndarray) and x.shape == (1000, 8)]
            assert held == [], driver
        assert s.run(v)[3, 0] == len(drivers)  # each execution ran its update once


def test_concurrent_clients_with_locking_are_exact():
    counter = tf.Variable(0, dtype=tf.int64, name="counter")
    other = tf.Variable(0.0, name="other")
    inc = counter.assign_add(tf.constant(1, tf.int64), use_locking=True)
    inc2 = tf.group(counter.assign_add(tf.constant(2, tf.int64), use_locking=True),
                    other.assign_add(1.0, use_locking=True))
    read = counter + 0
    n_threads, n_runs = 8, 200
    errors = []
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())

        def client(k):
            try:
                for i in range(n_runs):
                    if (i + k) % 2:
                        s.run(inc)
                    else:
                        s.run([inc2, read])
            except Exception as e:  # noqa: BLE001
                errors.append(e)

        threads = [threading.Thread(target=client, args=(k,)) for k in range(n_threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not any(t.is_alive() for t in threads), "deadlock"
        assert not errors
        total = s.run(counter)
        n_inc = n_threads * n_runs // 2
        assert total == n_inc * 1 + n_inc * 2
        assert s.run(other) == n_inc


def test_concurrent_dataflow_runs_share_session():
    a = tf.placeholder(tf.float64, [64, 64])
    m1 = tf.matmul(a, a)
    m2 = tf.matmul(a, tf.transpose(a) if hasattr(tf, "transpose") else a)
    out = tf.add(m1, m2)
    rng = np.random.default_rng(0)
    mats = [rng.standard_normal((64, 64)) for _ in range(8)]
    results = {}
    with tf.Session(config=tf.ConfigProto(inter_op_parallelism_threads=2)) as s:
        def client(k):
            for _ in range(20):
                results[k] = s.run(out, {a: mats[k]})

        threads = [threading.Thread(target=client, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    for k, m in enumerate(mats):
        want = m @ m + m @ (m.T if hasattr(tf, "transpose") else m)
        np.testing.assert_allclose(results[k], want, rtol=1e-10)


_PROBE = {"now": 0, "max": 0, "lock": threading.Lock()}


def _probe_op(x):
    """A test-only expensive op recording how many instances run at the same moment."""
    if "TestProbe" not in registry.registered_ops():
        registry.register_op("TestProbe", lambda op: [(op.inputs[0].dtype, op.inputs[0].shape)],
                             expensive=True, stateful=True)

        def probe(v):
            with _PROBE["lock"]:
                _PROBE["now"] += 1
                _PROBE["max"] = max(_PROBE["max"], _PROBE["now"])
            threading.Event().wait(0.05)  # long enough for a second thread to enter
            with _PROBE["lock"]:
                _PROBE["now"] -= 1
            return v

        register_kernel("TestProbe", fn=probe)
    return tf.get_default_graph()._create_op("TestProbe", [x], {}, None).outputs[0]


@pytest.mark.parametrize("threads,want", [(1, 1), (2, 2)])
def test_inter_op_threads_bound_concurrency(threads, want):
    x = tf.placeholder(tf.float32, [])
    outs = [_probe_op(x + float(k)) for k in range(4)]
    _PROBE["max"] = 0
    with tf.Session(config=tf.ConfigProto(inter_op_parallelism_threads=threads)) as s:
        assert s.run(tf.add_n(outs), {x: 0.0}) == 6.0
    assert _PROBE["max"] == want
