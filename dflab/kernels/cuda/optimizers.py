"""Dense optimizer updates in one launch each on a GPU: ``ApplyGradientDescent``,
``ApplyMomentum``, ``ApplyAdagrad``, ``ApplyRMSProp``, ``ApplyAdam`` and their ``Resource``
forms, as ``CudaProgram``s that update the variable and its slots in their own buffers
(``training_kernels.register_device_update``; the shared kernel keeps the locking, the checks
and the sparse forms).

The scalars (learning rate, decay powers, ...) are read by the kernel from device memory, so a
captured step reads this step's ``beta1_power`` when replayed. The formulas are TF's
``training_ops`` term by term, in the variable's dtype, as the shared kernels compute them.
"""

from __future__ import annotations

import numpy as np

from dflab.kernels.cuda import program as P
from dflab.kernels.training_kernels import register_device_update

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


SGD = P.family("dflab_apply_sgd", "T* var, const T* grad, const T* alpha, int n", _LOOP + r"""
    var[i] = var[i] - grad[i] * *alpha;
""", _sgd_ref)

MOMENTUM = P.family(
    "dflab_apply_momentum", "T* var, T* accum, const T* grad, const T* lr, const T* momentum, "
    "int n, int nesterov", r"""
  const T l = *lr, mu = *momentum;
""" + _LOOP + r"""
  {
    const T a = accum[i] * mu + grad[i];
    accum[i] = a;
    var[i] = nesterov ? var[i] - (grad[i] * l + a * mu * l) : var[i] - a * l;
  }
""", _momentum_ref)

ADAGRAD = P.family(
    "dflab_apply_adagrad", "T* var, T* accum, const T* grad, const T* lr, int n, "
    "int update_slots", r"""
  const T l = *lr;
""" + _LOOP + r"""
  {
    const T g = grad[i];
    T a = accum[i];
    if (update_slots) { a = a + g * g; accum[i] = a; }
    var[i] = var[i] - g * l * ((T)1 / sqrt(a));
  }
""", _adagrad_ref)

RMS_PROP = P.family(
    "dflab_apply_rms_prop", "T* var, T* ms, T* mom, const T* grad, const T* lr, const T* rho, "
    "const T* momentum, const T* epsilon, int n", r"""
  const T l = *lr, r = *rho, mu = *momentum, eps = *epsilon;
""" + _LOOP + r"""
  {
    const T g = grad[i];
    const T s = ms[i] + (g * g - ms[i]) * ((T)1 - r);
    const T mo = mom[i] * mu + g * l / sqrt(s + eps);
    ms[i] = s; mom[i] = mo; var[i] = var[i] - mo;
  }
""", _rms_prop_ref)

ADAM = P.family(
    "dflab_apply_adam", "T* var, T* m, T* v, const T* grad, const T* beta1_power, "
    "const T* beta2_power, const T* lr, const T* beta1, const T* beta2, const T* epsilon, "
    "int n, int nesterov", r"""
  const T b1 = *beta1, b2 = *beta2, eps = *epsilon;
  const T alpha = *lr * sqrt((T)1 - *beta2_power) / ((T)1 - *beta1_power);
""" + _LOOP + r"""
  {
    const T g = grad[i];
    const T mi = (g - m[i]) * ((T)1 - b1) + m[i];
    const T vi = (g * g - v[i]) * ((T)1 - b2) + v[i];
    const T step = nesterov ? (g * ((T)1 - b1) + b1 * mi) * alpha : mi * alpha;
    m[i] = mi; v[i] = vi;
    var[i] = var[i] - step / (sqrt(vi) + eps);
  }
""", _adam_ref)


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
register_device_update("GPU", "ApplyAdam", _device_update(
    ADAM, lambda a: (bool(a.get("use_nesterov", False)),)))
