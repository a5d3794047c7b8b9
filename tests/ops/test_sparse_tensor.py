"""``tf.SparseTensor`` in sessions: fetched as a ``SparseTensorValue`` (alone, nested, by
``eval``), fed from a value or a triple (``run``, ``make_callable``, ``partial_run``), the
composite's static facts, and the errors TF raises (numbers are checked against TF in
tests/fixtures/tf_api/cases_sparse.py)."""

from __future__ import annotations

import collections

import numpy as np
import pytest

import dflab as tf
from dflab.framework import errors

IDX = np.array([[0, 1], [1, 0], [2, 3]], np.int64)


@pytest.fixture
def graph():
    with tf.Graph().as_default() as g:
        yield g


def _value(values=(1.0, 2.0, 3.0), shape=(3, 4)):
    return tf.SparseTensorValue(IDX, np.array(values, np.float32), np.array(shape, np.int64))


def test_static_facts(graph):
    st = tf.SparseTensor(IDX, [1.0, 2.0, 3.0], [3, 4])
    assert st.dtype == tf.float32 and st.indices.dtype == tf.int64
    assert st.dense_shape.dtype == tf.int64
    assert st.shape.as_list() == [3, 4] and st.get_shape().as_list() == [3, 4]
    assert st.op is st.values.op and st.graph is graph
    assert tf.SparseTensor.from_value(st) is st
    assert "SparseTensor(indices=" in repr(st)
    dense = tf.sparse.to_dense(st)
    assert dense.op in st.consumers()
    with pytest.raises(ValueError):  # 3 values for 2 indices
        tf.SparseTensor([[0, 0], [1, 1]], [1.0, 2.0, 3.0], [2, 2])
    with pytest.raises(ValueError):  # rank-3 indices for a rank-2 shape
        tf.SparseTensor([[0, 0, 0]], [1.0], [2, 2])
    with pytest.raises(TypeError):  # not a tensor: TF refuses the conversion too
        tf.convert_to_tensor(st)
    with pytest.raises(TypeError):
        tf.SparseTensor.from_value(np.zeros(3))


def test_fetch_value_nested_and_eval(graph):
    st = tf.SparseTensor(IDX, [1.0, 2.0, 3.0], [3, 4])
    pair = collections.namedtuple("pair", "a b")
    with tf.Session() as sess:
        v = sess.run(st)
        assert isinstance(v, tf.SparseTensorValue)
        np.testing.assert_array_equal(v.indices, IDX)
        np.testing.assert_array_equal(v.values, np.float32([1, 2, 3]))
        np.testing.assert_array_equal(v.dense_shape, [3, 4])
        out = sess.run({"x": [st, (st.values, pair(st, st.dense_shape))]})
        inner = out["x"][1]
        assert isinstance(out["x"][0], tf.SparseTensorValue)
        assert isinstance(inner[1], pair) and isinstance(inner[1].a, tf.SparseTensorValue)
        np.testing.assert_array_equal(inner[0], np.float32([1, 2, 3]))
        e = st.eval()
        np.testing.assert_array_equal(e.values, v.values)
    with pytest.raises(ValueError, match="No default session"):
        st.eval()


def test_feed_placeholder_value_and_triple(graph):
    sp = tf.sparse_placeholder(tf.float32, name="sp")
    assert sp.shape.ndims is None
    total = tf.sparse.reduce_sum(sp)
    dense = tf.sparse.to_dense(sp)
    with tf.Session() as sess:
        assert sess.run(total, {sp: _value()}) == 6.0
        got = sess.run(dense, {sp: (IDX, [4.0, 5.0, 6.0], [3, 5])})
        want = np.zeros([3, 5], np.float32)
        want[tuple(IDX.T)] = [4, 5, 6]
        np.testing.assert_array_equal(got, want)
        # A fed SparseTensor fetched back is the fed value.
        back = sess.run(sp, {sp: _value((7.0, 8.0, 9.0))})
        np.testing.assert_array_equal(back.values, np.float32([7, 8, 9]))


def test_placeholder_shape_default_and_names(graph):
    sp = tf.sparse_placeholder(tf.int32, shape=[None, 4], name="p")
    assert sp.shape.as_list() == [None, 4]
    assert sp.indices.name == "p/indices:0" and sp.values.name == "p/values:0"
    assert sp.dense_shape.op.type == "PlaceholderWithDefault"
    with tf.Session() as sess:
        # The dense shape may be left out: its default has -1 for the unknown dimension.
        v = sess.run(sp.dense_shape, {sp.indices: IDX, sp.values: [1, 2, 3]})
        np.testing.assert_array_equal(v, [-1, 4])


