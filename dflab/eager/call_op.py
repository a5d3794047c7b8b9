"""The call op: ``PartitionedCall`` runs a traced function's graph as one op.

A traced function (``dflab.eager.function``) is an ordinary dflab graph; the op that calls it
takes the function's arguments and captured values as inputs and gives its outputs. Its
attributes name the function (``f``), its output dtypes and shapes (``Tout``,
``output_shapes``) and, on an op built into a graph, the body itself (``_body``: the typed node
defs and the names of the arguments and results, plain data), so that a worker in another
process rebuilds it as it rebuilds any partition. Eagerly, the body is found by name in this
process's function library, which every traced function joins.

The kernel rebuilds the body's nodes from their node defs (``dflab.runtime.node``), binds their
kernels on the call op's device through the same ``ExecutorPlan`` a session's plan uses, and
runs one ``Execution`` per call: inline for a straight-line body, on the dataflow driver when
the body has loops or conditionals. Every node of the body runs, so the side effects of a
traced training step (variable updates) happen though nothing reads them.

The gradient of a call (``dflab.eager.function``): a call a tape may record runs the
function's *forward*, which also returns the values its *backward* reads, and the gradient
calls the backward on them; otherwise another traced function, the function's Python code
traced again with ``tf.gradients`` applied to it (so a loop in the body is differentiated by
the loop's own gradient).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from dflab.framework import errors
from dflab.framework.graph_io import GraphDef, graph_def_from_json
from dflab.framework.op_kinds import CONTROL_FLOW_OPS
from dflab.framework.registry import RegisterGradient, register_op
from dflab.framework.tensor_shape import TensorShape, unknown_shape
from dflab.kernels.registry import kernel
from dflab.runtime.executor import Execution, to_client_value
from dflab.runtime.executor_plan import SCHEDULE_FILE, ExecutorPlan
from dflab.runtime.node import nodes_from_node_defs, split_input
from dflab.runtime.plan_node import failed_node, node_error
from dflab.runtime.worker import next_step_id

CALL_OP = "PartitionedCall"


class FunctionDef:
    """A traced function as plain data: its node defs (arguments left out), the names of the
    tensors its arguments feed and of those it returns, and its outputs' dtypes and shapes.
    ``concrete`` is the ``ConcreteFunction`` it came from, in the process that traced it."""

    def __init__(self, name: str, graph_def: GraphDef, arg_names, ret_names, out_dtypes,
                 out_shapes, concrete=None):
        self.name = name
        self.graph_def = graph_def
        self.arg_names = list(arg_names)
        self.ret_names = list(ret_names)
        self.out_dtypes = list(out_dtypes)
        self.out_shapes = list(out_shapes)
        self.concrete = concrete
        # For a function cut from another's gradient (a backward): makes its concrete function
        # when a call of it is differentiated (a second-order gradient); None where it cannot.
        self.make_concrete = None

    def to_json(self) -> dict:
        return {"name": self.name, "graph_def": self.graph_def.to_json(),
                "args": self.arg_names, "rets": self.ret_names}

    @classmethod
    def from_json(cls, data: dict, out_dtypes, out_shapes) -> FunctionDef:
        return cls(str(data["name"]), graph_def_from_json(data["graph_def"]), data["args"],
                   data["rets"], out_dtypes, out_shapes)


_LIBRARY: dict[str, FunctionDef] = {}
_library_lock = threading.Lock()


def register_function(fdef: FunctionDef) -> None:
    with _library_lock:
        _LIBRARY[fdef.name] = fdef


def lookup_function(name: str) -> FunctionDef:
    fdef = _LIBRARY.get(name)
    if fdef is None:
        raise errors.NotFoundError(None, None, f"Function {name!r} is not in this process's "
                                   "function library")
    return fdef


# --- the op ------------------------------------------------------------------------------------
def _call_infer(op):
    attrs = op.attrs
    if "Tout" in attrs:
        dtypes = list(attrs["Tout"])
        shapes = list(attrs.get("output_shapes") or [None] * len(dtypes))
    else:
        fdef = lookup_function(op.get_attr("f"))
        dtypes, shapes = fdef.out_dtypes, fdef.out_shapes
    return [(dt, sh if sh is not None else unknown_shape()) for dt, sh in zip(dtypes, shapes)]


register_op(CALL_OP, _call_infer, stateful=True, expensive=True)


# --- the kernel --------------------------------------------------------------------------------
_pool = None
_pool_lock = threading.Lock()


def _body_pool() -> ThreadPoolExecutor:
    """Threads for the expensive or blocking nodes of bodies with loops (the calling thread
    runs the cheap ones)."""
    global _pool
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="dflab-function")
    return _pool


def _fdef_of(node) -> FunctionDef:
    body = node.attr.get("_body")
    if body is not None and node.attr.get("f") not in _LIBRARY:
        return FunctionDef.from_json(body, node.attr.get("Tout", ()),
                                     node.attr.get("output_shapes", ()))
    return lookup_function(node.attr["f"])


def body_plan(fdef: FunctionDef, ctx) -> ExecutorPlan:
    """The body of ``fdef`` as an executor plan whose kernels are bound on ``ctx``'s device."""
    nodes, feeds = nodes_from_node_defs(fdef.graph_def.node, fdef.arg_names)
    by_name = {n.name: n for n in nodes}
    fed = {(t.op.name, t.value_index): t for t in feeds}
    fetches = []
    for name in fdef.ret_names:
        key = split_input(name)
        out = fed.get(key)
        if out is None:
            out = by_name[key[0]].outputs[key[1]]
        fetches.append(out)
    cf = any(n.type in CONTROL_FLOW_OPS for n in nodes)
    return ExecutorPlan(nodes, feeds, fetches, lambda node: ctx, control_flow=cf)


