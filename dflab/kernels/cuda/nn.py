"""One launch per op for the nn ops that are several CuPy calls in the shared kernels: ReLU's
gradient, softmax, softmax cross-entropy (dense and sparse) with its gradient, the bias-add
gradient, and max / average pooling with their gradients (NHWC).

Each is a ``CudaProgram`` (``program.family``: float32 and float64) with a NumPy reference that
computes what the shared kernel computes. Rows (softmax, cross-entropy) are one block each;
pooling is one thread per output (forward) or per input cell (gradient: each cell gathers from
the windows that read it, so no atomics and no zero fill are needed, and the result does not
depend on scheduling). The max-pool gradient routes each window's gradient to the window's
first maximal cell in row-major order, padding included as -inf, exactly as the shared kernel
does; a NaN is its window's maximum. Sparse cross-entropy does not check labels on the host (a
capturable step cannot read them there): as TF's GPU kernel, a label out of range gives NaN
loss and gradient rows.

Other layouts, dtypes and sizes beyond 32-bit indices run the shared kernels.
"""

from __future__ import annotations

import numpy as np

from dflab.framework import errors
from dflab.kernels.context import host
from dflab.kernels.cuda import program as P
from dflab.kernels.registry import get_kernel_def, kernel
from dflab.ops.conv_ops import conv_output_size

GPU = "GPU"
_FLOATS = ("float32", "float64")


def _shared(node, ctx):
    return get_kernel_def(node, "CPU").factory(node, ctx)


def _dtype_of(node, i=0) -> str:
    return np.dtype(node.output_types[i].as_numpy_dtype).name if node.output_types else ""


def _row_block(k: int) -> int:
    """Threads per row: a power of two from 32 to 256, about the row's length."""
    b = 32
    while b < k and b < 256:
        b *= 2
    return b


# --- ReLU's gradient --------------------------------------------------------------------------
def _relu_grad_ref(g, y, out, n):
    np.multiply(g, y > 0, out=out, dtype=out.dtype)


RELU_GRAD = P.family("dflab_relu_grad", "const T* g, const T* y, T* out, int n", r"""
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    out[i] = g[i] * (T)(y[i] > (T)0);
""", _relu_grad_ref)


# --- sigmoid's and tanh's gradients: one launch each where the shared kernel makes three (the
# fusion pass fuses them with their neighbours, but a loop's gradient keeps every value for the
# backward pass, so they run alone) ------------------------------------------------------------
def _sigmoid_grad_ref(y, dy, out, n):
    out[...] = (np.ones((), y.dtype) - y) * y * dy


def _tanh_grad_ref(y, dy, out, n):
    out[...] = (np.ones((), y.dtype) - y * y) * dy


SIGMOID_GRAD = P.family("dflab_sigmoid_grad", "const T* y, const T* dy, T* out, int n", r"""
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    out[i] = ((T)1 - y[i]) * y[i] * dy[i];
""", _sigmoid_grad_ref)
TANH_GRAD = P.family("dflab_tanh_grad", "const T* y, const T* dy, T* out, int n", r"""
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    out[i] = ((T)1 - y[i] * y[i]) * dy[i];
""", _tanh_grad_ref)


def _activation_grad_kernel(op_type: str, family) -> None:
    """``op_type``'s GPU kernel: ``family``'s program on two inputs of one shape and dtype (the
    gradient and the activation's input or output, in the op's order), one output."""
    @kernel(op_type, GPU)
    def factory(node, ctx):
        shared, xp = _shared(node, ctx), ctx.xp
        prog = family.get(_dtype_of(node))
        if prog is None:
            return shared

        def grad(a, b):
            if a.shape != b.shape or a.dtype != b.dtype or a.dtype != prog_dtype or \
                    not P.fits_int32(a.size + P.MAX_BLOCKS * P.BLOCK):
                return shared(a, b)  # broadcasting (in a fused group's shapes) or a dtype
            out = xp.empty(a.shape, a.dtype)
            if a.size:
                P.launch(xp, prog, P.grid_for(a.size), P.BLOCK,
                         (_c(xp, a), _c(xp, b), out, np.int32(a.size)))
            return out

        prog_dtype = np.dtype(_dtype_of(node))
        return grad


