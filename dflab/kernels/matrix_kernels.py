"""Kernels of ``dflab.ops.matrix_ops`` and ``dflab.ops.linalg_solve_ops``, written against
the device's ``xp`` (NumPy on CPUs, CuPy on GPUs): band parts, diagonals, cross products, and
the decompositions and solvers through ``xp.linalg``.

Every kernel works on batches (any leading axes) and returns fresh arrays. A singular matrix
raises ``InvalidArgumentError`` naming the node, with TF's message, never a bare
``LinAlgError``; a Cholesky factor that does not exist is NaNs, as in TF 2.x. ``MatrixSolveLs`` and
``MatrixSquareRoot`` run on the host only, as TF has them (no GPU kernel).
"""

from __future__ import annotations

import numpy as np

from dflab.framework import errors
from dflab.kernels.context import host
from dflab.kernels.registry import kernel


def _bad(node, message):
    return errors.InvalidArgumentError(None, node, message)


def _linalg_errors(node, message, fn):
    """``fn`` with NumPy's (and CuPy's) ``LinAlgError`` turned into TF's error."""
    def run(*args):
        try:
            return fn(*args)
        except np.linalg.LinAlgError as e:
            raise _bad(node, message) from e
    return run


def _check_square(node, x, what="input"):
    if x.ndim < 2:
        raise _bad(node, f"{what} must have rank >= 2, got {x.ndim}")
    if x.shape[-1] != x.shape[-2]:
        raise _bad(node, f"{what} must be a square matrix, got shape {list(x.shape)}")


def _diag_index(n):
    return np.arange(n)


# --- structure ----------------------------------------------------------------------------------
@kernel("MatrixBandPart", host_memory_inputs=(1, 2))
def _band_part(node, ctx):
    xp = ctx.xp

    def run(x, num_lower, num_upper):
        lo, hi = int(host(num_lower)), int(host(num_upper))
        m, n = x.shape[-2], x.shape[-1]
        if lo > m:
            raise _bad(node, f"num_lower must be negative or less or equal to number of rows "
                             f"({m}) got: {lo}")
        if hi > n:
            raise _bad(node, f"num_upper must be negative or less or equal to number of "
                             f"columns ({n}) got: {hi}")
        i = xp.arange(m)[:, None]
        j = xp.arange(n)[None, :]
        keep = ((lo < 0) | (i - j <= lo)) & ((hi < 0) | (j - i <= hi))
        return xp.where(keep, x, xp.zeros((), dtype=x.dtype))

    return run


@kernel("MatrixDiag")
def _matrix_diag(node, ctx):
    xp = ctx.xp

    def run(d):
        n = d.shape[-1]
        out = xp.zeros(d.shape + (n,), dtype=d.dtype)
        idx = _diag_index(n)
        out[..., idx, idx] = d
        return out

    return run


@kernel("MatrixDiagPart")
def _matrix_diag_part(node, ctx):
    xp = ctx.xp
    return lambda x: xp.diagonal(x, axis1=-2, axis2=-1).copy()


@kernel("MatrixSetDiag")
def _matrix_set_diag(node, ctx):
    def run(x, d):
        k = min(x.shape[-2], x.shape[-1])
        if d.shape != x.shape[:-2] + (k,):
            raise _bad(node, f"diagonal must have shape {list(x.shape[:-2]) + [k]} for an "
                             f"input of shape {list(x.shape)}, got {list(d.shape)}")
        out = x.copy()
        idx = _diag_index(k)
        out[..., idx, idx] = d
        return out

    return run


@kernel("Diag")
def _diag(node, ctx):
    xp = ctx.xp

    def run(d):
        if d.ndim == 0:
            raise _bad(node, "Input must be at least rank 1, got 0")
        n = d.size
        out = xp.zeros(n * n, dtype=d.dtype)
        out[:: n + 1] = d.ravel()
        return out.reshape(d.shape + d.shape)

    return run


@kernel("DiagPart")
def _diag_part(node, ctx):
    def run(x):
        half = x.ndim // 2
        if x.ndim == 0 or x.ndim % 2 or x.shape[:half] != x.shape[half:]:
            raise _bad(node, f"Invalid shape {list(x.shape)}: dimensions must match as "
                             "[d1, ..., dk, d1, ..., dk]")
        n = int(np.prod(x.shape[:half]))
        return x.reshape(n, n).diagonal().reshape(x.shape[:half]).copy()

    return run


