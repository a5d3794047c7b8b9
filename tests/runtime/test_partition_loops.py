"""While loops whose ops span devices: partitioned with a control loop per partition.

Every partition that receives values inside a loop gets a copy of the loop's frame that iterates
in lockstep with the partition holding the LoopCond (Yu et al., EuroSys 2018, section 4.3); the
values of one tensor in successive iterations travel under keys that carry frame and iteration.
Results must equal the single-device run, for loops, nested loops, loops with conds, gradients,
dead loops, and stepping.
"""

import numpy as np
import pytest

import dflab as tf
from dflab.runtime import fetches as fetch_mod
from dflab.runtime.partition import verify
from dflab.runtime.stepping import StepRun


def _is_control_loop_node(n) -> bool:
    """A node of a partition's control loop: made by the partitioner, not a _Send/_Recv."""
    return n.original is None and n.type not in ("_Send", "_Recv")


def _two_cpus():
    return tf.ConfigProto(device_count={"CPU": 2}, inter_op_parallelism_threads=2)


def _one_device():
    return tf.ConfigProto(device_count={"CPU": 1}, allow_soft_placement=True)


def _plan(sess, fetches, feeds=()):
    m = fetch_mod.mapper_for(sess.graph, fetches)
    return sess.master.get_plan(m.tensors, m.targets, tuple(sorted(feeds, key=id)))


def _both(fetches, feed_dict=None, setup=None):
    """(partitioned result, plan, single-device result) of the same graph."""
    with tf.Session(config=_two_cpus()) as s:
        if setup is not None:
            s.run(setup)
        got = s.run(fetches, feed_dict)
        plan = _plan(s, fetches, list(feed_dict or {}))
    with tf.Session(config=_one_device()) as s:
        if setup is not None:
            s.run(setup)
        want = s.run(fetches, feed_dict)
    return got, plan, want


def _ping_pong_loop(n=6, parallel_iterations=10):
    with tf.device("/cpu:0"):
        x = tf.placeholder(tf.float64, [4], name="x")
        i0 = tf.constant(0)

    def body(i, v):
        with tf.device("/cpu:1"):
            w = tf.tanh(v) * 2.0 + tf.cast(i, tf.float64)
        with tf.device("/cpu:0"):
            return i + 1, w - 0.5

    with tf.device("/cpu:0"):
        return x, tf.while_loop(lambda i, v: i < n, body, [i0, x],
                                parallel_iterations=parallel_iterations)


@pytest.mark.parametrize("parallel_iterations", [1, 10])
def test_loop_body_on_two_devices_matches_one_device(parallel_iterations):
    x, out = _ping_pong_loop(parallel_iterations=parallel_iterations)
    feed = {x: np.linspace(-1, 1, 4)}
    got, plan, want = _both(out, feed)
    assert plan.partitioned
    verify(plan.partitioning)
    assert got[0] == want[0] == 6
    np.testing.assert_allclose(got[1], want[1], rtol=1e-12)
    v = feed[x]
    for i in range(6):  # and both equal NumPy
        v = np.tanh(v) * 2.0 + i - 0.5
    np.testing.assert_allclose(got[1], v, rtol=1e-12)


def test_each_partition_with_loop_values_gets_a_control_loop():
    x, out = _ping_pong_loop()
    with tf.Session(config=_two_cpus()) as s:
        plan = _plan(s, out, [x])
    types = {}
    for device, nodes in plan.partitions.items():
        control = [n for n in nodes if _is_control_loop_node(n)]
        types[device] = sorted(n.type for n in control)
        recvs = [n for n in nodes if n.type == "_Recv" and n.attrs.get("_frame_tagged")]
        for r in recvs:  # every in-loop receive hangs off its partition's control Merge
            assert [c.type for c in r.control_inputs] == ["Merge"]
    for device, found in types.items():
        assert found == ["Const", "Enter", "Identity", "Merge", "NextIteration", "Switch"], device
    # The LoopCond's value crosses once per iteration to the partition without it.
    loop_cond_sends = [n for nodes in plan.partitions.values() for n in nodes
                       if n.type == "_Send" and "LoopCond" in n.attrs["tensor_name"]]
    assert len(loop_cond_sends) == 1 and loop_cond_sends[0].attrs["_frame_tagged"]


