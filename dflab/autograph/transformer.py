"""AutoGraph's source transformation: Python control flow into calls of ``operators``.

``rewrite(fdef, ...)`` rewrites a parsed function definition, in order:

1. ``break`` and ``continue`` into flags (``__ag_break_N``, ``__ag_continue_N``) with the rest
   of the loop body guarded by ``if not flag`` and a ``break`` flag joining the loop's test;
2. ``if``/``while``/``for`` into local functions over the variables the statement assigns
   (passed in and returned, so no ``nonlocal`` is needed) and a call of ``if_stmt``,
   ``while_stmt`` or ``for_stmt``; ``a and b``/``a or b``/``not a``/``==``/``!=``/``print`` into
   the operators that build graph ops for traced tensors;
3. a statement whose body holds what a graph cannot express (``return``, ``yield``, ``try``,
   ``raise``, ``global``/``nonlocal``, a ``break`` out of it) stays Python: its test goes through
   ``py_cond``/``py_iter``, which refuse a traced tensor with a message naming the line. An
   ``if`` whose two branches each end in ``return`` assigns the value to a variable of its
   own, returned after it;
4. any other call ``f(...)`` into ``ag__converted_call(f)(...)`` (with ``recursive``), which
   converts ``f`` when it is the user's function (``conversion``); builtins stay as written.

The new code keeps the user's file name and line numbers, so errors and tracebacks point at the
user's lines. Finding the source and compiling the result is ``conversion``'s job.
"""

from __future__ import annotations

import ast
import builtins
import itertools

from dflab.autograph import operators

AG = "ag__"  # the operators' module, in converted code
AG_CALL = "ag__converted_call"  # ``conversion.converted_call``, which the operators cannot import
_counter = itertools.count(1)


def _where(node, filename, offset=0) -> str:
    line = getattr(node, "lineno", None)
    return f"{filename}:{line + offset if line is not None else '?'}"


class _Assigned(ast.NodeVisitor):
    """Names a list of statements assigns (not inside nested function definitions)."""

    def __init__(self):
        self.names: list[str] = []

    def _add(self, name):
        if name not in self.names:
            self.names.append(name)

    def visit_Name(self, node):
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            self._add(node.id)

    def visit_Subscript(self, node):
        # ``d["k"] = v`` (``+=``, ``del``) changes ``d``: a tensor statement carries it.
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            base = node.value
            while isinstance(base, ast.Subscript):
                base = base.value
            name = base.id if isinstance(base, ast.Name) else _dotted(base)
            if name is not None:
                self._add(name)
        self.generic_visit(node)

    def visit_Attribute(self, node):
        # ``self.h = v`` (``+=``): a tensor statement carries ``self.h`` as a variable.
        if isinstance(node.ctx, ast.Store):
            name = _dotted(node)
            if name is not None:
                self._add(name)
        self.generic_visit(node)

    def visit_Call(self, node):
        # An attribute a converted statement inside these ones carries (``ag__.Attribute``).
        if _is_operator(node.func) and getattr(node.func, "attr", None) == "Attribute":
            self._add(node.args[2].value)
        self.generic_visit(node)

    def visit_FunctionDef(self, node):
        self._add(node.name)

    visit_AsyncFunctionDef = visit_FunctionDef  # noqa: N815 - ast.NodeVisitor's method names

    def visit_ClassDef(self, node):
        self._add(node.name)

    def visit_Lambda(self, node):
        pass

    def visit_comprehension(self, node):
        self.visit(node.iter)


def assigned(stmts) -> list[str]:
    """The variables ``stmts`` assign: names, and attributes of names as dotted names
    (``self.h``), which tensor statements carry as they carry names."""
    v = _Assigned()
    for s in stmts:
        v.visit(s)
    return [n for n in v.names if not n.startswith(("__ag_it", "__agf_"))]


