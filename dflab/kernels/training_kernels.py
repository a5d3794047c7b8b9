"""Kernels for the fused optimizer updates of ``dflab.ops.training_ops``.

Each kernel receives the variable and its slots as ``VarState`` references. The reference
forms with ``use_locking``, and the resource forms always (as TF's resource kernels hold the
variables' mutexes), hold all of their locks across the whole update, taken in one fixed order
(by object id) so two updates sharing variables can never deadlock. Dense updates compute new
arrays and store them with ``write_variable``: installed on host devices (readers keep
consistent snapshots), written into the variables' own buffers on a GPU (so a training step
can be captured and replayed); sparse updates sum repeated indices, then write the touched
rows in place into the variables' own buffers, so a step costs O(rows), not O(variable).

On the host a big dense update of a rule of many steps (Adam) runs block by block (each block's
temporaries stay in cache: one pass over memory per input and per output), Adam's on oneDNN
where it is installed (four fused primitives a block, NumPy's bits: ``onednn.ops.adam``); SGD's
two steps take the array whole (``_SHORT_RULE_BLOCK``). A resource variable's update writes
into the arrays of the variable and its slots when nothing but the variable holds them (no
reader kept an earlier value), under the variables' locks, which resource reads take too: as
TF's kernels update a buffer nobody else references. Otherwise it writes into output buffers
recycled from the arrays the kernel's previous update displaced (``_Spares``), once nothing
else holds them (a fresh multi-megabyte array is faulted in page by page on every step), and
installs them: a value a reader still holds is never written to. With intra-op threads the
blocks are shared among them. The resource forms copy a shared buffer (``unshare_locked``,
under the same locks) before the other writes into the variable's own buffer (sparse rows, a
GPU's dense update). The formulas follow TF's ``training_ops`` kernels term by term, computed
with the device's array namespace (``ctx.xp``), so slots live where their variable does.
"""

from __future__ import annotations

import contextlib
import sys
import threading

import numpy as np

from dflab.framework import errors
from dflab.kernels import intra_op, onednn
from dflab.kernels.registry import kernel
from dflab.kernels.state_kernels import SOLE_OWNER_REFS, unshare_locked, write_variable
from dflab.ops.training_ops import signature


class _Locks:
    """Several variables' locks, taken in one fixed order (by object id) and released in
    reverse: two updates sharing variables can never deadlock."""

    __slots__ = ("_locks",)

    def __init__(self, locks):
        self._locks = locks

    def __enter__(self):
        taken = []
        try:
            for lock in self._locks:
                lock.acquire()
                taken.append(lock)
        except BaseException:
            for lock in reversed(taken):
                lock.release()
            raise

    def __exit__(self, *exc):
        for lock in reversed(self._locks):
            lock.release()


_NO_LOCK = contextlib.nullcontext()


def _locked(refs, use_locking):
    """The locks an update holds: none, its one variable's (most updates: a plain lock, the
    cheapest context there is, which counts for the small updates of a training step), or all
    of its variables' in id order."""
    if not use_locking:
        return _NO_LOCK
    if len(refs) == 1:
        return refs[0].lock
    distinct = sorted({id(r): r for r in refs}.values(), key=id)
    return distinct[0].lock if len(distinct) == 1 else _Locks([r.lock for r in distinct])


def _invalid(msg):
    return errors.InvalidArgumentError(None, None, msg)


def _check_dense(op_type, names, arrays, grad):
    var = arrays[0]
    for n, a in zip(names[1:], arrays[1:]):
        if a.shape != var.shape:
            raise _invalid(f"var and {n} do not have the same shape{list(var.shape)} "
                           f"{list(a.shape)}")
    if np.shape(grad) != var.shape:
        raise _invalid(f"var and grad do not have the same shape{list(var.shape)} "
                       f"{list(np.shape(grad))}")


def _check_scalars(names, scalars):
    for n, s in zip(names, scalars):
        if np.ndim(s) != 0:
            raise _invalid(f"{n} is not a scalar: {list(np.shape(s))}")


