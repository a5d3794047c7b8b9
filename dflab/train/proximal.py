"""``tf.train.ProximalGradientDescentOptimizer`` and ``tf.train.ProximalAdagradOptimizer``
(FOBOS, Duchi & Singer 2009): a gradient step (plain, or Adagrad's with the ``"accumulator"``
slot), then the proximal step of l1 (soft thresholding) and l2 (scaling) regularization, in
TF's ``ApplyProximal*`` kernels.

As in TF, the dense updates take the hyper-parameters as given (a float64 variable needs
float64 ones) and the sparse updates of resource variables cast them.
"""

from __future__ import annotations

from dflab.framework import constant_op
from dflab.framework import ops as _ops
from dflab.ops import training_ops
from dflab.train.optimizer import Optimizer


class _Proximal(Optimizer):
    def __init__(self, learning_rate, l1_regularization_strength, l2_regularization_strength,
                 use_locking, name):
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._l1_regularization_strength = l1_regularization_strength
        self._l2_regularization_strength = l2_regularization_strength
        self._hyper_tensors = None

    def _prepare(self):
        self._hyper_tensors = [
            _ops.convert_to_tensor(self._learning_rate, name="learning_rate"),
            _ops.convert_to_tensor(self._l1_regularization_strength,
                                   name="l1_regularization_strength"),
            _ops.convert_to_tensor(self._l2_regularization_strength,
                                   name="l2_regularization_strength")]

    def _sparse_hyper(self, var):
        if getattr(var, "_is_resource", False):
            return [self._cast(t, var) for t in self._hyper_tensors]
        return self._hyper_tensors


class ProximalGradientDescentOptimizer(_Proximal):
    def __init__(self, learning_rate, l1_regularization_strength=0.0,
                 l2_regularization_strength=0.0, use_locking=False,
                 name="ProximalGradientDescent"):
        super().__init__(learning_rate, l1_regularization_strength, l2_regularization_strength,
                         use_locking, name)

    def _apply_dense(self, grad, var):
        return training_ops.apply_proximal_gradient_descent(
            var, *self._hyper_tensors, grad, use_locking=self._use_locking)

    def _apply_sparse(self, grad, var):
        return training_ops.sparse_apply_proximal_gradient_descent(
            var, *self._sparse_hyper(var), grad.values, grad.indices,
            use_locking=self._use_locking)


class ProximalAdagradOptimizer(_Proximal):
    def __init__(self, learning_rate, initial_accumulator_value=0.1,
                 l1_regularization_strength=0.0, l2_regularization_strength=0.0,
                 use_locking=False, name="ProximalAdagrad"):
        if initial_accumulator_value <= 0.0:
            raise ValueError("initial_accumulator_value must be positive: "
                             f"{initial_accumulator_value}")
        super().__init__(learning_rate, l1_regularization_strength, l2_regularization_strength,
                         use_locking, name)
        self._initial_accumulator_value = initial_accumulator_value

    def _create_slots(self, var_list):
        for v in var_list:
            with _ops.colocate_with(v.op):
                val = constant_op.constant(self._initial_accumulator_value,
                                           shape=v.get_shape(), dtype=v.dtype.base_dtype)
            self._get_or_make_slot(v, val, "accumulator", self._name)

    def _apply_dense(self, grad, var):
        return training_ops.apply_proximal_adagrad(
            var, self.get_slot(var, "accumulator"), *self._hyper_tensors, grad,
            use_locking=self._use_locking)

    def _apply_sparse(self, grad, var):
        return training_ops.sparse_apply_proximal_adagrad(
            var, self.get_slot(var, "accumulator"), *self._sparse_hyper(var), grad.values,
            grad.indices, use_locking=self._use_locking)
