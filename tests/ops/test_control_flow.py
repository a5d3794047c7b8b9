"""Dynamic control flow: cond, case, while_loop on the dataflow primitives, and the executor's
frames, iterations and deadness."""

import collections
import threading

import numpy as np
import pytest

import dflab as tf
from dflab.framework import errors
from dflab.framework.registry import register_op
from dflab.framework.tensor_shape import TensorShape
from dflab.kernels.registry import kernel

# --- cond -------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [3.0, -3.0])
def test_cond_takes_one_branch(value):
    x = tf.placeholder(tf.float32, [])
    y = tf.cond(x > 0, lambda: x * 2.0, lambda: x - 10.0)
    with tf.Session() as s:
        got = s.run(y, {x: value})
    assert got == (value * 2 if value > 0 else value - 10)


def test_cond_executes_only_the_taken_branch_stateful_ops():
    hits_t = tf.Variable(0, name="hits_t")
    hits_f = tf.Variable(0, name="hits_f")
    p = tf.placeholder(tf.bool, [])

    def true_fn():
        with tf.control_dependencies([hits_t.assign_add(1)]):
            return tf.constant(1)

    def false_fn():
        return hits_f.assign_add(1) * 0 + 2

    out = tf.cond(p, true_fn, false_fn)
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        results = [s.run(out, {p: b}) for b in (True, True, False, True)]
        assert results == [1, 1, 2, 1]
        assert s.run([hits_t, hits_f]) == [3, 1]


def test_cond_nested_structures_and_ops():
    x = tf.constant(2.0)
    Pair = collections.namedtuple("Pair", "a b")
    out = tf.cond(x > 1, lambda: {"p": Pair(x, x * 3), "q": [x + 1]},
                  lambda: {"p": Pair(-x, x), "q": [x]})
    with tf.Session() as s:
        got = s.run(out)
    assert isinstance(got["p"], Pair) and got["p"] == (2.0, 6.0) and got["q"] == [3.0]
    single = tf.cond(x > 1, lambda: [x], lambda: [x * 0])
    strict = tf.cond(x > 1, lambda: [x], lambda: [x * 0], strict=True)
    assert isinstance(single, tf.Tensor) and isinstance(strict, list)


def test_nested_cond_and_external_values():
    x = tf.placeholder(tf.int32, [])
    out = tf.cond(x > 0,
                  lambda: tf.cond(x > 10, lambda: x * 100, lambda: x * 10),
                  lambda: -x)
    with tf.Session() as s:
        assert [s.run(out, {x: v}) for v in (20, 5, -4)] == [2000, 50, 4]


@pytest.mark.parametrize("pred, err", [
    (lambda: tf.constant(1.0), TypeError),
    (lambda: tf.constant([True, False]), ValueError),
])
def test_cond_bad_predicate_names_user_line(pred, err):
    with pytest.raises(err, match="test_control_flow.py"):
        tf.cond(pred(), lambda: 1, lambda: 2)


def test_cond_branch_mismatch_errors():
    p = tf.constant(True)
    with pytest.raises(ValueError, match="same structure"):
        tf.cond(p, lambda: [1, 2], lambda: [1])
    with pytest.raises(TypeError, match="different dtypes"):
        tf.cond(p, lambda: tf.constant(1), lambda: tf.constant(1.0))


def test_case_first_true_default_and_exclusive():
    x = tf.placeholder(tf.int32, [])
    out = tf.case([(x < 0, lambda: tf.constant(-1)), (x < 10, lambda: tf.constant(1))],
                  default=lambda: tf.constant(100))
    excl = tf.case([(x < 0, lambda: tf.constant(-1)), (x < 10, lambda: tf.constant(1))],
                   default=lambda: tf.constant(100), exclusive=True)
    no_default = tf.case([(x < 0, lambda: tf.constant(-1)), (x > 5, lambda: tf.constant(1))])
    with tf.Session() as s:
        assert [s.run(out, {x: v}) for v in (-5, 5, 50)] == [-1, 1, 100]
        assert s.run(excl, {x: 5}) == 1
        with pytest.raises(errors.InvalidArgumentError):
            s.run(excl, {x: -5})  # both predicates are true
        assert s.run(no_default, {x: 7}) == 1
        with pytest.raises(errors.InvalidArgumentError):
            s.run(no_default, {x: 3})  # none is true


