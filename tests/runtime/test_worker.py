"""The worker: partitions as plain data, registered and run in this process or another one.

A plan's partitions travel as ``PartitionSpec`` JSON (typed node defs, feed and fetch names);
a worker that never saw the user's graph rebuilds their nodes and kernels from it and computes
bit-identical results.
"""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import dflab as tf
from dflab.framework.rendezvous import parse_key
from dflab.runtime.worker import PartitionSpec, Worker, next_step_id

ROOT = Path(__file__).resolve().parents[2]
CPU = "/job:localhost/replica:0/task:0/device:CPU:"


def _two_cpus():
    return tf.ConfigProto(device_count={"CPU": 2})


def _graph_across_two_devices():
    """A matmul on CPU:0, a cond and a while loop whose body runs on CPU:1."""
    x = tf.placeholder(tf.float32, [2, 2], name="x")
    with tf.device("/cpu:0"):
        w = tf.constant(np.arange(4, dtype=np.float32).reshape(2, 2), name="w")
        y = tf.matmul(x, w, name="y")
        flag = tf.reduce_sum(y) > 3.0
    with tf.device("/cpu:1"):
        z = tf.cond(flag, lambda: y * 2.0, lambda: y - 1.0, name="z")

        def body(i, acc):
            return i + 1, acc + z

        _, loop = tf.while_loop(lambda i, acc: i < 3, body, [tf.constant(0), tf.zeros([2, 2])])
    with tf.device("/cpu:0"):
        out = tf.reduce_mean(loop, name="out") + tf.reduce_sum(y)
    return x, [out, y, loop]


def test_a_plans_partitions_are_plain_data_that_round_trips_json():
    x, fetches = _graph_across_two_devices()
    with tf.Session(config=_two_cpus()) as s:
        _, plan, _ = s.prepare_step(fetches, {x: np.ones((2, 2), np.float32)})
        assert plan.partitioned and len(plan.specs) == 2
        for spec in plan.specs:
            data = json.loads(json.dumps(spec.to_json()))  # only JSON types inside
            back = PartitionSpec.from_json(data)
            assert [n.name for n in back.graph_def.node] == \
                [n.name for n in spec.graph_def.node]
            for a, b in zip(spec.graph_def.node, back.graph_def.node):
                assert (a.op, a.input, a.device) == (b.op, b.input, b.device)
                assert a.output_types == b.output_types and a.input_types == b.input_types
                assert [s.as_list() if s.ndims is not None else None for s in a.output_shapes] \
                    == [s.as_list() if s.ndims is not None else None for s in b.output_shapes]


_CHILD = r"""
import json, sys
import numpy as np
import dflab as tf
from dflab.framework.rendezvous import parse_key
from dflab.runtime.worker import PartitionSpec, Worker, next_step_id

job = json.load(sys.stdin)
worker = Worker(tf.ConfigProto(device_count={"CPU": 2}))
parts = [worker.register_partition_json(spec) for spec in job["specs"]]
parts = [worker.partition(h) for h in parts]
feeds = [np.asarray(f, np.float32) for f in job["feeds"]]
result = worker.run_step(parts, feeds, next_step_id(), timeout=30)
if result.error is not None:
    raise result.error
out = [[np.asarray(v).tolist() for v in values] for values in result.values]
json.dump({"values": out, "fetch_map": job["fetch_map"], "bits": [
    [np.asarray(v).tobytes().hex() for v in values] for values in result.values]},
    sys.stdout)
"""


def test_a_fresh_process_rebuilds_the_partitions_and_computes_bit_identical_results():
    x, fetches = _graph_across_two_devices()
    feed = np.array([[1.0, 2.0], [0.5, -1.0]], np.float32)
    with tf.Session(config=_two_cpus()) as s:
        want = s.run(fetches, {x: feed})
        _, plan, _ = s.prepare_step(fetches, {x: feed})
        job = {"specs": [spec.to_json() for spec in plan.specs], "feeds": [feed.tolist()],
               "fetch_map": plan.fetch_map}
    # The child has never seen the graph: only the JSON above.
    proc = subprocess.run([sys.executable, "-c", _CHILD], input=json.dumps(job),
                          capture_output=True, text=True, timeout=120, cwd=str(ROOT))
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout)
    bits = got["bits"]
    for want_value, (src, k) in zip(want, plan.fetch_map):
        assert np.asarray(want_value).tobytes().hex() == bits[src][k]


def test_registering_a_malformed_partition_is_a_clear_error():
    worker = Worker(tf.ConfigProto())
    try:
        with pytest.raises(tf.errors.InvalidArgumentError, match="Malformed partition"):
            worker.register_partition_json({"device": CPU + "0"})
        spec = {"device": CPU + "0", "feeds": [], "feed_index": [], "fetches": ["b:0"],
                "control_flow": False,
                "graph_def": {"format": "dflab.graph", "version": 1, "node": [
                    {"name": "b", "op": "Identity", "input": ["missing"], "attr": {},
                     "input_types": ["float32"], "output_types": ["float32"],
                     "output_shapes": [None]}]}}
        with pytest.raises(tf.errors.InvalidArgumentError, match="input 0 .missing."):
            worker.register_partition_json(spec)
        with pytest.raises(tf.errors.NotFoundError):
            worker.partition(12345)
    finally:
        worker.close()