_activation_grad_kernel("ReluGrad", RELU_GRAD)
_activation_grad_kernel("SigmoidGrad", SIGMOID_GRAD)
_activation_grad_kernel("TanhGrad", TANH_GRAD)


def _c(xp, a):
    return a if a.flags.c_contiguous else xp.ascontiguousarray(a)


# --- softmax and cross-entropy ----------------------------------------------------------------
def _softmax_ref(x, y, rows, k):
    x2, y2 = x.reshape(rows, k), y.reshape(rows, k)
    with np.errstate(all="ignore"):
        e = np.exp(x2 - x2.max(axis=1, keepdims=True))
        y2[...] = e / e.sum(axis=1, keepdims=True)


SOFTMAX = P.family("dflab_softmax", "const T* x, T* y, int rows, int k", r"""
  __shared__ ACC shared[32];
  for (int row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + (long long)row * k;
    T* yr = y + (long long)row * k;
    ACC m = -(ACC)DFLAB_INF;
    for (int j = threadIdx.x; j < k; j += blockDim.x) {
      ACC v = xr[j]; m = (v > m || v != v) ? v : m; }
    m = dflab_block_max(m, shared);
    ACC s = 0;
    for (int j = threadIdx.x; j < k; j += blockDim.x) s += exp((ACC)xr[j] - m);
    s = dflab_block_sum(s, shared);
    for (int j = threadIdx.x; j < k; j += blockDim.x) yr[j] = (T)(exp((ACC)xr[j] - m) / s);
  }
""", _softmax_ref)


