"""Optimizers and the fused update ops: several steps of every optimizer, dense and sparse,
against NumPy references of TF1's formulas; slots and their names; the global step; errors;
convergence; locking under concurrent steps; learning-rate schedules."""

import threading

import numpy as np
import pytest

import dflab as tf
from dflab.ops import training_ops

# --- NumPy references (TF1's textbook formulas, not the kernels' algebraic forms)
# Each reference is (make_state(w0), step(state, w, g, rows)) where g holds gradient rows for the
# unique ``rows`` (sparse) or the whole gradient (rows is None). TF1 turns Python float
# hyper-parameters into float32 tensors and casts them to the variable's dtype, so the float64
# references use float32-rounded hyper-parameters, as TF1's numbers do.


def _f32(x):
    return float(np.float32(x))


def _sgd(lr):
    lr = _f32(lr)
    def step(s, w, g, rows):
        if rows is None:
            return w - lr * g
        w = w.copy()
        w[rows] -= lr * g
        return w

    return (lambda w0: {}), step


def _momentum(lr, mu, nesterov=False):
    lr, mu = _f32(lr), _f32(mu)
    def make(w0):
        return {"a": np.zeros_like(w0)}

    def step(s, w, g, rows):
        sel = slice(None) if rows is None else rows
        w = w.copy()
        s["a"][sel] = mu * s["a"][sel] + g
        w[sel] -= lr * (g + mu * s["a"][sel]) if nesterov else lr * s["a"][sel]
        return w

    return make, step


def _adagrad(lr, init=0.1):
    lr = _f32(lr)  # the accumulator starts at the exact value, in the variable's dtype
    def make(w0):
        return {"acc": np.full_like(w0, init)}

    def step(s, w, g, rows):
        sel = slice(None) if rows is None else rows
        w = w.copy()
        s["acc"][sel] += g * g
        w[sel] -= lr * g / np.sqrt(s["acc"][sel])
        return w

    return make, step


def _rmsprop(lr, decay=0.9, mom=0.0, eps=1e-10, centered=False):
    lr, decay, mom, eps = _f32(lr), _f32(decay), _f32(mom), _f32(eps)
    def make(w0):
        return {"ms": np.ones_like(w0), "mg": np.zeros_like(w0), "mom": np.zeros_like(w0)}

    def step(s, w, g, rows):
        sel = slice(None) if rows is None else rows
        w = w.copy()
        s["ms"][sel] = decay * s["ms"][sel] + (1 - decay) * g * g
        denom = s["ms"][sel] + eps
        if centered:
            s["mg"][sel] = decay * s["mg"][sel] + (1 - decay) * g
            denom = denom - s["mg"][sel] ** 2
        s["mom"][sel] = mom * s["mom"][sel] + lr * g / np.sqrt(denom)
        w[sel] -= s["mom"][sel]
        return w

    return make, step


def _adam(lr=0.001, b1=0.9, b2=0.999, eps=1e-8):
    # beta1^t and beta2^t accumulate in float32 variables (beta1_power, beta2_power).
    f1, f2 = np.float32(b1), np.float32(b2)
    lr, b1, b2, eps = _f32(lr), _f32(b1), _f32(b2), _f32(eps)

    def make(w0):
        return {"m": np.zeros_like(w0), "v": np.zeros_like(w0), "p1": f1, "p2": f2}

    def step(s, w, g, rows):
        p1, p2 = float(s["p1"]), float(s["p2"])
        s["p1"], s["p2"] = np.float32(s["p1"] * f1), np.float32(s["p2"] * f2)
        lr_t = lr * np.sqrt(1 - p2) / (1 - p1)
        if rows is None:
            s["m"] = b1 * s["m"] + (1 - b1) * g
            s["v"] = b2 * s["v"] + (1 - b2) * g * g
        else:  # TF1 _apply_sparse_shared: decay everywhere, add the gradient rows
            s["m"] = b1 * s["m"]
            s["m"][rows] += (1 - b1) * g
            s["v"] = b2 * s["v"]
            s["v"][rows] += (1 - b2) * g * g
        return w - lr_t * s["m"] / (np.sqrt(s["v"]) + eps)

    return make, step