def test_nested_loops_across_devices():
    with tf.device("/cpu:0"):
        i0 = tf.constant(0)
        s0 = tf.constant(0.0, tf.float64)

    def outer(i, s):
        def inner(j, t):
            with tf.device("/cpu:1"):
                u = t + tf.cast(i * 10 + j, tf.float64)
            with tf.device("/cpu:0"):
                return j + 1, u
        with tf.device("/cpu:0"):
            _, t = tf.while_loop(lambda j, t: j < 3, inner, [tf.constant(0), s])
            return i + 1, t * 0.5

    with tf.device("/cpu:0"):
        out = tf.while_loop(lambda i, s: i < 4, outer, [i0, s0])
    got, plan, want = _both(out)
    assert plan.partitioned
    verify(plan.partitioning)
    s = 0.0
    for i in range(4):
        for j in range(3):
            s += i * 10 + j
        s *= 0.5
    assert got[1] == pytest.approx(s) and want[1] == pytest.approx(s)


def test_cond_inside_partitioned_loop_and_stateful_counts():
    with tf.device("/cpu:1"):
        hits = tf.Variable(0, name="hits")
    with tf.device("/cpu:0"):
        i0 = tf.constant(0)
        a0 = tf.constant(0.0, tf.float64)

    def body(i, a):
        def odd():
            with tf.device("/cpu:1"):
                with tf.control_dependencies([hits.assign_add(1)]):
                    return a + 100.0
        with tf.device("/cpu:0"):
            nxt = tf.cond(tf.equal(i % 2, 1), odd, lambda: a - 1.0)
            return i + 1, nxt

    with tf.device("/cpu:0"):
        out = tf.while_loop(lambda i, a: i < 7, body, [i0, a0])
    with tf.Session(config=_two_cpus()) as s:
        s.run(hits.initializer)
        got = s.run(out)
        assert _plan(s, out).partitioned
        assert s.run(hits) == 3  # the odd branch ran in iterations 1, 3 and 5 only
    assert got[1] == pytest.approx(-1 + 100 - 1 + 100 - 1 + 100 - 1)


def test_loop_in_untaken_branch_across_devices_is_dead_and_ends():
    p = tf.placeholder(tf.bool, [], name="p")
    with tf.device("/cpu:0"):
        x = tf.constant(2.0, tf.float64)

    def looping():
        def body(i, v):
            with tf.device("/cpu:1"):
                w = v * 3.0
            return i + 1, w
        with tf.device("/cpu:0"):
            return tf.while_loop(lambda i, v: i < 3, body, [tf.constant(0), x])[1]

    with tf.device("/cpu:0"):
        out = tf.cond(p, looping, lambda: x + 1.0)
    with tf.Session(config=_two_cpus()) as s:
        opts = tf.RunOptions(timeout_in_ms=10000)
        assert s.run(out, {p: True}, options=opts) == 54.0
        assert s.run(out, {p: False}, options=opts) == 3.0
        assert _plan(s, out, [p]).partitioned


