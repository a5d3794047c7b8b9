"""Tasks that really leave the head node: a Ray cluster of three nodes on this machine
(``ray.cluster_utils.Cluster``, three raylets, one logical GPU each standing for a real one):
placement by ClusterSpec address, by policy and by label; GPUs given per job reaching each task
as its /gpu:0; training across nodes equal to training in one process; a node removed under a
ps and the training recovered on the nodes left."""

import time
import uuid

import numpy as np
import pytest
from cluster_test_util import recovery_model

import dflab as tf
from dflab.distributed import describe_cluster, launch
from dflab.distributed.ray import launcher as ray_launcher
from dflab.distributed.ray.targets import target_of

pytestmark = pytest.mark.slow
NODES = ("nodeA", "nodeB", "nodeC")
START_ATTEMPTS = 3  # a raylet given too little time to start on a loaded machine: start again


@pytest.fixture(scope="module")
def nodes():
    """Three Ray nodes (the first the head), named and labelled, each with a logical GPU; the
    local Ray instance of the other modules is stopped first and started again after."""
    import ray
    from ray.cluster_utils import Cluster

    ray.shutdown()
    for attempt in range(START_ATTEMPTS):
        cluster = Cluster(initialize_head=False)
        try:
            cluster.by_name = {name: cluster.add_node(**_node_args(k))
                               for k, name in enumerate(NODES)}
            ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False,
                     configure_logging=False)
            cluster.wait_for_nodes()
            break
        except Exception as e:  # noqa: BLE001 - Ray raises a bare Exception here
            ray.shutdown()
            cluster.shutdown()
            if "timed out during startup" not in str(e) or attempt + 1 == START_ATTEMPTS:
                raise
    yield cluster
    ray.shutdown()
    cluster.shutdown()


def _node_args(k):
    return {"num_cpus": 1, "num_gpus": 1, "node_name": NODES[k],
            "labels": {"zone": "abc"[k]}, "object_store_memory": 128 * 1024 * 1024}


def _where(task):
    """What a launched client reports: every task's node and GPU ids."""
    return {t["task"]: (t["node"], tuple(t["gpu_ids"]))
            for t in describe_cluster(task.target)}


def test_spread_puts_each_task_on_a_node_of_its_own(nodes):
    for policy in ("strict_spread", "spread"):
        [where, _] = launch(_where, {"ps": 1, "worker": 2}, placement=policy, timeout=300)
        assert sorted(node for node, _ in where.values()) == sorted(NODES), (policy, where)


def test_pack_keeps_the_tasks_together(nodes):
    [where] = launch(_where, {"ps": 1, "worker": 1}, placement="strict_pack", timeout=300)
    assert len({node for node, _ in where.values()}) == 1


def test_the_cluster_spec_and_pins_say_where_tasks_run(nodes):
    spec = {"ps": ["nodeC:2222"], "worker": ["nodeA:2222", "nodeB:2222"]}
    [where, _] = launch(_where, spec, timeout=300)
    assert {t: n for t, (n, _) in where.items()} == {
        "/job:ps/replica:0/task:0": "nodeC", "/job:worker/replica:0/task:0": "nodeA",
        "/job:worker/replica:0/task:1": "nodeB"}
    # A label or a node name pins a task whatever its address says.
    [where, _] = launch(_where, spec, pins={"ps": {"zone": "a"}, "worker:1": "nodeC"},
                        timeout=300)
    assert where["/job:ps/replica:0/task:0"][0] == "nodeA"
    assert where["/job:worker/replica:0/task:1"][0] == "nodeC"
    with pytest.raises(ValueError, match="nodeZ"):
        launch(_where, spec, pins={"ps": "nodeZ"}, timeout=300)


def _gpu_client(task):
    """A client using its task's /gpu:0, and what its devices are."""
    with tf.device(f"/job:worker/task:{task.task_index}/device:GPU:0"):
        y = tf.reduce_sum(tf.ones([4]) * 2.0)
    with tf.Session(task.target) as s:
        value = s.run(y)
    mine = next(t for t in describe_cluster(task.target) if t["task"] == task.task)
    return value, mine["gpu_ids"], [d["name"] for d in mine["devices"]], task.node