OPTIMIZERS = {
    "sgd": (lambda: tf.train.GradientDescentOptimizer(0.1), _sgd(0.1)),
    "momentum": (lambda: tf.train.MomentumOptimizer(0.05, 0.9), _momentum(0.05, 0.9)),
    "nesterov": (lambda: tf.train.MomentumOptimizer(0.05, 0.8, use_nesterov=True),
                 _momentum(0.05, 0.8, nesterov=True)),
    "adagrad": (lambda: tf.train.AdagradOptimizer(0.3), _adagrad(0.3)),
    "adagrad_init": (lambda: tf.train.AdagradOptimizer(0.3, initial_accumulator_value=2.0),
                     _adagrad(0.3, 2.0)),
    "rmsprop": (lambda: tf.train.RMSPropOptimizer(0.01), _rmsprop(0.01)),
    "rmsprop_mom": (lambda: tf.train.RMSPropOptimizer(0.01, decay=0.8, momentum=0.5,
                                                      epsilon=1e-3),
                    _rmsprop(0.01, 0.8, 0.5, 1e-3)),
    "rmsprop_centered": (lambda: tf.train.RMSPropOptimizer(0.01, momentum=0.3, epsilon=0.1,
                                                           centered=True),
                         _rmsprop(0.01, 0.9, 0.3, 0.1, centered=True)),
    "adam": (lambda: tf.train.AdamOptimizer(), _adam()),
    "adam_fast": (lambda: tf.train.AdamOptimizer(0.1, beta1=0.8, beta2=0.95, epsilon=1e-4),
                  _adam(0.1, 0.8, 0.95, 1e-4)),
}

W0 = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75], [-2.0, 1.0, 0.1], [0.3, 0.6, -0.9],
               [1.2, -0.4, 0.8]])
C = np.array([[0.3, -0.2, 0.1], [0.0, 0.5, -0.5], [1.0, -1.0, 0.2], [-0.3, 0.4, 0.7],
              [0.9, 0.1, -0.6]])
IDX = np.array([3, 0, 3, 1, 3])  # repeats: the gradient rows for 3 must be summed
CR = np.array([[0.2, -0.1, 0.4], [1.0, 0.5, -0.5], [-0.3, 0.3, 0.1], [0.6, -0.6, 0.2],
               [0.05, 0.1, 0.15]])


def _dense_grad(w):
    return w + C  # d/dw of sum(w^2 / 2 + C w)


def _sparse_grad(w):
    rows = np.unique(IDX)
    g = np.zeros((len(rows), w.shape[1]))
    for k, i in enumerate(IDX):
        g[np.searchsorted(rows, i)] += w[i] + CR[k]
    return rows, g


def _train(make_opt, sparse, steps, dtype=np.float64, global_step=False):
    g = tf.Graph()
    with g.as_default():
        w = tf.Variable(W0.astype(dtype), name="w")
        if sparse:
            rows = tf.gather(w, IDX)
            loss = tf.reduce_sum(0.5 * rows * rows + CR.astype(dtype) * rows)
        else:
            loss = tf.reduce_sum(0.5 * w * w + C.astype(dtype) * w)
        opt = make_opt()
        gs = tf.train.get_or_create_global_step() if global_step else None
        train = opt.minimize(loss, global_step=gs)
        out = []
        with tf.Session(graph=g) as sess:
            sess.run(tf.global_variables_initializer())
            for _ in range(steps):
                sess.run(train)
                out.append(sess.run(w))
            step = sess.run(gs) if global_step else None
    return out, step


def _reference(ref, sparse, steps):
    make, step = ref
    w = W0.copy()
    s = make(w)
    out = []
    for _ in range(steps):
        if sparse:
            rows, gr = _sparse_grad(w)
            w = step(s, w, gr, rows)
        else:
            w = step(s, w, _dense_grad(w), None)
        out.append(w)
    return out


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("which", sorted(OPTIMIZERS))
def test_optimizer_steps_match_numpy_reference(which, sparse):
    make_opt, ref = OPTIMIZERS[which]
    got, _ = _train(make_opt, sparse, steps=6)
    want = _reference(ref, sparse, steps=6)
    for k, (gv, wv) in enumerate(zip(got, want)):
        np.testing.assert_allclose(gv, wv, rtol=1e-9, atol=1e-12, err_msg=f"step {k + 1}")


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("which", ["sgd", "momentum", "adagrad", "rmsprop_centered", "adam"])
def test_optimizer_float32(which, sparse):
    make_opt, ref = OPTIMIZERS[which]
    got, _ = _train(make_opt, sparse, steps=4, dtype=np.float32)
    want = _reference(ref, sparse, steps=4)
    assert got[-1].dtype == np.float32
    np.testing.assert_allclose(got[-1], want[-1], rtol=2e-5, atol=2e-6)


