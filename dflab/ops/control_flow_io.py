"""Control-flow contexts as data, for meta graphs (TF's ``WhileContextDef``/``CondContextDef``).

A graph's nodes say how a loop or a cond runs (``Enter`` frames, ``Switch``/``Merge``), but
not how to differentiate it: ``gradients`` reads the ``CondContext``/``WhileContext`` objects
the builders left on the ops (``control_flow_context``; a cond's ``Merge`` and a loop's
``Exit`` also carry ``control_flow_info``). ``cond`` and ``while_loop`` put their contexts in
the ``cond_context``/``while_context`` collections, as TF's do; a meta graph writes each as a
def naming its tensors and member ops, and importing one rebuilds the objects and puts them
back on the imported ops, so a graph read back with ``import_meta_graph`` can be trained
further (TF's contexts travel the same way).

A def's ``seq`` orders the contexts as they were made, so that an outer context is rebuilt
before the contexts inside it (``outer`` names its ``seq``).
"""

from __future__ import annotations

import weakref

from dflab.framework import errors
from dflab.ops.control_flow_ops import CondContext, ControlFlowContext, WhileContext

WHILE_CONTEXT = "while_context"  # TF's GraphKeys.WHILE_CONTEXT
COND_CONTEXT = "cond_context"  # TF's GraphKeys.COND_CONTEXT

# The tensor fields of a WhileContext (lists or single tensors); ``switches`` are pairs.
_WHILE_TENSORS = ("pivot", "loop_cond", "counter", "counter_increment", "iterations")
_WHILE_LISTS = ("enters", "merges", "body_inputs", "next_iterations", "exits")

# graph -> (graph version, {id(context): (member op names, op names whose info it is)})
_MEMBERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


# --- export -------------------------------------------------------------------------------------
def _members(graph) -> dict:
    """Per context (by id), the names of the ops built in it and of the ops whose
    ``control_flow_info`` it is (a loop's exits; for a cond, the merges on its predicate):
    one pass over the graph per export, not one per context."""
    cached = _MEMBERS.get(graph)
    if cached is not None and cached[0] == graph.version:
        return cached[1]
    table: dict = {}
    for op in graph.get_operations():
        ctx = op.control_flow_context
        if ctx is not None:
            table.setdefault(id(ctx), ([], []))[0].append(op.name)
        info = op.control_flow_info
        if info is not None:
            table.setdefault(id(info), ([], []))[1].append(op.name)
    _MEMBERS[graph] = (graph.version, table)
    return table


def _names(tensors) -> list:
    return [t.name for t in tensors]


def _common(ctx: ControlFlowContext) -> dict:
    ops, _ = _members(ctx.graph).get(id(ctx), ([], []))
    outer = ctx.outer_context
    return {"seq": ctx._seq, "outer": None if outer is None else outer._seq, "ops": ops,
            "external": [[outside.name, inside.name] for outside, inside in
                         ctx.external_values()]}


def _complete(ctx) -> bool:
    """Whether ``ctx`` and the contexts around it were built to the end (a loop whose body
    raised has no exits: it is left out, and so is what was built inside it)."""
    while ctx is not None:
        if isinstance(ctx, WhileContext) and not ctx.exits:
            return False
        ctx = ctx.outer_context
    return True


def while_to_proto(ctx: WhileContext) -> dict | None:
    if not _complete(ctx):
        return None
    d = _common(ctx)
    d.update(name=ctx.name, parallel_iterations=ctx.parallel_iterations,
             back_prop=bool(ctx.back_prop), site=getattr(ctx, "site", ""),
             info_ops=_members(ctx.graph).get(id(ctx), ([], []))[1],
             switches=[[s[0].name, s[1].name] for s in ctx.switches],
             control_enters=[[c.name, e.name] for c, e in ctx._control_enters.items()])
    for f in _WHILE_TENSORS:
        t = getattr(ctx, f)
        d[f] = None if t is None else t.name
    for f in _WHILE_LISTS:
        d[f] = _names(getattr(ctx, f))
    forward = getattr(ctx, "forward", None)  # a backward loop: its forward loop
    if forward is not None:
        d["forward"] = forward._seq
    return d


def cond_to_proto(ctx: CondContext) -> dict | None:
    if not _complete(ctx):
        return None
    d = _common(ctx)
    # The merges of a cond carry its predicate as their info (one list, on the true branch's).
    info = _members(ctx.graph).get(id(ctx.pred), ([], []))[1] if ctx.branch == 1 else []
    d.update(pred=ctx.pred.name, pivot=ctx.pivot.name, branch=int(ctx.branch), info_ops=info)
    return d


