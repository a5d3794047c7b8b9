"""``tf.train.MomentumOptimizer``: accum = momentum * accum + grad; var -= lr * accum
(Nesterov: var -= lr * (grad + momentum * accum)). One slot per variable, ``"momentum"``."""

from __future__ import annotations

from dflab.framework import ops as _ops
from dflab.ops import training_ops
from dflab.train.optimizer import Optimizer


class MomentumOptimizer(Optimizer):
    def __init__(self, learning_rate, momentum, use_locking=False, name="Momentum",
                 use_nesterov=False):
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._momentum = momentum
        self._use_nesterov = use_nesterov

    def _create_slots(self, var_list):
        for v in var_list:
            self._zeros_slot(v, "momentum", self._name)

    def _prepare(self):
        self._learning_rate_tensor = _ops.convert_to_tensor(
            self._call_if_callable(self._learning_rate), name="learning_rate")
        self._momentum_tensor = _ops.convert_to_tensor(
            self._call_if_callable(self._momentum), name="momentum")

    def _apply_dense(self, grad, var):
        return training_ops.apply_momentum(
            var, self.get_slot(var, "momentum"), self._cast(self._learning_rate_tensor, var),
            grad, self._cast(self._momentum_tensor, var), use_locking=self._use_locking,
            use_nesterov=self._use_nesterov)

    def _apply_sparse_duplicate_indices(self, grad, var):
        return self._apply_sparse(grad, var)  # the kernel sums repeated rows

    def _apply_sparse(self, grad, var):
        return training_ops.sparse_apply_momentum(
            var, self.get_slot(var, "momentum"), self._cast(self._learning_rate_tensor, var),
            grad.values, grad.indices, self._cast(self._momentum_tensor, var),
            use_locking=self._use_locking, use_nesterov=self._use_nesterov)
