"""``tf.train`` input pipelines built on queues: the epoch-counting producers and the batchers.

Producers (``input_producer``, ``string_input_producer``, ``range_input_producer``,
``slice_input_producer``) fill a ``FIFOQueue`` with the whole input once per epoch, optionally
shuffled (``RandomShuffle``, a fresh permutation every epoch), from one ``QueueRunner`` thread.
With ``num_epochs`` the input passes through ``limit_epochs``: a local ``epochs`` variable counted
up by ``CountUpTo``, whose ``OutOfRangeError`` after the last epoch ends the runner, which closes
the queue; consumers drain it and then see ``OutOfRangeError``. The counter is a *local* variable,
so ``tf.local_variables_initializer()`` must run first (otherwise ``FailedPreconditionError``).

Batchers (``batch``, ``shuffle_batch``) build a queue (a ``FIFOQueue``, a ``PaddingFIFOQueue``
for ``dynamic_pad=True``, or a ``RandomShuffleQueue``), one enqueue op per thread, and register
a ``QueueRunner`` in the ``QUEUE_RUNNERS`` collection; ``start_queue_runners`` starts the threads.
The result has the structure of ``tensors`` (a tensor, a list, or a dict) with a batch dimension
in front.

Names follow TF 1.x (``input_producer/limit_epochs/epochs``,
``input_producer/input_producer_EnqueueMany``…), so checkpoints and graph views read the same.
As in TF, each queue also gets a scalar summary of how full it is (``fraction_of_32_full``;
``fraction_over_M_of_N_full`` for a shuffling queue, counting only what is above
``min_after_dequeue``), in the ``summaries`` collection for ``tf.summary.merge_all``.
"""

from __future__ import annotations

import numpy as np

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.constant_op import constant, constant_value
from dflab.framework.ops import GraphKeys
from dflab.framework.sparse_tensor import SparseTensor
from dflab.framework.tensor_shape import TensorShape, as_shape
from dflab.ops import (
    array_ops,
    check_ops,
    control_flow_ops,
    data_flow_ops,
    indexing_ops,
    math_ops,
    random_ops,
    sparse_io_ops,
    state_ops,
    summary_ops,
    tensor_io_ops,
    variables,
)
from dflab.train.queue_runner import QueueRunner, add_queue_runner


def _as_element(t):
    return t if isinstance(t, SparseTensor) else _ops.convert_to_tensor(t)


def _flatten(tensors):
    """(list of tensors or SparseTensors, rebuild function) for a tensor, list/tuple or dict."""
    if isinstance(tensors, dict):
        keys = sorted(tensors)
        return [_as_element(tensors[k]) for k in keys], \
            lambda out: dict(zip(keys, out))
    if isinstance(tensors, (list, tuple)):
        if not tensors:
            raise ValueError("Cannot batch an empty list of tensors")
        # TF's quirk, which programs rely on: a list of one tensor gives the bare batch.
        rebuild = (lambda out: out[0]) if len(tensors) == 1 else list
        return [_as_element(t) for t in tensors], rebuild
    return [_as_element(tensors)], lambda out: out[0]


def _store_sparse(flat, enqueue_many):
    """``flat`` with each ``SparseTensor`` as its serialized string form (one ``[3]`` row per
    element), and the function that turns a dequeued batch back into ``SparseTensor``s with a
    batch dimension in front (as TF's batchers pass sparse tensors through their queues)."""
    restore = {}
    out = []
    for k, t in enumerate(flat):
        if isinstance(t, SparseTensor):
            rank = t.shape.ndims
            restore[k] = (t.dtype.base_dtype, rank if enqueue_many or rank is None
                          else rank + 1)
            t = (sparse_io_ops.serialize_many_sparse(t) if enqueue_many
                 else sparse_io_ops.serialize_sparse(t))
        out.append(t)

    def rebuild(batch):
        return [sparse_io_ops.deserialize_many_sparse(v, *restore[k]) if k in restore else v
                for k, v in enumerate(batch)]

    return out, rebuild


def _store_sparse_lists(tensor_lists, enqueue_many):
    """``_store_sparse`` over the inputs of a batcher (all of one structure)."""
    stored = [_store_sparse(flat, enqueue_many) for flat in tensor_lists]
    return [flat for flat, _ in stored], stored[0][1]