# --- import -------------------------------------------------------------------------------------
class _Reader:
    """Looks names up in the graph a def is imported into (under its import scope) and checks
    each field's JSON type; errors are ``DataLossError``/``NotFoundError`` naming the field."""

    def __init__(self, graph, scope, value):
        if not isinstance(value, dict):
            raise errors.DataLossError(None, None, "a context def must be a JSON object")
        self.graph, self.value = graph, value
        self.prefix = f"{scope}/" if scope else ""

    def field(self, key, kinds, default=...):
        v = self.value.get(key, default)
        if v is ... or not isinstance(v, kinds):
            raise errors.DataLossError(None, None, f"context def field {key!r} is missing or "
                                                   "of the wrong JSON type")
        return v

    def tensor(self, name):
        return None if name is None else self._find(name, "tensor")

    def op(self, name):
        return self._find(name, "op")

    def _find(self, name, kind):
        if not isinstance(name, str):
            raise errors.DataLossError(None, None, f"a context def names {kind}s with strings")
        try:
            if kind == "op":
                return self.graph.get_operation_by_name(self.prefix + name)
            return self.graph.get_tensor_by_name(self.prefix + name)
        except (KeyError, ValueError):
            raise errors.NotFoundError(None, None, f"a context def names {kind} "
                                                   f"{self.prefix + name!r}, which the graph "
                                                   "does not have") from None

    def pairs(self, key, find_first, find_second):
        out = []
        for pair in self.field(key, list, []):
            if not isinstance(pair, list) or len(pair) != 2:
                raise errors.DataLossError(None, None, f"context def field {key!r} must hold "
                                                       "pairs of names")
            out.append((find_first(pair[0]), find_second(pair[1])))
        return out

    def tensors(self, key):
        return [self._find(n, "tensor") for n in self.field(key, list)]

    def ops(self, key):
        return [self.op(n) for n in self.field(key, list, [])]


def _imported(graph) -> dict:
    """(import scope, def seq) -> the context rebuilt from it, for this graph's imports."""
    table = graph.__dict__.get("_imported_contexts")
    if table is None:
        table = graph.__dict__["_imported_contexts"] = {}
    return table


def _context(graph, scope, seq, what):
    if seq is None:
        return None
    ctx = _imported(graph).get((scope, seq))
    if ctx is None:
        raise errors.DataLossError(None, None, f"a context def names {what} #{seq}, which no "
                                               "earlier def describes")
    return ctx


def _rebuild(cls, graph, scope, r: _Reader):
    """A context of ``cls`` with its common fields, registered under its def's ``seq``."""
    ctx = cls.rebuilt(graph)  # (import adds it to its collection)
    ctx.outer_context = _context(graph, scope, r.field("outer", (int, type(None))),
                                 "an outer context")
    for outside, inside in r.pairs("external", r.tensor, r.tensor):
        ctx._external[id(outside)] = (outside, inside)
    _imported(graph)[(scope, r.field("seq", int))] = ctx
    for op in r.ops("ops"):
        op.control_flow_context = ctx
    return ctx


def while_from_proto(value, graph, scope=None) -> WhileContext:
    r = _Reader(graph, scope, value)
    forward = r.value.get("forward")
    if forward is not None:
        from dflab.ops.control_flow_grad import GradWhileContext

        ctx = _rebuild(GradWhileContext, graph, scope, r)
        ctx.forward = _context(graph, scope, forward, "a forward loop")
        ctx.index = None
    else:
        ctx = _rebuild(WhileContext, graph, scope, r)
    ctx.name = r.prefix + r.field("name", str)
    ctx.parallel_iterations = r.field("parallel_iterations", int)
    ctx.back_prop = r.field("back_prop", bool)
    ctx.site = r.field("site", str, "")
    for f in _WHILE_TENSORS:
        setattr(ctx, f, r.tensor(r.value.get(f)))
    for f in _WHILE_LISTS:
        setattr(ctx, f, r.tensors(f))
    ctx.switches = r.pairs("switches", r.tensor, r.tensor)
    if not ctx.enters:
        raise errors.DataLossError(None, None, "a while context def has no enters")
    # The frame the imported Enter ops run in (an import scope does not rename frames).
    ctx.frame_name = ctx.enters[0].op.get_attr("frame_name")
    ctx._control_enters = dict(r.pairs("control_enters", r.op, r.op))
    for op in r.ops("info_ops"):
        op.control_flow_info = ctx
    return ctx


def cond_from_proto(value, graph, scope=None) -> CondContext:
    r = _Reader(graph, scope, value)
    ctx = _rebuild(CondContext, graph, scope, r)
    ctx.pred = r.tensor(r.field("pred", str))
    ctx.pivot = r.tensor(r.field("pivot", str))
    ctx.branch = r.field("branch", int)
    for op in r.ops("info_ops"):
        op.control_flow_info = ctx.pred
    return ctx



def copy_contexts(src, dst) -> None:
    """Rebuild ``src``'s contexts in ``dst``, a copy of ``src`` made op for op under the same
    names (a traced function's graph copied for its gradient)."""
    contexts = sorted(src.get_collection(WHILE_CONTEXT) + src.get_collection(COND_CONTEXT),
                      key=lambda c: c._seq)
    for ctx in contexts:
        if isinstance(ctx, WhileContext):
            proto, rebuild = while_to_proto(ctx), while_from_proto
        else:
            proto, rebuild = cond_to_proto(ctx), cond_from_proto
        if proto is not None:
            dst.add_to_collection(ctx.COLLECTION, rebuild(proto, dst))
