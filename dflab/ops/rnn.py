"""``tf.nn.dynamic_rnn`` and ``tf.nn.static_rnn`` (TF 1.x's ``rnn.py``).

``dynamic_rnn`` runs a cell over time as *one* ``while_loop`` (TF's ``_dynamic_rnn_loop``): the
time-major inputs are unstacked into ``TensorArray``s, iteration t reads step t, calls the cell
and writes the output at t; the outputs are stacked after the loop. With ``sequence_length``,
the loop runs max(sequence_length) steps (never unrolled to the longest possible sequence), and
at each step batch entries whose sequence has ended get a zero output and keep their state
(``_rnn_step``'s copy-through with ``where``), so the final state is each sequence's state at its
last step. Output steps the loop never reaches read as zeros from the output ``TensorArray``.

``static_rnn`` unrolls the same cell over a Python list of inputs: the reference the dynamic
version is tested against (the same variables are used when the same cell is passed).
"""

from __future__ import annotations

from dflab.framework import dtypes as _dt
from dflab.framework import nest
from dflab.framework import ops as _ops
from dflab.framework.tensor_shape import TensorShape
from dflab.ops import array_ops, control_flow_ops, math_ops
from dflab.ops import variable_scope as vs
from dflab.ops.rnn_cell_impl import _dims, assert_like_rnncell
from dflab.ops.tensor_array_ops import TensorArray


def _transpose_batch_time(x):
    """[batch, time, ...] <-> [time, batch, ...]."""
    rank = x.shape.ndims
    if rank is not None and rank < 2:
        raise ValueError(f"Expected input tensor {x} to have rank at least 2")
    if rank is None:
        r = array_ops.rank(x)
        perm = array_ops.concat([[1, 0], math_ops.range(2, r)], 0)
    else:
        perm = [1, 0] + list(range(2, rank))
    out = array_ops.transpose(x, perm)
    if rank is not None:
        dims = x.shape.as_list()
        out.set_shape([dims[1], dims[0]] + dims[2:])
    return out


def _best_effort_batch_size(flat_input):
    """The batch size (dim 1 of time-major inputs): static when known, else a tensor."""
    for x in flat_input:
        if x.shape.ndims is None:
            continue
        if x.shape.ndims < 2:
            raise ValueError(f"Expected input tensor {x} to have rank at least 2")
        b = x.shape.as_list()[1]
        if b is not None:
            return b
    return array_ops.shape(flat_input[0])[1]


def _infer_state_dtype(explicit_dtype, state):
    if explicit_dtype is not None:
        return _dt.as_dtype(explicit_dtype).base_dtype
    flat = nest.flatten(state)
    if not flat:
        raise ValueError("Unable to infer dtype from empty state.")
    dts = {s.dtype.base_dtype for s in flat}
    if len(dts) != 1:
        names = sorted(d.name for d in dts)
        raise ValueError(f"State has tensors of different inferred dtypes. Unable to infer a "
                         f"single representative dtype. Dtypes received: {names}")
    return dts.pop()


def _zeros(batch_size, size, dtype):
    dims = _dims(size)
    if isinstance(batch_size, _ops.Tensor):
        z = array_ops.zeros(array_ops.stack([batch_size] + [array_ops.constant(d)
                                                            for d in dims]), dtype=dtype)
        z.set_shape([None] + dims)
        return z
    return array_ops.zeros([batch_size] + dims, dtype=dtype)


def _rnn_step(time, sequence_length, zero_output, state, call_cell):
    """One step with copy-through: where ``time >= sequence_length``, the output is zero and
    the state is the previous one (TF's ``_rnn_step`` with ``skip_conditionals=True``: the
    selection is done at every step, which costs less than a cond when most sequences are
    long)."""
    flat_state = nest.flatten(state)
    flat_zero = nest.flatten(zero_output)
    copy_cond = time >= sequence_length

    def copy_one(old, new):
        if isinstance(old, TensorArray) or new.shape.ndims == 0:
            return new
        return array_ops.where(copy_cond, old, new)

    new_output, new_state = call_cell()
    nest.assert_same_structure(zero_output, new_output, check_types=False)
    nest.assert_same_structure(state, new_state, check_types=False)
    out = [copy_one(z, n) for z, n in zip(flat_zero, nest.flatten(new_output))]
    st = [copy_one(s, n) for s, n in zip(flat_state, nest.flatten(new_state))]
    for o, z in zip(out, flat_zero):
        o.set_shape(z.shape)
    for s, old in zip(st, flat_state):
        if not isinstance(s, TensorArray):
            s.set_shape(old.shape)
    return (nest.pack_sequence_as(zero_output, out), nest.pack_sequence_as(state, st))


