"""Resource variables: a handle, reads and writes as ops, the same numbers as reference
variables, and the ordering a reference variable's shared snapshot cannot give."""

import subprocess
import sys

import numpy as np
import pytest

import dflab as tf
from dflab.framework.registry import get_op_def
from dflab.ops.resource_variable_ops import ResourceVariable
from dflab.ops.variables import RefVariable


@pytest.fixture(autouse=True)
def _default_kind_restored():
    before = tf.resource_variables_enabled()
    yield
    (tf.enable_resource_variables if before else tf.disable_resource_variables)()


def _run(fetches, feed=None):
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        return sess.run(fetches, feed)


def test_a_resource_variable_is_a_handle_with_tfs_op_names():
    v = tf.Variable([1.0, 2.0], name="v", use_resource=True)
    assert isinstance(v, tf.Variable) and isinstance(v, ResourceVariable)
    assert v.name == "v:0" and v.op.type == "VarHandleOp" and v.dtype == tf.float32
    assert v.handle.dtype == tf.resource and v.shape.as_list() == [2]
    names = {o.name: o.type for o in tf.get_default_graph().get_operations()}
    # The same structure TF 2.x compat.v1 builds for a resource variable.
    assert names == {"v/Initializer/initial_value": "Const", "v": "VarHandleOp",
                     "v/IsInitialized/VarIsInitializedOp": "VarIsInitializedOp",
                     "v/Assign": "AssignVariableOp", "v/Read/ReadVariableOp": "ReadVariableOp"}
    assert repr(v) == "<tf.Variable 'v:0' shape=(2,) dtype=float32>"


def test_the_default_kind_and_use_resource():
    tf.disable_resource_variables()
    assert type(tf.Variable(1.0)) is tf.Variable
    assert isinstance(tf.Variable(1.0, use_resource=True), ResourceVariable)
    assert isinstance(tf.get_variable("g", [2], use_resource=True), ResourceVariable)
    with tf.variable_scope("s", use_resource=True):
        assert isinstance(tf.get_variable("h", [2]), ResourceVariable)
    tf.enable_resource_variables()
    assert tf.resource_variables_enabled()
    assert isinstance(tf.Variable(1.0), ResourceVariable)
    assert not isinstance(tf.Variable(1.0, use_resource=False), ResourceVariable)
    assert not isinstance(RefVariable(1.0), ResourceVariable)
    tf.compat.v1.disable_v2_behavior()  # TF1 behaviour: reference variables
    assert not tf.resource_variables_enabled()


def test_a_fresh_process_follows_tf2_compat_v1():
    # What TF 2.21's compat.v1 does in graph mode: Variable and get_variable make resource
    # variables; disable_v2_behavior() makes the variables after it reference ones.
    program = ("import dflab as tf\n"
               "tf.compat.v1.disable_eager_execution()\n"
               "print(tf.resource_variables_enabled(), tf.Variable(1.0).op.type,\n"
               "      tf.get_variable('g', [2]).op.type)\n"
               "tf.compat.v1.disable_v2_behavior()\n"
               "print(tf.resource_variables_enabled(), tf.Variable(1.0).op.type,\n"
               "      tf.get_variable('h', [2]).op.type)\n")
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    assert out.splitlines() == ["True VarHandleOp VarHandleOp",
                                "False VariableV2 VariableV2"]


def test_a_read_ordered_after_an_update_sees_the_update():
    v = tf.Variable([1.0, 2.0], use_resource=True)
    update = v.assign_add([10.0, 10.0], read_value=False)
    with tf.control_dependencies([update]):
        after = tf.identity(v)  # a fresh ReadVariableOp inside the control context
    assert after.op.inputs[0].op.type == "ReadVariableOp"
    for _ in range(5):  # the order is guaranteed, not a race that happens to go this way
        np.testing.assert_array_equal(_run(after), [11.0, 12.0])


