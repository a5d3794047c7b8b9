"""``tf.vectorized_map``: a function applied to each slice of its input, the results stacked.

TF vectorizes the function's ops (``pfor``); dflab runs it as ``map_fn`` — one slice per
iteration of a ``while_loop``, the same values. ``map_fn`` needs the structure and dtypes of
the function's result before the loop is built, so the function is traced once, as TF's
``pfor`` traces it, into a concrete function of one slice; each iteration calls that function
(a call op in a graph), so the Python function runs once, whatever the number of slices.
"""

from __future__ import annotations

from dflab.eager.function import Function, TensorSpec
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
    specs = nest.pack_sequence_as(
        elems, [TensorSpec(e.shape[1:], e.dtype.base_dtype) for e in flat])
    per_slice = Function(fn).get_concrete_function(specs)
    dtypes = nest.map_structure(lambda t: t.dtype.base_dtype, per_slice.structured_outputs)
    return map_fn(per_slice, nest.pack_sequence_as(elems, flat), dtype=dtypes)
