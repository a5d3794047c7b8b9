"""Queues, QueueRunner, Coordinator, train.batch/shuffle_batch: blocking with timeouts, close
semantics, seeded shuffling, padding, producer/consumer threads, no hang on session close."""

import threading
import time

import numpy as np
import pytest

import dflab as tf

TIMEOUT = tf.RunOptions(timeout_in_ms=300)


@pytest.fixture(autouse=True)
def _fresh_graph():
    tf.reset_default_graph()
    yield
    tf.reset_default_graph()


def test_fifo_order_shapes_and_size():
    q = tf.FIFOQueue(10, [tf.int32, tf.string], shapes=[[2], []])
    x = tf.placeholder(tf.int32, [None, 2])
    s = tf.placeholder(tf.string, [None])
    enq_many = q.enqueue_many([x, s])
    deq = q.dequeue()
    deq2 = q.dequeue_many(2)
    assert deq[0].shape.as_list() == [2] and deq[1].shape.as_list() == []
    assert deq2[0].shape.as_list() == [2, 2] and deq2[1].shape.as_list() == [2]
    assert q.queue_ref.dtype == tf.resource
    assert all(op.colocation_groups() == [b"loc:@fifo_queue"]
               for op in (deq[0].op, enq_many))
    with tf.Session() as sess:
        sess.run(enq_many, {x: [[1, 1], [2, 2], [3, 3]], s: [b"a", b"b", b"c"]})
        assert sess.run(q.size()) == 3
        first = sess.run(deq)
        assert first[0].tolist() == [1, 1] and first[1] == b"a"
        rest = sess.run(deq2)
        assert rest[0].tolist() == [[2, 2], [3, 3]] and rest[1].tolist() == [b"b", b"c"]


def test_build_time_errors():
    q = tf.FIFOQueue(3, [tf.float32], shapes=[[2]])
    with pytest.raises(ValueError, match="requested dtype float32"):
        q.enqueue(tf.constant([1, 2]))
    with pytest.raises(ValueError):
        q.enqueue(tf.constant([1.0, 2.0, 3.0]))
    with pytest.raises(ValueError):
        tf.PaddingFIFOQueue(3, [tf.float32], shapes=[tf.TensorShape(None)])
    with pytest.raises(ValueError):
        tf.RandomShuffleQueue(3, 5, [tf.float32])


def test_runtime_shape_mismatch_is_invalid_argument():
    q = tf.FIFOQueue(3, [tf.float32], shapes=[[2]])
    x = tf.placeholder(tf.float32)
    enq = q.enqueue(x)
    with tf.Session() as sess:
        with pytest.raises(tf.errors.InvalidArgumentError, match="Shape mismatch"):
            sess.run(enq, {x: [1.0, 2.0, 3.0]})


def test_dequeue_on_empty_times_out_and_session_stays_usable():
    q = tf.FIFOQueue(3, [tf.float32])
    deq = q.dequeue()
    with tf.Session() as sess:
        t0 = time.perf_counter()
        with pytest.raises(tf.errors.DeadlineExceededError):
            sess.run(deq, options=TIMEOUT)
        assert time.perf_counter() - t0 < 3
        # the cancelled dequeue must not swallow the next element
        sess.run(q.enqueue(5.0))
        assert sess.run(deq) == 5.0


def test_enqueue_on_full_times_out():
    q = tf.FIFOQueue(2, [tf.int32])
    enq = q.enqueue(1)
    with tf.Session() as sess:
        sess.run(enq)
        sess.run(enq)
        with pytest.raises(tf.errors.DeadlineExceededError):
            sess.run(enq, options=TIMEOUT)
        assert sess.run(q.size()) == 2


def test_close_semantics():
    q = tf.FIFOQueue(10, [tf.int32])
    enq_many = q.enqueue_many([[1, 2, 3]])
    with tf.Session() as sess:
        sess.run(enq_many)
        sess.run(q.close())
        assert sess.run(q.is_closed())
        with pytest.raises(tf.errors.CancelledError, match="is closed"):
            sess.run(q.enqueue(4))
        with pytest.raises(tf.errors.OutOfRangeError, match="insufficient elements"):
            sess.run(q.dequeue_many(5))  # not enough left: fails, keeps the elements
        assert sess.run(q.dequeue()) == 1
        assert sess.run(q.dequeue_up_to(5)).tolist() == [2, 3]  # a short final batch
        with pytest.raises(tf.errors.OutOfRangeError):
            sess.run(q.dequeue())
        with pytest.raises(tf.errors.OutOfRangeError):
            sess.run(q.dequeue_up_to(2))


