"""``tf.random.Generator`` (TF 2.x's random-number generator object), its global instance,
and the stateful ops it builds on.

A generator keeps TF's Philox state (counter and key, three int64 words) in a resource
variable; each op on it reads the state, advances it and draws from it (kernels in
``dflab.kernels.stateful_random_kernels``), so a generator made from a seed draws TF's numbers,
call after call. In graph mode its variable is initialised like any other
(``tf.global_variables_initializer()``). Only the Philox algorithm is offered.
"""

from __future__ import annotations

import os

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.registry import NotDifferentiable, register_op
from dflab.framework.tensor_shape import TensorShape
from dflab.ops import array_ops, math_ops
from dflab.ops.random_ops import _shape_arg_shape, _shape_tensor, _tensors
from dflab.ops.stateless_random_ops import Algorithm, _alg_value, create_rng_state


def _fill_infer(op):
    return [(op.get_attr("dtype"), _shape_arg_shape(op, op.inputs[2]))]


def _int_infer(op):
    return [(op.inputs[3].dtype.base_dtype, _shape_arg_shape(op, op.inputs[2]))]


for _t in ("StatefulUniform", "StatefulStandardNormalV2", "StatefulTruncatedNormal",
           "StatefulUniformFullInt"):
    register_op(_t, _fill_infer, stateful=True)
    NotDifferentiable(_t)
register_op("StatefulUniformInt", _int_infer, stateful=True)
NotDifferentiable("StatefulUniformInt")
register_op("RngReadAndSkip", lambda op: [(_dt.int64, TensorShape([3]))], stateful=True)
NotDifferentiable("RngReadAndSkip")

_UNIFORM_DTYPES = (_dt.float16, _dt.float32, _dt.float64, _dt.int32, _dt.int64, _dt.uint32,
                   _dt.uint64)


