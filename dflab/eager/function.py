"""Traced functions: ``tf.function`` and ``tf.contrib.eager.defun``.

A ``Function`` wraps a Python function. The first time it is called with a new *input
signature* — the dtypes and shapes of its tensor arguments, the values of its other Python
arguments, the identity of other objects (``self``), and the graph it is called in — it
*traces* the function: runs it once on placeholders inside a ``FuncGraph``, an ordinary dflab
graph (GraphView draws it, a session can run it), after converting its Python control flow
with AutoGraph (``dflab.autograph``) unless ``autograph=False``. The result is a
``ConcreteFunction``: the graph, its argument placeholders, the values it captured from
outside (eager tensors and variables' handles, or tensors of the graph it is called from),
and its outputs. Later calls with the same signature call the cached graph; each trace
records *why* it happened (``Function.traces``), and ``experimental_get_tracing_count`` counts
them, as TF's. ``input_signature=`` pins the signature to ``TensorSpec``s.

Calling a concrete function is one op, ``PartitionedCall`` (``dflab.eager.call_op``): run at
once under eager execution, added to the graph being built otherwise, so a traced function
is callable from graph mode, differentiable (tapes and ``tf.gradients`` reach its gradient
function; a call a tape may record runs a forward that also returns what the gradient reads,
``_ForwardBackward``) and placeable (``tf.device`` around the call).

Inside a trace, stateful ops run in program order (each gets a control input on the one
before, as TF's automatic control dependencies give; a while loop or a ``cond`` is one step of
that order, the stateful ops of its body or taken branch ordered within it, at any depth), and
every op runs on each call.
Variables follow TF's once-only rule: a function may create variables only on its first
trace; they are made outside the graph (in the eager context, or in the graph the call is
built in) with their initial values computed then, and later traces must reuse them.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import itertools
import re
import threading
import weakref

import numpy as np

from dflab.eager import call_op
from dflab.eager import context as _ctx
from dflab.framework import dtypes as _dt
from dflab.framework import errors, nest
from dflab.framework import ops as _ops
from dflab.framework.composite import CompositeArgument
from dflab.framework.eager_tensor import EagerTensor
from dflab.framework.graph import Graph
from dflab.framework.graph_io import GraphDef, import_graph_def
from dflab.framework.registry import GRADIENT_OUTPUTS
from dflab.framework.tensor_shape import TensorShape, as_shape
from dflab.ops import array_ops
from dflab.ops import control_flow_ops as _cf
from dflab.ops import gradients as _gradients
from dflab.ops import resource_variable_ops as _rv
from dflab.ops import variables as _variables
from dflab.ops.control_flow_io import copy_contexts
from dflab.runtime.node import Node

_function_ids = itertools.count(1)


class TensorSpec:
    """``tf.TensorSpec``: the dtype and (partial) shape a traced function's argument has."""

    def __init__(self, shape, dtype=_dt.float32, name=None):
        self.shape = as_shape(shape)
        self.dtype = _dt.as_dtype(dtype)
        self.name = name

    @classmethod
    def from_tensor(cls, tensor, name=None) -> TensorSpec:
        return cls(tensor.shape, tensor.dtype.base_dtype, name)

    def is_compatible_with(self, value) -> bool:
        dtype = getattr(value, "dtype", None)
        if dtype is None:
            return False
        dt = _dt.as_dtype(dtype).base_dtype
        return dt is self.dtype.base_dtype and self.shape.is_compatible_with(
            TensorShape(np.shape(value)) if not isinstance(value, _ops.Tensor) else value.shape)

    def __eq__(self, other):
        return isinstance(other, TensorSpec) and self.dtype == other.dtype and \
            self.shape.as_tuple() == other.shape.as_tuple()

    def __hash__(self):
        return hash((self.dtype, self.shape.as_tuple()))

    def __repr__(self):
        return f"TensorSpec(shape={self.shape}, dtype=tf.{self.dtype.name}, name={self.name!r})"


# --- the function graph --------------------------------------------------------------------------
class FuncGraph(Graph):
    """The graph a Python function is traced into: placeholders for its arguments, one more
    placeholder per value captured from outside, and automatic control dependencies between
    its stateful ops (see the module docstring)."""

    is_function_graph = True
    captures_foreign_tensors = True

    def __init__(self, name: str, outer=None):
        super().__init__()
        self.name = name
        self.outer_graph = outer if outer is not None else _ops.get_default_graph()
        self.inputs: list = []  # argument placeholders
        self.captures: dict = {}  # id(outer value) -> (outer value, placeholder)
        self.outputs: list = []
        self.variables: list = []
        # Control-flow context being built -> its last stateful op (``Graph.begin_side_effects``).
        self._effects: dict = {None: None}
        self.seed = getattr(self.outer_graph, "seed", None)
        self.add_op_observer(self._order_stateful)

    def placeholder(self, dtype, shape, name: str, like=None):
        """A placeholder of ``dtype`` and ``shape``; ``like``: a placeholder standing for a
        variable handle, whose variable dtype and shape it takes too."""
        attrs = {"dtype": _dt.as_dtype(dtype).base_dtype, "shape": as_shape(shape)}
        if like is not None and "_handle_dtype" in like.op.attrs:
            attrs["_handle_dtype"] = like.op.get_attr("_handle_dtype")
            attrs["_handle_shape"] = like.op.get_attr("_handle_shape")
        with self.as_default():
            return self.create_op("Placeholder", [], name=name, attrs=attrs).outputs[0]

    def ordering_side_effects(self) -> bool:
        return self.control_flow_context in self._effects

    def last_side_effect(self):
        return self._effects.get(self.control_flow_context)

    def after_side_effect(self, op) -> None:
        if self.control_flow_context in self._effects:
            self._effects[self.control_flow_context] = op

    def begin_side_effects(self, ctx, after=None) -> None:
        self._effects[ctx] = after

    def end_side_effects(self, ctx):
        return self._effects.pop(ctx, None)

    @contextlib.contextmanager
    def side_effects_unordered(self):
        saved, self._effects = self._effects, {}
        try:
            yield
        finally:
            self._effects = saved

    def capture(self, t):
        """The placeholder standing for ``t`` (a value from outside) in this graph."""
        return self._capture(t, "Identity")

    def _order_stateful(self, op) -> None:
        """TF's automatic control dependencies: a stateful op runs after the one before it in
        its control-flow context (one being built: ops a gradient later adds to a finished
        loop keep the order their data gives them)."""
        ctx = op.control_flow_context
        if ctx not in self._effects or not op.op_def.stateful or op.type in _UNORDERED_STATEFUL:
            return
        last = self._effects[ctx]
        if last is not None and last is not op and last not in op.control_inputs:
            op.add_control_input(last)
        self._effects[ctx] = op

    def _capture(self, t, op_type):
        found = self.captures.get(id(t))
        if found is not None:
            return found[1]
        from dflab.ops.op_util import capture_placeholder_attrs

        attrs = capture_placeholder_attrs(t)
        with self.as_default(), self.control_dependencies(None):
            ph = self.create_op("Placeholder", [], name="captured", attrs=attrs).outputs[0]
        self.captures[id(t)] = (t, ph)
        return ph

    def capture_values(self) -> list:
        return [outer for outer, _ in self.captures.values()]

    def capture_placeholders(self) -> list:
        return [ph for _, ph in self.captures.values()]


# Stateful ops that need no order among the others: placeholders and variable handles.
_UNORDERED_STATEFUL = frozenset({"Placeholder", "VarHandleOp", "PlaceholderWithDefault"})


