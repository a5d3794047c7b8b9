"""MonitoredSession / MonitoredTrainingSession: hooks, automatic checkpoints, resuming from the
latest checkpoint, queue runners, and recovery from AbortedError/UnavailableError."""

import logging
import os
import threading
import time

import pytest

import dflab as tf
from dflab.framework import registry
from dflab.kernels.registry import register_kernel
from dflab.train.saver import checkpoint_values


@pytest.fixture(autouse=True)
def _fresh_graph():
    tf.reset_default_graph()
    yield
    tf.reset_default_graph()


def _model():
    gs = tf.train.get_or_create_global_step()
    w = tf.Variable(0.0, name="w")
    train = tf.group(tf.assign_add(w, 0.5), tf.assign_add(gs, 1))
    return gs, w, train


def _train(ckpt_dir, last_step, **kwargs):
    gs, w, train = _model()
    hooks = [tf.train.StopAtStepHook(last_step=last_step)]
    with tf.train.MonitoredTrainingSession(checkpoint_dir=ckpt_dir, hooks=hooks,
                                           **kwargs) as sess:
        start = sess.run(gs)
        while not sess.should_stop():
            sess.run(train)
        end = sess.run([gs, w])
    return start, end


def test_checkpoints_every_n_steps_and_resume_exactly(tmp_path):
    d = str(tmp_path)
    start, end = _train(d, 7, save_checkpoint_steps=3)
    assert start == 0 and end == [7, 3.5]
    state = tf.train.get_checkpoint_state(d)
    steps = [int(p.rsplit("-", 1)[1]) for p in state.all_model_checkpoint_paths]
    assert steps == [0, 3, 6, 7]  # at creation, every 3 steps, and at the end
    tf.reset_default_graph()
    start, end = _train(d, 12, save_checkpoint_steps=3)
    assert start == 7 and end == [12, 6.0]  # resumed from step 7, not from scratch
    assert checkpoint_values(tf.train.latest_checkpoint(d))["global_step"] == 12


def test_monitored_session_without_checkpoint_dir_initializes():
    gs, w, train = _model()
    with tf.train.MonitoredSession(hooks=[tf.train.StopAtStepHook(num_steps=4)]) as sess:
        n = 0
        while not sess.should_stop():
            sess.run(train)
            n += 1
    assert n == 4


def test_checkpoint_saver_hook_by_seconds_and_listener(tmp_path):
    gs, w, train = _model()
    events = []

    class Listener(tf.train.CheckpointSaverListener):
        def after_save(self, session, step):
            events.append(step)

    saver = tf.train.Saver()
    hook = tf.train.CheckpointSaverHook(str(tmp_path), save_secs=3600, saver=saver,
                                        listeners=[Listener()])
    with tf.train.SingularMonitoredSession(hooks=[hook]) as sess:
        for _ in range(5):
            sess.run(train)
    assert events == [0, 5]  # once at the start, once at the end (the hour never passed)


class _FetchHook(tf.train.SessionRunHook):
    def __init__(self, tensor, feed=None):
        self.tensor, self.feed, self.seen = tensor, feed, []

    def before_run(self, run_context):
        return tf.train.SessionRunArgs(self.tensor, feed_dict=self.feed)

    def after_run(self, run_context, run_values):
        self.seen.append(run_values.results)


def test_hooks_fetch_and_feed_alongside_the_caller():
    x = tf.placeholder(tf.float32, [])
    y = tf.placeholder(tf.float32, [])
    total = x + y
    doubled = x * 2.0
    hook = _FetchHook(total, feed={y: 10.0})
    with tf.train.MonitoredSession(hooks=[hook]) as sess:
        with pytest.raises(RuntimeError, match="finalized"):
            x * 3.0  # the scaffold froze the graph, as in TF
        assert sess.run(doubled, {x: 1.0}) == 2.0
        assert sess.run(total, {x: 2.0}) == 12.0
        with pytest.raises(RuntimeError, match="Same tensor is fed"):
            sess.run(total, {x: 1.0, y: 1.0})
    assert hook.seen == [11.0, 12.0]


def test_nan_tensor_hook():
    v = tf.Variable(1.0)
    loss = v * float("nan")
    with tf.train.MonitoredSession(hooks=[tf.train.NanTensorHook(loss)]) as sess:
        with pytest.raises(tf.train.NanLossDuringTrainingError):
            sess.run(loss)
    tf.reset_default_graph()
    v = tf.Variable(1.0)
    loss = v * float("nan")
    with tf.train.MonitoredSession(hooks=[tf.train.NanTensorHook(loss, False)]) as sess:
        sess.run(loss)
        assert sess.should_stop()


