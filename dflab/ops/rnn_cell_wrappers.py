"""``tf.nn.rnn_cell`` wrappers: ``DropoutWrapper``, ``ResidualWrapper`` and ``DeviceWrapper``.

A wrapper is a cell around a cell: its ``state_size``, ``output_size`` and ``zero_state`` are
the wrapped cell's, and calling it calls the wrapped cell (in the wrapped cell's own variable
scope, so wrapping adds no variables and changes no names) with something around the call:
dropout on the inputs, outputs and state; the input added to the output; a device scope.
"""

from __future__ import annotations

from dflab.framework import nest
from dflab.framework import ops as _ops
from dflab.ops import array_ops, random_ops
from dflab.ops import math_ops as _m
from dflab.ops.nn_ops import dropout
from dflab.ops.rnn_cell_impl import LSTMStateTuple, RNNCell, assert_like_rnncell


class _Wrapper(RNNCell):
    def __init__(self, cell, name=None):
        super().__init__(name=name)
        assert_like_rnncell("cell", cell)
        self.cell = cell

    @property
    def wrapped_cell(self):
        return self.cell

    @property
    def state_size(self):
        return self.cell.state_size

    @property
    def output_size(self):
        return self.cell.output_size

    def zero_state(self, batch_size, dtype):
        with _ops.name_scope(type(self).__name__ + "ZeroState",
                             values=[batch_size] if isinstance(batch_size, _ops.Tensor)
                             else None):
            return self.cell.zero_state(batch_size, dtype)

    @property
    def trainable_weights(self):
        return self.cell.trainable_weights

    @property
    def weights(self):
        return self.cell.weights

    def __call__(self, inputs, state, scope=None):
        return self._call_wrapped(inputs, state, lambda i, s: self.cell(i, s, scope=scope))


def _keeps(p) -> bool:
    """Whether a keep probability asks for dropout (a tensor always may)."""
    return not isinstance(p, (int, float)) or p < 1


def _default_state_filter(substate):
    """TF's default: every state is dropped out except an LSTM's memory ``c``."""
    if isinstance(substate, LSTMStateTuple):
        return LSTMStateTuple(c=False, h=True)
    return True


class DropoutWrapper(_Wrapper):
    """Dropout on a cell's inputs, outputs and (by default all but an LSTM's ``c``) state.
    With ``variational_recurrent`` one mask per sequence is drawn (the first call) and
    reused at every step."""

    def __init__(self, cell, input_keep_prob=1.0, output_keep_prob=1.0, state_keep_prob=1.0,
                 variational_recurrent=False, input_size=None, dtype=None, seed=None,
                 dropout_state_filter_visitor=None, **kwargs):
        super().__init__(cell, name=kwargs.get("name"))
        for p, what in ((input_keep_prob, "input"), (output_keep_prob, "output"),
                        (state_keep_prob, "state")):
            if isinstance(p, (int, float)) and not 0.0 < p <= 1.0:
                raise ValueError(f"Parameter {what}_keep_prob must be between 0 and 1: {p}")
        if variational_recurrent and dtype is None:
            raise ValueError("When variational_recurrent=True, dtype must be provided")
        self._input_keep = input_keep_prob
        self._output_keep = output_keep_prob
        self._state_keep = state_keep_prob
        self._variational = variational_recurrent
        self._input_size = input_size
        self._seed = seed
        self._filter = dropout_state_filter_visitor or _default_state_filter
        self._dtype_for_masks = dtype
        self._masks: dict[str, object] = {}

    def _random_mask(self, shape_like, keep, salt):
        """A 0/1-over-keep mask shaped like ``shape_like`` (one per sequence)."""
        seed = None if self._seed is None else self._seed + salt
        shape = array_ops.shape(shape_like)
        noise = random_ops.random_uniform(shape, seed=seed, dtype=shape_like.dtype.base_dtype)
        return _m.truediv(_m.floor(_m.add(keep, noise)), keep)

    def _drop(self, values, keep, salt, which, filtered=None):
        if not _keeps(keep):
            return values
        flat = nest.flatten(values)
        keep_flags = nest.flatten(filtered) if filtered is not None else [True] * len(flat)
        out = []
        for i, (v, use) in enumerate(zip(flat, keep_flags)):
            if not use:
                out.append(v)
                continue
            if self._variational:
                key = f"{which}{i}"
                if key not in self._masks:
                    self._masks[key] = self._random_mask(v, keep, salt + i)
                out.append(_m.multiply(v, self._masks[key]))
            else:
                seed = None if self._seed is None else self._seed + salt + i
                out.append(dropout(v, keep_prob=keep, seed=seed))
        return nest.pack_sequence_as(values, out)

    def _call_wrapped(self, inputs, state, call):
        inputs = self._drop(inputs, self._input_keep, 0, "input")
        output, new_state = call(inputs, state)
        if _keeps(self._state_keep):
            new_state = self._drop(new_state, self._state_keep, 100, "state",
                                   self._state_flags(new_state))
        output = self._drop(output, self._output_keep, 200, "output")
        return output, new_state

    def _state_flags(self, state):
        """Which parts of the state dropout applies to (the filter's verdict)."""
        if isinstance(state, LSTMStateTuple):
            flags = self._filter(state)
            return flags if isinstance(flags, tuple) else LSTMStateTuple(c=flags, h=flags)
        return nest.map_structure(lambda leaf: bool(self._filter(leaf)), state)


class ResidualWrapper(_Wrapper):
    """The cell's output plus its input (or ``residual_fn(inputs, outputs)``)."""

    def __init__(self, cell, residual_fn=None, **kwargs):
        super().__init__(cell, name=kwargs.get("name"))
        self._residual_fn = residual_fn

    def _call_wrapped(self, inputs, state, call):
        output, new_state = call(inputs, state)

        def add(i, o):
            i, o = _ops.convert_to_tensor(i), _ops.convert_to_tensor(o)
            i.shape.assert_is_compatible_with(o.shape)
            return _m.add(i, o)

        fn = self._residual_fn or (lambda i, o: nest.map_structure(add, i, o))
        return fn(inputs, output), new_state


class DeviceWrapper(_Wrapper):
    """Runs the cell (and builds its zero state) on ``device``."""

    def __init__(self, cell, device, **kwargs):
        super().__init__(cell, name=kwargs.get("name"))
        self._device = device

    def zero_state(self, batch_size, dtype):
        with _ops.device(self._device):
            return super().zero_state(batch_size, dtype)

    def _call_wrapped(self, inputs, state, call):
        with _ops.device(self._device):
            return call(inputs, state)


__all__: list = []
