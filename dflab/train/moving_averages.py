"""``tf.train.ExponentialMovingAverage`` and ``assign_moving_average``, as TF 1.x builds them.

``apply(var_list)`` gives each variable a shadow variable (a slot named ``<var>/<name>``,
colocated with it, initialized to the variable's initial value in a graph, its current value
when executing eagerly, as TF's; a tensor's shadow starts at zero, and eagerly only variables
are averaged) and returns one op that moves every shadow towards its variable: ``shadow -= (1 -
decay) * (shadow - value)``. With ``num_updates`` the decay is ``min(decay, (1 + n) / (10 +
n))``, so early averages move fast. A tensor averaged with ``zero_debias`` keeps a biased
average and a step count beside it and stores ``biased / (1 - decay ** steps)`` (TF's
debiasing). ``variables_to_restore`` maps checkpoint names to variables so a ``Saver`` can
load the averages into the model's variables for evaluation.
"""

from __future__ import annotations

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.ops import GraphKeys
from dflab.ops import init_ops, math_ops, state_ops
from dflab.ops import variable_scope as _vs
from dflab.ops import variables as _variables
from dflab.ops.control_flow_ops import group
from dflab.train import slot_creator


def _is_variable(v) -> bool:
    return isinstance(v, _variables.Variable)  # reference and resource variables


def assign_moving_average(variable, value, decay, zero_debias=True, name=None):
    """``variable -= (variable - value) * (1 - decay)``; with ``zero_debias`` the update
    goes through a biased average and a step count (see the module docstring)."""
    with _ops.name_scope(name, "AssignMovingAvg", [variable, value, decay]) as scope:
        one_minus_decay = _ops.convert_to_tensor(1.0 - decay, name="decay") \
            if not _ops.is_tensor_like(decay) else math_ops.subtract(
                _ops.convert_to_tensor(1.0, dtype=decay.dtype.base_dtype), decay,
                name="decay")
        dtype = variable.dtype.base_dtype
        if one_minus_decay.dtype.base_dtype is not dtype:
            one_minus_decay = math_ops.cast(one_minus_decay, dtype)
        value = _ops.convert_to_tensor(value)
        if zero_debias:
            return _zero_debias(variable, value, one_minus_decay)
        return state_ops.assign_sub(
            variable, math_ops.multiply(math_ops.subtract(variable, value), one_minus_decay),
            name=scope)


def _zero_debias(unbiased, value, one_minus_decay):
    with _vs.variable_scope(unbiased.op.name, values=[unbiased, value, one_minus_decay]):
        with _ops.colocate_with(unbiased.op), _ops.control_dependencies(None):
            biased = _vs.get_variable("biased", shape=unbiased.get_shape(),
                                      dtype=unbiased.dtype.base_dtype,
                                      initializer=init_ops.zeros_initializer(),
                                      trainable=False)
            local_step = _vs.get_variable("local_step", shape=[],
                                          dtype=unbiased.dtype.base_dtype,
                                          initializer=init_ops.zeros_initializer(),
                                          trainable=False)
        update_biased = state_ops.assign_sub(
            biased, math_ops.multiply(math_ops.subtract(biased, value), one_minus_decay))
        update_step = state_ops.assign_add(local_step, 1.0)
        one = _ops.convert_to_tensor(1.0, dtype=one_minus_decay.dtype.base_dtype)
        bias_factor = math_ops.subtract(
            one, math_ops.pow(math_ops.subtract(one, one_minus_decay), update_step))
        return state_ops.assign(unbiased, math_ops.truediv(update_biased, bias_factor),
                                name=_ops.get_default_graph().get_name_scope() + "/")