# --- concrete functions --------------------------------------------------------------------
class ConcreteFunction:
    """One trace of a function: its graph, argument placeholders, captured values and outputs,
    callable with tensors of the traced signature (see the module docstring)."""

    def __init__(self, graph: FuncGraph, arg_placeholders, structured_outputs,
                 user_trace: bool, reason: str = "", signature=None):
        self.graph = graph
        self._args = list(arg_placeholders)
        self.structured_outputs = structured_outputs
        flat = [t for t in nest.flatten(structured_outputs) if t is not None]
        self.outputs = flat
        # A single tensor (the common case) comes back without repacking.
        self._single = isinstance(structured_outputs, _ops.Tensor)
        # A trace of the user's function: a call a tape may record runs its forward and
        # backward pair (a gradient's or a backward's own functions are called plainly).
        self._user_trace = user_trace
        self.reason = reason
        self.signature = signature
        self.name = graph.name
        self._captured = graph.capture_values()
        self._capture_phs = graph.capture_placeholders()
        self._fdef = self._make_fdef()
        call_op.register_function(self._fdef)
        self._eager_attrs = {"f": self.name}
        self._graph_attrs = None
        self._grad = None
        self._grad_lock = threading.Lock()
        self._split_done = None  # a _ForwardBackward, _UNSPLIT, or None: not tried yet
        self._read_variables: list = []  # weak references, set by the trace
        self._traced_inputs: tuple = ([], [])  # (parameter names, arguments as traced)
        self._parameter_kinds: dict = {}  # parameter name -> inspect.Parameter kind
        self._spec_names = None  # the input_signature's own names, in its order

    @property
    def inputs(self) -> list:
        """The graph's input placeholders: the arguments', then the captured values'."""
        return self._args + self._capture_phs

    @property
    def captured_inputs(self) -> list:
        return list(self._captured)

    @property
    def structured_input_signature(self) -> tuple:
        """TF's ``(args, kwargs)``: the arguments as traced, each tensor a ``TensorSpec``
        named by its path (``x``; ``d_a`` for ``d["a"]``), Python values as given."""
        names, values = self._traced_inputs
        kinds = self._parameter_kinds
        given = iter(self._spec_names or ())  # an input_signature's names come first

        def spec_of(value, name):
            if isinstance(value, _ops.Tensor):
                return TensorSpec(value.shape, value.dtype.base_dtype,
                                  next(given, None) or name)
            if isinstance(value, dict):  # (its specs in sorted order: the signature's)
                specs = {k: spec_of(value[k], f"{name}_{k}") for k in sorted(value)}
                return type(value)((k, specs[k]) for k in value)
            if isinstance(value, (list, tuple)):
                if hasattr(value, "_fields"):  # a named tuple: its fields' names
                    return type(value)(*(spec_of(v, f"{name}_{f}")
                                         for f, v in zip(value._fields, value)))
                return type(value)(spec_of(v, f"{name}_{i}") for i, v in enumerate(value))
            return value

        args, kwargs = [], {}
        for n, v in zip(names, values):
            kind = kinds.get(n)
            if kind is inspect.Parameter.VAR_POSITIONAL:  # each of ``*args`` an argument
                args.extend(spec_of(e, f"{n}_{i}") for i, e in enumerate(v))
            elif kind is inspect.Parameter.KEYWORD_ONLY:
                kwargs[n] = spec_of(v, n)
            elif kind is inspect.Parameter.VAR_KEYWORD:
                kwargs.update((k, spec_of(e, k)) for k, e in v.items())
            else:
                args.append(spec_of(v, n))
        return tuple(args), kwargs

    @property
    def variables(self) -> list:
        return list(self.graph.variables)

    def _make_fdef(self) -> call_op.FunctionDef:
        inputs = self.inputs
        arg_ops = {t.op.name for t in inputs}
        node_defs = []
        for op in self.graph.get_operations():
            if op.name in arg_ops:
                continue
            nd = Node.of_op(op, "").to_node_def()
            nd.input = [i for i in nd.input if not (i.startswith("^") and i[1:] in arg_ops)]
            node_defs.append(nd)
        return call_op.FunctionDef(
            self.name, GraphDef(node_defs), [t.name for t in inputs],
            [t.name for t in self.outputs], [t.dtype.base_dtype for t in self.outputs],
            [t.shape for t in self.outputs], concrete=self)

    def _graph_call_attrs(self) -> dict:
        if self._graph_attrs is None:
            self._graph_attrs = {"f": self.name,
                                 "Tout": [t.dtype.base_dtype for t in self.outputs],
                                 "output_shapes": [t.shape for t in self.outputs],
                                 "_body": self._fdef.to_json()}
        return self._graph_attrs

    def __call__(self, *args, **kwargs):
        names, traced = self._traced_inputs
        if not names:  # a function of its placeholders alone (a gradient's)
            return self.call_flat(_flat_inputs(nest.flatten((args, kwargs))))
        return self.call_flat(self._bind(names, traced, args, kwargs))

    def _bind(self, names, traced, args, kwargs) -> list:
        """The argument tensors of a call ``(*args, **kwargs)``, bound to the parameters as
        traced (keywords by name), in placeholder order: a value that is not a tensor is
        converted to its placeholder's dtype, a tensor of another dtype refused, a Python
        argument must equal the traced one (TF's binding of a concrete function's inputs)."""
        kinds = self._parameter_kinds
        given, pos, kwargs = {}, list(args), dict(kwargs)
        for n in names:
            kind = kinds.get(n, inspect.Parameter.POSITIONAL_OR_KEYWORD)
            if kind is inspect.Parameter.VAR_POSITIONAL:
                given[n], pos = tuple(pos), []
            elif kind is inspect.Parameter.VAR_KEYWORD:
                given[n], kwargs = kwargs, {}
            elif pos and kind is not inspect.Parameter.KEYWORD_ONLY:
                given[n] = pos.pop(0)
            elif n in kwargs:
                given[n] = kwargs.pop(n)
        if pos or kwargs:
            what = "too many positional arguments" if pos else \
                f"an unexpected keyword argument {sorted(kwargs)[0]!r}"
            raise TypeError(f"{self.name}: binding the call's inputs failed: {what}")
        out = []
        for n, t in zip(names, traced):
            leaves = nest.flatten(t)
            if n not in given:
                if any(_is_tensor_arg(x) for x in leaves):
                    raise TypeError(f"{self.name}: binding the call's inputs failed: missing "
                                    f"a required argument: {n!r}")
                continue
            try:
                values = nest.flatten_up_to(t, given[n], check_types=False)
            except (TypeError, ValueError) as e:
                raise TypeError(f"{self.name}: argument {n!r} does not match the traced "
                                f"structure: {e}") from None
            for x, v in zip(leaves, values):
                if isinstance(x, CompositeArgument):
                    out += v._flat_tensors()
                elif isinstance(x, _ops.Tensor):
                    out.append(self._conformed(v, x, len(out)))
                elif not _same_value(v, x):
                    raise TypeError(f"{self.name}: argument {n!r} was traced as {x!r}; a "
                                    f"concrete function cannot take {v!r} there")
        return out

    def _conformed(self, v, placeholder, k):
        dtype = placeholder.dtype.base_dtype
        if isinstance(v, _ops.Tensor):
            if v.dtype.base_dtype != dtype:
                raise errors.InvalidArgumentError(
                    None, None, f"cannot compute {self.name} as input #{k}(zero-based) was "
                    f"expected to be a {dtype.name} tensor but is a "
                    f"{v.dtype.base_dtype.name} tensor")
            return v
        if isinstance(v, (np.ndarray, np.generic)):
            v = np.asarray(v, dtype.as_numpy_dtype)
        return _as_input(v) if isinstance(v, np.ndarray) else \
            _ops.convert_to_tensor(v, dtype=dtype)

    def call_flat(self, tensors):
        """Call with the argument tensors in the order of the argument placeholders."""
        if len(tensors) != len(self._args):
            raise TypeError(f"{self.name} takes {len(self._args)} tensor arguments, got "
                            f"{len(tensors)}")
        inputs = [*tensors, *self._captured]
        if _rv._ACCESS_HOOK[0] is not None:
            for ref in self._read_variables:
                v = ref()
                if v is not None:
                    _rv._accessed(v)
        g = _ops.get_default_graph()
        split = self._split() if _ctx._TAPES else None
        if split is not None:
            # A tape may record this call: run the forward that also gives what the gradient
            # needs, so that differentiating it runs nothing of the function again.
            inputs = [*tensors, *split.captured]
            if g.executes_eagerly:
                op = g.apply_op(call_op.CALL_OP, inputs, split.eager_attrs, self.name)
            else:
                op = _ops.apply_op(call_op.CALL_OP, inputs, split.graph_attrs(),
                                   call_op.CALL_OP)
        elif g.executes_eagerly:
            op = g.apply_op(call_op.CALL_OP, inputs, self._eager_attrs, self.name)
        else:
            op = _ops.apply_op(call_op.CALL_OP, inputs, self._graph_call_attrs(), call_op.CALL_OP)
        if self._single:
            return op.outputs[0]
        outs = iter(op.outputs)
        return nest.pack_sequence_as(
            self.structured_outputs,
            [None if t is None else next(outs) for t in nest.flatten(self.structured_outputs)])

    # --- the gradient of a call ----------------------------------------------------------
    def call_gradient(self, op, grads):
        """The gradients of a call ``op`` of this function for its inputs (the gradient
        function of ``PartitionedCall``): from the values its split forward gave, or, for a
        call made where no tape could record it (``tf.gradients`` in a TF 1.x graph), by a
        function that runs the forward again with the gradient."""
        split = self._split_done
        if split is not None and split is not _UNSPLIT and \
                op.get_attr("f") == split.forward.name:
            return split.gradient(op, grads)
        grad_fn, mask, sparse = self._gradient_function()
        n_args = len(self._args)
        dys = [g if g is not None else array_ops.zeros_like(y)
               for g, y in zip(grads, op.outputs) if _float(y)]
        out = grad_fn.call_flat(list(op.inputs[:n_args]) + dys)
        out = list(out) if isinstance(out, (list, tuple)) else [out]
        return _gradients_from(out, mask, sparse)

    def _split(self):
        """The forward/backward pair of this function (made once), or None where there is
        nothing to differentiate or its gradient cannot be built (the gradient then fails
        as it would have)."""
        split = self._split_done
        if split is None:
            with self._grad_lock:
                if self._split_done is None:
                    self._split_done = _ForwardBackward.build(self) or _UNSPLIT
            split = self._split_done
        return None if split is _UNSPLIT else split

    def copied(self, name: str):
        """``(graph, argument placeholders, outputs)`` of this trace's graph copied into a
        new graph, for its gradient: op for op, with the trace's static shapes, captures and
        control-flow contexts. The Python function does not run again (TF differentiates the
        traced graph too): its side effects happen once, and Python state it read that has
        changed since does not matter."""
        src = self.graph
        fg = FuncGraph(name, src.outer_graph)
        with fg.as_default(), fg.side_effects_unordered():
            # (with its static shapes: a loop variable's invariant, a shape set by hand)
            import_graph_def(src.as_graph_def(add_shapes=True), name="")
        fg.captures = {k: (outer, fg.get_tensor_by_name(ph.name))
                       for k, (outer, ph) in src.captures.items()}
        fg.variables = list(src.variables)
        copy_contexts(src, fg)
        xs = [fg.get_tensor_by_name(t.name) for t in self._args]
        return fg, xs, [fg.get_tensor_by_name(t.name) for t in self.outputs]

    def _gradient_function(self):
        with self._grad_lock:
            if self._grad is None:
                self._grad = self._trace_gradient()
        return self._grad

    def _trace_gradient(self):
        """The graph copied with ``tf.gradients`` of its outputs for its arguments and
        captured values, given the outputs' gradients as arguments."""
        fg, xs, outs = self.copied(f"{self.name}_grad")
        with fg.as_default():
            ys = [y for y in outs if _float(y)]
            dys = [fg.placeholder(y.dtype.base_dtype, y.shape, f"dy{i}")
                   for i, y in enumerate(ys)]
            targets = xs + [fg.capture(c) for c in self._captured]
            grads = _gradients.gradients(ys, targets, grad_ys=dys) if ys else \
                [None] * len(targets)
            mask = [g is not None for g in grads]
            results, sparse = _gradient_outputs(grads)
        concrete = ConcreteFunction(fg, xs + dys, results, False, "gradient")
        return concrete, mask, sparse

    @property
    def output_dtypes(self):
        return nest.map_structure(lambda t: t.dtype.base_dtype, self.structured_outputs)

    @property
    def output_shapes(self):
        return nest.map_structure(lambda t: t.shape, self.structured_outputs)

    def pretty_printed_concrete_signature(self) -> str:
        """TF's layout: ``Input Parameters``, ``Output Type``, ``Captures``."""
        args, kwargs = self.structured_input_signature
        names, _ = self._traced_inputs
        lines = ["Input Parameters:"]
        positional = [n for n in names if self._parameter_kinds.get(n) not in (
            inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.VAR_KEYWORD)]
        for n, a in zip(positional, args):
            kind = self._parameter_kinds.get(n, inspect.Parameter.POSITIONAL_OR_KEYWORD)
            lines.append(f"  {n} ({kind.name}): {_spec_text(a)}")
        for n, a in kwargs.items():
            lines.append(f"  {n} (KEYWORD_ONLY): {_spec_text(a)}")
        outs = nest.map_structure(lambda t: TensorSpec(t.shape, t.dtype.base_dtype),
                                  self.structured_outputs)
        lines += ["Output Type:", f"  {_spec_text(outs)}", "Captures:"]
        lines += [f"  {id(c)}: {_spec_text(TensorSpec(c.shape, c.dtype.base_dtype))}"
                  for c in self._captured] or ["  None"]
        return "\n".join(lines)

    def pretty_printed_signature(self) -> str:
        args = ", ".join(f"{t.op.name}: {t.dtype.name}{t.shape}" for t in self._args)
        outs = ", ".join(f"{t.dtype.name}{t.shape}" for t in self.outputs)
        return f"{self.name}({args}) -> ({outs})"

    def __repr__(self):
        return f"<ConcreteFunction {self.pretty_printed_signature()}>"


