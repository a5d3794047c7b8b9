"""Loops on a GPU keep their bookkeeping on the host, as TF's GPU kernels do: int32 values
(a loop counter, a fed sequence length and what is computed from them) stay in host memory,
and the kernels that only route values (Enter, Merge, Switch, NextIteration, Exit, Identity,
a loop's accumulators) take them as they are. So a loop's condition is never read back from
the device (a read waits for every kernel issued before it), and a run of a partition enters
the GPU's device, stream and memory pool once, not once per kernel."""

import numpy as np
import pytest
import strict_cupy

import dflab as tf


def _dynamic_rnn_step(seq_max=6, batch=8, hidden=5):
    """A classic dynamic_rnn training step (an LSTM over sequences of different lengths, fed),
    its fetches and feed."""
    x = tf.placeholder(tf.float32, [None, seq_max, 3])
    seqlen = tf.placeholder(tf.int32, [None])
    cell = tf.nn.rnn_cell.BasicLSTMCell(hidden)
    outputs, _ = tf.nn.dynamic_rnn(cell, x, dtype=tf.float32, sequence_length=seqlen)
    index = tf.range(0, tf.shape(outputs)[0]) * seq_max + (seqlen - 1)
    last = tf.gather(tf.reshape(outputs, [-1, hidden]), index)
    loss = tf.reduce_mean(tf.square(last))
    train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
    rng = np.random.default_rng(5)
    feed = {x: rng.normal(size=(batch, seq_max, 3)).astype(np.float32),
            seqlen: rng.integers(1, seq_max + 1, batch).astype(np.int32)}
    return [train, loss], feed


def _losses(config, steps=3):
    g = tf.Graph()
    with g.as_default():
        tf.set_random_seed(3)
        fetches, feed = _dynamic_rnn_step()
        init = tf.global_variables_initializer()
    with tf.Session(graph=g, config=config) as s:
        s.run(init)
        out = [s.run(fetches, feed)[1]]
        strict_cupy.transfers.clear()
        out += [s.run(fetches, feed)[1] for _ in range(steps - 1)]
        reads = strict_cupy.transfers["device_to_host"] / (steps - 1)
    return out, reads


def test_a_dynamic_rnn_step_reads_nothing_back_but_its_fetch(strict_gpu):
    losses, reads = _losses(tf.ConfigProto(dflab={"gpu_allow_tf32": False}))
    cpu_losses, _ = _losses(tf.ConfigProto(device_count={"GPU": 0}))
    np.testing.assert_allclose(losses, cpu_losses, rtol=1e-5)
    # One read per step: the fetched loss. The loop's counter, its bound (the largest fed
    # length) and its condition stay on the host; each had been read back every iteration.
    assert reads == 1


def test_an_int32_feed_stays_in_host_memory_and_a_float_feed_goes_to_the_gpu(strict_gpu):
    n = tf.placeholder(tf.int32, [])
    v = tf.placeholder(tf.float32, [3])
    with tf.device("/gpu:0"):
        total = tf.while_loop(lambda i, acc: i < n, lambda i, acc: (i + 1, acc * 2.0),
                              [tf.constant(0), v])[1]
    with tf.Session() as s:
        s.run(total, {n: 2, v: np.ones(3, np.float32)})
        strict_cupy.transfers.clear()
        got = s.run(total, {n: 5, v: np.ones(3, np.float32)})
    np.testing.assert_array_equal(got, np.full(3, 32.0, np.float32))
    # The float feed is copied in and the result out; the bound and the loop's int32 counter
    # are never on the device.
    assert strict_cupy.transfers["host_to_device"] == 1
    assert strict_cupy.transfers["device_to_host"] == 1


def test_a_mask_computed_from_host_integers_goes_to_the_gpu_once(strict_gpu):
    lengths = tf.placeholder(tf.int32, [4])
    with tf.device("/gpu:0"):
        mask = tf.range(4) < lengths  # shape arithmetic's twin on the host: a boolean mask
        a = tf.constant(np.arange(4, dtype=np.float32))
        y = tf.where(mask, a, -a) + tf.where(mask, 2 * a, a)
    # Replay off: a captured step takes its feeds into device buffers of its own.
    with tf.Session(config=tf.ConfigProto(dflab={"gpu_step_replay": False})) as s:
        s.run(y, {lengths: [0, 1, 3, 3]})
        strict_cupy.transfers.clear()
        got = s.run(y, {lengths: [0, 1, 3, 3]})
    m = np.arange(4) < np.array([0, 1, 3, 3])
    a = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(got, np.where(m, a, -a) + np.where(m, 2 * a, a))
    assert strict_cupy.transfers["host_to_device"] == 1  # the mask, once for both consumers


