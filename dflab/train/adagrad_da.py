"""``tf.train.AdagradDAOptimizer``: Adagrad dual averaging (Duchi et al. 2011), for sparse
linear models. Slots ``"gradient_accumulator"`` (zeros) and ``"gradient_squared_accumulator"``
(``initial_gradient_squared_accumulator_value``); the update reads ``global_step + 1`` (int64)
as the number of steps averaged over, as TF's ``ApplyAdagradDA`` does."""

from __future__ import annotations

from dflab.framework import constant_op
from dflab.framework import ops as _ops
from dflab.ops import array_ops, training_ops
from dflab.train.optimizer import Optimizer


class AdagradDAOptimizer(Optimizer):
    def __init__(self, learning_rate, global_step, initial_gradient_squared_accumulator_value=0.1,
                 l1_regularization_strength=0.0, l2_regularization_strength=0.0,
                 use_locking=False, name="AdagradDA"):
        if initial_gradient_squared_accumulator_value <= 0.0:
            raise ValueError("initial_gradient_squared_accumulator_value must be positive: "
                             f"{initial_gradient_squared_accumulator_value}")
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._initial_gradient_squared_accumulator_value = \
            initial_gradient_squared_accumulator_value
        self._l1_regularization_strength = l1_regularization_strength
        self._l2_regularization_strength = l2_regularization_strength
        self._global_step = global_step
        self._learning_rate_tensor = None
        self._global_step_on_worker = None

    def _create_slots(self, var_list):
        for v in var_list:
            dtype = v.dtype.base_dtype
            with _ops.colocate_with(v.op):
                g_val = constant_op.constant(0.0, shape=v.get_shape(), dtype=dtype)
                gg_val = constant_op.constant(self._initial_gradient_squared_accumulator_value,
                                              shape=v.get_shape(), dtype=dtype)
            self._get_or_make_slot(v, g_val, "gradient_accumulator", self._name)
            self._get_or_make_slot(v, gg_val, "gradient_squared_accumulator", self._name)

    def _prepare(self):
        self._learning_rate_tensor = _ops.convert_to_tensor(self._learning_rate,
                                                            name="learning_rate")
        with _ops.colocate_with(self._learning_rate_tensor.op):
            self._global_step_on_worker = array_ops.identity(self._global_step) + 1

    def _args(self, var):
        with _ops.device(var.device):
            global_step = array_ops.identity(self._global_step_on_worker)
        return [self._cast(self._learning_rate_tensor, var),
                self._cast(self._l1_regularization_strength, var),
                self._cast(self._l2_regularization_strength, var), global_step]

    def _apply_dense(self, grad, var):
        return training_ops.apply_adagrad_da(
            var, self.get_slot(var, "gradient_accumulator"),
            self.get_slot(var, "gradient_squared_accumulator"), grad, *self._args(var),
            use_locking=self._use_locking)

    def _apply_sparse(self, grad, var):
        return training_ops.sparse_apply_adagrad_da(
            var, self.get_slot(var, "gradient_accumulator"),
            self.get_slot(var, "gradient_squared_accumulator"), grad.values, grad.indices,
            *self._args(var), use_locking=self._use_locking)
