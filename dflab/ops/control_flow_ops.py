"""Control ops: ``no_op``, ``group``, ``tuple``, ``with_dependencies``, ``Assert``, and dynamic
control flow: ``cond``, ``case`` and ``while_loop`` built from the dataflow primitives
``Switch``, ``Merge``, ``Enter``, ``Exit``, ``NextIteration`` and ``LoopCond``.

Design (TF's; DESIGN.md §4). A *control-flow context* is active on the graph while a branch or a
loop body is built. Every op created meanwhile passes through it (``Graph._create_op`` calls
``AddValue`` on each input and ``AddOp`` on the new op):

* a ``CondContext`` routes every tensor from outside the branch through a ``Switch`` on the
  predicate, so an untaken branch receives only dead tensors and does nothing; ops without inputs
  get a control input from the branch's pivot for the same reason. ``cond`` joins the branches'
  results with ``Merge`` ops;
* a ``WhileContext`` (one loop frame) brings outside tensors in through loop-invariant ``Enter``
  ops, replaces control inputs from outside the loop by one from such an ``Enter``, and gives
  input-less ops a control input from the loop's pivot so they run once per iteration. Each loop
  variable becomes ``Enter -> Merge -> Switch(LoopCond) -> Identity -> body -> NextIteration``
  back into the ``Merge``, and ``Switch``'s false port leaves through ``Exit``.

The executor (``dflab.runtime.executor``) gives these ops their meaning: frames, iterations,
deadness. Gradients: ``Switch``/``Merge`` of a cond have gradients here; a while loop is
differentiated as a whole by ``dflab.ops.control_flow_grad``.
"""

from __future__ import annotations

import builtins
import itertools

from dflab.framework import dtypes as _dt
from dflab.framework import nest
from dflab.framework import ops as _ops
from dflab.framework.op_kinds import ENTER_OPS
from dflab.framework.registry import NotDifferentiable, RegisterGradient, register_op
from dflab.framework.tensor import relax_shape
from dflab.framework.tensor_shape import TensorShape, unknown_shape
from dflab.ops import array_ops

register_op("NoOp", lambda op: [], stateful=True)
NotDifferentiable("NoOp")


def no_op(name=None):
    return _ops.apply_op("NoOp", [], None, name)


def _as_op(x):
    if hasattr(x, "_as_graph_element") and not isinstance(x, (_ops.Tensor, _ops.Operation)):
        x = x._as_graph_element()
    return x.op if isinstance(x, _ops.Tensor) else x


def group(*inputs, name=None):
    """An op that runs all ``inputs`` (ops or tensors) and produces nothing."""
    if _ops.executing_eagerly():
        return None  # everything ran already (TF returns None too)
    ops = []
    for x in inputs:
        if isinstance(x, (list, builtins.tuple)):
            ops.extend(_as_op(e) for e in x)
        elif x is not None:
            ops.append(_as_op(x))
    with _ops.control_dependencies(ops):
        return no_op(name=name or "group_deps")


def tuple(tensors, name=None, control_inputs=None):  # noqa: A001 - TF's public name
    """Identities of ``tensors`` that are only available once all of them are computed."""
    tensors = list(tensors)
    with _ops.name_scope(name, "tuple", [t for t in tensors if t is not None]):
        deps = [t for t in tensors if t is not None] + list(control_inputs or [])
        gate = group(*deps, name=None)
        out = []
        for t in tensors:
            if t is None:
                out.append(None)
            elif isinstance(t, _ops.Operation):
                with _ops.control_dependencies([gate]):
                    out.append(group(t))
            else:
                out.append(with_dependencies([gate], t))
        return out


def with_dependencies(dependencies, output_tensor, name=None):
    if _ops.executing_eagerly():
        return output_tensor
    with _ops.name_scope(name, "control_dependency", list(dependencies) + [output_tensor]) as sc:
        with _ops.control_dependencies(dependencies):
            return array_ops.identity(output_tensor, name=sc[:-1] + "/" if sc else None)


# --- Assert -----------------------------------------------------------------------------------
register_op("Assert", lambda op: [], stateful=True)
NotDifferentiable("Assert")


