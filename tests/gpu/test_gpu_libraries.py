"""The GPU's own libraries on their strict stand-ins (``strict_libraries``): matrix products on
the device's cuBLAS handle, convolutions through cuDNN graphs, TF32 as TF does it, and the CuPy /
im2col paths where a library is missing. Numbers are checked against NumPy and the CPU."""

import numpy as np
import pytest
import strict_cupy
import strict_libraries

import dflab as tf
from dflab.runtime.config import ConfigProto, GraphOptions, RewriterConfig

RNG = np.random.default_rng(7)


def _config(tf32=False, **kw):
    # Replay off unless asked for: the tests count the kernels an uncaptured step launches.
    kw.setdefault("gpu_step_replay", False)
    return ConfigProto(graph_options=GraphOptions(rewrite_options=RewriterConfig(
        remapping=RewriterConfig.OFF)), dflab={"gpu_allow_tf32": tf32, **kw})


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_matmul_runs_one_gemm_on_the_devices_own_handle(strict_gpu, counts, dtype, ta, tb):
    a_np = RNG.normal(size=(5, 3) if ta else (3, 5)).astype(dtype)
    b_np = RNG.normal(size=(4, 5) if tb else (5, 4)).astype(dtype)
    a = tf.placeholder(dtype, a_np.shape)
    b = tf.placeholder(dtype, b_np.shape)
    with tf.device("/gpu:0"):
        c = tf.matmul(a, b, transpose_a=ta, transpose_b=tb)
    with tf.Session(config=_config()) as s:
        s.run(c, {a: a_np, b: b_np})  # builds the plan
        counts.reset()
        got = s.run(c, {a: a_np, b: b_np})
        gpu = s.devices["GPU:0"]
    want = (a_np.T if ta else a_np) @ (b_np.T if tb else b_np)
    np.testing.assert_allclose(got, want, rtol=1e-6 if dtype == np.float32 else 1e-12)
    assert counts.by_name["cublas_gemm"] == 1 and "matmul" not in counts.by_name
    cublas = strict_gpu.libraries[0]
    (handle,) = cublas.handles.values()
    assert handle.stream == gpu.streams["compute"].cuda.ptr  # set once, to the compute stream
    assert gpu.libraries.blas.workspace.data.pool is gpu.pool  # the workspace is the pool's


def test_no_workspace_is_taken_before_the_first_product(strict_gpu):
    with tf.Session(config=_config()) as s:
        gpu = s.devices["GPU:0"]
        assert gpu.libraries.blas.workspace is None
        assert gpu.memory.stats()["bytes_reserved"] == 0


def test_batch_matmul_runs_one_strided_batched_gemm(strict_gpu, counts):
    a_np = RNG.normal(size=(2, 3, 4, 5)).astype(np.float32)
    b_np = RNG.normal(size=(2, 3, 6, 5)).astype(np.float32)
    w_np = RNG.normal(size=(5, 2)).astype(np.float32)
    with tf.device("/gpu:0"):
        c = tf.matmul(tf.constant(a_np), tf.constant(b_np), transpose_b=True)
        d = tf.matmul(tf.constant(a_np), tf.constant(w_np))  # a batch times one matrix
    with tf.Session(config=_config()) as s:
        s.run([c, d])
        counts.reset()
        got_c, got_d = s.run([c, d])
    np.testing.assert_allclose(got_c, a_np @ np.swapaxes(b_np, -1, -2), rtol=1e-5)
    np.testing.assert_allclose(got_d, a_np @ w_np, rtol=1e-5)
    assert counts.by_name["cublas_gemm"] == 2 and "matmul" not in counts.by_name


