"""The CuPy GPU device's own code, run on the strict CuPy stand-in (no GPU needed).

Kernels compute through the device's ``xp`` on device arrays that refuse implicit conversion
to NumPy; values cross between host and device through the device's streams and events; the
device's memory account comes from its pool. Numbers are checked against NumPy.
"""

import numpy as np
import pytest
import strict_cupy

import dflab as tf
from dflab.runtime.config import ConfigProto, GPUOptions, GraphOptions, RewriterConfig
from dflab.runtime.gpu import GPUDevice


def _unfused(**kw):
    # The stand-in cannot run CUDA C, so the fused elementwise kernel stays off here (its
    # source is compiled with NVRTC in test_cuda_sources.py). TF32 off: numbers are checked
    # as float32 (test_gpu_libraries.py checks TF32).
    kw.setdefault("dflab", {"gpu_allow_tf32": False})
    return ConfigProto(graph_options=GraphOptions(rewrite_options=RewriterConfig(
        remapping=RewriterConfig.OFF)), **kw)


def test_the_stand_in_is_strict_like_cupy(strict_gpu):
    cupy = strict_gpu
    x = cupy.asarray(np.arange(3.0))
    with pytest.raises(TypeError, match="Implicit conversion"):
        np.asarray(x)
    with pytest.raises(TypeError, match="NumPy array"):
        cupy.add(x, np.ones(3))
    # NumPy functions on device arrays dispatch to the device, as with CuPy.
    assert isinstance(np.add(x, x), cupy.ndarray)
    np.testing.assert_array_equal(cupy.asnumpy(x * 2), [0.0, 2.0, 4.0])


def test_a_session_has_a_gpu_device_of_the_gpu_class(strict_gpu):
    with tf.Session(config=_unfused()) as s:
        names = [d.name.rsplit("/", 1)[-1] for d in s.list_devices()]
        gpu = s.devices["GPU:0"]
    assert names == ["device:CPU:0", "device:GPU:0"]
    assert isinstance(gpu, GPUDevice) and not gpu.simulated and gpu.xp is strict_gpu
    assert gpu.kernel_device_type == "GPU" and gpu.fuses_by_default
    assert set(gpu.streams) == {"compute", "host_to_device", "device_to_host"}


def test_kernels_run_on_device_arrays_on_the_compute_stream(strict_gpu):
    rng = np.random.default_rng(0)
    x_np = rng.normal(size=(4, 3)).astype(np.float32)
    w_np = rng.normal(size=(3, 2)).astype(np.float32)
    x = tf.placeholder(tf.float32, [4, 3])
    with tf.device("/gpu:0"):
        w = tf.constant(w_np)
        h = tf.matmul(x, w)
        y = tf.nn.relu(h + 1.0)
        s_ = tf.reduce_sum(tf.nn.softmax(y), axis=1)
    with tf.Session(config=_unfused()) as s:
        gpu = s.devices["GPU:0"]
        y_out, s_out = s.run([y, s_], {x: x_np})
    want = np.maximum(x_np @ w_np + 1.0, 0.0)
    np.testing.assert_allclose(y_out, want, rtol=1e-6)
    e = np.exp(want - want.max(1, keepdims=True))
    np.testing.assert_allclose(s_out, (e / e.sum(1, keepdims=True)).sum(1), rtol=1e-5)
    assert type(y_out) is np.ndarray
    # The compute stream waited for the feed's copy.
    assert gpu.streams["compute"].cuda.waits
    assert gpu.copies_in_flight == 0


def test_every_kernel_runs_with_the_devices_stream_and_pool_current(strict_gpu):
    seen = []
    with tf.Session(config=_unfused()) as s:
        gpu = s.devices["GPU:0"]

        def kernel(a):
            seen.append((strict_cupy.get_current_stream(), strict_cupy.current_device()))
            return strict_gpu.multiply(a, 2.0)

        out = gpu.launch(kernel)(gpu.from_host(np.ones(4, np.float32)))
    assert seen == [(gpu.streams["compute"].cuda, 0)]
    assert out.stream is gpu.streams["compute"].cuda
    assert gpu.pool.mallocs >= 2  # the copied input and the kernel's output


