"""Kernels for math ops, written against the device's array namespace (``ctx.xp``: NumPy on
CPUs, CuPy on GPUs): its ufuncs bound directly where their semantics match TF's, small
wrappers where they differ (integer division by zero is an error, float floor division is
``floor(x / y)``, reductions keep the input dtype, scans and sequences compute in the op's dtype
the way TF's kernels do).

Ops whose results may legitimately be inf or NaN (division, log, sqrt, pow…) run under
``np.errstate(all="ignore")``: TF returns those values silently, so NumPy should not warn.
Small host-side arguments (reduction axes, ranges' bounds, segment counts) are read with NumPy.
"""

from __future__ import annotations

import inspect
import math

import numpy as np

from dflab.framework import errors
from dflab.kernels import onednn
from dflab.kernels.context import host, host_ints
from dflab.kernels.registry import kernel, quiet, register_kernel
from dflab.ops.sequence_ops import range_size

# --- elementwise binary ---------------------------------------------------------------------------
register_kernel("AddV2", xp="add", elementwise=True)
register_kernel("Sub", xp="subtract", elementwise=True)
register_kernel("Mul", xp="multiply", elementwise=True)
# RealDiv only ever sees floating or complex inputs: its shape rule rejects integers, and
# ``truediv`` casts integers to floating point before dividing.
register_kernel("RealDiv", xp="true_divide", quiet_fp=True, elementwise=True)
register_kernel("Maximum", xp="maximum", elementwise=True)
register_kernel("Minimum", xp="minimum", elementwise=True)
register_kernel("Pow", xp="power", quiet_fp=True, elementwise=True)


def _squared_difference(xp, x, y):
    d = xp.subtract(x, y)
    return xp.multiply(d, xp.conj(d)) if xp.iscomplexobj(d) else xp.multiply(d, d)


register_kernel("SquaredDifference", xp=_squared_difference, quiet_fp=True)


def _check_int_divisor(xp, y):
    if bool(xp.any(xp.equal(y, 0))):
        raise ZeroDivisionError("Integer division by zero")


@kernel("FloorDiv")
def _floordiv(node, ctx):
    xp = ctx.xp
    if node.input_types[0].is_integer:
        def int_floordiv(x, y):
            _check_int_divisor(xp, y)
            return xp.floor_divide(x, y)

        return int_floordiv
    return quiet(lambda x, y: xp.floor(xp.true_divide(x, y)))


@kernel("FloorMod")
def _floormod(node, ctx):
    xp = ctx.xp
    if node.input_types[0].is_integer:
        def int_floormod(x, y):
            _check_int_divisor(xp, y)
            return xp.mod(x, y)

        return int_floormod

    def float_floormod(x, y):
        # TF: fmod, shifted by y when the signs of the remainder and y differ.
        m = xp.fmod(x, y)
        return xp.where((m != 0) & ((y < 0) != (m < 0)), m + y, m)

    return quiet(float_floormod)


# --- comparisons and logic ----------------------------------------------------------------------
for _t, _f in (("Equal", "equal"), ("NotEqual", "not_equal"), ("Less", "less"),
               ("LessEqual", "less_equal"), ("Greater", "greater"),
               ("GreaterEqual", "greater_equal"), ("LogicalAnd", "logical_and"),
               ("LogicalOr", "logical_or"), ("LogicalNot", "logical_not")):
    register_kernel(_t, xp=_f, elementwise=True)


# --- elementwise unary ---------------------------------------------------------------------------
def _rsqrt(xp, x):
    return xp.reciprocal(xp.sqrt(x))


def _sigmoid(xp, x):
    if xp is np and isinstance(x, np.ndarray) and x.ndim and x.dtype in _EXP_SIGMOID:
        # 1 / (1 + exp(-x)): four passes over one buffer (a 20x200 float32 sigmoid 5 us,
        # against 12 us picking one of two exact branches by x's sign bit). Where exp(-x)
        # overflows (x below about -88 in float32), 1 / inf is 0, as TF's float32 kernel
        # gives there; the result underflows to subnormals just before. NaN stays NaN.
        t = np.negative(x)
        np.exp(t, out=t)
        t += 1
        return np.reciprocal(t, out=t)
    # exp of a non-positive number never overflows; both branches are exact formulas.
    e = xp.exp(-xp.abs(x))
    return xp.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype, copy=False)


