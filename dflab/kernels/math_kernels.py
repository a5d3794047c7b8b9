"""NumPy kernels for math ops: ufuncs bound directly where NumPy's semantics match TF's, small
wrappers where they differ (integer division by zero is an error, float floor division is
``floor(x / y)``, reductions keep the input dtype, scans and sequences compute in the op's dtype
the way TF's kernels do).

Ops whose results may legitimately be inf or NaN (division, log, sqrt, pow…) run under
``np.errstate(all="ignore")``: TF returns those values silently, so NumPy should not warn.
"""

from __future__ import annotations

import numpy as np

from dflab.kernels.registry import kernel, quiet, register_kernel
from dflab.ops.sequence_ops import range_size

# --- elementwise binary ---------------------------------------------------------------------------
register_kernel("AddV2", fn=np.add)
register_kernel("Sub", fn=np.subtract)
register_kernel("Mul", fn=np.multiply)
# RealDiv only ever sees floating or complex inputs: its shape rule rejects integers, and
# ``truediv`` casts integers to floating point before dividing.
register_kernel("RealDiv", fn=quiet(np.true_divide))
register_kernel("Maximum", fn=np.maximum)
register_kernel("Minimum", fn=np.minimum)
register_kernel("Pow", fn=quiet(np.power))


def _squared_difference(x, y):
    d = np.subtract(x, y)
    return np.multiply(d, np.conj(d)) if np.iscomplexobj(d) else np.multiply(d, d)


register_kernel("SquaredDifference", fn=quiet(_squared_difference))


def _check_int_divisor(y):
    if np.any(np.equal(y, 0)):
        raise ZeroDivisionError("Integer division by zero")


@kernel("FloorDiv")
def _floordiv(node, ctx):
    if node.input_types[0].is_integer:
        def int_floordiv(x, y):
            _check_int_divisor(y)
            return np.floor_divide(x, y)

        return int_floordiv
    return quiet(lambda x, y: np.floor(np.true_divide(x, y)))


@kernel("FloorMod")
def _floormod(node, ctx):
    if node.input_types[0].is_integer:
        def int_floormod(x, y):
            _check_int_divisor(y)
            return np.mod(x, y)

        return int_floormod

    def float_floormod(x, y):
        # TF: fmod, shifted by y when the signs of the remainder and y differ.
        m = np.fmod(x, y)
        return np.where((m != 0) & ((y < 0) != (m < 0)), m + y, m)

    return quiet(float_floormod)


# --- comparisons and logic ----------------------------------------------------------------------
for _t, _f in (("Equal", np.equal), ("NotEqual", np.not_equal), ("Less", np.less),
               ("LessEqual", np.less_equal), ("Greater", np.greater),
               ("GreaterEqual", np.greater_equal), ("LogicalAnd", np.logical_and),
               ("LogicalOr", np.logical_or), ("LogicalNot", np.logical_not)):
    register_kernel(_t, fn=_f)


# --- elementwise unary ---------------------------------------------------------------------------
def _rsqrt(x):
    return np.reciprocal(np.sqrt(x))


def _sigmoid(x):
    # exp of a non-positive number never overflows; both branches are exact formulas.
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype, copy=False)


def _round(x):
    return np.round(x)  # half to even, as TF; integers are returned unchanged


for _t, _f in (("Neg", np.negative), ("Abs", np.abs), ("Sign", np.sign),
               ("Square", np.square), ("Floor", np.floor), ("Ceil", np.ceil),
               ("Round", _round), ("Sin", np.sin), ("Cos", np.cos), ("Tanh", np.tanh),
               ("IsNan", np.isnan), ("IsInf", np.isinf), ("IsFinite", np.isfinite)):
    register_kernel(_t, fn=_f)
for _t, _f in (("Sqrt", np.sqrt), ("Rsqrt", _rsqrt), ("Reciprocal", np.reciprocal),
               ("Exp", np.exp), ("Log", np.log), ("Log1p", np.log1p), ("Sigmoid", _sigmoid)):
    register_kernel(_t, fn=quiet(_f))


def _add_n(*xs):
    out = np.add(xs[0], xs[1])
    if not isinstance(out, np.ndarray):
        out = np.asarray(out)
    for x in xs[2:]:
        out = np.add(out, x, out=out) if out.ndim else np.add(out, x)
    return out


register_kernel("AddN", fn=_add_n)


@kernel("Cast")
def _cast(node, ctx):
    dt = node.attr["DstT"]._np
    return lambda x: np.asarray(x).astype(dt)