def test_gpus_given_per_job_reach_each_task_as_its_gpu_0(nodes):
    results = launch(_gpu_client, {"ps": 1, "worker": 2},
                     resources={"worker": {"num_gpus": 1}}, timeout=300)
    assert len({node for *_, node in results}) == 2  # one GPU per node: two nodes
    for value, gpu_ids, devices, _ in results:
        assert value == 8.0 and len(gpu_ids) == 1
        assert any(d.endswith("/device:GPU:0") for d in devices)
        assert not any(d.endswith("/device:GPU:1") for d in devices)


def _model(spec):
    """A linear model on ``spec``'s ps, trained by SGD: ``(w, train)``."""
    with tf.device(tf.train.replica_device_setter(cluster=spec)):
        w = tf.Variable(np.linspace(-1, 1, 6, dtype=np.float32).reshape(3, 2), name="w")
        x = tf.constant(np.arange(12, dtype=np.float32).reshape(4, 3) / 10)
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - 1.0))
        return w, tf.train.GradientDescentOptimizer(0.1).minimize(loss)


def _ten_steps(sess, w, train):
    sess.run(tf.global_variables_initializer())
    for _ in range(10):
        sess.run(train)
    return sess.run(w)


def _train(task):
    """Ten SGD steps on the ps's variables from one worker: the final weights, and where
    the tasks ran."""
    w, train = _model(task.cluster_spec)
    with tf.Session(task.target) as s:
        return _ten_steps(s, w, train), _where(task)


def test_training_across_nodes_equals_training_in_one_process(nodes):
    [(got, where)] = launch(_train, {"ps": 1, "worker": 1}, placement="strict_spread",
                            timeout=300)
    assert len({node for node, _ in where.values()}) == 2
    g = tf.Graph()
    with g.as_default():
        w, train = _model(tf.train.ClusterSpec({"ps": ["a:1"], "worker": ["b:1"]}))
        with tf.Session(config=tf.ConfigProto(allow_soft_placement=True)) as s:
            want = _ten_steps(s, w, train)
    np.testing.assert_array_equal(got, want)


LAST_STEP, REMOVE_AT = 12, 8  # the latest checkpoint then holds step 5


def test_a_node_removed_under_the_ps_fails_the_step_naming_it_and_training_recovers(
        nodes, tmp_path, caplog):
    import ray

    namespace = f"nodes-{uuid.uuid4().hex[:8]}"
    spec = tf.train.ClusterSpec({"ps": ["nodeC:1"], "worker": ["nodeA:1"]})
    # Restartable: where its node goes, Ray starts the task again (empty) on another one.
    actors = {job: ray_launcher.start_task(spec, job, 0, namespace, max_restarts=1)
              for job in ("ps", "worker")}
    target = target_of(namespace, "worker", 0)
    node_c = nodes.by_name["nodeC"]
    try:
        assert {t["task"]: t["node"] for t in describe_cluster(target)} == {
            "/job:ps/replica:0/task:0": "nodeC", "/job:worker/replica:0/task:0": "nodeA"}
        train, step_now, w_now = recovery_model(spec)
        seen = []
        hooks = [tf.train.StopAtStepHook(last_step=LAST_STEP)]
        config = tf.ConfigProto(operation_timeout_in_ms=60000)
        with tf.train.MonitoredTrainingSession(
                master=target, is_chief=True, checkpoint_dir=str(tmp_path),
                save_checkpoint_steps=5, save_checkpoint_secs=None, hooks=hooks,
                log_step_count_steps=0, config=config) as sess:
            while not sess.should_stop() and len(seen) < 3 * LAST_STEP:
                sess.run(train)
                seen.append(int(sess.run(step_now)))
                if seen[-1] == REMOVE_AT and node_c is not None:
                    nodes.remove_node(node_c)
                    node_c = None
                    time.sleep(1.0)
            assert sess.recoveries == 1
            final_step, final_w = sess.run([step_now, w_now])
        assert seen[REMOVE_AT:] == list(range(6, LAST_STEP + 1))
        assert final_step == LAST_STEP
        np.testing.assert_allclose(final_w, 10.0 - 0.5 * LAST_STEP)
        # The failed step named the task and the node it was on.
        assert any("/job:ps/replica:0/task:0 (on nodeC)" in r.getMessage()
                   for r in caplog.records), [r.getMessage() for r in caplog.records]
        assert {t["task"]: t["node"] for t in describe_cluster(target)}[
            "/job:ps/replica:0/task:0"] in ("nodeA", "nodeB")
    finally:
        for actor in actors.values():
            ray.kill(actor, no_restart=True)