class _Bound(ast.NodeVisitor):
    """The names a function binds in its own scope: its parameters, and every name it assigns
    (nested functions', classes' and comprehensions' scopes left out)."""

    def __init__(self):
        self.names: set = set()

    def visit_Name(self, node):
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            self.names.add(node.id)

    def visit_FunctionDef(self, node):
        self.names.add(node.name)

    visit_AsyncFunctionDef = visit_ClassDef = visit_FunctionDef  # noqa: N815

    def visit_Lambda(self, node):
        pass

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = visit_Lambda  # noqa: N815


def local_names(fdef) -> set:
    """The names local to the function ``fdef`` (see ``_Bound``)."""
    v = _Bound()
    a = fdef.args
    for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]:
        if arg is not None:
            v.names.add(arg.arg)
    for stmt in fdef.body:
        v.visit(stmt)
    return v.names


def _dotted(node) -> str | None:
    """``a.b.c`` for an attribute chain of a name; None for anything else."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or not parts:
        return None
    return ".".join([node.id, *reversed(parts)])


def bound_by(target) -> list[str]:
    """The names an assignment target (``x``, ``(a, b)``, a ``for`` or ``with ... as``
    target) binds."""
    return assigned([ast.Assign(targets=[target], value=ast.Constant(value=None))])


class _Finds(ast.NodeVisitor):
    """Whether statements contain nodes of given kinds, not looking into nested functions
    (and, for ``break``/``continue``, not into nested loops)."""

    def __init__(self, kinds, into_loops=True):
        self.kinds = kinds
        self.into_loops = into_loops
        self.found = None

    def generic_visit(self, node):
        if self.found is None and isinstance(node, self.kinds):
            self.found = node
            return
        super().generic_visit(node)

    def visit_FunctionDef(self, node):
        pass

    visit_AsyncFunctionDef = visit_FunctionDef  # noqa: N815 - ast.NodeVisitor's method names
    visit_Lambda = visit_FunctionDef  # noqa: N815
    visit_ClassDef = visit_FunctionDef  # noqa: N815 - ast.NodeVisitor's method names

    def visit_For(self, node):
        if self.into_loops:
            self.generic_visit(node)
        else:
            for s in node.orelse:
                self.visit(s)

    visit_While = visit_For  # noqa: N815 - ast.NodeVisitor's method names


def finds(stmts, kinds, into_loops=True):
    v = _Finds(kinds, into_loops)
    for s in stmts:
        v.visit(s)
        if v.found is not None:
            return v.found
    return None


_UNCONVERTIBLE = (ast.Return, ast.Yield, ast.YieldFrom, ast.Try, ast.Raise, ast.Global,
                  ast.Nonlocal)


def _blocker(stmts):
    """What keeps a statement over ``stmts`` Python: a ``return``, ``yield``, ``try``,
    ``raise``, ``global`` or ``nonlocal`` anywhere inside (in nested loops too: a ``return``
    there leaves the function), or a ``break``/``continue`` of this statement's own."""
    return finds(stmts, _UNCONVERTIBLE) or finds(stmts, (ast.Break, ast.Continue),
                                                 into_loops=False)


def _name(id_, ctx=None):
    return ast.Name(id=id_, ctx=ctx or ast.Load())



def _attribute_operand(name: str):
    """``ag__.Attribute(lambda: self, 'h', 'self.h')``: a carried attribute, for the
    operators (its owner read when they need it)."""
    *path, attr = name.split(".")
    owner = _name(path[0])
    for part in path[1:]:
        owner = ast.Attribute(value=owner, attr=part, ctx=ast.Load())
    return _call(_ag("Attribute"), [_lambda(owner), _const(attr), _const(name)])


def _split_carried(names) -> tuple:
    """(the plain names, the ``attrs=`` keyword of the dotted ones) a statement carries: the
    operators carry attributes only where the statement becomes graph control flow."""
    plain = [n for n in names if "." not in n]
    # An attribute of an object the statement binds itself (``o = Obj(); o.v = x`` in a loop
    # body) belongs to that object, not carried (TF's rule for such names).
    dotted = [n for n in names if "." in n and n.split(".", 1)[0] not in plain]
    keywords = [ast.keyword(arg="attrs", value=ast.Tuple(
        elts=[_attribute_operand(n) for n in dotted], ctx=ast.Load()))] if dotted else []
    return plain, keywords


