"""Kernels of ``_Send`` and ``_Recv``: moving a tensor between two partitions of one step.

Both read the step's rendezvous from the execution (``step.rendezvous``, made by the worker for
each step) and name the tensor by its rendezvous key (``dflab.framework.rendezvous.create_key``:
the step's id, the source device and its incarnation, the destination, the edge, and the loop
frame and iteration for a pair inside a while loop). ``_Send`` is an ordinary synchronous kernel:
it hands its input (or, for a control edge, a token) to the rendezvous, which wakes the waiting
``_Recv`` if there is one. ``_Recv`` is asynchronous: it leaves a callback and returns, holding
no thread while the value is on its way.

The kernels never copy: moving a value into the destination's memory is the rendezvous's job
(the worker's local rendezvous calls ``copy_to`` when two memory spaces meet; between devices
sharing the host's memory a value crosses as it is, which is safe because kernels never write
their inputs and variables install new arrays). A variable crosses as its value, read when the
``_Send`` runs (``_Send`` declares no reference input, so the executor reads the variable for
it), as in TF; ops that update a variable are colocated with it. Both kernels work on every
device type (``ANY_DEVICE``): they compute nothing.
"""

from __future__ import annotations

import numpy as np

from dflab.framework import errors
from dflab.framework.rendezvous import ROOT_FRAME_ITER, create_key
from dflab.kernels.registry import ANY_DEVICE, kernel

# What a control-edge _Send sends: the value carries no data, only the fact that it was sent.
CONTROL_TOKEN = np.zeros((0,), np.float32)
CONTROL_TOKEN.flags.writeable = False


def _rendezvous(step, node):
    rdv = getattr(step, "rendezvous", None)
    if rdv is None:
        raise errors.FailedPreconditionError(
            None, node, f"{node.op} {node.name} ran outside a partitioned step (no rendezvous)")
    return rdv


def _key_maker(node):
    """``key(step, frame_iter)``: the rendezvous key of ``node``'s tensor in one step."""
    a = node.attr
    src, dst, edge = a["send_device"], a["recv_device"], a["tensor_name"]
    incarnation = int(a.get("send_device_incarnation", 0))

    def key(step, frame_iter=ROOT_FRAME_ITER):
        return create_key(step.step_id, src, incarnation, dst, edge, frame_iter)

    return key


def _own_copy(error, node):
    """An abort error is shared by every pending receive of the step: give each node its own
    instance, so that attaching the node to it does not rewrite the others'."""
    if isinstance(error, errors.OpError) and error.op is None:
        return type(error)(error.node_def, node, error.message)
    return error


@kernel("_Send", ANY_DEVICE, takes_step=True, routes_only=True)
def _send(node, ctx):
    key_in = _key_maker(node)

    def send_to(step, key, value):
        try:
            _rendezvous(step, node).send(key, value)
        except errors.OpError as e:
            raise _own_copy(e, node) from None

    if node.attr.get("_frame_tagged"):  # inside a loop: one value per frame and iteration
        def send(step, where, value=CONTROL_TOKEN):
            send_to(step, key_in(step, where), value)
    else:
        def send(step, value=CONTROL_TOKEN):
            send_to(step, key_in(step), value)

    return send


@kernel("_Recv", ANY_DEVICE, is_async=True)
def _recv(node, ctx):
    key_in = _key_maker(node)

    def recv_from(step, done, key):
        def arrived(value, error):
            if error is not None:
                done(error=_own_copy(error, node))
            else:
                done(value)

        _rendezvous(step, node).recv_async(key, arrived)

    if node.attr.get("_frame_tagged"):
        def recv(step, done, where):
            recv_from(step, done, key_in(step, where))
    else:
        def recv(step, done):
            recv_from(step, done, key_in(step))

    return recv
