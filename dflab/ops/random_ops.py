"""Random ops: normal, truncated normal, uniform (float and int), shuffle, multinomial, gamma.

Every random op is stateful: its kernel owns a generator that lives as long as the session, so
two ``run`` calls draw different numbers while two sessions over identically built graphs with
the same seeds draw the same ones. Seeds follow TF1's rules (``dflab.framework.random_seed``):
each op carries ``seed``/``seed2`` attributes, both 0 meaning "seed from OS entropy".

As in TF, the ops draw standard samples and the builders scale and shift them with ordinary math
ops (``random_normal = mean + stddev * RandomStandardNormal``). Kernels are in
``dflab.kernels.random_kernels``.
"""

from __future__ import annotations

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.constant_op import (
    builder_constant,
    constant,
    constant_value,
    constant_value_as_shape,
)
from dflab.framework.random_seed import get_seed, set_random_seed
from dflab.framework.registry import NotDifferentiable, register_op
from dflab.framework.tensor_shape import TensorShape
from dflab.ops import array_ops, math_ops


# --- shared rules -------------------------------------------------------------------------------
def _shape_arg_shape(op, t):
    """Static output shape from a 1-D integer shape tensor."""
    if not t.dtype.base_dtype.is_integer:
        raise TypeError(f"shape of '{op.type}' must be an integer tensor, got {t.dtype.name}")
    if t.shape.ndims not in (None, 1):
        raise ValueError(f"shape must be a vector, got a tensor of shape {t.shape}")
    return constant_value_as_shape(t)


def _shape_tensor(shape):
    """A 1-D int32 tensor for a shape given as a tensor, TensorShape, list or tuple."""
    if isinstance(shape, _ops.Tensor):
        return shape
    if isinstance(shape, TensorShape):
        shape = shape.as_list()
    if isinstance(shape, (list, tuple)) and any(isinstance(d, _ops.Tensor) for d in shape):
        return array_ops.stack_ints(list(shape))
    return builder_constant(shape, dtype=_dt.int32, name="shape")


def _seed_attrs(seed):
    seed1, seed2 = get_seed(seed)
    # 0/0 tells the kernel to seed itself nondeterministically (TF's convention).
    return {"seed": seed1 or 0, "seed2": seed2 or 0}


def _float_only(dtype, what):
    dtype = _dt.as_dtype(dtype).base_dtype
    if not dtype.is_floating:
        raise ValueError(f"Invalid dtype {dtype.name} for {what}: a floating point type is "
                         "required")
    return dtype


# --- standard samples of a given shape ----------------------------------------------------------
def _sample_infer(op):
    return [(op.get_attr("dtype"), _shape_arg_shape(op, op.inputs[0]))]


for _t in ("RandomStandardNormal", "RandomUniform", "TruncatedNormal"):
    register_op(_t, _sample_infer, stateful=True)
    NotDifferentiable(_t)


def _standard_sample(op_type, shape, dtype, seed):
    attrs = _ops.frozen_attrs(dtype=dtype, **_seed_attrs(seed))  # (eagerly: the fast path)
    return _ops.apply_op_output(op_type, [shape], attrs, op_type)


def random_normal(shape, mean=0.0, stddev=1.0, dtype=_dt.float32, seed=None, name=None):
    """Samples from a normal distribution: ``mean + stddev * N(0, 1)``."""
    dtype = _float_only(dtype, "random_normal")
    return _scaled_sample("RandomStandardNormal", "random_normal", shape, mean, stddev, dtype,
                          seed, name)


def truncated_normal(shape, mean=0.0, stddev=1.0, dtype=_dt.float32, seed=None, name=None):
    """Normal samples re-drawn until they lie within two standard deviations of the mean."""
    dtype = _float_only(dtype, "truncated_normal")
    return _scaled_sample("TruncatedNormal", "truncated_normal", shape, mean, stddev, dtype,
                          seed, name)


def _scaled_sample(op_type, default_name, shape, mean, stddev, dtype, seed, name):
    """``mean + stddev * sample`` of ``op_type``'s standard samples. Executing eagerly with
    Python numbers there is nothing to name or convert: the same ops on cached constants."""
    if type(mean) in (int, float) and type(stddev) in (int, float) and \
            _ops.get_default_graph().executes_eagerly:
        rnd = _standard_sample(op_type, _shape_tensor(shape), dtype, seed)
        return math_ops.add(math_ops.multiply(rnd, stddev), mean)
    with _ops.name_scope(name, default_name, _tensors(shape, mean, stddev)) as scope:
        shape_t = _shape_tensor(shape)
        mean_t = _ops.convert_to_tensor(mean, dtype=dtype, name="mean")
        stddev_t = _ops.convert_to_tensor(stddev, dtype=dtype, name="stddev")
        rnd = _standard_sample(op_type, shape_t, dtype, seed)
        return math_ops.add(math_ops.multiply(rnd, stddev_t), mean_t, name=scope)


