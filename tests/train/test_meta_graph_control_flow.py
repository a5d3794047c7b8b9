"""Gradients on a graph read back with ``import_meta_graph``: the meta graph carries the cond
and while contexts (TF's ``cond_context``/``while_context`` collections), so a model with
``tf.cond``, ``tf.while_loop`` or ``dynamic_rnn`` can be differentiated and trained further
after it is imported, as under TF 1.x."""

import json

import numpy as np
import pytest

import dflab as tf

X = np.array([1.0, -2.0, 3.0], np.float32)


@pytest.fixture(autouse=True)
def _fresh_graph():
    tf.reset_default_graph()
    yield
    tf.reset_default_graph()


def _cond_in_loop_model():
    """A loop whose body holds a cond, then a cond on the loop's result."""
    x = tf.placeholder(tf.float32, [3], name="x")
    w = tf.get_variable("w", initializer=tf.constant([1.0, 2.0, 3.0]))

    def body(i, a):
        return i + 1, tf.cond(a[0] > 0, lambda: a * w, lambda: a + w)

    _, y = tf.while_loop(lambda i, a: i < 3, body, [tf.constant(0), x])
    loss = tf.reduce_sum(tf.cond(tf.reduce_sum(y) > 0, lambda: y * y, lambda: -y),
                         name="loss")
    tf.add_to_collection("loss", loss)
    return x, w, loss


def _save(tmp_path, build):
    """Build a model, return its gradients' values and the checkpoint prefix it saved."""
    with tf.Graph().as_default():
        x, w, loss = build()
        grads = tf.gradients(loss, [x, w])
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            values = sess.run(grads, {x: X})
            prefix = tf.train.Saver().save(sess, str(tmp_path / "model"))
    return values, prefix


def _restored_gradients(meta, prefix, scope=None):
    saver = tf.train.import_meta_graph(meta, import_scope=scope)
    g = tf.get_default_graph()
    at = f"{scope}/" if scope else ""
    loss = tf.get_collection("loss")[0]
    x = g.get_tensor_by_name(f"{at}x:0")
    w = next(v for v in tf.global_variables() if v.op.name == f"{at}w")
    grads = tf.gradients(loss, [x, w])
    return saver, x, w, loss, grads


def test_a_loop_and_conds_are_differentiated_after_import(tmp_path):
    expected, prefix = _save(tmp_path, _cond_in_loop_model)
    with tf.Graph().as_default():
        saver, x, w, loss, grads = _restored_gradients(prefix + ".meta", prefix)
        assert all(g is not None for g in grads)
        # The saved graph held the loop and its backward loop (and the gradient just built,
        # one more), and two conds of two branches.
        assert sorted(type(c).__name__ for c in tf.get_collection("while_context")) == \
            ["GradWhileContext", "GradWhileContext", "WhileContext"]
        assert len(tf.get_collection("cond_context")) == 4
        step = tf.train.GradientDescentOptimizer(0.01).minimize(loss, var_list=[w])
        with tf.Session() as sess:
            saver.restore(sess, prefix)
            got = sess.run(grads, {x: X})
            w0 = sess.run(w)
            sess.run(step, {x: X})
            w1 = sess.run(w)
    for a, b in zip(got, expected):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    np.testing.assert_allclose(w1, w0 - 0.01 * expected[1], rtol=1e-6)


def _rnn_model():
    x = tf.placeholder(tf.float32, [3], name="x")
    inputs = tf.reshape(tf.tile(x, [8]), [2, 4, 3])  # batch 2, 4 steps, 3 features
    cell = tf.nn.rnn_cell.BasicRNNCell(5)
    outputs, _ = tf.nn.dynamic_rnn(cell, inputs, dtype=tf.float32)
    with tf.variable_scope("head"):
        w = tf.get_variable("w", initializer=tf.constant(np.linspace(-1, 1, 5, dtype=np.float32)))
    loss = tf.reduce_sum(tf.tensordot(outputs, w, 1) ** 2, name="loss")
    tf.add_to_collection("loss", loss)
    tf.identity(w, name="w")  # (so that ``w`` names a variable-like tensor at the top)
    return x, w, loss


def test_dynamic_rnn_trains_on_after_import_under_a_scope(tmp_path):
    expected, prefix = _save(tmp_path, _rnn_model)
    with tf.Graph().as_default():
        saver = tf.train.import_meta_graph(prefix + ".meta", import_scope="restored")
        g = tf.get_default_graph()
        loss = tf.get_collection("loss")[0]
        x = g.get_tensor_by_name("restored/x:0")
        w = next(v for v in tf.global_variables() if v.op.name == "restored/head/w")
        kernel = next(v for v in tf.trainable_variables() if "kernel" in v.op.name)
        grads = tf.gradients(loss, [x, w, kernel])
        assert all(gr is not None for gr in grads)
        with tf.Session() as sess:
            saver.restore(sess, prefix)
            got = sess.run(grads[:2], {x: X})
            assert np.abs(sess.run(grads[2], {x: X})).sum() > 0
    for a, b in zip(got, expected):
        np.testing.assert_allclose(a, b, rtol=1e-5)


