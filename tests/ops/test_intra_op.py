"""Intra-op parallelism: split host kernels give the unsplit results, and a session's
``intra_op_parallelism_threads`` turns the splitting on while it is open."""

import threading
import weakref
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import dflab as tf
from dflab.kernels import conv_kernels, intra_op


@pytest.fixture
def three_threads(monkeypatch):
    monkeypatch.setattr(intra_op, "MIN_WORK", 1000)  # small test arrays are split too
    monkeypatch.setattr(intra_op, "MIN_PRODUCT_WORK", 1000)
    before = intra_op.set_threads(3, split_products=True)
    yield
    intra_op.set_threads(*before)


def test_chunks_cover_the_range_once(three_threads):
    bounds = intra_op.chunks(np, 10, intra_op.MIN_WORK)
    assert bounds == [(0, 4), (4, 7), (7, 10)]
    assert intra_op.chunks(np, 2, intra_op.MIN_WORK) == [(0, 1), (1, 2)]
    assert intra_op.chunks(np, 10, intra_op.MIN_WORK - 1) == [(0, 10)]  # too little work
    assert intra_op.chunks(object(), 10, intra_op.MIN_WORK) == [(0, 10)]  # not NumPy


def test_run_chunks_raises_the_error_after_every_chunk_ran(three_threads):
    ran = []

    def fn(lo, hi):
        ran.append(lo)
        if lo == 4:
            raise ValueError("chunk 4")
        return lo

    with pytest.raises(ValueError, match="chunk 4"):
        intra_op.run_chunks(fn, [(0, 4), (4, 7), (7, 10)])
    assert sorted(ran) == [0, 4, 7]
    assert intra_op.run_chunks(lambda lo, hi: hi - lo, [(0, 4), (4, 7)]) == [4, 3]


def test_run_chunks_from_many_threads_at_once_gives_each_its_own_results(three_threads):
    # Eight callers share two pool threads: a chunk no idle thread is left for runs on its
    # caller, and every caller gets its chunks' results in order.
    def call(i):
        bounds = [(k, k + 1) for k in range(5)]
        return intra_op.run_chunks(lambda lo, hi: (i, lo, threading.current_thread().name),
                                   bounds)

    with ThreadPoolExecutor(8) as callers:
        results = list(callers.map(call, range(64)))
    for i, got in enumerate(results):
        assert [(j, lo) for j, lo, _ in got] == [(i, k) for k in range(5)]
    names = [name for got in results for _, _, name in got]
    assert "dflab-intra-op" in names  # the pool's threads ran chunks
    assert any(name != "dflab-intra-op" for name in names)  # and callers ran the rest
    assert sorted(intra_op._idle, key=id) == sorted(intra_op._workers, key=id)  # all back


@pytest.mark.parametrize("shape, by_rows", [((20, 400, 800), False), ((400, 20, 800), True),
                                            ((192, 10, 900), True), ((191, 10, 900), False),
                                            ((63, 10, 40), True)])
def test_split_matmul_takes_rows_unless_the_output_has_few(three_threads, monkeypatch, shape,
                                                          by_rows):
    # three threads: rows when each chunk gets at least 64 of them, or m >= n
    m, k, n = shape
    seen = []
    real_chunks = intra_op.chunks
    monkeypatch.setattr(intra_op, "chunks", lambda xp, size, work, products=False:
                        seen.append(size) or real_chunks(xp, size, work, products))
    a, b = np.ones((m, k), np.float32), np.ones((k, n), np.float32)
    np.testing.assert_array_equal(intra_op.matmul(a, b), np.full((m, n), k, np.float32))
    assert seen == [m if by_rows else n]


def test_split_matmul_equals_numpy(three_threads):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((301, 200)), rng.standard_normal((200, 70))
    np.testing.assert_allclose(intra_op.matmul(a, b), a @ b, rtol=1e-12)
    np.testing.assert_allclose(intra_op.matmul(a.T.copy().T, b), a @ b, rtol=1e-12)
    with pytest.raises(ValueError):
        intra_op.matmul(a, a)


@pytest.mark.parametrize("shape", [(7, 50, 301), (301, 50, 7), (20, 30, 20)])
@pytest.mark.parametrize("order", ["plain", "transposed_a", "transposed_b"])
def test_split_matmul_by_rows_or_columns_equals_the_product(three_threads, shape, order):
    # a short, wide product is split by columns, a tall one by rows (BLAS blocks the pieces
    # differently from the whole, so the last bits may differ)
    m, k, n = shape
    rng = np.random.default_rng(m)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    if order == "transposed_a":
        a = a.T.copy().T
    elif order == "transposed_b":
        b = b.T.copy().T
    got = intra_op.matmul(a, b)
    assert got.shape == (m, n) and got.flags.c_contiguous
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


