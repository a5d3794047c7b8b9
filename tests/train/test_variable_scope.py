"""variable_scope / get_variable: naming of variables and ops, reuse modes, inheritance of
initializer / regularizer / reuse, re-entering scopes, default initializers and TF1's errors."""

import numpy as np
import pytest

import dflab as tf
from dflab.framework import graph_transaction


def _run(fetches):
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        return sess.run(fetches)


# --- naming --------------------------------------------------------------------------------------
def test_get_variable_names_variable_op_and_tensor():
    with tf.variable_scope("foo"):
        v = tf.get_variable("v", [2, 3], use_resource=False)
    assert isinstance(v, tf.Variable)
    assert v.name == "foo/v:0"
    assert v.op.name == "foo/v"
    assert v.op.type == "VariableV2"
    assert v.shape.as_list() == [2, 3]
    assert v.dtype.is_ref_dtype and v.dtype.base_dtype == tf.float32
    g = tf.get_default_graph()
    assert g.get_operation_by_name("foo/v/Assign").type == "Assign"
    assert g.get_operation_by_name("foo/v/read").type == "Identity"
    assert v in tf.global_variables() and v in tf.trainable_variables()


def test_get_variable_makes_a_resource_variable_by_default():
    # TF 2.x compat.v1's default: the same names, built as a handle and its ops.
    with tf.variable_scope("foo"):
        v = tf.get_variable("v", [2, 3])
    assert isinstance(v, tf.Variable) and v.name == "foo/v:0" and v.op.name == "foo/v"
    assert v.op.type == "VarHandleOp" and v.shape.as_list() == [2, 3]
    assert not v.dtype.is_ref_dtype and v.dtype == tf.float32
    g = tf.get_default_graph()
    assert g.get_operation_by_name("foo/v/Assign").type == "AssignVariableOp"
    assert g.get_operation_by_name("foo/v/Read/ReadVariableOp").type == "ReadVariableOp"
    assert v in tf.global_variables() and v in tf.trainable_variables()
    with tf.variable_scope("bar"):
        r = tf.get_variable("r", [2], use_resource=False)
    assert r.op.type == "VariableV2"


@pytest.mark.parametrize("build, want_var, want_op", [
    # a variable scope opens the name scope of the same name
    (lambda: _in(["a"], "v"), "a/v:0", "a/Const:0"),
    (lambda: _in(["a", "b"], "v"), "a/b/v:0", "a/b/Const:0"),
    # name_scope affects ops but not get_variable
    (lambda: _in_name_scope("ns", "a", "v"), "a/v:0", "ns/a/Const:0"),
    # root scope
    (lambda: _in([], "v"), "v:0", "Const:0"),
])
def test_naming_table(build, want_var, want_op):
    var, const = build()
    assert var.name == want_var
    assert const.name == want_op


def _in(scopes, name):
    if not scopes:
        return tf.get_variable(name, [1]), tf.constant(1.0)
    with tf.variable_scope(scopes[0]):
        return _in(scopes[1:], name)


def _in_name_scope(ns, scope, name):
    with tf.name_scope(ns):
        with tf.variable_scope(scope):
            return tf.get_variable(name, [1]), tf.constant(1.0)


def test_reentering_with_reuse_gives_fresh_name_scope_but_same_variable():
    with tf.variable_scope("foo"):
        v = tf.get_variable("v", [1])
        c0 = tf.constant(0.0)
    with tf.variable_scope("foo", reuse=True):
        v1 = tf.get_variable("v", [1])
        c1 = tf.constant(0.0)
    with tf.variable_scope("foo", reuse=True):
        c2 = tf.constant(0.0)
    assert v1 is v
    assert (c0.name, c1.name, c2.name) == ("foo/Const:0", "foo_1/Const:0", "foo_2/Const:0")


def test_reentering_scope_object():
    with tf.variable_scope("foo") as scope:
        v = tf.get_variable("v", [1])
    assert scope.name == "foo" and scope.original_name_scope == "foo/"
    with tf.variable_scope("other"):
        with tf.variable_scope(scope, reuse=True) as again:
            assert again.name == "foo"
            assert tf.get_variable("v", [1]) is v
            c = tf.constant(1.0)
            w = tf.get_variable("w", [1], initializer=tf.zeros_initializer()) \
                if not again.reuse else None
    # jumping to a scope object ignores the enclosing variable scope's name
    assert c.name.startswith("other/foo/")
    assert w is None


