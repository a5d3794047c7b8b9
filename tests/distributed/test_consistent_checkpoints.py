"""Checkpoints of variables spread over several ps tasks are one snapshot: while clients train
asynchronously, a save never catches a step applied on one ps task and not yet on the other.

Every step adds 1 to ``v1`` (on ps 0) and then, ordered after it, to ``v2`` (on ps 1), so at
every point between steps ``v1 == v2``; each checkpoint must hold equal values. Links between
tasks are slowed (in-process) so that a half-applied step lasts long enough for an unguarded
save to catch it. Run on both transports, with reference and resource variables."""

import threading
import time
import uuid

import numpy as np
import pytest

import dflab as tf
from dflab.distributed import clear_network, simulate_network

STEPS_PER_CLIENT = 12
CLIENTS = 2
SAVES = 6


def _model(use_resource: bool):
    """``v1`` on ps 0, ``v2`` on ps 1, and a step that adds 1 to v1 then to v2."""
    with tf.device("/job:ps/task:0"):
        v1 = tf.get_variable("v1", initializer=0.0, use_resource=use_resource)
    with tf.device("/job:ps/task:1"):
        v2 = tf.get_variable("v2", initializer=0.0, use_resource=use_resource)
    with tf.device("/job:worker/task:0"):
        one = tf.constant(1.0)
    first = v1.assign_add(one)
    with tf.control_dependencies([first]):
        second = v2.assign_add(one)
    return v1, v2, tf.group(first, second)


def _train_and_save(targets, save_target, tmp_path, use_resource):
    """Clients on ``targets`` train concurrently while a chief on ``save_target`` saves;
    returns the checkpoints' (v1, v2) pairs and the final values."""
    g = tf.Graph()
    with g.as_default():
        v1, v2, step = _model(use_resource)
        init = tf.global_variables_initializer()
        saver = tf.train.Saver([v1, v2], max_to_keep=None)
    config = tf.ConfigProto(operation_timeout_in_ms=60000)
    errors = []

    def client(target):
        try:
            with tf.Session(target, graph=g, config=config) as s:
                for _ in range(STEPS_PER_CLIENT):
                    s.run(step)
        except Exception as e:  # noqa: BLE001 - reported by the test below
            errors.append(e)

    paths = []
    with tf.Session(save_target, graph=g, config=config) as chief:
        chief.run(init)
        threads = [threading.Thread(target=client, args=(t,), daemon=True) for t in targets]
        for t in threads:
            t.start()
        for k in range(SAVES):
            paths.append(saver.save(chief, str(tmp_path / "model"), global_step=k))
            time.sleep(0.01)
        for t in threads:
            t.join(120)
        assert not any(t.is_alive() for t in threads), "a client hung"
        final = chief.run([v1, v2])
    assert not errors, errors
    pairs = []
    for path in paths:
        reader = tf.train.load_checkpoint(path)
        pairs.append((float(reader.get_tensor("v1")), float(reader.get_tensor("v2"))))
    return pairs, final


def _assert_consistent(pairs, final):
    assert final == [CLIENTS * STEPS_PER_CLIENT] * 2
    for a, b in pairs:
        assert a == b, f"a checkpoint caught a step half applied: v1={a}, v2={b} ({pairs})"
    assert np.all(np.diff([a for a, _ in pairs]) >= 0)


@pytest.mark.parametrize("use_resource", [False, True])
def test_in_process_checkpoints_across_ps_tasks_are_one_snapshot(tmp_path, use_resource):
    tag = uuid.uuid4().hex[:6]
    spec = tf.train.ClusterSpec({"ps": [f"cc-ps0-{tag}:1", f"cc-ps1-{tag}:1"],
                                 "worker": [f"cc-w0-{tag}:1", f"cc-w1-{tag}:1"]})
    servers = [tf.train.Server(spec, job_name=j, task_index=i)
               for j, i in [("ps", 0), ("ps", 1), ("worker", 0), ("worker", 1)]]
    # A step's update of v1 reaches ps 1 (to order v2's update after it) 20 ms later: long
    # enough for an unguarded save to read v1 after the step and v2 before it.
    simulate_network(spec, latency_s=0.02)
    try:
        pairs, final = _train_and_save([servers[2].target, servers[3].target],
                                       servers[2].target, tmp_path, use_resource)
    finally:
        clear_network(spec)
        for s in servers:
            s.stop()
    _assert_consistent(pairs, final)
    assert any(0 < a < CLIENTS * STEPS_PER_CLIENT for a, _ in pairs), \
        f"no checkpoint was taken during training: {pairs}"


def test_ray_checkpoints_across_ps_tasks_are_one_snapshot(tmp_path, ray_instance):
    namespace = f"cc-{uuid.uuid4().hex[:8]}"
    spec = tf.train.ClusterSpec({"ps": ["ps0:1", "ps1:1"], "worker": ["w0:1"]})
    config = tf.ConfigProto(dflab={"ray_namespace": namespace})
    servers = [tf.train.Server(spec, job_name=j, task_index=i, protocol="ray", config=config)
               for j, i in [("ps", 0), ("ps", 1), ("worker", 0)]]
    try:
        target = servers[2].target
        pairs, final = _train_and_save([target] * CLIENTS, target, tmp_path, False)
    finally:
        for s in servers:
            s.stop()
    _assert_consistent(pairs, final)
