"""Partitioning into per-device subgraphs joined by _Send/_Recv, and running the partitions
concurrently: structure, numerical identity with one-device runs, concurrency, cancellation,
timeouts, concurrent steps, feeds and fetches across devices."""

import threading
import time

import numpy as np
import pytest
from barrier_ops import BARRIERS, barrier

import dflab as tf
from dflab.framework import registry
from dflab.framework.rendezvous import Rendezvous, create_key, parse_key
from dflab.kernels.registry import register_kernel
from dflab.runtime import fetches as fetch_mod
from dflab.runtime.partition import verify
from dflab.runtime.rendezvous import LocalRendezvous

CPU = "/job:localhost/replica:0/task:0/device:CPU:"
THREE = dict(device_count={"CPU": 3}, inter_op_parallelism_threads=3)


def _three_cpus(**kw):
    return tf.ConfigProto(**{**THREE, **kw})


def _one_device():
    # The reference: the same graph with every op on CPU:0.
    return tf.ConfigProto(device_count={"CPU": 1}, allow_soft_placement=True)


def _plan(sess, fetches, feeds=(), targets=None):
    m = fetch_mod.mapper_for(sess.graph, fetches)
    feed_tensors = tuple(sorted(feeds, key=id))
    return sess.master.get_plan(m.tensors, m.targets if targets is None else targets, feed_tensors)


def _comm(plan, op_type):
    return [n for nodes in plan.partitions.values() for n in nodes if n.type == op_type]


# --- test-only ops -------------------------------------------------------------------------

_SEEN_CANCEL: list = []
_WAITING = threading.Event()


def _wait_for_cancel(x):
    """Blocks until its step is cancelled (20 s at most), then records that it saw it."""
    if "TestPartitionWaitCancel" not in registry.registered_ops():
        registry.register_op("TestPartitionWaitCancel",
                             lambda op: [(op.inputs[0].dtype, op.inputs[0].shape)],
                             blocking=True, stateful=True)

        def factory(op, ctx):
            def wait(step, v):
                _WAITING.set()
                if step.cancelled.wait(20.0):
                    _SEEN_CANCEL.append(op.name)
                return v

            return wait

        register_kernel("TestPartitionWaitCancel", factory=factory, takes_step=True)
    return tf.get_default_graph()._create_op("TestPartitionWaitCancel", [x], {},
                                             None).outputs[0]


def _after_waiting(x):
    """Passes ``x`` on once a ``_wait_for_cancel`` node has started (10 s at most)."""
    if "TestPartitionGate" not in registry.registered_ops():
        registry.register_op("TestPartitionGate",
                             lambda op: [(op.inputs[0].dtype, op.inputs[0].shape)],
                             blocking=True, stateful=True)

        def gate(v):
            _WAITING.wait(10.0)
            return v

        register_kernel("TestPartitionGate", fn=gate)
    return tf.get_default_graph()._create_op("TestPartitionGate", [x], {}, None).outputs[0]


# --- rendezvous ----------------------------------------------------------------------------
def test_rendezvous_send_and_recv_in_either_order():
    r = LocalRendezvous()
    assert isinstance(r, Rendezvous)
    k1 = create_key(26, CPU + "0", 7, CPU + "1", "a:0")
    k2 = create_key(26, CPU + "0", 7, CPU + "1", "b:0")
    assert k1 == f"1a;{CPU}0;7;{CPU}1;a:0;0:0"
    assert parse_key(k1) == (26, CPU + "0", 7, CPU + "1", "a:0", "0:0")
    r.send(k1, 1.0)
    assert r.recv(k1, timeout=1) == 1.0
    got = []
    r.recv_async(k2, lambda v, e: got.append((v, e)))
    assert got == []
    r.send(k2, 2.0)
    assert got == [(2.0, None)]
    assert r.pending_keys() == []


