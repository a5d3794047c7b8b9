"""Variables and the ops that update them through references."""

import numpy as np
import pytest

import dflab as tf


def test_variable_structure_matches_tf1():
    # A reference variable's structure (the resource kind's: test_resource_variables.py).
    v = tf.Variable(tf.zeros([2, 3]), name="w", use_resource=False)
    g = tf.get_default_graph()
    assert v.name == "w:0" and v.op.type == "VariableV2"
    assert v.dtype == tf.float32._as_ref()
    assert v.shape.as_list() == [2, 3]
    assert g.get_operation_by_name("w/Assign") is v.initializer
    assert v.value().name == "w/read:0"
    assert v.initial_value.op.name == "zeros"  # a tensor initial value is used as is
    assert tf.Variable([1.0], name="p", use_resource=False).initial_value.name == \
        "p/initial_value:0"
    assert g.get_operation_by_name("w/read").colocation_groups() == [b"loc:@w"]
    v2 = tf.Variable(1.0, name="w", use_resource=False)
    assert v2.name == "w_1:0"


def test_initialize_read_assign():
    v = tf.Variable([1.0, 2.0], name="v")
    with tf.Session() as s:
        assert not s.run(tf.is_variable_initialized(v))
        names = s.run(tf.report_uninitialized_variables())
        assert list(names) == [b"v"]
        s.run(tf.global_variables_initializer())
        assert s.run(tf.is_variable_initialized(v))
        assert len(s.run(tf.report_uninitialized_variables())) == 0
        np.testing.assert_array_equal(s.run(v.assign([3.0, 4.0])), [3.0, 4.0])
        np.testing.assert_array_equal(s.run(v.assign_sub([1.0, 1.0])), [2.0, 3.0])
        np.testing.assert_array_equal(s.run(tf.assign_add(v, [1.0, 1.0])), [3.0, 4.0])
        np.testing.assert_array_equal(v.eval(s), [3.0, 4.0])


def test_variable_operators_read_snapshot():
    v = tf.Variable(2.0)
    with tf.Session() as s:
        s.run(v.initializer)
        assert s.run(v * 3.0) == 6.0
        assert s.run(1.0 - v) == -1.0
        assert s.run(-v) == -2.0


def test_state_persists_across_runs_and_is_per_session():
    v = tf.Variable(0.0)
    inc = v.assign_add(1.0)
    with tf.Session() as s1, tf.Session() as s2:
        s1.run(v.initializer)
        s2.run(v.initializer)
        for _ in range(3):
            s1.run(inc)
        assert s1.run(v) == 3.0 and s2.run(v) == 0.0


@pytest.mark.parametrize("use_resource, message", [
    (False, "match"), (True, "wrong shape. Expected \\[2\\] got \\[3\\]")])
def test_assign_shape_validation(use_resource, message):
    tf.enable_resource_variables() if use_resource else tf.disable_resource_variables()
    v = tf.Variable(tf.zeros([2]))
    with pytest.raises(ValueError):
        v.assign([1.0, 2.0, 3.0])
    p = tf.placeholder(tf.float32, [None])
    a = v.assign(p)
    with tf.Session() as s:
        s.run(v.initializer)
        with pytest.raises(tf.errors.InvalidArgumentError, match=message):
            s.run(a, {p: [1.0, 2.0, 3.0]})
        np.testing.assert_array_equal(s.run(v), [0.0, 0.0])  # state untouched by the failure
    free = tf.Variable(tf.zeros([2]), validate_shape=False)
    grow = tf.assign(free, p, validate_shape=False)
    with tf.Session() as s:
        s.run(free.initializer)
        assert s.run(grow, {p: [1.0, 2.0, 3.0]}).shape == (3,)


def test_assign_dtype_mismatch():
    v = tf.Variable(tf.zeros([2]))
    with pytest.raises((TypeError, ValueError)):
        tf.assign(v, tf.constant([1, 2]))


def test_initializer_depending_on_other_variable():
    a = tf.Variable([1.0, 2.0])
    b = tf.Variable(a.initialized_value() * 2.0)
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        np.testing.assert_array_equal(s.run(b), [2.0, 4.0])