# --- while_loop ----------------------------------------------------------------------------------
def test_while_loop_sum_matches_python():
    i0 = tf.constant(0)
    s0 = tf.constant(0.0, tf.float64)
    n = tf.placeholder(tf.int32, [])
    i, total = tf.while_loop(lambda i, s: i < n,
                             lambda i, s: (i + 1, s + tf.cast(i, tf.float64) ** 2), [i0, s0])
    with tf.Session() as sess:
        for k in (0, 1, 7, 100):
            got_i, got_s = sess.run([i, total], {n: k})
            assert got_i == k and got_s == sum(float(j) ** 2 for j in range(k))


def test_while_loop_nested_structure_and_single_var():
    State = collections.namedtuple("State", "step acc")
    out = tf.while_loop(lambda st: st.step < 4,
                        lambda st: State(st.step + 1, {"a": st.acc["a"] * 2}),
                        [State(tf.constant(0), {"a": tf.constant(1)})])
    single = tf.while_loop(lambda v: v < 100, lambda v: v * 3, [tf.constant(1)])
    bare = tf.while_loop(lambda v: v < 100, lambda v: v * 3, tf.constant(1))
    with tf.Session() as s:
        got = s.run(out)
        assert isinstance(got, State) and got.step == 4 and got.acc == {"a": 16}
        assert s.run(single) == 243 and s.run(bare) == 243


def test_while_loop_shape_invariants_allow_growth():
    x0 = tf.zeros([1, 2])
    out = tf.while_loop(lambda x: tf.shape(x)[0] < 5,
                        lambda x: tf.concat([x, x[:1] + 1.0], 0), [x0],
                        shape_invariants=[TensorShape([None, 2])])
    assert out.shape.as_list() == [None, 2]
    with tf.Session() as s:
        got = s.run(out)
    np.testing.assert_array_equal(got, np.concatenate([np.zeros((1, 2))] +
                                                      [np.ones((1, 2))] * 4))


def test_while_loop_shape_change_without_invariant_is_an_error():
    x0 = tf.zeros([1, 2])
    with pytest.raises(ValueError, match="shape_invariants.*test_control_flow.py"):
        tf.while_loop(lambda x: tf.shape(x)[0] < 5,
                      lambda x: tf.concat([x, x], 0), [x0])


def test_while_loop_dtype_or_structure_change_is_an_error():
    with pytest.raises(TypeError, match="dtype"):
        tf.while_loop(lambda x: x < 5, lambda x: tf.cast(x, tf.float32), [tf.constant(0)])
    with pytest.raises(ValueError, match="same structure"):
        tf.while_loop(lambda x, y: x < 5, lambda x, y: [x], [tf.constant(0), tf.constant(1)])
    with pytest.raises(TypeError, match="bool"):
        tf.while_loop(lambda x: x, lambda x: x + 1, [tf.constant(0)])


def test_maximum_iterations_stops_the_loop():
    out = tf.while_loop(lambda v: v < 1000, lambda v: v + 1, [tf.constant(0)],
                        maximum_iterations=7)
    short = tf.while_loop(lambda v: v < 3, lambda v: v + 1, [tf.constant(0)],
                          maximum_iterations=7)
    with tf.Session() as s:
        assert s.run(out) == 7 and s.run(short) == 3


@pytest.mark.parametrize("parallel", [1, 2, 10])
def test_parallel_iterations_give_the_same_result(parallel):
    w = tf.constant(np.random.default_rng(0).standard_normal((8, 8)) / 4)
    h0 = tf.constant(np.ones((1, 8)))
    out = tf.while_loop(lambda i, h: i < 20, lambda i, h: (i + 1, tf.tanh(tf.matmul(h, w))),
                        [tf.constant(0), h0], parallel_iterations=parallel)[1]
    ref = np.ones((1, 8))
    wn = np.random.default_rng(0).standard_normal((8, 8)) / 4
    for _ in range(20):
        ref = np.tanh(ref @ wn)
    with tf.Session(config=tf.ConfigProto(inter_op_parallelism_threads=3)) as s:
        np.testing.assert_allclose(s.run(out), ref, rtol=1e-12)