def test_sparse_updates_leave_other_rows_and_slots_alone():
    g = tf.Graph()
    with g.as_default():
        w = tf.Variable(W0, name="w")
        loss = tf.reduce_sum(tf.gather(w, [1, 4]) * 2.0)
        opt = tf.train.MomentumOptimizer(0.1, 0.9)
        train = opt.minimize(loss)
        with tf.Session(graph=g) as sess:
            sess.run(tf.global_variables_initializer())
            sess.run(train)
            wv, acc = sess.run([w, opt.get_slot(w, "momentum")])
    untouched = [0, 2, 3]
    np.testing.assert_array_equal(wv[untouched], W0[untouched])
    np.testing.assert_array_equal(acc[untouched], 0.0)
    np.testing.assert_allclose(wv[[1, 4]], W0[[1, 4]] - 0.2)


def test_custom_optimizer_sparse_path_gets_deduplicated_rows():
    class RowSGD(tf.train.Optimizer):
        def __init__(self):
            super().__init__(False, "RowSGD")

        def _apply_dense(self, grad, var):
            return tf.assign_sub(var, 0.1 * grad).op

        def _apply_sparse(self, grad, var):
            # scatter_update keeps only one of repeated rows: right only after deduplication
            new_rows = tf.gather(var, grad.indices) - 0.1 * grad.values
            return tf.scatter_update(var, grad.indices, new_rows).op

    w = tf.Variable(np.ones((4, 2)), name="w")
    train = RowSGD().minimize(tf.reduce_sum(tf.gather(w, [1, 1, 3, 1])))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(train)
        np.testing.assert_allclose(sess.run(w), [[1, 1], [0.7, 0.7], [1, 1], [0.9, 0.9]])


def test_sparse_adam_matches_tf1_graph_of_primitive_ops():
    """The fused SparseApplyAdam vs TF1's _apply_sparse_shared built from assign/scatter_add."""
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal((6, 2))
    idx = np.array([4, 1, 5])
    vals = rng.standard_normal((3, 2))
    lr, b1, b2, eps = 0.01, 0.9, 0.999, 1e-8

    def graph(fused):
        g = tf.Graph()
        with g.as_default():
            var = tf.Variable(w0)
            m = tf.Variable(np.zeros_like(w0))
            v = tf.Variable(np.zeros_like(w0))
            b1p = tf.Variable(np.float64(b1))
            b2p = tf.Variable(np.float64(b2))
            grad = tf.constant(vals)
            if fused:
                from dflab.ops import training_ops

                upd = training_ops.sparse_apply_adam(var, m, v, b1p, b2p, lr, b1, b2, eps,
                                                     grad, idx)
            else:
                lr_t = lr * tf.sqrt(1 - b2p) / (1 - b1p)
                m_t = tf.assign(m, m * b1)
                with tf.control_dependencies([m_t]):
                    m_t = tf.scatter_add(m, idx, grad * (1 - b1))
                v_t = tf.assign(v, v * b2)
                with tf.control_dependencies([v_t]):
                    v_t = tf.scatter_add(v, idx, (grad * grad) * (1 - b2))
                upd = tf.assign_sub(var, lr_t * m_t / (tf.sqrt(v_t) + eps))
            with tf.control_dependencies([upd]):
                step = tf.group(tf.assign(b1p, b1p * b1), tf.assign(b2p, b2p * b2))
            with tf.Session(graph=g) as sess:
                sess.run(tf.global_variables_initializer())
                for _ in range(3):
                    sess.run(step)
                return sess.run([var, m, v])

    for a, b in zip(graph(True), graph(False)):
        np.testing.assert_allclose(a, b, rtol=1e-12)


# --- slots -------------------------------------------------------------------------------------
@pytest.mark.parametrize("make_opt, slots", [
    (lambda: tf.train.GradientDescentOptimizer(0.1), {}),
    (lambda: tf.train.MomentumOptimizer(0.1, 0.9), {"momentum": "w/Momentum"}),
    (lambda: tf.train.AdagradOptimizer(0.1), {"accumulator": "w/Adagrad"}),
    (lambda: tf.train.RMSPropOptimizer(0.1), {"rms": "w/RMSProp", "momentum": "w/RMSProp_1"}),
    (lambda: tf.train.RMSPropOptimizer(0.1, centered=True),
     {"rms": "w/RMSProp", "mg": "w/RMSProp_1", "momentum": "w/RMSProp_2"}),
    (lambda: tf.train.AdamOptimizer(), {"m": "w/Adam", "v": "w/Adam_1"}),
    (lambda: tf.train.MomentumOptimizer(0.1, 0.9, name="Fancy"), {"momentum": "w/Fancy"}),
])
def test_slot_names_and_properties(make_opt, slots):
    w = tf.Variable(np.ones((2, 3), np.float32), name="w")
    opt = make_opt()
    opt.minimize(tf.reduce_sum(w * w))
    assert opt.get_slot_names() == sorted(slots)
    for slot_name, var_name in slots.items():
        s = opt.get_slot(w, slot_name)
        assert s.name == var_name + ":0"
        assert s.op.name == var_name
        assert s.shape.as_list() == [2, 3] and s.dtype.base_dtype == tf.float32
        assert s not in tf.trainable_variables() and s in tf.global_variables()
        assert s.op.colocation_groups() == [b"loc:@w"]
    assert opt.get_slot(w, "nope") is None