def Assert(condition, data, summarize=None, name=None):  # noqa: N802 - TF's public name
    """An op that fails the step with ``InvalidArgumentError`` when ``condition`` is false,
    showing ``data`` (tensors, up to ``summarize`` entries each)."""
    if not isinstance(condition, _ops.Tensor) and _ops.get_default_graph().executes_eagerly:
        # TF's eager Assert tests a Python value's truth (``tf.Assert(1, …)`` passes), where a
        # graph's Assert takes a bool tensor (a Python 1 is its TypeError).
        condition = bool(condition)
    cond = _ops.convert_to_tensor(condition, dtype=_dt.bool)
    data = [_ops.convert_to_tensor(d) for d in data]
    return _ops.apply_op("Assert", [cond] + data, {"summarize": summarize or 3},
                         name or "Assert")


# --- the primitives -----------------------------------------------------------------------------
def _check_predicate(pred, what):
    if pred.dtype.base_dtype is not _dt.bool:
        raise TypeError(f"{what} must be a bool tensor, got {pred.dtype.base_dtype.name} "
                        f"({pred.name})")
    if pred.shape.ndims not in (None, 0):
        raise ValueError(f"{what} must be a scalar, got shape {pred.shape} ({pred.name})")


def _switch_infer(op):
    data, pred = op.inputs
    _check_predicate(pred, f"The predicate of {op.name}")
    return [(data.dtype, data.shape)] * 2  # a variable's reference stays a reference


def _merge_shape(shapes) -> TensorShape:
    out = shapes[0]
    for s in shapes[1:]:
        if out.ndims is None or s.ndims is None or out.ndims != s.ndims:
            return unknown_shape()
        out = TensorShape([a if a == b else None for a, b in zip(out.as_list(), s.as_list())])
    return out


def _merge_infer(op):
    dts = {t.dtype.base_dtype for t in op.inputs}
    if len(dts) != 1:
        raise TypeError(f"Merge inputs must have one dtype, got {sorted(d.name for d in dts)}")
    return [(dts.pop(), _merge_shape([t.shape for t in op.inputs])), (_dt.int32, TensorShape([]))]


def _forward_infer(op):
    t = op.inputs[0]
    return [(t.dtype, t.shape)]


def _loop_cond_infer(op):
    _check_predicate(op.inputs[0], f"The loop condition of {op.name}")
    return [(_dt.bool, TensorShape([]))]


register_op("Switch", _switch_infer)
register_op("Merge", _merge_infer)
register_op("Enter", _forward_infer)
register_op("Exit", _forward_infer)
register_op("NextIteration", _forward_infer)
register_op("LoopCond", _loop_cond_infer)
NotDifferentiable("LoopCond")


def switch(data, pred, name=None):
    """(output_false, output_true): ``data`` on the port ``pred`` selects, dead on the other."""
    return builtins.tuple(_ops.apply_op("Switch", [data, pred], None, name or "Switch").outputs)


def merge(inputs, name=None):
    """(output, value_index): the first of ``inputs`` that is live."""
    return builtins.tuple(_ops.apply_op("Merge", list(inputs), None, name or "Merge").outputs)


def _enter(data, frame_name, is_constant=False, parallel_iterations=10, name=None):
    return _ops.apply_op("Enter", [data], {"frame_name": frame_name, "is_constant": is_constant,
                                           "parallel_iterations": parallel_iterations},
                         name or "Enter")


def exit(data, name=None):  # noqa: A001 - TF's name
    return _ops.apply_op("Exit", [data], None, name or "Exit")


def _next_iteration(data, name=None):
    return _ops.apply_op("NextIteration", [data], None, name or "NextIteration")


def loop_cond(pred, name=None):
    return _ops.apply_op("LoopCond", [pred], None, name or "LoopCond")


# --- contexts ------------------------------------------------------------------------------------
_CONTEXT_SEQ = itertools.count()  # contexts in the order made: outer ones before inner ones