def _ag(attr):
    return ast.Attribute(value=_name(AG), attr=attr, ctx=ast.Load())


def _call(func, args, keywords=()):
    return ast.Call(func=func, args=list(args), keywords=list(keywords))


def _tuple(names, ctx=None):
    return ast.Tuple(elts=[_name(n, ctx or ast.Load()) for n in names], ctx=ctx or ast.Load())


def _const(v):
    return ast.Constant(value=v)


def _fn_def(name, params, body, returns):
    body = list(body) + [ast.Return(value=_tuple(returns))]
    return ast.FunctionDef(
        name=name, args=ast.arguments(posonlyargs=[], args=[ast.arg(arg=p) for p in params],
                                      vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None,
                                      defaults=[]),
        body=body, decorator_list=[], returns=None, type_params=[])


def _load_state(names):
    """``(ag__.ld(lambda: a, 'a'), ...)``: the variables' current values or Undefined."""
    return ast.Tuple(elts=[_call(_ag("ld"), [_lambda(_name(n)), _const(n)]) for n in names],
                     ctx=ast.Load())


def _assign_state(names, call) -> list:
    """``a, b = call``: the statement's results taken (the call alone where it has none)."""
    if not names:
        return [ast.Expr(value=call)]
    return [ast.Assign(targets=[_tuple(names, ast.Store())], value=call)]


def _lambda(body):
    return ast.Lambda(args=ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[],
                                         kw_defaults=[], kwarg=None, defaults=[]), body=body)


# --- step 0: an early return folded into an if/else ---------------------------------------------
def _fold_returns(stmts):
    """``if c: ...; return a`` followed by ``...; return b`` becomes ``if c: ...; return a
    else: ...; return b``, so that both branches return (then one value, returned after)."""
    for i, s in enumerate(stmts):
        for field in ("body", "orelse"):
            inner = getattr(s, field, None)
            if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt) and \
                    not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                setattr(s, field, _fold_returns(inner))
        rest = stmts[i + 1:]
        # Always equivalent in Python; whether it then converts is decided by _Control.
        if (isinstance(s, ast.If) and not s.orelse and s.body
                and isinstance(s.body[-1], ast.Return) and rest):
            s.orelse = _fold_returns(rest)
            return stmts[:i + 1]
    return stmts


def _returns_as_values(stmts):
    """An ``if`` whose branches both end in ``return`` (after step 0) assigns the value each
    returns to a variable of its own and is followed by one ``return`` of it: an ordinary
    statement for step 2 (each branch a function over what it assigns — the variables it
    binds, attributes, globals — a tensor condition a cond), as TF's return conversion does.
    Inner statements first, so that an ``elif`` chain of returns becomes nested ones."""
    out = []
    for s in stmts:
        if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for field in ("body", "orelse"):
                inner = getattr(s, field, None)
                if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                    setattr(s, field, _returns_as_values(inner))
        out.append(s)
        if isinstance(s, ast.If) and s.body and s.orelse and \
                isinstance(s.body[-1], ast.Return) and isinstance(s.orelse[-1], ast.Return):
            value = f"__ag_retval_{next(_counter)}"
            for block in (s.body, s.orelse):
                ret = block[-1]
                block[-1] = ast.copy_location(ast.Assign(
                    targets=[_name(value, ast.Store())], value=ret.value or _const(None)), ret)
            out.append(ast.copy_location(ast.Return(value=_name(value)), s))
            break  # (what follows both returns never runs)
    return out


# --- step 1: break and continue into flags ----------------------------------------------------
def _lower_jumps(stmts, kind, flag):
    """``stmts`` with each ``kind`` (Break/Continue) of this loop level replaced by
    ``flag = True`` and the statements after it guarded by ``if not flag``."""
    out = []
    for i, s in enumerate(stmts):
        if isinstance(s, kind):
            out.append(ast.copy_location(ast.Assign(targets=[_name(flag, ast.Store())],
                                                    value=_const(True)), s))
            return out
        if finds([s], kind, into_loops=False) is not None and isinstance(s, (ast.If,
                                                                             ast.With)):
            s.body = _lower_jumps(s.body, kind, flag) or [ast.Pass()]
            if isinstance(s, ast.If):
                s.orelse = _lower_jumps(s.orelse, kind, flag)
            out.append(s)
            rest = _lower_jumps(stmts[i + 1:], kind, flag)
            if rest:
                out.append(ast.copy_location(ast.If(
                    test=ast.UnaryOp(op=ast.Not(), operand=_name(flag)), body=rest, orelse=[]),
                    s))
            return out
        out.append(s)
    return out