def test_logging_and_step_counter_hooks(caplog):
    gs = tf.train.get_or_create_global_step()
    w = tf.Variable(0.0, name="w", use_resource=False)
    train = tf.group(tf.assign_add(w, 0.5), tf.assign_add(gs, 1))
    log_hook = tf.train.LoggingTensorHook({"w": w}, every_n_iter=2)
    counter = tf.train.StepCounterHook(every_n_steps=2)
    with caplog.at_level(logging.INFO, logger="dflab.train"):
        with tf.train.MonitoredSession(hooks=[log_hook, counter]) as sess:
            for _ in range(5):
                sess.run(train)
    # A fetched variable reads its value at the end of the step (after this step's update).
    assert [v["w"] for v in log_hook.logged] == [0.5, 1.5, 2.5]
    assert any("w = " in r.message for r in caplog.records)
    assert counter.steps_per_sec is not None and counter.steps_per_sec > 0


def test_logging_hook_sees_a_resource_update_through_a_read_ordered_after_it():
    # A resource variable's reads are ops: one ordered after the update by a control
    # dependency sees this step's value (an unordered read may run before or after it).
    gs, w, train = _model()
    with tf.control_dependencies([train]):
        w_after = tf.identity(w)
    log_hook = tf.train.LoggingTensorHook({"w": w_after}, every_n_iter=2)
    with tf.train.MonitoredSession(hooks=[log_hook]) as sess:
        for _ in range(5):
            sess.run(train)
    assert [v["w"] for v in log_hook.logged] == [0.5, 1.5, 2.5]


def test_queue_runners_run_and_out_of_range_ends_cleanly():
    q = tf.FIFOQueue(5, [tf.int32], shapes=[[]])
    src = tf.FIFOQueue(10, [tf.int32], shapes=[[]])
    fill = src.enqueue_many([[1, 2, 3]])
    close_src = src.close()
    tf.train.add_queue_runner(tf.train.QueueRunner(q, [q.enqueue(src.dequeue())]))
    out = q.dequeue()
    init_fn_ran = []

    def init_fn(scaffold, sess):
        sess.run(fill)
        sess.run(close_src)
        init_fn_ran.append(True)

    got = []
    scaffold = tf.train.Scaffold(init_fn=init_fn)
    with tf.train.MonitoredSession(tf.train.ChiefSessionCreator(scaffold=scaffold)) as sess:
        while not sess.should_stop():
            got.append(int(sess.run(out)))  # OutOfRangeError ends the `with` quietly
    assert init_fn_ran and got == [1, 2, 3]


_FAILURES = {"left": 0}


def _flaky_op(x, error_class):
    """An op that fails with ``error_class`` while ``_FAILURES['left'] > 0``."""
    name = f"TestFlaky{error_class.__name__}"
    if name not in registry.registered_ops():
        registry.register_op(name, lambda op: [(op.inputs[0].dtype, op.inputs[0].shape)],
                             stateful=True)

        def flaky(value):
            if _FAILURES["left"] > 0:
                _FAILURES["left"] -= 1
                raise error_class(None, None, "simulated failure of a worker")
            return value

        register_kernel(name, fn=flaky)
    return tf.get_default_graph()._create_op(name, [x], {}, None).outputs[0]


@pytest.mark.parametrize("error_class", [tf.errors.AbortedError, tf.errors.UnavailableError])
def test_recovers_by_recreating_the_session_from_the_checkpoint(tmp_path, error_class):
    gs = tf.train.get_or_create_global_step()
    w = tf.Variable(0.0, name="w")
    inc = tf.group(tf.assign_add(w, 1.0), tf.assign_add(gs, 1))
    with tf.control_dependencies([inc]):
        train = _flaky_op(tf.identity(gs), error_class)
    hooks = [tf.train.StopAtStepHook(last_step=10)]
    with tf.train.MonitoredTrainingSession(checkpoint_dir=str(tmp_path), hooks=hooks,
                                           save_checkpoint_steps=4) as sess:
        armed = True
        while not sess.should_stop():
            if armed and sess.run(gs) == 6:
                armed = False
                _FAILURES["left"] = 1  # the next run fails once, after the checkpoint at 4
            sess.run(train)
        assert sess.recoveries == 1
        final = sess.run([gs, w])
    # The failed step's updates were lost with the session; training resumed from step 4
    # and still reached 10, with w and the step in agreement.
    assert final == [10, 10.0]


