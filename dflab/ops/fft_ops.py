"""Fast Fourier transforms: ``fft``/``ifft`` over the innermost 1, 2 or 3 dimensions of a
complex tensor, the real-input ``rfft``/``irfft`` family (``fft_length`` given or inferred, the
input zero-padded first as TF's wrappers do), and the N-d ops ``fftnd``/``ifftnd``/``rfftnd``/
``irfftnd`` over chosen axes. ``tf.spectral`` and ``tf.signal`` hold them under TF's names.

Schemas, gradients and builders side by side; kernels in ``dflab.kernels.fft_kernels``. The
gradients are TF's (``fft_ops.py``): a transform's gradient is the inverse transform scaled
by the size; the real transforms add the terms that Hermitian symmetry dropped. As in TF,
``RFFT3D``, ``IRFFT3D`` and the N-d ops have no gradient (differentiating them is a
``LookupError``). TF 2.21 has kernels for the N-d ops on GPUs only; here they run anywhere.
"""

from __future__ import annotations

import numpy as np

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.constant_op import constant, constant_value
from dflab.framework.registry import RegisterGradient, register_op
from dflab.framework.tensor_shape import TensorShape
from dflab.ops import array_ops
from dflab.ops import math_ops as _m
from dflab.ops.special_math_ops import conj, real

_REAL_OF = {_dt.complex64: _dt.float32, _dt.complex128: _dt.float64}
_COMPLEX_OF = {_dt.float32: _dt.complex64, _dt.float64: _dt.complex128}
_RANK = {"FFT": 1, "IFFT": 1, "FFT2D": 2, "IFFT2D": 2, "FFT3D": 3, "IFFT3D": 3,
         "RFFT": 1, "IRFFT": 1, "RFFT2D": 2, "IRFFT2D": 2, "RFFT3D": 3, "IRFFT3D": 3}


def _check_type(op, t, allowed, what):
    dt = t.dtype.base_dtype
    if dt not in allowed:
        names = ", ".join(a.name for a in allowed)
        raise TypeError(f"Value passed to parameter '{what}' of '{op.type}' has DataType "
                        f"{dt.name} not in the list of allowed values: {names}")
    return dt


# --- complex to complex -------------------------------------------------------------------------
def _complex_infer(op):
    x = op.inputs[0]
    dt = _check_type(op, x, tuple(_REAL_OF), "input")
    return [(dt, x.shape.with_rank_at_least(_RANK[op.type]))]


for _t in ("FFT", "IFFT", "FFT2D", "IFFT2D", "FFT3D", "IFFT3D"):
    register_op(_t, _complex_infer)


def _c2c(op_type):
    def build(input, name=None):  # noqa: A002 - TF's argument name
        x = _ops.convert_to_tensor(input, preferred_dtype=_dt.complex64) \
            if not _ops.is_tensor_like(input) else _ops.convert_to_tensor(input)
        return _ops.apply_op(op_type, [x], None, name).outputs[0]

    build.__name__ = build.__qualname__ = op_type.lower()
    build.__doc__ = (f"The {'inverse ' if op_type.startswith('I') else ''}discrete Fourier "
                     f"transform over the innermost {_RANK[op_type]} dimension(s).")
    return build


fft, ifft = _c2c("FFT"), _c2c("IFFT")
fft2d, ifft2d = _c2c("FFT2D"), _c2c("IFFT2D")
fft3d, ifft3d = _c2c("FFT3D"), _c2c("IFFT3D")


def _fft_size(t, rank):
    """The number of entries in the innermost ``rank`` dimensions of ``t``."""
    dims = t.shape.as_list()[-rank:] if t.shape.ndims is not None else None
    if dims is not None and None not in dims:
        return constant(int(np.prod(dims)), dtype=_dt.int32)
    return _m.reduce_prod(array_ops.shape(t)[-rank:])


def _c2c_grad(inverse_fn, scale_up):
    def grad_fn(op, grad):
        size = _m.cast(_fft_size(grad, _RANK[op.type]), _REAL_OF[grad.dtype.base_dtype])
        if not scale_up:
            size = _m.reciprocal(size)
        return _m.multiply(inverse_fn(grad), _m.cast(size, grad.dtype.base_dtype))

    return grad_fn


for _t, _inv, _up in (("FFT", ifft, True), ("IFFT", fft, False), ("FFT2D", ifft2d, True),
                      ("IFFT2D", fft2d, False), ("FFT3D", ifft3d, True),
                      ("IFFT3D", fft3d, False)):
    RegisterGradient(_t)(_c2c_grad(_inv, _up))


