"""Elementwise fusion: the pass, its NumPy evaluator against the unfused graph, its CUDA source,
and (where a GPU and CuPy exist) the generated CuPy kernels against the NumPy evaluator."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dflab as tf
from dflab.client import timeline
from dflab.kernels.fused_kernels import (
    ELEMENTWISE,
    REDUCTIONS,
    FusedExpression,
    cuda_kernel_args,
    numpy_evaluator,
)
from dflab.kernels.registry import registered_fn
from dflab.runtime.fusion import FUSED, fuse_elementwise
from dflab.runtime.partition import verify


def _config(mode=tf.RewriterConfig.ON, **kw):
    return tf.ConfigProto(graph_options=tf.GraphOptions(
        rewrite_options=tf.RewriterConfig(remapping=mode)), **kw)


def _run(fetches, feeds=None, mode=tf.RewriterConfig.ON, **kw):
    with tf.Session(config=_config(mode, **kw)) as s:
        return s.run(fetches, feeds)


def _executed(fetches, feeds=None, mode=tf.RewriterConfig.ON, **kw):
    """The nodes that ran, per device, as the partition graphs report them."""
    md = tf.RunMetadata()
    with tf.Session(config=_config(mode, **kw)) as s:
        s.run(fetches, feeds, options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE,
                                                    output_partition_graphs=True),
              run_metadata=md)
    return md


def _fused_nodes(md):
    return [n for g in md.partition_graphs for n in g.node if n.op == FUSED]


# --- the pass ------------------------------------------------------------------------------------
def test_a_chain_becomes_one_node_named_after_its_last_op():
    x = tf.placeholder(tf.float32, [None, 3], name="x")
    y = tf.nn.relu(x * 2.0 + 1.0, name="y")
    z = tf.sigmoid(y, name="z")
    xv = np.random.RandomState(0).randn(4, 3).astype(np.float32)
    md = _executed(z, {x: xv})
    [node] = _fused_nodes(md)
    assert node.name == "z"
    assert node.attr["fused_ops"] == ["mul", "add", "y", "z"]
    assert node.attr["fused_types"] == ["Mul", "AddV2", "Relu", "Sigmoid"]
    assert node.attr["expression"].startswith("t0 = Mul(in0, in1); t1 = AddV2(t0, in2)")
    names = {n.name for g in md.partition_graphs for n in g.node}
    assert not names & {"mul", "add", "y"}
    np.testing.assert_array_equal(_run(z, {x: xv}), _run(z, {x: xv}, tf.RewriterConfig.OFF))


def test_values_needed_elsewhere_stay_unfused():
    x = tf.placeholder(tf.float32, [3], name="x")
    a = tf.exp(x, name="a")  # fetched
    b = tf.square(a, name="b")
    c = tf.negative(b, name="c")  # also read by a MatMul outside any group
    d = tf.abs(c, name="d")
    m = tf.reshape(c, [1, 3], name="m")
    e = tf.sin(x, name="e")
    with tf.control_dependencies([e]):
        g = tf.identity(x, name="g")
    f = tf.cos(e, name="f")  # e is a control input of g: it must run as itself
    md = _executed([a, d, m, f, g], {x: np.ones(3, np.float32)})
    groups = {n.name: n.attr["fused_ops"] for n in _fused_nodes(md)}
    assert groups == {"c": ["b", "c"]}
    # d alone is not worth a fused node; e and f stay apart because of the control edge.
    assert {"a", "d", "e", "f"} <= {n.name for g in md.partition_graphs for n in g.node}


def test_groups_are_maximal_dags_not_only_chains():
    x = tf.placeholder(tf.float64, [5], name="x")
    s = tf.sigmoid(x)
    swish = tf.multiply(x, s, name="swish")
    out = tf.add(swish, tf.tanh(swish), name="out")
    xv = np.linspace(-3, 3, 5)
    [node] = _fused_nodes(_executed(out, {x: xv}))
    assert sorted(node.attr["fused_types"]) == ["AddV2", "Mul", "Sigmoid", "Tanh"]
    np.testing.assert_array_equal(_run(out, {x: xv}),
                                  _run(out, {x: xv}, tf.RewriterConfig.OFF))


def test_a_group_can_end_in_a_reduction_with_its_axes_and_keep_dims():
    x = tf.placeholder(tf.float32, [4, 5, 6], name="x")
    y = tf.placeholder(tf.float32, [5, 1], name="y")
    d = tf.squared_difference(x, y)
    outs = [tf.reduce_sum(d, axis=[0, 2], keepdims=True, name="sum"),
            tf.reduce_mean(tf.exp(-d), axis=1, name="mean"),
            tf.reduce_max(tf.sqrt(d + 1.0), name="max"),
            tf.reduce_min(d * 3.0, axis=-1, name="min"),
            tf.reduce_prod(tf.abs(x) + 0.5, axis=0, name="prod")]
    rs = np.random.RandomState(1)
    feeds = {x: rs.randn(4, 5, 6).astype(np.float32), y: rs.randn(5, 1).astype(np.float32)}
    fused = _run(outs, feeds)
    plain = _run(outs, feeds, tf.RewriterConfig.OFF)
    for f, p in zip(fused, plain):
        assert f.dtype == p.dtype and f.shape == p.shape
        np.testing.assert_array_equal(f, p)
    sinks = {n.name: n.attr["fused_types"][-1] for n in _fused_nodes(_executed(outs, feeds))}
    # d is read by three reductions: it is computed once, unfused, and each group starts at it.
    assert sinks == {"mean": "Mean", "max": "Max", "min": "Min", "prod": "Prod"}


def test_integer_and_mixed_groups_are_not_fused():
    i = tf.placeholder(tf.int32, [3])
    j = tf.abs(i * 2 + 1)
    md = _executed(j, {i: np.array([1, -2, 3], np.int32)})
    assert _fused_nodes(md) == []


def test_bias_add_fuses_only_as_a_trailing_add():
    x = tf.placeholder(tf.float32, [2, 3, 4, 5])
    b = tf.constant(np.arange(5, dtype=np.float32))
    nhwc = tf.nn.relu(tf.nn.bias_add(x * 1.0, b), name="nhwc")
    c = tf.constant(np.arange(3, dtype=np.float32))
    nchw = tf.nn.relu(tf.nn.bias_add(x * 1.0, c, data_format="NCHW"), name="nchw")
    xv = np.random.RandomState(2).randn(2, 3, 4, 5).astype(np.float32)
    groups = {n.name: n.attr["fused_types"] for n in _fused_nodes(_executed([nhwc, nchw],
                                                                            {x: xv}))}
    assert groups["nhwc"] == ["Mul", "BiasAdd", "Relu"]
    assert "BiasAdd" not in groups.get("nchw", [])
    fused = _run([nhwc, nchw], {x: xv})
    plain = _run([nhwc, nchw], {x: xv}, tf.RewriterConfig.OFF)
    for f, p in zip(fused, plain):
        np.testing.assert_array_equal(f, p)


def test_default_fuses_only_on_gpu_kernels_and_off_never():
    x = tf.placeholder(tf.float32, [3])
    y = tf.exp(tf.abs(x) * 2.0)
    feeds = {x: np.ones(3, np.float32)}
    assert _fused_nodes(_executed(y, feeds, tf.RewriterConfig.DEFAULT)) == []
    assert _fused_nodes(_executed(y, feeds, tf.RewriterConfig.OFF)) == []
    # Simulated GPUs run the CPU kernels: the default leaves them alone too.
    with tf.device("/gpu:0"):
        z = tf.exp(tf.abs(x) * 3.0)
    sim = {"simulated_devices": {"GPU": 1}}
    assert _fused_nodes(_executed(z, feeds, tf.RewriterConfig.DEFAULT, dflab=sim)) == []
    assert len(_fused_nodes(_executed(z, feeds, dflab=sim))) == 1
    with pytest.raises(ValueError, match="remapping"):
        tf.RewriterConfig(remapping=7)


def test_fed_intermediates_cut_the_group():
    x = tf.placeholder(tf.float32, [3], name="x")
    a = tf.exp(x, name="a")
    b = tf.negative(a, name="b")
    c = tf.square(b, name="c")
    feeds = {x: np.ones(3, np.float32), b: np.full(3, 5.0, np.float32)}
    np.testing.assert_array_equal(_run(c, feeds), np.full(3, 25.0, np.float32))


def test_a_training_step_matches_the_unfused_one_exactly():
    rs = np.random.RandomState(3)
    xs = rs.randn(32, 8).astype(np.float32)
    ys = rs.randn(32, 1).astype(np.float32)

    def train(mode):
        tf.reset_default_graph()
        tf.set_random_seed(7)
        x = tf.placeholder(tf.float32, [None, 8])
        y = tf.placeholder(tf.float32, [None, 1])
        h = tf.layers.dense(x, 16, activation=tf.nn.relu)
        h = tf.tanh(h) * tf.sigmoid(h)
        p = tf.layers.dense(h, 1)
        loss = tf.reduce_mean(tf.square(p - y))
        step = tf.train.MomentumOptimizer(0.05, 0.9).minimize(loss)
        with tf.Session(config=_config(mode)) as s:
            s.run(tf.global_variables_initializer())
            losses = [s.run([loss, step], {x: xs, y: ys})[0] for _ in range(5)]
            return losses, s.run(tf.trainable_variables())

    fused_losses, fused_vars = train(tf.RewriterConfig.ON)
    plain_losses, plain_vars = train(tf.RewriterConfig.OFF)
    assert fused_losses == plain_losses and fused_losses[-1] < fused_losses[0]
    for f, p in zip(fused_vars, plain_vars):
        np.testing.assert_array_equal(f, p)


def test_partitions_fuse_each_device_and_stay_valid():
    x = tf.placeholder(tf.float32, [6], name="x")
    with tf.device("/cpu:0"):
        a = tf.exp(tf.abs(x) * 0.5, name="a")
    with tf.device("/cpu:1"):
        b = tf.tanh(a - 1.0, name="b1") * 2.0
        b = tf.identity(b, name="b")
    with tf.device("/cpu:0"):
        c = tf.sqrt(tf.square(b) + a, name="c")
    cfg = _config(device_count={"CPU": 2})
    xv = np.linspace(-1, 1, 6).astype(np.float32)
    with tf.Session(config=cfg) as s:
        fused = s.run(c, {x: xv})
        plan = next(iter(s._master._plans.values()))
        verify(plan.partitioning)
        kinds = {d: [n.type for n in nodes] for d, nodes in plan.partitions.items()}
    assert all(FUSED in types for types in kinds.values())
    np.testing.assert_array_equal(
        fused, _run(c, {x: xv}, tf.RewriterConfig.OFF, device_count={"CPU": 2}))


def test_fusion_inside_loops_and_untaken_conds():
    x = tf.placeholder(tf.float64, [4])

    def body(i, v):
        return i + 1, tf.tanh(v * 0.9 + 0.1) * tf.sigmoid(v)

    _, loop = tf.while_loop(lambda i, v: i < 5, body, [tf.constant(0), x])
    pred = tf.placeholder(tf.bool, [])
    branch = tf.cond(pred, lambda: tf.exp(-tf.abs(loop)) + 1.0, lambda: tf.square(loop) * 2.0)
    grad = tf.gradients(tf.reduce_sum(branch), x)[0]
    xv = np.array([-1.0, 0.0, 0.5, 2.0])
    for p in (True, False):
        feeds = {x: xv, pred: p}
        fused = _run([branch, grad], feeds)
        plain = _run([branch, grad], feeds, tf.RewriterConfig.OFF)
        for f, q in zip(fused, plain):
            np.testing.assert_array_equal(f, q)
    assert len(_fused_nodes(_executed([branch, grad], {x: xv, pred: True}))) >= 3


def test_traces_attribute_time_to_the_fused_ops():
    x = tf.placeholder(tf.float32, [100], name="x")
    y = tf.exp(tf.sin(x, name="s") * 2.0, name="y")
    md = _executed(y, {x: np.ones(100, np.float32)})
    [stats] = [ns for d in md.step_stats.dev_stats for ns in d.node_stats if ns.node_name == "y"]
    assert stats.fused_ops == ["s", "mul", "y"]
    assert stats.timeline_label.startswith("y = _FusedElementwise(")
    trace = json.loads(timeline.Timeline(md.step_stats).generate_chrome_trace_format())
    [event] = [e for e in trace["traceEvents"] if e.get("args", {}).get("name") == "y"]
    assert event["name"] == FUSED and event["args"]["fused_ops"] == "s, mul, y"


def test_a_failing_fused_step_names_the_users_op_and_line():
    a = tf.placeholder(tf.float32, [None], name="a")
    b = tf.placeholder(tf.float32, [None], name="b")
    bad = tf.add(tf.exp(a), b, name="bad")
    out = tf.negative(bad, name="out")
    with tf.Session(config=_config()) as s:
        with pytest.raises(tf.errors.InvalidArgumentError) as info:
            s.run(out, {a: np.ones(2, np.float32), b: np.ones(3, np.float32)})
        assert info.value.op is bad.op
        assert "broadcast" in str(info.value) and "fused node out" in str(info.value)
        assert "test_fusion.py" in str(info.value)
        # The session keeps working.
        np.testing.assert_allclose(s.run(out, {a: np.zeros(2, np.float32),
                                               b: np.ones(2, np.float32)}), [-2.0, -2.0])


def test_stepping_shows_the_fused_node_and_explains_fused_ops():
    from dflab.runtime.stepping import StepRun

    x = tf.placeholder(tf.float32, [3], name="x")
    mid = tf.exp(x, name="mid")
    y = tf.negative(mid, name="y")
    with tf.Session(config=_config()) as s:
        run = StepRun(s, y, {x: np.zeros(3, np.float32)})
        with pytest.raises(tf.errors.NotFoundError, match="mid .*fused into y"):
            run.step("mid")
        events = run.run_to("y")
        assert [e.name for e in events][-1] == "y" and run.finished
        np.testing.assert_array_equal(run.result, [-1.0, -1.0, -1.0])


def test_the_pass_keeps_fetched_and_fed_tensors_and_makes_no_copy_of_unfused_lists():
    x = tf.placeholder(tf.float32, [3])
    y = tf.abs(tf.negative(x))
    ops = [x.op, y.op.inputs[0].op, y.op]
    assert len(fuse_elementwise(ops, "/cpu:0", keep=[y.op.inputs[0]])[1]) == 0
    nodes, fused = fuse_elementwise(ops, "/cpu:0")
    assert [n.type for n in nodes] == ["Placeholder", FUSED] and fused[0].fused_ops == ops[1:]


# --- the NumPy evaluator -------------------------------------------------------------------------
UNARY = sorted(t for t, e in ELEMENTWISE.items() if e.arity == 1)
BINARY = sorted(t for t, e in ELEMENTWISE.items() if e.arity == 2 and t != "BiasAdd")


def _reference(expr, inputs):
    """Step by step with the registered CPU kernels, no buffer reuse."""
    values = list(inputs)
    with np.errstate(all="ignore"):
        for op_type, args in expr.steps:
            fn = ELEMENTWISE[op_type].ufunc or registered_fn(op_type)
            values.append(fn(*[values[a] for a in args]))
    return np.asarray(values[-1])


@st.composite
def _expressions(draw):
    n_inputs = draw(st.integers(1, 3))
    shapes = draw(st.lists(st.sampled_from([(), (1,), (4,), (3, 1), (3, 4), (2, 3, 4)]),
                           min_size=n_inputs, max_size=n_inputs))
    steps = []
    for j in range(draw(st.integers(1, 8))):
        avail = n_inputs + j
        if draw(st.booleans()):
            steps.append((draw(st.sampled_from(UNARY)), (draw(st.integers(0, avail - 1)),)))
        else:
            steps.append((draw(st.sampled_from(BINARY)),
                          (draw(st.integers(0, avail - 1)), draw(st.integers(0, avail - 1)))))
    dtype = draw(st.sampled_from(["float32", "float64"]))
    return FusedExpression(n_inputs, tuple(steps), dtype), shapes


@settings(max_examples=300, deadline=None)
@given(_expressions(), st.integers(0, 2**31 - 1))
def test_evaluator_equals_the_unfused_kernels_and_never_writes_its_inputs(case, seed):
    expr, shapes = case
    rs = np.random.RandomState(seed)
    inputs = [np.asarray(rs.uniform(-2, 2, s), dtype=expr.dtype) for s in shapes]
    before = [a.copy() for a in inputs]
    try:
        want = _reference(expr, inputs)
    except ValueError:  # shapes that do not broadcast fail in both
        with pytest.raises(ValueError):
            numpy_evaluator(expr)(*inputs)
        return
    got = numpy_evaluator(expr)(*inputs)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    for a, b in zip(inputs, before):
        np.testing.assert_array_equal(a, b)


def test_expressions_reject_what_they_cannot_fuse():
    with pytest.raises(ValueError, match="cannot be fused"):
        FusedExpression(1, (("MatMul", (0, 0)),), "float32")
    with pytest.raises(ValueError, match="not computed before"):
        FusedExpression(1, (("Exp", (1,)),), "float32")
    with pytest.raises(ValueError, match="floating point"):
        FusedExpression(1, (("Exp", (0,)),), "int32")


# --- CUDA source -------------------------------------------------------------------------------
def test_cuda_source_covers_every_op_and_is_made_from_the_structure_only():
    steps = tuple((t, (0,) if e.arity == 1 else (0, 0)) for t, e in ELEMENTWISE.items())
    # Chain them: each step reads the previous one.
    steps = tuple((t, tuple(1 + j - 1 if j else 0 for _ in args))
                  for j, (t, args) in enumerate(steps))
    expr = FusedExpression(1, steps, "float32")
    args = cuda_kernel_args(expr)
    src = args["preamble"]
    assert src.count("const float t") == len(ELEMENTWISE)
    assert args["operation"] == "out0 = fused((float)in0)"
    assert args["in_params"] == "float32 in0" and args["out_params"] == "float32 out0"
    # Two groups with the same structure share one compiled kernel, whatever their names.
    assert expr.kernel_cache_key == FusedExpression(1, steps, "float32").kernel_cache_key
    assert expr.kernel_cache_key != FusedExpression(1, steps, "float64").kernel_cache_key
    for red in REDUCTIONS:
        r = cuda_kernel_args(FusedExpression(1, (("Exp", (0,)),), "float64", (red, False)))
        assert r["map_expr"] == "fused((double)in0)" and r["reduce_type"] == "double"
        assert "double t0 = exp(in0)" in r["preamble"]


@pytest.mark.parametrize("dtype,ctype,inf", [("float32", "float", "CUDART_INF_F"),
                                             ("float16", "float", "CUDART_INF_F"),
                                             ("float64", "double", "CUDART_INF")])
def test_cuda_reductions_start_from_their_identity(dtype, ctype, inf):
    """CuPy starts a reduction from ``identity`` (0 when it is empty): Max and Min must start
    from -inf and +inf, as TF's empty max and min are, or a max of negatives would be 0."""
    identities = {}
    for red in REDUCTIONS:
        r = cuda_kernel_args(FusedExpression(1, (("Exp", (0,)),), dtype, (red, False)))
        assert r["reduce_type"] == ctype
        identities[red] = r["identity"]
    assert identities == {"Sum": "0", "Mean": "0", "Prod": "1", "Max": f"-{inf}", "Min": inf}


