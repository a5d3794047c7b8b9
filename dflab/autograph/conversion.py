"""AutoGraph's entry points: a Python function in, its converted twin out.

``convert(fn)`` finds ``fn``'s source (a ``def``, or a lambda told apart by its line and
parameters), has ``transformer.rewrite`` turn its control flow into operator calls, compiles
the result once per code object and binds it to ``fn``'s own globals, defaults and closure
cells, so the converted function reads and assigns what ``fn`` would. ``converted_call`` is
what the converted code calls in each callee's place: the user's functions are converted in
turn, anything else (builtins, dflab, the libraries) is called as written.
"""

from __future__ import annotations

import ast
import functools
import inspect
import sys
import types
import warnings

from dflab.autograph import operators
from dflab.autograph.transformer import AG, AG_CALL, PYTHON_BUILTINS, rewrite

DO_NOT_CONVERT = "__dflab_do_not_convert__"


def _source(fn):
    """``fn``'s own definition, parsed, and its file: not the function a decorator wrapped
    (``inspect.getsource`` follows ``__wrapped__``; the wrapper is converted, and converts
    what it calls in turn). An indented definition (a method, a nested function) is parsed
    inside an ``if`` rather than dedented, which would change its multi-line strings."""
    lines, start = inspect.findsource(fn)
    block = "".join(inspect.getblock(lines[start:]))
    if block[:1] in (" ", "\t"):
        return ast.parse("if 1:\n" + block).body[0].body[0], 2
    return ast.parse(block).body[0], 1


def _shadowed(fn) -> frozenset:
    """The builtins' names ``fn`` or its module rebinds: their calls are the user's."""
    code = fn.__code__
    own = {*code.co_varnames, *code.co_freevars, *code.co_cellvars}
    scope = fn.__globals__
    return frozenset(n for n in PYTHON_BUILTINS if n in scope or n in own)


def _definition(fn):
    """(the definition to convert, its file, what to add to its line numbers), or None."""
    if fn.__name__ == "<lambda>":
        return _lambda_definition(fn)
    fdef, first = _source(fn)
    if not isinstance(fdef, ast.FunctionDef) or fdef.name != fn.__code__.co_name:
        return None
    fdef.decorator_list = []
    if not _mangle_private_names(fdef, fn.__qualname__):
        return None
    return fdef, inspect.getsourcefile(fn) or "<unknown>", fn.__code__.co_firstlineno - first


def _private(name) -> bool:
    return bool(name) and name.startswith("__") and not name.endswith("__") and "." not in name


def _mangle_private_names(fdef, qualname: str) -> bool:
    """Python mangles ``self.__w`` in a class's methods to ``self._Class__w`` when it compiles
    the class; the converted method is compiled alone, so its names are mangled here. Only
    for a method defined in the class body (``Class.method``) without classes inside it;
    anything else holding private names is not converted — it runs as written, as TF runs
    such functions. False where it is not to be converted."""
    nodes = list(ast.walk(fdef))
    if not any(_private(name) for node in nodes for name in _identifiers(node)):
        return True
    parts = qualname.split(".")
    owner = parts[-2] if len(parts) == 2 else ""
    prefix = "_" + owner.lstrip("_")
    if prefix == "_" or any(isinstance(n, ast.ClassDef) for n in nodes):
        return False
    for node in nodes:
        for field in ("id", "attr", "arg", "name", "asname"):
            value = getattr(node, field, None)
            if isinstance(value, str) and _private(value) and node is not fdef:
                setattr(node, field, prefix + value)
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            node.names = [prefix + n if _private(n) else n for n in node.names]
    return True


def _identifiers(node):
    for field in ("id", "attr", "arg", "name", "asname"):
        value = getattr(node, field, None)
        if isinstance(value, str):
            yield value
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        yield from node.names