def test_scope_object_creates_variables_under_its_own_name():
    with tf.variable_scope("foo") as scope:
        pass
    with tf.variable_scope("bar"):
        with tf.variable_scope(scope):
            w = tf.get_variable("w", [1])
    assert w.name == "foo/w:0"


def test_default_name_is_made_unique():
    names = []
    for _ in range(3):
        with tf.variable_scope(None, default_name="layer"):
            names.append(tf.get_variable("w", [1]).name)
    assert names == ["layer/w:0", "layer_1/w:0", "layer_2/w:0"]


def test_default_name_counts_restart_inside_new_parent():
    names = []
    for outer in ("a", "b"):
        with tf.variable_scope(outer):
            for _ in range(2):
                with tf.variable_scope(None, default_name="dense"):
                    names.append(tf.get_variable("k", [1]).name)
    assert names == ["a/dense/k:0", "a/dense_1/k:0", "b/dense/k:0", "b/dense_1/k:0"]


def test_get_variable_scope_tracks_nesting():
    assert tf.get_variable_scope().name == ""
    with tf.variable_scope("a") as a:
        assert tf.get_variable_scope() is a
        with tf.variable_scope("b"):
            assert tf.get_variable_scope().name == "a/b"
        assert tf.get_variable_scope() is a
    assert tf.get_variable_scope().name == ""


def test_auxiliary_name_scope_false_keeps_current_name_scope():
    with tf.name_scope("outer"):
        with tf.variable_scope("vs", auxiliary_name_scope=False):
            v = tf.get_variable("v", [1])
            c = tf.constant(1.0)
    assert v.name == "vs/v:0"
    assert c.name == "outer/Const:0"


# --- reuse ---------------------------------------------------------------------------------------
def test_reuse_variables_method():
    with tf.variable_scope("s") as scope:
        v = tf.get_variable("v", [2])
        scope.reuse_variables()
        assert tf.get_variable("v", [2]) is v
        assert scope.reuse is True


def test_reuse_is_inherited_by_subscopes():
    with tf.variable_scope("a"):
        with tf.variable_scope("b"):
            v = tf.get_variable("v", [1])
    with tf.variable_scope("a", reuse=True):
        with tf.variable_scope("b", reuse=False) as inner:
            assert inner.reuse is True  # reuse cannot be switched off inside
            assert tf.get_variable("v", [1]) is v


def test_auto_reuse_creates_then_reuses():
    def model():
        with tf.variable_scope("m", reuse=tf.AUTO_REUSE):
            return tf.get_variable("w", [3])

    w1, w2 = model(), model()
    assert w1 is w2
    assert tf.AUTO_REUSE is not True and bool(tf.AUTO_REUSE)
    assert len(tf.global_variables()) == 1


def test_auto_reuse_inherited():
    with tf.variable_scope("top", reuse=tf.AUTO_REUSE):
        with tf.variable_scope("sub") as sub:
            a = tf.get_variable("a", [1])
            b = tf.get_variable("a", [1])
    assert sub.reuse is tf.AUTO_REUSE
    assert a is b


def test_existing_variable_without_reuse_raises_tf1_message():
    with tf.variable_scope("foo"):
        tf.get_variable("v", [1])
    with pytest.raises(ValueError, match=r"Variable foo/v already exists, disallowed\. Did you "
                       r"mean to set reuse=True or reuse=tf\.AUTO_REUSE in VarScope\?"):
        with tf.variable_scope("foo"):
            tf.get_variable("v", [1])


def test_missing_variable_with_reuse_raises_tf1_message():
    with pytest.raises(ValueError, match=r"Variable foo/v does not exist, or was not created "
                       r"with tf\.get_variable\(\)"):
        with tf.variable_scope("foo", reuse=True):
            tf.get_variable("v", [1])


def test_plain_variable_is_not_found_by_get_variable():
    with tf.variable_scope("foo"):
        tf.Variable(1.0, name="v")
    with pytest.raises(ValueError, match="does not exist"):
        with tf.variable_scope("foo", reuse=True):
            tf.get_variable("v", [])


