"""``tf.py_func`` and ``tf.numpy_function``: a Python function as a graph op.

The op (``PyFunc``, or ``PyFuncStateless`` with ``stateful=False``) carries a ``token``; the
function is kept in the graph's ``_py_funcs`` table, in this process only, and never written
into a GraphDef (see ``dflab.kernels.script_kernels``). The kernel finds it by token alone
(``registered_function``), as TF's kernel asks its process-wide registry: a kernel is built from
plain node data, without the graph. Tokens carry a random part drawn once per process, so a
token read from another process's graph never names a function of this one. Outputs have the
declared dtypes and unknown shapes (use ``set_shape``). The ops run on the CPU only and have no
gradient, as in TF.
"""

from __future__ import annotations

import itertools
import secrets
import weakref

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.registry import NotDifferentiable, register_op
from dflab.framework.tensor_shape import unknown_shape

_tokens = itertools.count()
_PROCESS = secrets.token_hex(4)
_graph_of_token: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def registered_function(token: str):
    """The function ``py_func`` registered under ``token`` in this process, or None (unknown
    token, or its graph is gone)."""
    graph = _graph_of_token.get(token)
    return None if graph is None else graph.__dict__.get("_py_funcs", {}).get(token)


def register_function(graph, func) -> str:
    """Keep ``func`` alive with ``graph`` under a new token (what an op's ``token`` attr names;
    ``py_func`` and ``Dataset.from_generator`` use it) and return the token."""
    token = f"pyfunc_{_PROCESS}_{next(_tokens)}"
    graph.__dict__.setdefault("_py_funcs", {})[token] = func  # the graph keeps it alive
    _graph_of_token[token] = graph
    return token


def adopt_functions(source, graph) -> None:
    """Hand the functions registered with ``source`` over to ``graph`` (a traced dataset
    function's graph is dropped after tracing; its ``py_func``s live on with the outer graph)."""
    funcs = source.__dict__.pop("_py_funcs", {})
    graph.__dict__.setdefault("_py_funcs", {}).update(funcs)
    for token in funcs:
        _graph_of_token[token] = graph


def _infer(op):
    return [(dt, unknown_shape()) for dt in op.get_attr("Tout")]


# Blocking: the Python function may wait on anything (a queue, a lock); run on a thread of the
# pool, the step can be cancelled (its session closed, its timeout met) while it waits.
register_op("PyFunc", _infer, stateful=True, expensive=True, blocking=True)
register_op("PyFuncStateless", _infer, expensive=True, blocking=True)
NotDifferentiable("PyFunc")
NotDifferentiable("PyFuncStateless")
# ``tf.py_function``'s op: the same kernel, given a function that runs eagerly (built, with
# its gradient, in ``dflab.eager.py_function``, above this layer).
register_op("EagerPyFunc", _infer, stateful=True, expensive=True, blocking=True)


def py_func(func, inp, Tout, stateful=True, name=None):  # noqa: N803 - TF's argument name
    """Wrap ``func(*numpy_values)`` as an op; returns a tensor when ``Tout`` is one dtype, a
    list when it is a list, and the op when it is an empty list."""
    op_type = "PyFunc" if stateful else "PyFuncStateless"
    return script_op(op_type, func, inp, Tout, name or "PyFunc")


def script_op(op_type: str, func, inp, Tout, name: str,  # noqa: N803 - TF's argument name
              on_token=None):
    """A ``PyFunc``-like op of ``op_type`` calling ``func`` (what ``py_func`` and
    ``py_function`` build): a tensor for one dtype, a list for a list, the op for ``[]``.
    ``on_token(token)`` hears the function's token before the op exists (an eager op runs as
    it is made)."""
    if not callable(func):
        raise TypeError(f"py_func needs a callable, got {type(func).__name__}")
    single = not isinstance(Tout, (list, tuple))
    tout = [_dt.as_dtype(t) for t in ([Tout] if single else Tout)]
    inputs = [_ops.convert_to_tensor(x) for x in (inp or [])]
    token = register_function(_ops.graph_of(inputs), func)
    if on_token is not None:
        on_token(token)
    op = _ops.apply_op(op_type, inputs,
                       {"token": token, "Tin": [t.dtype.base_dtype for t in inputs],
                        "Tout": tout}, name)
    if single:
        return op.outputs[0]
    return list(op.outputs) if tout else op


def numpy_function(func, inp, Tout, name=None):  # noqa: N803 - TF's argument name
    """TF 1.14's name for a stateful ``py_func``."""
    return py_func(func, inp, Tout, stateful=True, name=name)


__all__ = ["py_func", "numpy_function"]