def test_assign_methods_return_the_new_value():
    v = tf.Variable(2.0, use_resource=True)
    a = v.assign(5.0)
    b = v.assign_add(1.5)
    c = v.assign_sub(0.5)
    with tf.Session() as sess:
        sess.run(v.initializer)
        assert sess.run(a) == 5.0
        assert sess.run(b) == 6.5
        assert sess.run(c) == 6.0
        assert sess.run(v) == 6.0
        assert sess.run(tf.assign(v, 1.0)) == 1.0  # the module-level builders dispatch
        assert sess.run(tf.assign_add(v, 1.0)) == 2.0


def test_an_uninitialized_read_names_the_variable():
    v = tf.Variable([1.0], name="weights", use_resource=True)
    with tf.Session() as sess:
        assert not sess.run(v.is_initialized())
        assert sess.run(tf.report_uninitialized_variables()).tolist() == [b"weights"]
        with pytest.raises(tf.errors.FailedPreconditionError, match="weights"):
            sess.run(v.value())


def test_shape_and_dtype_errors_name_the_op():
    v = tf.Variable(np.zeros([2, 3], np.float32), use_resource=True)
    with pytest.raises(ValueError, match="incompatible"):
        v.assign(np.zeros([3, 2], np.float32))
    with pytest.raises(ValueError, match="float64"):
        v.assign_add(tf.constant(np.zeros([2, 3])), read_value=False)


@pytest.mark.parametrize("kind,np_fn", [
    ("update", None), ("add", np.add), ("sub", np.subtract), ("mul", np.multiply),
    ("div", np.divide), ("min", np.minimum), ("max", np.maximum)])
def test_scatter_ops_match_numpy(kind, np_fn):
    init = np.arange(12, dtype=np.float32).reshape(4, 3) + 1
    idx = np.array([3, 0, 3])
    upd = np.random.RandomState(0).uniform(1, 2, (3, 3)).astype(np.float32)
    v = tf.Variable(init, use_resource=True)
    op_type = "ResourceScatter" + kind.capitalize()
    out = v._scatter(op_type, idx, upd, None)
    want = init.copy()
    if np_fn is None:
        want[idx] = upd  # the last of repeated rows wins
    else:
        np_fn.at(want, idx, upd)
    np.testing.assert_allclose(_run(out), want, rtol=1e-6)


def test_a_value_read_before_a_sparse_write_keeps_its_value():
    """The scatter writes into the variable's buffer: a read still held by the step must
    not see it (TF copies a variable's buffer on write while a reader holds it)."""
    init = np.zeros([3, 2], np.float32)
    v = tf.Variable(init, use_resource=True)
    before = v.value()
    with tf.control_dependencies([before]):
        write = v.scatter_add(tf.IndexedSlices(tf.ones([1, 2]), tf.constant([1])))
    got_before, got_after = _run([before, write])
    np.testing.assert_array_equal(got_before, init)
    np.testing.assert_array_equal(got_after, [[0, 0], [1, 1], [0, 0]])


def test_gradients_dense_sparse_and_through_a_loop():
    x0 = np.array([[0.5, -1.0], [2.0, 0.25], [1.5, 1.0]], np.float32)
    v = tf.Variable(x0, use_resource=True)
    dense = tf.reduce_sum(v * v)
    rows = tf.gather(v, [2, 2, 0])
    sparse = tf.reduce_sum(rows * rows)
    picked = tf.reduce_sum(v.sparse_read([1]))
    _, looped = tf.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, a * v), [0, tf.ones([3, 2])])
    g_dense, g_sparse, g_picked, g_loop = tf.gradients(
        [dense], [v]) + tf.gradients([sparse], [v]) + tf.gradients([picked], [v]) + \
        tf.gradients([tf.reduce_sum(looped)], [v])
    assert isinstance(g_sparse, tf.IndexedSlices) and isinstance(g_picked, tf.IndexedSlices)
    with tf.Session() as sess:
        sess.run(v.initializer)
        gd, gs, gp, gl = sess.run([g_dense, tf.convert_to_tensor(g_sparse),
                                   tf.convert_to_tensor(g_picked), g_loop])
    np.testing.assert_allclose(gd, 2 * x0, rtol=1e-6)
    want = np.zeros_like(x0)
    np.add.at(want, [2, 2, 0], 2 * x0[[2, 2, 0]])
    np.testing.assert_allclose(gs, want, rtol=1e-6)
    np.testing.assert_allclose(gp, [[0, 0], [1, 1], [0, 0]])
    np.testing.assert_allclose(gl, 3 * x0 ** 2, rtol=1e-5)


