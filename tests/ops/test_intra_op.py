"""Intra-op parallelism: split host kernels give the unsplit results, and a session's
``intra_op_parallelism_threads`` gives its kernels a pool of their own, which another session's
setting never changes."""

import os
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import dflab as tf
from dflab.kernels import conv_kernels, intra_op


@pytest.fixture
def three_threads(monkeypatch):
    """A pool of three threads, splitting products, that splits small test arrays too."""
    monkeypatch.setattr(intra_op, "MIN_WORK", 1000)
    monkeypatch.setattr(intra_op, "MIN_PRODUCT_WORK", 1000)
    pool = intra_op.IntraOpPool(3, split_products=True)
    yield pool
    pool.close()


def _pool_of(sess):
    """The intra-op pool a session's host kernels were bound with."""
    return sess.devices["CPU:0"].context.intra_op


def test_chunks_cover_the_range_once(three_threads):
    pool = three_threads
    bounds = pool.chunks(np, 10, intra_op.MIN_WORK)
    assert bounds == [(0, 4), (4, 7), (7, 10)]
    assert pool.chunks(np, 2, intra_op.MIN_WORK) == [(0, 1), (1, 2)]
    assert pool.chunks(np, 10, intra_op.MIN_WORK - 1) == [(0, 10)]  # too little work
    assert pool.chunks(object(), 10, intra_op.MIN_WORK) == [(0, 10)]  # not NumPy
    assert intra_op.SERIAL.chunks(np, 10, intra_op.MIN_WORK) == [(0, 10)]  # one thread


def test_run_chunks_raises_the_error_after_every_chunk_ran(three_threads):
    ran = []

    def fn(lo, hi):
        ran.append(lo)
        if lo == 4:
            raise ValueError("chunk 4")
        return lo

    with pytest.raises(ValueError, match="chunk 4"):
        three_threads.run_chunks(fn, [(0, 4), (4, 7), (7, 10)])
    assert sorted(ran) == [0, 4, 7]
    assert three_threads.run_chunks(lambda lo, hi: hi - lo, [(0, 4), (4, 7)]) == [4, 3]


def test_a_pool_whose_splits_cost_more_splits_only_work_that_repays_them(three_threads,
                                                                        monkeypatch):
    # Make every hand-off cost twice the most a split's overhead counts (a wake-up on a halting
    # VM costs ~0.1 ms): the pool measures it and wants that much more work before it splits.
    pool = three_threads
    real_start = intra_op._Worker.start

    def start(worker, fn, lo, hi):
        threading.Event().wait(2 * intra_op._HANDOFF_CAP_S)
        real_start(worker, fn, lo, hi)

    monkeypatch.setattr(intra_op._Worker, "start", start)
    # nothing measured yet: the reference cost and thresholds
    assert pool.handoff_s == intra_op.REFERENCE_HANDOFF_S
    assert (pool.min_work(), pool.min_work(True)) == (1000, 1000)
    for _ in range(intra_op._HANDOFF_SAMPLES):
        assert pool.run_chunks(lambda lo, hi: lo, [(0, 1), (1, 2)]) == [0, 1]
    costly = pool.handoff_s
    assert costly == intra_op._HANDOFF_CAP_S
    # three times the work the extra cost would have done, on top of the reference threshold
    extra = costly - intra_op.REFERENCE_HANDOFF_S
    assert pool.min_work() == pytest.approx(1000 + 3 * extra * intra_op.PASS_WORK_PER_S)
    assert pool.min_work(True) == pytest.approx(1000 + 3 * extra * intra_op.PRODUCT_WORK_PER_S)
    assert pool.chunks(np, 10, pool.min_work() / 2) == [(0, 10)]
    assert len(pool.chunks(np, 10, pool.min_work() * 2)) == 3
    assert pool.chunks(np, 10, pool.min_work(True) / 2, products=True) == [(0, 10)]