def test_close_wakes_a_blocked_dequeue():
    q = tf.FIFOQueue(10, [tf.int32])
    deq = q.dequeue()
    close = q.close()
    with tf.Session() as sess:
        outcome = []

        def consume():
            try:
                sess.run(deq)
            except tf.errors.OutOfRangeError as e:
                outcome.append(e)

        t = threading.Thread(target=consume)
        t.start()
        time.sleep(0.2)
        sess.run(close)
        t.join(5)
        assert not t.is_alive() and len(outcome) == 1


def test_close_with_cancel_pending_enqueues():
    q = tf.FIFOQueue(1, [tf.int32])
    enq = q.enqueue(7)
    with tf.Session() as sess:
        sess.run(enq)
        outcome = []

        def produce():
            try:
                sess.run(enq)  # blocks: the queue is full
                outcome.append("enqueued")
            except tf.errors.CancelledError:
                outcome.append("cancelled")

        t = threading.Thread(target=produce)
        t.start()
        time.sleep(0.2)
        sess.run(q.close(cancel_pending_enqueues=True))
        t.join(5)
        assert outcome == ["cancelled"]
        assert sess.run(q.dequeue()) == 7


def test_pending_enqueue_completes_after_plain_close():
    q = tf.FIFOQueue(1, [tf.int32])
    with tf.Session() as sess:
        sess.run(q.enqueue(1))
        t = threading.Thread(target=sess.run, args=(q.enqueue(2),))
        t.start()
        time.sleep(0.2)
        sess.run(q.close())
        assert sess.run(q.dequeue()) == 1
        t.join(5)
        assert sess.run(q.dequeue()) == 2


def test_closing_the_session_releases_blocked_steps():
    q = tf.FIFOQueue(1, [tf.int32])
    deq = q.dequeue()
    sess = tf.Session()
    outcome = []

    def consume():
        try:
            sess.run(deq)
        except tf.errors.CancelledError as e:
            outcome.append(e)

    t = threading.Thread(target=consume)
    t.start()
    time.sleep(0.2)
    sess.close()
    t.join(5)
    assert not t.is_alive() and len(outcome) == 1


def _drain_shuffle(seed, n=20):
    tf.reset_default_graph()
    q = tf.RandomShuffleQueue(30, 5, [tf.int32], shapes=[[]], seed=seed)
    with tf.Session() as sess:
        sess.run(q.enqueue_many([np.arange(n, dtype=np.int32)]))
        sess.run(q.close())
        return sess.run(q.dequeue_up_to(n)).tolist()


def test_random_shuffle_queue_seeded_determinism():
    a, b, c = _drain_shuffle(7), _drain_shuffle(7), _drain_shuffle(8)
    assert a == b
    assert sorted(a) == list(range(20))
    assert a != list(range(20)) and a != c


def test_random_shuffle_keeps_min_after_dequeue():
    q = tf.RandomShuffleQueue(10, 3, [tf.int32], shapes=[[]], seed=1)
    deq = q.dequeue()
    with tf.Session() as sess:
        sess.run(q.enqueue_many([[1, 2, 3, 4]]))
        first = int(sess.run(deq))  # 4 > 3: allowed
        with pytest.raises(tf.errors.DeadlineExceededError):
            sess.run(deq, options=TIMEOUT)  # would leave fewer than min_after_dequeue
        sess.run(q.close())  # closed: the last elements may go
        rest = sess.run(q.dequeue_up_to(10)).tolist()
        assert sorted(rest + [first]) == [1, 2, 3, 4]
        assert sess.run(q.size()) == 0