def _dedup(xp, indices, grad, n_rows, op_type):
    """Unique rows and the gradient summed over repeated indices."""
    idx = xp.asarray(indices)
    if idx.ndim != 1:
        raise _invalid(f"indices must be one-dimensional: {list(idx.shape)}")
    grad = xp.asarray(grad)
    if grad.ndim == 0 or grad.shape[0] != idx.shape[0]:
        raise _invalid(f"grad must be the same size as indices in the first dimension: "
                       f"{list(grad.shape)} vs {list(idx.shape)}")
    bad = (idx < 0) | (idx >= n_rows)
    if bad.any():
        k = int(xp.flatnonzero(bad)[0])
        raise _invalid(f"Index {int(idx[k])} at offset {k} in indices is out of range "
                       f"[0, {n_rows}) in {op_type}")
    uniq, inverse = xp.unique(idx, return_inverse=True)
    if len(uniq) == len(idx):
        order = xp.argsort(idx, kind="stable")
        return uniq, grad[order]
    summed = xp.zeros((len(uniq),) + grad.shape[1:], dtype=grad.dtype)
    xp.add.at(summed, inverse.ravel(), grad)
    return uniq, summed


def _write_rows(xp, state, rows, values) -> None:
    """var[rows] = values in the variable's own buffer (copied first if it is not ours; NumPy
    buffers are frozen while a variable holds them, and unfrozen for the write)."""
    buf = state.read()
    if not buf.flags.owndata:
        buf = xp.array(buf, copy=True)
        state.set(buf)
    with state.unfrozen(buf):
        buf[rows] = values


# Per (kernel device type, op type), a device's own dense update (``register_device_update``).
_DEVICE_UPDATES: dict = {}


def register_device_update(device_type: str, op_type: str, fn) -> None:
    """``fn(xp, attrs, arrays, scalars, grad) -> bool``: ``op_type``'s dense update on a
    ``device_type`` device, writing the variable's and its slots' own buffers ``arrays`` in
    place (one GPU launch); False where it does not apply (the shared update runs)."""
    _DEVICE_UPDATES[device_type, op_type] = fn


# Per (kernel device type, op type), a device's own sparse update
# (``register_device_sparse_update``).
_DEVICE_SPARSE_UPDATES: dict = {}


def register_device_sparse_update(device_type: str, op_type: str, fn) -> None:
    """``fn(xp, attrs, arrays, scalars, indices, grad) -> bool``: ``op_type``'s sparse update
    on a ``device_type`` device, writing the rows of the variable's and its slots' own buffers
    ``arrays`` in place, repeated indices summed, without reading the indices on the host; False
    where it does not apply (the shared update runs)."""
    _DEVICE_SPARSE_UPDATES[device_type, op_type] = fn


