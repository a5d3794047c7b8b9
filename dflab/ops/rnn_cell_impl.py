"""``tf.nn.rnn_cell``: recurrent cells (TF 1.x's ``rnn_cell_impl``).

A cell maps ``(inputs, state)`` to ``(output, new_state)`` for one time step. Like TF's
``LayerRNNCell``, a cell creates its variables once, on its first call, in a variable scope
named after it (``<enclosing scope>/basic_lstm_cell``, or the ``scope`` passed to the first
call), and reuses them on every later call. Variable names, shapes and gate orders are TF's
(``kernel`` of shape [input_depth + h_depth, k * num_units], ``bias``; LSTM gates i, j, f, o;
GRU ``gates/`` r, u and ``candidate/``), so checkpoints and weights are interchangeable with TF.

Cells are usually first called inside the body of a ``while_loop`` (``dynamic_rnn``); their
variables must nevertheless live outside the loop, created once: ``Variable`` itself builds its
ops with the control-flow context cleared, as TF's ``init_scope`` does.
"""

from __future__ import annotations

import collections
import re

from dflab.framework import dtypes as _dt
from dflab.framework import nest
from dflab.framework import ops as _ops
from dflab.framework.tensor_shape import TensorShape
from dflab.ops import array_ops, init_ops, math_ops
from dflab.ops import variable_scope as vs

_WEIGHTS = "kernel"
_BIAS = "bias"


def _snake(name):
    s = re.sub(r"(.)([A-Z][a-z0-9]+)", r"\1_\2", name)
    s = re.sub(r"([a-z])([A-Z])", r"\1_\2", s).lower()
    return s.replace("l_s_t_m", "lstm").replace("g_r_u", "gru").replace("r_n_n", "rnn")


def _base_name(cls):
    # TF's names: BasicLSTMCell -> basic_lstm_cell, GRUCell -> gru_cell, MultiRNNCell ->
    # multi_rnn_cell.
    n = cls.__name__
    for acronym in ("LSTM", "GRU", "RNN"):
        n = n.replace(acronym, acronym.capitalize())
    return _snake(n)


def _dims(size):
    """A state/output size (int or TensorShape) as a list of ints."""
    if isinstance(size, TensorShape):
        return size.as_list()
    if isinstance(size, (list, tuple)):
        return list(size)
    return [int(size)]


def _zero_state_tensors(state_size, batch_size, dtype):
    def zeros(s):
        dims = _dims(s)
        if isinstance(batch_size, _ops.Tensor):
            shape = array_ops.stack([batch_size] + [array_ops.constant(d) for d in dims])
            z = array_ops.zeros(shape, dtype=dtype)
            z.set_shape([None] + dims)
            return z
        return array_ops.zeros([int(batch_size)] + dims, dtype=dtype)

    return nest.map_structure(zeros, state_size)


class LSTMStateTuple(collections.namedtuple("LSTMStateTuple", ("c", "h"))):
    """The (cell state, hidden state) pair of an LSTM."""

    __slots__ = ()

    @property
    def dtype(self):
        c, h = self
        if c.dtype != h.dtype:
            raise TypeError(f"Inconsistent internal state: {c.dtype} vs {h.dtype}")
        return c.dtype


