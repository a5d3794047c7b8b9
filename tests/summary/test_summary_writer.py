"""FileWriter: event files read back with TensorBoard's own readers (and its server).

The end-to-end test trains a small model for a few steps writing scalars, histograms, text,
the graph and one traced run's metadata, then checks what TensorBoard's ``EventAccumulator``
finds: the values per step, the graph's nodes, the run metadata's step stats.
"""

from __future__ import annotations

import glob
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pytest

import dflab as tf

pytest.importorskip("tensorboard")
from tensorboard.backend.event_processing import event_accumulator as ea_mod  # noqa: E402
from tensorboard.backend.event_processing import event_file_loader  # noqa: E402

KEEP_ALL = {ea_mod.SCALARS: 0, ea_mod.HISTOGRAMS: 0, ea_mod.TENSORS: 0, ea_mod.IMAGES: 0}


def accumulate(logdir) -> ea_mod.EventAccumulator:
    acc = ea_mod.EventAccumulator(str(logdir), size_guidance=KEEP_ALL)
    acc.Reload()
    return acc


def events_in(logdir) -> list:
    (path,) = glob.glob(os.path.join(str(logdir), "events.out.tfevents.*"))
    return list(event_file_loader.EventFileLoader(path).Load())


def build_regression(use_resource=None):
    x = tf.placeholder(tf.float32, [None, 2], name="x")
    y = tf.placeholder(tf.float32, [None, 1], name="y")
    w = tf.Variable(tf.zeros([2, 1]), name="w", use_resource=use_resource)
    loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
    train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
    with tf.name_scope("summaries"):
        tf.summary.scalar("loss", loss)
        tf.summary.histogram("weights", w)
        tf.summary.text("note", tf.constant("**step** summary"))
    return x, y, w, loss, train, tf.summary.merge_all()


@pytest.mark.parametrize("use_resource", [True, False])
def test_training_run_read_back_with_tensorboards_reader(tmp_path, use_resource):
    x, y, w, loss, train, merged = build_regression(use_resource)
    rng = np.random.RandomState(0)
    xs = rng.randn(16, 2).astype(np.float32)
    ys = xs @ np.array([[1.0], [-2.0]], np.float32)
    losses, weights = [], []
    init = tf.global_variables_initializer()  # before the graph is written, so it is in it
    with tf.Session() as sess, tf.summary.FileWriter(str(tmp_path), sess.graph) as writer:
        sess.run(init)
        for step in range(4):
            options = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)
            metadata = tf.RunMetadata()
            summary, loss_value, w_value = sess.run([merged, loss, w], {x: xs, y: ys},
                                                    options=options, run_metadata=metadata)
            writer.add_summary(summary, global_step=step)
            if step == 2:
                writer.add_run_metadata(metadata, "step2", global_step=step)
            losses.append(loss_value)
            weights.append(w_value.copy())
            sess.run(train, {x: xs, y: ys})
        graph_ops = {op.name: op for op in sess.graph.get_operations()}
    assert losses[-1] < losses[0]

    acc = accumulate(tmp_path)
    tags = acc.Tags()
    assert tags["scalars"] == ["summaries/loss"]
    assert tags["histograms"] == ["summaries/weights"]
    assert tags["tensors"] == ["summaries/note"]
    assert tags["graph"] and tags["run_metadata"] == ["step2"]

    scalars = acc.Scalars("summaries/loss")
    assert [e.step for e in scalars] == [0, 1, 2, 3]
    np.testing.assert_array_equal([e.value for e in scalars], np.float32(losses))

    histograms = acc.Histograms("summaries/weights")
    assert [h.step for h in histograms] == [0, 1, 2, 3]
    for h, w_value in zip(histograms, weights):
        assert h.histogram_value.num == 2
        assert h.histogram_value.min == w_value.min() and h.histogram_value.max == w_value.max()
        np.testing.assert_allclose(h.histogram_value.sum, w_value.astype(np.float64).sum())
        assert sum(h.histogram_value.bucket) == 2

    notes = acc.Tensors("summaries/note")
    assert [t.step for t in notes] == [0, 1, 2, 3]
    assert list(notes[0].tensor_proto.string_val) == [b"**step** summary"]
    assert acc.SummaryMetadata("summaries/note").plugin_data.plugin_name == "text"

    graph = acc.Graph()
    nodes = {n.name: n for n in graph.node}
    assert set(nodes) == set(graph_ops)
    for name, op in graph_ops.items():
        assert nodes[name].op == op.type
        data_inputs = [t.name[:-2] if t.name.endswith(":0") else t.name for t in op.inputs]
        assert list(nodes[name].input[:len(data_inputs)]) == data_inputs
        assert list(nodes[name].input[len(data_inputs):]) == [
            "^" + c.name for c in op.control_inputs]
    assert any(i.startswith("^") for n in graph.node for i in n.input)  # the train NoOp's
    placeholder = nodes["x"]
    assert [d.size for d in placeholder.attr["shape"].shape.dim] == [-1, 2]
    assert placeholder.attr["dtype"].type == 1  # DT_FLOAT
    w_shape = nodes["w"].attr["_output_shapes"].list.shape[0]
    if use_resource:  # the op outputs a scalar handle; the variable's shape is an attr
        assert nodes["w"].op == "VarHandleOp" and list(w_shape.dim) == []
        assert [d.size for d in nodes["w"].attr["shape"].shape.dim] == [2, 1]
    else:
        assert nodes["w"].op == "VariableV2" and [d.size for d in w_shape.dim] == [2, 1]

    run_metadata = acc.RunMetadata("step2")
    stats = run_metadata.step_stats.dev_stats
    assert stats and all(d.device.endswith("CPU:0") for d in stats)
    traced = {n.node_name for d in stats for n in d.node_stats}
    assert "summaries/loss" in traced and "MatMul" in traced
    assert traced <= set(graph_ops) | {"_SOURCE", "_SINK"}
    assert all(n.all_start_micros > 0 and n.all_end_rel_micros >= n.op_end_rel_micros
               for d in stats for n in d.node_stats)