def test_padding_fifo_queue_pads_batches():
    q = tf.PaddingFIFOQueue(5, [tf.int32, tf.string], shapes=[[None], [None]])
    x = tf.placeholder(tf.int32, [None])
    s = tf.placeholder(tf.string, [None])
    enq = q.enqueue([x, s])
    batch = q.dequeue_many(3)
    assert batch[0].shape.as_list() == [3, None]
    with tf.Session() as sess:
        for n in (1, 3, 2):
            sess.run(enq, {x: np.arange(1, n + 1), s: [b"w"] * n})
        ints, strs = sess.run(batch)
    np.testing.assert_array_equal(ints, [[1, 0, 0], [1, 2, 3], [1, 2, 0]])
    assert strs.tolist() == [[b"w", b"", b""], [b"w", b"w", b"w"], [b"w", b"w", b""]]


def test_named_components_enqueue_dict():
    q = tf.FIFOQueue(3, [tf.int32, tf.float32], shapes=[[], []], names=["i", "f"])
    with tf.Session() as sess:
        sess.run(q.enqueue({"i": 1, "f": 2.5}))
        assert sess.run(q.dequeue()) == {"i": 1, "f": 2.5}


def test_producers_and_consumers_threads_see_every_element_once():
    q = tf.FIFOQueue(4, [tf.int32], shapes=[[]])
    x = tf.placeholder(tf.int32, [])
    enq = q.enqueue(x)
    deq = q.dequeue()
    close = q.close()
    n_prod, per = 3, 40
    got, lock = [], threading.Lock()
    with tf.Session() as sess:
        def produce(k):
            for i in range(per):
                sess.run(enq, {x: k * 1000 + i})

        def consume():
            try:
                while True:
                    v = sess.run(deq)
                    with lock:
                        got.append(int(v))
            except tf.errors.OutOfRangeError:
                pass

        prods = [threading.Thread(target=produce, args=(k,)) for k in range(n_prod)]
        cons = [threading.Thread(target=consume) for _ in range(3)]
        for t in prods + cons:
            t.start()
        for t in prods:
            t.join(30)
        sess.run(close)
        for t in cons:
            t.join(30)
        assert not any(t.is_alive() for t in prods + cons)
    assert sorted(got) == sorted(k * 1000 + i for k in range(n_prod) for i in range(per))


def test_queue_runner_coordinator_and_clean_end():
    q = tf.FIFOQueue(5, [tf.int32], shapes=[[]])
    counter = tf.Variable(0, name="counter")
    enq = q.enqueue(tf.assign_add(counter, 1, use_locking=True))
    qr = tf.train.QueueRunner(q, [enq] * 2)
    tf.train.add_queue_runner(qr)
    deq = q.dequeue()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        coord = tf.train.Coordinator()
        threads = tf.train.start_queue_runners(sess, coord)
        assert len(threads) == 3  # two enqueue threads and the cancel thread
        values = [int(sess.run(deq)) for _ in range(20)]
        # Each element is one increment; the two threads may enqueue theirs out of order.
        assert len(set(values)) == 20 and min(values) >= 1 and max(values) <= 20 + 2
        coord.request_stop()
        coord.join(threads, stop_grace_period_secs=10)
    assert not any(t.is_alive() for t in threads)
    assert qr.exceptions_raised == []


def test_coordinator_reraises_thread_error():
    coord = tf.train.Coordinator()

    def worker():
        with coord.stop_on_exception():
            raise ValueError("boom")

    t = threading.Thread(target=worker)
    coord.register_thread(t)
    t.start()
    with pytest.raises(ValueError, match="boom"):
        coord.join(stop_grace_period_secs=5)
    coord2 = tf.train.Coordinator()
    coord2.request_stop(tf.errors.OutOfRangeError(None, None, "done"))
    coord2.join([])  # a clean stop is not an error


def test_coordinator_join_reports_stragglers():
    coord = tf.train.Coordinator()
    release = threading.Event()
    t = threading.Thread(target=release.wait, args=(10,))
    t.start()
    coord.request_stop()
    with pytest.raises(RuntimeError, match="still running"):
        coord.join([t], stop_grace_period_secs=0.2)
    release.set()
    t.join()