def test_graph_names_never_reach_the_generated_source():
    x = tf.placeholder(tf.float32, [3], name="x")
    evil = '*/ } __global__ void pwn() { /*'
    with tf.name_scope("s"):
        y = tf.exp(tf.negative(x), name="y")
    y.op._name = evil  # whatever a name holds, the source is made of the table and indices
    nodes, [fused] = fuse_elementwise([x.op, y.op.inputs[0].op, y.op], "/cpu:0")
    src = str(cuda_kernel_args(fused.expression))
    assert "pwn" not in src and "s/" not in src


# --- on a GPU ------------------------------------------------------------------------------------
def _cupy():
    cupy = pytest.importorskip("cupy")
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("no CUDA device")
    except cupy.cuda.runtime.CUDARuntimeError:
        pytest.skip("no CUDA device")
    return cupy


@pytest.mark.gpu
@settings(max_examples=60, deadline=None)
@given(_expressions(), st.integers(0, 2**31 - 1))
def test_cupy_kernels_agree_with_the_numpy_evaluator(case, seed):
    from dflab.kernels.fused_kernels import cupy_kernel

    cupy = _cupy()
    expr, shapes = case
    rs = np.random.RandomState(seed)
    inputs = [np.asarray(rs.uniform(-2, 2, s), dtype=expr.dtype) for s in shapes]
    try:
        want = numpy_evaluator(expr)(*inputs)
    except ValueError:
        return
    got = cupy_kernel(expr, cupy)(*[cupy.asarray(a) for a in inputs])
    rtol = 1e-5 if expr.dtype == "float32" else 1e-12
    np.testing.assert_allclose(cupy.asnumpy(got), want, rtol=rtol, atol=rtol, equal_nan=True)


