"""Device registry: CPU and simulated devices, labels, parameters, memory accounting."""

import threading

import numpy as np
import pytest

import dflab as tf
from dflab.runtime import devices as devmod
from dflab.runtime.devices import DEFAULT_PARAMS, Device, DeviceMemory, DeviceSet

TASK = "/job:localhost/replica:0/task:0"


def _set(**kw):
    return DeviceSet.from_config(tf.ConfigProto(**kw))


@pytest.mark.parametrize("kw,want", [
    ({}, ["CPU:0"]),
    ({"device_count": {"CPU": 3}}, ["CPU:0", "CPU:1", "CPU:2"]),
    ({"device_count": {"GPU": 2}}, ["CPU:0", "GPU:0", "GPU:1"]),
    ({"device_count": {"CPU": 2, "GPU": 1}}, ["CPU:0", "CPU:1", "GPU:0"]),
    ({"device_count": {"GPU": 0}}, ["CPU:0"]),
    ({"dflab": {"simulated_devices": {"GPU": 3}}}, ["CPU:0", "GPU:0", "GPU:1", "GPU:2"]),
    # The explicit option wins over device_count for its type.
    ({"device_count": {"GPU": 1}, "dflab": {"simulated_devices": {"GPU": 2}}},
     ["CPU:0", "GPU:0", "GPU:1"]),
    ({"dflab": {"simulated_devices": {"CPU": 2}}}, ["CPU:0", "CPU:1"]),
])
def test_devices_from_config(kw, want):
    ds = _set(**kw)
    assert [d.short_name for d in ds] == want
    assert [d.name for d in ds] == [f"{TASK}/device:{w}" for w in want]
    # Only the host CPU stands for real hardware on a machine without a GPU backend.
    assert [d.simulated for d in ds] == [w != "CPU:0" for w in want]


def test_preference_order_puts_gpus_first():
    ds = _set(device_count={"CPU": 2, "GPU": 2})
    assert [d.short_name for d in ds.prioritized] == ["GPU:0", "GPU:1", "CPU:0", "CPU:1"]
    assert ds.host.short_name == "CPU:0"


@pytest.mark.parametrize("kw", [
    {"device_count": {"CPU": 0}},
    {"device_count": {"GPU": -1}},
    {"dflab": {"device_params": {"GPU": {"bandwidth_bytes_per_s": 0}}},
     "device_count": {"GPU": 1}},
    {"dflab": {"device_params": {"GPU": {"warp_speed": 9}}}, "device_count": {"GPU": 1}},
    {"dflab": {"device_params": {"CPU": {"latency_s": -1e-6}}}},
])
def test_bad_device_configs(kw):
    with pytest.raises(ValueError):
        _set(**kw)


def test_simulated_gpu_looks_up_cpu_kernels_but_stays_gpu():
    ds = _set(device_count={"GPU": 1})
    gpu = ds["GPU:0"]
    assert gpu.device_type == "GPU" and gpu.kernel_device_type == "CPU"
    assert gpu.xp is np
    ctx = ds.kernel_context(gpu.name)
    assert ctx.device == gpu.name and ctx.device_type == "CPU"
    cpu = ds["CPU:0"]
    assert cpu.kernel_device_type == "CPU" and cpu.device_type == "CPU"


def test_simulated_labels_in_repr_and_list_devices():
    with tf.Session(config=tf.ConfigProto(device_count={"GPU": 2})) as s:
        attrs = s.list_devices()
        assert "(simulated)" in repr(s.devices["GPU:1"])
        assert "(simulated)" not in repr(s.devices["CPU:0"])
    by_name = {a.name: a for a in attrs}
    gpu = by_name[f"{TASK}/device:GPU:0"]
    assert gpu.device_type == "GPU" and gpu.simulated
    assert gpu.physical_device_desc == "simulated (NumPy)"
    assert "simulated" in repr(gpu)
    cpu = by_name[f"{TASK}/device:CPU:0"]
    assert not cpu.simulated and cpu.device_type == "CPU"
    assert [a.name for a in attrs][0].endswith("CPU:0")  # CPUs listed first, as in TF


