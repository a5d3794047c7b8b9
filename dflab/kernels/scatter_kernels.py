"""Kernels of the N-d scatters (``dflab.ops.scatter_ops``): ``TensorScatter{Update,Add,Sub,
Max,Min}`` write ``updates`` into a copy of a tensor, and the variables' ``ScatterNd{Update,Add,
Sub}`` (reference) and ``ResourceScatterNd{Update,Add,Sub}`` into the variable's own buffer,
under its lock, as the row scatters of ``state_kernels`` do.

``scatter_nd_into`` is the one write all of them share: indices are checked against the
target's shape on the host (TF's CPU kernels; an index out of range is an
``InvalidArgumentError`` naming it) and repeated indices accumulate for the combining ops.
"""

from __future__ import annotations

from dflab.kernels.array_kernels import _bad, _check_nd_indices
from dflab.kernels.registry import kernel
from dflab.kernels.state_kernels import _lock, unshare_locked

# The ufunc of ``xp`` each op combines with (None: assignment, the last write wins).
COMBINE = {"Update": None, "Add": "add", "Sub": "subtract", "Max": "maximum", "Min": "minimum"}


def scatter_nd_into(xp, node, out, indices, updates, combine) -> None:
    """``out[indices[i]] = combine(out[indices[i]], updates[i])`` in place, after checking
    shapes and indices (``combine`` a ufunc name of ``xp``, or None to assign)."""
    idx, updates = xp.asarray(indices), xp.asarray(updates)
    if idx.ndim == 0:
        raise _bad(node, "Indices must be at least a vector")
    k = idx.shape[-1]
    if k > out.ndim:
        raise _bad(node, f"Output must have at least {k} dimensions (the inner dimension of "
                         f"indices), got shape {list(out.shape)}")
    want = idx.shape[:-1] + out.shape[k:]
    if updates.shape != want:
        raise _bad(node, f"updates must have shape indices.shape[:-1] + "
                         f"output.shape[{k}:] = {list(want)}, got {list(updates.shape)}")
    _check_nd_indices(xp, node, idx, out.shape)
    where = tuple(xp.moveaxis(idx, -1, 0))
    if combine is None:
        out[where] = updates
    else:
        getattr(xp, combine).at(out, where, updates)


def _tensor_scatter(combine):
    def factory(node, ctx):
        xp = ctx.xp

        def tensor_scatter(tensor, indices, updates):
            out = xp.array(tensor, copy=True)
            scatter_nd_into(xp, node, out, indices, updates, combine)
            return out

        return tensor_scatter

    return factory


def _ref_scatter_nd(combine):
    def factory(node, ctx):
        xp = ctx.xp
        use_locking = node.attr.get("use_locking", True)

        def scatter_nd(ref, indices, updates):
            with _lock(ref, use_locking):
                var = ref.read()
                with ref.unfrozen(var):
                    scatter_nd_into(xp, node, var, indices, updates, combine)
            return ref

        return scatter_nd

    return factory


def _resource_scatter_nd(combine):
    def factory(node, ctx):
        xp = ctx.xp

        def resource_scatter_nd(state, indices, updates):
            with state.lock:
                unshare_locked(state, xp)  # a value read earlier in the step keeps its buffer
                var = state.read()
                with state.unfrozen(var):
                    scatter_nd_into(xp, node, var, indices, updates, combine)

        return resource_scatter_nd

    return factory


for _kind, _combine in COMBINE.items():
    kernel("TensorScatter" + _kind)(_tensor_scatter(_combine))
    if _kind in ("Update", "Add", "Sub"):
        kernel("ScatterNd" + _kind)(_ref_scatter_nd(_combine))
    if _kind in ("Update", "Add", "Sub", "Max", "Min"):
        kernel("ResourceScatterNd" + _kind)(_resource_scatter_nd(_combine))
