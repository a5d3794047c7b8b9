"""Stateless random ops (``tf.random.stateless_*``: uniform, normal, truncated normal,
categorical, gamma, Poisson, binomial, parameterized truncated normal; ``split``,
``fold_in``, ``create_rng_state``) and ``tf.random.categorical``.

A stateless op is a pure function of its shape and its ``seed`` input (a pair of int32 or int64
numbers): the same seed gives the same numbers on every run, in every session, and TF's numbers
(its Philox stream and distributions, ``dflab.kernels.philox``). The ops are TF's V1 stateless
ops (``StatelessRandomUniform``, ``StatelessMultinomial``, …), which take the seed itself; TF
2.x's builders reach the same numbers through a separate key/counter op. As in TF, the ops draw
standard samples and the builders scale and shift them with ordinary math ops.
"""

from __future__ import annotations

import enum

import numpy as np

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.registry import NotDifferentiable, register_op
from dflab.ops import array_ops, math_ops
from dflab.ops.random_ops import _multinomial_infer, _shape_arg_shape, _shape_tensor, _tensors
from dflab.ops.random_ops import multinomial_op as _multinomial_op


class Algorithm(enum.Enum):
    """The random-number algorithms of ``tf.random`` (only Philox is offered, as on TF's
    CPUs)."""

    PHILOX = 1
    THREEFRY = 2
    AUTO_SELECT = 3


def _alg_value(alg) -> int:
    """TF's ``convert_alg_to_int`` for a Python value."""
    if isinstance(alg, Algorithm):
        return alg.value
    if isinstance(alg, int):
        return alg
    canon = str(alg).strip().lower().replace("-", "").replace("_", "")
    known = {"philox": 1, "threefry": 2, "autoselect": 3}
    if canon not in known:
        raise ValueError(f"Argument `alg` got unsupported value {alg}. Supported values are "
                         "philox for the Philox algorithm, threefry for the ThreeFry "
                         "algorithm, and auto_select for auto-selection.")
    return known[canon]


# --- schemas --------------------------------------------------------------------------------------
def _check_seed(op, seed):
    if seed.dtype.base_dtype not in (_dt.int32, _dt.int64):
        raise TypeError(f"Value passed to parameter 'seed' of '{op.type}' has DataType "
                        f"{seed.dtype.name} not in list of allowed values: int32, int64")
    if seed.shape.ndims is not None and seed.shape.as_list() not in ([2], [None]):
        raise ValueError(f"seed of '{op.name}' ({op.type}) must have shape [2], got "
                         f"{seed.shape}")


def _sample_infer(op):
    _check_seed(op, op.inputs[1])
    return [(op.get_attr("dtype"), _shape_arg_shape(op, op.inputs[0]))]


def _int_infer(op):
    shape, seed, lo, hi = op.inputs
    _check_seed(op, seed)
    for t, nm in ((lo, "minval"), (hi, "maxval")):
        if t.shape.ndims not in (None, 0):
            raise ValueError(f"{nm} must be 0-D, got shape {t.shape}")
    return [(lo.dtype.base_dtype, _shape_arg_shape(op, shape))]


def _stateless_multinomial_infer(op):
    _check_seed(op, op.inputs[2])
    return _multinomial_infer(op)


for _t in ("StatelessRandomUniform", "StatelessRandomNormal", "StatelessTruncatedNormal",
           "StatelessRandomUniformFullInt"):
    register_op(_t, _sample_infer)
    NotDifferentiable(_t)
register_op("StatelessRandomUniformInt", _int_infer)
NotDifferentiable("StatelessRandomUniformInt")
register_op("StatelessMultinomial", _stateless_multinomial_infer)
NotDifferentiable("StatelessMultinomial")


def _seed_tensor(seed):
    return _ops.convert_to_tensor(seed, name="seed")


def _sample(op_type, shape_t, seed, dtype, alg, extra=()):
    seed = _seed_tensor(seed)
    attrs = {"dtype": dtype, "alg": _alg_value(alg)}
    return _ops.apply_op(op_type, [shape_t, seed, *extra], attrs, op_type).outputs[0]


# --- builders -------------------------------------------------------------------------------------
_UNIFORM_DTYPES = (_dt.float16, _dt.float32, _dt.float64, _dt.int32, _dt.int64, _dt.uint32,
                   _dt.uint64)


