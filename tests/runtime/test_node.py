"""The runtime's ``Node``: the node interface it shares with ``Operation``, with plain public
attributes, its wiring methods, and its round trip through typed node defs."""

import dflab as tf
from dflab.framework.node_protocol import NodeLike, OutputLike
from dflab.runtime.node import Node, nodes_from_node_defs

CPU = "/job:localhost/replica:0/task:0/device:CPU:0"


def _graph():
    a = tf.constant(2.0, name="a")
    b = tf.constant(3.0, name="b")
    with tf.control_dependencies([b]):
        y = tf.multiply(a, a, name="y")
    return a, b, y


def test_a_view_of_an_op_reads_the_ops_own_data():
    a, b, y = _graph()
    node = Node.of_op(y.op, CPU)
    assert isinstance(node, NodeLike) and isinstance(node.outputs[0], OutputLike)
    assert node.inputs is y.op.inputs and node.control_inputs is y.op.control_inputs
    assert node.attrs == y.op.attrs
    const = Node.of_op(a.op, CPU)
    assert const.get_attr("dtype") is tf.float32
    assert (node.name, node.type, node.device, node.original) == ("y", "Mul", CPU, y.op)
    assert node.op_def is y.op.op_def and node.creation_site == y.op.creation_site
    out = node.outputs[0]
    assert out.op is node and out.name == "y:0" and out.device == CPU
    assert out.original is y and node.values() == (out,)


def test_set_inputs_and_set_input_wire_a_node_being_built():
    a, b, y = _graph()
    src = Node("Const", "c", CPU, {"dtype": tf.float32}, output_types=(tf.float32,))
    node = Node("AddV2", "add", CPU, {"T": tf.float32}, output_types=(tf.float32,))
    node.set_inputs([a, a], [src])
    assert node.inputs == (a, a) and node.control_inputs == (src,)
    node.set_input(1, src.outputs[0])
    assert node.inputs == (a, src.outputs[0]) and node.control_inputs == (src,)
    node.set_inputs(control_inputs=())
    assert node.inputs == (a, src.outputs[0]) and node.control_inputs == ()


def test_a_node_can_produce_existing_outputs():
    a, b, y = _graph()
    fused = Node("_FusedElementwise", "y", CPU, {}, inputs=(a,), outputs=y.op.outputs)
    assert fused.outputs == y.op.outputs and fused.outputs is not y.op.outputs


def test_node_defs_rebuild_the_same_wiring():
    a, b, y = _graph()
    nodes = [Node.of_op(op, CPU) for op in (a.op, b.op, y.op)]
    for n in nodes[2:]:
        n.set_inputs([nodes[0].outputs[0]] * 2, [nodes[1]])
    defs = [n.to_node_def() for n in nodes]
    assert defs[2].input == ["a", "a", "^b"] and defs[2].device == CPU
    rebuilt, _ = nodes_from_node_defs(defs, origins={"y": y.op})
    ra, rb, ry = rebuilt
    assert ry.inputs == (ra.outputs[0], ra.outputs[0]) and ry.control_inputs == (rb,)
    assert ry.original is y.op and ra.original is None
    assert ry.attrs == dict(y.op.attrs) and ry.outputs[0].dtype is tf.float32
