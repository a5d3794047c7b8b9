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

from dflab.framework import dtypes as _dt
from dflab.framework import errors, nest
from dflab.framework import ops as _ops
from dflab.framework.composite import GraphIterable
from dflab.framework.graph import Graph
from dflab.framework.tensor_shape import TensorShape
from dflab.ops import array_ops, control_flow_ops, logging_ops, math_ops, string_ops
from dflab.ops import resource_variable_ops as _rv
from dflab.ops.op_util import capture_placeholder_attrs
from dflab.ops.tensor_array_ops import TensorArray


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


class Attribute:
    """An attribute a converted statement assigns (``self.h``, its ``name``), carried as a
    variable only where the statement becomes graph control flow: a Python ``if`` or loop
    neither reads nor sets it beyond what the user's code does (TF's rule)."""

    __slots__ = ("owner", "attr", "name")

    def __init__(self, owner, attr: str, name: str):
        self.owner = owner  # a function giving the object (read when needed)
        self.attr = attr
        self.name = name

    def get(self):
        try:
            return getattr(self.owner(), self.attr)
        except (AttributeError, NameError):  # (NameError: no object yet, made in the loop)
            return Undefined(self.name)

    def set(self, value) -> None:
        """``value`` set on the object; ``Undefined`` (it had none) unsets it."""
        try:
            obj = self.owner()
        except NameError:  # the object is the loop's own (made in each iteration)
            return
        if not isinstance(value, Undefined):
            setattr(obj, self.attr, value)
        elif hasattr(obj, self.attr):
            delattr(obj, self.attr)


def _with_attributes(attrs, state, names, live):
    """A graph statement over its variables and attributes: the attributes' values join the
    state (and are always handed on); ``wrap`` gives each of the statement's functions a twin
    that first sets the attributes from its arguments (so each branch or iteration starts from
    the statement's values, not from what another branch's trace set) and returns them after
    its own results."""
    n = len(attrs)
    state = tuple(state) + tuple(a.get() for a in attrs)
    names = tuple(names) + tuple(a.name for a in attrs)
    live = None if live is None else tuple(live) + tuple(a.name for a in attrs)

    def wrap(fn, returns=True):
        if fn is None:
            return None

        def with_attributes(*args):
            for a, v in zip(attrs, args[len(args) - n:]):
                a.set(v)
            out = fn(*args[:len(args) - n])
            return tuple(out) + tuple(a.get() for a in attrs) if returns else out

        return with_attributes

    return state, names, live, wrap


def _settle(attrs, result) -> tuple:
    """The statement's results without its attributes', which are set on their objects."""
    result = tuple(result)
    split = len(result) - len(attrs)
    for a, v in zip(attrs, result[split:]):
        a.set(v)
    return result[:split]


class StructureError(ConversionError, TypeError):
    """A variable that a tensor statement carries changes its nested structure (a branch or an
    iteration gives it another); a ``TypeError``, as TF's."""


def _carried_value(v, name, where, what="cannot be carried by graph control flow"):
    """The value a tensor statement carries for variable ``name``: ``v`` with every leaf of its
    nested structure (tuples, lists, dicts, named tuples) a tensor — Python numbers converted —
    or a ``TensorArray``, which travels as its flow (TF's AutoGraph carries the same)."""
    def leaf(x):
        if hasattr(x, "_as_loop_var"):
            return x
        if x is None or isinstance(x, Undefined):
            raise TypeError(f"{'it' if x is v else 'a part of it'} is None")
        return _ops.convert_to_tensor(x)

    try:
        return nest.map_structure(leaf, v)
    except (TypeError, ValueError) as e:
        raise ConversionError(f"'{name}' holds {v!r}, which {what} ({where}): {e}") from None


def _to_tensors(values, names, where):
    return [v if v is None or isinstance(v, Undefined) else _carried_value(v, n, where)
            for v, n in zip(values, names)]