def _numerical_grad(f, x, eps=1e-3):
    g = np.zeros_like(x, dtype=np.float64)
    for i in np.ndindex(x.shape):
        up, down = x.astype(np.float64), x.astype(np.float64)
        up[i] += eps
        down[i] -= eps
        g[i] = (f(up) - f(down)) / (2 * eps)
    return g


def test_the_gradient_of_a_model_on_resource_variables_matches_a_numerical_one():
    rng = np.random.RandomState(3)
    x, w0 = rng.randn(4, 3).astype(np.float32), rng.randn(3, 2).astype(np.float32)
    w = tf.Variable(w0, use_resource=True)
    loss = tf.reduce_sum(tf.tanh(tf.matmul(x, w)) ** 2)
    grad = tf.gradients(loss, [w])[0]
    with tf.Session() as sess:
        sess.run(w.initializer)
        got = sess.run(grad)
    want = _numerical_grad(lambda m: np.sum(np.tanh(x @ m) ** 2), w0)
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3)


OPTIMIZERS = [
    lambda: tf.train.GradientDescentOptimizer(0.1),
    lambda: tf.train.MomentumOptimizer(0.1, 0.9),
    lambda: tf.train.MomentumOptimizer(0.1, 0.9, use_nesterov=True),
    lambda: tf.train.AdagradOptimizer(0.1),
    lambda: tf.train.RMSPropOptimizer(0.05, momentum=0.5),
    lambda: tf.train.RMSPropOptimizer(0.05, centered=True),
    lambda: tf.train.AdamOptimizer(0.05),
]


def _train(make_opt, use_resource, sparse):
    tf.reset_default_graph()
    rng = np.random.RandomState(7)
    w = tf.Variable(rng.randn(5, 3).astype(np.float32), use_resource=use_resource)
    if sparse:
        loss = tf.reduce_sum(tf.square(tf.gather(w, [0, 3, 3]) - 1.0))
    else:
        loss = tf.reduce_sum(tf.square(tf.matmul(rng.randn(2, 5).astype(np.float32), w)))
    gs = tf.train.get_or_create_global_step()
    step = make_opt().minimize(loss, global_step=gs)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(3):
            sess.run(step)
        return sess.run([w, gs])


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("make_opt", OPTIMIZERS)
def test_every_optimizer_moves_resource_and_reference_variables_alike(make_opt, sparse):
    w_ref, gs_ref = _train(make_opt, False, sparse)
    w_res, gs_res = _train(make_opt, True, sparse)
    assert gs_ref == gs_res == 3
    np.testing.assert_allclose(w_res, w_ref, rtol=1e-6)
    ops = {o.type for o in tf.get_default_graph().get_operations()}
    assert any(t.startswith("Resource") for t in ops - {"ResourceGather"}), ops


def test_updates_change_variables_for_the_step_gate():
    for op_type in ("AssignVariableOp", "AssignAddVariableOp", "ResourceScatterAdd",
                    "ResourceApplyAdam", "ResourceSparseApplyAdagrad"):
        assert get_op_def(op_type).writes_variables, op_type
    for op_type in ("ReadVariableOp", "VarHandleOp", "ResourceGather", "VarIsInitializedOp"):
        assert not get_op_def(op_type).writes_variables, op_type


