"""tf.train.Server and sessions on an in-process cluster: placement across tasks, tensors
crossing tasks, state that outlives sessions, and TF's errors for bad input."""

import threading

import numpy as np
import pytest
from cluster_test_util import (
    assert_bit_identical,
    cluster_model,
    one_process_results,
    two_clients_share_a_ps_variable,
)

import dflab as tf

CLUSTER = {"ps": ["ps0:2222"], "worker": ["w0:2222", "w1:2222"]}


@pytest.fixture
def cluster():
    """One ps and two workers, started; stopped (state dropped, addresses freed) afterwards."""
    spec = tf.train.ClusterSpec(CLUSTER)
    servers = {(job, i): tf.train.Server(spec, job_name=job, task_index=i)
               for job, i in [("ps", 0), ("worker", 0), ("worker", 1)]}
    yield servers
    for s in servers.values():
        s.stop()


def _model_session(cluster):
    """``cluster_model`` in a session on worker 0, initialized: ``(session, x, fetches)``."""
    g = tf.Graph()
    with g.as_default():
        x, _, fetches = cluster_model()
        init = tf.global_variables_initializer()
    s = tf.Session(cluster["worker", 0].target, graph=g)
    s.run(init)
    return s, x, fetches


def test_a_distributed_step_places_across_tasks_and_matches_one_process(cluster):
    feed = np.arange(6, dtype=np.float32).reshape(3, 2) / 4
    s, x, fetches = _model_session(cluster)
    with s:
        got = s.run(fetches, {x: feed})
        plan = max(s.master._plans.values(), key=lambda p: len(p.parts))
        tasks = {p.device.split("/device:")[0] for p in plan.parts}
        # Each partition is registered with the worker of its task...
        held = {k: len(srv.worker._partitions) for k, srv in cluster.items()}
        assert all(n >= 1 for n in held.values()), held
    # ...and deregistered when the session ends (the tasks' state stays).
    assert all(not srv.worker._partitions for srv in cluster.values())
    assert tasks == {"/job:ps/replica:0/task:0", "/job:worker/replica:0/task:0",
                     "/job:worker/replica:0/task:1"}
    assert_bit_identical(got, one_process_results(feed))
    assert list(got[4]) == [b"ps", b"made"]


def test_unplaced_ops_run_on_the_target_task(cluster):
    g = tf.Graph()
    with g.as_default():
        a = tf.constant(2.0) * 3.0
    with tf.Session(cluster["worker", 1].target, graph=g) as s:
        assert s.run(a) == 6.0
        plan = next(iter(s.master._plans.values()))
        assert plan.placement[a.op].device == "/job:worker/replica:0/task:1/device:CPU:0"


def test_state_on_a_task_outlives_sessions_and_is_shared_by_clients(cluster):
    g1, v1 = two_clients_share_a_ps_variable(
        [cluster["worker", 0].target, cluster["worker", 1].target, cluster["ps", 0].target])
    # Stopping the ps drops its state: a new ps task starts empty.
    cluster["ps", 0].stop()
    cluster["ps", 0].start()
    with tf.Session(cluster["worker", 0].target, graph=g1) as s:
        with pytest.raises(tf.errors.FailedPreconditionError, match="uninitialized"):
            s.run(v1)


def test_concurrent_steps_of_two_clients_do_not_mix(cluster):
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [64])
        with tf.device("/job:worker/task:1"):
            y = x * 2.0
        with tf.device("/job:worker/task:0"):
            z = y + 1.0
    errors, results = [], {}

    def client(k):
        try:
            with tf.Session(cluster["worker", 0].target, graph=g) as s:
                for i in range(50):
                    v = np.full(64, k * 1000 + i, np.float32)
                    got = s.run(z, {x: v})
                    if not np.array_equal(got, v * 2 + 1):
                        raise AssertionError(f"client {k} step {i} got another step's value")
                results[k] = True
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=client, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors and len(results) == 3


def test_create_local_server_and_join():
    a = tf.train.Server.create_local_server()
    b = tf.train.Server.create_local_server()
    try:
        assert a.target != b.target and a.target.startswith("grpc://localhost:")
        g = tf.Graph()
        with g.as_default():
            c = tf.constant([1, 2, 3]) * 2
        with tf.Session(a.target, graph=g) as s:
            np.testing.assert_array_equal(s.run(c), [2, 4, 6])
            assert [d.name for d in s.list_devices()] == [
                "/job:localhost/replica:0/task:0/device:CPU:0"]
        assert a.join(timeout=0.05) is False
        a.stop()
        assert a.join(timeout=1) is True
    finally:
        a.stop()
        b.stop()