def test_event_file_layout_and_plugin_metadata_written_once(tmp_path):
    text = tf.summary.text("t", tf.constant("hello"))
    with tf.Session() as sess:
        serialized = sess.run(text)
    writer = tf.summary.FileWriter(str(tmp_path / "run"), filename_suffix=".v2")
    assert writer.get_logdir() == str(tmp_path / "run")
    writer.add_summary(serialized, 1)
    writer.add_summary(tf.summary.Summary.FromString(serialized), 2)
    writer.close()
    (name,) = os.listdir(tmp_path / "run")
    assert name.startswith("events.out.tfevents.") and name.endswith(".v2")
    events = events_in(tmp_path / "run")
    assert events[0].file_version == "brain.Event:2"
    first, second = events[1:]
    assert (first.step, second.step) == (1, 2)
    assert first.summary.value[0].metadata.plugin_data.plugin_name == "text"
    assert not second.summary.value[0].HasField("metadata")
    assert all(e.wall_time > 0 for e in events)


def test_writer_checks_and_reopen(tmp_path):
    writer = tf.summary.FileWriter(str(tmp_path))
    metadata = tf.RunMetadata()
    writer.add_run_metadata(metadata, "a")
    with pytest.raises(ValueError, match="already used"):
        writer.add_run_metadata(metadata, "a")
    with pytest.raises(TypeError, match="Summary proto"):
        writer.add_summary(3.0)
    writer.close()
    with pytest.raises(RuntimeError, match="closed"):
        writer.add_summary(tf.summary.Summary(), 0)
    writer.close()  # closing twice is harmless
    writer.reopen()
    writer.add_summary(tf.summary.Summary(value=[tf.summary.Summary.Value(
        tag="late", simple_value=5.0)]), 7)
    writer.close()
    assert len(glob.glob(str(tmp_path / "events.out.tfevents.*"))) == 2
    acc = ea_mod.EventAccumulator(str(tmp_path))
    acc.Reload()
    assert [(e.step, e.value) for e in acc.Scalars("late")] == [(7, 5.0)]


def test_a_writer_left_open_at_exit_still_writes_every_event(tmp_path):
    # Without a close at exit, the background writer thread dies with events still queued.
    code = ("import sys, dflab as tf\n"
            "w = tf.summary.FileWriter(sys.argv[1], flush_secs=3600)\n"
            "for i in range(50):\n"
            "    w.add_summary(tf.summary.Summary(value=[tf.summary.Summary.Value(\n"
            "        tag='kept', simple_value=i)]), i)\n")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert [(e.step, e.value) for e in accumulate(tmp_path).Scalars("kept")] == [
        (i, float(i)) for i in range(50)]


