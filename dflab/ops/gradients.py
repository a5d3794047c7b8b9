"""Symbolic differentiation: ``gradients(ys, xs)`` adds the backward graph to the graph.

Reverse-mode, as TF1 does it: find the ops on a path from ``xs`` to ``ys``; count, for each,
how many of its consumers on such paths will send it a gradient; walk from ``ys`` back in
dependency order, summing each op's incoming gradients (``add_n``, or a concatenated
``IndexedSlices`` when all of them are sparse), calling the op type's registered gradient
function inside a ``gradients/<op>_grad`` name scope. Integer and bool tensors carry no gradient.
"""

from __future__ import annotations

import collections

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.registry import GRADIENT_OUTPUTS, op_gradient_function
from dflab.ops import array_ops, math_ops
from dflab.ops.op_util import handle_source, variable_dtype_shape


class IndexedSlicesValue(collections.namedtuple("IndexedSlicesValue",
                                                 ["values", "indices", "dense_shape"])):
    """What ``Session.run`` returns for a fetched ``IndexedSlices`` (NumPy arrays)."""


class IndexedSlices:
    """A sparse gradient: ``values[i]`` is the gradient of row ``indices[i]`` of a tensor."""

    def __init__(self, values, indices, dense_shape=None):
        self.values = values
        self.indices = indices
        self.dense_shape = dense_shape

    @property
    def dtype(self):
        return self.values.dtype

    @property
    def graph(self):
        return self.values.graph

    @property
    def name(self):
        return self.values.name

    @property
    def op(self):
        return self.values.op

    @property
    def shape(self):
        if self.dense_shape is not None:
            from dflab.framework.constant_op import constant_value_as_shape

            return constant_value_as_shape(self.dense_shape)
        return self.values.shape

    def _as_tensor(self):
        return densify(self)

    def __repr__(self):
        return (f"IndexedSlices(indices={self.indices}, values={self.values}, "
                f"dense_shape={self.dense_shape})")


def convert_to_tensor_or_indexed_slices(value, dtype=None, name=None):
    """``value`` itself when it is an ``IndexedSlices`` (of a dtype compatible with
    ``dtype``), else ``value`` converted to a ``Tensor``, as TF's."""
    if isinstance(value, IndexedSlices):
        if dtype is not None and not _dt.as_dtype(dtype).is_compatible_with(value.dtype):
            raise ValueError(f"Incompatible tensor conversion requested to `dtype` "
                             f"{_dt.as_dtype(dtype).name} for `value` ({value}) with dtype "
                             f"{value.dtype.name}.")
        return value
    return _ops.convert_to_tensor(value, dtype=dtype, name=name)


def densify(s: IndexedSlices):
    """Dense tensor of an IndexedSlices (rows with repeated indices are summed)."""
    if s.dense_shape is None:
        raise ValueError("Cannot densify IndexedSlices without dense_shape")
    return math_ops.unsorted_segment_sum(s.values, s.indices, s.dense_shape[0])


def as_dense(g):
    """``g`` itself, or the dense tensor of an ``IndexedSlices``."""
    return densify(g) if isinstance(g, IndexedSlices) else g


class AggregationMethod:
    """How ``tf.gradients`` sums the gradients reaching one tensor, as TF's: ``ADD_N`` (the
    default) in one ``AddN``; the experimental methods as a chain of two-input sums, under
    ``<op>_gradient_sum``, which frees each term as soon as it is added."""

    ADD_N = 0
    DEFAULT = ADD_N
    EXPERIMENTAL_TREE = 1
    EXPERIMENTAL_ACCUMULATE_N = 2


_AGGREGATION_METHODS = [AggregationMethod.ADD_N, AggregationMethod.EXPERIMENTAL_TREE,
                        AggregationMethod.EXPERIMENTAL_ACCUMULATE_N]


def _aggregate(grads, name, method=AggregationMethod.ADD_N, op=None):
    grads = [g for g in grads if g is not None]
    if not grads:
        return None
    if len(grads) == 1:
        return grads[0]
    if all(isinstance(g, IndexedSlices) for g in grads):
        from dflab.ops.array_ops import concat

        return IndexedSlices(concat([g.values for g in grads], 0),
                             concat([g.indices for g in grads], 0), grads[0].dense_shape)
    dense = [as_dense(g) for g in grads]
    if method == AggregationMethod.ADD_N or op is None:
        return math_ops.add_n(dense, name=name)
    with _ops.name_scope(op.name + "_gradient_sum"):
        total = dense[0]
        for g in dense[1:]:
            total = math_ops.add_n([total, g])
        return total


