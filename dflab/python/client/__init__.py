"""``tensorflow.python.client``: ``device_lib`` and ``timeline``."""

from dflab.client import device_lib, timeline

__all__ = ["device_lib", "timeline"]