@pytest.mark.parametrize("kwargs, match", [
    ({"shape": [3, 2]}, "specified shape"),
    ({"shape": [2, 3], "dtype": tf.float64}, "specified dtype"),
])
def test_sharing_with_mismatched_shape_or_dtype_raises(kwargs, match):
    with tf.variable_scope("s"):
        tf.get_variable("v", [2, 3])
    with pytest.raises(ValueError, match=match):
        with tf.variable_scope("s", reuse=True):
            tf.get_variable("v", **kwargs)


def test_reuse_with_unknown_shape_is_compatible():
    with tf.variable_scope("s"):
        v = tf.get_variable("v", [2, 3])
    with tf.variable_scope("s", reuse=True):
        assert tf.get_variable("v") is v


@pytest.mark.parametrize("kwargs, err", [
    ({"name_or_scope": None}, TypeError),
    ({"name_or_scope": None, "default_name": "d", "reuse": True}, ValueError),
    ({"name_or_scope": "x", "reuse": "yes"}, ValueError),
    ({"name_or_scope": 3}, TypeError),
])
def test_variable_scope_argument_errors(kwargs, err):
    with pytest.raises(err):
        with tf.variable_scope(**kwargs):
            pass


def test_improper_nesting_is_detected():
    with tf.Graph().as_default():
        outer = tf.variable_scope("a")
        inner = tf.variable_scope("b")
        outer.__enter__()
        inner.__enter__()
        with pytest.raises(RuntimeError, match="Improper nesting"):
            outer.__exit__(None, None, None)
        inner.__exit__(None, None, None)


# --- initializers, dtypes and values -------------------------------------------------------------
def test_default_initializers_glorot_for_float_zeros_for_int():
    f = tf.get_variable("f", [30, 20])
    i = tf.get_variable("i", [5], dtype=tf.int32)
    b = tf.get_variable("b", [2], dtype=tf.bool)
    fv, iv, bv = _run([f, i, b])
    limit = np.sqrt(6.0 / 50)
    assert np.abs(fv).max() <= limit and fv.std() > 0.3 * limit
    np.testing.assert_array_equal(iv, np.zeros(5, np.int32))
    np.testing.assert_array_equal(bv, np.zeros(2, bool))
    assert f.op.graph.get_operation_by_name("f/Initializer/random_uniform") is not None


def test_no_default_initializer_for_complex():
    with pytest.raises(ValueError, match="An initializer for variable c"):
        tf.get_variable("c", [2], dtype=tf.complex64)


def test_scope_initializer_and_dtype_are_inherited_and_overridable():
    with tf.variable_scope("s", initializer=tf.constant_initializer(0.4), dtype=tf.float64):
        a = tf.get_variable("a", [2])
        with tf.variable_scope("t"):
            b = tf.get_variable("b", [2])
            c = tf.get_variable("c", [2], initializer=tf.ones_initializer())
        with tf.variable_scope("u", initializer=tf.constant_initializer(-1.0)):
            d = tf.get_variable("d", [2])
    assert a.dtype.base_dtype == tf.float64
    av, bv, cv, dv = _run([a, b, c, d])
    np.testing.assert_array_equal(av, [0.4, 0.4])
    np.testing.assert_array_equal(bv, [0.4, 0.4])
    np.testing.assert_array_equal(cv, [1.0, 1.0])
    np.testing.assert_array_equal(dv, [-1.0, -1.0])


def test_value_initializers():
    a = tf.get_variable("a", initializer=tf.constant([[1, 2], [3, 4]]))
    b = tf.get_variable("b", initializer=np.array([1.5, 2.5]))
    c = tf.get_variable("c", initializer=[1.0, 2.0])
    assert a.dtype.base_dtype == tf.int32 and a.shape.as_list() == [2, 2]
    assert b.dtype.base_dtype == tf.float64
    assert c.dtype.base_dtype == tf.float32
    av, bv, cv = _run([a, b, c])
    np.testing.assert_array_equal(av, [[1, 2], [3, 4]])
    np.testing.assert_array_equal(bv, [1.5, 2.5])
    np.testing.assert_array_equal(cv, [1.0, 2.0])