def _is_differentiable_dtype(t) -> bool:
    dt = t.dtype.base_dtype
    # A resource variable's gradient flows from its reads back to its handle (other resource
    # handles, stacks and TensorArrays, carry none).
    return dt.is_floating or dt.is_complex or (dt is _dt.resource
                                               and handle_source(t) is not None)


def _gradient_target(x):
    """Where the gradient for ``x`` arrives: a reference variable's snapshot ``v/read``, a
    resource variable's handle (every read of it contributes), or the tensor itself."""
    if getattr(x, "_is_resource", False):
        handle = x.handle
        graph = _ops.get_default_graph()
        if hasattr(graph, "capture") and (handle.is_eager or handle.graph is not graph):
            # A traced function reads an outside variable through its own stand-in.
            return graph.capture(handle)
        return handle
    if hasattr(x, "_as_tensor"):
        return x._as_tensor()
    return _ops.convert_to_tensor(x)


class _LoopNode:
    """A while loop seen from outside, as one node of the backward walk: its inputs are what
    it reads from outside, its outputs its ``Exit`` tensors."""

    def __init__(self, ctx):
        from dflab.ops.control_flow_grad import loop_inputs

        self.ctx = ctx
        self.name = ctx.name.rstrip("/")
        self.inputs = loop_inputs(ctx)
        self.outputs = list(ctx.exits)

    def grad(self, out_grads):
        from dflab.ops.control_flow_grad import GradWhileContext, while_grad

        if isinstance(self.ctx, GradWhileContext):
            # A backward loop's values are read from its forward loop's saved stacks, which
            # nothing differentiates: refused, as TF 1.x's (its gradient had come out zero).
            raise TypeError(f"Second-order gradient for while loops not supported: the "
                            f"gradient reaches the backward loop '{self.name}' (a gradient "
                            "of a gradient through a tf.while_loop, or a tensor loop in a "
                            "tf.function).")
        return while_grad(self.ctx, out_grads)


class _WalkNodes:
    """The nodes of one backward walk: ``op`` itself, or for a loop's ``Exit`` the loop as one
    ``_LoopNode``, the same object for the whole walk (the walk keys its tables by node).

    Per walk rather than cached on the loop: differentiating a loop adds ops to it (stack
    pushes that read from outside), so the next walk must see the loop's inputs afresh."""

    def __init__(self):
        self._loops: dict[int, _LoopNode] = {}

    def __call__(self, op):
        ctx = op.control_flow_info
        if op.type == "Exit" and ctx is not None and hasattr(ctx, "exits"):
            node = self._loops.get(id(ctx))
            if node is None:
                node = self._loops[id(ctx)] = _LoopNode(ctx)
            return node
        return op


def _between_ops(ys, xs, stop_ops, node_of):
    """Nodes reachable backwards from ys (data edges) that also reach from some x."""
    reach_from_x = set()
    stack = [x.op for x in xs]
    while stack:
        op = stack.pop()
        if id(op) in reach_from_x:
            continue
        reach_from_x.add(id(op))
        for t in op.outputs:
            stack.extend(t.consumers())
    between = {}
    stack = [y.op for y in ys]
    while stack:
        op = stack.pop()
        node = node_of(op)
        if id(node) in between or id(op) not in reach_from_x:
            continue
        between[id(node)] = node
        if id(op) in stop_ops:
            continue
        stack.extend(t.op for t in node.inputs)
    return between