def _lambda_definition(fn):
    """A lambda as a ``def`` returning its expression: found in its file by its line and its
    parameters' names (two such lambdas on one line cannot be told apart: None)."""
    code = fn.__code__
    lines, _ = inspect.findsource(fn)
    filename = inspect.getsourcefile(fn) or "<unknown>"
    found = [node for node in ast.walk(ast.parse("".join(lines)))
             if isinstance(node, ast.Lambda) and node.lineno == code.co_firstlineno and
             _parameters(node.args) == _code_parameters(code)]
    if len(found) != 1:
        return None
    node = found[0]
    if any(_private(name) for n in ast.walk(node) for name in _identifiers(n)):
        return None  # (where it would need mangling: run as written, as TF does)
    fdef = ast.FunctionDef(name="__ag_lambda", args=node.args,
                           body=[ast.copy_location(ast.Return(value=node.body), node.body)],
                           decorator_list=[], returns=None, type_params=[])
    return ast.copy_location(fdef, node), filename, 0


def _parameters(args: ast.arguments) -> tuple:
    """A definition's parameter names in a code object's order (``co_varnames``' first)."""
    names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
    names += [a.arg for a in (args.vararg, args.kwarg) if a is not None]
    return tuple(names)


def _code_parameters(code) -> tuple:
    count = code.co_argcount + code.co_kwonlyargcount
    count += bool(code.co_flags & inspect.CO_VARARGS) + bool(code.co_flags & inspect.CO_VARKEYWORDS)
    return code.co_varnames[:count]


def _converted_tree(fn, recursive=True):
    """``fn``'s definition with its control flow converted, its file and what to add to its
    line numbers; None where its source cannot be had (a builtin, code typed at a prompt)."""
    if not inspect.isfunction(fn):
        return None
    try:
        definition = _definition(fn)
    except (OSError, TypeError, SyntaxError):
        return None
    if definition is None:
        return None
    fdef, filename, offset = definition
    return rewrite(fdef, filename, offset, _shadowed(fn), recursive), filename, offset


def to_code(fn, recursive=True, experimental_optional_features=None) -> str:
    """TF's ``tf.autograph.to_code``: the Python source AutoGraph turns ``fn`` into (its loops
    and branches as calls of the ``ag__`` operators; with ``recursive``, each call of another
    function through ``ag__converted_call``, which converts the user's own functions)."""
    converted = _converted_tree(getattr(fn, "__func__", fn), recursive)
    if converted is None:
        raise ValueError(f"AutoGraph cannot read the source of {fn!r}: only a function defined "
                         "in a file (or a notebook cell) can be converted.")
    return ast.unparse(converted[0]) + "\n"


def _converted_code(fn, recursive):
    """The code object of ``fn`` converted, its free variables ``fn``'s and ``ag__``; None where
    ``fn`` cannot be converted. Kept per code object: a helper is converted once, however
    many functions (closures made by one ``def``) share its code."""
    code = fn.__code__
    key = (code, code.co_filename, _shadowed(fn), recursive)
    known = _CONVERTED.get(key)
    if known is not None:
        return known or None
    converted = _converted_tree(fn, recursive)
    if converted is None:
        result = False
    else:
        fdef, filename, offset = converted
        ast.increment_lineno(fdef, offset)
        # Named apart inside the maker: the body's own name (recursion, ``f.__name__``) must
        # find what it finds in fn, not the maker's local definition.
        fdef.name = "__ag_converted"
        # Compiled inside a maker whose parameters are fn's free variables and the operators'
        # name, so that the new code reads them as free variables too: it is then bound to
        # fn's own cells, and sees (and assigns, ``nonlocal``) what fn would.
        maker = ast.FunctionDef(
            name="__ag_maker", args=ast.arguments(
                posonlyargs=[], args=[ast.arg(arg=v) for v in (*code.co_freevars, AG, AG_CALL)],
                vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[]),
            body=[fdef], decorator_list=[], returns=None, type_params=[])
        module = ast.Module(body=[maker], type_ignores=[])
        ast.fix_missing_locations(module)
        maker_code = _nested_code(compile(module, filename, "exec"), "__ag_maker")
        # (by name: a default's lambda or comprehension is compiled into the maker too)
        result = _nested_code(maker_code, "__ag_converted").replace(co_name=code.co_name)
        if hasattr(code, "co_qualname"):  # (Python 3.11: tracebacks show the user's name)
            result = result.replace(co_qualname=code.co_qualname)
    if len(_CONVERTED) >= _CONVERTED_MAX:
        _CONVERTED.clear()
    _CONVERTED[key] = result
    return result or None


