"""StepRun time travel: back() undoes variable, queue and generator changes and rewinds the
executor; forward() re-executes the recorded events with identical results."""

import numpy as np
import pytest

import dflab as tf
from dflab.runtime.stepping import StepRun

TWO_CPUS = dict(device_count={"CPU": 2}, inter_op_parallelism_threads=2)
KINDS = [False, True]  # reference and resource variables


def _values_by_position(run, sess, var):
    """The variable's value after every prefix of the run, stepping from the start."""
    values = [sess.run(var)]
    while not run.finished:
        run.step()
        values.append(sess.run(var))
    return values


@pytest.mark.parametrize("use_resource", KINDS)
def test_assign_and_assign_add_back_and_forth_match_numpy(use_resource):
    v = tf.Variable(np.array([1.0, 2.0]), name="v", use_resource=use_resource)
    set_v = tf.assign(v, [10.0, 20.0], name="set_v") if not use_resource else \
        v.assign([10.0, 20.0], name="set_v")
    with tf.control_dependencies([set_v]):
        inc = v.assign_add([1.0, -1.0], name="inc")
    with tf.Session() as sess:
        sess.run(v.initializer)
        run = StepRun(sess, inc)
        values = _values_by_position(run, sess, v)
        np.testing.assert_array_equal(values[0], [1.0, 2.0])
        np.testing.assert_array_equal(values[-1], [11.0, 19.0])
        n = run.position
        assert n == len(run.history) and run.finished
        for k in range(n - 1, -1, -1):  # one event back at a time, down to the start
            rewind = run.back()
            assert rewind.position == run.position == k
            np.testing.assert_array_equal(sess.run(v), values[k])
        assert not run.finished and run.executed == []
        assert run.states == run.states_at(0)
        for k in range(1, n + 1):  # and forward again: the same values at every point
            run.forward()
            np.testing.assert_array_equal(sess.run(v), values[k])
        assert run.finished
        np.testing.assert_array_equal(run.result, [11.0, 19.0])


@pytest.mark.parametrize("use_resource", KINDS)
def test_optimizer_steps_back_and_forth(use_resource):
    x0 = np.array([[1.0, 2.0], [3.0, -1.0]], np.float32)
    y0 = np.array([[1.0], [0.0]], np.float32)
    w = tf.Variable(np.array([[0.5], [-0.25]], np.float32), name="w", use_resource=use_resource)
    loss = tf.reduce_mean(tf.square(tf.matmul(tf.constant(x0), w) - y0))
    train = tf.train.AdamOptimizer(0.1).minimize(loss)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        w0 = sess.run(w)
        run = StepRun(sess, train)
        run.resume()
        w1 = sess.run(w)
        assert not np.allclose(w1, w0)
        # Adam's first step moves every weight by about lr * sign(gradient).
        grad = 2.0 * x0.T @ (x0 @ w0 - y0) / len(x0)
        np.testing.assert_allclose(w1, w0 - 0.1 * np.sign(grad), rtol=1e-3)
        slots = [sess.run(s) for s in tf.global_variables() if s.name.startswith("w/Adam")]
        rewind = run.back(run.position)
        np.testing.assert_array_equal(sess.run(w), w0)
        for s in tf.global_variables():
            if s.name.startswith("w/Adam"):
                np.testing.assert_array_equal(sess.run(s), np.zeros_like(w0))
        assert "w" in rewind.variables and rewind.message.startswith("restored ")
        run.resume()
        np.testing.assert_array_equal(sess.run(w), w1)  # the same update, bit for bit
        assert [sess.run(s) for s in tf.global_variables()
                if s.name.startswith("w/Adam")][0].tolist() == slots[0].tolist()


def test_seeded_and_unseeded_random_ops_replay_the_same_numbers():
    seeded = tf.random_normal([4], seed=7, name="seeded")
    unseeded = tf.random_uniform([4], name="unseeded")
    total = tf.add(seeded, unseeded, name="total")
    with tf.Session() as sess:
        run = StepRun(sess, total)
        run.resume()
        first = (run.value("seeded")[0], run.value("unseeded")[0], run.result)
        run.back(run.position)
        run.resume()
        np.testing.assert_array_equal(run.value("seeded")[0], first[0])
        np.testing.assert_array_equal(run.value("unseeded")[0], first[1])
        np.testing.assert_array_equal(run.result, first[2])
        # Rewound and replayed, the generators sit where one run leaves them: the next
        # Session.run draws the second batch of numbers, not the first again.
        assert not np.array_equal(sess.run(seeded), first[0])