def _same_structure(before, after, name, message):
    """``before`` and ``after`` nest alike, with sequences of the same types (a tuple does not
    become a list), and hold TensorArrays and tensors in the same places — the same
    TensorArrays: a statement carries an array's writes (its flow), not another array."""
    try:
        nest.assert_same_structure(before, after, check_types=True)
    except (TypeError, ValueError) as e:
        raise StructureError(f"'{name}' {message}: {e}") from None
    for a, b in zip(nest.flatten(before), nest.flatten(after)):
        if hasattr(a, "_as_loop_var") != hasattr(b, "_as_loop_var"):
            kinds = [type(x).__name__ for x in (a, b)]
            raise StructureError(f"'{name}' {message}: a {kinds[0]} where the other has a "
                                 f"{kinds[1]}")
        if hasattr(a, "_as_loop_var") and getattr(a, "handle", None) is not \
                getattr(b, "handle", None):
            raise StructureError(
                f"'{name}' holds another TensorArray ({message}): graph control flow carries "
                "the writes to one array, not a new one; make the array before the statement "
                "and write to it (a new array in a tensor loop or branch is not converted).")


# --- if ---------------------------------------------------------------------------------------
def _carried(name: str, live) -> bool:
    """Whether a statement hands variable ``name`` on (``live``: the names code after it may
    read, None: all; a lowered ``break``'s flag is live where its loop's test reads it, and
    nowhere else); a carried attribute's stand-in always."""
    return live is None or name in live or name.startswith("<")


def if_stmt(cond, body, orelse, state, names, where, live=None, attrs=()):
    """``if cond: body else: orelse`` over the variables ``names`` (their values ``state``);
    a tensor condition hands on only the variables in ``live`` (the others keep their
    values: nothing after reads them), and the attributes the branches assign (``attrs``)."""
    if not is_symbolic(cond):
        return body(*state) if cond else orelse(*state)
    if attrs:
        state, names, live, wrap = _with_attributes(attrs, state, names, live)
        return _settle(attrs, if_stmt(cond, wrap(body), wrap(orelse), state, names, where,
                                      live))
    outs = {}
    carried = [_carried(n, live) for n in names]

    def handed_on(values):
        return [v if c else None for v, c in zip(values, carried)]

    def true_fn():  # each branch gets containers of its own: one may assign into them
        outs["t"] = handed_on(body(*_fresh(state)))
        outs["tv"] = _branch_values(outs["t"], names, where)
        return outs["tv"]

    def false_fn():
        outs["f"] = handed_on(orelse(*_fresh(state)))
        outs["mask"] = _defined_mask(outs["t"], outs["f"], names, where)
        kept = []
        for a, b, n, keep in zip(outs["t"], outs["f"], names, outs["mask"]):
            if not keep:
                continue
            if (a is None) != (b is None):
                raise ValueError(f"'{n}' is None at the end of the "
                                 f"{'main' if a is None else 'else'} branch ({where}): a "
                                 "tensor condition needs a value from both branches.")
            _same_structure(a, b, n, "must have the same nested structure in the main and "
                            f"else branches ({where})")
            kept.append(n)
        values = _branch_values(outs["f"], names, where)
        for n, a, b in zip(kept, outs["tv"], values):
            _same_dtypes(a, b, n, where)
        return values

    result = control_flow_ops.cond(cond, true_fn, false_fn, strict=True)
    result = list(result) if isinstance(result, (list, tuple)) else [result]
    # Variables neither branch assigned come back as they were.
    it = iter(result)
    return tuple(next(it) if keep else v for keep, v in zip(outs["mask"], state))


def _tensor_of(leaf):
    """The tensor a carried leaf travels as: a ``TensorArray``'s flow, or the tensor."""
    return leaf._as_loop_var() if hasattr(leaf, "_as_loop_var") else leaf


def _same_dtypes(main, other, name, where) -> None:
    for a, b in zip(nest.flatten(main), nest.flatten(other)):
        a, b = _tensor_of(a), _tensor_of(b)
        if a.dtype.base_dtype != b.dtype.base_dtype:
            raise TypeError(f"'{name}' has dtype {a.dtype.base_dtype.name} in the main branch, "
                            f"but dtype {b.dtype.base_dtype.name} in the else branch ({where}).")


def _fresh(state) -> list:
    """The variables' values with new containers (the same tensors), for a branch to assign
    items into (``d["k"] = ...``) without touching the other branch's."""
    return [v if isinstance(v, Undefined) or not nest.is_nested(v)
            else nest.map_structure(lambda x: x, v) for v in state]


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
    return [_carried_value(v, n, where, "a tensor `if` cannot return") for v, n in zip(out, names)
            if not isinstance(v, Undefined) and v is not None]


