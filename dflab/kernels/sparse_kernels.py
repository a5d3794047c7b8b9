"""Kernels of ``dflab.ops.sparse_ops``: coordinate lists scattered into, or gathered from,
dense arrays with the device's ``xp``; indices and shapes are read on the host (TF keeps them
in host memory for its GPU kernels too)."""

from __future__ import annotations

import numpy as np

from dflab.framework import errors
from dflab.kernels.context import host
from dflab.kernels.registry import kernel


def _as_matrix(indices: np.ndarray, rank: int) -> np.ndarray:
    if indices.ndim == 0:
        return indices.reshape(1, 1)
    if indices.ndim == 1:
        return indices.reshape(-1, 1) if rank == 1 else indices.reshape(1, -1)
    return indices


def check_indices(node, idx: np.ndarray, shape, sorted_unique=True) -> None:
    """TF's checks of sparse indices: in bounds and, when asked, strictly increasing in
    row-major order (so neither out of order nor repeated)."""
    for i, row in enumerate(idx):
        if np.any(row < 0) or np.any(row >= shape):
            raise errors.InvalidArgumentError(
                None, node, f"indices[{i}] = [{','.join(map(str, row))}] is out of bounds: "
                f"need 0 <= index < [{','.join(map(str, shape))}]")
    if not sorted_unique or len(idx) < 2:
        return
    flat = np.ravel_multi_index(idx.T, shape) if len(shape) else np.zeros(len(idx))
    for i in range(1, len(flat)):
        if flat[i] == flat[i - 1]:
            raise errors.InvalidArgumentError(
                None, node, f"indices[{i}] = [{','.join(map(str, idx[i]))}] is repeated")
        if flat[i] < flat[i - 1]:
            raise errors.InvalidArgumentError(
                None, node, f"indices[{i}] = [{','.join(map(str, idx[i]))}] is out of order. "
                "Many sparse ops require sorted indices.\n    Use `tf.sparse.reorder` to "
                "create a correctly ordered copy.\n\n")


@kernel("SparseToDense", host_memory_inputs=(0, 1))
def _sparse_to_dense(node, ctx):
    xp, validate = ctx.xp, node.attr["validate_indices"]

    def run(indices, output_shape, values, default):
        shape = tuple(int(d) for d in np.ravel(host(output_shape)))
        idx = _as_matrix(host(indices, np.int64), len(shape))
        if idx.shape[1] != len(shape):
            raise errors.InvalidArgumentError(
                None, node, f"sparse_indices has {idx.shape[1]} columns for an output of rank "
                f"{len(shape)}")
        n = idx.shape[0]
        if values.ndim not in (0, 1) or (values.ndim == 1 and values.shape[0] != n):
            raise errors.InvalidArgumentError(
                None, node, f"sparse_values has incorrect shape {list(values.shape)}, should "
                f"be [] or [{n}]")
        check_indices(node, idx, shape, sorted_unique=validate)
        out = xp.full(shape, default, dtype=values.dtype)
        if n and out.size and shape:
            # A repeated index keeps the last value written, as TF's kernel: only each
            # position's last entry is scattered (an array library's scatter of repeated
            # positions may keep any of them).
            flat = np.ravel_multi_index(idx.T, shape)
            _, from_end = np.unique(flat[::-1], return_index=True)
            keep = np.sort(n - 1 - from_end)
            target = tuple(xp.asarray(idx[keep, k]) for k in range(len(shape)))
            out[target] = values if values.ndim == 0 else values[xp.asarray(keep)]
        return out

    return run
