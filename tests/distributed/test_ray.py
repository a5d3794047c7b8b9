"""The Ray transport: every task a Ray actor of a local Ray instance, tensors crossing tasks
through Ray's object store, and the same results and errors as the in-process cluster."""

import os
import subprocess
import sys
import textwrap
import threading
import time
import uuid

import numpy as np
import pytest
from cluster_test_util import (
    FEED,
    assert_bit_identical,
    cluster_model,
    one_process_results,
    two_clients_share_a_ps_variable,
)

import dflab as tf
from dflab.distributed.ray import client as ray_client
from dflab.distributed.ray import launcher as ray_launcher
from dflab.distributed.server import describe_cluster

CLUSTER = {"ps": ["ps0:2222"], "worker": ["w0:2222", "w1:2222"]}
TASKS = [("ps", 0), ("worker", 0), ("worker", 1)]


def _config(namespace, **kw):
    return tf.ConfigProto(dflab={"ray_namespace": namespace}, **kw)


@pytest.fixture(scope="module")
def cluster(ray_instance):
    """One ps and two workers, each a Ray actor, in a namespace of their own."""
    namespace = f"test-{uuid.uuid4().hex[:8]}"
    spec = tf.train.ClusterSpec(CLUSTER)
    servers = {(job, i): tf.train.Server(spec, job_name=job, task_index=i, protocol="ray",
                                         config=_config(namespace))
               for job, i in TASKS}
    yield servers
    for s in servers.values():
        s.stop()


def test_a_step_across_ray_tasks_is_bit_identical_to_one_process(cluster):
    g = tf.Graph()
    with g.as_default():
        x, _, fetches = cluster_model()
        init = tf.global_variables_initializer()
    target = cluster["worker", 0].target
    assert target.startswith("dflab+ray://") and target.endswith("/worker/0")
    with tf.Session(target, graph=g) as s:
        s.run(init)
        got = s.run(fetches, {x: FEED})
        plan = max(s.master._plans.values(), key=lambda p: len(p.parts))
        assert {p.task for p in plan.parts} == {
            "/job:ps/replica:0/task:0", "/job:worker/replica:0/task:0",
            "/job:worker/replica:0/task:1"}
    assert_bit_identical(got, one_process_results())
    assert list(got[4]) == [b"ps", b"made"]


def test_dead_tensors_of_a_cond_cross_tasks(cluster):
    g = tf.Graph()
    with g.as_default():
        p = tf.placeholder(tf.bool, [])
        with tf.device("/job:worker/task:1"):
            big = tf.fill([3], 5.0)
            taken = tf.cond(p, lambda: big * 2.0, lambda: big - 1.0)
        with tf.device("/job:worker/task:0"):
            out = taken + 1.0
    with tf.Session(cluster["worker", 0].target, graph=g) as s:
        np.testing.assert_array_equal(s.run(out, {p: True}), [11.0] * 3)
        np.testing.assert_array_equal(s.run(out, {p: False}), [5.0] * 3)


def test_variables_on_a_ps_task_are_shared_by_clients_and_outlive_sessions(cluster):
    g1, v1 = two_clients_share_a_ps_variable(
        [cluster["worker", 0].target, cluster["worker", 1].target, cluster["ps", 0].target])
    tasks = describe_cluster(cluster["worker", 0])
    assert [t["transport"] for t in tasks] == ["ray"] * 3
    held = {t["task"]: t["variables"] for t in tasks}["/job:ps/replica:0/task:0"]
    assert {"name": "shared", "device": "/job:ps/replica:0/task:0/device:CPU:0",
            "shape": (2,), "dtype": "float32", "bytes": 8} in held
    # Session.reset clears what the tasks hold.
    tf.Session.reset(cluster["worker", 0].target)
    with tf.Session(cluster["worker", 0].target, graph=g1) as s:
        with pytest.raises(tf.errors.FailedPreconditionError, match="uninitialized"):
            s.run(v1)


def test_a_loop_whose_body_spans_tasks_runs_each_iteration_across_them(cluster):
    g = tf.Graph()
    with g.as_default():
        def body(i, a):
            with tf.device("/job:worker/task:1"):
                a = a * 2.0  # every iteration: there and back again
            return i + 1, a + 1.0

        with tf.device("/job:worker/task:0"):
            n, out = tf.while_loop(lambda i, a: i < 5, body, [tf.constant(0), tf.constant(1.0)])
    with tf.Session(cluster["worker", 0].target, graph=g) as s:
        assert s.run([n, out]) == [5, 63.0]
        plan = max(s.master._plans.values(), key=lambda p: len(p.parts))
        assert len({p.task for p in plan.parts}) == 2