_UNSPLIT = object()  # a function whose forward/backward pair cannot be built


class _ForwardBackward:
    """A traced function cut in two, as TF's tape functions: its graph copied with
    ``tf.gradients`` of its outputs, its ops split into the *forward* (what runs before the
    outputs' gradients exist: the function's own ops, and what its loops' gradients save
    while they run) and the *backward* (what needs the outputs' gradients). The forward gives
    the outputs and then the *intermediates*, the forward's values the backward reads; a call
    a tape records runs it, so its gradient runs the backward on the values of that very
    call — no stateful op (a variable update, a random draw) runs again. Values inside cond
    branches leave the forward through ``_escape``; the call's own inputs the backward takes
    from the call (``given``)."""

    def __init__(self, concrete, forward, backward, captured, n_outputs, mask, given, sparse):
        self.concrete = concrete
        self.sparse = sparse  # per gradient the backward returns: IndexedSlices' three parts?
        self.given = given  # which of a call's inputs its backward reads
        self.forward = forward  # call_op.FunctionDef
        self.backward = backward
        self.captured = captured  # the values the forward's extra inputs stand for
        self.n_outputs = n_outputs
        self.mask = mask  # which inputs of a forward call get a gradient
        self.eager_attrs = {"f": forward.name, GRADIENT_OUTPUTS: n_outputs}
        self._graph_attrs = None
        self._forward_function = None  # the forward as a function (a second order's)

    @classmethod
    def build(cls, concrete):
        if not concrete._user_trace or not any(_float(t) for t in concrete.outputs):
            return None
        try:
            return cls._build(concrete)
        except Exception:  # noqa: BLE001 - no pair: calls run the plain function, as before
            return None

    @classmethod
    def _build(cls, concrete):
        fg, xs, outs = concrete.copied(f"{concrete.name}_forward")
        with fg.as_default():
            before = len(fg.get_operations())
            ys = [y for y in outs if _float(y)]
            dys = [fg.placeholder(y.dtype.base_dtype, y.shape, f"dy{i}")
                   for i, y in enumerate(ys)]
            targets = xs + fg.capture_placeholders()
            grads = _gradients.gradients(ys, targets, grad_ys=dys)
            mask = [g is not None for g in grads]
            results, sparse = _gradient_outputs(grads)
        if len(outs) != len(concrete.outputs):
            return None
        inputs = xs + fg.capture_placeholders()
        ops = fg.get_operations()
        args, dy_ops = {t.op for t in inputs}, {t.op for t in dys}
        forward, backward, intermediates = _cut(ops[:before], ops[before:], args, dy_ops,
                                                results)
        in_branches = [t for t in intermediates if not _fetchable(t)]
        if in_branches:
            # Values inside cond branches leave the forward merged with a stand-in from the
            # other branch, and the backward switches them dead again where they were.
            escapes = _escape_branch_values(fg, in_branches, backward, results)
            if escapes is None:
                return None
            forward, backward, intermediates = _cut(ops[:before], fg.get_operations()[before:],
                                                    args, dy_ops, results, escapes)
        in_forward = set(forward)
        if any(t.op not in in_forward and t.op not in args for op in forward
               for t in op.inputs) or not all(map(_fetchable, intermediates)):
            return None  # the forward would read the backward: not a clean cut
        if any(t.dtype.base_dtype in (_dt.resource, _dt.variant) and t.op not in args
               and t.op.type != "_LoopAccumulator" for t in intermediates):
            return None  # a TensorArray's or a dataset's state: not a value a call returns
        # The backward takes what the forward computed from its results, and the call's own
        # inputs from the call.
        computed = [t for t in intermediates if t.op not in args]
        given = [next(k for k, x in enumerate(inputs) if x is t)
                 for t in intermediates if t.op in args]
        fwd = _function_def(f"{concrete.name}_forward", forward, inputs, outs + computed)
        bwd = _function_def(f"{concrete.name}_backward", backward,
                            computed + [inputs[k] for k in given] + dys, results)
        fwd.concrete = concrete
        if not fg.get_collection("while_context") and not fg.get_collection("cond_context"):
            bwd_inputs = computed + [inputs[k] for k in given] + dys
            bwd.make_concrete = functools.partial(_function_of, bwd, bwd_inputs,
                                                  fg.outer_graph)
            fwd.make_concrete = functools.partial(_function_of, fwd, inputs, fg.outer_graph)
        call_op.register_function(fwd)
        call_op.register_function(bwd)
        return cls(concrete, fwd, bwd, fg.capture_values(), len(outs), mask, given, sparse)

    def graph_attrs(self) -> dict:
        """The attributes of a forward call built into a graph (the body travels with it)."""
        if self._graph_attrs is None:
            fwd = self.forward
            self._graph_attrs = {**self.eager_attrs, "Tout": fwd.out_dtypes,
                                 "output_shapes": fwd.out_shapes, "_body": fwd.to_json()}
        return self._graph_attrs

    def gradient(self, op, grads):
        """The gradients for the inputs of forward call ``op``, given its outputs'; where
        its intermediates have gradients too (a backward call was differentiated: a second
        order), those of the forward as a function of its own, all its outputs counted."""
        if any(g is not None for g in grads[self.n_outputs:]):
            if self.forward.make_concrete is None:
                raise LookupError(f"No second-order gradient through {self.concrete.name}: "
                                  "it holds loops or conds")
            if self._forward_function is None:
                self._forward_function = self.forward.make_concrete()
            return self._forward_function.call_gradient(op, grads)
        outs = op.outputs[:self.n_outputs]
        dys = [g if g is not None else array_ops.zeros_like(y)
               for g, y in zip(grads[:self.n_outputs], outs) if _float(y)]
        args = list(op.outputs[self.n_outputs:]) + [op.inputs[k] for k in self.given] + dys
        g = _ops.get_default_graph()
        bwd = self.backward
        if g.executes_eagerly:
            call = g.apply_op(call_op.CALL_OP, args, {"f": bwd.name}, bwd.name)
        else:
            call = _ops.apply_op(call_op.CALL_OP, args, {
                "f": bwd.name, "Tout": bwd.out_dtypes, "output_shapes": bwd.out_shapes,
                "_body": bwd.to_json()}, call_op.CALL_OP)
        return _gradients_from(call.outputs, self.mask, self.sparse)


