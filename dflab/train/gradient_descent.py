"""``tf.train.GradientDescentOptimizer``: var -= learning_rate * gradient.

Sparse gradients need no slot and tolerate repeated rows, so they go straight to ``ScatterSub``
(as in TF1) instead of the deduplicating path.
"""

from __future__ import annotations

from dflab.framework import ops as _ops
from dflab.ops import training_ops
from dflab.ops.gradients import IndexedSlices
from dflab.train.optimizer import Optimizer


class GradientDescentOptimizer(Optimizer):
    def __init__(self, learning_rate, use_locking=False, name="GradientDescent"):
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._learning_rate_tensor = None

    def _prepare(self):
        lr = self._call_if_callable(self._learning_rate)
        self._learning_rate_tensor = _ops.convert_to_tensor(lr, name="learning_rate")

    def _apply_dense(self, grad, var):
        return training_ops.apply_gradient_descent(
            var, self._cast(self._learning_rate_tensor, var), grad,
            use_locking=self._use_locking)

    def _apply_sparse_duplicate_indices(self, grad, var):
        delta = IndexedSlices(grad.values * self._cast(self._learning_rate_tensor, var),
                              grad.indices, grad.dense_shape)
        return var.scatter_sub(delta, use_locking=self._use_locking)

    def _apply_sparse(self, grad, var):
        return self._apply_sparse_duplicate_indices(grad, var)