class ControlFlowContext:
    """Base of ``CondContext`` and ``WhileContext``: see the module docstring."""

    COLLECTION = ""  # TF's graph collection of this kind of context

    def __init__(self):
        self._graph = _ops.get_default_graph()
        self.outer_context = self._graph.control_flow_context
        # id(outside tensor) -> (outside tensor, the tensor standing for it inside)
        self._external: dict[int, builtins.tuple] = {}
        self._register()

    def _register(self) -> None:
        """Number the context and keep it in its graph's collection, as TF does: a meta
        graph writes it from there (``dflab.ops.control_flow_io``), so gradients can be
        built on the graph it is read back into."""
        self._number()
        self._graph.add_to_collection(self.COLLECTION, self)

    def _number(self) -> None:
        self._seq = next(_CONTEXT_SEQ)

    @classmethod
    def rebuilt(cls, graph):
        """A context of this class in ``graph`` with only the common fields set, no outer
        context and no values brought in: a meta graph's import sets the rest."""
        ctx = cls.__new__(cls)
        ctx._blank(graph)
        return ctx

    def _blank(self, graph) -> None:
        self._graph, self.outer_context, self._external = graph, None, {}
        self._number()

    @property
    def graph(self):
        return self._graph

    def contains(self, ctx) -> bool:
        """Is ``ctx`` this context or nested inside it?"""
        while ctx is not None:
            if ctx is self:
                return True
            ctx = ctx.outer_context
        return False

    def _is_inside(self, t) -> bool:
        return self.contains(t.op.control_flow_context)

    def Enter(self):  # noqa: N802 - TF's name
        self._saved = self._graph.control_flow_context
        self._graph.control_flow_context = self

    def Exit(self):  # noqa: N802 - TF's name
        self._graph.control_flow_context = self._saved

    def __enter__(self):
        self.Enter()
        return self

    def __exit__(self, *exc):
        self.Exit()

    def _in_outer(self):
        return _ContextSwitch(self._graph, self.outer_context)

    def AddValue(self, t):  # noqa: N802 - TF's name
        if self._is_inside(t):
            return t
        known = self._external.get(id(t))
        if known is not None:
            return known[1]
        with self._in_outer():
            inner = self._bring_in(t)
        inner.op.control_flow_context = self
        self._external[id(t)] = (t, inner)
        return inner

    def external_values(self) -> list:
        """(outside tensor, inside tensor) for every value brought into this context."""
        return list(self._external.values())

    def AddOp(self, op):  # noqa: N802 - TF's name
        if not op.inputs and self.pivot is not None and op is not self.pivot.op:
            op.add_control_input(self.pivot.op)


class _ContextSwitch:
    def __init__(self, graph, ctx):
        self._graph, self._ctx = graph, ctx

    def __enter__(self):
        self._saved = self._graph.control_flow_context
        self._graph.control_flow_context = self._ctx

    def __exit__(self, *exc):
        self._graph.control_flow_context = self._saved


class CondContext(ControlFlowContext):
    """One branch of a ``cond``: outside values enter through ``Switch(value, pred)[branch]``."""

    COLLECTION = "cond_context"

    def __init__(self, pred, pivot, branch):
        super().__init__()
        self.pred = pred
        self.pivot = pivot
        self.branch = branch

    def _bring_in(self, t):
        with _ops.get_default_graph().no_control_dependencies():
            return switch(t, self.pred)[self.branch]


