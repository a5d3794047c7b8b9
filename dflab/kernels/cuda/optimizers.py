"""Optimizer updates on a GPU as ``CudaProgram``s that update the variable and its slots in
their own buffers, reading no value on the host (so a step with them can be captured):

* dense, one launch each: ``ApplyGradientDescent``, ``ApplyMomentum``, ``ApplyAdagrad``,
  ``ApplyRMSProp``, ``ApplyAdam`` and their ``Resource`` forms
  (``training_kernels.register_device_update``);
* sparse, a fixed five launches whatever the rows: ``SparseApplyMomentum``,
  ``SparseApplyAdagrad``, ``SparseApplyRMSProp`` and their ``Resource`` forms
  (``register_device_sparse_update``). The rows are not deduplicated on the host (a sort whose
  size the host must read): each row's first position in ``indices`` is found with an atomic
  minimum into a table of the variable's rows, every position adds its gradient row into that
  first position's (atomically), and the update runs once per row, from there, with the rule's
  dense formula. As TF's GPU kernels, an index out of range is skipped (the CPU's raises).
  ``SparseApplyAdam``, whose moments decay in every row (TF 1.x's), is the dense update of the
  gradient rows added into zeros (three launches).

The shared kernel keeps the locking and the checks.

The scalars (learning rate, decay powers, ...) are read by the kernel from device memory, so a
captured step reads this step's ``beta1_power`` when replayed. The formulas are TF's
``training_ops`` term by term, in the variable's dtype, as the shared kernels compute them.
"""

from __future__ import annotations

import numpy as np

from dflab.kernels.cuda import program as P
from dflab.kernels.cuda.gather import add_rows
from dflab.kernels.training_kernels import register_device_sparse_update, register_device_update

_LOOP = "  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)"


def _sgd_ref(var, grad, alpha, n):
    var -= (grad * alpha[()]).astype(var.dtype)


def _momentum_ref(var, accum, grad, lr, momentum, n, nesterov):
    accum[...] = accum * momentum[()] + grad
    if nesterov:
        var -= grad * lr[()] + accum * momentum[()] * lr[()]
    else:
        var -= accum * lr[()]


def _adagrad_ref(var, accum, grad, lr, n, update_slots):
    if update_slots:
        accum += grad * grad
    var -= grad * lr[()] * (np.ones((), var.dtype) / np.sqrt(accum))


def _rms_prop_ref(var, ms, mom, grad, lr, rho, momentum, epsilon, n):
    one = np.ones((), var.dtype)
    ms += (grad * grad - ms) * (one - rho[()])
    mom[...] = mom * momentum[()] + grad * lr[()] / np.sqrt(ms + epsilon[()])
    var -= mom


def _adam_ref(var, m, v, grad, beta1_power, beta2_power, lr, beta1, beta2, epsilon, n,
              nesterov):
    one = np.ones((), var.dtype)
    alpha = lr[()] * np.sqrt(one - beta2_power[()]) / (one - beta1_power[()])
    m[...] = (grad - m) * (one - beta1[()]) + m
    v[...] = (grad * grad - v) * (one - beta2[()]) + v
    if nesterov:
        step = (grad * (one - beta1[()]) + beta1[()] * m) * alpha
    else:
        step = m * alpha
    var -= step / (np.sqrt(v) + epsilon[()])


