"""Stepper widget: the real executor stepped through the widget's Python API and its front-end
messages, with results identical to Session.run; back/replay; breakpoints; shared variables."""

import numpy as np
import pytest

import dflab as tf
from dflab.notebook import Stepper
from dflab.notebook.stepper import side_by_side
from dflab.runtime.stepping import has_inf_or_nan

TWO_CPUS = dict(device_count={"CPU": 2}, inter_op_parallelism_threads=2)


def _diamond():
    a = tf.constant(np.arange(4.0).reshape(2, 2), name="a")
    b = tf.constant(np.ones((2, 2)), name="b")
    c = tf.matmul(a, b, name="c")
    d = tf.add(a, b, name="d")
    return tf.multiply(c, d, name="e")


def by_name(stepper):
    """Node states sent to the front-end, keyed by op name (ids are opaque)."""
    return {name: stepper.states.get(nid) for name, nid in stepper.layout.name_to_id.items()}


def test_initial_state_sent_to_the_front_end():
    e = _diamond()
    with tf.Session() as sess:
        st = Stepper(sess, e)
        assert by_name(st) == {"a": "ready", "b": "ready", "c": "pending", "d": "pending",
                               "e": "pending"}
        assert st.status == "step 0 of ? · ready: a, b"
        assert [r["key"] for r in st.ready_items] == ["a", "b"]
        assert st.svg.startswith("<svg") and st.cursor == 0 and st.total == 0
        assert not st.finished


def test_steps_in_a_chosen_dataflow_order_give_session_run_results():
    e = _diamond()
    with tf.Session() as sess:
        expected = sess.run(e)
        st = Stepper(sess, e)
        for name in ["b", "a", "d", "c", "e"]:
            st.step(name)
        np.testing.assert_allclose(st.result, expected)
        assert st.executed == ["b", "a", "d", "c", "e"]
        assert st.finished and st.status == "step 5 of 5 · finished"
        assert set(by_name(st).values()) == {"done"}
        assert st.values[st.node_id("e")].startswith("float64[2,2] [")
        with pytest.raises(tf.errors.OutOfRangeError):
            st.step()


def test_back_restores_variables_and_step_re_executes_the_recorded_events():
    v = tf.Variable(1.0, name="v")
    inc = tf.assign_add(v, 1.0, name="inc")
    with tf.Session() as sess:
        sess.run(v.initializer)
        st = Stepper(sess, inc)
        events = st.resume()
        n = len(events)
        assert st.finished and sess.run(v) == 2.0
        assert st.variables == [["v", "float32 2"]] and st.changed_variables == ["v"]
        st.back(n)
        assert st.cursor == 0 and st.executed == []
        assert sess.run(v) == 1.0  # really undone
        assert st.variables == [["v", "float32 1"]] and st.changed_variables == ["v"]
        assert st.message == "restored 1 variable (v) to their values before the step"
        assert by_name(st)["inc"] == "pending"
        assert st.status.startswith(f"step 0 of {n}") and f"rewound ({n} recorded events" \
            in st.status
        replayed = [st.step() for _ in range(n)]
        assert [e.name for e in replayed] == [e.name for e in events]
        assert replayed[-1] is events[-1]  # the recorded event, executed again
        assert sess.run(v) == 2.0 and st.variables == [["v", "float32 2"]]
        assert by_name(st)["inc"] == "done" and st.status == f"step {n} of {n} · finished"


def test_back_and_forward_buttons_show_values_after_each_event():
    v = tf.Variable(np.zeros(2, np.float32), name="v", use_resource=True)
    first = v.assign_add([1.0, 1.0], name="first")
    with tf.control_dependencies([first]):
        second = v.assign_add([10.0, 10.0], name="second")
    with tf.Session() as sess:
        sess.run(v.initializer)
        st = Stepper(sess, second)
        st.resume()
        assert st.variables == [["v", "float32[2] [11, 11]"]]
        after_second = next(e.index for e in st.history if e.name == "second") + 1
        st.back(st.cursor - after_second)  # the reads after it change nothing
        assert st.changed_variables == [] and "no variable changed" in st.message
        st._handle_message({"type": "action", "action": "back"})  # undo "second"
        assert st.variables == [["v", "float32[2] [1, 1]"]] and st.changed_variables == ["v"]
        assert st.message == f"restored 1 variable (v) to their values after event {st.cursor}"
        assert st.message_kind == "info"
        st._handle_message({"type": "action", "action": "forward"})
        assert st.variables == [["v", "float32[2] [11, 11]"]] and st.changed_variables == ["v"]
        assert st.message == "replayed 1 recorded event: same outputs as before"
        st.resume()
        assert st.finished and np.array_equal(sess.run(v), [11.0, 11.0])