def test_value_initializer_with_shape_is_rejected():
    with pytest.raises(ValueError, match="If initializer is a constant, do not specify shape"):
        tf.get_variable("a", [2], initializer=tf.constant([1.0, 2.0]))


def test_value_initializer_dtype_mismatch_is_rejected():
    with pytest.raises(ValueError, match="don't match"):
        tf.get_variable("a", dtype=tf.float64, initializer=tf.constant([1.0]))


def test_initializer_needs_a_shape():
    with pytest.raises(ValueError, match="The initializer passed is not valid"):
        tf.get_variable("a", initializer=tf.zeros_initializer())


def test_initializer_class_is_instantiated():
    v = tf.get_variable("a", [3], initializer=tf.ones_initializer)
    np.testing.assert_array_equal(_run(v), np.ones(3))


def test_trainable_and_collections():
    a = tf.get_variable("a", [1], trainable=False)
    b = tf.get_variable("b", [1], collections=["mine"])
    c = tf.get_local_variable("c", [1])
    assert a in tf.global_variables() and a not in tf.trainable_variables()
    assert b in tf.get_collection("mine") and b in tf.trainable_variables()
    assert b not in tf.global_variables()
    assert c in tf.local_variables() and c not in tf.trainable_variables()
    assert c not in tf.global_variables()


def test_scope_collection_helpers():
    with tf.variable_scope("net") as net:
        w = tf.get_variable("w", [1])
        s = tf.get_variable("s", [1], trainable=False)
    tf.get_variable("other", [1])
    assert net.trainable_variables() == [w]
    assert net.global_variables() == [w, s]


def test_variables_ignore_enclosing_control_dependencies():
    c = tf.constant(1.0)
    with tf.control_dependencies([c]):
        v = tf.get_variable("v", [1])
    assert v.op.control_inputs == ()
    assert v.initializer.control_inputs == ()


# --- regularizers --------------------------------------------------------------------------------
def test_regularizer_losses_are_collected():
    def l2(scale):
        return lambda w: tf.multiply(scale, tf.reduce_sum(tf.square(w)), name="l2")

    with tf.variable_scope("s", regularizer=l2(0.5)):
        a = tf.get_variable("a", initializer=[1.0, 2.0])
        with tf.variable_scope("inner"):
            b = tf.get_variable("b", initializer=[3.0])
        tf.get_variable("c", initializer=[5.0], regularizer=tf.no_regularizer)
    tf.get_variable("d", initializer=[7.0], regularizer=l2(1.0))
    losses = tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES)
    assert [t.op.name for t in losses] == ["s/a/Regularizer/l2", "s/inner/b/Regularizer/l2",
                                           "d/Regularizer/l2"]
    got = _run(losses)
    np.testing.assert_allclose(got, [0.5 * 5.0, 0.5 * 9.0, 49.0])
    del a, b


def test_regularizer_returning_none_adds_nothing():
    tf.get_variable("a", [2], regularizer=lambda w: None)
    assert tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES) == []


# --- custom getters, stores per graph
def test_custom_getter_wraps_creation():
    seen = []

    def getter(getter, name, *args, **kwargs):
        seen.append(name)
        kwargs["trainable"] = False
        return getter(name, *args, **kwargs)

    with tf.variable_scope("s", custom_getter=getter):
        v = tf.get_variable("v", [1])
    assert seen == ["s/v"]
    assert v not in tf.trainable_variables()


def test_each_graph_has_its_own_store():
    g1, g2 = tf.Graph(), tf.Graph()
    with g1.as_default():
        v1 = tf.get_variable("v", [1])
    with g2.as_default():
        v2 = tf.get_variable("v", [1])
    assert v1 is not v2 and v1.graph is g1 and v2.graph is g2


def test_values_pick_the_graph():
    g = tf.Graph()
    with g.as_default():
        x = tf.constant(1.0)
    with tf.variable_scope("s", values=[x]):
        v = tf.get_variable("v", [1])
    assert v.graph is g


def test_removed_variable_ops_are_forgotten_by_the_store():
    g = tf.get_default_graph()
    before = set(g.get_operations())
    tf.get_variable("v", [1])
    with graph_transaction.begin(g) as txn:
        txn.remove([op for op in g.get_operations() if op not in before])
    v = tf.get_variable("v", [2])
    assert v.shape.as_list() == [2]
