"""NumPy kernels for math ops: ufuncs bound directly where NumPy's semantics match TF's."""

from __future__ import annotations

import numpy as np

from dflab.kernels.registry import kernel, register_kernel

register_kernel("AddV2", fn=np.add)
register_kernel("Sub", fn=np.subtract)
register_kernel("Mul", fn=np.multiply)
register_kernel("Neg", fn=np.negative)


@kernel("RealDiv")
def _realdiv(op, ctx):
    if op.inputs[0].dtype.is_integer:
        dt = op.inputs[0].dtype._np
        return lambda x, y: np.floor_divide(x, y).astype(dt)  # TF truncates toward zero? see tests
    return np.true_divide


def _add_n(*xs):
    out = np.add(xs[0], xs[1])
    for x in xs[2:]:
        out += x  # out is a fresh array owned by this kernel
    return out


register_kernel("AddN", fn=_add_n)


@kernel("Cast")
def _cast(op, ctx):
    dt = op._attrs["DstT"]._np
    return lambda x: np.asarray(x).astype(dt)


@kernel("MatMul")
def _matmul(op, ctx):
    ta, tb = op._attrs["transpose_a"], op._attrs["transpose_b"]
    if not ta and not tb:
        return np.matmul
    return lambda a, b: np.matmul(a.T if ta else a, b.T if tb else b)


@kernel("BatchMatMulV2")
def _batch_matmul(op, ctx):
    ta, tb = op._attrs["adj_x"], op._attrs["adj_y"]

    def bmm(a, b):
        if ta:
            a = np.conj(np.swapaxes(a, -1, -2))
        if tb:
            b = np.conj(np.swapaxes(b, -1, -2))
        return np.matmul(a, b)

    return bmm


def _bga(sx, sy):
    """Axes to reduce for each side of a broadcast binary op (TF's BroadcastGradientArgs)."""
    n = max(len(sx), len(sy))
    px = [1] * (n - len(sx)) + list(sx)
    py = [1] * (n - len(sy)) + list(sy)
    rx = [i for i in range(n) if px[i] == 1 and py[i] != 1]
    ry = [i for i in range(n) if py[i] == 1 and px[i] != 1]
    return np.array(rx, dtype=np.int32), np.array(ry, dtype=np.int32)


register_kernel("BroadcastGradientArgs", fn=_bga)


def _reduction(np_fn):
    def factory(op, ctx):
        keep = op._attrs["keep_dims"]

        def reduce(x, axes):
            ax = tuple(int(a) for a in np.ravel(axes))
            return np.asarray(np_fn(x, axis=ax, keepdims=keep))

        return reduce

    return factory


for _t, _f in (("Sum", np.sum), ("Prod", np.prod), ("Max", np.max), ("Min", np.min),
               ("Any", np.any), ("All", np.all)):
    register_kernel(_t, factory=_reduction(_f))


@kernel("Mean")
def _mean(op, ctx):
    keep = op._attrs["keep_dims"]
    dt = op.inputs[0].dtype._np
    integer = op.inputs[0].dtype.is_integer

    def mean(x, axes):
        ax = tuple(int(a) for a in np.ravel(axes))
        if integer:  # TF's integer mean truncates
            s = np.sum(x, axis=ax, keepdims=keep)
            n = int(np.prod([x.shape[a] for a in ax])) if ax else 1
            return np.asarray(np.trunc(s / max(n, 1))).astype(dt)
        return np.asarray(np.mean(x, axis=ax, keepdims=keep), dtype=dt)

    return mean


def _reduced_shape(shape, axes):
    out = np.array(shape, dtype=np.int32)
    ax = np.ravel(axes).astype(int)
    if out.size:
        out[ax % out.size] = 1
    return out


register_kernel("ReducedShape", fn=_reduced_shape)
