"""Concurrent updates of one shared variable on the host lose nothing: reference variables'
with ``use_locking=True``, resource variables' always (the table is in
``tests/concurrent_updates_util.py``); values a resource read returned stay as they were."""

import threading

import numpy as np
import pytest
from concurrent_updates_util import (
    CASES,
    LOCKED_RUNS,
    check_case,
    check_unlocked_case,
    run_concurrently,
)

import dflab as tf
from dflab.ops import training_ops


@pytest.mark.parametrize("case, use_resource", LOCKED_RUNS)
def test_concurrent_updates_lose_nothing(case, use_resource):
    check_case(case, use_resource)


@pytest.mark.parametrize("case", [c for c in CASES if not c.resource_only],
                         ids=lambda c: c.name)
def test_unlocked_reference_updates_keep_shapes(case):
    check_unlocked_case(case)


def test_a_resource_read_is_a_snapshot_while_scatters_run():
    """Readers of a table that every scatter adds ones to (so each consistent value is
    uniform) race writers: each value a read returned is uniform, and its two consumers,
    run at different moments, see the same sum."""
    v = tf.Variable(np.zeros((64, 32), np.float32), use_resource=True)
    write = v.scatter_add(tf.IndexedSlices(np.ones((64, 32), np.float32), np.arange(64)))
    value = v.read_value()
    first = tf.reduce_sum(value)
    later = tf.reduce_sum(tf.identity(tf.identity(value)))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        stop = threading.Event()
        failures = []

        def writer():
            while not stop.is_set():
                sess.run(write.op)

        def reader():
            try:
                for _ in range(300):
                    a, b, x = sess.run([first, later, value])
                    assert a == b == x.sum() and x.min() == x.max(), (a, b, x.min(), x.max())
            except AssertionError as e:
                failures.append(e)

        threads = [threading.Thread(target=writer) for _ in range(3)]
        threads += [threading.Thread(target=reader) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads[3:]:
            t.join()
        stop.set()
        for t in threads[:3]:
            t.join()
    assert not failures, failures[0]


@pytest.mark.parametrize("kind", ["scatter", "sparse apply", "dense apply"])
def test_locked_resource_updates_keep_writing_into_the_variables_buffers(kind):
    """With no read holding a resource variable's value, concurrent updates write into its own
    buffers (no copy per update, the point of the in-place paths): an update's references to
    the buffer end before it releases the lock, so the next one finds it unshared. On the host,
    whose buffers are NumPy arrays (a GPU's dense updates write in place anyway)."""
    with tf.device("/cpu:0"):
        variables, update = _resource_update(kind)
    assert update.type.startswith("Resource")
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(update)
        states = [sess.devices["CPU:0"].resources.variable(v.handle.op.name) for v in variables]
        buffers = [id(s.value) for s in states]
        run_concurrently(sess, [update], 50)
        assert [id(s.value) for s in states] == buffers
        assert all(not s.value.flags.writeable for s in states)  # frozen again


def _resource_update(kind):
    if kind == "scatter":
        variables = [tf.Variable(np.zeros((400, 16), np.float32))]
        write = variables[0].scatter_add(tf.IndexedSlices(np.ones((6, 16), np.float32),
                                                          [0, 2, 0, 1, 2, 0]))
        update = write.op.control_inputs[0]  # the scatter alone, without the read after it
    elif kind == "sparse apply":
        variables = [tf.Variable(np.zeros((400, 16), np.float32)) for _ in range(2)]
        update = training_ops.sparse_apply_momentum(*variables, 0.1, np.ones((6, 16), np.float32),
                                                    [0, 2, 0, 1, 2, 0], 0.9)
    else:  # big enough for the host's blocked update, which writes in place when unshared
        variables = [tf.Variable(np.zeros((256, 256), np.float32)) for _ in range(3)]
        update = training_ops.apply_adam(*variables, 0.5, 0.5, 0.1, 0.9, 0.999, 1e-8,
                                         np.ones((256, 256), np.float32))
    return variables, update
