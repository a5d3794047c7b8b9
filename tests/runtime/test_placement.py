"""Placement: TF's rules, their reasons and report, soft placement, the cost model policy."""

import threading

import numpy as np
import pytest

import dflab as tf
from dflab.framework.registry import register_op
from dflab.kernels.registry import has_kernel, kernel, kernel_defs
from dflab.runtime import cost_model as cm
from dflab.runtime.devices import DeviceSet
from dflab.runtime.placer import (
    Placement,
    PlacementReport,
    explain_placement,
    place,
    placement_report,
    unsupported_reason,
)
from dflab.runtime.subgraph import prune, topological_order

TASK = "/job:localhost/replica:0/task:0"
GPUS = {"device_count": {"CPU": 2, "GPU": 2}}


def _cfg(**kw):
    return tf.ConfigProto(**kw)


def _short(name):
    return name.rsplit("/", 1)[-1].replace("device:", "")


def _report(fetches, **kw):
    return explain_placement(fetches, _cfg(**kw))


# --- explicit requests and the default device -----------------------------------------------------

@pytest.mark.parametrize("request_,config,want,rule", [
    (None, GPUS, "GPU:0", "default"),
    (None, {"device_count": {"CPU": 2}}, "CPU:0", "default"),
    ("/gpu:1", GPUS, "GPU:1", "explicit"),
    ("/GPU:1", GPUS, "GPU:1", "explicit"),
    ("/device:GPU:*", GPUS, "GPU:0", "explicit"),
    ("/cpu:1", GPUS, "CPU:1", "explicit"),
    ("/device:CPU:*", GPUS, "CPU:0", "explicit"),
    ("/job:localhost/task:0", GPUS, "GPU:0", "explicit"),
    ("/job:localhost/replica:0/task:0/device:CPU:1", GPUS, "CPU:1", "explicit"),
])
def test_explicit_and_default_placement(request_, config, want, rule):
    with tf.device(request_):
        y = tf.matmul(tf.ones([2, 2]), tf.ones([2, 2]), name="y")
    row = _report(y, **config)["y"]
    assert (_short(row.assigned), row.rule) == (want, rule)
    assert row.requested == (tf.DeviceSpec.from_string(request_ or "").to_string())


def test_nested_partial_requests_merge_before_placement():
    with tf.device("/job:localhost"):
        with tf.device("/device:GPU:*"):
            with tf.device("/replica:0/task:0"):
                with tf.device(tf.DeviceSpec(device_index=1)):
                    y = tf.add(1.0, 2.0, name="y")
    assert y.op.device == "/job:localhost/replica:0/task:0/device:GPU:1"
    assert _short(_report(y, **GPUS)["y"].assigned) == "GPU:1"


# --- colocation -----------------------------------------------------------------------------------

@pytest.mark.parametrize("use_resource, kinds, apply", [
    (False, ("VariableV2", "Assign", "Identity"), "ApplyGradientDescent"),
    (True, ("VarHandleOp", "AssignVariableOp", "ReadVariableOp"),
     "ResourceApplyGradientDescent")])
def test_variable_initializer_read_and_updates_share_the_variables_device(use_resource, kinds,
                                                                          apply):
    with tf.device("/gpu:1"):
        v = tf.Variable(np.ones(3, np.float32), name="v", use_resource=use_resource)
    loss = tf.reduce_sum(v * v, name="loss")
    train = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
    rep = _report([train, v.initializer], **GPUS)
    group = [r for r in rep.rows if r.group == "v"]
    # The variable, its initializer and the read the loss uses.
    assert set(kinds) <= {r.type for r in group}
    assert {"v", "v/Assign"} <= {r.op for r in group}
    update = [r for r in group if r.type == apply]
    assert len(update) == 1
    assert {_short(r.assigned) for r in group} == {"GPU:1"}
    assert update[0].rule == "colocation" and "v" in update[0].reason
    assert rep["v"].rule == "explicit"
    # Ops outside the group follow the default rule.
    assert _short(rep["loss"].assigned) == "GPU:0"


