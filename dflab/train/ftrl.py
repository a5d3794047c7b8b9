"""``tf.train.FtrlOptimizer``: FTRL-Proximal (McMahan et al. 2013) with online l2 and, given
``l2_shrinkage_regularization_strength``, shrinkage-type l2 (``ApplyFtrlV2``). Slots:
``"accum"`` (starting at ``initial_accumulator_value``, named ``<var>/<accum_name or name>``)
and ``"linear"`` (zeros, ``<var>/<linear_name or name>``, so ``<var>/Ftrl_1`` by default).
``beta`` adds beta / (2 lr) to the l2 strength, as TF does."""

from __future__ import annotations

from dflab.framework import ops as _ops
from dflab.ops import array_ops, math_ops, training_ops
from dflab.train.optimizer import Optimizer


class FtrlOptimizer(Optimizer):
    def __init__(self, learning_rate, learning_rate_power=-0.5, initial_accumulator_value=0.1,
                 l1_regularization_strength=0.0, l2_regularization_strength=0.0,
                 use_locking=False, name="Ftrl", accum_name=None, linear_name=None,
                 l2_shrinkage_regularization_strength=0.0, beta=None):
        super().__init__(use_locking, name)
        checks = [
            ("initial_accumulator_value", initial_accumulator_value, "positive or zero"),
            ("learning_rate_power", -learning_rate_power, "negative or zero"),
            ("l1_regularization_strength", l1_regularization_strength, "positive or zero"),
            ("l2_regularization_strength", l2_regularization_strength, "positive or zero"),
            ("l2_shrinkage_regularization_strength", l2_shrinkage_regularization_strength,
             "positive or zero")]
        for arg, value, want in checks:
            if value < 0.0:
                shown = -value if arg == "learning_rate_power" else value
                raise ValueError(f"{arg} {shown:f} needs to be {want}")
        self._learning_rate = learning_rate
        self._learning_rate_power = learning_rate_power
        self._initial_accumulator_value = initial_accumulator_value
        self._l1_regularization_strength = l1_regularization_strength
        self._l2_regularization_strength = l2_regularization_strength
        self._beta = 0.0 if beta is None else beta
        self._l2_shrinkage_regularization_strength = l2_shrinkage_regularization_strength
        self._accum_name = accum_name
        self._linear_name = linear_name
        self._hyper_tensors = None

    def _create_slots(self, var_list):
        def accum_initializer(shape, dtype=None, partition_info=None):
            return array_ops.ones(shape, dtype=dtype) * self._initial_accumulator_value

        for v in var_list:
            self._get_or_make_slot_with_initializer(
                v, accum_initializer, v.get_shape(), v.dtype.base_dtype, "accum",
                self._accum_name or self._name)
            self._zeros_slot(v, "linear", self._linear_name or self._name)

    def _prepare(self):
        lr = _ops.convert_to_tensor(self._learning_rate, name="learning_rate")
        l1 = _ops.convert_to_tensor(self._l1_regularization_strength,
                                    name="l1_regularization_strength")
        l2 = _ops.convert_to_tensor(
            self._l2_regularization_strength
            + self._beta / (2.0 * math_ops.maximum(self._learning_rate, 1e-36)),
            name="adjusted_l2_regularization_strength")
        shrinkage = _ops.convert_to_tensor(self._l2_shrinkage_regularization_strength,
                                           name="l2_shrinkage_regularization_strength")
        power = _ops.convert_to_tensor(self._learning_rate_power, name="learning_rate_power")
        self._hyper_tensors = (lr, l1, l2, shrinkage, power)

    def _shrinks(self) -> bool:
        return self._l2_shrinkage_regularization_strength > 0.0

    def _hyper(self, var):
        lr, l1, l2, shrinkage, power = [self._cast(t, var) for t in self._hyper_tensors]
        return [lr, l1, l2, shrinkage, power] if self._shrinks() else [lr, l1, l2, power]

    def _apply_dense(self, grad, var):
        build = training_ops.apply_ftrl_v2 if self._shrinks() else training_ops.apply_ftrl
        return build(var, self.get_slot(var, "accum"), self.get_slot(var, "linear"), grad,
                     *self._hyper(var), use_locking=self._use_locking)

    def _apply_sparse(self, grad, var):
        build = (training_ops.sparse_apply_ftrl_v2 if self._shrinks()
                 else training_ops.sparse_apply_ftrl)
        return build(var, self.get_slot(var, "accum"), self.get_slot(var, "linear"),
                     grad.values, grad.indices, *self._hyper(var),
                     use_locking=self._use_locking)