def stateless_random_uniform(shape, seed, minval=0, maxval=None, dtype=_dt.float32, name=None,
                             alg="auto_select"):
    """Deterministic uniform samples in ``[minval, maxval)`` (TF's numbers for ``seed``);
    an integer dtype with ``minval = maxval = None`` gives every bit random."""
    dtype = _dt.as_dtype(dtype).base_dtype
    if dtype not in _UNIFORM_DTYPES:
        raise ValueError(f"Argument `dtype` got invalid value {dtype}. Accepted dtypes are "
                         f"{tuple(d.name for d in _UNIFORM_DTYPES)}.")
    if dtype.is_integer:
        if (minval is None) != (maxval is None):
            raise ValueError(f"For integer `dtype` argument {dtype}, argument `minval` and "
                             "`maxval` must be both None or not None. Got `minval`="
                             f"{minval} and `maxval`={maxval}.")
        if minval is not None and dtype in (_dt.uint32, _dt.uint64):
            raise ValueError(f"Argument `dtype` got invalid value {dtype} when argument "
                             "`minval` is not None. Please don't use unsigned integers in "
                             "this case.")
    elif maxval is None:
        maxval = 1
    with _ops.name_scope(name, "stateless_random_uniform",
                         _tensors(shape, seed, minval, maxval)) as scope:
        shape_t = _shape_tensor(shape)
        if dtype.is_integer and minval is None:
            return _sample("StatelessRandomUniformFullInt", shape_t, seed, dtype, alg)
        lo = _ops.convert_to_tensor(minval, dtype=dtype, name="min")
        hi = _ops.convert_to_tensor(maxval, dtype=dtype, name="max")
        if dtype.is_integer:
            seed = _seed_tensor(seed)
            return _ops.apply_op("StatelessRandomUniformInt", [shape_t, seed, lo, hi],
                                 {"alg": _alg_value(alg)}, scope).outputs[0]
        rnd = _sample("StatelessRandomUniform", shape_t, seed, dtype, alg)
        return math_ops.add(math_ops.multiply(rnd, math_ops.subtract(hi, lo)), lo, name=scope)


def _scaled(op_type, default_name, shape, seed, mean, stddev, dtype, name, alg):
    dtype = _dt.as_dtype(dtype).base_dtype
    if not dtype.is_floating:
        raise ValueError(f"Invalid dtype {dtype.name} for {default_name}: a floating point "
                         "type is required")
    with _ops.name_scope(name, default_name, _tensors(shape, seed, mean, stddev)) as scope:
        shape_t = _shape_tensor(shape)
        mean_t = _ops.convert_to_tensor(mean, dtype=dtype, name="mean")
        stddev_t = _ops.convert_to_tensor(stddev, dtype=dtype, name="stddev")
        rnd = _sample(op_type, shape_t, seed, dtype, alg)
        return math_ops.add(math_ops.multiply(rnd, stddev_t), mean_t, name=scope)


def stateless_random_normal(shape, seed, mean=0.0, stddev=1.0, dtype=_dt.float32, name=None,
                            alg="auto_select"):
    """Deterministic normal samples: ``mean + stddev * N(0, 1)``, TF's numbers for ``seed``."""
    return _scaled("StatelessRandomNormal", "stateless_random_normal", shape, seed, mean,
                   stddev, dtype, name, alg)


def stateless_truncated_normal(shape, seed, mean=0.0, stddev=1.0, dtype=_dt.float32,
                               name=None, alg="auto_select"):
    """Deterministic normal samples within two standard deviations of ``mean``."""
    return _scaled("StatelessTruncatedNormal", "stateless_truncated_normal", shape, seed,
                   mean, stddev, dtype, name, alg)


# --- gamma, Poisson, binomial: per-batch-element samplers ------------------------------
def _batched_infer(op):
    shape, seed, *params = op.inputs
    _check_seed(op, seed)
    out = _shape_arg_shape(op, shape)
    batch = params[0].shape
    for p in params[1:]:
        batch = _broadcast_static(batch, p.shape)
    if out.ndims is not None and batch.ndims is not None and batch.ndims > out.ndims:
        raise ValueError(f"Shape passed in must end with broadcasted shape for '{op.name}' "
                         f"({op.type})")
    return [(op.get_attr("dtype"), out)]


def _broadcast_static(a, b):
    if a.ndims is None or b.ndims is None:
        return a if b.ndims is None else b
    return a if a.ndims >= b.ndims else b


for _t in ("StatelessRandomGammaV2", "StatelessRandomPoisson", "StatelessRandomBinomial",
           "StatelessParameterizedTruncatedNormal"):
    register_op(_t, _batched_infer)
