"""Initializers (TF1 ``tf.*_initializer``): callables ``init(shape, dtype=None,
partition_info=None)`` that build the graph ops producing a variable's first value.

An initializer is configuration only; each call adds fresh ops (a constant, or a seeded random
op) to the default graph. ``get_variable`` calls them inside the variable's ``Initializer`` name
scope. As in TF1 the public names (``tf.zeros_initializer`` …) are the classes themselves, so
``tf.zeros_initializer()`` makes an instance, and the Glorot initializers are variance scaling
with ``scale=1, mode="fan_avg"``.
"""

from __future__ import annotations

import math

import numpy as np

from dflab.framework import constant_op
from dflab.framework import dtypes as _dt
from dflab.framework.random_seed import get_seed
from dflab.framework.tensor_shape import TensorShape
from dflab.ops import array_ops, math_ops, random_ops

# Standard deviation of a unit normal truncated to [-2, 2] (scipy.stats.truncnorm.std(-2, 2)):
# dividing by it makes a truncated normal's variance equal the requested one.
_TRUNCATED_NORMAL_STD = 0.87962566103423978


def _shape_list(shape):
    if isinstance(shape, TensorShape):
        return shape.as_list()
    if isinstance(shape, (int, np.integer)):
        return [int(shape)]
    return [int(d) for d in shape]


def _float_dtype(dtype):
    dtype = _dt.as_dtype(dtype)
    if not dtype.is_floating:
        raise ValueError(f"Expected floating point type, got {dtype.name}.")
    return dtype


class Initializer:
    """Base class: ``__call__(shape, dtype=None, partition_info=None)`` returns a tensor."""

    def __call__(self, shape, dtype=None, partition_info=None):
        raise NotImplementedError

    def get_config(self) -> dict:
        return {}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config.pop("dtype", None)
        return cls(**config)


class Zeros(Initializer):
    def __init__(self, dtype=_dt.float32):
        self.dtype = _dt.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        return array_ops.zeros(_shape_list(shape), dtype or self.dtype)

    def get_config(self):
        return {"dtype": self.dtype.name}


class Ones(Initializer):
    def __init__(self, dtype=_dt.float32):
        self.dtype = _dt.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        return array_ops.ones(_shape_list(shape), dtype or self.dtype)

    def get_config(self):
        return {"dtype": self.dtype.name}


class Constant(Initializer):
    """A constant: a scalar fills the shape; a list of the right size is reshaped (TF1 also
    pads a short list with its last element unless ``verify_shape``)."""

    def __init__(self, value=0, dtype=_dt.float32, verify_shape=False):
        if not (np.isscalar(value) or isinstance(value, (list, tuple, np.ndarray))):
            raise TypeError(f"Invalid type for initial value: {type(value).__name__} (expected "
                            "Python scalar, list or tuple of values, or numpy.ndarray).")
        self.value = value
        self.dtype = _dt.as_dtype(dtype)
        self._verify_shape = verify_shape

    def __call__(self, shape, dtype=None, partition_info=None, verify_shape=None):
        dtype = _dt.as_dtype(dtype or self.dtype)
        verify = self._verify_shape if verify_shape is None else verify_shape
        return constant_op.constant(self.value, dtype=dtype, shape=_shape_list(shape),
                                    verify_shape=verify)

    def get_config(self):
        return {"value": self.value, "dtype": self.dtype.name}


class RandomUniform(Initializer):
    def __init__(self, minval=0, maxval=None, seed=None, dtype=_dt.float32):
        self.minval = minval
        self.maxval = maxval
        self.seed = seed
        self.dtype = _dt.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        return random_ops.random_uniform(_shape_list(shape), self.minval, self.maxval,
                                         dtype or self.dtype, seed=self.seed)

    def get_config(self):
        return {"minval": self.minval, "maxval": self.maxval, "seed": self.seed,
                "dtype": self.dtype.name}


class RandomNormal(Initializer):
    _sample = staticmethod(random_ops.random_normal)

    def __init__(self, mean=0.0, stddev=1.0, seed=None, dtype=_dt.float32):
        self.mean = mean
        self.stddev = stddev
        self.seed = seed
        self.dtype = _float_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        return self._sample(_shape_list(shape), self.mean, self.stddev,
                            _float_dtype(dtype or self.dtype), seed=self.seed)

    def get_config(self):
        return {"mean": self.mean, "stddev": self.stddev, "seed": self.seed,
                "dtype": self.dtype.name}


class TruncatedNormal(RandomNormal):
    """Like ``RandomNormal``, re-drawing values beyond two standard deviations."""

    _sample = staticmethod(random_ops.truncated_normal)


