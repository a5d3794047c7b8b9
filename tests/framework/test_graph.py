"""Graph IR: names, scopes, control dependencies, devices, collections, finalize, lookups."""

import numpy as np
import pytest

import dflab as tf


def test_tensor_and_op_names():
    a = tf.constant(1.0, name="c")
    b = tf.constant(2.0, name="c")
    assert a.name == "c:0" and b.name == "c_1:0"
    assert a.op.name == "c" and a.op.type == "Const"
    assert a.graph is tf.get_default_graph()
    assert a.value_index == 0 and a.dtype == tf.float32


def test_unique_names_skip_taken_suffixes():
    tf.constant(1, name="x_1")
    tf.constant(1, name="x")
    assert tf.constant(1, name="x").op.name == "x_2"


def test_name_scope_reentry_gets_suffix():
    with tf.name_scope("outer") as s1:
        a = tf.constant(1, name="a")
    with tf.name_scope("outer") as s2:
        b = tf.constant(1, name="a")
    assert s1 == "outer/" and s2 == "outer_1/"
    assert a.op.name == "outer/a" and b.op.name == "outer_1/a"
    with tf.name_scope("outer/"):  # absolute re-entry
        c = tf.constant(1, name="a")
    assert c.op.name == "outer/a_1"
    with tf.name_scope("outer"):
        with tf.name_scope(None):
            d = tf.constant(1, name="top")
    assert d.op.name == "top"


def test_name_scope_with_default_name_and_values():
    x = tf.constant(1.0)
    with tf.name_scope(None, "default", [x]) as s:
        assert s == "default/"
    with tf.name_scope("given", "default", [x]) as s:
        assert s == "given/"


def test_invalid_names_rejected():
    with pytest.raises(ValueError):
        tf.constant(1, name="bad name!")


def test_control_dependencies_nest_and_reset():
    a = tf.constant(1, name="a")
    b = tf.constant(2, name="b")
    with tf.control_dependencies([a]):
        c = tf.constant(3, name="c")
        with tf.control_dependencies([b]):
            d = tf.constant(4, name="d")
        with tf.control_dependencies(None):
            e = tf.constant(5, name="e")
    assert c.op.control_inputs == (a.op,)
    assert set(d.op.control_inputs) == {a.op, b.op}
    assert e.op.control_inputs == ()
    nd = d.op.node_def
    assert "^a" in nd.input and "^b" in nd.input


def test_device_scopes_merge_and_reset():
    with tf.device("/job:worker/task:1"):
        with tf.device("/gpu:0"):
            a = tf.constant(1)
        with tf.device(None):
            b = tf.constant(1)
        c = tf.constant(1)
    assert a.device == "/job:worker/task:1/device:GPU:0"
    assert b.device == ""
    assert c.device == "/job:worker/task:1"
    with tf.device(lambda op: "/cpu:0" if op.type == "Const" else None):
        d = tf.constant(1)
    assert d.device == "/device:CPU:0"


def test_colocate_with_sets_class_attr():
    a = tf.constant(1.0, name="anchor")
    with tf.device("/cpu:1"):
        with tf.colocate_with(a):
            b = tf.identity(a)
    assert b.op.colocation_groups() == [b"loc:@anchor"]
    assert b.op.get_attr("_class") == [b"loc:@anchor"]


def test_collections():
    tf.add_to_collection("things", 1)
    tf.add_to_collections(["things", "more"], 2)
    assert tf.get_collection("things") == [1, 2]
    assert tf.get_collection("more") == [2]
    ref = tf.get_collection_ref("things")
    ref.append(3)
    assert tf.get_collection("things") == [1, 2, 3]
    with tf.name_scope("s"):
        v = tf.Variable(1.0, name="v")
    w = tf.Variable(1.0, name="w")
    assert tf.get_collection(tf.GraphKeys.GLOBAL_VARIABLES, scope="s") == [v]
    assert tf.trainable_variables() == [v, w]


def test_finalize_blocks_new_ops():
    g = tf.Graph()
    with g.as_default():
        tf.constant(1)
    g.finalize()
    with g.as_default():
        with pytest.raises(RuntimeError, match="finalized"):
            tf.constant(2)


def test_lookup_by_name():
    with tf.name_scope("s"):
        a = tf.constant([1, 2], name="a")
    g = tf.get_default_graph()
    assert g.get_operation_by_name("s/a") is a.op
    assert g.get_tensor_by_name("s/a:0") is a
    assert g.get_operations() == [a.op]
    with pytest.raises(KeyError):
        g.get_operation_by_name("nope")
    with pytest.raises(KeyError):
        g.get_tensor_by_name("s/a:3")
    with pytest.raises(ValueError):
        g.get_tensor_by_name("s/a")


def test_default_graph_stack_and_reset():
    g = tf.Graph()
    with g.as_default():
        assert tf.get_default_graph() is g
        with pytest.raises(AssertionError):
            tf.reset_default_graph()
    assert tf.get_default_graph() is not g
    old = tf.get_default_graph()
    tf.reset_default_graph()
    assert tf.get_default_graph() is not old


def test_mixing_graphs_is_an_error():
    g1, g2 = tf.Graph(), tf.Graph()
    with g1.as_default():
        a = tf.constant(1.0)
    with g2.as_default():
        b = tf.constant(1.0)
        with pytest.raises(ValueError, match="same graph"):
            tf.add(a, b)


