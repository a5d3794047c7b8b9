"""Whole-step capture and replay (``dflab.runtime.gpu_replay``) on the strict stand-in, whose
streams record the calls issued while capturing and whose graphs re-run them into the same
arrays: what is static, when a step is re-captured, which steps cannot be captured."""

import numpy as np
import pytest
import strict_cupy

from dflab.runtime.gpu_replay import CaptureFailedError, StepReplay, ineligible_reason


@pytest.fixture
def cupy():
    return strict_cupy.make_module()


def _step(cupy):
    calls = []

    def step(x, w):
        calls.append(1)
        return cupy.tanh(cupy.matmul(x, w) + 1.0)

    return step, calls


def test_a_step_runs_once_then_is_captured_then_replayed_with_new_input_values(cupy):
    stream = cupy.cuda.Stream()
    step, calls = _step(cupy)
    replay = StepReplay(cupy, stream, step)
    rng = np.random.default_rng(0)
    w = rng.normal(size=(4, 3)).astype(np.float32)
    outs = []
    for _ in range(4):
        x = rng.normal(size=(2, 4)).astype(np.float32)
        (y,) = replay(cupy.asarray(x), cupy.asarray(w))
        np.testing.assert_allclose(cupy.asnumpy(y), np.tanh(x @ w + 1), rtol=1e-6)
        outs.append(y)
    # A warm-up run, then a capture (which runs nothing) and its launch, then launches.
    assert (replay.uncaptured, replay.captures, replay.replays) == (1, 1, 3)
    assert len(calls) == 2  # the Python step ran for the warm-up and the capture only
    assert outs[1] is outs[2] is outs[3]  # static output buffers


def test_capturing_runs_nothing_until_the_graph_is_launched(cupy):
    stream = cupy.cuda.Stream()
    x = cupy.asarray(np.ones(3, np.float32))
    with stream:
        stream.begin_capture()
        y = x * 2.0
        x += 1.0
        graph = stream.end_capture()
    # As in CUDA: the buffers a capture allocated hold nothing yet, the others are unchanged.
    assert np.isnan(cupy.asnumpy(y)).all()
    np.testing.assert_array_equal(cupy.asnumpy(x), [1.0, 1.0, 1.0])
    graph.launch(stream)
    np.testing.assert_array_equal(cupy.asnumpy(y), [2.0, 2.0, 2.0])
    np.testing.assert_array_equal(cupy.asnumpy(x), [2.0, 2.0, 2.0])


def test_a_step_that_reads_a_device_value_on_the_host_cannot_be_captured(cupy):
    stream = cupy.cuda.Stream()

    def step(x):
        return x * float(x.sum())  # a host read: refused while capturing, as by CUDA

    replay = StepReplay(cupy, stream, step)
    x = cupy.asarray(np.ones(2, np.float32))
    replay(x)
    with pytest.raises(CaptureFailedError, match="capturing"):
        replay(x)
    np.testing.assert_array_equal(cupy.asnumpy(x), [1.0, 1.0])  # nothing ran


def test_a_new_signature_runs_once_then_is_captured_and_old_ones_are_kept(cupy):
    stream = cupy.cuda.Stream()
    step, _ = _step(cupy)
    replay = StepReplay(cupy, stream, step, max_captures=2)
    w = cupy.asarray(np.ones((4, 3), np.float32))

    def run(rows, dtype=np.float32):
        (y,) = replay(cupy.asarray(np.ones((rows, 4), dtype)), w)
        assert y.shape == (rows, 3)
        np.testing.assert_allclose(cupy.asnumpy(y), np.tanh(np.full((rows, 3), 5.0)))

    for rows in (2, 5, 2, 5):
        run(rows)
    assert (replay.uncaptured, replay.captures, replay.replays) == (2, 2, 2)
    run(2, np.float64)  # a new dtype: a new signature, first run uncaptured
    assert (replay.uncaptured, replay.captures) == (3, 2)
    run(2, np.float64)  # captured; the least recently used capture (2 rows, float32) goes
    assert replay.captures == 3
    run(5)  # still cached
    assert replay.captures == 3
    run(2)  # evicted: captured again (its warm-up is remembered)
    assert (replay.uncaptured, replay.captures) == (3, 4)


@pytest.mark.parametrize("ops, blocking, reason", [
    (["MatMul", "Relu", "ApplyGradientDescent"], False, None),
    (["MatMul", "Switch", "Merge"], False, "control flow"),
    (["Where"], False, "shape depends"),
    (["RandomStandardNormal", "MatMul"], False, "host work"),
    (["_Recv", "MatMul"], True, "another device"),
    (["TensorArrayV3"], False, "per-step"),
    (["MatMul"], True, "blocking"),
])
def test_which_steps_can_be_captured(ops, blocking, reason):
    got = ineligible_reason(ops, has_blocking=blocking)
    if reason is None:
        assert got is None
    else:
        assert reason in got
