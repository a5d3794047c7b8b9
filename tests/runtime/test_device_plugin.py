"""A new kind of device plugs in through the public registries, without touching the runtime.

The test device "FAKE" has its own array namespace: a counting wrapper around NumPy whose arrays
are a distinct type (``FakeArray``) and live in their own memory space. Running a graph on it
proves that kernels compute with the device's ``xp``, that values crossing between host memory
and the device's go through ``from_host``/``to_host``/``copy_to``, and that the device type's
policy (priority, serial stream) comes from its ``DeviceType``.
"""

import collections

import numpy as np
import pytest

import dflab as tf
from dflab.runtime import devices as devmod
from dflab.runtime.devices import Device, DeviceType


class FakeArray(np.ndarray):
    """An array of the FAKE device's memory (a NumPy array underneath)."""


class CountingXP:
    """The FAKE device's array namespace: NumPy's functions, counted, returning FakeArrays."""

    def __init__(self):
        self.calls = collections.Counter()
        self.copies = collections.Counter()

    def __getattr__(self, name):
        fn = getattr(np, name)
        if not callable(fn) or isinstance(fn, type):
            return fn  # dtypes, constants

        def call(*args, **kwargs):
            self.calls[name] += 1
            out = fn(*args, **kwargs)
            if isinstance(out, np.ndarray) and type(out) is np.ndarray:
                out = out.view(FakeArray)
            return out

        call.__name__ = name
        return call

    def asarray(self, value, dtype=None):
        self.copies["from_host"] += 1
        return np.array(value, dtype=dtype, copy=True).view(FakeArray)

    def asnumpy(self, value):
        self.copies["to_host"] += 1
        return np.array(value, copy=True).view(np.ndarray)


@pytest.fixture
def fake_device(monkeypatch):
    xp = CountingXP()
    fake = DeviceType("FAKE", priority=300, serial=True, params=dict(devmod.CPU.params))
    monkeypatch.setitem(devmod._DEVICE_TYPES, "FAKE", fake)

    def make(index, owner=None, params=None, task=devmod.LOCAL_TASK):
        # The FAKE device runs the kernels registered for CPUs, through its own xp.
        return Device("FAKE", index, xp=xp, owner=owner, task=task, kernel_device_type="CPU",
                      params=params, description="counting NumPy stand-in")

    monkeypatch.setitem(devmod._BACKENDS, "FAKE", devmod.Backend(lambda: 1, make))
    return xp


def test_a_registered_device_type_is_listed_and_preferred_by_priority(fake_device):
    with tf.Session() as s:
        names = [d.name.rsplit("/", 1)[-1] for d in s.list_devices()]
        assert names == ["device:CPU:0", "device:FAKE:0"]
        fake = s.devices["FAKE:0"]
        assert fake.type.priority == 300 and fake.compute_stream is not None
        assert fake.memory_space != s.devices["CPU:0"].memory_space
        a = tf.constant([1.0, 2.0])
        b = a * 3.0
        report = tf.get_default_graph()  # placement prefers the higher-priority device
        s.run(b)
        plan = next(iter(s._master._plans.values()))
        assert plan.placement[b.op].device.endswith("FAKE:0")
        assert report is not None


def test_kernels_compute_with_the_devices_xp_and_values_cross_memory_spaces(fake_device):
    xp = fake_device
    rng = np.random.default_rng(0)
    x_np = rng.normal(size=(4, 3)).astype(np.float32)
    w_np = rng.normal(size=(3, 2)).astype(np.float32)
    x = tf.placeholder(tf.float32, [4, 3])
    with tf.device("/device:FAKE:0"):
        w = tf.constant(w_np)
        y = tf.nn.relu(tf.matmul(x, w) + 1.0)
    with tf.device("/cpu:0"):
        total = tf.reduce_sum(y)
    with tf.Session() as s:
        y_out, total_out = s.run([y, total], {x: x_np})
    want = np.maximum(x_np @ w_np + 1.0, 0.0)
    np.testing.assert_allclose(y_out, want, rtol=1e-6)
    np.testing.assert_allclose(total_out, want.sum(), rtol=1e-5)
    # The device's kernels went through its xp...
    assert xp.calls["matmul"] >= 1 and xp.calls["add"] + xp.calls["maximum"] >= 1
    # ...the feed entered its memory, and values left it for the host: the fetch and the
    # _Send/_Recv to CPU:0.
    assert xp.copies["from_host"] >= 1 and xp.copies["to_host"] >= 2
    assert type(y_out) is np.ndarray


def test_values_move_to_the_device_and_back_through_copy_to(fake_device):
    xp = fake_device
    with tf.device("/cpu:0"):
        a = tf.constant(np.arange(6, dtype=np.float32).reshape(2, 3))
    with tf.device("/device:FAKE:0"):
        b = tf.transpose(a) * 2.0
    with tf.device("/cpu:0"):
        c = b + 1.0
    with tf.Session() as s:
        got = s.run(c)
    np.testing.assert_array_equal(got, np.arange(6, dtype=np.float32).reshape(2, 3).T * 2 + 1)
    assert xp.copies["from_host"] >= 1 and xp.copies["to_host"] >= 1
    assert xp.calls["transpose"] + xp.calls["multiply"] >= 1


def test_a_training_step_runs_on_the_device_and_matches_the_cpu(fake_device):
    # Variables, softmax cross-entropy, its gradient and the optimizer update all compute
    # with the device's xp; the variable's state stays in the device's memory.
    xp = fake_device
    rng = np.random.default_rng(1)
    x_np = rng.normal(size=(5, 3)).astype(np.float32)
    y_np = np.eye(4, dtype=np.float32)[rng.integers(0, 4, 5)]

    def train(device, short_name):
        g = tf.Graph()
        with g.as_default(), tf.device(device):
            w = tf.Variable(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4), name="w")
            logits = tf.matmul(tf.constant(x_np), w)
            loss = tf.reduce_mean(
                tf.nn.softmax_cross_entropy_with_logits_v2(labels=y_np, logits=logits))
            step = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
            init = tf.global_variables_initializer()
        with tf.Session(graph=g) as s:
            s.run(init)
            for _ in range(3):
                s.run(step)
            state = s.devices[short_name].resources.variables()
            return s.run(w), s.run(loss), {n: type(v.value) for n, v in state.items()}

    w_fake, loss_fake, kinds = train("/device:FAKE:0", "FAKE:0")
    calls = dict(xp.calls)
    w_cpu, loss_cpu, _ = train("/cpu:0", "CPU:0")
    np.testing.assert_allclose(w_fake, w_cpu, rtol=1e-6)
    np.testing.assert_allclose(loss_fake, loss_cpu, rtol=1e-6)
    assert calls["exp"] >= 3 and calls["matmul"] >= 3 and calls["subtract"] >= 3
    assert kinds and set(kinds.values()) == {FakeArray}, kinds