def test_abort_step_cancels_a_running_step():
    import threading

    q = tf.FIFOQueue(1, tf.float32)
    with tf.device("/cpu:1"):
        v = q.dequeue() + 1.0
    with tf.device("/cpu:0"):
        out = v * 2.0
    with tf.Session(config=_two_cpus()) as s:
        errors = []

        def run():
            try:
                s.run(out)
            except tf.errors.OpError as e:
                errors.append(e)

        t = threading.Thread(target=run)
        t.start()
        step_id = None
        for _ in range(200):
            step_id = next(iter(s.worker.steps.ids()), None)
            if step_id is not None:
                break
            t.join(0.01)
        assert step_id is not None
        assert s.worker.abort_step(step_id, tf.errors.AbortedError(None, None, "stop it"))
        t.join(10)
        assert not t.is_alive() and errors
        assert not s.worker.abort_step(next_step_id(), tf.errors.AbortedError(None, None, "x"))


def test_a_failing_send_fails_the_step_instead_of_hanging():
    # A partition can fail before another one has started; the late starter must end at once.
    import threading

    x, fetches = _graph_across_two_devices()
    with tf.Session(config=_two_cpus()) as s:
        make = s.worker.create_rendezvous

        def failing(step_id, traced=False):
            rdv = make(step_id, traced)

            def send(key, value):
                raise tf.errors.InvalidArgumentError(None, None, "the link is down")

            rdv.send = send
            return rdv

        s.worker.create_rendezvous = failing
        errors = []

        def run():
            try:
                s.run(fetches, {x: np.ones((2, 2), np.float32)})
            except tf.errors.OpError as e:
                errors.append(e)

        for _ in range(20):  # the race needs a few tries to show
            t = threading.Thread(target=run, daemon=True)
            t.start()
            t.join(20)
            assert not t.is_alive(), "the step hung after a _Send failed"
        assert len(errors) == 20 and all("the link is down" in str(e) for e in errors)


def test_each_step_gets_its_own_rendezvous_and_keys_name_the_step():
    x, fetches = _graph_across_two_devices()
    seen = []
    with tf.Session(config=_two_cpus()) as s:
        worker = s.worker
        make = worker.create_rendezvous

        def spy(step_id, traced=False):
            rdv = make(step_id, traced)
            send = rdv.send

            def send_and_record(key, value):
                seen.append((step_id, parse_key(key).step_id))
                return send(key, value)

            rdv.send = send_and_record
            return rdv

        worker.create_rendezvous = spy
        feed = np.ones((2, 2), np.float32)
        s.run(fetches, {x: feed})
        s.run(fetches, {x: feed})
    steps = {step for step, _ in seen}
    assert len(steps) == 2 and all(step == key_step for step, key_step in seen)


def test_a_fused_reduction_rebuilds_from_its_node_def_alone():
    # Without the user's graph (another process), the fused node's expression, its members
    # and its final reduction's kernel come from the node def's attributes only.
    rewrite = tf.RewriterConfig(remapping=tf.RewriterConfig.ON)
    config = tf.ConfigProto(graph_options=tf.GraphOptions(rewrite_options=rewrite))
    x = tf.placeholder(tf.float32, [3, 4], name="x")
    y = tf.reduce_sum(tf.nn.relu(x * 2.0 - 1.0), axis=1, keepdims=True, name="y")
    feed = np.random.RandomState(1).randn(3, 4).astype(np.float32)
    with tf.Session(config=config) as s:
        want = s.run(y, {x: feed})
        _, plan, _ = s.prepare_step([y], {x: feed})
    [spec] = plan.specs
    assert any(n.op == "_FusedElementwise" for n in spec.graph_def.node)
    worker = Worker(tf.ConfigProto())
    part = worker.partition(worker.register_partition_json(json.loads(json.dumps(
        spec.to_json()))))
    result = worker.run_step([part], [feed], next_step_id(), timeout=30)
    assert result.error is None
    [[got]] = result.values
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got, np.maximum(feed * 2 - 1, 0).sum(1, keepdims=True),
                               rtol=1e-6)
    bad = spec.to_json()
    fused = next(n for n in bad["graph_def"]["node"] if n["op"] == "_FusedElementwise")
    fused["attr"]["_fused_expression"] = {"dict": {"steps": "nonsense"}}
    with pytest.raises(tf.errors.InvalidArgumentError):
        Worker(tf.ConfigProto()).register_partition_json(bad)


_PROBES: dict = {}