def test_back_restores_queue_contents():
    q = tf.FIFOQueue(5, tf.float32, shapes=[[]], name="q")
    fill = q.enqueue_many([[1.0, 2.0, 3.0]], name="fill")
    taken = q.dequeue(name="take")
    out = tf.multiply(taken, 10.0, name="out")
    with tf.Session() as sess:
        sess.run(fill)
        run = StepRun(sess, out)
        run.resume()
        assert run.result == 10.0
        assert sess.run(q.size()) == 2
        rewind = run.back(run.position)
        assert rewind.queues == ("q",)
        assert sess.run(q.size()) == 3
        run.resume()
        assert run.result == 10.0  # the same element again
        assert sess.run(q.dequeue()) == 2.0


def test_back_into_a_loop_that_updates_a_variable():
    v = tf.Variable(0.0, name="v")

    def body(i, a):
        with tf.control_dependencies([tf.assign_add(v, 1.0, name="bump")]):
            return i + 1, a * 2.0

    out = tf.while_loop(lambda i, a: i < 3, body, [tf.constant(0), tf.constant(1.0)])
    with tf.Session() as sess:
        sess.run(v.initializer)
        run = StepRun(sess, out)
        run.resume()
        assert sess.run(v) == 3.0 and tuple(run.result) == (3, 8.0)
        bumps = [e.index for e in run.history if e.name.endswith("bump") and not e.dead]
        assert len(bumps) == 3
        run.back(run.position - bumps[1])  # just before the second iteration's bump
        assert sess.run(v) == 1.0
        frames = run.live_frames
        assert frames and 1 in frames[0]["iterations"]
        assert any(r.name.endswith("bump") and r.iteration == 1 for r in run.ready)
        run.step()
        assert sess.run(v) == 2.0
        run.resume()
        assert sess.run(v) == 3.0 and tuple(run.result) == (3, 8.0)


def test_another_path_after_back_drops_the_recorded_future():
    a = tf.constant(1.0, name="a")
    b = tf.constant(2.0, name="b")
    c = tf.add(a, b, name="c")
    with tf.Session() as sess:
        run = StepRun(sess, c)
        run.step("a")
        run.step("b")
        run.back(2)
        assert {r.name for r in run.ready} == {"a", "b"} and len(run.history) == 2
        run.step("b")  # not the recorded next event: the recorded future goes
        assert run.executed == ["b"] and len(run.history) == 1
        run.resume()
        assert run.result == 3.0 and run.executed == ["b", "a", "c"]


def test_partitioned_step_rewinds_with_send_and_recv():
    with tf.device("/cpu:0"):
        v = tf.Variable(2.0, name="v")
        b = tf.assign_add(v, 1.0, name="b")
    with tf.device("/cpu:1"):
        c = tf.multiply(b, 10.0, name="c")
    with tf.Session(config=tf.ConfigProto(**TWO_CPUS)) as sess:
        sess.run(v.initializer)
        run = StepRun(sess, c)
        run.resume()
        assert run.result == 30.0 and sess.run(v) == 3.0
        n = run.position
        for k in range(n - 1, -1, -1):
            run.back()
            run.forward()
            run.back()
            assert run.position == k
        assert sess.run(v) == 2.0
        run.resume()
        assert run.result == 30.0 and sess.run(v) == 3.0


def test_a_failed_node_fails_again_on_replay_and_back_goes_before_it():
    x = tf.placeholder(tf.float32, [None], name="x")
    v = tf.Variable(0.0, name="v")
    bump = tf.assign_add(v, 1.0, name="bump")
    with tf.control_dependencies([bump]):
        checked = tf.debugging.assert_positive(x, name="check")
    with tf.Session() as sess:
        sess.run(v.initializer)
        run = StepRun(sess, [checked, bump], {x: [-1.0]})
        with pytest.raises(tf.errors.InvalidArgumentError):
            run.resume()
        assert sess.run(v) == 1.0
        failed_at = run.position
        run.back(run.position)
        assert run.error is None and sess.run(v) == 0.0
        with pytest.raises(tf.errors.InvalidArgumentError):
            run.forward(failed_at)
        assert run.position == failed_at and sess.run(v) == 1.0


@pytest.mark.parametrize("make", ["py_func", "iterator", "reader"])
def test_back_over_an_irreversible_event_is_refused_and_changes_nothing(make, tmp_path):
    v = tf.Variable(5.0, name="v")
    files = tf.FIFOQueue(2, tf.string, shapes=[[]], name="files")
    if make == "py_func":
        side = tf.py_func(lambda: np.float32(1.0), [], tf.float32, name="side")
    elif make == "iterator":
        ds = tf.data.Dataset.from_tensor_slices(np.array([1.0, 2.0], np.float32))
        side = tf.data.make_one_shot_iterator(ds).get_next(name="side")
    else:
        (tmp_path / "numbers.txt").write_text("1\n2\n")
        _, line = tf.TextLineReader(name="lines").read(files, name="side")
        side = tf.decode_csv(line, [[0.0]])[0]
    out = tf.assign_add(v, side, name="out")
    with tf.Session() as sess:
        sess.run(v.initializer)
        sess.run(files.enqueue(str(tmp_path / "numbers.txt")))
        run = StepRun(sess, out)
        run.resume()
        assert sess.run(v) == 6.0
        position = run.position
        with pytest.raises(tf.errors.FailedPreconditionError, match="Cannot step back"):
            run.back()
        assert run.position == position and run.finished and sess.run(v) == 6.0