class _Jumps(ast.NodeTransformer):
    def visit_FunctionDef(self, node):
        if getattr(node, "_ag_root", False):
            self.generic_visit(node)
        return node

    def _loop(self, node):
        self.generic_visit(node)
        if node.orelse:
            return node  # a loop's else clause: left as Python
        if finds(node.body, ast.Continue, into_loops=False) is not None:
            flag = f"__ag_continue_{next(_counter)}"
            reset = ast.Assign(targets=[_name(flag, ast.Store())], value=_const(False))
            node.body = [reset] + _lower_jumps(node.body, ast.Continue, flag)
        if finds(node.body, ast.Break, into_loops=False) is not None:
            flag = f"__ag_break_{next(_counter)}"
            node.body = _lower_jumps(node.body, ast.Break, flag)
            node._ag_break = flag
            init = ast.copy_location(ast.Assign(targets=[_name(flag, ast.Store())],
                                                value=_const(False)), node)
            return [init, node]
        return node

    visit_While = _loop  # noqa: N815 - ast.NodeVisitor's method names
    visit_For = _loop  # noqa: N815


# --- between steps 1 and 2: which variables a statement must hand on ----------------------------
def _loads(node) -> set:
    """The names ``node`` reads: loads, and the targets of augmented assignments (``s += x``
    reads ``s``)."""
    names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)
             and isinstance(n.ctx, ast.Load)}
    names |= {n.target.id for n in ast.walk(node)
              if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name)}
    return names


def _loop_live_in(loop) -> set:
    """What an iteration of ``loop`` may read before assigning it (its test included, and a
    lowered ``break``'s flag, which the loop's extra test reads)."""
    flag = {loop._ag_break} if getattr(loop, "_ag_break", None) else set()
    if isinstance(loop, ast.While):
        return _loads(loop.test) | _reads_before_writes(loop.body, set()) | flag
    return _reads_before_writes(loop.body, set(bound_by(loop.target))) | flag


def _reads_before_writes(stmts, written: set) -> set:
    """The names ``stmts`` may read before assigning them (``written``: assigned already;
    updated), conservatively: a branch's reads count, its writes only where both branches
    make them, a nested loop's reads before its own writes count, its writes never."""
    out = set()
    for s in stmts:
        if isinstance(s, ast.If):
            out |= _loads(s.test) - written
            out |= _reads_before_writes(s.body, set(written))
            out |= _reads_before_writes(s.orelse, set(written))
            written |= set(assigned(s.body)) & set(assigned(s.orelse))
        elif isinstance(s, ast.With):
            for item in s.items:
                out |= _loads(item.context_expr) - written
                if item.optional_vars is not None:
                    written |= set(bound_by(item.optional_vars))
            out |= _reads_before_writes(s.body, written)
        elif isinstance(s, (ast.For, ast.While)) and not s.orelse:
            # A nested loop: its iterable or test, then its body with its target bound (an
            # iteration reads what it has not yet assigned; its writes may never happen).
            if isinstance(s, ast.For):
                out |= _loads(s.iter) - written
                out |= _reads_before_writes(s.body, set(written) | set(bound_by(s.target)))
            else:
                out |= _loads(s.test) - written
                out |= _reads_before_writes(s.body, set(written))
        else:
            out |= _loads(s) - written
            if not isinstance(s, (ast.For, ast.While)):  # a loop may not run at all
                written |= set(assigned([s]))
    return out