@pytest.mark.parametrize("replay", [False, True])
def test_a_partition_run_enters_the_device_once_not_per_kernel(
        strict_gpu, monkeypatch, replay):
    from dflab.runtime import gpu as gpumod

    entered = []
    scope_enter = gpumod.KernelScope.__enter__

    def counting_enter(self):
        entered.append(self.here.depth)
        return scope_enter(self)

    monkeypatch.setattr(gpumod.KernelScope, "__enter__", counting_enter)
    with tf.device("/gpu:0"):
        x = tf.Variable(np.ones(4, np.float32))
        y = x
        for _ in range(20):
            y = y * 1.5 + 1.0
    config = tf.ConfigProto(dflab={"gpu_step_replay": replay})
    with tf.Session(config=config) as s:
        s.run(x.initializer)
        entered.clear()
        got = s.run(y)
        gpu = s.devices["GPU:0"]
        assert gpu.kernel_scope.here.depth == 0  # left when the run ended
    want = np.ones(4, np.float32)
    for _ in range(20):
        want = want * 1.5 + 1.0
    np.testing.assert_allclose(got, want, rtol=1e-6)
    if not replay:
        assert entered == [0]  # once for the run, not per kernel


def test_a_loop_with_a_product_runs_as_one_fused_node_on_a_gpu(strict_gpu):
    """A GPU runs its expensive kernels one at a time on its stream, so a loop holding a
    product still runs as one generated function (which holds the stream), with the numbers
    of the frame-by-frame run."""
    w0 = np.random.default_rng(1).normal(size=(4, 4)).astype(np.float32) * 0.5
    with tf.device("/gpu:0"):
        w = tf.constant(w0)
        n = tf.placeholder(tf.int32, [])
        out = tf.while_loop(lambda i, h: i < n, lambda i, h: (i + 1, tf.tanh(tf.matmul(h, w))),
                            [tf.constant(0), tf.ones([2, 4])])
    config = tf.ConfigProto(dflab={"gpu_allow_tf32": False})
    with tf.Session(config=config) as s:
        plan = s.master.get_plan(list(out), [], (n,))
        part = next(p for p in plan.parts if "GPU" in p.device)
        assert [f.fused is not None for f in part.executor_plan.frames[1:]] == [True]
        got = s.run(out, {n: 6})
        traced = s.run(out, {n: 6}, options=tf.RunOptions(trace_level=3),
                       run_metadata=tf.RunMetadata())
    want = np.ones((2, 4), np.float32)
    for _ in range(6):
        want = np.tanh(want @ w0)
    np.testing.assert_allclose(got[1], want, rtol=1e-5)
    np.testing.assert_array_equal(got[1], traced[1])


def test_a_switch_on_a_device_predicate_waits_for_another_threads_capture(strict_gpu):
    """Routing kernels take values where they are, but a Switch on a device boolean reads it
    on the host: it still waits for the device's issue lock, which a capture holds for its
    whole length (a read during a capture fails the capture and the step)."""
    import threading
    import time

    with tf.device("/cpu:0"):
        d = tf.py_func(lambda x: time.sleep(0.3) or x, [tf.constant(7)], tf.int32)
        d.set_shape([])
    with tf.device("/gpu:0"):
        v = tf.Variable(np.ones(3, np.float32))
        y = tf.cond(tf.reduce_sum(v) > 0.0, lambda: tf.identity(d), lambda: d + 1)
    with tf.Session(config=tf.ConfigProto(dflab={"gpu_step_replay": False})) as s:
        s.run(v.initializer)
        gpu = s.devices["GPU:0"]
        stream = gpu.streams["compute"].cuda
        captured = threading.Event()

        def capture():  # what a replayed partition's capture does on this device
            time.sleep(0.1)
            with gpu.retaining_allocations(), stream:
                stream.begin_capture()
                captured.set()
                time.sleep(0.5)
                stream.end_capture()

        t = threading.Thread(target=capture)
        t.start()
        try:
            assert s.run(y) == 7
        finally:
            t.join()
        assert captured.is_set()