def test_colocate_with_pins_to_the_target_device():
    with tf.device("/cpu:1"):
        a = tf.ones([3], name="a")
    with tf.colocate_with(a):
        b = tf.identity(a, name="b")
    c = tf.add(b, 1.0, name="c")
    rep = _report(c, **GPUS)
    assert _short(rep["b"].assigned) == "CPU:1" and rep["b"].group == "a"
    assert rep["b"].rule == "colocation"
    assert _short(rep["c"].assigned) == "GPU:0"


def test_partial_requests_in_one_group_are_merged():
    with tf.device("/device:GPU:*"):
        a = tf.ones([3], name="a")
    with tf.colocate_with(a):
        b = tf.identity(a, name="b")
    b.op._set_device("/device:GPU:1")  # a second, compatible request in the group
    rep = _report(b, **GPUS)
    assert {_short(rep[n].assigned) for n in ("a", "b")} == {"GPU:1"}


def test_conflicting_requests_in_one_group():
    with tf.device("/gpu:0"):
        a = tf.ones([3], name="a")
    with tf.colocate_with(a):
        b = tf.identity(a, name="b")
    b.op._set_device("/cpu:0")
    with pytest.raises(tf.errors.InvalidArgumentError, match="Cannot colocate nodes 'a' and 'b'"):
        _report(b, **GPUS)
    rep = _report(b, allow_soft_placement=True, **GPUS)  # the type conflict is dropped
    assert _short(rep["a"].assigned) == _short(rep["b"].assigned)


def test_group_with_a_cpu_only_member_goes_to_cpu():
    a = tf.constant([1.0, 2.0, 3.0], name="a")
    with tf.colocate_with(a):
        s = tf.random_shuffle(a, seed=1, name="shuffle")
    rep = _report(s, **GPUS)
    assert {_short(rep[n].assigned) for n in ("a", "shuffle")} == {"CPU:0"}
    assert rep["a"].rule == "kernel" and "RandomShuffle" in rep["a"].reason


# --- kernel availability and soft placement -------------------------------------------------------

@pytest.mark.parametrize("op_type", sorted(kd.op_type for kd in kernel_defs() if kd.host_only))
def test_simulated_gpus_refuse_cpu_only_ops(op_type):
    ds = DeviceSet.from_config(_cfg(**GPUS))

    class FakeOp:  # only the fields the capability check reads
        type = op_type
        inputs = outputs = ()

    assert unsupported_reason(FakeOp, ds["GPU:0"]) is not None
    assert (unsupported_reason(FakeOp, ds["CPU:0"]) is None) == has_kernel(op_type, "CPU")


@pytest.mark.parametrize("build,op_type", [
    (lambda: tf.identity(tf.constant(["a", "b"])), "Identity"),
    (lambda: tf.random_shuffle(tf.range(5)), "RandomShuffle"),
    (lambda: tf.random_gamma([3], 2.0), "RandomGamma"),
])
def test_ops_without_gpu_kernels_go_to_cpu(build, op_type):
    y = build()
    rep = _report(y, **GPUS)
    (op,) = [op for op in tf.get_default_graph().get_operations() if op.type == op_type]
    row = rep[op.name]
    assert _short(row.assigned) == "CPU:0" and row.rule == "kernel"
    assert "GPU:0 cannot run it" in row.reason


def test_explicit_gpu_request_for_a_string_op():
    words = tf.constant(["x"])
    with tf.device("/gpu:1"):
        s = tf.identity(words, name="str_id")
    with pytest.raises(tf.errors.InvalidArgumentError) as e:
        _report(s, **GPUS)
    msg = str(e.value)
    assert "str_id" in msg and "/device:GPU:1" in msg and "no supported kernel" in msg
    rep = _report(s, allow_soft_placement=True, **GPUS)
    assert _short(rep["str_id"].assigned) == "CPU:0"
    assert rep["str_id"].rule == "soft" and "/device:GPU:1" in rep["str_id"].reason