def test_bad_cluster_input_gets_tf_errors(cluster):
    spec = tf.train.ClusterSpec(CLUSTER)
    with pytest.raises(ValueError, match="Job 'chief' is not in the cluster"):
        tf.train.Server(spec, job_name="chief", task_index=0)
    with pytest.raises(ValueError, match="Task 5 is not in job 'worker'"):
        tf.train.Server(spec, job_name="worker", task_index=5)
    with pytest.raises(ValueError, match="explicit `task_index`"):
        tf.train.Server(spec, job_name="worker")
    with pytest.raises(ValueError, match="explicit `job_name`"):
        tf.train.Server(spec)
    with pytest.raises(ValueError, match="Unknown protocol"):
        tf.train.Server(spec, job_name="ps", task_index=0, protocol="rdma", start=False)
    with pytest.raises(tf.errors.UnknownError, match="ps0:2222 is in use"):
        tf.train.Server(spec, job_name="ps", task_index=0)  # the fixture's ps holds it
    with pytest.raises(tf.errors.UnavailableError, match="No server is running at nowhere:1"):
        tf.Session("grpc://nowhere:1")
    with pytest.raises(tf.errors.NotFoundError, match="No session factory"):
        tf.Session("carrier-pigeon://w0")
    g = tf.Graph()
    with g.as_default(), tf.device("/job:chief/task:0"):
        c = tf.constant(1.0) + 1.0
    with tf.Session(cluster["worker", 0].target, graph=g) as s:
        with pytest.raises(tf.errors.InvalidArgumentError, match="job:chief"):
            s.run(c)


def test_device_filters_narrow_what_a_session_sees(cluster):
    config = tf.ConfigProto(device_filters=["/job:ps", "/job:worker/task:1"])
    with tf.Session(cluster["worker", 1].target, config=config, graph=tf.Graph()) as s:
        assert sorted(d.name for d in s.list_devices()) == [
            "/job:ps/replica:0/task:0/device:CPU:0",
            "/job:worker/replica:0/task:1/device:CPU:0"]
    g = tf.Graph()
    with g.as_default(), tf.device("/job:worker/task:0"):
        c = tf.constant(1.0) + 1.0
    with tf.Session(cluster["worker", 1].target, config=config, graph=g) as s:
        with pytest.raises(tf.errors.InvalidArgumentError, match="job:worker/task:0"):
            s.run(c)  # filtered out: no such device for this session
    with pytest.raises(tf.errors.InvalidArgumentError, match="device_filters"):
        tf.Session(cluster["ps", 0].target, config=tf.ConfigProto(device_filters=["/job:x"]))


def test_session_reset_clears_the_tasks_state_and_closes_its_sessions(cluster):
    g = tf.Graph()
    with g.as_default(), tf.device("/job:ps/task:0"):
        v = tf.Variable([1.0, 2.0], name="v")
        init = tf.global_variables_initializer()
    target = cluster["worker", 0].target
    s = tf.Session(target, graph=g)
    s.run(init)
    tf.Session.reset(target)
    assert s.closed
    # As TF: a reset session's runs are aborted, its master knows it no more; closing it says
    # so once; then it is an ordinary closed session.
    for _ in range(2):
        with pytest.raises(tf.errors.AbortedError, match=r"Session \w+ is not found"):
            s.run(v)
    with pytest.raises(tf.errors.AbortedError, match="is not found"):
        s.close()
    with pytest.raises(RuntimeError, match="closed Session"):
        s.run(v)
    s.close()
    with tf.Session(target, graph=g) as s2:
        with pytest.raises(tf.errors.FailedPreconditionError, match="uninitialized"):
            s2.run(v)


def test_session_reset_clears_only_the_containers_it_names(cluster):
    # As TF: what tf.container put in "exp0" goes with reset(["exp0"]); the default container
    # (TF's "localhost") and "exp1" keep their values; no containers means the default one.
    g = tf.Graph()
    with g.as_default(), tf.device("/job:ps/task:0"):
        with tf.container("exp0"):
            a = tf.Variable([1.0, 2.0], name="a")
            q = tf.FIFOQueue(4, tf.float32, name="q")
        b = tf.Variable(3.0, name="b")
        with g.container("exp1"):
            c = tf.get_variable("c", initializer=4.0, use_resource=True)
        init = tf.global_variables_initializer()
        enqueue, size = q.enqueue(5.0), q.size()
        uninitialized = tf.report_uninitialized_variables()
    target = cluster["worker", 0].target
    with tf.Session(target, graph=g) as s:
        s.run([init, enqueue])
    tf.Session.reset(target, ["exp0"])
    with tf.Session(target, graph=g) as s:
        assert s.run([b, c, size]) == [3.0, 4.0, 0]
        assert list(s.run(uninitialized)) == [b"a"]
        with pytest.raises(tf.errors.FailedPreconditionError, match="uninitialized value a"):
            s.run(a)
        s.run(init)
    tf.Session.reset(target)
    with tf.Session(target, graph=g) as s:
        assert list(s.run(uninitialized)) == [b"b"]
    tf.Session.reset(target, [""])  # no container is named "": nothing goes
    tf.Session.reset(target, ["localhost", "exp1"])
    with tf.Session(target, graph=g) as s:
        assert list(s.run(uninitialized)) == [b"b", b"c"]
        np.testing.assert_array_equal(s.run(a), [1.0, 2.0])