# float16's exp(-x) would overflow from x = -11, where the sigmoid is still a normal number.
_EXP_SIGMOID = (np.dtype(np.float32), np.dtype(np.float64))


# Round is half to even, as TF; integers are returned unchanged.
register_kernel("Round", xp="round")
for _t, _f in (("Neg", "negative"), ("Abs", "abs"), ("Sign", "sign"),
               ("Square", "square"), ("Floor", "floor"), ("Ceil", "ceil"),
               ("Sin", "sin"), ("Cos", "cos"), ("Tanh", "tanh"),
               ("IsNan", "isnan"), ("IsInf", "isinf"), ("IsFinite", "isfinite")):
    register_kernel(_t, xp=_f, elementwise=True)
for _t, _f in (("Sqrt", "sqrt"), ("Reciprocal", "reciprocal"), ("Exp", "exp"), ("Log", "log"),
               ("Log1p", "log1p")):
    register_kernel(_t, xp=_f, quiet_fp=True, elementwise=True)
for _t, _f in (("Rsqrt", _rsqrt), ("Sigmoid", _sigmoid)):
    register_kernel(_t, xp=_f, quiet_fp=True)


def _sigmoid_grad(xp, y, dy, out=None):
    """TF's ``SigmoidGrad(y, dy)``: ``dy * y * (1 - y)``, three passes into one buffer (y's,
    unless ``out`` is given or dy broadcasts beyond y, as in a fused group)."""
    if out is None and (not getattr(y, "ndim", 0) or y.shape != dy.shape):
        return xp.asarray(dy * (y * (1 - y)))
    t = xp.subtract(1, y, out=out)
    xp.multiply(t, y, out=t)
    return xp.multiply(t, dy, out=t)


def _tanh_grad(xp, y, dy, out=None):
    """TF's ``TanhGrad(y, dy)``: ``dy * (1 - y * y)``, as ``_sigmoid_grad`` does it."""
    if out is None and (not getattr(y, "ndim", 0) or y.shape != dy.shape):
        return xp.asarray(dy * (1 - y * y))
    t = xp.multiply(y, y, out=out)
    xp.subtract(1, t, out=t)
    return xp.multiply(t, dy, out=t)


register_kernel("SigmoidGrad", xp=_sigmoid_grad, elementwise=True)
register_kernel("TanhGrad", xp=_tanh_grad, elementwise=True)


def _add_n(xp, *xs, out=None):
    """The inputs summed left to right. Elementwise: on the host a big sum is split over rows
    among the intra-op threads, each adding all inputs over its rows (an LSTM's 20 gradient
    terms of 400x800: 2.8 ms on one thread, 1.4 ms on two)."""
    out = xp.add(xs[0], xs[1], out=out)
    if not out.ndim:  # NumPy adds two 0-d arrays to a scalar, not an array
        out = xp.asarray(out)
    for x in xs[2:]:
        out = xp.add(out, x, out=out) if out.ndim else xp.add(out, x)
    return out


register_kernel("AddN", xp=_add_n, elementwise=True)


@kernel("Cast")
def _cast(node, ctx):
    dt = node.attr["DstT"]._np
    xp = ctx.xp
    return lambda x: xp.asarray(x).astype(dt)


# --- matmul ---------------------------------------------------------------------------------------
# The float32 products that run on oneDNN: from a million multiply-adds, where a oneDNN call,
# ~9 us more than NumPy's, is repaid (128x128x128: 29 against 32 us; 64x64x64: 12 against 6).
# oneDNN's OpenMP team, which spins briefly between calls, beats the intra-op pool's split,
# whose wake-ups cost 80-150 us on a VM with halting vCPUs, on every product of the models
# (benchmarks/bench_products.py, 2026-11-28: an LSTM cell's 20x400x800 0.08 against 0.18 ms,
# the MLP's 128x784x512 0.48 against 0.61, the LSTM softmax's 400x200x10000 8.1 against 9.1);
# BLAS's own threads, which a session with ``intra_op_split_products`` False gives products,
# traded places with it on the biggest (0.96x to 1.3x).
ONEDNN_MIN_PRODUCT = 1 << 20