def _initial_state(cell, initial_state, dtype, batch_size, what):
    if initial_state is not None:
        return initial_state
    if not dtype:
        raise ValueError(f"If there is no initial_state, you must give a dtype ({what}).")
    return cell.zero_state(batch_size, dtype)


def _check_sequence_length(sequence_length):
    sequence_length = _ops.convert_to_tensor(sequence_length, name="sequence_length")
    if sequence_length.shape.ndims not in (None, 1):
        raise ValueError(f"sequence_length must be a vector of length batch_size, but saw "
                         f"shape: {sequence_length.shape}")
    if sequence_length.dtype.base_dtype is not _dt.int32:
        sequence_length = math_ops.cast(sequence_length, _dt.int32)
    return array_ops.identity(sequence_length, name="sequence_length")


def dynamic_rnn(cell, inputs, sequence_length=None, initial_state=None, dtype=None,
                parallel_iterations=None, swap_memory=False, time_major=False, scope=None):
    """Run ``cell`` over ``inputs`` ([batch, time, ...], or [time, batch, ...] when
    ``time_major``; a nested structure of such tensors is allowed) in a ``while_loop``.

    Returns ``(outputs, final_state)``; ``outputs`` has the layout of ``inputs`` and the
    structure of ``cell.output_size``.
    """
    assert_like_rnncell("cell", cell)
    with vs.variable_scope(scope or "rnn"):
        flat_input = [_ops.convert_to_tensor(x) for x in nest.flatten(inputs)]
        if not time_major:
            flat_input = [_transpose_batch_time(x) for x in flat_input]
        parallel_iterations = parallel_iterations or 32
        if sequence_length is not None:
            sequence_length = _check_sequence_length(sequence_length)
        batch_size = _best_effort_batch_size(flat_input)
        state = _initial_state(cell, initial_state, dtype, batch_size, "dynamic_rnn")
        if sequence_length is not None:
            sl_shape = sequence_length.shape
            if isinstance(batch_size, int) and sl_shape.ndims == 1 and \
                    sl_shape.as_list()[0] not in (None, batch_size):
                raise ValueError(f"sequence_length has shape {sl_shape} but the batch size "
                                 f"is {batch_size}")
            if not isinstance(batch_size, int) or sl_shape.as_list()[0] is None:
                check = control_flow_ops.Assert(
                    math_ops.equal(array_ops.shape(sequence_length)[0], batch_size),
                    ["Expected shape for Tensor sequence_length is ", batch_size,
                     " but saw shape: ", array_ops.shape(sequence_length)])
                with _ops.control_dependencies([check]):
                    sequence_length = array_ops.identity(sequence_length, name="CheckSeqLen")
        inputs = nest.pack_sequence_as(inputs, flat_input)
        outputs, final_state = _dynamic_rnn_loop(cell, inputs, state, parallel_iterations,
                                                 swap_memory, sequence_length, dtype)
        if not time_major:
            outputs = nest.map_structure(_transpose_batch_time, outputs)
        return outputs, final_state


