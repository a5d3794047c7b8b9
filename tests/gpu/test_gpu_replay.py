"""Whole-step capture and replay (``dflab.runtime.gpu_replay``) on the strict stand-in, whose
streams record the calls issued while capturing and whose graphs re-run them into the same
arrays: what is static, when a step is re-captured, which steps cannot be captured."""

import numpy as np
import pytest
import strict_cupy

from dflab.runtime.gpu_replay import StepReplay, ineligible_reason


@pytest.fixture
def cupy():
    return strict_cupy.make_module()


def _step(cupy):
    calls = []

    def step(x, w):
        calls.append(1)
        return cupy.tanh(cupy.matmul(x, w) + 1.0)

    return step, calls


def test_a_step_is_captured_once_and_replayed_with_new_input_values(cupy):
    stream = cupy.cuda.Stream()
    step, calls = _step(cupy)
    replay = StepReplay(cupy, stream, step)
    rng = np.random.default_rng(0)
    w = rng.normal(size=(4, 3)).astype(np.float32)
    outs = []
    for _ in range(3):
        x = rng.normal(size=(2, 4)).astype(np.float32)
        (y,) = replay(cupy.asarray(x), cupy.asarray(w))
        np.testing.assert_allclose(cupy.asnumpy(y), np.tanh(x @ w + 1), rtol=1e-6)
        outs.append(y)
    assert replay.captures == 1 and replay.replays == 2
    assert len(calls) == 2  # a warm-up run and the captured one; replays run no Python step
    assert outs[0] is outs[1] is outs[2]  # static output buffers


def test_a_new_signature_is_captured_again_and_old_ones_are_kept(cupy):
    stream = cupy.cuda.Stream()
    step, _ = _step(cupy)
    replay = StepReplay(cupy, stream, step, max_captures=2)
    w = cupy.asarray(np.ones((4, 3), np.float32))
    for rows in (2, 5, 2, 5):
        (y,) = replay(cupy.asarray(np.ones((rows, 4), np.float32)), w)
        assert y.shape == (rows, 3)
    assert replay.captures == 2 and replay.replays == 2
    replay(cupy.asarray(np.ones((2, 4), np.float64)), w)  # a new dtype: a new signature
    assert replay.captures == 3
    replay(cupy.asarray(np.ones((5, 4), np.float32)), w)  # still cached (2 most recent)
    assert replay.captures == 3
    replay(cupy.asarray(np.ones((2, 4), np.float32)), w)  # evicted: captured again
    assert replay.captures == 4


@pytest.mark.parametrize("ops, blocking, reason", [
    (["MatMul", "Relu", "ApplyGradientDescent"], False, None),
    (["MatMul", "Switch", "Merge"], False, "control flow"),
    (["Where"], False, "shape depends"),
    (["RandomStandardNormal", "MatMul"], False, "host work"),
    (["Assign"], False, "new array"),
    (["_Recv", "MatMul"], False, "another device"),
    (["MatMul"], True, "blocking"),
])
def test_which_steps_can_be_captured(ops, blocking, reason):
    got = ineligible_reason(ops, has_blocking=blocking)
    if reason is None:
        assert got is None
    else:
        assert reason in got