def _compute_fans(shape):
    """(fan_in, fan_out) as TF1 computes them; conv kernels are (..., in_depth, out_depth)."""
    if len(shape) < 1:
        fan_in = fan_out = 1
    elif len(shape) == 1:
        fan_in = fan_out = shape[0]
    elif len(shape) == 2:
        fan_in, fan_out = shape
    else:
        receptive = 1.0
        for d in shape[:-2]:
            receptive *= d
        fan_in = shape[-2] * receptive
        fan_out = shape[-1] * receptive
    return int(fan_in), int(fan_out)


class VarianceScaling(Initializer):
    """Samples with variance ``scale / n`` (n = fan_in, fan_out or their mean).

    ``distribution="normal"`` means the truncated normal in TF1 (kept for compatibility);
    ``"untruncated_normal"`` is the plain normal; ``"uniform"`` draws from [-limit, limit] with
    limit = sqrt(3 * scale / n).
    """

    def __init__(self, scale=1.0, mode="fan_in", distribution="truncated_normal", seed=None,
                 dtype=_dt.float32):
        if scale <= 0.0:
            raise ValueError("`scale` must be positive float.")
        if mode not in {"fan_in", "fan_out", "fan_avg"}:
            raise ValueError(f"Invalid `mode` argument: {mode}")
        distribution = distribution.lower()
        if distribution not in {"normal", "uniform", "truncated_normal", "untruncated_normal"}:
            raise ValueError(f"Invalid `distribution` argument: {distribution}")
        self.scale = scale
        self.mode = mode
        self.distribution = distribution
        self.seed = seed
        self.dtype = _float_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        dtype = _float_dtype(dtype or self.dtype)
        shape = _shape_list(shape)
        fan_shape = shape if partition_info is None else _shape_list(partition_info.full_shape)
        fan_in, fan_out = _compute_fans(fan_shape)
        scale = self.scale
        if self.mode == "fan_in":
            scale /= max(1.0, fan_in)
        elif self.mode == "fan_out":
            scale /= max(1.0, fan_out)
        else:
            scale /= max(1.0, (fan_in + fan_out) / 2.0)
        if self.distribution in ("normal", "truncated_normal"):
            stddev = math.sqrt(scale) / _TRUNCATED_NORMAL_STD
            return random_ops.truncated_normal(shape, 0.0, stddev, dtype, seed=self.seed)
        if self.distribution == "untruncated_normal":
            return random_ops.random_normal(shape, 0.0, math.sqrt(scale), dtype, seed=self.seed)
        limit = math.sqrt(3.0 * scale)
        return random_ops.random_uniform(shape, -limit, limit, dtype, seed=self.seed)

    def get_config(self):
        return {"scale": self.scale, "mode": self.mode, "distribution": self.distribution,
                "seed": self.seed, "dtype": self.dtype.name}


class GlorotUniform(VarianceScaling):
    """Uniform on [-limit, limit], limit = sqrt(6 / (fan_in + fan_out)) (Glorot & Bengio)."""

    def __init__(self, seed=None, dtype=_dt.float32):
        super().__init__(scale=1.0, mode="fan_avg", distribution="uniform", seed=seed,
                         dtype=dtype)

    def get_config(self):
        return {"seed": self.seed, "dtype": self.dtype.name}


class GlorotNormal(VarianceScaling):
    """Truncated normal with stddev sqrt(2 / (fan_in + fan_out)) (after truncation)."""

    def __init__(self, seed=None, dtype=_dt.float32):
        super().__init__(scale=1.0, mode="fan_avg", distribution="truncated_normal", seed=seed,
                         dtype=dtype)

    def get_config(self):
        return {"seed": self.seed, "dtype": self.dtype.name}


class UniformUnitScaling(Initializer):
    """Deprecated TF1 initializer: uniform keeping the input scale, limit sqrt(3 / fan_in) *
    factor, where fan_in is the product of all but the last dimension."""

    def __init__(self, factor=1.0, seed=None, dtype=_dt.float32):
        self.factor = factor
        self.seed = seed
        self.dtype = _float_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        dtype = _float_dtype(dtype or self.dtype)
        shape = _shape_list(shape)
        scale_shape = shape if partition_info is None else _shape_list(partition_info.full_shape)
        input_size = 1.0
        for d in scale_shape[:-1]:
            input_size *= float(d)
        input_size = max(input_size, 1.0)
        limit = math.sqrt(3 / input_size) * self.factor
        return random_ops.random_uniform(shape, -limit, limit, dtype, seed=self.seed)

    def get_config(self):
        return {"factor": self.factor, "seed": self.seed, "dtype": self.dtype.name}