def _training_kernel(op_type, update, sparse=False, dense_rows=False):
    """Register the kernels of ``op_type`` and ``Resource<op_type>``.

    ``update(xp, attrs, slots, scalars, grad) -> new slots`` works on whole arrays (dense ops) or
    on the gathered rows (sparse ops); ``slots`` and the result list the var first. With
    ``dense_rows`` a sparse op's update gets full arrays plus the unique rows and their summed
    gradient, and its result is installed whole.
    """
    ref_names, value_names = signature(op_type)
    n_refs = len(ref_names)
    scalar_names = [n for n in value_names if n not in ("grad", "delta", "indices")]
    scalar_pos = [value_names.index(n) for n in scalar_names]
    grad_pos = value_names.index("delta" if "delta" in value_names else "grad")
    idx_pos = value_names.index("indices") if sparse else None
    writes_rows = sparse and not dense_rows

    def factory(node, ctx, resource=False):
        attrs = node.attr
        xp = ctx.xp
        # TF's resource kernels always hold their variables' locks; a reference variable's
        # update holds them with ``use_locking``.
        locking = resource or node.attr.get("use_locking", False)
        # A resource variable's host update may write in place (see the module docstring),
        # under the locks resource reads take too. A ref variable's readers take none.
        in_place = resource and xp is np and not sparse
        # Sparse rows, and a GPU's dense update, write into the variable's own buffers: a
        # buffer a resource read still holds is copied first (a resource read promises a
        # value); a host's dense update installs another buffer instead.
        unshares = resource and (writes_rows or xp is not np)
        spares = _Spares(n_refs)
        device_update = None if sparse else _DEVICE_UPDATES.get((ctx.device_type, op_type))
        device_sparse = (_DEVICE_SPARSE_UPDATES.get((ctx.device_type, op_type))
                         if sparse else None)
        # oneDNN for a rule that has a oneDNN form (Adam); a resource form's dtype is its
        # variable's, known only when it runs: another dtype goes to NumPy then.
        dnn = None
        if not sparse and getattr(_INTO.get(update), "onednn", None):
            dnn = onednn.for_kernel(ctx, np.float32)

        def apply(refs, values, scalars, grad) -> bool:
            """The update, with the locks it needs held; whether oneDNN computed it. Its arrays
            die when it returns, before the locks are released, so the next update finds the
            buffers held by their variables only."""
            if unshares:
                for state in refs:
                    unshare_locked(state, xp)
            arrays = [xp.asarray(r.read()) for r in refs]
            if not sparse:
                _check_dense(op_type, ref_names, arrays, grad)
                if device_update is not None and device_update(xp, attrs, arrays, scalars,
                                                               grad):
                    return False
                if xp is np and arrays[0].size >= _UPDATE_BLOCK:
                    return _host_dense_update(update, attrs, refs, arrays, scalars, grad,
                                              spares, in_place, ctx.intra_op, dnn)
                new = update(xp, attrs, arrays, scalars, xp.asarray(grad))
                for r, a in zip(refs, new):
                    write_variable(xp, r, xp.asarray(a, dtype=arrays[0].dtype))
                return False
            _check_dense(op_type, ref_names, arrays, arrays[0])
            if arrays[0].ndim == 0:
                raise _invalid("var must be at least 1 dimensional")
            grad = xp.asarray(grad)
            if grad.shape[1:] != arrays[0].shape[1:]:
                raise _invalid(f"var and grad must match in dimension 1 and up: "
                               f"{list(arrays[0].shape)} vs {list(grad.shape)}")
            if device_sparse is not None and device_sparse(xp, attrs, arrays, scalars,
                                                           values[idx_pos], grad):
                return False
            rows, g = _dedup(xp, values[idx_pos], grad, arrays[0].shape[0], op_type)
            if dense_rows:
                new = update(xp, attrs, arrays, scalars, rows, g)
                for r, a in zip(refs, new):
                    write_variable(xp, r, xp.asarray(a, dtype=arrays[0].dtype))
                return False
            new = update(xp, attrs, [a[rows] for a in arrays], scalars, g)
            del arrays  # _write_rows reads each buffer afresh
            for r, a in zip(refs, new):
                _write_rows(xp, r, rows, a)
            return False

        def run(*args):
            refs, values = args[:n_refs], args[n_refs:]
            scalars = [values[p] for p in scalar_pos]
            _check_scalars(scalar_names, scalars)
            with _locked(refs, locking), np.errstate(all="ignore"):
                on_dnn = apply(refs, values, scalars, values[grad_pos])
            run.kernel_label = label if on_dnn else None
            return refs[0]

        label = onednn.label(node.op)
        run.kernel_label = None
        return run

    kernel(op_type)(factory)
    kernel("Resource" + op_type)(_resource_form(factory))
    return factory


