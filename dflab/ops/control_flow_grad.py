"""Gradients of ``while_loop``: a backward loop that runs the forward iterations in reverse.

``gradients`` treats a forward loop as one node (inputs: the loop variables' initial values and
the outside tensors the loop reads; outputs: its ``Exit`` tensors) and asks ``while_grad`` for
the gradients of its inputs. ``while_grad`` builds, with the ordinary ``while_loop`` builder, a
backward loop over ``(j, grads of the loop variables, sums of the grads of outside values)``
that runs while ``j > 0``, starting from the forward iteration count ``N``; its body
differentiates one forward iteration (the ops between the body's inputs and the
``NextIteration`` inputs) for forward iteration ``j - 1``.

Forward values the backward body needs are saved per iteration, as TF does with stacks: the
backward loop's context (``GradWhileContext``) intercepts every forward-frame tensor a gradient
function reads and replaces it by a read from an *accumulator*, a per-step table filled by a
push added to the forward loop and keyed by the forward iteration indices of every enclosing
loop (so nested loops and parallel iterations need no ordering between pushes). The forward loop
gets an iteration counter the first time it is differentiated; each push is a control input of
the counter's increment, so by the time the forward loop exits all pushes are done. Pushes
accept dead values (a value from an untaken ``cond`` branch inside the loop): the matching
read returns it dead, and the backward ops of that branch are dead in turn. Loop-invariant
values are not saved: the backward loop brings the outside value in once.
"""

from __future__ import annotations

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.constant_op import constant
from dflab.framework.op_kinds import EXIT_OPS
from dflab.framework.registry import NotDifferentiable, register_op
from dflab.framework.tensor_shape import TensorShape
from dflab.ops import array_ops, math_ops
from dflab.ops.control_flow_ops import (
    WhileContext,
    _build_loop,
    _ContextSwitch,
    _enter,
    _next_iteration,
    exit,  # noqa: A004 - TF's name
    merge,
    switch,
)
from dflab.ops.op_util import variable_dtype_shape

# --- accumulator ops -------------------------------------------------------------------------
register_op("_LoopAccumulator", lambda op: [(_dt.resource, TensorShape([]))], stateful=True)
_push_def = register_op("_LoopAccumulatorPush", lambda op: [(_dt.int32, TensorShape([]))],
                        stateful=True)
_push_def.extra["accepts_dead"] = True
register_op("_LoopAccumulatorGet", lambda op: [(op.get_attr("dtype"), op.get_attr("shape"))],
            stateful=True)
for _t in ("_LoopAccumulator", "_LoopAccumulatorPush", "_LoopAccumulatorGet"):
    NotDifferentiable(_t)


# --- the forward side ------------------------------------------------------------------------
def _enclosing_loops(ctx) -> list:
    """The while contexts around (and including) ``ctx``, outermost first."""
    out = []
    while ctx is not None:
        if isinstance(ctx, WhileContext):
            out.append(ctx)
        ctx = ctx.outer_context
    return out[::-1]


def _ensure_counter(fwd: WhileContext) -> None:
    """Give ``fwd`` an iteration counter: ``fwd.counter`` (this iteration's index, in the
    body), ``fwd.counter_increment`` and ``fwd.iterations`` (the count, after the loop)."""
    if fwd.counter is not None:
        return
    g = _ops.get_default_graph()
    with _ContextSwitch(g, fwd.outer_context), g.no_control_dependencies():
        start = constant(0, _dt.int32, name=fwd.name + "iteration_count_init")
        enter = _enter(start, fwd.frame_name, False, fwd.parallel_iterations).outputs[0]
    enter.op.control_flow_context = fwd
    with _ContextSwitch(g, fwd), g.no_control_dependencies(), _ops.name_scope(fwd.name):
        m = merge([enter, enter], name="iteration_count")[0]
        sw = switch(m, fwd.loop_cond)
        fwd.counter = array_ops.identity(sw[1], name="iteration")
        fwd.counter_increment = math_ops.add(fwd.counter, 1)
        m.op.update_input(1, _next_iteration(fwd.counter_increment).outputs[0])
        fwd.iterations = exit(sw[0]).outputs[0]


def _accumulator_for(fwd: WhileContext, t):
    """The root-level accumulator handle of forward tensor ``t`` (created with its push)."""
    cache = fwd.__dict__.setdefault("_accumulators", {})
    acc = cache.get(id(t))
    if acc is not None:
        return acc[1]
    g = _ops.get_default_graph()
    loops = _enclosing_loops(fwd)
    for w in loops:
        _ensure_counter(w)
    with _ContextSwitch(g, None), g.no_control_dependencies():
        handle = _ops.apply_op("_LoopAccumulator", [], {"tensor_name": t.name},
                               "loop_accumulator").outputs[0]
    with _ContextSwitch(g, fwd), g.no_control_dependencies():
        push = _ops.apply_op("_LoopAccumulatorPush", [handle, t] + [w.counter for w in loops],
                             None, "push")
    fwd.counter_increment.op.add_control_input(push)
    cache[id(t)] = (t, handle)
    return handle


def _frame_of(t):
    """The while context whose frame holds ``t`` (None: outside every loop)."""
    ctx = t.op.control_flow_context
    if t.op.type in EXIT_OPS and isinstance(ctx, WhileContext):
        ctx = ctx.outer_context  # an Exit's value lives in the enclosing frame
    while ctx is not None and not isinstance(ctx, WhileContext):
        ctx = ctx.outer_context
    return ctx