def _function_of(fdef, inputs, outer) -> ConcreteFunction:
    """A forward's or backward's ``FunctionDef`` (of a function without loops or conds) as a
    concrete function of its own (its ops imported into a new function graph, its inputs
    placeholders), whose calls can be differentiated in turn: a second-order gradient through
    a traced function under nested tapes."""
    bg = FuncGraph(f"{fdef.name}_as_function", outer)  # (the original stays registered)
    with bg.as_default(), bg.side_effects_unordered():
        # (a variable's handle keeps its variable's dtype and shape: gradients reach it)
        phs = [bg.placeholder(t.dtype.base_dtype, t.shape, f"backward_input_{i}", like=t)
               for i, t in enumerate(inputs)]
        feeds = dict(zip(fdef.arg_names, phs))
        import_graph_def(fdef.graph_def, input_map=feeds, name="")
        outs = [feeds[n] if n in feeds else bg.get_tensor_by_name(n) for n in fdef.ret_names]
    return ConcreteFunction(bg, phs, outs, False, "backward")


def _gradient_outputs(grads) -> tuple[list, list]:
    """The tensors a backward function returns for ``grads`` (None: no gradient): a dense
    gradient as itself, an ``IndexedSlices`` (a gather's, an embedding's) as its values,
    indices and dense shape, so the call's gradient stays sparse as TF's does; and which were
    sparse."""
    results, sparse = [], []
    for g in grads:
        if g is None:
            continue
        if isinstance(g, _gradients.IndexedSlices) and g.dense_shape is not None:
            results += [g.values, g.indices, _ops.convert_to_tensor(g.dense_shape)]
            sparse.append(True)
        else:
            results.append(_ops.convert_to_tensor(g))
            sparse.append(False)
    return results, sparse


def _gradients_from(outputs, mask, sparse) -> list:
    """A backward call's ``outputs`` back as one gradient (or None) per input, ``mask`` saying
    which have one and ``sparse`` which of those are ``IndexedSlices``."""
    it, kinds = iter(outputs), iter(sparse)
    grads = []
    for has in mask:
        if not has:
            grads.append(None)
        elif next(kinds):
            grads.append(_gradients.IndexedSlices(next(it), next(it), next(it)))
        else:
            grads.append(next(it))
    return grads


def _cut(traced, added, args, dys, results, extra_forward=()):
    """(forward ops, backward ops, intermediates) of a function traced with its gradient:
    ``traced`` its own ops, ``added`` those the gradient made, ``args`` the placeholders of
    its inputs, ``dys`` those of its outputs' gradients."""
    forward = _forward_ops(traced, added, args | dys, extra_forward)
    in_forward = set(forward)
    backward = [op for op in added if op not in in_forward and op not in args
                and op not in dys and op.type != "Placeholder"]
    intermediates = []
    for t in [t for op in backward for t in op.inputs] + list(results):
        if (t.op in in_forward or t.op in args) and t not in intermediates:
            intermediates.append(t)
    return forward, backward, intermediates


def _escape_branch_values(fg, values, backward, results):
    """Make each of ``values`` (forward values inside cond branches that the backward reads)
    a value the forward can return, and give the backward, in its place, that value switched
    dead again where it was dead (``_escape``). Returns the forward's new ops, or None where a
    value cannot be escaped (inside a loop, or of a dtype without a zero)."""
    made = []
    with fg.as_default():
        for t in values:
            escaped = _escape(t, made)
            if escaped is None:
                return None
            back, steps = escaped
            for pred, port in steps:
                back = _cf.switch(back, pred)[port]
            for op in backward:
                for k, x in enumerate(op.inputs):
                    if x is t:
                        op.update_input(k, back)
            results[:] = [back if r is t else r for r in results]
    return made


def _escape(t, made):
    """``(out, steps)``: ``out`` a value at the function's top level equal to ``t`` wherever
    ``t`` is alive, and ``steps`` the ``(predicate, port)`` switches, outermost first, that
    make it dead where ``t`` is; the ops made go to ``made``. A value a branch brought in
    (its Switch) escapes as the value outside; any other, at each enclosing cond, merged
    with a zero from the other branch. None where that cannot be done."""
    chain = _cond_chain(t)
    if chain is None:
        return None
    if not chain:
        return t, []
    inner = chain[0]
    if t.op.type == "Switch" and t.op.inputs[1] is inner.pred:
        outside = _escape(t.op.inputs[0], made)
        pred = _escape(inner.pred, made)
        if outside is None or pred is None:
            return None
        return outside[0], outside[1] + [(pred[0], t.value_index)]
    dtype = t.dtype.base_dtype
    if not (dtype.is_floating or dtype.is_integer or dtype.is_complex or dtype is _dt.bool):
        return None
    graph = t.graph
    first = len(graph.get_operations())
    out = t
    for ctx in chain:  # innermost first: out of each branch in turn
        with ctx._in_outer():
            other = _cf.switch(array_ops.zeros([], dtype), ctx.pred)[1 - ctx.branch]
            out = _cf.merge([out, other])[0]
    made += graph.get_operations()[first:]
    steps = []
    for ctx in reversed(chain):
        pred = _escape(ctx.pred, made)  # an inner predicate: its value where it ran
        if pred is None:
            return None
        steps.append((pred[0], ctx.branch))
    return out, steps


def _cond_chain(t):
    """The cond branches ``t`` lies in, innermost first, or None if a loop is among them."""
    chain, ctx = [], t.op.control_flow_context
    while ctx is not None:
        if not isinstance(ctx, _cf.CondContext):
            return None
        chain.append(ctx)
        ctx = ctx.outer_context
    return chain


def _fetchable(t) -> bool:
    """Whether a call's result can be ``t``: a value at the function's top level (a loop's
    exit there included), not one inside a branch or a loop."""
    ctx = t.op.control_flow_context
    return ctx is None or (t.op.type == "Exit" and ctx.outer_context is None)