class _Spares:
    """Per kernel: the arrays its last host update displaced from the variable and its slots,
    to be the next update's output buffers. One is reused only when nothing else refers to it
    (no reader holds the old value; it is no longer installed, so no new reader can get it);
    otherwise a fresh buffer is made. The cost: each cached plan that runs an update keeps
    one displaced copy of the variable and its slots alive until its session closes."""

    def __init__(self, n: int):
        self._lock = threading.Lock()
        self._bufs: list = [None] * n

    def take(self, i: int, shape, dtype) -> np.ndarray:
        with self._lock:
            buf, self._bufs[i] = self._bufs[i], None
        # References: ``buf`` and getrefcount's argument; a third is someone else's.
        if (buf is None or sys.getrefcount(buf) > 2 or buf.shape != shape
                or buf.dtype != dtype or not buf.flags.owndata or not buf.flags.c_contiguous):
            return np.empty(shape, dtype)
        buf.flags.writeable = True  # frozen while it was installed; it is ours again
        return buf

    def give(self, i: int, old) -> None:
        if isinstance(old, np.ndarray):
            with self._lock:
                self._bufs[i] = old


# Elements per block of the host's blocked dense updates: a block's temporaries stay in cache,
# and a block's dozen NumPy calls cost little beside its arithmetic (at 4K elements the calls
# doubled an Adam update's time).
_UPDATE_BLOCK = 1 << 16

# Elements per block of a rule of two NumPy calls (SGD): its blocks would save one scratch
# array's trip to memory, and on a core whose L2 cache holds less than a block's three arrays
# they save nothing and cost their calls (a 784x512 SGD update on an AMD EPYC with 512 KB of L2:
# 89 us whole, 117 us in 64K-element blocks, 215 us in 8K ones). So such a rule takes the
# array whole, or in blocks as big as a pool's chunk of a variable of millions of elements.
_SHORT_RULE_BLOCK = 1 << 20

# Memory-bound passes per element and per array of a blocked update, as ``intra_op`` counts
# work: Adam makes a dozen passes over three arrays.
_PASSES = 4


def _host_dense_update(update, attrs, refs, arrays, scalars, grad, spares: _Spares,
                       in_place: bool, pool: intra_op.IntraOpPool = intra_op.SERIAL,
                       dnn: onednn.Backend | None = None) -> bool:
    """``update`` applied block by block, into the variable's and its slots' own arrays when
    ``in_place`` is allowed and nothing else holds them, else into recycled buffers, which are
    then installed. The rules are elementwise, so the blocks give the whole-array update's
    bits. A rule with an ``_INTO`` form writes each block straight into the outputs with
    ``out=`` steps and two block-sized scratch arrays; any other rule's block results are
    copied there. With intra-op threads the blocks are shared among them: an update is bound
    by memory bandwidth, and one core alone does not draw all of it (Adam on 3.2M elements:
    18.6 ms on one thread, 10.3 ms on two). Writing in place saves a third of the memory
    traffic of SGD (2M elements: 1.54 ms into another buffer, 1.08 ms in place). A rule with a
    oneDNN form runs on ``dnn`` when given and able (see ``_update_blocks``); returns whether
    it did."""
    in_place = in_place and _held_by_variables_only(arrays)
    var = arrays[0]
    if in_place:
        outs = arrays
        for a in arrays:
            a.flags.writeable = True  # frozen while installed (VarState.set)
    else:
        outs = [spares.take(i, var.shape, var.dtype) for i in range(len(arrays))]
    try:
        on_dnn = _update_blocks(update, attrs, arrays, outs, scalars, grad, pool, dnn)
    finally:
        if in_place:
            for a in arrays:
                a.flags.writeable = False
    if not in_place:
        for i, (r, o) in enumerate(zip(refs, outs)):
            write_variable(np, r, o)
            spares.give(i, arrays[i])
    return on_dnn


def _held_by_variables_only(arrays) -> bool:
    """Whether each of ``arrays`` (distinct, C-contiguous arrays owning their memory, so their
    flat views write into them) is referenced only by its variable and by ``arrays``."""
    if len({id(a) for a in arrays}) != len(arrays) or not all(
            isinstance(a, np.ndarray) and a.flags.owndata and a.flags.c_contiguous
            for a in arrays):
        return False
    # Read through the list's slots only (a local name would be one more reference); a
    # reader's value, a view of it or a held fetch is a reference beyond the sole owner's.
    return all(sys.getrefcount(arrays[i]) <= SOLE_OWNER_REFS for i in range(len(arrays)))