def test_adam_non_slot_variables_and_variables_listing():
    b = tf.Variable(np.zeros(2, np.float32), name="b")
    a = tf.Variable(np.zeros(2, np.float32), name="a")
    opt = tf.train.AdamOptimizer()
    opt.minimize(tf.reduce_sum(a * a + b * b))
    names = [v.name for v in opt.variables()]
    assert names == ["a/Adam:0", "a/Adam_1:0", "b/Adam:0", "b/Adam_1:0", "beta1_power:0",
                     "beta2_power:0"]
    b1p = [v for v in opt.variables() if v.name == "beta1_power:0"][0]
    assert b1p.op.colocation_groups() == [b"loc:@a"]  # the first variable by name
    assert b1p not in tf.trainable_variables()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        np.testing.assert_allclose(sess.run(b1p), 0.9)


def test_adam_beta_powers_advance_once_per_step():
    w = tf.Variable([1.0, 2.0], name="w")
    opt = tf.train.AdamOptimizer(0.1, beta1=0.5, beta2=0.25)
    train = opt.minimize(tf.reduce_sum(w * w))
    b1p, b2p = opt._get_beta_accumulators()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(3):
            sess.run(train)
        np.testing.assert_allclose(sess.run([b1p, b2p]), [0.5 ** 4, 0.25 ** 4])


def test_second_optimizer_gets_fresh_slot_names():
    w = tf.Variable([1.0], name="w")
    loss = tf.reduce_sum(w * w)
    o1, o2 = tf.train.MomentumOptimizer(0.1, 0.9), tf.train.MomentumOptimizer(0.1, 0.9)
    o1.minimize(loss)
    o2.minimize(loss)
    assert o1.get_slot(w, "momentum").name == "w/Momentum:0"
    assert o2.get_slot(w, "momentum").name == "w/Momentum_1:0"


def test_slots_are_created_once_across_apply_calls():
    w = tf.Variable([1.0], name="w")
    opt = tf.train.AdagradOptimizer(0.1)
    loss = tf.reduce_sum(w * w)
    opt.minimize(loss)
    opt.minimize(loss)
    assert len(opt.variables()) == 1


@pytest.mark.parametrize("use_resource, update_type", [(False, "ApplyMomentum"),
                                                       (True, "ResourceApplyMomentum")])
def test_update_ops_names_and_colocation(use_resource, update_type):
    w = tf.Variable([1.0], name="w", use_resource=use_resource)
    train = tf.train.MomentumOptimizer(0.1, 0.9).minimize(tf.reduce_sum(w * w))
    g = tf.get_default_graph()
    assert train.name == "Momentum" and train.type == "NoOp"
    upd = g.get_operation_by_name("Momentum/update_w/" + update_type)
    assert upd.type == update_type
    assert upd.colocation_groups() == [b"loc:@w"]
    assert train in tf.get_collection(tf.GraphKeys.TRAIN_OP)
    assert upd in train.control_inputs


# --- global step ---------------------------------------------------------------------------------
def test_global_step_increments_after_updates():
    got, step = _train(OPTIMIZERS["adam"][0], False, steps=4, global_step=True)
    assert step == 4
    want = _reference(OPTIMIZERS["adam"][1], False, steps=4)
    np.testing.assert_allclose(got[-1], want[-1], rtol=1e-9)


def _runs_after(op, before) -> bool:
    """Whether ``op`` waits for ``before`` through its inputs or control inputs."""
    seen, todo = set(), [op]
    while todo:
        o = todo.pop()
        if o is before:
            return True
        if o not in seen:
            seen.add(o)
            todo.extend(t.op for t in o.inputs)
            todo.extend(o.control_inputs)
    return False