def _forward_ops(traced, added, stop, extra=()) -> list:
    """The ops of a forward (in graph order): the function's own (``traced``), ``extra``,
    and, of those its gradient ``added``, the ones that run inside the function's loops
    (saving values for the gradient, counting iterations), with what they read."""
    contexts = {op.control_flow_context for op in traced} - {None}
    wanted = list(traced) + list(extra) + [op for op in added
                                           if op.control_flow_context in contexts]
    keep = set()
    stack = list(wanted)
    while stack:
        op = stack.pop()
        if op in keep or op in stop:
            continue
        keep.add(op)
        stack.extend(t.op for t in op.inputs)
        stack.extend(op.control_inputs)
    return [op for op in traced + added if op in keep]


def _topological(ops) -> list:
    """``ops`` with each after the ops among them it reads (graph order otherwise; a loop's
    back edge, ``NextIteration`` into ``Merge``, does not count): the backward's switches,
    made after the ops that now read them, move ahead of those."""
    members = set(ops)
    done, order = set(), []
    for root in ops:
        stack = [(root, False)]
        while stack:
            op, expanded = stack.pop()
            if op in done:
                continue
            if expanded:
                done.add(op)
                order.append(op)
                continue
            stack.append((op, True))
            before = [t.op for t in op.inputs] + list(op.control_inputs)
            for dep in reversed(before):
                if dep in members and dep not in done and dep.type != "NextIteration":
                    stack.append((dep, False))
    return order


def _function_def(name, ops, inputs, outputs) -> call_op.FunctionDef:
    """A function body of ``ops`` fed ``inputs`` (tensors of any op outside it) returning
    ``outputs``; control edges from outside it are dropped (what they waited for ran in the
    call before)."""
    own = {op.name for op in ops}
    node_defs = []
    for op in _topological(ops):
        nd = Node.of_op(op, "").to_node_def()
        nd.input = [i for i in nd.input if not (i.startswith("^") and i[1:] not in own)]
        node_defs.append(nd)
    return call_op.FunctionDef(name, GraphDef(node_defs), [t.name for t in inputs],
                               [t.name for t in outputs],
                               [t.dtype.base_dtype for t in outputs],
                               [t.shape for t in outputs])


def _conformed_to(spec, value, name: str):
    """``value`` shaped as the signature entry ``spec`` (a spec or a structure of them),
    each Python number, list or array converted to its spec's dtype."""
    if isinstance(spec, TensorSpec):
        if _is_tensor_arg(value):
            if isinstance(value, (np.ndarray, np.generic)):
                return _as_input(np.asarray(value, spec.dtype.base_dtype.as_numpy_dtype))
            return value
        try:
            return _ops.convert_to_tensor(value, dtype=spec.dtype.base_dtype)
        except (TypeError, ValueError) as e:
            raise TypeError(f"{name}(): {value!r} does not convert to the input_signature's "
                            f"{spec}: {e}") from None
    if isinstance(spec, dict) and isinstance(value, dict) and set(spec) == set(value):
        return type(value)((k, _conformed_to(spec[k], value[k], name)) for k in value)
    if isinstance(spec, (list, tuple)) and isinstance(value, (list, tuple)) and \
            len(spec) == len(value):
        parts = [_conformed_to(s, v, name) for s, v in zip(spec, value)]
        return type(value)(*parts) if hasattr(value, "_fields") else type(value)(parts)
    raise ValueError(f"{name}(): the argument {value!r} does not match the input_signature's "
                     f"structure {spec!r}")


def _spec_text(value) -> str:
    """A spec (or a structure of them, or a Python value) as TF prints it in signatures."""
    if isinstance(value, TensorSpec):
        dims = value.shape.as_tuple()
        shape = "None" if dims is None else repr(tuple(dims))
        return f"TensorSpec(shape={shape}, dtype=tf.{value.dtype.name}, name={value.name!r})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {_spec_text(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        inner = ", ".join(_spec_text(v) for v in value)
        if hasattr(value, "_fields"):
            return f"{type(value).__name__}({inner})"
        return f"[{inner}]" if isinstance(value, list) else \
            f"({inner}{',' if len(value) == 1 else ''})"
    return f"Literal[{value!r}]"


def _same_value(a, b) -> bool:
    """Python arguments equal as a trace's signature compares them (type and value)."""
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:  # noqa: BLE001 - values that do not compare are not the same
        return a is b


def _float(t) -> bool:
    dt = t.dtype.base_dtype
    return dt.is_floating or dt.is_complex


def _is_tensor_arg(x) -> bool:
    """An argument that enters the function as tensors: a tensor or an array, or a composite
    (a dataset, an eager iterator: its variant or handle)."""
    return isinstance(x, (_ops.Tensor, np.ndarray, np.generic, CompositeArgument, TensorSpec))


def _flat_inputs(flat_values) -> list:
    """The tensors the arguments ``flat_values`` (flattened) pass, in placeholder order."""
    out = []
    for v in flat_values:
        if isinstance(v, CompositeArgument):
            out += v._flat_tensors()
        elif _is_tensor_arg(v):
            out.append(_as_input(v))
    return out


def _as_input(x):
    if isinstance(x, _ops.Tensor):
        return x
    g = _ops.get_default_graph()
    if isinstance(x, np.ndarray) and g.executes_eagerly:
        return g.from_numpy(x)
    if isinstance(x, np.generic):
        x = np.asarray(x)
        return g.from_numpy(x) if g.executes_eagerly else _ops.convert_to_tensor(x)
    return _ops.convert_to_tensor(x)


# --- the signature of a call --------------------------------------------------------------------
def _key(value):
    """What a value contributes to the signature a trace is cached under (TF's rules)."""
    if type(value) is EagerTensor:
        return ("tensor", value.dtype, np.shape(value.value_in_memory()))
    if isinstance(value, TensorSpec):  # get_concrete_function's, a relaxed trace's
        return ("tensor", value.dtype.base_dtype, value.shape.as_tuple())
    if isinstance(value, _ops.Tensor):
        return ("tensor", value.dtype.base_dtype, value.shape.as_tuple())
    if isinstance(value, (np.ndarray, np.generic)):  # a NumPy scalar too (TF's rule)
        return ("tensor", _dt.as_dtype(value.dtype), np.shape(value))
    if isinstance(value, CompositeArgument):  # by what it holds, not by identity (TF's)
        return ("composite", value._trace_key())
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_key(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((k, _key(v)) for k, v in value.items())))
    if isinstance(value, (int, float, str, bool, bytes, type(None))):
        return ("python", type(value).__name__, value)
    try:
        hash(value)
    except TypeError:
        return ("object", id(value))
    if isinstance(value, _variables.Variable):
        return ("variable", id(value))
    return ("object", id(value))


def _describe(key) -> str:
    kind = key[0]
    if kind == "tensor":
        dims = "?" if key[2] is None else ", ".join("?" if d is None else str(d)
                                                      for d in key[2])
        return f"{key[1].name}[{dims}]"
    if kind == "python":
        return f"{key[2]!r}"
    if kind in ("list", "tuple"):
        inner = ", ".join(_describe(k) for k in key[1])
        return f"[{inner}]" if kind == "list" else f"({inner})"
    if kind == "dict":
        return "{" + ", ".join(f"{k!r}: {_describe(v)}" for k, v in key[1]) + "}"
    if kind == "composite":
        return f"{key[1][0]} of {', '.join(dt.name for dt in key[1][2])}"
    if isinstance(key[1], tuple):  # a named tuple (its class's name) and its fields
        return f"{kind}({', '.join(_describe(k) for k in key[1])})"
    return f"<{kind} {key[1]:#x}>"


def _why(new, traced, names) -> str:
    """Why a call with signature ``new`` was traced, given the signatures traced before."""
    if not traced:
        return "first call"
    best = None
    for old in traced:
        if old[0] != new[0]:
            reason = "called in another graph" if new[0] else "called eagerly"
            diffs = [reason]
        else:
            diffs = []
            for name, a, b in zip(names, old[1], new[1]):
                if a != b:
                    what = "value" if b[0] == "python" else "dtype/shape" \
                        if b[0] == "tensor" else "argument"
                    diffs.append(f"new {what} for {name}: {_describe(b)} "
                                 f"(traced with {_describe(a)})")
            if len(old[1]) != len(new[1]):
                diffs.append("a different number of arguments")
        if best is None or len(diffs) < len(best):
            best = diffs
    return "; ".join(best) if best else "retraced"