@pytest.mark.parametrize("request_", ["/gpu:0", "/cpu:3", "/device:TPU:0", "/job:worker"])
def test_missing_device_without_and_with_soft_placement(request_):
    two = tf.constant(2.0)
    with tf.device(request_):
        y = tf.multiply(two, two, name="y")
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"Cannot assign a device for operation y") as e:
        _report(y, device_count={"CPU": 2})
    assert tf.DeviceSpec.from_string(request_).to_string() in str(e.value)
    with tf.Session(config=_cfg(device_count={"CPU": 2})) as s:
        with pytest.raises(tf.errors.InvalidArgumentError, match="y"):
            s.run(y)
    with tf.Session(config=_cfg(device_count={"CPU": 2}, allow_soft_placement=True)) as s:
        assert s.run(y) == 4.0
    assert _report(y, device_count={"CPU": 2}, allow_soft_placement=True)["y"].rule == "soft"


def test_soft_placement_keeps_the_task_and_job():
    with tf.device("/job:localhost/device:GPU:7"):
        y = tf.add(1.0, 1.0, name="y")
    row = _report(y, allow_soft_placement=True, **GPUS)["y"]
    assert row.rule == "soft" and "same task" in row.reason
    assert row.assigned.startswith("/job:localhost/")


# --- heuristics for lone ops ----------------------------------------------------------------------

def test_generator_follows_its_consumer_and_metadata_follows_its_input():
    c = tf.constant(np.ones((2, 2), np.float32), name="c")
    x = tf.placeholder(tf.float32, [None, 2], name="x")  # an unknown shape: Shape stays an op
    with tf.device("/cpu:1"):
        y = tf.matmul(x, c, name="y")
    shape = tf.shape(y, name="shape_of_y")
    assert shape.op.type == "Shape"
    rep = _report([shape, y], **GPUS)
    assert _short(rep["c"].assigned) == "CPU:1" and rep["c"].rule == "generator"
    assert _short(rep["shape_of_y"].assigned) == "CPU:1"
    assert rep["shape_of_y"].rule == "metadata"


# --- log_device_placement and the report --------------------------------------------------------

def test_log_device_placement_prints_tf_lines(capsys):
    with tf.device("/gpu:1"):
        y = tf.add(tf.constant(1.0, name="a"), 2.0, name="y")
    with tf.Session(config=_cfg(log_device_placement=True, **GPUS)) as s:
        capsys.readouterr()
        assert s.run(y) == 3.0
    err = capsys.readouterr().err.splitlines()
    assert f"y: (AddV2): {TASK}/device:GPU:1" in err
    assert f"a: (Const): {TASK}/device:GPU:1" in err
    with tf.Session(config=_cfg(**GPUS)) as s:
        s.run(y)
    assert capsys.readouterr().err == ""


def test_report_rows_views_text_and_html():
    with tf.device("/cpu:1"):
        v = tf.Variable(1.0, name="v", use_resource=False)
    s = tf.identity(tf.constant(["<b>"]), name="s")
    y = tf.multiply(v, 2.0, name="y")
    ops = topological_order(prune([y, s], [v.initializer], ()), ())
    placement = place(ops, DeviceSet.from_config(_cfg(**GPUS)), _cfg(**GPUS))
    assert all(isinstance(p, Placement) for p in placement.values())
    rep = placement_report(placement)
    assert isinstance(rep, PlacementReport) and len(rep) == len(ops)
    assert {r.op for r in rep.rows} == {op.name for op in ops}
    row = rep["v/Assign"]
    assert (row.type, row.group, _short(row.assigned), row.rule) == (
        "Assign", "v", "CPU:1", "colocation")
    by_dev = rep.by_device()
    assert {r.op for r in by_dev[f"{TASK}/device:CPU:0"]} >= {"s"}
    assert all(r.simulated for r in by_dev[f"{TASK}/device:GPU:0"])
    text = str(rep)
    assert text == rep.text()
    assert "GPU:0 (simulated)" in text and "CPU:1 (simulated)" in text
    assert "v/Assign" in text and "colocation" in text
    for col in PlacementReport.COLUMNS:
        assert col in text.splitlines()[0]
    page = rep._repr_html_()
    assert page.count("<tr>") == len(ops) + 1 and "simulated" in page
    # Every cell is escaped: text from the graph never becomes markup.
    tricky = {ops[0]: Placement(f"{TASK}/device:CPU:0", "<script>x</script>", "default")}
    page = placement_report(tricky)._repr_html_()
    assert "<script>" not in page and "&lt;script&gt;" in page