def _update_blocks(update, attrs, arrays, outs, scalars, grad, pool, dnn=None) -> bool:
    """The blocked update of ``arrays`` into ``outs``, which may be ``arrays`` themselves:
    each block is read whole before any of it is written. A rule with a oneDNN form runs on
    ``dnn`` (its blocks, and their threads, are oneDNN's: ``onednn.ops.adam``) where it takes
    the arrays; returns whether it did."""
    var = arrays[0]
    flat_in = [a.reshape(-1) for a in arrays]  # a copy only for a non-contiguous buffer
    flat_out = [o.reshape(-1) for o in outs]
    g = np.asarray(grad).reshape(-1)
    into = _INTO.get(update)
    if into is not None and not into.accepts(attrs, flat_in, g):
        into = None
    consts = into.prepare(var, scalars) if into is not None else None
    if dnn is not None and into is not None and into.onednn and \
            getattr(dnn, into.onednn)(flat_in, g, flat_out, consts):
        return True
    size = var.size

    # Read at each update (not bound when the rules are registered): tests shrink the blocks.
    block = _SHORT_RULE_BLOCK if into is not None and into.short else _UPDATE_BLOCK

    def chunk(first, last):  # elements first..last-1, block by block
        scratch = None
        if into is not None:
            scratch = [np.empty(min(block, last - first), var.dtype) for _ in range(2)]
        for lo in range(first, last, block):
            hi = min(lo + block, last)
            blocks_in = [a[lo:hi] for a in flat_in]
            if into is not None:
                into.fn(blocks_in, consts, g[lo:hi], [o[lo:hi] for o in flat_out],
                        [t[:hi - lo] for t in scratch])
                continue
            new = update(np, attrs, blocks_in, scalars, g[lo:hi])
            for o, a in zip(flat_out, new):
                o[lo:hi] = a

    work = float(size) * len(arrays) * _PASSES * intra_op.PASS_WORK
    pool.run_chunks(chunk, pool.chunks(np, size, work))
    return False


def _resource_form(factory):
    """The kernel of ``Resource<Op>``: the same update on the states the handles name, always
    under their locks; it outputs nothing."""

    def resource_factory(node, ctx):
        run = factory(node, ctx, resource=True)

        def resource_run(*args):
            run(*args)

        resource_run.fn = run  # where traces find its kernel label
        return resource_run

    return resource_factory


# --- the update rules (names as in TF's kernels) ---------------------------------------------
def _gradient_descent(xp, attrs, slots, scalars, grad):
    (var,), (alpha,) = slots, scalars
    step = xp.multiply(grad, alpha, dtype=var.dtype)
    if step.ndim == 0:  # a 0-d product is a scalar, which cannot be written into
        return [xp.subtract(var, step)]
    return [xp.subtract(var, step, out=step)]  # one fresh array: the new value


def _momentum(xp, attrs, slots, scalars, grad):
    (var, accum), (lr, momentum) = slots, scalars
    accum = accum * momentum + grad
    if attrs.get("use_nesterov", False):
        return [var - (grad * lr + accum * momentum * lr), accum]
    return [var - accum * lr, accum]


def _adagrad(xp, attrs, slots, scalars, grad):
    (var, accum), (lr,) = slots, scalars
    if attrs.get("update_slots", True):
        accum = accum + grad * grad
    return [var - grad * lr * (xp.ones((), dtype=var.dtype) / xp.sqrt(accum)), accum]


def _rms_prop(xp, attrs, slots, scalars, grad):
    (var, ms, mom), (lr, rho, momentum, epsilon) = slots, scalars
    one = xp.ones((), dtype=var.dtype)
    ms = ms + (grad * grad - ms) * (one - rho)
    mom = mom * momentum + grad * lr / xp.sqrt(ms + epsilon)
    return [var - mom, ms, mom]


def _centered_rms_prop(xp, attrs, slots, scalars, grad):
    (var, mg, ms, mom), (lr, rho, momentum, epsilon) = slots, scalars
    one = xp.ones((), dtype=var.dtype)
    ms = ms + (grad * grad - ms) * (one - rho)
    mg = mg + (grad - mg) * (one - rho)
    denom = (ms - mg * mg) + epsilon
    mom = mom * momentum + grad * lr / xp.sqrt(denom)
    return [var - mom, mg, ms, mom]


