"""Every widget leaves a static rendering of its last state in its output (``_saved.py``):
shown with a display id, it replaces its output with its current state once changes settle,
never for a click in the widget itself, and never when it was not shown."""

from __future__ import annotations

import re
import time

import numpy as np
import pytest
from IPython.core.displaypub import CapturingDisplayPublisher
from IPython.core.interactiveshell import InteractiveShell
from IPython.display import display

import dflab as tf
from dflab.notebook import _saved
from dflab.notebook.cluster_view import ClusterView
from dflab.notebook.graph_view import GraphView
from dflab.notebook.monitor import TrainingMonitor
from dflab.notebook.stepper import Stepper
from dflab.notebook.timeline import Timeline
from dflab.notebook.worker_progress import WorkerProgress

WIDGET = "application/vnd.jupyter.widget-view+json"


@pytest.fixture
def outputs(monkeypatch):
    """What the shell publishes (display and update_display), as dicts."""
    monkeypatch.setattr(_saved, "SETTLE_S", 0.1)
    shell = InteractiveShell.instance()
    publisher = CapturingDisplayPublisher()
    monkeypatch.setattr(shell, "display_pub", publisher)
    return publisher.outputs


def _wait_for(outputs, n: int, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while len(outputs) < n and time.monotonic() < deadline:
        time.sleep(0.02)


def test_a_live_view_replaces_its_saved_output_once_its_state_settles(outputs):
    progress = WorkerProgress(2, title="sync", max_hz=1000)  # redrawn at once: only saving waits
    display(progress)
    (shown,) = outputs
    display_id = shown["transient"]["display_id"]
    assert WIDGET in shown["data"] and "0 gradients" in shown["data"]["text/html"]
    assert not shown["update"]
    for k in range(6):
        progress.record(k % 2, 0.01, stale=k == 5)
    _wait_for(outputs, 2)
    time.sleep(0.2)  # records that come together make one update, not one each
    updates = [o for o in outputs if o["update"]]
    assert len(updates) == 1
    (update,) = updates
    assert update["transient"]["display_id"] == display_id
    assert WIDGET in update["data"]
    assert "6 gradients, 1 dropped as stale" in update["data"]["text/html"]
    assert update["data"]["text/plain"] == "WorkerProgress: 2 workers, 6 gradients, 1 dropped " \
                                           "as stale"
    progress.flush()  # the end of training: saved at once
    assert outputs[-1]["update"] and outputs[-1]["transient"]["display_id"] == display_id


def test_a_widget_not_shown_sends_nothing(outputs):
    progress = WorkerProgress(1)
    progress.record(0, 0.1)
    progress.flush()
    time.sleep(0.15)
    assert outputs == []


def test_a_stepper_stepped_by_a_later_cell_saves_where_it_stands(outputs):
    a = tf.placeholder(tf.float32, [], name="a")
    d = tf.multiply(a + 1.0, a * 3.0, name="d")
    with tf.Session() as sess:
        st = Stepper(sess, d, {a: 2.0})
        display(st)
        assert outputs[0]["data"]["application/vnd.dflab.graph+json"]["title"].startswith(
            "step 0 of ?")
        st.resume()
        _wait_for(outputs, 2)
        saved = outputs[-1]
        assert saved["update"]
        doc = saved["data"]["application/vnd.dflab.graph+json"]
        assert doc["title"].startswith("step ") and "finished" in doc["title"]
        assert {n.get("state") for n in doc["nodes"].values() if n["kind"] == "op"} == {"done"}


def test_a_click_in_the_widget_does_not_replace_its_output(outputs):
    x = tf.placeholder(tf.float32, [], name="x")
    tf.square(x, name="y")
    view = GraphView(tf.get_default_graph())
    display(view)
    view._on_custom_msg(view, {"type": "click", "id": view.node_id("y")}, [])
    assert view.detail["name"] == "y"
    time.sleep(0.2)
    assert len(outputs) == 1
    view.select("x")  # from Python (a later cell): saved
    _wait_for(outputs, 2)
    assert outputs[-1]["update"]


def test_static_renderings_of_every_widget_say_what_they_show():
    monitor = TrainingMonitor(total_steps=10, title="fit")
    for step in range(10):
        monitor.log(step, loss=1.0 / (step + 1))
    monitor.flush()
    bundle, _ = monitor._repr_mimebundle_()
    svg = bundle["image/svg+xml"]
    assert svg.startswith("<svg") and "loss 0.1" in svg and "<path" in svg
    assert "step 9 / 10" in bundle["text/plain"]

    x = tf.placeholder(tf.float32, [3], name="x")
    y = tf.reduce_sum(x * 2.0, name="y")
    md = tf.RunMetadata()
    with tf.Session() as sess:
        sess.run(y, {x: np.ones(3, np.float32)}, run_metadata=md,
                 options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE))
    bundle, _ = Timeline(md)._repr_mimebundle_()
    assert bundle["image/svg+xml"].startswith("<svg") and WIDGET in bundle


def test_a_cluster_view_saves_its_table_and_its_calm_stop(outputs):
    cluster = tf.train.ClusterSpec({"worker": ["saved-w0:1"]})
    server = tf.train.Server(cluster, job_name="worker", task_index=0)
    view = ClusterView(server)
    display(view)
    assert "saved-w0:1" in outputs[0]["data"]["text/html"]
    server.stop()
    view.refresh()
    _wait_for(outputs, 2)
    assert outputs[-1]["update"] and "(not running)" in outputs[-1]["data"]["text/html"]


def test_a_saved_stepper_drawing_is_coloured_by_its_states_with_its_status():
    a = tf.placeholder(tf.float32, [], name="a")
    d = tf.multiply(a + 1.0, a * 3.0, name="d")
    with tf.Session() as sess:
        st = Stepper(sess, d, {a: 2.0})
        st.step()
        svg = st._repr_mimebundle_()[0]["image/svg+xml"]
    done = st.node_id(st.executed[0])
    group = re.search(rf'<g id="{done}"[^>]*>(.*?)</g>', svg, re.S)
    assert 'data-state="done"' in group.group(0) and 'fill="#c8e6c9"' in group.group(1)
    assert "step 1 of ?" in svg and ">ran<" in svg and ">ready<" in svg


def test_steppers_side_by_side_save_both_drawings_and_follow_their_steps(outputs):
    from dflab.notebook.stepper import side_by_side

    v = tf.Variable(10.0, name="v")
    with tf.Session() as sess:
        sess.run(v.initializer)
        reader = Stepper(sess, v.read_value() + 1.0)
        writer = Stepper(sess, tf.assign(v, v * 2.0))
        box = side_by_side(writer, reader)
        display(box)
        first = outputs[0]["data"]
        assert first["image/svg+xml"].count("step 0 of ?") == 2
        writer.resume()
        _wait_for(outputs, 2)
        saved = outputs[-1]
        assert saved["update"] and saved["transient"] == outputs[0]["transient"]
        assert "finished" in saved["data"]["image/svg+xml"]
        assert saved["data"]["text/plain"].startswith("Stepper: step ")
