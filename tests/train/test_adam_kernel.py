"""The host's blocked dense optimizer updates: the same bits as the whole-array update for every
dense rule, in place or into another buffer, in place or into recycled output buffers only when
nobody else holds them, and values read or fetched before an update (resource and ref variables)
unchanged by it, as in TF; Adam's update on oneDNN gives NumPy's bits, and what it does not take
(Nesterov, float64) stays on NumPy."""

import numpy as np
import pytest

import dflab as tf
from dflab.kernels import intra_op, onednn
from dflab.kernels import training_kernels as tk

SCALARS = {  # op type -> its scalar inputs, in the op's order
    "ApplyGradientDescent": [0.1],
    "ApplyMomentum": [0.1, 0.9],
    "ApplyAdagrad": [0.1],
    "ApplyRMSProp": [0.01, 0.9, 0.5, 1e-7],
    "ApplyCenteredRMSProp": [0.01, 0.9, 0.5, 1e-7],
    "ApplyAdam": [0.9 ** 3, 0.999 ** 3, 1e-3, 0.9, 0.999, 1e-8],
}
RULES = {
    "ApplyGradientDescent": (tk._gradient_descent, 1),
    "ApplyMomentum": (tk._momentum, 2),
    "ApplyAdagrad": (tk._adagrad, 2),
    "ApplyRMSProp": (tk._rms_prop, 3),
    "ApplyCenteredRMSProp": (tk._centered_rms_prop, 4),
    "ApplyAdam": (tk._adam, 3),
}


class _Ref:
    """A stand-in variable state for calling the update directly."""

    def __init__(self, value):
        self.value = value

    def set(self, value):
        value.flags.writeable = False
        self.value = value