def _element_shapes(tensors, shapes, enqueue_many, dynamic_pad):
    if shapes is not None:
        shapes = [as_shape(s) for s in shapes]
        if len(shapes) != len(tensors):
            raise ValueError(f"shapes has {len(shapes)} entries for {len(tensors)} tensors")
        return shapes
    out = []
    for t in tensors:
        shape = t.shape[1:] if enqueue_many and t.shape.ndims else t.shape
        if enqueue_many and t.shape.ndims == 0:
            raise ValueError(f"enqueue_many=True needs a batch dimension: {t.name} is a scalar")
        if dynamic_pad:
            if shape.ndims is None:
                raise ValueError(f"dynamic_pad needs a known rank: {t.name} has shape {shape}")
        elif not shape.is_fully_defined():
            raise ValueError(f"All shapes must be fully defined: {t.name} has shape {shape} "
                             "(pass shapes=, or dynamic_pad=True)")
        out.append(shape)
    return out


def _enqueue_ops(queue, tensor_lists, enqueue_many, keep_input):
    """One enqueue op per list of ``tensor_lists`` (a thread each). With ``keep_input`` (TF's
    ``maybe_*``): a scalar enqueues the list only when true (decided at build time when it is
    a constant), a vector (``enqueue_many``) keeps the rows where it is true."""
    enqueue = queue.enqueue_many if enqueue_many else queue.enqueue
    if keep_input is None:
        return [enqueue(tensors) for tensors in tensor_lists]
    if keep_input.shape.ndims == 1:
        select = math_ops.cast(keep_input, _dt.int32)
        return [enqueue([indexing_ops.dynamic_partition(t, select, 2)[1] for t in tensors])
                for tensors in tensor_lists]
    known = constant_value(keep_input)
    if known is not None:
        return [enqueue(tensors) if bool(known) else control_flow_ops.no_op()
                for tensors in tensor_lists]
    return [control_flow_ops.cond(keep_input, lambda t=tensors: enqueue(t),
                                  control_flow_ops.no_op).op
            for tensors in tensor_lists]


def _finish(queue, tensor_lists, enqueue_many, batch_size, allow_smaller, keep_input=None):
    add_queue_runner(QueueRunner(queue, _enqueue_ops(queue, tensor_lists, enqueue_many,
                                                     keep_input)))
    if allow_smaller:
        out = queue.dequeue_up_to(batch_size)
    else:
        out = queue.dequeue_many(batch_size)
    return out if isinstance(out, list) else [out]


def _validate_keep_input(keep_input, enqueue_many):
    keep_input = _ops.convert_to_tensor(keep_input)
    if keep_input.shape.ndims is None:
        raise ValueError("`keep_input` dimensions must be known at graph construction.")
    if not enqueue_many and keep_input.shape.ndims == 1:
        raise ValueError("`keep_input` cannot be a vector when `enqueue_many=False`.")
    if keep_input.shape.ndims > 1:
        raise ValueError("`keep_input` must be 0 or 1 dimensions.")
    return keep_input


def _flatten_join(tensors_list):
    """(list of flat tensor lists, rebuild function) for the inputs of a ``*_join`` batcher:
    every input of the same structure and dtypes."""
    if not tensors_list:
        raise ValueError("Expected at least one set of tensors")
    flats = [_flatten(tensors) for tensors in tensors_list]
    lists = [flat for flat, _ in flats]
    dtypes = [t.dtype.base_dtype for t in lists[0]]
    for flat in lists[1:]:
        if len(flat) != len(dtypes):
            raise ValueError("Expected all inputs to be the same size, got "
                             f"{len(dtypes)} and {len(flat)} tensors")
        other = [t.dtype.base_dtype for t in flat]
        if other != dtypes:
            raise TypeError("Expected types to be consistent: "
                            f"{', '.join(d.name for d in dtypes)} vs. "
                            f"{', '.join(d.name for d in other)}.")
    return lists, flats[0][1]


