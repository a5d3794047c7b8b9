"""A test-only expensive op that waits at a barrier: a step holding two of them on a 2-party
barrier finishes only if the executor really runs both at the same time."""

import threading

import dflab as tf
from dflab.framework import registry
from dflab.kernels.registry import register_kernel

BARRIERS: dict[str, threading.Barrier] = {}


def barrier(x, key: str):
    """``x`` passed through an op that waits at ``BARRIERS[key]`` when it runs."""
    if "TestBarrier" not in registry.registered_ops():
        registry.register_op("TestBarrier", lambda op: [(op.inputs[0].dtype, op.inputs[0].shape)],
                             expensive=True, stateful=True)

        def factory(node, ctx):
            def wait(v):
                BARRIERS[node.attr["key"]].wait()
                return v

            return wait

        register_kernel("TestBarrier", factory=factory)
    return tf.get_default_graph()._create_op("TestBarrier", [x], {"key": key}, None).outputs[0]