def test_device_filters_narrow_the_tasks_a_session_sees(cluster):
    g = tf.Graph()
    with g.as_default():
        c = tf.constant(2.0) * 3.0
    config = tf.ConfigProto(device_filters=["/job:worker/task:1"])
    with tf.Session(cluster["worker", 1].target, graph=g, config=config) as s:
        assert [d.name for d in s.list_devices()] == [
            "/job:worker/replica:0/task:1/device:CPU:0"]
        assert s.run(c) == 6.0


def test_concurrent_steps_of_clients_do_not_mix(cluster):
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [64])
        with tf.device("/job:worker/task:1"):
            y = x * 2.0
        with tf.device("/job:worker/task:0"):
            z = y + 1.0
    failures, done = [], []

    def client(k):
        try:
            with tf.Session(cluster["worker", k % 2].target, graph=g) as s:
                for i in range(20):
                    v = np.full(64, k * 1000 + i, np.float32)
                    if not np.array_equal(s.run(z, {x: v}), v * 2 + 1):
                        raise AssertionError(f"client {k} step {i} got another step's value")
            done.append(k)
        except BaseException as e:  # noqa: BLE001 - reported below
            failures.append(e)

    threads = [threading.Thread(target=client, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not failures and sorted(done) == [0, 1, 2]


def test_traced_steps_report_each_task_and_the_transfers(cluster):
    g = tf.Graph()
    with g.as_default():
        with tf.device("/job:ps/task:0"):
            a = tf.fill([1000], 2.0)
        with tf.device("/job:worker/task:1"):
            b = a * 3.0
        with tf.device("/job:worker/task:0"):
            c = tf.reduce_sum(b)
    md = tf.RunMetadata()
    options = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)
    with tf.Session(cluster["worker", 0].target, graph=g) as s:
        assert s.run(c, options=options, run_metadata=md) == 6000.0
    devices = [d.device for d in md.step_stats.dev_stats]
    assert devices == sorted(f"{t}/device:CPU:0" for t in (
        "/job:ps/replica:0/task:0", "/job:worker/replica:0/task:0",
        "/job:worker/replica:0/task:1"))
    names = {n.node_name for d in md.step_stats.dev_stats for n in d.node_stats}
    assert {"Fill", "mul", "Sum"} <= names
    crossing = {(t.tensor, t.bytes) for t in md.transfers}
    assert ("Fill:0", 4000) in crossing and ("mul:0", 4000) in crossing
    assert all(t.end_micros >= t.start_micros > 0 for t in md.transfers)


def test_errors_name_the_users_op_and_abort_the_step_on_every_task(cluster):
    g = tf.Graph()
    with g.as_default():
        q = tf.placeholder(tf.float32, [None])
        with tf.device("/job:worker/task:1"):
            bad = tf.reshape(q, [2, 2])
        with tf.device("/job:worker/task:0"):
            out = tf.reduce_sum(bad)
    with tf.Session(cluster["worker", 0].target, graph=g) as s:
        with pytest.raises(tf.errors.InvalidArgumentError, match="Reshape") as info:
            s.run(out, {q: np.ones(3, np.float32)})
        assert info.value.op is bad.op and __file__.split("/")[-1] in str(info.value)
        assert s.run(out, {q: np.ones(4, np.float32)}) == 4.0  # the tasks still serve


def test_stepping_a_step_of_ray_tasks_is_refused_by_the_cluster_worker(cluster):
    from dflab.runtime.stepping import StepRun

    g = tf.Graph()
    with g.as_default():
        with tf.device("/job:ps/task:0"):
            a = tf.fill([4], 2.0)
        with tf.device("/job:worker/task:0"):
            b = tf.reduce_sum(a * 3.0)
    with tf.Session(cluster["worker", 0].target, graph=g) as s:
        with pytest.raises(tf.errors.UnimplementedError, match="protocol='ray'") as info:
            StepRun(s, b)
        assert "/job:ps/replica:0/task:0" in str(info.value)
        assert s.run(b) == 24.0  # the refusal left the tasks serving


def test_a_step_past_its_timeout_fails_within_it(cluster):
    g = tf.Graph()
    with g.as_default():
        with tf.device("/job:worker/task:1"):
            queue = tf.FIFOQueue(1, tf.float32)
            never = queue.dequeue()  # nothing is ever enqueued
        with tf.device("/job:worker/task:0"):
            out = never + 1.0
    options = tf.RunOptions(timeout_in_ms=1500)
    with tf.Session(cluster["worker", 0].target, graph=g) as s:
        start = time.monotonic()
        with pytest.raises(tf.errors.DeadlineExceededError):
            s.run(out, options=options)
        assert time.monotonic() - start < 10


def test_bad_targets_get_tf_errors(cluster, ray_instance):
    with pytest.raises(tf.errors.InvalidArgumentError, match="Malformed Ray target"):
        tf.Session("dflab+ray://only-a-namespace")
    with pytest.raises(tf.errors.UnavailableError, match="No task serves"):
        tf.Session("dflab+ray://no-such-namespace/worker/0")
    with pytest.raises(tf.errors.UnknownError, match="already running"):
        ns = cluster["worker", 0].target.split("//")[1].split("/")[0]
        tf.train.Server(tf.train.ClusterSpec(CLUSTER), job_name="worker", task_index=0,
                        protocol="ray", config=_config(ns))
    with pytest.raises(ValueError, match="Task 5 is not in job 'worker'"):
        tf.train.Server(tf.train.ClusterSpec(CLUSTER), job_name="worker", task_index=5,
                        protocol="ray")
    with pytest.raises(ValueError, match="Unknown protocol"):
        tf.train.Server(tf.train.ClusterSpec(CLUSTER), job_name="ps", protocol="udp")
    g = tf.Graph()
    with g.as_default(), tf.device("/job:chief/task:0"):
        c = tf.constant(1.0) + 1.0
    with tf.Session(cluster["worker", 0].target, graph=g) as s:
        with pytest.raises(tf.errors.InvalidArgumentError, match="/job:chief"):
            s.run(c)


def _wait_for(predicate, seconds=60):
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.2)


