"""``tf.train.AdagradOptimizer``: accum += grad^2; var -= lr * grad / sqrt(accum), with the
accumulator slot (``"accumulator"``) starting at ``initial_accumulator_value``."""

from __future__ import annotations

from dflab.framework import ops as _ops
from dflab.ops import array_ops, init_ops, training_ops
from dflab.train.optimizer import Optimizer


class AdagradOptimizer(Optimizer):
    def __init__(self, learning_rate, initial_accumulator_value=0.1, use_locking=False,
                 name="Adagrad"):
        if initial_accumulator_value <= 0.0:
            raise ValueError("initial_accumulator_value must be positive: "
                             f"{initial_accumulator_value}")
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._initial_accumulator_value = initial_accumulator_value
        self._learning_rate_tensor = None

    def _create_slots(self, var_list):
        for v in var_list:
            dtype = v.dtype.base_dtype
            if v.get_shape().is_fully_defined():
                init = init_ops.constant_initializer(self._initial_accumulator_value,
                                                     dtype=dtype)
            else:
                def init(v=v, dtype=dtype):
                    return array_ops.ones_like(v.initialized_value(), dtype=dtype) * \
                        self._initial_accumulator_value
            self._get_or_make_slot_with_initializer(v, init, v.get_shape(), dtype,
                                                    "accumulator", self._name)

    def _prepare(self):
        self._learning_rate_tensor = _ops.convert_to_tensor(
            self._call_if_callable(self._learning_rate), name="learning_rate")

    def _apply_dense(self, grad, var):
        return training_ops.apply_adagrad(
            var, self.get_slot(var, "accumulator"), self._cast(self._learning_rate_tensor, var),
            grad, use_locking=self._use_locking)

    def _apply_sparse_duplicate_indices(self, grad, var):
        return self._apply_sparse(grad, var)  # the kernel sums repeated rows

    def _apply_sparse(self, grad, var):
        return training_ops.sparse_apply_adagrad(
            var, self.get_slot(var, "accumulator"), self._cast(self._learning_rate_tensor, var),
            grad.values, grad.indices, use_locking=self._use_locking)
