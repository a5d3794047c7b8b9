"""Fused elementwise groups on the GPU (``dflab.kernels.cuda.fused``), on the strict stand-in:
one program per group, specialised to its inputs' layouts (the output's shape, one element, or
a trailing row such as a bias), with float4 vectors where aligned, and CuPy's kernels for other
broadcasting; the numbers are the CPU's."""

import numpy as np
import pytest

import dflab as tf
from dflab.kernels.cuda.fused import FULL, ROW, SCALAR, layouts

RNG = np.random.default_rng(5)


def _run(build, device, feeds=()):
    g = tf.Graph()
    with g.as_default(), tf.device(device):
        fetch, feed_map = build()
    with tf.Session(graph=g, config=tf.ConfigProto(dflab={"gpu_step_replay": False})) as s:
        return s.run(fetch, feed_map)


CASES = {
    # name: (shapes of x and b, expected layouts, float4?)
    "same shapes": (((64, 16), (64, 16)), (FULL, FULL), True),
    "a bias row": (((6, 10), (10,)), (FULL, ROW), False),
    "a scalar": (((1000,), ()), (FULL, SCALAR), True),
    "odd size": (((7, 3), (7, 3)), (FULL, FULL), False),
    "a column (CuPy's kernel)": (((6, 10), (6, 1)), None, False),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_fused_group_is_one_launch_of_its_own_program(strict_gpu, counts, case):
    (xs, bs), kinds, vec = CASES[case]
    x_np = RNG.normal(size=xs).astype(np.float32)
    b_np = RNG.normal(size=bs).astype(np.float32)

    def build():
        x = tf.placeholder(tf.float32, xs)
        b = tf.placeholder(tf.float32, bs)
        y = tf.nn.relu(tf.tanh(x * 1.5 + b) - tf.sigmoid(b) * x)
        return y, {x: x_np, b: b_np}

    want = _run(build, "/cpu:0")
    counts.reset()
    got = _run(build, "/gpu:0")
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    fused = [k for k in strict_gpu.compiled_kernels if getattr(k, "name", "").startswith(
        "dflab_fused_")]
    if kinds is None:
        assert not fused and counts.by_name["dflab_fused"] == 1  # CuPy's ElementwiseKernel
        return
    (k,) = fused
    assert k.program.name in counts.by_name and counts.by_name[k.program.name] == 1
    assert ("float4" in k.code) == vec
    assert layouts([np.empty(xs, np.float32), np.empty(bs, np.float32)], xs) == kinds


def test_float64_groups_compute_in_double(strict_gpu):
    x_np = RNG.normal(size=(4, 5))

    def build():
        x = tf.placeholder(tf.float64, [4, 5])
        return tf.exp(x) * 2.0 - x, {x: x_np}

    np.testing.assert_allclose(_run(build, "/gpu:0"), np.exp(x_np) * 2 - x_np, rtol=1e-14)
    (k,) = [k for k in strict_gpu.compiled_kernels if k.name.startswith("dflab_fused_")]
    assert "double" in k.code and "expf(" not in k.code