def if_exp(cond, true_fn, false_fn, where):
    """``a if cond else b``, and an ``if`` whose branches both return."""
    if not is_symbolic(cond):
        return true_fn() if cond else false_fn()
    return control_flow_ops.cond(cond, true_fn, false_fn)


# --- while ---------------------------------------------------------------------------------------
def set_loop_options(parallel_iterations=None, swap_memory=None, maximum_iterations=None,
                     shape_invariants=None):
    """TF's ``tf.autograph.experimental.set_loop_options``: written as the first statements of
    a loop's body, it sets the options of the ``while_loop`` the loop becomes
    (``shape_invariants``: ``(variable, shape)`` pairs, a variable named by its value before
    the loop). The converter reads its arguments before the loop; the call itself, where a loop
    stays Python, does nothing (TF's)."""
    return None


# ``set_loop_options``' arguments, in order (the converter maps positional ones by them).
LOOP_OPTIONS = ("parallel_iterations", "swap_memory", "maximum_iterations", "shape_invariants")


def loop_options(**options) -> dict:
    """The options a converted loop's ``set_loop_options`` gave, checked (TF's names)."""
    unknown = set(options) - set(LOOP_OPTIONS)
    if unknown:
        raise TypeError(f"set_loop_options() got unexpected arguments: {sorted(unknown)}")
    return {k: v for k, v in options.items() if v is not None}


def while_stmt(test, body, state, names, where, extra_test=None, live_out=None, opts=None,
               attrs=()):
    """``while test: body`` over the variables ``names``; ``extra_test`` (a lowered
    ``break``) must also hold for another iteration; ``live_out``: the names code after the
    loop, or the next iteration before assigning them, may read (None: all) — a tensor loop
    carries only those, and starts those it first defines from a staged iteration."""
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
    if attrs:
        state, names, live_out, wrap = _with_attributes(attrs, state, names, live_out)
        return _settle(attrs, _graph_while(wrap(test, returns=False), wrap(body), state, names,
                                           where, wrap(extra_test, returns=False), live_out,
                                           opts))
    return _graph_while(test, body, state, names, where, extra_test, live_out, opts)


def _any_symbolic(state, extra_test):
    if extra_test is None:
        return False
    return is_symbolic(extra_test(*state))