def test_a_variable_written_by_another_run_is_restored_with_a_warning():
    v = tf.Variable(1.0, name="v")
    inc = tf.assign_add(v, 1.0, name="inc")
    other = tf.assign(v, 100.0, name="other")
    with tf.Session() as sess:
        sess.run(v.initializer)
        run = StepRun(sess, inc)
        run.resume()
        sess.run(other)
        rewind = run.back(run.position)
        assert sess.run(v) == 1.0
        assert len(rewind.warnings) == 1 and "changed by another run" in rewind.warnings[0]
        assert "restored anyway" in rewind.message


def test_a_queue_changed_by_another_run_is_not_restored():
    q = tf.FIFOQueue(5, tf.float32, shapes=[[]], name="q")
    fill = q.enqueue_many([[1.0, 2.0, 3.0]], name="fill")
    taken = q.dequeue(name="take")
    with tf.Session() as sess:
        sess.run(fill)
        run = StepRun(sess, taken)
        run.resume()
        sess.run(q.dequeue())  # another run consumes an element in the meantime
        with pytest.raises(tf.errors.FailedPreconditionError, match="queue 'q' was changed"):
            run.back()
        assert sess.run(q.size()) == 1 and run.finished


def test_back_refuses_on_a_closed_session_and_bad_counts():
    v = tf.Variable(1.0, name="v")
    inc = tf.assign_add(v, 1.0, name="inc")
    sess = tf.Session()
    sess.run(v.initializer)
    run = StepRun(sess, inc)
    run.resume()
    with pytest.raises(tf.errors.InvalidArgumentError, match="must be >= 0"):
        run.back(-1)
    sess.close()
    with pytest.raises(RuntimeError, match="closed Session"):
        run.back()


def test_a_recv_recorded_while_waiting_completes_after_a_rewind():
    with tf.device("/cpu:0"):
        a = tf.constant(2.0, name="a")
        b = tf.square(a, name="b")
    with tf.device("/cpu:1"):
        c = tf.add(b, 1.0, name="c")
    with tf.Session(config=tf.ConfigProto(**TWO_CPUS)) as sess:
        run = StepRun(sess, c)
        recv = next(r for r in run.ready if r.op_type == "_Recv")
        run.step(recv)
        run.step("a")
        run.back()
        assert run.position == 1 and run.states[recv.name] == "running"
        run.resume()
        assert run.result == 5.0 and run.history[0].completed


@pytest.mark.parametrize("use_resource", KINDS)
def test_back_over_a_sparse_scatter_restores_the_rows(use_resource):
    v = tf.Variable(np.arange(6.0).reshape(3, 2), name="v", use_resource=use_resource)
    upd = tf.scatter_update(v, [2, 0], [[10.0, 11.0], [12.0, 13.0]], name="upd")
    with tf.Session() as sess:
        sess.run(v.initializer)
        before = sess.run(v)
        run = StepRun(sess, upd)
        run.resume()
        expected = before.copy()
        expected[[2, 0]] = [[10.0, 11.0], [12.0, 13.0]]
        np.testing.assert_array_equal(sess.run(v), expected)
        run.back(run.position)
        np.testing.assert_array_equal(sess.run(v), before)
        run.resume()
        np.testing.assert_array_equal(sess.run(v), expected)


def test_back_over_the_initializer_leaves_variables_uninitialized():
    v = tf.Variable(3.0, name="v")
    w = tf.Variable(4.0, name="w", use_resource=True)
    with tf.Session() as sess:
        run = StepRun(sess, tf.global_variables_initializer())
        run.resume()
        assert sess.run([v, w]) == [3.0, 4.0]
        rewind = run.back(run.position)
        assert set(rewind.variables) == {"v", "w"}
        assert sess.run(tf.report_uninitialized_variables()).tolist() == [b"v", b"w"]
        run.resume()
        assert sess.run([v, w]) == [3.0, 4.0]


