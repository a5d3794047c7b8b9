"""``_Send`` and ``_Recv``: the ops the partitioner puts at every cut between two devices.

They are not user-facing (no builder, nothing in ``__all__``) and not differentiable; the
partitioner (``dflab.runtime.partition``) creates them as lightweight nodes of a partition plan,
never as ops of the user's graph. A ``_Send`` hands one tensor to the step's rendezvous; the
matching ``_Recv`` on the other device waits for it there. Both carry TF's attributes:
``tensor_name``, ``send_device``, ``send_device_incarnation``, ``recv_device`` and
``client_terminated``; the pair is matched by (``tensor_name``, ``send_device``,
``recv_device``), which is also what the rendezvous key is made of.

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
    shape = op._attrs.get("shape")
    return [(dtype, TensorShape(shape) if shape is not None else unknown_shape())]


# A _Send runs even on a dead value (an untaken cond branch) and sends it dead, so that the
# waiting _Recv learns of it instead of waiting for ever (TF sends an is_dead flag).
register_op("_Send", _send_infer, stateful=True).extra["accepts_dead"] = True
register_op("_Recv", _recv_infer, stateful=True)
NotDifferentiable("_Send")
NotDifferentiable("_Recv")


def rendezvous_key(send_device: str, send_device_incarnation: int, recv_device: str,
                   tensor_name: str, frame_iter: str = "0:0") -> str:
    """TF's rendezvous key: ``src;incarnation;dst;tensor_name;frame:iter``.

    Every ``_Send``/``_Recv`` pair of a step has its own key; a key is unique within one step's
    rendezvous because the partitioner makes one pair per tensor per destination device. Inside
    a while loop one pair carries a value per iteration: ``frame_iter`` is then where the node
    runs, frame names and iteration numbers from the outermost loop in
    (``while/while_context:3/inner/while_context:0``), the same text in every partition.
    """
    return (f"{send_device};{int(send_device_incarnation):x};{recv_device};{tensor_name};"
            f"{frame_iter}")


def key_of(op, frame_iter: str = "0:0") -> str:
    """The rendezvous key of a ``_Send`` or ``_Recv`` node, from its attributes."""
    a = op._attrs
    return rendezvous_key(a["send_device"], a.get("send_device_incarnation", 0),
                          a["recv_device"], a["tensor_name"], frame_iter)
