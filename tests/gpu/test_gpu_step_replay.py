"""Whole-step replay chosen by ``Session.run`` (``ConfigProto(dflab={"gpu_step_replay": True})``)
on the strict stand-in, whose capture runs nothing (as CUDA's): a captured training step gives
the numbers of the uncaptured one, a new feed signature is captured again, and a step that
cannot be captured runs as usual with the reason recorded."""

import numpy as np
import pytest

import dflab as tf
from dflab.runtime.config import ConfigProto, GraphOptions, RewriterConfig

RNG = np.random.default_rng(3)
X = RNG.normal(size=(8, 3)).astype(np.float32)
Y = np.eye(4, dtype=np.float32)[RNG.integers(0, 4, 8)]


def _config(replay: bool) -> ConfigProto:
    # Fusion off: the stand-in cannot run a fused kernel's CUDA C.
    return ConfigProto(graph_options=GraphOptions(rewrite_options=RewriterConfig(
        remapping=RewriterConfig.OFF)), dflab={"gpu_step_replay": replay})


def _plan_of(sess, op):
    return next(p for p in sess._master._plans.values() if op in p.placement)


def _train(replay: bool, optimizer: str, batches, use_resource=None):
    """Train a softmax classifier on /gpu:0, one step per batch size in ``batches``; returns
    the losses, the final weights and the train step's partition."""
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, 3])
        y = tf.placeholder(tf.float32, [None, 4])
        with tf.device("/gpu:0"):
            w = tf.Variable(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4),
                            use_resource=use_resource)
            b = tf.Variable(np.zeros(4, np.float32), use_resource=use_resource)
            loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits_v2(
                labels=y, logits=tf.matmul(x, w) + b))
            opt = (tf.train.AdamOptimizer(0.1) if optimizer == "adam"
                   else tf.train.GradientDescentOptimizer(0.5))
            train = opt.minimize(loss)
        init = tf.global_variables_initializer()
    with tf.Session(graph=g, config=_config(replay)) as s:
        s.run(init)
        losses = [s.run([train, loss], {x: X[:n], y: Y[:n]})[1] for n in batches]
        part = _plan_of(s, train).parts[0]
        return np.array(losses), s.run(w), s.run(b), part


@pytest.mark.parametrize("use_resource", [True, False])
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_a_captured_training_step_gives_the_uncaptured_numbers(strict_gpu, optimizer,
                                                               use_resource):
    steps = [8] * 6
    losses, w, b, part = _train(True, optimizer, steps, use_resource)
    want_losses, want_w, want_b, plain = _train(False, optimizer, steps, use_resource)
    np.testing.assert_array_equal(losses, want_losses)
    np.testing.assert_array_equal(w, want_w)
    np.testing.assert_array_equal(b, want_b)
    assert losses[-1] < losses[0]
    assert plain.replay is None and plain.replay_reason is None  # not asked for
    # Step 1 warmed up, step 2 was captured and launched, steps 3-6 were launches.
    assert part.replay_reason is None
    assert (part.replay.captures, part.replay.replays) == (1, 5)
    (capture,) = part.replay.replay._captures.values()
    assert capture.allocations  # the blocks the captured kernels write stay alive
    pool = part.replay.device.pool  # the static feed buffers come from the device's pool
    assert [buf.data.pool for buf in capture.static_inputs] == [pool, pool]


def test_a_feed_copied_into_a_static_buffer_waits_for_earlier_compute(strict_gpu):
    """A replay's feeds overwrite the capture's static buffers, which the previous replay may
    still read on the compute stream: each such copy is ordered after the compute stream's
    work (an event of the compute stream, waited on by the host-to-device stream)."""
    *_, part = _train(True, "sgd", [8] * 4)
    device = part.replay.device
    compute = device.streams["compute"].cuda
    waits = device.streams["host_to_device"].cuda.waits
    # Steps 2-4 load two feeds each into static buffers: six waits on the compute stream.
    assert sum(e.recorded_on is compute for e in waits) == 6


@pytest.mark.parametrize("use_resource", [True, False])
def test_a_new_feed_signature_is_captured_again(strict_gpu, use_resource):
    steps = [8, 8, 8, 5, 5, 5, 8]
    losses, w, _, part = _train(True, "adam", steps, use_resource)
    want_losses, want_w, _, _ = _train(False, "adam", steps, use_resource)
    np.testing.assert_array_equal(losses, want_losses)
    np.testing.assert_array_equal(w, want_w)
    # Batch 8: warm-up, capture, launch; batch 5: the same; batch 8 again: its graph.
    assert part.replay.captures == 2 and part.replay.replays == 5


def test_a_step_that_cannot_be_captured_runs_as_usual_with_the_reason(strict_gpu):
    x_np = np.arange(6, dtype=np.float32)
    x = tf.placeholder(tf.float32, [6])
    with tf.device("/gpu:0"):
        # The reshape's target is computed on the device: reading it on the host is a copy
        # a capture cannot make.
        rows = tf.cast(tf.reduce_sum(tf.ones([2])), tf.int32)
        y = tf.reshape(x * 2.0, tf.stack([rows, -1]))
        noisy = x + tf.random_normal([6], seed=1)
    with tf.Session(config=_config(True)) as s:
        got = [s.run(y, {x: x_np}) for _ in range(3)]
        s.run(noisy, {x: x_np})
        part = _plan_of(s, y.op).parts[0]
        random_part = _plan_of(s, noisy.op).parts[0]
    for g in got:
        np.testing.assert_array_equal(g, (x_np * 2).reshape(2, 3))
    assert "capturing the step failed" in part.replay_reason
    assert part.replay.captures == 0
    assert random_part.replay is None
    assert "does host work on every step" in random_part.replay_reason


def test_a_step_spanning_devices_is_not_replayed(strict_gpu):
    with tf.device("/cpu:0"):
        a = tf.constant([1.0, 2.0]) * 3.0
    with tf.device("/gpu:0"):
        b = a + 1.0
    with tf.Session(config=_config(True)) as s:
        np.testing.assert_array_equal(s.run(b), [4.0, 7.0])
        plan = _plan_of(s, b.op)
    gpu_part = next(p for p in plan.parts if p.device.endswith("GPU:0"))
    assert "another device" in gpu_part.replay_reason