def _join_shapes(tensor_lists, shapes, enqueue_many, dynamic_pad):
    """Each tensor's element shape, merged across the inputs."""
    per_input = [_element_shapes(flat, shapes, enqueue_many, dynamic_pad)
                 for flat in tensor_lists]
    merged = per_input[0]
    for other in per_input[1:]:
        merged = [a.merge_with(b) for a, b in zip(merged, other)]
    return merged


def _fill_fraction_summary(queue, capacity, min_after_dequeue=None, name=None):
    """TF's scalar summary of how full an input queue is (the fraction of its capacity, above
    ``min_after_dequeue`` for a shuffling queue)."""
    size = queue.size()
    if min_after_dequeue is None:
        name = name or f"fraction_of_{capacity}_full"
        full = math_ops.cast(size, _dt.float32) * (1.0 / capacity)
    else:
        span = capacity - min_after_dequeue
        name = name or f"fraction_over_{min_after_dequeue}_of_{span}_full"
        full = math_ops.cast(math_ops.maximum(0, size - min_after_dequeue),
                             _dt.float32) * (1.0 / span)
    return summary_ops.scalar(name, full)


def _batch(tensor_lists, rebuild, batch_size, capacity, enqueue_many, shapes, dynamic_pad,
           allow_smaller_final_batch, shared_name, name, default_name, keep_input=None):
    """The FIFO batchers (``batch``, ``batch_join`` and their ``maybe_`` forms)."""
    tensor_lists, restore = _store_sparse_lists(tensor_lists, enqueue_many)
    with _ops.name_scope(name, default_name, tensor_lists[0]):
        if keep_input is not None:
            keep_input = _validate_keep_input(keep_input, enqueue_many)
        elem_shapes = _join_shapes(tensor_lists, shapes, enqueue_many, dynamic_pad)
        dtypes = [t.dtype.base_dtype for t in tensor_lists[0]]
        if dynamic_pad:
            queue = data_flow_ops.PaddingFIFOQueue(capacity, dtypes, elem_shapes,
                                                   shared_name=shared_name)
        else:
            queue = data_flow_ops.FIFOQueue(capacity, dtypes, elem_shapes,
                                            shared_name=shared_name)
        _fill_fraction_summary(queue, capacity)
        out = _finish(queue, tensor_lists, enqueue_many, batch_size,
                      allow_smaller_final_batch, keep_input)
    return rebuild(restore(_with_static_batch(out, batch_size, allow_smaller_final_batch)))


def _shuffle_batch(tensor_lists, rebuild, batch_size, capacity, min_after_dequeue, seed,
                   enqueue_many, shapes, allow_smaller_final_batch, shared_name, name,
                   default_name, keep_input=None):
    """The shuffling batchers (``shuffle_batch``, ``shuffle_batch_join``, ``maybe_`` forms)."""
    tensor_lists, restore = _store_sparse_lists(tensor_lists, enqueue_many)
    with _ops.name_scope(name, default_name, tensor_lists[0]):
        if keep_input is not None:
            keep_input = _validate_keep_input(keep_input, enqueue_many)
        elem_shapes = _join_shapes(tensor_lists, shapes, enqueue_many, False)
        dtypes = [t.dtype.base_dtype for t in tensor_lists[0]]
        queue = data_flow_ops.RandomShuffleQueue(capacity, min_after_dequeue, dtypes,
                                                 elem_shapes, seed=seed,
                                                 shared_name=shared_name)
        _fill_fraction_summary(queue, capacity, min_after_dequeue)
        out = _finish(queue, tensor_lists, enqueue_many, batch_size,
                      allow_smaller_final_batch, keep_input)
    return rebuild(restore(_with_static_batch(out, batch_size, allow_smaller_final_batch)))


def _threads(flat, num_threads):
    return [flat] * max(int(num_threads), 1)


def batch(tensors, batch_size, num_threads=1, capacity=32, enqueue_many=False, shapes=None,
          dynamic_pad=False, allow_smaller_final_batch=False, shared_name=None, name=None):
    """Batches of ``batch_size`` from ``tensors``, in order, fed by ``num_threads`` threads."""
    flat, rebuild = _flatten(tensors)
    return _batch(_threads(flat, num_threads), rebuild, batch_size, capacity, enqueue_many,
                  shapes, dynamic_pad, allow_smaller_final_batch, shared_name, name, "batch")


