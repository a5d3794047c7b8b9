"""Malformed graph JSON: each defect is a TF error class whose message names the file and the
node, never a raw Python error. One row per defect; the graph is a small real one (a constant,
a placeholder, an AddN and a while loop) exported and then damaged."""

import copy
import json

import pytest

import dflab as tf
from dflab.framework.graph_io import GraphDefImportError, graph_def_from_json, read_graph


def _graph_json() -> dict:
    g = tf.Graph()
    with g.as_default():
        a = tf.constant([1.0, 2.0], name="a")
        b = tf.placeholder(tf.float32, [2], name="b")
        tf.add_n([a, b], name="s")
        tf.while_loop(lambda i: i < 3, lambda i: i + 1, [tf.constant(0, name="i")])
    return g.as_graph_def().to_json()


def _node(gd: dict, name: str) -> dict:
    return next(n for n in gd["node"] if n["name"] == name)


def _merge(gd: dict) -> dict:
    return next(n for n in gd["node"] if n["op"] == "Merge")


def _set(path, value):
    """A mutation setting ``gd[path...] = value`` (path of keys; a node name as first key)."""
    def mutate(gd):
        target = _node(gd, path[0]) if path[0] != "$merge" else _merge(gd)
        for k in path[1:-1]:
            target = target[k]
        target[path[-1]] = value
    return mutate


def _pop(path):
    def mutate(gd):
        target = _node(gd, path[0])
        for k in path[1:-1]:
            target = target[k]
        del target[path[-1]]
    return mutate


def _back_edge_to(suffix):
    def mutate(gd):
        m = _merge(gd)
        m["input"][1] = m["input"][1].split(":")[0] + suffix
    return mutate


DataLoss, Invalid = tf.errors.DataLossError, GraphDefImportError

# (id, mutation, error class, node named in the message)
CASES = [
    ("const-value-without-tensor", _pop(["a", "attr", "value", "tensor"]), DataLoss, "a"),
    ("tensor-without-dtype", _pop(["a", "attr", "value", "tensor", "dtype"]), DataLoss, "a"),
    ("tensor-without-shape", _pop(["a", "attr", "value", "tensor", "shape"]), DataLoss, "a"),
    ("const-without-value", _pop(["a", "attr", "value"]), Invalid, "a"),
    ("const-without-dtype", _pop(["a", "attr", "dtype"]), Invalid, "a"),
    ("node-without-inputs", _pop(["s", "input"]), Invalid, "s"),
    ("attr-N-a-string", _set(["s", "attr", "N"], "two"), Invalid, "s"),
    ("attr-dtype-an-int", _set(["a", "attr", "dtype"], 5), Invalid, "a"),
    ("attr-dtype-a-list", _set(["a", "attr", "dtype"], [1]), DataLoss, "a"),
    ("attr-unknown-tag", _set(["a", "attr", "dtype"], {"what": 1}), DataLoss, "a"),
    ("attr-dtype-unknown-name", _set(["a", "attr", "dtype"], {"type": "float7"}), DataLoss,
     "a"),
    ("input-index-out-of-range", _set(["s", "input", 0], "a:7"), Invalid, "s"),
    ("input-missing-node", _set(["s", "input", 0], "zz"), Invalid, "s"),
    ("control-input-missing", _set(["s", "input", 0], "^zz"), Invalid, "s"),
    ("input-malformed", _set(["s", "input", 0], "a:x:y"), Invalid, "s"),
    ("input-not-a-string", _set(["s", "input", 0], 3), DataLoss, "s"),
    ("inputs-not-a-list", _set(["s", "input"], "a"), DataLoss, "s"),
    ("back-edge-to-missing-output", _back_edge_to(":3"), Invalid, "while/Merge"),
    ("back-edge-to-missing-node", _set(["$merge", "input", 1], "nope"), Invalid,
     "while/Merge"),
    ("name-with-output-index", _set(["b", "name"], "b:0"), Invalid, "b:0"),
    ("name-with-markup", _set(["b", "name"], "<img src=x>"), Invalid, "<img src=x>"),
    ("name-empty", _set(["b", "name"], ""), Invalid, "''"),
    ("name-not-a-string", _set(["b", "name"], 7), DataLoss, "node #1"),
    ("op-unregistered", _set(["b", "op"], "NoSuchOp"), Invalid, "b"),
    ("op-missing", _pop(["b", "op"]), DataLoss, "b"),
    ("const-string-in-float", _set(["a", "attr", "value", "tensor", "values"], ["x", "y"]),
     DataLoss, "a"),
    ("const-float-in-int", _set(["i", "attr", "value", "tensor", "values"], [0.5]), DataLoss,
     "i"),
    ("const-bool-in-float", _set(["a", "attr", "value", "tensor", "values"], [True, False]),
     DataLoss, "a"),
    ("const-int-overflow", _set(["i", "attr", "value", "tensor", "values"], [2**40]),
     DataLoss, "i"),
    ("const-value-dtype-vs-attr", _set(["a", "attr", "dtype"], {"type": "int32"}), Invalid,
     "a"),
    ("const-too-few-values", _set(["a", "attr", "value", "tensor", "values"], [1.0]),
     DataLoss, "a"),
    ("const-shape-a-string", _set(["a", "attr", "value", "tensor", "shape"], "ab"), DataLoss,
     "a"),
    ("const-shape-negative", _set(["a", "attr", "value", "tensor", "shape"], [-2]), DataLoss,
     "a"),
    ("const-bad-base64", _set(["a", "attr", "value", "tensor"],
                              {"dtype": "float32", "shape": [2], "b64": "!!"}), DataLoss, "a"),
    ("const-short-base64", _set(["a", "attr", "value", "tensor"],
                                {"dtype": "float32", "shape": [2], "b64": "AAAA"}), DataLoss,
     "a"),
    ("addn-wrong-N", _set(["s", "attr", "N"], 3), Invalid, "s"),
    ("addn-zero-N", _set(["s", "attr", "N"], 0), Invalid, "s"),
    ("colocation-not-strings", _set(["s", "attr", "_class"], {"list": [5]}), Invalid, "s"),
    ("duplicate-node-name", _set(["b", "name"], "a"), Invalid, "a"),
    ("device-not-a-string", _set(["a", "device"], 3), DataLoss, "a"),
]