# Each rule as a prelude (the scalars read once) and the update of element ``i`` of the variable
# and its slots from ``grad[G]``: the dense program reads the gradient at ``i``, the sparse one
# at its summed row's element.
_RULES = {
    "sgd": ("", r"""
    var[i] = var[i] - grad[G] * *alpha;
"""),
    "momentum": (r"""
  const T l = *lr, mu = *momentum;
""", r"""
  {
    const T a = accum[i] * mu + grad[G];
    accum[i] = a;
    var[i] = nesterov ? var[i] - (grad[G] * l + a * mu * l) : var[i] - a * l;
  }
"""),
    "adagrad": (r"""
  const T l = *lr;
""", r"""
  {
    const T g = grad[G];
    T a = accum[i];
    if (update_slots) { a = a + g * g; accum[i] = a; }
    var[i] = var[i] - g * l * ((T)1 / sqrt(a));
  }
"""),
    "rms_prop": (r"""
  const T l = *lr, r = *rho, mu = *momentum, eps = *epsilon;
""", r"""
  {
    const T g = grad[G];
    const T s = ms[i] + (g * g - ms[i]) * ((T)1 - r);
    const T mo = mom[i] * mu + g * l / sqrt(s + eps);
    ms[i] = s; mom[i] = mo; var[i] = var[i] - mo;
  }
"""),
    "adam": (r"""
  const T b1 = *beta1, b2 = *beta2, eps = *epsilon;
  const T alpha = *lr * sqrt((T)1 - *beta2_power) / ((T)1 - *beta1_power);
""", r"""
  {
    const T g = grad[G];
    const T mi = (g - m[i]) * ((T)1 - b1) + m[i];
    const T vi = (g * g - v[i]) * ((T)1 - b2) + v[i];
    const T step = nesterov ? (g * ((T)1 - b1) + b1 * mi) * alpha : mi * alpha;
    m[i] = mi; v[i] = vi;
    var[i] = var[i] - step / (sqrt(vi) + eps);
  }
"""),
}
# Parameters: the variable and its slots, the gradient, the scalars, the size, the flags.
_PARAMS = {
    "sgd": "T* var, const T* grad, const T* alpha, int n",
    "momentum": "T* var, T* accum, const T* grad, const T* lr, const T* momentum, int n, "
                "int nesterov",
    "adagrad": "T* var, T* accum, const T* grad, const T* lr, int n, int update_slots",
    "rms_prop": "T* var, T* ms, T* mom, const T* grad, const T* lr, const T* rho, "
                "const T* momentum, const T* epsilon, int n",
    "adam": "T* var, T* m, T* v, const T* grad, const T* beta1_power, const T* beta2_power, "
            "const T* lr, const T* beta1, const T* beta2, const T* epsilon, int n, int nesterov",
}
_REFS = {"sgd": _sgd_ref, "momentum": _momentum_ref, "adagrad": _adagrad_ref,
         "rms_prop": _rms_prop_ref, "adam": _adam_ref}


def _dense(rule: str) -> dict:
    prelude, element = _RULES[rule]
    return P.family(f"dflab_apply_{rule}", _PARAMS[rule],
                    prelude + _LOOP + element.replace("grad[G]", "grad[i]"), _REFS[rule])


SGD, MOMENTUM, ADAGRAD, RMS_PROP, ADAM = (_dense(r) for r in
                                         ("sgd", "momentum", "adagrad", "rms_prop", "adam"))


def device_scalar(xp, s, dtype):
    """A scalar operand as a 0-d device array of ``dtype`` (a host value by a fill kernel,
    which a capture can record)."""
    if isinstance(s, xp.ndarray) and s.ndim == 0:
        return s if s.dtype == dtype else s.astype(dtype)
    return xp.full((), np.asarray(s).item() if not isinstance(s, xp.ndarray) else s, dtype)


def _device_update(programs, flags=lambda attrs: ()):
    def update(xp, attrs, arrays, scalars, grad) -> bool:
        var = arrays[0]
        prog = programs.get(np.dtype(var.dtype).name)
        if prog is None or not isinstance(grad, xp.ndarray) or grad.dtype != var.dtype:
            return False
        if not all(a.flags.c_contiguous and a.dtype == var.dtype for a in arrays) or \
                not P.fits_int32(var.size + P.MAX_BLOCKS * P.BLOCK):
            return False
        if var.size == 0:
            return True
        if not grad.flags.c_contiguous:
            grad = xp.ascontiguousarray(grad)
        args = (*arrays, grad, *(device_scalar(xp, s, var.dtype) for s in scalars),
                np.int32(var.size), *(np.int32(f) for f in flags(attrs)))
        P.launch(xp, prog, P.grid_for(var.size), P.BLOCK, args)
        return True

    return update


register_device_update("GPU", "ApplyGradientDescent", _device_update(SGD))
register_device_update("GPU", "ApplyMomentum", _device_update(
    MOMENTUM, lambda a: (bool(a.get("use_nesterov", False)),)))