def test_train_batch_and_shuffle_batch():
    data = tf.constant(np.arange(12, dtype=np.int64).reshape(6, 2))
    labels = tf.constant(np.arange(6, dtype=np.int32))
    xb, yb = tf.train.batch([data, labels], batch_size=4, enqueue_many=True, capacity=8)
    assert xb.shape.as_list() == [4, 2] and yb.shape.as_list() == [4]
    sb = tf.train.shuffle_batch({"y": labels}, batch_size=5, capacity=20, min_after_dequeue=6,
                                enqueue_many=True, seed=3)
    with tf.Session() as sess:
        coord = tf.train.Coordinator()
        threads = tf.train.start_queue_runners(sess, coord)
        x, y = sess.run([xb, yb])
        np.testing.assert_array_equal(x, np.stack([np.arange(2) + 2 * v for v in y]))
        np.testing.assert_array_equal(y, [0, 1, 2, 3])
        s = sess.run(sb)["y"]
        assert s.shape == (5,) and set(s.tolist()) <= set(range(6))
        coord.request_stop()
        coord.join(threads, stop_grace_period_secs=10)


def test_batch_allow_smaller_final_batch_and_dynamic_pad():
    seq = tf.placeholder(tf.int32, [None])
    q = tf.FIFOQueue(10, [tf.int32], shapes=[[]])
    src = q.dequeue()
    src_len = tf.reshape(src, [1])
    b = tf.train.batch([src_len], batch_size=3, allow_smaller_final_batch=True,
                       dynamic_pad=True)
    del seq
    with tf.Session() as sess:
        sess.run(q.enqueue_many([[5, 6, 7, 8]]))
        sess.run(q.close())
        coord = tf.train.Coordinator()
        threads = tf.train.start_queue_runners(sess, coord)
        first = sess.run(b)  # a list of one tensor batches to the bare tensor, as in TF
        second = sess.run(b)
        assert first.tolist() == [[5], [6], [7]] and second.tolist() == [[8]]
        with pytest.raises(tf.errors.OutOfRangeError):
            sess.run(b)
        coord.request_stop()
        coord.join(threads, stop_grace_period_secs=10)


def test_queue_ops_go_to_the_queues_graph():
    """Queue methods build their ops in the queue's graph, whatever graph is the default."""
    g = tf.Graph()
    with g.as_default():
        q = tf.FIFOQueue(3, tf.int32, name="q")
    enq = q.enqueue(5)  # the default graph is another graph here
    deq = q.dequeue()
    assert enq.graph is g and deq.graph is g and q.size().graph is g
    with tf.Session(graph=g) as sess:
        sess.run(enq)
        assert sess.run(deq) == 5


def test_dequeue_many_larger_than_capacity_fills_as_elements_come():
    """TF takes the elements of a full queue as they come, so a batch larger than the queue
    still fills while a producer keeps enqueueing (it used to wait forever)."""
    q = tf.FIFOQueue(3, tf.int32, shapes=[[]])
    x = tf.placeholder(tf.int32, [])
    enq = q.enqueue(x)
    deq = q.dequeue_many(8)
    with tf.Session() as sess:
        def produce():
            for i in range(10):
                sess.run(enq, {x: i}, options=tf.RunOptions(timeout_in_ms=5000))

        t = threading.Thread(target=produce)
        t.start()
        got = sess.run(deq, options=tf.RunOptions(timeout_in_ms=5000))
        t.join(5)
        assert got.tolist() == list(range(8)) and not t.is_alive()
        assert sess.run(q.size()) == 2


def test_elements_a_waiting_dequeue_held_go_back_when_it_fails():
    q = tf.FIFOQueue(2, tf.int32, shapes=[[]])
    fill = q.enqueue_many([[1, 2]])
    deq3, deq1 = q.dequeue_many(3), q.dequeue()
    with tf.Session() as sess:
        sess.run(fill)  # full: the dequeue of 3 takes both and waits for a third
        with pytest.raises(tf.errors.DeadlineExceededError):
            sess.run(deq3, options=TIMEOUT)
        assert sess.run(q.size()) == 2  # put back, in order
        assert [sess.run(deq1), sess.run(deq1)] == [1, 2]
        sess.run(fill)
        done = []
        t = threading.Thread(target=lambda: done.append(_outcome(sess, deq3)))
        t.start()
        time.sleep(0.1)
        sess.run(q.close())  # closed with 2 < 3: OutOfRange, and the 2 are still there
        t.join(5)
        assert done == ["OutOfRangeError"] and sess.run(q.size()) == 2
        assert sess.run(q.dequeue_up_to(3)).tolist() == [1, 2]