def test_feed_sparse_tensor_built_from_constants(graph):
    st = tf.SparseTensor(IDX, [1.0, 2.0, 3.0], [3, 4])
    with tf.Session() as sess:
        got = sess.run(tf.sparse.reduce_sum(st), {st: _value((1.0, 1.0, 1.0))})
    assert got == 3.0


def test_feed_errors(graph):
    sp = tf.sparse_placeholder(tf.float32)
    with tf.Session() as sess:
        with pytest.raises(TypeError, match="SparseTensorValue"):
            sess.run(sp.values, {sp: 5.0})
        with pytest.raises(TypeError):
            sess.run(sp.values, {sp: (IDX, [1.0])})
        with pytest.raises(TypeError):
            sess.run(sp.values, {sp: tf.SparseTensor(IDX, [1.0, 2.0, 3.0], [3, 4])})
        with pytest.raises(ValueError, match="Cannot feed value of shape"):
            sess.run(sp.values, {sp: (IDX[0], [1.0], [3, 4])})


def test_make_callable_and_partial_run(graph):
    sp = tf.sparse_placeholder(tf.float32)
    total = tf.sparse_reduce_sum(sp)
    with tf.Session() as sess:
        run = sess.make_callable([total, sp], feed_list=[sp])
        s, back = run(_value())
        assert s == 6.0 and isinstance(back, tf.SparseTensorValue)
        with pytest.raises(ValueError, match="Expected 1 feeds"):
            run()
        h = sess.partial_run_setup([total], [sp])
        assert sess.partial_run(h, total, {sp: _value((1.0, 1.0, 1.0))}) == 3.0


def test_run_time_errors_name_the_op(graph):
    st = tf.SparseTensor([[1, 0], [0, 1]], [1.0, 2.0], [2, 2])
    with tf.Session() as sess:
        with pytest.raises(errors.InvalidArgumentError, match="out of order"):
            sess.run(tf.sparse.to_dense(st))
        a = tf.sparse_placeholder(tf.float32)
        with pytest.raises(errors.InvalidArgumentError, match="SparseAdd"):
            sess.run(tf.sparse.add(tf.sparse.reorder(st), a).values,
                     {a: (IDX, [1.0, 2.0, 3.0], [3, 4])})
        with pytest.raises(errors.InvalidArgumentError, match="SparseReshape"):
            sess.run(tf.sparse.reshape(a, [5, -1]).indices,
                     {a: (IDX, [1.0, 2.0, 3.0], [3, 4])})


def test_convert_to_tensor_or_sparse_tensor(graph):
    v = _value()
    st = tf.convert_to_tensor_or_sparse_tensor(v)
    assert isinstance(st, tf.SparseTensor)
    assert tf.convert_to_tensor_or_sparse_tensor(st) is st
    t = tf.convert_to_tensor_or_sparse_tensor([1.0, 2.0])
    assert isinstance(t, tf.Tensor)
    with pytest.raises(RuntimeError, match="Sparse dtype mismatch"):
        tf.convert_to_tensor_or_sparse_tensor(st, dtype=tf.int32)
    # The ops take a SparseTensorValue directly.
    with tf.Session() as sess:
        np.testing.assert_array_equal(sess.run(tf.sparse.to_dense(v))[2, 3], 3.0)


def test_gradient_through_sparse_matmul_and_reduce(graph):
    values = tf.constant([1.0, 2.0, 3.0], tf.float64)
    b = tf.constant(np.arange(8.0).reshape(4, 2))
    st = tf.SparseTensor(IDX, values, [3, 4])
    loss = tf.reduce_sum(tf.sparse.matmul(st, b)) + tf.sparse.reduce_sum(st)
    gv, gb = tf.gradients(loss, [values, b])
    with tf.Session() as sess:
        gv, gb = sess.run([gv, gb])
    dense = np.zeros([3, 4])
    dense[tuple(IDX.T)] = [1, 2, 3]
    np.testing.assert_allclose(gv, np.arange(8.0).reshape(4, 2).sum(1)[IDX[:, 1]] + 1)
    np.testing.assert_allclose(gb, dense.T @ np.ones([3, 2]))


def test_sparse_ops_run_where_tfs_do():
    from dflab.kernels.registry import has_kernel, is_host_only

    # TF registers these for GPUs too (their indices and shapes stay in host memory) ...
    for op in ("SparseTensorDenseMatMul", "SparseSegmentSum", "SparseSegmentMean",
               "SparseReorder", "SparseReshape", "SparseConcat", "SparseSlice", "SparseSplit",
               "SparseFillEmptyRows", "SparseToDense"):
        assert not is_host_only(op) and has_kernel(op, "CPU"), op
    # ... and these for CPUs only.
    for op in ("SparseReduceSum", "SparseAdd", "SparseSoftmax", "SparseTensorDenseAdd",
               "SparseSparseMaximum", "SetSize", "EditDistance", "SerializeSparse"):
        assert is_host_only(op), op


