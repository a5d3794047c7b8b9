"""tf.train's epoch-counting producers (limit_epochs, input/string/range/slice_input_producer)
and their CountUpTo counter: every element once per epoch, seeded shuffling, OutOfRangeError
after num_epochs with runner threads ending cleanly, TF's names, and bad input.

Every dequeue that could block runs with a RunOptions timeout, so a bug fails, never hangs."""

import threading

import numpy as np
import pytest

import dflab as tf
from dflab.ops import state_ops

TIMEOUT = tf.RunOptions(timeout_in_ms=5000)


@pytest.fixture(autouse=True)
def _fresh_graph():
    tf.reset_default_graph()
    yield
    tf.reset_default_graph()


def _start(sess):
    coord = tf.train.Coordinator()
    return coord, tf.train.start_queue_runners(sess, coord)


def _stop(coord, threads):
    coord.request_stop()
    coord.join(threads, stop_grace_period_secs=10)
    assert not any(t.is_alive() for t in threads)


def _drain(sess, fetch):
    """Every value of ``fetch`` until the pipeline reports OutOfRangeError."""
    out = []
    while True:
        try:
            out.append(sess.run(fetch, options=TIMEOUT))
        except tf.errors.OutOfRangeError:
            return out


def _drain_producer(queue, num_epochs=None, n=None):
    """Run ``queue``'s producer in a fresh session: all of it, or its first ``n`` elements."""
    deq = queue.dequeue()
    with tf.Session() as sess:
        sess.run(tf.local_variables_initializer())
        coord, threads = _start(sess)
        if n is None:
            got = _drain(sess, deq)
        else:
            got = [sess.run(deq, options=TIMEOUT) for _ in range(n)]
        _stop(coord, threads)
    return [v.item() if isinstance(v, np.generic) else v for v in got]


# --- CountUpTo and limit_epochs ------------------------------------------------------------------
@pytest.mark.parametrize("use_resource, op_type", [(False, "CountUpTo"),
                                                   (True, "ResourceCountUpTo")])
def test_count_up_to_returns_old_value_and_stops_at_limit(use_resource, op_type):
    v = tf.Variable(0, name="c", use_resource=use_resource)
    c = state_ops.count_up_to(v, 3)
    assert c.op.type == op_type and c.dtype == tf.int32 and c.shape.as_list() == []
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        assert [int(sess.run(c)) for _ in range(3)] == [0, 1, 2]
        with pytest.raises(tf.errors.OutOfRangeError, match="Reached limit of 3"):
            sess.run(c)
        assert sess.run(v) == 3  # a failed count leaves the variable at the limit


@pytest.mark.parametrize("use_resource, allowed", [(False, "int32_ref, int64_ref"),
                                                   (True, "int32, int64")])
def test_count_up_to_rejects_non_counters(use_resource, allowed):
    with pytest.raises(TypeError, match=allowed):
        state_ops.count_up_to(tf.Variable(0.0, use_resource=use_resource), 2)
    with pytest.raises(ValueError, match="rank 0"):
        state_ops.count_up_to(tf.Variable([0, 0], use_resource=use_resource), 2)
    with pytest.raises(TypeError, match="mutable tensor"):
        state_ops.count_up_to(tf.constant(0), 2)


def test_count_up_to_hands_out_each_count_once_across_threads():
    v = tf.Variable(0, name="c")
    c = state_ops.count_up_to(v, 60)
    got, lock = [], threading.Lock()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())

        def count():
            try:
                while True:
                    x = int(sess.run(c))
                    with lock:
                        got.append(x)
            except tf.errors.OutOfRangeError:
                pass

        workers = [threading.Thread(target=count) for _ in range(3)]
        for t in workers:
            t.start()
        for t in workers:
            t.join(30)
        assert not any(t.is_alive() for t in workers)
    assert sorted(got) == list(range(60))


