"""Contractions: ``Einsum`` and ``tensordot`` (which builds an ``Einsum``).

Part of the math family (``MatMul`` stays in ``math_ops``, next to the ``@`` overload): schema,
gradient and builder side by side; kernels in ``dflab.kernels.math_kernels``.
``math_ops`` re-exports the builders (it stays the one module to import math ops from) and
imports this module only at its end, after defining what this module imports from it.
"""

from __future__ import annotations

import builtins as _py
import string as _string

import numpy as np

from dflab.framework import ops as _ops
from dflab.framework.registry import RegisterGradient, register_op
from dflab.framework.tensor_shape import TensorShape
from dflab.ops import array_ops
from dflab.ops.math_ops import _check_dtype, _is_numeric, _pair
from dflab.ops.op_util import axis_list, check_same_dtype


# --- contractions: einsum and tensordot ---------------------------------------------------------
def _parse_einsum(equation, ranks):
    """Explicit subscripts for an equation: ('ij', 'jk'), 'ik'. Ellipses need known ranks
    and are spelled out with fresh upper-case letters, right-aligned as NumPy broadcasts them."""
    eq = equation.replace(" ", "")
    lhs, arrow, out = eq.partition("->")
    ins = lhs.split(",")
    if len(ins) != len(ranks):
        raise ValueError(f"einsum equation {equation!r} names {len(ins)} inputs, got "
                         f"{len(ranks)}")
    used = set(eq) - set(".,->")
    for c in used:
        if c not in _string.ascii_letters:
            raise ValueError(f"invalid character {c!r} in einsum equation {equation!r}")
    n_ell = 0
    if "..." in eq:
        for s, r in zip(ins, ranks):
            if "..." in s:
                if r is None:
                    raise ValueError("einsum with '...' needs inputs of known rank")
                n_ell = _py.max(n_ell, r - (len(s) - 3))
    fresh = [c for c in _string.ascii_uppercase if c not in used][:n_ell]
    ell = "".join(fresh)

    def expand(s, r):
        if "..." not in s:
            return s
        k = r - (len(s) - 3)
        return s.replace("...", ell[n_ell - k:] if k else "")

    ins = [expand(s, r) for s, r in zip(ins, ranks)]
    if arrow:
        out = out.replace("...", ell)
    else:  # implicit output: broadcast dims, then the letters seen once, sorted
        counts = {}
        for s in ins:
            for c in s:
                counts[c] = counts.get(c, 0) + 1
        out = ell + "".join(sorted(c for c, k in counts.items() if k == 1 and c not in ell))
    for s, r in zip(ins, ranks):
        if r is not None and len(s) != r:
            raise ValueError(f"einsum subscripts {s!r} do not match an input of rank {r}")
    for c in out:
        if not any(c in s for s in ins):
            raise ValueError(f"einsum output letter {c!r} appears in no input")
    if len(set(out)) != len(out):
        raise ValueError(f"einsum output subscripts {out!r} repeat a letter")
    return ins, out


def _einsum_infer(op):
    dt = check_same_dtype(op)
    _check_dtype(op, dt, _is_numeric)
    ins, out = _parse_einsum(op.get_attr("equation"), [t.shape.ndims for t in op.inputs])
    sizes = {}
    for s, t in zip(ins, op.inputs):
        if t.shape.ndims is None:
            continue
        for c, d in zip(s, t.shape.as_list()):
            prev = sizes.get(c)
            if d is None or d == 1:
                sizes.setdefault(c, d)
            elif prev is None or prev == 1:
                sizes[c] = d
            elif prev != d:
                raise ValueError(f"einsum dimension {c!r} has sizes {prev} and {d}")
    if any(t.shape.ndims is None for t in op.inputs):
        return [(dt, TensorShape(None))]
    return [(dt, TensorShape([sizes.get(c) for c in out]))]


register_op("Einsum", _einsum_infer, expensive=True)


