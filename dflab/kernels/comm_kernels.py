"""Kernels of ``_Send`` and ``_Recv``: moving a tensor between two partitions of one step.

Both read the step's rendezvous from the execution (``execution.rendezvous``, set by the session
for every partition of a step). ``_Send`` is an ordinary synchronous kernel: it hands its input
(or, for a control edge, a token) to the rendezvous, which wakes the waiting ``_Recv`` if there is
one. ``_Recv`` is asynchronous: it leaves a callback and returns, holding no thread while the
value is on its way.

Devices of one session share a process, so a value crosses without a copy: values are immutable
by convention (kernels never write their inputs, variables install new arrays). A variable crosses
as its value, read when the ``_Send`` runs (``_Send`` declares no reference input, so the
executor reads the variable for it), as in TF; ops that update a variable are colocated with it.
"""

from __future__ import annotations

import numpy as np

from dflab.framework import errors
from dflab.kernels.registry import kernel
from dflab.ops.comm_ops import key_of

# What a control-edge _Send sends: the value carries no data, only the fact that it was sent.
CONTROL_TOKEN = np.zeros((0,), np.float32)
CONTROL_TOKEN.flags.writeable = False

_DEVICE_TYPES = ("CPU", "GPU")


def _rendezvous(step, op):
    rdv = getattr(step, "rendezvous", None)
    if rdv is None:
        raise errors.FailedPreconditionError(
            None, op, f"{op.type} {op.name} ran outside a partitioned step (no rendezvous)")
    return rdv


def _own_copy(error, op):
    """An abort error is shared by every pending receive of the step: give each node its own
    instance, so that attaching the node to it does not rewrite the others'."""
    if isinstance(error, errors.OpError) and error.op is None:
        return type(error)(error.node_def, op, error.message)
    return error


@kernel("_Send", _DEVICE_TYPES, takes_step=True)
def _send(op, ctx):
    key = key_of(op)

    def send_to(step, key, value):
        try:
            _rendezvous(step, op).send(key, value)
        except errors.OpError as e:
            raise _own_copy(e, op) from None

    if op._attrs.get("_frame_tagged"):  # inside a loop: one value per frame and iteration
        def send(step, where, value=CONTROL_TOKEN):
            send_to(step, key_of(op, where), value)
    else:
        def send(step, value=CONTROL_TOKEN):
            send_to(step, key, value)

    return send


@kernel("_Recv", _DEVICE_TYPES, is_async=True)
def _recv(op, ctx):
    key = key_of(op)

    def recv_from(step, done, key):
        def arrived(value, error):
            if error is not None:
                done(error=_own_copy(error, op))
            else:
                done(value)

        _rendezvous(step, op).recv_async(key, arrived)

    if op._attrs.get("_frame_tagged"):
        def recv(step, done, where):
            recv_from(step, done, key_of(op, where))
    else:
        def recv(step, done):
            recv_from(step, done, key)

    return recv