# --- uniform ------------------------------------------------------------------------------------
def _uniform_int_infer(op):
    shape, lo, hi = op.inputs
    for t, nm in ((lo, "minval"), (hi, "maxval")):
        if t.shape.ndims not in (None, 0):
            raise ValueError(f"{nm} must be a scalar, got shape {t.shape}")
    if lo.dtype.base_dtype is not hi.dtype.base_dtype:
        raise TypeError("minval and maxval must have the same dtype")
    if lo.dtype.base_dtype not in (_dt.int32, _dt.int64):
        raise TypeError(f"RandomUniformInt supports int32 and int64, got {lo.dtype.name}")
    lo_v, hi_v = constant_value(lo), constant_value(hi)
    if lo_v is not None and hi_v is not None and not lo_v < hi_v:
        raise ValueError(f"Need minval < maxval: {lo_v} >= {hi_v}")
    return [(lo.dtype.base_dtype, _shape_arg_shape(op, shape))]


register_op("RandomUniformInt", _uniform_int_infer, stateful=True)
NotDifferentiable("RandomUniformInt")


def random_uniform(shape, minval=0, maxval=None, dtype=_dt.float32, seed=None, name=None):
    """Uniform samples in ``[minval, maxval)``; integer dtypes need an explicit ``maxval``."""
    dtype = _dt.as_dtype(dtype).base_dtype
    if dtype not in (_dt.float16, _dt.float32, _dt.float64, _dt.int32, _dt.int64):
        raise ValueError(f"Invalid dtype {dtype.name} for random_uniform")
    if maxval is None:
        if dtype.is_integer:
            raise ValueError(f"Must specify maxval for integer dtype {dtype.name}")
        maxval = 1
    if not dtype.is_integer and type(minval) in (int, float) and type(maxval) in (int, float) \
            and minval == 0 and maxval == 1 and _ops.get_default_graph().executes_eagerly:
        # U[0, 1) itself: ``* (1 - 0) + 0`` would give back its bits (an eager call, 3x less).
        return _standard_sample("RandomUniform", _shape_tensor(shape), dtype, seed)
    with _ops.name_scope(name, "random_uniform", _tensors(shape, minval, maxval)) as scope:
        shape_t = _shape_tensor(shape)
        lo = _ops.convert_to_tensor(minval, dtype=dtype, name="min")
        hi = _ops.convert_to_tensor(maxval, dtype=dtype, name="max")
        if dtype.is_integer:
            attrs = _seed_attrs(seed)
            return _ops.apply_op("RandomUniformInt", [shape_t, lo, hi], attrs,
                                 scope).outputs[0]
        rnd = _standard_sample("RandomUniform", shape_t, dtype, seed)
        return math_ops.add(math_ops.multiply(rnd, math_ops.subtract(hi, lo)), lo, name=scope)


# --- shuffle ------------------------------------------------------------------------------------
def _shuffle_infer(op):
    t = op.inputs[0]
    return [(t.dtype.base_dtype, t.shape)]


register_op("RandomShuffle", _shuffle_infer, stateful=True)
NotDifferentiable("RandomShuffle")


def random_shuffle(value, seed=None, name=None):
    """``value`` with its first dimension randomly permuted."""
    value = _ops.convert_to_tensor(value)
    return _ops.apply_op("RandomShuffle", [value], _seed_attrs(seed), name).outputs[0]


# --- multinomial --------------------------------------------------------------------------------
def _multinomial_infer(op):
    logits, num = op.inputs[:2]  # StatelessMultinomial's seed follows
    if not logits.dtype.base_dtype.is_floating:
        raise TypeError(f"logits must be floating point, got {logits.dtype.name}")
    if logits.shape.ndims not in (None, 2):
        raise ValueError(f"logits should be a matrix, got shape {logits.shape}")
    if num.shape.ndims not in (None, 0):
        raise ValueError(f"num_samples should be a scalar, got shape {num.shape}")
    n = constant_value(num)
    if n is not None and int(n) < 0:
        raise ValueError(f"num_samples should be nonnegative, got {int(n)}")
    batch = logits.shape[0] if logits.shape.ndims == 2 else None
    return [(op.get_attr("output_dtype"), TensorShape([batch, None if n is None else int(n)]))]


register_op("Multinomial", _multinomial_infer, stateful=True)
NotDifferentiable("Multinomial")


def multinomial(logits, num_samples, seed=None, name=None, output_dtype=None):
    """``num_samples`` class indices per row, drawn with probabilities ``softmax(logits)``."""
    with _ops.name_scope(name, "multinomial", _tensors(logits, num_samples)):
        return multinomial_op(logits, num_samples, seed, output_dtype)


