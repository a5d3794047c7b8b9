"""Distributed execution: clusters of tasks, their servers, and the transports between them
(docs/distributed.md)."""

from dflab.distributed.network import clear_network, simulate_network
from dflab.distributed.server import describe_cluster

__all__ = ["clear_network", "describe_cluster", "launch", "simulate_network"]


def launch(main, cluster, **kwargs):
    """Start ``cluster``'s tasks as Ray actors and run ``main(task)`` on every worker task
    (``dflab.distributed.ray.launcher.launch``; needs ``pip install dflab[ray]``)."""
    from dflab.distributed.ray import launcher  # Ray is imported only when used

    return launcher.launch(main, cluster, **kwargs)
