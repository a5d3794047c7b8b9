"""``tf.GradientTape``: reverse-mode differentiation of ops run eagerly.

While a tape records, the eager context hands it every op it runs (``EagerContext.apply_op``);
the tape keeps those that read a *watched* tensor — one passed to ``watch``, a trainable
variable read while ``watch_accessed_variables`` is on (through the variables' access hook),
or an output of an op it kept. ``gradient`` walks the kept ops backwards, newest first, and
calls each op type's registered gradient function — the very functions ``tf.gradients`` uses on
graphs — on the recorded op (its inputs, outputs and attributes). Those functions build ops
with the ordinary builders, which run eagerly, so gradients are eager tensors; when another
tape is recording meanwhile it records the backward ops too, which is how nested tapes give
higher-order derivatives. A variable read with ``tf.gather`` gets ``IndexedSlices``.

Invariant: a tape keeps the tensors it recorded alive until it is released (a non-persistent
tape after its first ``gradient``), so the ids it matches by are never reused meanwhile.
"""

from __future__ import annotations

import itertools
import threading

from dflab.eager import context as _context
from dflab.framework import dtypes as _dt
from dflab.framework import nest
from dflab.framework import ops as _ops
from dflab.framework.eager_tensor import EagerTensor
from dflab.framework.registry import GRADIENT_OUTPUTS, op_gradient_function
from dflab.ops import array_ops, math_ops
from dflab.ops import custom_gradient as _custom
from dflab.ops import gradients as _gradients
from dflab.ops import resource_variable_ops as _rv
from dflab.ops import tensor_array_ops as _ta
from dflab.ops.gradients import IndexedSlices


class UnconnectedGradients:
    """What ``gradient`` returns for a source the target does not depend on."""

    NONE = "none"
    ZERO = "zero"


def _differentiable(dtype) -> bool:
    dt = dtype.base_dtype
    return dt.is_floating or dt.is_complex or dt is _dt.resource


# The dtypes a tape follows, as a set: ``record`` asks for every output of every op it keeps.
_DIFFERENTIABLE = frozenset(_dt.as_dtype(name) for base in (
    "float16", "float32", "float64", "complex64", "complex128") for name in (base, base + "_ref")
) | {_dt.resource}
# Numbers each ``gradient`` call's TensorArray gradient source (``_backward``).
_GRADIENT_CALLS = itertools.count()