NotDifferentiable("StatelessParameterizedTruncatedNormal")
NotDifferentiable("StatelessRandomPoisson")
NotDifferentiable("StatelessRandomBinomial")
# StatelessRandomGammaV2 has no gradient: TF's reparameterised derivative with respect to
# alpha is not implemented (as for RandomGamma), and returning None would be wrong.


def stateless_random_gamma(shape, seed, alpha, beta=None, dtype=_dt.float32, name=None):
    """Deterministic gamma samples of shape ``shape`` (which ends with ``alpha``'s and
    ``beta``'s broadcast shape); ``beta`` is a rate. TF's numbers for ``seed``."""
    with _ops.name_scope(name, "stateless_random_gamma",
                         _tensors(shape, seed, alpha, beta)) as scope:
        shape_t = _shape_tensor(shape)
        alpha = _ops.convert_to_tensor(alpha, dtype=dtype, name="alpha")
        beta = _ops.convert_to_tensor(beta if beta is not None else 1, dtype=dtype,
                                      name="beta")
        alpha_b = math_ops.add(alpha, array_ops.zeros_like(beta))
        rnd = _ops.apply_op("StatelessRandomGammaV2", [shape_t, _seed_tensor(seed), alpha_b],
                            {"dtype": alpha.dtype.base_dtype}).outputs[0]
        tiny = _ops.convert_to_tensor(float(np.finfo(alpha.dtype.base_dtype._np).tiny),
                                      dtype=alpha.dtype.base_dtype)
        return math_ops.maximum(tiny, math_ops.truediv(rnd, beta), name=scope)


def stateless_random_poisson(shape, seed, lam, dtype=_dt.int32, name=None):
    """Deterministic Poisson samples of shape ``shape`` (which ends with ``lam``'s shape)
    with rates ``lam``; TF's numbers for ``seed``."""
    with _ops.name_scope(name, "stateless_random_poisson", _tensors(shape, seed, lam)) as sc:
        shape_t = _shape_tensor(shape)
        lam = _ops.convert_to_tensor(lam, name="lam", preferred_dtype=_dt.float32)
        dtype = _dt.as_dtype(dtype).base_dtype
        return _ops.apply_op("StatelessRandomPoisson", [shape_t, _seed_tensor(seed), lam],
                             {"dtype": dtype, "Rtype": lam.dtype.base_dtype}, sc).outputs[0]


def stateless_random_binomial(shape, seed, counts, probs, output_dtype=_dt.int32, name=None):
    """Deterministic binomial samples of shape ``shape`` (which ends with the broadcast shape
    of ``counts`` and ``probs``); TF's numbers for ``seed``."""
    with _ops.name_scope(name, "stateless_random_binomial",
                         _tensors(shape, seed, counts, probs)) as sc:
        shape_t = _shape_tensor(shape)
        probs = _ops.convert_to_tensor(probs, name="probs", preferred_dtype=_dt.float32)
        counts = _ops.convert_to_tensor(counts, name="counts",
                                        preferred_dtype=probs.dtype.base_dtype)
        dtype = _dt.as_dtype(output_dtype).base_dtype
        return _ops.apply_op("StatelessRandomBinomial",
                             [shape_t, _seed_tensor(seed), counts, probs],
                             {"dtype": dtype, "T": probs.dtype.base_dtype}, sc).outputs[0]


def stateless_parameterized_truncated_normal(shape, seed, means=0.0, stddevs=1.0,
                                             minvals=-2.0, maxvals=2.0, name=None):
    """Deterministic normal samples of shape ``shape`` (which ends with the parameters'
    broadcast shape) with means ``means`` and deviations ``stddevs``, truncated to
    ``[minvals, maxvals]``; TF's numbers for ``seed`` (as TF computes them on one thread:
    TF splits a big output among its threads, which changes its numbers)."""
    with _ops.name_scope(name, "stateless_parameterized_truncated_normal",
                         _tensors(shape, means, stddevs, minvals, maxvals)) as scope:
        shape_t = _shape_tensor(shape)
        params = [_ops.convert_to_tensor(v, name=n) for v, n in (
            (means, "means"), (stddevs, "stddevs"), (minvals, "minvals"),
            (maxvals, "maxvals"))]
        dtype = params[0].dtype.base_dtype
        if not dtype.is_floating or any(p.dtype.base_dtype is not dtype for p in params):
            raise TypeError("means, stddevs, minvals and maxvals must have one floating "
                            f"dtype, got {[p.dtype.name for p in params]}")
        return _ops.apply_op("StatelessParameterizedTruncatedNormal",
                             [shape_t, _seed_tensor(seed), *params], {"dtype": dtype},
                             scope).outputs[0]


