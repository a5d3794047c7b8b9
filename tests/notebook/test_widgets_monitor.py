"""TrainingMonitor: logging, thinning, step rate, throttled updates, its MonitoredSession hook."""

import numpy as np
import pytest
from test_widgets_throttle import FakeTime

import dflab as tf
from dflab.notebook import TrainingMonitor
from dflab.notebook.monitor import thin


def make_monitor(**kwargs):
    fake = FakeTime()
    monitor = TrainingMonitor(clock=fake.clock, schedule=fake.schedule, **kwargs)
    return fake, monitor


def test_log_keeps_full_history_and_sends_throttled_updates():
    fake, monitor = make_monitor(total_steps=1000)
    sent = []
    monitor.observe(lambda change: sent.append(change["new"]), names="curves")
    for step in range(300):  # 300 steps within 0.3 s of fake time
        monitor.log(step, loss=1.0 / (step + 1), accuracy=step / 300)
        fake.advance(0.001)
    fake.advance(1.0)
    assert len(monitor.history["loss"]) == 300 and len(monitor.history["accuracy"]) == 300
    assert monitor.history["loss"][10] == (10, pytest.approx(1 / 11))
    assert 9 <= len(sent) <= 11  # ~30 updates per second over 0.3 s, not 300
    assert monitor.step == 299
    assert monitor.curves["loss"][-1] == [299, pytest.approx(1 / 300)]  # the tail is never lost
    assert monitor.rate == pytest.approx(1000, rel=0.01)  # one step per fake millisecond
    assert "step 299 / 1000" in monitor.status and "loss" in monitor.status


def test_curves_are_thinned_but_keep_first_and_last_points():
    fake, monitor = make_monitor(max_points=50)
    for step in range(10_000):
        monitor.log(step, loss=float(step))
    monitor.flush()
    curve = monitor.curves["loss"]
    assert len(curve) <= 50
    assert curve[0] == [0, 0.0] and curve[-1] == [9999, 9999.0]
    assert [p[0] for p in curve] == sorted(p[0] for p in curve)
    assert thin(list(range(5)), 10) == [0, 1, 2, 3, 4]


def test_non_finite_losses_are_sent_as_gaps_and_non_scalars_rejected():
    _, monitor = make_monitor()
    monitor.log(0, loss=1.0)
    monitor.log(1, loss=float("nan"))
    monitor.flush()
    assert monitor.curves["loss"][1] == [1, None]
    with pytest.raises(ValueError, match="scalars"):
        monitor.log(2, loss=np.ones(3))


def test_text_fallback_of_the_mime_bundle():
    _, monitor = make_monitor(total_steps=10)
    monitor.log(3, loss=0.5)
    monitor.flush()
    bundle, _ = monitor._repr_mimebundle_()
    assert bundle["text/plain"].startswith("TrainingMonitor: step 3 / 10")
    assert "application/vnd.jupyter.widget-view+json" in bundle


def _regression_graph():
    rng = np.random.default_rng(0)
    x_np = rng.normal(size=(64, 3)).astype(np.float32)
    y_np = x_np @ np.array([[1.0], [-2.0], [0.5]], np.float32)
    x = tf.constant(x_np)
    y = tf.constant(y_np)
    w = tf.Variable(tf.zeros([3, 1]), name="w")
    loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y), name="loss")
    step = tf.train.get_or_create_global_step()
    train = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)
    return loss, train


def test_hook_logs_from_a_monitored_session_at_the_global_step():
    with tf.Graph().as_default():
        loss, train = _regression_graph()
        _, monitor = make_monitor(total_steps=20)
        hook = monitor.hook(loss=loss, every_n_steps=2)
        with tf.train.MonitoredSession(hooks=[hook, tf.train.StopAtStepHook(last_step=20)]) as s:
            losses = []
            while not s.should_stop():
                losses.append(s.run([train, loss])[1])
    steps = [p[0] for p in monitor.history["loss"]]
    # The global step as fetched with each logged run (TF leaves open whether that read sees
    # the run's own increment): every second run, one point each.
    assert steps in (list(range(0, 20, 2)), list(range(1, 21, 2)))
    logged = [v for _, v in monitor.history["loss"]]
    np.testing.assert_allclose(logged, losses[::2], rtol=1e-6)
    assert logged[-1] < logged[0]  # it trains
    assert monitor.curves["loss"][-1][0] == steps[-1]  # end() flushed the last point


def test_hook_without_global_step_counts_runs():
    with tf.Graph().as_default():
        v = tf.Variable(1.0, name="v")
        halve = tf.assign(v, v * 0.5)
        _, monitor = make_monitor()
        hook = monitor.hook(value=v)
        with tf.train.MonitoredSession(hooks=[hook]) as s:
            for _ in range(3):
                s.run(halve)
    assert [p[0] for p in monitor.history["value"]] == [1, 2, 3]
    # The hook's fetch of v runs in the same step as the assign: either value is consistent,
    # but it must be one the variable actually had.
    assert all(v in (1.0, 0.5, 0.25, 0.125) for _, v in monitor.history["value"])
    with pytest.raises(ValueError):
        monitor.hook(every_n_steps=0)
