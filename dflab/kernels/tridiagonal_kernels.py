"""Kernels of ``dflab.ops.tridiagonal_ops``, written against the device's ``xp``.

``TridiagonalSolve`` runs TF's algorithms row by row, every matrix of the batch (and every
right-hand side) at once: Gaussian elimination with partial pivoting (LAPACK's ``gtsv``
scheme, which TF's CPU kernel follows) or, without pivoting, the Thomas algorithm. A matrix
whose pivot is zero gives NaNs and a warning, as in TF, not an error.
"""

from __future__ import annotations

import logging

from dflab.framework import errors
from dflab.kernels.registry import kernel

_log = logging.getLogger("dflab")


def _bad(node, message):
    return errors.InvalidArgumentError(None, node, message)


@kernel("TridiagonalMatMul")
def _tridiagonal_matmul(node, ctx):
    xp = ctx.xp

    def run(superdiag, maindiag, subdiag, rhs):
        m = rhs.shape[-2]
        for what, d in (("superdiag", superdiag), ("maindiag", maindiag),
                        ("subdiag", subdiag)):
            if d.shape[-1] != m or d.shape[-2] != 1:
                raise _bad(node, f"Expected {what} to have shape [..., 1, {m}], got "
                                 f"{list(d.shape)}")
        # Column vectors of the diagonals scale the rows of rhs.
        sup, main, sub = (xp.swapaxes(d, -1, -2) for d in (superdiag, maindiag, subdiag))
        out = main * rhs
        if m > 1:
            out[..., :-1, :] += sup[..., :-1, :] * rhs[..., 1:, :]
            out[..., 1:, :] += sub[..., 1:, :] * rhs[..., :-1, :]
        return out

    return run


def _pivoting_solve(xp, sup, diag, sub, rhs):
    """Gaussian elimination with partial pivoting; ``sup, diag, sub``: ``[B, M]``,
    ``rhs``: ``[B, M, K]``. Returns (x, singular ``[B]``)."""
    b, n = diag.shape
    u0 = xp.zeros((b, n), dtype=diag.dtype)  # U's diagonal
    u1 = xp.zeros((b, n), dtype=diag.dtype)  # its first superdiagonal
    u2 = xp.zeros((b, n), dtype=diag.dtype)  # its second (from row swaps)
    x = rhs.copy()
    singular = xp.zeros(b, dtype=bool)
    u0[:, 0], u1[:, 0] = diag[:, 0], sup[:, 0]
    for i in range(n - 1):
        keep = xp.abs(u0[:, i]) >= xp.abs(sub[:, i + 1])
        singular |= keep & (u0[:, i] == 0)
        safe_u0 = xp.where(u0[:, i] == 0, 1, u0[:, i])
        safe_sub = xp.where(sub[:, i + 1] == 0, 1, sub[:, i + 1])
        # No interchange: eliminate row i + 1 with row i.
        f_keep = sub[:, i + 1] / safe_u0
        # Interchange rows i and i + 1 first.
        f_swap = u0[:, i] / safe_sub
        next_u0 = xp.where(keep, diag[:, i + 1] - f_keep * u1[:, i],
                           u1[:, i] - f_swap * diag[:, i + 1])
        row_i = xp.where(keep[:, None], x[:, i], rhs[:, i + 1])
        row_next = xp.where(keep[:, None], rhs[:, i + 1] - f_keep[:, None] * x[:, i],
                            x[:, i] - f_swap[:, None] * rhs[:, i + 1])
        new_u0_i = xp.where(keep, u0[:, i], sub[:, i + 1])
        new_u1_i = xp.where(keep, u1[:, i], diag[:, i + 1])
        if i != n - 2:
            u2[:, i] = xp.where(keep, 0, sup[:, i + 1])
            u1[:, i + 1] = xp.where(keep, sup[:, i + 1], -f_swap * sup[:, i + 1])
        u0[:, i], u1[:, i], u0[:, i + 1] = new_u0_i, new_u1_i, next_u0
        x[:, i], x[:, i + 1] = row_i, row_next
    singular |= u0[:, n - 1] == 0
    safe = xp.where(u0 == 0, 1, u0)
    x[:, n - 1] = x[:, n - 1] / safe[:, n - 1, None]
    if n > 1:
        x[:, n - 2] = (x[:, n - 2] - u1[:, n - 2, None] * x[:, n - 1]) / safe[:, n - 2, None]
    for i in range(n - 3, -1, -1):
        x[:, i] = (x[:, i] - u1[:, i, None] * x[:, i + 1] - u2[:, i, None] * x[:, i + 2]) \
            / safe[:, i, None]
    return x, singular


def _thomas_solve(xp, sup, diag, sub, rhs):
    """The Thomas algorithm (no pivoting); shapes as ``_pivoting_solve``'s."""
    b, n = diag.shape
    u = xp.zeros((b, n), dtype=diag.dtype)
    x = xp.zeros_like(rhs)
    singular = diag[:, 0] == 0
    denom = xp.where(singular, 1, diag[:, 0])
    u[:, 0] = sup[:, 0] / denom
    x[:, 0] = rhs[:, 0] / denom[:, None]
    for i in range(1, n):
        denom = diag[:, i] - sub[:, i] * u[:, i - 1]
        singular |= denom == 0
        denom = xp.where(denom == 0, 1, denom)
        u[:, i] = sup[:, i] / denom
        x[:, i] = (rhs[:, i] - sub[:, i, None] * x[:, i - 1]) / denom[:, None]
    for i in range(n - 2, -1, -1):
        x[:, i] = x[:, i] - u[:, i, None] * x[:, i + 1]
    return x, singular


@kernel("TridiagonalSolve")
def _tridiagonal_solve(node, ctx):
    xp = ctx.xp
    pivoting = node.attr.get("partial_pivoting", True)

    def run(diagonals, rhs):
        if diagonals.ndim < 2 or diagonals.shape[-2] != 3:
            raise _bad(node, f"Expected diagonals to have shape [..., 3, M], got "
                             f"{list(diagonals.shape)}")
        n = diagonals.shape[-1]
        if rhs.ndim != diagonals.ndim or rhs.shape[-2] != n or \
                rhs.shape[:-2] != diagonals.shape[:-2]:
            raise _bad(node, f"Expected rhs of shape {list(diagonals.shape[:-2]) + [n]} + "
                             f"[K], got {list(rhs.shape)}")
        if n == 0 or rhs.size == 0:
            return xp.zeros(rhs.shape, dtype=rhs.dtype)
        batch = diagonals.shape[:-2]
        d = diagonals.reshape((-1, 3, n))
        r = rhs.reshape((-1, n, rhs.shape[-1]))
        solve = _pivoting_solve if pivoting else _thomas_solve
        x, singular = solve(xp, d[:, 0], d[:, 1], d[:, 2], r)
        if bool(singular.any()):
            _log.warning("The matrix is not invertible." if pivoting else
                         "The matrix is either not invertible, or requires pivoting. Try "
                         "setting partial_pivoting = True.")
            x[singular] = xp.nan
        return x.reshape(batch + x.shape[1:])

    return run