def test_an_imported_graph_exports_its_contexts_again(tmp_path):
    expected, prefix = _save(tmp_path, _cond_in_loop_model)
    again = str(tmp_path / "again.meta")
    with tf.Graph().as_default():
        tf.train.import_meta_graph(prefix + ".meta")
        tf.train.export_meta_graph(again)
    with tf.Graph().as_default():
        saver, x, w, loss, grads = _restored_gradients(again, prefix)
        with tf.Session() as sess:
            saver.restore(sess, prefix)
            got = sess.run(grads, {x: X})
    for a, b in zip(got, expected):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_a_loop_whose_body_failed_is_left_out(tmp_path):
    meta = str(tmp_path / "m.meta")
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [3], name="x")
        with pytest.raises(ValueError, match="shape"):
            tf.while_loop(lambda v: tf.reduce_sum(v) < 10, lambda v: tf.concat([v, v], 0), [x])
        y = tf.while_loop(lambda v: tf.reduce_sum(v) < 10, lambda v: v * 2.0, [x])
        tf.add_to_collection("y", y)
        tf.train.export_meta_graph(meta)
    with tf.Graph().as_default():
        tf.train.import_meta_graph(meta)
        assert len(tf.get_collection("while_context")) == 1
        y = tf.get_collection("y")[0]
        x = tf.get_default_graph().get_tensor_by_name("x:0")
        (dx,) = tf.gradients(y, x)
        with tf.Session() as sess:
            np.testing.assert_allclose(sess.run(dx, {x: [1.0, 1.0, 1.0]}), [4.0, 4.0, 4.0])


def test_a_damaged_context_def_names_the_item(tmp_path):
    _, prefix = _save(tmp_path, _cond_in_loop_model)
    data = json.loads(open(prefix + ".meta").read())
    data["collection_def"]["while_context"][0]["while_context"]["exits"] = ["nowhere:0"]
    bad = tmp_path / "bad.meta"
    bad.write_text(json.dumps(data))
    with tf.Graph().as_default():
        with pytest.raises(tf.errors.NotFoundError,
                           match=r"collection 'while_context' item #0.*'nowhere:0'"):
            tf.train.import_meta_graph(str(bad))
    data["collection_def"]["while_context"][0]["while_context"]["exits"] = 3
    bad.write_text(json.dumps(data))
    with tf.Graph().as_default():
        with pytest.raises(tf.errors.DataLossError, match="item #0.*'exits'"):
            tf.train.import_meta_graph(str(bad))


def test_a_loop_keeps_its_shape_invariants_after_import(tmp_path):
    """The meta graph records static shapes: a loop variable that grows keeps its ``[None]``
    invariant (it had taken its initial value's shape, and its gradient failed to build)."""
    meta = str(tmp_path / "m.meta")
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [2], name="x")
        _, out = tf.while_loop(
            lambda i, v: i < 3, lambda i, v: (i + 1, tf.concat([v, v * 2.0], 0)), [0, x],
            shape_invariants=[tf.TensorShape([]), tf.TensorShape([None])])
        tf.add_to_collection("loss", tf.reduce_sum(out * out))
        tf.train.export_meta_graph(meta)
    with tf.Graph().as_default():
        tf.train.import_meta_graph(meta)
        loss = tf.get_collection("loss")[0]
        x = tf.get_default_graph().get_tensor_by_name("x:0")
        assert loss.op.inputs[0].shape.as_list() == [None]
        (dx,) = tf.gradients(loss, x)
        with tf.Session() as sess:
            got_loss, got_dx = sess.run([loss, dx], {x: [1.0, 2.0]})
    # out = [x, 2x, 2x, 4x, 2x, 4x, 4x, 8x]: the sum of squares is 125 * |x|^2.
    assert got_loss == 625.0
    np.testing.assert_allclose(got_dx, [250.0, 500.0])


def test_a_pruned_graph_def_exports_without_the_contexts_it_lacks(tmp_path):
    meta = str(tmp_path / "m.meta")
    with tf.Graph().as_default() as g:
        x = tf.placeholder(tf.float32, [], name="x")
        tf.while_loop(lambda v: v < 10.0, lambda v: v * 2.0, [x])
        tf.identity(x * 3.0, name="keep")
        pruned = tf.graph_util.extract_sub_graph(g.as_graph_def(), ["keep"])
        tf.train.export_meta_graph(meta, graph_def=pruned)
    with tf.Graph().as_default():
        tf.train.import_meta_graph(meta)
        assert tf.get_collection("while_context") == []
        with tf.Session() as sess:
            assert sess.run("keep:0", {"x:0": 2.0}) == 6.0
