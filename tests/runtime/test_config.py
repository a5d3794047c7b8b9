"""dflab's own options: one typed, checked record (``ConfigProto.dflab``), never a dict a typo
slips through."""

import dataclasses
import pickle

import pytest

import dflab as tf
from dflab.runtime.config import DflabOptions


def test_a_misspelt_option_is_an_error_naming_the_valid_ones():
    with pytest.raises(TypeError) as e:
        tf.ConfigProto(dflab={"gpu_step_repaly": True})
    msg = str(e.value)
    assert "'gpu_step_repaly'" in msg and "did you mean 'gpu_step_replay'" in msg
    for name in DflabOptions.names():
        assert name in msg
    with pytest.raises(TypeError, match="Unknown dflab option 'gpu_step_repaly'"):
        tf.ConfigProto().dflab = {"gpu_step_repaly": True}


@pytest.mark.parametrize("options, error, match", [
    ({"gpu_step_replay": 1}, TypeError, "gpu_step_replay must be bool, not int"),
    ({"intra_op_split_products": "no"}, TypeError, "intra_op_split_products must be bool"),
    ({"simulated_devices": {"GPU": 2.0}}, TypeError, r"simulated_devices\['GPU'\] must be int"),
    ({"simulated_devices": {"GPU": True}}, TypeError, "must be int, not bool"),
    ({"simulated_devices": ["GPU"]}, TypeError, "simulated_devices must be dict"),
    ({"simulated_devices": {"GPU": -1}}, ValueError, ">= 0"),
    ({"device_params": {"GPU": {"flops_per_s": "fast"}}}, TypeError, "int or float"),
    ({"device_params": {"GPU": 1e12}}, TypeError, r"device_params\['GPU'\] must be dict"),
    ({"placement": "random"}, ValueError, "Unknown placement policy 'random'"),
    ({"placement": None}, TypeError, "placement must be str"),
    ({"cost_model": {"unknown_dim": 8}}, ValueError, "Unknown cost_model option"),
    ({"cost_model": {"unknown_dim_size": 8.5}}, TypeError, "must be int"),
    ({"ray_namespace": 3}, TypeError, "ray_namespace must be str"),
])
def test_a_value_of_the_wrong_type_or_out_of_range_is_an_error(options, error, match):
    with pytest.raises(error, match=match):
        tf.ConfigProto(dflab=options)


def test_options_are_attributes_with_documented_defaults():
    opts = tf.ConfigProto().dflab
    assert opts == DflabOptions()
    assert (opts.placement, opts.gpu_step_replay, opts.intra_op_split_products,
            opts.ray_namespace, opts.simulated_devices) == ("tf", True, True, None, {})
    assert opts.gpu_allow_tf32 is True  # as TF on Ampere and later
    described = DflabOptions.describe().splitlines()
    assert [line.split(" ", 1)[0] for line in described] == list(DflabOptions.names())
    assert all(": " in line and len(line.split(": ", 1)[1]) > 20 for line in described)


def test_the_dict_form_is_still_accepted_and_copied():
    devices = {"GPU": 2}
    config = tf.ConfigProto(dflab={"simulated_devices": devices, "placement": "cost_model"})
    devices["GPU"] = 5  # the caller's dict, changed afterwards
    assert config.dflab.simulated_devices == {"GPU": 2}
    assert config.dflab.placement == "cost_model"
    assert config.dflab.get("placement") == "cost_model"  # code written against the dict
    with pytest.raises(TypeError, match="Unknown dflab option 'placment'"):
        config.dflab.get("placment")
    with tf.Session(config=config) as sess:
        assert sorted(d.short_name for d in sess.devices) == ["CPU:0", "GPU:0", "GPU:1"]


def test_options_are_frozen_and_replaced_whole():
    config = tf.ConfigProto()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.dflab.gpu_step_replay = False
    config.dflab = dataclasses.replace(config.dflab, gpu_step_replay=False)
    assert config.dflab.gpu_step_replay is False
    with pytest.raises(TypeError, match="must be bool"):
        dataclasses.replace(config.dflab, gpu_step_replay="yes")
    config.dflab = DflabOptions(ray_namespace="lesson")
    assert config.dflab.ray_namespace == "lesson" and config.dflab.gpu_step_replay is True


def test_a_config_travels_to_another_process_with_its_options():
    config = tf.ConfigProto(dflab={"ray_namespace": "ns", "device_params": {"GPU": {
        "latency_s": 1e-5}}})
    back = pickle.loads(pickle.dumps(config))
    assert back.dflab == config.dflab