class Orthogonal(Initializer):
    """A (semi-)orthogonal matrix from the QR decomposition of a normal sample, reshaped.

    The QR factorization runs when the graph is built: the normal sample comes from a seeded
    NumPy generator (the graph seed and op seed as TF combines them), so the initializer is one
    constant op and reproducible whenever a seed is set.
    """

    def __init__(self, gain=1.0, seed=None, dtype=_dt.float32):
        self.gain = gain
        self.seed = seed
        self.dtype = _float_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        dtype = _float_dtype(dtype or self.dtype)
        shape = _shape_list(shape)
        if len(shape) < 2:
            raise ValueError("The tensor to initialize must be at least two-dimensional")
        num_rows = int(np.prod(shape[:-1]))
        num_cols = shape[-1]
        flat = (num_cols, num_rows) if num_rows < num_cols else (num_rows, num_cols)
        a = _build_time_rng(self.seed).standard_normal(flat)
        q, r = np.linalg.qr(a)
        q = q * np.sign(np.diag(r))  # make the decomposition unique (Mezzadri's correction)
        if num_rows < num_cols:
            q = q.T
        value = (self.gain * q).reshape(shape).astype(dtype._np)
        return constant_op.constant(value, dtype=dtype, name="orthogonal")

    def get_config(self):
        return {"gain": self.gain, "seed": self.seed, "dtype": self.dtype.name}


class Identity(Initializer):
    """``gain`` times the identity matrix (2-D shapes only)."""

    def __init__(self, gain=1.0, dtype=_dt.float32):
        self.gain = gain
        self.dtype = _float_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        shape = _shape_list(shape) if partition_info is None else \
            _shape_list(partition_info.full_shape)
        if len(shape) != 2:
            raise ValueError("Identity matrix initializer can only be used for 2D matrices.")
        dtype = _float_dtype(dtype or self.dtype)
        return math_ops.multiply(constant_op.constant(np.eye(*shape), dtype=dtype),
                                 constant_op.constant(self.gain, dtype=dtype))

    def get_config(self):
        return {"gain": self.gain, "dtype": self.dtype.name}


def _build_time_rng(op_seed):
    """A NumPy generator seeded by TF1's seed rules (graph seed, op seed); unseeded (OS entropy)
    when neither is set."""
    seed1, seed2 = get_seed(op_seed)
    if seed1 is None and seed2 is None:
        return np.random.default_rng()
    return np.random.default_rng([int(seed1 or 0), int(seed2 or 0)])


def he_normal(seed=None) -> VarianceScaling:
    """He et al.'s normal initializer: truncated normal with stddev sqrt(2 / fan_in)."""
    return VarianceScaling(scale=2.0, mode="fan_in", distribution="truncated_normal", seed=seed)


def he_uniform(seed=None) -> VarianceScaling:
    """He et al.'s uniform initializer: uniform on [-limit, limit], limit sqrt(6 / fan_in)."""
    return VarianceScaling(scale=2.0, mode="fan_in", distribution="uniform", seed=seed)


def lecun_normal(seed=None) -> VarianceScaling:
    """LeCun's normal initializer: truncated normal with stddev sqrt(1 / fan_in)."""
    return VarianceScaling(scale=1.0, mode="fan_in", distribution="truncated_normal", seed=seed)


def lecun_uniform(seed=None) -> VarianceScaling:
    """LeCun's uniform initializer: uniform on [-limit, limit], limit sqrt(3 / fan_in)."""
    return VarianceScaling(scale=1.0, mode="fan_in", distribution="uniform", seed=seed)


# TF1's public names are the classes themselves.
zeros_initializer = Zeros
ones_initializer = Ones
constant_initializer = Constant
random_uniform_initializer = RandomUniform
random_normal_initializer = RandomNormal
truncated_normal_initializer = TruncatedNormal
uniform_unit_scaling_initializer = UniformUnitScaling
variance_scaling_initializer = VarianceScaling
glorot_uniform_initializer = GlorotUniform
glorot_normal_initializer = GlorotNormal
orthogonal_initializer = Orthogonal

__all__ = [
    "zeros_initializer", "ones_initializer", "constant_initializer", "random_uniform_initializer",
    "random_normal_initializer", "truncated_normal_initializer",
    "uniform_unit_scaling_initializer", "variance_scaling_initializer",
    "glorot_uniform_initializer", "glorot_normal_initializer", "orthogonal_initializer",
]