def test_rendezvous_abort_fails_pending_and_later_traffic():
    r = LocalRendezvous()
    got = []
    r.recv_async("k", lambda v, e: got.append(e))
    err = tf.errors.CancelledError(None, None, "stop")
    r.abort(err)
    assert got == [err]
    r.recv_async("j", lambda v, e: got.append(e))
    assert got == [err, err]
    with pytest.raises(tf.errors.CancelledError):
        r.send("k", 1.0)
    with pytest.raises(tf.errors.DeadlineExceededError):
        LocalRendezvous().recv("never", timeout=0.05)


def test_rendezvous_keys_of_different_steps_differ_and_bad_keys_are_rejected():
    a = create_key(1, CPU + "0", 7, CPU + "1", "a:0")
    b = create_key(2, CPU + "0", 7, CPU + "1", "a:0")
    assert a != b and parse_key(a).step_id == 1 and parse_key(b).step_id == 2
    for bad in ("k", "1;a;b;c;d", f"zz;{CPU}0;7;{CPU}1;a:0;0:0", 5):
        with pytest.raises(tf.errors.InvalidArgumentError, match="Invalid rendezvous key"):
            parse_key(bad)


def test_local_rendezvous_copies_between_memory_spaces():
    copied = []

    def copy(key, value):
        copied.append(parse_key(key).dst_device)
        return value * 2

    r = LocalRendezvous(5, copy)
    k = create_key(5, CPU + "0", 1, CPU + "1", "a:0")
    r.send(k, 21)
    assert r.recv(k, timeout=1) == 42 and copied == [CPU + "1"]


def test_rendezvous_rejects_a_second_send_of_one_key():
    r = LocalRendezvous()
    r.send("k", 1)
    with pytest.raises(tf.errors.InternalError, match="already sent"):
        r.send("k", 2)


# --- structure -----------------------------------------------------------------------------
def _small_graph():
    with tf.device("/cpu:0"):
        a = tf.constant(np.arange(4, dtype=np.float32), name="a")
        u = tf.no_op(name="u")
    with tf.device("/cpu:1"):
        b = tf.multiply(a, 2.0, name="b")
        c = tf.add(a, 1.0, name="c")
        with tf.control_dependencies([a.op]):
            e = tf.identity(c, name="e")  # control edge from a: reuses the Recv of a:0
    with tf.device("/cpu:2"):
        d = tf.subtract(a, 1.0, name="d")
        with tf.control_dependencies([u]):
            f = tf.add(b, d, name="f")  # control edge from u: its own pair
        g = tf.add(f, e, name="g")
    return a, b, c, d, e, f, g, u


def test_partition_structure_one_pair_per_tensor_per_destination():
    a, b, c, d, e, f, g, u = _small_graph()
    n_ops = len(tf.get_default_graph().get_operations())
    with tf.Session(config=_three_cpus()) as s:
        plan = _plan(s, g)
        assert plan.partitioned and plan.executor_plan is None
        assert list(plan.partitions) == [CPU + "0", CPU + "1", CPU + "2"]
        verify(plan.partitioning)
        sends, recvs = _comm(plan, "_Send"), _comm(plan, "_Recv")
        pairs = sorted((n.attrs["tensor_name"], n.attrs["send_device"][-1],
                        n.attrs["recv_device"][-1]) for n in sends)
        # a:0 goes once to CPU:1 (b, c and e's control edge share it) and once to CPU:2 (d);
        # b, c… are computed where they are needed, or travel once: b:0 and e:0 to CPU:2.
        assert pairs == [("^u", "0", "2"), ("a:0", "0", "1"), ("a:0", "0", "2"),
                         ("b:0", "1", "2"), ("e:0", "1", "2")]
        assert sorted((n.attrs["tensor_name"], n.attrs["send_device"][-1],
                       n.attrs["recv_device"][-1]) for n in recvs) == pairs
        for n in sends + recvs:
            assert n.attrs["client_terminated"] is False
            assert isinstance(n.attrs["send_device_incarnation"], int)
            assert n.device == n.attrs["send_device" if n.type == "_Send"
                                                 else "recv_device"]
        # Views of the user's ops read the Recv outputs; control crossings arrive as Recvs.
        views = {n.name: n for nodes in plan.partitions.values() for n in nodes
                 if n.original is not None}
        recv_a1 = next(r for r in recvs if r.attrs["tensor_name"] == "a:0"
                       and r.device == CPU + "1")
        assert views["b"].inputs[0].op is recv_a1 and views["c"].inputs[0].op is recv_a1
        assert views["e"].control_inputs == (recv_a1,)
        ctrl = views["f"].control_inputs
        assert len(ctrl) == 1 and ctrl[0].original is None
        assert ctrl[0].type == "_Recv" and ctrl[0].attrs["tensor_name"] == "^u"
        assert views["f"].original is f.op and views["f"].attrs == f.op.attrs
        np.testing.assert_array_equal(s.run(g), (np.arange(4) * 2 + np.arange(4) - 1) +
                                      (np.arange(4) + 1))
        # One GraphDef per device, with the cut nodes and the rewired inputs.
        defs = plan.partition_graph_defs()
        assert [gd.node[0].device for gd in defs] == list(plan.partitions)
        by_name = {n.name: n for gd in defs for n in gd.node}
        assert by_name["b"].input[0] == recv_a1.name
        assert by_name["f"].input[-1] == "^" + ctrl[0].name
        assert {n.op for gd in defs for n in gd.node} >= {"_Send", "_Recv"}
    # The user's graph never sees a _Send or _Recv.
    ops = tf.get_default_graph().get_operations()
    assert len(ops) == n_ops and not any(op.type in ("_Send", "_Recv") for op in ops)