def test_another_path_after_back_drops_the_recorded_events():
    e = _diamond()
    with tf.Session() as sess:
        st = Stepper(sess, e)
        st.step("a")
        st.step("b")
        st.back(2)
        assert {r.name for r in st.ready} == {"a", "b"}  # the ready set as it was then
        st.step("a")  # the recorded next event
        assert st.cursor == 1 and st.total == 2
        st.back()
        st.step("b")  # another path: the recorded future goes
        assert st.executed == ["b"] and st.total == 1
        assert st.message == "took another path at event 1: the 2 recorded events from " \
            "there on were dropped"
        st.resume()
        assert st.executed[:2] == ["b", "a"] and st.total == 5
        np.testing.assert_allclose(st.result, sess.run(e))


def test_back_over_an_irreversible_event_says_why_in_the_widget():
    side = tf.py_func(lambda: np.float32(1.0), [], tf.float32, name="side")
    out = tf.add(side, 1.0, name="out")
    with tf.Session() as sess:
        st = Stepper(sess, out)
        st.resume()
        st._handle_message({"type": "action", "action": "back"})
        assert st.message.startswith("FailedPreconditionError: Cannot step back over event")
        assert "py_func" in st.message and st.finished and st.cursor == st.total
        assert st.message_kind == "error"


def test_back_warns_when_another_run_wrote_the_variable():
    v = tf.Variable(1.0, name="v")
    inc = tf.assign_add(v, 1.0, name="inc")
    with tf.Session() as sess:
        sess.run(v.initializer)
        st = Stepper(sess, inc)
        st.resume()
        sess.run(tf.assign(v, 50.0))
        st.back(st.cursor)
        assert st.message_kind == "warning" and "restored anyway" in st.message
        assert st.variables == [["v", "float32 1"]] and sess.run(v) == 1.0


def test_value_at_the_cursor():
    e = _diamond()
    with tf.Session() as sess:
        st = Stepper(sess, e)
        st.run_to("d")
        np.testing.assert_allclose(st.value("d")[0], np.arange(4.0).reshape(2, 2) + 1)
        st.back(st.cursor)
        with pytest.raises(tf.errors.FailedPreconditionError, match="d has not run"):
            st.value("d")
        assert st.node_id("d") not in st.values


def test_front_end_buttons_and_clicks():
    e = _diamond()
    with tf.Session() as sess:
        st = Stepper(sess, e)
        st._handle_message({"type": "action", "action": "step"})
        assert st.executed == ["a"]
        # Clicking a ready node steps it (dataflow order is free).
        st._handle_message({"type": "click", "id": st.node_id("b")})
        assert st.executed == ["a", "b"] and st.selected == st.node_id("b")
        # Clicking a node that is not ready shows its details instead.
        st._handle_message({"type": "click", "id": st.node_id("e")})
        assert st.executed == ["a", "b"]
        assert st.detail["name"] == "e" and st.detail["op_type"] == "Mul"
        assert st.detail["state"] == "pending"
        # run-to runs to the selected node.
        st._handle_message({"type": "action", "action": "run-to"})
        assert st.executed[-1] == "e" and st.finished
        st._handle_message({"type": "action", "action": "back"})
        assert st.cursor == 4
        st._handle_message({"type": "action", "action": "reset"})
        assert st.cursor == 0 and st.total == 0 and by_name(st)["a"] == "ready"
        st._handle_message({"type": "step", "key": "b"})  # a ready chip
        assert st.executed == ["b"]
        # A bad request from the page is reported in the widget, not raised into the void.
        st._handle_message({"type": "step", "key": "e"})
        assert "InvalidArgumentError" in st.message and "not ready" in st.message
        st._handle_message({"type": "action", "action": "resume"})
        assert st.finished and st.message == ""


def test_run_to_without_selection_says_what_to_do():
    e = _diamond()
    with tf.Session() as sess:
        st = Stepper(sess, e)
        st._handle_message({"type": "action", "action": "run-to"})
        assert "Select a node" in st.message and st.executed == []