def test_tf32_is_on_by_default_for_float32_and_can_be_turned_off(strict_gpu):
    a_np = RNG.normal(size=(16, 64)).astype(np.float32)
    b_np = RNG.normal(size=(64, 8)).astype(np.float32)
    exact = a_np.astype(np.float64) @ b_np.astype(np.float64)
    rounded = (strict_libraries.tf32(a_np).astype(np.float64)
               @ strict_libraries.tf32(b_np).astype(np.float64))

    def product(config):
        with tf.device("/gpu:0"):
            c = tf.matmul(tf.constant(a_np), tf.constant(b_np))
        with tf.Session(config=config) as s:
            return s.run(c)

    on = product(ConfigProto())  # TF's default: TF32 allowed
    off = product(_config(tf32=False))
    np.testing.assert_allclose(on, rounded.astype(np.float32), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(off, exact.astype(np.float32), rtol=1e-6, atol=1e-6)
    # TF32 keeps 10 mantissa bits: about 1e-3 relative, which the tolerances above tell apart.
    assert np.abs(on - exact).max() > 10 * np.abs(off - exact).max()
    np.testing.assert_allclose(on, exact, rtol=5e-3, atol=5e-3 * np.abs(exact).max())


CONV_CASES = [
    # (input NHWC, filter HWIO, strides, dilations, padding)
    ((2, 9, 8, 3), (3, 3, 3, 4), (1, 1), (1, 1), "SAME"),
    ((2, 9, 8, 3), (3, 2, 3, 5), (2, 2), (1, 1), "SAME"),
    ((1, 11, 10, 2), (3, 3, 2, 3), (1, 1), (2, 2), "VALID"),
    ((3, 7, 7, 4), (5, 5, 4, 2), (2, 1), (1, 1), "VALID"),
    ((2, 6, 5, 1), (5, 5, 1, 8), (1, 1), (1, 1), "SAME"),
]


def _conv_step(device, x_np, w_np, strides, dilations, padding, fmt):
    g = tf.Graph()
    with g.as_default(), tf.device(device):
        x = tf.constant(x_np if fmt == "NHWC" else x_np.transpose(0, 3, 1, 2))
        w = tf.constant(w_np)
        s4 = [1, *strides, 1] if fmt == "NHWC" else [1, 1, *strides]
        d4 = [1, *dilations, 1] if fmt == "NHWC" else [1, 1, *dilations]
        y = tf.nn.conv2d(x, w, strides=s4, padding=padding, dilations=d4, data_format=fmt)
        loss = tf.reduce_sum(y * y)
        dx, dw = tf.gradients(loss, [x, w])
    return g, [y, dx, dw]


@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
@pytest.mark.parametrize("case", range(len(CONV_CASES)))
def test_convolutions_and_their_gradients_run_as_cudnn_graphs(strict_gpu, counts, case, fmt):
    shape, fshape, strides, dilations, padding = CONV_CASES[case]
    x_np = RNG.normal(size=shape).astype(np.float32)
    w_np = RNG.normal(size=fshape).astype(np.float32)
    g, fetches = _conv_step("/cpu:0", x_np, w_np, strides, dilations, padding, fmt)
    with tf.Session(graph=g) as s:
        want = s.run(fetches)
    g, fetches = _conv_step("/gpu:0", x_np, w_np, strides, dilations, padding, fmt)
    with tf.Session(graph=g, config=_config()) as s:
        s.run(fetches)
        built = strict_libraries.pygraph.graphs_built
        counts.reset()
        got = s.run(fetches)
        dnn = s.devices["GPU:0"].libraries.dnn
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-5 * np.abs(b).max())
    # One cuDNN execution per op; plans were built once, on the first step.
    assert counts.by_name["cudnn_conv_fprop"] == 1
    assert counts.by_name["cudnn_conv_dgrad"] == 1
    assert counts.by_name["cudnn_conv_wgrad"] == 1
    assert strict_libraries.pygraph.graphs_built == built
    assert not dnn.declined
    workspaces = [p.workspace for p in dnn._plans.values()]
    assert len(workspaces) == 3
    assert all(w.data.pool is s.devices["GPU:0"].pool for w in workspaces)


def test_convolutions_fall_back_to_im2col_without_cudnn(strict_gpu_without_libraries, counts):
    shape, fshape, strides, dilations, padding = CONV_CASES[1]
    x_np = RNG.normal(size=shape).astype(np.float32)
    w_np = RNG.normal(size=fshape).astype(np.float32)
    g, fetches = _conv_step("/cpu:0", x_np, w_np, strides, dilations, padding, "NHWC")
    with tf.Session(graph=g) as s:
        want = s.run(fetches)
    g, fetches = _conv_step("/gpu:0", x_np, w_np, strides, dilations, padding, "NHWC")
    with tf.Session(graph=g, config=_config()) as s:
        counts.reset()
        got = s.run(fetches)
        libs = s.devices["GPU:0"].libraries
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5 * np.abs(b).max())
    assert libs.dnn is None and libs.blas is None
    assert libs.missing == {"cublas": "not installed", "cudnn": "not installed"}
    assert not any(name.startswith(("cudnn", "cublas")) for name in counts.by_name)
    assert counts.by_name["matmul"] >= 3  # im2col products on CuPy