def maybe_batch(tensors, keep_input, batch_size, num_threads=1, capacity=32, enqueue_many=False,
                shapes=None, dynamic_pad=False, allow_smaller_final_batch=False,
                shared_name=None, name=None):
    """``batch``, enqueueing ``tensors`` only where ``keep_input`` is true (a scalar bool, or a
    bool vector over the rows with ``enqueue_many``)."""
    flat, rebuild = _flatten(tensors)
    return _batch(_threads(flat, num_threads), rebuild, batch_size, capacity, enqueue_many,
                  shapes, dynamic_pad, allow_smaller_final_batch, shared_name, name, "batch",
                  keep_input)


def batch_join(tensors_list, batch_size, capacity=32, enqueue_many=False, shapes=None,
               dynamic_pad=False, allow_smaller_final_batch=False, shared_name=None, name=None):
    """Batches from several inputs of the same structure (e.g. one reader per file), one
    enqueuing thread per input, all into one FIFO queue."""
    lists, rebuild = _flatten_join(tensors_list)
    return _batch(lists, rebuild, batch_size, capacity, enqueue_many, shapes, dynamic_pad,
                  allow_smaller_final_batch, shared_name, name, "batch_join")


def maybe_batch_join(tensors_list, keep_input, batch_size, capacity=32, enqueue_many=False,
                     shapes=None, dynamic_pad=False, allow_smaller_final_batch=False,
                     shared_name=None, name=None):
    """``batch_join`` keeping only what ``keep_input`` selects (see ``maybe_batch``)."""
    lists, rebuild = _flatten_join(tensors_list)
    return _batch(lists, rebuild, batch_size, capacity, enqueue_many, shapes, dynamic_pad,
                  allow_smaller_final_batch, shared_name, name, "batch_join", keep_input)


def shuffle_batch(tensors, batch_size, capacity, min_after_dequeue, num_threads=1, seed=None,
                  enqueue_many=False, shapes=None, allow_smaller_final_batch=False,
                  shared_name=None, name=None):
    """Random batches drawn from a ``RandomShuffleQueue`` holding at least
    ``min_after_dequeue`` elements (until its input runs out)."""
    flat, rebuild = _flatten(tensors)
    return _shuffle_batch(_threads(flat, num_threads), rebuild, batch_size, capacity,
                          min_after_dequeue, seed, enqueue_many, shapes,
                          allow_smaller_final_batch, shared_name, name, "shuffle_batch")


def maybe_shuffle_batch(tensors, batch_size, capacity, min_after_dequeue, keep_input,
                        num_threads=1, seed=None, enqueue_many=False, shapes=None,
                        allow_smaller_final_batch=False, shared_name=None, name=None):
    """``shuffle_batch`` keeping only what ``keep_input`` selects (see ``maybe_batch``)."""
    flat, rebuild = _flatten(tensors)
    return _shuffle_batch(_threads(flat, num_threads), rebuild, batch_size, capacity,
                          min_after_dequeue, seed, enqueue_many, shapes,
                          allow_smaller_final_batch, shared_name, name, "shuffle_batch",
                          keep_input)


def shuffle_batch_join(tensors_list, batch_size, capacity, min_after_dequeue, seed=None,
                       enqueue_many=False, shapes=None, allow_smaller_final_batch=False,
                       shared_name=None, name=None):
    """``shuffle_batch`` over several inputs of the same structure, a thread per input."""
    lists, rebuild = _flatten_join(tensors_list)
    return _shuffle_batch(lists, rebuild, batch_size, capacity, min_after_dequeue, seed,
                          enqueue_many, shapes, allow_smaller_final_batch, shared_name, name,
                          "shuffle_batch_join")


def maybe_shuffle_batch_join(tensors_list, batch_size, capacity, min_after_dequeue, keep_input,
                             seed=None, enqueue_many=False, shapes=None,
                             allow_smaller_final_batch=False, shared_name=None, name=None):
    """``shuffle_batch_join`` keeping only what ``keep_input`` selects."""
    lists, rebuild = _flatten_join(tensors_list)
    return _shuffle_batch(lists, rebuild, batch_size, capacity, min_after_dequeue, seed,
                          enqueue_many, shapes, allow_smaller_final_batch, shared_name, name,
                          "shuffle_batch_join", keep_input)


