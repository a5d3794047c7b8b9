"""GraphDef and JSON round trips; loading validates and never runs code."""

import json

import numpy as np
import pytest

import dflab as tf
from dflab.framework.graph_io import graph_def_from_json, read_graph


def _build():
    x = tf.placeholder(tf.float32, [None, 2], name="x")
    w = tf.constant(np.arange(40, dtype=np.float32).reshape(2, 20), name="w")
    with tf.control_dependencies([w]):
        y = tf.matmul(x, w, name="y")
    return x, y


def test_graph_def_fields():
    x, y = _build()
    gd = tf.get_default_graph().as_graph_def()
    names = [n.name for n in gd.node]
    assert names == ["x", "w", "y"]
    node = gd.node[2]
    assert node.op == "MatMul" and node.input == ["x", "w"]  # ^w folded: already an input
    assert node.attr["transpose_a"] is False


def test_json_round_trip_and_import():
    x, y = _build()
    data = tf.get_default_graph().as_graph_def().SerializeToString()
    obj = json.loads(data)
    assert obj["format"] == "dflab.graph" and obj["version"] == 1
    g2 = tf.Graph()
    with g2.as_default():
        feed = tf.placeholder(tf.float32, [1, 2], name="feed")
        y2, = tf.import_graph_def(tf.GraphDef.FromString(data), input_map={"x:0": feed},
                                  return_elements=["y:0"], name="imp")
        assert y2.name == "imp/y:0"
        with tf.Session() as s:
            got = s.run(y2, {feed: [[1.0, 2.0]]})
    with tf.Session(graph=tf.get_default_graph()) as s:
        want = s.run(y, {x: [[1.0, 2.0]]})
    np.testing.assert_array_equal(got, want)


def test_write_graph_and_read(tmp_path):
    _build()
    path = tf.train.write_graph(tf.get_default_graph(), str(tmp_path), "g.json")
    gd = read_graph(path)
    assert [n.op for n in gd.node] == ["Placeholder", "Const", "MatMul"]


@pytest.mark.parametrize("payload", [
    b"not json at all",
    json.dumps({"format": "other", "version": 1, "node": []}),
    json.dumps({"format": "dflab.graph", "version": 99, "node": []}),
    json.dumps({"format": "dflab.graph", "version": 1, "node": [{"op": "Const"}]}),
    json.dumps({"format": "dflab.graph", "version": 1,
                "node": [{"name": "a", "op": "Const", "attr": {"value": {"pickle": "x"}}}]}),
])
def test_corrupt_graph_rejected(payload):
    with pytest.raises((tf.errors.DataLossError, ValueError)):
        graph_def_from_json(payload)


def test_unknown_op_and_cycles_rejected():
    bad = {"format": "dflab.graph", "version": 1,
           "node": [{"name": "a", "op": "os.system"}]}
    with pytest.raises(ValueError, match="not registered"):
        tf.import_graph_def(bad)
    cyc = {"format": "dflab.graph", "version": 1,
           "node": [{"name": "a", "op": "Identity", "input": ["b"]},
                    {"name": "b", "op": "Identity", "input": ["a"]}]}
    with pytest.raises(ValueError, match="cycle"):
        tf.import_graph_def(cyc)


def test_large_tensor_attr_round_trip():
    big = np.random.default_rng(0).standard_normal((50, 7)).astype(np.float64)
    tf.constant(big, name="big")
    gd = graph_def_from_json(tf.get_default_graph().as_graph_def().SerializeToString())
    np.testing.assert_array_equal(gd.node[0].attr["value"], big)