def test_a_float64_convolution_and_tf32_switch_reach_cudnn(strict_gpu):
    x_np = RNG.normal(size=(1, 5, 5, 2))
    w_np = RNG.normal(size=(3, 3, 2, 2))
    with tf.device("/gpu:0"):
        y = tf.nn.conv2d(tf.constant(x_np), tf.constant(w_np), [1, 1, 1, 1], "SAME")
        y32 = tf.nn.conv2d(tf.constant(x_np.astype(np.float32)),
                           tf.constant(w_np.astype(np.float32)), [1, 1, 1, 1], "SAME")
    with tf.Session(config=ConfigProto()) as s:  # TF32 allowed
        got, got32 = s.run([y, y32])
        plans = s.devices["GPU:0"].libraries.dnn._plans
    with tf.device("/cpu:0"):
        ref = tf.nn.conv2d(tf.constant(x_np), tf.constant(w_np), [1, 1, 1, 1], "SAME")
    with tf.Session() as s:
        want = s.run(ref)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_allclose(got32, want, rtol=5e-3, atol=5e-3)  # TF32's tolerance
    graphs = {p.geometry.dtype: p.graph for p in plans.values()}
    assert graphs["float32"].uses_tf32 and not graphs["float64"].uses_tf32
    with tf.Session(config=_config(tf32=False)) as s:
        s.run(y32)
        (plan,) = [p for p in s.devices["GPU:0"].libraries.dnn._plans.values()]
    assert not plan.graph.uses_tf32  # tensor-core numerics deselected


def test_a_captured_step_replays_cublas_and_cudnn(strict_gpu):
    x_np = RNG.normal(size=(4, 8, 8, 2)).astype(np.float32)
    y_np = np.eye(3, dtype=np.float32)[RNG.integers(0, 3, 4)]
    w0 = RNG.normal(size=(3, 3, 2, 4)).astype(np.float32) * 0.3
    w1 = RNG.normal(size=(8 * 8 * 4, 3)).astype(np.float32) * 0.1

    def train(replay):
        g = tf.Graph()
        with g.as_default():
            x = tf.placeholder(tf.float32, [None, 8, 8, 2])
            y = tf.placeholder(tf.float32, [None, 3])
            with tf.device("/gpu:0"):
                k0, k1 = tf.Variable(w0), tf.Variable(w1)
                h = tf.nn.relu(tf.nn.conv2d(x, k0, [1, 1, 1, 1], "SAME"))
                logits = tf.matmul(tf.reshape(h, [-1, 8 * 8 * 4]), k1)
                loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits_v2(
                    labels=y, logits=logits))
                step = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
            init = tf.global_variables_initializer()
        with tf.Session(graph=g, config=_config(gpu_step_replay=replay)) as s:
            s.run(init)
            losses = [s.run([step, loss], {x: x_np, y: y_np})[1] for _ in range(5)]
            part = next(p for p in s._master._plans.values() if step in p.placement).parts[0]
            return losses, s.run(k0), part

    losses, k0, part = train(True)
    want_losses, want_k0, _ = train(False)
    assert part.replay_reason is None, part.replay_reason
    assert part.replay.replays == 4
    np.testing.assert_allclose(losses, want_losses, rtol=1e-6)
    np.testing.assert_allclose(k0, want_k0, rtol=1e-6)
    assert losses[-1] < losses[0]


def test_a_library_call_checks_its_operands(strict_gpu):
    cublas = strict_gpu.libraries[0]
    h = cublas.create()
    a = strict_gpu.asarray(np.ones((2, 2), np.float32))
    with pytest.raises(RuntimeError, match="stream and workspace"):
        cublas.sgemm(h, 0, 0, 2, 2, 2, np.ones(1, np.float32).ctypes.data, a.data.ptr, 2,
                     a.data.ptr, 2, np.zeros(1, np.float32).ctypes.data, a.data.ptr, 2)
    with pytest.raises(ValueError, match="outside any live device allocation"):
        strict_cupy.array_at(a.data.ptr + 8, (4,), np.float32)


def test_a_library_operand_resolves_to_its_own_memory_past_a_window_view(strict_gpu):
    # A window view (im2col's sliding_window_view) seems to span windows x window size bytes,
    # far past the memory it views. An operand lying in that span resolved to a copy of the
    # window view, so a captured convolution wrote its output there and left it garbage.
    block = np.zeros(256)  # device memory holding both arrays, the window view's first
    base = strict_cupy.ndarray(block[:64])
    windows = strict_gpu.lib.stride_tricks.sliding_window_view(base, 32)
    del base  # (its memory lives on in the window view)
    a = strict_cupy.ndarray(block[100:104])
    assert windows.nbytes > 104 * 8  # a lies in the window view's apparent span
    view = strict_cupy.array_at(a.data.ptr, (4,), np.float64)
    view[...] = 7.0
    np.testing.assert_array_equal(a.get(), 7.0)
    np.testing.assert_array_equal(block[:100], 0.0)
