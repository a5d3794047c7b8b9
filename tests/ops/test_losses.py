"""tf.losses against NumPy, with weights and every reduction."""

import numpy as np
import pytest

import dflab as tf

R = tf.losses.Reduction


def _reduce(losses, weights, reduction):
    w = np.broadcast_to(weights, losses.shape).astype(np.float64)
    weighted = losses * w
    if reduction == R.NONE:
        return weighted
    total = weighted.sum()
    if reduction == R.SUM:
        return total
    if reduction == R.MEAN:
        return total / w.sum() if w.sum() else 0.0
    if reduction == R.SUM_OVER_BATCH_SIZE:
        return total / losses.size
    n = np.count_nonzero(w)
    return total / n if n else 0.0


RNG = np.random.default_rng(0)
LABELS = RNG.random((4, 3))
PREDS = RNG.random((4, 3))
WEIGHTS = [1.0, np.array([[1.0], [0.0], [2.0], [0.5]])]


@pytest.mark.parametrize("reduction", R.all())
@pytest.mark.parametrize("weights", WEIGHTS)
@pytest.mark.parametrize("name,ref", [
    ("mean_squared_error", lambda y, p: (p - y) ** 2),
    ("absolute_difference", lambda y, p: np.abs(p - y)),
    ("huber_loss", lambda y, p: np.where(np.abs(p - y) <= 1.0, 0.5 * (p - y) ** 2,
                                         np.abs(p - y) - 0.5)),
    ("log_loss", lambda y, p: -y * np.log(p + 1e-7) - (1 - y) * np.log(1 - p + 1e-7)),
])
def test_regression_losses(name, ref, weights, reduction):
    fn = getattr(tf.losses, name)
    loss = fn(LABELS, PREDS * (3 if name == "huber_loss" else 1), weights=weights,
              reduction=reduction)
    with tf.Session() as s:
        got = s.run(loss)
    want = _reduce(ref(LABELS, PREDS * (3 if name == "huber_loss" else 1)), weights, reduction)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    assert loss in tf.get_collection(tf.GraphKeys.LOSSES)


def test_classification_losses_and_total():
    logits = RNG.standard_normal((5, 4))
    labels = RNG.integers(0, 4, 5)
    onehot = np.eye(4)[labels]
    logp = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    xent = -logp[np.arange(5), labels]
    sig = 1 / (1 + np.exp(-logits))
    sig_x = -(onehot * np.log(sig) + (1 - onehot) * np.log(1 - sig))
    a = tf.losses.sparse_softmax_cross_entropy(labels, logits)
    b = tf.losses.softmax_cross_entropy(onehot, logits)
    c = tf.losses.sigmoid_cross_entropy(onehot, logits)
    tf.add_to_collection(tf.GraphKeys.REGULARIZATION_LOSSES, tf.constant(0.5, tf.float64))
    total = tf.losses.get_total_loss()
    with tf.Session() as s:
        ga, gb, gc, gt = s.run([a, b, c, total])
    np.testing.assert_allclose(ga, xent.mean(), rtol=1e-6)
    np.testing.assert_allclose(gb, xent.mean(), rtol=1e-6)
    np.testing.assert_allclose(gc, sig_x.mean(), rtol=1e-6)
    np.testing.assert_allclose(gt, ga + gb + gc + 0.5, rtol=1e-6)


def test_bad_reduction_and_shapes():
    with pytest.raises(ValueError):
        tf.losses.mean_squared_error(LABELS, PREDS, reduction="bogus")
    with pytest.raises(ValueError):
        tf.losses.mean_squared_error(LABELS, PREDS[:, :2])
