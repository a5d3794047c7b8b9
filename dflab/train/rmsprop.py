"""``tf.train.RMSPropOptimizer``: a moving average of squared gradients scales each step.

ms = decay * ms + (1 - decay) * grad^2; mom = momentum * mom + lr * grad / sqrt(ms + eps);
var -= mom. ``centered`` also tracks the mean gradient mg and divides by sqrt(ms - mg^2 + eps).
Slots: ``"rms"`` (starts at 1), ``"mg"`` when centered, ``"momentum"``.
"""

from __future__ import annotations

from dflab.framework import ops as _ops
from dflab.ops import array_ops, init_ops, training_ops
from dflab.train.optimizer import Optimizer


class RMSPropOptimizer(Optimizer):
    def __init__(self, learning_rate, decay=0.9, momentum=0.0, epsilon=1e-10, use_locking=False,
                 centered=False, name="RMSProp"):
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._decay = decay
        self._momentum = momentum
        self._epsilon = epsilon
        self._centered = centered

    def _create_slots(self, var_list):
        for v in var_list:
            dtype = v.dtype.base_dtype
            if v.get_shape().is_fully_defined():
                init_rms = init_ops.ones_initializer(dtype=dtype)
            else:
                def init_rms(v=v, dtype=dtype):
                    return array_ops.ones_like(v.initialized_value(), dtype=dtype)
            self._get_or_make_slot_with_initializer(v, init_rms, v.get_shape(), dtype, "rms",
                                                    self._name)
            if self._centered:
                self._zeros_slot(v, "mg", self._name)
            self._zeros_slot(v, "momentum", self._name)

    def _prepare(self):
        c = self._call_if_callable
        self._learning_rate_tensor = _ops.convert_to_tensor(c(self._learning_rate),
                                                            name="learning_rate")
        self._decay_tensor = _ops.convert_to_tensor(c(self._decay), name="decay")
        self._momentum_tensor = _ops.convert_to_tensor(c(self._momentum), name="momentum")
        self._epsilon_tensor = _ops.convert_to_tensor(c(self._epsilon), name="epsilon")

    def _hyper(self, var):
        return [self._cast(t, var) for t in (self._learning_rate_tensor, self._decay_tensor,
                                              self._momentum_tensor, self._epsilon_tensor)]

    def _apply_dense(self, grad, var):
        rms, mom = self.get_slot(var, "rms"), self.get_slot(var, "momentum")
        if self._centered:
            return training_ops.apply_centered_rms_prop(
                var, self.get_slot(var, "mg"), rms, mom, *self._hyper(var), grad,
                use_locking=self._use_locking)
        return training_ops.apply_rms_prop(var, rms, mom, *self._hyper(var), grad,
                                           use_locking=self._use_locking)

    def _apply_sparse_duplicate_indices(self, grad, var):
        return self._apply_sparse(grad, var)  # the kernel sums repeated rows

    def _apply_sparse(self, grad, var):
        rms, mom = self.get_slot(var, "rms"), self.get_slot(var, "momentum")
        if self._centered:
            return training_ops.sparse_apply_centered_rms_prop(
                var, self.get_slot(var, "mg"), rms, mom, *self._hyper(var), grad.values,
                grad.indices, use_locking=self._use_locking)
        return training_ops.sparse_apply_rms_prop(
            var, rms, mom, *self._hyper(var), grad.values, grad.indices,
            use_locking=self._use_locking)