def test_a_costly_pool_still_probes_one_split_in_so_many_and_ignores_one_outlier():
    pool = intra_op.IntraOpPool(2)
    try:
        for _ in range(intra_op._HANDOFF_SAMPLES):
            pool._record_handoff(100 * intra_op.REFERENCE_HANDOFF_S)
        # worth splitting at the reference cost, not at this one: one in _PROBE_EVERY splits
        made = [len(pool.chunks(np, 10, intra_op.MIN_WORK * 2)) for _ in range(64)]
        assert made.count(2) == 64 // intra_op._PROBE_EVERY
        # work too small even at the reference cost is never probed
        assert all(pool.chunks(np, 10, intra_op.MIN_WORK - 1) == [(0, 10)] for _ in range(64))
        # cheap hand-offs and one descheduled one: the reference thresholds again
        for _ in range(intra_op._HANDOFF_SAMPLES - 1):
            pool._record_handoff(intra_op.REFERENCE_HANDOFF_S / 4)
        pool._record_handoff(0.05)
        assert pool.handoff_s < intra_op.REFERENCE_HANDOFF_S
        assert pool.min_work() == intra_op.MIN_WORK
        assert pool.chunks(np, 10, intra_op.MIN_WORK) == [(0, 5), (5, 10)]
    finally:
        pool.close()


def test_run_chunks_from_many_threads_at_once_gives_each_its_own_results(three_threads):
    # Eight callers share two pool threads: a chunk no idle thread is left for runs on its
    # caller, and every caller gets its chunks' results in order.
    pool = three_threads

    def call(i):
        bounds = [(k, k + 1) for k in range(5)]
        return pool.run_chunks(lambda lo, hi: (i, lo, threading.current_thread().name), bounds)

    with ThreadPoolExecutor(8) as callers:
        results = list(callers.map(call, range(64)))
    for i, got in enumerate(results):
        assert [(j, lo) for j, lo, _ in got] == [(i, k) for k in range(5)]
    names = [name for got in results for _, _, name in got]
    assert "dflab-intra-op" in names  # the pool's threads ran chunks
    assert any(name != "dflab-intra-op" for name in names)  # and callers ran the rest
    assert len(pool._workers) == 2  # the caller and two threads of its own
    assert sorted(pool._idle, key=id) == sorted(pool._workers, key=id)  # all back


@pytest.mark.parametrize("shape, by_rows", [((20, 400, 800), False), ((400, 20, 800), True),
                                            ((192, 10, 900), True), ((191, 10, 900), False),
                                            ((63, 10, 40), True)])
def test_split_matmul_takes_rows_unless_the_output_has_few(three_threads, monkeypatch, shape,
                                                          by_rows):
    # three threads: rows when each chunk gets at least 64 of them, or m >= n
    m, k, n = shape
    pool, seen = three_threads, []
    real_chunks = pool.chunks
    monkeypatch.setattr(pool, "chunks", lambda xp, size, work, products=False:
                        seen.append(size) or real_chunks(xp, size, work, products))
    a, b = np.ones((m, k), np.float32), np.ones((k, n), np.float32)
    np.testing.assert_array_equal(pool.matmul(a, b), np.full((m, n), k, np.float32))
    assert seen == [m if by_rows else n]


def test_split_matmul_equals_numpy(three_threads):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((301, 200)), rng.standard_normal((200, 70))
    pool = three_threads
    np.testing.assert_allclose(pool.matmul(a, b), a @ b, rtol=1e-12)
    np.testing.assert_allclose(pool.matmul(a.T.copy().T, b), a @ b, rtol=1e-12)
    with pytest.raises(ValueError):
        pool.matmul(a, a)


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
    got = three_threads.matmul(a, b)
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


def _count_splits(monkeypatch) -> list:
    """The number of chunks of every split (``run_chunks``) any pool makes from now on."""
    calls = []
    real_run_chunks = intra_op.IntraOpPool.run_chunks
    monkeypatch.setattr(intra_op.IntraOpPool, "run_chunks", lambda pool, fn, bounds:
                        calls.append(len(bounds)) or real_run_chunks(pool, fn, bounds))
    return calls


