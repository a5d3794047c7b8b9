"""Learning-rate schedules of the global step (TF1 ``tf.train.*_decay``), to pass as an
optimizer's ``learning_rate``. In a graph each is the ops computing the rate, run every step.
Executing eagerly a tensor would be the rate of one step for good, so each returns, as TF's,
a callable (a ``functools.partial`` of the schedule and its step variable) that computes the
rate of the step's value when called; optimizers call it on each update."""

from __future__ import annotations

import functools
import math

from dflab.framework import constant_op
from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.ops import control_flow_ops, math_ops, random_ops


def _prologue(global_step, what):
    if global_step is None:
        raise ValueError(f"global_step is required for {what}.")


def _callable_eagerly(what):
    """A schedule's builder as TF gives it: the ops in a graph; eagerly, after the checks
    made at once (a missing ``global_step``), the builder waiting for its call."""

    def wrap(build):
        @functools.wraps(build)
        def schedule(learning_rate, global_step, *args, **kwargs):
            if not _ops.executing_eagerly():
                return build(learning_rate, global_step, *args, **kwargs)
            _prologue(global_step, what)
            return functools.partial(build, learning_rate, global_step, *args, **kwargs)

        return schedule

    return wrap


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


@_callable_eagerly("exponential_decay")
def exponential_decay(learning_rate, global_step, decay_steps, decay_rate, staircase=False,
                      name=None):
    """learning_rate * decay_rate ^ (global_step / decay_steps) (floored if ``staircase``)."""
    return _step_decay(
        "exponential_decay", "ExponentialDecay", learning_rate, global_step, decay_steps,
        decay_rate, staircase, name,
        lambda lr, rate, p, dtype, nm: math_ops.multiply(lr, math_ops.pow(rate, p), name=nm))


@_callable_eagerly("natural_exp_decay")
def natural_exp_decay(learning_rate, global_step, decay_steps, decay_rate, staircase=False,
                      name=None):
    """learning_rate * exp(-decay_rate * global_step / decay_steps)."""
    return _step_decay(
        "natural_exp_decay", "NaturalExpDecay", learning_rate, global_step, decay_steps,
        decay_rate, staircase, name,
        lambda lr, rate, p, dtype, nm: math_ops.multiply(lr, math_ops.exp(-rate * p), name=nm))


@_callable_eagerly("inverse_time_decay")
def inverse_time_decay(learning_rate, global_step, decay_steps, decay_rate, staircase=False,
                       name=None):
    """learning_rate / (1 + decay_rate * global_step / decay_steps)."""
    return _step_decay(
        "inverse_time_decay", "InverseTimeDecay", learning_rate, global_step, decay_steps,
        decay_rate, staircase, name,
        lambda lr, rate, p, dtype, nm: math_ops.truediv(
            lr, math_ops.add(math_ops.cast(1, dtype), math_ops.multiply(rate, p)), name=nm))


@_callable_eagerly("polynomial_decay")
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


def piecewise_constant(x, boundaries, values, name=None):
    """``values[0]`` while x <= boundaries[0], ``values[i]`` while boundaries[i-1] < x <=
    boundaries[i], ``values[-1]`` past the last boundary: a ``tf.case`` of exclusive ranges.
    int32 boundaries are widened to an int64 x; any other type mismatch is a ValueError
    (checked at once; executing eagerly, the rest waits for the call, as TF's)."""
    boundaries = [_ops.convert_to_tensor(b) for b in _flat(boundaries)]
    values = [_ops.convert_to_tensor(v) for v in _flat(values)]
    x_dtype = _ops.convert_to_tensor(x).dtype.base_dtype
    for i, b in enumerate(boundaries):
        if b.dtype.base_dtype is not x_dtype:
            if b.dtype.base_dtype is _dt.int32 and x_dtype is _dt.int64:
                boundaries[i] = math_ops.cast(b, x_dtype)
            else:
                raise ValueError(f"Boundaries ({b.dtype.base_dtype.name}) must have the same "
                                 f"dtype as x ({x_dtype.name}).")
    for v in values[1:]:
        if v.dtype.base_dtype is not values[0].dtype.base_dtype:
            raise ValueError("Values must have elements all with the same dtype "
                             f"({values[0].dtype.base_dtype.name} vs "
                             f"{v.dtype.base_dtype.name}).")
    if len(boundaries) != len(values) - 1:
        raise ValueError(
            "The length of boundaries should be 1 less than the length of values")
    if _ops.executing_eagerly():
        return functools.partial(_piecewise, x, boundaries, values, name)
    return _piecewise(x, boundaries, values, name)


def _piecewise(x, boundaries, values, name):
    x = _ops.convert_to_tensor(x)
    with _ops.name_scope(name, "PiecewiseConstant"):
        pairs = [(x <= boundaries[0], lambda: values[0]),
                 (x > boundaries[-1], lambda: values[-1])]
        for low, high, v in zip(boundaries[:-1], boundaries[1:], values[1:-1]):
            pairs.append(((x > low) & (x <= high), lambda v=v: v))
        return control_flow_ops.case(pairs, lambda: values[0], exclusive=True)


piecewise_constant_decay = piecewise_constant


def _flat(xs):
    return list(xs) if isinstance(xs, (list, tuple)) else [xs]


def _half_cosine(fraction):
    """0.5 * (1 + cos(pi * fraction)); pi is a float32 constant, as in TF."""
    return 0.5 * (1.0 + math_ops.cos(constant_op.constant(math.pi) * fraction))