def test_single_device_plans_are_not_partitioned():
    x = tf.placeholder(tf.float32, [2])
    y = x * 2.0 + 1.0
    with tf.Session(config=_three_cpus()) as s:
        plan = _plan(s, y, [x])
        assert not plan.partitioned and plan.executor_plan is not None
        assert list(plan.partitions) == [CPU + "0"]
        assert [n.original for n in plan.partitions[CPU + "0"]] == plan.ops
        np.testing.assert_array_equal(s.run(y, {x: [1, 2]}), [3, 5])


def test_partition_graphs_in_run_metadata():
    a, b, c, d, e, f, g, u = _small_graph()
    with tf.Session(config=_three_cpus()) as s:
        md = tf.RunMetadata()
        opts = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE, output_partition_graphs=True)
        s.run(g, options=opts, run_metadata=md)
        assert len(md.partition_graphs) == 3
        ops = [n.op for gd in md.partition_graphs for n in gd.node]
        assert ops.count("_Send") == ops.count("_Recv") == 5
        devices = {ds.device for ds in md.step_stats.dev_stats}
        assert devices == {CPU + "0", CPU + "1", CPU + "2"}


# --- numerical identity with one-device runs -------------------------------------------------
def _matmul_chain():
    rng = np.random.default_rng(1)
    x = tf.placeholder(tf.float32, [None, 8], name="x")
    h = x
    for i in range(6):
        with tf.device(f"/cpu:{i % 3}"):
            w = tf.constant(rng.standard_normal((8, 8)).astype(np.float32))
            h = tf.tanh(tf.matmul(h, w) + 0.1 * i)
    with tf.device("/cpu:1"):
        out = tf.reduce_sum(h, axis=1)
    feed = {x: rng.standard_normal((5, 8)).astype(np.float32)}
    return [[out, h]], feed, None


def _variables_and_assign_add():
    with tf.device("/cpu:1"):
        v = tf.Variable(np.zeros(3, np.float32), name="v")
    with tf.device("/cpu:0"):
        delta = tf.constant(np.array([1.0, 2.0, 3.0], np.float32)) * 0.5
    with tf.device("/cpu:1"):
        inc = tf.assign_add(v, delta)  # colocated with v (a ref edge)
    with tf.device("/cpu:2"):
        doubled = v.read_value() * 2.0
    return [[inc], [inc], [doubled, v]], {}, tf.global_variables_initializer()