def test_checkpoints_move_between_the_two_kinds(tmp_path):
    path = str(tmp_path / "ck" / "model")
    (tmp_path / "ck").mkdir()
    w = tf.Variable(np.arange(6, dtype=np.float32).reshape(2, 3), name="w", use_resource=True)
    with tf.Session() as sess:
        sess.run(w.initializer)
        sess.run(w.assign_add(np.ones([2, 3], np.float32)))
        tf.train.Saver().save(sess, path)
    tf.reset_default_graph()
    w = tf.Variable(np.zeros([2, 3], np.float32), name="w", use_resource=False)
    with tf.Session() as sess:
        tf.train.Saver().restore(sess, path)
        np.testing.assert_array_equal(sess.run(w), np.arange(6).reshape(2, 3) + 1)
        tf.train.Saver().save(sess, path + "-ref")
    tf.reset_default_graph()
    w = tf.Variable(np.zeros([2, 3], np.float32), name="w", use_resource=True)
    with tf.Session() as sess:
        tf.train.Saver().restore(sess, path + "-ref")
        np.testing.assert_array_equal(sess.run(w), np.arange(6).reshape(2, 3) + 1)


def test_a_meta_graph_round_trip_keeps_the_kind(tmp_path):
    w = tf.Variable([1.0, 2.0], name="w", use_resource=True)
    r = tf.Variable([3.0], name="r", use_resource=False)
    path = str(tmp_path / "m.meta")
    tf.train.export_meta_graph(path)
    tf.reset_default_graph()
    tf.train.import_meta_graph(path)
    got = {v.op.name: v for v in tf.global_variables()}
    assert isinstance(got["w"], ResourceVariable) and not isinstance(got["r"],
                                                                        ResourceVariable)
    np.testing.assert_array_equal(_run(got["w"].value()), [1.0, 2.0])
    del w, r


def test_reads_and_updates_run_on_the_variables_device():
    with tf.device("/cpu:1"):
        v = tf.Variable([1.0, 2.0], use_resource=True)
    with tf.device("/cpu:0"):
        doubled = v * 2.0
        upd = v.assign_add([1.0, 1.0], read_value=False)
    meta = tf.RunMetadata()
    with tf.Session(config=tf.ConfigProto(device_count={"CPU": 2})) as sess:
        sess.run(v.initializer)
        sess.run(upd)
        out = sess.run(doubled, options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE),
                       run_metadata=meta)
    np.testing.assert_array_equal(out, [4.0, 6.0])
    devices = {n.node_name: d.device for d in meta.step_stats.dev_stats for n in d.node_stats}
    reads = [n for n in devices if n.endswith("ReadVariableOp") and not n.startswith("_")]
    assert reads and all(devices[n].endswith("CPU:1") for n in reads), devices


def test_count_up_to_on_a_resource_variable():
    c = tf.Variable(0, dtype=tf.int64, use_resource=True)
    up = c.count_up_to(2)
    with tf.Session() as sess:
        sess.run(c.initializer)
        assert [sess.run(up), sess.run(up)] == [0, 1]
        with pytest.raises(tf.errors.OutOfRangeError, match="limit of 2"):
            sess.run(up)


def test_resource_optimizer_updates_check_shapes_and_dtypes_when_built():
    from dflab.ops import training_ops

    v = tf.Variable(np.zeros([2, 3], np.float32), use_resource=True)
    acc = tf.Variable(np.zeros([2], np.float32), use_resource=True)
    with pytest.raises(ValueError, match="var and accum do not have the same shape"):
        training_ops.apply_momentum(v, acc, 0.1, np.ones((2, 3), np.float32), 0.9)
    with pytest.raises(ValueError, match="var and delta do not have the same shape"):
        training_ops.apply_gradient_descent(v, 0.1, np.ones((3, 2), np.float32))
    with pytest.raises(ValueError, match="lr is not a scalar"):
        training_ops.apply_adagrad(v, v, [0.1, 0.2], np.ones((2, 3), np.float32))
    with pytest.raises(ValueError, match="grad must be the same size as indices"):
        training_ops.sparse_apply_adagrad(v, v, 0.1, np.ones((3, 3), np.float32), [0, 1])
    with pytest.raises(TypeError, match="has type float64 that does not match type float32"):
        training_ops.apply_gradient_descent(v, 0.1, tf.ones([2, 3], tf.float64))
    op = training_ops.apply_gradient_descent(v, 0.1, np.ones((2, 3), np.float32))
    assert op.type == "ResourceApplyGradientDescent" and op.outputs == []


