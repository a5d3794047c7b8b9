"""tf.debugging.set_log_device_placement: sessions made later without a config log their
placements (as TF 2.x's Session starts from its context's config); explicit configs win."""

import pytest

import dflab as tf


@pytest.fixture(autouse=True)
def _restore():
    yield
    tf.debugging.set_log_device_placement(False)


def test_default_is_off_and_the_switch_is_read_back():
    assert tf.debugging.get_log_device_placement() is False
    tf.debugging.set_log_device_placement(True)
    assert tf.debugging.get_log_device_placement() is True
    tf.debugging.set_log_device_placement(0)
    assert tf.debugging.get_log_device_placement() is False


def test_sessions_without_config_log_placements(capsys):
    with tf.Graph().as_default():
        tf.add(tf.constant(1.0), 2.0, name="logged_add")
        tf.debugging.set_log_device_placement(True)
        with tf.Session() as s:
            assert s.run("logged_add:0") == 3.0
        assert "logged_add: (AddV2)" in capsys.readouterr().err
        with tf.Session(config=tf.ConfigProto()) as s:  # an explicit config is kept
            s.run("logged_add:0")
        assert "logged_add" not in capsys.readouterr().err
        tf.debugging.set_log_device_placement(False)
        with tf.Session() as s:
            s.run("logged_add:0")
        assert "logged_add" not in capsys.readouterr().err
