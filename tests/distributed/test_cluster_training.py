"""Training patterns on a cluster, on both transports (in-process and Ray): sparse gradients
aggregated across workers by a ``SparseConditionalAccumulator`` on the ps (exact means, stale
gradients dropped), and in-graph replication (one client, a tower per worker task, averaged
gradients) equal to the same model trained on one device; between-graph replication: the device
setter's placement, every asynchronous update applied, a partitioned variable saved and restored
as one, and a variable on a missing ps task refused with a clear error."""

import uuid

import numpy as np
import pytest

import dflab as tf

TASKS = [("ps", 0), ("worker", 0), ("worker", 1)]


@pytest.fixture(scope="module", params=["in-process", "ray"])
def targets(request):
    """Session targets of worker 0 and worker 1 of a one-ps, two-worker cluster."""
    tag = uuid.uuid4().hex[:8]
    if request.param == "ray":
        request.getfixturevalue("ray_instance")
        spec = tf.train.ClusterSpec({"ps": ["ps0:1"], "worker": ["w0:1", "w1:1"]})
        config = tf.ConfigProto(dflab={"ray_namespace": f"ct-{tag}"})
        servers = [tf.train.Server(spec, job_name=j, task_index=i, protocol="ray",
                                   config=config) for j, i in TASKS]
    else:
        spec = tf.train.ClusterSpec({"ps": [f"ct-ps-{tag}:1"],
                                     "worker": [f"ct-w0-{tag}:1", f"ct-w1-{tag}:1"]})
        servers = [tf.train.Server(spec, job_name=j, task_index=i) for j, i in TASKS]
    yield [servers[1].target, servers[2].target]
    for s in servers:
        s.stop()


CONFIG = tf.ConfigProto(operation_timeout_in_ms=60000)  # a guard: a lost task fails, not hangs


def test_sparse_gradients_from_two_workers_are_averaged_per_row_and_stale_ones_dropped(
        targets):
    g = tf.Graph()
    with g.as_default():
        with tf.device("/job:ps/task:0"):
            acc = tf.SparseConditionalAccumulator(tf.float32, shape=[6, 2],
                                                  shared_name=f"acc-{uuid.uuid4().hex[:6]}")
            count = acc.num_accumulated()
            take = acc.take_indexed_slices_grad(2)
            new_step = tf.placeholder(tf.int64, [])
            set_step = acc.set_global_step(new_step)
        applies = []
        for k in range(2):
            with tf.device(f"/job:worker/task:{k}"):
                idx = tf.placeholder(tf.int64, [None])
                vals = tf.placeholder(tf.float32, [None, 2])
                local = tf.placeholder(tf.int64, [])
                grad = tf.IndexedSlices(vals * 1.0, idx, tf.constant([6, 2], tf.int64))
                applies.append((acc.apply_indexed_slices_grad(grad, local_step=local),
                                idx, vals, local))

    def apply(sess, k, rows, values, step):
        op, idx, vals, local = applies[k]
        sess.run(op, {idx: rows, vals: values, local: step})

    with tf.Session(targets[0], graph=g, config=CONFIG) as w0, \
            tf.Session(targets[1], graph=g, config=CONFIG) as w1:
        apply(w0, 0, [0, 3], [[1, 1], [2, 2]], 0)
        apply(w1, 1, [3, 5], [[4, 6], [10, 20]], 0)
        assert w0.run(count) == 2
        got = w0.run(take)
        np.testing.assert_array_equal(got.indices, [0, 3, 5])
        # Each row is the mean over the gradients that touched it.
        np.testing.assert_array_equal(got.values, [[1, 1], [3, 4], [10, 20]])
        np.testing.assert_array_equal(got.dense_shape, [6, 2])
        assert w0.run(count) == 0
        w0.run(set_step, {new_step: 1})
        apply(w1, 1, [1], [[9, 9]], 0)  # computed before step 1: stale, dropped
        assert w1.run(count) == 0
        apply(w0, 0, [4], [[2, 4]], 1)
        apply(w1, 1, [4, 1], [[4, 8], [1, 3]], 1)
        assert w1.run(count) == 2
        got = w1.run(take)
    np.testing.assert_array_equal(got.indices, [1, 4])
    np.testing.assert_array_equal(got.values, [[1, 3], [3, 6]])


X = np.linspace(-1.0, 1.0, 24, dtype=np.float32).reshape(8, 3)
Y = (X @ np.array([[1.0], [-2.0], [0.5]], np.float32) + 0.25).astype(np.float32)


def _linear_model():
    with tf.device("/job:ps/task:0"):
        w = tf.Variable(np.zeros((3, 1), np.float32), name="w")
        b = tf.Variable(0.0, name="b")
    return w, b


def _loss(w, b, x, y):
    return tf.reduce_mean(tf.square(tf.matmul(x, w) + b - y))


def _one_device_training(steps):
    g = tf.Graph()
    with g.as_default():
        w, b = _linear_model()
        opt = tf.train.GradientDescentOptimizer(0.1)
        train = opt.minimize(_loss(w, b, tf.constant(X), tf.constant(Y)))
        init = tf.global_variables_initializer()
    with tf.Session(graph=g, config=tf.ConfigProto(allow_soft_placement=True)) as s:
        s.run(init)
        for _ in range(steps):
            s.run(train)
        return s.run([w, b])


