"""ClusterView and ``%dflab cluster``: a cluster's tasks, devices and variables, and the
activity of the watched sessions' steps per task."""

from __future__ import annotations

import time

import numpy as np
import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

import dflab as tf
from dflab.notebook import ClusterView

PS, W0, W1 = ("/job:ps/replica:0/task:0", "/job:worker/replica:0/task:0",
              "/job:worker/replica:0/task:1")


@pytest.fixture
def servers():
    spec = tf.train.ClusterSpec({"ps": ["cv-ps:0"], "worker": ["cv-w0:0", "cv-w1:0"]})
    made = [tf.train.Server(spec, job_name=j, task_index=i)
            for j, i in [("ps", 0), ("worker", 0), ("worker", 1)]]
    yield made
    for s in made:
        s.stop()


def _model(use_resource=None):
    with tf.device("/job:ps/task:0"):
        w = tf.Variable(np.ones((32, 32), np.float32), name="weights",
                        use_resource=use_resource)
    with tf.device("/job:worker/task:1"):
        h = tf.matmul(w, w)
    with tf.device("/job:worker/task:0"):
        return w, tf.reduce_sum(h)


def _wait(predicate, seconds=5.0):
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline
        time.sleep(0.02)


@pytest.mark.parametrize("use_resource, reads", [(False, 1), (True, 2)])
def test_the_view_lists_tasks_and_variables_and_counts_each_tasks_steps(servers, use_resource,
                                                                        reads):
    # matmul(w, w) reads a reference variable once (its shared snapshot), a resource variable
    # once per use: each read is 4 KiB sent from the ps.
    w, out = _model(use_resource)
    with tf.Session(servers[1].target) as sess:
        sess.run(w.initializer)
        view = ClusterView(sess)
        assert "weights" in view._html.value and "4 KiB" in view._html.value
        for _ in range(3):
            sess.run(out)
        _wait(lambda: all(view.activity.get(t) and view.activity[t].steps == 3
                          for t in (PS, W0, W1)))
        # The ps sent w to worker 1 (4 KiB a read); worker 1 sent h to worker 0.
        assert view.activity[PS].bytes_out == 3 * 4096 * reads
        assert view.activity[PS].bytes_in == 0
        assert view.activity[W1].bytes_in == 3 * 4096 * reads
        assert view.activity[W0].bytes_in == 3 * 4096
        _wait(lambda: "3 steps" in view._html.value)
        view.close()
        sess.run(out)  # no longer watched
        assert view.activity[PS].steps == 3
    servers[2].stop()
    view.refresh()
    assert "(not running)" in view._html.value


def test_the_view_says_when_its_cluster_is_gone(servers):
    by_server, by_target = ClusterView(servers[0]), ClusterView(servers[1].target)
    for s in servers:
        s.stop()
    by_server.refresh()
    assert by_server._html.value.count("(not running)") == 3
    table = by_target._html.value
    by_target.refresh()
    # Calmly: the table as last read, a note in muted text, the reason only in its tooltip.
    note = by_target._note.value
    assert by_target.stopped and "The cluster has stopped" in note
    assert "#b42318" not in note and "Error" not in note.split(">", 1)[1]
    assert "No server is running" in note  # the tooltip
    assert by_target._html.value == table and "Error" not in by_target._repr_html_().split(
        "title=")[0]
    bundle = by_target._repr_mimebundle_()
    assert "The cluster has stopped" in bundle["text/html"]
    assert bundle["text/plain"].endswith("(stopped)")
    servers[1].start()
    by_target.refresh()  # back: the note goes
    assert not by_target.stopped and by_target._note.value == ""


def test_the_cluster_magic_shows_the_sessions_cluster(servers):
    sh = InteractiveShell.instance()
    sh.reset()
    sh.run_cell("%load_ext dflab")
    w, out = _model()
    sh.user_ns.update(tf=tf, sess=tf.Session(servers[1].target))
    with capture_output():
        res = sh.run_cell("view = %dflab cluster --session sess")
    assert res.success, res.error_in_exec
    assert isinstance(sh.user_ns["view"], ClusterView)
    assert [t["task"] for t in sh.user_ns["view"].tasks] == [PS, W0, W1]
    sh.user_ns["sess"].close()
    sh.user_ns.update(local=tf.Session())
    with capture_output():
        res = sh.run_cell("%dflab cluster --session local")
    assert isinstance(res.error_in_exec, UsageError)
    assert "no session on a cluster" in str(res.error_in_exec)
    sh.user_ns["local"].close()


def test_the_stepper_and_timeline_work_on_a_step_spanning_tasks(servers):
    from dflab.notebook import Stepper, Timeline

    w, out = _model()
    with tf.Session(servers[1].target) as sess:
        sess.run(w.initializer)
        stepper = Stepper(sess, out)
        first = stepper.step()
        assert first is not None and not stepper.finished
        stepper.resume()
        assert stepper.finished and stepper.result == 32.0 * 32 * 32
        # One lane per device, named by task: stepping drove every task's partition.
        assert sorted(stepper.lanes) == ["ps/0/CPU:0", "worker/0/CPU:0", "worker/1/CPU:0"]
        assert any(item["label"] == "MatMul" for item in stepper.lanes["worker/1/CPU:0"])
        md = tf.RunMetadata()
        sess.run(out, options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE),
                 run_metadata=md)
        view = Timeline(md)
        # Timeline lanes per device, labelled and ordered by task.
        labels = [lane["label"].split(" \u00b7 ")[0] for lane in view.data["lanes"]]
        assert {"ps/0/CPU:0", "worker/0/CPU:0", "worker/1/CPU:0"} <= set(labels)


def test_unwatch_stops_counting_steps_but_keeps_the_view(servers):
    w, out = _model()
    with tf.Session(servers[1].target) as sess:
        sess.run(w.initializer)
        view = ClusterView(sess)
        sess.run(out)
        view.unwatch()
        sess.run(out)
        view.refresh()
        assert view.activity[PS].steps == 1 and "1 steps" in view._html.value
        assert not view._listeners and view._html.comm is not None  # still displayed
        view.close()