# --- matmul ---------------------------------------------------------------------------------------
@kernel("MatMul")
def _matmul(node, ctx):
    ta, tb = node.attr["transpose_a"], node.attr["transpose_b"]
    if not ta and not tb:
        return np.matmul
    return lambda a, b: np.matmul(a.T if ta else a, b.T if tb else b)


@kernel("BatchMatMulV2")
def _batch_matmul(node, ctx):
    ta, tb = node.attr["adj_x"], node.attr["adj_y"]

    def bmm(a, b):
        if ta:
            a = np.conj(np.swapaxes(a, -1, -2))
        if tb:
            b = np.conj(np.swapaxes(b, -1, -2))
        return np.matmul(a, b)

    return bmm


@kernel("Einsum")
def _einsum(node, ctx):
    eq = node.attr["equation"]
    many = len(node.input_types) > 1
    return lambda *xs: np.asarray(np.einsum(eq, *xs, optimize=many))


# --- broadcasting gradient support --------------------------------------------------------------
def _bga(sx, sy):
    """Axes to reduce for each side of a broadcast binary op (TF's BroadcastGradientArgs)."""
    n = max(len(sx), len(sy))
    px = [1] * (n - len(sx)) + list(sx)
    py = [1] * (n - len(sy)) + list(sy)
    rx = [i for i in range(n) if px[i] == 1 and py[i] != 1]
    ry = [i for i in range(n) if py[i] == 1 and px[i] != 1]
    return np.array(rx, dtype=np.int32), np.array(ry, dtype=np.int32)


register_kernel("BroadcastGradientArgs", fn=_bga)


# --- reductions -----------------------------------------------------------------------------------
def _norm_axes(axes, ndim):
    """Reduction axes as a sorted tuple of non-negative ints (duplicates allowed, as in TF)."""
    out = set()
    for a in np.ravel(axes).tolist():
        if not -max(ndim, 1) <= a < max(ndim, 1) or (ndim == 0 and a not in (0, -1)):
            raise ValueError(f"Invalid reduction dimension {a} for input with {ndim} dimensions")
        out.add(a % ndim if ndim else 0)
    return tuple(sorted(out)) if ndim else ()


def _reduction(np_fn, keep_dtype, identity=None):
    """Factory for reductions; ``identity(dtype)`` gives the value of an empty reduction."""

    def factory(node, ctx):
        keep = node.attr["keep_dims"]
        dt = node.input_types[0]._np
        kwargs = {"dtype": dt} if keep_dtype else {}
        if identity is not None:
            kwargs["initial"] = identity(dt)

        def reduce(x, axes):
            ax = _norm_axes(axes, np.ndim(x))
            return np.asarray(np_fn(x, axis=ax, keepdims=keep, **kwargs))

        return reduce

    return factory


def _lowest(dt):
    return -np.inf if dt.kind == "f" else np.iinfo(dt).min


def _highest(dt):
    return np.inf if dt.kind == "f" else np.iinfo(dt).max


register_kernel("Sum", factory=_reduction(np.sum, keep_dtype=True))
register_kernel("Prod", factory=_reduction(np.prod, keep_dtype=True))
register_kernel("Max", factory=_reduction(np.max, keep_dtype=False, identity=_lowest))
register_kernel("Min", factory=_reduction(np.min, keep_dtype=False, identity=_highest))
register_kernel("Any", factory=_reduction(np.any, keep_dtype=False))
register_kernel("All", factory=_reduction(np.all, keep_dtype=False))


@kernel("Mean")
def _mean(node, ctx):
    keep = node.attr["keep_dims"]
    dt = node.input_types[0]._np
    integer = node.input_types[0].is_integer

    def mean(x, axes):
        ax = _norm_axes(axes, np.ndim(x))
        n = int(np.prod([x.shape[a] for a in ax])) if ax else 1
        if integer:  # TF's integer mean divides the integer sum, truncating toward zero
            s = np.sum(x, axis=ax, keepdims=keep, dtype=dt)
            q = np.floor_divide(np.abs(s), max(n, 1)).astype(dt)
            return np.asarray(np.where(s < 0, -q, q).astype(dt))
        with np.errstate(all="ignore"):
            return np.asarray(np.mean(x, axis=ax, keepdims=keep, dtype=dt))

    return mean


def _reduced_shape(shape, axes):
    out = np.array(shape, dtype=np.int32)
    ax = np.ravel(axes).astype(int)
    if out.size:
        out[ax % out.size] = 1
    return out


register_kernel("ReducedShape", fn=_reduced_shape)