def test_placements_of_a_session_plan_match_explain_placement():
    with tf.device("/gpu:1"):
        y = tf.add(tf.ones([2]), 1.0, name="y")
    with tf.Session(config=_cfg(**GPUS)) as s:
        s.run(y)
        (plan,) = s._master._plans.values()
    got = {op.name: p.device for op, p in plan.placement.items()}
    want = {r.op: r.assigned for r in _report(y, **GPUS).rows}
    assert got == want


def test_explain_placement_takes_any_fetch_structure_session_run_takes():
    a = tf.add(tf.ones([2]), 1.0, name="a")
    b = tf.multiply(a, 2.0, name="b")
    init = tf.group(a, name="init")
    report = _report({"b": [b, "a:0"], "train": init}, **GPUS)
    assert {r.op for r in report.rows} >= {"a", "b", "init"}
    with pytest.raises(ValueError, match="cannot be interpreted as a Tensor"):
        _report({"x": "no_such_op:0"}, **GPUS)


def test_unknown_policy_is_rejected():
    y = tf.add(1.0, 1.0)
    with pytest.raises(ValueError, match="placement policy"):
        _report(y, dflab={"placement": "random"})


# --- same numbers whatever the placement ----------------------------------------------------------

CONFIGS = [
    {},
    {"device_count": {"CPU": 3}, "inter_op_parallelism_threads": 2},
    {"device_count": {"GPU": 2}},
    {"device_count": {"GPU": 2}, "dflab": {"placement": "cost_model"}},
    {"device_count": {"CPU": 2}, "dflab": {"placement": "cost_model"},
     "inter_op_parallelism_threads": 2},
]
SCOPES = [None, "/cpu:0", "/gpu:1", "/cpu:1"]