def _conv_net_values():
    """Forward and both gradients of a conv layer big enough to be split over its batch, on
    the host (where intra-op threads apply, also when a GPU is present)."""
    rng = np.random.default_rng(1)
    x_val = rng.standard_normal((6, 12, 12, 8)).astype(np.float32)
    f_val = rng.standard_normal((3, 3, 8, 16)).astype(np.float32)
    graph = tf.Graph()
    with graph.as_default(), tf.device("/cpu:0"):
        x, f = tf.constant(x_val), tf.constant(f_val)
        y = tf.nn.conv2d(x, f, [1, 1, 1, 1], "SAME")
        z = tf.nn.conv2d(x, f, [1, 2, 2, 1], "SAME")
        loss = tf.reduce_sum(y * y) + tf.reduce_sum(tf.sin(z))
        w = tf.constant(rng.standard_normal((300, 64)).astype(np.float32))
        m = tf.matmul(w, tf.reshape(tf.transpose(f), [64, 18]), transpose_b=False)
        fetches = [y, z, m] + tf.gradients(loss, [x, f])
    return graph, fetches


def _blas_threads():
    from threadpoolctl import threadpool_info
    return {i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}


@pytest.mark.parametrize("split_products", [False, True])
def test_session_with_intra_op_threads_computes_the_same_values(monkeypatch, split_products):
    monkeypatch.setattr(intra_op, "MIN_WORK", 1)  # split even these small ops
    monkeypatch.setattr(intra_op, "MIN_PRODUCT_WORK", 1)
    graph, fetches = _conv_net_values()
    with tf.Session(graph=graph) as sess:
        want = sess.run(fetches)
    config = tf.ConfigProto(intra_op_parallelism_threads=3,
                            dflab={"intra_op_split_products": split_products})
    before = intra_op.threads(), intra_op.splits_products()
    split = {True: [], False: []}  # bounds per call, products or not
    real_chunks = intra_op.chunks

    def chunks(xp, n, work, products=False):
        bounds = real_chunks(xp, n, work, products)
        split[products].append(len(bounds))
        return bounds

    monkeypatch.setattr(intra_op, "chunks", chunks)
    with tf.Session(graph=graph, config=config) as sess:
        assert intra_op.threads() == 3
        assert intra_op.splits_products() is split_products
        # Products on BLAS's three threads, or split in Python with BLAS on one per call.
        assert _blas_threads() == ({1} if split_products else {3})
        got = sess.run(fetches)
    assert (intra_op.threads(), intra_op.splits_products()) == before
    # The convolutions (products) are chunked only when products are split; the elementwise
    # ops (y * y, sin) always are.
    assert (max(split[True]) > 1) is split_products
    assert max(split[False]) == 3
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)


def test_convolutions_in_blocks_of_one_image_compute_the_same_values(monkeypatch):
    graph, fetches = _conv_net_values()
    with tf.Session(graph=graph) as sess:
        want = sess.run(fetches)
    monkeypatch.setattr(conv_kernels, "_BLOCK_BYTES", 1)  # one image per im2col block
    with tf.Session(graph=graph) as sess:
        got = sess.run(fetches)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("threads", [1, 3])
def test_max_pool_grad_in_blocks_and_chunks_is_unchanged(monkeypatch, threads):
    rng = np.random.default_rng(2)
    # ReLU-like input: many all-zero windows, whose gradient goes to their first cell
    x_val = np.maximum(rng.standard_normal((7, 6, 6, 3)), 0).astype(np.float32)
    graph = tf.Graph()
    with graph.as_default():
        x = tf.constant(x_val)
        y = tf.nn.max_pool(x, [1, 2, 2, 1], [1, 2, 2, 1], "SAME")
        z = tf.nn.max_pool(x, [1, 3, 3, 1], [1, 1, 1, 1], "SAME")  # overlapping windows
        grads = tf.gradients(tf.reduce_sum(y * y) + tf.reduce_sum(z), [x])
    with tf.Session(graph=graph) as sess:
        want = sess.run(grads)
    monkeypatch.setattr(conv_kernels, "_POOL_BLOCK_BYTES", 1)  # one image per block
    monkeypatch.setattr(intra_op, "MIN_WORK", 1)
    before = intra_op.set_threads(threads)
    try:
        with tf.Session(graph=graph) as sess:
            got = sess.run(grads)
    finally:
        intra_op.set_threads(*before)
    np.testing.assert_array_equal(got[0], want[0])