def _arg_kernel(np_fn):
    def factory(node, ctx):
        out = node.attr["output_type"]._np

        def arg(x, axis):
            a = int(axis)
            if not -x.ndim <= a < x.ndim:
                raise ValueError(f"Expected dimension in the range [{-x.ndim}, {x.ndim}), but "
                                 f"got {a}")
            if x.shape[a] == 0:
                raise ValueError("Reduction axis is empty")
            return np.asarray(np_fn(x, axis=a)).astype(out)

        return arg

    return factory


register_kernel("ArgMax", factory=_arg_kernel(np.argmax))
register_kernel("ArgMin", factory=_arg_kernel(np.argmin))


# --- scans ----------------------------------------------------------------------------------------
def _scan_kernel(ufunc, identity):
    def factory(node, ctx):
        exclusive, reverse = node.attr["exclusive"], node.attr["reverse"]

        def scan(x, axis):
            a = int(axis)
            if not -x.ndim <= a < x.ndim:
                raise ValueError(f"axis {a} is out of range for a tensor of rank {x.ndim}")
            a %= x.ndim
            if reverse:
                x = np.flip(x, a)
            out = ufunc.accumulate(x, axis=a, dtype=x.dtype)
            if exclusive and x.shape[a]:
                head = np.full(x.shape[:a] + (1,) + x.shape[a + 1:], identity, dtype=x.dtype)
                out = np.concatenate([head, np.delete(out, -1, axis=a)], axis=a)
            if reverse:
                out = np.flip(out, a)
            return out

        return quiet(scan)

    return factory


register_kernel("Cumsum", factory=_scan_kernel(np.add, 0))
register_kernel("Cumprod", factory=_scan_kernel(np.multiply, 1))


# --- sequences ------------------------------------------------------------------------------------
@kernel("Range")
def _range(node, ctx):
    dt = node.output_types[0]._np

    def rng(start, limit, delta):
        start, limit, delta = (np.asarray(v, dtype=dt).reshape(()) for v in (start, limit, delta))
        n = range_size(start, limit, delta, dt)
        if dt.kind in "iu":
            return np.arange(int(start), int(start) + n * int(delta), int(delta), dtype=dt)[:n]
        # TF accumulates ``val += delta`` in the op's dtype; a cumulative sum does the same.
        steps = np.full(n, delta, dtype=dt)
        if n:
            steps[0] = start
        return np.cumsum(steps, dtype=dt)

    return rng


@kernel("LinSpace")
def _linspace(node, ctx):
    dt = node.input_types[0]._np

    def linspace(start, stop, num):
        n = int(num)
        if n <= 0:
            raise ValueError(f"Requires num > 0: {n}")
        start, stop = dt.type(start), dt.type(stop)
        if n == 1:
            return np.array([start], dtype=dt)
        step = (stop - start) / dt.type(n - 1)
        out = np.empty(n, dtype=dt)
        out[:-1] = start + step * np.arange(n - 1).astype(dt)
        out[-1] = stop
        return out

    return linspace


# --- segment sums -------------------------------------------------------------------------------
def _segment_scatter(data, ids, n):
    """``out[ids[j]] += data[j]`` into ``n`` rows; negative ids are dropped."""
    data = np.asarray(data)
    ids = np.asarray(ids)
    if data.shape[:ids.ndim] != ids.shape:
        raise ValueError(f"segment_ids shape {ids.shape} must be a prefix of data shape "
                         f"{data.shape}")
    rest = data.shape[ids.ndim:]
    if ids.size and ids.max() >= n:
        bad = int(ids.max())
        raise ValueError(f"segment_ids value {bad} is out of range [0, {n})")
    out = np.zeros((n,) + rest, dtype=data.dtype)
    keep = ids >= 0
    if np.all(keep):
        np.add.at(out, ids, data)
    else:
        np.add.at(out, ids[keep], data[keep])
    return out


def _unsorted_segment_sum(data, ids, num_segments):
    n = int(num_segments)
    if n < 0:
        raise ValueError(f"num_segments must be >= 0, got {n}")
    return _segment_scatter(data, ids, n)


def _segment_sum(data, ids):
    ids = np.asarray(ids)
    if ids.ndim != 1:
        raise ValueError(f"segment_ids should be a vector, got shape {ids.shape}")
    if ids.size and (np.any(np.diff(ids) < 0) or ids[0] < 0):
        raise ValueError("segment ids must be non-negative and sorted in increasing order")
    n = int(ids[-1]) + 1 if ids.size else 0
    return _segment_scatter(data, ids, n)


register_kernel("UnsortedSegmentSum", fn=_unsorted_segment_sum)
register_kernel("SegmentSum", fn=_segment_sum)
