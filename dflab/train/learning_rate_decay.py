"""Learning-rate schedules of the global step (TF1 ``tf.train.*_decay``): graph ops computing
the rate each step, to pass as an optimizer's ``learning_rate``."""

from __future__ import annotations

from dflab.framework import ops as _ops
from dflab.ops import math_ops


def _prologue(global_step, what):
    if global_step is None:
        raise ValueError(f"global_step is required for {what}.")


def _step_decay(what, default_name, learning_rate, global_step, decay_steps, decay_rate,
                staircase, name, scale):
    """The shared shape of the three step-ratio schedules: ``scale(lr, rate, p)`` with
    ``p = global_step / decay_steps`` (floored if ``staircase``)."""
    _prologue(global_step, what)
    with _ops.name_scope(name, default_name) as name:
        lr = _ops.convert_to_tensor(learning_rate, name="learning_rate")
        dtype = lr.dtype
        decay_steps = math_ops.cast(decay_steps, dtype)
        decay_rate = math_ops.cast(decay_rate, dtype)
        p = math_ops.cast(global_step, dtype) / decay_steps
        if staircase:
            p = math_ops.floor(p)
        return scale(lr, decay_rate, p, dtype, name[:-1] + "/")


def exponential_decay(learning_rate, global_step, decay_steps, decay_rate, staircase=False,
                      name=None):
    """learning_rate * decay_rate ^ (global_step / decay_steps) (floored if ``staircase``)."""
    return _step_decay(
        "exponential_decay", "ExponentialDecay", learning_rate, global_step, decay_steps,
        decay_rate, staircase, name,
        lambda lr, rate, p, dtype, nm: math_ops.multiply(lr, math_ops.pow(rate, p), name=nm))


def natural_exp_decay(learning_rate, global_step, decay_steps, decay_rate, staircase=False,
                      name=None):
    """learning_rate * exp(-decay_rate * global_step / decay_steps)."""
    return _step_decay(
        "natural_exp_decay", "NaturalExpDecay", learning_rate, global_step, decay_steps,
        decay_rate, staircase, name,
        lambda lr, rate, p, dtype, nm: math_ops.multiply(lr, math_ops.exp(-rate * p), name=nm))


def inverse_time_decay(learning_rate, global_step, decay_steps, decay_rate, staircase=False,
                       name=None):
    """learning_rate / (1 + decay_rate * global_step / decay_steps)."""
    return _step_decay(
        "inverse_time_decay", "InverseTimeDecay", learning_rate, global_step, decay_steps,
        decay_rate, staircase, name,
        lambda lr, rate, p, dtype, nm: math_ops.truediv(
            lr, math_ops.add(math_ops.cast(1, dtype), math_ops.multiply(rate, p)), name=nm))


def polynomial_decay(learning_rate, global_step, decay_steps, end_learning_rate=0.0001,
                     power=1.0, cycle=False, name=None):
    """(lr - end) * (1 - step / decay_steps) ^ power + end, with step clipped at decay_steps
    (or, with ``cycle``, decay_steps stretched to the next multiple past step)."""
    _prologue(global_step, "polynomial_decay")
    with _ops.name_scope(name, "PolynomialDecay") as name:
        lr = _ops.convert_to_tensor(learning_rate, name="learning_rate")
        dtype = lr.dtype
        step = math_ops.cast(global_step, dtype)
        decay_steps = math_ops.cast(decay_steps, dtype)
        end = math_ops.cast(end_learning_rate, dtype)
        power = math_ops.cast(power, dtype)
        if cycle:
            # TF1 uses 1 at step 0, else ceil(step / decay_steps).
            multiplier = math_ops.maximum(math_ops.ceil(step / decay_steps),
                                          math_ops.cast(1, dtype))
            decay_steps = math_ops.multiply(decay_steps, multiplier)
        else:
            step = math_ops.minimum(step, decay_steps)
        p = math_ops.truediv(step, decay_steps)
        return math_ops.add(math_ops.multiply(lr - end, math_ops.pow(1 - p, power)), end,
                            name=name[:-1] + "/")