class Generator:
    """A random-number generator whose state (TF's Philox counter and key) is a variable:
    ``Generator.from_seed(1).normal([3])`` draws TF's numbers for that seed."""

    def __init__(self, copy_from=None, state=None, alg=None):
        from dflab.ops.variables import Variable

        if copy_from is not None:
            self._alg = copy_from.algorithm
            self._state_var = self._create_variable(copy_from.state)
            return
        self._alg = _alg_value(alg if alg is not None else Algorithm.PHILOX)
        if self._alg == Algorithm.THREEFRY.value:
            raise ValueError("tf.random.Generator: only the Philox algorithm is offered")
        if isinstance(state, Variable):
            self._check_shape(state.shape)
            self._state_var = state
        else:
            state = _ops.convert_to_tensor(state, dtype=_dt.int64)
            self._check_shape(state.shape)
            self._state_var = self._create_variable(state)

    @staticmethod
    def _check_shape(shape):
        if not TensorShape(shape).is_compatible_with([3]):
            raise ValueError(f"Shape {TensorShape(shape)} must be compatible with [3], the "
                             "size of a Philox state")

    @staticmethod
    def _create_variable(initial):
        from dflab.ops.variables import Variable

        with _ops.name_scope("random_generator"):
            return Variable(initial, dtype=_dt.int64, trainable=False, name="StateVar")

    # --- constructors ---------------------------------------------------------------------
    @classmethod
    def from_state(cls, state, alg):
        return cls(state=state, alg=alg)

    @classmethod
    def from_seed(cls, seed, alg=None):
        alg = Algorithm.PHILOX if alg is None else alg
        return cls(state=create_rng_state(seed, alg), alg=alg)

    @classmethod
    def from_non_deterministic_state(cls, alg=None):
        words = [int.from_bytes(os.urandom(8), "little", signed=True) for _ in range(3)]
        return cls(state=words, alg=Algorithm.PHILOX if alg is None else alg)

    @classmethod
    def from_key_counter(cls, key, counter, alg):
        counter = _ops.convert_to_tensor(counter, dtype=_dt.int64)
        key = array_ops.reshape(_ops.convert_to_tensor(key, dtype=_dt.int64), [1])
        return cls(state=array_ops.concat([counter, key], 0), alg=alg)

    # --- state ------------------------------------------------------------------------------
    @property
    def state(self):
        """The state variable (``int64``, ``[counter_low, counter_high, key]``)."""
        return self._state_var

    @property
    def algorithm(self) -> int:
        return self._alg

    @property
    def key(self):
        return self._state_var[-1]

    def reset(self, state) -> None:
        """Set the state (as TF, returns nothing: in graph mode the assignment is an op of the
        graph, ``generator.state.assign`` gives it to run)."""
        state = _ops.convert_to_tensor(state, dtype=_dt.int64)
        self._check_shape(state.shape)
        self._state_var.assign(state)

    def reset_from_seed(self, seed):
        return self.reset(create_rng_state(seed, self._alg))

    def reset_from_key_counter(self, key, counter):
        counter = _ops.convert_to_tensor(counter, dtype=_dt.int64)
        key = array_ops.reshape(_ops.convert_to_tensor(key, dtype=_dt.int64), [1])
        return self.reset(array_ops.concat([counter, key], 0))

    def skip(self, delta):
        """Advance the state as ``delta`` outputs would; returns the state before."""
        delta = _ops.convert_to_tensor(delta, dtype=_dt.int64, name="delta")
        return self._op("RngReadAndSkip", [delta], {}, alg_dtype=_dt.int32)

    # --- sampling ---------------------------------------------------------------------------
    def _op(self, op_type, inputs, attrs, alg_dtype=_dt.int64):
        alg = _ops.convert_to_tensor(self._alg, dtype=alg_dtype, name="algorithm")
        with _ops.colocate_with(self._state_var.op):
            return _ops.apply_op(op_type, [self._state_var.handle, alg, *inputs],
                                 attrs).outputs[0]

    def _fill(self, op_type, shape, dtype):
        return self._op(op_type, [_shape_tensor(shape)], {"dtype": dtype})

    def normal(self, shape, mean=0.0, stddev=1.0, dtype=_dt.float32, name=None):
        with _ops.name_scope(name, "stateful_normal", _tensors(shape, mean, stddev)) as scope:
            mean = _ops.convert_to_tensor(mean, dtype=dtype, name="mean")
            stddev = _ops.convert_to_tensor(stddev, dtype=dtype, name="stddev")
            rnd = self._fill("StatefulStandardNormalV2", shape, _dt.as_dtype(dtype))
            return math_ops.add(math_ops.multiply(rnd, stddev), mean, name=scope)

    def truncated_normal(self, shape, mean=0.0, stddev=1.0, dtype=_dt.float32, name=None):
        with _ops.name_scope(name, "truncated_normal", _tensors(shape, mean, stddev)) as sc:
            mean = _ops.convert_to_tensor(mean, dtype=dtype, name="mean")
            stddev = _ops.convert_to_tensor(stddev, dtype=dtype, name="stddev")
            rnd = self._fill("StatefulTruncatedNormal", shape, _dt.as_dtype(dtype))
            return math_ops.add(math_ops.multiply(rnd, stddev), mean, name=sc)

    def uniform(self, shape, minval=0, maxval=None, dtype=_dt.float32, name=None):
        dtype = _dt.as_dtype(dtype).base_dtype
        if dtype not in _UNIFORM_DTYPES:
            raise ValueError(f"Argument `dtype` got invalid value {dtype}.")
        if dtype.is_integer:
            if (minval is None) != (maxval is None):
                raise ValueError(f"For integer `dtype` argument {dtype}, argument `minval` "
                                 "and `maxval` must be both None or not None.")
            if minval is not None and dtype in (_dt.uint32, _dt.uint64):
                raise ValueError(f"Argument `dtype` got invalid value {dtype} when argument "
                                 "`minval` is not None.")
        elif maxval is None:
            maxval = 1
        with _ops.name_scope(name, "stateful_uniform",
                             _tensors(shape, minval, maxval)) as scope:
            if dtype.is_integer and minval is None:
                return self._fill("StatefulUniformFullInt", shape, dtype)
            lo = _ops.convert_to_tensor(minval, dtype=dtype, name="min")
            hi = _ops.convert_to_tensor(maxval, dtype=dtype, name="max")
            if dtype.is_integer:
                return self._op("StatefulUniformInt", [_shape_tensor(shape), lo, hi], {})
            rnd = self._fill("StatefulUniform", shape, dtype)
            return math_ops.add(math_ops.multiply(rnd, math_ops.subtract(hi, lo)), lo,
                                name=scope)

    def uniform_full_int(self, shape, dtype=_dt.uint64, name=None):
        with _ops.name_scope(name, "stateful_uniform_full_int", _tensors(shape)):
            return self._fill("StatefulUniformFullInt", shape, _dt.as_dtype(dtype))

    def make_seeds(self, count=1):
        """``[2, count]`` int64 seeds for the stateless ops, drawn from this generator."""
        keys = self.uniform_full_int([count], dtype=_dt.int64)
        return array_ops.stack([keys, array_ops.zeros_like(keys)])

    def split(self, count=1):
        """``count`` new generators, keyed by draws of this one."""
        keys = self.uniform_full_int([count], dtype=_dt.int64)
        zeros = _ops.convert_to_tensor([0, 0], dtype=_dt.int64)
        return [Generator(state=array_ops.concat([zeros, array_ops.reshape(k, [1])], 0),
                          alg=self._alg)
                for k in array_ops.unstack(keys, num=count)]


_global_generator: Generator | None = None


def get_global_generator() -> Generator:
    """The global generator, made from a nondeterministic state the first time."""
    global _global_generator
    if _global_generator is None:
        _global_generator = Generator.from_non_deterministic_state()
    return _global_generator


def set_global_generator(generator: Generator) -> None:
    global _global_generator
    _global_generator = generator


__all__: list[str] = []  # tf.random.* only (see dflab.namespaces)
