"""tf.summary.FileWriter's meta graph event: after the graph it writes a MetaGraphDef holding
it, as TF's writer does; add_meta_graph takes TF's proto or dflab's meta graph."""

from __future__ import annotations

import glob
import json

import pytest
from tf_interop import requires_tf, run_tf

import dflab as tf

pytest.importorskip("tensorboard")
from tensorboard.compat.proto import (  # noqa: E402
    event_pb2,
    graph_pb2,
    meta_graph_pb2,
    variable_pb2,
)


def events(logdir) -> list:
    """The events of the file as written (an event file is a TFRecord file)."""
    (path,) = glob.glob(f"{logdir}/events.out.tfevents.*")
    return [event_pb2.Event.FromString(r) for r in tf.python_io.tf_record_iterator(path)]


def model():
    x = tf.placeholder(tf.float32, [None, 2], name="x")
    w = tf.Variable([[1.0], [2.0]], name="w")
    y = tf.matmul(x, w, name="y")
    train = tf.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_sum(y))
    saver = tf.train.Saver()
    return y, train, saver


def test_a_graph_is_followed_by_its_meta_graph_as_in_tf(tmp_path):
    model()
    with tf.summary.FileWriter(str(tmp_path), graph=tf.get_default_graph()):
        pass
    kinds = [e.WhichOneof("what") for e in events(tmp_path)]
    assert kinds == ["file_version", "graph_def", "meta_graph_def"]  # TF 2.21's order
    graph_event, meta_event = events(tmp_path)[1:]
    graph = graph_pb2.GraphDef.FromString(graph_event.graph_def)
    meta = meta_graph_pb2.MetaGraphDef.FromString(meta_event.meta_graph_def)
    assert meta.graph_def == graph
    ops = {op.type for op in tf.get_default_graph().get_operations()}
    assert [o.name for o in meta.meta_info_def.stripped_op_list.op] == sorted(ops)
    assert {n.name for n in graph.node} == {op.name for op in
                                            tf.get_default_graph().get_operations()}


def test_add_meta_graph_writes_saver_and_collections_as_tfs_protos(tmp_path):
    y, train, saver = model()
    tf.add_to_collection("outputs", y)
    tf.add_to_collection("rates", 0.5)
    with tf.summary.FileWriter(str(tmp_path)) as writer:
        writer.add_meta_graph(tf.train.export_meta_graph(saver_def=saver.as_saver_def()),
                              global_step=3)
        with pytest.raises(TypeError, match="meta_graph_def must be type MetaGraphDef"):
            writer.add_meta_graph({"graph_def": {}})
    (event,) = [e for e in events(tmp_path) if e.WhichOneof("what") == "meta_graph_def"]
    assert event.step == 3
    meta = meta_graph_pb2.MetaGraphDef.FromString(event.meta_graph_def)
    assert meta.saver_def.restore_op_name == saver.saver_def.restore_op_name
    assert meta.saver_def.filename_tensor_name == "save/Const:0"
    assert meta.saver_def.max_to_keep == 5
    assert list(meta.collection_def["outputs"].node_list.value) == [y.name]
    assert list(meta.collection_def["train_op"].node_list.value) == [train.name]
    assert list(meta.collection_def["rates"].float_list.value) == [0.5]
    (var,) = meta.collection_def["variables"].bytes_list.value
    var = variable_pb2.VariableDef.FromString(var)
    w = tf.global_variables()[0]
    assert (var.variable_name, var.initializer_name) == ("w:0", w.initializer.name)
    assert var.snapshot_name == w.to_proto()["snapshot_name"] and var.trainable


@requires_tf
def test_tf_reads_the_meta_graph_event(tmp_path):
    model()
    with tf.summary.FileWriter(str(tmp_path), graph=tf.get_default_graph()):
        pass
    (path,) = glob.glob(f"{tmp_path}/events.out.tfevents.*")
    out = run_tf(f"""
        from tensorflow.core.protobuf import meta_graph_pb2
        for e in tf.train.summary_iterator({path!r}):
            if e.HasField("meta_graph_def"):
                m = meta_graph_pb2.MetaGraphDef.FromString(e.meta_graph_def)
                print(json.dumps(sorted([n.name, n.op] for n in m.graph_def.node)))
    """)
    want = sorted([op.name, op.type] for op in tf.get_default_graph().get_operations())
    assert json.loads(out) == want


def test_summary_iterator_reads_the_events_back(tmp_path):
    model()
    with tf.summary.FileWriter(str(tmp_path), graph=tf.get_default_graph()) as writer:
        value = tf.summary.Summary.Value(tag="loss", simple_value=0.5)
        writer.add_summary(tf.summary.Summary(value=[value]), global_step=4)
    (path,) = glob.glob(f"{tmp_path}/events.out.tfevents.*")
    read = list(tf.train.summary_iterator(path))
    assert read == events(tmp_path)
    assert [e.WhichOneof("what") for e in read] == ["file_version", "graph_def",
                                                    "meta_graph_def", "summary"]
    assert read[-1].step == 4 and read[-1].summary.value[0].simple_value == 0.5
    missing = tf.train.summary_iterator(str(tmp_path / "nope"))  # opened on the first next
    with pytest.raises(tf.errors.NotFoundError):
        next(missing)