def test_nested_loops():
    def outer_body(i, acc):
        _, inner = tf.while_loop(lambda j, a: j < i, lambda j, a: (j + 1, a + j),
                                 [tf.constant(0), acc])
        return i + 1, inner

    out = tf.while_loop(lambda i, a: i < 6, outer_body, [tf.constant(0), tf.constant(0)])
    with tf.Session() as s:
        assert s.run(out)[1] == sum(j for i in range(6) for j in range(i))


def test_a_value_of_a_loop_body_used_outside_the_loop_is_refused_where_it_is_built():
    # TF 1.x's ValueError at graph construction; it had failed only when the step ran
    # ("Cannot fetch ...: it is computed inside a while loop"), naming the wrong op.
    leaked = []

    def body(i):
        leaked.append(i * 2)
        return i + 1

    tf.while_loop(lambda i: i < 3, body, [tf.constant(0)])
    line = body.__code__.co_firstlineno + 1
    with pytest.raises(ValueError, match="Cannot use 'while/mul:0' as input to 'AddV2' because "
                                         "'while/mul' is in a while loop \\(created at "
                                         f".*test_control_flow.py:{line}\\)"):
        leaked[0] + 1
    inner_leak = []

    def outer_body(i):
        def inner_body(j):
            inner_leak.append(j + i)
            return j + 1

        tf.while_loop(lambda j: j < 2, inner_body, [tf.constant(0)])
        return i + inner_leak[-1] * 0  # an inner loop's value in the outer loop's body
    with pytest.raises(ValueError, match="is in a while loop"):
        tf.while_loop(lambda i: i < 3, outer_body, [tf.constant(0)])

    def uses_outer_value(i):  # an outer loop's value inside an inner loop: fine (TF's too)
        return i + tf.while_loop(lambda j: j < i, lambda j: j + 1, [tf.constant(0)])

    out = tf.while_loop(lambda i: i < 10, uses_outer_value, [tf.constant(1)])
    with tf.Session() as sess:
        assert sess.run(out) == 16  # 1 -> 2 -> 4 -> 8 -> 16


def test_loop_in_cond_and_cond_in_loop():
    p = tf.placeholder(tf.bool, [])
    loop_in_cond = tf.cond(
        p, lambda: tf.while_loop(lambda k: k < 100, lambda k: k + 1, [tf.constant(0)]),
        lambda: tf.constant(-1))
    cond_in_loop = tf.while_loop(
        lambda i, s: i < 10,
        lambda i, s: (i + 1, tf.cond(tf.equal(i % 2, 0), lambda: s + i, lambda: s - 1)),
        [tf.constant(0), tf.constant(0)])[1]
    with tf.Session() as s:
        assert s.run(loop_in_cond, {p: True}) == 100
        assert s.run(loop_in_cond, {p: False}) == -1
        assert s.run(cond_in_loop) == sum(i if i % 2 == 0 else -1 for i in range(10))


def test_stateful_ops_run_exactly_as_often_as_the_loop_says():
    counter = tf.Variable(0, name="counter")
    n = tf.placeholder(tf.int32, [])

    def body(i):
        with tf.control_dependencies([counter.assign_add(1, use_locking=True)]):
            return i + 1

    out = tf.while_loop(lambda i: i < n, body, [tf.constant(0)], parallel_iterations=4)
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        for k in (5, 0, 13):
            s.run(out, {n: k})
        assert s.run(counter) == 18


def test_external_control_dependency_runs_once_before_the_loop():
    v = tf.Variable(10)
    with tf.control_dependencies([v.assign(1)]):
        out = tf.while_loop(lambda i: i < 3, lambda i: i + v.read_value() * 0 + 1,
                            [tf.constant(0)])
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        assert s.run(out) == 3 and s.run(v) == 1