def test_a_step_on_a_stopped_task_fails_naming_it(cluster):
    g = tf.Graph()
    with g.as_default():
        with tf.device("/job:ps/task:0"):
            a = tf.constant(3.0) * 2.0
        with tf.device("/job:worker/task:0"):
            b = a + 1.0
    with tf.Session(cluster["worker", 0].target, graph=g) as s:
        assert s.run(b) == 7.0
        cluster["ps", 0].stop()
        with pytest.raises(tf.errors.UnavailableError, match="/job:ps/replica:0/task:0"):
            s.run(b)


def test_describe_cluster_lists_tasks_devices_and_variables(cluster):
    from dflab.distributed.server import describe_cluster

    ps, w0, w1 = cluster[("ps", 0)], cluster[("worker", 0)], cluster[("worker", 1)]
    with tf.device("/job:ps/task:0"):
        v = tf.Variable(tf.ones([3, 4]), name="weights")
    with tf.Session(w0.target) as sess:
        sess.run(v.initializer)
        tasks = describe_cluster(sess)
    assert [t["task"] for t in tasks] == [ps.task, w0.task, w1.task]
    assert all(t["running"] and t["transport"] == "in-process" for t in tasks)
    held = {t["task"]: t["variables"] for t in tasks}
    assert held[ps.task] == [{"name": "weights", "device": ps.task + "/device:CPU:0",
                              "shape": (3, 4), "dtype": "float32", "bytes": 48}]
    assert held[w0.task] == [] and held[w1.task] == []
    w1.stop()
    stopped = describe_cluster(ps)[2]
    assert not stopped["running"] and stopped["devices"] == []
    with pytest.raises(tf.errors.InvalidArgumentError, match="Not a cluster"):
        describe_cluster("")


def test_simulated_links_delay_tensors_crossing_tasks_and_traces_show_them(cluster):
    import time

    from dflab.distributed import clear_network, simulate_network

    g = tf.Graph()
    with g.as_default():
        with tf.device("/job:ps/task:0"):
            a = tf.fill([1_000_000], 1.0)  # 4 MB
        with tf.device("/job:worker/task:1"):
            b = tf.reduce_sum(a)
        with tf.device("/job:worker/task:0"):
            c = b + tf.reduce_sum(a)
    spec = cluster["ps", 0].cluster_spec
    options = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)
    with tf.Session(cluster["worker", 0].target, graph=g) as s:
        md = tf.RunMetadata()
        assert s.run(c, options=options, run_metadata=md) == 2e6
        free = {(t.src_device.split("/device")[0], t.dst_device.split("/device")[0]): t
                for t in md.transfers}
        assert {t.bytes for t in md.transfers} >= {4_000_000, 4}
        ps_w1 = ("/job:ps/replica:0/task:0", "/job:worker/replica:0/task:1")
        assert free[ps_w1].duration_micros < 5_000  # handed over, no link to cross
        # 40 MB/s and 50 ms per tensor; the two 4 MB tensors leaving the ps queue on their
        # own links (ps -> w0, ps -> w1), each 0.1 s on the wire.
        simulate_network(spec, latency_s=0.05, bandwidth_bytes_per_s=40e6)
        try:
            start = time.monotonic()
            assert s.run(c, options=options, run_metadata=md) == 2e6
            took = time.monotonic() - start
            slow = {(t.src_device.split("/device")[0], t.dst_device.split("/device")[0]): t
                    for t in md.transfers}
            assert slow[ps_w1].duration_micros == pytest.approx(150_000, rel=0.05)
            assert took >= 0.15
            # One pair slower than the rest: its tensor waits for its own link.
            simulate_network(spec, latency_s=0.4, between=("/job:ps/task:0",
                                                           "/job:worker/task:1"))
            start = time.monotonic()
            s.run(c)
            assert time.monotonic() - start >= 0.4
        finally:
            clear_network(spec)
        start = time.monotonic()
        s.run(c)
        assert time.monotonic() - start < 0.4
    with pytest.raises(ValueError, match="latency_s"):
        simulate_network(spec, latency_s=-1)
    with pytest.raises(ValueError, match="task"):
        simulate_network(spec, latency_s=1, between=("/job:ps", "/job:worker/task:0"))