def _with_static_batch(out, batch_size, allow_smaller):
    if allow_smaller or not isinstance(batch_size, int):
        return out
    for t in out:
        if t.shape.ndims is not None:
            t.set_shape(TensorShape([batch_size]).concatenate(t.shape[1:]))
    return out


# --- epoch-counting input producers ---------------------------------------------------------------
def match_filenames_once(pattern, name=None):
    """A local variable holding the names of the files matching ``pattern`` (a glob, or a
    vector of them), found once, when ``tf.local_variables_initializer()`` runs."""
    with _ops.name_scope(name, "matching_filenames", [pattern]) as name:
        return variables.Variable(tensor_io_ops.matching_files(pattern), name=name,
                                  trainable=False, validate_shape=False,
                                  collections=[GraphKeys.LOCAL_VARIABLES])


def limit_epochs(tensor, num_epochs=None, name=None):
    """``tensor`` that may be evaluated only ``num_epochs`` times, then ``OutOfRangeError``.

    Each evaluation counts up a local int64 variable ``<scope>/epochs`` (in ``LOCAL_VARIABLES``,
    initialized by ``tf.local_variables_initializer()``). With ``num_epochs=None`` ``tensor`` is
    returned unchanged and nothing is built.
    """
    if num_epochs is None:
        return tensor
    if num_epochs <= 0:
        raise ValueError(f"num_epochs must be > 0 not {num_epochs}.")
    with _ops.name_scope(name, "limit_epochs", [tensor]) as name:
        zero64 = constant(0, dtype=_dt.int64)
        epochs = variables.Variable(zero64, name="epochs", trainable=False,
                                    collections=[GraphKeys.LOCAL_VARIABLES])
        counter = state_ops.count_up_to(epochs, num_epochs)
        # The identity is what consumers evaluate; hanging the counter on it as a control
        # input makes every evaluation count, and the one past the limit fail.
        with _ops.control_dependencies([counter]):
            return array_ops.identity(tensor, name=name)


def input_producer(input_tensor, element_shape=None, num_epochs=None, shuffle=True, seed=None,
                   capacity=32, shared_name=None, summary_name=None, name=None, cancel_op=None):
    """A ``FIFOQueue`` fed with the rows of ``input_tensor`` (its first dimension), every row
    once per epoch, shuffled per epoch if ``shuffle``, for ``num_epochs`` epochs (forever if
    None), by a ``QueueRunner`` added to ``QUEUE_RUNNERS``. ``element_shape`` completes the
    rows' static shape where ``input_tensor``'s is unknown; ``cancel_op`` replaces the runner's
    default cancel (close with ``cancel_pending_enqueues=True``).

    ``summary_name``: the name of a scalar summary of the queue's fill fraction (none when
    None, as in TF; the other producers name it ``fraction_of_<capacity>_full``).
    """
    with _ops.name_scope(name, "input_producer", [input_tensor]):
        input_tensor = _ops.convert_to_tensor(input_tensor, name="input_tensor")
        element_shape = input_tensor.shape[1:].merge_with(element_shape)
        if not element_shape.is_fully_defined():
            raise ValueError("Either `input_tensor` must have a fully defined shape or "
                             "`element_shape` must be specified")
        if shuffle:
            input_tensor = random_ops.random_shuffle(input_tensor, seed=seed)
        input_tensor = limit_epochs(input_tensor, num_epochs)
        queue = data_flow_ops.FIFOQueue(capacity=capacity,
                                        dtypes=[input_tensor.dtype.base_dtype],
                                        shapes=[element_shape], shared_name=shared_name,
                                        name=name)
        enqueue = queue.enqueue_many([input_tensor])
        add_queue_runner(QueueRunner(queue, [enqueue], cancel_op=cancel_op))
        if summary_name is not None:
            _fill_fraction_summary(queue, capacity, name=summary_name)
        return queue


_NOT_NULL_ERR = "string_input_producer requires a non-null input tensor"


def _statically_empty(value) -> bool:
    """Whether ``value`` (a tensor, list or array) is known at build time to hold no element."""
    if isinstance(value, _ops.Tensor):
        return value.shape.num_elements() == 0
    if isinstance(value, np.ndarray):
        return value.size == 0
    return isinstance(value, (list, tuple)) and not value