def test_a_host_int32_variable_read_on_the_gpu_sees_its_in_place_updates(strict_gpu):
    """A host ref variable's int32 value reaches a GPU kernel as the variable's own buffer,
    which the host's scatters write in place: its device copy is made afresh each step (only
    a constant's is kept)."""
    with tf.device("/cpu:0"):
        v = tf.Variable(np.zeros(3, np.int32), use_resource=False)
        update = tf.scatter_add(v, tf.constant([0]), tf.constant([5]))
    with tf.device("/gpu:0"):
        w = tf.Variable(np.ones(3, np.int32))
        y = v + w
    with tf.Session(config=tf.ConfigProto(dflab={"gpu_step_replay": False})) as s:
        s.run([v.initializer, w.initializer])
        assert s.run(y).tolist() == [1, 1, 1]
        s.run(update)
        assert s.run(y).tolist() == [6, 1, 1]


def test_a_failure_to_enter_the_gpu_fails_the_step_instead_of_hanging_it(strict_gpu,
                                                                          monkeypatch):
    import threading
    import time

    from dflab.runtime import gpu as gpumod

    x = tf.placeholder(tf.float32, [3])
    with tf.device("/cpu:0"):
        y = tf.py_func(lambda v: time.sleep(0.1) or v, [x], tf.float32)
        y.set_shape([3])
    with tf.device("/gpu:0"):
        z = tf.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, a * 2.0), [0, y])[1]
    with tf.Session() as s:
        s.run(z, {x: np.ones(3, np.float32)})

        caller = []
        enter_as_usual = gpumod.KernelScope.__enter__

        def enter(self):
            # A sticky CUDA error, as cudaSetDevice would raise it, on the pool's threads
            # (where the GPU's partition continues after its _Recv): there it had been lost.
            if threading.current_thread() not in caller:
                raise RuntimeError("cudaErrorIllegalAddress")
            return enter_as_usual(self)

        monkeypatch.setattr(gpumod.KernelScope, "__enter__", enter)
        out = {}

        def run():
            try:
                s.run(z, {x: np.ones(3, np.float32)})
            except Exception as e:  # noqa: BLE001 - what the step raised
                out["error"] = e

        t = threading.Thread(target=run, daemon=True)
        caller.append(t)
        t.start()
        t.join(10)
        assert not t.is_alive(), "the step hung: the error entering the GPU was lost"
        assert "cudaErrorIllegalAddress" in str(out["error"])


def test_two_gpus_sending_host_values_to_each_other_do_not_deadlock(two_strict_gpus):
    """A ``_Send`` of a host value (an int64 shape, a boolean) copies it into the receiving
    GPU under that GPU's issue lock: holding its own device's lock meanwhile had deadlocked
    two GPUs sending to each other."""
    import threading

    x0 = tf.placeholder(tf.float32, [None])
    x1 = tf.placeholder(tf.float32, [None])
    outs = []
    for k in range(4):
        with tf.device("/gpu:0"):
            s0 = tf.shape(x0 * float(k), out_type=tf.int64)[0]
            b0 = tf.less(tf.shape(x0)[0], 5 + k)
        with tf.device("/gpu:1"):
            s1 = tf.shape(x1 * float(k), out_type=tf.int64)[0]
            b1 = tf.less(tf.shape(x1)[0], 5 + k)
            outs.append(tf.cast(s0 + 1, tf.float32) * tf.cast(b0, tf.float32) * x1[0])
        with tf.device("/gpu:0"):
            outs.append(tf.cast(s1 + 1, tf.float32) * tf.cast(b1, tf.float32) * x0[0])
    total = tf.add_n(outs)
    feed = {x0: np.ones(3, np.float32), x1: np.ones(4, np.float32)}
    with tf.Session() as s:
        want = s.run(total, feed)
        errors = []

        def run():
            try:
                for _ in range(150):
                    assert s.run(total, feed) == want
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=run, daemon=True) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not any(t.is_alive() for t in threads), "the GPUs' sends deadlocked"
        assert not errors, errors[0]
    assert want == 4 * (4 + 5)  # (3 + 1) * 1 * 1 per GPU:0 term, (4 + 1) per GPU:1 term
