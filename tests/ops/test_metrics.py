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


def test_new_metrics_fill_the_collections_they_are_given():
    labels = tf.placeholder(tf.float32, [None])
    preds = tf.placeholder(tf.float32, [None])
    built = [
        tf.metrics.precision(labels, preds, metrics_collections=["v"], updates_collections=["u"]),
        tf.metrics.auc(labels, preds, metrics_collections=["v"], updates_collections=["u"]),
        tf.metrics.true_negatives_at_thresholds(labels, preds, [0.5], metrics_collections=["v"],
                                                updates_collections=["u"]),
        tf.metrics.root_mean_squared_error(labels, preds, metrics_collections=["v"],
                                           updates_collections=["u"]),
        tf.metrics.mean_iou(tf.cast(labels, tf.int32), tf.cast(preds, tf.int32), 2,
                            metrics_collections=["v"], updates_collections=["u"]),
        tf.metrics.precision_at_k(tf.cast(tf.expand_dims(labels, 1), tf.int64),
                                  tf.stack([preds, 1 - preds], 1), 1,
                                  metrics_collections=["v"], updates_collections=["u"]),
    ]
    assert tf.get_collection("v") == [v for v, _ in built]
    assert tf.get_collection("u") == [u for _, u in built]
    assert not tf.trainable_variables()
    assert set(tf.local_variables()) == set(tf.get_collection(tf.GraphKeys.METRIC_VARIABLES))


def test_auc_checks_predictions_are_probabilities_when_run():
    labels = tf.placeholder(tf.float32, [None])
    preds = tf.placeholder(tf.float32, [None])
    _, update = tf.metrics.auc(labels, preds)
    with tf.Session() as sess:
        sess.run(tf.local_variables_initializer())
        sess.run(update, {labels: [1.0, 0.0], preds: [0.2, 0.9]})
        with pytest.raises(tf.errors.InvalidArgumentError, match="predictions must be in"):
            sess.run(update, {labels: [1.0], preds: [1.5]})


def test_precision_and_recall_match_numpy_counts():
    rng = np.random.RandomState(3)
    labels = tf.placeholder(tf.bool, [None])
    preds = tf.placeholder(tf.bool, [None])
    p, p_up = tf.metrics.precision(labels, preds)
    r, r_up = tf.metrics.recall(labels, preds)
    seen_l, seen_p = np.zeros(0, bool), np.zeros(0, bool)
    with tf.Session() as sess:
        sess.run(tf.local_variables_initializer())
        assert sess.run([p, r]) == [0.0, 0.0]
        for n in (5, 8, 3):
            lab, pred = rng.rand(n) > 0.5, rng.rand(n) > 0.4
            seen_l, seen_p = np.concatenate([seen_l, lab]), np.concatenate([seen_p, pred])
            sess.run([p_up, r_up], {labels: lab, preds: pred})
        tp = np.sum(seen_l & seen_p)
        assert sess.run(p) == pytest.approx(tp / np.sum(seen_p))
        assert sess.run(r) == pytest.approx(tp / np.sum(seen_l))
