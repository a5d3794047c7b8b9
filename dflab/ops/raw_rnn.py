"""``tf.nn.raw_rnn``: an RNN loop whose inputs, stopping and emitted outputs are chosen step by
step by the caller's ``loop_fn`` (TF's ``raw_rnn``, in a ``while_loop`` writing one
``TensorArray`` per emitted output); and ``tf.nn.static_state_saving_rnn``, ``static_rnn``
whose initial state comes from a state saver and whose final state is saved back to it.

``loop_fn(time, cell_output, cell_state, loop_state)`` returns ``(elements_finished,
next_input, next_cell_state, emit_output, next_loop_state)``; at time 0 the last three inputs
are None and it supplies the initial state (and, optionally, the emit structure and a loop
state). Finished batch entries keep their state and emit zeros, as in TF.
"""

from __future__ import annotations

from dflab.framework import dtypes as _dt
from dflab.framework import nest
from dflab.framework import ops as _ops
from dflab.framework.constant_op import constant, constant_value_as_shape
from dflab.framework.tensor_shape import TensorShape
from dflab.ops import array_ops, control_flow_ops, indexing_ops, math_ops, reduction_ops
from dflab.ops import variable_scope as vs
from dflab.ops.rnn import static_rnn
from dflab.ops.rnn_cell_impl import assert_like_rnncell
from dflab.ops.tensor_array_ops import TensorArray


def _as_shape(size) -> TensorShape:
    """An emit size (int, list, TensorShape or shape tensor) as a (partial) TensorShape."""
    if isinstance(size, _ops.Tensor):
        return constant_value_as_shape(size)
    if isinstance(size, TensorShape):
        return size
    if isinstance(size, (list, tuple)):
        return TensorShape(list(size))
    return TensorShape([int(size)])


def _zeros(batch_size, size, dtype):
    """zeros of shape [batch_size] + size, where either may be a tensor."""
    if isinstance(size, _ops.Tensor):
        shape = array_ops.concat([array_ops.reshape(batch_size, [1]),
                                  math_ops.cast(size, _dt.int32)], 0)
    else:
        shape = array_ops.stack_ints([batch_size, *_as_shape(size).as_list()])
    return array_ops.zeros(shape, dtype)


def _copy_some_through(finished, current, candidate):
    """``candidate`` where a batch entry is still running, ``current`` where it finished."""
    def copy(cur, cand):
        if isinstance(cur, TensorArray) or cur.shape.ndims == 0:
            return cand
        return indexing_ops.where(finished, cur, cand)

    return nest.map_structure(copy, current, candidate)


