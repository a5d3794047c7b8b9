"""Kernels for variables and their update ops.

On host devices dense updates install a new array (readers keep consistent snapshots); on a
GPU (a device whose arrays are device buffers) they write into the variable's buffer when the
shape and dtype match, as TF1's dense updates do: no allocation per step, and the buffer a
captured step (``dflab.runtime.gpu_replay``) reads and writes stays the variable's
(``write_variable``). Scatter updates write in place everywhere, as TF1 does, so a sparse
update costs O(rows), not O(var).

Locking (``VarState``): a reference variable's update holds the variable's lock across the
read-modify-write when built with ``use_locking``; a resource variable's scatter always holds
it, as TF's resource kernels hold the variable's mutex, and copies a buffer a resource read
still holds (``unshare_locked``) under the same lock, so no reader gets a buffer between the
copy and the write. ``CountUpTo`` (``tf.train.limit_epochs``' counter) always holds it.

The arithmetic goes through the device's array namespace (``ctx.xp``), so a variable lives in
its device's memory. NumPy arrays are frozen (read-only) while a variable holds them; a scatter
unfreezes the variable's own buffer for the length of its write (``VarState.unfrozen``).
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Callable

import numpy as np

from dflab.framework import errors
from dflab.kernels.array_kernels import _numpy_index
from dflab.kernels.registry import kernel


def _owned(xp, value):
    """A private copy of ``value`` in the device's memory, unless the array is already
    exclusively ours (a NumPy array that owns its data and nobody froze)."""
    v = xp.asarray(value)
    if isinstance(v, np.ndarray) and v.flags.owndata and v.flags.writeable:
        return v
    return xp.array(v, copy=True)


# References to an array that only its variable holds: the VarState's slot, the one name (or
# list slot) the caller reads it through, and getrefcount's own argument.
SOLE_OWNER_REFS = 3


def unshare_locked(state, xp) -> None:
    """Before an in-place write, with ``state.lock`` held (the lock resource reads take, so no
    reader can get the buffer between this check and the write): give ``state`` a buffer of
    its own if a value read earlier (a resource variable's read, still held by a consumer)
    shares it — TF's copy-on-write of a variable's buffer while its reference count is above
    one. The caller holds no reference to the value of its own."""
    value = state.read()
    if _device_buffer(xp, value):
        # A GPU's resource reads are copies (``resource_variable_kernels``): no value
        # shares the buffer, and it must stay the variable's (a captured step's replays
        # write into it; references the capture keeps would look like readers).
        return
    if sys.getrefcount(value) > SOLE_OWNER_REFS:
        state.set(xp.array(value, copy=True))


def _device_buffer(xp, value) -> bool:
    """Whether ``value`` is a buffer in a device's own memory, not a NumPy array (NumPy-backed
    devices freeze the arrays variables hold, and keep installing new ones)."""
    return xp is not np and not isinstance(value, np.ndarray) and isinstance(value, xp.ndarray)


def _capturing(xp) -> bool:
    """Whether the device's current CUDA stream is being captured as a graph."""
    cuda = getattr(xp, "cuda", None)
    return cuda is not None and bool(cuda.get_current_stream().is_capturing())


def write_variable(xp, ref, value) -> None:
    """Make ``value`` (an array of ``xp`` the caller owns) the variable's value: written into
    the variable's current buffer when both are device buffers of one shape and dtype (the
    variable keeps its buffer), installed as the new array otherwise. Caller holds the lock
    it needs."""
    if not _write_in_place(xp, ref, value):
        _install(xp, ref, value)


def _install(xp, ref, value) -> None:
    """``ref.set(value)``, refused while the device's stream is being captured as a graph: a
    new array installed then would be a block the graph owns, and replays would not install
    it again (the capture fails and the step runs uncaptured)."""
    if xp is not np and _capturing(xp):
        raise errors.UnimplementedError(
            None, None, f"Cannot capture a step that installs a new array in variable "
            f"{ref.name} (its shape or dtype changes)")
    ref.set(value)


def _write_in_place(xp, ref, value) -> bool:
    old = ref.value
    if old is None or not (_device_buffer(xp, old) and _device_buffer(xp, value)) or \
            old.shape != value.shape or old.dtype != value.dtype:
        return False
    if value is not old:
        if xp.may_share_memory(old, value):  # a view of the variable itself (a transpose)
            value = xp.array(value, copy=True)
        xp.copyto(old, value)
    return True


