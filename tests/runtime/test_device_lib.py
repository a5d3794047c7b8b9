"""``device_lib.list_local_devices`` and the ``OptimizerOptions`` JIT levels, as TF 2.21 gives
them: one ``/device:CPU:0`` with TF's fields on a machine without accelerators (xla_global_id
-1, an empty locality), accelerators after the CPUs, and ``ON_1 = 1``, ``ON_2 = 2``,
``OFF = -1`` beside ``DEFAULT = 0``, ``L1 = 0``, ``L0 = -1``."""

import dflab as tf
from dflab.python.client import device_lib


def test_the_host_is_listed_with_tf_fields():
    devices = device_lib.list_local_devices()
    cpu = devices[0]
    assert cpu.name == "/device:CPU:0"
    assert cpu.device_type == "CPU"
    assert cpu.xla_global_id == -1 and cpu.locality == {}
    assert isinstance(cpu.incarnation, int) and cpu.incarnation > 0
    assert not cpu.simulated
    # What the PTB tutorial does with it:
    assert [x.name for x in devices if x.device_type == "GPU"] == []


def test_simulated_accelerators_follow_the_cpus():
    config = tf.ConfigProto(device_count={"GPU": 2})
    names = [d.name for d in device_lib.list_local_devices(config)]
    assert names == ["/device:CPU:0", "/device:GPU:0", "/device:GPU:1"]
    assert all(d.simulated for d in device_lib.list_local_devices(config)[1:])


def test_tensorflow_python_client_path():
    from dflab.client import device_lib as client_device_lib
    from dflab.python.client import timeline

    assert device_lib is client_device_lib
    assert hasattr(timeline, "Timeline")


def test_optimizer_options_jit_levels():
    opts = tf.OptimizerOptions
    assert (opts.ON_1, opts.ON_2, opts.OFF, opts.DEFAULT, opts.L1, opts.L0) == (1, 2, -1, 0, 0, -1)
    config = tf.ConfigProto()
    config.graph_options.optimizer_options.global_jit_level = tf.OptimizerOptions.ON_1
    with tf.Session(config=config) as sess:
        assert sess.run(tf.constant(3)) == 3
