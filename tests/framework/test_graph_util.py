"""tf.graph_util: freezing variables into constants, subgraph extraction, removal of training
nodes and the placement helpers. The expected node lists are what TF 2.21's compat.v1
graph_util gives for the same graphs."""

import numpy as np
import pytest

import dflab as tf

gu = tf.compat.v1.graph_util
X = np.arange(6, dtype=np.float32).reshape(2, 3)


def _model():
    """A placeholder, a reference and a resource variable, an Identity and a CheckNumerics."""
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, 3], name="x")
        w = tf.get_variable("w", [3, 2], initializer=tf.random_normal_initializer(seed=1),
                            use_resource=False)
        r = tf.get_variable("r", [2], initializer=tf.constant_initializer([0.5, -1.0]),
                            use_resource=True)
        h = tf.identity(tf.matmul(x, w) + r, name="h")
        y = tf.nn.relu(tf.check_numerics(h, "bad", name="cn"), name="y")
        tf.add(r, 1.0, name="other")
    return g, x, w, y


def _frozen(**kwargs):
    g, x, w, y = _model()
    with g.as_default(), tf.Session(graph=g) as s:
        s.run(tf.global_variables_initializer())
        s.run(tf.assign(w, tf.ones([3, 2])))  # frozen values are the current ones
        gd = g.as_graph_def()
        frozen = gu.convert_variables_to_constants(s, gd, ["y"], **kwargs)
        live = s.run(y, {x: X})
    return gd, frozen, live


def test_graph_util_is_one_module_under_both_spellings():
    assert tf.graph_util is tf.compat.v1.graph_util
    assert tf.graph_util.import_graph_def is tf.import_graph_def


def test_convert_variables_to_constants_freezes_ref_and_resource_variables():
    gd, frozen, live = _frozen()
    assert [(n.name, n.op) for n in frozen.node] == [
        ("x", "Placeholder"), ("w", "Const"), ("w/read", "Identity"), ("r", "Const"),
        ("MatMul", "MatMul"), ("ReadVariableOp_1", "Identity"), ("add", "AddV2"),
        ("h", "Identity"), ("cn", "CheckNumerics"), ("y", "Relu")]
    np.testing.assert_array_equal(frozen.node[1].attr["value"], np.ones((3, 2), np.float32))
    np.testing.assert_array_equal(frozen.node[3].attr["value"], [0.5, -1.0])
    assert {n.op for n in gd.node} >= {"VariableV2", "VarHandleOp"}  # input left alone
    np.testing.assert_allclose(live, [[3.5, 2.0], [12.5, 11.0]])
    with tf.Graph().as_default() as g2:
        tf.import_graph_def(tf.GraphDef.FromString(frozen.SerializeToString()), name="")
        assert tf.global_variables() == []
        with tf.Session(graph=g2) as s:
            np.testing.assert_array_equal(s.run("y:0", {"x:0": X}), live)


def test_convert_variables_to_constants_whitelist_and_blacklist():
    _, only_w, _ = _frozen(variable_names_whitelist=["w"])
    assert {n.name: n.op for n in only_w.node}["r"] == "VarHandleOp"
    assert {n.name: n.op for n in only_w.node}["ReadVariableOp_1"] == "ReadVariableOp"
    _, not_w, _ = _frozen(variable_names_blacklist=["w"])
    ops = {n.name: n.op for n in not_w.node}
    assert ops["w"] == "VariableV2" and ops["r"] == "Const"


def test_extract_sub_graph_keeps_only_what_the_nodes_need_in_order():
    g, *_ = _model()
    gd = g.as_graph_def()
    sub = gu.extract_sub_graph(gd, ["other"])
    assert [n.name for n in sub.node][0] == "r" and sub.node[-1].name == "other"
    assert {n.op for n in sub.node} == {"VarHandleOp", "ReadVariableOp", "Const", "AddV2"}
    assert len(sub.node) == 4
    with g.as_default():
        tf.no_op(name="after")
        with tf.control_dependencies([g.get_operation_by_name("after")]):
            tf.identity(g.get_tensor_by_name("x:0"), name="gated")
    names = [n.name for n in gu.extract_sub_graph(g.as_graph_def(), ["gated"]).node]
    assert names == ["x", "after", "gated"]  # control inputs are followed too