def test_back_over_a_close_reopens_the_queue_and_shuffles_replay():
    q = tf.RandomShuffleQueue(10, 0, tf.float32, shapes=[[]], seed=3, name="q")
    fill = q.enqueue_many([np.arange(8.0, dtype=np.float32)], name="fill")
    with tf.control_dependencies([q.dequeue(name="take")]):
        close = q.close(name="shut")
    with tf.Session() as sess:
        sess.run(fill)
        run = StepRun(sess, close)
        run.resume()
        taken = run.value("take")[0]
        assert sess.run(q.size()) == 7
        with pytest.raises(tf.errors.CancelledError):
            sess.run(q.enqueue(99.0))  # closed
        run.back(run.position)
        assert sess.run(q.size()) == 8
        run.resume()  # the restored shuffle generator picks the same element
        assert run.value("take")[0] == taken
        run.back(run.position)
        sess.run(q.enqueue(99.0))  # open again: another run may enqueue
        assert sess.run(q.size()) == 9


def test_a_replay_that_differs_from_the_record_says_so_and_goes_on_from_the_new_values():
    a = tf.constant(2.0, name="a")
    b = tf.square(a, name="b")
    c = tf.add(b, 1.0, name="c")
    with tf.Session() as sess:
        run = StepRun(sess, c)
        run.resume()
        run.back(run.position)
        recorded_b = next(e for e in run.history if e.name == "b")
        recorded_b.outputs = (np.float32(5.0),)  # as if b had given 5 the first time
        with pytest.raises(tf.errors.InternalError,
                           match=rf"Replaying event {recorded_b.index + 1} \(b\) gave other"):
            run.forward(len(run.history))
        assert run.position == len(run.history) == recorded_b.index + 1  # the rest dropped
        assert run.value("b")[0] == 4.0 and run.error is None
        run.resume()
        assert run.result == 5.0


def test_forward_on_a_failed_or_closed_run_keeps_the_recorded_history():
    x = tf.placeholder(tf.float32, [], name="x")
    checked = tf.debugging.assert_positive(x, name="check")
    with tf.control_dependencies([checked]):
        y = tf.identity(x, name="y")
    sess = tf.Session()
    run = StepRun(sess, y, {x: 1.0})
    run.resume()
    n = len(run.history)
    run.back(2)
    sess.close()
    with pytest.raises(RuntimeError, match="closed Session"):
        run.forward()
    assert len(run.history) == n and all(e.error is None for e in run.history)


def test_a_random_op_on_another_device_replays_its_numbers():
    with tf.device("/cpu:1"):
        r = tf.random_normal([3], name="r")
    with tf.device("/cpu:0"):
        s = tf.reduce_sum(r, name="s")
    with tf.Session(config=tf.ConfigProto(**TWO_CPUS)) as sess:
        run = StepRun(sess, s)
        assert len(run.partition_graphs) == 2
        run.resume()
        first = run.result
        run.back(run.position)
        run.resume()
        assert run.result == first


def test_back_to_any_point_gives_exactly_the_ready_set_and_states_it_had():
    v = tf.Variable(0.0, name="v", use_resource=True)  # (TF1 refuses a ref write here)
    p = tf.placeholder(tf.bool, [], name="p")

    def body(i, a):
        bumped = tf.cond(tf.logical_and(p, i >= 0), lambda: v.assign_add(1.0, name="yes"),
                         lambda: v.assign_sub(1.0, name="no"))
        return i + 1, a + bumped

    out = tf.while_loop(lambda i, a: i < 2, body, [tf.constant(0), tf.constant(0.0)])
    with tf.Session() as sess:
        sess.run(v.initializer)
        run = StepRun(sess, out, {p: True})
        ready_after = [sorted(r.key for r in run.ready)]
        values_after = [sess.run(v)]
        while not run.finished:
            run.step()
            ready_after.append(sorted(r.key for r in run.ready))
            values_after.append(sess.run(v))
        result = tuple(run.result)
        assert result == (2, 3.0) and values_after[-1] == 2.0  # as TF computes it
        n = run.position
        for k in [n - 1, n // 2, 3, 0, n - 2, 1]:
            run.back(run.position - k)
            assert run.position == k
            assert sorted(r.key for r in run.ready) == ready_after[k], k
            assert run.states == run.states_at(k), k
            assert sess.run(v) == values_after[k], k
            run.forward(n)
            assert tuple(run.result) == result and sess.run(v) == 2.0


def test_reading_a_queue_size_records_nothing_to_restore():
    q = tf.FIFOQueue(5, tf.float32, shapes=[[]], name="q")
    size = q.size(name="size")
    with tf.Session() as sess:
        run = StepRun(sess, size)
        run.resume()
        assert run.result == 0
        sess.run(q.enqueue(1.0))  # another run changes the queue afterwards
        rewind = run.back(run.position)  # allowed: the step only read the queue
        assert rewind.queues == () and sess.run(q.size()) == 1