@kernel("MatMul")
def _matmul(node, ctx):
    ta, tb = node.attr["transpose_a"], node.attr["transpose_b"]
    dnn = None
    if ctx.intra_op.onednn_products:
        dnn = onednn.for_kernel(ctx, node.output_types[0].as_numpy_dtype)
    if ctx.xp is not np:
        matmul = ctx.xp.matmul
    elif ctx.intra_op.splits_products:
        # On the host, a product big enough is split among the intra-op threads (see intra_op).
        matmul = ctx.intra_op.matmul
        if dnn is not None:
            matmul = _on_onednn(dnn, matmul)
    elif node.output_types[0].is_complex:
        matmul = np.matmul  # (``_dot`` would differ in the sign of some zeros: see there)
    else:
        matmul = _host_matmul(dnn)
    if not ta and not tb:
        return matmul

    def transposed(a, b):
        return matmul(a.T if ta else a, b.T if tb else b)

    if dnn is not None:  # the label the traces read is the inner function's
        transposed.fn = matmul
    return transposed


def _on_onednn(dnn, blas):
    """``a @ b`` on oneDNN (TF's CPU build runs MatMul there too: ``_MklMatMul``) for the
    sizes where it pays (from ``ONEDNN_MIN_PRODUCT``), and on ``blas``
    for the others and what oneDNN does not take (operands it cannot describe by strides).
    A transposed operand is a view that oneDNN reads through its strides. ``kernel_label``
    names where the last call ran."""
    label = onednn.label("MatMul")

    def matmul(a, b):
        c = None
        if a.ndim == 2 and b.ndim == 2 and \
                a.shape[0] * a.shape[1] * b.shape[1] >= ONEDNN_MIN_PRODUCT:
            c = dnn.matmul(a, b)
        matmul.kernel_label = label if c is not None else None
        return c if c is not None else blas(a, b)

    matmul.kernel_label = None
    return matmul


def _host_matmul(dnn):
    """The host's ``MatMul`` of real matrices when products are left to BLAS: oneDNN from
    ``ONEDNN_MIN_PRODUCT`` (as ``_on_onednn``), else ``ndarray.dot`` (``_dot``)."""
    if dnn is None:
        return _dot
    label = onednn.label("MatMul")

    def matmul(a, b):
        if a.ndim != 2 or b.ndim != 2:
            raise _not_matrices(a, b)
        if a.size * b.shape[1] < ONEDNN_MIN_PRODUCT:
            if matmul.kernel_label is not None:  # a read is cheaper than a write
                matmul.kernel_label = None
            return a.dot(b)
        c = dnn.matmul(a, b)
        matmul.kernel_label = label if c is not None else None
        return c if c is not None else a.dot(b)

    matmul.kernel_label = None
    return matmul


def _dot(a, b):
    """``a @ b`` for two real matrices by ``ndarray.dot``: NumPy calls the same BLAS routine
    and gives ``np.matmul``'s bits (every real dtype, transposed views, vectors and empty
    shapes included) for a third of its call (2x2: 0.30 against 0.90 us), which is most of a
    small eager product. Not for complex ones: ``dot`` multiplies 1x1 operands as scalars,
    and the imaginary zeros of real values can come out with the other sign. ``dot`` means
    something else for other ranks, so they are refused as TF's kernel refuses them (graphs
    never get here with them: shape inference stops them first)."""
    if a.ndim != 2 or b.ndim != 2:
        raise _not_matrices(a, b)
    return a.dot(b)


def _not_matrices(a, b) -> errors.InvalidArgumentError:
    which, x = (0, a) if a.ndim != 2 else (1, b)
    return errors.InvalidArgumentError(
        None, None, f"In[{which}] is not a matrix. Instead it has shape {list(x.shape)}")