class WhileContext(ControlFlowContext):
    """One while loop's frame; see the module docstring."""

    is_loop = True  # (the graph checks that what the body computes stays in the loop)
    COLLECTION = "while_context"

    def __init__(self, name, parallel_iterations=10, back_prop=True):
        super().__init__()
        if parallel_iterations < 1:
            raise ValueError("parallel_iterations must be a positive integer.")
        self.name = name
        self.frame_name = name + "while_context" if name.endswith("/") else name
        self.parallel_iterations = int(parallel_iterations)
        self.back_prop = back_prop
        self.pivot = None  # while building cond: the first Merge; then the body's pivot
        self.loop_cond = None  # the LoopCond tensor
        self.enters: list = []
        self.merges: list = []
        self.switches: list = []
        self.body_inputs: list = []  # Identity of each Switch's true port
        self.next_iterations: list = []
        self.exits: list = []
        # Added the first time the loop is differentiated (dflab.ops.control_flow_grad).
        self.counter = self.counter_increment = self.iterations = None
        self._control_enters: dict = {}

    def _bring_in(self, t):
        with _ops.get_default_graph().no_control_dependencies():
            return _enter(t, self.frame_name, is_constant=True,
                          parallel_iterations=self.parallel_iterations).outputs[0]

    def AddOp(self, op):  # noqa: N802 - TF's name
        outside = [c for c in op.control_inputs if not self.contains(c.control_flow_context)]
        for c in outside:
            op.remove_control_input(c)
            op.add_control_input(self._control_enter(c))
        super().AddOp(op)
        if op.inputs and self.pivot is not None and all(map(self._is_invariant, op.inputs)):
            # Loop invariants reach every iteration, the one that exits included: an op fed by
            # nothing else would run once more than the body (a cond's Switch on an outside
            # predicate would let its branch write a variable an extra time), so TF ties it to
            # the pivot as it does input-less ops.
            op.add_control_input(self.pivot.op)

    def _is_invariant(self, t) -> bool:
        """``t`` is one of this loop's loop-invariant ``Enter`` outputs."""
        op = t.op
        return (op.type in ENTER_OPS and op.control_flow_context is self
                and bool(op.attrs.get("is_constant")))

    def _control_enter(self, c):
        """An Enter that carries control from ``c`` (outside the loop) into every iteration."""
        e = self._control_enters.get(c)
        if e is None:
            with self._in_outer(), _ops.control_dependencies([c]):
                token = array_ops.constant(0, name="control_token")
            with self._in_outer(), _ops.get_default_graph().no_control_dependencies():
                e = _enter(token, self.frame_name, is_constant=True,
                           parallel_iterations=self.parallel_iterations)
            e.control_flow_context = self
            self._control_enters[c] = e
        return e


# --- cond -------------------------------------------------------------------------------------
def _captured(t):
    """An eager tensor a traced function's branch or loop body gives: captured into the
    function's graph (by an op of the branch or body), which a context can route."""
    return array_ops.identity(t) if t.is_eager else t


def _to_tensors(values, ctx, what):
    out = []
    for v in nest.flatten(values):
        if v is None:
            raise ValueError(f"{what} returned None; it must return tensors")
        if isinstance(v, _ops.Operation):
            v = with_dependencies([v], ctx.pivot)
        v = _captured(_leaf_to_tensor(v, what))  # a TensorArray leaves a branch as its flow
        out.append(ctx.AddValue(v) if not ctx._is_inside(v) else v)
    return out


_UNORDERED = object()  # a cond built where stateful ops are not ordered


def _build_branch(ctx, fn, what, before=_UNORDERED):
    """``fn()`` built in the branch ``ctx``: its result, the result's tensors, and, where the
    graph orders stateful ops (a traced function), the branch's last one (``before``, the
    op its first waits for, if it has none)."""
    g = _ops.get_default_graph()
    ctx.Enter()
    if before is not _UNORDERED:
        g.begin_side_effects(ctx, before)
    try:
        result = fn()
        flat = _to_tensors(result, ctx, what)
    finally:
        end = g.end_side_effects(ctx) if before is not _UNORDERED else None
        ctx.Exit()
    return result, flat, end


def _effects_done(ctx_t, end_t, ctx_f, end_f, pred_id):
    """A tensor ready once the taken branch's stateful ops have run: in each branch its pivot
    after the branch's last one, merged. What follows the cond in program order waits for it
    (control edges from inside a branch would leave it dead when the other branch is taken)."""
    ends = []
    for ctx, end in ((ctx_f, end_f), (ctx_t, end_t)):
        with ctx, _ops.control_dependencies([end] if end is not None else []):
            ends.append(array_ops.identity(ctx.pivot, name="effects_done"))
    done = merge(ends, name="effects_done")[0]
    done.op.control_flow_info = pred_id
    return done