# --- general signatures (TF's subtyping of traces) ------------------------------------------------
def _relax(a, b):
    """The most specific key both ``a`` and ``b`` fit (a tensor's differing dimensions as
    None, an unknown rank where ranks differ), or None where they differ otherwise."""
    if a == b:
        return a
    if a[0] != b[0]:
        return None
    if a[0] == "tensor":
        if a[1] != b[1]:
            return None
        if a[2] is None or b[2] is None or len(a[2]) != len(b[2]):
            return ("tensor", a[1], None)
        return ("tensor", a[1], tuple(x if x == y else None for x, y in zip(a[2], b[2])))
    if a[0] in ("list", "tuple") and len(a[1]) == len(b[1]):
        parts = [_relax(x, y) for x, y in zip(a[1], b[1])]
        return None if None in parts else (a[0], tuple(parts))
    if a[0] == "dict" and [k for k, _ in a[1]] == [k for k, _ in b[1]]:
        parts = [_relax(x, y) for (_, x), (_, y) in zip(a[1], b[1])]
        return None if None in parts else ("dict", tuple(
            (k, p) for (k, _), p in zip(a[1], parts)))
    return None


def _relaxed(key, traced):
    """``key`` relaxed against the first earlier signature of the same graph that it can be
    (None where none can)."""
    for old in traced:
        if old[0] == key[0] and len(old[1]) == len(key[1]):
            parts = [_relax(a, b) for a, b in zip(old[1], key[1])]
            if None not in parts:
                return key[0], tuple(parts)
    return None


def _fits(general, key) -> bool:
    """Whether a call of signature ``key`` can run a trace of signature ``general``."""
    if general == key:
        return True
    if general[0] != key[0]:
        return False
    if general[0] == "tensor":
        g, k = general[2], key[2]
        return general[1] == key[1] and (g is None or (
            k is not None and len(g) == len(k) and all(a is None or a == b
                                                       for a, b in zip(g, k))))
    if general[0] in ("list", "tuple", "dict") and len(general[1]) == len(key[1]):
        if general[0] == "dict":
            return all(ka == kb and _fits(a, b)
                       for (ka, a), (kb, b) in zip(general[1], key[1]))
        return all(_fits(a, b) for a, b in zip(general[1], key[1]))
    return False


def _unknowns(key) -> int:
    """How general a key is: its None dimensions, an unknown rank counting as many."""
    if key[0] == "tensor":
        return 64 if key[2] is None else sum(d is None for d in key[2])
    if key[0] in ("list", "tuple"):
        return sum(_unknowns(k) for k in key[1])
    if key[0] == "dict":
        return sum(_unknowns(k) for _, k in key[1])
    return 0


def _is_general(key) -> bool:
    return any(_unknowns(k) for k in key[1])


def _most_specific(key, general: list):
    """Of the traces with None dimensions, the most specific one a call of ``key`` fits."""
    fitting = [(sum(_unknowns(p) for p in k[1]), i, c)
               for i, (k, c) in enumerate(general)
               if k[0] == key[0] and len(k[1]) == len(key[1])
               and all(_fits(a, b) for a, b in zip(k[1], key[1]))]
    return min(fitting)[2] if fitting else None


def _as_specs(values, keys):
    """``values`` with each tensor replaced by a ``TensorSpec`` of its key's (relaxed) shape."""
    def one(v, k):
        if k[0] == "tensor":
            return TensorSpec(k[2], k[1])
        if k[0] in ("list", "tuple") and isinstance(v, (list, tuple)):
            return type(v)(one(x, kx) for x, kx in zip(v, k[1]))
        if k[0] == "dict" and isinstance(v, dict):
            ks = dict(k[1])
            return {name: one(x, ks[name]) for name, x in v.items()}
        return v

    return [one(v, k) for v, k in zip(values, keys)]


# ``tf.config.run_functions_eagerly(True)``: a call made eagerly runs the Python function as
# written (no trace, no AutoGraph), for debugging; calls while a graph is built still trace.
_RUN_EAGERLY = [False]


def run_functions_eagerly(run_eagerly: bool) -> None:
    _RUN_EAGERLY[0] = bool(run_eagerly)


def functions_run_eagerly() -> bool:
    return _RUN_EAGERLY[0]