@kernel("Cross")
def _cross(node, ctx):
    xp = ctx.xp

    def run(a, b):
        if a.shape != b.shape:
            raise _bad(node, f"Both inputs must be of same shape: {list(a.shape)} vs. "
                             f"{list(b.shape)}")
        if a.ndim == 0 or a.shape[-1] != 3:
            raise _bad(node, f"Trailing dimension must be of size 3, got shape "
                             f"{list(a.shape)}")
        return xp.cross(a, b)

    return run


# --- decompositions -----------------------------------------------------------------------------
def _adjoint(xp, x):
    return xp.conj(xp.swapaxes(x, -1, -2))


@kernel("Cholesky")
def _cholesky(node, ctx):
    """A matrix that is not positive definite gets NaNs in its lower triangle (TF 2.x's
    behaviour: the batch's other matrices are still factored, and no error is raised)."""
    xp = ctx.xp

    def failed(x):
        n = x.shape[-1]
        return xp.where(xp.tril(xp.ones((n, n), dtype=bool)), xp.asarray(np.nan, x.dtype),
                        xp.zeros((), x.dtype))

    def one(x):
        try:
            lower = xp.linalg.cholesky(x)
        except np.linalg.LinAlgError:
            return failed(x)
        # CuPy may report the failure as NaNs rather than raise.
        if not bool(xp.all(xp.isfinite(lower))) and bool(xp.all(xp.isfinite(x))):
            return failed(x)
        return lower

    def chol(x):
        _check_square(node, x)
        try:
            return xp.linalg.cholesky(x)
        except np.linalg.LinAlgError:
            flat = x.reshape((-1,) + x.shape[-2:])
            return xp.stack([one(m) for m in flat]).reshape(x.shape)

    return chol


def _singular_check(xp, x, result):
    if result.size and not bool(xp.all(xp.isfinite(result))) and bool(xp.all(xp.isfinite(x))):
        raise np.linalg.LinAlgError("singular")
    return result


@kernel("MatrixInverse")
def _inverse(node, ctx):
    xp = ctx.xp
    adjoint = bool(node.attr["adjoint"])

    def inv(x):
        _check_square(node, x)
        a = _adjoint(xp, x) if adjoint else x
        return _singular_check(xp, a, xp.linalg.inv(a))

    return _linalg_errors(node, "Input is not invertible.", inv)


@kernel("MatrixDeterminant")
def _determinant(node, ctx):
    xp = ctx.xp

    def det(x):
        _check_square(node, x)
        return xp.asarray(xp.linalg.det(x), dtype=x.dtype)

    return det


@kernel("LogMatrixDeterminant")
def _slogdet(node, ctx):
    xp = ctx.xp

    def slogdet(x):
        _check_square(node, x)
        sign, logabs = xp.linalg.slogdet(x)
        return xp.asarray(sign, dtype=x.dtype), xp.asarray(logabs, dtype=x.dtype)

    return slogdet


@kernel("MatrixSolve")
def _solve(node, ctx):
    xp = ctx.xp
    adjoint = bool(node.attr["adjoint"])

    def solve(a, b):
        _check_square(node, a)
        if a.shape[:-2] != b.shape[:-2] or a.shape[-1] != b.shape[-2]:
            raise _bad(node, f"Incompatible shapes: matrix {list(a.shape)}, rhs "
                             f"{list(b.shape)}")
        a = _adjoint(xp, a) if adjoint else a
        if b.shape[-1] == 0:
            return xp.zeros(b.shape, dtype=b.dtype)
        return _singular_check(xp, a, xp.linalg.solve(a, b))

    return _linalg_errors(node, "Input matrix is not invertible.", solve)


@kernel("MatrixTriangularSolve")
def _triangular_solve(node, ctx):
    xp = ctx.xp
    lower, adjoint = bool(node.attr["lower"]), bool(node.attr["adjoint"])

    def solve(a, b):
        _check_square(node, a)
        if a.shape[-1] != b.shape[-2]:
            raise _bad(node, f"Incompatible shapes: matrix {list(a.shape)}, rhs "
                             f"{list(b.shape)}")
        # Only the named triangle is read (TF's contract): the other is masked off, and
        # the solve of a triangular matrix is the triangular solve. Batch axes broadcast.
        tri = xp.tril(a) if lower else xp.triu(a)
        tri = _adjoint(xp, tri) if adjoint else tri
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        tri = xp.broadcast_to(tri, batch + a.shape[-2:])
        rhs = xp.broadcast_to(b, batch + b.shape[-2:])
        if rhs.shape[-1] == 0:
            return xp.zeros(rhs.shape, dtype=b.dtype)
        return xp.linalg.solve(tri, rhs).astype(b.dtype, copy=False)

    return _linalg_errors(node, "Input matrix is not invertible.", solve)


