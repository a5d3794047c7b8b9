"""tf.metrics: streaming values over several runs, against NumPy over the same batches."""

import numpy as np
import pytest

import dflab as tf


def test_accuracy_accumulates_over_batches_and_resets():
    labels = tf.placeholder(tf.int64, [None])
    preds = tf.placeholder(tf.int64, [None])
    acc, update = tf.metrics.accuracy(labels, preds)
    assert sorted(v.op.name for v in tf.local_variables()) == ["accuracy/count",
                                                              "accuracy/total"]
    assert tf.get_collection(tf.GraphKeys.METRIC_VARIABLES) == tf.local_variables()
    assert not tf.trainable_variables()
    batches = [([1, 2, 3, 4], [1, 2, 0, 4]), ([1, 1], [0, 0]), ([5], [5])]
    with tf.Session() as sess:
        sess.run(tf.local_variables_initializer())
        assert sess.run(acc) == 0.0  # nothing seen yet: 0, not NaN
        seen_l, seen_p = [], []
        for lab, pred in batches:
            seen_l += lab
            seen_p += pred
            got = sess.run(update, {labels: lab, preds: pred})
            assert got == pytest.approx(np.mean(np.equal(seen_l, seen_p)))
        assert sess.run(acc) == pytest.approx(4 / 7)
        sess.run(tf.local_variables_initializer())
        assert sess.run(acc) == 0.0


def test_weighted_mean_and_errors_match_numpy():
    rng = np.random.RandomState(0)
    x = tf.placeholder(tf.float32, [None])
    y = tf.placeholder(tf.float32, [None])
    w = tf.placeholder(tf.float32, [None])
    m, m_up = tf.metrics.mean(x, weights=w)
    mse, mse_up = tf.metrics.mean_squared_error(y, x)
    mae, mae_up = tf.metrics.mean_absolute_error(y, x)
    xs, ys, ws = [], [], []
    with tf.Session() as sess:
        sess.run(tf.local_variables_initializer())
        for _ in range(3):
            bx, by, bw = rng.randn(5), rng.randn(5), rng.rand(5)
            xs.append(bx)
            ys.append(by)
            ws.append(bw)
            sess.run([m_up, mse_up, mae_up], {x: bx, y: by, w: bw})
        got = sess.run([m, mse, mae])
    xs, ys, ws = map(np.concatenate, (xs, ys, ws))
    np.testing.assert_allclose(got, [np.sum(xs * ws) / np.sum(ws), np.mean((ys - xs) ** 2),
                                     np.mean(np.abs(ys - xs))], rtol=1e-5)


def test_metric_updates_and_values_join_the_collections_asked_for():
    acc, update = tf.metrics.accuracy([1, 2], [1, 1], metrics_collections=["m"],
                                      updates_collections=["u"])
    assert tf.get_collection("m") == [acc] and tf.get_collection("u") == [update]
    with pytest.raises(ValueError, match="incompatible"):
        tf.metrics.accuracy(tf.constant([1, 2]), tf.constant([1, 2, 3]))