def test_on_a_cluster_reads_and_updates_run_on_the_ps_task():
    cluster = tf.train.ClusterSpec({"ps": ["rv-ps0:2222"], "worker": ["rv-w0:2222"]})
    servers = [tf.train.Server(cluster, job_name="ps", task_index=0),
               tf.train.Server(cluster, job_name="worker", task_index=0)]
    try:
        _train_on_the_cluster(cluster, servers[1])
    finally:
        for s in servers:  # state dropped, addresses freed for other tests
            s.stop()


def _train_on_the_cluster(cluster, worker):
    with tf.device(tf.train.replica_device_setter(cluster=cluster,
                                                  worker_device="/job:worker/task:0")):
        w = tf.Variable(np.ones([2], np.float32), name="w", use_resource=True)
        loss = tf.reduce_sum(w * w)
        train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
    assert w.op.device == "/job:ps/task:0"
    meta = tf.RunMetadata()
    with tf.Session(worker.target) as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(train, options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE),
                 run_metadata=meta)
        np.testing.assert_allclose(sess.run(w), [0.8, 0.8])
    where = {n.node_name: d.device for d in meta.step_stats.dev_stats for n in d.node_stats}
    state_ops = [n for n in where if not n.startswith("_") and
                 ("ReadVariableOp" in n or "ResourceApply" in n)]
    assert state_ops and all("/job:ps/" in where[n] for n in state_ops), where
    assert "/job:worker/" in where["mul"]


def test_gather_on_a_resource_variable_reads_only_its_rows_as_tf_does():
    # TF's gather on a resource variable is its sparse_read (ResourceGather on the handle): a
    # lookup in a big table never reads the table whole, and its gradient stays sparse.
    table = np.arange(30, dtype=np.float32).reshape(10, 3)
    v = tf.Variable(table, use_resource=True)
    rows = tf.gather(v, [4, 1, 4])
    assert rows.op.type == "ResourceGather" and rows.op.name == "Gather"
    assert rows.op.inputs[0] is v.handle
    train = tf.train.GradientDescentOptimizer(1.0).minimize(tf.reduce_sum(rows))
    update_types = {op.type for op in tf.get_default_graph().get_operations()
                    if op.name.startswith("GradientDescent/")}
    assert "ResourceScatterAdd" in update_types or "ResourceScatterSub" in update_types
    with tf.Session() as s:
        s.run(v.initializer)
        np.testing.assert_array_equal(s.run(rows), table[[4, 1, 4]])
        s.run(train)
        expected = table.copy()
        np.subtract.at(expected, [4, 1, 4], 1.0)
        np.testing.assert_array_equal(s.run(v), expected)
    ref = tf.Variable(table, use_resource=False)
    assert tf.gather(ref, [0]).op.type == "GatherV2"  # a reference variable's value is gathered


def test_validate_shape_false_keeps_the_initial_values_shape_as_tf():
    """TF 2.21: (2, 3) for a known initial value, (None, 3) for a partly known one; the
    handle's shape attr says the same, and a read's static shape follows it."""
    with tf.Graph().as_default():
        v = tf.Variable(tf.zeros([2, 3]), validate_shape=False, use_resource=True)
        p = tf.placeholder(tf.float32, [None, 3])
        w = tf.Variable(p, validate_shape=False, use_resource=True)
        assert v.shape.as_list() == [2, 3] and v.read_value().shape.as_list() == [2, 3]
        assert w.shape.as_list() == [None, 3] and w.read_value().shape.as_list() == [None, 3]
        with tf.Session() as s:
            s.run(w.initializer, {p: np.ones((5, 3), np.float32)})
            assert s.run(w).shape == (5, 3)
