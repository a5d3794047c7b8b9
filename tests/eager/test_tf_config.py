"""``tf.config``: physical and logical devices, what may be set before the eager context makes
its devices (and TF's RuntimeError after), soft placement, threads, and functions run eagerly.
Expected values and messages were read off TensorFlow 2.21 running the same calls."""

from __future__ import annotations

import copy

import pytest

import dflab as tf
from dflab import config as tf_config
from dflab.eager import context as eager_context_module
from dflab.eager import eager_mode


@pytest.fixture
def fresh_context():
    """A new eager context, as a new process has (the process's own is put back after)."""
    saved = (eager_context_module._context, eager_context_module._pending_config,
             eager_context_module.soft_placement(), copy.deepcopy(tf_config._state))
    eager_context_module._context = None
    eager_context_module._pending_config = None
    tf_config._state.update(visible=None, logical={}, memory_growth={})
    try:
        with eager_mode():
            yield
    finally:
        ctx = eager_context_module._context
        if ctx is not None:
            ctx.close()
        (eager_context_module._context, eager_context_module._pending_config, soft,
         state) = saved
        eager_context_module.set_soft_placement(soft)
        tf_config._state.clear()
        tf_config._state.update(state)
        tf.config.run_functions_eagerly(False)


def test_physical_devices_and_logical_cpus_set_before_the_devices_are_made(fresh_context):
    cpu, = tf.config.list_physical_devices("CPU")
    assert cpu == tf.config.PhysicalDevice("/physical_device:CPU:0", "CPU")
    assert tf.config.get_visible_devices("CPU") == [cpu]
    assert tf.config.get_logical_device_configuration(cpu) is None
    two = [tf.config.LogicalDeviceConfiguration()] * 2
    tf.config.set_logical_device_configuration(cpu, two)
    assert tf.config.get_logical_device_configuration(cpu) == two
    tf.config.threading.set_intra_op_parallelism_threads(1)
    assert tf.config.threading.get_intra_op_parallelism_threads() == 1
    assert tf.config.list_logical_devices() == [
        tf.config.LogicalDevice("/device:CPU:0", "CPU"),
        tf.config.LogicalDevice("/device:CPU:1", "CPU")]
    with tf.device("/cpu:1"):
        x = tf.constant(2.0) * 3.0
    assert x.device.endswith("CPU:1") and float(x) == 6.0
    with pytest.raises(RuntimeError, match="Virtual devices cannot be modified after being "
                                           "initialized"):
        tf.config.set_logical_device_configuration(cpu, two[:1])
    with pytest.raises(RuntimeError, match="Intra op parallelism cannot be modified after "
                                           "initialization."):
        tf.config.threading.set_intra_op_parallelism_threads(2)
    tf.config.threading.set_intra_op_parallelism_threads(1)  # the value it has: allowed
    tf.config.set_logical_device_configuration(cpu, two)  # likewise (a cell run again)
    tf.config.set_visible_devices([cpu])  # what is set already: allowed, as TF's
    with pytest.raises(ValueError, match="Cannot set memory growth on non-GPU"):
        tf.config.experimental.set_memory_growth(cpu, True)
    with pytest.raises(ValueError, match="cannot be hidden"):
        tf.config.set_visible_devices([], "CPU")
    with pytest.raises(ValueError, match="Unrecognized device"):
        tf.config.get_logical_device_configuration(
            tf.config.PhysicalDevice("/physical_device:TPU:0", "TPU"))


def test_soft_placement_can_be_turned_off_and_on(fresh_context):
    assert tf.config.get_soft_device_placement()
    tf.config.set_soft_device_placement(False)
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match="Could not satisfy device specification '/device:GPU:7'"):
        with tf.device("/gpu:7"):
            tf.constant(1.0) + 1.0
    tf.config.set_soft_device_placement(True)
    with tf.device("/gpu:7"):
        assert (tf.constant(1.0) + 1.0).device.endswith("CPU:0")


def test_run_functions_eagerly_runs_the_python_as_written(fresh_context):
    seen = []

    @tf.function
    def f(x):
        seen.append(type(x).__name__)
        return x + 1

    tf.config.run_functions_eagerly(True)
    assert tf.config.functions_run_eagerly()
    assert [int(f(tf.constant(i))) for i in (1, 2)] == [2, 3]
    tf.config.experimental_run_functions_eagerly(False)
    assert not tf.config.experimental_functions_run_eagerly()
    assert [int(f(tf.constant(i))) for i in (1, 2)] == [2, 3]
    assert seen == ["EagerTensor", "EagerTensor", "Tensor"]  # then one trace for both calls


def test_optimizer_switches_are_kept_as_set(fresh_context):
    assert tf.config.optimizer.get_jit() == ""
    tf.config.optimizer.set_jit(True)
    assert tf.config.optimizer.get_jit() == "autoclustering"
    tf.config.optimizer.set_experimental_options({"constant_folding": False})
    assert tf.config.optimizer.get_experimental_options() == {
        "constant_folding": False, "disable_model_pruning": False,
        "disable_meta_optimizer": False}