def _split_small_ops(monkeypatch, least):
    """Split ops of ``least`` work and more, whatever the splits are measured to cost: the
    small ops of these tests would soon stop splitting on a machine whose hand-offs are slow."""
    monkeypatch.setattr(intra_op, "MIN_WORK", least)
    monkeypatch.setattr(intra_op, "MIN_PRODUCT_WORK", least)
    monkeypatch.setattr(intra_op, "REFERENCE_HANDOFF_S", float("inf"))


def _blas_threads():
    from threadpoolctl import threadpool_info
    return {i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}


@pytest.mark.parametrize("split_products", [False, True])
def test_session_with_intra_op_threads_computes_the_same_values(monkeypatch, split_products):
    _split_small_ops(monkeypatch, 1)
    graph, fetches = _conv_net_values()
    with tf.Session(graph=graph) as sess:
        want = sess.run(fetches)
    # NumPy's kernels: oneDNN (where installed) threads its convolutions itself.
    config = tf.ConfigProto(intra_op_parallelism_threads=3,
                            dflab={"intra_op_split_products": split_products, "onednn": False})
    blas_before = _blas_threads()
    split = {True: [], False: []}  # bounds per call, products or not
    real_chunks = intra_op.IntraOpPool.chunks

    def chunks(pool, xp, n, work, products=False):
        bounds = real_chunks(pool, xp, n, work, products)
        split[products].append(len(bounds))
        return bounds

    monkeypatch.setattr(intra_op.IntraOpPool, "chunks", chunks)
    with tf.Session(graph=graph, config=config) as sess:
        pool = _pool_of(sess)
        assert pool.threads == 3
        assert pool.splits_products is split_products
        # Products on BLAS's three threads, or split in Python with BLAS on one per call.
        assert _blas_threads() == ({1} if split_products else {3})
        got = sess.run(fetches)
    assert _blas_threads() == blas_before
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
    with tf.Session(graph=graph,
                    config=tf.ConfigProto(intra_op_parallelism_threads=threads)) as sess:
        got = sess.run(grads)
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
    calls = _count_splits(monkeypatch)
    monkeypatch.setattr(intra_op, "MIN_WORK", 1 << 10)
    config = tf.ConfigProto(intra_op_parallelism_threads=2)
    with tf.Session(graph=graph, config=config) as sess:
        got = sess.run(fetches)
    assert calls and all(n == 2 for n in calls)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


def test_elementwise_split_leaves_what_it_cannot_split_to_the_kernel():
    pool = intra_op.IntraOpPool(2)
    try:
        add = pool.elementwise(np.add)
        big = np.ones((4, 1 << 20), np.float32)
        with pytest.raises(ValueError, match="broadcast"):  # NumPy's own error, unchanged
            add(big, np.ones((3, 1 << 20), np.float32))
        column = np.arange(1 << 21, dtype=np.float64).reshape(-1, 1)
        np.testing.assert_array_equal(add(column, big[0, :3]), column + big[0, :3])
        np.testing.assert_array_equal(add(big, 2), big + 2)
        assert add(big, 2).dtype == np.float32
    finally:
        pool.close()


@pytest.mark.parametrize("shape, vector", [
    ((64, 28, 28, 32), (32,)),        # a bias over NHWC activations: widened
    ((8, 6, 5, 3), (1, 1, 1, 3)),     # a vector with leading ones; rows of an odd count
    ((8, 6, 4), (6, 1)),              # along another axis: left as it is
])
def test_vectors_along_the_last_axis_widen_the_rows_with_the_same_bits(three_threads, monkeypatch,
                                                                      shape, vector):
    monkeypatch.setattr(intra_op, "_WIDE_ROW", 64)
    rng = np.random.default_rng(3)
    x = rng.standard_normal(shape).astype(np.float32)
    v = rng.standard_normal(vector).astype(np.float32)
    seen = []

    def add(*args, out=None):
        seen.append([np.shape(a) for a in args])
        return np.add(*args, out=out)

    add_split = three_threads.elementwise(add)
    for args in ((x, v), (v, x), (x, v, x)):
        fn = add_split if len(args) == 2 else three_threads.elementwise(
            lambda a, b, c, out=None: np.add(np.add(a, b), c, out=out))
        got = fn(*args)
        want = np.add(np.add(args[0], args[1]), args[2]) if len(args) == 3 else np.add(*args)
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, want)
    widened = len(vector) == 1 or vector[-1] == shape[-1]
    assert seen and all(max(len(s) for s in shapes) == (2 if widened else len(shape))
                        for shapes in seen)


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
    calls = _count_splits(monkeypatch)
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
    pool = intra_op.IntraOpPool(2)
    try:
        a = np.ones(1000)
        alive = weakref.ref(a)
        # the chunk holds the array itself (a default, not a cell ``del`` would empty)
        pool.run_chunks(lambda lo, hi, a=a: float(a[lo:hi].sum()), [(0, 500), (500, 1000)])
        del a
        assert alive() is None
    finally:
        pool.close()