def test_primitives_visible_in_graph_def():
    tf.while_loop(lambda i: i < 3, lambda i: i + 1, [tf.constant(0)], name="loop")
    tf.cond(tf.constant(True), lambda: 1, lambda: 2, name="choice")
    types = {n.op for n in tf.get_default_graph().as_graph_def().node}
    assert {"Enter", "Merge", "Switch", "LoopCond", "NextIteration", "Exit"} <= types
    enter = next(n for n in tf.get_default_graph().as_graph_def().node if n.op == "Enter")
    assert enter.attr["frame_name"].startswith("loop/") and \
        enter.attr["parallel_iterations"] == 10


def test_endless_loop_times_out_naming_the_loop():
    out = tf.while_loop(lambda i: i >= 0, lambda i: i + 1, [tf.constant(0)], name="forever")
    with tf.Session() as s:
        with pytest.raises(errors.DeadlineExceededError,
                           match="'forever' .created at .*test_control_flow.py"):
            s.run(out, options=tf.RunOptions(timeout_in_ms=300))


def test_fetching_inside_a_loop_is_refused():
    captured = []

    def body(i):
        captured.append(i * 2)
        return i + 1

    tf.while_loop(lambda i: i < 3, body, [tf.constant(0)])
    with tf.Session() as s:
        with pytest.raises(errors.InvalidArgumentError, match="inside a while loop"):
            s.run(captured[0])


def test_iteration_state_is_freed_after_the_step():
    from dflab.runtime.executor import Execution

    out = tf.while_loop(lambda i, x: i < 50, lambda i, x: (i + 1, x * 1.0),
                        [tf.constant(0), tf.ones([16])])
    with tf.Session() as s:
        m = s.master.get_plan([out[1]], [], ())
        ex = Execution(m.executor_plan)
        while ex.ready:
            ex.step()
        assert ex.finished and not ex.root.children
        np.testing.assert_array_equal(ex.fetch_values()[0], np.ones(16))


# --- iterations really overlap -------------------------------------------------------------------
register_op("TestLoopBarrier", lambda op: [(op.inputs[0].dtype, op.inputs[0].shape)],
            stateful=True, blocking=True)


@kernel("TestLoopBarrier", takes_step=True)
def _loop_barrier(node, ctx):
    barrier = threading.Barrier(2, timeout=node.attr["timeout"])

    def wait(step, x):
        try:
            barrier.wait()
        except threading.BrokenBarrierError:
            raise errors.AbortedError(None, node, "no other iteration arrived") from None
        return x

    return wait


def _overlap_loop(parallel):
    def body(i, acc):
        b = tf.get_default_graph()._create_op("TestLoopBarrier", [i], {"timeout": 1.0},
                                              "barrier").outputs[0]
        return i + 1, acc + b

    return tf.while_loop(lambda i, acc: i < 2, body, [tf.constant(0), tf.constant(0)],
                         parallel_iterations=parallel)[1]


def test_iteration_two_starts_while_iteration_one_waits():
    out = _overlap_loop(parallel=2)
    with tf.Session(config=tf.ConfigProto(inter_op_parallelism_threads=4)) as s:
        assert s.run(out) == 1


def test_parallel_iterations_one_runs_iterations_one_at_a_time():
    out = _overlap_loop(parallel=1)
    with tf.Session(config=tf.ConfigProto(inter_op_parallelism_threads=4)) as s:
        with pytest.raises(errors.AbortedError, match="no other iteration"):
            s.run(out)


def test_variables_created_in_a_loop_body_live_outside_it():
    def body(i, acc):
        w = tf.get_variable("w_in_loop", [], initializer=tf.constant_initializer(2.0))
        v = tf.Variable(lambda: tf.constant(3.0), name="v_in_loop")
        return i + 1, acc * w + v

    out = tf.while_loop(lambda i, a: i < 3, body, [tf.constant(0), tf.constant(1.0)])[1]
    w = tf.get_default_graph().get_operation_by_name("w_in_loop")
    assert w.control_flow_context is None
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        assert s.run(out) == ((1 * 2 + 3) * 2 + 3) * 2 + 3
    with pytest.raises(ValueError, match="control-flow construct"):
        tf.while_loop(lambda i: i < 3, lambda i: i + tf.cast(tf.Variable(i + 1), tf.int32),
                      [tf.constant(0)])