def test_a_training_step_on_the_gpu_matches_the_cpu(strict_gpu):
    rng = np.random.default_rng(1)
    x_np = rng.normal(size=(5, 3)).astype(np.float32)
    y_np = np.eye(4, dtype=np.float32)[rng.integers(0, 4, 5)]

    def train(device):
        g = tf.Graph()
        with g.as_default(), tf.device(device):
            w = tf.Variable(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4), name="w")
            logits = tf.matmul(tf.constant(x_np), w)
            loss = tf.reduce_mean(
                tf.nn.softmax_cross_entropy_with_logits_v2(labels=y_np, logits=logits))
            step = tf.train.AdamOptimizer(0.1).minimize(loss)
            init = tf.global_variables_initializer()
        with tf.Session(graph=g, config=_unfused()) as s:
            s.run(init)
            for _ in range(3):
                s.run(step)
            return s.run(w), s.run(loss)

    w_gpu, loss_gpu = train("/gpu:0")
    w_cpu, loss_cpu = train("/cpu:0")
    np.testing.assert_allclose(w_gpu, w_cpu, rtol=1e-5)
    np.testing.assert_allclose(loss_gpu, loss_cpu, rtol=1e-5)


def test_memory_is_accounted_from_the_pool_with_a_peak(strict_gpu):
    with tf.Session(config=_unfused()) as s:
        gpu = s.devices["GPU:0"]
        a = gpu.from_host(np.zeros(1000, np.float32))
        assert gpu.memory.stats()["bytes_in_use"] == 4000
        del a
        stats = gpu.memory.stats()
    assert stats["bytes_in_use"] == 0 and stats["peak_bytes_in_use"] >= 4000
    assert stats["bytes_limit"] == 0  # by default nothing is capped or reserved


