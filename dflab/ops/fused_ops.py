"""``_FusedElementwise``: the op the elementwise fusion pass puts in place of a fused group.

Like ``_Send``/``_Recv`` it is not user-facing and never an op of a user's ``Graph``: the pass
(``dflab.runtime.fusion``) creates it as a node of an execution plan, carrying the group's
``FusedExpression`` and the ops it replaces. Its kernels are in ``dflab.kernels.fused_kernels``.
"""

from __future__ import annotations

from dflab.framework.registry import NotDifferentiable, register_op


def _fused_infer(op):
    raise TypeError("_FusedElementwise nodes are made by the fusion pass, not built in a graph")


register_op("_FusedElementwise", _fused_infer)
NotDifferentiable("_FusedElementwise")