register_device_update("GPU", "ApplyAdagrad", _device_update(
    ADAGRAD, lambda a: (bool(a.get("update_slots", True)),)))
register_device_update("GPU", "ApplyRMSProp", _device_update(RMS_PROP))
_DENSE_ADAM = _device_update(ADAM, lambda a: (bool(a.get("use_nesterov", False)),))
register_device_update("GPU", "ApplyAdam", _DENSE_ADAM)


# --- sparse updates --------------------------------------------------------------------------
_INDEX_C = {"int32": "int", "int64": "long long"}
_NO_OWNER = np.iinfo(np.int32).max


def _in_range(idx, limit):
    i = idx.astype(np.int64)
    return i, (i >= 0) & (i < limit)


def _owner_ref(idx, owner, n_idx, limit):
    i, ok = _in_range(idx, limit)
    np.minimum.at(owner, i[ok], np.arange(n_idx, dtype=np.int32)[ok])


def _sum_ref(idx, owner, grad, summed, n, inner, limit):
    i, ok = _in_range(idx, limit)
    g = grad.reshape(len(i), inner)
    np.add.at(summed.reshape(len(i), inner), owner[i[ok]], g[ok])


def _sparse_ref(rule: str, n_slots: int):
    """The sparse program's reference: the dense reference on the rows whose first position
    in ``indices`` holds their summed gradient."""
    dense = _REFS[rule]

    def ref(*args):
        slots, summed = args[:n_slots], args[n_slots]
        idx, owner, inner, limit = args[-4:]
        scalars_flags = args[n_slots + 1:-4]
        i, ok = _in_range(idx, limit)
        k = np.arange(len(i))
        first = ok & (owner[np.where(ok, i, 0)] == k)
        rows = i[first]
        parts = [a.reshape(-1, inner)[rows].copy() for a in slots]
        g = summed.reshape(len(i), inner)[first].copy()
        # The dense reference's size argument (n) follows the scalars; flags after it.
        n_scalars = len([p for p in _PARAMS[rule].split(",") if "const T*" in p]) - 1
        scalars, flags = scalars_flags[:n_scalars], scalars_flags[n_scalars + 1:]
        dense(*parts, g, *scalars, np.int32(g.size), *flags)
        for a, part in zip(slots, parts):
            a.reshape(-1, inner)[rows] = part

    return ref


OWNER, SUM, SPARSE = {}, {}, {}
for _it, _ic in _INDEX_C.items():
    OWNER[_it] = P.CudaProgram(
        f"dflab_sparse_owner_{_it}",
        tuple(P.parse_param(p) for p in
              f"const {_ic}* idx, int* owner, int n_idx, int limit".split(",")), r"""
  for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < n_idx; k += blockDim.x * gridDim.x) {
    const long long r = idx[k];
    if (r >= 0 && r < limit) atomicMin(&owner[r], k);
  }
""", _owner_ref)
    for _dt, _prog in P.family(
            f"dflab_sparse_sum_{_it}", f"const {_ic}* idx, const int* owner, const T* grad, "
            "T* summed, int n, int inner, int limit", r"""
  for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < n; e += blockDim.x * gridDim.x) {
    const int k = e / inner;
    const long long r = idx[k];
    if (r >= 0 && r < limit) atomicAdd(&summed[owner[r] * inner + (e - k * inner)], grad[e]);
  }
""", _sum_ref).items():
        SUM[(_dt, _it)] = _prog
    for _rule in ("momentum", "adagrad", "rms_prop"):
        _prelude, _element = _RULES[_rule]
        _n_slots = _PARAMS[_rule].split(", const T* grad")[0].count("T*")
        # The loop's own names start with "sparse_": a rule's prelude declares one-letter
        # scalars (RMSProp's ``r`` is rho), which a loop variable of the same name would hide.
        for _dt, _prog in P.family(
                f"dflab_sparse_apply_{_rule}_{_it}",
                _PARAMS[_rule] + f", const {_ic}* idx, const int* owner, int inner, int limit",
                _prelude + r"""
  for (int sparse_e = blockIdx.x * blockDim.x + threadIdx.x; sparse_e < n;
       sparse_e += blockDim.x * gridDim.x) {
    const int sparse_k = sparse_e / inner;
    const long long sparse_row = idx[sparse_k];
    if (sparse_row < 0 || sparse_row >= limit || owner[sparse_row] != sparse_k)
      continue;  // not this row's first position
    const long long i = sparse_row * inner + (sparse_e - sparse_k * inner);
""" + _element.replace("grad[G]", "grad[sparse_e]") + "  }\n",
                _sparse_ref(_rule, _n_slots)).items():
            SPARSE[(_rule, _dt, _it)] = _prog


