"""AutoGraph's run-time operators: what converted code calls instead of Python's statements.

Each operator decides at run time, as TF's AutoGraph does: a condition or iterable that is a
*symbolic* tensor (being traced into a graph) becomes graph control flow — ``tf.cond``,
``tf.while_loop``, a ``Print`` op — and anything else (Python values, eager tensors, whose
values are known) runs as the Python statement would. Loop and branch state is passed in and
out explicitly: ``state`` is the tuple of the variables the statement assigns, ``names`` their
names for messages; a variable not yet defined is ``Undefined``.
"""

from __future__ import annotations

import builtins

from dflab.framework import errors
from dflab.framework import ops as _ops
from dflab.framework.composite import GraphIterable
from dflab.ops import array_ops, control_flow_ops, logging_ops, math_ops


class Undefined:
    """A variable the converted code has not assigned yet (its name, for messages)."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self):
        return f"Undefined({self.name!r})"


class ConversionError(errors.InvalidArgumentError, ValueError):
    """A statement AutoGraph cannot turn into graph control flow (its condition is a tensor
    being traced, but its body does what a graph cannot), naming the user's line."""

    def __init__(self, message: str):
        super().__init__(None, None, message)


def is_symbolic(x) -> bool:
    """A tensor being traced into a graph (no value yet), as opposed to an eager tensor."""
    return isinstance(x, _ops.Tensor) and not x.is_eager


def ld(fn, name: str):
    """The current value of a variable, or ``Undefined`` where it has none yet."""
    try:
        return fn()
    except NameError:
        return Undefined(name)


def _to_tensors(values, names, where):
    out = []
    for v, n in zip(values, names):
        if v is None or isinstance(v, Undefined):
            out.append(v)
            continue
        try:
            out.append(_ops.convert_to_tensor(v))
        except (TypeError, ValueError) as e:
            raise ConversionError(f"'{n}' holds {v!r}, which cannot be a tensor in graph control "
                                  f"flow ({where}): {e}") from None
    return out


# --- if ---------------------------------------------------------------------------------------
def if_stmt(cond, body, orelse, state, names, where):
    """``if cond: body else: orelse`` over the variables ``names`` (their values ``state``)."""
    if not is_symbolic(cond):
        return body(*state) if cond else orelse(*state)
    outs = {}

    def true_fn():
        outs["t"] = body(*state)
        return _branch_values(outs["t"], names, where)

    def false_fn():
        outs["f"] = orelse(*state)
        outs["mask"] = _defined_mask(outs["t"], outs["f"], names, where)
        return _branch_values(outs["f"], names, where)

    result = control_flow_ops.cond(cond, true_fn, false_fn, strict=True)
    result = list(result) if isinstance(result, (list, tuple)) else [result]
    # Variables neither branch assigned come back as they were.
    it = iter(result)
    return tuple(next(it) if keep else v for keep, v in zip(outs["mask"], state))


def _defined_mask(out_t, out_f, names, where):
    mask = []
    for a, b, n in zip(out_t, out_f, names):
        ua, ub = isinstance(a, Undefined), isinstance(b, Undefined)
        if ua != ub:
            which = "else" if ub else "if"
            raise ConversionError(f"'{n}' must also be initialized in the {which} branch "
                                  f"({where}): a tensor condition runs both branches in the "
                                  "graph.")
        mask.append(not ua and not (a is None and b is None))
    return mask


def _branch_values(out, names, where):
    vals = []
    for v, n in zip(out, names):
        if isinstance(v, Undefined) or v is None:
            continue
        try:
            vals.append(_ops.convert_to_tensor(v))
        except (TypeError, ValueError) as e:
            raise ConversionError(f"'{n}' holds {v!r}, which a tensor `if` cannot return "
                                  f"({where}): {e}") from None
    return vals