def gradients(ys, xs, grad_ys=None, name="gradients", colocate_gradients_with_ops=False,
              gate_gradients=False, aggregation_method=None, stop_gradients=None,
              unconnected_gradients="none"):
    """Symbolic partial derivatives of ``sum(ys)`` with respect to each of ``xs``."""
    if _ops.executing_eagerly():
        raise RuntimeError("tf.gradients is not supported when eager execution is enabled. "
                           "Use tf.GradientTape instead.")
    if aggregation_method is None:
        aggregation_method = AggregationMethod.DEFAULT
    if aggregation_method not in _AGGREGATION_METHODS:
        raise ValueError(f"Invalid `aggregation_method` specified {aggregation_method}. "
                         f"Accepted values are {_AGGREGATION_METHODS}.")
    ys = _as_list(ys)
    xs_in = _as_list(xs)
    ys = [_ops.convert_to_tensor(y) for y in ys]
    if grad_ys is None:
        grad_ys = [None] * len(ys)
    else:
        grad_ys = _as_list(grad_ys)
        if len(grad_ys) != len(ys):
            raise ValueError(f"Passed {len(grad_ys)} grad_ys for {len(ys)} ys")
    stop_ops = {id(t.op) for t in _as_list(stop_gradients or [])}
    targets = [_gradient_target(x) for x in xs_in]
    # Gradient ops are no steps of the program: a traced function leaves them unordered (a
    # loop's accumulators, made now, must exist before the loop that pushes into them runs).
    with _ops.get_default_graph().side_effects_unordered(), \
            _ops.name_scope(name, "gradients", ys + targets):
        node_of = _WalkNodes()
        between = _between_ops(ys, targets, stop_ops, node_of)
        # pending[op] = number of data edges from ops in `between` that will send a gradient
        pending = collections.Counter()
        for op in between.values():
            if id(op) in stop_ops:
                continue
            for t in op.inputs:
                if id(node_of(t.op)) in between:
                    pending[id(node_of(t.op))] += 1
        grads: dict[int, list] = {}  # id(tensor) -> list of contributions

        def add_grad(t, g):
            grads.setdefault(id(t), []).append(g)

        for y, gy in zip(ys, grad_ys):
            if gy is None:
                if not _is_differentiable_dtype(y):
                    raise TypeError(f"Gradients of complex or integer tensors need grad_ys: {y}")
                gy = array_ops.ones_like(y, name=f"grad_ys_{len(grads)}")
            else:
                gy = _ops.convert_to_tensor(gy, dtype=y.dtype.base_dtype)
            add_grad(y, gy)
        ready = collections.deque(op for op in _unique(node_of(y.op) for y in ys)
                                  if pending[id(op)] == 0 and id(op) in between)
        visited = set()
        while ready:
            op = ready.popleft()
            if id(op) in visited:
                continue
            visited.add(id(op))
            out_grads = [_aggregate(grads.get(id(t), []), None, aggregation_method, op)
                         for t in op.outputs]
            for t, g in zip(op.outputs, out_grads):
                if g is not None:
                    grads[id(t)] = [g]
            if id(op) not in stop_ops and any(g is not None for g in out_grads) and \
                    any(_is_differentiable_dtype(t) and id(node_of(t.op)) in between
                        for t in op.inputs):
                if isinstance(op, _LoopNode):
                    in_grads = op.grad(out_grads)
                else:
                    in_grads = _call_grad_fn(op, out_grads)
                for t, g in zip(op.inputs, in_grads):
                    if g is None or not _is_differentiable_dtype(t):
                        continue
                    if isinstance(g, _ops.Tensor) and g.shape.is_compatible_with(t.shape):
                        g.set_shape(t.shape)
                    add_grad(t, g)
            if id(op) not in stop_ops:
                for t in op.inputs:
                    node = node_of(t.op)
                    if id(node) in between:
                        pending[id(node)] -= 1
                        if pending[id(node)] == 0:
                            ready.append(node)
        result = []
        for x in targets:
            g = _aggregate(grads.get(id(x), []), None)
            if g is None and unconnected_gradients == "zero":
                g = _zeros_for(x)
            result.append(g)
        return result


def _zeros_for(t):
    """A zero gradient for ``t``; for a variable's handle, zeros of the variable's value (TF's
    rule), made from the handle itself so that it is dead where the handle is (the untaken
    branch of a cond: a Switch's gradient merges a live and a dead one)."""
    if t.dtype.base_dtype is _dt.resource:
        dtype, _ = variable_dtype_shape(t)
        value = _ops.apply_op("ReadVariableOp", [t], {"dtype": dtype}, "ReadVariableOp")
        return array_ops.zeros_like(value.outputs[0])
    return array_ops.zeros_like(t)


def _call_grad_fn(op, out_grads):
    known, fn = op_gradient_function(op)
    if not known:
        raise LookupError(f"No gradient defined for operation '{op.name}' (op type: {op.type})")
    if fn is None:
        return [None] * len(op.inputs)
    filled = []
    carried = op.attrs.get(GRADIENT_OUTPUTS, len(op.outputs))
    for i, (t, g) in enumerate(zip(op.outputs, out_grads)):
        if g is None and i < carried and _is_differentiable_dtype(t):
            g = _zeros_for(t)
        filled.append(g)
    with _ops.name_scope(op.name + "_grad"):
        in_grads = fn(op, *filled)
    if not isinstance(in_grads, (list, tuple)):
        in_grads = [in_grads]
    in_grads = list(in_grads)
    if len(in_grads) != len(op.inputs):
        raise ValueError(f"Gradient function for {op.type} returned {len(in_grads)} gradients, "
                         f"expected {len(op.inputs)}")
    return in_grads


def _as_list(x):
    if isinstance(x, (list, tuple)):
        return list(x)
    return [x]


def _unique(items):
    seen, out = set(), []
    for i in items:
        if id(i) not in seen:
            seen.add(id(i))
            out.append(i)
    return out