def test_creation_site_points_at_user_code():
    a = tf.constant(1.0)
    site = a.op.creation_site
    assert site.startswith(__file__) and ":" in site
    line = int(site.rsplit(":", 1)[1])
    assert "tf.constant(1.0)" in open(__file__).read().splitlines()[line - 1]


def test_tensor_python_protocols():
    a = tf.constant([1.0, 2.0])
    with pytest.raises(TypeError):
        bool(a)
    with pytest.raises(TypeError):
        iter(a)
    assert a == a and not (a == tf.constant([1.0, 2.0]))  # identity in TF1 graph mode
    assert {a: 1}[a] == 1


def test_set_shape_merges_and_rejects():
    p = tf.placeholder(tf.float32, [None, 3])
    p.set_shape([4, None])
    assert p.shape.as_list() == [4, 3]
    with pytest.raises(ValueError):
        p.set_shape([5, 3])


def test_constant_conversion_rules():
    assert tf.constant(1).dtype == tf.int32
    assert tf.constant(1.5).dtype == tf.float32
    assert tf.constant(np.float64(1.5)).dtype == tf.float64
    assert tf.constant([True]).dtype == tf.bool
    assert tf.constant("s").dtype == tf.string
    assert tf.constant(0, shape=[2, 3]).shape.as_list() == [2, 3]
    with pytest.raises(TypeError):
        tf.constant(1.5, dtype=tf.int32)
    with pytest.raises(TypeError):
        tf.constant([1, 2, 3], shape=[2, 2], verify_shape=True)
    with pytest.raises(TypeError):
        tf.constant(2**40, dtype=tf.int32)
    # A Python float is no integer, even a whole one (TF's: ``int_tensor + 2.0`` fails);
    # a NumPy array of whole floats is cast, unless beyond the type's range (it had been cast
    # to garbage, with NumPy's "invalid value" warning, or a FloatingPointError).
    for whole in (2.0, [1.0, 2.0], 1e10):
        with pytest.raises(TypeError, match="Expected int32, got .* of type"):
            tf.constant(whole, dtype=tf.int32)
    with pytest.raises(TypeError, match="Expected int32"):
        tf.constant([1, 2]) + 2.0
    assert tf.constant(np.array([1.0, 2.0]), dtype=tf.int32).dtype == tf.int32
    with pytest.raises(TypeError, match="out of range for int32"):
        tf.constant(np.array([2.0**31]), dtype=tf.int32)
    assert tf.constant(np.array([2.0**31 - 1, -2.0**31]), dtype=tf.int32).dtype == tf.int32
    with np.errstate(all="raise"):  # inf and NaN: refused, not a FloatingPointError
        for bad in (np.inf, [np.nan]):
            with pytest.raises(TypeError, match="Expected int32"):
                tf.constant(bad, dtype=tf.int32)


def test_a_python_number_is_no_bool_but_a_numpy_array_is_cast():
    """TF 2.21's rules (checked side by side): ``tf.constant(1, tf.bool)`` and ``x & 1`` are
    TypeErrors naming the first number; NumPy values are cast (0.5 is True)."""
    for bad, first in ((1, "1 of type 'int'"), (1.0, "1.0 of type 'float'"),
                       ([0.5, 1.0], "0.5 of type 'float'"), ([1, 0], "1 of type 'int'")):
        with pytest.raises(TypeError, match=f"Expected bool, but got {first}"):
            tf.constant(bad, dtype=tf.bool)
    # The message names the first number as given, past the bools before it (TF's).
    with pytest.raises(TypeError, match="Expected bool, but got 0 of type 'int'"):
        tf.constant([[True], [0]], dtype=tf.bool)
    with pytest.raises(TypeError, match="Expected bool, but got 2 of type 'int32'"):
        tf.constant([np.int32(2)], dtype=tf.bool)
    x = tf.placeholder(tf.bool, [2])
    with pytest.raises(TypeError, match="Expected bool, but got 1 of type 'int'"):
        tf.logical_and(x, 1)
    with tf.Session() as s:
        assert s.run(tf.constant(np.array([0.5, 0.0]), dtype=tf.bool)).tolist() == [True, False]
        assert s.run(tf.constant(np.int64(3), dtype=tf.bool)) == np.bool_(True)
        assert s.run(tf.equal(x, True), {x: [True, False]}).tolist() == [True, False]
        assert s.run(tf.ones([2], tf.bool)).tolist() == [True, True]


def test_container_sets_the_attr_of_stateful_ops_that_have_one():
    g = tf.Graph()
    with g.as_default():
        with tf.container("exp") as name:
            assert name == "exp"
            v = tf.Variable(1.0)
            c = tf.constant(2.0)
            q = tf.FIFOQueue(2, tf.float32)
            with pytest.raises(RuntimeError):
                with g.container("inner"):
                    raise RuntimeError
            after = tf.Variable(3.0)
        outside = tf.Variable(4.0)
        init = tf.variables_initializer([v, outside])
    assert v.op.get_attr("container") == "exp" and after.op.get_attr("container") == "exp"
    assert q.queue_ref.op.get_attr("container") == "exp"
    assert outside.op.get_attr("container") == ""
    with pytest.raises(ValueError):  # a stateless op gets no container attr
        c.op.get_attr("container")
    with tf.Session(graph=g) as s:  # a local session keeps the container's state too
        s.run(init)
        assert s.run([v, outside]) == [1.0, 4.0]