@kernel("MatrixSolveLs", host_only=True, host_memory_inputs=(2,))
def _solve_ls(node, ctx):
    fast = bool(node.attr["fast"])

    def lstsq(a, b, l2):
        if a.ndim < 2 or a.shape[:-2] != b.shape[:-2] or a.shape[-2] != b.shape[-2]:
            raise _bad(node, f"Incompatible shapes: matrix {list(a.shape)}, rhs "
                             f"{list(b.shape)}")
        lam = float(host(l2))
        m, n = a.shape[-2:]
        if not fast:  # a complete orthogonal decomposition: TF ignores l2_regularizer here
            return (np.linalg.pinv(a) @ b).astype(a.dtype, copy=False)
        ah = _adjoint(np, a)
        if m >= n:  # (A^H A + l2 I)^-1 A^H b
            gram = ah @ a + lam * np.eye(n, dtype=a.dtype)
            return _cholesky_solve(gram, ah @ b).astype(a.dtype, copy=False)
        gram = a @ ah + lam * np.eye(m, dtype=a.dtype)  # A^H (A A^H + l2 I)^-1 b
        return (ah @ _cholesky_solve(gram, b)).astype(a.dtype, copy=False)

    return _linalg_errors(node, "Input matrix is not invertible or not well conditioned "
                                "(Cholesky of the regularized Gramian failed).", lstsq)


def _cholesky_solve(gram, rhs):
    lower = np.linalg.cholesky(gram)
    y = np.linalg.solve(lower, rhs)
    return np.linalg.solve(_adjoint(np, lower), y)


@kernel("Qr")
def _qr(node, ctx):
    xp = ctx.xp
    mode = "complete" if bool(node.attr["full_matrices"]) else "reduced"

    def qr(x):
        if x.ndim < 2:
            raise _bad(node, f"input must have rank >= 2, got {x.ndim}")
        q, r = xp.linalg.qr(x, mode=mode)
        return q.astype(x.dtype, copy=False), r.astype(x.dtype, copy=False)

    return qr


def _real_dtype(dtype):
    return np.finfo(dtype).dtype  # complex64 -> float32; real dtypes are their own


@kernel("Svd")
def _svd(node, ctx):
    xp = ctx.xp
    full = bool(node.attr["full_matrices"])
    compute_uv = bool(node.attr["compute_uv"])

    def svd(x):
        if x.ndim < 2:
            raise _bad(node, f"input must have rank >= 2, got {x.ndim}")
        real = _real_dtype(x.dtype)
        if not compute_uv:
            s = xp.linalg.svd(x, compute_uv=False)
            empty = xp.zeros((0,), dtype=x.dtype)
            return s.astype(real, copy=False), empty, empty.copy()
        u, s, vh = xp.linalg.svd(x, full_matrices=full)
        return (s.astype(real, copy=False), u.astype(x.dtype, copy=False),
                _adjoint(xp, vh).astype(x.dtype, copy=False))

    return _linalg_errors(node, "SVD did not converge.", svd)


@kernel("SelfAdjointEigV2")
def _eigh(node, ctx):
    xp = ctx.xp
    compute_v = bool(node.attr["compute_v"])

    def eigh(x):
        _check_square(node, x)
        real = _real_dtype(x.dtype)
        if not compute_v:  # the lower triangle is read, as TF's (Eigen's) solver does
            e = xp.linalg.eigvalsh(x, UPLO="L")
            return e.astype(real, copy=False), xp.zeros((0,), dtype=x.dtype)
        e, v = xp.linalg.eigh(x, UPLO="L")
        return e.astype(real, copy=False), v.astype(x.dtype, copy=False)

    return _linalg_errors(node, "Self-adjoint eigen decomposition was not successful.", eigh)


@kernel("Lu")
def _lu(node, ctx):
    """Doolittle elimination with partial pivoting (the largest magnitude, first on ties, as
    LAPACK's getrf), one column at a time over the whole batch."""
    xp = ctx.xp
    idx_dtype = node.attr["output_idx_type"]._np

    def lu(x):
        _check_square(node, x)
        n = x.shape[-1]
        batch = x.shape[:-2]
        a = x.reshape((-1, n, n)).copy()
        perm = xp.broadcast_to(xp.arange(n), (a.shape[0], n)).copy()
        rows = xp.arange(a.shape[0])
        for k in range(n):
            pivot = k + xp.argmax(xp.abs(a[:, k:, k]), axis=1)
            a_k, a_p = a[rows, k].copy(), a[rows, pivot].copy()
            a[rows, k], a[rows, pivot] = a_p, a_k
            p_k, p_p = perm[rows, k].copy(), perm[rows, pivot].copy()
            perm[rows, k], perm[rows, pivot] = p_p, p_k
            diag = a[:, k, k]
            safe = xp.where(diag == 0, xp.ones((), dtype=a.dtype), diag)
            a[:, k + 1:, k] = a[:, k + 1:, k] / safe[:, None]
            a[:, k + 1:, k + 1:] -= a[:, k + 1:, k, None] * a[:, k, None, k + 1:]
        return a.reshape(x.shape), perm.astype(idx_dtype).reshape(batch + (n,))

    return lu