def _probe_op(x, probe):
    """``x`` through an expensive, non-blocking test op that calls ``probe()`` when it runs
    (a py_func would not do: it is blocking, so its plan never runs inline)."""
    from dflab.framework import registry
    from dflab.kernels.registry import register_kernel

    if "TestCallbackProbe" not in registry.registered_ops():
        registry.register_op("TestCallbackProbe",
                             lambda op: [(op.inputs[0].dtype, op.inputs[0].shape)],
                             expensive=True, stateful=True)

        def factory(node, ctx):
            fn = _PROBES[node.attr["key"]]
            return lambda v: (fn(), v)[1]

        register_kernel("TestCallbackProbe", factory=factory)
    key = str(len(_PROBES))
    _PROBES[key] = probe
    return tf.get_default_graph().create_op("TestCallbackProbe", [x], attrs={"key": key}).outputs[0]


def _matmul_chain_with_a_probe(probe):
    """Several expensive nodes (matmuls, and a test op calling ``probe``) and no control
    flow: nothing a second inter-op thread could run in parallel."""
    rng = np.random.default_rng(3)
    a_val = rng.standard_normal((8, 8)).astype(np.float32)
    a = tf.constant(a_val)
    b = tf.matmul(a, a)
    c = tf.matmul(b, a) + tf.matmul(a, b)
    return tf.matmul(_probe_op(c, probe), a), a_val


def _record_calls(monkeypatch, name):
    """A list that gets an entry each time ``Execution.<name>`` (a driver) runs."""
    from dflab.runtime.executor import Execution

    calls = []
    real = getattr(Execution, name)
    monkeypatch.setattr(Execution, name,
                        lambda ex, *a, **k: calls.append(1) or real(ex, *a, **k))
    return calls


@pytest.mark.parametrize("inter_op", [1, 2])
def test_one_inter_op_thread_runs_a_plan_inline_holding_the_stream_per_expensive_kernel(
        monkeypatch, inter_op):
    held = []
    out, a = _matmul_chain_with_a_probe(
        lambda: held.append(any(d.streams["compute"]._order.locked()
                                for d in sess._worker.devices)))
    dataflow = _record_calls(monkeypatch, "run_dataflow")
    config = tf.ConfigProto(inter_op_parallelism_threads=inter_op)
    with tf.Session(config=config) as sess:
        for _ in range(2):  # the compiled schedule, built on the first run, then reused
            got = sess.run(out)
    b = a @ a
    np.testing.assert_allclose(got, (b @ a + a @ b) @ a, rtol=1e-4)
    # One inter-op thread: the compiled schedule on the caller's thread, each expensive
    # kernel (the py_func here) holding the device's stream, as the dataflow driver does.
    # Two: the dataflow driver, with no stream on a parallel host device.
    assert bool(dataflow) is (inter_op == 2)
    assert held == [inter_op == 1] * 2


def test_one_inter_op_thread_and_a_deadline_keep_the_dataflow_driver(monkeypatch):
    out, _ = _matmul_chain_with_a_probe(lambda: None)
    inline = _record_calls(monkeypatch, "run_inline")
    with tf.Session(config=tf.ConfigProto(inter_op_parallelism_threads=1)) as sess:
        sess.run(out, options=tf.RunOptions(timeout_in_ms=60000))
    assert not inline


def test_a_traced_step_with_one_inter_op_thread_runs_in_the_schedules_order(monkeypatch):
    out, _ = _matmul_chain_with_a_probe(lambda: None)
    dataflow = _record_calls(monkeypatch, "run_dataflow")
    meta = tf.RunMetadata()
    with tf.Session(config=tf.ConfigProto(inter_op_parallelism_threads=1)) as sess:
        sess.run(out, options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE),
                 run_metadata=meta)
        plan_order = [op.name for op in tf.get_default_graph().get_operations()]
    assert not dataflow  # the same driver as an untraced step
    # One thread: the stats are recorded as the nodes end, one after the other.
    traced = [ns.node_name for dev in meta.step_stats.dev_stats for ns in dev.node_stats
              if ns.node_name in plan_order]
    assert traced == sorted(traced, key=plan_order.index)  # one node after the other, in order


def test_a_step_reports_the_root_cause_over_a_cancellation_that_reached_it_first():
    from dflab.framework import errors
    from dflab.runtime.rendezvous import LocalRendezvous
    from dflab.runtime.worker import StepGroup

    group = StepGroup(LocalRendezvous(), 7)
    cancelled = errors.CancelledError(None, None, "Step 7 was cancelled: bad reshape")
    cause = errors.InvalidArgumentError(None, None, "bad reshape")
    group.failed(cancelled)  # another task's abort, seen as a cancelled receive
    group.failed(cause)
    assert group.error is cause
    group.failed(errors.CancelledError(None, None, "later"))
    group.failed(errors.InternalError(None, None, "a second failure"))
    assert group.error is cause  # the first root cause stays