@pytest.mark.parametrize("use_resource, increment", [(False, "AssignAdd"),
                                                     (True, "AssignAddVariableOp")])
def test_global_step_op_is_named_after_optimizer_and_waits_for_updates(use_resource, increment):
    tf.enable_resource_variables() if use_resource else tf.disable_resource_variables()
    w = tf.Variable([1.0], name="w")
    gs = tf.train.create_global_step()
    assert gs.op.type == ("VarHandleOp" if use_resource else "VariableV2")
    train = tf.train.GradientDescentOptimizer(0.5).minimize(tf.reduce_sum(w * w),
                                                            global_step=gs)
    # As TF: the train op is the increment itself (for a resource step, no read after it).
    assert train.name == "GradientDescent" and train.type == increment
    update = tf.get_default_graph().get_operation_by_name("GradientDescent/update")
    assert _runs_after(train, update)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(train)
        sess.run(train)
        assert tf.train.global_step(sess, gs) == 2
        np.testing.assert_allclose(sess.run(w), [0.0])


def test_create_and_get_global_step():
    assert tf.train.get_global_step() is None
    gs = tf.train.create_global_step()
    assert gs.name == "global_step:0" and gs.op.name == "global_step"
    assert gs.dtype.base_dtype == tf.int64 and gs.shape.as_list() == []
    assert gs in tf.get_collection(tf.GraphKeys.GLOBAL_STEP)
    assert gs in tf.global_variables() and gs not in tf.trainable_variables()
    assert tf.train.get_global_step() is gs
    assert tf.train.get_or_create_global_step() is gs
    with pytest.raises(ValueError, match='"global_step" already exists'):
        tf.train.create_global_step()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        assert tf.train.global_step(sess, gs) == 0


def test_get_or_create_global_step_per_graph():
    g = tf.Graph()
    a = tf.train.get_or_create_global_step()
    b = tf.train.get_or_create_global_step(g)
    assert a.graph is tf.get_default_graph() and b.graph is g


def test_global_step_found_by_tensor_name_and_validated():
    tf.Variable(0, name="global_step", use_resource=False)
    assert tf.train.get_global_step().name == "global_step:0"
    with tf.Graph().as_default():
        # As TF: a resource variable's tensor "global_step:0" is its handle, not an integer
        # (create_global_step puts the variable itself in the GLOBAL_STEP collection).
        tf.Variable(0, name="global_step")
        with pytest.raises(TypeError, match="does not have integer type"):
            tf.train.get_global_step()
    g = tf.Graph()
    with g.as_default():
        tf.Variable(0.0, name="global_step")
        with pytest.raises(TypeError, match="does not have integer type"):
            tf.train.get_global_step()
    with pytest.raises(TypeError, match="is not scalar"):
        tf.train.assert_global_step(tf.constant([1, 2]))


# --- gradients in, updates out -------------------------------------------------------------------
def test_compute_gradients_pairs_and_none_for_unused_variable():
    a = tf.Variable([1.0, 2.0], name="a")
    b = tf.Variable([3.0], name="b")
    opt = tf.train.GradientDescentOptimizer(0.1)
    gv = opt.compute_gradients(tf.reduce_sum(a * a))
    assert [v for _, v in gv] == [a, b]
    assert gv[1][0] is None
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        np.testing.assert_allclose(sess.run(gv[0][0]), [2.0, 4.0])
        sess.run(opt.apply_gradients(gv))
        av, bv = sess.run([a, b])
        np.testing.assert_allclose(av, [0.8, 1.6], rtol=1e-6)
        np.testing.assert_allclose(bv, [3.0])


def test_apply_gradients_with_hand_made_gradients_and_grad_loss():
    w = tf.Variable([1.0, 1.0], name="w")
    opt = tf.train.GradientDescentOptimizer(1.0)
    gv = opt.compute_gradients(tf.reduce_sum(w), grad_loss=tf.constant(3.0))
    clipped = [(tf.clip_by_value(g, -2.0, 2.0), v) for g, v in gv]
    train = opt.apply_gradients(clipped, name="clipped")
    assert train.name == "clipped"
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(train)
        np.testing.assert_allclose(sess.run(w), [-1.0, -1.0])


def test_learning_rate_may_be_a_tensor():
    lr = tf.placeholder(tf.float32, [])
    w = tf.Variable([1.0], name="w")
    train = tf.train.MomentumOptimizer(lr, 0.0).minimize(tf.reduce_sum(w * w))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(train, {lr: 0.25})
        np.testing.assert_allclose(sess.run(w), [0.5])
        sess.run(train, {lr: 0.0})
        np.testing.assert_allclose(sess.run(w), [0.5])