def _mlp_step(scope_a, scope_b):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((8, 5)).astype(np.float32)
    w0 = rng.standard_normal((5, 4)).astype(np.float32)
    with tf.device(scope_a):
        w = tf.Variable(w0, name="w")
    with tf.device(scope_b):
        h = tf.nn.relu(tf.matmul(tf.constant(x), w))
        loss = tf.reduce_mean(tf.square(h))
    train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
    hv = np.maximum(x @ w0, 0)
    grad = x.T @ (2 * hv * (hv > 0) / hv.size)
    return [loss, train], w, [np.mean(hv ** 2), w0 - 0.1 * grad]


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("scopes", [(None, None), ("/gpu:1", "/cpu:0"), ("/cpu:1", "/gpu:0")])
def test_training_step_gives_the_same_numbers_on_any_placement(config, scopes):
    fetches, w, (want_loss, want_w) = _mlp_step(*scopes)
    cfg = _cfg(allow_soft_placement=True, **config)
    with tf.Session(config=cfg) as s:
        s.run(tf.global_variables_initializer())
        loss, _ = s.run(fetches)
        np.testing.assert_allclose(loss, want_loss, rtol=1e-5)
        np.testing.assert_allclose(s.run(w), want_w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("config", CONFIGS)
def test_branches_strings_and_control_flow_on_any_placement(config):
    rng = np.random.default_rng(0)
    mats = [rng.standard_normal((6, 6)) for _ in range(4)]
    outs = []
    for k, m in enumerate(mats):
        with tf.device(SCOPES[k % len(SCOPES)]):
            outs.append(tf.tanh(tf.matmul(tf.constant(m), tf.constant(m))))
    total = tf.add_n(outs)
    i = tf.constant(0)
    loop = tf.while_loop(lambda i, acc: i < 3, lambda i, acc: (i + 1, acc * 2.0),
                         [i, tf.constant(1.5, tf.float64)])
    words = tf.identity(tf.constant(["a", "b"]))
    with tf.Session(config=_cfg(allow_soft_placement=True, **config)) as s:
        got_total, got_loop, got_words = s.run([total, loop, words])
    np.testing.assert_allclose(got_total, sum(np.tanh(m @ m) for m in mats), rtol=1e-12)
    assert got_loop[0] == 3 and got_loop[1] == 12.0
    assert list(got_words) == [b"a", b"b"]


# --- the cost model -------------------------------------------------------------------------------

def _devices(**kw):
    return DeviceSet.from_config(_cfg(**kw))


@pytest.mark.parametrize("build", [
    lambda n: tf.matmul(tf.ones([n, n]), tf.ones([n, n])),
    lambda n: tf.matmul(tf.ones([n, 8]), tf.ones([n, 8]), transpose_b=True),
    lambda n: tf.nn.conv2d(tf.ones([1, n, n, 3]), tf.ones([3, 3, 3, 4]), [1, 1, 1, 1], "SAME"),
    lambda n: tf.tanh(tf.ones([n, n])),
    lambda n: tf.add(tf.ones([n, n]), tf.ones([n, n])),
    lambda n: tf.reduce_sum(tf.ones([n, n]), axis=0),
    lambda n: tf.concat([tf.ones([n, 2]), tf.ones([n, 2])], 0),
    lambda n: tf.nn.softmax(tf.ones([n, n])),
])
def test_op_costs_grow_with_sizes(build):
    gpu = _devices(device_count={"GPU": 1})["GPU:0"]
    times, costs = [], []
    for n in (4, 16, 64, 256):
        op = build(n).op
        costs.append(cm.op_cost(op))
        times.append(cm.compute_time(costs[-1], gpu))
    assert all(b.flops >= a.flops and b.bytes > a.bytes for a, b in zip(costs, costs[1:]))
    assert all(b > a for a, b in zip(times, times[1:]))


def test_matmul_and_conv_flops_are_exact():
    mm = tf.matmul(tf.ones([3, 5]), tf.ones([4, 5]), transpose_b=True).op
    assert cm.op_cost(mm).flops == 2 * 3 * 4 * 5
    conv = tf.nn.conv2d(tf.ones([2, 8, 8, 3]), tf.ones([3, 3, 3, 4]), [1, 2, 2, 1], "SAME").op
    assert cm.op_cost(conv).flops == 2 * (2 * 4 * 4 * 4) * 3 * 3 * 3
    assert cm.op_cost(tf.constant(np.ones((100, 100))).op).free


def test_a_fused_batch_norm_costs_its_passes_and_its_gradient_more():
    x = tf.ones([2, 4, 4, 3])
    y, _, _ = tf.nn.fused_batch_norm(x, tf.ones([3]), tf.zeros([3]))
    grad = tf.gradients(y, x)[0].op
    assert cm.op_cost(y.op).flops == 5 * 96 and cm.op_cost(grad).flops == 8 * 96


def test_transfer_time_grows_with_bytes_and_is_zero_on_one_device():
    ds = _devices(device_count={"GPU": 2})
    g0, g1, cpu = ds["GPU:0"], ds["GPU:1"], ds["CPU:0"]
    assert cm.transfer_time(1e6, g0, g0) == 0.0
    ts = [cm.transfer_time(n, g0, g1) for n in (0, 1e3, 1e6, 1e9)]
    assert all(b > a for a, b in zip(ts, ts[1:]))
    assert ts[0] == g0.latency_s
    assert cm.transfer_time(1e6, cpu, g0) == pytest.approx(g0.latency_s + 1e6 / 1.2e10)


def _branches(n_branches=4, n=256, depth=2):
    outs = []
    for b in range(n_branches):
        x = tf.constant(np.full((n, n), 0.01 * (b + 1), np.float32), name=f"x{b}")
        for d in range(depth):
            x = tf.tanh(tf.matmul(x, x, name=f"mm{b}_{d}"))
        outs.append(tf.reduce_sum(x, name=f"sum{b}"))
    return tf.add_n(outs, name="total")


def _ops_of(fetch):
    return topological_order(prune([fetch], [], ()), ())


def test_single_device_estimate_is_the_sum_of_op_times():
    total = _branches(2, 32, 1)
    ops = _ops_of(total)
    ds = _devices(device_count={"GPU": 2})
    gpu = ds["GPU:1"]
    est = cm.estimate_step_time(ops, {op: gpu.name for op in ops}, ds)
    want = sum(cm.compute_time(cm.op_cost(op), gpu) for op in ops)
    assert est.step_time == pytest.approx(want)
    assert est.transfers == 0 and float(est) == est.step_time
    assert est.device_busy[gpu.name] == pytest.approx(want)


def test_estimate_counts_one_transfer_per_tensor_and_device():
    a = tf.constant(np.ones((10, 10), np.float32), name="a")
    b = tf.tanh(a, name="b")
    c = tf.add(b, b, name="c")  # reads b twice: still one copy
    ops = _ops_of(c)
    ds = _devices(device_count={"GPU": 2})
    where = {"a": "GPU:0", "b": "GPU:0", "c": "GPU:1"}
    est = cm.estimate_step_time(ops, {op: ds[where[op.name]] for op in ops}, ds)
    assert est.transfers == 1 and est.transfer_bytes == 400
    assert est.finish[c.op] > est.finish[b.op] + cm.transfer_time(400, ds["GPU:0"], ds["GPU:1"])


def _round_robin(ops, devs):
    return {op: devs[i % len(devs)].name for i, op in enumerate(ops)}


@pytest.mark.parametrize("n_branches,n_gpus", [(2, 2), (4, 2), (4, 4), (3, 2)])
def test_cost_model_beats_naive_placements_on_estimated_time(n_branches, n_gpus):
    total = _branches(n_branches, 256, 2)
    ops = _ops_of(total)
    cfg = _cfg(device_count={"GPU": n_gpus}, dflab={"placement": "cost_model"})
    ds = DeviceSet.from_config(cfg)
    smart = place(ops, ds, cfg)
    assert {p.rule for p in smart.values()} <= {"cost_model", "generator"}
    gpus = [d for d in ds.prioritized if d.device_type == "GPU"]
    t_smart = cm.estimate_step_time(ops, smart, ds).step_time
    t_one = cm.estimate_step_time(ops, {op: gpus[0].name for op in ops}, ds).step_time
    t_rr = cm.estimate_step_time(ops, _round_robin(ops, gpus), ds).step_time
    t_tf = cm.estimate_step_time(ops, place(ops, ds, _cfg(device_count={"GPU": n_gpus})),
                                 ds).step_time
    assert t_tf == pytest.approx(t_one)  # TF's rules put everything on GPU:0
    assert t_smart < t_rr
    ideal = min(n_branches, n_gpus)
    assert t_one / t_smart > 0.8 * ideal  # close to perfect scaling over the branches


def test_cost_model_keeps_constraints_and_groups():
    total = _branches(4, 128, 1)
    with tf.device("/cpu:0"):
        pinned = tf.identity(total, name="pinned")
    v = tf.Variable(np.ones((128, 128), np.float32), name="v")
    y = tf.matmul(v, v, name="y")
    with tf.device("/gpu:1"):
        z = tf.reduce_sum(y, name="z")
    cfg = _cfg(device_count={"GPU": 2}, dflab={"placement": "cost_model"})
    ops = topological_order(prune([pinned, z], [v.initializer], ()), ())
    pl = place(ops, DeviceSet.from_config(cfg), cfg)
    by_name = {op.name: p for op, p in pl.items()}
    assert _short(by_name["pinned"].device) == "CPU:0" and by_name["pinned"].rule == "explicit"
    assert _short(by_name["z"].device) == "GPU:1" and by_name["z"].rule == "explicit"
    reads = [op.name for op in ops if op.type == "ReadVariableOp"]  # v's uses, each a read
    assert reads
    group = {by_name[n].device for n in ("v", "v/Assign", *reads)}
    assert len(group) == 1
    assert by_name["y"].rule == "cost_model" and "earliest estimated finish" in \
        by_name["y"].reason


def test_cost_model_keeps_cpu_only_ops_on_cpu():
    s = tf.identity(tf.constant(["q"]), name="s")
    y = tf.matmul(tf.ones([64, 64]), tf.ones([64, 64]), name="y")
    rep = _report([s, y], device_count={"GPU": 2}, dflab={"placement": "cost_model"})
    assert _short(rep["s"].assigned) == "CPU:0"
    assert rep["y"].assigned.endswith(("GPU:0", "GPU:1", "CPU:0"))


def test_cost_model_follows_device_parameters():
    # With a 100x faster GPU:1 and slow links, the cost model sends a lone matmul chain there.
    y = tf.matmul(tf.ones([128, 128]), tf.ones([128, 128]), name="y")
    y2 = tf.matmul(y, y, name="y2")
    fast = {"dflab": {"placement": "cost_model",
                      "device_params": {"GPU:1": {"flops_per_s": 5e12}}},
            "device_count": {"GPU": 2}}
    rep = _report(y2, **fast)
    assert {_short(rep[n].assigned) for n in ("y", "y2")} == {"GPU:1"}


# Two independent barrier kernels that only succeed when both run at the same moment.
register_op("TestStreamBarrier", lambda op: [(op.inputs[0].dtype, op.inputs[0].shape)],
            stateful=True, expensive=True)


_STREAM_BARRIERS: dict[str, threading.Barrier] = {}


@kernel("TestStreamBarrier")
def _stream_barrier(node, ctx):
    barrier = _STREAM_BARRIERS[node.attr["key"]]

    def wait(x):
        try:
            barrier.wait()
        except threading.BrokenBarrierError:
            raise tf.errors.AbortedError(None, node, "ran alone") from None
        return x

    return wait


def _two_barriers_on(device):
    g = tf.Graph()
    key = f"barrier-{len(_STREAM_BARRIERS)}"
    _STREAM_BARRIERS[key] = threading.Barrier(2, timeout=1.0)
    with g.as_default(), tf.device(device):
        x = tf.constant(1.0)
        a = g._create_op("TestStreamBarrier", [x], {"key": key}, "a").outputs[0]
        b = g._create_op("TestStreamBarrier", [x], {"key": key}, "b").outputs[0]
        total = a + b
    cfg = tf.ConfigProto(device_count={"GPU": 1}, inter_op_parallelism_threads=3)
    with tf.Session(graph=g, config=cfg) as s:
        return s.run(total)


def test_cpu_device_runs_independent_kernels_at_once():
    assert _two_barriers_on("/cpu:0") == 2.0


def test_gpu_device_runs_one_kernel_at_a_time():
    with pytest.raises(tf.errors.AbortedError, match="ran alone"):
        _two_barriers_on("/gpu:0")


# --- the same device for a variable in every plan -------------------------------------------------

def test_groups_see_colocated_ops_outside_the_plan():
    """The initializer's plan already places the variable where its optimizer update (a
    CPU-only op here) can run with it, as TF's whole-graph placement does."""
    with tf.device("/gpu:0"):
        v = tf.Variable(0, dtype=tf.int32, name="v")
    bump = v.count_up_to(10)
    config = _cfg(allow_soft_placement=True, **GPUS)
    with tf.Session(config=config) as sess:
        sess.run(v.initializer)
        assert sess.run(bump) == 0
        devices = {_short(p.placement[v.op].device) for p in sess._master._plans.values()}
    assert devices == {"CPU:0"}
    report = explain_placement(v.initializer, config)
    assert _short(report["v"].assigned) == "CPU:0"


def test_stateful_ops_keep_their_device_across_plans():
    cfg = _cfg(dflab={"simulated_devices": {"GPU": 2}, "placement": "cost_model"})
    a = tf.Variable(tf.ones([64, 64]), name="a")
    y = tf.reduce_sum(tf.matmul(a, a))
    with tf.Session(config=cfg) as sess:
        sess.run(a.initializer)
        first = next(iter(sess._master._plans.values())).placement[a.op]
        sess.run(y)
        later = [p for p in sess._master._plans.values() if y.op in p.placement][0].placement[a.op]
    assert later.device == first.device
    assert later.rule == "stateful" and "earlier run of this session" in later.reason


def test_an_op_added_later_that_cannot_join_its_variables_device_is_an_error():
    with tf.device("/gpu:0"):
        v = tf.Variable(0, dtype=tf.int32, name="v")
    with tf.Session(config=_cfg(allow_soft_placement=True, **GPUS)) as sess:
        sess.run(v.initializer)  # v goes to GPU:0: nothing else is colocated with it yet
        bump = v.count_up_to(3)  # CPU-only, must sit with v
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match="colocated with the stateful op v, which an earlier run"):
            sess.run(bump)


