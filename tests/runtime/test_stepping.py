"""StepRun: Session.run one node at a time on the real executor, and session step listeners."""

import warnings

import numpy as np
import pytest

import dflab as tf
from dflab.runtime.stepping import StepRun, has_inf_or_nan

TWO_CPUS = dict(device_count={"CPU": 2}, inter_op_parallelism_threads=2)


def _diamond():
    a = tf.constant(np.arange(4.0).reshape(2, 2), name="a")
    b = tf.constant(np.ones((2, 2)), name="b")
    c = tf.matmul(a, b, name="c")
    d = tf.add(a, b, name="d")
    return tf.multiply(c, d, name="e")


def test_stepping_gives_session_run_results_in_any_dataflow_order():
    e = _diamond()
    with tf.Session() as sess:
        expected = sess.run(e)
        first = StepRun(sess, e)
        assert {r.name for r in first.ready} == {"a", "b"}
        first.resume()
        second = StepRun(sess, {"out": e})
        for name in ["b", "a", "d", "c", "e"]:  # a different, equally valid order
            second.step(name)
        np.testing.assert_allclose(first.result, expected)
        np.testing.assert_allclose(second.result["out"], expected)
        assert second.executed == ["b", "a", "d", "c", "e"]
        assert first.finished and second.finished


def test_ready_set_and_states_follow_the_dataflow():
    e = _diamond()
    with tf.Session() as sess:
        run = StepRun(sess, e)
        assert run.states == {"a": "ready", "b": "ready", "c": "pending", "d": "pending",
                              "e": "pending"}
        run.step("a")
        assert {r.name for r in run.ready} == {"b"}  # c and d still need b
        run.step("b")
        assert {r.name for r in run.ready} == {"c", "d"}
        np.testing.assert_allclose(run.value("a")[0], np.arange(4.0).reshape(2, 2))
        assert run.states["a"] == "done" and run.states["c"] == "ready"


def test_states_at_replays_history_without_executing():
    v = tf.Variable(1.0, name="v")
    inc = tf.assign_add(v, 1.0, name="inc")
    with tf.Session() as sess:
        sess.run(v.initializer)
        run = StepRun(sess, inc)
        events = run.resume()
        assert run.states_at(0)["inc"] == "pending"
        assert run.states_at(len(events))["inc"] == "done"
        # Looking back executes nothing: the variable was incremented exactly once.
        for k in range(len(events) + 1):
            run.states_at(k)
        assert sess.run(v) == 2.0
        with pytest.raises(IndexError):
            run.states_at(len(events) + 1)


def test_errors_name_what_is_wrong():
    e = _diamond()
    with tf.Session() as sess:
        run = StepRun(sess, e)
        with pytest.raises(tf.errors.InvalidArgumentError, match="e is not ready.*ready: a, b"):
            run.step("e")
        with pytest.raises(tf.errors.NotFoundError, match="nope is not part of this step"):
            run.step("nope")
        with pytest.raises(tf.errors.FailedPreconditionError, match="has not finished"):
            _ = run.result
        with pytest.raises(tf.errors.FailedPreconditionError, match="c has not run"):
            run.value("c")
        run.resume()
        with pytest.raises(tf.errors.OutOfRangeError, match="finished"):
            run.step()


def test_a_failing_kernel_stops_the_run_with_the_op_named():
    x = tf.placeholder(tf.float32, [None], name="x")
    bad = tf.reshape(x, [3], name="bad")
    with tf.Session() as sess:
        run = StepRun(sess, bad, {x: np.ones(4)})
        with pytest.raises(tf.errors.InvalidArgumentError) as info:
            run.resume()
        assert info.value.op is not None and info.value.op.name == "bad"
        with pytest.raises(tf.errors.InvalidArgumentError):
            run.step()  # the step is over
        # The failing node is recorded where the step ended, in the history and the states.
        last = run.history[-1]
        assert last.name == "bad" and last.error is info.value
        assert run.states["bad"] == "failed" and last.changes["bad"] == ("ready", "failed")
        assert not run.finished


def test_while_loop_frames_iterations_and_result():
    i = tf.constant(0, name="i0")
    acc = tf.constant(1.0, name="acc0")
    out = tf.while_loop(lambda i, a: i < 4, lambda i, a: (i + 1, a * 2.0), [i, acc])
    with tf.Session() as sess:
        expected = sess.run(out)
        run = StepRun(sess, out)
        seen_frames = set()
        while not run.finished:
            for r in run.ready:
                if r.frame:
                    seen_frames.add(r.frame)
                    assert r.key == f"{r.name}@{r.frame}#{r.iteration}"
            run.step()
            if run.live_frames:
                assert run.live_frames[0]["frame"] in seen_frames | {run.live_frames[0]["frame"]}
        assert run.result == tuple(expected) or list(run.result) == list(expected)
        iterations = {e.iteration for e in run.history if e.frame}
        assert iterations == {0, 1, 2, 3, 4}  # four bodies, and the final test of the condition
        body_adds = [e for e in run.history if e.op_type == "AddV2" and not e.dead]
        assert len(body_adds) == 4


