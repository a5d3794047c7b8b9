"""``tf.train.AdamOptimizer`` (Kingma & Ba), TF1's formulation:

lr_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t); m = beta1 * m + (1 - beta1) * g;
v = beta2 * v + (1 - beta2) * g^2; var -= lr_t * m / (sqrt(v) + epsilon).

beta1^t and beta2^t live in two non-slot variables, ``beta1_power`` and ``beta2_power``,
colocated with the first variable (by name) and multiplied by beta1, beta2 after every step.
Slots ``"m"`` and ``"v"`` are named ``<var>/Adam`` and ``<var>/Adam_1``.
"""

from __future__ import annotations

from dflab.framework import ops as _ops
from dflab.ops import control_flow_ops, training_ops
from dflab.train.optimizer import Optimizer


class AdamOptimizer(Optimizer):
    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8,
                 use_locking=False, name="Adam"):
        super().__init__(use_locking, name)
        self._lr = learning_rate
        self._beta1 = beta1
        self._beta2 = beta2
        self._epsilon = epsilon
        self._lr_t = self._beta1_t = self._beta2_t = self._epsilon_t = None

    def _get_beta_accumulators(self):
        g = _ops.get_default_graph()
        return (self._get_non_slot_variable("beta1_power", graph=g),
                self._get_non_slot_variable("beta2_power", graph=g))

    def _create_slots(self, var_list):
        first_var = min(var_list, key=lambda x: x.name)
        self._create_non_slot_variable(self._beta1, "beta1_power", first_var)
        self._create_non_slot_variable(self._beta2, "beta2_power", first_var)
        for v in var_list:
            self._zeros_slot(v, "m", self._name)
            self._zeros_slot(v, "v", self._name)

    def _prepare(self):
        c = self._call_if_callable
        self._lr_t = _ops.convert_to_tensor(c(self._lr), name="learning_rate")
        self._beta1_t = _ops.convert_to_tensor(c(self._beta1), name="beta1")
        self._beta2_t = _ops.convert_to_tensor(c(self._beta2), name="beta2")
        self._epsilon_t = _ops.convert_to_tensor(c(self._epsilon), name="epsilon")

    def _hyper(self, var):
        beta1_power, beta2_power = self._get_beta_accumulators()
        return [self._cast(t, var) for t in (beta1_power, beta2_power, self._lr_t,
                                              self._beta1_t, self._beta2_t, self._epsilon_t)]

    def _apply_dense(self, grad, var):
        return training_ops.apply_adam(
            var, self.get_slot(var, "m"), self.get_slot(var, "v"), *self._hyper(var), grad,
            use_locking=self._use_locking)

    def _apply_sparse_duplicate_indices(self, grad, var):
        return self._apply_sparse(grad, var)  # the kernel sums repeated rows

    def _apply_sparse(self, grad, var):
        return training_ops.sparse_apply_adam(
            var, self.get_slot(var, "m"), self.get_slot(var, "v"), *self._hyper(var),
            grad.values, grad.indices, use_locking=self._use_locking)

    def _finish(self, update_ops, name_scope):
        # Advance beta1^t and beta2^t once every variable has been updated with the old ones.
        with _ops.control_dependencies(update_ops):
            beta1_power, beta2_power = self._get_beta_accumulators()
            with _ops.colocate_with(beta1_power.op):
                update_beta1 = beta1_power.assign(beta1_power * self._beta1_t,
                                                  use_locking=self._use_locking)
                update_beta2 = beta2_power.assign(beta2_power * self._beta2_t,
                                                  use_locking=self._use_locking)
        return control_flow_ops.group(*update_ops, update_beta1, update_beta2, name=name_scope)