def cond(pred, true_fn=None, false_fn=None, strict=False, name=None, fn1=None, fn2=None):
    """``true_fn()`` if ``pred`` else ``false_fn()``; only the taken branch executes."""
    true_fn = true_fn if true_fn is not None else fn1
    false_fn = false_fn if false_fn is not None else fn2
    if not callable(true_fn) or not callable(false_fn):
        raise TypeError("true_fn and false_fn must be callable.")
    if _ops.executing_eagerly():
        return _eager_cond(pred, true_fn, false_fn, strict)
    site = _ops._user_site()
    with _ops.name_scope(name, "cond", [pred]):
        pred = _ops.convert_to_tensor(pred)
        try:
            _check_predicate(pred, "The predicate of cond")
        except (TypeError, ValueError) as e:
            raise type(e)(f"{e}. cond created at {site}") from None
        p_false, p_true = switch(pred, pred)
        pivot_t = array_ops.identity(p_true, name="switch_t")
        pivot_f = array_ops.identity(p_false, name="switch_f")
        pred_id = array_ops.identity(pred, name="pred_id")
        g = _ops.get_default_graph()
        before = g.last_side_effect() if g.ordering_side_effects() else _UNORDERED
        ctx_t = CondContext(pred_id, pivot_t, 1)
        res_t, flat_t, end_t = _build_branch(ctx_t, true_fn, "true_fn", before)
        ctx_f = CondContext(pred_id, pivot_f, 0)
        res_f, flat_f, end_f = _build_branch(ctx_f, false_fn, "false_fn", before)
        try:
            nest.assert_same_structure(res_t, res_f, check_types=False)
        except ValueError as e:
            raise ValueError(f"true_fn and false_fn of cond at {site} must return the same "
                             f"structure: {e}") from None
        for a, b, ra, rb in zip(flat_t, flat_f, nest.flatten(res_t), nest.flatten(res_f)):
            if hasattr(ra, "_as_loop_var") != hasattr(rb, "_as_loop_var"):
                raise TypeError(f"true_fn and false_fn of cond at {site} return different "
                                f"kinds of value: {type(ra).__name__} and {type(rb).__name__}")
            if hasattr(ra, "_as_loop_var") and getattr(ra, "handle", None) is not \
                    getattr(rb, "handle", None):
                # Only the flow leaves a branch; the array is the true branch's.
                raise ValueError(f"true_fn and false_fn of cond at {site} return different "
                                 "TensorArrays: a cond carries the writes to one array (made "
                                 "before it), not a choice of arrays.")
            if a.dtype.base_dtype != b.dtype.base_dtype:
                raise TypeError(f"true_fn and false_fn of cond at {site} return different "
                                f"dtypes: {a.dtype.base_dtype.name} ({a.name}) and "
                                f"{b.dtype.base_dtype.name} ({b.name})")
        merges = []
        for f, t in zip(flat_f, flat_t):
            m = merge([f, t])[0]
            m.op.control_flow_info = pred_id
            merges.append(m)
        if before is not _UNORDERED and (end_t is not before or end_f is not before):
            g.after_side_effect(_effects_done(ctx_t, end_t, ctx_f, end_f, pred_id).op)
        structure = res_t
        if not strict and isinstance(structure, (list, builtins.tuple)) and len(structure) == 1 \
                and not hasattr(structure, "_fields"):
            structure = structure[0]
        return nest.pack_sequence_as(structure, _rebuild_leaves(nest.flatten(res_t), merges))


def _eager_cond(pred, true_fn, false_fn, strict):
    """Eager execution: the predicate has a value, so the taken branch just runs."""
    out = true_fn() if bool(_ops.convert_to_tensor(pred)) else false_fn()
    if not strict and isinstance(out, (list, builtins.tuple)) and len(out) == 1 \
            and not hasattr(out, "_fields"):
        return out[0]
    return out