# --- the backward side -----------------------------------------------------------------------
class GradWhileContext(WhileContext):
    """The backward loop of ``forward``: forward values come from accumulators."""

    def __init__(self, forward: WhileContext, name):
        super().__init__(name, forward.parallel_iterations, back_prop=True)
        self.forward = forward
        self.index = None  # the forward iteration this backward iteration differentiates

    def AddValue(self, t):  # noqa: N802 - TF's name
        if self._is_inside(t) or _frame_of(t) is not self.forward:
            return super().AddValue(t)
        known = self._external.get(id(t))
        if known is not None:
            return known[1]
        if t.op.type == "Enter" and t.op.attrs.get("is_constant"):
            inner = self.AddValue(t.op.inputs[0])  # loop invariant: bring the outside value
        elif t.op.type == "Const":
            inner = constant(t.op.get_attr("value"), t.dtype.base_dtype)
        else:
            inner = self._saved_value(t)
        self._external[id(t)] = (t, inner)
        return inner

    def _saved_value(self, t):
        handle = _accumulator_for(self.forward, t)
        index = []
        for w in _enclosing_loops(self.forward):
            back = self._backward_of(w)
            index.append(back.index if back is not None else w.counter)
        with _ops.get_default_graph().no_control_dependencies():
            return _ops.apply_op("_LoopAccumulatorGet", [handle] + index,
                                 {"dtype": t.dtype.base_dtype, "shape": t.shape},
                                 "saved").outputs[0]

    def _backward_of(self, w):
        ctx = self
        while ctx is not None:
            if isinstance(ctx, GradWhileContext) and ctx.forward is w:
                return ctx
            ctx = ctx.outer_context
        return None


def loop_inputs(fwd: WhileContext) -> list:
    """What a loop reads from outside: initial values, then outside tensors used inside."""
    initial = [e.op.inputs[0] for e in fwd.enters]
    # The Enter's own input, not the original tensor: inside a cond branch that is the
    # branch's Switch, whose gradient keeps an untaken branch's (dead) gradient out.
    return initial + [enter.op.inputs[0] for enter in _invariant_enters(fwd)]


def _invariant_enters(fwd: WhileContext) -> list:
    return [inner for _, inner in fwd.external_values() if inner.op.type == "Enter"]


def _zero_gradient(t):
    """The zero a gradient for outside tensor ``t`` accumulates from: for a resource
    variable's handle, zeros shaped as the variable's value."""
    if t.dtype.base_dtype is not _dt.resource:
        return array_ops.zeros_like(t)
    dtype, shape = variable_dtype_shape(t)
    if dtype is None or not shape.is_fully_defined():
        raise NotImplementedError(f"the gradient of a loop that reads the resource variable "
                                  f"behind {t.name} needs its shape known at build time")
    return array_ops.zeros(shape.as_list(), dtype=dtype)


def while_grad(fwd: WhileContext, exit_grads: list) -> list:
    """Gradients of ``loop_inputs(fwd)`` given the gradients of ``fwd.exits``."""
    from dflab.ops.gradients import _is_differentiable_dtype, as_dense, gradients

    n_vars = len(fwd.exits)
    outside = [(e.op.inputs[0], e) for e in _invariant_enters(fwd)]
    result = [None] * (n_vars + len(outside))
    if not fwd.back_prop:
        return result
    # A handle is not a loop variable one differentiates (its reads inside are, see outside).
    var_ids = [k for k in range(n_vars) if _is_differentiable_dtype(fwd.exits[k])
               and fwd.exits[k].dtype.base_dtype is not _dt.resource]
    ext_ids = [m for m, (t, _) in enumerate(outside) if _is_differentiable_dtype(t)]
    if not var_ids or all(exit_grads[k] is None for k in var_ids):
        return result
    _ensure_counter(fwd)
    with _ops.name_scope(None, fwd.name.rstrip("/").split("/")[-1] + "_grad"):
        g0 = [as_dense(exit_grads[k]) if exit_grads[k] is not None
              else array_ops.zeros_like(fwd.exits[k]) for k in var_ids]
        e0 = [_zero_gradient(outside[m][0]) for m in ext_ids]
        back = GradWhileContext(fwd, _ops.get_default_graph().unique_name("while_grad") + "/")
        ys = [fwd.next_iterations[k].op.inputs[0] for k in var_ids]
        xs = [fwd.body_inputs[k] for k in var_ids] + [outside[m][1] for m in ext_ids]
        # One iteration is what lies between the body's inputs and its next values: the walk
        # stops at every body input, those not differentiated too (an op that makes an int
        # variable's next value and a float one's would otherwise reach, through the int
        # variable's back edge, itself, and wait for a gradient that never comes).
        stops = xs + [x for k, x in enumerate(fwd.body_inputs) if k not in var_ids]

        def cond(j, gv, ge):
            return j > 0

        def body(j, gv, ge):
            back.index = j - 1
            grads = gradients(ys, xs, grad_ys=list(gv), stop_gradients=stops)
            new_gv = [as_dense(g) if g is not None else array_ops.zeros_like(x)
                      for g, x in zip(grads[:len(var_ids)], xs)]
            new_ge = [acc + as_dense(g) if g is not None else acc
                      for acc, g in zip(ge, grads[len(var_ids):])]
            return [back.index, new_gv, new_ge]

        invariants = [TensorShape([]), [fwd.merges[k].shape for k in var_ids],
                      [e.shape for e in e0]]
        _, gv, ge = _build_loop(back, cond, body, [fwd.iterations, g0, e0], invariants,
                                getattr(fwd, "site", ""))
    for k, g in zip(var_ids, gv):
        result[k] = g
    for m, g in zip(ext_ids, ge):
        result[n_vars + m] = g
    return result