def _dynamic_rnn_loop(cell, inputs, initial_state, parallel_iterations, swap_memory,
                      sequence_length=None, dtype=None):
    state = initial_state
    flat_input = nest.flatten(inputs)
    flat_output_size = nest.flatten(cell.output_size)
    time_steps = array_ops.shape(flat_input[0])[0]
    batch_size = _best_effort_batch_size(flat_input)
    got_shapes = [x.shape.with_rank_at_least(3) for x in flat_input]
    const_time_steps, const_batch_size = got_shapes[0].as_list()[:2]
    for shape in got_shapes:
        if not shape[2:].is_fully_defined():
            raise ValueError("Input size (depth of inputs) must be accessible via shape "
                             "inference, but saw value None.")
        if shape.as_list()[0] != const_time_steps:
            raise ValueError("Time steps is not the same for all the elements in the input in "
                             "a batch.")
        if shape.as_list()[1] != const_batch_size:
            raise ValueError("Batch_size is not the same for all the elements in the input.")
    out_dtype = _infer_state_dtype(dtype, state)
    flat_zero_output = [_zeros(batch_size, s, out_dtype) for s in flat_output_size]
    zero_output = nest.pack_sequence_as(cell.output_size, flat_zero_output)
    if sequence_length is not None:
        max_sequence_length = math_ops.reduce_max(sequence_length)
    else:
        max_sequence_length = time_steps
    time = array_ops.constant(0, dtype=_dt.int32, name="time")
    with _ops.name_scope("dynamic_rnn") as scope:
        base_name = scope

    def create_ta(name, element_shape, dt):
        return TensorArray(dtype=dt, size=time_steps, element_shape=element_shape,
                           tensor_array_name=base_name + name)

    output_ta = tuple(
        create_ta(f"output_{i}", TensorShape([const_batch_size]).concatenate(_dims(s)),
                  out_dtype) for i, s in enumerate(flat_output_size))
    input_ta = tuple(create_ta(f"input_{i}", x.shape[1:], x.dtype.base_dtype)
                     for i, x in enumerate(flat_input))
    input_ta = tuple(ta.unstack(x) for ta, x in zip(input_ta, flat_input))

    def time_step(time, output_ta_t, state):
        input_t = tuple(ta.read(time) for ta in input_ta)
        for x, shape in zip(input_t, got_shapes):
            x.set_shape(shape[1:])
        input_t = nest.pack_sequence_as(inputs, list(input_t))

        def call_cell():
            return cell(input_t, state)

        if sequence_length is not None:
            output, new_state = _rnn_step(time, sequence_length, zero_output, state, call_cell)
        else:
            output, new_state = call_cell()
        output = nest.flatten(output)
        output_ta_t = tuple(ta.write(time, out) for ta, out in zip(output_ta_t, output))
        return (time + 1, output_ta_t, new_state)

    # At least one step, so the output arrays learn their element shape (TF does the same).
    loop_bound = math_ops.minimum(time_steps, math_ops.maximum(1, max_sequence_length))
    _, output_final_ta, final_state = control_flow_ops.while_loop(
        lambda time, *_: time < loop_bound, time_step, (time, output_ta, state),
        parallel_iterations=parallel_iterations, maximum_iterations=time_steps,
        swap_memory=swap_memory)
    final_outputs = [ta.stack() for ta in output_final_ta]
    for out, s in zip(final_outputs, flat_output_size):
        out.set_shape([const_time_steps, const_batch_size] + _dims(s))
    return nest.pack_sequence_as(cell.output_size, final_outputs), final_state


def static_rnn(cell, inputs, initial_state=None, dtype=None, sequence_length=None,
               scope=None):
    """``cell`` unrolled over ``inputs``, a list of [batch, ...] tensors (one per step).

    Returns ``(outputs, final_state)`` with ``outputs`` a list of per-step outputs.
    """
    assert_like_rnncell("cell", cell)
    if not nest.is_sequence(inputs):
        raise TypeError("inputs must be a sequence")
    if not inputs:
        raise ValueError("inputs must not be empty")
    outputs = []
    with vs.variable_scope(scope or "rnn") as varscope:
        first = inputs
        while nest.is_sequence(first):
            first = first[0]
        first = _ops.convert_to_tensor(first)
        for x in nest.flatten(inputs):
            shape = _ops.convert_to_tensor(x).shape.with_rank_at_least(2)
            if not shape[1:].is_fully_defined():
                raise ValueError("Input size (dimension 1 of inputs) must be accessible via "
                                 "shape inference, but saw value None.")
        fixed = first.shape.as_list()[0]
        batch_size = fixed if fixed is not None else array_ops.shape(first)[0]
        state = _initial_state(cell, initial_state, dtype, batch_size, "static_rnn")
        if sequence_length is not None:
            sequence_length = _check_sequence_length(sequence_length)
            out_dtype = _infer_state_dtype(dtype, state)
            zero_output = nest.pack_sequence_as(
                cell.output_size, [_zeros(batch_size, s, out_dtype)
                                   for s in nest.flatten(cell.output_size)])
        for time, input_ in enumerate(inputs):
            if time > 0:
                varscope.reuse_variables()

            def call_cell(input_=input_, state=state):
                return cell(input_, state)

            if sequence_length is not None:
                output, state = _rnn_step(time, sequence_length, zero_output, state, call_cell)
            else:
                output, state = call_cell()
            outputs.append(output)
        return outputs, state


__all__ = ["reverse_sequence"]