def test_memory_fraction_caps_the_pool_and_allow_growth_reserves_nothing(strict_gpu):
    total = strict_gpu.cuda.runtime.total_memory
    opts = GPUOptions(per_process_gpu_memory_fraction=0.25, allow_growth=True)
    with tf.Session(config=_unfused(gpu_options=opts)) as s:
        gpu = s.devices["GPU:0"]
        assert gpu.pool.get_limit() == total // 4
        assert gpu.memory.stats()["bytes_reserved"] == 0
        with pytest.raises(strict_gpu.cuda.memory.OutOfMemoryError):
            gpu.launch(lambda: strict_gpu.empty(total // 2, np.uint8))()
    opts = GPUOptions(per_process_gpu_memory_fraction=0.25, allow_growth=False)
    with tf.Session(config=_unfused(gpu_options=opts)) as s:
        assert s.devices["GPU:0"].memory.stats()["bytes_reserved"] == total // 4


def test_a_bad_memory_fraction_is_refused(strict_gpu):
    with pytest.raises(ValueError, match="per_process_gpu_memory_fraction"):
        with tf.Session(config=_unfused(
                gpu_options=GPUOptions(per_process_gpu_memory_fraction=1.5))) as s:
            s.list_devices()


def test_two_gpus_copy_device_to_device(two_strict_gpus):
    with tf.device("/gpu:0"):
        a = tf.constant(np.arange(6, dtype=np.float32)) * 2.0
    with tf.device("/gpu:1"):
        b = a + 1.0
    with tf.Session(config=_unfused()) as s:
        got = s.run(b)
        g1 = s.devices["GPU:1"]
    np.testing.assert_array_equal(got, np.arange(6, dtype=np.float32) * 2 + 1)
    # The copy was issued on GPU:1's stream and GPU:1's compute stream waited for it.
    assert g1.streams["compute"].cuda.waits


def test_host_only_ops_stay_on_the_host_with_transfers(strict_gpu):
    with tf.device("/gpu:0"):
        q = tf.FIFOQueue(3, tf.float32)
        v = tf.constant([1.0, 2.0]) * 3.0
        enq = q.enqueue(v)
        out = q.dequeue() + 1.0
    with tf.Session(config=_unfused(allow_soft_placement=True)) as s:
        s.run(enq)
        got = s.run(out)
        plan = next(p for p in s._master._plans.values() if out.op in p.placement)
    np.testing.assert_array_equal(got, [4.0, 7.0])
    assert plan.placement[q.queue_ref.op].device.endswith("CPU:0")
    assert plan.placement[out.op].device.endswith("GPU:0")


def test_fused_kernels_are_cached_by_structure_and_dtype(strict_gpu, monkeypatch):
    from dflab.kernels import fused_kernels
    from dflab.kernels.fused_kernels import FusedExpression, cupy_kernel

    monkeypatch.setattr(fused_kernels, "_CUPY_KERNELS", {})

    steps = (("Mul", (0, 1)), ("Exp", (2,)))
    k32 = cupy_kernel(FusedExpression(2, steps, "float32"), strict_gpu)
    assert cupy_kernel(FusedExpression(2, steps, "float32"), strict_gpu) is k32
    k64 = cupy_kernel(FusedExpression(2, steps, "float64"), strict_gpu)
    assert k64 is not k32 and "double" in k64.args["preamble"]
    assert len(strict_gpu.compiled_kernels) == 2


def test_fusion_runs_by_default_on_gpu_partitions(strict_gpu):
    x = tf.placeholder(tf.float32, [8])
    with tf.device("/gpu:0"):
        y = tf.tanh(x * 2.0 + 1.0) * tf.exp(-x)
    x_np = np.linspace(-2, 2, 8, dtype=np.float32)
    with tf.Session() as s:
        plan = s.master.get_plan([y], [], ())
        got = s.run(y, {x: x_np})
    op_types = {n.op.type for part in plan.parts for n in part.executor_plan.nodes}
    assert "_FusedElementwise" in op_types and "Tanh" not in op_types
    # One NVRTC program of its own (float4 loads: 8 aligned float32), run here as the NumPy
    # evaluator it is specified by.
    (k,) = strict_gpu.compiled_kernels
    assert k.name.startswith("dflab_fused_") and "float4" in k.code and "expf(" in k.code
    np.testing.assert_allclose(got, np.tanh(x_np * 2 + 1) * np.exp(-x_np), rtol=1e-6)


def test_a_copy_between_gpus_stays_on_the_devices(two_strict_gpus):
    with tf.Session(config=_unfused()) as s:
        g0, g1 = s.devices["GPU:0"], s.devices["GPU:1"]
        a = g0.launch(lambda: two_strict_gpus.arange(4.0))()
        pinned_before = len(strict_cupy.pinned_allocations)
        b = g0.copy_to(a, g1)
    assert a.device_id == 0 and b.device_id == 1
    assert b.data.copied_from == (0, g1.streams["host_to_device"].cuda)
    assert len(strict_cupy.pinned_allocations) == pinned_before  # no trip through the host
    np.testing.assert_array_equal(g1.to_host(b), [0.0, 1.0, 2.0, 3.0])


def test_tensor_arrays_run_on_the_gpu_with_elements_in_device_memory(strict_gpu):
    x_np = np.arange(12, dtype=np.float32).reshape(4, 3)
    with tf.device("/gpu:0"):
        x = tf.constant(x_np)
        ta_in = tf.TensorArray(tf.float32, size=4).unstack(x)
        ta_out = tf.TensorArray(tf.float32, size=4)

        def body(i, acc):
            return i + 1, acc.write(i, ta_in.read(i) * 2.0 + 1.0)

        _, done = tf.while_loop(lambda i, _: i < 4, body, (tf.constant(0), ta_out))
        y = done.stack()
        n = done.size()
    with tf.Session(config=_unfused()) as s:
        got, size = s.run([y, n])
        plan = next(p for p in s._master._plans.values() if y.op in p.placement)
    np.testing.assert_array_equal(got, x_np * 2.0 + 1.0)
    assert size == 4
    ta_ops = [op for op in plan.placement if op.type.startswith("TensorArray")]
    assert {op.type for op in ta_ops} >= {"TensorArrayV3", "TensorArrayScatterV3",
                                          "TensorArrayReadV3", "TensorArrayWriteV3",
                                          "TensorArrayGatherV3"}
    assert all(plan.placement[op].device.endswith("GPU:0") for op in ta_ops)


def test_a_tensor_array_keeps_its_elements_on_the_device():
    from dflab.kernels.tensor_array_kernels import TensorArrayStorage

    cupy = strict_cupy.make_module()
    ta = TensorArrayStorage("ta", np.float32, 2, False, True, (3,), True, xp=cupy)
    ta.write(0, np.ones(3, np.float32))  # a host value is moved into device memory
    ta.write(1, cupy.asarray(np.zeros(3, np.float32)))
    assert all(isinstance(v, cupy.ndarray) for v in ta.values)
    np.testing.assert_array_equal(cupy.asnumpy(ta.read(0)), np.ones(3))


def test_shapes_stay_in_host_memory_so_a_reshape_reads_no_device_value(strict_gpu):
    x_np = np.arange(6, dtype=np.float32)
    z_np = np.zeros((2, 3), np.float32)
    x = tf.placeholder(tf.float32, [6])
    z = tf.placeholder(tf.float32, [None, 3])
    with tf.device("/gpu:0"):
        y = tf.reshape(x * 2.0, tf.shape(z))
        n = tf.size(z) + tf.rank(z)  # a host value reaching a device input is copied there
    with tf.Session(config=_unfused()) as s:
        s.run(y, {x: x_np, z: z_np})  # builds the plan (constants go to the device once)
        strict_cupy.transfers.clear()
        got = s.run(y, {x: x_np, z: z_np})
        moved = dict(strict_cupy.transfers)
        assert s.run(n, {z: z_np}) == 8
        plan = next(p for p in s._master._plans.values() if y.op in p.placement)
    np.testing.assert_array_equal(got, (x_np * 2).reshape(2, 3))
    assert plan.placement[y.op.inputs[1].op].device.endswith("GPU:0")  # the Shape op
    # The only device-to-host copy is the fetch itself.
    assert moved["device_to_host"] == 1


def test_a_feed_is_copied_to_the_device_once(strict_gpu):
    x_np = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = tf.placeholder(tf.float32, [3, 4])
    with tf.device("/gpu:0"):
        y = x * 2.0
    with tf.Session(config=_unfused()) as s:
        gpu = s.devices["GPU:0"]
        s.run(y, {x: x_np})
        strict_cupy.transfers.clear()
        pinned_before = len(strict_cupy.pinned_allocations)
        got = s.run(y, {x: x_np})
        h2d = gpu.streams["host_to_device"].cuda
    np.testing.assert_array_equal(got, x_np * 2)
    # One copy host -> device (straight from the fed array, no pinned staging copy) and one
    # device -> host (the fetch).
    assert strict_cupy.transfers == {"host_to_device": 1, "device_to_host": 1}
    assert len(strict_cupy.pinned_allocations) == pinned_before
    assert gpu.streams["compute"].cuda.waits[-1].recorded_on is h2d


def test_an_int32_constant_is_copied_to_the_device_once_where_a_kernel_needs_it(strict_gpu):
    x = tf.placeholder(tf.float32, [6])
    with tf.device("/gpu:0"):
        # An int32 constant lives in host memory; AddV2 needs it on the device.
        y = tf.cast(x, tf.int32) + tf.constant(np.arange(6, dtype=np.int32))
    with tf.Session(config=_unfused()) as s:
        x_np = np.linspace(0, 5, 6).astype(np.float32)
        s.run(y, {x: x_np})
        strict_cupy.transfers.clear()
        got = s.run(y, {x: x_np})
    np.testing.assert_array_equal(got, x_np.astype(np.int32) + np.arange(6))
    assert strict_cupy.transfers == {"host_to_device": 1, "device_to_host": 1}  # the feed


def test_integer_shape_arithmetic_on_a_gpu_stays_on_the_host(strict_gpu):
    z = tf.placeholder(tf.float32, [None, 3])
    with tf.device("/gpu:0"):
        n = tf.reduce_prod(tf.shape(z)) * 2 + tf.size(z)
        mean_divisor = tf.reduce_mean(z * 1.0)  # its gradient divides by a shape product
        grad = tf.gradients(mean_divisor, z)[0]
    with tf.Session(config=_unfused()) as s:
        z_np = np.ones((4, 3), np.float32)
        s.run([n, grad], {z: z_np})
        strict_cupy.transfers.clear()
        got_n, got_grad = s.run([n, grad], {z: z_np})
        plan = next(p for p in s._master._plans.values() if n.op in p.placement)
    assert got_n == 36 and isinstance(got_n, np.integer)
    np.testing.assert_allclose(got_grad, np.full((4, 3), 1 / 12, np.float32))
    assert plan.placement[n.op].device.endswith("GPU:0")
    # The feed goes in, the gradient comes out; n never was in device memory.
    assert strict_cupy.transfers == {"host_to_device": 1, "device_to_host": 1}


def test_a_fused_reduction_reads_its_axes_in_host_memory(strict_gpu):
    from dflab.kernels.registry import get_kernel_def

    x = tf.placeholder(tf.float32, [8, 4])
    with tf.device("/gpu:0"):
        total = tf.reduce_sum(tf.exp(x * 2.0) + 1.0, axis=0)
        plain = tf.tanh(x * 2.0 + 1.0)
    with tf.Session() as s:
        fused = [n.op for p in (s.master.get_plan([total], [], ()),
                                s.master.get_plan([plain], [], ()))
                 for part in p.parts for n in part.executor_plan.nodes
                 if n.op.type == "_FusedElementwise"]
    got = [get_kernel_def(op.node_def, "GPU").host_inputs(op.node_def) for op in fused]
    # The reduction's axes (its last input) stay on the host; a plain group has none.
    assert got == [frozenset({len(fused[0].inputs) - 1}), frozenset()]


def test_a_cast_of_an_int32_host_value_to_float_feeds_device_kernels(strict_gpu):
    # An int32 constant lives in host memory and integer shape arithmetic runs on the host;
    # its Cast to float32 must still give a device value, since kernels whose inputs are all
    # floating point take device values only.
    x = tf.constant([[2 ** 31 - 1, 0, 7]], tf.int32)
    with tf.device("/gpu:0"):
        scaled = tf.cast(x, tf.float32) * tf.constant(2.0)
        shape_sum = tf.shape(x) + 1  # integer arithmetic: the host twin still serves it
    with tf.Session() as sess:
        got, shape = sess.run([scaled, shape_sum])
    np.testing.assert_allclose(got, np.array([[2 ** 31 - 1, 0, 7]], np.float32) * 2.0)
    np.testing.assert_array_equal(shape, [2, 4])