class RNNCell:
    """An RNN cell: ``state_size``, ``output_size``, ``zero_state`` and
    ``__call__(inputs, state) -> (output, new_state)``; subclasses define ``build`` and
    ``call``."""

    def __init__(self, trainable=True, name=None, dtype=None, _reuse=None, **kwargs):
        self.trainable = trainable
        self._name = name
        self._base = name or _base_name(type(self))
        self._dtype = _dt.as_dtype(dtype).base_dtype if dtype is not None else None
        self._reuse = _reuse
        self._scope = None
        self.built = False
        self._trainable_weights: list = []
        self._non_trainable_weights: list = []

    @property
    def state_size(self):
        raise NotImplementedError("Abstract method")

    @property
    def output_size(self):
        raise NotImplementedError("Abstract method")

    @property
    def dtype(self):
        return self._dtype

    @property
    def name(self):
        return self._scope.name if self._scope is not None else self._base

    @property
    def trainable_weights(self):
        return list(self._trainable_weights) if self.trainable else []

    @property
    def trainable_variables(self):
        return self.trainable_weights

    @property
    def weights(self):
        return self.trainable_weights + list(self._non_trainable_weights)

    @property
    def variables(self):
        return self.weights

    def build(self, inputs_shape):
        self.built = True

    def call(self, inputs, state):
        raise NotImplementedError("Abstract method")

    def zero_state(self, batch_size, dtype):
        """All-zero state(s) for a batch of ``batch_size`` (an int or a scalar tensor)."""
        with _ops.name_scope(type(self).__name__ + "ZeroState",
                             values=[batch_size] if isinstance(batch_size, _ops.Tensor)
                             else None):
            return _zero_state_tensors(self.state_size, batch_size, dtype)

    def get_initial_state(self, inputs=None, batch_size=None, dtype=None):
        if inputs is not None:
            inputs = _ops.convert_to_tensor(inputs)
            batch_size = inputs.shape.as_list()[0] or array_ops.shape(inputs)[0]
            dtype = dtype or inputs.dtype
        return self.zero_state(batch_size, dtype)

    def add_variable(self, name, shape, dtype=None, initializer=None, trainable=True,
                     **kwargs):
        return vs.get_variable(name, shape=shape, dtype=dtype or self._dtype or _dt.float32,
                               initializer=initializer, trainable=trainable and self.trainable)

    add_weight = add_variable

    def _rnn_get_variable(self, getter, *args, **kwargs):
        v = getter(*args, **kwargs)  # built outside any loop or cond (see the module docstring)
        weights = self._trainable_weights if kwargs.get("trainable", True) and \
            self.trainable else self._non_trainable_weights
        if all(v is not w for w in weights):
            weights.append(v)
        return v

    def __call__(self, inputs, state, scope=None):
        if self._scope is None:
            if scope is not None:
                with vs.variable_scope(scope, auxiliary_name_scope=False) as captured:
                    self._scope = captured
            elif self._reuse:
                with vs.variable_scope(self._base, auxiliary_name_scope=False) as captured:
                    self._scope = captured
            else:
                with vs.variable_scope(None, default_name=self._base,
                                       auxiliary_name_scope=False) as captured:
                    self._scope = captured
        if self._dtype is None:
            first = nest.flatten(inputs)[0]
            if isinstance(first, _ops.Tensor) and first.dtype.base_dtype.is_floating:
                self._dtype = first.dtype.base_dtype
        with vs.variable_scope(self._scope, reuse=True if self.built else self._reuse,
                               custom_getter=self._rnn_get_variable):
            if not self.built:
                inputs = nest.map_structure(_ops.convert_to_tensor, inputs)
                self.build(nest.map_structure(lambda x: x.shape, inputs))
                self.built = True
            return self.call(inputs, state)


LayerRNNCell = RNNCell


def _input_depth(inputs_shape, who):
    depth = TensorShape(inputs_shape).as_list()[-1] if TensorShape(inputs_shape).ndims else None
    if depth is None:
        raise ValueError(f"Expected inputs.shape[-1] to be known, saw shape: {inputs_shape} "
                         f"({who})")
    return depth


class BasicRNNCell(RNNCell):
    """``output = new_state = activation(W [inputs, state] + b)``."""

    def __init__(self, num_units, activation=None, reuse=None, name=None, dtype=None, **kwargs):
        super().__init__(name=name, dtype=dtype, _reuse=reuse, **kwargs)
        self._num_units = num_units
        self._activation = activation or math_ops.tanh

    @property
    def state_size(self):
        return self._num_units

    @property
    def output_size(self):
        return self._num_units

    def build(self, inputs_shape):
        depth = _input_depth(inputs_shape, type(self).__name__)
        self._kernel = self.add_variable(_WEIGHTS, [depth + self._num_units, self._num_units])
        self._bias = self.add_variable(_BIAS, [self._num_units],
                                       initializer=init_ops.zeros_initializer())
        self.built = True

    def call(self, inputs, state):
        from dflab.ops import nn_ops

        gate = math_ops.matmul(array_ops.concat([inputs, state], 1), self._kernel)
        output = self._activation(nn_ops.bias_add(gate, self._bias))
        return output, output


class GRUCell(RNNCell):
    """Gated recurrent unit (Cho et al. 2014), TF's variant and variable layout."""

    def __init__(self, num_units, activation=None, reuse=None, kernel_initializer=None,
                 bias_initializer=None, name=None, dtype=None, **kwargs):
        super().__init__(name=name, dtype=dtype, _reuse=reuse, **kwargs)
        self._num_units = num_units
        self._activation = activation or math_ops.tanh
        self._kernel_initializer = kernel_initializer
        self._bias_initializer = bias_initializer

    @property
    def state_size(self):
        return self._num_units

    @property
    def output_size(self):
        return self._num_units

    def build(self, inputs_shape):
        depth = _input_depth(inputs_shape, type(self).__name__)
        n = self._num_units
        self._gate_kernel = self.add_variable(f"gates/{_WEIGHTS}", [depth + n, 2 * n],
                                              initializer=self._kernel_initializer)
        self._gate_bias = self.add_variable(
            f"gates/{_BIAS}", [2 * n], initializer=self._bias_initializer
            if self._bias_initializer is not None else init_ops.constant_initializer(1.0))
        self._candidate_kernel = self.add_variable(f"candidate/{_WEIGHTS}", [depth + n, n],
                                                   initializer=self._kernel_initializer)
        self._candidate_bias = self.add_variable(
            f"candidate/{_BIAS}", [n], initializer=self._bias_initializer
            if self._bias_initializer is not None else init_ops.zeros_initializer())
        self.built = True

    def call(self, inputs, state):
        from dflab.ops import nn_ops

        gates = math_ops.sigmoid(nn_ops.bias_add(
            math_ops.matmul(array_ops.concat([inputs, state], 1), self._gate_kernel),
            self._gate_bias))
        r, u = array_ops.split(gates, 2, axis=1)
        candidate = nn_ops.bias_add(
            math_ops.matmul(array_ops.concat([inputs, r * state], 1), self._candidate_kernel),
            self._candidate_bias)
        c = self._activation(candidate)
        new_h = u * state + (1 - u) * c
        return new_h, new_h