def if_exp(cond, true_fn, false_fn, where):
    """``a if cond else b``, and an ``if`` whose branches both return."""
    if not is_symbolic(cond):
        return true_fn() if cond else false_fn()
    return control_flow_ops.cond(cond, true_fn, false_fn)


# --- while ---------------------------------------------------------------------------------------
def while_stmt(test, body, state, names, where, extra_test=None):
    """``while test: body`` over the variables ``names``; ``extra_test`` (a lowered
    ``break``) must also hold for another iteration."""
    first = test(*state)
    if extra_test is not None and not is_symbolic(first):
        first = first and extra_test(*state)
    if not is_symbolic(first) and not _any_symbolic(state, extra_test):
        state = tuple(state)
        cond = first
        while cond:
            state = tuple(body(*state))
            cond = test(*state) and (extra_test is None or extra_test(*state))
            if is_symbolic(cond):
                raise ConversionError(f"The condition of the while loop at {where} became a "
                                      "tensor after the first iteration; make it a tensor "
                                      "from the start (e.g. with tf.constant).")
        return state
    return _graph_while(test, body, state, names, where, extra_test)


def _any_symbolic(state, extra_test):
    if extra_test is None:
        return False
    return is_symbolic(extra_test(*state))


def _graph_while(test, body, state, names, where, extra_test):
    keep = [not isinstance(v, Undefined) for v in state]
    loop_names = [n for n, k in zip(names, keep) if k]
    init = _to_tensors([v for v, k in zip(state, keep) if k], loop_names, where)
    if any(v is None for v in init):
        bad = next(n for n, v in zip(loop_names, init) if v is None)
        raise ConversionError(f"'{bad}' is None before the while loop at {where}; a tensor "
                              "loop needs a value it can carry from one iteration to the next.")

    def full(vals):
        it = iter(vals)
        return [next(it) if k else Undefined(n) for k, n in zip(keep, names)]

    def cond(*vals):
        s = full(vals)
        c = test(*s)
        if extra_test is not None:
            c = math_ops.logical_and(_ops.convert_to_tensor(c), extra_test(*s))
        return c

    def loop_body(*vals):
        out = body(*full(vals))
        new = []
        for v, k, n in zip(out, keep, names):
            if not k:
                continue
            if isinstance(v, Undefined) or v is None:
                raise ConversionError(f"'{n}' is undefined at the end of an iteration of the "
                                      f"while loop at {where}")
            new.append(_ops.convert_to_tensor(v))
        return new

    if not init:
        raise ConversionError(f"The while loop at {where} changes no variable: a tensor loop "
                              "must carry at least one value.")
    out = control_flow_ops.while_loop(cond, loop_body, init)
    out = list(out) if isinstance(out, (list, tuple)) else [out]
    return tuple(full(out))


# --- for -----------------------------------------------------------------------------------------
def for_stmt(iterable, body, state, names, where, extra_test=None):
    """``for target in iterable: body``; ``body(item, *state)`` assigns the target itself."""
    if isinstance(iterable, GraphIterable) and not _ops.executing_eagerly():
        return _graph_iterable_for(iterable, body, state, names, where, extra_test)
    if not is_symbolic(iterable):
        state = tuple(state)
        for item in iterable:
            if extra_test is not None and not extra_test(*state):
                break
            state = tuple(body(item, *state))
        return state
    return _graph_for(iterable, body, state, names, where, extra_test)


def _graph_for(iterable, body, state, names, where, extra_test):
    t = iterable
    if t.shape.ndims == 0:
        raise ConversionError(f"The for loop at {where} iterates over a scalar tensor.")
    n = array_ops.shape(t)[0]
    i0 = _ops.convert_to_tensor(0)

    def test(i, *rest):
        return i < n

    def loop_body(i, *rest):
        out = body(t[i], *rest)
        return (i + 1, *out)

    def extra(i, *rest):
        return extra_test(*rest)

    out = while_stmt(test, loop_body, (i0, *state), ("<index>", *names), where,
                     extra if extra_test is not None else None)
    return tuple(out[1:])