def _outcome(sess, fetch):
    try:
        sess.run(fetch, options=tf.RunOptions(timeout_in_ms=5000))
        return "ok"
    except tf.errors.OpError as e:
        return type(e).__name__


def test_priority_queue_dequeues_lowest_priority_first():
    q = tf.PriorityQueue(10, [tf.string, tf.int32], shapes=[[], [2]])
    assert q.dtypes == [tf.int64, tf.string, tf.int32]
    assert [s.as_list() for s in q.shapes] == [[], [], [2]]
    assert q.queue_ref.op.type == "PriorityQueueV2"
    enq = q.enqueue_many([[5, 1, 3, 1, 2], [b"a", b"b", b"c", b"d", b"e"],
                          [[i, -i] for i in range(5)]])
    deq = q.dequeue_many(4)
    assert [t.shape.as_list() for t in deq] == [[4], [4], [4, 2]]
    with tf.Session() as sess:
        sess.run(enq)
        sess.run(q.enqueue((tf.constant(0, tf.int64), "z", [9, 9])))
        p, s, v = sess.run(deq)
        # Lowest first; equal priorities in the order they came.
        assert p.tolist() == [0, 1, 1, 2] and s.tolist() == [b"z", b"b", b"d", b"e"]
        assert v.tolist() == [[9, 9], [1, -1], [3, -3], [4, -4]]
        assert sess.run(q.size()) == 2
        sess.run(q.close())
        assert [x.tolist() for x in sess.run(q.dequeue_up_to(5))[:2]] == [[3, 5],
                                                                          [b"c", b"a"]]
        with pytest.raises(tf.errors.OutOfRangeError):
            sess.run(q.dequeue())


def test_priority_queue_names_blocking_and_errors():
    with pytest.raises(TypeError):
        tf.PriorityQueue(3, [tf.float32])  # shapes are required
    with pytest.raises(ValueError, match="fully defined"):
        tf.PriorityQueue(3, [tf.float32], shapes=[[None]])
    with pytest.raises(ValueError, match="same length"):
        tf.PriorityQueue(3, [tf.float32], shapes=[[]], names=["x"])
    q = tf.PriorityQueue(2, [tf.float32], shapes=[[]], names=["priority", "x"])
    with pytest.raises(TypeError):
        q.enqueue({"priority": 1.5, "x": 1.0})  # priorities are int64
    deq = q.dequeue()
    assert sorted(deq) == ["priority", "x"]
    p = tf.placeholder(tf.int64)
    with tf.Session() as sess:
        with pytest.raises(tf.errors.DeadlineExceededError):
            sess.run(deq, options=TIMEOUT)
        with pytest.raises(tf.errors.InvalidArgumentError):
            sess.run(q.enqueue({"priority": p, "x": 1.0}), {p: [1, 2]})  # not a scalar
        for k in (7, -3):
            sess.run(q.enqueue({"priority": tf.constant(k, tf.int64), "x": float(k)}))
        with pytest.raises(tf.errors.DeadlineExceededError):  # full at capacity 2
            sess.run(q.enqueue({"priority": tf.constant(0, tf.int64), "x": 0.0}),
                     options=TIMEOUT)
        got = sess.run(deq)
        assert got["priority"] == -3 and got["x"] == -3.0


def test_match_filenames_once_is_a_local_variable_found_when_initialized(tmp_path):
    # As TF 2.21: a local, non-trainable variable "matching_filenames".
    for name in ("b.txt", "a.txt", "c.csv"):
        (tmp_path / name).write_text(name)
    g = tf.Graph()
    with g.as_default():
        files = tf.train.match_filenames_once(str(tmp_path / "*.txt"))
        none = tf.io.match_filenames_once(str(tmp_path / "nothing*"))
        assert files.name == "matching_filenames:0"
        assert files in tf.local_variables() and files not in tf.trainable_variables()
        with tf.Session() as sess:
            with pytest.raises(tf.errors.FailedPreconditionError):
                sess.run(files)
            sess.run(tf.local_variables_initializer())
            (tmp_path / "d.txt").write_text("later")  # found once: not seen after init
            got = sess.run(files)
            assert list(got) == [str(tmp_path / n).encode() for n in ("a.txt", "b.txt")]
            assert sess.run(none).shape == (0,)