def test_fused_loop_matches_the_dataflow_loop():
    """A simple loop runs as one generated function unless the step is observed; a traced
    (observed) run takes the frame-by-frame path. Both give the same values and effects."""
    counter = tf.Variable(0)
    n = tf.placeholder(tf.int32, [])

    def body(i, x, y):
        with tf.control_dependencies([counter.assign_add(1)]):
            return i + 1, x * 0.5 + tf.cast(i, tf.float64), tf.concat([y, x[None]], 0)

    out = tf.while_loop(lambda i, x, y: i < n, body,
                        [tf.constant(0), tf.constant(1.0, tf.float64), tf.zeros([0], tf.float64)],
                        shape_invariants=[TensorShape([]), TensorShape([]), TensorShape([None])])
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        plan = s.master.get_plan(list(out), [], (n,)).executor_plan
        assert [f.fused is not None for f in plan.frames[1:]] == [True]
        fast = s.run(out, {n: 9})
        md = tf.RunMetadata()
        slow = s.run(out, {n: 9}, options=tf.RunOptions(trace_level=3), run_metadata=md)
        assert any("[" in ns.timeline_label for d in md.step_stats.dev_stats
                   for ns in d.node_stats)  # the traced run went iteration by iteration
        assert fast[0] == slow[0] == 9 and fast[1] == slow[1]
        np.testing.assert_array_equal(fast[2], slow[2])
        assert s.run(counter) == 18


@pytest.mark.parametrize("inter_op", [1, 4])
def test_a_loop_with_a_matmul_is_fused_where_its_device_runs_one_kernel_at_a_time(inter_op):
    """An expensive kernel (a product) keeps a loop from running as one node where expensive
    kernels run in parallel; where the device runs them one at a time (a GPU, one inter-op
    thread), the loop is fused and holds the device's stream while it runs."""
    w0 = np.random.default_rng(1).normal(size=(4, 4)) * 0.5
    with tf.device("/cpu:0"):  # a host device: serial or not by its inter-op threads
        w = tf.constant(w0)
        n = tf.placeholder(tf.int32, [])
        out = tf.while_loop(lambda i, h: i < n, lambda i, h: (i + 1, tf.tanh(tf.matmul(h, w))),
                            [tf.constant(0), tf.ones([2, 4], tf.float64)])
    config = tf.ConfigProto(inter_op_parallelism_threads=inter_op)
    with tf.Session(config=config) as s:
        part = next(iter(s.master.get_plan(list(out), [], (n,)).parts))
        fused = [f.fused is not None for f in part.executor_plan.frames[1:]]
        assert fused == [inter_op == 1]
        if inter_op == 1:
            loop = part.executor_plan.nodes[part.executor_plan.frames[1].fused]
            assert loop.expensive  # it holds the stream, as each product would have
        got = s.run(out, {n: 5})
        md = tf.RunMetadata()
        traced = s.run(out, {n: 5}, options=tf.RunOptions(trace_level=3), run_metadata=md)
    want = np.ones((2, 4))
    for _ in range(5):
        want = np.tanh(want @ w0)
    np.testing.assert_allclose(got[1], want, rtol=1e-12)
    np.testing.assert_array_equal(got[1], traced[1])  # frame by frame: the same numbers


def test_error_inside_a_fused_loop_names_the_op():
    x = tf.placeholder(tf.float32, [None])
    out = tf.while_loop(lambda i, v: i < 3,
                        lambda i, v: (i + 1, tf.reshape(v, [2])), [tf.constant(0), x],
                        shape_invariants=[TensorShape([]), TensorShape([None])])
    with tf.Session() as s:
        with pytest.raises(errors.InvalidArgumentError, match="Reshape"):
            s.run(out, {x: [1.0, 2.0, 3.0]})


def test_loops_and_conds_survive_graph_def_round_trip():
    g = tf.Graph()
    with g.as_default():
        r = tf.while_loop(lambda i, s: i < 10, lambda i, s: (i + 1, s + i),
                          [tf.constant(0), tf.constant(0)], name="loop")
        c = tf.cond(r[1] > 5, lambda: r[1] * 2, lambda: r[1])
    text = str(g.as_graph_def())
    g2 = tf.Graph()
    with g2.as_default():
        tf.import_graph_def(text, name="copy")
        with tf.Session() as s:
            assert s.run(["copy/" + r[1].name, "copy/" + c.name]) == [45, 90]