@kernel("BatchMatMulV2")
def _batch_matmul(node, ctx):
    ta, tb = node.attr["adj_x"], node.attr["adj_y"]
    xp = ctx.xp
    dnn = None
    if ctx.intra_op.onednn_products:
        dnn = onednn.for_kernel(ctx, node.output_types[0].as_numpy_dtype)
    label = onednn.label("BatchMatMulV2")

    def adjoint(x):  # a view; a copy only for complex values, which conj must negate
        x = xp.swapaxes(x, -1, -2)
        return xp.conj(x) if x.dtype.kind == "c" else x

    def bmm(a, b):
        if ta:
            a = adjoint(a)
        if tb:
            b = adjoint(b)
        c = _batch_on_onednn(dnn, a, b) if dnn is not None else None
        bmm.kernel_label = label if c is not None else None
        return c if c is not None else xp.matmul(a, b)

    bmm.kernel_label = None
    return bmm


def _batch_on_onednn(dnn, a, b):
    """``a @ b`` for stacks of matrices with the same batch shape, on oneDNN's batched GEMM
    (TF's CPU build: ``_MklBatchMatMulV2``) from ``ONEDNN_MIN_PRODUCT`` multiply-adds in all,
    the batch axes merged into one (a view where they allow it); None where it does not apply
    (broadcast batches, 2-d operands, fewer multiply-adds, operands oneDNN cannot describe).
    NumPy's stacked product calls BLAS matrix by matrix: 256 products of 64x64x64 took 1.27
    ms, 0.68 on oneDNN; 32 of 20x400x800 4.6 against 3.4 ms (two threads)."""
    if a.ndim < 3 or a.ndim != b.ndim or a.shape[:-2] != b.shape[:-2] or \
            b.shape[-1] * a.size < ONEDNN_MIN_PRODUCT:  # an empty operand too
        return None
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    c = dnn.matmul(a.reshape(-1, m, k), b.reshape(-1, k, n))
    return None if c is None else c.reshape(a.shape[:-1] + (n,))


@kernel("Einsum")
def _einsum(node, ctx):
    eq = node.attr["equation"]
    many = len(node.input_types) > 1
    xp = ctx.xp
    return lambda *xs: xp.asarray(xp.einsum(eq, *xs, optimize=many))


# --- broadcasting gradient support --------------------------------------------------------------
def _bga(sx, sy):
    """Axes to reduce for each side of a broadcast binary op (TF's BroadcastGradientArgs)."""
    n = max(len(sx), len(sy))
    px = [1] * (n - len(sx)) + list(sx)
    py = [1] * (n - len(sy)) + list(sy)
    rx = [i for i in range(n) if px[i] == 1 and py[i] != 1]
    ry = [i for i in range(n) if py[i] == 1 and px[i] != 1]
    return np.array(rx, dtype=np.int32), np.array(ry, dtype=np.int32)


register_kernel("BroadcastGradientArgs", host_memory_inputs=(0, 1), fn=_bga)


# --- reductions -----------------------------------------------------------------------------------
def _norm_axes(axes, ndim):
    """Reduction axes as a sorted tuple of non-negative ints (duplicates allowed, as in TF),
    remembered per (axes, rank): a reduction's axes are most often one constant, and reading
    them costs a small reduction as much as the reduction itself."""
    key = (host_ints(axes), ndim)
    known = _NORMALIZED.get(key)
    if known is None:
        known = _normalize_axes(key[0], ndim)
        if len(_NORMALIZED) < 1024:
            _NORMALIZED[key] = known
    return known


_NORMALIZED: dict = {}  # (the axes, the input's rank) -> _norm_axes's answer


def _normalize_axes(axes: tuple, ndim):
    out = set()
    for a in axes:
        if not -max(ndim, 1) <= a < max(ndim, 1) or (ndim == 0 and a not in (0, -1)):
            raise ValueError(f"Invalid reduction dimension {a} for input with {ndim} dimensions")
        out.add(a % ndim if ndim else 0)
    return tuple(sorted(out)) if ndim else ()