def _adam_alpha(xp, var, beta1_power, beta2_power, lr):
    one = xp.ones((), dtype=var.dtype)
    return lr * xp.sqrt(one - beta2_power) / (one - beta1_power)


def _adam(xp, attrs, slots, scalars, grad):
    (var, m, v), (beta1_power, beta2_power, lr, beta1, beta2, epsilon) = slots, scalars
    one = xp.ones((), dtype=var.dtype)
    alpha = _adam_alpha(xp, var, beta1_power, beta2_power, lr)
    # TF's expressions, operation by operation, but folded into a few fresh buffers with
    # in-place steps: a big variable's update was a dozen full-size temporaries.
    m_new = grad - m
    m_new *= one - beta1
    m_new += m
    v_new = grad * grad
    v_new -= v
    v_new *= one - beta2
    v_new += v
    denom = xp.sqrt(v_new)
    denom += epsilon
    if attrs.get("use_nesterov", False):
        step = (grad * (one - beta1) + beta1 * m_new) * alpha
    else:
        step = m_new * alpha
    step /= denom
    if isinstance(step, xp.ndarray):
        return [xp.subtract(var, step, out=step), m_new, v_new]
    return [var - step, m_new, v_new]  # a 0-d variable: NumPy computes scalars, no buffers


def _adam_constants(var, scalars):
    """The scalars ``_adam_into`` uses, computed once per update as ``_adam`` computes them."""
    beta1_power, beta2_power, lr, beta1, beta2, epsilon = scalars
    one = np.ones((), dtype=var.dtype)
    return one - beta1, one - beta2, epsilon, _adam_alpha(np, var, beta1_power, beta2_power, lr)


def _adam_into(blocks, consts, grad, outs, scratch) -> None:
    """``_adam`` (without Nesterov) on one block, the same operations in the same order (so
    the same bits), written into ``outs``, which may be ``blocks`` themselves: each input is
    last read by the step that writes its output; ``consts`` from ``_adam_constants``."""
    (var, m, v), (c1, c2, epsilon, alpha) = blocks, consts
    var_new, m_new, v_new = outs
    s, t = scratch
    np.subtract(grad, m, out=s)
    s *= c1
    np.add(s, m, out=m_new)
    np.multiply(grad, grad, out=t)
    t -= v
    t *= c2
    np.add(t, v, out=v_new)
    np.sqrt(v_new, out=t)  # the denominator
    t += epsilon
    np.multiply(m_new, alpha, out=s)  # the step
    s /= t
    np.subtract(var, s, out=var_new)


def _gradient_descent_into(blocks, consts, grad, outs, scratch) -> None:
    """``_gradient_descent`` on one block, written into ``outs`` (which may be ``blocks``)."""
    (var,), (alpha,), (var_new,) = blocks, consts, outs
    step = scratch[0]
    np.multiply(grad, alpha, out=step, dtype=var.dtype)
    np.subtract(var, step, out=var_new)


class _Into:
    """A rule's block-into-outputs form ``fn(blocks, consts, grad, outs, scratch)``, the
    constants it takes from the update's scalars (``prepare(var, scalars)``, once per update),
    and when it applies (``accepts(attrs, arrays, grad)``: the same dtype throughout, so that
    ``out=`` steps round as the rule does); ``short``: a rule of a few steps, run in
    ``_SHORT_RULE_BLOCK``-element blocks rather than ``_UPDATE_BLOCK``-element ones;
    ``onednn``: the name of the ``onednn.Backend`` method computing the same blocks with the
    same bits, where there is one."""

    def __init__(self, fn, prepare=None, extra=None, short: bool = False,
                 onednn: str | None = None):
        self.fn = fn
        self.onednn = onednn
        self.prepare = prepare or (lambda var, scalars: scalars)
        self.extra = extra
        self.short = short

    def accepts(self, attrs, arrays, grad) -> bool:
        same = all(a.dtype == arrays[0].dtype for a in arrays) and grad.dtype == arrays[0].dtype
        return same and arrays[0].dtype.kind == "f" and (self.extra is None
                                                         or self.extra(attrs))