def _mark_liveness(fdef) -> None:
    """Mark each ``if`` with the names code after it may read (``_ag_live``) and each loop
    with those plus the names an iteration reads before assigning them (``_ag_live_out``):
    TF's liveness analysis, conservatively (another iteration of an enclosing loop counts as
    after). A converted statement hands on only those: a GradientTape bound in a branch or a
    loop and read only there stays a Python value of the body."""
    parents = {}
    for node in ast.walk(fdef):
        for field in ("body", "orelse"):
            block = getattr(node, field, None)
            if isinstance(block, list):
                for i, s in enumerate(block):
                    if isinstance(s, ast.stmt):
                        parents[s] = (node, field, i)

    def reads_after(stmt):
        """What code after ``stmt`` may read; None where that is not known (a statement in a
        ``try`` or a ``match``: every variable is then handed on)."""
        names, cur = set(), stmt
        while cur is not fdef:
            if cur not in parents:
                return None
            parent, field, i = parents[cur]
            if not isinstance(parent, (ast.FunctionDef, ast.If, ast.For, ast.While,
                                       ast.With)):
                return None
            for later in getattr(parent, field)[i + 1:]:
                names |= _loads(later)
            if isinstance(parent, (ast.For, ast.While)) and field == "body":
                names |= _loop_live_in(parent)  # the next iteration
            cur = parent
        return names

    for node in ast.walk(fdef):
        if isinstance(node, (ast.If, ast.For, ast.While)):
            after = reads_after(node)
            if isinstance(node, ast.If):
                node._ag_live = None if after is None else frozenset(after)
            else:
                node._ag_live_out = None if after is None else frozenset(
                    after | _loop_live_in(node))


# --- step 2: statements into operator calls ------------------------------------------------------
# Builtins whose calls become operators (which act as the builtin unless given what a graph
# iterates or prints), unless the function's module or the function itself names another.
_BUILTINS = {name: name + "_" for name in ("print", "iter", "enumerate", "zip", "len", "range",
                                           "abs", "float", "int")}
# The other builtins are called as they are (their calls are not even looked at).
PYTHON_BUILTINS = frozenset(dir(builtins))