def _gradients_and_sgd():
    rng = np.random.default_rng(2)
    x = tf.placeholder(tf.float32, [None, 3], name="x")
    y = tf.placeholder(tf.float32, [None, 1], name="y")
    with tf.device("/cpu:0"):
        w = tf.Variable(rng.standard_normal((3, 1)).astype(np.float32), name="w")
        b = tf.Variable(np.full([1], 0.5, np.float32), name="b")
    with tf.device("/cpu:1"):
        pred = tf.matmul(x, w) + b
    with tf.device("/cpu:2"):
        loss = tf.reduce_mean(tf.square(pred - y))
        train = tf.train.MomentumOptimizer(0.1, 0.9).minimize(loss)
    feed = {x: rng.standard_normal((16, 3)).astype(np.float32),
            y: rng.standard_normal((16, 1)).astype(np.float32)}
    return [[loss, train]] * 5 + [[w, b]], feed, tf.global_variables_initializer()


@pytest.mark.parametrize("build", [_matmul_chain, _variables_and_assign_add, _gradients_and_sgd])
def test_results_identical_to_one_device(build):
    results = []
    for config in (_three_cpus(), _one_device()):
        graph = tf.Graph()
        with graph.as_default():
            steps, feed, init = build()
        with tf.Session(graph=graph, config=config) as s:
            if init is not None:
                s.run(init)
            results.append([s.run(fetches, feed) for fetches in steps])
            plans = [_plan(s, fetches, feed) for fetches in steps]
        if config.device_count["CPU"] == 3:
            assert any(p.partitioned and len(p.partitions) > 1 for p in plans)
            for p in plans:
                if p.partitioned:
                    verify(p.partitioning)
    for got, want in zip(*results):
        for g, w in zip(got, want):
            if w is None:
                assert g is None
            else:
                np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


# --- feeds and fetches ---------------------------------------------------------------------
def test_feed_consumed_on_several_devices_goes_to_each_partition():
    x = tf.placeholder(tf.float32, [3], name="x")
    outs = []
    for i in range(3):
        with tf.device(f"/cpu:{i}"):
            outs.append(x * float(i + 1))
    with tf.device("/cpu:2"):
        total = outs[0] + outs[1] + outs[2]
    with tf.Session(config=_three_cpus()) as s:
        xv = np.array([1.0, 2.0, 3.0], np.float32)
        got = s.run([total, outs, x], {x: xv})
        np.testing.assert_array_equal(got[0], xv * 6)
        for i, o in enumerate(got[1]):
            np.testing.assert_array_equal(o, xv * (i + 1))
        np.testing.assert_array_equal(got[2], xv)  # a fetched feed comes back as fed
        plan = _plan(s, [total, outs, x], [x])
        for part in plan.partitioning.partitions.values():
            assert part.feeds == [x]
        assert not any(n.attrs["tensor_name"] == "x:0" for n in _comm(plan, "_Send"))


def test_feeding_an_intermediate_tensor_cuts_the_send():
    with tf.device("/cpu:0"):
        a = tf.constant(np.ones(2, np.float32))
        b = a * 3.0
    with tf.device("/cpu:1"):
        c = b + 1.0
    with tf.device("/cpu:2"):
        d = c * b
    with tf.Session(config=_three_cpus()) as s:
        np.testing.assert_array_equal(s.run(d), [12.0, 12.0])
        np.testing.assert_array_equal(s.run(d, {b: [1.0, 2.0]}), [2.0, 6.0])
        plan = _plan(s, d, [b])
        assert CPU + "0" not in plan.partitions  # nothing left to compute there
        assert [n.attrs["tensor_name"] for n in _comm(plan, "_Send")] == [c.name]


def test_fetches_from_several_devices_keep_their_structure():
    tensors = []
    for i in range(3):
        with tf.device(f"/cpu:{i}"):
            tensors.append(tf.constant(np.float32(i)) + 10.0)
    with tf.Session(config=_three_cpus()) as s:
        got = s.run({"a": tensors[2], "b": (tensors[0], [tensors[1], tensors[2]])})
        assert got == {"a": 12.0, "b": (10.0, [11.0, 12.0])}
        assert isinstance(got["a"], np.float32)