def test_limit_epochs_alone():
    data = tf.constant([1, 2, 3])
    assert tf.train.limit_epochs(data) is data  # no num_epochs: nothing is built
    limited = tf.train.limit_epochs(data, num_epochs=2)
    assert limited.op.name == "limit_epochs" and limited.shape.as_list() == [3]
    (epochs,) = tf.local_variables()
    assert epochs.op.name == "limit_epochs/epochs" and epochs.dtype.base_dtype == tf.int64
    assert tf.global_variables() == [] and tf.trainable_variables() == []
    with tf.Session() as sess:
        sess.run(tf.local_variables_initializer())
        for _ in range(2):
            assert sess.run(limited).tolist() == [1, 2, 3]
        with pytest.raises(tf.errors.OutOfRangeError, match="Reached limit of 2"):
            sess.run(limited)
        assert sess.run(epochs) == 2
    with pytest.raises(ValueError, match="num_epochs must be > 0 not 0"):
        tf.train.limit_epochs(data, num_epochs=0)


def test_uninitialized_epoch_counter_is_failed_precondition():
    limited = tf.train.limit_epochs(tf.constant(1.0), num_epochs=1)
    q = tf.train.range_input_producer(4, num_epochs=1)
    (enqueue,) = tf.get_collection(tf.GraphKeys.QUEUE_RUNNERS)[0].enqueue_ops
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())  # not the local ones
        with pytest.raises(tf.errors.FailedPreconditionError, match="limit_epochs/epochs"):
            sess.run(limited)
        with pytest.raises(tf.errors.FailedPreconditionError,
                           match="input_producer/limit_epochs/epochs"):
            sess.run(enqueue)
        assert sess.run(q.size()) == 0


# --- the producers -------------------------------------------------------------------------------
def test_producer_graph_matches_tf_names_and_registers_a_runner():
    q = tf.train.string_input_producer(["a", "b"], num_epochs=1)
    assert isinstance(q, tf.FIFOQueue) and q.name == "input_producer"
    assert q.dtypes == [tf.string] and q.shapes[0].as_list() == []
    (qr,) = tf.get_collection(tf.GraphKeys.QUEUE_RUNNERS)
    assert qr.queue is q
    assert [op.name for op in qr.enqueue_ops] == ["input_producer/input_producer_EnqueueMany"]
    assert [v.op.name for v in tf.local_variables()] == ["input_producer/limit_epochs/epochs"]
    ops = tf.get_default_graph().get_operations()
    assert any(op.type == "RandomShuffle" for op in ops)
    # a second producer gets its own scope; slice_input_producer nests a range producer
    tf.train.range_input_producer(3, shuffle=False)
    tf.train.slice_input_producer([tf.constant([1, 2])], num_epochs=2)
    names = [v.op.name for v in tf.local_variables()]
    assert names[-1] == "input_producer_2/input_producer/limit_epochs/epochs"
    queues = [r.queue.name for r in tf.get_collection(tf.GraphKeys.QUEUE_RUNNERS)]
    assert queues == ["input_producer", "input_producer_1", "input_producer_2/input_producer"]


def test_every_element_once_per_epoch_in_order_without_shuffle():
    q = tf.train.string_input_producer(["a", "b", "c"], num_epochs=3, shuffle=False)
    assert _drain_producer(q) == [b"a", b"b", b"c"] * 3


def test_every_element_once_per_epoch_with_shuffle():
    q = tf.train.range_input_producer(10, num_epochs=3, seed=5)
    got = _drain_producer(q)
    epochs = [got[k:k + 10] for k in range(0, 30, 10)]
    assert len(got) == 30
    assert all(sorted(e) == list(range(10)) for e in epochs)
    assert epochs[0] != list(range(10))
    assert epochs[0] != epochs[1] or epochs[1] != epochs[2]  # a new permutation per epoch


def _seeded_run(seed, shuffle=True):
    tf.reset_default_graph()
    return _drain_producer(tf.train.range_input_producer(20, num_epochs=2, shuffle=shuffle,
                                                         seed=seed))


def test_seeded_shuffle_is_reproducible_across_graphs():
    a, b, other = _seeded_run(7), _seeded_run(7), _seeded_run(8)
    plain = _seeded_run(7, shuffle=False)
    assert a == b
    assert plain == list(range(20)) * 2
    assert a != plain and a != other
    assert sorted(a) == sorted(plain)


