"""Gathers and scatters on a GPU in one launch, without reading indices on the host (which a
captured step cannot do): ``GatherV2`` and ``ResourceGather`` gather rows (an index out of
range gives zeros, as TF's GPU kernel), ``Scatter{Add,Sub}`` and their resource forms add rows
atomically into the variable's own buffer (repeated indices accumulate; one out of range is
skipped, as on TF's GPUs), through ``state_kernels.register_device_scatter``, and
``UnsortedSegmentSum`` scatters its rows into zeros the same way.

Float32 and float64 values, int32 and int64 indices; other dtypes, and updates that broadcast,
run the shared kernels.
"""

from __future__ import annotations

import numpy as np

from dflab.kernels.context import host
from dflab.kernels.cuda import program as P
from dflab.kernels.registry import get_kernel_def, kernel
from dflab.kernels.state_kernels import register_device_scatter

GPU = "GPU"
_INDEX_C = {"int32": "int", "int64": "long long"}


def _gather_ref(params, idx, out, outer, n_idx, limit, inner):
    p = params.reshape(outer, limit, inner)
    i = idx.reshape(-1).astype(np.int64)
    ok = (i >= 0) & (i < limit)
    o = out.reshape(outer, n_idx, inner)
    o[...] = np.where(ok[None, :, None], p[:, np.where(ok, i, 0)], np.zeros((), out.dtype))


def _scatter_ref(var, idx, upd, n_idx, limit, inner, sign):
    v = var.reshape(limit, inner)
    i = idx.reshape(-1).astype(np.int64)
    ok = (i >= 0) & (i < limit)
    np.add.at(v, i[ok], (upd.reshape(n_idx, inner)[ok] * sign).astype(var.dtype))


GATHER, SCATTER = {}, {}
for _it, _ic in _INDEX_C.items():
    for _dt, _prog in P.family(
            f"dflab_gather_{_it}", f"const T* params, const {_ic}* idx, T* out, int outer, "
            "int n_idx, int limit, int inner", r"""
  const int total = outer * n_idx * inner;
  for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < total; e += blockDim.x * gridDim.x) {
    const int j = e % inner; const int t = e / inner; const int k = t % n_idx;
    const int o = t / n_idx;
    const long long i = idx[k];
    out[e] = (i >= 0 && i < limit) ? params[((long long)o * limit + i) * inner + j] : (T)0;
  }
""", _gather_ref, kind="copy").items():
        GATHER[(_dt, _it)] = _prog
    for _dt, _prog in P.family(
            f"dflab_scatter_add_{_it}", f"T* var, const {_ic}* idx, const T* upd, int n_idx, "
            "int limit, int inner, T sign", r"""
  const int total = n_idx * inner;
  for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < total; e += blockDim.x * gridDim.x) {
    const int j = e % inner; const int k = e / inner;
    const long long i = idx[k];
    if (i >= 0 && i < limit) atomicAdd(&var[i * inner + j], sign * upd[e]);
  }
""", _scatter_ref).items():
        SCATTER[(_dt, _it)] = _prog


def _c(xp, a):
    return a if a.flags.c_contiguous else xp.ascontiguousarray(a)


def _gather(xp, params, indices, axis):
    """The gather of ``indices`` along ``axis`` of ``params``, or None where it does not
    apply."""
    prog = GATHER.get((np.dtype(params.dtype).name, np.dtype(indices.dtype).name))
    if prog is None or not isinstance(indices, xp.ndarray) or params.ndim == 0:
        return None
    outer = int(np.prod(params.shape[:axis], dtype=np.int64))
    limit = int(params.shape[axis])
    inner = int(np.prod(params.shape[axis + 1:], dtype=np.int64))
    out_shape = params.shape[:axis] + indices.shape + params.shape[axis + 1:]
    total = outer * indices.size * inner
    if not P.fits_int32(total + P.MAX_BLOCKS * P.BLOCK, params.size):
        return None
    out = xp.empty(out_shape, params.dtype)
    if total:
        P.launch(xp, prog, P.grid_for(total), P.BLOCK,
                 (_c(xp, params), _c(xp, indices), out, np.int32(outer),
                  np.int32(indices.size), np.int32(limit), np.int32(inner)))
    return out


@kernel("GatherV2", GPU, host_memory_inputs=(2,))
def _gather_v2_gpu(node, ctx):
    shared, xp = get_kernel_def(node, "CPU").factory(node, ctx), ctx.xp

    def gather(params, indices, axis):
        a = int(np.ravel(host(axis))[0]) if params.ndim else 0
        if params.ndim and -params.ndim <= a < params.ndim:
            out = _gather(xp, params, indices, a % params.ndim)
            if out is not None:
                return out
        return shared(params, indices, axis)

    return gather


@kernel("ResourceGather", GPU)
def _resource_gather_gpu(node, ctx):
    shared, xp = get_kernel_def(node, "CPU").factory(node, ctx), ctx.xp

    def gather(state, indices):
        with state.lock:  # scatters write the variable's buffer in place
            out = _gather(xp, state.read(), indices, 0)
        return out if out is not None else shared(state, indices)

    return gather


def _device_scatter(sign):
    def scatter(xp, var, indices, updates) -> bool:
        prog = SCATTER.get((np.dtype(var.dtype).name, np.dtype(getattr(indices, "dtype",
                                                                        None)).name
                            if hasattr(indices, "dtype") else ""))
        if prog is None or not isinstance(indices, xp.ndarray) or \
                not isinstance(updates, xp.ndarray) or var.ndim == 0 or \
                not var.flags.c_contiguous or updates.dtype != var.dtype or \
                tuple(updates.shape) != tuple(indices.shape) + tuple(var.shape[1:]):
            return False
        inner = int(np.prod(var.shape[1:], dtype=np.int64))
        if not P.fits_int32(updates.size + P.MAX_BLOCKS * P.BLOCK, var.size):
            return False
        if updates.size:
            P.launch(xp, prog, P.grid_for(updates.size), P.BLOCK,
                     (var, _c(xp, indices), _c(xp, updates), np.int32(indices.size),
                      np.int32(var.shape[0]), np.int32(inner), var.dtype.type(sign)))
        return True

    return scatter


# ``add_rows(xp, var, indices, updates) -> bool``: var[indices] += updates in one launch,
# repeats accumulated, an index out of range skipped; False where it does not apply.
add_rows = _device_scatter(1)
register_device_scatter("GPU", "add", add_rows)
register_device_scatter("GPU", "subtract", _device_scatter(-1))


@kernel("UnsortedSegmentSum", GPU, host_memory_inputs=(2,))
def _unsorted_segment_sum_gpu(node, ctx):
    """The sums as zeros and one atomic scatter, reading no id on the host (a Gather's
    gradient, densified, in a loop): an id out of range is dropped, as TF's GPU kernel drops
    it (the CPU's raises). Other dtypes run the shared kernel."""
    shared, xp = get_kernel_def(node, "CPU").factory(node, ctx), ctx.xp

    def segment_sum(data, ids, num_segments):
        n = int(np.ravel(host(num_segments))[0])
        if n >= 0 and isinstance(data, xp.ndarray) and hasattr(ids, "ndim"):
            out = xp.zeros((n,) + tuple(data.shape[ids.ndim:]), data.dtype)
            if add_rows(xp, out, ids, data):
                return out
        return shared(data, ids, num_segments)

    return segment_sum
