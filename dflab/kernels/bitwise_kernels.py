"""Kernels of ``dflab.ops.bitwise_ops`` and of ``CumulativeLogsumexp``
(``dflab.ops.accumulate_ops``: NumPy's ``logaddexp.accumulate`` on the host, a doubling scan
of ``logaddexp`` elsewhere), written against the
device's ``xp``.

Shifts clamp the shift count into ``[0, bits)`` as TF's kernels do (C leaves other counts
undefined); ``TruncateDiv`` of integers rounds toward zero, and the truncating ops refuse a
zero integer divisor with TF's ``InternalError``.
"""

from __future__ import annotations

import numpy as np

from dflab.framework import errors
from dflab.kernels.math_kernels import _scan_kernel
from dflab.kernels.registry import kernel, quiet, register_kernel

register_kernel("BitwiseAnd", xp="bitwise_and", elementwise=True)
register_kernel("BitwiseOr", xp="bitwise_or", elementwise=True)
register_kernel("BitwiseXor", xp="bitwise_xor", elementwise=True)
register_kernel("Invert", xp="invert", elementwise=True)


def _shift(ufunc_name):
    def shift(xp, x, y):
        x = xp.asarray(x)
        bits = x.dtype.itemsize * 8
        y = xp.clip(xp.asarray(y), 0, bits - 1).astype(x.dtype)
        return getattr(xp, ufunc_name)(x, y)

    return shift


register_kernel("LeftShift", xp=_shift("left_shift"))
register_kernel("RightShift", xp=_shift("right_shift"))


def _check_divisor(xp, node, y):
    # TF's truncating kernels report a zero divisor as an internal error, not the invalid
    # argument of FloorDiv/FloorMod.
    if bool(xp.any(xp.equal(y, 0))):
        raise errors.InternalError(None, node, "Integer division by zero")


@kernel("TruncateDiv")
def _truncate_div(node, ctx):
    xp = ctx.xp
    if node.input_types[0].is_integer:
        def int_truncate_div(x, y):
            _check_divisor(xp, node, y)
            q = xp.floor_divide(x, y)
            # floor and trunc differ where the remainder is non-zero and the signs differ
            fix = (xp.remainder(x, y) != 0) & ((x < 0) != (y < 0))
            return (q + fix.astype(q.dtype)).astype(q.dtype, copy=False)

        return int_truncate_div
    return quiet(lambda x, y: xp.trunc(xp.true_divide(x, y)))


@kernel("TruncateMod")
def _truncate_mod(node, ctx):
    xp = ctx.xp
    if node.input_types[0].is_integer:
        def int_truncate_mod(x, y):
            _check_divisor(xp, node, y)
            return xp.fmod(x, y)

        return int_truncate_mod
    return quiet(lambda x, y: xp.fmod(x, y))


@kernel("Bitcast")
def _bitcast(node, ctx):
    xp = ctx.xp
    dst = node.attr["type"]._np

    def bitcast(x):
        x = xp.ascontiguousarray(x)
        src = x.dtype
        if src.itemsize == dst.itemsize:
            return x.view(dst)
        if src.itemsize > dst.itemsize:
            return x.reshape(x.shape + (1,)).view(dst)
        ratio = dst.itemsize // src.itemsize
        if x.ndim == 0 or x.shape[-1] != ratio:
            raise ValueError(f"Cannot bitcast due to shape. {x.shape[-1] if x.ndim else 0} "
                             f"does not match {ratio}")
        return x.view(dst).reshape(x.shape[:-1])

    return bitcast


def _log_cumsum_exp(xp, x, axis):
    """A running log-sum-exp along ``axis`` without ``logaddexp.accumulate`` (CuPy has none):
    the doubling scan, log2(n) rounds of ``logaddexp`` with the entry ``shift`` back. (A shift
    by the maximum instead would lose the small early terms.)"""
    n = x.shape[axis]
    shift = 1
    while shift < n:
        head = [slice(None)] * x.ndim
        tail = [slice(None)] * x.ndim
        back = [slice(None)] * x.ndim
        head[axis], tail[axis], back[axis] = slice(0, shift), slice(shift, None), \
            slice(0, n - shift)
        x = xp.concatenate([x[tuple(head)],
                            xp.logaddexp(x[tuple(tail)], x[tuple(back)])], axis=axis)
        shift *= 2
    return x


def _logaddexp_accumulate(xp):
    """``accumulate(x, axis=, dtype=)`` of ``logaddexp``: NumPy's own on the host, the doubling
    scan in other namespaces."""
    if xp is np:
        return np.logaddexp.accumulate
    return lambda x, axis, dtype: _log_cumsum_exp(xp, x, axis).astype(dtype, copy=False)


register_kernel("CumulativeLogsumexp", host_memory_inputs=(1,),
                factory=_scan_kernel("logaddexp", None, -np.inf,
                                     accumulate_of=_logaddexp_accumulate))
