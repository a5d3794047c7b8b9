"""The GPU device on a real CUDA GPU with CuPy (marked ``gpu``; skipped where there is none).

The same checks as on the strict stand-in, plus what only silicon can show: fused kernels
compiled by CuPy and run, numbers against NumPy. ``scripts/gpu-check`` runs these.
"""

import numpy as np
import pytest

import dflab as tf
from dflab.runtime.gpu import GPUDevice, cupy_or_none

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(cupy_or_none() is None, reason="no CUDA GPU with CuPy")]


def test_gpus_are_real_cupy_devices():
    with tf.Session() as s:
        gpus = [d for d in s.devices if d.device_type == "GPU"]
    assert gpus and all(isinstance(d, GPUDevice) and not d.simulated for d in gpus)


def test_mlp_training_matches_the_cpu():
    rng = np.random.default_rng(0)
    x_np = rng.normal(size=(64, 32)).astype(np.float32)
    y_np = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 64)]
    w1_np = rng.normal(size=(32, 64)).astype(np.float32) * 0.1
    w2_np = rng.normal(size=(64, 10)).astype(np.float32) * 0.1

    def train(device):
        g = tf.Graph()
        with g.as_default(), tf.device(device):
            w1, w2 = tf.Variable(w1_np), tf.Variable(w2_np)
            h = tf.nn.relu(tf.matmul(tf.constant(x_np), w1))
            loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits_v2(
                labels=y_np, logits=tf.matmul(h, w2)))
            step = tf.train.AdamOptimizer(1e-2).minimize(loss)
            init = tf.global_variables_initializer()
        with tf.Session(graph=g) as s:
            s.run(init)
            return [s.run([step, loss])[1] for _ in range(5)]

    np.testing.assert_allclose(train("/gpu:0"), train("/cpu:0"), rtol=2e-4)


def test_a_fused_chain_runs_and_matches_numpy():
    x_np = np.linspace(-3, 3, 1 << 16, dtype=np.float32)
    x = tf.placeholder(tf.float32, [x_np.size])
    with tf.device("/gpu:0"):
        y = tf.reduce_sum(tf.tanh(x * 2.0 + 1.0) * tf.exp(-x * x))
    with tf.Session() as s:
        got = s.run(y, {x: x_np})
    want = (np.tanh(x_np * 2 + 1) * np.exp(-x_np * x_np)).astype(np.float64).sum()
    np.testing.assert_allclose(got, want, rtol=1e-4)


def test_memory_fraction_caps_the_pool():
    opts = tf.GPUOptions(per_process_gpu_memory_fraction=0.05, allow_growth=True)
    with tf.Session(config=tf.ConfigProto(gpu_options=opts)) as s:
        gpu = s.devices["GPU:0"]
        assert 0 < gpu.pool.get_limit() <= gpu.cupy.cuda.runtime.memGetInfo()[1] * 0.05 + 1
        assert gpu.memory.stats()["bytes_reserved"] < gpu.pool.get_limit()


def test_transfers_round_trip_and_two_gpus_copy_directly():
    with tf.Session() as s:
        gpus = [d for d in s.devices if d.device_type == "GPU"]
        a = np.arange(1 << 20, dtype=np.float32)
        on = gpus[0].from_host(a)
        np.testing.assert_array_equal(gpus[0].to_host(on), a)
        if len(gpus) > 1:
            there = gpus[0].copy_to(on, gpus[1])
            assert there.device.id == 1
            np.testing.assert_array_equal(gpus[1].to_host(there), a)


def test_a_replayed_training_step_matches_the_uncaptured_one():
    rng = np.random.default_rng(1)
    x_np = rng.normal(size=(64, 32)).astype(np.float32)
    y_np = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 64)]
    w_np = rng.normal(size=(32, 10)).astype(np.float32) * 0.1

    def train(replay):
        g = tf.Graph()
        with g.as_default():
            x = tf.placeholder(tf.float32, [None, 32])
            y = tf.placeholder(tf.float32, [None, 10])
            with tf.device("/gpu:0"):
                w = tf.Variable(w_np)
                loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits_v2(
                    labels=y, logits=tf.matmul(x, w)))
                step = tf.train.AdamOptimizer(1e-2).minimize(loss)
            init = tf.global_variables_initializer()
        config = tf.ConfigProto(dflab={"gpu_step_replay": replay})
        with tf.Session(graph=g, config=config) as s:
            s.run(init)
            losses = [s.run([step, loss], {x: x_np[:n], y: y_np[:n]})[1]
                      for n in (64, 64, 64, 32, 32, 32)]
            plan = next(p for p in s._master._plans.values() if step in p.placement)
            return losses, s.run(w), plan.parts[0]

    losses, w, part = train(True)
    want_losses, want_w, _ = train(False)
    assert part.replay_reason is None, part.replay_reason
    assert part.replay.captures == 2
    np.testing.assert_allclose(losses, want_losses, rtol=1e-5)
    np.testing.assert_allclose(w, want_w, rtol=1e-5, atol=1e-6)


# --- the GPU's own kernels and libraries on silicon ----------------------------------------------
def _model_losses(name, device_config, steps=3):
    """First losses of ``bench_models``' model ``name`` under ``device_config``."""
    import pathlib
    import sys

    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "benchmarks"))
    import bench_models

    _, data, build, _, _ = bench_models.MODELS[name]
    args = data(np.random.default_rng(0))

    def session(tf_, graph, init):
        s = tf_.Session(graph=graph, config=device_config)
        s.run(init)
        return s

    original = bench_models._session
    bench_models._session = session
    try:
        model = build(tf, *args)
    finally:
        bench_models._session = original
    loss = [op.outputs[0] for op in model.session.graph.get_operations()
            if op.type in ("Mean", "RealDiv", "truediv")][-1]
    losses = [model.session.run([loss, model.fetch], model.feed)[0] for _ in range(steps)]
    # The plan these runs built last (the builder's first step, fetching its own loss, may be
    # another plan, run once).
    part = list(model.session._master._plans.values())[-1].parts[0]
    model.session.close()
    return np.array(losses), part


