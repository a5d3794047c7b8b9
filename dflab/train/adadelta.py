"""``tf.train.AdadeltaOptimizer`` (Zeiler 2012): per-element step sizes from running averages
of squared gradients (slot ``"accum"``) and of squared updates (slot ``"accum_update"``), both
starting at zero; TF's ``ApplyAdadelta`` kernels do the update."""

from __future__ import annotations

from dflab.framework import ops as _ops
from dflab.ops import training_ops
from dflab.train.optimizer import Optimizer


class AdadeltaOptimizer(Optimizer):
    def __init__(self, learning_rate=0.001, rho=0.95, epsilon=1e-8, use_locking=False,
                 name="Adadelta"):
        super().__init__(use_locking, name)
        self._lr = learning_rate
        self._rho = rho
        self._epsilon = epsilon
        self._lr_t = self._rho_t = self._epsilon_t = None

    def _create_slots(self, var_list):
        for v in var_list:
            self._zeros_slot(v, "accum", self._name)
            self._zeros_slot(v, "accum_update", self._name)

    def _prepare(self):
        c = self._call_if_callable
        self._lr_t = _ops.convert_to_tensor(c(self._lr), name="lr")
        self._rho_t = _ops.convert_to_tensor(c(self._rho), name="rho")
        self._epsilon_t = _ops.convert_to_tensor(c(self._epsilon), name="epsilon")

    def _hyper(self, var):
        return [self._cast(t, var) for t in (self._lr_t, self._rho_t, self._epsilon_t)]

    def _apply_dense(self, grad, var):
        return training_ops.apply_adadelta(
            var, self.get_slot(var, "accum"), self.get_slot(var, "accum_update"),
            *self._hyper(var), grad, use_locking=self._use_locking)

    def _apply_sparse(self, grad, var):
        return training_ops.sparse_apply_adadelta(
            var, self.get_slot(var, "accum"), self.get_slot(var, "accum_update"),
            *self._hyper(var), grad.values, grad.indices, use_locking=self._use_locking)