def _nested_code(code, name: str) -> types.CodeType:
    return next(c for c in code.co_consts if isinstance(c, types.CodeType) and
                c.co_name == name)


_CONVERTED: dict = {}  # (code, file, shadowed builtins, recursive) -> converted code, or False
_CONVERTED_MAX = 1024
_OPERATORS_CELL = types.CellType(operators)


def convert(fn, recursive=True):
    """``fn`` with its control flow converted (see the module docstring); ``fn`` itself where
    its source cannot be had, or where ``do_not_convert`` marked it. With ``recursive``, the
    functions of the user's code it calls are converted when they are called."""
    if getattr(fn, DO_NOT_CONVERT, False):
        return fn
    if isinstance(fn, functools.partial):
        inner = convert(fn.func, recursive)
        return functools.partial(inner, *fn.args, **fn.keywords)
    if inspect.ismethod(fn):
        return types.MethodType(convert(fn.__func__, recursive), fn.__self__)
    if not inspect.isfunction(fn):
        if callable(fn) and not isinstance(fn, type) and inspect.ismethod(fn.__call__):
            return convert(fn.__call__, recursive)  # a callable object: its method (TF's)
        return fn
    if AG in fn.__code__.co_freevars or AG_CALL in fn.__code__.co_freevars:
        return fn  # a lambda or comprehension of converted code: converted with it
    known = fn.__dict__.get(_MEMO)
    if known is not None and known[0] == recursive and known[1] is fn.__code__ and \
            known[2].__wrapped__ is fn:  # (a wrapper that copied fn's __dict__ is not fn)
        new = known[2]
        new.__defaults__, new.__kwdefaults__ = fn.__defaults__, fn.__kwdefaults__
        return new
    code = _converted_code(fn, recursive)
    if code is None:
        return fn
    # Made with fn's own globals, it sees the module as it is when it runs (a global rebound
    # later included), as fn would.
    cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
    cells[AG] = _OPERATORS_CELL
    cells[AG_CALL] = _CONVERTED_CALL_CELL
    new = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__,
                             tuple(cells[name] for name in code.co_freevars))
    new.__kwdefaults__ = fn.__kwdefaults__
    functools.update_wrapper(new, fn)
    new.__wrapped__ = fn
    new.__dflab_autograph__ = True
    new.__dict__.pop(_MEMO, None)
    setattr(new, DO_NOT_CONVERT, True)  # (converting it again would convert its conversion)
    fn.__dict__[_MEMO] = (recursive, fn.__code__, new)  # called again: converted once
    return new


_MEMO = "__dflab_converted__"


# --- calls the converted code makes --------------------------------------------------------
# Whose functions are called as they are: dflab's own and the libraries TF's AutoGraph leaves
# alone (their code has no tensor conditions to convert), the standard library included.
_LIBRARIES = frozenset({"dflab", "numpy", "tensorflow", "keras", "tf_keras", "matplotlib",
                        "pandas", "PIL", "absl", "IPython", "ipykernel", "pytest", "_pytest",
                        *sys.stdlib_module_names})
_NOT_PLAIN = (inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR |
              inspect.CO_ITERABLE_COROUTINE)