def _device_sparse_update(rule: str, flags=lambda attrs: ()):
    """The sparse form of ``rule``: five launches (the owner table filled and found, the
    summed rows zeroed and summed, the update), or False where it does not apply."""

    def update(xp, attrs, arrays, scalars, indices, grad) -> bool:
        var = arrays[0]
        if not isinstance(indices, xp.ndarray):
            return False
        dt, it = np.dtype(var.dtype).name, np.dtype(indices.dtype).name
        prog = SPARSE.get((rule, dt, it))
        if prog is None or \
                not isinstance(grad, xp.ndarray) or grad.dtype != var.dtype or \
                indices.ndim != 1 or var.ndim == 0 or \
                tuple(grad.shape) != tuple(indices.shape) + tuple(var.shape[1:]):
            return False
        if not all(a.flags.c_contiguous and a.dtype == var.dtype for a in arrays) or \
                not P.fits_int32(var.size, grad.size + P.MAX_BLOCKS * P.BLOCK):
            return False
        if grad.size == 0:
            return True
        inner, limit, n_idx = int(grad.size // len(indices)), int(var.shape[0]), len(indices)
        idx = indices if indices.flags.c_contiguous else xp.ascontiguousarray(indices)
        grad = grad if grad.flags.c_contiguous else xp.ascontiguousarray(grad)
        owner = xp.full(limit, _NO_OWNER, np.int32)
        P.launch(xp, OWNER[it], P.grid_for(n_idx), P.BLOCK,
                 (idx, owner, np.int32(n_idx), np.int32(limit)))
        summed = xp.zeros(grad.shape, grad.dtype)
        P.launch(xp, SUM[(dt, it)], P.grid_for(grad.size), P.BLOCK,
                 (idx, owner, grad, summed, np.int32(grad.size), np.int32(inner),
                  np.int32(limit)))
        args = (*arrays, summed, *(device_scalar(xp, s, var.dtype) for s in scalars),
                np.int32(grad.size), *(np.int32(f) for f in flags(attrs)),
                idx, owner, np.int32(inner), np.int32(limit))
        P.launch(xp, prog, P.grid_for(grad.size), P.BLOCK, args)
        return True

    return update


register_device_sparse_update("GPU", "SparseApplyMomentum", _device_sparse_update(
    "momentum", lambda a: (bool(a.get("use_nesterov", False)),)))
register_device_sparse_update("GPU", "SparseApplyAdagrad", _device_sparse_update(
    "adagrad", lambda a: (bool(a.get("update_slots", True)),)))
register_device_sparse_update("GPU", "SparseApplyRMSProp", _device_sparse_update("rms_prop"))


def _device_sparse_adam(xp, attrs, arrays, scalars, indices, grad) -> bool:
    """TF 1.x's sparse Adam, whose m and v decay in every row: the gradient rows added into
    zeros of the variable's shape (repeats summed), then the dense update (three launches)."""
    var = arrays[0]
    if not isinstance(indices, xp.ndarray) or indices.ndim != 1 or var.ndim == 0 or \
            not isinstance(grad, xp.ndarray) or grad.dtype != var.dtype or \
            tuple(grad.shape) != tuple(indices.shape) + tuple(var.shape[1:]):
        return False
    dense = xp.zeros(var.shape, var.dtype)
    return add_rows(xp, dense, indices, grad) and _DENSE_ADAM(xp, attrs, arrays, scalars, dense)


register_device_sparse_update("GPU", "SparseApplyAdam", _device_sparse_adam)