class GradientTape:
    """Records eager ops for automatic differentiation (TF's ``tf.GradientTape``)."""

    def __init__(self, persistent: bool = False, watch_accessed_variables: bool = True):
        self._persistent = persistent
        self._watch_accessed = watch_accessed_variables
        self._watched: set[int] = set()
        self._keep: list = []  # watched tensors and variables: their ids stay theirs
        self._records: list = []
        self._variables: list = []
        self._recording = False
        self._released = False
        self._thread = None
        self._graph = None

    # --- recording -------------------------------------------------------------------------
    def __enter__(self):
        # Building a graph (a traced function, or TF1 graph mode), the tape records nothing:
        # ``gradient`` differentiates the graph symbolically, as ``tf.gradients`` does.
        self._graph = None if _ops.executing_eagerly() else _ops.get_default_graph()
        self._push()
        return self

    def __exit__(self, *exc):
        if self._recording:
            self._pop()
        return False

    def _push(self) -> None:
        if self._recording:
            raise ValueError("Tape is still recording, This can happen if you try to re-enter "
                             "an already-active tape.")
        self._thread = threading.get_ident()
        self._recording = True
        _context._TAPES.append(self)
        _rv.add_access_listener(_variable_accessed)

    def _pop(self) -> None:
        self._recording = False
        if self in _context._TAPES:
            _context._TAPES.remove(self)
        if not _context._TAPES:
            _rv.remove_access_listener(_variable_accessed)

    def stop_recording(self):
        """A block in which this tape records nothing (TF's ``tape.stop_recording()``)."""
        tape = self

        class _Paused:
            def __enter__(self):
                if not tape._recording:
                    raise ValueError("Tape must be recording when stop_recording is called.")
                tape._pop()

            def __exit__(self, *exc):
                tape._push()
                return False

        return _Paused()

    def reset(self) -> None:
        """Forget everything recorded so far (the tape keeps recording)."""
        self._watched.clear()
        self._keep.clear()
        self._records.clear()
        self._variables.clear()

    def watch(self, tensor) -> None:
        """Record the ops that read ``tensor`` (a tensor, a variable, or a nest of them)."""
        for t in nest.flatten(tensor):
            if _rv.is_resource_variable(t):
                self._watch_variable(t)
            elif isinstance(t, _ops.Tensor):
                if not _differentiable(t.dtype):
                    continue
                self._watched.add(id(t))
                self._keep.append(t)
            else:
                raise ValueError(f"Passed in object {t!r} of type {type(t).__name__!r}, not "
                                 "tf.Tensor or tf.Variable.")

    def _watch_variable(self, variable) -> None:
        handle = variable.handle
        if id(handle) not in self._watched:
            self._watched.add(id(handle))
            self._keep.append(handle)
            self._variables.append(variable)

    def watched_variables(self) -> tuple:
        """The variables this tape watched, in the order it first saw them."""
        return tuple(self._variables)

    def record(self, op) -> None:
        """Keep ``op`` if it reads a watched tensor (called by the eager context)."""
        if self._thread != threading.get_ident() or self._graph is not None:
            return
        watched = self._watched
        for t in op.inputs:
            if id(t) in watched:
                break
        else:
            return
        self._records.append(op)
        for out in op.outputs[:op.attrs.get(GRADIENT_OUTPUTS, len(op.outputs))]:
            if out.dtype in _DIFFERENTIABLE:
                watched.add(id(out))

    # --- differentiating -------------------------------------------------------------------
    def gradient(self, target, sources, output_gradients=None,
                 unconnected_gradients=UnconnectedGradients.NONE):
        """d(sum of ``target``)/d``sources``, in the structure of ``sources``."""
        result = self._gradient(target, sources, output_gradients, unconnected_gradients)
        self._release_unless_persistent()
        return result

    def _gradient(self, target, sources, output_gradients, unconnected_gradients):
        if self._released:
            raise RuntimeError("A non-persistent GradientTape can only be used to compute one "
                               "set of gradients (or jacobians)")
        if unconnected_gradients not in (UnconnectedGradients.NONE, UnconnectedGradients.ZERO):
            raise ValueError(f"Unknown value for unconnected_gradients: "
                             f"{unconnected_gradients!r}")
        targets = nest.flatten(target)
        flat_sources = nest.flatten(sources)
        for s in flat_sources:
            if not (_rv.is_resource_variable(s) or isinstance(s, _ops.Tensor)):
                raise ValueError(f"Passed in object {s!r} of type {type(s).__name__!r}, not "
                                 "tf.Tensor or tf.Variable.")
        grads_out = None if output_gradients is None else nest.flatten(output_gradients)
        if self._graph is not None:
            return nest.pack_sequence_as(sources, _gradients.gradients(
                targets, flat_sources, grad_ys=grads_out,
                unconnected_gradients=unconnected_gradients))
        # A persistent tape inside its block records its own gradient's ops, so that they can
        # be differentiated in turn (TF's higher orders on one tape); another stops first.
        paused = self._recording and not self._persistent
        if paused:
            self._pop()
        try:
            result = self._backward(targets, flat_sources, grads_out, unconnected_gradients)
        finally:
            if paused:
                self._push()
        return nest.pack_sequence_as(sources, result)

    def _release_unless_persistent(self) -> None:
        if not self._persistent:
            self._released = True
            self._records = []
            self._keep = []
            self._watched = set()

    def _backward(self, targets, sources, output_gradients, unconnected):
        # Each call is a gradient source of its own: a TensorArray keeps one gradient array
        # per source, which must not sum what an earlier call wrote into it. (A context
        # variable, not a name scope: entering one eagerly cost each call 6 us.)
        token = _ta.EAGER_GRADIENT_SOURCE.set(f"gradients_eager_{next(_GRADIENT_CALLS)}")
        try:
            return self._differentiate(targets, sources, output_gradients, unconnected)
        finally:
            _ta.EAGER_GRADIENT_SOURCE.reset(token)

    def _differentiate(self, targets, sources, output_gradients, unconnected):
        grads: dict[int, list] = {}
        for k, y in enumerate(targets):
            given = None if output_gradients is None else output_gradients[k]
            if _rv.is_resource_variable(y):
                # TF's target is the variable's handle, seeded with ones of the variable's
                # shape and dtype: d v/d v is 1, and the reads the tape saw add theirs.
                dtype, key = y.dtype.base_dtype, y.handle
                g = (_ops.convert_to_tensor(given, dtype=dtype) if given is not None else
                     array_ops.ones(y.shape, dtype))
            else:
                key = y = _ops.convert_to_tensor(y)
                g = (_ops.convert_to_tensor(given, dtype=y.dtype.base_dtype)
                     if given is not None else array_ops.ones_like(y))
            grads.setdefault(id(key), []).append(g)
        # A source that is a target has its gradient, watched or not (TF's).
        seeded = set(grads)
        wanted = {id(_target_of(s)) for s in sources}
        for op in reversed(self._records[:]):  # (a recording tape appends to its records)
            out_grads = [_sum(grads.pop(id(t), None)) if id(t) not in wanted
                         else _sum(grads.get(id(t))) for t in op.outputs]
            if all(g is None for g in out_grads):
                continue
            in_grads = _call_gradient(op, out_grads, self._watched)
            for t, g in zip(op.inputs, in_grads):
                if g is None or not _differentiable(t.dtype):
                    continue
                grads.setdefault(id(t), []).append(g)
        result = []
        for s in sources:
            x = _target_of(s)
            # A source the tape never watched gets none (TF's), though an op taking it and a
            # watched tensor (a traced call) gave it one.
            g = _sum(grads.get(id(x))) if id(x) in self._watched or id(x) in seeded else None
            if g is None and unconnected == UnconnectedGradients.ZERO:
                g = array_ops.zeros_like(s.value() if _rv.is_resource_variable(s) else s)
            result.append(g)
        return result

    def jacobian(self, target, sources, unconnected_gradients=UnconnectedGradients.NONE,
                 parallel_iterations=None, experimental_use_pfor=True):
        """d``target``[i]/d``source`` for every element i of ``target``, stacked: shape
        ``target.shape + source.shape``. Each element is differentiated in turn (TF
        vectorizes them); a non-persistent tape allows one jacobian, as one gradient."""
        if not experimental_use_pfor and not self._persistent and self._graph is None:
            raise RuntimeError("GradientTape must be created with persistent=True to compute "
                               "the jacobian with eager execution enabled and with "
                               "experimental_use_pfor set to False.")
        if _rv.is_resource_variable(target) and self._graph is None:
            shown = target.value()  # the variable is differentiated as itself (its handle)
        else:
            target = shown = _ops.convert_to_tensor(target)
        flat_sources = nest.flatten(sources)
        n = _known_size(shown, "jacobian", "target")

        rows = [[] for _ in flat_sources]
        for i in range(n):
            onehot = array_ops.one_hot(i, n, dtype=target.dtype.base_dtype)
            gs = self._gradient(target, flat_sources, array_ops.reshape(
                onehot, array_ops.shape(shown)), unconnected_gradients)
            for k, g in enumerate(gs):
                rows[k].append(g)
        self._release_unless_persistent()
        out = []
        for s, row in zip(flat_sources, rows):
            shape = target.shape.as_list() + _value_of(s).shape.as_list()
            if any(g is None for g in row):
                out.append(None)
                continue
            stacked = array_ops.stack([_dense(g) for g in row]) if row else \
                array_ops.zeros([0] + _value_of(s).shape.as_list(), target.dtype.base_dtype)
            out.append(array_ops.reshape(stacked, shape))
        return nest.pack_sequence_as(sources, out)

    def batch_jacobian(self, target, source, unconnected_gradients=UnconnectedGradients.NONE,
                       parallel_iterations=None, experimental_use_pfor=True):
        """For a batch whose examples do not mix: ``result[b, i..., j...]`` is
        d``target[b, i...]``/d``source[b, j...]`` (TF's), one gradient per element of a
        target row, each summed over the batch (an example's gradient only reaches its own
        row of ``source``)."""
        target = _ops.convert_to_tensor(target)
        source_value = _value_of(source)
        for t in (target, source_value):  # the batch dimension, then an example's
            if t.shape.ndims is not None and t.shape.ndims < 2:
                raise ValueError(f"Shape {t.shape} must have rank at least 2")
        batch = target.shape.as_list()[0]
        if batch is not None and source_value.shape.as_list()[0] not in (None, batch):
            raise ValueError(f"Need first dimension of target shape ({target.shape}) and "
                             f"source shape ({source_value.shape}) to match.")
        row = target.shape[1:]
        m = row.num_elements()
        if m is None:
            raise ValueError(f"batch_jacobian needs a known shape for each row of the target, "
                             f"got {target.shape}")
        flat = array_ops.reshape(target, [-1, m])
        columns = []
        for j in range(m):
            onehot = array_ops.ones_like(flat[:, :1]) * array_ops.one_hot(
                j, m, dtype=target.dtype.base_dtype)
            g = self._gradient(target, source, array_ops.reshape(
                onehot, array_ops.shape(target)), unconnected_gradients)
            columns.append(None if g is None else _dense(g))
        self._release_unless_persistent()
        if any(g is None for g in columns):  # unconnected: zeros, as TF's batch_jacobian gives
            columns = [array_ops.zeros_like(source_value) for _ in columns]
        stacked = array_ops.stack(columns, axis=1) if columns else array_ops.zeros(
            array_ops.concat([array_ops.shape(source_value)[:1], [0],
                              array_ops.shape(source_value)[1:]], 0), target.dtype)
        return array_ops.reshape(stacked, array_ops.concat(
            [array_ops.shape(target), array_ops.shape(source_value)[1:]], 0))