def test_stepping_through_a_loop_shows_frames_and_iterations():
    from dflab.kernels.control_flow_kernels import DEAD
    from dflab.runtime.executor import Execution

    out = tf.while_loop(lambda i: i < 3, lambda i: i + 1, [tf.constant(0)], name="count")
    with tf.Session() as s:
        plan = s.master.get_plan([out], [], ()).executor_plan
        ex = Execution(plan)
        seen, dead_adds = set(), []
        while ex.ready:
            i, frame, it = ex.ready[0]
            node = plan.nodes[i]
            seen.add((node.op.type, frame.name, it.n))
            ex.step()
            if node.op.type in ("Add", "AddV2") and it.slots[node.out_base] is DEAD:
                dead_adds.append(it.n)
        assert ex.fetch_values() == [3]
    adds = sorted(n for t, f, n in seen if t in ("Add", "AddV2"))
    # the body runs in iterations 0-2; in iteration 3 it is visited dead (the loop ends)
    assert adds == [0, 1, 2, 3] and dead_adds == [3]
    assert all(f.startswith("count/") for t, f, n in seen if t in ("Add", "AddV2", "Merge"))
    assert ("Exit", "count/while_context", 3) in seen  # the last test leaves the loop


# --- ops fed only by loop invariants (TF's WhileContext ties them to the pivot) ---------------
@pytest.mark.parametrize("use_resource", [True, False])
@pytest.mark.parametrize("take", [True, False])
def test_a_cond_on_an_outside_predicate_in_a_loop_runs_its_branch_once_per_iteration(
        use_resource, take):
    # The cond's Switch reads only loop invariants (the outside predicate and variable): without
    # the pivot it also ran in the iteration that exits, and the branch wrote v a third time.
    v = tf.Variable(0.0, use_resource=use_resource)
    p = tf.placeholder(tf.bool, [])

    def body(i, acc):
        def write():
            with tf.control_dependencies([tf.assign_add(v, 1.0)]):
                return acc + 1.0
        return i + 1, tf.cond(p, write, lambda: acc + 0.0)

    out = tf.while_loop(lambda i, a: i < 2, body, [tf.constant(0), tf.constant(0.0)])
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        i, acc = s.run(out, {p: take})
        assert (i, acc, s.run(v)) == (2, 2.0 * take, 2.0 * take)


def test_an_update_fed_only_by_loop_invariants_runs_once_per_iteration():
    v = tf.Variable(0.0, use_resource=False)
    c = tf.constant(1.5)

    def body(i):
        with tf.control_dependencies([tf.assign_add(v, c)]):
            return i + 1

    out = tf.while_loop(lambda i: i < 3, body, [tf.constant(0)])
    with tf.Session() as s:
        s.run(v.initializer)
        assert s.run(out) == 3 and s.run(v) == 4.5


@pytest.mark.parametrize("take", [True, False])
def test_a_cond_merging_a_reference_and_a_value_reads_the_variable(take):
    # One branch ends in a reference variable's assign_add (a ref), the other in a value: the
    # Merge forwards the variable's value whichever input is live (TF: Merge of ref and value).
    v = tf.Variable(0.0, use_resource=False)
    p = tf.placeholder(tf.bool, [])

    def body(i):
        r = tf.cond(p, lambda: tf.assign_add(v, 1.0), lambda: tf.identity(v))
        with tf.control_dependencies([r]):
            return i + 1

    out = tf.while_loop(lambda i: i < 2, body, [tf.constant(0)])
    direct = tf.cond(p, lambda: tf.assign_add(v, 10.0), lambda: tf.identity(v))
    with tf.Session() as s:
        s.run(v.initializer)
        assert s.run(out, {p: take}) == 2 and s.run(v) == 2.0 * take
        assert s.run(direct, {p: take}) == 2.0 * take + 10.0 * take