def test_a_restarted_task_aborts_the_step_and_a_killed_one_fails_it_naming_it(ray_instance):
    import ray

    namespace = f"test-{uuid.uuid4().hex[:8]}"
    spec = tf.train.ClusterSpec({"ps": ["ps0:1"], "worker": ["w0:1"]})
    ps_actor = ray_launcher.start_task(spec, "ps", 0, namespace, max_restarts=1)
    worker = tf.train.Server(spec, job_name="worker", task_index=0, protocol="ray",
                             config=_config(namespace))

    def incarnation():
        try:
            return ray.get(ps_actor.ping.remote(), timeout=30)
        except ray_client.TASK_GONE:
            return None

    try:
        with tf.device("/job:ps/task:0"):
            v = tf.Variable(3.0)
        with tf.device("/job:worker/task:0"):
            out = v * 2.0
        config = tf.ConfigProto(operation_timeout_in_ms=20000)
        with tf.Session(worker.target, config=config) as s:
            s.run(v.initializer)
            assert s.run(out) == 6.0
            first = incarnation()
            ray.kill(ps_actor, no_restart=False)  # Ray brings it back, empty
            _wait_for(lambda: incarnation() not in (None, first))
            with pytest.raises(tf.errors.AbortedError,
                               match="/job:ps/replica:0/task:0 restarted"):
                s.run(out)
            ray.kill(ps_actor, no_restart=True)
            _wait_for(lambda: not ray_launcher.alive(ps_actor))
            start = time.monotonic()
            with pytest.raises(tf.errors.UnavailableError,
                               match=r"/job:ps/replica:0/task:0 \(on [^)]+\) is unavailable"):
                s.run(out)
            assert time.monotonic() - start < 20
    finally:
        worker.stop()
        ray.kill(ps_actor, no_restart=True)


def _client(task):
    """A between-graph replication client: its own graph, a counter on the ps shared by every
    worker's client; each adds its weight 5 times and waits for the others' updates."""
    import time

    import dflab as tf

    with tf.device("/job:ps/task:0"):
        counter = tf.Variable(0.0, name="counter")
    with tf.device(f"/job:worker/task:{task.task_index}"):
        delta = tf.constant(1.0) * (task.task_index + 1)
    inc = counter.assign_add(delta)  # on the ps, with its variable
    ready = tf.is_variable_initialized(counter)
    with tf.Session(task.target) as s:
        if task.task_index == 0:
            s.run(counter.initializer)
        while not s.run(ready):
            time.sleep(0.05)
        for _ in range(5):
            s.run(inc)
        deadline = time.monotonic() + 60
        while s.run(counter) < 15.0 and time.monotonic() < deadline:
            time.sleep(0.05)
        return [task.task, os.getpid(), float(s.run(counter))]


def test_launch_runs_a_client_per_worker_task_sharing_the_ps(ray_instance):
    results = ray_launcher.launch(_client, {"ps": 1, "worker": 2}, timeout=240)
    assert [r[0] for r in results] == ["/job:worker/replica:0/task:0",
                                      "/job:worker/replica:0/task:1"]
    assert [r[2] for r in results] == [15.0, 15.0]  # 5 * 1 + 5 * 2, seen by both clients
    assert len({r[1] for r in results} | {os.getpid()}) == 3  # one process per task