def test_float32_learning_rate_is_cast_for_float64_variables():
    w = tf.Variable(np.array([1.0]), name="w")
    train = tf.train.AdamOptimizer(tf.constant(0.1)).minimize(tf.reduce_sum(w * w))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(train)
        np.testing.assert_allclose(sess.run(w), [0.9], rtol=1e-6)


def test_constraint_is_applied_after_dense_update():
    w = tf.Variable([1.0, -1.0], name="w", constraint=lambda x: tf.clip_by_value(x, 0.0, 0.5))
    train = tf.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_sum(w))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(train)
        np.testing.assert_allclose(sess.run(w), [0.5, 0.0])


def test_gate_graph_gives_same_result():
    w = tf.Variable([2.0], name="w")
    train = tf.train.GradientDescentOptimizer(0.25).minimize(
        tf.reduce_sum(w * w), gate_gradients=tf.train.Optimizer.GATE_GRAPH)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(train)
        np.testing.assert_allclose(sess.run(w), [1.0])


@pytest.mark.parametrize("which", sorted(OPTIMIZERS))
def test_minimize_converges_on_a_quadratic(which):
    target = np.array([1.0, -2.0, 3.0], np.float32)
    g = tf.Graph()
    with g.as_default():
        w = tf.Variable(np.zeros(3, np.float32), name="w")
        loss = tf.reduce_sum(tf.square(w - target))
        opt = {"adam": tf.train.AdamOptimizer(0.1),
               "adam_fast": tf.train.AdamOptimizer(0.2)}.get(which) or OPTIMIZERS[which][0]()
        train = opt.minimize(loss)
        with tf.Session(graph=g) as sess:
            sess.run(tf.global_variables_initializer())
            first = sess.run(loss)
            for _ in range(300):
                sess.run(train)
            last = sess.run(loss)
    assert last < 1e-2 * first


# --- errors --------------------------------------------------------------------------------------
def test_no_gradients_for_any_variable():
    tf.Variable([1.0], name="w")
    with pytest.raises(ValueError, match="No gradients provided for any variable"):
        tf.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_sum(tf.constant([1.0]) * 2.0))
    v = tf.Variable([1.0], name="v")
    with pytest.raises(ValueError, match="No gradients provided for any variable"):
        tf.train.GradientDescentOptimizer(0.1).apply_gradients([(None, v)])


@pytest.mark.parametrize("call, err, match", [
    (lambda o, loss: o.minimize(loss, var_list=[]), ValueError, "No variables to optimize"),
    (lambda o, loss: o.minimize(loss, gate_gradients=7), ValueError, "gate_gradients"),
    (lambda o, loss: o.minimize(tf.constant(1)), ValueError, "Invalid type int32"),
    (lambda o, loss: o.apply_gradients([]), ValueError, "No variables provided"),
    (lambda o, loss: o.minimize(loss, var_list=[tf.constant(1.0)]), NotImplementedError,
     "unsupported type"),
])
def test_optimizer_argument_errors(call, err, match):
    w = tf.Variable([1.0], name="w")
    with pytest.raises(err, match=match):
        call(tf.train.GradientDescentOptimizer(0.1), tf.reduce_sum(w * w))


def test_optimizer_constructor_errors():
    with pytest.raises(ValueError, match="initial_accumulator_value must be positive"):
        tf.train.AdagradOptimizer(0.1, initial_accumulator_value=0.0)
    with pytest.raises(ValueError, match="Must specify the optimizer name"):
        tf.train.Optimizer(False, "")


def test_integer_variables_are_rejected():
    w = tf.Variable([1.0], name="w")
    i = tf.Variable([1], name="i")
    gv = [(tf.constant([1.0]), w), (tf.constant([1]), i)]
    with pytest.raises(TypeError):
        tf.train.GradientDescentOptimizer(0.1).apply_gradients(gv)


# --- the raw fused ops


def _vars(*arrays, use_resource=False):
    # The raw ops on reference variables (their ref outputs are part of what is tested);
    # the resource forms are built from the same builders given resource variables.
    return [tf.Variable(np.asarray(a, np.float32), use_resource=use_resource) for a in arrays]


def _like(v, array):
    """A variable of ``v``'s kind holding ``array``."""
    return _vars(array, use_resource=getattr(v, "_is_resource", False))[0]