class BasicLSTMCell(RNNCell):
    """LSTM without peepholes or projection (Zaremba et al. 2014); gates i, j, f, o."""

    def __init__(self, num_units, forget_bias=1.0, state_is_tuple=True, activation=None,
                 reuse=None, name=None, dtype=None, **kwargs):
        super().__init__(name=name, dtype=dtype, _reuse=reuse, **kwargs)
        self._num_units = num_units
        self._forget_bias = forget_bias
        self._state_is_tuple = state_is_tuple
        self._activation = activation or math_ops.tanh

    @property
    def state_size(self):
        n = self._num_units
        return LSTMStateTuple(n, n) if self._state_is_tuple else 2 * n

    @property
    def output_size(self):
        return self._num_units

    def build(self, inputs_shape):
        depth = _input_depth(inputs_shape, type(self).__name__)
        n = self._num_units
        self._kernel = self.add_variable(_WEIGHTS, [depth + n, 4 * n])
        self._bias = self.add_variable(_BIAS, [4 * n], initializer=init_ops.zeros_initializer())
        self.built = True

    def call(self, inputs, state):
        from dflab.ops import nn_ops

        sigmoid = math_ops.sigmoid
        if self._state_is_tuple:
            c, h = state
        else:
            c, h = array_ops.split(state, 2, axis=1)
        gates = nn_ops.bias_add(math_ops.matmul(array_ops.concat([inputs, h], 1), self._kernel),
                                self._bias)
        i, j, f, o = array_ops.split(gates, 4, axis=1)
        forget_bias = array_ops.constant(self._forget_bias, dtype=f.dtype)
        new_c = c * sigmoid(f + forget_bias) + sigmoid(i) * self._activation(j)
        new_h = self._activation(new_c) * sigmoid(o)
        new_state = LSTMStateTuple(new_c, new_h) if self._state_is_tuple else \
            array_ops.concat([new_c, new_h], 1)
        return new_h, new_state