def _sparse_adam(xp, attrs, slots, scalars, rows, grad):
    """TF1 ``AdamOptimizer._apply_sparse_shared``: m and v decay everywhere, the (deduplicated)
    gradient terms are scattered into their rows, and the whole variable moves."""
    (var, m, v), (beta1_power, beta2_power, lr, beta1, beta2, epsilon) = slots, scalars
    one = xp.ones((), dtype=var.dtype)
    alpha = _adam_alpha(xp, var, beta1_power, beta2_power, lr)
    m = m * beta1
    m[rows] += grad * (one - beta1)
    v = v * beta2
    v[rows] += (grad * grad) * (one - beta2)
    return [var - alpha * m / (xp.sqrt(v) + epsilon), m, v]


def _adadelta(xp, attrs, slots, scalars, grad):
    (var, accum, accum_update), (lr, rho, epsilon) = slots, scalars
    one = xp.ones((), dtype=var.dtype)
    accum = accum * rho + grad * grad * (one - rho)
    update = xp.sqrt(accum_update + epsilon) * (one / xp.sqrt(accum + epsilon)) * grad
    accum_update = accum_update * rho + update * update * (one - rho)
    return [var - update * lr, accum, accum_update]


def _shrink(xp, prox, threshold, denom, l1):
    """TF's proximal step: soft-threshold ``prox`` by ``threshold`` when l1 > 0, then scale."""
    if l1 > 0:
        zero = xp.zeros((), dtype=prox.dtype)
        return xp.sign(prox) * xp.maximum(xp.abs(prox) - threshold, zero) / denom
    return prox / denom


def _proximal_gradient_descent(xp, attrs, slots, scalars, grad):
    (var,), (alpha, l1, l2) = slots, scalars
    one = xp.ones((), dtype=var.dtype)
    prox = var - grad * alpha
    return [_shrink(xp, prox, alpha * l1, one + l2 * alpha, l1)]


def _proximal_adagrad(xp, attrs, slots, scalars, grad):
    (var, accum), (lr, l1, l2) = slots, scalars
    one = xp.ones((), dtype=var.dtype)
    accum = accum + grad * grad
    rate = lr * (one / xp.sqrt(accum))
    prox = var - grad * rate
    return [_shrink(xp, prox, rate * l1, one + l2 * rate, l1), accum]


def _ftrl_power(xp, a, lr_power):
    return xp.sqrt(a) if lr_power == -0.5 else xp.power(a, -lr_power)


def _ftrl_update(xp, var, accum, linear, grad, shrunk_grad, lr, l1, l2, lr_power):
    """TF's FTRL step; ``shrunk_grad`` is the gradient ``linear`` takes (V2 adds shrinkage)."""
    two = xp.asarray(2, dtype=var.dtype)
    new_accum = accum + grad * grad
    new_power = _ftrl_power(xp, new_accum, lr_power)
    linear = linear + (shrunk_grad - (new_power - _ftrl_power(xp, accum, lr_power)) / lr * var)
    x = l1 * xp.sign(linear) - linear
    y = new_power / lr + two * l2
    var = xp.where(xp.abs(linear) > l1, x / y, xp.zeros((), dtype=var.dtype))
    return [var, new_accum, linear]


def _ftrl(xp, attrs, slots, scalars, grad):
    (var, accum, linear), (lr, l1, l2, lr_power) = slots, scalars
    return _ftrl_update(xp, var, accum, linear, grad, grad, lr, l1, l2, lr_power)


def _ftrl_v2(xp, attrs, slots, scalars, grad):
    (var, accum, linear), (lr, l1, l2, l2_shrinkage, lr_power) = slots, scalars
    shrunk = grad + xp.asarray(2, dtype=var.dtype) * l2_shrinkage * var
    return _ftrl_update(xp, var, accum, linear, grad, shrunk, lr, l1, l2, lr_power)


