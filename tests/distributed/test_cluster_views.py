"""What a cluster's step looks like to a user: a Chrome trace with one process row per task,
drawings coloured by task, the cluster's tasks and what they hold."""

import json

import numpy as np
import pytest

import dflab as tf
from dflab.client.timeline import Timeline

TASKS = ["/job:ps/replica:0/task:0", "/job:worker/replica:0/task:0",
         "/job:worker/replica:0/task:1"]


@pytest.fixture
def cluster():
    spec = tf.train.ClusterSpec({"ps": ["view-ps:0"], "worker": ["view-w0:0", "view-w1:0"]})
    servers = [tf.train.Server(spec, job_name=j, task_index=i)
               for j, i in [("ps", 0), ("worker", 0), ("worker", 1)]]
    yield servers
    for s in servers:
        s.stop()


def _traced_step(target, use_resource=False):
    # A reference variable's uses share its one snapshot "w/read"; each use of a resource
    # variable is a read of its own (as in TF).
    with tf.device("/job:ps/task:0"):
        w = tf.Variable(np.ones((4, 4), np.float32), name="w", use_resource=use_resource)
    with tf.device("/job:worker/task:1"):
        h = tf.matmul(w, w, name="h")
    with tf.device("/job:worker/task:0"):
        out = tf.reduce_sum(h, name="out")
    md = tf.RunMetadata()
    with tf.Session(target) as s:
        s.run(w.initializer)
        assert s.run(out, options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE),
                     run_metadata=md) == 64.0
    return md


def test_the_chrome_trace_of_a_cluster_step_has_a_process_row_per_task(cluster):
    md = _traced_step(cluster[1].target)
    trace = json.loads(Timeline(md.step_stats).generate_chrome_trace_format())
    events = trace["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events
             if e.get("ph") == "M" and e["name"] == "process_name"}
    assert [n for n in names.values() if n in TASKS] == TASKS
    pid_of = {v: k for k, v in names.items()}
    ops = {e["args"]["name"]: e["pid"] for e in events if e.get("ph") == "X"}
    assert ops["h"] == pid_of[TASKS[2]] and ops["out"] == pid_of[TASKS[1]]
    assert ops["w"] == pid_of[TASKS[0]]
    threads = {(e["pid"], e["args"]["name"]) for e in events
               if e.get("ph") == "M" and e["name"] == "thread_name"}
    assert (pid_of[TASKS[2]], "CPU:0") in threads
    # Arrows go from one task's row to another's.
    starts = {e["id"]: e["pid"] for e in events if e.get("ph") == "s"}
    ends = {e["id"]: e["pid"] for e in events if e.get("ph") == "f"}
    assert any(starts[i] != ends.get(i) for i in starts)


def test_a_one_task_trace_keeps_tfs_layout():
    x = tf.constant(2.0) * 3.0
    md = tf.RunMetadata()
    with tf.Session() as s:
        s.run(x, options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE), run_metadata=md)
    events = json.loads(Timeline(md.step_stats).generate_chrome_trace_format())["traceEvents"]
    names = [e["args"]["name"] for e in events
             if e.get("ph") == "M" and e["name"] == "process_name"]
    assert names == ["Allocators", "/job:localhost/replica:0/task:0/device:CPU:0 Compute",
                     "/job:localhost/replica:0/task:0/device:CPU:0 Tensors"]


@pytest.mark.parametrize("use_resource, reads", [
    (False, {"w/read:0"}), (True, {"ReadVariableOp:0", "ReadVariableOp_1:0"})])
def test_a_drawing_coloured_by_task_groups_devices_and_marks_crossing_edges(cluster,
                                                                            use_resource, reads):
    from dflab.visualize import layout_graph
    from dflab.visualize.looks import task_palette

    md = _traced_step(cluster[1].target, use_resource)
    g = tf.get_default_graph()
    layout = layout_graph(g, color_by="task", run_metadata=md)
    legend = layout.legend
    assert legend["caption"] == "task (device)"
    fills = {s["label"]: s["fill"] for s in legend["swatches"]}
    assert {"ps/0/CPU:0", "worker/0/CPU:0", "worker/1/CPU:0"} <= set(fills)
    assert len({fills["ps/0/CPU:0"], fills["worker/0/CPU:0"], fills["worker/1/CPU:0"]}) == 3
    assert any("crosses tasks" in e["label"] for e in legend["edges"])
    svg = layout.svg
    assert "cross-task" in svg
    # h (worker 1) -> out (worker 0) carried the 4x4 float32 matrix: 64 bytes.
    crossing = {(e["tensors"][0]) for e in layout.edges if "cross-task" in e["classes"]}
    assert crossing == reads | {"h:0"}, crossing
    assert "64 B" in svg
    # Devices of one task share a hue: shades, lighter per device.
    pal = task_palette(["/job:ps/replica:0/task:0/device:CPU:0",
                        "/job:ps/replica:0/task:0/device:GPU:0",
                        "/job:worker/replica:0/task:0/device:CPU:0"])
    ps_cpu, ps_gpu, w_cpu = (pal[d] for d in sorted(pal))
    assert ps_cpu != ps_gpu and w_cpu != ps_cpu