@pytest.mark.parametrize("build, err", [
    (lambda v, a: training_ops.apply_momentum(v, _like(v, np.zeros(2)), 0.1, np.ones((2, 3)),
                                              0.9), ValueError),
    (lambda v, a: training_ops.apply_momentum(v, a, 0.1, np.ones(4), 0.9), ValueError),
    (lambda v, a: training_ops.apply_momentum(v, a, [0.1, 0.2], np.ones((2, 3)), 0.9),
     ValueError),
    (lambda v, a: training_ops.apply_momentum(v, tf.constant(np.zeros((2, 3), np.float32)),
                                              0.1, np.ones((2, 3)), 0.9), TypeError),
    # A tensor of another type is TF's TypeError ("Input 'delta' ... does not match type").
    (lambda v, a: training_ops.apply_gradient_descent(v, 0.1, tf.ones([2, 3], tf.float64)),
     TypeError),
    (lambda v, a: training_ops.sparse_apply_adagrad(v, a, 0.1, np.ones((2, 4)), [0, 1]),
     ValueError),
    (lambda v, a: training_ops.sparse_apply_adagrad(v, a, 0.1, np.ones((3, 3)), [0, 1]),
     ValueError),
    (lambda v, a: training_ops.sparse_apply_adagrad(v, a, 0.1, np.ones((2, 3)), [[0, 1]]),
     ValueError),
    (lambda v, a: training_ops.sparse_apply_adagrad(v, a, 0.1, np.ones((2, 3)),
                                                    tf.constant([0.0, 1.0])), TypeError),
])
@pytest.mark.parametrize("use_resource", [False, True])
def test_training_op_shape_and_dtype_errors(build, err, use_resource):
    v, a = _vars(np.zeros((2, 3)), np.zeros((2, 3)), use_resource=use_resource)
    with pytest.raises(err):
        build(v, a)


def test_integer_variable_rejected_by_training_op():
    v = tf.Variable([1, 2])
    with pytest.raises(TypeError, match="does not support type int32"):
        training_ops.apply_gradient_descent(v, 1, [1, 1])


def test_sparse_index_out_of_range_is_a_runtime_error():
    v, a = _vars(np.zeros((3, 2)), np.zeros((3, 2)))
    idx = tf.placeholder(tf.int32, [None])
    upd = training_ops.sparse_apply_momentum(v, a, 0.1, tf.ones([2, 2]), idx, 0.9)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        with pytest.raises(tf.errors.InvalidArgumentError, match="out of range"):
            sess.run(upd, {idx: [0, 3]})
        sess.run(upd, {idx: [2, 2]})  # repeated rows are summed
        np.testing.assert_allclose(sess.run(a), [[0, 0], [0, 0], [2, 2]])
        np.testing.assert_allclose(sess.run(v), [[0, 0], [0, 0], [-0.2, -0.2]], rtol=1e-6)


def test_dense_runtime_shape_mismatch_is_invalid_argument():
    v = tf.Variable(np.zeros(3, np.float32), validate_shape=False)
    g = tf.placeholder(tf.float32, [None])
    upd = training_ops.apply_gradient_descent(v, 0.1, g)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        with pytest.raises(tf.errors.InvalidArgumentError, match="same shape"):
            sess.run(upd, {g: np.ones(4, np.float32)})


def test_update_op_outputs_the_updated_variable():
    (v,) = _vars([1.0, 2.0])
    out = training_ops.apply_gradient_descent(v, 0.5, [2.0, 2.0])
    assert out.dtype.is_ref_dtype and out.shape.as_list() == [2]
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        np.testing.assert_allclose(sess.run(out), [0.0, 1.0])


def test_resource_update_op_outputs_nothing_and_writes_the_variable():
    (v,) = _vars([1.0, 2.0], use_resource=True)
    upd = training_ops.apply_gradient_descent(v, 0.5, [2.0, 2.0])
    assert upd.type == "ResourceApplyGradientDescent" and upd.outputs == []
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(upd)
        np.testing.assert_allclose(sess.run(v), [0.0, 1.0])


def test_training_ops_are_not_differentiable():
    (v,) = _vars([1.0])
    x = tf.placeholder(tf.float32, [1])
    out = training_ops.apply_gradient_descent(v, 0.5, x)
    assert tf.gradients(tf.reduce_sum(tf.identity(out)), x) == [None]