@pytest.mark.parametrize("in_place", [False, True])
@pytest.mark.parametrize("nesterov", [False, True])
@pytest.mark.parametrize("size", [2 * 64, 2 * 64 + 37, 1000])
@pytest.mark.parametrize("op_type", sorted(RULES))
def test_blocked_update_matches_the_whole_array_update_bit_for_bit(monkeypatch, op_type, size,
                                                                   nesterov, in_place):
    monkeypatch.setattr(tk, "_UPDATE_BLOCK", 64)  # several blocks and a partial last one
    monkeypatch.setattr(tk, "_SHORT_RULE_BLOCK", 64)  # SGD's too
    rule, n_slots = RULES[op_type]
    rng = np.random.default_rng(size)
    arrays = [rng.standard_normal((size // 8, 8) if size % 8 == 0 else (size,))
              .astype(np.float32) for _ in range(n_slots)]
    arrays[1:] = [np.abs(a) + 0.5 for a in arrays[1:]]  # accumulators of squares stay positive
    if op_type == "ApplyCenteredRMSProp":
        arrays[1] *= 0.05  # mean gradient: small enough that ms - mg**2 stays positive
    g = rng.standard_normal(arrays[0].shape).astype(np.float32)
    scalars = [np.float32(x) for x in SCALARS[op_type]]
    attrs = {"use_nesterov": nesterov}
    plain = rule(np, attrs, arrays, scalars, g)
    refs = [_Ref(a) for a in arrays]
    for a in arrays:
        a.flags.writeable = False  # as installed
    del a  # the loop's name would be one more holder of the last array
    ids = [id(a) for a in arrays]
    tk._host_dense_update(rule, attrs, refs, arrays, scalars, g, tk._Spares(n_slots), in_place)
    for r, p, old in zip(refs, plain, ids):
        # held only by its stand-in variable and the list: written in place when allowed
        assert (id(r.value) == old) == in_place and r.value.dtype == np.float32
        assert not r.value.flags.writeable
        np.testing.assert_array_equal(r.value, np.asarray(p, np.float32))


@pytest.mark.parametrize("op_type", ["ApplyAdam", "ApplyGradientDescent", "ApplyRMSProp"])
def test_blocks_shared_among_intra_op_threads_give_the_same_bits(monkeypatch, op_type):
    monkeypatch.setattr(tk, "_UPDATE_BLOCK", 64)
    monkeypatch.setattr(tk, "_SHORT_RULE_BLOCK", 64)
    monkeypatch.setattr(tk, "_PASSES", 1 << 20)  # split even this small update
    rule, n_slots = RULES[op_type]
    rng = np.random.default_rng(11)
    arrays = [np.abs(rng.standard_normal(64 * 7 + 5)).astype(np.float32) + 0.5
              for _ in range(n_slots)]
    g = rng.standard_normal(arrays[0].shape).astype(np.float32)
    scalars = [np.float32(x) for x in SCALARS[op_type]]
    plain = rule(np, {}, arrays, scalars, g)
    refs = [_Ref(a) for a in arrays]
    pool = intra_op.IntraOpPool(3)
    try:
        split = pool.chunks(np, 8, 8 * 64 * n_slots * tk._PASSES * intra_op.PASS_WORK)
        assert len(split) == 3  # the blocks really are shared
        tk._host_dense_update(rule, {}, refs, arrays, scalars, g, tk._Spares(n_slots), True,
                              pool)
    finally:
        pool.close()
    for r, p in zip(refs, plain):
        np.testing.assert_array_equal(r.value, np.asarray(p, np.float32))


@pytest.mark.parametrize("op_type", ["ApplyAdam", "ApplyGradientDescent"])
def test_a_gradient_of_another_dtype_takes_the_rule_path(monkeypatch, op_type):
    # the out= forms round every step to the variable's dtype; a float64 gradient is left to
    # the rule itself (NumPy promotes, the result is cast once), as the whole-array update does
    monkeypatch.setattr(tk, "_UPDATE_BLOCK", 64)
    monkeypatch.setattr(tk, "_SHORT_RULE_BLOCK", 64)
    rule, n_slots = RULES[op_type]
    rng = np.random.default_rng(7)
    arrays = [np.abs(rng.standard_normal(300)).astype(np.float32) + 0.5 for _ in range(n_slots)]
    g = rng.standard_normal(300)  # float64
    scalars = [np.float32(x) for x in SCALARS[op_type]]
    plain = rule(np, {}, arrays, scalars, g)
    refs = [_Ref(a) for a in arrays]
    tk._host_dense_update(rule, {}, refs, arrays, scalars, g, tk._Spares(n_slots), True)
    for r, p in zip(refs, plain):
        np.testing.assert_array_equal(r.value, np.asarray(p, np.float32))


def test_an_update_writes_in_place_only_what_nobody_else_holds():
    rule, n_slots = RULES["ApplyAdam"]
    rng = np.random.default_rng(9)
    arrays = [np.abs(rng.standard_normal(300)).astype(np.float32) + 0.5 for _ in range(3)]
    g = rng.standard_normal(300).astype(np.float32)
    scalars = [np.float32(x) for x in SCALARS["ApplyAdam"]]
    held = arrays[1]  # a reader still holds the first slot's value
    held_copy = held.copy()
    refs = [_Ref(a) for a in arrays]
    tk._host_dense_update(rule, {}, refs, arrays, scalars, g, tk._Spares(n_slots), True)
    np.testing.assert_array_equal(held, held_copy)  # nothing was written in place
    assert refs[1].value is not held
    view = refs[0].value[:10]  # a view of the variable is a holder too
    view_copy = view.copy()
    arrays = [r.value for r in refs]
    tk._host_dense_update(rule, {}, refs, arrays, scalars, g, tk._Spares(n_slots), True)
    np.testing.assert_array_equal(view, view_copy)
    del view
    arrays = [r.value for r in refs]
    before = [id(a) for a in arrays]
    tk._host_dense_update(rule, {}, refs, arrays, scalars, g, tk._Spares(n_slots), True)
    assert [id(r.value) for r in refs] == before  # nobody else: in place


def test_a_training_loop_updates_its_resource_variables_in_place(monkeypatch):
    graph, read, train, init = _adam_program(tf, True)
    writes = []
    real = tk._update_blocks
    monkeypatch.setattr(tk, "_update_blocks", lambda update, attrs, arrays, outs, *rest:
                        writes.append(outs is arrays) or real(update, attrs, arrays, outs, *rest))
    with tf.Session(graph=graph) as sess:
        sess.run(init)
        before = sess.run(read)
        for _ in range(3):
            sess.run(train)
        after = sess.run(read)
    assert writes[-1] is True  # the last steps' updates wrote into the variable's arrays
    assert not np.array_equal(before, after)


def test_adam_rule_is_tf_adam():
    rng = np.random.default_rng(3)
    var, m, g = (rng.standard_normal(50).astype(np.float32) for _ in range(3))
    v = rng.random(50).astype(np.float32)
    scalars = [np.float32(x) for x in SCALARS["ApplyAdam"]]
    new_var, new_m, new_v = tk._adam(np, {}, [var, m, v], scalars, g)
    alpha = 1e-3 * np.sqrt(1 - 0.999 ** 3) / (1 - 0.9 ** 3)
    m_want = m + (g - m) * 0.1
    v_want = v + (g * g - v) * (1 - 0.999)
    np.testing.assert_allclose(new_m, m_want, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(new_v, v_want, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(new_var, var - alpha * m_want / (np.sqrt(v_want) + 1e-8),
                               rtol=1e-5, atol=1e-6)


def test_spares_are_reused_only_when_nobody_holds_them():
    spares = tk._Spares(1)
    old = np.ones(10, np.float32)
    old.flags.writeable = False
    spares.give(0, old)
    held = old  # a reader still holds the displaced value
    buf = spares.take(0, (10,), np.float32)
    assert buf is not held and np.array_equal(held, np.ones(10))
    del held, buf
    spares.give(0, old)
    old_id = id(old)
    del old
    buf = spares.take(0, (10,), np.float32)  # now only the spares referred to it
    assert id(buf) == old_id and buf.flags.writeable
    spares.give(0, buf)
    assert spares.take(0, (11,), np.float32).shape == (11,)  # another shape: a fresh buffer


def _adam_program(tf_mod, use_resource: bool, shape=(300, 256)):
    graph = tf_mod.Graph()
    with graph.as_default():
        rng = np.random.default_rng(0)
        w = tf_mod.get_variable("w", initializer=rng.standard_normal(shape).astype(np.float32),
                                use_resource=use_resource)
        x = tf_mod.constant(rng.standard_normal((4, shape[0])).astype(np.float32))
        loss = tf_mod.reduce_sum(tf_mod.square(tf_mod.matmul(x, w)))
        read = tf_mod.identity(w.read_value() if use_resource else w)
        train = tf_mod.train.AdamOptimizer(0.1).minimize(loss)
        init = tf_mod.global_variables_initializer()
    return graph, read, train, init


@pytest.mark.parametrize("use_resource", [True, False])
def test_values_read_before_an_update_do_not_change(use_resource):
    # (300, 256) is above the blocked update's threshold: the recycled-buffer path runs.
    assert 300 * 256 >= tk._UPDATE_BLOCK
    graph, read, train, init = _adam_program(tf, use_resource)
    with tf.Session(graph=graph) as sess:
        sess.run(init)
        first, _ = sess.run([read, train])  # read fetched in the step that updates
        first_copy = first.copy()
        kept = [first_copy]  # copies of each step's read
        for _ in range(3):
            value, _ = sess.run([read, train])
            kept.append(value.copy())
            # every value fetched earlier is unchanged by the later updates
            np.testing.assert_array_equal(first, first_copy)
        final = sess.run(read)
    assert not np.array_equal(kept[0], kept[1])  # the updates did move the variable
    assert not np.array_equal(final, kept[-1])


@pytest.mark.parametrize("use_resource", [True, False])
def test_a_value_kept_across_steps_is_not_written_by_later_updates(use_resource):
    # A queue keeps the value read in each step while the next steps update the variable
    # (and recycle buffers earlier updates displaced): each dequeued value is its step's.
    graph, read, train, init = _adam_program(tf, use_resource)
    with graph.as_default():
        queue = tf.FIFOQueue(4, [tf.float32])
        with tf.control_dependencies([queue.enqueue([read])]):
            train_and_keep = tf.group(train)
        kept = queue.dequeue()
    with tf.Session(graph=graph) as sess:
        sess.run(init)
        # the same fetches every step: one plan, one kernel, whose buffers get recycled
        reads = [sess.run([read, train_and_keep])[0] for _ in range(4)]
        for want in reads:
            np.testing.assert_array_equal(sess.run(kept), want)
    assert not np.array_equal(reads[0], reads[-1])


def test_adam_steps_agree_with_a_numpy_adam():
    # Resource variable: the read fetched with the update is the value before it (TF 2.21
    # gives the same values bit for bit on this program). A TF1 ref variable's read fetched
    # with its update aliases the buffer and shows the updated value there; dflab's ref reads
    # are snapshots.
    graph, read, train, init = _adam_program(tf, True, shape=(300, 256))
    rng = np.random.default_rng(0)
    w = rng.standard_normal((300, 256)).astype(np.float32)
    x = rng.standard_normal((4, 300)).astype(np.float32)
    m = np.zeros_like(w, dtype=np.float64)
    v = np.zeros_like(m)
    w64 = w.astype(np.float64)
    with tf.Session(graph=graph) as sess:
        sess.run(init)
        for t in range(1, 4):
            got, _ = sess.run([read, train])
            np.testing.assert_allclose(got, w64, rtol=1e-4, atol=1e-4)
            g = 2 * x.T.astype(np.float64) @ (x.astype(np.float64) @ w64)
            m = 0.9 * m + 0.1 * g
            v = 0.999 * v + 0.001 * g * g
            lr = 0.1 * np.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t)
            w64 = w64 - lr * m / (np.sqrt(v) + 1e-8)
        np.testing.assert_allclose(sess.run(read), w64, rtol=1e-4, atol=1e-4)


# --- the update on oneDNN (onednn.ops.adam): NumPy's operations in NumPy's order ------------
HAVE_LIBRARY = onednn.library() is not None
needs_library = pytest.mark.skipif(not HAVE_LIBRARY, reason=onednn.status())
ADAM_SCALARS = SCALARS["ApplyAdam"]


def _adam_arrays(size, dtype=np.float32, seed=5):
    rng = np.random.default_rng(seed)
    var, m = (rng.standard_normal(size).astype(dtype) for _ in range(2))
    v = np.abs(rng.standard_normal(size)).astype(dtype)
    g = rng.standard_normal(size).astype(dtype)
    # zeros where the denominator is epsilon alone, a huge gradient, a NaN carried through
    g[:3], v[:3], m[:3] = 0, 0, 0
    g[3], g[4] = 3e38, np.nan
    return [var, m, v], g


def _host_adam(arrays, g, in_place, dnn, attrs=None, scalars=ADAM_SCALARS):
    refs = [_Ref(a) for a in arrays]
    for a in arrays:
        a.flags.writeable = False  # as installed
    del a  # one more holder of the last array would forbid writing in place
    dtype = arrays[0].dtype
    with np.errstate(all="ignore"):
        ran = tk._host_dense_update(tk._adam, attrs or {}, refs, arrays,
                                    [dtype.type(x) for x in scalars], g, tk._Spares(3),
                                    in_place, intra_op.SERIAL, dnn)
    return ran, [r.value for r in refs]


@needs_library
@pytest.mark.parametrize("in_place", [True, False])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("size", [3 * 64, 2 * 64 + 37, 20])
def test_adam_update_on_the_library_has_numpys_bits(monkeypatch, size, threads, in_place):
    from dflab.kernels.onednn import ops

    monkeypatch.setattr(ops, "ADAM_BLOCK", 64)  # several blocks, and a partial last one
    arrays, g = _adam_arrays(size)
    with np.errstate(all="ignore"):
        want = tk._adam(np, {}, [a.copy() for a in arrays], [np.float32(x) for x in ADAM_SCALARS],
                        g)
    ids = [id(a) for a in arrays]
    ran, got = _host_adam(arrays, g, in_place, onednn.Backend(onednn.library(), threads))
    assert ran
    for new, w, old in zip(got, want, ids):
        assert (id(new) == old) == in_place  # written in place exactly when allowed
        np.testing.assert_array_equal(new, w)
    assert np.isnan(got[0][4]) and np.isfinite(got[0][:4]).all()


@needs_library
@pytest.mark.parametrize("case", ["nesterov", "float64", "float64 gradient"])
def test_adam_updates_the_library_does_not_compute_the_same_way_stay_on_numpy(case):
    dtype = np.dtype(np.float64 if case == "float64" else np.float32)
    arrays, g = _adam_arrays(300, dtype)
    if case == "float64 gradient":
        g = g.astype(np.float64)
    attrs = {"use_nesterov": case == "nesterov"}
    scalars = [dtype.type(x) for x in ADAM_SCALARS]
    with np.errstate(all="ignore"):
        want = tk._adam(np, attrs, [a.copy() for a in arrays], scalars, g)
    ran, got = _host_adam(arrays, g, True, onednn.Backend(onednn.library(), 1), attrs)
    assert not ran
    for new, w in zip(got, want):
        with np.errstate(over="ignore"):  # the huge gradient's float64 terms
            np.testing.assert_array_equal(new, np.asarray(w, dtype))