def _graph_while(test, body, state, names, where, extra_test, live_out=None, opts=None):
    opts = opts or {}
    state = list(state)
    before = list(state)
    keep = [not isinstance(v, Undefined) and _carried(n, live_out)
            for v, n in zip(state, names)]

    def full(vals):
        # A variable the loop does not carry enters each iteration as it was before it.
        it = iter(vals)
        return [next(it) if k else v for k, v in zip(keep, before)]

    # A variable the loop first defines and later code reads starts as zeros of the type one
    # staged iteration gives it (TF's rule); the loop must then run at least once.
    first_defined = [i for i, (v, n) in enumerate(zip(state, names))
                     if isinstance(v, Undefined) and live_out is not None and n in live_out]
    invariants = {}
    if first_defined:
        init = _to_tensors([v for v, k in zip(state, keep) if k],
                           [n for n, k in zip(names, keep) if k], where)
        staged = _stage_iteration(body, full, init, [names[i] for i in first_defined], where)
        for i in first_defined:
            state[i], invariants[i] = _zeros_like_staged(staged[i], names[i], where)
            keep[i] = True
    loop_names = [n for n, k in zip(names, keep) if k]
    init = _to_tensors([v for v, k in zip(state, keep) if k], loop_names, where)
    if any(v is None for v in init):
        bad = next(n for n, v in zip(loop_names, init) if v is None)
        raise ConversionError(f"'{bad}' is None before the while loop at {where}; a tensor "
                              "loop needs a value it can carry from one iteration to the next.")
    kept = [i for i, k in enumerate(keep) if k]
    invariants.update(_chosen_invariants(opts, before, kept, where))
    shapes = [invariants.get(i, _shapes_of(v)) for i, v in zip(kept, init)]
    entering = dict(zip(kept, init))
    allowed = dict(zip(kept, shapes))

    def cond(*vals):
        s = full(vals)
        c = test(*s)
        if extra_test is not None:
            c = math_ops.logical_and(_ops.convert_to_tensor(c), extra_test(*s))
        return c

    def loop_body(*vals):
        out = body(*full(vals))
        new = []
        for i, (v, k, n) in enumerate(zip(out, keep, names)):
            if not k:
                continue
            if isinstance(v, Undefined) or v is None:
                raise ConversionError(f"'{n}' is undefined at the end of an iteration of the "
                                      f"while loop at {where}")
            _same_structure(entering[i], v, n, "does not have the same nested structure after "
                            f"one iteration of the loop at {where}")
            v = _carried_value(v, n, where)
            _same_type(entering[i], v, allowed[i], n, where)
            new.append(v)
        return new

    if not init:
        raise ConversionError(f"The while loop at {where} changes no variable: a tensor loop "
                              "must carry at least one value.")
    options = {k: v for k, v in opts.items() if k != "shape_invariants"}
    if not first_defined:
        out = control_flow_ops.while_loop(cond, loop_body, init, shape_invariants=shapes,
                                          return_same_structure=True, **options)
        return tuple(full(out))

    def counted_body(ran, *vals):
        return (_ops.convert_to_tensor(True), *loop_body(*vals))

    out = control_flow_ops.while_loop(
        lambda ran, *vals: cond(*vals), counted_body, [_ops.convert_to_tensor(False), *init],
        shape_invariants=[TensorShape([]), *shapes], return_same_structure=True, **options)
    message = (f"The loop at {where} must iterate at least once: it defines "
               f"{', '.join(repr(names[i]) for i in first_defined)}, read after it.")
    with _ops.control_dependencies([control_flow_ops.Assert(out[0], [message])]):
        return tuple(full([_map_leaves(array_ops.identity, v) for v in out[1:]]))


def _chosen_invariants(opts, state, kept, where) -> dict:
    """The shape invariants ``set_loop_options`` gave, by position among the loop's variables:
    each pair names a variable by its value before the loop (TF's rule; a pair naming no
    variable the loop carries changes nothing, as in TF)."""
    chosen = {}
    for pair in opts.get("shape_invariants") or ():
        try:
            value, shape = pair
        except (TypeError, ValueError):
            raise ValueError(f"shape_invariants of the loop at {where} must be (variable, shape) "
                             f"pairs, got {pair!r}") from None
        for i in kept:  # every variable holding that value (TF's: by identity)
            if state[i] is value:
                chosen[i] = nest.map_structure(TensorShape, shape) if nest.is_nested(value) \
                    else TensorShape(shape)
    return chosen


def _same_type(entering, after, allowed, name, where):
    """A carried variable keeps its leaves' dtypes, and shapes within its invariants, from one
    iteration to the next; the messages are TF's, naming the variable."""
    flat_allowed = nest.flatten(allowed)
    for a, b, shape in zip(nest.flatten(entering), nest.flatten(after), flat_allowed):
        a, b = _tensor_of(a), _tensor_of(b)
        if a.dtype.base_dtype != b.dtype.base_dtype:
            raise TypeError(f"'{name}' has dtype {a.dtype.base_dtype.name} before the loop at "
                            f"{where}, but dtype {b.dtype.base_dtype.name} after one iteration.")
        if not control_flow_ops._shape_le(b.shape, shape):
            raise ValueError(f"'{name}' has shape {a.shape} before the loop at {where}, but "
                             f"shape {b.shape} after one iteration. Use "
                             "tf.autograph.experimental.set_loop_options to set shape "
                             "invariants.")


def _map_leaves(fn, value):
    """``fn`` over the tensors of a carried value (a ``TensorArray``'s flow)."""
    def leaf(x):
        return x._from_loop_var(fn(x._as_loop_var())) if hasattr(x, "_as_loop_var") else fn(x)

    return nest.map_structure(leaf, value)


def _shapes_of(value):
    """The shapes a carried value's tensors keep from one iteration to the next (the loop's
    default shape invariants)."""
    return nest.map_structure(lambda x: _tensor_of(x).shape, value)