def test_sessions_with_different_intra_op_threads_split_each_by_its_own(monkeypatch):
    _split_small_ops(monkeypatch, 1 << 10)
    rng = np.random.default_rng(7)
    x_val = rng.standard_normal((64, 300)).astype(np.float32)
    b_val = rng.standard_normal(300).astype(np.float32)
    w_val = rng.standard_normal((300, 200)).astype(np.float32)
    graph = tf.Graph()
    with graph.as_default(), tf.device("/cpu:0"):
        x, b, w = tf.constant(x_val), tf.constant(b_val), tf.constant(w_val)
        y = tf.nn.relu(x + b)  # elementwise
        m = tf.matmul(x, w)  # a product
    want = {y: np.maximum(x_val + b_val, 0), m: x_val @ w_val}
    splits = _count_splits(monkeypatch)
    blas = {"onednn_products": False}  # products split by the pool, not run on oneDNN's
    one = tf.Session(graph=graph, config=tf.ConfigProto(intra_op_parallelism_threads=1,
                                                        dflab=blas))
    two = tf.Session(graph=graph, config=tf.ConfigProto(intra_op_parallelism_threads=2,
                                                        dflab=blas))
    try:
        # Plans of each session built and run between the other's: the one-thread session's
        # first plan is built after the two-thread session opened, its second after the
        # two-thread session's steps ran.
        for sess, fetches in [(one, [y, m]), (two, [y, m]), (one, [y, m]), (two, [m]),
                              (one, [y]), (two, [y]), (one, [m])]:
            splits.clear()
            got = sess.run(fetches)
            for t, g in zip(fetches, got):
                np.testing.assert_allclose(g, want[t], rtol=1e-5, atol=1e-4)
            if sess is one:
                assert splits == [], "the one-thread session's kernels split"
            else:
                assert splits and set(splits) == {2}  # every big op, in two chunks
    finally:
        one.close()
        two.close()
    assert (_pool_of(one).threads, _pool_of(two).threads) == (1, 2)


def test_blas_threads_follow_the_newest_open_session_and_come_back():
    before = _blas_threads()
    on_blas = tf.Session(config=tf.ConfigProto(
        intra_op_parallelism_threads=3, dflab={"intra_op_split_products": False}))
    assert _blas_threads() == {3}
    split = tf.Session(config=tf.ConfigProto(intra_op_parallelism_threads=2))
    assert _blas_threads() == {1}  # products split: BLAS on one thread per call
    on_blas.close()  # the other session is still open: its setting stays
    assert _blas_threads() == {1}
    split.close()
    assert _blas_threads() == before


def test_a_closed_pool_ends_its_threads_and_still_runs_chunks_on_its_caller():
    pool = intra_op.IntraOpPool(3)
    names = pool.run_chunks(lambda lo, hi: threading.current_thread().name,
                            [(0, 1), (1, 2), (2, 3)])
    assert names.count("dflab-intra-op") == 2
    workers = list(pool._workers)
    pool.close()
    for worker in workers:
        worker.thread.join(5)
        assert not worker.thread.is_alive()
    assert pool.run_chunks(lambda lo, hi: (lo, threading.current_thread().name),
                           [(0, 1), (1, 2)]) == [(0, threading.current_thread().name),
                                                 (1, threading.current_thread().name)]