def _adagrad_da(xp, attrs, slots, scalars, grad):
    """TF's dense form: var = -lr * sign(g) * max(|g| - T l1, 0) / (l2 T lr + sqrt(gg)), with
    the step T taken to float32 first, as TF's kernel casts it."""
    (var, g, gg), (lr, l1, l2, global_step) = slots, scalars
    g = g + grad
    gg = gg + grad * grad
    step = xp.asarray(global_step).astype(np.float32).astype(var.dtype)
    minus = xp.asarray(-1, dtype=var.dtype)
    denom = l2 * step * lr + xp.sqrt(gg)
    if l1 > 0:
        zero = xp.zeros((), dtype=var.dtype)
        shrunk = xp.maximum(xp.abs(g) - step * l1, zero)
        return [lr * minus * xp.sign(g) * shrunk / denom, g, gg]
    return [lr * g * minus / denom, g, gg]


def _sparse_adagrad_da(xp, attrs, slots, scalars, grad):
    """TF's sparse form, arranged as its kernel arranges it: the average accumulated gradient
    g / T against l1, over l2 + sqrt(gg) / (T lr)."""
    (var, g, gg), (lr, l1, l2, global_step) = slots, scalars
    g = g + grad
    gg = gg + grad * grad
    step = xp.asarray(global_step).astype(var.dtype)
    gs_lr = (xp.asarray(global_step).astype(np.float64) * xp.asarray(lr).astype(np.float64)
             ).astype(var.dtype)
    minus = xp.asarray(-1, dtype=var.dtype)
    denom = l2 + xp.sqrt(gg) / gs_lr
    if l1 > 0:
        zero = xp.zeros((), dtype=var.dtype)
        shrunk = xp.maximum(xp.abs(g) / step - l1, zero)
        return [minus * xp.sign(g) * shrunk / denom, g, gg]
    return [minus * (g / step) / denom, g, gg]


_INTO = {
    _adam: _Into(_adam_into, _adam_constants, lambda attrs: not attrs.get("use_nesterov", False),
                 onednn="adam"),
    _gradient_descent: _Into(_gradient_descent_into, short=True),
}

_training_kernel("ApplyGradientDescent", _gradient_descent)
_training_kernel("ApplyMomentum", _momentum)
_training_kernel("SparseApplyMomentum", _momentum, sparse=True)
_training_kernel("ApplyAdagrad", _adagrad)
_training_kernel("SparseApplyAdagrad", _adagrad, sparse=True)
_training_kernel("ApplyRMSProp", _rms_prop)
_training_kernel("SparseApplyRMSProp", _rms_prop, sparse=True)
_training_kernel("ApplyCenteredRMSProp", _centered_rms_prop)
_training_kernel("SparseApplyCenteredRMSProp", _centered_rms_prop, sparse=True)
_training_kernel("ApplyAdam", _adam)
_training_kernel("SparseApplyAdam", _sparse_adam, sparse=True, dense_rows=True)
_training_kernel("ApplyAdadelta", _adadelta)
_training_kernel("SparseApplyAdadelta", _adadelta, sparse=True)
_training_kernel("ApplyProximalGradientDescent", _proximal_gradient_descent)
_training_kernel("SparseApplyProximalGradientDescent", _proximal_gradient_descent, sparse=True)
_training_kernel("ApplyProximalAdagrad", _proximal_adagrad)
_training_kernel("SparseApplyProximalAdagrad", _proximal_adagrad, sparse=True)
_training_kernel("ApplyFtrl", _ftrl)
_training_kernel("SparseApplyFtrl", _ftrl, sparse=True)
_training_kernel("ApplyFtrlV2", _ftrl_v2)
_training_kernel("SparseApplyFtrlV2", _ftrl_v2, sparse=True)
_training_kernel("ApplyAdagradDA", _adagrad_da)
_training_kernel("SparseApplyAdagradDA", _sparse_adagrad_da, sparse=True)