def test_graph_def_attrs_and_named_outputs():
    from dflab.summary.protos import graph_def_proto

    with tf.device("/cpu:0"):
        parts = tf.split(tf.constant([[1.0, 2.0]]), 2, axis=1, name="parts")
    tf.add(parts[0], parts[1], name="sum")
    proto = graph_def_proto(tf.get_default_graph())
    nodes = {n.name: n for n in proto.node}
    assert list(nodes["sum"].input) == ["parts", "parts:1"]
    assert nodes["parts"].attr["num_split"].i == 2
    assert nodes["parts"].device.endswith("CPU:0")
    const = nodes["Const"].attr["value"].tensor
    assert const.dtype == 1 and [d.size for d in const.tensor_shape.dim] == [1, 2]
    assert np.frombuffer(const.tensor_content, "<f4").tolist() == [1.0, 2.0]
    assert len(nodes["parts"].attr["_output_shapes"].list.shape) == 2
    # a dflab GraphDef converts too (what partition graphs are)
    again = graph_def_proto(tf.get_default_graph().as_graph_def())
    assert [n.name for n in again.node] == [n.name for n in proto.node]


def test_run_metadata_of_a_partitioned_step_keeps_devices_partitions_and_costs():
    from dflab.summary.protos import run_metadata_proto

    with tf.device("/cpu:0"):
        a = tf.constant(2.0) * 3
    with tf.device("/cpu:1"):
        b = a + 1
    options = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE, output_partition_graphs=True)
    metadata = tf.RunMetadata()
    with tf.Session(config=tf.ConfigProto(device_count={"CPU": 2})) as sess:
        assert sess.run(b, options=options, run_metadata=metadata) == 7.0
    proto = run_metadata_proto(metadata)
    assert [d.device[-5:] for d in proto.step_stats.dev_stats] == ["CPU:0", "CPU:1"]
    for ours, theirs in zip(metadata.step_stats.dev_stats, proto.step_stats.dev_stats):
        assert [n.node_name for n in theirs.node_stats] == [n.node_name for n in ours.node_stats]
        assert [n.op_end_rel_micros for n in theirs.node_stats] == [
            n.op_end_rel_micros for n in ours.node_stats]
    ops = [sorted(n.op for n in g.node) for g in proto.partition_graphs]
    assert ops == [["Const", "Const", "Mul", "_Send"], ["AddV2", "Const", "_Recv"]]
    assert {n.name for n in proto.cost_graph.node} == {
        n.name for n in metadata.cost_graph.node}
    assert proto.cost_graph.node[0].output_info[0].dtype == 1  # DT_FLOAT


def test_file_writer_cache_shares_one_writer_per_directory(tmp_path):
    a = tf.summary.FileWriterCache.get(str(tmp_path))
    try:
        assert tf.summary.FileWriterCache.get(str(tmp_path)) is a
    finally:
        tf.summary.FileWriterCache.clear()
    assert tf.summary.FileWriterCache.get(str(tmp_path)) is not a
    tf.summary.FileWriterCache.clear()
    assert any(e.HasField("graph_def") for e in events_in_all(tmp_path))


def events_in_all(logdir):
    for path in glob.glob(os.path.join(str(logdir), "events.out.tfevents.*")):
        yield from event_file_loader.EventFileLoader(path).Load()


# --- the real server ------------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get_json(url: str):
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


@pytest.mark.slow
def test_tensorboard_server_serves_the_scalars_and_the_graph(tmp_path):
    x, y, w, loss, train, merged = build_regression()
    with tf.Session() as sess, tf.summary.FileWriter(str(tmp_path / "run1"),
                                                     sess.graph) as writer:
        sess.run(tf.global_variables_initializer())
        for step in range(3):
            summary, _ = sess.run([merged, train], {x: np.ones((4, 2)), y: np.ones((4, 1))})
            writer.add_summary(summary, step)
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "tensorboard.main", "--logdir", str(tmp_path), "--host",
         "127.0.0.1", "--port", str(port), "--load_fast", "false", "--reload_interval", "1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}/data/plugin"
    try:
        deadline, tags = time.monotonic() + 90, {}
        while time.monotonic() < deadline and "run1" not in tags:
            assert server.poll() is None, server.stderr.read().decode()
            try:
                tags = _get_json(f"{base}/scalars/tags")
            except OSError:
                pass
            time.sleep(0.5)
        assert "summaries/loss" in tags.get("run1", {}), tags
        points = _get_json(f"{base}/scalars/scalars?run=run1&tag=summaries/loss")
        assert [p[1] for p in points] == [0, 1, 2]
        assert _get_json(f"{base}/graphs/info")["run1"]["run_graph"] is True
        with urllib.request.urlopen(f"{base}/graphs/graph?run=run1", timeout=5) as response:
            pbtxt = response.read().decode()
        assert 'name: "MatMul"' in pbtxt and 'op: "ResourceApplyGradientDescent"' in pbtxt
    finally:
        server.terminate()
        server.wait(timeout=30)