@kernel("VariableV2")
def _variable(node, ctx):
    state = ctx.resources.variable(node.name, node.attr.get("container", ""))
    return lambda: state


def _lock(state, use_locking):
    return state.lock if use_locking else contextlib.nullcontext()


@kernel("Assign")
def _assign(node, ctx):
    declared = node.output_shapes[0]  # the variable's shape (Assign outputs its ref)
    validate = node.attr.get("validate_shape", True)
    use_locking = node.attr.get("use_locking", True)
    xp = ctx.xp

    def assign(ref, value):
        if validate and declared.ndims is not None and \
                not declared.is_compatible_with(np.shape(value)):
            raise errors.InvalidArgumentError(
                None, None, f"Assign requires shapes of both tensors to match. lhs shape= "
                f"{declared.as_list()} rhs shape= {list(np.shape(value))}")
        with _lock(ref, use_locking):
            if not _write_in_place(xp, ref, xp.asarray(value)):
                _install(xp, ref, _owned(xp, value))
        return ref

    return assign


def _update(fn_name):
    def factory(node, ctx):
        use_locking = node.attr.get("use_locking", False)
        xp = ctx.xp
        np_fn = getattr(xp, fn_name)

        def update(ref, delta):
            with _lock(ref, use_locking):
                old = ref.read()
                new = np_fn(old, delta)
                if new.shape != old.shape:
                    raise errors.InvalidArgumentError(
                        None, None, f"Must have the same shape: var {list(old.shape)} vs "
                        f"update {list(np.shape(delta))}")
                write_variable(xp, ref, new)
            return ref

        return update

    return factory


kernel("AssignAdd")(_update("add"))
kernel("AssignSub")(_update("subtract"))


def _check_indices(xp, indices, n, op_name):
    idx = xp.asarray(indices)
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        bad = int(idx[(idx < 0) | (idx >= n)].ravel()[0])
        raise errors.InvalidArgumentError(None, None,
                                          f"indices = {bad} is not in [0, {n}) in {op_name}")
    return idx


# Per (kernel device type, scatter ufunc "add" or "subtract"), a device's own scatter
# (``register_device_scatter``). Keyed by device type, not by "xp is not NumPy": a plugged-in
# device computing with another array namespace runs the shared code.
_DEVICE_SCATTERS: dict = {}


def register_device_scatter(device_type: str, ufunc_name: str, fn) -> None:
    """``fn(xp, var, indices, updates) -> bool``: a ``device_type`` device's scatter of
    ``updates`` into the rows ``indices`` of the variable's own buffer ``var`` (one launch, no
    host check: as TF's GPU kernels, an index out of range is skipped); False where it does not
    apply."""
    _DEVICE_SCATTERS[device_type, ufunc_name] = fn


def _scatter_rows(ufunc_name, ctx, op_name) -> Callable:
    """``write(state, indices, updates)``: the scatter into the variable's own buffer,
    applying ``xp.<ufunc_name>.at`` (repeated indices accumulate), or assigning rows when
    ``ufunc_name`` is None (ScatterUpdate: the last write wins). The caller holds the lock it
    needs; the buffer is referenced only while ``write`` runs."""
    xp = ctx.xp
    if ufunc_name is None:
        apply = _scatter_update
    elif ufunc_name in ("add", "subtract") and xp is np:
        apply = functools.partial(_scatter_summed, getattr(np, ufunc_name))
    else:
        apply = getattr(xp, ufunc_name).at
    device = _DEVICE_SCATTERS.get((ctx.device_type, ufunc_name))

    def write(state, indices, updates) -> None:
        var = state.read()
        if device is not None and device(xp, var, indices, updates):
            return
        idx = _check_indices(xp, indices, var.shape[0], op_name)
        with state.unfrozen(var):  # the variable owns this buffer (see _owned)
            apply(var, idx, xp.broadcast_to(updates, idx.shape + var.shape[1:]))

    return write