def test_targets_only_across_devices():
    with tf.device("/cpu:0"):
        v = tf.Variable(np.float32(0.0), name="counter")
    with tf.device("/cpu:2"):
        step = tf.constant(np.float32(2.0)) * 1.5
    inc = tf.assign_add(v, step)
    with tf.Session(config=_three_cpus()) as s:
        s.run(v.initializer)
        for _ in range(4):
            assert s.run(inc.op) is None
        assert s.run(v) == 12.0


# --- concurrency, errors, timeouts -----------------------------------------------------------
def test_partitions_run_concurrently():
    BARRIERS["p"] = threading.Barrier(2, timeout=10)
    x = tf.placeholder(tf.float32, [])
    with tf.device("/cpu:0"):
        a = barrier(x + 1.0, "p")
    with tf.device("/cpu:1"):
        b = barrier(x + 2.0, "p")
    with tf.Session(config=tf.ConfigProto(device_count={"CPU": 2},
                                          inter_op_parallelism_threads=2)) as s:
        assert _plan(s, a + b, [x]).partitioned
        assert s.run(a + b, {x: 0.0}) == 3.0


def test_error_on_one_device_cancels_the_others_and_raises_the_original():
    del _SEEN_CANCEL[:]
    _WAITING.clear()
    x = tf.placeholder(tf.float32, [None])
    y = tf.placeholder(tf.float32, [None])
    with tf.device("/cpu:0"):
        bad = tf.add(_after_waiting(x), y, name="bad")  # fails once CPU:1 is busy waiting
        later = tf.multiply(bad, 2.0, name="later")
    with tf.device("/cpu:1"):
        waits = _wait_for_cancel(x * 1.0)
        needs_bad = tf.add(later, 1.0, name="needs_bad")  # waits on a Recv that never comes
    with tf.Session(config=_three_cpus()) as s:
        t0 = time.monotonic()
        with pytest.raises(tf.errors.InvalidArgumentError) as info:
            s.run([waits, needs_bad], {x: [1.0, 2.0], y: [1.0, 2.0, 3.0]})
        assert time.monotonic() - t0 < 5.0
        assert info.value.op is bad.op  # the user's op, not a partition's view of it
        assert "bad" in str(info.value) and "test_partition.py:" in str(info.value)
        deadline = time.monotonic() + 5
        while not _SEEN_CANCEL and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _SEEN_CANCEL  # the other partition's step was cancelled
        # The session is still usable.
        np.testing.assert_array_equal(s.run(needs_bad, {x: [1.0], y: [2.0]}), [7.0])


def test_error_in_a_receiving_partition_cancels_the_sender():
    x = tf.placeholder(tf.float32, [None])
    with tf.device("/cpu:0"):
        slow = _wait_for_cancel(x + 1.0)
        fast = x * 2.0
    with tf.device("/cpu:1"):
        oops = tf.reshape(fast, [7], name="oops")
    with tf.Session(config=_three_cpus()) as s:
        t0 = time.monotonic()
        with pytest.raises(tf.errors.InvalidArgumentError, match="oops"):
            s.run([slow, oops], {x: [1.0, 2.0]})
        assert time.monotonic() - t0 < 5.0


def test_timeout_raises_deadline_exceeded_without_hanging():
    x = tf.placeholder(tf.float32, [2])
    with tf.device("/cpu:0"):
        a = x + 1.0
    with tf.device("/cpu:1"):
        stuck = _wait_for_cancel(a)
    with tf.device("/cpu:2"):
        out = stuck * 2.0
    with tf.Session(config=_three_cpus()) as s:
        t0 = time.monotonic()
        with pytest.raises(tf.errors.DeadlineExceededError, match="after 200 ms.*CPU_1"):
            s.run(out, {x: [1.0, 2.0]}, options=tf.RunOptions(timeout_in_ms=200))
        assert time.monotonic() - t0 < 5.0
    with tf.Session(config=_three_cpus(operation_timeout_in_ms=200)) as s:
        with pytest.raises(tf.errors.DeadlineExceededError):
            s.run(out, {x: [1.0, 2.0]})