def _rows(x):
    k = int(x.shape[-1]) if x.ndim else 0
    return (int(x.size // k) if k else 0), k


@kernel("Softmax", GPU)
def _softmax_gpu(node, ctx):
    shared, xp = _shared(node, ctx), ctx.xp
    prog = SOFTMAX.get(_dtype_of(node))
    axis = node.attr.get("axis", -1)
    if prog is None:
        return shared

    def softmax(x):
        rows, k = _rows(x)
        if x.ndim == 0 or axis not in (-1, x.ndim - 1) or not rows or not k or \
                not P.fits_int32(x.size):
            return shared(x)
        y = xp.empty(x.shape, x.dtype)
        P.launch(xp, prog, min(rows, P.MAX_BLOCKS), _row_block(k),
                 (_c(xp, x), y, np.int32(rows), np.int32(k)))
        return y

    return softmax


def _xent_ref(logits, labels, loss, backprop, rows, k):
    x, lab, bp = logits.reshape(rows, k), labels.reshape(rows, k), backprop.reshape(rows, k)
    with np.errstate(all="ignore"):
        m = x.max(axis=1, keepdims=True)
        shifted = x - m
        log_s = np.log(np.exp(shifted).sum(axis=1, keepdims=True))
        log_p = shifted - log_s
        terms = np.where(lab == 0, np.zeros((), x.dtype), lab * log_p)
        loss.reshape(rows)[...] = -terms.sum(axis=1)
        bp[...] = np.exp(log_p) - lab


XENT = P.family(
    "dflab_softmax_xent", "const T* logits, const T* labels, T* loss, T* backprop, int rows, "
    "int k", r"""
  __shared__ ACC shared[32];
  for (int row = blockIdx.x; row < rows; row += gridDim.x) {
    const long long base = (long long)row * k;
    ACC m = -(ACC)DFLAB_INF;
    for (int j = threadIdx.x; j < k; j += blockDim.x) {
      ACC v = logits[base + j]; m = (v > m || v != v) ? v : m; }
    m = dflab_block_max(m, shared);
    ACC s = 0;
    for (int j = threadIdx.x; j < k; j += blockDim.x) s += exp((ACC)logits[base + j] - m);
    s = dflab_block_sum(s, shared);
    const ACC log_s = log(s);
    ACC l = 0;
    for (int j = threadIdx.x; j < k; j += blockDim.x) {
      const ACC log_p = ((ACC)logits[base + j] - m) - log_s;
      const ACC lab = labels[base + j];
      if (lab != (ACC)0) l -= lab * log_p;  // a zero label on a -inf logit adds 0, as TF
      backprop[base + j] = (T)(exp(log_p) - lab);
    }
    l = dflab_block_sum(l, shared);
    if (threadIdx.x == 0) loss[row] = (T)l;
  }
""", _xent_ref)


@kernel("SoftmaxCrossEntropyWithLogits", GPU)
def _xent_gpu(node, ctx):
    shared, xp = _shared(node, ctx), ctx.xp
    prog = XENT.get(_dtype_of(node))
    axis = node.attr.get("axis", -1)
    if prog is None:
        return shared

    def xent(logits, labels):
        rows, k = _rows(logits)
        if logits.shape != labels.shape or logits.dtype != labels.dtype or \
                axis not in (-1, logits.ndim - 1) or not rows or not k or \
                not P.fits_int32(logits.size):
            return shared(logits, labels)
        loss = xp.empty(logits.shape[:-1], logits.dtype)
        backprop = xp.empty(logits.shape, logits.dtype)
        P.launch(xp, prog, min(rows, P.MAX_BLOCKS), _row_block(k),
                 (_c(xp, logits), _c(xp, labels), loss, backprop, np.int32(rows),
                  np.int32(k)))
        return loss, backprop

    return xent


def _sparse_xent_ref(logits, labels, loss, backprop, rows, k):
    x, bp = logits.reshape(rows, k), backprop.reshape(rows, k)
    lab = labels.reshape(rows).astype(np.int64)
    with np.errstate(all="ignore"):
        m = x.max(axis=1, keepdims=True)
        shifted = x - m
        s = np.exp(shifted).sum(axis=1, keepdims=True)
        log_p = shifted - np.log(s)
        bp[...] = np.exp(log_p)
        ok = (lab >= 0) & (lab < k)
        idx = np.arange(rows)
        safe = np.where(ok, lab, 0)
        loss.reshape(rows)[...] = np.where(ok, -log_p[idx, safe], np.nan)
        bp[idx[ok], safe[ok]] -= 1
        bp[~ok] = np.nan


SPARSE_XENT = {}
for _lt, _lc in (("int32", "int"), ("int64", "long long")):
    for _dt, _p in P.family(
            f"dflab_sparse_xent_{_lt}", f"const T* logits, const {_lc}* labels, T* loss, "
            "T* backprop, int rows, int k", r"""
  __shared__ ACC shared[32];
  for (int row = blockIdx.x; row < rows; row += gridDim.x) {
    const long long base = (long long)row * k;
    const long long label = labels[row];
    const bool ok = label >= 0 && label < k;
    ACC m = -(ACC)DFLAB_INF;
    for (int j = threadIdx.x; j < k; j += blockDim.x) {
      ACC v = logits[base + j]; m = (v > m || v != v) ? v : m; }
    m = dflab_block_max(m, shared);
    ACC s = 0;
    for (int j = threadIdx.x; j < k; j += blockDim.x) s += exp((ACC)logits[base + j] - m);
    s = dflab_block_sum(s, shared);
    const ACC log_s = log(s);
    for (int j = threadIdx.x; j < k; j += blockDim.x) {
      const ACC log_p = ((ACC)logits[base + j] - m) - log_s;
      ACC b = exp(log_p) - (j == label ? (ACC)1 : (ACC)0);
      backprop[base + j] = ok ? (T)b : (T)DFLAB_NAN;
      if (j == label) loss[row] = (T)(-log_p);
    }
    if (!ok && threadIdx.x == 0) loss[row] = (T)DFLAB_NAN;
  }
""", _sparse_xent_ref).items():
        SPARSE_XENT[(_dt, _lt)] = _p


@kernel("SparseSoftmaxCrossEntropyWithLogits", GPU)
def _sparse_xent_gpu(node, ctx):
    shared, xp = _shared(node, ctx), ctx.xp
    label_type = np.dtype(node.input_types[1].as_numpy_dtype).name if node.input_types else ""
    prog = SPARSE_XENT.get((_dtype_of(node), label_type))
    if prog is None:
        return shared

    def sparse_xent(logits, labels):
        rows, k = _rows(logits)
        if logits.ndim < 1 or labels.shape != logits.shape[:-1]:
            raise errors.InvalidArgumentError(
                None, node, f"logits and labels must have the same first dimensions, got "
                f"logits shape {list(logits.shape)} and labels shape {list(labels.shape)}")
        if not rows or not k or not P.fits_int32(logits.size):
            return shared(logits, labels)
        loss = xp.empty(labels.shape, logits.dtype)
        backprop = xp.empty(logits.shape, logits.dtype)
        P.launch(xp, prog, min(rows, P.MAX_BLOCKS), _row_block(k),
                 (_c(xp, logits), _c(xp, labels), loss, backprop, np.int32(rows),
                  np.int32(k)))
        return loss, backprop

    return sparse_xent


# --- bias-add gradient ------------------------------------------------------------------------
def _bias_grad_ref(g, out, rows, c, chunk):
    g = g.reshape(rows, c)
    for k, start in enumerate(range(0, rows, chunk)):
        out.reshape(-1, c)[k] = g[start:start + chunk].sum(axis=0, dtype=out.dtype)


BIAS_GRAD = P.family("dflab_bias_add_grad", "const T* g, T* out, int rows, int c, int chunk", r"""
  // Each block sums 32 columns over one chunk of rows, blockDim.x / 32 lanes of rows each;
  // the lanes' sums meet in shared memory and the block writes its chunk's row of ``out``.
  // Deterministic: no atomics (a second launch sums the chunks' rows the same way).
  __shared__ ACC part[1024];
  const int groups = (c + 31) / 32;
  const int col = (blockIdx.x % groups) * 32 + (threadIdx.x & 31);
  const long long r0 = (long long)(blockIdx.x / groups) * chunk;
  const long long r1 = min((long long)rows, r0 + chunk);
  const int lane = threadIdx.x >> 5, lanes = blockDim.x >> 5;
  ACC s = 0;
  if (col < c)
    for (long long r = r0 + lane; r < r1; r += lanes) s += g[r * c + col];
  part[threadIdx.x] = s;
  __syncthreads();
  if (lane == 0 && col < c) {
    for (int l = 1; l < lanes; ++l) s += part[l * 32 + (threadIdx.x & 31)];
    out[(long long)(blockIdx.x / groups) * c + col] = (T)s;
  }
""", _bias_grad_ref)
# Rows per chunk at least, and the blocks a bias gradient aims for (a few per SM of a large
# GPU): one block per 32 columns alone leaves most SMs idle when there are few channels and
# many rows (a convolution's batch x height x width).
_BIAS_CHUNK_ROWS = 2048
_BIAS_BLOCKS = 512


def _bias_chunk(rows: int, c: int) -> int:
    """Rows per chunk: all of them (one launch) unless splitting fills the GPU better."""
    groups = -(-c // 32)
    want = max(1, _BIAS_BLOCKS // groups)
    return max(_BIAS_CHUNK_ROWS, -(-rows // want)) if rows > _BIAS_CHUNK_ROWS else rows


def _column_sums(xp, prog, g, rows: int, c: int):
    """The sums over the rows of ``g`` (a C-contiguous array of ``rows`` x ``c`` elements):
    one launch, or two over many rows (chunks' sums, then their sum)."""
    out = xp.empty((c,), g.dtype)
    groups, chunk = -(-c // 32), _bias_chunk(rows, c)
    chunks = -(-rows // chunk)
    if chunks > 1:
        partial = xp.empty((chunks, c), g.dtype)
        P.launch(xp, prog, groups * chunks, 256,
                 (_c(xp, g), partial, np.int32(rows), np.int32(c), np.int32(chunk)))
        g, rows = partial, chunks
    P.launch(xp, prog, groups, 1024 if rows >= 1024 else 256,
             (_c(xp, g), out, np.int32(rows), np.int32(c), np.int32(rows)))
    return out


@kernel("BiasAddGrad", GPU)
def _bias_add_grad_gpu(node, ctx):
    shared, xp = _shared(node, ctx), ctx.xp
    prog = BIAS_GRAD.get(_dtype_of(node))
    fmt = node.attr.get("data_format", "NHWC")
    if prog is None:
        return shared

    def bias_add_grad(g):
        if g.ndim < 2 or (fmt != "NHWC" and g.ndim != 2) or not P.fits_int32(g.size):
            return shared(g)
        c = int(g.shape[-1])
        rows = int(g.size // c) if c else 0
        if not c:
            return xp.empty((c,), g.dtype)
        if not rows:
            return shared(g)
        return _column_sums(xp, prog, g, rows, c)

    return bias_add_grad


@kernel("Sum", GPU, host_memory_inputs=(1,))
def _sum_gpu(node, ctx):
    """A sum over leading axes (a broadcast add's gradient: a convolution's bias added with
    ``+``) as column sums; CuPy's reduction gives each output one block, which leaves a large
    GPU nearly idle for a few channels over many rows (11 ms for 512x28x28x32 on an H200)."""
    from dflab.kernels.math_kernels import _coalesce, _norm_axes, _reduced_dims

    shared, xp = _shared(node, ctx), ctx.xp
    prog = BIAS_GRAD.get(_dtype_of(node))
    keep = node.attr["keep_dims"]
    if prog is None:
        return shared

    dtype = np.dtype(_dtype_of(node))

    def sum_(x, axes):
        ax = _norm_axes(axes, x.ndim)
        if not isinstance(x, xp.ndarray) or x.dtype != dtype or not x.size or \
                not P.fits_int32(x.size):
            return shared(x, axes)
        merged = _coalesce(x, ax)
        if merged is None and ax == (0,) and x.ndim == 2 and x.flags.c_contiguous:
            merged = x, ax
        if merged is None or merged[1] != (0,) or merged[0].ndim != 2:
            return shared(x, axes)
        rows, c = merged[0].shape
        return _column_sums(xp, prog, merged[0], rows, c).reshape(
            _reduced_dims(x.shape, ax, keep))

    return sum_


# --- pooling (NHWC) ---------------------------------------------------------------------------
_POOL_PARAMS = ("int n, int h, int w, int c, int oh, int ow, int kh, int kw, int sh, int sw, "
                "int pt, int pl")


def _windows(x, oh, ow, kh, kw, sh, sw, pt, pl, fill):
    """(N, OH, OW, KH, KW, C) windows of NHWC ``x`` padded with ``fill``, in float64."""
    n, h, w, c = x.shape
    ph = max((oh - 1) * sh + kh - pt - h, 0)
    pw = max((ow - 1) * sw + kw - pl - w, 0)
    xp_ = np.full((n, h + pt + ph, w + pl + pw, c), fill, np.float64)
    xp_[:, pt:pt + h, pl:pl + w] = x
    out = np.empty((n, oh, ow, kh, kw, c))
    for i in range(kh):
        for j in range(kw):
            out[:, :, :, i, j] = xp_[:, i:i + sh * (oh - 1) + 1:sh, j:j + sw * (ow - 1) + 1:sw]
    return out


def _max_pool_ref(x, y, n, h, w, c, oh, ow, kh, kw, sh, sw, pt, pl):
    win = _windows(x, oh, ow, kh, kw, sh, sw, pt, pl, -np.inf).reshape(n, oh, ow, kh * kw, c)
    with np.errstate(all="ignore"):
        y[...] = np.where(np.isnan(win).any(axis=3), np.nan, win.max(axis=3))


MAX_POOL = P.family("dflab_max_pool", "const T* x, T* y, " + _POOL_PARAMS, r"""
  const int total = n * oh * ow * c;
  for (int o = blockIdx.x * blockDim.x + threadIdx.x; o < total; o += blockDim.x * gridDim.x) {
    const int ch = o % c; int t = o / c; const int q = t % ow; t /= ow; const int p = t % oh;
    const int b = t / oh;
    T m = -(T)DFLAB_INF;
    for (int i = 0; i < kh; ++i) {
      const int r = p * sh - pt + i;
      if (r < 0 || r >= h) continue;
      for (int j = 0; j < kw; ++j) {
        const int col = q * sw - pl + j;
        if (col < 0 || col >= w) continue;
        const T v = x[((b * h + r) * w + col) * c + ch];
        if (v > m || v != v) m = v;
        if (m != m) break;
      }
      if (m != m) break;
    }
    y[o] = m;
  }
""", _max_pool_ref)


def _first_max(win):
    """Per window (last two axes: taps, C), the index of its first maximal tap in row-major
    order, a NaN being the maximum (padding is -inf)."""
    nan = np.isnan(win)
    big = np.where(nan, np.inf, win)
    top = big.max(axis=-2, keepdims=True)
    hit = (big == top) & (~np.isnan(top) | nan)
    any_nan = nan.any(axis=-2, keepdims=True)
    hit = np.where(any_nan, nan, hit)
    return hit.argmax(axis=-2)


def _max_pool_grad_ref(x, g, dx, n, h, w, c, oh, ow, kh, kw, sh, sw, pt, pl):
    win = _windows(x, oh, ow, kh, kw, sh, sw, pt, pl, -np.inf).reshape(n, oh, ow, kh * kw, c)
    first = _first_max(win)  # (n, oh, ow, c)
    ph = max((oh - 1) * sh + kh - pt - h, 0)
    pw = max((ow - 1) * sw + kw - pl - w, 0)
    acc = np.zeros((n, h + pt + ph, w + pl + pw, c), dx.dtype)
    for i in range(kh):
        for j in range(kw):
            share = np.where(first == i * kw + j, g, np.zeros((), g.dtype))
            acc[:, i:i + sh * (oh - 1) + 1:sh, j:j + sw * (ow - 1) + 1:sw] += share
    dx[...] = acc[:, pt:pt + h, pl:pl + w]


MAX_POOL_GRAD = P.family("dflab_max_pool_grad", "const T* x, const T* g, T* dx, " + _POOL_PARAMS,
                         r"""
  // One thread per input cell: it gathers the gradient of every window whose first maximum
  // (row-major, padding as -inf, a NaN winning) it is.
  const int total = n * h * w * c;
  for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < total; e += blockDim.x * gridDim.x) {
    const int ch = e % c; int t = e / c; const int col = t % w; t /= w; const int r = t % h;
    const int b = t / h;
    const int pr = r + pt, pc = col + pl;  // the cell in padded coordinates
    const int p0 = pr >= kh ? (pr - kh) / sh + 1 : 0, p1 = min(pr / sh, oh - 1);
    const int q0 = pc >= kw ? (pc - kw) / sw + 1 : 0, q1 = min(pc / sw, ow - 1);
    ACC acc = 0;
    for (int p = p0; p <= p1; ++p) {
      for (int q = q0; q <= q1; ++q) {
        int best = -1; T m = -(T)DFLAB_INF;  // the first tap holds the max so far
        for (int i = 0; i < kh && !(m != m); ++i) {
          const int rr = p * sh - pt + i;
          for (int j = 0; j < kw; ++j) {
            const int cc = q * sw - pl + j;
            const T v = (rr < 0 || rr >= h || cc < 0 || cc >= w) ? -(T)DFLAB_INF
                        : x[((b * h + rr) * w + cc) * c + ch];
            if (best < 0 || v > m || (v != v)) { best = i * kw + j; m = v; }
            if (m != m) break;
          }
        }
        if (best == (pr - p * sh) * kw + (pc - q * sw))
          acc += g[((b * oh + p) * ow + q) * c + ch];
      }
    }
    dx[e] = (T)acc;
  }
""", _max_pool_grad_ref)


def _avg_pool_ref(x, y, n, h, w, c, oh, ow, kh, kw, sh, sw, pt, pl):
    win = _windows(x, oh, ow, kh, kw, sh, sw, pt, pl, 0.0).reshape(n, oh, ow, kh * kw, c)
    y[...] = win.sum(axis=3) / _counts(h, w, oh, ow, kh, kw, sh, sw, pt, pl)[None, :, :, None]


def _counts(h, w, oh, ow, kh, kw, sh, sw, pt, pl):
    def one(o, k, s, pad, size):
        start = np.arange(o) * s - pad
        return np.minimum(start + k, size) - np.maximum(start, 0)

    return one(oh, kh, sh, pt, h)[:, None] * one(ow, kw, sw, pl, w)[None, :]


_AVG_COUNT = r"""
__device__ __forceinline__ int dflab_cells(int p, int q, int h, int w, int kh, int kw, int sh,
                                           int sw, int pt, int pl) {
  const int r0 = p * sh - pt, c0 = q * sw - pl;
  return (min(r0 + kh, h) - max(r0, 0)) * (min(c0 + kw, w) - max(c0, 0));
}
"""

AVG_POOL = P.family("dflab_avg_pool", "const T* x, T* y, " + _POOL_PARAMS, r"""
  const int total = n * oh * ow * c;
  for (int o = blockIdx.x * blockDim.x + threadIdx.x; o < total; o += blockDim.x * gridDim.x) {
    const int ch = o % c; int t = o / c; const int q = t % ow; t /= ow; const int p = t % oh;
    const int b = t / oh;
    ACC s = 0;
    for (int i = 0; i < kh; ++i) {
      const int r = p * sh - pt + i;
      if (r < 0 || r >= h) continue;
      for (int j = 0; j < kw; ++j) {
        const int col = q * sw - pl + j;
        if (col >= 0 && col < w) s += x[((b * h + r) * w + col) * c + ch];
      }
    }
    y[o] = (T)(s / (ACC)dflab_cells(p, q, h, w, kh, kw, sh, sw, pt, pl));
  }
""", _avg_pool_ref, preamble=_AVG_COUNT)


def _avg_pool_grad_ref(g, dx, n, h, w, c, oh, ow, kh, kw, sh, sw, pt, pl):
    share = g / _counts(h, w, oh, ow, kh, kw, sh, sw, pt, pl)[None, :, :, None]
    ph = max((oh - 1) * sh + kh - pt - h, 0)
    pw = max((ow - 1) * sw + kw - pl - w, 0)
    acc = np.zeros((n, h + pt + ph, w + pl + pw, c))
    for i in range(kh):
        for j in range(kw):
            acc[:, i:i + sh * (oh - 1) + 1:sh, j:j + sw * (ow - 1) + 1:sw] += share
    dx[...] = acc[:, pt:pt + h, pl:pl + w]


AVG_POOL_GRAD = P.family("dflab_avg_pool_grad", "const T* g, T* dx, " + _POOL_PARAMS, r"""
  const int total = n * h * w * c;
  for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < total; e += blockDim.x * gridDim.x) {
    const int ch = e % c; int t = e / c; const int col = t % w; t /= w; const int r = t % h;
    const int b = t / h;
    const int pr = r + pt, pc = col + pl;
    const int p0 = pr >= kh ? (pr - kh) / sh + 1 : 0, p1 = min(pr / sh, oh - 1);
    const int q0 = pc >= kw ? (pc - kw) / sw + 1 : 0, q1 = min(pc / sw, ow - 1);
    ACC acc = 0;
    for (int p = p0; p <= p1; ++p)
      for (int q = q0; q <= q1; ++q)
        acc += (ACC)g[((b * oh + p) * ow + q) * c + ch]
               / (ACC)dflab_cells(p, q, h, w, kh, kw, sh, sw, pt, pl);
    dx[e] = (T)acc;
  }
""", _avg_pool_grad_ref, preamble=_AVG_COUNT)


class _Pool:
    def __init__(self, node):
        a = node.attr
        self.nhwc = a["data_format"] == "NHWC"
        self.k = (int(a["ksize"][1]), int(a["ksize"][2]))
        self.s = (int(a["strides"][1]), int(a["strides"][2]))
        self.padding = a["padding"]

    def args(self, shape):
        """The launch's integer arguments for an NHWC input of ``shape``, or None."""
        n, h, w, c = (int(d) for d in shape)
        try:
            oh, pt, _ = conv_output_size(h, self.k[0], self.s[0], 1, self.padding)
            ow, pl, _ = conv_output_size(w, self.k[1], self.s[1], 1, self.padding)
        except ValueError:
            return None
        if min(n, h, w, c, oh, ow) <= 0 or \
                not P.fits_int32(n * h * w * c + P.MAX_BLOCKS * P.BLOCK):
            return None
        return tuple(np.int32(v) for v in (n, h, w, c, oh, ow, *self.k, *self.s, pt, pl))


def _pool_kernel(op_type, programs, grad_of):
    """Register ``op_type``'s GPU kernel: ``grad_of`` None for a forward pool (x -> y), "max"
    (x, y, g -> dx) or "avg" (sizes, g -> dx)."""

    def factory(node, ctx):
        shared, xp = _shared(node, ctx), ctx.xp
        prog = programs.get(_dtype_of(node))
        pool = _Pool(node)
        if prog is None or not pool.nhwc:
            return shared

        if grad_of is None:
            def forward(x):
                args = pool.args(x.shape) if x.ndim == 4 else None
                if args is None:
                    return shared(x)
                y = xp.empty((int(args[0]), int(args[4]), int(args[5]), int(args[3])), x.dtype)
                P.launch(xp, prog, P.grid_for(y.size), P.BLOCK, (_c(xp, x), y, *args))
                return y

            return forward

        if grad_of == "max":
            def max_grad(x, y, g):
                args = pool.args(x.shape) if x.ndim == 4 else None
                if args is None or g.shape != (args[0], args[4], args[5], args[3]):
                    return shared(x, y, g)
                dx = xp.empty(x.shape, x.dtype)
                P.launch(xp, prog, P.grid_for(x.size), P.BLOCK,
                         (_c(xp, x), _c(xp, g.astype(x.dtype, copy=False)), dx, *args))
                return dx

            return max_grad

        def avg_grad(sizes, g):
            shape = tuple(int(d) for d in np.ravel(host(sizes)))
            args = pool.args(shape) if len(shape) == 4 else None
            if args is None or g.shape != (args[0], args[4], args[5], args[3]):
                return shared(sizes, g)
            dx = xp.empty(shape, g.dtype)
            P.launch(xp, prog, P.grid_for(dx.size), P.BLOCK, (_c(xp, g), dx, *args))
            return dx

        return avg_grad

    host_inputs = (0,) if grad_of == "avg" else ()
    kernel(op_type, GPU, host_memory_inputs=host_inputs)(factory)


_pool_kernel("MaxPool", MAX_POOL, None)
_pool_kernel("AvgPool", AVG_POOL, None)
_pool_kernel("MaxPoolGrad", MAX_POOL_GRAD, "max")
_pool_kernel("AvgPoolGrad", AVG_POOL_GRAD, "avg")


# --- sigmoid (one launch; the shared kernel is half a dozen CuPy calls) -------------------------
def _sigmoid_ref(x, y, n):
    with np.errstate(all="ignore"):
        e = np.exp(-np.abs(x))
        one = np.ones((), x.dtype)
        y[...] = np.where(x >= 0, one / (one + e), e / (one + e))


SIGMOID = P.family("dflab_sigmoid", "const T* x, T* y, int n", r"""
  // exp of a non-positive number never overflows; NaN stays NaN.
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    const T v = x[i];
    const T e = exp(-fabs(v));
    y[i] = v >= (T)0 ? (T)1 / ((T)1 + e) : e / ((T)1 + e);
  }
""", _sigmoid_ref)


@kernel("Sigmoid", GPU)
def _sigmoid_gpu(node, ctx):
    shared, xp = _shared(node, ctx), ctx.xp
    prog = SIGMOID.get(_dtype_of(node))
    if prog is None:
        return shared

    def sigmoid(x):
        if not P.fits_int32(x.size + P.MAX_BLOCKS * P.BLOCK) or x.dtype != prog_dtype:
            return shared(x)
        y = xp.empty(x.shape, x.dtype)
        if x.size:
            P.launch(xp, prog, P.grid_for(x.size), P.BLOCK, (_c(xp, x), y, np.int32(x.size)))
        return y

    prog_dtype = np.dtype(_dtype_of(node))
    return sigmoid