def _takes_initial(fn) -> bool:
    """Whether a namespace's reduction accepts NumPy's ``initial=`` (CuPy's ``max`` does not)."""
    try:
        return "initial" in inspect.signature(fn).parameters
    except (TypeError, ValueError):  # no signature to read: assume it does not
        return False


def _reduced_dims(shape, axes, keep):
    """The shape of a reduction of ``shape`` over ``axes`` (sorted, non-negative)."""
    if keep:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _coalesce(x, axes):
    """``x`` reshaped with each run of adjacent reduced (or kept) axes merged into one, and the
    merged reduced axes; ``None`` when nothing merges or ``x`` is not C-contiguous (a reshape
    would copy). NumPy reduces a (N, C) array over its rows several times faster than a
    (N, H, W, C) array over its first three axes (a bias gradient), for the same sums in the
    same order."""
    if x.ndim < 2 or not axes or not x.flags.c_contiguous:
        return None
    dims, reduced = [], []
    for i, d in enumerate(x.shape):
        r = i in axes
        if reduced and reduced[-1] == r:
            dims[-1] *= d
        else:
            dims.append(d)
            reduced.append(r)
    if len(dims) == x.ndim:
        return None
    return x.reshape(dims), tuple(i for i, r in enumerate(reduced) if r)


def column_sums(x):
    """The sums over the rows of a 2-D host array, as a product with a vector of ones when
    ``x`` is a big float32/float64 array (``None`` otherwise): BLAS's threads and vector units
    are 2-5x faster than NumPy's row-by-row reduction (a convolution's bias gradient over
    (50176, 32): 2.7 against 0.56 ms; an LSTM's softmax bias over (400, 10000): 2.9 against
    0.64 ms), and its blocked sums come closer to the exact ones."""
    if (x.dtype not in _GEMV_DTYPES or x.ndim != 2 or x.shape[0] < 16
            or x.size < _GEMV_MIN_SIZE):
        return None
    with np.errstate(all="ignore"):  # inf - inf is NaN and a sum may overflow, silently (TF)
        return np.ones(x.shape[0], x.dtype) @ x


def row_sums(x):
    """The sums along the rows of a 2-D host array, as a product with a vector of ones when
    the rows are short (``_GEMV_MAX_ROW`` elements) and ``x`` a big float32/float64 array
    (``None`` otherwise): NumPy's reduction pays a loop set-up per row (a word2vec step's
    (2176, 128) logits: 80 us against 17 us; (65536, 10): 1.27 ms against 0.15 ms). Over
    long rows NumPy's pairwise sums are the more exact, and BLAS's no faster than twice."""
    if (x.dtype not in _GEMV_DTYPES or x.ndim != 2 or x.shape[1] > _GEMV_MAX_ROW
            or x.shape[1] < 2 or x.size < _GEMV_MIN_SIZE):
        return None
    with np.errstate(all="ignore"):
        return x @ np.ones(x.shape[1], x.dtype)


_GEMV_MAX_ROW = 256
_GEMV_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
_GEMV_MIN_SIZE = 4096  # below this the ones vector and the BLAS call cost about what they save


