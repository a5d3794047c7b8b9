"""The ops graph rewrites put in place of the ops they fuse: ``_FusedElementwise`` (the
elementwise fusion pass, ``dflab.runtime.fusion``), TF's ``_FusedMatMul`` and ``_FusedConv2D``
(a contraction, the bias added to its result and an activation of the sum) and
``_FusedMatMulSum`` (an AddN of MatMuls), made by ``dflab.runtime.remapper``.

Like ``_Send``/``_Recv`` they are not user-facing and never ops of a user's ``Graph``: a pass
creates them as nodes of an execution plan, carrying the ops they replace. Their kernels are
in ``dflab.kernels.fused_kernels`` and ``dflab.kernels.contraction_kernels``.
"""

from __future__ import annotations

from dflab.framework.registry import NotDifferentiable, register_op

# op type -> whether it is expensive (the executor's and the worker's scheduling class): a
# fused contraction is as expensive as the contraction it computes.
REWRITE_OPS = {"_FusedElementwise": False, "_FusedMatMul": True, "_FusedConv2D": True,
               "_FusedMatMulSum": True}


def _made_by_a_pass(op):
    raise TypeError(f"{op.type} nodes are made by a graph rewrite, not built in a graph")


for _op_type, _expensive in REWRITE_OPS.items():
    register_op(_op_type, _made_by_a_pass, expensive=_expensive)
    NotDifferentiable(_op_type)