# --- bidirectional networks ---------------------------------------------------------------------
def reverse_sequence(input, seq_lengths, seq_axis=None, batch_axis=None, name=None,  # noqa: A002
                     seq_dim=None, batch_dim=None):
    """Reverse the first ``seq_lengths[b]`` entries along ``seq_axis`` of each batch entry b
    (the rest stay in place), as TF's ``ReverseSequence``; built from a gather, so it has the
    gather's gradient."""
    seq_axis = seq_dim if seq_axis is None else seq_axis
    batch_axis = (batch_dim if batch_axis is None else batch_axis) or 0
    if seq_axis is None:
        raise ValueError("reverse_sequence needs seq_axis")
    with _ops.name_scope(name, "ReverseSequence", [input, seq_lengths]):
        x = _ops.convert_to_tensor(input)
        rank = x.shape.ndims
        if rank is None:
            raise ValueError("reverse_sequence needs an input of known rank")
        # Move (time, batch) to the front, gather, move back.
        rest = [a for a in range(rank) if a not in (seq_axis, batch_axis)]
        perm = [seq_axis, batch_axis] + rest
        inverse = [perm.index(a) for a in range(rank)]
        tb = array_ops.transpose(x, perm)
        shape = array_ops.shape(tb)
        lengths = math_ops.cast(seq_lengths, _dt.int32)
        t = array_ops.expand_dims(math_ops.range(shape[0]), 1)
        b = array_ops.expand_dims(math_ops.range(shape[1]), 0)
        src = array_ops.where(math_ops.less(t, lengths[None, :]), lengths[None, :] - 1 - t,
                              t + 0 * b)
        index = array_ops.stack([src, b + 0 * t], axis=-1)
        return array_ops.transpose(array_ops.gather_nd(tb, index), inverse)


def _reverse_time(x, lengths, time_axis, batch_axis):
    if lengths is None:
        return array_ops.reverse(x, [time_axis])
    return reverse_sequence(x, lengths, seq_axis=time_axis, batch_axis=batch_axis)


def bidirectional_dynamic_rnn(cell_fw, cell_bw, inputs, sequence_length=None,
                              initial_state_fw=None, initial_state_bw=None, dtype=None,
                              parallel_iterations=None, swap_memory=False, time_major=False,
                              scope=None):
    """A forward and a backward ``dynamic_rnn`` over ``inputs`` (the backward one reads each
    sequence reversed within its length). Returns ``((out_fw, out_bw), (state_fw,
    state_bw))``, both outputs in input time order, as TF's."""
    assert_like_rnncell("cell_fw", cell_fw)
    assert_like_rnncell("cell_bw", cell_bw)
    time_axis, batch_axis = (0, 1) if time_major else (1, 0)
    with vs.variable_scope(scope or "bidirectional_rnn"):
        with vs.variable_scope("fw") as fw_scope:
            out_fw, state_fw = dynamic_rnn(
                cell_fw, inputs, sequence_length, initial_state_fw, dtype, parallel_iterations,
                swap_memory, time_major, scope=fw_scope)
        with vs.variable_scope("bw") as bw_scope:
            reversed_inputs = nest.map_structure(
                lambda x: _reverse_time(_ops.convert_to_tensor(x), sequence_length, time_axis,
                                        batch_axis), inputs)
            tmp, state_bw = dynamic_rnn(
                cell_bw, reversed_inputs, sequence_length, initial_state_bw, dtype,
                parallel_iterations, swap_memory, time_major, scope=bw_scope)
    out_bw = nest.map_structure(
        lambda x: _reverse_time(x, sequence_length, time_axis, batch_axis), tmp)
    return (out_fw, out_bw), (state_fw, state_bw)


def static_bidirectional_rnn(cell_fw, cell_bw, inputs, initial_state_fw=None,
                             initial_state_bw=None, dtype=None, sequence_length=None,
                             scope=None):
    """``static_rnn`` forward and backward over the list ``inputs``; each step's output is the
    two directions' outputs concatenated. Returns ``(outputs, state_fw, state_bw)``."""
    assert_like_rnncell("cell_fw", cell_fw)
    assert_like_rnncell("cell_bw", cell_bw)
    if not nest.is_sequence(inputs) or not inputs:
        raise TypeError("inputs must be a non-empty list")

    def reverse(seq):
        if sequence_length is None:
            return list(reversed(seq))
        stacked = array_ops.stack([_ops.convert_to_tensor(x) for x in seq])
        return array_ops.unstack(reverse_sequence(stacked, sequence_length, 0, 1),
                                 num=len(seq))

    with vs.variable_scope(scope or "bidirectional_rnn"):
        with vs.variable_scope("fw") as fw_scope:
            out_fw, state_fw = static_rnn(cell_fw, inputs, initial_state_fw, dtype,
                                          sequence_length, scope=fw_scope)
        with vs.variable_scope("bw") as bw_scope:
            tmp, state_bw = static_rnn(cell_bw, reverse(inputs), initial_state_bw, dtype,
                                       sequence_length, scope=bw_scope)
    out_bw = reverse(tmp)
    outputs = [array_ops.concat([f, b], 1) for f, b in zip(out_fw, out_bw)]
    return outputs, state_fw, state_bw