def _stateless_multinomial_impl(logits, num_samples, dtype, seed):
    logits = _ops.convert_to_tensor(logits, name="logits")
    dtype = _dt.as_dtype(dtype).base_dtype if dtype else _dt.int64
    if dtype not in (_dt.int32, _dt.int64):
        raise ValueError(f"Argument `dtype` got invalid value {dtype}. Accepted dtypes are "
                         "(int32, int64).")
    num = _ops.convert_to_tensor(num_samples, dtype=_dt.int32, name="num_samples")
    seed = _seed_tensor(seed)
    return _ops.apply_op("StatelessMultinomial", [logits, num, seed],
                         {"output_dtype": dtype}).outputs[0]


def stateless_multinomial(logits, num_samples, seed, output_dtype=_dt.int64, name=None):
    """Deterministic class draws from ``softmax(logits)`` per row (TF's numbers for
    ``seed``)."""
    with _ops.name_scope(name, "stateless_multinomial", _tensors(logits, seed)):
        return _stateless_multinomial_impl(logits, num_samples, output_dtype, seed)


def stateless_categorical(logits, num_samples, seed, dtype=_dt.int64, name=None):
    """Deterministic class draws from ``softmax(logits)`` per row (TF's numbers for
    ``seed``)."""
    with _ops.name_scope(name, "stateless_categorical", _tensors(logits, seed)):
        return _stateless_multinomial_impl(logits, num_samples, dtype, seed)


def categorical(logits, num_samples, dtype=None, seed=None, name=None):
    """``num_samples`` class indices per row drawn from ``softmax(logits)`` (the stateful
    ``Multinomial`` op, seeded by TF1's rules)."""
    with _ops.name_scope(name, "categorical", _tensors(logits)):
        return _multinomial_op(logits, num_samples, seed, dtype)


_STATE_SIZES = {1: 3, 2: 2, 3: 3}  # Philox: a 128-bit counter and a 64-bit key; ThreeFry


def create_rng_state(seed, alg):
    """TF's random-generator state (``int64``, 3 words for Philox, 2 for ThreeFry) from a
    seed: a Python integer is cut into 64-bit words, low first; a tensor's first words are
    kept and padded with zeros on the left."""
    size = _STATE_SIZES.get(_alg_value(alg))
    if size is None:
        raise ValueError(f"Argument `alg` got unsupported value {alg}.")
    if isinstance(seed, int):
        words = []
        for _ in range(size):
            w = seed & (2**64 - 1)
            words.append(w - 2**64 if w >= 2**63 else w)
            seed >>= 64
        seed = words
    seed = array_ops.reshape(math_ops.cast(_ops.convert_to_tensor(seed), _dt.int64), [-1])
    seed = seed[0:size]
    n = seed.shape.as_list()[0]
    pad = array_ops.zeros([size - n] if n is not None else
                          math_ops.maximum(size - array_ops.shape(seed)[0], 0), _dt.int64)
    state = array_ops.concat([pad, seed], 0)
    state.set_shape([size])
    return state


def split(seed, num=2, alg="auto_select"):
    """``num`` new seeds (a ``[num, 2]`` tensor of ``seed``'s dtype) drawn from ``seed``."""
    seed = _ops.convert_to_tensor(seed)
    return stateless_random_uniform([num, 2], seed, dtype=seed.dtype, minval=None,
                                    maxval=None, alg=alg)


def fold_in(seed, data, alg="auto_select"):
    """A new seed ``[draw(seed), data]`` (of ``data``'s dtype) that mixes ``data`` into
    ``seed``."""
    data = _ops.convert_to_tensor(data)
    seed1 = stateless_random_uniform([], seed, dtype=data.dtype, minval=None, maxval=None,
                                     alg=alg)
    return array_ops.stack([seed1, data])


stateless_uniform = stateless_random_uniform
stateless_normal = stateless_random_normal
stateless_gamma = stateless_random_gamma
stateless_poisson = stateless_random_poisson
stateless_binomial = stateless_random_binomial

__all__: list[str] = []  # tf.random.* only (see dflab.namespaces): none is a top-level name