@pytest.mark.parametrize("name", ["cnn", "mlp", "lstm", "word2vec"])
def test_model_steps_on_the_gpu_match_the_cpu_and_replay(name):
    """cuDNN convolutions, cuBLAS on the owned handle, the one-launch programs (pooling,
    cross-entropy, optimizer updates, gathers, scatters, fused groups) and whole-step replay,
    against the same steps on the CPU; TF32 off so that float32 is compared as such."""
    cpu = tf.ConfigProto(device_count={"GPU": 0})
    gpu = tf.ConfigProto(dflab={"gpu_allow_tf32": False})
    want, _ = _model_losses(name, cpu, steps=4)
    got, part = _model_losses(name, gpu, steps=4)
    np.testing.assert_allclose(got, want, rtol=2e-4)
    assert part.replay_reason is None, part.replay_reason
    assert part.replay.replays >= 2


def test_tf32_changes_float32_products_within_its_tolerance():
    rng = np.random.default_rng(2)
    a = rng.normal(size=(256, 512)).astype(np.float32)
    b = rng.normal(size=(512, 64)).astype(np.float32)
    with tf.device("/gpu:0"):
        c = tf.matmul(tf.constant(a), tf.constant(b))
    exact = a.astype(np.float64) @ b.astype(np.float64)
    with tf.Session(config=tf.ConfigProto(dflab={"gpu_allow_tf32": False})) as s:
        np.testing.assert_allclose(s.run(c), exact, rtol=1e-4, atol=1e-3)
    with tf.Session() as s:  # TF32 on: about 1e-3 relative
        np.testing.assert_allclose(s.run(c), exact, rtol=1e-2, atol=5e-2)


def test_the_libraries_were_found():
    with tf.Session() as s:
        libs = s.devices["GPU:0"].libraries
    assert libs.blas is not None and libs.dnn is not None, libs.missing


def test_a_dynamic_rnn_step_matches_the_cpu_with_its_loop_on_the_host():
    """A classic dynamic_rnn training step (fed lengths, a fused loop holding the stream):
    the GPU's losses are the CPU's, and the int32 loop bookkeeping never reaches the device."""
    rng = np.random.default_rng(2)
    x_np = rng.normal(size=(16, 7, 3)).astype(np.float32)
    lengths = rng.integers(1, 8, 16).astype(np.int32)

    def train(config):
        g = tf.Graph()
        with g.as_default():
            tf.set_random_seed(1)
            x = tf.placeholder(tf.float32, [None, 7, 3])
            n = tf.placeholder(tf.int32, [None])
            out, _ = tf.nn.dynamic_rnn(tf.nn.rnn_cell.BasicLSTMCell(8), x, dtype=tf.float32,
                                       sequence_length=n)
            loss = tf.reduce_mean(tf.square(out))
            step = tf.train.AdagradOptimizer(0.3).minimize(loss)
            init = tf.global_variables_initializer()
        with tf.Session(graph=g, config=config) as s:
            s.run(init)
            return [s.run([step, loss], {x: x_np, n: lengths})[1] for _ in range(4)]

    gpu = train(tf.ConfigProto(dflab={"gpu_allow_tf32": False}))
    np.testing.assert_allclose(gpu, train(tf.ConfigProto(device_count={"GPU": 0})), rtol=2e-5)


@pytest.mark.parametrize("name", ["adagrad", "momentum", "rms_prop", "adam"])
def test_a_sparse_update_step_is_captured_and_matches_the_cpu(name):
    """Sparse optimizer updates (repeated rows summed on the device) replay as part of the
    captured step, with the CPU's numbers."""
    optimizers = {"adagrad": lambda: tf.train.AdagradOptimizer(0.5),
                  "momentum": lambda: tf.train.MomentumOptimizer(0.1, 0.9, use_nesterov=True),
                  "rms_prop": lambda: tf.train.RMSPropOptimizer(0.1, momentum=0.5),
                  "adam": lambda: tf.train.AdamOptimizer(0.1)}
    table = np.random.default_rng(3).normal(size=(1000, 16)).astype(np.float32)
    feeds = [np.random.default_rng(k).integers(0, 1000, 64) for k in range(5)]

    def train(device, replay):
        g = tf.Graph()
        with g.as_default(), tf.device(device):
            ids = tf.placeholder(tf.int64, [64])
            emb = tf.Variable(table, use_resource=True)
            loss = tf.reduce_sum(tf.square(tf.nn.embedding_lookup(emb, ids) - 1.0))
            step = optimizers[name]().minimize(loss)
            init = tf.global_variables_initializer()
        with tf.Session(graph=g, config=tf.ConfigProto(dflab={"gpu_step_replay": replay})) as s:
            s.run(init)
            for f in feeds:
                s.run(step, {ids: f})
            part = next(p for p in s._master._plans.values() if step in p.placement).parts[0]
            return s.run(emb), part.replay_reason, getattr(part.replay, "replays", 0)

    got, reason, replays = train("/gpu:0", True)
    assert reason is None and replays == len(feeds) - 1
    want, _, _ = train("/cpu:0", False)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