def _failing_client(task):
    import dflab as tf

    q = tf.placeholder(tf.float32, [None])
    with tf.Session(task.target) as s:
        return s.run(tf.reshape(q, [2, 2]), {q: [1.0, 2.0, 3.0]})


def test_launch_reraises_a_clients_error(ray_instance):
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"(?s)client of /job:worker/replica:0/task:0.*Reshape "
                             r"\(defined at .*test_ray.py:\d+"):
        ray_launcher.launch(_failing_client, {"worker": 1})


def test_one_os_process_per_task_against_a_running_ray_cluster(ray_instance):
    """TF's way: a process runs tf.train.Server(...) and joins; this process is the client."""
    namespace = f"test-{uuid.uuid4().hex[:8]}"
    address = ray_instance.get_runtime_context().gcs_address
    script = textwrap.dedent(f"""
        import dflab as tf
        spec = tf.train.ClusterSpec({{"ps": ["ps0:1"], "worker": ["w0:1"]}})
        config = tf.ConfigProto(dflab={{"ray_namespace": {namespace!r}}})
        server = tf.train.Server(spec, job_name="ps", task_index=0, protocol="ray",
                                 config=config)
        print("serving", server.target, flush=True)
        server.join()
    """)
    env = {**os.environ, "RAY_ADDRESS": address}
    proc = subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("serving dflab+ray://"), proc.stderr.read()
        spec = tf.train.ClusterSpec({"ps": ["ps0:1"], "worker": ["w0:1"]})
        worker = tf.train.Server(spec, job_name="worker", task_index=0, protocol="ray",
                                 config=_config(namespace))
        try:
            with tf.device("/job:ps/task:0"):
                w = tf.Variable([1.0, 2.0])
            with tf.device("/job:worker/task:0"):
                y = w * 10.0
            with tf.Session(worker.target) as s:
                s.run(w.initializer)
                np.testing.assert_array_equal(s.run(y), [10.0, 20.0])
                procs = {t["task"]: t["running"] for t in describe_cluster(s)}
                assert procs == {"/job:ps/replica:0/task:0": True,
                                 "/job:worker/replica:0/task:0": True}
        finally:
            worker.stop()
    finally:
        proc.kill()
        proc.wait(30)


def _sync_replica(task):
    """A between-graph client of synchronous training with one backup worker (2 of 3)."""
    import time

    import dflab as tf

    with tf.device(tf.train.replica_device_setter(
            cluster=task.cluster_spec, worker_device=f"/job:worker/task:{task.task_index}")):
        gs = tf.train.get_or_create_global_step()
        emb = tf.get_variable("emb", [100, 4], initializer=tf.ones_initializer(),
                              partitioner=tf.fixed_size_partitioner(2))
        rows = tf.nn.embedding_lookup(emb, tf.constant([3, 50, 97]), partition_strategy="div")
        opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.1), 2, 3)
        train = opt.minimize(tf.reduce_sum(rows), global_step=gs)
        stop_tokens = opt._sync_token_queue.close(cancel_pending_enqueues=True)
        table = tf.identity(tf.convert_to_tensor(emb))
    hooks = [opt.make_session_run_hook(is_chief=task.task_index == 0),
             tf.train.StopAtStepHook(last_step=4)]
    steps = 0
    with tf.train.MonitoredTrainingSession(master=task.target, is_chief=task.task_index == 0,
                                           hooks=hooks, stop_grace_period_secs=2,
                                           config=tf.ConfigProto(operation_timeout_in_ms=60000)
                                           ) as s:
        try:
            while not s.should_stop():
                time.sleep(0.3 if task.task_index == 2 else 0.0)  # the straggler
                s.run(train)
                steps += 1
        except tf.errors.OutOfRangeError:
            pass
        s.run(stop_tokens)
        return steps, int(s.run(gs)), s.run(table)


def test_synchronous_training_with_a_backup_worker_and_a_sharded_embedding_on_ray(
        ray_instance):
    results = ray_launcher.launch(_sync_replica, {"ps": 2, "worker": 3}, timeout=300)
    updates = max(r[1] for r in results)
    assert updates >= 4
    table = next(r[2] for r in results if r[1] == updates)
    # Each update is the mean of two gradients of ones on the three rows looked up.
    want = np.ones((100, 4), np.float32)
    for _ in range(updates):
        want[[3, 50, 97]] = want[[3, 50, 97]] - np.float32(0.1)
    np.testing.assert_allclose(table, want, rtol=1e-6)