@RegisterGradient("Einsum")
def _einsum_grad(op, grad):
    ins, out = _parse_einsum(op.get_attr("equation"), [t.shape.ndims for t in op.inputs])
    used = set("".join(ins) + out)
    fresh = iter(c for c in _string.ascii_letters if c not in used)
    grads = []
    for i, (s, x) in enumerate(zip(ins, op.inputs)):
        if len(set(s)) != len(s):
            raise ValueError(f"einsum gradient for repeated subscripts {s!r} is not supported")
        # A dim of size 1 in x may have been broadcast against the other inputs: give it its
        # own letter so the gradient sums over the broadcast (a no-op if it was not).
        dims = x.shape.as_tuple()
        sx = s if dims is None else "".join(next(fresh) if d == 1 else c
                                            for c, d in zip(s, dims))
        subs = [out] + [ins[j] for j in _py.range(len(ins)) if j != i]
        operands = [grad] + [op.inputs[j] for j in _py.range(len(ins)) if j != i]
        # Letters of x seen nowhere else were summed away, and dims of x may have been
        # broadcast against size-1 dims of other inputs: both make the gradient a broadcast,
        # which a ones operand shaped like x provides.
        if any(c not in "".join(subs) for c in sx) or _size_one_elsewhere(sx, subs[1:],
                                                                         operands[1:]):
            subs.append(sx)
            operands.append(array_ops.ones_like(x))
        grads.append(einsum(",".join(subs) + "->" + sx, *operands))
    return grads


def _size_one_elsewhere(sx, subs, tensors):
    for sub, t in zip(subs, tensors):
        dims = t.shape.as_tuple()
        for k, c in enumerate(sub):
            if c in sx and (dims is None or dims[k] in (1, None)):
                return True
    return False


def einsum(equation, *inputs, **kwargs):
    """Einstein summation (``np.einsum`` subscripts, ``...`` allowed when ranks are known)."""
    name = kwargs.pop("name", None)
    if kwargs:
        raise TypeError(f"Unknown keyword arguments for einsum: {sorted(kwargs)}")
    if not inputs:
        raise ValueError("einsum needs at least one input")
    tensors = [_ops.convert_to_tensor(t) for t in inputs if _ops.is_tensor_like(t)]
    dt = tensors[0].dtype.base_dtype if tensors else None
    inputs = [_ops.convert_to_tensor(t, dtype=dt) for t in inputs]
    ins, out = _parse_einsum(equation, [t.shape.ndims for t in inputs])
    explicit = ",".join(ins) + "->" + out
    return _ops.apply_op("Einsum", inputs, {"equation": explicit, "N": len(inputs)},
                         name).outputs[0]


def tensordot(a, b, axes, name=None):
    """Contract ``axes`` of ``a`` with ``axes`` of ``b`` (an int N: a's last N with b's first
    N; or a pair of axis lists). Built as an ``Einsum``; needs inputs of known rank."""
    a, b = _pair(a, b)
    ra, rb = a.shape.ndims, b.shape.ndims
    if ra is None or rb is None:
        raise ValueError("tensordot needs inputs of known rank")
    if isinstance(axes, (int, np.integer)):
        n = int(axes)
        if n < 0 or n > ra or n > rb:
            raise ValueError(f"'axes' must be in [0, min(rank)], got {n}")
        ax_a, ax_b = list(_py.range(ra - n, ra)), list(_py.range(n))
    else:
        if len(axes) != 2:
            raise ValueError("'axes' must be an int or a pair of axis lists")
        ax_a, ax_b = ([int(v) for v in np.ravel(x)] for x in axes)
        if len(ax_a) != len(ax_b):
            raise ValueError(f"Different number of contraction axes: {ax_a} vs {ax_b}")
        ax_a = [axis_list(v, ra)[0] for v in ax_a]
        ax_b = [axis_list(v, rb)[0] for v in ax_b]
    letters = iter(_string.ascii_letters)
    sa = [next(letters) for _ in _py.range(ra)]
    sb = [next(letters) for _ in _py.range(rb)]
    for i, j in zip(ax_a, ax_b):
        sb[j] = sa[i]
    out = [c for k, c in enumerate(sa) if k not in ax_a] + \
        [c for k, c in enumerate(sb) if k not in ax_b]
    eq = "".join(sa) + "," + "".join(sb) + "->" + "".join(out)
    return einsum(eq, a, b, name=name or "Tensordot")


__all__ = ["einsum", "tensordot"]
