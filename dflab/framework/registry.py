"""Op schemas and gradient functions: plain dicts behind ``register_*`` functions.

An ``OpDef`` holds what the graph needs to know about an op type, without any execution code:
its shape/dtype inference rule, whether it is stateful (never pruned by CSE, never constant
folded), which inputs take a variable *reference* instead of a value, and whether the executor
should treat it as expensive (dispatch to the inter-op pool) or blocking. Kernels live in
``dflab.kernels`` and are registered separately, per device type.

A duplicate registration fails and names where the first one came from.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field

_OPS: dict[str, OpDef] = {}
_GRADIENTS: dict[str, Callable | None] = {}
_GRADIENT_SITES: dict[str, str] = {}


@dataclass
class OpDef:
    type: str
    infer: Callable  # (op) -> list[(DType, TensorShape)]
    stateful: bool = False
    ref_inputs: tuple = ()
    expensive: bool = False
    blocking: bool = False
    site: str = ""
    doc: str = ""
    extra: dict = field(default_factory=dict)
    # Writes the variable whose handle is its input 0 (a resource variable's update).
    writes_handle: bool = False

    @property
    def writes_variables(self) -> bool:
        """Whether running the op changes a variable (by reference or through a handle)."""
        return bool(self.ref_inputs) or self.writes_handle


def _caller_site(depth: int = 2) -> str:
    # A raw frame lookup: inspect.stack() reads every frame's source file and made registering
    # the ~600 ops and gradients dominate ``import dflab``.
    frame = sys._getframe(depth)
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


def register_op(
    op_type: str,
    infer: Callable,
    *,
    stateful: bool = False,
    ref_inputs: tuple = (),
    expensive: bool = False,
    blocking: bool = False,
) -> OpDef:
    """Register the schema of ``op_type``; fails if it is already registered."""
    if op_type in _OPS:
        raise KeyError(f"Op type {op_type!r} is already registered at {_OPS[op_type].site}")
    opdef = OpDef(op_type, infer, stateful, tuple(ref_inputs), expensive, blocking, _caller_site())
    _OPS[op_type] = opdef
    return opdef


def get_op_def(op_type: str) -> OpDef:
    try:
        return _OPS[op_type]
    except KeyError:
        raise KeyError(f"Op type {op_type!r} is not registered") from None


def registered_ops() -> dict[str, OpDef]:
    return dict(_OPS)


class RegisterGradient:
    """Decorator registering ``fn(op, *grads) -> input grads`` for an op type (TF's API)."""

    def __init__(self, op_type: str):
        if not isinstance(op_type, str):
            raise TypeError("op_type must be a string")
        self._op_type = op_type

    def __call__(self, fn: Callable) -> Callable:
        _register_gradient(self._op_type, fn, _caller_site())
        return fn


def _register_gradient(op_type: str, fn, site: str) -> None:
    if op_type in _GRADIENTS:
        raise KeyError(
            f"Gradient for {op_type!r} is already registered at {_GRADIENT_SITES[op_type]}"
        )
    _GRADIENTS[op_type] = fn
    _GRADIENT_SITES[op_type] = site


def NotDifferentiable(op_type: str) -> None:  # noqa: N802 - TF's public name
    """Declare that ``op_type`` has no gradient (its inputs get None)."""
    _register_gradient(op_type, None, _caller_site())


no_gradient = NotDifferentiable


def get_gradient_function(op_type: str):
    """Returns (known, fn): fn is None for a non-differentiable op."""
    if op_type in _GRADIENTS:
        return True, _GRADIENTS[op_type]
    return False, None


# An op's attribute saying how many of its first outputs carry gradients (a traced function's
# forward call: its outputs, then values its gradient reads, which none differentiates).
GRADIENT_OUTPUTS = "_gradient_outputs"


def op_gradient_function(op):
    """(known, fn) for ``op``: the gradient registered under the name its
    ``_gradient_op_type`` attribute gives (``custom_gradient``'s, TF's override), else its
    type's."""
    return get_gradient_function(op.attrs.get("_gradient_op_type") or op.type)