# --- real to complex and back -------------------------------------------------------------------
def _fft_length_infer(op, length_input=1):
    n = op.inputs[length_input]
    if not n.dtype.base_dtype.is_integer:
        raise TypeError(f"fft_length of '{op.type}' must be int32, got {n.dtype.name}")
    value = constant_value(n)
    return None if value is None else [int(v) for v in np.ravel(value)]


def _rfft_infer(op):
    x = op.inputs[0]
    _check_type(op, x, tuple(_COMPLEX_OF), "input")
    rank = _RANK[op.type]
    shape = x.shape.with_rank_at_least(rank)
    out = op.get_attr("Tcomplex")
    lengths = _fft_length_infer(op)
    if shape.ndims is None:
        return [(out, TensorShape(None))]
    inner = [None] * rank if lengths is None else lengths[:-1] + [lengths[-1] // 2 + 1]
    return [(out, TensorShape(shape.as_list()[:-rank] + inner))]


def _irfft_infer(op):
    x = op.inputs[0]
    _check_type(op, x, tuple(_REAL_OF), "input")
    rank = _RANK[op.type]
    shape = x.shape.with_rank_at_least(rank)
    out = op.get_attr("Treal")
    lengths = _fft_length_infer(op)
    if shape.ndims is None:
        return [(out, TensorShape(None))]
    inner = [None] * rank if lengths is None else lengths
    return [(out, TensorShape(shape.as_list()[:-rank] + inner))]


for _t in ("RFFT", "RFFT2D", "RFFT3D"):
    register_op(_t, _rfft_infer)
for _t in ("IRFFT", "IRFFT2D", "IRFFT3D"):
    register_op(_t, _irfft_infer)


def _inferred_length(x, rank, inverse):
    """TF's default ``fft_length``: the input's innermost dims (for an inverse, the last one
    as ``2 * (n - 1)``)."""
    dims = x.shape.as_list()[-rank:] if x.shape.ndims is not None else None
    if dims is not None and None not in dims:
        if inverse:
            dims[-1] = max(0, 2 * (dims[-1] - 1))
        return constant(dims, dtype=_dt.int32)
    n = array_ops.shape(x)[-rank:]
    if not inverse:
        return n
    last = _m.maximum(0, 2 * (n[-1] - 1))
    return array_ops.concat([n[:-1], array_ops.expand_dims(last, 0)], 0)


def _pad_to(x, rank, fft_length, inverse):
    """Zero-pad ``x``'s innermost ``rank`` dims up to ``fft_length`` (for an inverse, the
    last to ``n // 2 + 1``), as TF's wrappers do before the op."""
    static = constant_value(fft_length)
    if static is not None and x.shape.ndims is not None and None not in \
            x.shape.as_list()[-rank:]:
        want = [int(v) for v in np.ravel(static)]
        if inverse:
            want[-1] = want[-1] // 2 + 1
        have = x.shape.as_list()[-rank:]
        pads = [max(0, w - h) for w, h in zip(want, have)]
        if not any(pads):
            return x
        paddings = [[0, 0]] * (x.shape.ndims - rank) + [[0, p] for p in pads]
        return array_ops.pad(x, paddings)
    want = fft_length
    if inverse:
        last = _m.add(_m.floordiv(want[-1], 2), 1)
        want = array_ops.concat([want[:-1], array_ops.expand_dims(last, 0)], 0)
    have = array_ops.shape(x)[-rank:]
    pads = _m.maximum(_m.subtract(want, have), 0)
    outer = array_ops.zeros(array_ops.stack([array_ops.rank(x) - rank, 2]), dtype=_dt.int32)
    inner = array_ops.stack([array_ops.zeros_like(pads), pads], axis=1)
    return array_ops.pad(x, array_ops.concat([outer, inner], 0))


def _r2c(op_type):
    rank = _RANK[op_type]

    def build(input_tensor, fft_length=None, name=None):
        with _ops.name_scope(name, op_type.lower(), [input_tensor, fft_length]):
            x = _ops.convert_to_tensor(input_tensor) if _ops.is_tensor_like(input_tensor) \
                else _ops.convert_to_tensor(input_tensor, dtype=_dt.float32)
            if x.dtype.base_dtype not in _COMPLEX_OF:
                raise ValueError(f"RFFT requires tf.float32 or tf.float64 inputs, got: {x}")
            x.shape.with_rank_at_least(rank)
            n = _inferred_length(x, rank, False) if fft_length is None else \
                _ops.convert_to_tensor(fft_length, dtype=_dt.int32)
            x = _pad_to(x, rank, n, inverse=False)
            return _ops.apply_op(op_type, [x, n],
                                 {"Tcomplex": _COMPLEX_OF[x.dtype.base_dtype]}).outputs[0]

    build.__name__ = build.__qualname__ = op_type.lower()
    build.__doc__ = (f"The discrete Fourier transform of a real signal over its innermost "
                     f"{rank} dimension(s): the ``fft_length[-1] // 2 + 1`` non-negative "
                     f"frequencies of the last.")
    return build


def _c2r(op_type):
    rank = _RANK[op_type]

    def build(input_tensor, fft_length=None, name=None):
        with _ops.name_scope(name, op_type.lower(), [input_tensor, fft_length]):
            x = _ops.convert_to_tensor(input_tensor) if _ops.is_tensor_like(input_tensor) \
                else _ops.convert_to_tensor(input_tensor, dtype=_dt.complex64)
            if x.dtype.base_dtype not in _REAL_OF:
                raise ValueError(f"IRFFT requires tf.complex64 or tf.complex128 inputs, got: "
                                 f"{x}")
            x.shape.with_rank_at_least(rank)
            n = _inferred_length(x, rank, True) if fft_length is None else \
                _ops.convert_to_tensor(fft_length, dtype=_dt.int32)
            x = _pad_to(x, rank, n, inverse=True)
            return _ops.apply_op(op_type, [x, n],
                                 {"Treal": _REAL_OF[x.dtype.base_dtype]}).outputs[0]

    build.__name__ = build.__qualname__ = op_type.lower()
    build.__doc__ = (f"The inverse of ``{op_type[1:].lower()}``: a real signal of "
                     f"``fft_length`` from its non-negative frequencies.")
    return build


rfft, irfft = _r2c("RFFT"), _c2r("IRFFT")
rfft2d, irfft2d = _r2c("RFFT2D"), _c2r("IRFFT2D")
rfft3d, irfft3d = _r2c("RFFT3D"), _c2r("IRFFT3D")


def _rfft_grad(rank, irfft_fn):
    def grad_fn(op, grad):
        fft_length = op.inputs[1]
        cdt = grad.dtype.base_dtype
        rdt = _REAL_OF[cdt]
        x = op.inputs[0]
        input_shape = array_ops.shape(x)
        is_even = _m.cast(1 - _m.floormod(fft_length[-1], 2), cdt)

        def ymask(length):  # [1, -1, 1, -1, ...]
            return _m.cast(1 - 2 * _m.floormod(_m.range(length), 2), cdt)

        y0 = grad[..., 0:1]
        ym = grad[..., -1:]
        if rank == 1:
            extra = _m.add(y0, _m.multiply(_m.multiply(is_even, ym), ymask(input_shape[-1])))
        else:
            mask = _tile_for_broadcasting(_mask_matrix(input_shape[-2], cdt), y0)
            extra = _m.matmul(mask, conj(y0))
            ym_term = _m.matmul(mask, conj(ym))
            inner = input_shape[-1]
            reps = array_ops.concat([array_ops.ones([array_ops.rank(grad) - 1], _dt.int32),
                                     array_ops.expand_dims(inner, 0)], 0)
            ym_term = _m.multiply(array_ops.tile(ym_term, reps), ymask(inner))
            extra = _m.add(extra, _m.multiply(is_even, ym_term))
        size = _m.cast(_fft_size(x, rank), rdt)
        full = _m.add(_m.multiply(irfft_fn(grad, fft_length), size), real(extra))
        return [_m.multiply(constant(0.5, dtype=rdt), full), None]

    return grad_fn


def _mask_matrix(length, cdt):
    """``t[a, b] = exp(-2 pi i a b / length)``."""
    a = array_ops.tile(array_ops.expand_dims(_m.range(length), 0),
                       array_ops.stack([length, 1]))
    b = array_ops.transpose(a, [1, 0])
    phase = _m.truediv(_m.cast(_m.multiply(a, b), cdt), _m.cast(length, cdt))
    return _m.exp(_m.multiply(constant(-2j * np.pi, dtype=cdt), phase))


def _tile_for_broadcasting(matrix, t):
    expanded = array_ops.reshape(matrix, array_ops.concat(
        [array_ops.ones([array_ops.rank(t) - 2], _dt.int32), array_ops.shape(matrix)], 0))
    return array_ops.tile(expanded, array_ops.concat(
        [array_ops.shape(t)[:-2], constant([1, 1], dtype=_dt.int32)], 0))


def _irfft_grad(rank, rfft_fn):
    def grad_fn(op, grad):
        fft_length = op.inputs[1]
        static = constant_value(fft_length)
        rdt = grad.dtype.base_dtype
        if static is not None:
            last = int(np.ravel(static)[-1])
            is_odd = constant(last % 2, dtype=_dt.int32)
        else:
            is_odd = _m.floormod(fft_length[-1], 2)
        n_in = array_ops.shape(op.inputs[0])[-1]
        mask = array_ops.concat(
            [constant([1.0], dtype=rdt),
             _m.multiply(constant(2.0, dtype=rdt),
                         array_ops.ones(array_ops.expand_dims(n_in - 2 + is_odd, 0), rdt)),
             array_ops.ones(array_ops.expand_dims(1 - is_odd, 0), rdt)], 0)
        rsize = _m.reciprocal(_m.cast(_fft_size(grad, rank), rdt))
        the_rfft = rfft_fn(grad, fft_length)
        return [_m.multiply(the_rfft, _m.cast(_m.multiply(rsize, mask), _COMPLEX_OF[rdt])),
                None]

    return grad_fn


RegisterGradient("RFFT")(_rfft_grad(1, irfft))
RegisterGradient("RFFT2D")(_rfft_grad(2, irfft2d))
RegisterGradient("IRFFT")(_irfft_grad(1, rfft))
RegisterGradient("IRFFT2D")(_irfft_grad(2, rfft2d))


# --- N-d, over chosen axes ----------------------------------------------------------------------
def _nd_infer(op):
    x = op.inputs[0]
    if op.type in ("FFTND", "IFFTND"):
        out = _check_type(op, x, tuple(_REAL_OF), "input")
    elif op.type == "RFFTND":
        _check_type(op, x, tuple(_COMPLEX_OF), "input")
        out = op.get_attr("Tcomplex")
    else:
        _check_type(op, x, tuple(_REAL_OF), "input")
        out = op.get_attr("Treal")
    lengths = _fft_length_infer(op)
    axes = constant_value(op.inputs[2])
    if x.shape.ndims is None or lengths is None or axes is None:
        return [(out, TensorShape(None))]
    dims = x.shape.as_list()
    axes = [int(a) for a in np.ravel(axes)]
    for i, (a, n) in enumerate(zip(axes, lengths)):
        last = op.type == "RFFTND" and i == len(axes) - 1
        dims[a] = n // 2 + 1 if last else n
    return [(out, TensorShape(dims))]


for _t in ("FFTND", "IFFTND", "RFFTND", "IRFFTND"):
    register_op(_t, _nd_infer)


def _nd(op_type, input, fft_length, axes, attrs, name):  # noqa: A002 - TF's argument name
    x = _ops.convert_to_tensor(input)
    n = _ops.convert_to_tensor(fft_length, dtype=_dt.int32)
    a = _ops.convert_to_tensor(axes, dtype=_dt.int32)
    return _ops.apply_op(op_type, [x, n, a], attrs, name).outputs[0]


def fftnd(input, fft_length, axes, name=None):  # noqa: A002 - TF's argument name
    """The N-d discrete Fourier transform over ``axes`` (each padded or cropped to its
    ``fft_length``)."""
    return _nd("FFTND", input, fft_length, axes, None, name)


def ifftnd(input, fft_length, axes, name=None):  # noqa: A002 - TF's argument name
    """The inverse of ``fftnd``."""
    return _nd("IFFTND", input, fft_length, axes, None, name)


def rfftnd(input, fft_length, axes, Tcomplex=_dt.complex64, name=None):  # noqa: A002, N803
    """The N-d transform of a real signal over ``axes``; the last axis keeps
    ``fft_length[-1] // 2 + 1`` frequencies."""
    return _nd("RFFTND", input, fft_length, axes, {"Tcomplex": _dt.as_dtype(Tcomplex)}, name)


def irfftnd(input, fft_length, axes, Treal=_dt.float32, name=None):  # noqa: A002, N803
    """The inverse of ``rfftnd``: a real signal of ``fft_length`` over ``axes``."""
    return _nd("IRFFTND", input, fft_length, axes, {"Treal": _dt.as_dtype(Treal)}, name)


__all__ = ["fft", "ifft", "fft2d", "ifft2d", "fft3d", "ifft3d", "fftnd", "ifftnd", "rfftnd",
           "irfftnd"]
# In tf.spectral and tf.signal only (dflab.namespaces makes them): rfft, irfft, rfft2d,
# irfft2d, rfft3d, irfft3d.