def _value_of(source):
    return source.value() if _rv.is_resource_variable(source) else source


def _known_size(t, what: str, name: str) -> int:
    n = t.shape.num_elements()
    if n is None:
        raise ValueError(f"{what} needs a {name} of known shape, got {t.shape}")
    return n


def _target_of(source):
    return source.handle if _rv.is_resource_variable(source) else source


def _dense(g):
    if isinstance(g, IndexedSlices):
        return math_ops.unsorted_segment_sum(g.values, g.indices, g.dense_shape[0])
    return g


def _sum(grads):
    if not grads:
        return None
    if len(grads) == 1:
        return grads[0]
    if all(isinstance(g, IndexedSlices) for g in grads):
        return IndexedSlices(array_ops.concat([g.values for g in grads], 0),
                             array_ops.concat([g.indices for g in grads], 0),
                             grads[0].dense_shape)
    return math_ops.add_n([_dense(g) for g in grads])


def _call_gradient(op, out_grads, watched):
    fn = getattr(op, "gradient_function", None)  # a custom gradient's own
    known = fn is not None
    if not known:
        known, fn = op_gradient_function(op)
    if not known:
        raise LookupError(f"No gradient defined for operation '{op.name}' (op type: {op.type})")
    if fn is None:
        return [None] * len(op.inputs)
    carried = op.attrs.get(GRADIENT_OUTPUTS, len(op.outputs))
    filled = [g if g is not None or i >= carried or not _differentiable(t.dtype) else
              array_ops.zeros_like(t) for i, (t, g) in enumerate(zip(op.outputs, out_grads))]
    # An input the tape does not watch leads to no source: as TF's tape, tell the gradient
    # function so, and it may skip that input's gradient (a matmul's data input: a whole
    # product saved per layer and step).
    skip = tuple(i for i, t in enumerate(op.inputs) if id(t) not in watched)
    op.skip_input_indices = skip or None
    try:
        in_grads = fn(op, *filled)
    finally:
        op.skip_input_indices = None
    if not isinstance(in_grads, (list, tuple)):
        in_grads = [in_grads]
    return list(in_grads)