def _scatter(ufunc_name):
    """A reference variable's ``Scatter<Op>``: under the variable's lock with ``use_locking``;
    outputs the reference."""

    def factory(node, ctx):
        use_locking = node.attr.get("use_locking", False)
        write = _scatter_rows(ufunc_name, ctx, node.op)

        def scatter(ref, indices, updates):
            with _lock(ref, use_locking):
                write(ref, indices, updates)
            return ref

        return scatter

    return factory


def _scatter_update(var, idx, upd):
    var[idx] = upd


def _scatter_summed(ufunc, var, idx, upd):
    """``ufunc.at(var, idx, upd)`` for add/subtract, several times faster: the touched rows
    are gathered once, updated in place, and written back by fancy indexing. An index that
    appears more than once (usually a few of a sampled batch) has its updates summed first
    and the same new row written at each of its positions, so the write-back's order does not
    matter. A repeated index sees var - (u1 + u2) instead of (var - u1) - u2: the same value up
    to rounding. (A 2176-row update of a 50000x128 float32 table: 1.5 ms sorting every
    update, 0.55 ms this way, 5.5 ms by ``subtract.at``.)"""
    flat = idx.ravel()
    if flat.size == 0:
        return
    rows = upd.reshape((flat.size,) + var.shape[1:])
    new = var.take(flat, axis=0)  # take: faster than fancy indexing for rows
    ufunc(new, rows, out=new, casting="unsafe")  # the dtype cast an assignment would make
    _sum_repeats(ufunc, var, flat, rows, new)
    whole_rows = _as_records(var)
    if whole_rows is None:
        var[flat] = new
    else:  # a 1-d write of one record per row: a quarter faster than the 2-d fancy write
        whole_rows[flat] = _as_records(new)


def _as_records(a):
    """A C-contiguous array of two or more dimensions as a 1-d array of one opaque record per
    row (a view), or None."""
    if a.ndim < 2 or not a.flags.c_contiguous or not a.size or a.dtype.hasobject:
        return None
    per_row = a.size // a.shape[0]
    return a.reshape(a.shape[0], per_row).view(np.dtype((np.void, per_row * a.itemsize)))[:, 0]


def _sum_repeats(ufunc, var, flat, rows, new) -> None:
    """Set ``new``'s rows at every repeated index of ``flat`` to ``ufunc(var[i], sum of that
    index's updates)``; the unrepeated rows are left as they are."""
    where = _repeated_positions(flat, var.shape[0])
    if not where.size:
        return
    keys = flat[where]
    starts = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
    sizes = np.diff(np.append(starts, keys.size))
    values = ufunc(var[keys[starts]], _group_sums(rows, where, starts, sizes))
    values = values.astype(var.dtype, copy=False)
    new[where] = np.repeat(values, sizes, axis=0)


# Up to this many rows of the variable per index, repeats are found by counting (a pass over
# a count per row) rather than by sorting the indices: in a word2vec step (2,176 indices
# into 50,000 rows) the sort took 110 us, the count 12 us.
_COUNT_ROWS_PER_INDEX = 32


def _repeated_positions(flat, n_rows: int):
    """The positions in ``flat`` (in-range indices) of the indices it holds more than once,
    grouped by index. Within a group any order does: its updates are summed in some order."""
    if n_rows <= _COUNT_ROWS_PER_INDEX * flat.size:
        counts = np.bincount(flat, minlength=n_rows)
        where = np.flatnonzero(counts[flat] > 1)  # usually a few: sorted cheaply
        return where[np.argsort(flat[where], kind="stable")]
    order = np.argsort(flat, kind="stable")  # a few indices into many rows
    ordered = flat[order]
    same = ordered[1:] == ordered[:-1]
    repeated = np.zeros(flat.size, bool)  # positions in ``order`` of a repeated index
    repeated[1:] |= same
    repeated[:-1] |= same
    return order[repeated]


# Most repeated indices of a sampled batch repeat a few times: their updates are summed one
# round per repeat, a few vectorized adds; ``add.reduceat`` over rows costs 150 us for 92 rows.
_ROUNDS = 16


def _group_sums(rows, where, starts, sizes):
    """Sums of ``rows[where]`` over the groups that begin at ``starts``, ``sizes`` long."""
    if sizes.max() > _ROUNDS:
        return np.add.reduceat(rows[where], starts, axis=0)
    totals = rows[where[starts]]  # a copy
    for r in range(1, int(sizes.max())):
        longer = np.flatnonzero(sizes > r)
        totals[longer] += rows[where[starts[longer] + r]]
    return totals