def test_untaken_cond_branch_is_dead():
    p = tf.placeholder(tf.bool, [], name="p")
    x = tf.constant(3.0, name="x")
    y = tf.cond(p, lambda: tf.square(x, name="sq"), lambda: tf.negative(x, name="neg"))
    with tf.Session() as sess:
        run = StepRun(sess, y, {p: True})
        run.resume()
        assert run.result == sess.run(y, {p: True}) == 9.0
        states = run.states
        sq = [n for n in states if n.endswith("sq")]
        neg = [n for n in states if n.endswith("neg")]
        assert states[sq[0]] == "done" and states[neg[0]] == "dead"
        dead_events = [e for e in run.history if e.dead]
        assert any(e.name == neg[0] and e.outputs == (None,) for e in dead_events)


def test_partitioned_step_shows_recv_waiting_for_its_send():
    with tf.device("/cpu:0"):
        a = tf.constant(2.0, name="a")
        b = tf.square(a, name="b")
    with tf.device("/cpu:1"):
        c = tf.add(b, 1.0, name="c")
    with tf.Session(config=tf.ConfigProto(**TWO_CPUS)) as sess:
        run = StepRun(sess, c)
        assert len(run.partition_graphs) == 2
        devices = {r.device for r in run.ready}
        assert len(devices) == 2  # both partitions have work from the start
        recv = next(r for r in run.ready if r.op_type == "_Recv")
        event = run.step(recv)
        assert not event.completed and run.states[recv.name] == "running"
        run.run_to("b")
        send = next(r for r in run.ready if r.op_type == "_Send")
        run.step(send)  # delivering the value completes the waiting _Recv
        assert event.completed and run.states[recv.name] == "done"
        np.testing.assert_allclose(event.outputs[0], 4.0)
        run.resume()
        assert run.result == sess.run(c) == 5.0


def test_two_stepruns_share_variables():
    v = tf.Variable(10.0, name="v")
    read_then_add = tf.add(v.read_value(), 1.0, name="read_plus_one")
    double = tf.assign(v, v * 2.0, name="double")
    with tf.Session() as sess:
        sess.run(v.initializer)
        writer = StepRun(sess, double)
        reader = StepRun(sess, read_then_add)
        writer.resume()  # v = 20 before the reader reads it
        reader.resume()
        assert reader.result == 21.0
        assert sess.run(v) == 20.0


def test_run_to_prefers_what_the_target_needs():
    e = _diamond()
    with tf.Session() as sess:
        run = StepRun(sess, e)
        events = run.run_to("d")
        assert [x.name for x in events][-1] == "d"
        assert "c" not in run.executed  # not needed by d
        with pytest.raises(tf.errors.NotFoundError):
            run.run_to("zzz")


def test_breakpoints_by_name_and_predicate():
    e = _diamond()
    with tf.Session() as sess:
        run = StepRun(sess, e)
        run.add_breakpoint("c")
        run.resume()
        assert "c" in {r.name for r in run.ready} and "c" not in run.executed
        run.resume()  # goes on past the breakpoint it stopped at
        assert run.finished

    x = tf.placeholder(tf.float32, [2], name="x")
    lg = tf.log(x, name="lg")
    out = tf.reduce_sum(lg, name="out")
    with tf.Session() as sess:
        run = StepRun(sess, out, {x: [1.0, 0.0]})
        events = run.resume(breakpoints=[has_inf_or_nan])
        assert events[-1].name == "lg" and not run.finished
        assert np.isneginf(run.value("lg")[0][1])
        with pytest.raises(TypeError):
            run.add_breakpoint(3)


def test_step_listener_sees_every_run_traced():
    x = tf.placeholder(tf.float32, [], name="x")
    y = tf.square(x, name="y")
    seen = []
    with tf.Session() as sess:
        handle = sess.add_step_listener(seen.append)
        assert sess.run(y, {x: 3.0}) == 9.0
        sess.run(y, {x: 4.0})
        assert len(seen) == 2
        names = {ns.node_name for dev in seen[0].step_stats.dev_stats for ns in dev.node_stats}
        assert "y" in names
        handle.remove()
        handle.remove()  # idempotent
        sess.run(y, {x: 5.0})
        assert len(seen) == 2

        def broken(_):
            raise ValueError("boom")

        sess.add_step_listener(broken)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            assert sess.run(y, {x: 2.0}) == 4.0
        assert any("boom" in str(m.message) for m in w)
        assert sess._step_listeners == []
        with pytest.raises(TypeError):
            sess.add_step_listener(3)


def test_a_step_cannot_go_on_once_its_session_is_closed():
    x = tf.constant(2.0, name="x")
    y = tf.square(x, name="y")
    sess = tf.Session()
    run = StepRun(sess, y)
    run.step()
    sess.close()
    with pytest.raises(RuntimeError, match="closed Session"):
        run.step()
    with pytest.raises(RuntimeError, match="closed Session"):
        run.resume()
