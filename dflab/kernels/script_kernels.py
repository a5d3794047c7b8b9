"""Kernels of ``PyFunc``/``PyFuncStateless``/``EagerPyFunc`` (``tf.py_func``,
``tf.numpy_function``, ``tf.py_function``): call a
Python function of the user's process on the inputs' NumPy values.

The function is never part of the graph's data: the op carries a ``token`` attribute, and the
function lives in the graph's table under that token, found through this process's registry
(``dflab.ops.script_ops.registered_function``).
A graph loaded from a file therefore names functions it cannot call, and running it fails
with ``NotFoundError`` instead of executing anything read from the file.

Results must have the declared dtypes (``Tout``): NumPy arrays of another dtype are an error,
as in TF; Python scalars and lists are converted to the declared dtype. Exceptions raised by
the function map to TF's error classes the way TF's ``py_func`` kernel maps them.
"""

from __future__ import annotations

import traceback

import numpy as np

from dflab.framework import dtypes as _dt
from dflab.framework import errors
from dflab.kernels.registry import kernel
from dflab.ops.script_ops import registered_function

# TF's py_func.cc: which Python exceptions become which error class (others: UnknownError).
_ERROR_OF = ((StopIteration, errors.OutOfRangeError), (ValueError, errors.InvalidArgumentError),
             (TypeError, errors.InvalidArgumentError),
             (MemoryError, errors.ResourceExhaustedError),
             (NotImplementedError, errors.UnimplementedError))


def _function_of(node):
    token = node.attr["token"]
    fn = registered_function(token)
    if fn is None:
        raise errors.NotFoundError(
            None, node, f"{node.op} {node.name}: no Python function is registered for token "
            f"{token!r} in this process (the graph was loaded from a file, or built in "
            "another process): a function is never read from a graph")
    return fn


def _where_it_failed(e: BaseException) -> str:
    frames = traceback.extract_tb(e.__traceback__)
    last = frames[-1] if frames else None
    return f" (at {last.filename}:{last.lineno})" if last else ""


def _encode(s):
    return s.encode() if isinstance(s, str) else s


def _check_all_text(arr: np.ndarray, index: int, node) -> None:
    # TF refuses numbers, booleans and None for a string result instead of printing them.
    bad = next((v for v in arr.flat if not isinstance(v, (str, bytes))), _NOTHING)
    if bad is not _NOTHING:
        raise errors.InvalidArgumentError(
            None, node, f"{index}-th value returned by {node.attr['token']} is "
            f"{type(bad).__name__}, but expects string")


_NOTHING = object()

# NumPy's own floating-point error handling, for the user's function: the executor runs
# kernels with every error ignored (TF's kernels are silent), which is no reason to hide what
# the user's NumPy code does.
_NUMPY_FP_DEFAULTS = {"divide": "warn", "over": "warn", "under": "ignore", "invalid": "warn"}


def _as_output(value, dtype, index: int, node):
    if dtype is _dt.string:  # any text or bytes, as bytes objects
        arr = np.asarray(value, dtype=object)
        _check_all_text(arr, index, node)
        return np.vectorize(_encode, otypes=[object])(arr) if arr.size else arr
    if isinstance(value, (np.ndarray, np.generic)):
        if value.dtype != np.dtype(dtype._np):
            raise errors.InvalidArgumentError(
                None, node, f"{index}-th value returned by {node.attr['token']} is "
                f"{_dt.as_dtype(value.dtype).name}, but expects {dtype.name}")
        return np.asarray(value)
    try:
        return np.asarray(value, dtype=dtype._np)
    except (TypeError, ValueError) as e:
        raise errors.InvalidArgumentError(
            None, node, f"{index}-th value returned by {node.attr['token']} cannot be "
            f"converted to {dtype.name}: {e}") from None


def _py_func(node, ctx):
    fn = _function_of(node)
    tout = list(node.attr["Tout"])

    def call(*inputs):
        try:
            with np.errstate(**_NUMPY_FP_DEFAULTS):  # the user's code, not a kernel: warned
                result = fn(*inputs)
        except Exception as e:  # noqa: BLE001 - every failure of user code becomes an OpError
            cls = next((c for t, c in _ERROR_OF if isinstance(e, t)), errors.UnknownError)
            raise cls(None, node, f"{type(e).__name__}: {e}{_where_it_failed(e)}") from e
        if not tout:
            return ()
        values = list(result) if isinstance(result, (list, tuple)) else [result]
        if len(values) != len(tout):
            raise errors.InvalidArgumentError(
                None, node, f"{node.attr['token']} returned {len(values)} values, but "
                f"expects {len(tout)}")
        outs = tuple(_as_output(v, dt, i, node) for i, (v, dt) in enumerate(zip(values, tout)))
        return outs[0] if len(outs) == 1 else outs

    return call


kernel("PyFunc", host_only=True)(_py_func)
kernel("PyFuncStateless", host_only=True)(_py_func)
kernel("EagerPyFunc", host_only=True)(_py_func)
