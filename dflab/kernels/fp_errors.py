"""NumPy's floating-point error handling around kernels.

TF's kernels make inf and NaN silently; NumPy warns at a division by zero, an overflowing add
or a product of inf and 0. Every driver of the executor (and every intra-op helper thread)
runs kernels with floating-point errors ignored (``ignore_fp_errors``), and so do the eager
paths for a kernel that computes in floating point; kernels registered with ``quiet_fp``
are wrapped in ``quiet`` (they may also run outside both). The user's own NumPy code (a
``py_func``'s function) keeps NumPy's handling.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np


def quiet(fn: Callable) -> Callable:
    """``fn`` with NumPy's floating-point warnings silenced: TF returns inf/NaN silently, so
    kernels of ops that can legitimately produce them (division, log, sqrt…) use this."""
    if _IGNORE_ALL is not None:
        def quiet_fn(*args, **kwargs):  # (``out=`` from split_elementwise)
            token = _set_fp_errors(_IGNORE_ALL)
            try:
                return fn(*args, **kwargs)
            finally:
                _reset_fp_errors(token)
    elif _ERRSTATE_DECORATES:
        quiet_fn = np.errstate(all="ignore")(fn)
    else:

        def quiet_fn(*args, **kwargs):
            with np.errstate(all="ignore"):
                return fn(*args, **kwargs)

    quiet_fn.__name__ = getattr(fn, "__name__", "quiet")
    quiet_fn.quiet_fp = True  # (``quiet`` of it again would only cost)
    return quiet_fn


def _fp_error_state():
    """NumPy 2's context variable of floating-point error handling and its value with every
    error ignored (bufsize and error call as NumPy starts with), made once: what
    ``np.errstate(all="ignore")`` sets, without building the value and its own object at
    every call (0.2 against 0.5 us as a decorator, 1.2 us as a ``with`` block; a small op's
    kernel costs about 1 us). ``None`` where NumPy keeps that state otherwise (NumPy 1)."""
    try:  # NumPy's private names: any change there falls back to ``np.errstate``
        from numpy._core.umath import _extobj_contextvar, _make_extobj

        return _make_extobj(all="ignore"), _extobj_contextvar.set, _extobj_contextvar.reset
    except (ImportError, AttributeError, TypeError, ValueError):
        return None, None, None


_IGNORE_ALL, _set_fp_errors, _reset_fp_errors = _fp_error_state()

# NumPy 2 keeps the error state in a context variable, and ``errstate`` used as a decorator
# sets it per call (thread-safe); NumPy 1's decorator stores the state on the shared instance.
_ERRSTATE_DECORATES = np.lib.NumpyVersion(np.__version__) >= "2.0.0"


def _seterr_ignore():
    return np.seterr(all="ignore")


def _seterr_restore(token) -> None:
    np.seterr(**token)


# ``ignore_fp_errors()`` ignores NumPy's floating-point errors on this thread until
# ``restore_fp_errors(token)`` with the token it returned: how the executor's drivers and the
# eager fast paths run kernels. On NumPy 2 both are C calls on NumPy's context variable (0.1 us
# together, no Python frame: an eager op's whole cost is about 1 us); NumPy 1 keeps the state
# per thread behind ``np.seterr``.
if _IGNORE_ALL is not None:
    ignore_fp_errors = functools.partial(_set_fp_errors, _IGNORE_ALL)
    restore_fp_errors = _reset_fp_errors
else:
    ignore_fp_errors, restore_fp_errors = _seterr_ignore, _seterr_restore


# Ops whose kernels do no floating-point arithmetic that NumPy checks on real values (they
# move, compare or select values, or apply functions NumPy computes without a floating-point
# error: ``tanh``, ``maximum``, ``floor``): an eager op of these types on real (not complex)
# values skips ``ignore_fp_errors`` (0.1 us of a 1 us op). A type missing here costs that
# 0.1 us, nothing else; one listed wrongly would warn (tests/kernels/test_fp_errors.py runs
# each on inf, NaN, zeros and extremes, and checks that its case ran that op type).
NO_FP_ERRORS = frozenset({
    "Identity", "StopGradient", "Reshape", "Transpose",
    "ExpandDims", "Squeeze", "ConcatV2", "Pack", "Unpack", "Split", "SplitV", "Slice",
    "StridedSlice", "GatherV2", "GatherNd", "Tile", "Pad", "Fill", "ZerosLike", "OnesLike",
    "ReverseV2", "BroadcastTo", "Select", "SelectV2",
    "ReadVariableOp", "AssignVariableOp", "Neg", "Abs", "Relu", "Relu6", "Tanh", "Sign",
    "Floor", "Ceil", "Round", "Rint", "Maximum", "Minimum", "Equal", "NotEqual",
    "Less", "LessEqual", "Greater", "GreaterEqual", "ArgMax", "ArgMin", "Max", "Min", "IsNan",
    "IsInf", "IsFinite", "PadV2", "MirrorPad", "OneHot",
})
# (Not the random draws: a float16 sample is a float64 draw cast down, which may underflow.)
