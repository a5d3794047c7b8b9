"""``tf.train.replica_device_setter``: put variables on parameter-server tasks and everything
else on the worker, as a device function for ``tf.device`` (TF1's API and rules).

A *ps op* (variables and the other state ops in ``ps_ops``) goes to ``/job:ps/task:k``, ``k``
chosen by the strategy: round-robin by default, or ``GreedyLoadBalancingStrategy`` (the task
holding the fewest bytes so far). Every other op goes to ``worker_device``. Either way the
device is merged with what inner ``tf.device`` scopes already set: an explicit job, task or
device type wins, and a ps op already pinned to another job keeps it.
"""

from __future__ import annotations

import numpy as np

from dflab.framework.device_spec import DeviceSpec
from dflab.framework.dtypes import as_dtype
from dflab.framework.tensor_shape import as_shape

STANDARD_PS_OPS = ("Variable", "VariableV2", "AutoReloadVariable", "MutableHashTable",
                   "MutableHashTableV2", "MutableHashTableOfTensors",
                   "MutableHashTableOfTensorsV2", "MutableDenseHashTable",
                   "MutableDenseHashTableV2", "VarHandleOp", "BoostedTreesEnsembleResourceHandleOp")


class _RoundRobinStrategy:
    """Task ``0, 1, …, n-1, 0, …`` for successive ps ops."""

    def __init__(self, num_tasks: int):
        self._num_tasks = num_tasks
        self._next = 0

    def __call__(self, unused_op) -> int:
        task = self._next
        self._next = (self._next + 1) % self._num_tasks
        return task


def byte_size_load_fn(op) -> int:
    """The bytes a variable op's value takes (its static shape must be fully defined)."""
    # Device functions run while the op is made: its attrs are there, its outputs may not be.
    attrs = getattr(op, "attrs", None) or {}
    shape, dtype = attrs.get("shape"), attrs.get("dtype")
    if (shape is None or dtype is None) and op.outputs:
        shape, dtype = op.outputs[0].shape, op.outputs[0].dtype
    if shape is None or dtype is None:
        return 0
    shape = as_shape(shape)
    if not shape.is_fully_defined():
        raise ValueError(f"The shape of variable {op.name} is not fully defined ({shape}): "
                         "byte_size_load_fn needs it")
    return int(np.prod(shape.as_list(), dtype=np.int64)) * as_dtype(dtype).base_dtype.size


class GreedyLoadBalancingStrategy:
    """Put each ps op on the task with the least load so far (``load_fn``: its bytes by
    default): TF's greedy strategy, which balances variables of different sizes."""

    def __init__(self, num_tasks: int, load_fn=byte_size_load_fn):
        if num_tasks < 1:
            raise ValueError(f"num_tasks must be positive, got {num_tasks}")
        self._num_tasks = num_tasks
        self._load_fn = load_fn
        self._ps_loads = np.zeros(num_tasks)

    def __call__(self, op) -> int:
        task = int(np.argmin(self._ps_loads))
        self._ps_loads[task] += self._load_fn(op)
        return task


class _ReplicaDeviceChooser:
    def __init__(self, ps_tasks, ps_device, worker_device, merge_devices, ps_ops, ps_strategy):
        self._ps_tasks = ps_tasks
        self._ps_device = ps_device
        self._worker_device = worker_device
        self._merge_devices = merge_devices
        self._ps_ops = ps_ops
        self._ps_strategy = ps_strategy

    def device_function(self, op) -> str:
        current = DeviceSpec.from_string(op.device or "")
        if not self._merge_devices and op.device:
            return op.device
        if self._ps_tasks and self._ps_device and op.type in self._ps_ops:
            ps = DeviceSpec.from_string(self._ps_device)
            if ps.job and (not current.job or current.job == ps.job):
                ps = ps.replace(task=self._ps_strategy(op))
            return ps.make_merged_spec(current).to_string()
        worker = DeviceSpec.from_string(self._worker_device or "")
        return worker.make_merged_spec(current).to_string()


def replica_device_setter(ps_tasks=0, ps_device="/job:ps", worker_device="/job:worker",
                          merge_devices=True, cluster=None, ps_ops=None, ps_strategy=None):
    """A device function for ``tf.device``: ps ops on the ps tasks, the rest on the worker.

    ``cluster`` (a ``ClusterSpec`` or its dict) gives the number of ps tasks from its "ps"
    job; returns None when there are none (``tf.device(None)`` then leaves ops unplaced)."""
    if cluster is not None:
        # A ClusterSpec (the distributed layer, above this one) or its dict form.
        jobs = cluster.as_dict() if hasattr(cluster, "as_dict") else dict(cluster)
        ps_tasks = len(jobs.get("ps") or [])
    if ps_tasks == 0:
        return None
    if ps_ops is None:
        ps_ops = list(STANDARD_PS_OPS)
    if not merge_devices:
        raise ValueError("DEPRECATED: merge_devices=False is not supported (nor by TF 1.x's "
                         "device functions since TF 1.0)")
    if ps_strategy is None:
        ps_strategy = _RoundRobinStrategy(ps_tasks)
    if not callable(ps_strategy):
        raise TypeError("ps_strategy must be callable")
    return _ReplicaDeviceChooser(ps_tasks, ps_device, worker_device, merge_devices, ps_ops,
                                 ps_strategy).device_function