class Function:
    """What ``tf.function`` returns (see the module docstring)."""

    def __init__(self, python_function, input_signature=None, autograph: bool = True,
                 name: str | None = None, reduce_retracing: bool = False):
        if not callable(python_function):
            raise TypeError(f"tf.function needs a callable, not {python_function!r}")
        self._python_function = python_function
        self._input_signature = None if input_signature is None else \
            [s if isinstance(s, TensorSpec) else TensorSpec(*s) for s in
             nest.flatten(input_signature)]
        self._signature_structure = input_signature
        self._pinned_key = None if self._input_signature is None else tuple(
            ("spec", s.dtype, s.shape.as_tuple()) for s in self._input_signature)
        self._compatible: set = set()  # (spec, argument key) pairs checked already
        self._autograph = autograph
        self._name = name or getattr(python_function, "__name__", "function")
        self._reduce_retracing = bool(reduce_retracing)
        self._cache: dict = {}  # signature -> the trace its calls run
        self._traced_keys: list = []  # the signatures traced, oldest first
        self._general: list = []  # (signature, trace) of traces with None dimensions
        self._lock = threading.RLock()
        self._converted = None
        self._per_instance = False  # a method's traces for one instance (``__get__``)
        self._instance = None  # that instance
        self._created_variables: list | None = None  # None: no trace yet
        self._initialized_in_call = False  # a variable's initial value reads the arguments
        self._initializer = None  # (signature, the trace the first call runs) where it does
        self.traces: list = []  # (signature description, reason) per trace, oldest first
        functools.update_wrapper(self, python_function)
        try:
            self._sig = inspect.signature(python_function)
        except (TypeError, ValueError):
            self._sig = None
        # Positional parameters only, none with a default: a call with that many positional
        # arguments binds them in order (the common case, kept cheap).
        self._simple = None
        if self._sig is not None and all(
                p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD and p.default is p.empty
                for p in self._sig.parameters.values()):
            self._simple = list(self._sig.parameters)

    @property
    def python_function(self):
        return self._python_function

    @property
    def input_signature(self):
        sig = self._signature_structure
        return tuple(sig) if isinstance(sig, list) else sig

    def __get__(self, instance, owner):
        """A ``tf.function`` on a method: one traced function per instance, kept in the
        instance's ``__dict__`` (a cycle the collector frees with the instance) and bound to
        it alone: a copy of the instance, whose ``__dict__`` came from the original, gets its
        own, and ``deepcopy`` copies none (``__deepcopy__``). An instance without a
        ``__dict__`` (``__slots__``) is passed as the first argument instead: one trace per
        instance."""
        if instance is None:
            return self
        state = getattr(instance, "__dict__", None)
        if state is None:
            return functools.partial(self.__call__, instance)
        key = f"__dflab_function_{id(self)}"
        bound = state.get(key)
        if bound is None or bound._instance is not instance:
            # The traces hold the instance weakly (the function library keeps them); the
            # bound function holds it, and the instance the bound function.
            bound = Function(_WeakMethod(self._python_function, instance),
                             self._signature_structure, self._autograph, self._name,
                             self._reduce_retracing)
            bound._per_instance, bound._instance = True, instance
            state[key] = bound
        return bound

    def __deepcopy__(self, memo):
        # A method's per-instance traces are made again for a copy of the instance (None in
        # the copy's __dict__); a tf.function held elsewhere is shared, as its Python is.
        return None if self._per_instance else self

    def experimental_get_tracing_count(self) -> int:
        return len(self.traces)

    def _canonical(self, args, kwargs):
        simple = self._simple
        if simple is not None and not kwargs and len(args) == len(simple):
            return simple, args
        if self._sig is not None:
            try:
                bound = self._sig.bind(*args, **kwargs)
            except TypeError as e:
                raise TypeError(f"{self._name}(): {e}") from None
            bound.apply_defaults()
            return list(bound.arguments.keys()), list(bound.arguments.values())
        return [f"arg{i}" for i in range(len(args))], list(args)

    def _conform(self, names, values) -> list:
        """``values`` of a call of a function with an ``input_signature``: the signature's
        arguments with Python numbers, lists and arrays converted to its specs' dtypes; the
        parameters after them at their defaults (a signature fixes them, as TF's)."""
        sig = self._signature_structure
        if len(values) < len(sig):
            raise TypeError(f"{self._name}(): the input_signature has {len(sig)} arguments, "
                            f"the call passes {len(values)}")
        out = list(values)
        for i, spec in enumerate(sig):
            out[i] = _conformed_to(spec, values[i], self._name)
        params = self._sig.parameters if self._sig is not None else {}
        for name, v in zip(names[len(sig):], values[len(sig):]):
            p = params.get(name)
            if p is None or p.kind is inspect.Parameter.VAR_POSITIONAL and v == () or \
                    p.kind is inspect.Parameter.VAR_KEYWORD and v == {}:
                continue
            if p.default is inspect.Parameter.empty or not (
                    v is p.default or _same_value(v, p.default)):
                raise TypeError(f"{self._name}(): {name}={v!r} is outside the "
                                f"input_signature, which fixes it to its default "
                                f"({'none' if p.default is p.empty else repr(p.default)})")
        return out

    def _signature(self, names, values):
        g = _ops.get_default_graph()
        graph_key = None if g.executes_eagerly else id(g)
        if self._input_signature is not None:
            flat = [v for v in nest.flatten(values) if _is_tensor_arg(v)]
            if len(flat) != len(self._input_signature):
                raise ValueError(f"{self._name}: the input_signature has "
                                 f"{len(self._input_signature)} tensors, the call passes "
                                 f"{len(flat)}")
            for spec, v in zip(self._input_signature, flat):
                seen = (id(spec), _key(v))
                if seen not in self._compatible:
                    if not spec.is_compatible_with(v):
                        raise ValueError(f"Python inputs incompatible with input_signature: "
                                         f"{_describe(_key(v))} is not compatible with "
                                         f"{spec}")
                    self._compatible.add(seen)
            return (graph_key, self._pinned_key), True
        return (graph_key, tuple(_key(v) for v in values)), False

    def __call__(self, *args, **kwargs):
        if _RUN_EAGERLY[0] and _ops.executing_eagerly():  # ``tf.config.run_functions_eagerly``
            return self._python_function(*args, **kwargs)
        names, values = self._canonical(args, kwargs)
        if self._input_signature is not None:
            values = self._conform(names, values)
        key, pinned = self._signature(names, values)
        concrete = self._cache.get(key)
        if concrete is None:
            with self._lock:
                concrete = self._cache.get(key) or self._trace(names, values, key, pinned)
        if self._initializer is not None:
            concrete = self._initializing(key, concrete)
        if all(isinstance(v, _ops.Tensor) for v in values):
            return concrete.call_flat(values)
        return concrete.call_flat(_flat_inputs(nest.flatten(values)))

    def _initializing(self, key, concrete):
        """The trace that assigns the variables whose initial values read the arguments, for
        the first call of its signature; ``concrete`` for every other call."""
        with self._lock:
            init = self._initializer
            if init is None or init[0] != key:
                return concrete
            self._initializer = None
            return init[1]

    def get_concrete_function(self, *args, **kwargs) -> ConcreteFunction:
        """The trace for these arguments (``TensorSpec``s stand for tensors), traced now if
        it is new; with an ``input_signature`` and no arguments, the signature's."""
        if not args and not kwargs and self._signature_structure is not None:
            args = tuple(self._signature_structure)
        names, values = self._canonical(args, kwargs)
        if self._input_signature is not None:
            values = self._conform(names, values)
        key, pinned = self._signature(names, values)
        with self._lock:
            concrete = self._cache.get(key) or self._trace(names, values, key, pinned)
        if self._initializer is not None:
            # Its variables are assigned by the first call's trace: a concrete function taken
            # now would run without them (TF refuses too: UnliftableError).
            raise ValueError(
                f"{self._name}: a variable it makes takes its initial value from the "
                "function's arguments, which the first call assigns; call the function once "
                "before taking a concrete function of it.")
        return concrete

    def pretty_printed_concrete_signatures(self, verbose: bool = True) -> str:
        """Each trace's parameters, outputs and captures, in TF's layout."""
        return "\n\n".join(c.pretty_printed_concrete_signature()
                             for c in self.concrete_functions())

    def concrete_functions(self) -> list:
        return list({id(c): c for c in self._cache.values()}.values())

    # --- tracing -------------------------------------------------------------------------
    def _callable(self):
        if not self._autograph:
            return self._python_function
        if self._converted is None:
            from dflab.autograph import convert

            fn = self._python_function
            self._converted = fn.converted(convert) if isinstance(fn, _WeakMethod) else \
                convert(fn)
        return self._converted

    def _trace(self, names, values, key, pinned) -> ConcreteFunction:
        """The trace a call of signature ``key`` runs: one whose signature is more general
        (``None`` dimensions) where there is one, else a new trace, of a signature relaxed
        against an earlier trace's where ``reduce_retracing`` asks (TF's rules)."""
        if not pinned:
            general = _most_specific(key, self._general)
            if general is not None:
                self._cache[key] = general  # this signature's lookups find it at once
                return general
        exact = key
        if self._reduce_retracing and not pinned:
            relaxed = _relaxed(key, self._traced_keys)
            if relaxed is not None:
                values = _as_specs(values, relaxed[1])
                key = relaxed
        concrete = self._trace_new(names, values, key, pinned)
        self._cache[exact] = concrete
        if self._initializer is not None and self._initializer[0] == key:
            self._initializer = (exact, self._initializer[1])  # (the call's own signature)
        return concrete

    def _trace_new(self, names, values, key, pinned) -> ConcreteFunction:
        reason = _why(key, self._traced_keys, names)
        first = self._created_variables is None
        concrete = self._trace_once(names, values, key, pinned, reason, allow_variables=first)
        if first and self._created_variables:
            # TF traces again once variables exist: a function that makes variables on every
            # call fails here, one that makes them once reuses them.
            initializing = concrete
            concrete = self._trace_once(names, values, key, pinned, reason,
                                        allow_variables=False)
            if self._initialized_in_call:
                # A variable's initial value reads the arguments: the first trace assigns
                # it, so the first call runs that trace (TF's conditional initialization).
                self._initializer = (key, initializing)
        self._cache[key] = concrete
        self._traced_keys.append(key)
        if not pinned and _is_general(key):
            self._general.append((key, concrete))
        self.traces.append((", ".join(f"{n}={_describe(k)}" for n, k in zip(names, key[1]))
                            if not pinned else "input_signature", reason))
        return concrete

    def _trace_once(self, names, values, key, pinned, reason, allow_variables):
        fid = next(_function_ids)
        fg = FuncGraph(f"inference_{_safe(self._name)}_{fid}", _ops.get_default_graph())
        specs = iter(self._input_signature or [])
        args = []

        def make(v, name):
            """The placeholder of an argument's tensor, named as its parameter (TF's)."""
            if not _is_tensor_arg(v):
                return v
            if isinstance(v, CompositeArgument):
                phs = [fg.placeholder(dtype, shape, name)
                       for dtype, shape in v._placeholder_specs()]
                args.extend(phs)
                return v._over_tensors(phs)
            if pinned:
                spec = next(specs)
                dtype, shape = spec.dtype.base_dtype, spec.shape
                name = _node_name(spec.name) if spec.name else name
            elif isinstance(v, TensorSpec):
                dtype, shape = v.dtype.base_dtype, v.shape
            else:
                dtype = v.dtype.base_dtype if isinstance(v, _ops.Tensor) else \
                    _dt.as_dtype(v.dtype)
                shape = v.shape if isinstance(v, _ops.Tensor) else TensorShape(v.shape)
            ph = fg.placeholder(dtype, shape, name)
            args.append(ph)
            return ph

        traced_values = [nest.map_structure(lambda v, n=n: make(v, _node_name(n)), value)
                         for n, value in zip(names, values)]
        fg.inputs = list(args)
        fn = self._callable()
        creator = _VariableLifter(self, fg, allow_variables)

        with fg.as_default(), _variables.variable_creator_scope(creator), \
                _ReadVariables() as read, _tracing(self):
            out = _call_with(fn, names, traced_values, self._sig)
            structured = nest.map_structure(
                lambda t: None if t is None else _output_tensor(t, fg), out)
        concrete = ConcreteFunction(fg, args, structured, True, reason, key)
        concrete._read_variables = read.refs
        concrete._traced_inputs = (list(names), traced_values)
        concrete._spec_names = None if self._input_signature is None else [
            spec.name for spec in self._input_signature]
        concrete._parameter_kinds = {} if self._sig is None else {
            n: p.kind for n, p in self._sig.parameters.items()}
        return concrete


class _Tracing(threading.local):
    def __init__(self):
        self.stack: list = []  # the functions being traced on this thread, outermost first


_TRACING = _Tracing()


