"""Learning-rate schedules of the global step (TF1 ``tf.train.*_decay``): graph ops computing
the rate each step, to pass as an optimizer's ``learning_rate``."""

from __future__ import annotations

from dflab.framework import ops as _ops
from dflab.ops import math_ops


def _prologue(global_step, what):
    if global_step is None:
        raise ValueError(f"global_step is required for {what}.")


def exponential_decay(learning_rate, global_step, decay_steps, decay_rate, staircase=False,
                      name=None):
    """learning_rate * decay_rate ^ (global_step / decay_steps) (floored if ``staircase``)."""
    _prologue(global_step, "exponential_decay")
    with _ops.name_scope(name, "ExponentialDecay") as name:
        lr = _ops.convert_to_tensor(learning_rate, name="learning_rate")
        dtype = lr.dtype
        decay_steps = math_ops.cast(decay_steps, dtype)
        decay_rate = math_ops.cast(decay_rate, dtype)
        p = math_ops.cast(global_step, dtype) / decay_steps
        if staircase:
            p = math_ops.floor(p)
        return math_ops.multiply(lr, math_ops.pow(decay_rate, p), name=name[:-1] + "/")


def natural_exp_decay(learning_rate, global_step, decay_steps, decay_rate, staircase=False,
                      name=None):
    """learning_rate * exp(-decay_rate * global_step / decay_steps)."""
    _prologue(global_step, "natural_exp_decay")
    with _ops.name_scope(name, "NaturalExpDecay") as name:
        lr = _ops.convert_to_tensor(learning_rate, name="learning_rate")
        dtype = lr.dtype
        decay_steps = math_ops.cast(decay_steps, dtype)
        decay_rate = math_ops.cast(decay_rate, dtype)
        p = math_ops.cast(global_step, dtype) / decay_steps
        if staircase:
            p = math_ops.floor(p)
        return math_ops.multiply(lr, math_ops.exp(-decay_rate * p), name=name[:-1] + "/")


def inverse_time_decay(learning_rate, global_step, decay_steps, decay_rate, staircase=False,
                       name=None):
    """learning_rate / (1 + decay_rate * global_step / decay_steps)."""
    _prologue(global_step, "inverse_time_decay")
    with _ops.name_scope(name, "InverseTimeDecay") as name:
        lr = _ops.convert_to_tensor(learning_rate, name="learning_rate")
        dtype = lr.dtype
        decay_steps = math_ops.cast(decay_steps, dtype)
        decay_rate = math_ops.cast(decay_rate, dtype)
        p = math_ops.cast(global_step, dtype) / decay_steps
        if staircase:
            p = math_ops.floor(p)
        denom = math_ops.add(math_ops.cast(1, dtype), math_ops.multiply(decay_rate, p))
        return math_ops.truediv(lr, denom, name=name[:-1] + "/")


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
