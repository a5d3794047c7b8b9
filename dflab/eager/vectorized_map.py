"""``tf.vectorized_map``: a function applied to each slice of its input, the results stacked.

TF vectorizes the function's ops (``pfor``); dflab runs it as ``map_fn`` — one slice per
iteration of a ``while_loop``, the same values. ``map_fn`` needs the structure and dtypes of
the function's result before the loop is built: the function is traced once on one slice's
placeholders in a throwaway function graph (it captures what it reads from outside, and none
of its ops joins the caller's graph, so a stateful op there never runs).
"""

from __future__ import annotations

from dflab.eager.function import FuncGraph
from dflab.framework import errors, nest
from dflab.framework import ops as _ops
from dflab.ops.functional_ops import map_fn


def vectorized_map(fn, elems, fallback_to_while_loop=True, warn=True):
    """``fn`` over the slices of ``elems`` (a tensor or a nest of them) along dimension 0,
    stacked (TF's ``tf.vectorized_map``; see the module docstring)."""
    flat = [_ops.convert_to_tensor(e) for e in nest.flatten(elems)]
    if not flat:
        raise ValueError("vectorized_map needs at least one tensor in elems")
    sizes = {e.shape.as_list()[0] for e in flat if e.shape.ndims and e.shape[0] is not None
             and e.shape.as_list()[0] is not None}
    if len(sizes) > 1:
        raise errors.InvalidArgumentError(
            None, None, f"vectorized_map's elems must have the same size in dimension 0, got "
            f"sizes {sorted(sizes)}")
    return map_fn(fn, elems, dtype=_result_dtypes(fn, elems, flat))


def _result_dtypes(fn, elems, flat):
    """The dtypes of ``fn``'s result, in its structure, from one trace on a slice's
    placeholders."""
    probe = FuncGraph("vectorized_map_probe", _ops.get_default_graph())
    with probe.as_default():
        slices = [probe.placeholder(e.dtype.base_dtype, e.shape[1:], f"slice{i}")
                  for i, e in enumerate(flat)]
        result = fn(nest.pack_sequence_as(elems, slices))
        return nest.map_structure(lambda t: _ops.convert_to_tensor(t).dtype.base_dtype, result)