def _eager_while(cond, body, loop_vars, maximum_iterations, return_same_structure):
    """Eager execution: a Python loop over the body, as TF's eager ``while_loop`` runs."""
    is_seq = isinstance(loop_vars, (list, builtins.tuple))
    lv = list(loop_vars) if is_seq else [loop_vars]
    limit = None if maximum_iterations is None else int(maximum_iterations)
    i = 0
    while (limit is None or i < limit) and bool(cond(*lv)):
        out = body(*lv)
        lv = list(out) if isinstance(out, (list, builtins.tuple)) else [out]
        i += 1
    if is_seq or return_same_structure:
        return type(loop_vars)(lv) if isinstance(loop_vars, builtins.tuple) and not hasattr(
            loop_vars, "_fields") else lv if not hasattr(loop_vars, "_fields") else \
            type(loop_vars)(*lv)
    return lv[0]


def case(pred_fn_pairs, default=None, exclusive=False, strict=False, name="case"):
    """The first ``fn`` whose ``pred`` is true (TF1 semantics): nested conds."""
    if isinstance(pred_fn_pairs, dict):
        pairs = sorted(pred_fn_pairs.items(), key=lambda kv: kv[0].name)
    else:
        pairs = list(pred_fn_pairs)
    for p, f in pairs:
        if not callable(f):
            raise TypeError(f"fn for pred {p!r} must be callable.")
    if not pairs and default is None:
        raise ValueError("case needs at least one (pred, fn) pair or a default.")
    with _ops.name_scope(name, "case", [p for p, _ in pairs]):
        preds = [_ops.convert_to_tensor(p) for p, _ in pairs]
        fns = [f for _, f in pairs]
        checks = []
        if preds:
            count = _count_true(preds)
            if exclusive:
                checks.append(Assert(count <= 1, [count], name="exclusive"))
            if default is None:
                checks.append(Assert(count >= 1, [count], name="none_true"))
                default, preds, fns = fns[-1], preds[:-1], fns[:-1]
        with _ops.control_dependencies(checks):
            if not preds:
                return default()
            result = default
            for p, f in reversed(list(zip(preds, fns))):
                result = _bind_cond(p, f, result, strict)
            return result()


@RegisterGradient("Switch")
def _switch_grad(op, g_false, g_true):
    """A cond's Switch: merge the branch gradients. The untaken branch's gradient is dead, and
    so is the zeros stand-in for a branch that does not use the value (it is computed from the
    Switch's own dead port), so exactly one Merge input is live."""
    if not isinstance(op.control_flow_context, CondContext):
        return [None, None]
    from dflab.ops.gradients import as_dense

    return [merge([as_dense(g_false), as_dense(g_true)])[0], None]


@RegisterGradient("Merge")
def _merge_grad(op, grad, _):
    pred = op.control_flow_info
    if pred is None:
        raise LookupError(f"No gradient for {op.name}: a Merge that is not the output of a cond "
                          "(while loops are differentiated as a whole).")
    from dflab.ops.gradients import as_dense

    return list(switch(as_dense(grad), pred))


for _t in ("Exit", "NextIteration"):
    NotDifferentiable(_t)


@RegisterGradient("Enter")
def _enter_grad(op, grad):
    """Differentiating inside a loop body (``tf.gradients`` in a while body, a tape in a
    converted loop): a loop invariant's gradient passes to the value outside, that
    iteration's (TF's rule outside a backprop loop). A loop variable's initial value gets
    none: loops are differentiated whole, from their exits (``control_flow_grad``)."""
    return grad if op.attrs.get("is_constant") else None


def _count_true(preds):
    from dflab.ops import math_ops

    return math_ops.add_n([math_ops.cast(p, _dt.int32) for p in preds])


def _bind_cond(pred, fn, otherwise, strict):
    return lambda: cond(pred, fn, otherwise, strict=strict)


# --- while_loop ----------------------------------------------------------------------------------
def _leaf_to_tensor(v, what):
    """Loop variables are tensors, or objects (a ``TensorArray``) that travel as one tensor."""
    if hasattr(v, "_as_loop_var"):
        return v._as_loop_var()
    if v is None:
        raise ValueError(f"{what}: loop variables cannot be None")
    return _ops.convert_to_tensor(v)


def _rebuild_leaves(like_flat, tensors):
    return [v._from_loop_var(t) if hasattr(v, "_from_loop_var") else t
            for v, t in zip(like_flat, tensors)]


