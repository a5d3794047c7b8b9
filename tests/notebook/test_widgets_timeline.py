"""Timeline widget: data from a real traced run (lanes, bars, Send->Recv arrows), several steps
merged, live following of a session's runs through the throttle (fake clock)."""

import pytest
from test_widgets_throttle import FakeTime

import dflab as tf
from dflab.notebook import Timeline
from dflab.notebook.timeline import merge_steps

TWO_CPUS = dict(device_count={"CPU": 2}, inter_op_parallelism_threads=2)


def _two_device_graph():
    with tf.device("/cpu:0"):
        a = tf.constant(2.0, name="a")
        b = tf.square(a, name="b")
    with tf.device("/cpu:1"):
        c = tf.add(b, 1.0, name="c")
    return c


def _traced(sess, fetch):
    md = tf.RunMetadata()
    sess.run(fetch, options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE),
             run_metadata=md)
    return md


def test_timeline_of_a_real_partitioned_step():
    c = _two_device_graph()
    with tf.Session(config=tf.ConfigProto(**TWO_CPUS)) as sess:
        md = _traced(sess, c)
    view = Timeline(md)
    data = view.data
    traced = {ns.node_name for ds in md.step_stats.dev_stats for ns in ds.node_stats}
    assert {b["name"] for b in data["bars"]} == traced
    assert {lane["device"] for lane in data["lanes"]} == {
        "/job:localhost/replica:0/task:0/device:CPU:0",
        "/job:localhost/replica:0/task:0/device:CPU:1"}
    assert all(b["lane"] in {lane["id"] for lane in data["lanes"]} for b in data["bars"])
    assert all(0 <= b["start_us"] <= b["end_us"] for b in data["bars"])
    assert all(b["color"].startswith("#") for b in data["bars"])
    (arrow,) = data["arrows"]
    assert data["bars"][arrow["from"]]["op_type"] == "_Send"
    assert data["bars"][arrow["to"]]["op_type"] == "_Recv"
    assert arrow["tensor"] == "b:0"
    assert view.summary.startswith(f"step {md.step_stats.step_id} · {len(traced)} node")
    bundle, _ = view._repr_mimebundle_()
    assert bundle["text/plain"] == f"Timeline: {view.summary}"
    assert bundle["image/svg+xml"].startswith("<svg")


def test_several_steps_are_merged_in_time_order():
    c = _two_device_graph()
    with tf.Session(config=tf.ConfigProto(**TWO_CPUS)) as sess:
        mds = [_traced(sess, c) for _ in range(3)]
    view = Timeline(max_steps=2)
    for md in mds:
        view.update(md)
    data = view.data
    assert data["steps"] == [mds[1].step_stats.step_id, mds[2].step_stats.step_id]
    per_step = len(Timeline(mds[0]).data["bars"])
    assert len(data["bars"]) == 2 * per_step and len(data["arrows"]) == 2
    first = [b for b in data["bars"] if b["step_id"] == data["steps"][0]]
    second = [b for b in data["bars"] if b["step_id"] == data["steps"][1]]
    assert max(b["start_us"] for b in first) <= min(b["start_us"] for b in second)
    for arrow in data["arrows"]:  # arrows point at bars of their own step
        assert data["bars"][arrow["from"]]["step_id"] == data["bars"][arrow["to"]]["step_id"]
    lanes = [(lane["device"], lane["thread_id"]) for lane in data["lanes"]]
    assert len(lanes) == len(set(lanes))  # one lane per device and thread
    with pytest.raises(ValueError):
        Timeline(max_steps=0)


def test_merge_keeps_a_single_step_as_is():
    data = {"step_id": 7, "lanes": [{"id": "l0", "device": "d", "thread_id": 1, "rows": 1}],
            "bars": [{"name": "x", "lane": "l0", "start_us": 1.0, "end_us": 2.0,
                      "family": "math"}], "arrows": []}
    merged = merge_steps([(1000.0, data)])
    assert merged["bars"][0]["start_us"] == 1.0 and merged["steps"] == [7]


def test_follow_a_training_loop_live_throttled():
    with tf.Graph().as_default():
        w = tf.Variable(0.0, name="w")
        train = tf.assign_add(w, 1.0, name="train")
        fake = FakeTime()
        with tf.Session() as sess:
            sess.run(w.initializer)
            view = Timeline(clock=fake.clock, schedule=fake.schedule)
            sent = []
            view.observe(lambda ch: sent.append(ch["new"]), names="data")
            view.follow(sess)
            assert view.following
            for _ in range(100):  # 100 runs within 0.1 s of fake time
                sess.run(train)
                fake.advance(0.001)
            fake.advance(1.0)
            assert view.steps_seen == 100
            assert 3 <= len(sent) <= 5  # ~30 updates a second, not 100
            last_id = view.data["step_id"]
            view.stop()
            sess.run(train)  # no longer followed
            assert view.steps_seen == 100 and not view.following
            assert sess.run(w) == 101.0
    assert {b["name"] for b in view.data["bars"]} >= {"train"}
    assert last_id == view.data["step_id"]