class _Control(ast.NodeTransformer):
    def __init__(self, filename, offset=0, shadowed=frozenset(), recursive=True,
                 local=frozenset()):
        self.filename = filename
        self.offset = offset
        self.shadowed = shadowed  # the builtins' names the function or its module rebinds
        self.recursive = recursive
        self.local = local  # the function's local names

    def _carried(self, names) -> tuple:
        """(names, ``attrs=``) a statement carries: attributes, and local names only; a
        global or closure container that ``d[k] = v`` changes in place stays what it is
        (carrying it would make it a local of the function)."""
        return _split_carried([n for n in names if "." in n or n in self.local])

    def visit_FunctionDef(self, node):
        if getattr(node, "_ag_root", False):
            self.generic_visit(node)
        return node

    # expressions
    def visit_BoolOp(self, node):
        self.generic_visit(node)
        fn = "and_" if isinstance(node.op, ast.And) else "or_"
        result = node.values[-1]
        for v in reversed(node.values[:-1]):
            result = _call(_ag(fn), [_lambda(v), _lambda(result)])
        return ast.copy_location(result, node)

    def visit_UnaryOp(self, node):
        self.generic_visit(node)
        if isinstance(node.op, ast.Not):
            return ast.copy_location(_call(_ag("not_"), [node.operand]), node)
        return node

    def visit_Compare(self, node):
        self.generic_visit(node)
        # ``a < b < c`` is ``a < b and b < c`` (TF's conversion; ``b`` is read twice), so
        # that tensors give a logical_and; ``==``/``!=`` are the operators'.
        left, parts = node.left, []
        for op, right in zip(node.ops, node.comparators):
            if isinstance(op, (ast.Eq, ast.NotEq)):
                fn = "eq" if isinstance(op, ast.Eq) else "not_eq"
                parts.append(_call(_ag(fn), [left, right]))
            else:
                parts.append(ast.Compare(left=left, ops=[op], comparators=[right]))
            left = right
        result = parts[-1]
        for part in reversed(parts[:-1]):
            result = _call(_ag("and_"), [_lambda(part), _lambda(result)])
        if result is parts[0] and isinstance(result, ast.Compare):
            return node
        return ast.copy_location(result, node)

    def visit_IfExp(self, node):
        self.generic_visit(node)
        return ast.copy_location(_call(_ag("if_exp"), [
            node.test, _lambda(node.body), _lambda(node.orelse),
            _const(_where(node, self.filename, self.offset))]), node)

    def visit_Call(self, node):
        self.generic_visit(node)
        func = node.func
        if isinstance(func, ast.Name) and func.id not in self.shadowed and \
                func.id in PYTHON_BUILTINS:
            if func.id in _BUILTINS:
                node.func = _ag(_BUILTINS[func.id])
        elif self.recursive and not _is_operator(func):
            # Any other callee is looked at when the call runs (TF's ``converted_call``): a
            # function of the user's own code is converted in turn.
            node.func = ast.copy_location(_call(_name(AG_CALL), [func]), func)
        return node

    # statements
    def visit_If(self, node):
        where = _where(node, self.filename, self.offset)
        self.generic_visit(node)
        bad = _blocker(node.body + node.orelse)
        if bad is not None:
            node.test = _call(_ag("py_cond"), [node.test, _const("if"), _const(
                _why(bad)), _const(where)])
            return node
        names, attrs = self._carried(assigned(node.body + node.orelse))
        n = next(_counter)
        t_name, f_name = f"__agf_if_true_{n}", f"__agf_if_false_{n}"
        t_fn = _fn_def(t_name, names, node.body or [ast.Pass()], names)
        f_fn = _fn_def(f_name, names, node.orelse or [ast.Pass()], names)
        live = getattr(node, "_ag_live", None)
        keywords = [] if live is None else [ast.keyword(arg="live", value=_const(
            tuple(n for n in names if n in live)))]
        call = _call(_ag("if_stmt"), [node.test, _name(t_name), _name(f_name),
                                      _load_state(names), _const(tuple(names)), _const(where)],
                     keywords + attrs)
        return [ast.copy_location(x, node) for x in (t_fn, f_fn, *_assign_state(names, call))]

    def visit_While(self, node):
        where = _where(node, self.filename, self.offset)
        self.generic_visit(node)
        bad = _blocker(node.body)
        if bad is not None or node.orelse:
            node.test = _call(_ag("py_cond"), [node.test, _const("while"), _const(
                _why(bad) if bad is not None else "it has an else clause"), _const(where)])
            return node
        options = _take_loop_options(node)
        flag = getattr(node, "_ag_break", None)
        names, attrs = self._carried(assigned(node.body))
        if flag and flag not in names:
            names.append(flag)
        n = next(_counter)
        test_name, body_name = f"__agf_loop_test_{n}", f"__agf_loop_body_{n}"
        test_fn = ast.FunctionDef(
            name=test_name, args=ast.arguments(posonlyargs=[], args=[ast.arg(arg=p)
                                                                  for p in names],
                                               vararg=None, kwonlyargs=[], kw_defaults=[],
                                               kwarg=None, defaults=[]),
            body=[ast.Return(value=node.test)], decorator_list=[], returns=None,
            type_params=[])
        body_fn = _fn_def(body_name, names, node.body, names)
        keywords = []
        if flag:
            keywords.append(ast.keyword(arg="extra_test", value=ast.Lambda(
                args=ast.arguments(posonlyargs=[], args=[ast.arg(arg=p) for p in names],
                                   vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None,
                                   defaults=[]),
                body=_call(_ag("not_"), [_name(flag)]))))
        keywords += [_live_out(node, names), *options, *attrs]
        call = _call(_ag("while_stmt"), [_name(test_name), _name(body_name), _load_state(names),
                                         _const(tuple(names)), _const(where)], keywords)
        return [ast.copy_location(x, node)
                for x in (test_fn, body_fn, *_assign_state(names, call))]

    def visit_For(self, node):
        where = _where(node, self.filename, self.offset)
        self.generic_visit(node)
        bad = _blocker(node.body)
        if bad is not None or node.orelse:
            node.iter = _call(_ag("py_iter"), [node.iter, _const(
                _why(bad) if bad is not None else "it has an else clause"), _const(where)])
            return node
        options = _take_loop_options(node)
        flag = getattr(node, "_ag_break", None)
        names, attrs = self._carried(dict.fromkeys(assigned(node.body) +
                                                   bound_by(node.target)))
        if flag and flag not in names:
            names.append(flag)
        n = next(_counter)
        item = f"__ag_it_{n}"
        body_name = f"__agf_for_body_{n}"
        set_target = ast.Assign(targets=[node.target], value=_name(item))
        body_fn = _fn_def(body_name, [item] + names, [set_target] + node.body, names)
        keywords = []
        if flag:
            keywords.append(ast.keyword(arg="extra_test", value=ast.Lambda(
                args=ast.arguments(posonlyargs=[], args=[ast.arg(arg=p) for p in names],
                                   vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None,
                                   defaults=[]),
                body=_call(_ag("not_"), [_name(flag)]))))
        keywords += [_live_out(node, names), *options, *attrs]
        call = _call(_ag("for_stmt"), [node.iter, _name(body_name), _load_state(names),
                                       _const(tuple(names)), _const(where)], keywords)
        return [ast.copy_location(x, node) for x in (body_fn, *_assign_state(names, call))]