def converted_call(f):
    """What converted code calls in ``f``'s place (TF's ``converted_call``): a function or
    method of the user's own code converted in turn, so that a helper's tensor ``if`` becomes
    a ``cond`` as the caller's does; anything else as it is — builtins, classes, dflab's and
    the libraries' functions, ``tf.function``s, generators and functions marked
    ``do_not_convert`` (a lambda is converted where its source can be told apart)."""
    kind = type(f)
    if kind is types.FunctionType:
        taking = _takes_functions().get(f)
        return taking if taking is not None else _converted(f)
    if kind is types.MethodType:
        func = f.__func__
        new = _converted(func) if type(func) is types.FunctionType else func
        return f if new is func else types.MethodType(new, f.__self__)
    if kind is functools.partial:
        new = converted_call(f.func)
        return f if new is f.func else functools.partial(new, *f.args, **f.keywords)
    # An instance of the user's class with a __call__ of its own (as the class holds it: a
    # static or class method binds otherwise).
    call = inspect.getattr_static(kind, "__call__", None)
    if isinstance(call, staticmethod):
        return _converted(call.__func__) if type(call.__func__) is types.FunctionType else f
    if isinstance(call, classmethod):
        func = call.__func__
        new = _converted(func) if type(func) is types.FunctionType else func
        return f if new is func else types.MethodType(new, kind)
    if type(call) is types.FunctionType:
        new = _converted(call)
        if new is not call:
            return types.MethodType(new, f)
    return f


def _takes_functions() -> dict:
    """dflab's builders that take functions (``tf.cond``'s branches, ``tf.while_loop``'s test
    and body, ``map_fn``'s ``fn`` …) -> the same builder converting the functions it is given,
    as TF's do where AutoGraph is on: a named function's tensor ``if`` converts as a lambda's."""
    if not _TAKES_FUNCTIONS:
        from dflab.ops import control_flow_ops, functional_ops

        for builder in (control_flow_ops.cond, control_flow_ops.case,
                        control_flow_ops.while_loop, functional_ops.map_fn,
                        functional_ops.scan, functional_ops.foldl, functional_ops.foldr):
            _TAKES_FUNCTIONS[builder] = _converting_arguments(builder)
    return _TAKES_FUNCTIONS


_TAKES_FUNCTIONS: dict = {}


def _converting_arguments(builder):
    @functools.wraps(builder)
    def with_converted_functions(*args, **kwargs):
        return builder(*[_functions_converted(a) for a in args],
                       **{k: _functions_converted(v) for k, v in kwargs.items()})

    return with_converted_functions


def _functions_converted(value, depth=2):
    """``value`` with the functions in it converted: itself, or (``tf.case``'s pairs) those
    in a list or tuple of them."""
    if type(value) in (types.FunctionType, types.MethodType, functools.partial):
        return converted_call(value)
    if depth and isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(_functions_converted(v, depth - 1) for v in value)
    return value


def _converted(fn):
    module = fn.__module__ or ""
    if module.partition(".")[0] in _LIBRARIES or fn.__code__.co_flags & _NOT_PLAIN or \
            _installed(fn.__code__.co_filename):
        return fn
    try:
        return convert(fn)
    except Exception as e:  # noqa: BLE001 - TF's rule: what cannot be converted runs as written
        warnings.warn(f"AutoGraph could not convert {fn.__qualname__} ({type(e).__name__}: "
                      f"{e}); it runs as written, its Python control flow unconverted.",
                      stacklevel=3)
        return fn


def _installed(filename: str) -> bool:
    """Whether code comes from an installed package (``site-packages``): its functions are
    called as written — they hold no tensor conditions of the user's, and AutoGraph's rewrite
    of arbitrary library code is a risk TF takes and dflab does not. The user's own scripts,
    notebooks and project sources (editable installs included) are converted."""
    known = _INSTALLED.get(filename)
    if known is None:
        parts = filename.replace("\\", "/").split("/")
        known = _INSTALLED[filename] = "site-packages" in parts or "dist-packages" in parts
    return known


_INSTALLED: dict = {}
_CONVERTED_CALL_CELL = types.CellType(converted_call)