def _reduction(fn_name, keep_dtype, identity=None):
    """Factory for reductions (``xp.<fn_name>``); ``identity(dtype)`` gives the value of an
    empty reduction."""

    def factory(node, ctx):
        keep = node.attr["keep_dims"]
        dt = node.input_types[0]._np
        xp = ctx.xp
        # On the host the ufunc's own reduce, what ``np.sum`` and the others call after a
        # Python layer of theirs (1 us against 2.5 for a small sum).
        xp_fn = _HOST_REDUCERS[fn_name] if xp is np else getattr(xp, fn_name)
        # Sums over leading axes or along short rows: see column_sums and row_sums.
        by_gemv = fn_name == "sum" and xp is np
        kwargs = {"dtype": dt} if keep_dtype else {}
        fill = None  # the identity an empty reduction is filled with, where xp_fn cannot
        if identity is not None:
            # NumPy's ``initial=`` gives an empty max/min its identity (and fixes the order
            # the reduction visits signed zeros in); a namespace without it is filled here.
            if _takes_initial(xp_fn):
                kwargs["initial"] = identity(dt)
            else:
                fill = identity(dt)

        def reduce(x, axes):
            ax = _norm_axes(axes, x.ndim)
            if not ax and isinstance(x, xp.ndarray) and x.dtype == dt:
                # Nothing to reduce: the input itself, as TF forwards it. A gradient of a
                # same-shape add reduces over no axes; NumPy would copy it (1.5 ms for a
                # 64x28x28x32 activation).
                return x
            if x.size < _GEMV_MIN_SIZE:  # too small to gain from merging axes or from BLAS
                return xp.asarray(xp_fn(x, axis=ax, keepdims=keep, **kwargs))
            merged = _coalesce(x, ax) if isinstance(x, xp.ndarray) else None
            if merged is None and ax in ((0,), (1,)) and isinstance(x, xp.ndarray) and \
                    x.ndim == 2:
                merged = x, ax
            if merged is None:
                return xp.asarray(xp_fn(x, axis=ax, keepdims=keep, **kwargs))
            y = None
            if by_gemv and merged[1] == (0,):
                y = column_sums(merged[0])
            elif by_gemv and merged[1] == (1,) and merged[0].ndim == 2:
                y = row_sums(merged[0])
            if y is None:
                y = xp.asarray(xp_fn(merged[0], axis=merged[1], **kwargs))
            return y.reshape(_reduced_dims(x.shape, ax, keep))

        if fill is None:
            return reduce

        def reduce_or_fill(x, axes):
            if x.size:
                return reduce(x, axes)
            ax = _norm_axes(axes, x.ndim)
            return xp.full(_reduced_dims(x.shape, ax, keep), fill, dtype=dt)

        return reduce_or_fill

    return factory


_HOST_REDUCERS = {"sum": np.add.reduce, "prod": np.multiply.reduce, "max": np.maximum.reduce,
                  "min": np.minimum.reduce, "any": np.logical_or.reduce,
                  "all": np.logical_and.reduce}


def _lowest(dt):
    return -np.inf if dt.kind == "f" else np.iinfo(dt).min


def _highest(dt):
    return np.inf if dt.kind == "f" else np.iinfo(dt).max


register_kernel("Sum", host_memory_inputs=(1,), factory=_reduction("sum", keep_dtype=True))
register_kernel("Prod", host_memory_inputs=(1,), factory=_reduction("prod", keep_dtype=True))
register_kernel("Max", host_memory_inputs=(1,),
                factory=_reduction("max", keep_dtype=False, identity=_lowest))
register_kernel("Min", host_memory_inputs=(1,),
                factory=_reduction("min", keep_dtype=False, identity=_highest))
register_kernel("Any", host_memory_inputs=(1,), factory=_reduction("any", keep_dtype=False))
register_kernel("All", host_memory_inputs=(1,), factory=_reduction("all", keep_dtype=False))


@kernel("Mean", host_memory_inputs=(1,))
def _mean(node, ctx):
    keep = node.attr["keep_dims"]
    dt = node.input_types[0]._np
    integer = node.input_types[0].is_integer
    xp = ctx.xp

    def mean(x, axes):
        ax = _norm_axes(axes, x.ndim)
        n = math.prod([x.shape[a] for a in ax])
        if integer:  # TF's integer mean divides the integer sum, truncating toward zero
            s = xp.sum(x, axis=ax, keepdims=keep, dtype=dt)
            q = xp.floor_divide(xp.abs(s), max(n, 1)).astype(dt)
            return xp.asarray(xp.where(s < 0, -q, q).astype(dt))
        if xp is np:
            return _host_mean(x, ax, keep, dt, n)
        with np.errstate(all="ignore"):
            return xp.asarray(xp.mean(x, axis=ax, keepdims=keep, dtype=dt))

    return mean


