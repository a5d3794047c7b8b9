"""Higher-order functions over the first dimension of tensors: ``map_fn``, ``scan``, ``foldl``,
``foldr`` — TF 1.x's, built the same way: the inputs are unstacked into ``TensorArray``s, a
``while_loop`` reads element i in iteration i, and results are written into output
``TensorArray``s that are stacked after the loop. The graph therefore has one loop whatever the
length, and differentiating it goes through the loop's gradient and the TensorArray gradients.

``elems`` (and ``initializer``, and the value ``fn`` returns) may be nested structures of
tensors; each leaf is sliced along its first dimension, which must agree between leaves.
"""

from __future__ import annotations

from dflab.framework import nest
from dflab.framework import ops as _ops
from dflab.framework.tensor_shape import Dimension, TensorShape
from dflab.ops import array_ops, control_flow_ops
from dflab.ops.tensor_array_ops import TensorArray


def _leading_dim(elems_flat):
    """The number of elements: static when known, else a tensor."""
    n = elems_flat[0].shape.with_rank_at_least(1).as_list()[0]
    return n if n is not None else array_ops.shape(elems_flat[0])[0]


def _static_leading_dim(elems_flat):
    n = Dimension(elems_flat[0].shape.with_rank_at_least(1).as_list()[0])
    for e in elems_flat[1:]:
        n = n.merge_with(Dimension(e.shape.with_rank_at_least(1).as_list()[0]))
    return n


def _set_leading_dim(results, n_static):
    for r in results:
        rest = r.shape[1:] if r.shape.ndims is not None else None
        if rest is not None:
            r.set_shape(TensorShape([n_static.value]).concatenate(rest))


def _unstacked(elems_flat, n, element_shapes=False):
    tas = [TensorArray(e.dtype, size=n, dynamic_size=False, infer_shape=True,
                       element_shape=e.shape[1:] if element_shapes and e.shape.ndims else None)
           for e in elems_flat]
    return [ta.unstack(e) for ta, e in zip(tas, elems_flat)]


def _flatteners(structure_is_seq, structure):
    def flatten(x):
        return nest.flatten(x) if structure_is_seq else [x]

    def pack(x):
        return nest.pack_sequence_as(structure, x) if structure_is_seq else x[0]

    return flatten, pack


def map_fn(fn, elems, dtype=None, parallel_iterations=None, back_prop=True, swap_memory=False,
           infer_shape=True, name=None):
    """``fn`` applied to each slice ``elems[i]`` (unpacked along dim 0), results stacked.

    ``dtype`` gives the structure and dtypes of ``fn``'s output when they differ from
    ``elems``'s.
    """
    if not callable(fn):
        raise TypeError("fn must be callable.")
    if not parallel_iterations:
        parallel_iterations = 10
    in_seq = nest.is_sequence(elems)
    in_flatten, in_pack = _flatteners(in_seq, elems)
    if dtype is None:
        out_flatten, out_pack = in_flatten, in_pack
    else:
        out_flatten, out_pack = _flatteners(nest.is_sequence(dtype), dtype)
    elems_flat = in_flatten(elems)
    with _ops.name_scope(name, "map", [e for e in elems_flat if isinstance(e, _ops.Tensor)]):
        elems_flat = [_ops.convert_to_tensor(e, name="elem") for e in elems_flat]
        dtype = dtype or in_pack([e.dtype for e in elems_flat])
        dtype_flat = out_flatten(dtype)
        n = _leading_dim(elems_flat)
        elems_ta = _unstacked(elems_flat, n)
        i = array_ops.constant(0)
        accs_ta = [TensorArray(dt, size=n, dynamic_size=False, infer_shape=infer_shape)
                   for dt in dtype_flat]

        def compute(i, tas):
            packed = in_pack([ta.read(i) for ta in elems_ta])
            out = fn(packed)
            nest.assert_same_structure(dtype or elems, out, check_types=False)
            flat = out_flatten(out)
            tas = [ta.write(i, v) for ta, v in zip(tas, flat)]
            return (i + 1, tas)

        _, r_a = control_flow_ops.while_loop(
            lambda i, _: i < n, compute, (i, accs_ta), parallel_iterations=parallel_iterations,
            back_prop=back_prop, swap_memory=swap_memory, maximum_iterations=n)
        results = [r.stack() for r in r_a]
        _set_leading_dim(results, _static_leading_dim(elems_flat))
        return out_pack(results)


