"""SparseTensors through tf.train.batch and shuffle_batch: each element passes the queue
serialized and the batch comes out as one SparseTensor with the batch dimension in front (the
other dimensions the largest of the batch's), as TF's batchers give it; the classic pipeline of
VarLenFeature parsing then batching."""

import numpy as np
import pytest

import dflab as tf

TIMEOUT = tf.RunOptions(timeout_in_ms=5000)
ROWS = [[1, 0, 0], [2, 3, 0], [0, 0, 0], [4, 5, 6]]


@pytest.fixture(autouse=True)
def _fresh_graph():
    tf.reset_default_graph()
    yield
    tf.reset_default_graph()


def _element():
    rows = tf.constant(ROWS, tf.int64)
    i = tf.train.range_input_producer(4, shuffle=False).dequeue()
    return i, tf.sparse.reshape(tf.sparse.from_dense(tf.gather(rows, i)[None, :]), [-1])


def _run(fetches, steps):
    with tf.Session() as sess:
        coord = tf.train.Coordinator()
        threads = tf.train.start_queue_runners(sess, coord)
        out = [sess.run(fetches, options=TIMEOUT) for _ in range(steps)]
        coord.request_stop()
        coord.join(threads)
    return out


def test_batch_of_sparse_elements_is_one_sparse_tensor():
    i, st = _element()
    b = tf.train.batch({"s": st, "i": i}, batch_size=2)
    assert isinstance(b["s"], tf.SparseTensor)
    assert b["s"].indices.shape.as_list() == [None, 2]
    first, second = _run(b, 2)
    assert first["s"].indices.tolist() == [[0, 0], [1, 0], [1, 1]]
    assert first["s"].values.tolist() == [1, 2, 3]
    assert first["s"].dense_shape.tolist() == [2, 3]  # what TF gives for the same pipeline
    assert second["s"].indices.tolist() == [[1, 0], [1, 1], [1, 2]]
    assert second["s"].dense_shape.tolist() == [2, 3]


def test_enqueue_many_splits_the_first_dimension():
    many = tf.train.batch({"m": tf.sparse.from_dense(tf.constant(ROWS, tf.int64))},
                          batch_size=3, enqueue_many=True)
    (got,) = _run(many, 1)
    dense = np.zeros(got["m"].dense_shape, np.int64)
    dense[tuple(got["m"].indices.T)] = got["m"].values
    np.testing.assert_array_equal(dense, np.array(ROWS[:3]))


def test_shuffle_batch_keeps_each_element_whole():
    i, st = _element()
    b = tf.train.shuffle_batch([i, st], batch_size=4, capacity=8, min_after_dequeue=4, seed=3)
    (got,) = _run(b, 1)
    ids, sp = got
    dense = np.zeros(sp.dense_shape, np.int64)
    dense[tuple(sp.indices.T)] = sp.values
    for row, k in zip(dense, ids):
        want = [v for v in ROWS[k] if v]
        assert row[:len(want)].tolist() == want and not row[len(want):].any()


def test_var_len_features_batched():
    ex = [tf.train.Example(features=tf.train.Features(feature={"t": tf.train.Feature(
        int64_list=tf.train.Int64List(value=v))})).SerializeToString() for v in ([7], [8, 9])]
    record = tf.train.input_producer(tf.constant(ex), shuffle=False).dequeue()
    parsed = tf.parse_single_example(record, {"t": tf.VarLenFeature(tf.int64)})
    b = tf.train.batch(parsed, batch_size=2)
    (got,) = _run(b, 1)
    assert got["t"].indices.tolist() == [[0, 0], [1, 0], [1, 1]]
    assert got["t"].values.tolist() == [7, 8, 9]
    assert got["t"].dense_shape.tolist() == [2, 2]