class _StagingGraph(Graph):
    """A throwaway graph to build one iteration of a loop body in, only to learn the types of
    the variables it defines: tensors of other graphs come in as placeholders like them."""

    captures_foreign_tensors = True
    # Stands in for the graph it stages code for: state (variables, an optimizer's
    # accumulators) is made and found outside it, as from a traced function's graph.
    is_function_graph = True

    def __init__(self, outer):
        super().__init__()
        self.outer_graph = outer
        self._captures: dict = {}  # id(outside tensor) -> (it, its placeholder)

    def capture(self, t):
        """The one placeholder standing for ``t`` here (a tape's target and the reads it
        differentiates meet at it)."""
        found = self._captures.get(id(t))
        if found is None:
            with self.as_default(), self.control_dependencies(None):
                ph = self._create_op("Placeholder", [], capture_placeholder_attrs(t),
                                     "captured").outputs[0]
            found = self._captures[id(t)] = (t, ph)
        return found[1]

    def _capture(self, t, op_type):
        return self.capture(t)


def _stage_iteration(body, full, init, defined, where) -> list:
    """The values one iteration of ``body`` gives the loop's variables, built in a throwaway
    graph from placeholders like ``init`` (Python side effects of the body happen once more,
    as under TF's AutoGraph)."""
    staging = _StagingGraph(_ops.get_default_graph())
    try:
        with staging.as_default():
            vals = [_map_leaves(lambda t: array_ops.placeholder(t.dtype.base_dtype, t.shape), v)
                    for v in init]
            return list(body(*full(vals)))
    except (UnboundLocalError, NameError, TypeError, ValueError, KeyError) as e:
        raise ConversionError(
            f"{', '.join(repr(n) for n in defined)} must be defined before the loop at "
            f"{where}: the code after the loop reads it. AutoGraph tried to learn its type "
            f"from one iteration, but ran into a {type(e).__name__}: {e}") from None


def _zeros_like_staged(value, name, where):
    """A loop's initial value for a variable it first defines (``value``: what a staged
    iteration gave it, a nested structure of them too) and the shape invariants it needs:
    zeros of each tensor's dtype, a dimension unknown then empty at first."""
    def refuse(why):
        return ConversionError(f"'{name}' must be defined before the loop at {where}: the code "
                               f"after the loop reads it, and {why}.")

    def zero(x):
        if isinstance(x, (bool, int, float)):
            return type(x)(0), TensorShape([])
        if isinstance(x, Undefined) or x is None or not isinstance(x, _ops.Tensor):
            what = "nothing" if isinstance(x, Undefined) or x is None else repr(x)
            raise refuse(f"one iteration gives it {what}, which a tensor loop cannot start "
                         "from zeros")
        if x.dtype.base_dtype in (_dt.string, _dt.variant, _dt.resource):
            raise refuse(f"a {x.dtype.base_dtype.name} tensor has no zero to start from")
        shape = x.shape
        if shape.ndims is None:
            return array_ops.zeros([], x.dtype.base_dtype), TensorShape(None)
        dims = [0 if d is None else d for d in shape.as_list()]
        return array_ops.zeros(dims, x.dtype.base_dtype), shape

    if isinstance(value, Undefined):
        raise refuse("one iteration gives it nothing")
    pairs = [zero(x) for x in nest.flatten(value)]
    return (nest.pack_sequence_as(value, [z for z, _ in pairs]),
            nest.pack_sequence_as(value, [s for _, s in pairs]))


# --- for -----------------------------------------------------------------------------------------
def for_stmt(iterable, body, state, names, where, extra_test=None, live_out=None, opts=None,
             attrs=()):
    """``for target in iterable: body``; ``body(item, *state)`` assigns the target itself."""
    graph_iterable = isinstance(iterable, GraphIterable) and not _ops.executing_eagerly()
    if not graph_iterable and not is_symbolic(iterable):
        state = tuple(state)
        for item in iterable:
            if extra_test is not None and not extra_test(*state):
                break
            state = tuple(body(item, *state))
        return state
    if attrs:
        state, names, live_out, wrap = _with_attributes(attrs, state, names, live_out)
        return _settle(attrs, for_stmt(iterable, wrap(body), state, names, where,
                                       wrap(extra_test, returns=False), live_out, opts))
    if graph_iterable:
        return _graph_iterable_for(iterable, body, state, names, where, extra_test, live_out,
                                   opts)
    return _graph_for(iterable, body, state, names, where, extra_test, live_out, opts)