@pytest.mark.parametrize("fn,ref", [
    (tf.scatter_update, lambda v, i, u: _np_set(v, i, u)),
    (tf.scatter_add, lambda v, i, u: _np_at(np.add, v, i, u)),
    (tf.scatter_sub, lambda v, i, u: _np_at(np.subtract, v, i, u)),
    (tf.scatter_mul, lambda v, i, u: _np_at(np.multiply, v, i, u)),
])
def test_scatter_ops(fn, ref):
    init = np.arange(12, dtype=np.float32).reshape(4, 3) + 1
    idx = np.array([2, 0, 2], dtype=np.int32)
    upd = np.full((3, 3), 2.0, np.float32)
    v = tf.Variable(init)
    op = fn(v, idx, upd) if fn is not tf.scatter_update else fn(v, [2, 0], upd[:2])
    with tf.Session() as s:
        s.run(v.initializer)
        before = s.run(v)
        s.run(op)
        got = s.run(v)
    want = ref(init, idx, upd) if fn is not tf.scatter_update else ref(init, [2, 0], upd[:2])
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(before, init)  # earlier fetch not affected by in-place update


@pytest.mark.parametrize("fn,ufunc", [(tf.scatter_add, np.add), (tf.scatter_sub, np.subtract)])
@pytest.mark.parametrize("idx", [
    np.array([[3, 0], [3, 3], [1, 0]]),  # repeats, 2-d indices
    np.array([0, 2, 2, 4, 0, 0, 1, 2, 4, 4, 3]),  # groups of 1 to 3, interleaved
    np.array([2] * 20 + [0, 1, 1]),       # one index repeated more than _ROUNDS times
    np.array([4, 1, 0]),                  # no repeats
    np.zeros([0], np.int64),              # nothing to update
], ids=["repeats", "repeat-groups", "many-repeats", "distinct", "empty"])
def test_scatter_add_sub_accumulate_repeated_rows(fn, ufunc, idx):
    rng = np.random.default_rng(3)
    init = rng.standard_normal((5, 2, 3))
    upd = rng.standard_normal(idx.shape + (2, 3))
    v = tf.Variable(init)
    op = fn(v, idx, upd)
    with tf.Session() as s:
        s.run(v.initializer)
        got = s.run(op)
    want = init.copy()
    ufunc.at(want, idx, upd)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("n_indices", [6, 40], ids=["sorted", "counted"])
def test_repeats_are_found_by_sorting_few_indices_and_by_counting_many(n_indices):
    # Few indices into many rows are sorted to find repeats; many are counted per row.
    from dflab.kernels import state_kernels

    rows = 200
    assert (rows <= state_kernels._COUNT_ROWS_PER_INDEX * n_indices) == (n_indices == 40)
    rng = np.random.default_rng(n_indices)
    idx = rng.choice([150, 7, 3, 199, 0], n_indices)
    init = rng.standard_normal((rows, 3)).astype(np.float32)
    upd = rng.standard_normal((n_indices, 3)).astype(np.float32)
    v = tf.Variable(init)
    op = tf.scatter_sub(v, idx, upd)
    with tf.Session() as s:
        s.run(v.initializer)
        got = s.run(op)
    want = init.copy()
    np.subtract.at(want, idx, upd)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    untouched = np.setdiff1d(np.arange(rows), idx)
    np.testing.assert_array_equal(got[untouched], init[untouched])


def test_scatter_out_of_range_is_invalid_argument():
    v = tf.Variable(tf.zeros([3, 2]))
    op = tf.scatter_add(v, [5], tf.ones([1, 2]))
    with tf.Session() as s:
        s.run(v.initializer)
        with pytest.raises(tf.errors.InvalidArgumentError, match="not in"):
            s.run(op)


def test_assign_to_non_ref_is_type_error():
    with pytest.raises(TypeError):
        tf.assign(tf.constant([1.0]), [2.0])


def _np_set(v, i, u):
    out = v.copy()
    out[i] = u
    return out


def _np_at(fn, v, i, u):
    out = v.copy()
    fn.at(out, i, u)
    return out