def test_big_elementwise_ops_split_among_threads_give_the_same_bits(monkeypatch):
    rng = np.random.default_rng(5)
    x_val = rng.standard_normal((96, 50, 40)).astype(np.float32)
    b_val = rng.standard_normal((50, 40)).astype(np.float32)
    graph = tf.Graph()
    with graph.as_default(), tf.device("/cpu:0"):  # the host: where intra-op threads apply
        x, b = tf.constant(x_val), tf.constant(b_val)
        y = tf.nn.relu(x + b) * tf.exp(x) - tf.maximum(x, 0.5) / (tf.abs(b) + 1.0)
        fetches = [y, tf.gradients(tf.reduce_sum(tf.nn.relu(x * b)), [x])[0], tf.equal(x, b)]
    with tf.Session(graph=graph) as sess:
        want = sess.run(fetches)
    calls = []
    real_run_chunks = intra_op.run_chunks
    monkeypatch.setattr(intra_op, "run_chunks",
                        lambda fn, bounds: calls.append(len(bounds)) or real_run_chunks(fn, bounds))
    monkeypatch.setattr(intra_op, "MIN_WORK", 1 << 10)
    config = tf.ConfigProto(intra_op_parallelism_threads=2)
    with tf.Session(graph=graph, config=config) as sess:
        got = sess.run(fetches)
    assert calls and all(n == 2 for n in calls)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


def test_elementwise_split_leaves_what_it_cannot_split_to_the_kernel():
    previous = intra_op.set_threads(2)
    try:
        add = intra_op.elementwise(np.add)
        big = np.ones((4, 1 << 20), np.float32)
        with pytest.raises(ValueError, match="broadcast"):  # NumPy's own error, unchanged
            add(big, np.ones((3, 1 << 20), np.float32))
        column = np.arange(1 << 21, dtype=np.float64).reshape(-1, 1)
        np.testing.assert_array_equal(add(column, big[0, :3]), column + big[0, :3])
        np.testing.assert_array_equal(add(big, 2), big + 2)
        assert add(big, 2).dtype == np.float32
    finally:
        intra_op.set_threads(*previous)


def test_add_n_of_many_terms_splits_where_two_terms_of_the_same_size_would_not(monkeypatch):
    rng = np.random.default_rng(6)
    terms = [rng.standard_normal((64, 40)).astype(np.float32) for _ in range(12)]
    graph = tf.Graph()
    with graph.as_default(), tf.device("/cpu:0"):
        many = tf.add_n([tf.constant(t) for t in terms])
        two = tf.add_n([tf.constant(t) for t in terms[:2]])
    want = terms[0] + terms[1]
    for t in terms[2:]:
        want = want + t  # left to right, as AddN adds
    calls = []
    real_run_chunks = intra_op.run_chunks
    monkeypatch.setattr(intra_op, "run_chunks",
                        lambda fn, bounds: calls.append(len(bounds)) or real_run_chunks(fn, bounds))
    # 64x40 elements are one pass's work below the threshold, eleven passes' above it.
    monkeypatch.setattr(intra_op, "MIN_WORK", 64 * 40 * intra_op.PASS_WORK * 4)
    config = tf.ConfigProto(intra_op_parallelism_threads=2)
    with tf.Session(graph=graph, config=config) as sess:
        got_two = sess.run(two)
        assert calls == []
        got_many = sess.run(many)
    assert calls == [2]
    np.testing.assert_array_equal(got_many, want)
    np.testing.assert_array_equal(got_two, terms[0] + terms[1])


def test_pool_threads_let_go_of_a_finished_chunks_arrays():
    # A pool thread that kept its last chunk's closure would keep the op's arrays alive (and
    # make a variable's array look held to the in-place optimizer update).
    previous = intra_op.set_threads(2)
    try:
        a = np.ones(1000)
        alive = weakref.ref(a)
        # the chunk holds the array itself (a default, not a cell ``del`` would empty)
        intra_op.run_chunks(lambda lo, hi, a=a: float(a[lo:hi].sum()), [(0, 500), (500, 1000)])
        del a
        assert alive() is None
    finally:
        intra_op.set_threads(*previous)