def scan(fn, elems, initializer=None, parallel_iterations=10, back_prop=True,
         swap_memory=False, infer_shape=True, reverse=False, name=None):
    """The successive accumulator values of ``a = fn(a, elems[i])`` (stacked).

    Without ``initializer`` the first element (the last with ``reverse``) starts the
    accumulation and is itself the first output.
    """
    if not callable(fn):
        raise TypeError("fn must be callable.")
    in_seq = nest.is_sequence(elems)
    in_flatten, in_pack = _flatteners(in_seq, elems)
    if initializer is None:
        out_flatten, out_pack = in_flatten, in_pack
    else:
        out_flatten, out_pack = _flatteners(nest.is_sequence(initializer), initializer)
    elems_flat = in_flatten(elems)
    with _ops.name_scope(name, "scan", [e for e in elems_flat if isinstance(e, _ops.Tensor)]):
        elems_flat = [_ops.convert_to_tensor(e, name="elem") for e in elems_flat]
        n = _leading_dim(elems_flat)
        elems_ta = _unstacked(elems_flat, n, element_shapes=True)
        if initializer is None:
            a_flat = [ta.read(n - 1 if reverse else 0) for ta in elems_ta]
            start = 1
        else:
            a_flat = [_ops.convert_to_tensor(v) for v in out_flatten(initializer)]
            start = 0
        accs_ta = [TensorArray(a.dtype, size=n, dynamic_size=False, infer_shape=infer_shape,
                               element_shape=a.shape if infer_shape else None)
                   for a in a_flat]
        if initializer is None:
            accs_ta = [ta.write(n - 1 if reverse else 0, a) for ta, a in zip(accs_ta, a_flat)]

        def compute(i, a_flat, tas):
            packed_elems = in_pack([ta.read(i) for ta in elems_ta])
            a_out = fn(out_pack(a_flat), packed_elems)
            nest.assert_same_structure(elems if initializer is None else initializer, a_out,
                                       check_types=False)
            flat_out = out_flatten(a_out)
            tas = [ta.write(i, v) for ta, v in zip(tas, flat_out)]
            return (i - 1 if reverse else i + 1, flat_out, tas)

        if reverse:
            initial_i = n - 1 - start

            def condition(i, _1, _2):
                return i >= 0
        else:
            initial_i = start

            def condition(i, _1, _2):
                return i < n

        _, _, r_a = control_flow_ops.while_loop(
            condition, compute, (initial_i, a_flat, accs_ta),
            parallel_iterations=parallel_iterations, back_prop=back_prop,
            swap_memory=swap_memory, maximum_iterations=n)
        results = [r.stack() for r in r_a]
        _set_leading_dim(results, _static_leading_dim(elems_flat))
        return out_pack(results)


def _fold(fn, elems, initializer, parallel_iterations, back_prop, swap_memory, name, default,
          reverse):
    if not callable(fn):
        raise TypeError("fn must be callable.")
    with _ops.name_scope(name, default, [e for e in nest.flatten(elems)
                                         if isinstance(e, _ops.Tensor)]):
        elems_flat = [_ops.convert_to_tensor(e, name="elem") for e in nest.flatten(elems)]
        n = _leading_dim(elems_flat)
        elems_ta = nest.pack_sequence_as(elems, _unstacked(elems_flat, n)) \
            if nest.is_sequence(elems) else _unstacked(elems_flat, n)[0]

        def read(i):
            return nest.map_structure(lambda ta: ta.read(i), elems_ta)

        if reverse:
            if initializer is None:
                i = n - 1
                a = read(i)
            else:
                i = n
                a = initializer

            def compute(i, a):
                i -= 1
                return [i, fn(a, read(i))]

            def condition(i, a):
                return i > 0
        else:
            if initializer is None:
                a = read(0)
                i = array_ops.constant(1)
            else:
                a = initializer
                i = array_ops.constant(0)

            def compute(i, a):
                return [i + 1, fn(a, read(i))]

            def condition(i, a):
                return i < n

        _, r_a = control_flow_ops.while_loop(
            condition, compute, [i, a], parallel_iterations=parallel_iterations,
            back_prop=back_prop, swap_memory=swap_memory, maximum_iterations=n)
        return r_a


def foldl(fn, elems, initializer=None, parallel_iterations=10, back_prop=True,
          swap_memory=False, name=None):
    """``fn(...fn(fn(initializer, elems[0]), elems[1])..., elems[n-1])``; without
    ``initializer``, ``elems[0]`` starts the accumulation."""
    return _fold(fn, elems, initializer, parallel_iterations, back_prop, swap_memory, name,
                 "foldl", reverse=False)


def foldr(fn, elems, initializer=None, parallel_iterations=10, back_prop=True,
          swap_memory=False, name=None):
    """Like ``foldl`` but from the last element to the first."""
    return _fold(fn, elems, initializer, parallel_iterations, back_prop, swap_memory, name,
                 "foldr", reverse=True)


__all__ = ["map_fn", "scan", "foldl", "foldr"]