def _callee(call: ast.Call):
    """The function a call names, as written (``ag__converted_call(f)(...)`` names ``f``)."""
    f = call.func
    if isinstance(f, ast.Call) and isinstance(f.func, ast.Name) and f.func.id == AG_CALL:
        return f.args[0]
    return f


def _is_operator(func) -> bool:
    """Whether ``func`` is one of the operators (``ag__.<name>``) or the call converter."""
    if isinstance(func, ast.Name):
        return func.id == AG_CALL
    return isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and \
        func.value.id == AG


def _is_loop_options(stmt) -> bool:
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return False
    f = _callee(stmt.value)
    return (isinstance(f, ast.Attribute) and f.attr == "set_loop_options") or \
        (isinstance(f, ast.Name) and f.id == "set_loop_options")


def _take_loop_options(node) -> list:
    """TF's ``set_loop_options`` calls among a converted loop's statements leave its body: their
    arguments become the loop's options, read before the loop (``opts=``)."""
    calls = [stmt.value for stmt in node.body if _is_loop_options(stmt)]
    if not calls:
        return []
    node.body = [stmt for stmt in node.body if not _is_loop_options(stmt)] or [ast.Pass()]
    keywords = []
    for call in calls:
        keywords += [ast.keyword(arg=name, value=arg)
                     for name, arg in zip(operators.LOOP_OPTIONS, call.args)] + call.keywords
    return [ast.keyword(arg="opts", value=_call(_ag("loop_options"), [], keywords))]


def _live_out(node, names) -> ast.keyword:
    live = getattr(node, "_ag_live_out", None)
    return ast.keyword(arg="live_out", value=_const(
        None if live is None else tuple(n for n in names if n in live)))


def _why(node) -> str:
    kind = type(node).__name__.lower()
    names = {"return": "its body returns", "yield": "its body yields",
             "yieldfrom": "its body yields", "try": "its body has a try statement",
             "raise": "its body raises", "global": "its body declares a global",
             "nonlocal": "its body declares a nonlocal",
             "break": "its body breaks out of it", "continue": "its body continues it"}
    return names.get(kind, f"its body has a {kind} statement")


def rewrite(fdef: ast.FunctionDef, filename: str, offset: int, shadowed=frozenset(),
            recursive=True) -> ast.FunctionDef:
    """Steps 0-2 on the definition ``fdef`` read from ``filename`` (``offset`` added to its
    line numbers gives the file's): the new definition, its control flow as operator calls."""
    fdef._ag_root = True
    fdef.body = _returns_as_values(_fold_returns(fdef.body))
    tree = _Jumps().visit(ast.Module(body=[fdef], type_ignores=[]))
    _mark_liveness(fdef)
    tree = _Control(filename, offset, shadowed, recursive, local_names(fdef)).visit(tree)
    ast.fix_missing_locations(tree)
    return tree.body[0]