def raw_rnn(cell, loop_fn, parallel_iterations=None, swap_memory=False, scope=None):
    """Run ``cell`` in a loop driven by ``loop_fn``; returns ``(emit_ta, final_state,
    final_loop_state)`` (``emit_ta``: TensorArrays in the emit structure; the final loop
    state is None when ``loop_fn`` gave none)."""
    assert_like_rnncell("cell", cell)
    if not callable(loop_fn):
        raise TypeError(f"Argument `loop_fn` must be a callable. Received: {loop_fn}.")
    parallel_iterations = parallel_iterations or 32
    with vs.variable_scope(scope or "rnn"):
        time = constant(0, dtype=_dt.int32)
        finished, next_input, initial_state, emit_structure, init_loop_state = loop_fn(
            time, None, None, None)
        flat_input = nest.flatten(next_input)
        loop_state = init_loop_state if init_loop_state is not None else constant(
            0, dtype=_dt.int32)
        const_batch = None
        for x in flat_input:
            d = x.shape.as_list()[0] if x.shape.ndims else None
            if d is not None and const_batch is not None and d != const_batch:
                raise ValueError(f"Dimensions {const_batch} and {d} are not compatible")
            const_batch = d if d is not None else const_batch
        batch_size = const_batch if const_batch is not None else array_ops.shape(
            flat_input[0])[0]
        nest.assert_same_structure(initial_state, cell.state_size)
        flat_state = [_ops.convert_to_tensor(s) for s in nest.flatten(initial_state)]
        state = nest.pack_sequence_as(initial_state, flat_state)
        if emit_structure is not None:
            flat_emit = nest.flatten(emit_structure)
            flat_size = [e.shape if e.shape.is_fully_defined() else array_ops.shape(e)
                         for e in flat_emit]
            flat_dtypes = [e.dtype.base_dtype for e in flat_emit]
        else:
            emit_structure = cell.output_size
            flat_size = nest.flatten(emit_structure)
            flat_dtypes = [flat_state[0].dtype.base_dtype] * len(flat_size)
        emit_ta = nest.pack_sequence_as(emit_structure, [
            TensorArray(dtype=dt, dynamic_size=True, size=0, tensor_array_name=f"rnn_output_{i}",
                        element_shape=TensorShape([const_batch]).concatenate(_as_shape(s)))
            for i, (dt, s) in enumerate(zip(flat_dtypes, flat_size))])
        zero_emit = nest.pack_sequence_as(
            emit_structure, [_zeros(batch_size, s, dt) for s, dt in zip(flat_size, flat_dtypes)])

        def condition(unused_time, elements_finished, *_):
            return math_ops.logical_not(reduction_ops.reduce_all(elements_finished))

        def body(time, elements_finished, current_input, emit_ta, state, loop_state):
            next_output, cell_state = cell(current_input, state)
            nest.assert_same_structure(state, cell_state)
            nest.assert_same_structure(cell.output_size, next_output)
            next_time = time + 1
            next_finished, next_input, next_state, emit_output, next_loop_state = loop_fn(
                next_time, next_output, cell_state, loop_state)
            nest.assert_same_structure(state, next_state)
            nest.assert_same_structure(current_input, next_input)
            nest.assert_same_structure(emit_ta, emit_output)
            loop_state = loop_state if next_loop_state is None else next_loop_state
            emit_output = _copy_some_through(elements_finished, zero_emit, emit_output)
            next_state = _copy_some_through(elements_finished, state, next_state)
            emit_ta = nest.map_structure(lambda ta, emit: ta.write(time, emit), emit_ta,
                                         emit_output)
            elements_finished = math_ops.logical_or(elements_finished, next_finished)
            return (next_time, elements_finished, next_input, emit_ta, next_state, loop_state)

        returned = control_flow_ops.while_loop(
            condition, body,
            loop_vars=[time, finished, next_input, emit_ta, state, loop_state],
            parallel_iterations=parallel_iterations, swap_memory=swap_memory)
        emit_ta, final_state, final_loop_state = returned[-3:]
        if init_loop_state is None:
            final_loop_state = None
        return emit_ta, final_state, final_loop_state


def static_state_saving_rnn(cell, inputs, state_saver, state_name, sequence_length=None,
                            scope=None):
    """``static_rnn`` starting from ``state_saver.state(name)`` for each ``state_name`` (in the
    cell's state structure); the last output and the final state wait for
    ``state_saver.save_state(name, final)``."""
    state_size = cell.state_size
    is_tuple = nest.is_sequence(state_size)
    if is_tuple != nest.is_sequence(state_name):
        raise ValueError("state_name should be the same type as cell.state_size. Received: "
                         f"state_name={state_name!s}, cell.state_size={state_size!s}.")
    if is_tuple:
        nest.assert_same_structure(state_name, state_size)
        initial_state = nest.pack_sequence_as(
            state_size, [state_saver.state(n) for n in nest.flatten(state_name)])
    else:
        initial_state = state_saver.state(state_name)
    outputs, state = static_rnn(cell, inputs, initial_state=initial_state,
                                sequence_length=sequence_length, scope=scope)
    if is_tuple:
        saves = [state_saver.save_state(n, s)
                 for n, s in zip(nest.flatten(state_name), nest.flatten(state))]
    else:
        saves = [state_saver.save_state(state_name, state)]
    with _ops.control_dependencies(saves):
        last = outputs[-1]
        outputs[-1] = nest.pack_sequence_as(
            last, [array_ops.identity(o) for o in nest.flatten(last)])
        state = nest.pack_sequence_as(state, [array_ops.identity(s)
                                              for s in nest.flatten(state)])
    return outputs, state


__all__: list[str] = []