def test_set_ops_check_the_sets_positions_at_run_time(graph):
    a = tf.sparse_placeholder(tf.int64)
    out = tf.sets.set_union(a, tf.constant([[1, 2]], tf.int64))
    with tf.Session() as sess:
        got = sess.run(out, {a: ([[0, 0], [0, 1]], [5, 1], [1, 2])})
        np.testing.assert_array_equal(got.values, [1, 2, 5])
        with pytest.raises(errors.InvalidArgumentError, match="Shapes mismatch"):
            sess.run(out, {a: ([[0, 0]], [5], [2, 2])})


def test_string_split_has_no_ragged_result(graph):
    with pytest.raises(NotImplementedError, match="RaggedTensor"):
        tf.strings.split(["a b"], result_type="RaggedTensor")
    with pytest.raises(ValueError, match="result_type"):
        tf.string_split(["a b"], result_type="Dense")


def test_namespaces_name_the_same_functions():
    assert tf.sparse.to_dense is tf.sparse_tensor_to_dense
    assert tf.sparse.matmul is tf.sparse.sparse_dense_matmul is tf.sparse_tensor_dense_matmul
    assert tf.sparse.SparseTensor is tf.SparseTensor
    assert tf.sparse.SparseConditionalAccumulator is tf.SparseConditionalAccumulator
    assert tf.io.VarLenFeature is tf.VarLenFeature and tf.io.SparseFeature is tf.SparseFeature
    assert tf.sets.union is tf.sets.set_union
    import dflab.sparse as sparse_module

    assert sparse_module.reorder is tf.sparse_reorder


def test_ops_that_want_a_tensor_refuse_a_sparse_tensor(graph):
    # A SparseTensor is not a Tensor: ops that want one refuse it, as TF's.
    st = tf.SparseTensor(IDX, [1.0, 2.0, 3.0], [3, 4])
    with pytest.raises(TypeError):
        tf.reduce_sum(st)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "uint8", "bool",
                                   "complex64", "float16", "string"])
def test_tensor_content_protos_round_trip(dtype):
    # Sparse serialization writes every tensor as TF's AsProtoTensorContent does (strings as
    # a string list inside tensor_content); make_ndarray reads it back.
    from dflab.lib import tensor_proto

    if dtype == "string":
        value = np.empty((2, 2), dtype=object)
        value[:] = [[b"", b"ab"], [b"\x00\xff", b"x" * 200]]
    else:
        value = (np.arange(6).reshape(2, 3) % 2).astype(dtype)
    proto = tensor_proto.as_proto_tensor_content(value, dtype)
    assert proto.tensor_content and not proto.string_val
    back = tensor_proto.make_ndarray(tensor_proto.TensorProto.FromString(
        proto.SerializeToString()))
    assert back.shape == value.shape and back.tolist() == value.tolist()
    truncated = tensor_proto.as_proto_tensor_content(value, dtype)
    truncated.tensor_content = truncated.tensor_content[:3]
    with pytest.raises((ValueError, IndexError)):
        tensor_proto.make_ndarray(truncated)


def test_sparse_tensors_pass_a_string_queue(graph):
    sp = tf.sparse_placeholder(tf.float32)
    queue = tf.FIFOQueue(4, tf.string, shapes=[[3]])
    enqueue = queue.enqueue_many(tf.serialize_many_sparse(sp))
    batch = tf.deserialize_many_sparse(queue.dequeue_many(2), tf.float32)
    with tf.Session() as sess:
        sess.run(enqueue, {sp: ([[0, 1], [1, 0], [1, 2]], [1.0, 2.0, 3.0], [2, 3])})
        got = sess.run(batch)
    assert got.indices.tolist() == [[0, 1], [1, 0], [1, 2]]
    np.testing.assert_array_equal(got.values, np.float32([1, 2, 3]))
    assert got.dense_shape.tolist() == [2, 3]


def test_deserializing_bytes_that_are_no_tensor_proto_names_the_op(graph):
    rows = tf.constant([[b"junk", b"\x08", b""]])
    with tf.Session() as sess:
        with pytest.raises(tf.errors.InvalidArgumentError, match="Could not parse"):
            sess.run(tf.deserialize_many_sparse(rows, tf.float32, name="from_junk"))