def test_input_producer_rows_and_element_shape():
    data = np.arange(12, dtype=np.float32).reshape(4, 3)
    q = tf.train.input_producer(data, num_epochs=2, shuffle=False, capacity=3)
    assert q.name == "input_producer/fifo_queue" and q.shapes[0].as_list() == [3]
    got = _drain_producer(q)
    np.testing.assert_array_equal(np.stack(got), np.concatenate([data, data]))


def test_input_producer_needs_a_known_element_shape():
    with pytest.raises(ValueError, match="`element_shape` must be specified"):
        tf.train.input_producer(tf.placeholder(tf.float32, [None, None]))
    q = tf.train.input_producer(tf.placeholder(tf.float32, [None, None]), element_shape=[2])
    assert q.shapes[0].as_list() == [2]
    with pytest.raises(ValueError):
        tf.train.input_producer(tf.constant([[1, 2]]), element_shape=[3])


def test_out_of_range_after_num_epochs_and_threads_end():
    q = tf.train.range_input_producer(5, num_epochs=2, capacity=2, shuffle=False)
    deq = q.dequeue()
    with tf.Session() as sess:
        sess.run(tf.local_variables_initializer())
        coord, threads = _start(sess)
        assert [int(sess.run(deq, options=TIMEOUT)) for _ in range(10)] == list(range(5)) * 2
        with pytest.raises(tf.errors.OutOfRangeError, match="is closed"):
            sess.run(deq, options=TIMEOUT)
        with pytest.raises(tf.errors.OutOfRangeError):
            sess.run(deq, options=TIMEOUT)  # stays closed
        # the runner's enqueue thread ended by itself once its epochs ran out
        enqueue_threads = [t for t in threads if "QueueRunnerCancel" not in t.name]
        for t in enqueue_threads:
            t.join(10)
        assert not any(t.is_alive() for t in enqueue_threads)
        assert sess.run(q.is_closed())
        _stop(coord, threads)
    (qr,) = tf.get_collection(tf.GraphKeys.QUEUE_RUNNERS)
    assert qr.exceptions_raised == []


def test_endless_producer_stops_on_request():
    q = tf.train.range_input_producer(3, capacity=2)  # no num_epochs: runs until stopped
    deq = q.dequeue()
    with tf.Session() as sess:
        coord, threads = _start(sess)
        got = [int(sess.run(deq, options=TIMEOUT)) for _ in range(9)]
        assert sorted(got) == sorted(list(range(3)) * 3)
        _stop(coord, threads)  # the runner is parked on the full queue: cancel frees it


# --- slice_input_producer ------------------------------------------------------------------------
def test_slice_input_producer_keeps_rows_aligned():
    xs = np.arange(16, dtype=np.float32).reshape(8, 2)
    ys = np.array([f"row{k}".encode() for k in range(8)], dtype=object)
    x, y = tf.train.slice_input_producer([tf.constant(xs), tf.constant(ys)], num_epochs=2,
                                         seed=3)
    assert x.shape.as_list() == [2] and y.shape.as_list() == []
    with tf.Session() as sess:
        sess.run(tf.local_variables_initializer())
        coord, threads = _start(sess)
        pairs = _drain(sess, [x, y])
        _stop(coord, threads)
    assert len(pairs) == 16
    for xv, yv in pairs:
        k = int(yv[3:])
        np.testing.assert_array_equal(xv, xs[k])
    rows = [int(yv[3:]) for _, yv in pairs]
    assert sorted(rows[:8]) == sorted(rows[8:]) == list(range(8))
    assert rows[:8] != list(range(8))


def test_slice_input_producer_bad_input():
    with pytest.raises(ValueError, match="same first dimension"):
        tf.train.slice_input_producer([tf.constant([1, 2, 3]), tf.constant([1, 2])])
    with pytest.raises(ValueError, match="Expected at least one tensor"):
        tf.train.slice_input_producer([])
    with pytest.raises(ValueError, match="scalar"):
        tf.train.slice_input_producer([tf.constant([1, 2]), tf.constant(5)])


