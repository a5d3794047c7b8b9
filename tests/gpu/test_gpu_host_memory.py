"""Host-memory inputs are declared by a kernel where it is registered (TF's ``HostMemory``),
and the GPU device honours the declaration when it binds the kernel: run on the strict CuPy
stand-in, whose device arrays refuse to be read as NumPy arrays."""

import numpy as np
import strict_cupy

import dflab as tf
from dflab.framework import registry as op_registry
from dflab.kernels.registry import register_kernel
from dflab.runtime.config import ConfigProto, GraphOptions, RewriterConfig
from dflab.runtime.gpu import GPUDevice

SEEN: list = []  # (type of each input) per call of the test kernel


def _scale_and_shift(node_def, ctx):
    xp = ctx.xp

    def run(x, n, k):
        SEEN.append((type(x), type(n), type(k)))
        # ``n`` is read on the host, as a shape would be: NumPy, not the device's namespace.
        return xp.add(xp.multiply(x, float(np.sum(n))), k)

    return run


if "TestScaleByHostCount" not in op_registry.registered_ops():
    op_registry.register_op("TestScaleByHostCount",
                            lambda op: [(op.inputs[0].dtype, op.inputs[0].shape)])
    # Input 1 is read in host memory; inputs 0 and 2 in the device's.
    register_kernel("TestScaleByHostCount", ("CPU", "GPU"), factory=_scale_and_shift,
                    host_memory_inputs=(1,))


def _unfused():
    return ConfigProto(graph_options=GraphOptions(rewrite_options=RewriterConfig(
        remapping=RewriterConfig.OFF)))


def _scale_by_host_count(x, n, k):
    return tf.get_default_graph()._create_op("TestScaleByHostCount", [x, n, k], {},
                                             "scale").outputs[0]


def test_a_kernels_host_memory_input_arrives_on_the_host_and_the_others_on_the_device(
        strict_gpu):
    x_np = np.arange(6, dtype=np.float32)
    counts, shift = np.array([1, 2], np.int32), np.arange(6, dtype=np.int32)
    x = tf.placeholder(tf.float32, [6])
    with tf.device("/gpu:0"):
        # Both int32 constants live in host memory on a GPU (TF's rule for int32 values);
        # only the one reaching an input not declared host memory goes to the device.
        y = _scale_by_host_count(x * 1.0, tf.constant(counts), tf.cast(tf.constant(shift),
                                                                        tf.float32))
    SEEN.clear()
    with tf.Session(config=_unfused()) as s:
        got = s.run(y, {x: x_np})
        plan = next(p for p in s._master._plans.values() if y.op in p.placement)
    np.testing.assert_allclose(got, x_np * 3.0 + shift)
    assert plan.placement[y.op].device.endswith("GPU:0")
    assert SEEN == [(strict_gpu.ndarray, np.ndarray, strict_gpu.ndarray)]


def test_an_undeclared_host_value_is_moved_to_the_device(strict_gpu):
    x = tf.placeholder(tf.float32, [6])
    with tf.device("/gpu:0"):
        # Input 2 is an int32 constant, a host value, and not declared host memory.
        y = _scale_by_host_count(x, tf.constant([1], tf.int32),
                                 tf.constant(np.ones(6, np.int32)))
    SEEN.clear()
    with tf.Session(config=_unfused()) as s:
        got = s.run(y, {x: np.ones(6, np.float32)})
    np.testing.assert_allclose(got, np.full(6, 2.0))
    assert SEEN == [(strict_gpu.ndarray, np.ndarray, strict_gpu.ndarray)]


def test_a_gpu_binds_each_kernel_once_per_plan_not_per_step(strict_gpu, monkeypatch):
    bound = []
    original = GPUDevice.bind_kernel

    def counting(self, kernel_def, node_def, fn):
        bound.append(node_def.name)
        return original(self, kernel_def, node_def, fn)

    monkeypatch.setattr(GPUDevice, "bind_kernel", counting)
    x = tf.placeholder(tf.float32, [4])
    with tf.device("/gpu:0"):
        y = tf.tanh(x * 2.0) + 1.0
    with tf.Session(config=_unfused()) as s:
        s.run(y, {x: np.ones(4, np.float32)})
        after_first = list(bound)
        strict_cupy.transfers.clear()
        for _ in range(3):
            got = s.run(y, {x: np.ones(4, np.float32)})
    np.testing.assert_allclose(got, np.tanh(2.0) + 1.0, rtol=1e-6)
    assert {"mul", "Tanh", "add"} <= set(after_first)
    assert bound == after_first
    # Each step still ran on the device: its feed went in and its result came out.
    assert strict_cupy.transfers == {"host_to_device": 3, "device_to_host": 3}


def test_declared_host_memory_outputs_are_host_values_on_a_gpu(strict_gpu, monkeypatch):
    # Every GPU kernel in this plan that declares host-memory outputs gives host values there
    # (and device arrays at its other outputs): the declarations say what the kernels do.
    produced = []  # (op type, output position, declared host, the value)
    original = GPUDevice.bind_kernel

    def recording(self, kernel_def, node_def, fn):
        bound = original(self, kernel_def, node_def, fn)
        declared = kernel_def.host_outputs(node_def)

        def run(*args):
            out = bound(*args)
            outs = out if isinstance(out, tuple) else (out,)
            produced.extend((node_def.op, i, i in declared, v) for i, v in enumerate(outs))
            return out

        return run

    monkeypatch.setattr(GPUDevice, "bind_kernel", recording)
    z = tf.placeholder(tf.float32)  # of unknown rank: tf.rank is an op, not a constant
    with tf.device("/gpu:0"):
        z2 = z * 2.0
        shapes = tf.shape_n([z2, z2 + 1.0])
        outs = [tf.shape(z2), tf.size(z2), tf.rank(z2), shapes[0], shapes[1],
                tf.constant([1, 2], tf.int32), tf.constant([1.5]), z2]
    with tf.Session(config=_unfused()) as s:
        got = s.run(outs, {z: np.ones((4, 3), np.float32)})
    assert [list(np.ravel(g)) for g in got[:6]] == [[4, 3], [12], [2], [4, 3], [4, 3], [1, 2]]
    by_op = {}
    for op_type, i, declared, value in produced:
        by_op.setdefault(op_type, set()).add((i, declared, isinstance(value, strict_gpu.ndarray)))
    assert by_op["Shape"] == by_op["Size"] == by_op["Rank"] == {(0, True, False)}
    assert by_op["ShapeN"] == {(0, True, False), (1, True, False)}
    # Const: its int32 value is declared host memory, its float one is on the device.
    assert by_op["Const"] == {(0, True, False), (0, False, True)}
    assert by_op["Mul"] == {(0, False, True)}