@quiet
def _host_mean(x, ax, keep, dt, n):
    """``np.mean(x, axis=ax, keepdims=keep, dtype=dt)``, bit for bit, without its Python
    layers (a small mean: 2 us against 4.4): the sum in ``dt``, divided in place by the count
    as NumPy's ``intp`` (so that a float32 sum is divided in float64, as NumPy divides it).
    Quietly: an overflowing sum is inf, an empty mean NaN (TF's, with no warning)."""
    s = np.add.reduce(x, axis=ax, dtype=dt, keepdims=keep)
    if type(s) is np.ndarray:
        return np.true_divide(s, np.intp(n), out=s, casting="unsafe")
    if n and dt.kind == "f":
        # A real scalar: divided as a Python float, the double division NumPy makes of a
        # scalar over its intp count, without NumPy's scalar arithmetic (1.6 against 0.4 us).
        return np.asarray(dt.type(float(s) / n))
    return np.asarray(s.dtype.type(s / np.intp(n)))


def _reduced_shape(shape, axes):
    out = host(shape, dtype=np.int32).copy()
    ax = np.ravel(host(axes)).astype(int)
    if out.size:
        out[ax % out.size] = 1
    return out


register_kernel("ReducedShape", host_memory_inputs=(0, 1), fn=_reduced_shape)


def _arg_kernel(fn_name):
    def factory(node, ctx):
        out = node.attr["output_type"]._np
        xp = ctx.xp
        xp_fn = getattr(xp, fn_name)

        def arg(x, axis):
            a = int(axis)
            if not -x.ndim <= a < x.ndim:
                raise ValueError(f"Expected dimension in the range [{-x.ndim}, {x.ndim}), but "
                                 f"got {a}")
            if x.shape[a] == 0:
                raise ValueError("Reduction axis is empty")
            return xp.asarray(xp_fn(x, axis=a)).astype(out)

        return arg

    return factory


register_kernel("ArgMax", host_memory_inputs=(1,), factory=_arg_kernel("argmax"))
register_kernel("ArgMin", host_memory_inputs=(1,), factory=_arg_kernel("argmin"))


# --- scans ----------------------------------------------------------------------------------------
def _scan_kernel(ufunc_name, fn_name, identity, accumulate_of=None):
    """Cumsum/Cumprod along an axis, in the input's dtype: ``xp.<ufunc_name>.accumulate``
    (what NumPy's ``cumsum``/``cumprod`` call, without their dispatch: about 1 us a call), or
    ``xp.<fn_name>`` in a namespace whose ufuncs have no ``accumulate`` (CuPy before v13);
    ``accumulate_of(xp)``, where given, picks the accumulation itself."""

    def factory(node, ctx):
        exclusive, reverse = node.attr["exclusive"], node.attr["reverse"]
        xp = ctx.xp
        if accumulate_of is not None:
            accumulate = accumulate_of(xp)
        else:
            accumulate = getattr(getattr(xp, ufunc_name), "accumulate", None) or \
                getattr(xp, fn_name)

        def scan(x, axis):
            a = int(axis)
            if not -x.ndim <= a < x.ndim:
                raise ValueError(f"axis {a} is out of range for a tensor of rank {x.ndim}")
            a %= x.ndim
            if reverse:
                x = xp.flip(x, a)
            out = accumulate(x, axis=a, dtype=x.dtype)
            if exclusive and x.shape[a]:
                head = xp.full(x.shape[:a] + (1,) + x.shape[a + 1:], identity, dtype=x.dtype)
                body = out[(slice(None),) * a + (slice(0, -1),)]
                out = xp.concatenate([head, body], axis=a)
            if reverse:
                out = xp.flip(out, a)
            return out

        return quiet(scan)

    return factory


register_kernel("Cumsum", host_memory_inputs=(1,), factory=_scan_kernel("add", "cumsum", 0))
register_kernel("Cumprod", host_memory_inputs=(1,), factory=_scan_kernel("multiply", "cumprod", 1))