def _graph_for(iterable, body, state, names, where, extra_test, live_out, opts):
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
                     extra if extra_test is not None else None, live_out, opts)
    return tuple(out[1:])


def _graph_iterable_for(iterable, body, state, names, where, extra_test, live_out, opts):
    """A loop over a dataset or an iterator while tracing: a while loop that carries the next
    element as an optional and runs while it has a value (TF's ``IteratorGetNextAsOptional``;
    a dataset starts a new pass, an iterator goes on from where it is)."""
    loop = iterable._graph_loop()
    # A loop over a dataset runs to its end: TF ignores ``maximum_iterations`` there.
    opts = {k: v for k, v in (opts or {}).items() if k != "maximum_iterations"}

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
                     where, extra if extra_test is not None else None, live_out, opts)
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


def iter_(iterable, *sentinel):
    """``iter``: of a dataset while tracing, an iterator whose ``next()`` is one op (a
    comprehension, which is not converted, still refuses: it would never end); Python's
    otherwise."""
    if not sentinel and isinstance(iterable, GraphIterable) and not _ops.executing_eagerly():
        graph = iterable._graph_iter()
        if graph is not None:
            return graph
    return builtins.iter(iterable, *sentinel)


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


def _traced(x):
    """``x`` as a tensor being traced — a variable read while a graph is built is one — or
    None: the builtins' conversions apply to those (TF's ``is_tf_type``)."""
    if is_symbolic(x):
        return x
    if _rv.is_resource_variable(x) and not _ops.executing_eagerly():
        return x.value()
    return None


def len_(s):
    """``len``: of a tensor being traced, its static first dimension, else a shape op (TF's
    conversion); of a ``TensorArray``, its size; Python's otherwise."""
    if isinstance(s, TensorArray):
        return s.size()
    traced = _traced(s)
    if traced is None:
        return builtins.len(s)
    s = traced
    if s.shape.ndims == 0:
        raise ValueError(f"len requires a non-scalar tensor, got one of shape {s.shape}")
    first = s.shape.as_list()[0] if s.shape.ndims is not None else None
    return first if first is not None else array_ops.shape(s)[0]


def range_(start_or_stop, stop=None, step=None):
    """``range``: over tensors being traced, ``tf.range`` (an empty range where the stop is
    below the start, as Python's, rather than ``tf.range``'s error), which a ``for`` then
    iterates as a loop; Python's otherwise."""
    args = [a for a in (start_or_stop, stop, step) if a is not None]
    if not any(_traced(a) is not None for a in args):
        return builtins.range(*args)
    start_or_stop, stop, step = (a if _traced(a) is None else _traced(a)
                                 for a in (start_or_stop, stop, step))
    if step is not None:
        return math_ops.range(start_or_stop, stop, step)
    if stop is not None:
        return math_ops.range(start_or_stop, math_ops.maximum(start_or_stop, stop))
    return math_ops.range(math_ops.maximum(start_or_stop, 0))


def abs_(x):
    traced = _traced(x)
    return math_ops.abs(traced) if traced is not None else builtins.abs(x)


def float_(x=0):
    """``float`` of a tensor being traced: a cast to float32 (TF's conversion; a string is
    parsed as a number)."""
    traced = _traced(x)
    if traced is None:
        return builtins.float(x)
    x = traced
    if x.dtype.base_dtype == _dt.string:
        return string_ops.string_to_number(x, out_type=_dt.float32)
    return math_ops.cast(x, _dt.float32)


def int_(x=0, base=None):
    """``int`` of a tensor being traced: a cast to int32 (TF's conversion)."""
    traced = _traced(x)
    if traced is None:
        return builtins.int(x) if base is None else builtins.int(x, base)
    x = traced
    if base not in (None, 10):
        raise NotImplementedError(f"base {base} not supported for int")
    if x.dtype.base_dtype == _dt.string:
        return string_ops.string_to_number(x, out_type=_dt.int32)
    return math_ops.cast(x, _dt.int32)


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