@contextlib.contextmanager
def _tracing(function):
    _TRACING.stack.append(function)
    try:
        yield
    finally:
        _TRACING.stack.pop()


class _WeakMethod:
    """A method bound to its instance weakly: the traces of a ``tf.function`` method live in
    the function library, which must not keep the instance alive."""

    def __init__(self, fn, instance, ref=None):
        self.fn = fn
        self.ref = ref or weakref.ref(instance)
        functools.update_wrapper(self, fn)
        try:
            params = list(inspect.signature(fn).parameters.values())[1:]
            self.__signature__ = inspect.Signature(params)
        except (TypeError, ValueError):
            pass

    def __call__(self, *args, **kwargs):
        instance = self.ref()
        if instance is None:
            raise ReferenceError(f"{self.fn.__name__}: its instance no longer exists")
        return self.fn(instance, *args, **kwargs)

    def converted(self, convert):
        return _WeakMethod(convert(self.fn), None, self.ref)


class _ReadVariables:
    """The trainable variables a trace reads on its own thread, held weakly: each call of the
    traced function tells recording tapes it reads them, as an eager read would (TF's
    ``FuncGraph.variables`` and ``variable_accessed``); a tape that had not watched them when
    the trace ran would otherwise see no gradient for them."""

    def __init__(self):
        self.refs: list = []
        self._ids: set = set()
        self._thread = threading.get_ident()

    def __call__(self, variable) -> None:
        if threading.get_ident() == self._thread and id(variable) not in self._ids:
            self._ids.add(id(variable))
            self.refs.append(weakref.ref(variable))

    def __enter__(self):
        _rv.add_access_listener(self)
        return self

    def __exit__(self, *exc):
        _rv.remove_access_listener(self)
        return False


def _call_with(fn, names, values, sig):
    if sig is None:
        return fn(*values)
    args, kwargs = [], {}
    for name, v in zip(names, values):
        kind = sig.parameters[name].kind
        if kind is inspect.Parameter.VAR_POSITIONAL:
            args.extend(v)
        elif kind is inspect.Parameter.VAR_KEYWORD:
            kwargs.update(v)
        elif kind is inspect.Parameter.KEYWORD_ONLY:
            kwargs[name] = v
        else:
            args.append(v)
    return fn(*args, **kwargs)


def _output_tensor(t, fg):
    if isinstance(t, _ops.Operation):
        return None  # an op runs anyway: every op of the body runs on each call
    if _rv.is_resource_variable(t):
        t = t.value()
    t = _ops.convert_to_tensor(t)
    if t.graph is not fg:
        t = fg.capture(t)
    if t.op.type == "Placeholder":
        # A function returning its argument or a capture: through an identity, so the result
        # is a fresh value of the body.
        t = array_ops.identity(t)
    return t


_NODE_NAME = re.compile(r"^[A-Za-z0-9.][A-Za-z0-9_.\-/>]*$")


def _node_name(name: str) -> str:
    """A parameter's name as its placeholder's, where it is a valid node name (``_x``, ``Ω``
    are not: TF's fallback, ``Placeholder``)."""
    return name if _NODE_NAME.match(name) else "Placeholder"


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c == "_" else "_" for c in name)


class _VariableLifter:
    """The variable creator of a trace: variables are made once, outside the function graph,
    with their initial values computed as they are made (TF's once-only rule); a value that
    reads the function's arguments is assigned by the trace itself, eagerly (TF's
    conditional initialization: the first call runs that trace)."""

    def __init__(self, function: Function, fg: FuncGraph, allowed: bool):
        self.function = function
        self.fg = fg
        self.allowed = allowed

    def _placeholder_value(self, init):
        """What a variable whose initial value reads the arguments holds until the first
        call assigns it: zeros of its static shape."""
        if not _ctx.executing_eagerly_outside_functions() or not init.shape.is_fully_defined():
            raise ValueError(
                "The initial value of a variable created inside tf.function depends on the "
                "function's arguments" + ("" if init.shape.is_fully_defined() else
                                          f" and its shape {init.shape} is not fully known") +
                "; pass a value or a callable that does not read them.")
        return np.zeros(init.shape.as_list(), init.dtype.base_dtype.as_numpy_dtype)

    def __call__(self, next_creator, **kwargs):
        if not self.allowed:
            raise ValueError(
                "tf.function only supports singleton tf.Variables created on the first call. "
                "Make sure the tf.Variable is only created once or created outside "
                "tf.function.")
        init = kwargs.get("initial_value")
        from_arguments = isinstance(init, _ops.Tensor) and init.graph is self.fg and \
            _reads_arguments(init, self.fg)
        if from_arguments:
            kwargs["initial_value"] = self._placeholder_value(init)
        elif isinstance(init, _ops.Tensor) and init.graph is self.fg:
            kwargs["initial_value"] = _lift_value(init, self.fg)
        with _ctx.init_scope():
            v = next_creator(**kwargs)
        if from_arguments:
            # Assigned where it is made, in this trace: the first call runs this trace, and
            # the first call of each function whose trace calls this one runs that trace.
            v.assign(init)
            for f in _TRACING.stack:
                f._initialized_in_call = True
        if self.function._created_variables is None:
            self.function._created_variables = []
        self.function._created_variables.append(v)
        self.fg.variables.append(v)
        return v


def _reads_arguments(t, fg) -> bool:
    return any(ph.op.type == "Placeholder" and any(ph is a for a in fg.inputs)
               for ph in [t, *_ancestors(t)])


def _lift_value(t, fg):
    """The value of ``t``, built in the function graph from constants and captures only: the
    initial value of a variable made inside a trace."""
    if _reads_arguments(t, fg):
        raise ValueError("The initial value of a variable created inside tf.function depends "
                         "on the function's arguments; pass a value or a callable that does "
                         "not read them.")
    from dflab.runtime.master import Master

    ctx = _ctx.eager_context()
    master = Master(fg, ctx.config, ctx.worker)
    feeds = [ph for _, ph in fg.captures.values()]
    plan = master.get_plan([t], [], feeds)
    values = [outer.value_in_memory() if getattr(outer, "is_eager", False) else None
              for outer, _ in fg.captures.values()]
    if any(v is None for v in values):
        raise ValueError("The initial value of a variable created inside tf.function reads "
                         "a graph tensor; give it a value or a callable.")
    out = ctx.worker.run_partition(plan.parts[0], values, 0) if not plan.partitioned else \
        ctx.worker.run_step(plan.parts, values, 0).values
    return np.asarray(plan.fetched_values(out, values)[0] if plan.partitioned else out[0])


def _ancestors(t) -> list:
    seen, stack, out = set(), [t.op], []
    while stack:
        op = stack.pop()
        if id(op) in seen:
            continue
        seen.add(id(op))
        for x in op.inputs:
            out.append(x)
            stack.append(x.op)
    return out


# --- the decorators ----------------------------------------------------------------------------
def function(func=None, input_signature=None, autograph: bool = True, jit_compile=None,
             reduce_retracing: bool = False, experimental_relax_shapes=None,
             experimental_compile=None, name=None, **experimental):
    """``tf.function``: trace ``func`` into graphs, one per input signature (see the module
    docstring). Usable as ``@tf.function`` or ``@tf.function(input_signature=...)``.

    ``reduce_retracing`` (TF 2.0's ``experimental_relax_shapes``): a call whose tensors'
    shapes differ from a trace's traces once more with the differing dimensions unknown, and
    later calls of any such shape run that trace. ``jit_compile`` (``experimental_compile``)
    asks TF for XLA; dflab has no XLA, and runs the same graph on its executor, which fuses
    elementwise chains where the session would (the results are the same either way).
    TF's other ``experimental_*`` options are accepted and change nothing here."""
    relax = bool(reduce_retracing or experimental_relax_shapes)
    unknown = set(experimental) - _EXPERIMENTAL_OPTIONS
    if unknown:
        raise TypeError(f"function() got an unexpected keyword argument {sorted(unknown)[0]!r}")
    if func is None:
        return lambda f: Function(f, input_signature, autograph, name, relax)
    return Function(func, input_signature, autograph, name, relax)


_EXPERIMENTAL_OPTIONS = {"experimental_implements", "experimental_autograph_options",
                         "experimental_attributes", "experimental_follow_type_hints"}


def defun(func=None, input_signature=None, autograph: bool = False):
    """``tf.contrib.eager.defun``: TF 1.x's traced functions, without AutoGraph by default."""
    if func is None:
        return lambda f: Function(f, input_signature, autograph)
    return Function(func, input_signature, autograph)