def test_non_recoverable_errors_propagate():
    x = tf.constant(1.0)
    bad = tf.reshape(tf.constant([1.0, 2.0]), tf.placeholder(tf.int32, [1]))
    with tf.train.MonitoredSession() as sess:
        with pytest.raises(tf.errors.InvalidArgumentError):
            sess.run(bad, {bad.op.inputs[1]: [3]})
        assert sess.run(x) == 1.0


def test_default_saver_is_consistent_under_threads(tmp_path):
    gs = tf.train.get_or_create_global_step()
    a = tf.Variable(0, dtype=tf.int64, name="a")
    b = tf.Variable(0, dtype=tf.int64, name="b")
    inc_a = tf.assign_add(a, 1, use_locking=True)
    with tf.control_dependencies([inc_a]):
        m = tf.ones([300, 300])
        slow = tf.reduce_sum(tf.matmul(m, m))
    with tf.control_dependencies([slow]):
        inc_b = tf.assign_add(b, 1, use_locking=True)
    with tf.control_dependencies([inc_b]):
        train = tf.assign_add(gs, 1, use_locking=True)
    stop = threading.Event()
    with tf.train.MonitoredTrainingSession(checkpoint_dir=str(tmp_path), save_checkpoint_steps=5,
                                           log_step_count_steps=0) as sess:
        raw = sess._tf_sess()

        def other():
            while not stop.is_set():
                raw.run(train)

        t = threading.Thread(target=other)
        t.start()
        for _ in range(40):
            sess.run(train)
        stop.set()
        t.join()
    state = tf.train.get_checkpoint_state(str(tmp_path))
    assert len(state.all_model_checkpoint_paths) >= 2
    for p in state.all_model_checkpoint_paths:
        vals = checkpoint_values(p)
        assert vals["a"] == vals["b"] == vals["global_step"]
        assert p.endswith(f"-{int(vals['global_step'])}")
        assert os.path.exists(p + ".meta")


def test_second_monitored_session_on_a_finalized_graph_reuses_the_scaffold(tmp_path):
    gs = tf.train.get_or_create_global_step()
    inc = tf.assign_add(gs, 1)
    with tf.train.MonitoredTrainingSession(checkpoint_dir=str(tmp_path)) as sess:
        sess.run(inc)
        sess.run(inc)
    assert tf.get_default_graph().finalized
    with tf.train.MonitoredTrainingSession(checkpoint_dir=str(tmp_path)) as sess:
        assert sess.run(gs) == 2  # restored by the first scaffold's saver
        assert sess.run(inc) == 3


def test_global_step_waiter_holds_the_first_run_until_the_step_is_reached():
    with tf.Graph().as_default():
        gs = tf.train.get_or_create_global_step()
        inc = tf.assign_add(gs, 1)
        hook = tf.train.GlobalStepWaiterHook(2)
        with tf.train.MonitoredSession(hooks=[hook]) as sess:
            raw = sess._tf_sess()

            def chief():  # another worker advancing the step
                for _ in range(2):
                    time.sleep(0.2)
                    raw.run(inc)

            t = threading.Thread(target=chief)
            start = time.time()
            t.start()
            assert sess.run(gs) == 2  # the run waited for the second increment
            t.join()
            assert time.time() - start >= 0.4
            assert sess.run(gs) == 2  # no more waiting once started


def test_a_hook_trace_request_is_merged_into_the_callers_options():
    seen = []

    class Tracing(tf.train.SessionRunHook):
        def before_run(self, run_context):
            return tf.train.SessionRunArgs(None, options=tf.RunOptions(
                trace_level=tf.RunOptions.FULL_TRACE))

        def after_run(self, run_context, run_values):
            seen.append((run_values.options.trace_level, run_values.options.timeout_in_ms,
                         len(run_values.run_metadata.step_stats.dev_stats)))

    with tf.Graph().as_default():
        x = tf.constant(1.0) + 1.0
        with tf.train.MonitoredSession(hooks=[Tracing()]) as sess:
            sess.run(x, options=tf.RunOptions(timeout_in_ms=60000))
    assert seen == [(tf.RunOptions.FULL_TRACE, 60000, 1)]