def test_closing_a_session_closes_its_pool():
    with tf.Session(config=tf.ConfigProto(intra_op_parallelism_threads=2)) as sess:
        pool = _pool_of(sess)
        pool.run_chunks(lambda lo, hi: None, [(0, 1), (1, 2)])  # starts its thread
        (worker,) = pool._workers
    worker.thread.join(5)
    assert not worker.thread.is_alive()


def test_a_cluster_session_leaves_blas_to_the_servers_that_own_the_devices():
    spec = tf.train.ClusterSpec({"ps": ["blas-ps:1"], "worker": ["blas-w:1"]})
    servers = [tf.train.Server(spec, job_name=j, task_index=0) for j in ("ps", "worker")]
    try:
        before = _blas_threads()
        g = tf.Graph()
        with g.as_default():
            with tf.device("/job:ps/task:0"):
                a = tf.constant(2.0) * 3.0
            with tf.device("/job:worker/task:0"):
                b = a + 1.0
        # The client's setting would hold BLAS at 3 threads were it the devices' owner; the
        # step runs in the client's own group over the servers' devices all the same.
        config = tf.ConfigProto(intra_op_parallelism_threads=3,
                                dflab={"intra_op_split_products": False})
        with tf.Session(servers[1].target, graph=g, config=config) as s:
            assert s.run(b) == 7.0
            assert _blas_threads() == before
    finally:
        for s in servers:
            s.stop()


def _two_products_graph():
    """Two independent 256x256 products and a py_func beside them that reports BLAS's
    threads while the step runs."""
    rng = np.random.default_rng(3)
    a_val, b_val = (rng.standard_normal((256, 256)).astype(np.float32) for _ in range(2))
    graph = tf.Graph()
    with graph.as_default(), tf.device("/cpu:0"):
        a, b = tf.constant(a_val), tf.constant(b_val)
        left, right = tf.matmul(a, b, name="left"), tf.matmul(b, a, name="right")
        during = tf.py_func(lambda: np.int64(max(_blas_threads())), [], tf.int64)
    return graph, (left, right, during), (a_val @ b_val, b_val @ a_val)


def test_the_default_session_splits_on_every_core_with_blas_on_one_thread_per_step(
        monkeypatch):
    monkeypatch.setattr(intra_op, "usable_cores", lambda: 3)
    graph, (left, right, during), (want_left, want_right) = _two_products_graph()
    before = _blas_threads()
    with tf.Session(graph=graph) as sess:
        pool = _pool_of(sess)
        assert (pool.threads, pool.splits_products, pool.library_threads) == (3, True, 3)
        # Between steps NumPy keeps BLAS's threads; during one BLAS runs one per call.
        assert _blas_threads() == before
        got_left, got_right, blas_in_step = sess.run([left, right, during])
        assert blas_in_step == 1
        assert _blas_threads() == before
        np.testing.assert_allclose(got_left, want_left, rtol=1e-4, atol=1e-3)
        np.testing.assert_allclose(got_right, want_right, rtol=1e-4, atol=1e-3)
        # A step with no expensive kernel leaves BLAS alone (and pays nothing for it).
        pins = []
        monkeypatch.setattr(intra_op, "pin_blas", lambda: pins.append(1))
        assert sess.run(left + 1.0, {left: want_left}).shape == (256, 256)
        assert pins == []
    assert _blas_threads() == before


def test_blas_pins_nest_and_the_last_one_puts_the_counts_back():
    before = _blas_threads()
    intra_op.pin_blas()
    intra_op.pin_blas()
    assert _blas_threads() == {1}
    intra_op.unpin_blas()
    assert _blas_threads() == {1}  # a step still runs
    intra_op.unpin_blas()
    assert _blas_threads() == before


def test_a_pool_opened_during_a_step_keeps_its_blas_setting_after_it():
    before = _blas_threads()
    intra_op.pin_blas()
    on_blas = tf.Session(config=tf.ConfigProto(
        intra_op_parallelism_threads=3, dflab={"intra_op_split_products": False}))
    try:
        intra_op.unpin_blas()
        assert _blas_threads() == {3}
    finally:
        on_blas.close()
    assert _blas_threads() == before


