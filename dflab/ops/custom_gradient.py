"""``custom_gradient``, ``recompute_grad`` and ``grad_pass_through``: functions whose gradient
the user writes, built in graph mode as TF 1.x builds them; and ``hessians``, second
derivatives through ``tf.gradients``.

``@custom_gradient`` runs ``f(*args) -> (y, grad_fn)`` and passes ``y``, the arguments and
the variables ``y`` depends on through one ``IdentityN`` op whose gradient is ``grad_fn``:
the op carries a ``_gradient_op_type`` attribute naming a gradient registered for it alone
(what TF's ``gradient_override_map`` sets), so ``tf.gradients`` calls ``grad_fn`` for the
arguments and variables and sends nothing into ``f``'s own ops. Executing eagerly, the eager
layer's implementation (registered with ``register_eager_mode``) records one op on the tapes
whose gradient function is ``grad_fn``, as TF's eager decorator does.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import threading
import types

from dflab.framework import nest
from dflab.framework import ops as _ops
from dflab.framework.registry import RegisterGradient
from dflab.ops import array_ops, variables
from dflab.ops import resource_variable_ops as _rv

_UIDS = itertools.count(1)
_VARIABLE_OP_TYPES = ("VariableV2", "Variable", "VarHandleOp")


def custom_gradient(f=None):
    """Decorator: ``f(*args)`` returns ``(y, grad_fn)``; the gradient of ``y`` with respect
    to ``args`` is ``grad_fn(*dys)``. When ``y`` depends on variables that are not among the
    arguments, ``grad_fn(*dys, variables=None)`` must return ``(arg_grads, var_grads)``. On a
    method, ``self`` is bound, not an argument (TF's)."""
    if f is None:
        return custom_gradient
    return _CustomGradient(f)


class _CustomGradient:
    """``@custom_gradient``'s function: callable, and a descriptor, so that decorating a
    method binds its instance first."""

    def __init__(self, f):
        self._f = f
        functools.update_wrapper(self, f)

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        return _CustomGradient(types.MethodType(self._f, instance))

    def __call__(self, *args, **kwargs):
        if _ops.executing_eagerly():
            return _EAGER_MODE[0](self._f, args, kwargs)
        if kwargs:
            raise ValueError("The custom_gradient decorator currently supports keywords "
                             "arguments only when eager execution is enabled.")
        return _graph_mode(self._f, args)


def register_eager_mode(implementation, recompute) -> None:
    """The eager layer's ``custom_gradient`` (``implementation(f, args, kwargs)``) and
    ``recompute_grad``'s gradient (``recompute(f, args, dresult, variables)``)."""
    _EAGER_MODE[:] = [implementation]
    _EAGER_RECOMPUTE[:] = [recompute]


_EAGER_MODE: list = []
_EAGER_RECOMPUTE: list = []


def _graph_mode(f, args):
    name = f"CustomGradient-{next(_UIDS)}"
    args = nest.map_structure(_ops.convert_to_tensor, list(args))
    read: list = []  # resource variables ``f`` reads on this thread (a traced function's are
    ident = threading.get_ident()  # captured handles, which the walk below cannot name)

    def watch(variable):
        if threading.get_ident() == ident and all(variable is not r for r in read):
            read.append(variable)

    _rv.add_access_listener(watch)
    try:
        result, grad_fn = f(*args)
    finally:
        _rv.remove_access_listener(watch)
    flat_args = nest.flatten(args)
    flat_result = [_ops.convert_to_tensor(t) for t in nest.flatten(result)]
    n_result = len(flat_result)
    used = _dependent_variables(flat_args, flat_result)
    used += [v for v in read if all(v is not u for u in used)]
    used.sort(key=lambda v: v.name)
    if used and not takes_variables(grad_fn):
        raise TypeError("@tf.custom_gradient grad_fn must accept keyword argument "
                        f"'variables', since function uses variables: {used}")

    @RegisterGradient(name)
    def _grad(op, *result_grads):
        return [None] * n_result + user_gradients(grad_fn, result_grads[:n_result], used,
                                                  len(flat_args))

    tensors = flat_result + flat_args + [_ops.convert_to_tensor(v) for v in used]
    op = _ops.apply_op("IdentityN", tensors, {"_gradient_op_type": name})
    outs = list(op.outputs[:n_result])
    for out, t in zip(outs, flat_result):
        out.set_shape(t.shape)
    return nest.pack_sequence_as(result, outs)


def user_gradients(grad_fn, dys, variables, n_args: int) -> list:
    """``grad_fn``'s gradients, flat: the arguments', then the variables' (TF's checks)."""
    if variables:
        arg_grads, var_grads = grad_fn(*dys, variables=variables)
        if len(var_grads) != len(variables):
            raise ValueError("Must return gradient for each variable from @custom_gradient "
                             "grad_fn.")
    else:
        arg_grads, var_grads = grad_fn(*dys), []
    flat = nest.flatten(arg_grads)
    if len(flat) != n_args:
        raise ValueError(f"custom_gradient function expected to return {n_args} gradients, "
                         f"but returned {len(flat)} instead.")
    return flat + list(var_grads)


def takes_variables(fn) -> bool:
    spec = inspect.getfullargspec(fn)
    return "variables" in spec.args or "variables" in spec.kwonlyargs or bool(spec.varkw)


def _dependent_variables(flat_args, flat_result) -> list:
    """The variables whose ops lie on a path into ``flat_result`` that does not pass
    through the arguments, sorted by name (TF's order)."""
    stop = {id(t.op) for t in flat_args}
    seen, stack, var_ops = set(), [t.op for t in flat_result], set()
    while stack:
        op = stack.pop()
        if id(op) in seen or id(op) in stop:
            continue
        seen.add(id(op))
        if op.type in _VARIABLE_OP_TYPES:
            var_ops.add(op.name)
        stack.extend(t.op for t in op.inputs)
    found = {}
    for v in variables.global_variables() + variables.local_variables():
        if v.op.name in var_ops:
            found[v.op.name] = v
    return [found[k] for k in sorted(found)]


def recompute_grad(f):
    """``f`` whose forward values are not kept for its gradient: the gradient runs ``f``
    again on its inputs (after the incoming gradient is ready) and differentiates that."""

    @custom_gradient
    def inner(*args):
        result = f(*args)

        def grad(*dresult, variables=None):
            if _ops.executing_eagerly():  # the recomputation differentiated by a tape
                return _EAGER_RECOMPUTE[0](f, args, dresult, variables)
            # A data dependency on the incoming gradient, so the recomputation waits for it
            # instead of being scheduled with the forward pass.
            with _ops.control_dependencies([dresult[0]]):
                id_args = [array_ops.identity(a) for a in args]
            recomputed = f(*id_args)
            sources = id_args + list(variables or [])
            from dflab.ops.gradients import gradients

            grads = gradients(nest.flatten(recomputed), sources, grad_ys=list(dresult),
                              unconnected_gradients="zero")
            return grads[:len(id_args)], grads[len(id_args):]

        return result, grad

    return functools.wraps(f)(inner)


def grad_pass_through(f):
    """``f`` whose gradient is the identity: each output's gradient goes to the matching
    input unchanged (variables ``f`` uses get none). For ops with no gradient, such as an
    assignment or a straight-through quantizer."""

    @custom_gradient
    def _grad_pass_through_op(*args):
        def grad(*dys, variables=None):
            if variables is not None:
                return list(dys), [None] * len(variables)
            return list(dys)

        return f(*args), grad

    return functools.wraps(f)(_grad_pass_through_op)


def hessians(ys, xs, name="hessians", colocate_gradients_with_ops=False,
             gate_gradients=False, aggregation_method=None):
    """For each ``x`` of ``xs``, the Hessian of ``sum(ys)``: shape ``x.shape + x.shape``,
    entry ``[i..., j...]`` the derivative by ``x[j...]`` of the gradient's entry ``i...``.

    One ``tf.gradients`` per entry of the gradient, as TF builds it; TF loops over the
    entries in a ``while_loop``, which lets ``x``'s size be unknown, whereas here they are
    unrolled, so each ``x`` must have a fully known shape (``ValueError`` otherwise). A
    gradient entry that does not depend on ``x`` gives a row of zeros (TF fails on it)."""
    from dflab.ops.gradients import gradients

    xs = list(xs) if isinstance(xs, (list, tuple)) else [xs]
    xs = [_ops.convert_to_tensor(x) for x in xs]
    for x in xs:
        if not x.shape.is_fully_defined():
            raise ValueError(f"hessians needs a fully known shape for {x.name}, got "
                             f"{x.shape}")
    out = []
    with _ops.name_scope(name):
        for gradient, x in zip(gradients(ys, xs), xs):
            if gradient is None:
                raise ValueError(f"{x.name} does not affect ys: it has no Hessian")
            gradient = array_ops.reshape(gradient, [-1])
            rows = []
            for j in range(x.shape.num_elements()):
                row = gradients(gradient[j], x)[0]
                rows.append(array_ops.zeros_like(x) if row is None else row)
            stacked = array_ops.stack(rows) if rows else array_ops.zeros(
                [0] + x.shape.as_list(), x.dtype)
            out.append(array_ops.reshape(stacked, x.shape.as_list() * 2))
    return out


__all__ = ["custom_gradient", "recompute_grad", "grad_pass_through", "hessians"]