def test_slice_input_producer_checks_dynamic_first_dimensions():
    a = tf.placeholder(tf.int32, [None])
    b = tf.placeholder(tf.int32, [None])
    tf.train.slice_input_producer([a, b], shuffle=False)
    (qr,) = tf.get_collection(tf.GraphKeys.QUEUE_RUNNERS)
    (enqueue,) = qr.enqueue_ops
    with tf.Session() as sess:
        sess.run(enqueue, {a: [1, 2], b: [3, 4]})
        with pytest.raises(tf.errors.InvalidArgumentError, match="first dimension"):
            sess.run(enqueue, {a: [1, 2], b: [3, 4, 5]})


# --- string_input_producer's empty input ---------------------------------------------------------
@pytest.mark.parametrize("empty", [[], (), np.array([], dtype=object)])
def test_string_input_producer_rejects_static_empty_input(empty):
    with pytest.raises(ValueError, match="requires a non-null input tensor"):
        tf.train.string_input_producer(empty)


def test_string_input_producer_rejects_empty_tensor():
    with pytest.raises(ValueError, match="requires a non-null input tensor"):
        tf.train.string_input_producer(tf.constant([], dtype=tf.string))
    names = tf.placeholder(tf.string, [None])
    tf.train.string_input_producer(names)
    (qr,) = tf.get_collection(tf.GraphKeys.QUEUE_RUNNERS)
    with tf.Session() as sess:
        with pytest.raises(tf.errors.InvalidArgumentError, match="non-null input tensor"):
            sess.run(qr.enqueue_ops[0], {names: []})


# --- a classic TF1 pipeline end to end -----------------------------------------------------------
def test_slice_producer_batch_and_train_end_to_end():
    n, batch_size, num_epochs = 8, 4, 10
    xs = np.linspace(-1, 1, n).astype(np.float32).reshape(n, 1)
    ys = 3.0 * xs + 0.5
    x, y = tf.train.slice_input_producer([tf.constant(xs), tf.constant(ys)],
                                         num_epochs=num_epochs, seed=1)
    xb, yb = tf.train.batch([x, y], batch_size=batch_size, capacity=8)
    assert xb.shape.as_list() == [batch_size, 1]
    w = tf.Variable(tf.zeros([1, 1]))
    b = tf.Variable(tf.zeros([1]))
    loss = tf.reduce_mean(tf.square(tf.matmul(xb, w) + b - yb))
    train = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
    with tf.Session() as sess:
        sess.run([tf.global_variables_initializer(), tf.local_variables_initializer()])
        coord, threads = _start(sess)
        losses = []
        try:
            while not coord.should_stop():
                _, value, xv, yv = sess.run([train, loss, xb, yb], options=TIMEOUT)
                np.testing.assert_allclose(yv, 3.0 * xv + 0.5, rtol=1e-6)  # rows aligned
                losses.append(value)
        except tf.errors.OutOfRangeError:
            pass  # the epochs ran out: the normal end of a TF1 training loop
        finally:
            coord.request_stop()
        coord.join(threads, stop_grace_period_secs=10)
        assert not any(t.is_alive() for t in threads)
        assert len(losses) == n * num_epochs // batch_size
        assert losses[-1] < 0.1 * losses[0]
        np.testing.assert_allclose(sess.run(w).ravel(), [3.0], atol=0.5)


@pytest.mark.parametrize("use_resource", [False, True])
def test_variable_count_up_to_and_its_cpu_placement(use_resource):
    config = tf.ConfigProto(dflab={"simulated_devices": {"GPU": 1}}, allow_soft_placement=True)
    with tf.device("/gpu:0"):
        v = tf.Variable(0, dtype=tf.int32, name="v", use_resource=use_resource)
        c = v.count_up_to(2)
    with tf.Session(config=config) as sess:
        sess.run(v.initializer)
        assert [sess.run(c), sess.run(c)] == [0, 1]
        with pytest.raises(tf.errors.OutOfRangeError, match="Reached limit of 2"):
            sess.run(c)
        plans = list(sess._master._plans.values())
    # TF has no GPU kernel for CountUpTo: its colocation group goes to the CPU, the variable
    # too, in the initializer's plan as well (groups are formed over the whole graph).
    assert [p.placement[v.op].device[-5:] for p in plans] == ["CPU:0", "CPU:0"]
    assert plans[1].placement[c.op].device.endswith("CPU:0")