def test_a_button_on_a_closed_session_says_so_in_the_widget():
    e = _diamond()
    sess = tf.Session()
    st = Stepper(sess, e)
    st.step()
    sess.close()
    for action in ("reset", "step", "resume"):
        st.message = ""
        st._handle_message({"type": "action", "action": action})  # must not raise
        assert "closed Session" in st.message, (action, st.message)


def test_breakpoints_by_name_predicate_and_shift_click():
    e = _diamond()
    with tf.Session() as sess:
        st = Stepper(sess, e)
        st._handle_message({"type": "toggle-breakpoint", "id": st.node_id("c")})
        assert st.breakpoints == ["c"] and st.breakpoint_ids == [st.node_id("c")]
        st.resume()
        assert "c" in {r.name for r in st.ready} and "c" not in st.executed
        st.resume()  # goes on past the breakpoint it stopped at
        assert st.finished
        st._handle_message({"type": "toggle-breakpoint", "id": st.node_id("c")})
        assert st.breakpoints == [] and st.breakpoint_ids == []
        with pytest.raises(tf.errors.NotFoundError):
            st.add_breakpoint("nope")
        with pytest.raises(TypeError):
            st.add_breakpoint(3)

    x = tf.placeholder(tf.float32, [2], name="x")
    lg = tf.log(x, name="lg")
    out = tf.reduce_sum(lg, name="out")
    with tf.Session() as sess:
        st = Stepper(sess, out, {x: [1.0, 0.0]})
        st.add_breakpoint(has_inf_or_nan)
        events = st.resume()
        assert events[-1].name == "lg" and not st.finished
        assert "-inf" in st.values[st.node_id("lg")] and "inf/nan" in st.values[st.node_id("lg")]
        st.back(2)
        events = st.resume()  # replaying history honours the predicate too
        assert events[-1].name == "lg" and st.cursor == st.total


def test_while_loop_frames_iterations_and_result():
    i = tf.constant(0, name="i0")
    acc = tf.constant(1.0, name="acc0")
    out = tf.while_loop(lambda i, a: i < 4, lambda i, a: (i + 1, a * 2.0), [i, acc])
    with tf.Session() as sess:
        expected = sess.run(out)
        st = Stepper(sess, out)
        seen_badges = set()
        while not st.finished:
            st.step()
            seen_badges.update(st.badges.values())
        assert list(st.result) == list(expected)
        assert {"#0", "#1", "#2", "#3", "#4"} <= seen_badges  # iteration numbers on nodes
        assert len(st.frames) == 1 and "finished at iteration 4 (5 seen)" in st.frames[0]
        labels = [x["label"] for lane in st.lanes.values() for x in lane]
        assert any(label.endswith(" #3") for label in labels)
        # Every loop op is drawn: small graphs open all their scopes for stepping.
        assert all(st.nodes[nid]["kind"] == "op" for nid in st.layout.name_to_id.values())


def test_untaken_cond_branch_is_dead():
    p = tf.placeholder(tf.bool, [], name="p")
    x = tf.constant(3.0, name="x")
    y = tf.cond(p, lambda: tf.square(x, name="sq"), lambda: tf.negative(x, name="neg"))
    with tf.Session() as sess:
        st = Stepper(sess, y, {p: True})
        st.resume()
        assert st.result == sess.run(y, {p: True}) == 9.0
        states = by_name(st)
        sq = next(n for n in states if n.endswith("sq"))
        neg = next(n for n in states if n.endswith("neg"))
        assert states[sq] == "done" and states[neg] == "dead"
        assert st.values.get(st.node_id(neg)) in (None, "dead")
        lane = next(iter(st.lanes.values()))
        assert any(x["state"] == "dead" for x in lane)


def test_partitioned_step_draws_devices_and_send_recv():
    with tf.device("/cpu:0"):
        a = tf.constant(2.0, name="a")
        b = tf.square(a, name="b")
    with tf.device("/cpu:1"):
        c = tf.add(b, 1.0, name="c")
    with tf.Session(config=tf.ConfigProto(**TWO_CPUS)) as sess:
        st = Stepper(sess, c)
        assert st.color_by == "partition"
        kinds = {n["name"]: n.get("cluster_kind") for n in st.nodes.values()
                 if n["kind"] == "cluster"}
        assert sorted(v for v in kinds.values()) == ["partition", "partition"]
        types = {n["op_type"] for n in st.nodes.values() if n["kind"] == "op"}
        assert {"_Send", "_Recv"} <= types
        recv = next(r for r in st.ready if r.op_type == "_Recv")
        st.step(recv)
        assert st.states[st.node_id(recv.name)] == "running"  # waiting for its value
        st.resume()
        assert st.result == sess.run(c) == 5.0
        assert set(st.lanes) == {"CPU:0", "CPU:1"}  # one lane per device
        # The _Recv's value is shown once it arrives, and again after going back over it.
        assert st.values[st.node_id(recv.name)] == "float32 4"
        st.back(st.cursor)
        assert st.node_id(recv.name) not in st.values
        st.resume()
        assert st.values[st.node_id(recv.name)] == "float32 4"