@_callable_eagerly("cosine decay")
def cosine_decay(learning_rate, global_step, decay_steps, alpha=0.0, name=None):
    """lr * ((1 - alpha) * 0.5 * (1 + cos(pi * min(step, decay_steps) / decay_steps)) + alpha)
    (Loshchilov & Hutter, SGDR, without restarts)."""
    _prologue(global_step, "cosine decay")
    with _ops.name_scope(name, "CosineDecay"):
        lr = _ops.convert_to_tensor(learning_rate, name="initial_learning_rate")
        dtype = lr.dtype
        decay_steps = math_ops.cast(decay_steps, dtype)
        step = math_ops.minimum(math_ops.cast(global_step, dtype), decay_steps)
        decayed = (1 - alpha) * _half_cosine(step / decay_steps) + alpha
        return math_ops.multiply(lr, decayed)


@_callable_eagerly("cosine decay restarts")
def cosine_decay_restarts(learning_rate, global_step, first_decay_steps, t_mul=2.0, m_mul=1.0,
                          alpha=0.0, name=None):
    """Cosine decay with warm restarts (SGDR): period i lasts first_decay_steps * t_mul^i steps
    and starts from lr * m_mul^i."""
    _prologue(global_step, "cosine decay restarts")
    with _ops.name_scope(name, "SGDRDecay") as name:
        lr = _ops.convert_to_tensor(learning_rate, name="initial_learning_rate")
        dtype = lr.dtype
        first_decay_steps = math_ops.cast(first_decay_steps, dtype)
        alpha = math_ops.cast(alpha, dtype)
        t_mul = math_ops.cast(t_mul, dtype)
        m_mul = math_ops.cast(m_mul, dtype)
        fraction = math_ops.cast(global_step, dtype) / first_decay_steps

        def geometric():
            i_restart = math_ops.floor(math_ops.log(1.0 - fraction * (1.0 - t_mul))
                                       / math_ops.log(t_mul))
            sum_r = (1.0 - t_mul ** i_restart) / (1.0 - t_mul)
            return i_restart, (fraction - sum_r) / t_mul ** i_restart

        def uniform():
            i_restart = math_ops.floor(fraction)
            return i_restart, fraction - i_restart

        i_restart, fraction = control_flow_ops.cond(math_ops.equal(t_mul, 1.0), uniform,
                                                    geometric)
        cosine_decayed = 0.5 * m_mul ** i_restart * (
            1.0 + math_ops.cos(constant_op.constant(math.pi) * fraction))
        decayed = (1 - alpha) * cosine_decayed + alpha
        return math_ops.multiply(lr, decayed, name=name)


@_callable_eagerly("linear cosine decay")
def linear_cosine_decay(learning_rate, global_step, decay_steps, num_periods=0.5, alpha=0.0,
                        beta=0.001, name=None):
    """lr * ((alpha + linear) * cosine + beta) with linear = (decay_steps - step) / decay_steps
    and cosine = 0.5 * (1 + cos(2 pi num_periods step / decay_steps)), step clipped at
    decay_steps (Bello et al., Neural Optimizer Search)."""
    _prologue(global_step, "linear cosine decay")
    with _ops.name_scope(name, "LinearCosineDecay") as name:
        return _linear_cosine(learning_rate, global_step, decay_steps, num_periods, alpha,
                              beta, name)


def _linear_cosine(learning_rate, global_step, decay_steps, num_periods, alpha, beta, name,
                   noise=None):
    """``lr * ((alpha + linear) * cosine + beta)`` (see ``linear_cosine_decay``); ``noise``
    (of the clipped step, in the rate's dtype) is added to the linear term."""
    lr = _ops.convert_to_tensor(learning_rate, name="initial_learning_rate")
    dtype = lr.dtype
    decay_steps = math_ops.cast(decay_steps, dtype)
    num_periods = math_ops.cast(num_periods, dtype)
    alpha = math_ops.cast(alpha, dtype)
    beta = math_ops.cast(beta, dtype)
    step = math_ops.minimum(math_ops.cast(global_step, dtype), decay_steps)
    linear_decayed = (decay_steps - step) / decay_steps
    if noise is not None:
        linear_decayed = linear_decayed + noise(step, linear_decayed.shape, dtype)
    cosine_decayed = _half_cosine(2.0 * num_periods * (step / decay_steps))
    return math_ops.multiply(lr, (alpha + linear_decayed) * cosine_decayed + beta, name=name)


@_callable_eagerly("noisy linear cosine decay")
def noisy_linear_cosine_decay(learning_rate, global_step, decay_steps, initial_variance=1.0,
                              variance_decay=0.55, num_periods=0.5, alpha=0.0, beta=0.001,
                              name=None):
    """``linear_cosine_decay`` with the linear term made noisy: N(0, variance) added to it,
    variance = initial_variance / (1 + step) ^ variance_decay (step clipped at decay_steps)."""
    _prologue(global_step, "noisy linear cosine decay")

    def noise(step, shape, dtype):
        variance = math_ops.cast(initial_variance, dtype) / math_ops.pow(
            1.0 + step, math_ops.cast(variance_decay, dtype))
        return random_ops.random_normal(shape, stddev=math_ops.sqrt(variance), dtype=dtype)

    with _ops.name_scope(name, "NoisyLinearCosineDecay") as name:
        return _linear_cosine(learning_rate, global_step, decay_steps, num_periods, alpha,
                              beta, name, noise)