def _overlap(stats: dict, a: str, b: str) -> bool:
    (s1, e1), (s2, e2) = stats[a], stats[b]
    return s1 < e2 and s2 < e1


def _kernel_intervals(sess, fetches) -> dict:
    meta = tf.RunMetadata()
    sess.run(fetches, options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE),
             run_metadata=meta)
    out = {}
    for dev in meta.step_stats.dev_stats:
        for ns in dev.node_stats:
            start = ns.all_start_micros + ns.op_start_rel_micros
            out[ns.node_name] = (start, ns.all_start_micros + ns.op_end_rel_micros)
    return out


def test_the_default_session_runs_expensive_host_kernels_one_at_a_time(monkeypatch):
    monkeypatch.setattr(intra_op, "usable_cores", lambda: 2)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)  # the default inter-op threads
    graph, (left, right, _), _ = _two_products_graph()
    with tf.Session(graph=graph) as sess:
        assert _pool_of(sess).threads == 2
        for _ in range(5):
            assert not _overlap(_kernel_intervals(sess, [left, right]), "left", "right")
    # Asked for inter-op threads, or an intra-op pool short of every core: in parallel.
    for config in (tf.ConfigProto(inter_op_parallelism_threads=2),
                   tf.ConfigProto(intra_op_parallelism_threads=1)):
        with tf.Session(graph=graph, config=config) as sess:
            assert sess._worker._stream_of("/job:localhost/replica:0/task:0/device:CPU:0") \
                is None
    with tf.Session(graph=graph) as sess:
        assert sess._worker._stream_of("/job:localhost/replica:0/task:0/device:CPU:0") \
            is not None


def test_an_eager_context_runs_host_kernels_on_the_calling_thread():
    from dflab.eager.context import EagerContext

    ctx = EagerContext()
    try:
        pool = ctx.host.context.intra_op
        assert (pool.threads, pool.library_threads) == (1, intra_op.usable_cores())
    finally:
        ctx.close()


def test_elementwise_kernels_too_small_ever_to_split_are_bound_bare(monkeypatch):
    monkeypatch.setattr(intra_op, "usable_cores", lambda: 2)
    graph = tf.Graph()
    with graph.as_default(), tf.device("/cpu:0"):
        small = tf.placeholder(tf.float32, [100])
        # A py_func's result has no static shape (a fed placeholder's plan knows the feed's).
        unknown = tf.py_func(lambda: np.full(7, 0.5, np.float32), [], tf.float32)
        big = tf.placeholder(tf.float32, [1 << 20])
        outs = [tf.tanh(small, name="small"), tf.tanh(unknown, name="unknown"),
                tf.tanh(big, name="big")]
    values = [np.ones(100, np.float32), np.full(7, 0.5, np.float32), np.ones(1 << 20, np.float32)]
    with tf.Session(graph=graph) as sess:
        got = sess.run(outs, {small: values[0], big: values[2]})
        bound = {n.op.name: n.fn for part in sess._worker._partitions.values()
                 for n in part.executor_plan.nodes}
    for g, v in zip(got, values):
        np.testing.assert_allclose(g, np.tanh(v), rtol=1e-6)
    # The static 100 elements never split: no check per call. An unknown size may be big.
    assert bound["small"] is np.tanh
    assert "split_fn" in bound["unknown"].__qualname__
    assert "split_fn" in bound["big"].__qualname__


def test_never_split_needs_a_fully_known_single_output_below_the_least_split():
    from dflab.framework.tensor_shape import TensorShape

    least = intra_op.MIN_WORK // intra_op.PASS_WORK
    assert intra_op.never_split((TensorShape([least - 1]),), 2)
    assert not intra_op.never_split((TensorShape([least]),), 2)
    assert not intra_op.never_split((TensorShape([None, 4]),), 2)
    assert not intra_op.never_split((TensorShape([4]), TensorShape([4])), 2)
    # An AddN of 9 terms makes 8 passes: it splits from an eighth of the size.
    assert not intra_op.never_split((TensorShape([least // 8]),), 9)
    assert intra_op.never_split((TensorShape([least // 8 - 1]),), 9)