def _resource_scatter(ufunc_name):
    """``ResourceScatter<Op>``: always under the variable's lock, as TF's resource scatters hold
    the variable's mutex, on a buffer no read holds (copied first under the same lock, so the
    copy and the write are one step to readers); no output."""

    def factory(node, ctx):
        xp = ctx.xp
        write = _scatter_rows(ufunc_name, ctx, node.op)

        def resource_scatter(state, indices, updates):
            with state.lock:
                unshare_locked(state, xp)
                write(state, indices, updates)

        return resource_scatter

    return factory


for _op, _ufunc in (("ScatterUpdate", None), ("ScatterAdd", "add"), ("ScatterSub", "subtract"),
                    ("ScatterMul", "multiply"), ("ScatterDiv", "divide"),
                    ("ScatterMin", "minimum"), ("ScatterMax", "maximum")):
    kernel(_op)(_scatter(_ufunc))
    kernel("Resource" + _op)(_resource_scatter(_ufunc))


def _slice_writer(node, ctx) -> Callable:
    """``write(state, begin, end, strides, value)``: ``value``, broadcast to the slice's
    shape, written into the slice of the variable's own buffer (TF's ``StridedSliceAssign``).
    The caller holds the lock it needs."""
    xp = ctx.xp

    def write(state, begin, end, strides, value) -> None:
        var = state.read()
        index = _numpy_index(node, var.shape, begin, end, strides)
        final = np.shape(var[index])  # (an object array's entry is no array)
        value = xp.asarray(value, dtype=var.dtype)
        try:
            value = xp.broadcast_to(value, final)
        except ValueError:
            raise errors.InvalidArgumentError(
                None, None, f"Cannot broadcast input shape {list(value.shape)} into final "
                f"shape {list(final)}") from None
        if value.ndim == 0:  # one entry: its value (an object array would hold the array)
            value = value[()]
        with state.unfrozen(var):  # the variable owns this buffer (see _owned)
            var[index] = value

    return write


@kernel("StridedSliceAssign", host_memory_inputs=(1, 2, 3))
def _strided_slice_assign(node, ctx):
    """A reference variable's slice assignment, in place as TF 1.x's; outputs the reference.
    Under the variable's lock, as every slice write of TF's holds the variable's mutex."""
    write = _slice_writer(node, ctx)

    def strided_slice_assign(ref, begin, end, strides, value):
        with ref.lock:
            write(ref, begin, end, strides, value)
        return ref

    return strided_slice_assign


@kernel("ResourceStridedSliceAssign", host_memory_inputs=(1, 2, 3))
def _resource_strided_slice_assign(node, ctx):
    """A resource variable's slice assignment, as its scatters: under the lock, on a buffer
    no read holds; no output."""
    xp = ctx.xp
    write = _slice_writer(node, ctx)

    def resource_strided_slice_assign(state, begin, end, strides, value):
        with state.lock:
            unshare_locked(state, xp)
            write(state, begin, end, strides, value)

    return resource_strided_slice_assign


@kernel("CountUpTo", host_only=True)
def _count_up_to(node, ctx):
    limit = node.attr["limit"]
    xp = ctx.xp

    def count_up_to(ref):
        # The variable's lock makes read-compare-increment atomic: several enqueue threads may
        # share one epoch counter, and each count must be handed out exactly once.
        with ref.lock:
            before = xp.asarray(ref.read())
            if before.ndim != 0:
                raise errors.InvalidArgumentError(
                    None, node, f"input is not a scalar: {list(before.shape)}")
            if before >= limit:
                raise errors.OutOfRangeError(None, node, f"Reached limit of {limit}")
            ref.set(xp.array(before + 1, dtype=before.dtype))
        return before

    return count_up_to


def _is_initialized(ref):
    return np.bool_(ref.initialized)


_is_initialized.accepts_refs = True


@kernel("IsVariableInitialized")
def _is_init(node, ctx):
    return _is_initialized


@kernel("ReportUninitializedVariables")
def _report(node, ctx):
    names = node.attr["names"]

    def report(*refs):
        return np.array([n.encode() for n, r in zip(names, refs) if not r.initialized],
                        dtype=object)

    report.accepts_refs = True
    return report