def _graph_iterable_for(iterable, body, state, names, where, extra_test):
    """A loop over a dataset or an iterator while tracing: a while loop that carries the next
    element as an optional and runs while it has a value (TF's ``IteratorGetNextAsOptional``;
    a dataset starts a new pass, an iterator goes on from where it is)."""
    loop = iterable._graph_loop()

    def test(optional, *rest):
        return loop.has_value(optional)

    def loop_body(optional, *rest):
        out = body(loop.value(optional), *rest)
        if extra_test is None:
            return (loop.next_optional(), *out)
        # After a ``break`` the iterator keeps its next element (TF's): ask only to go on.
        go_on = extra_test(*out)
        if not is_symbolic(go_on):
            return (loop.next_optional() if go_on else optional, *out)
        return (control_flow_ops.cond(go_on, loop.next_optional, lambda: optional), *out)

    def extra(optional, *rest):
        return extra_test(*rest)

    out = while_stmt(test, loop_body, (loop.next_optional(), *state), ("<element>", *names),
                     where, extra if extra_test is not None else None)
    return tuple(out[1:])


# --- expressions -----------------------------------------------------------------------------
def and_(a, b):
    x = a()
    if is_symbolic(x):
        return math_ops.logical_and(x, _ops.convert_to_tensor(b()))
    return x and b()


def or_(a, b):
    x = a()
    if is_symbolic(x):
        return math_ops.logical_or(x, _ops.convert_to_tensor(b()))
    return x or b()


def not_(x):
    if is_symbolic(x):
        return math_ops.logical_not(x)
    return not x


def eq(a, b):
    if is_symbolic(a) or is_symbolic(b):
        return math_ops.equal(a, b)
    return a == b


def not_eq(a, b):
    if is_symbolic(a) or is_symbolic(b):
        return math_ops.not_equal(a, b)
    return a != b


def enumerate_(iterable, start=0):
    """``enumerate``: over a dataset while tracing, the dataset's own (TF's conversion), so that
    a ``for`` over it still becomes a loop of ops; Python's otherwise."""
    if isinstance(iterable, GraphIterable) and not _ops.executing_eagerly():
        graph = iterable._graph_enumerate(start)
        if graph is not None:
            return graph
    return builtins.enumerate(iterable, start)


def zip_(*iterables, **kwargs):
    """``zip``: of datasets while tracing, ``Dataset.zip``; Python's otherwise."""
    if iterables and not kwargs and isinstance(iterables[0], GraphIterable) and \
            not _ops.executing_eagerly():
        graph = iterables[0]._graph_zip(iterables)
        if graph is not None:
            return graph
    return builtins.zip(*iterables, **kwargs)


def print_(*args, **kwargs):
    """``print``: a print op where an argument is a tensor being traced, else Python's."""
    if any(is_symbolic(a) for a in args):
        sep = kwargs.get("sep", " ")
        end = kwargs.get("end", "\n")
        import sys

        return logging_ops.print_v2(*args, output_stream=sys.stdout, sep=sep, end=end)
    builtins.print(*args, **kwargs)
    return None


def py_cond(test, kind: str, why: str, where: str):
    """The test of a statement left as Python (``why``: what keeps it from converting); a
    tensor being traced there is refused with a message naming the line."""
    if is_symbolic(test):
        raise ConversionError(f"AutoGraph cannot convert the `{kind}` at {where} into graph "
                              f"control flow: {why}. Its condition is a tensor, so it must be "
                              "converted; restructure it (assign a result variable instead).")
    return test


def py_iter(iterable, why: str, where: str):
    if is_symbolic(iterable):
        raise ConversionError(f"AutoGraph cannot convert the `for` at {where} into a "
                              f"while_loop: {why}. It iterates over a tensor, so it must be "
                              "converted; restructure it.")
    return iterable