# --- sequences ------------------------------------------------------------------------------------
# Range and LinSpace keep their bounds and their output in host memory on TF's GPUs too: the
# sequence is computed on the host with NumPy and delivered in the device's memory.
def _host_range(start, limit, delta, dt):
    if dt.kind in "iu":  # Python ints (``host_ints``: a constant's are read once)
        start, limit, delta = (_one_int(v) for v in (start, limit, delta))
        n = range_size(start, limit, delta, dt)
        return np.arange(start, start + n * delta, delta, dtype=dt)[:n]
    start, limit, delta = (host(v, dtype=dt).reshape(()) for v in (start, limit, delta))
    n = range_size(start, limit, delta, dt)
    # TF accumulates ``val += delta`` in the op's dtype; a cumulative sum does the same.
    steps = np.full(n, delta, dtype=dt)
    if n:
        steps[0] = start
    return np.cumsum(steps, dtype=dt)


def _one_int(v) -> int:
    ints = host_ints(v)
    if len(ints) != 1:
        raise ValueError(f"Expected a scalar, got {len(ints)} values")
    return ints[0]


def _host_linspace(start, stop, num, dt):
    n = int(host(num))
    if n <= 0:
        raise ValueError(f"Requires num > 0: {n}")
    start, stop = dt.type(host(start)), dt.type(host(stop))
    if n == 1:
        return np.array([start], dtype=dt)
    step = (stop - start) / dt.type(n - 1)
    out = np.empty(n, dtype=dt)
    out[:-1] = start + step * np.arange(n - 1).astype(dt)
    out[-1] = stop
    return out


@kernel("Range", host_memory_inputs=(0, 1, 2))
def _range(node, ctx):
    dt = node.output_types[0]._np
    to_device = ctx.xp.asarray
    return lambda start, limit, delta: to_device(_host_range(start, limit, delta, dt))


@kernel("LinSpace", host_memory_inputs=(0, 1, 2))
def _linspace(node, ctx):
    dt = node.input_types[0]._np
    to_device = ctx.xp.asarray
    return lambda start, stop, num: to_device(_host_linspace(start, stop, num, dt))


# --- segment sums -------------------------------------------------------------------------------
def _segment_scatter(xp, data, ids, n, combine="add", initial=0):
    """``out[ids[j]] = combine(out[ids[j]], data[j])`` into ``n`` rows that start at
    ``initial`` (``combine`` names a ufunc of ``xp``); negative ids are dropped."""
    data = xp.asarray(data)
    ids = xp.asarray(ids)
    if data.shape[:ids.ndim] != ids.shape:
        raise ValueError(f"segment_ids shape {ids.shape} must be a prefix of data shape "
                         f"{data.shape}")
    rest = data.shape[ids.ndim:]
    if ids.size and ids.max() >= n:
        bad = int(ids.max())
        raise ValueError(f"segment_ids value {bad} is out of range [0, {n})")
    out = xp.full((n,) + rest, initial, dtype=data.dtype)
    at = getattr(xp, combine).at
    keep = ids >= 0
    if bool(keep.all()):
        at(out, ids, data)
    else:
        at(out, ids[keep], data[keep])
    return out


def _unsorted_segment_sum(xp, data, ids, num_segments):
    n = int(num_segments)
    if n < 0:
        raise ValueError(f"num_segments must be >= 0, got {n}")
    return _segment_scatter(xp, data, ids, n)


def _sorted_segment_count(xp, ids) -> int:
    """The number of output rows of a sorted segment op (``max(ids) + 1``), after checking
    that ``ids`` is a sorted vector of non-negative ids."""
    ids = xp.asarray(ids)
    if ids.ndim != 1:
        raise ValueError(f"segment_ids should be a vector, got shape {ids.shape}")
    if ids.size and (bool(xp.any(xp.diff(ids) < 0)) or int(ids[0]) < 0):
        raise ValueError("segment ids must be non-negative and sorted in increasing order")
    return int(ids[-1]) + 1 if ids.size else 0


def _segment_sum(xp, data, ids):
    return _segment_scatter(xp, data, ids, _sorted_segment_count(xp, ids))


register_kernel("UnsortedSegmentSum", host_memory_inputs=(2,), xp=_unsorted_segment_sum)
register_kernel("SegmentSum", xp=_segment_sum)