def multinomial_op(logits, num_samples, seed, output_dtype):
    """The ``Multinomial`` op in the current name scope (``multinomial``, ``categorical``)."""
    logits = _ops.convert_to_tensor(logits, name="logits")
    num = _ops.convert_to_tensor(num_samples, dtype=_dt.int32, name="num_samples")
    out_dt = _dt.as_dtype(output_dtype or _dt.int64).base_dtype
    if out_dt not in (_dt.int32, _dt.int64):
        raise TypeError(f"output_dtype must be int32 or int64, got {out_dt.name}")
    attrs = {"output_dtype": out_dt, **_seed_attrs(seed)}
    return _ops.apply_op("Multinomial", [logits, num], attrs).outputs[0]


# --- gamma --------------------------------------------------------------------------------------
def _gamma_infer(op):
    shape, alpha = op.inputs
    if not alpha.dtype.base_dtype.is_floating:
        raise TypeError(f"alpha must be floating point, got {alpha.dtype.name}")
    return [(alpha.dtype.base_dtype, _shape_arg_shape(op, shape).concatenate(alpha.shape))]


# No gradient is registered: the reparameterised derivative with respect to alpha is not
# implemented, and silently returning None would be wrong.
register_op("RandomGamma", _gamma_infer, stateful=True)


def random_gamma(shape, alpha, beta=None, dtype=_dt.float32, seed=None, name=None):
    """Gamma samples of shape ``shape + broadcast(alpha, beta).shape`` (``beta`` is a rate)."""
    dtype = _float_only(dtype, "random_gamma")
    with _ops.name_scope(name, "random_gamma", _tensors(shape, alpha, beta)):
        shape_t = _shape_tensor(shape)
        alpha = _ops.convert_to_tensor(alpha, dtype=dtype, name="alpha")
        beta = _ops.convert_to_tensor(beta if beta is not None else 1, dtype=dtype, name="beta")
        alpha_b = math_ops.add(alpha, array_ops.zeros_like(beta))
        sample = _ops.apply_op("RandomGamma", [shape_t, alpha_b], _seed_attrs(seed)).outputs[0]
        return math_ops.maximum(_tiny(dtype), math_ops.truediv(sample, beta))


# --- poisson ------------------------------------------------------------------------------------
def _poisson_infer(op):
    shape, rate = op.inputs
    if not rate.dtype.base_dtype.is_numeric:
        raise TypeError(f"lam must be numeric, got {rate.dtype.name}")
    return [(op.get_attr("dtype"), _shape_arg_shape(op, shape).concatenate(rate.shape))]


register_op("RandomPoissonV2", _poisson_infer, stateful=True)
NotDifferentiable("RandomPoissonV2")


def random_poisson(lam, shape, dtype=_dt.float32, seed=None, name=None):
    """Poisson samples of shape ``shape + lam.shape`` with rates ``lam``."""
    dtype = _dt.as_dtype(dtype).base_dtype
    if dtype not in (_dt.float16, _dt.float32, _dt.float64, _dt.int32, _dt.int64):
        raise ValueError(f"Invalid dtype {dtype.name} for random_poisson")
    with _ops.name_scope(name, "random_poisson", _tensors(shape, lam)) as scope:
        shape_t = _shape_tensor(shape)
        lam = _ops.convert_to_tensor(lam, name="lam", preferred_dtype=_dt.float32)
        attrs = {"dtype": dtype, **_seed_attrs(seed)}
        return _ops.apply_op("RandomPoissonV2", [shape_t, lam], attrs, scope).outputs[0]


# --- crop -----------------------------------------------------------------------------------------
def random_crop(value, size, seed=None, name=None):
    """A random ``size``-shaped slice of ``value`` (every dim needs ``size <= shape``)."""
    with _ops.name_scope(name, "random_crop", _tensors(value, size)) as scope:
        value = _ops.convert_to_tensor(value, name="value")
        size_t = _shape_tensor(size)
        want, have = constant_value_as_shape(size_t), value.shape
        if want.ndims is not None and have.ndims is not None:
            if want.ndims != have.ndims:
                raise ValueError(f"size {want} must have one entry per dimension of value "
                                 f"{have}")
            for w, h in zip(want.as_list(), have.as_list()):
                if w is not None and h is not None and w > h:
                    raise ValueError(f"Need value.shape >= size, got {have} and {want}")
        limit = math_ops.add(math_ops.subtract(array_ops.shape(value), size_t), 1)
        draw = random_uniform(array_ops.shape(limit), maxval=_dt.int32.max, dtype=_dt.int32,
                              seed=seed)
        offset = math_ops.floormod(draw, limit)
        return array_ops.slice(value, offset, size_t, name=scope)


def _tiny(dtype):
    import numpy as np

    return constant(np.finfo(dtype._np).tiny, dtype=dtype)


def _tensors(*values):
    """The tensor-like values among a builder's arguments (for ``name_scope``'s graph)."""
    return [v for v in values if _ops.is_tensor_like(v)]


__all__ = [
    "random_normal", "truncated_normal", "random_uniform", "random_shuffle", "multinomial",
    "random_gamma", "random_poisson", "random_crop", "set_random_seed", "get_seed",
]