@pytest.mark.gpu
@pytest.mark.parametrize("red", sorted(REDUCTIONS))
def test_cupy_reductions_agree_with_the_numpy_evaluator(red):
    from dflab.kernels.fused_kernels import cupy_kernel

    cupy = _cupy()
    expr = FusedExpression(2, (("Mul", (0, 1)), ("Exp", (2,))), "float32", (red, True))
    rs = np.random.RandomState(0)
    a, b = rs.randn(8, 16).astype(np.float32), rs.randn(16).astype(np.float32)
    k = cupy_kernel(expr, cupy)
    got = k(cupy.asarray(a), cupy.asarray(b), axis=(1,), keepdims=True)
    fn = {"Sum": np.sum, "Prod": np.prod, "Max": np.max, "Min": np.min, "Mean": np.mean}[red]
    np.testing.assert_allclose(cupy.asnumpy(got), fn(np.exp(a * b), axis=1, keepdims=True),
                               rtol=1e-5)


def test_partial_runs_with_fusion_find_the_fused_nodes():
    a = tf.placeholder(tf.float32, [3], name="a")
    b = tf.placeholder(tf.float32, [3], name="b")
    first = tf.exp(tf.negative(a), name="first")
    second = tf.square(tf.add(first, b), name="second") * 2.0
    with tf.Session(config=_config()) as s:
        h = s.partial_run_setup([first, second], [a, b])
        f = s.partial_run(h, first, {a: np.zeros(3, np.float32)})
        np.testing.assert_array_equal(f, np.ones(3, np.float32))
        np.testing.assert_array_equal(s.partial_run(h, second, {b: np.ones(3, np.float32)}),
                                      np.full(3, 8.0, np.float32))