def _same_structure(a, b) -> bool:
    try:
        nest.assert_same_structure(a, b, check_types=False)
    except ValueError:
        return False
    return True


def _shape_le(a: TensorShape, b: TensorShape) -> bool:
    """Is ``a`` at least as specific as ``b`` (every dim ``b`` knows, ``a`` knows equally)?"""
    if b.ndims is None:
        return True
    if a.ndims != b.ndims:
        return False
    return all(db is None or da == db for da, db in zip(a.as_list(), b.as_list()))


def while_loop(cond, body, loop_vars, shape_invariants=None, parallel_iterations=10,
               back_prop=True, swap_memory=False, name=None, maximum_iterations=None,
               return_same_structure=False):
    """Repeat ``body`` while ``cond`` is true, as one loop frame in the dataflow graph.

    TF1 semantics: ``cond`` and ``body`` take the loop variables unpacked; ``body`` returns
    them with the same structure, dtypes and shapes (or shapes compatible with
    ``shape_invariants``); up to ``parallel_iterations`` iterations run at once;
    ``maximum_iterations`` stops the loop after that many iterations.
    """
    if not callable(cond) or not callable(body):
        raise TypeError("cond and body must be callable.")
    if _ops.executing_eagerly():
        return _eager_while(cond, body, loop_vars, maximum_iterations, return_same_structure)
    site = _ops._user_site()
    is_seq = isinstance(loop_vars, (list, builtins.tuple))
    lv = loop_vars if is_seq else [loop_vars]
    if not nest.flatten(lv):
        raise ValueError(f"No loop variables provided (while_loop at {site})")
    with _ops.name_scope(name, "while", [v for v in nest.flatten(lv)
                                         if isinstance(v, _ops.Tensor)]) as scope:
        user_cond, user_body, invariants = cond, body, shape_invariants
        if shape_invariants is not None and not is_seq:
            invariants = [shape_invariants]
        if maximum_iterations is not None:
            limit = _ops.convert_to_tensor(maximum_iterations, name="maximum_iterations")
            if not limit.dtype.is_integer or limit.shape.ndims not in (None, 0):
                raise ValueError(f"maximum_iterations must be an integer scalar, got "
                                 f"{limit.dtype.name} {limit.shape} (while_loop at {site})")
            lv = [array_ops.constant(0, limit.dtype.base_dtype, name="iteration_counter"), lv]
            if invariants is not None:
                invariants = [TensorShape([]), invariants]

            def cond(i, v):  # noqa: F811 - the counted loop wraps the user's functions
                from dflab.ops import math_ops

                return math_ops.logical_and(i < limit, user_cond(*v))

            def body(i, v):  # noqa: F811
                out = user_body(*v)
                return [i + 1, out if isinstance(out, (list, builtins.tuple)) else [out]]

        ctx = WhileContext(scope, parallel_iterations, back_prop)
        ctx.site = site
        result = _build_loop(ctx, cond, body, lv, invariants, site)
        if maximum_iterations is not None:
            result = result[1]
        if not is_seq and not return_same_structure:
            return result[0]
        if not return_same_structure and len(result) == 1:
            return result[0]
        return result