def test_a_step_across_tasks_can_be_stepped_node_by_node_through_the_task_stubs(cluster):
    from dflab.runtime.stepping import StepRun

    feed = np.arange(6, dtype=np.float32).reshape(3, 2) / 4
    s, x, fetches = _model_session(cluster)
    with s:
        want = s.run(fetches, {x: feed})
        run = StepRun(s, fetches, {x: feed})
        run.resume()
        assert run.finished and run.error is None
        assert_bit_identical(run.result, want)
        # Again, always taking the last ready node: each task's _Recv waits for its peer's
        # _Send, whichever task it runs on.
        again = StepRun(s, fetches, {x: feed})
        tasks, types = set(), set()
        while not again.finished:
            ready = again.ready
            assert ready, "a stepped cluster step ran out of ready nodes"
            tasks.add(ready[-1].device.split("/device:")[0])
            types.add(ready[-1].op_type)
            again.step(ready[-1].name)
        assert tasks == {"/job:ps/replica:0/task:0", "/job:worker/replica:0/task:0",
                         "/job:worker/replica:0/task:1"}
        assert {"_Send", "_Recv"} <= types
        assert_bit_identical(again.result, want)


def _spy_pulls(cluster, keys) -> list:
    """Record (sending task, receiving task) of every pull of the tasks at ``keys``."""
    pulled = []
    for key in keys:
        task = cluster[key]._task

        def spy_pull(src, step_id, k, done, pull=task.pull, name=task.name):
            pulled.append((src, name))
            pull(src, step_id, k, done)

        task.pull = spy_pull
    return pulled


def test_an_untraced_step_runs_in_the_clients_group_and_a_traced_or_linked_one_pulls(cluster):
    g = tf.Graph()
    with g.as_default():
        with tf.device("/job:ps/task:0"):
            a = tf.constant(3.0) * 2.0
        with tf.device("/job:worker/task:0"):
            b = a + 1.0
        with tf.device("/job:worker/task:1"):
            c = b * 10.0
        with tf.device("/job:worker/task:0"):
            d = tf.add_n([c, a, tf.constant(1.0), tf.constant(2.0), tf.constant(3.0)])
    pulled = _spy_pulls(cluster, [("worker", 0), ("worker", 1)])
    ps, w0, w1 = (f"/job:{j}/replica:0/task:{i}" for j, i in [("ps", 0), ("worker", 0),
                                                             ("worker", 1)])
    crossing = sorted([(ps, w0), (w0, w1), (w1, w0)])  # a, b and c
    with tf.Session(cluster["worker", 0].target, graph=g) as s:
        # One step group here over the three tasks' partitions: a, b and c meet their
        # receivers in its rendezvous, and no task pulls.
        for _ in range(3):
            assert s.run(d) == 82.0
        assert pulled == []
        # A traced step runs a share per task: every tensor crossing tasks is pulled, and
        # recorded.
        md = tf.RunMetadata()
        options = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)
        assert s.run(d, options=options, run_metadata=md) == 82.0
        assert sorted(pulled) == crossing
        assert len(md.transfers) >= 3
        # A simulated link must deliver what crosses tasks: shares and pulls again.
        pulled.clear()
        tf.distributed.simulate_network(cluster["ps", 0], latency_s=0.0)
        try:
            assert s.run(d) == 82.0
        finally:
            tf.distributed.clear_network(cluster["ps", 0])
        assert sorted(pulled) == crossing


def test_a_task_that_stops_cancels_a_step_running_in_the_clients_group(cluster):
    g = tf.Graph()
    with g.as_default():
        with tf.device("/job:ps/task:0"):
            waiting = tf.FIFOQueue(2, tf.float32, shapes=[[]]).dequeue()
        with tf.device("/job:worker/task:0"):
            fetch = waiting + 1.0
    s = tf.Session(cluster["worker", 0].target, graph=g)
    box = []

    def run():
        try:
            # The deadline only bounds the test should the step not be cancelled.
            s.run(fetch, options=tf.RunOptions(timeout_in_ms=30000))
            box.append(None)
        except tf.errors.OpError as e:
            box.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(0.5)
    assert t.is_alive()  # parked in the ps's dequeue
    cluster["ps", 0].stop()
    t.join(10)
    assert not t.is_alive()
    [error] = box
    assert isinstance(error, tf.errors.CancelledError), repr(error)
    assert "Task /job:ps/replica:0/task:0 stopped" in str(error)
    s.close()
