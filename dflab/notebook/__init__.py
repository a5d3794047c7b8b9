"""dflab's notebook layer: magics, widgets and live views (docs/notebook.md).

It observes the runtime and draws through ``dflab.visualize``; nothing imports it. Names are
resolved on first use so that ``%load_ext dflab`` does not pay for the widget stack.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "ClusterView": "dflab.notebook.cluster_view",
    "GraphView": "dflab.notebook.graph_view",
    "Stepper": "dflab.notebook.stepper",
    "Timeline": "dflab.notebook.timeline",
    "TrainingMonitor": "dflab.notebook.monitor",
    "WorkerProgress": "dflab.notebook.worker_progress",
    "load_ipython_extension": "dflab.notebook.magics",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'dflab.notebook' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__():
    return __all__
