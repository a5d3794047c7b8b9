"""The node interface (``NodeLike``/``OutputLike``), the public edits and graph members the op
builders use, and the one classification of op types (``op_kinds``)."""

import pytest

import dflab as tf
from dflab.framework import op_kinds
from dflab.framework.node_protocol import NodeLike, OutputLike
from dflab.framework.op_kinds import ControlFlowKind, control_flow_kind
from dflab.framework.tensor import relax_shape


def test_operations_and_tensors_satisfy_the_node_interface():
    x = tf.placeholder(tf.float32, [2], name="x")
    y = tf.identity(x, name="y")
    assert isinstance(y.op, NodeLike) and isinstance(y, OutputLike)
    assert not isinstance(y, NodeLike)


def test_reads_hand_out_the_ops_own_containers():
    a = tf.constant(1.0, name="a")
    c = tf.constant(2.0, name="c")
    with tf.control_dependencies([c]):
        b = tf.add(a, a, name="b")
    op = b.op
    assert op.inputs is op.inputs and op.inputs == (a, a)
    assert op.control_inputs is op.control_inputs and op.control_inputs == (c.op,)
    assert op.outputs is op.outputs and op.outputs == [b]
    assert op.values() == (b,)


def test_attrs_are_a_read_only_view():
    x = tf.placeholder(tf.float32, [3], name="x")
    attrs = x.op.attrs
    assert attrs["dtype"] is tf.float32 and attrs == {"dtype": tf.float32,
                                                      "shape": tf.TensorShape([3])}
    with pytest.raises(TypeError):
        attrs["dtype"] = tf.int32
    assert x.op.get_attr("dtype") is tf.float32
    with pytest.raises(ValueError, match="no attr named 'nope'"):
        x.op.get_attr("nope")


def test_control_edges_keep_both_ends_and_drop_cached_plans():
    g = tf.get_default_graph()
    a = tf.constant(1.0, name="a")
    b = tf.constant(2.0, name="b")
    epoch = g.plan_epoch
    b.op.add_control_input(a.op)
    b.op.add_control_input(a.op)  # once only
    assert b.op.control_inputs == (a.op,) and a.op.control_outputs == (b.op,)
    assert g.plan_epoch == epoch + 1
    b.op.remove_control_input(a.op)
    assert b.op.control_inputs == () and a.op.control_outputs == ()
    assert g.plan_epoch == epoch + 2


def test_update_input_rewires_consumers_and_checks_the_dtype():
    g = tf.get_default_graph()
    a = tf.constant(1.0, name="a")
    b = tf.constant(2.0, name="b")
    y = tf.identity(a, name="y")
    epoch = g.plan_epoch
    y.op.update_input(0, b)
    assert y.op.inputs == (b,) and a.consumers() == [] and b.consumers() == [y.op]
    assert g.plan_epoch == epoch + 1
    with pytest.raises(TypeError, match="Cannot update input 0 of y"):
        y.op.update_input(0, tf.constant(1, name="i"))
    with tf.Session() as s:
        assert s.run(y) == 2.0


def test_find_operation_and_creation_index():
    g = tf.get_default_graph()
    a = tf.constant(1.0, name="a")
    b = tf.constant(2.0, name="b")
    assert g.find_operation("a") is a.op and g.find_operation("missing") is None
    assert a.op.creation_index < b.op.creation_index


class _PassThroughContext:
    """A control-flow context that lets every value and op through unchanged."""

    def AddValue(self, t):
        return t

    def AddOp(self, op):
        self.last_op = op


def test_no_control_dependencies_keeps_the_control_flow_context():
    g = tf.get_default_graph()
    a = tf.constant(1.0, name="a")
    marker = _PassThroughContext()
    g.control_flow_context = marker
    try:
        with tf.control_dependencies([a]):
            with g.no_control_dependencies():
                assert g.control_flow_context is marker
                free = tf.constant(2.0, name="free")
            with tf.control_dependencies(None):
                assert g.control_flow_context is None
            tied = tf.constant(3.0, name="tied")
    finally:
        g.control_flow_context = None
    assert free.op.control_inputs == () and tied.op.control_inputs == (a.op,)
    assert free.op.control_flow_context is marker and marker.last_op is tied.op


def test_relax_shape_only_accepts_a_compatible_shape():
    x = tf.placeholder(tf.float32, [2, 3], name="x")
    y = tf.identity(x)
    with pytest.raises(ValueError, match="not compatible"):
        relax_shape(y, [4, 3])
    relax_shape(y, [None, 3])
    assert y.shape.as_list() == [None, 3] and x.shape.as_list() == [2, 3]


def test_control_flow_kinds_cover_the_reference_variants():
    for kind in ControlFlowKind:
        assert control_flow_kind(kind.value) is kind
        if kind is not ControlFlowKind.LOOP_COND:
            assert control_flow_kind("Ref" + kind.value) is kind
    assert control_flow_kind("MatMul") is None and control_flow_kind("RefLoopCond") is None
    assert op_kinds.BACK_EDGE_OPS == {"NextIteration", "RefNextIteration"}
    assert op_kinds.MERGE_OPS == {"Merge", "RefMerge"}
    assert op_kinds.LOOP_OPS.isdisjoint(op_kinds.SWITCH_OPS | op_kinds.MERGE_OPS)
    assert op_kinds.CONTROL_FLOW_OPS == (op_kinds.LOOP_OPS | op_kinds.SWITCH_OPS
                                         | op_kinds.MERGE_OPS)


def test_a_while_loop_is_made_of_the_classified_primitives():
    tf.while_loop(lambda i: i < 3, lambda i: i + 1, [tf.constant(0)])
    kinds = {control_flow_kind(op.type) for op in tf.get_default_graph().get_operations()}
    assert kinds - {None} == set(ControlFlowKind)