class ExponentialMovingAverage:
    """Maintains moving averages of variables (or tensors) by exponential decay."""

    def __init__(self, decay, num_updates=None, zero_debias=False,
                 name="ExponentialMovingAverage"):
        self._decay = decay
        self._num_updates = num_updates
        self._zero_debias = zero_debias
        self._name = name
        self._averages: dict[int, object] = {}
        self._keys: dict[int, object] = {}  # id -> the variable, keeping it alive

    @property
    def name(self) -> str:
        return self._name

    def apply(self, var_list=None):
        """Create the shadows of ``var_list`` (default: the trainable variables) and return
        the op that updates them all."""
        if var_list is None:
            var_list = _variables.trainable_variables()
        var_list = list(var_list)
        zero_debias = set()
        eager = _ops.executing_eagerly()
        for var in var_list:
            if var.dtype.base_dtype not in (_dt.float16, _dt.float32, _dt.float64):
                raise TypeError(f"The variables must be half, float, or double: {var.name}")
            if eager and not _is_variable(var):
                raise TypeError("tf.train.ExponentialMovingAverage does not support non-Variable"
                                " tensors when eager execution is enabled.")
            if id(var) in self._averages:
                continue
            # Shadows are made outside any control dependencies or loop being built (TF's
            # init_scope): their initializers must not wait for the caller's updates.
            with _ops.control_dependencies(None):
                if _is_variable(var):
                    with _ops.device(var.device):
                        # TF's cond(initialized, read, initial value): eagerly a variable is
                        # initialized, so its value now.
                        initial = var.read_value() if eager else var.initialized_value()
                    avg = slot_creator.create_slot(var, initial, self._name,
                                                   colocate_with_primary=True)
                    _ops.add_to_collection(GraphKeys.MOVING_AVERAGE_VARIABLES, var)
                else:
                    avg = slot_creator.create_zeros_slot(
                        var, self._name,
                        colocate_with_primary=var.op.type in ("Variable", "VariableV2",
                                                              "VarHandleOp"))
                    if self._zero_debias:
                        zero_debias.add(id(avg))
            self._averages[id(var)] = avg
            self._keys[id(var)] = var
        with _ops.name_scope(self._name) as scope:
            decay = _ops.convert_to_tensor(self._decay, name="decay", dtype=_dt.float32)
            if self._num_updates is not None:
                n = math_ops.cast(self._num_updates, _dt.float32, name="num_updates")
                decay = math_ops.minimum(decay, math_ops.truediv(
                    math_ops.add(1.0, n), math_ops.add(10.0, n)))
            updates = []
            for var in var_list:
                avg = self._averages[id(var)]
                updates.append(assign_moving_average(avg, var, decay,
                                                     zero_debias=id(avg) in zero_debias))
            return group(*updates, name=scope)

    def average(self, var):
        """The shadow of ``var``, or None if ``apply`` has not seen it."""
        return self._averages.get(id(var))

    def average_name(self, var) -> str:
        """The name ``var``'s shadow has (or would have) in checkpoints."""
        avg = self._averages.get(id(var))
        if avg is not None:
            return avg.op.name
        return _ops.get_default_graph().unique_name(var.op.name + "/" + self._name,
                                                    mark_as_used=False)

    def variables_to_restore(self, moving_avg_variables=None) -> dict:
        """``{checkpoint name: variable}``: each averaged variable restored from its
        shadow's name, every other global variable from its own."""
        if moving_avg_variables is None:
            moving_avg_variables = (_variables.trainable_variables()
                                    + _ops.get_collection(GraphKeys.MOVING_AVERAGE_VARIABLES))
        averaged = list({id(v): v for v in moving_avg_variables}.values())
        name_map = {self.average_name(v): v for v in averaged}
        averaged_names = {v.name for v in averaged}
        for v in _variables.global_variables():
            if v.name not in averaged_names and v.op.name not in name_map:
                name_map[v.op.name] = v
        return name_map


def moving_average_variables(scope=None):
    """The variables ``ExponentialMovingAverage.apply`` has averaged."""
    return _ops.get_collection(GraphKeys.MOVING_AVERAGE_VARIABLES, scope)


__all__ = ["ExponentialMovingAverage", "assign_moving_average", "moving_average_variables"]