def test_device_params_defaults_and_overrides():
    ds = _set(device_count={"GPU": 2, "CPU": 2}, dflab={"device_params": {
        "GPU": {"bandwidth_bytes_per_s": 1e9},
        "GPU:1": {"latency_s": 1e-3, "flops_per_s": 1e12},
    }})
    g0, g1, c1 = ds["GPU:0"], ds["GPU:1"], ds["CPU:1"]
    assert g0.bandwidth_bytes_per_s == 1e9 and g1.bandwidth_bytes_per_s == 1e9
    assert g0.latency_s == DEFAULT_PARAMS["GPU"]["latency_s"]
    assert g1.latency_s == 1e-3 and g1.flops_per_s == 1e12
    assert c1.bandwidth_bytes_per_s == DEFAULT_PARAMS["CPU"]["bandwidth_bytes_per_s"]
    with pytest.raises(AttributeError):
        g0.not_a_parameter  # noqa: B018


def test_log_device_placement_prints_device_mapping(capsys):
    _set(device_count={"GPU": 1}, log_device_placement=True)
    err = capsys.readouterr().err
    assert "Device mapping:" in err
    assert f"{TASK}/device:GPU:0 -> device: 0, name: simulated GPU (NumPy)" in err
    _set(log_device_placement=True)
    assert "Device mapping: no known devices." in capsys.readouterr().err


def test_a_real_backend_plugs_into_the_registry(monkeypatch):
    # Stand-in for a CuPy backend: one "real" GPU (computing with NumPy for the test), in place
    # of the registered CuPy one.
    monkeypatch.delitem(devmod._BACKENDS, "GPU")
    made = []

    def make(index, owner=None, params=None, task=devmod.LOCAL_TASK):
        made.append(index)
        return Device("GPU", index, xp=np, owner=owner, params=params, task=task,
                      kernel_device_type="CPU", description="fake GPU")

    devmod.register_backend("GPU", lambda: 1, make)
    try:
        ds = _set(device_count={"GPU": 2})
        assert made == [0]
        assert [(d.short_name, d.simulated) for d in ds if d.device_type == "GPU"] == [
            ("GPU:0", False), ("GPU:1", True)]
        assert [d.short_name for d in _set() if d.device_type == "GPU"] == ["GPU:0"]
        forced = _set(dflab={"simulated_devices": {"GPU": 1}})
        assert forced["GPU:0"].simulated
        with pytest.raises(KeyError):
            devmod.register_backend("GPU", lambda: 1, make)
    finally:
        devmod._BACKENDS.pop("GPU")


# --- memory accounting ----------------------------------------------------------------------------

@pytest.mark.parametrize("steps,in_use,peak", [
    ([("a", 100)], 100, 100),
    ([("a", 100), ("f", 40)], 60, 100),
    ([("a", 100), ("f", 100), ("a", 30)], 30, 100),
    ([("a", 100), ("r", 0), ("f", 50)], 50, 100),
    ([("a", 100), ("f", 60), ("r", 0), ("a", 10)], 50, 50),
    ([("a", 0)], 0, 0),
])
def test_memory_accounting(steps, in_use, peak):
    m = DeviceMemory()
    for kind, n in steps:
        {"a": m.allocate, "f": m.free, "r": lambda _: m.reset_peak()}[kind](n)
    st = m.stats()
    assert (m.bytes_in_use, m.peak_bytes_in_use) == (in_use, peak)
    assert (st["bytes_in_use"], st["peak_bytes_in_use"]) == (in_use, peak)
    assert st["num_allocs"] == sum(k == "a" for k, _ in steps)
    assert st["largest_alloc_size"] == max([n for k, n in steps if k == "a"], default=0)


@pytest.mark.parametrize("bad", [lambda m: m.free(1), lambda m: m.allocate(-1),
                                 lambda m: (m.allocate(5), m.free(6))])
def test_memory_accounting_rejects_impossible_updates(bad):
    m = DeviceMemory()
    with pytest.raises(ValueError):
        bad(m)


def test_memory_accounting_is_thread_safe():
    m = DeviceMemory()
    n_threads, n_iter = 8, 2000

    def work():
        for _ in range(n_iter):
            m.allocate(3)
            m.free(3)
        m.allocate(1)

    threads = [threading.Thread(target=work) for _ in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert m.bytes_in_use == n_threads
    assert m.stats()["num_allocs"] == n_threads * (n_iter + 1)
    assert n_threads <= m.peak_bytes_in_use <= n_threads * 4


def test_every_device_has_its_own_memory_account():
    ds = _set(device_count={"GPU": 2})
    ds["GPU:0"].memory.allocate(10)
    stats = ds.memory_stats()
    assert stats[f"{TASK}/device:GPU:0"]["bytes_in_use"] == 10
    assert stats[f"{TASK}/device:GPU:1"]["bytes_in_use"] == 0
    assert stats[f"{TASK}/device:CPU:0"]["bytes_in_use"] == 0