def test_gradient_of_a_partitioned_loop():
    with tf.device("/cpu:0"):
        w = tf.Variable(np.array([0.5, -0.3]), name="w")
        i0 = tf.constant(0)

    def body(i, h):
        with tf.device("/cpu:1"):
            h2 = tf.tanh(h * w + 0.1)
        return i + 1, h2

    with tf.device("/cpu:0"):
        _, h = tf.while_loop(lambda i, h: i < 4, body, [i0, tf.constant([1.0, 2.0], tf.float64)])
        loss = tf.reduce_sum(h * h)
        grad = tf.gradients(loss, w)[0]
    got, plan, want = _both([loss, grad], setup=w.initializer)
    assert plan.partitioned
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-10)

    def f(wv):
        hv = np.array([1.0, 2.0])
        for _ in range(4):
            hv = np.tanh(hv * wv + 0.1)
        return np.sum(hv * hv)

    eps = 1e-6
    w0 = np.array([0.5, -0.3])
    numeric = [(f(w0 + eps * e) - f(w0 - eps * e)) / (2 * eps) for e in np.eye(2)]
    np.testing.assert_allclose(got[1], numeric, rtol=1e-6)


def test_error_inside_partitioned_loop_cancels_cleanly():
    with tf.device("/cpu:0"):
        x = tf.placeholder(tf.float64, [None], name="x")
        i0 = tf.constant(0)

    def body(i, v):
        with tf.device("/cpu:1"):
            bad = tf.reshape(v, [3], name="bad")  # fails for a length that is not 3
        return i + 1, bad

    with tf.device("/cpu:0"):
        out = tf.while_loop(lambda i, v: i < 3, body, [i0, x],
                            shape_invariants=[i0.shape, tf.TensorShape([None])])
    with tf.Session(config=_two_cpus()) as s:
        opts = tf.RunOptions(timeout_in_ms=10000)
        with pytest.raises(tf.errors.InvalidArgumentError) as info:
            s.run(out, {x: np.ones(4)}, options=opts)
        assert "bad" in str(info.value)
        assert s.run(out, {x: np.ones(3)}, options=opts)[0] == 3  # the session still works


def test_stepping_a_partitioned_loop():
    x, out = _ping_pong_loop(n=3)
    feed = {x: np.arange(4.0)}
    with tf.Session(config=_two_cpus()) as s:
        want = s.run(out, feed)
        run = StepRun(s, out, feed)
        assert len(run.partition_graphs) == 2
        run.resume()
        got = run.result
        frames = {(e.device, e.frame) for e in run.history if e.frame}
    assert len({d for d, _ in frames}) == 2  # both partitions ran iterations of the frame
    np.testing.assert_allclose(got[1], want[1])


def test_traced_partitioned_loop_reports_every_iteration():
    x, out = _ping_pong_loop(n=4)
    with tf.Session(config=_two_cpus()) as s:
        md = tf.RunMetadata()
        s.run(out, {x: np.zeros(4)},
              options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE,
                                    output_partition_graphs=True), run_metadata=md)
    assert len(md.partition_graphs) == 2
    tanh_runs = [ns for d in md.step_stats.dev_stats for ns in d.node_stats
                 if ns.node_name.endswith("Tanh")]
    assert len(tanh_runs) == 4


def test_loop_invariant_entered_on_one_device_used_on_another():
    with tf.device("/cpu:1"):
        scale = tf.constant(np.array([1.0, 2.0, 3.0]), name="scale")
    with tf.device("/cpu:0"):
        i0 = tf.constant(0)
        v0 = tf.constant(np.ones(3), name="v0")

    def body(i, v):
        with tf.device("/cpu:1"):
            tf.identity(scale)  # the invariant enters the loop here, on cpu:1...
        with tf.device("/cpu:0"):
            return i + 1, v * scale  # ...and that Enter is used on cpu:0 in every iteration

    with tf.device("/cpu:0"):
        out = tf.while_loop(lambda i, v: i < 4, body, [i0, v0])
    got, plan, want = _both(out)
    assert plan.partitioned
    entered_twice = [n.name for nodes in plan.partitions.values() for n in nodes
                     if n.type == "Enter" and not _is_control_loop_node(n)]
    assert len(entered_twice) > len(set(entered_twice))  # one Enter copied to the other device
    np.testing.assert_allclose(got[1], np.array([1.0, 2.0, 3.0]) ** 4)
    np.testing.assert_allclose(want[1], got[1])