def string_input_producer(string_tensor, num_epochs=None, shuffle=True, seed=None, capacity=32,
                          shared_name=None, name=None, cancel_op=None):
    """A queue of the strings of the 1-D ``string_tensor`` (typically file names), see
    ``input_producer``. An empty input fails: at build time when its size is known there,
    otherwise when the runner first enqueues (``InvalidArgumentError`` to the coordinator)."""
    # TF checks only Python values here; a tensor of statically known size 0 is rejected too
    # rather than left to fail later inside the runner's thread.
    if _statically_empty(string_tensor):
        raise ValueError(_NOT_NULL_ERR)
    with _ops.name_scope(name, "input_producer", [string_tensor]) as name:
        string_tensor = _ops.convert_to_tensor(string_tensor, dtype=_dt.string)
        not_empty = control_flow_ops.Assert(
            math_ops.greater(array_ops.size(string_tensor), 0), [_NOT_NULL_ERR])
        with _ops.control_dependencies([not_empty]):
            string_tensor = array_ops.identity(string_tensor)
        return input_producer(input_tensor=string_tensor, element_shape=[],
                              num_epochs=num_epochs, shuffle=shuffle, seed=seed,
                              capacity=capacity, shared_name=shared_name, name=name,
                              summary_name=f"fraction_of_{capacity}_full", cancel_op=cancel_op)


def range_input_producer(limit, num_epochs=None, shuffle=True, seed=None, capacity=32,
                         shared_name=None, name=None):
    """A queue of the int32 integers ``0 .. limit-1``, see ``input_producer``."""
    with _ops.name_scope(name, "input_producer", [limit]) as name:
        range_tensor = math_ops.range(limit)
        return input_producer(range_tensor, [], num_epochs, shuffle, seed, capacity,
                              shared_name, f"fraction_of_{capacity}_full", name)


def _first_dims_agree(tensor_list, name):
    """The row count of ``tensor_list[0]``, checked against every tensor's first dimension.

    TF leaves this unchecked (a shorter tensor fails in Gather, a longer one is silently cut);
    dflab rejects a mismatch at build time when the shapes show it, and otherwise adds an
    ``Assert`` that fails the runner's enqueue with ``InvalidArgumentError``.
    """
    for t in tensor_list:
        if t.shape.ndims == 0:
            raise ValueError(f"slice_input_producer cannot slice the scalar {t.name}: every "
                             "tensor needs a first dimension")
    dims = [t.shape[0].value if t.shape.ndims else None for t in tensor_list]
    known = {d for d in dims if d is not None}
    if len(known) > 1:
        listed = ", ".join(f"{t.name}: {d}" for t, d in zip(tensor_list, dims))
        raise ValueError(f"slice_input_producer: all tensors must have the same first "
                         f"dimension, got {listed}")
    range_size = array_ops.shape(tensor_list[0])[0]
    if None not in dims:
        return range_size
    checks = [check_ops.assert_equal(
        array_ops.shape(t)[0], range_size,
        message=f"{name}: first dimension of {t.name} does not match {tensor_list[0].name}")
        for t in tensor_list[1:]]
    with _ops.control_dependencies(checks):
        return array_ops.identity(range_size)


def slice_input_producer(tensor_list, num_epochs=None, shuffle=True, seed=None, capacity=32,
                         shared_name=None, name=None):
    """One row of every tensor in ``tensor_list`` per evaluation, the same row index for all
    (so rows stay aligned), each index once per epoch; see ``input_producer``.

    Returns a list with one tensor per input, of shape ``t.shape[1:]``.
    """
    with _ops.name_scope(name, "input_producer", tensor_list):
        tensor_list = [_ops.convert_to_tensor(t) for t in tensor_list]
        if not tensor_list:
            raise ValueError("Expected at least one tensor in slice_input_producer().")
        range_size = _first_dims_agree(tensor_list, "slice_input_producer")
        queue = range_input_producer(range_size, num_epochs=num_epochs, shuffle=shuffle,
                                     seed=seed, capacity=capacity, shared_name=shared_name)
        index = queue.dequeue()
        return [array_ops.gather(t, index) for t in tensor_list]
