"""Kernels of ``dflab.ops.fft_ops``, through the device's ``xp.fft`` (NumPy's or CuPy's):
each transform over the op's innermost dimensions or given axes, each axis padded with zeros
or cropped to its ``fft_length``, the result in the op's dtype. ``fft_length`` and ``axes``
are read on the host, as TF keeps them in host memory.
"""

from __future__ import annotations

from dflab.kernels.array_kernels import _ints
from dflab.kernels.registry import kernel

_RANK = {"FFT": 1, "IFFT": 1, "FFT2D": 2, "IFFT2D": 2, "FFT3D": 3, "IFFT3D": 3,
         "RFFT": 1, "IRFFT": 1, "RFFT2D": 2, "IRFFT2D": 2, "RFFT3D": 3, "IRFFT3D": 3}


def _axes(rank):
    return tuple(range(-rank, 0))


def _complex(op_type):
    inverse = op_type.startswith("I")

    def factory(node, ctx):
        xp = ctx.xp
        axes = _axes(_RANK[op_type])
        transform = xp.fft.ifftn if inverse else xp.fft.fftn

        def fft(x):
            x = xp.asarray(x)
            if x.size == 0:
                return x.copy()
            return transform(x, axes=axes).astype(x.dtype, copy=False)

        return fft

    return factory


def _real(op_type):
    inverse = op_type.startswith("I")

    def factory(node, ctx):
        xp = ctx.xp
        axes = _axes(_RANK[op_type])
        out = node.output_types[0]._np
        transform = xp.fft.irfftn if inverse else xp.fft.rfftn

        def fft(x, fft_length):
            x = xp.asarray(x)
            s = tuple(_ints(fft_length))
            if not s[-1] or any(d == 0 for d in s):
                shape = x.shape[:-len(s)] + (s[:-1] + (s[-1] // 2 + 1,) if not inverse else s)
                return xp.zeros(shape, dtype=out)
            return transform(x, s=s, axes=axes).astype(out, copy=False)

        return fft

    return factory


def _nd(op_type):
    def factory(node, ctx):
        xp = ctx.xp
        out = node.output_types[0]._np
        transform = {"FFTND": xp.fft.fftn, "IFFTND": xp.fft.ifftn, "RFFTND": xp.fft.rfftn,
                     "IRFFTND": xp.fft.irfftn}[op_type]

        def fft(x, fft_length, axes):
            x = xp.asarray(x)
            s, a = tuple(_ints(fft_length)), tuple(_ints(axes))
            if len(s) != len(a):
                raise ValueError(f"fft_length and axes must have the same length, got "
                                 f"{len(s)} and {len(a)}")
            return transform(x, s=s, axes=a).astype(out, copy=False)

        return fft

    return factory


for _t in ("FFT", "IFFT", "FFT2D", "IFFT2D", "FFT3D", "IFFT3D"):
    kernel(_t)(_complex(_t))
for _t in ("RFFT", "IRFFT", "RFFT2D", "IRFFT2D", "RFFT3D", "IRFFT3D"):
    kernel(_t, host_memory_inputs=(1,))(_real(_t))
for _t in ("FFTND", "IFFTND", "RFFTND", "IRFFTND"):
    kernel(_t, host_memory_inputs=(1, 2))(_nd(_t))