@kernel("MatrixSquareRoot", host_only=True)
def _sqrtm(node, ctx):
    """The principal square root through the eigendecomposition ``V sqrt(D) V^-1`` (for the
    diagonalizable matrices the principal root is defined on); a real matrix whose root is
    not real gives NaNs, as TF's real Schur method does."""

    def sqrtm(x):
        _check_square(node, x)
        if x.shape[-1] == 0:
            return x.copy()
        w, v = np.linalg.eig(x)
        root = (v * np.sqrt(w.astype(np.complex128))[..., None, :]) @ np.linalg.inv(v)
        if np.iscomplexobj(x):
            return root.astype(x.dtype)
        scale = np.maximum(np.abs(root).max(axis=(-2, -1), keepdims=True), 1.0)
        imaginary = np.abs(root.imag).max(axis=(-2, -1), keepdims=True) > \
            1e3 * np.finfo(x.dtype).eps * scale
        return np.where(imaginary, np.nan, root.real).astype(x.dtype)

    return _linalg_errors(node, "Matrix square root was not successful.", sqrtm)


# --- matrix logarithm ---------------------------------------------------------------------
# Gauss-Legendre nodes and weights on [0, 1]: log(I + X) = sum_j w_j X (I + t_j X)^-1 is the
# [8/8] Pade approximant, accurate to double rounding for |X| < 0.25 (Higham's ``logm_pf``).
_GL_NODES, _GL_WEIGHTS = np.polynomial.legendre.leggauss(8)
_GL_NODES, _GL_WEIGHTS = (_GL_NODES + 1) / 2, _GL_WEIGHTS / 2


def _sqrtm_db(a):
    """Principal square roots by the (scaled-free) Denman-Beavers iteration, which needs no
    eigendecomposition and so handles matrices that are not diagonalizable."""
    y, z = a, np.broadcast_to(np.eye(a.shape[-1], dtype=a.dtype), a.shape)
    for _ in range(100):
        y_next = (y + np.linalg.inv(z)) / 2
        z = (z + np.linalg.inv(y)) / 2
        done = np.max(np.abs(y_next - y)) <= 1e-15 * max(np.max(np.abs(y_next)), 1.0)
        y = y_next
        if done:
            break
    return y


def _logm_one(a):
    """The principal logarithm of one matrix: ``V log(D) V^-1`` when the eigenvectors are
    well conditioned (any eigenvalues, negative ones included); otherwise, for matrices that
    are not (nearly) diagonalizable, inverse scaling and squaring."""
    w, v = np.linalg.eig(a)
    if np.all(w != 0) and np.linalg.cond(v) < 1e6:
        return (v * np.log(w)[None, :]) @ np.linalg.inv(v)
    return _logm_scaling_squaring(a)


def _logm_scaling_squaring(a):
    """Take square roots until ``A^(1/2^k)`` is near ``I``, take the Pade logarithm there,
    scale back by ``2^k`` (needs no eigenvalue on the closed negative real axis)."""
    n = a.shape[-1]
    eye = np.eye(n, dtype=a.dtype)
    k = 0
    while np.max(np.abs(a - eye).sum(axis=-2)) > 0.25 and k < 60:
        a = _sqrtm_db(a)
        k += 1
    x = a - eye
    out = np.zeros_like(a)
    for t, w in zip(_GL_NODES, _GL_WEIGHTS):
        out = out + w * np.linalg.solve(eye + t * x, x)
    return out * 2.0 ** k


@kernel("MatrixLogarithm", host_only=True)
def _logm(node, ctx):
    def logm(x):
        _check_square(node, x)
        if x.shape[-1] == 0 or x.size == 0:
            return x.copy()
        flat = x.reshape((-1,) + x.shape[-2:]).astype(np.complex128)
        out = np.stack([_logm_one(m) for m in flat])
        return out.reshape(x.shape).astype(x.dtype)

    return _linalg_errors(node, "Matrix logarithm was not successful.", logm)