@pytest.mark.parametrize("make_opt", [
    lambda: tf.train.GradientDescentOptimizer(1.0, use_locking=True),
    lambda: tf.train.MomentumOptimizer(1.0, 0.0, use_locking=True),
])
def test_concurrent_steps_with_locking_lose_no_update(make_opt):
    # Constant gradient 1 and lr 1: after N steps from any threads, w == -N exactly.
    w = tf.Variable(np.zeros(1000), name="w")
    train = make_opt().minimize(tf.reduce_sum(w))
    sess = tf.Session()
    sess.run(tf.global_variables_initializer())
    n_threads, n_steps = 4, 50

    def work():
        for _ in range(n_steps):
            sess.run(train)

    threads = [threading.Thread(target=work) for _ in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    np.testing.assert_array_equal(sess.run(w), -float(n_threads * n_steps))
    sess.close()


# --- learning-rate schedules --------------------------------------------------------------------
@pytest.mark.parametrize("fn, kwargs, ref", [
    (tf.train.exponential_decay, {"decay_steps": 10, "decay_rate": 0.5},
     lambda s: 0.1 * 0.5 ** (s / 10)),
    (tf.train.exponential_decay, {"decay_steps": 10, "decay_rate": 0.5, "staircase": True},
     lambda s: 0.1 * 0.5 ** np.floor(s / 10)),
    (tf.train.natural_exp_decay, {"decay_steps": 10, "decay_rate": 0.5},
     lambda s: 0.1 * np.exp(-0.5 * s / 10)),
    (tf.train.inverse_time_decay, {"decay_steps": 10, "decay_rate": 0.5},
     lambda s: 0.1 / (1 + 0.5 * s / 10)),
    (tf.train.polynomial_decay, {"decay_steps": 10, "end_learning_rate": 0.01, "power": 2.0},
     lambda s: (0.1 - 0.01) * (1 - min(s, 10) / 10) ** 2 + 0.01),
    (tf.train.polynomial_decay, {"decay_steps": 10, "end_learning_rate": 0.01, "cycle": True},
     lambda s: (0.1 - 0.01) * (1 - s / (10 * max(np.ceil(s / 10), 1))) + 0.01),
])
@pytest.mark.parametrize("step", [0, 7, 10, 25])
def test_learning_rate_schedules(fn, kwargs, ref, step):
    gs = tf.placeholder(tf.int64, [])
    lr = fn(0.1, gs, **kwargs)
    assert lr.dtype == tf.float32
    with tf.Session() as sess:
        np.testing.assert_allclose(sess.run(lr, {gs: step}), ref(step), rtol=1e-5)


def test_schedule_needs_global_step():
    with pytest.raises(ValueError, match="global_step is required"):
        tf.train.exponential_decay(0.1, None, 10, 0.5)


def test_decayed_learning_rate_drives_an_optimizer():
    gs = tf.train.get_or_create_global_step()
    lr = tf.train.exponential_decay(1.0, gs, decay_steps=1, decay_rate=0.5, staircase=True)
    w = tf.Variable([0.0], name="w")
    train = tf.train.GradientDescentOptimizer(lr).minimize(-tf.reduce_sum(w), global_step=gs)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(3):
            sess.run(train)
        np.testing.assert_allclose(sess.run(w), [1.0 + 0.5 + 0.25])


@pytest.mark.parametrize("opt", [
    lambda: tf.train.GradientDescentOptimizer(0.1),
    lambda: tf.train.MomentumOptimizer(0.1, 0.9),
    lambda: tf.train.AdamOptimizer(0.1),
])
def test_scalar_variable_is_trained(opt):
    w = tf.Variable(3.0, dtype=tf.float64)
    loss = (w - 1.0) ** 2
    step = opt().minimize(loss)
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        first = s.run(loss)
        for _ in range(50):
            s.run(step)
        assert s.run(loss) < first / 4


def test_adagrad_da_takes_an_int64_step():
    from dflab.ops import training_ops

    v = tf.Variable(np.zeros([2], np.float32), use_resource=False)
    g, gg = (tf.Variable(np.full([2], x, np.float32), use_resource=False) for x in (0.0, 0.1))
    with pytest.raises(TypeError, match="'global_step' of 'ApplyAdagradDA' Op has type float32"):
        training_ops.apply_adagrad_da(v, g, gg, np.ones(2, np.float32), 0.1, 0.0, 0.0,
                                      tf.constant(1.0))
    op = training_ops.apply_adagrad_da(v, g, gg, np.ones(2, np.float32), 0.5, 0.0, 0.0,
                                       np.int64(2))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got = sess.run(op)
    # -lr * g / (l2 * T * lr + sqrt(gg)) with g = 1, gg = 1.1, T = 2
    np.testing.assert_allclose(got, [-0.5 / np.sqrt(1.1)] * 2, rtol=1e-6)
