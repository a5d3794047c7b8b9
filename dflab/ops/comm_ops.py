"""``_Send`` and ``_Recv``: the ops the partitioner puts at every cut between two devices.

They are not user-facing (no builder, nothing in ``__all__``) and not differentiable; the
partitioner (``dflab.runtime.partition``) creates them as lightweight nodes of a partition plan,
never as ops of the user's graph. A ``_Send`` hands one tensor to the step's rendezvous; the
matching ``_Recv`` on the other device waits for it there. Both carry TF's attributes:
``tensor_name``, ``send_device``, ``send_device_incarnation``, ``recv_device`` and
``client_terminated``; the pair is matched by (``tensor_name``, ``send_device``,
``recv_device``), which with the step id and the sender's incarnation make its rendezvous key
(``dflab.framework.rendezvous.create_key``).

A ``_Send`` without a data input stands for a *control* edge that crosses devices: it runs after
its control input and sends a token, and the ops that depended on the sender take the ``_Recv``
as a control input.
"""

from __future__ import annotations

from dflab.framework import dtypes as _dt
from dflab.framework.registry import NotDifferentiable, register_op
from dflab.framework.tensor_shape import TensorShape, unknown_shape


def _send_infer(op):
    if len(op.inputs) > 1:
        raise ValueError(f"_Send takes at most one input, got {len(op.inputs)}")
    return []


def _recv_infer(op):
    dtype = _dt.as_dtype(op.get_attr("tensor_type"))
    shape = op.attrs.get("shape")
    return [(dtype, TensorShape(shape) if shape is not None else unknown_shape())]


# A _Send runs even on a dead value (an untaken cond branch) and sends it dead, so that the
# waiting _Recv learns of it instead of waiting for ever (TF sends an is_dead flag).
register_op("_Send", _send_infer, stateful=True).extra["accepts_dead"] = True
register_op("_Recv", _recv_infer, stateful=True)
NotDifferentiable("_Send")
NotDifferentiable("_Recv")