def _variable_accessed(variable) -> None:
    """The variables' access hook: recording tapes that watch accessed variables watch it."""
    ident = threading.get_ident()
    for tape in _context._TAPES:
        if tape._watch_accessed and tape._thread == ident:
            tape._watch_variable(variable)


# --- custom gradients, eagerly -------------------------------------------------------------------
def _eager_custom_gradient(f, args, kwargs):
    """``@tf.custom_gradient`` executing eagerly (TF's): ``f`` runs, the trainable variables
    it reads that are not among its arguments are noted, and the tapes get one op from
    ``f``'s results, its arguments and those variables to new tensors of the same values,
    whose gradient function is the user's ``grad_fn`` (nothing flows into ``f``'s own ops)."""
    watcher = GradientTape(watch_accessed_variables=True)
    with watcher:
        result, grad_fn = f(*args, **kwargs)
    flat_args = nest.flatten(args)
    given = flat_args + nest.flatten(kwargs)
    used = [v for v in watcher.watched_variables() if all(v is not g for g in given)]
    if used and not _custom.takes_variables(grad_fn):
        raise TypeError("@tf.custom_gradient grad_fn must accept keyword argument "
                        f"'variables', since function uses variables: {used}")
    flat_result = [_ops.convert_to_tensor(t) for t in nest.flatten(result)]
    n_result = len(flat_result)
    inputs = flat_result + [_ops.convert_to_tensor(a) for a in flat_args] + \
        [v.handle for v in used]
    outputs = [EagerTensor(t._value, t.dtype, t._device_obj) for t in flat_result]

    def gradient(op, *result_grads):
        return [None] * n_result + _custom.user_gradients(grad_fn, result_grads[:n_result],
                                                          used, len(flat_args))

    if _context._TAPES:
        ctx = _ops.get_default_graph()
        name = getattr(f, "__name__", "custom_gradient")
        op = _context.EagerOp("CustomGradient", name, inputs, {GRADIENT_OUTPUTS: n_result},
                              ctx, outputs[0].device if outputs else "", outputs)
        op.gradient_function = gradient
        _context._record(op)
    return nest.pack_sequence_as(result, outputs)


def _eager_recompute(f, args, dresult, variables):
    """``recompute_grad``'s gradient, eagerly (TF's): ``f`` run again on its arguments under
    a tape, differentiated with the incoming gradients."""
    with GradientTape() as tape:
        id_args = [array_ops.identity(a) for a in args]
        tape.watch(id_args)
        if variables:
            tape.watch(variables)
        recomputed = f(*id_args)
    grads = tape.gradient(nest.flatten(recomputed), id_args + list(variables or []),
                          output_gradients=list(dresult),
                          unconnected_gradients=UnconnectedGradients.ZERO)
    return grads[:len(id_args)], grads[len(id_args):]


_custom.register_eager_mode(_eager_custom_gradient, _eager_recompute)