def _write(tmp_path, gd) -> str:
    path = tmp_path / "graph.json"
    path.write_text(json.dumps(gd))
    return str(path)


def _load_and_import(path):
    with tf.Graph().as_default():
        tf.import_graph_def(read_graph(path))


def test_the_undamaged_graph_imports(tmp_path):
    _load_and_import(_write(tmp_path, _graph_json()))


@pytest.mark.parametrize("mutate,error,node", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_defect_is_a_tf_error_naming_file_and_node(tmp_path, mutate, error, node):
    gd = copy.deepcopy(_graph_json())
    mutate(gd)
    path = _write(tmp_path, gd)
    with pytest.raises(error) as info:
        _load_and_import(path)
    message = str(info.value)
    assert path in message
    assert node in message


def test_import_errors_are_value_errors_as_in_tf():
    gd = _graph_json()
    _node(gd, "s")["attr"]["N"] = 3
    with pytest.raises(ValueError, match="attr 'N' is 3"):
        tf.import_graph_def(gd)
    assert issubclass(GraphDefImportError, tf.errors.InvalidArgumentError)


@pytest.mark.parametrize("text", [b"\xff\xfe{}", b"{not json", b"[" * 100_000 + b"]" * 100_000,
                                  b'{"format": "dflab.graph", "version": 1, "node": 5}',
                                  b'{"format": "dflab.graph", "version": 2, "node": []}',
                                  b"[]"],
                         ids=["not-utf8", "not-json", "deep-nesting", "nodes-not-a-list",
                              "wrong-version", "not-an-object"])
def test_unreadable_files_are_data_loss_naming_the_file(tmp_path, text):
    path = tmp_path / "graph.json"
    path.write_bytes(text)
    with pytest.raises(tf.errors.DataLossError, match="graph.json"):
        read_graph(str(path))


def test_deeply_nested_attribute_is_data_loss():
    value = 0
    for _ in range(200):
        value = {"list": [value]}
    gd = _graph_json()
    _node(gd, "a")["attr"]["extra"] = value
    with pytest.raises(tf.errors.DataLossError, match="nested more than"):
        graph_def_from_json(json.dumps(gd), source="deep.json")


def test_missing_graph_file_is_not_found(tmp_path):
    with pytest.raises(tf.errors.NotFoundError, match="nope.json"):
        read_graph(str(tmp_path / "nope.json"))


def test_names_the_api_makes_round_trip():
    with tf.Graph().as_default() as g:
        with tf.name_scope("_private"), tf.name_scope("-dash"):
            tf.constant(1.0, name="c.1")
        gd = g.as_graph_def()
    with tf.Graph().as_default() as g2:
        tf.import_graph_def(gd, name="")
        assert g2.get_operation_by_name("_private/-dash/c.1").type == "Const"