@kernel(CALL_OP, ("CPU", "GPU"), takes_step=True)
def _call_kernel(node, ctx):
    fdef = _fdef_of(node)
    eplan = body_plan(fdef, ctx)
    n_out = len(fdef.ret_names)
    if eplan.inline_capable:
        # No loop and nothing that waits: the body runs in order on the calling thread (the
        # hand-offs of the dataflow driver cost more than a small function's parallelism).
        return _straight_call(eplan, n_out)

    def call(step, *args):
        ex = Execution(eplan, list(args), getattr(step, "step_id", 0) or next_step_id())
        ex.run_dataflow(_body_pool())
        values = ex.fetch_values()
        if n_out == 1:
            return values[0]
        return tuple(values)

    return call


def _straight_call(eplan, n_out):
    """A body with no control flow and nothing that waits: its compiled schedule called
    directly (no per-call execution state), as a session's inline step."""
    run, line_to_node = eplan.compiled()
    if run is None:  # too big to compile: one execution per call
        def call_big(step, *args):
            ex = Execution(eplan, list(args), next_step_id())
            ex.run_inline()
            values = ex.fetch_values()
            return values[0] if n_out == 1 else tuple(values)

        return call_big

    def call(step, *args):
        try:
            out = run(args, step)
        except Exception as e:  # noqa: BLE001 - named after the body's node, as a step's
            failed = failed_node(e, line_to_node, SCHEDULE_FILE)
            raise node_error(e, eplan.nodes[failed].op) from e
        if n_out == 1:
            return to_client_value(out[0]) if hasattr(out[0], "read") else out[0]
        return tuple(out)

    return call


# --- the gradient --------------------------------------------------------------------------------
@RegisterGradient(CALL_OP)
def _call_grad(op, *grads):
    fdef = lookup_function(op.get_attr("f"))
    if fdef.concrete is None and fdef.make_concrete is not None:
        fdef.concrete, fdef.make_concrete = fdef.make_concrete(), None
    if fdef.concrete is None:
        raise LookupError(f"No gradient for a call of {fdef.name}: the function was not "
                          "traced in this process")
    return fdef.concrete.call_gradient(op, list(grads))


def output_shapes(tensors) -> list:
    return [t.shape if isinstance(t.shape, TensorShape) else TensorShape(t.shape)
            for t in tensors]
