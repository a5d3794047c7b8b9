"""Control ops: ``no_op``, ``group``, ``tuple``, ``with_dependencies``.

(Dynamic control flow — Switch/Merge/Enter/Exit/NextIteration — will live here too.)
"""

from __future__ import annotations

import builtins

from dflab.framework import ops as _ops
from dflab.framework.registry import NotDifferentiable, register_op
from dflab.ops import array_ops

register_op("NoOp", lambda op: [], stateful=True)
NotDifferentiable("NoOp")


def no_op(name=None):
    return _ops.get_default_graph()._create_op("NoOp", [], {}, name, site=_ops._user_site())


def _as_op(x):
    if hasattr(x, "_as_graph_element") and not isinstance(x, (_ops.Tensor, _ops.Operation)):
        x = x._as_graph_element()
    return x.op if isinstance(x, _ops.Tensor) else x


def group(*inputs, name=None):
    """An op that runs all ``inputs`` (ops or tensors) and produces nothing."""
    ops = []
    for x in inputs:
        if isinstance(x, (list, builtins.tuple)):
            ops.extend(_as_op(e) for e in x)
        elif x is not None:
            ops.append(_as_op(x))
    with _ops.control_dependencies(ops):
        return no_op(name=name)


def tuple(tensors, name=None, control_inputs=None):  # noqa: A001 - TF's public name
    """Identities of ``tensors`` that are only available once all of them are computed."""
    tensors = list(tensors)
    with _ops.name_scope(name, "tuple", [t for t in tensors if t is not None]):
        deps = [t for t in tensors if t is not None] + list(control_inputs or [])
        gate = group(*deps, name=None)
        out = []
        for t in tensors:
            if t is None:
                out.append(None)
            elif isinstance(t, _ops.Operation):
                with _ops.control_dependencies([gate]):
                    out.append(group(t))
            else:
                out.append(with_dependencies([gate], t))
        return out


def with_dependencies(dependencies, output_tensor, name=None):
    with _ops.name_scope(name, "control_dependency", list(dependencies) + [output_tensor]) as sc:
        with _ops.control_dependencies(dependencies):
            return array_ops.identity(output_tensor, name=sc[:-1] + "/" if sc else None)


__all__ = ["no_op", "group", "tuple", "with_dependencies"]