@pytest.mark.parametrize("use_resource", [False, True])
def test_an_update_asking_for_another_device_than_its_variable_runs_with_the_variable(
        use_resource):
    # TF's placer: "Ignoring device specification /device:CPU:0 for node 'update' because the
    # input edge from 'w' is a reference connection and already has a device field set"; a
    # resource update sits with its handle in the same way.
    with tf.device("/gpu:0"):
        w = tf.Variable(1.0, name="w", use_resource=use_resource)
    with tf.device("/cpu:0"):
        update = tf.assign_add(w, 1.0, name="update")
    update_op = tf.get_default_graph().get_operation_by_name("update")  # the write itself
    with tf.Session(config=_cfg(**GPUS)) as sess:
        sess.run(w.initializer)
        assert sess.run(update) == 2.0
        plan = [p for p in sess._master._plans.values() if update_op in p.placement][0]
        assert plan.placement[update_op].device.endswith("GPU:0")


def test_a_conflicting_op_outside_the_plan_does_not_break_plans_that_skip_it():
    with tf.device("/gpu:0"):
        v = tf.Variable(0, dtype=tf.int32, name="v")
    with tf.device("/cpu:0"):
        bad = v.count_up_to(3)  # CPU-only, must sit with v on the GPU: impossible
    with tf.Session(config=_cfg(**GPUS)) as sess:
        sess.run(v.initializer)
        assert sess.run(v) == 0
        with pytest.raises(tf.errors.InvalidArgumentError):
            sess.run(bad)


def test_a_report_can_show_requests_no_device_here_satisfies():
    from dflab.runtime.placer import explain_placement

    with tf.device("/gpu:0"):
        a = tf.multiply(tf.constant(1.0, name="a"), 2.0, name="twice")
    with tf.device("/cpu:3"):
        b = tf.add(a, 1.0, name="plus")
    c = tf.identity(b, name="c")
    with pytest.raises(tf.errors.InvalidArgumentError, match="GPU:0"):
        explain_placement([c])  # as Session.run: the first unsatisfiable request fails
    report = explain_placement([c], report_unsatisfiable=True)
    rows = {r.op: r for r in report.rows}
    assert rows["twice"].rule == rows["a"].rule == rows["plus"].rule == "unsatisfiable"
    assert "device_count={'GPU': 1}" in rows["twice"].reason
    assert "no device here matches" in rows["plus"].reason
    assert rows["c"].rule != "unsatisfiable"
    assert all(r.assigned.endswith("CPU:0") for r in report.rows)
    assert "text-align:left" in report._repr_html_()