@pytest.mark.parametrize("dest, graph_def, err", [
    ("y", None, TypeError), (["nope"], None, AssertionError), (["y"], "not a graph", TypeError),
])
def test_extract_sub_graph_argument_errors(dest, graph_def, err):
    g, *_ = _model()
    with pytest.raises(err):
        gu.extract_sub_graph(g.as_graph_def() if graph_def is None else graph_def, dest)


def test_remove_training_nodes_as_tf_does():
    _, frozen, _ = _frozen()
    out = gu.remove_training_nodes(frozen)
    # CheckNumerics goes with the inputs naming it (y is left without one, as in TF);
    # the Identity nodes are spliced out.
    assert [(n.name, n.input) for n in out.node] == [
        ("x", []), ("w", []), ("r", []), ("MatMul", ["x", "w"]), ("add", ["MatMul", "r"]),
        ("y", [])]
    kept = gu.remove_training_nodes(frozen, protected_nodes=["h", "cn"])
    assert [n.name for n in kept.node] == ["x", "w", "r", "MatMul", "add", "h", "cn", "y"]
    assert [n.input for n in kept.node][-2:] == [["h"], ["cn"]]
    assert [n.name for n in frozen.node][2] == "w/read"  # the input is not modified


def test_remove_training_nodes_keeps_identities_tied_to_control_edges_and_colocation():
    with tf.Graph().as_default() as g:
        a = tf.constant(1.0, name="a")
        one, two = tf.constant(1.0, name="one"), tf.constant(2.0, name="two")
        i1 = tf.identity(a, name="i1")  # used as a control input
        with tf.control_dependencies([i1]):
            i2 = tf.identity(a, name="i2")  # has a control input
        i3 = tf.identity(a, name="i3")  # b is colocated with it
        i4 = tf.identity(a, name="i4")  # spliced out
        with g.colocate_with(i3.op):
            tf.add(i2, one, name="b")
        tf.add(i4, two, name="c")
    out = [(n.name, n.input) for n in gu.remove_training_nodes(g.as_graph_def()).node]
    assert out == [("a", []), ("one", []), ("two", []), ("i1", ["a"]), ("i2", ["a", "^i1"]),
                   ("i3", ["a"]), ("b", ["i2", "one"]), ("c", ["a", "two"])]


def test_must_run_on_cpu():
    with tf.Graph().as_default() as g:
        ci = tf.constant(1, name="ci")
        cf = tf.constant(1.0, name="cf")
        cs = tf.constant("s", name="cs")
        cast_i = tf.cast(ci, tf.float32)
        cast_f = tf.cast(cf, tf.int32)
        v = tf.Variable(1.0, use_resource=False)
        stitch_i = tf.dynamic_stitch([tf.constant([0])], [tf.constant([1])])
        stitch_f = tf.dynamic_stitch([tf.constant([0])], [tf.constant([1.0])])
    assert gu.must_run_on_cpu(stitch_i.op) and not gu.must_run_on_cpu(stitch_f.op)
    assert [gu.must_run_on_cpu(t.op) for t in (ci, cf, cs, cast_i, cast_f)] == [
        True, False, True, True, False]
    assert gu.must_run_on_cpu(v.op) is False
    assert gu.must_run_on_cpu(v.op, pin_variables_on_cpu=True) is True
    nodes = {n.name: n for n in g.as_graph_def().node}
    assert gu.must_run_on_cpu(nodes["ci"]) and not gu.must_run_on_cpu(nodes["cf"])
    with pytest.raises(AssertionError):
        gu.must_run_on_cpu("ci")


def test_tensor_shape_from_node_def_name():
    g, *_ = _model()
    assert gu.tensor_shape_from_node_def_name(g, "y").as_list() == [None, 2]
    assert gu.tensor_shape_from_node_def_name(g, "w:0").as_list() == [3, 2]
    with pytest.raises(KeyError):
        gu.tensor_shape_from_node_def_name(g, "missing")