def test_in_graph_replication_averages_tower_gradients_like_one_device(targets):
    steps = 4
    g = tf.Graph()
    with g.as_default():
        w, b = _linear_model()
        opt = tf.train.GradientDescentOptimizer(0.1)
        tower_grads = []
        for k in range(2):  # each tower: half of the batch, on its worker task
            with tf.device(f"/job:worker/task:{k}"), tf.name_scope(f"tower_{k}"):
                x, y = tf.constant(X[4 * k:4 * k + 4]), tf.constant(Y[4 * k:4 * k + 4])
                tower_grads.append(opt.compute_gradients(_loss(w, b, x, y), [w, b]))
        with tf.device("/job:worker/task:0"):
            averaged = [(tf.add_n([tg[i][0] for tg in tower_grads]) / 2.0, tower_grads[0][i][1])
                        for i in range(2)]
        train = opt.apply_gradients(averaged)
        init = tf.global_variables_initializer()
    with tf.Session(targets[0], graph=g, config=CONFIG) as s:
        s.run(init)
        for _ in range(steps):
            s.run(train)
        got = s.run([w, b])
        plan = max(s.master._plans.values(), key=lambda p: len(p.parts))
        devices = {p.device for p in plan.parts}
    assert any("/job:worker/replica:0/task:1" in d for d in devices)  # tower 1 ran there
    want = _one_device_training(steps)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-5, atol=1e-7)
    assert not np.allclose(want[0], 0.0)  # it trained


# --- between-graph replication: placement, async updates, partitioned variables, bad input ---
def _client_graph(k, name, partitioned=False):
    """Worker ``k``'s own graph: ``name`` on the ps through the device setter, its increment."""
    g = tf.Graph()
    with g.as_default(), tf.device(tf.train.replica_device_setter(
            ps_tasks=1, worker_device=f"/job:worker/task:{k}")):
        if partitioned:
            v = tf.get_variable(name, [6, 2], initializer=tf.zeros_initializer(),
                                partitioner=tf.fixed_size_partitioner(2))
            bump = tf.group(*[tf.assign_add(p, tf.ones_like(p)) for p in v])
        else:
            v = tf.get_variable(name, [], initializer=tf.zeros_initializer())
            bump = tf.assign_add(v, 1.0)
        ones = tf.ones([1]) * tf.cast(k, tf.float32)  # computed on the worker
    return g, v, bump, ones


def test_device_setter_places_state_on_the_ps_and_every_async_update_applies(targets):
    import threading

    name = f"counter_{uuid.uuid4().hex[:6]}"
    clients = [_client_graph(k, name) for k in range(2)]
    for k, (_, v, _, ones) in enumerate(clients):
        assert v.device == "/job:ps/task:0" and ones.op.device == f"/job:worker/task:{k}"
    sessions = [tf.Session(targets[k], graph=clients[k][0], config=CONFIG) for k in range(2)]
    try:
        sessions[0].run(clients[0][1].initializer)  # the chief initializes; both share it
        errors = []

        def train(k, steps=25):
            try:
                for _ in range(steps):
                    sessions[k].run(clients[k][2])
            except Exception as e:  # noqa: BLE001 - re-raised in the test's thread
                errors.append(e)

        threads = [threading.Thread(target=train, args=(k,)) for k in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not errors and not any(t.is_alive() for t in threads)
        # Asynchronous: nothing waits for the other worker, and no update is lost.
        assert sessions[1].run(clients[1][1]) == 50.0
    finally:
        for s in sessions:
            s.close()


def test_a_partitioned_variable_on_the_ps_saves_and_restores_as_one_variable(
        targets, tmp_path):
    name = f"table_{uuid.uuid4().hex[:6]}"
    g, v, bump, _ = _client_graph(0, name, partitioned=True)
    with g.as_default():
        saver = tf.train.Saver()
        init = tf.global_variables_initializer()
        full = tf.convert_to_tensor(v)
    with tf.Session(targets[0], graph=g, config=CONFIG) as s:
        s.run(init)
        s.run(bump)
        s.run(bump)
        path = saver.save(s, str(tmp_path / "model"))
        s.run(bump)
        assert s.run(full)[0, 0] == 3.0
        saver.restore(s, path)
        np.testing.assert_array_equal(s.run(full), np.full([6, 2], 2.0, np.float32))
    # One logical variable: an unpartitioned graph on one device reads the same checkpoint.
    with tf.Graph().as_default():
        whole = tf.get_variable(name, [6, 2])
        with tf.Session() as local:
            tf.train.Saver().restore(local, path)
            np.testing.assert_array_equal(local.run(whole), np.full([6, 2], 2.0, np.float32))


def test_a_variable_on_a_missing_ps_task_is_a_clear_error(targets):
    g = tf.Graph()
    with g.as_default(), tf.device("/job:ps/task:3"):
        v = tf.Variable(1.0, name=f"nowhere_{uuid.uuid4().hex[:6]}")
    with tf.Session(targets[0], graph=g, config=CONFIG) as s:
        with pytest.raises(tf.errors.InvalidArgumentError, match="ps/task:3") as e:
            s.run(v.initializer)
    assert v.op.name in str(e.value)