def test_concurrent_steps_on_a_partitioned_plan_are_exact():
    rng = np.random.default_rng(3)
    w_val = rng.standard_normal((4, 4)).astype(np.float32)
    x = tf.placeholder(tf.float32, [4, 4], name="x")
    with tf.device("/cpu:0"):
        w = tf.constant(w_val)
    with tf.device("/cpu:1"):
        h = tf.matmul(x, w)
    with tf.device("/cpu:2"):
        out = tf.tanh(h) * 2.0 + x
    feeds = [rng.standard_normal((4, 4)).astype(np.float32) for _ in range(8)]
    with tf.Session(config=_one_device()) as ref:
        want = [ref.run(out, {x: f}) for f in feeds]
    errors_seen = []
    with tf.Session(config=_three_cpus()) as s:
        assert _plan(s, out, [x]).partitioned

        def client(k):
            try:
                for _ in range(25):
                    np.testing.assert_array_equal(s.run(out, {x: feeds[k]}), want[k])
            except Exception as e:  # noqa: BLE001 - reported below
                errors_seen.append(e)

        threads = [threading.Thread(target=client, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    assert not errors_seen, errors_seen[0]


def test_loop_across_three_devices_is_partitioned():
    with tf.device("/cpu:0"):
        i0 = tf.constant(0)
        acc0 = tf.constant(np.float32(1.0))
    with tf.device("/cpu:1"):
        _, acc = tf.while_loop(lambda i, a: i < 5, lambda i, a: (i + 1, a * 2.0), [i0, acc0])
    with tf.device("/cpu:2"):
        out = acc + 1.0
    with tf.Session(config=_three_cpus()) as s:
        plan = _plan(s, out)
        assert plan.partitioned and len(plan.partitions) == 3
        verify(plan.partitioning)
        assert s.run(out) == 33.0


@pytest.mark.parametrize("flag", [True, False])
def test_cond_across_devices_is_partitioned_and_dead_values_cross(flag):
    """Each branch on its own device, the predicate and the join on a third: the untaken
    branch's dead values cross through _Send/_Recv, and its stateful ops do not run."""
    hits = [tf.Variable(0, name=f"hits{k}") for k in range(2)]
    p = tf.placeholder(tf.bool, [])
    with tf.device("/cpu:0"):
        x = tf.constant(np.arange(4, dtype=np.float64))

    def branch(k, scale):
        def fn():
            with tf.device(f"/cpu:{k + 1}"):
                with tf.control_dependencies([hits[k].assign_add(1)]):
                    return tf.reduce_sum(x * scale)
        return fn

    for k in range(2):
        hits[k]._variable.op._set_device(f"/cpu:{k + 1}")
    with tf.device("/cpu:0"):
        out = tf.cond(p, branch(0, 2.0), branch(1, -1.0)) + 1.0
    with tf.Session(config=_three_cpus()) as s:
        s.run(tf.global_variables_initializer())
        plan = _plan(s, out, [p])
        assert plan.partitioned and len(plan.partitions) == 3
        assert s.run(out, {p: flag}) == (13.0 if flag else -5.0)
        assert s.run([h.read_value() for h in hits]) == ([1, 0] if flag else [0, 1])


@pytest.mark.parametrize("use_resource, how", [(False, "by reference"),
                                               (True, "uses the resource handle")])
def test_an_update_across_devices_is_rejected_by_the_partitioner(use_resource, how):
    # The placer colocates ops that take a variable by reference or through its handle; the
    # partitioner checks it.
    from types import SimpleNamespace

    from dflab.runtime.partition import partition
    from dflab.runtime.subgraph import prune, topological_order

    v = tf.Variable(np.zeros(2, np.float32), name="v", use_resource=use_resource)
    upd = tf.assign_add(v, [1.0, 1.0], name="upd")
    upd_op = tf.get_default_graph().get_operation_by_name("upd")
    ops = topological_order(prune([upd], [], ()), ())
    where = {op: SimpleNamespace(device=CPU + ("1" if op is upd_op else "0")) for op in ops}
    with pytest.raises(tf.errors.InvalidArgumentError, match=f"upd .* {how}") as info:
        partition(ops, where, (), [upd])
    assert info.value.op is upd_op