class LSTMCell(RNNCell):
    """LSTM with optional peepholes (Gers & Schmidhuber 2000), cell clipping and output
    projection (Sak et al. 2014); gates i, j, f, o."""

    def __init__(self, num_units, use_peepholes=False, cell_clip=None, initializer=None,
                 num_proj=None, proj_clip=None, num_unit_shards=None, num_proj_shards=None,
                 forget_bias=1.0, state_is_tuple=True, activation=None, reuse=None, name=None,
                 dtype=None, **kwargs):
        super().__init__(name=name, dtype=dtype, _reuse=reuse, **kwargs)
        if num_unit_shards is not None or num_proj_shards is not None:
            raise NotImplementedError("num_unit_shards and num_proj_shards (deprecated in TF) "
                                      "are not supported; use a partitioner instead.")
        self._num_units = num_units
        self._use_peepholes = use_peepholes
        self._cell_clip = cell_clip
        self._initializer = initializer
        self._num_proj = num_proj
        self._proj_clip = proj_clip
        self._forget_bias = forget_bias
        self._state_is_tuple = state_is_tuple
        self._activation = activation or math_ops.tanh

    @property
    def state_size(self):
        h = self._num_proj or self._num_units
        return LSTMStateTuple(self._num_units, h) if self._state_is_tuple \
            else self._num_units + h

    @property
    def output_size(self):
        return self._num_proj or self._num_units

    def build(self, inputs_shape):
        depth = _input_depth(inputs_shape, type(self).__name__)
        n = self._num_units
        h = self._num_proj or n
        init = self._initializer
        self._kernel = self.add_variable(_WEIGHTS, [depth + h, 4 * n], initializer=init)
        self._bias = self.add_variable(_BIAS, [4 * n], initializer=init_ops.zeros_initializer())
        if self._use_peepholes:
            self._w_f_diag = self.add_variable("w_f_diag", [n], initializer=init)
            self._w_i_diag = self.add_variable("w_i_diag", [n], initializer=init)
            self._w_o_diag = self.add_variable("w_o_diag", [n], initializer=init)
        if self._num_proj is not None:
            self._proj_kernel = self.add_variable(f"projection/{_WEIGHTS}",
                                                  [n, self._num_proj], initializer=init)
        self.built = True

    def call(self, inputs, state):
        from dflab.ops import nn_ops

        sigmoid = math_ops.sigmoid
        n = self._num_units
        if self._state_is_tuple:
            c_prev, m_prev = state
        else:
            c_prev = array_ops.slice(state, [0, 0], [-1, n])
            m_prev = array_ops.slice(state, [0, n], [-1, self._num_proj or n])
        lstm = nn_ops.bias_add(
            math_ops.matmul(array_ops.concat([inputs, m_prev], 1), self._kernel), self._bias)
        i, j, f, o = array_ops.split(lstm, 4, axis=1)
        if self._use_peepholes:
            c = sigmoid(f + self._forget_bias + self._w_f_diag * c_prev) * c_prev + \
                sigmoid(i + self._w_i_diag * c_prev) * self._activation(j)
        else:
            c = sigmoid(f + self._forget_bias) * c_prev + sigmoid(i) * self._activation(j)
        if self._cell_clip is not None:
            c = math_ops.clip_by_value(c, -self._cell_clip, self._cell_clip)
        if self._use_peepholes:
            m = sigmoid(o + self._w_o_diag * c) * self._activation(c)
        else:
            m = sigmoid(o) * self._activation(c)
        if self._num_proj is not None:
            m = math_ops.matmul(m, self._proj_kernel)
            if self._proj_clip is not None:
                m = math_ops.clip_by_value(m, -self._proj_clip, self._proj_clip)
        new_state = LSTMStateTuple(c, m) if self._state_is_tuple else \
            array_ops.concat([c, m], 1)
        return m, new_state


class MultiRNNCell(RNNCell):
    """Cells stacked in layers: each layer's output is the next layer's input; the state is
    the tuple of the layers' states (variables under ``cell_<i>/``)."""

    def __init__(self, cells, state_is_tuple=True):
        super().__init__()
        if not cells:
            raise ValueError("Must specify at least one cell for MultiRNNCell.")
        if not nest.is_sequence(cells):
            raise TypeError(f"cells must be a list or tuple, but saw: {cells}.")
        self._cells = list(cells)
        self._state_is_tuple = state_is_tuple
        if not state_is_tuple and any(nest.is_sequence(c.state_size) for c in self._cells):
            raise ValueError("Some cells return tuples of states, but the flag "
                             "state_is_tuple is not set. State sizes are: "
                             f"{[c.state_size for c in self._cells]}")

    @property
    def state_size(self):
        if self._state_is_tuple:
            return tuple(c.state_size for c in self._cells)
        return sum(c.state_size for c in self._cells)

    @property
    def output_size(self):
        return self._cells[-1].output_size

    def zero_state(self, batch_size, dtype):
        with _ops.name_scope(type(self).__name__ + "ZeroState",
                             values=[batch_size] if isinstance(batch_size, _ops.Tensor)
                             else None):
            if self._state_is_tuple:
                return tuple(c.zero_state(batch_size, dtype) for c in self._cells)
            return super().zero_state(batch_size, dtype)

    @property
    def trainable_weights(self):
        return [w for c in self._cells for w in c.trainable_weights]

    def call(self, inputs, state):
        pos = 0
        cur = inputs
        new_states = []
        for i, cell in enumerate(self._cells):
            with vs.variable_scope(f"cell_{i}"):
                if self._state_is_tuple:
                    if not nest.is_sequence(state):
                        raise ValueError(f"Expected state to be a tuple of length "
                                         f"{len(self.state_size)}, but received: {state}")
                    cur_state = state[i]
                else:
                    cur_state = array_ops.slice(state, [0, pos], [-1, cell.state_size])
                    pos += cell.state_size
                cur, new_state = cell(cur, cur_state)
                new_states.append(new_state)
        return cur, (tuple(new_states) if self._state_is_tuple
                     else array_ops.concat(new_states, 1))


def assert_like_rnncell(cell_name, cell):
    """Raise TypeError unless ``cell`` behaves like an RNNCell."""
    checks = [hasattr(cell, "output_size"), hasattr(cell, "state_size"),
              hasattr(cell, "zero_state"), callable(cell)]
    if not all(checks):
        raise TypeError(f"The argument {cell_name!r} ({cell}) is not an RNNCell: it must have "
                        "output_size, state_size and zero_state, and be callable.")


__all__: list = []