def _build_loop(ctx, cond, body, lv, invariants, site):
    where = f"while_loop '{ctx.name.rstrip('/')}' at {site}"
    flat_in = nest.flatten(lv)
    tensors = [_leaf_to_tensor(v, where) for v in flat_in]
    if invariants is not None:
        try:
            nest.assert_same_structure(lv, invariants, check_types=False)
        except ValueError as e:
            raise ValueError(f"shape_invariants of {where} do not match loop_vars: {e}") from None
        shapes = [TensorShape(s) for s in nest.flatten(invariants)]
        for t, s in zip(tensors, shapes):
            if not _shape_le(t.shape, s):
                raise ValueError(f"The shape invariant {s} is not compatible with the initial "
                                 f"shape {t.shape} of loop variable {t.name} ({where}).")
    else:
        shapes = [t.shape for t in tensors]
    g = _ops.get_default_graph()
    # In a traced function a loop is one step of the program order of the context it is built
    # in: it starts after the stateful op before it, its condition's and body's stateful ops
    # run in order within each iteration (the next iteration waits for them), and what
    # follows waits for its end.
    ordered = g.ordering_side_effects()
    before = g.last_side_effect() if ordered else None
    with ctx._in_outer():
        enters = [_enter(t, ctx.frame_name, False, ctx.parallel_iterations).outputs[0]
                  for t in tensors]
    if before is not None:
        for e in enters:
            e.op.add_control_input(before)
    for e, s in zip(enters, shapes):
        e.op.control_flow_context = ctx
        relax_shape(e, s)  # the loop variable's shape invariant
    ctx.Enter()
    if ordered:
        g.begin_side_effects(ctx)
    try:
        # A Merge of two shape-s inputs, its Switch and the Exit are of shape s too.
        merges = [merge([e, e])[0] for e in enters]
        ctx.pivot = merges[0]
        packed = nest.pack_sequence_as(lv, _rebuild_leaves(flat_in, merges))
        c = _ops.convert_to_tensor(cond(*packed))
        try:
            _check_predicate(c, "The condition of a while_loop")
        except (TypeError, ValueError) as e:
            raise type(e)(f"{e} ({where})") from None
        ctx.loop_cond = loop_cond(c, name="LoopCond").outputs[0]
        switches = [switch(m, ctx.loop_cond) for m in merges]
        body_inputs = [array_ops.identity(s[1]) for s in switches]
        ctx.pivot = body_inputs[0]
        packed = nest.pack_sequence_as(lv, _rebuild_leaves(flat_in, body_inputs))
        result = body(*packed)
        if not isinstance(result, (list, builtins.tuple)) or (
                len(lv) == 1 and _same_structure(result, lv[0])
                and not _same_structure(result, list(lv))):
            result = [result]  # one loop variable, returned bare
        try:
            nest.assert_same_structure(list(lv), list(result), check_types=False)
        except ValueError as e:
            raise ValueError(f"The body of {where} must return its loop variables with the "
                             f"same structure: {e}") from None
        outs = []
        for m, r in zip(merges, nest.flatten(result)):
            r = _leaf_to_tensor(r, where) if hasattr(r, "_as_loop_var") or \
                isinstance(r, _ops.Tensor) else _ops.convert_to_tensor(r, dtype=m.dtype)
            if r.dtype.base_dtype != m.dtype.base_dtype:
                raise TypeError(f"Loop variable {m.name} enters the loop with dtype "
                                f"{m.dtype.base_dtype.name}, but has dtype "
                                f"{r.dtype.base_dtype.name} after one iteration ({where}).")
            if not _shape_le(r.shape, m.shape):
                raise ValueError(
                    f"Input tensor '{m.name}' enters the loop with shape {m.shape}, but has "
                    f"shape {r.shape} after one iteration. To allow the shape to vary across "
                    f"iterations, use the `shape_invariants` argument of tf.while_loop to "
                    f"specify a less-specific shape ({where}).")
            outs.append(ctx.AddValue(_captured(r)))
        last = g.last_side_effect() if ordered else None  # (the context ends it below)
        if last is not None:  # the next iteration (and the loop's end) waits for its effects
            with g.control_dependencies([last]):
                outs = [array_ops.identity(r) for r in outs]
        nexts = [_next_iteration(r).outputs[0] for r in outs]
        for m, n in zip(merges, nexts):
            m.op.update_input(1, n)
        exits = [exit(s[0]).outputs[0] for s in switches]
    finally:
        if ordered:
            g.end_side_effects(ctx)
        ctx.Exit()
    for x in exits:
        x.op.control_flow_info = ctx
    ctx.enters, ctx.merges, ctx.switches = enters, merges, switches
    ctx.body_inputs, ctx.next_iterations, ctx.exits = body_inputs, nexts, exits
    if ordered:
        g.after_side_effect(exits[0].op)
    return nest.pack_sequence_as(lv, _rebuild_leaves(flat_in, exits))


__all__ = ["no_op", "group", "tuple", "with_dependencies", "Assert", "cond", "case",
           "while_loop"]