@pytest.mark.parametrize("use_resource", [True, False])
def test_two_steppers_share_a_variable_side_by_side(use_resource):
    # The variables panel shows either kind's value (a handle's state, a reference's buffer).
    v = tf.Variable(10.0, name="v", use_resource=use_resource)
    read_plus_one = tf.add(v.read_value(), 1.0, name="read_plus_one")
    double = tf.assign(v, v * 2.0, name="double")
    with tf.Session() as sess:
        sess.run(v.initializer)
        writer = Stepper(sess, double)
        reader = Stepper(sess, read_plus_one)
        box = side_by_side(writer, reader)
        assert list(box.children) == [writer, reader]
        assert Stepper.side_by_side(writer, reader).children == box.children
        assert reader.variables == [["v", "float32 10"]]
        writer.resume()  # v = 20 before the reader reads it
        assert reader.variables == [["v", "float32 20"]]  # the other view sees the write
        reader.resume()
        assert reader.result == 21.0 and sess.run(v) == 20.0
        with pytest.raises(TypeError):
            side_by_side(writer, 3)


def test_mime_bundle_has_text_and_a_static_drawing():
    e = _diamond()
    with tf.Session() as sess:
        st = Stepper(sess, e)
        bundle, _ = st._repr_mimebundle_()
        assert bundle["text/plain"] == "Stepper: step 0 of ? · ready: a, b"
        assert bundle["image/svg+xml"].startswith("<svg")
        assert "application/vnd.jupyter.widget-view+json" in bundle


def test_a_failing_kernel_is_shown_in_the_widget():
    x = tf.placeholder(tf.float32, [None], name="x")
    bad = tf.reshape(x, [3], name="bad")
    with tf.Session() as sess:
        st = Stepper(sess, bad, {x: np.ones(4)})
        st._handle_message({"type": "action", "action": "resume"})
        assert st.message.startswith("InvalidArgumentError in bad: ")
        assert st.detail["name"] == "bad"  # the failing node is selected
        assert "failed" in st.status
        # Nothing more can run: the step buttons are off, the node and its lane say failed.
        assert st.finished
        assert st.lanes and list(st.lanes.values())[0][-1] == {"label": "bad", "state": "failed"}
        assert st.states[st.node_id("bad")] == "failed"


def test_a_collapsed_scope_shows_the_state_its_members_add_up_to():
    from dflab.notebook._graph_widget import scope_state

    assert scope_state([]) is None
    assert scope_state(["done", "failed", "pending"]) == "failed"
    assert scope_state(["done", "ready"]) == "ready"
    assert scope_state(["dead", "dead"]) == "dead"
    assert scope_state(["done", "dead"]) == "done"
    assert scope_state(["done", "pending"]) == "running"
    assert scope_state(["pending", "pending"]) == "pending"


def test_the_variables_panel_wraps_between_numbers_not_inside_them():
    import re
    from pathlib import Path

    import dflab.notebook

    css = (Path(dflab.notebook.__file__).parent / "static" / "widgets.css").read_text()
    rule = re.search(r"\.dflab-var-value\s*\{([^}]*)\}", css).group(1).replace(" ", "")
    assert "break-all" not in rule and "overflow-wrap:break-word" in rule


def test_the_frames_panel_says_what_the_executor_has_alive():
    _, power = tf.while_loop(lambda i, p: i < 5, lambda i, p: (i + 1, p * 2.0),
                             [tf.constant(0, name="i0"), tf.constant(1.0, name="p0")],
                             name="loop")
    with tf.Session() as sess:
        st = Stepper(sess, power)
        st.run_to("loop/NextIteration_1")  # the end of iteration 0 for p: iteration 1 begun
        (frame,) = st.run.live_frames
        assert frame["iterations"] == [0, 1]
        assert st.frames == ["loop/while_context: iterations 0, 1 alive (1 seen)"]
        st.back(st.cursor)  # rewound to the start: nothing alive, nothing seen
        assert st.frames == []
