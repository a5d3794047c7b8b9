"""Slicing ops: ``Slice``, ``StridedSlice`` (which ``Tensor.__getitem__`` builds, through
``_slice_helper``), ``Split``/``SplitV``, and ``Pad``/``PadV2``/``MirrorPad``, which live here
because ``Pad`` and ``Slice`` are each other's gradient.

Part of the array family: schema, shape rule, gradient and builder side by side; kernels in
``dflab.kernels.array_kernels``. ``array_ops`` re-exports the builders (it stays the one module
to import array ops from) and imports this module only at its end, after defining the helpers
and basic ops that this module imports from it.
"""

from __future__ import annotations

import numbers
import weakref

import numpy as np

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.constant_op import (
    constant,
    constant_value,
    constant_value_as_shape,
    index_constant,
)
from dflab.framework.eager_tensor import EagerTensor
from dflab.framework.registry import RegisterGradient, get_op_def, register_op
from dflab.framework.tensor_shape import Dimension, TensorShape
from dflab.ops.array_ops import (
    _apply,
    _as_int_tensor,
    _check_index_dtype,
    _dense,
    _normalize_axis,
    _partial_ints,
    _py_slice,
    _shape_of,
    concat,
    ones_like,
    stack,
    stack_ints,
)
from dflab.ops.op_util import as_data, scalar_int


# --- Slice ---------------------------------------------------------------------------------------
def _slice_infer(op):
    x, begin, size_t = op.inputs
    _check_index_dtype(begin, "begin")
    if size_t.dtype.base_dtype is not begin.dtype.base_dtype:
        raise TypeError(f"begin and size must have the same dtype, got {begin.dtype.name} and "
                        f"{size_t.dtype.name}")
    dt = x.dtype.base_dtype
    b, s = _partial_ints(begin), _partial_ints(size_t)
    rank_x = x.shape.ndims
    for v, what in ((b, "begin"), (s, "size")):
        if v is not None and rank_x is not None and len(v) != rank_x:
            raise ValueError(f"Expected {what} argument to be a vector of length {rank_x} "
                             f"but got length {len(v)}")
        if v is not None:
            rank_x = len(v)
    if rank_x is None:
        return [(dt, TensorShape(None))]
    dims = x.shape.as_list() if x.shape.ndims is not None else [None] * rank_x
    b = b or [None] * rank_x
    s = s or [None] * rank_x
    out = []
    for i, (d, bi, si) in enumerate(zip(dims, b, s)):
        if bi is not None and (bi < 0 or (d is not None and bi > d)):
            raise ValueError(f"Expected begin[{i}] in [0, {d}], but got {bi}")
        if si is None:
            out.append(None)
        elif si == -1:
            out.append(None if d is None or bi is None else d - bi)
        else:
            if si < 0:
                raise ValueError(f"Expected size[{i}] >= -1, but got {si}")
            if d is not None and bi is not None and bi + si > d:
                raise ValueError(f"Expected size[{i}] in [0, {d - bi}], but got {si}")
            out.append(si)
    return [(dt, TensorShape(out))]


register_op("Slice", _slice_infer)


@RegisterGradient("Slice")
def _slice_grad(op, grad):
    x, begin = op.inputs[0], op.inputs[1]
    grad = _dense(grad)
    bv = constant_value(begin)
    in_dims, out_dims = x.shape.as_tuple(), op.outputs[0].shape.as_tuple()
    if bv is not None and x.shape.is_fully_defined() and op.outputs[0].shape.is_fully_defined():
        bv = np.ravel(bv)
        after = np.asarray(in_dims) - np.asarray(out_dims) - bv
        paddings = np.stack([bv, after], axis=1).astype(np.int64)
    else:
        from dflab.ops import math_ops

        dt = begin.dtype.base_dtype
        after = math_ops.subtract(math_ops.subtract(_shape_of(x, out_type=dt),
                                                    _shape_of(op.outputs[0], out_type=dt)),
                                  begin)
        paddings = stack([begin, after], axis=1)
    return [pad(grad, paddings), None, None]


def slice(input_, begin, size, name=None):  # noqa: A001 - TF's public name
    """The ``size``-shaped block of ``input_`` starting at ``begin`` (size -1: to the end)."""
    begin = _as_int_tensor(begin)
    size_t = _as_int_tensor(size, dtype=begin.dtype.base_dtype)
    return _apply("Slice", [as_data(input_), begin, size_t], None, name)


# --- StridedSlice / StridedSliceGrad ---------------------------------------------------------
_MASKS = ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")


def strided_slice_spec(attrs, begin, end, strides):
    """The sparse slice spec of a ``StridedSlice``, one item per entry of ``begin``.

    Items: ``("ellipsis",)``, ``("newaxis",)``, ``("index", b)`` (a shrunk axis) and
    ``("slice", b, e, s, begin_masked, end_masked)``. Values are ints, or None where unknown at
    build time; masked begins/ends are None too. Shared by the shape rule and the kernels so
    that both read the masks the same way (TF's precedence: ellipsis, new axis, shrink).
    """
    n = len(begin)
    if len(end) != n or len(strides) != n:
        raise ValueError(f"begin, end and strides must have the same length, got {len(begin)}, "
                         f"{len(end)} and {len(strides)}")
    bm, em, elm, nm, sm = (attrs[k] for k in _MASKS)
    if bin(elm & ((1 << n) - 1)).count("1") > 1:
        raise ValueError("Multiple ellipses in slice spec not allowed")
    items = []
    for i in range(n):
        bit = 1 << i
        s = strides[i]
        if elm & bit:
            items.append(("ellipsis",))
        elif nm & bit:
            items.append(("newaxis",))
        elif sm & bit:
            if s is not None and s <= 0:
                raise ValueError("only stride 1 allowed on non-range indexing.")
            items.append(("index", begin[i]))
        else:
            if s == 0:
                raise ValueError(f"strides[{i}] must be non-zero")
            items.append(("slice", None if bm & bit else begin[i], None if em & bit else end[i],
                          s, bool(bm & bit), bool(em & bit)))
    return items


def _slice_length(d, b, e, s, begin_masked, end_masked):
    if d is None or s is None or (b is None and not begin_masked) or (
            e is None and not end_masked):
        return None
    return len(range(*_py_slice(b, e, s).indices(d)))


def strided_slice_shape(in_shape, items):
    """Output shape of a strided slice of ``in_shape`` (partial) given its sparse spec."""
    if in_shape.ndims is None:
        return TensorShape(None)
    dims = in_shape.as_list()
    consuming = sum(1 for it in items if it[0] in ("index", "slice"))
    if not any(it[0] == "ellipsis" for it in items):
        items = list(items) + [("ellipsis",)]  # unlisted trailing dims are kept whole
    n_ellipsis = len(dims) - consuming
    if n_ellipsis < 0:
        raise ValueError(f"Index out of range using input dim {len(dims)}; input has only "
                         f"{len(dims)} dims")
    out, k = [], 0
    for it in items:
        if it[0] == "ellipsis":
            out += dims[k:k + n_ellipsis]
            k += n_ellipsis
        elif it[0] == "newaxis":
            out.append(1)
        elif it[0] == "index":
            d, b = dims[k], it[1]
            if d is not None and b is not None and not -d <= b < d:
                raise ValueError(f"slice index {b} of dimension {k} out of bounds.")
            k += 1
        else:
            out.append(_slice_length(dims[k], *it[1:]))
            k += 1
    return TensorShape(out)


def _strided_slice_items(op, begin, end, strides):
    for t in (begin, end, strides):
        _check_index_dtype(t, "begin, end and strides")
        if t.shape.ndims not in (None, 1):
            raise ValueError(f"begin, end and strides must be vectors, got shape {t.shape}")
    b, e, s = _partial_ints(begin), _partial_ints(end), _partial_ints(strides)
    if b is None or e is None or s is None:
        return None
    return strided_slice_spec(op.attrs, b, e, s)


def _strided_slice_infer(op):
    x, begin, end, strides = op.inputs
    items = _strided_slice_items(op, begin, end, strides)
    if items is None:
        return [(x.dtype.base_dtype, TensorShape(None))]
    return [(x.dtype.base_dtype, strided_slice_shape(x.shape, items))]


register_op("StridedSlice", _strided_slice_infer)


def _masks_of(op):
    return {k: op.get_attr(k) for k in _MASKS}


@RegisterGradient("StridedSlice")
def _strided_slice_grad(op, grad):
    x, begin, end, strides = op.inputs
    x_shape = _shape_of(x, out_type=begin.dtype.base_dtype)
    dx = _apply("StridedSliceGrad", [x_shape, begin, end, strides, _dense(grad)], _masks_of(op))
    return [dx, None, None, None]


def _strided_slice_grad_infer(op):
    shape_t, begin, end, strides, dy = op.inputs
    _check_index_dtype(shape_t, "shape")
    items = _strided_slice_items(op, begin, end, strides)
    out = constant_value_as_shape(shape_t)
    if items is not None and out.ndims is not None:
        want = strided_slice_shape(out, items)
        if not want.is_compatible_with(dy.shape):
            raise ValueError(f"dy has shape {dy.shape}, but the slice has shape {want}")
    return [(dy.dtype.base_dtype, out)]


register_op("StridedSliceGrad", _strided_slice_grad_infer)


@RegisterGradient("StridedSliceGrad")
def _strided_slice_grad_grad(op, grad):
    _, begin, end, strides, _ = op.inputs
    return [None, None, None, None,
            strided_slice(_dense(grad), begin, end, strides, **_masks_of(op))]


def strided_slice(input_, begin, end, strides=None, begin_mask=0, end_mask=0, ellipsis_mask=0,
                  new_axis_mask=0, shrink_axis_mask=0, var=None, name=None):
    """NumPy-style basic slicing with TF's begin/end/strides vectors and bit masks."""
    begin = _as_int_tensor(begin)
    dt = begin.dtype.base_dtype
    end = _as_int_tensor(end, dtype=dt)
    if strides is None:
        n = _partial_ints(begin)
        if n is None:
            strides = ones_like(begin)
        else:
            strides = [1] * len(n)
    strides = _as_int_tensor(strides, dtype=dt)
    attrs = {"begin_mask": int(begin_mask), "end_mask": int(end_mask),
             "ellipsis_mask": int(ellipsis_mask), "new_axis_mask": int(new_axis_mask),
             "shrink_axis_mask": int(shrink_axis_mask)}
    out = _apply("StridedSlice", [as_data(input_), begin, end, strides], attrs, name)
    if var is not None:  # TF's: the slice of a variable can be assigned to
        _assignable(out, var, (begin, end, strides), attrs)
    return out


def _check_index(idx):
    """TF1 accepts ints, scalar int32/int64 tensors (and, in slices, None) as indices."""
    if isinstance(idx, (numbers.Integral, Dimension)):
        return
    if isinstance(idx, _ops.Tensor):
        if idx.dtype.base_dtype in (_dt.int32, _dt.int64) and idx.shape.ndims in (None, 0):
            return
    raise TypeError("Only integers, slices (`:`), ellipsis (`...`), tf.newaxis (`None`) and "
                    f"scalar tf.int32/tf.int64 tensors are valid indices, got {idx!r}")


def _slice_helper(tensor, slice_spec, var=None):
    """``tensor[slice_spec]``: ints (shrink an axis), slices with steps, ``...``, ``tf.newaxis``
    and scalar integer tensors, combined as in NumPy basic indexing (one ``StridedSlice``).
    With ``var`` (the variable ``tensor`` reads), the slice has TF's ``assign``."""
    if var is not None:
        return _variable_slice(tensor, slice_spec, var)
    tensor = _ops.convert_to_tensor(tensor)
    g = _ops.get_default_graph()
    if g.executes_eagerly:
        key = _python_spec_key(slice_spec)
        if key is not None:
            return _eager_slice(g, tensor, slice_spec, key)
    return _graph_slice(tensor, slice_spec)


def _python_spec_key(slice_spec):
    """A hashable key for an index made of Python ints, int slices, ``...`` and ``None``
    alone; None for anything else (tensors, lists), which takes the general path."""
    items = slice_spec if type(slice_spec) is tuple else (slice_spec,)
    key = []
    for s in items:
        if type(s) is _py_slice:
            start, stop, step = s.start, s.stop, s.step
            if not ((start is None or type(start) is int) and (stop is None or type(stop) is int)
                    and (step is None or type(step) is int)):
                return None
            key.append((start, stop, step))
        elif type(s) is int or s is None or s is Ellipsis:
            key.append(s)
        else:
            return None
    return tuple(key)


def _eager_slice(context, tensor, slice_spec, key):
    """``tensor[slice_spec]`` executing eagerly, for an index of Python values: its vectors
    and masks worked out once per index, its vectors the context's cached constants
    (``_SPECS``). An eager op has no name scope to open."""
    spec = _SPECS.get(key)
    if spec is None or spec[0] is not context:
        begin, end, strides, masks = _spec_vectors(slice_spec)
        spec = (context, [index_constant(tuple(v)) for v in (begin, end, strides)],
                _mask_attrs(masks))
        if len(_SPECS) >= 1024:
            _SPECS.clear()
        _SPECS[key] = spec
    return context.apply_op_output("StridedSlice", [tensor, *spec[1]], spec[2], "strided_slice")


# _python_spec_key -> (the eager context, its constants of begin, end and strides, FrozenAttrs
# of the masks)
_SPECS: dict = {}


def _graph_slice(tensor, slice_spec):
    begin, end, strides, masks = _spec_vectors(slice_spec)
    with _ops.name_scope(None, "strided_slice", [tensor]) as scope:
        packed = _packed_vectors(begin, end, strides)
        return _apply("StridedSlice", [tensor] + packed, _mask_attrs(masks), name=scope)


def _packed_vectors(begin, end, strides) -> list:
    """A slice's begin, end and strides lists as three index tensors of one dtype."""
    packed = [stack_ints(vals) if any(isinstance(v, _ops.Tensor) for v in vals) else
              tuple(int(v) for v in vals) for vals in (begin, end, strides)]
    dt = packed[0].dtype.base_dtype if isinstance(packed[0], _ops.Tensor) else (
        packed[1].dtype.base_dtype if isinstance(packed[1], _ops.Tensor) else _dt.int32)
    packed = [p if isinstance(p, _ops.Tensor) else index_constant(p, dt) for p in packed]
    if len({p.dtype.base_dtype for p in packed}) > 1:
        from dflab.ops import math_ops

        packed = [math_ops.cast(p, _dt.int64) for p in packed]
    return packed


def _spec_vectors(slice_spec):
    """The begin, end and strides lists and the masks of ``tensor[slice_spec]``."""
    if isinstance(slice_spec, list):  # TF1 has no fancy indexing
        _check_index(slice_spec)
    if not isinstance(slice_spec, tuple):
        slice_spec = (slice_spec,)
    begin, end, strides = [], [], []
    masks = dict.fromkeys(_MASKS, 0)
    for i, s in enumerate(slice_spec):
        bit = 1 << i
        if isinstance(s, _py_slice):
            for part in (s.start, s.stop, s.step):
                if part is not None:
                    _check_index(part)
            begin.append(0 if s.start is None else s.start)
            end.append(0 if s.stop is None else s.stop)
            strides.append(1 if s.step is None else s.step)
            if s.start is None:
                masks["begin_mask"] |= bit
            if s.stop is None:
                masks["end_mask"] |= bit
        elif s is Ellipsis:
            begin.append(0)
            end.append(0)
            strides.append(1)
            masks["ellipsis_mask"] |= bit
        elif s is None:
            begin.append(0)
            end.append(0)
            strides.append(1)
            masks["new_axis_mask"] |= bit
        else:
            _check_index(s)
            begin.append(s)
            # The kernel ignores the end of a shrunk axis; TF's index + 1 would cost an op.
            end.append(s + 1 if not isinstance(s, _ops.Tensor) else s)
            strides.append(1)
            masks["shrink_axis_mask"] |= bit
    return begin, end, strides, masks


def _mask_attrs(masks: dict) -> _ops.FrozenAttrs:
    """A slice's masks as constant attributes, made once per combination (an eager slice
    keys its kernel without walking them)."""
    key = tuple(masks.values())
    attrs = _MASK_ATTRS.get(key)
    if attrs is None:
        attrs = _MASK_ATTRS[key] = _ops.FrozenAttrs(**masks)
    return attrs


_MASK_ATTRS: dict = {}


# --- slice assignment: ``v[1:3].assign(value)`` --------------------------------------------------
# TF's ``StridedSliceAssign`` (a reference variable's: outputs the reference) and
# ``ResourceStridedSliceAssign`` (a resource variable's: no output) write ``value``,
# broadcast to the slice's shape, into the slice of the variable that ``begin``/``end``/
# ``strides`` and the masks pick, as ``StridedSlice`` reads it. The value's shape is checked
# by the kernel, as TF's shape functions leave it. No gradient, as TF registers none.
def _slice_assign_checks(op, target):
    _, begin, end, strides, value = op.inputs
    _strided_slice_items(op, begin, end, strides)
    want = op.get_attr("T")
    if value.dtype.base_dtype is not want:
        raise TypeError(f"Input 'value' of '{op.type}' Op has type {value.dtype.name} that does "
                        f"not match type {want.name} of argument '{target}'.")


def _strided_slice_assign_infer(op):
    ref = op.inputs[0]
    if not ref.dtype.is_ref_dtype:
        raise TypeError(f"'{op.type}' Op requires that input 'ref' be a mutable tensor "
                        f"(e.g. a tf.Variable), got {ref.dtype.name}")
    _slice_assign_checks(op, "ref")
    return [(ref.dtype, ref.shape)]


def _resource_strided_slice_assign_infer(op):
    if op.inputs[0].dtype.base_dtype is not _dt.resource:
        raise TypeError(f"'{op.type}' Op requires that input 'ref' be a resource handle "
                        f"(a resource variable), got {op.inputs[0].dtype.name}")
    _slice_assign_checks(op, "ref")
    return []


register_op("StridedSliceAssign", _strided_slice_assign_infer, stateful=True, ref_inputs=(0,))
register_op("ResourceStridedSliceAssign", _resource_strided_slice_assign_infer, stateful=True)
get_op_def("ResourceStridedSliceAssign").writes_handle = True


def strided_slice_assign(ref, begin, end, strides, value, begin_mask=0, end_mask=0,
                         ellipsis_mask=0, new_axis_mask=0, shrink_axis_mask=0, name=None):
    """Write ``value`` into ``ref[begin:end:strides]`` (with TF's masks): ``ref`` a reference
    variable's reference (the op's output is the reference) or a resource variable's handle
    (the op, which has no output)."""
    attrs = {"T": value.dtype.base_dtype, "begin_mask": int(begin_mask),
             "end_mask": int(end_mask), "ellipsis_mask": int(ellipsis_mask),
             "new_axis_mask": int(new_axis_mask), "shrink_axis_mask": int(shrink_axis_mask)}
    if ref.dtype.base_dtype is _dt.resource:
        return _ops.apply_op("ResourceStridedSliceAssign", [ref, begin, end, strides, value],
                             attrs, name or "ResourceStridedSliceAssign")
    return _ops.apply_op("StridedSliceAssign", [ref, begin, end, strides, value], attrs,
                         name or "StridedSliceAssign").outputs[0]


class _EagerVariableSlice(EagerTensor):
    """An eager slice of a variable: the tensor itself, with TF's ``assign``. (Its class is
    changed in place, keeping the object a tape may have recorded; no slot of its own.)"""

    __slots__ = ()

    def assign(self, value, name=None):
        return _SLICE_ASSIGNS[self](value, name)


class _GraphVariableSlice(_ops.Tensor):
    """A graph's slice of a variable, with TF's ``assign`` (see ``_EagerVariableSlice``)."""

    __slots__ = ()

    def assign(self, value, name=None):
        return _SLICE_ASSIGNS[self](value, name)


# A variable's slice -> its ``assign(value, name)``, for as long as the slice lives.
_SLICE_ASSIGNS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _variable_slice(tensor, slice_spec, var):
    """``var[slice_spec]`` (``tensor`` is its value): the slice, assignable."""
    out = _slice_helper(tensor, slice_spec)
    if out.is_eager:  # the vectors are made when (if) it is assigned to
        begin, end, strides, masks = _spec_vectors(slice_spec)
        return _assignable(out, var, None, masks, lambda: _packed_vectors(begin, end, strides))
    return _assignable(out, var, tuple(out.op.inputs[1:]), _masks_of(out.op))


def _assignable(out, var, vectors, masks, make_vectors=None):
    """Give ``out``, a slice of ``var``, TF's ``assign(value, name=None)``: the slice
    assignment of ``var`` with the slice's vectors and masks (named ``<slice>_assign`` in a
    graph)."""
    masks = dict(masks)
    parent = None if out.is_eager else out.op.name

    def assign(value, name=None):
        begin, end, strides = vectors if vectors is not None else make_vectors()
        if name is None and parent is not None:
            name = parent + "_assign"
        method = getattr(var, "_strided_slice_assign", None)
        if method is not None:  # a resource variable
            return method(begin, end, strides, value, name, **masks)
        # A reference variable: the op on its reference, which it outputs (TF 1.x's).
        value = _ops.convert_to_tensor(value, dtype=var.dtype.base_dtype)
        return strided_slice_assign(var._ref(), begin, end, strides, value, name=name,
                                    **masks)

    _SLICE_ASSIGNS[out] = assign
    out.__class__ = _EagerVariableSlice if out.is_eager else _GraphVariableSlice
    return out


# --- Split / SplitV -------------------------------------------------------------------------------
def _split_infer(op):
    axis_t, x = op.inputs
    _check_index_dtype(axis_t, "axis")
    n = op.get_attr("num_split")
    dt = x.dtype.base_dtype
    if n <= 0:
        raise ValueError(f"num_split must be positive, got {n}")
    rank_x = x.shape.ndims
    a = scalar_int(axis_t)
    if rank_x is None:
        return [(dt, TensorShape(None))] * n
    if a is None:
        return [(dt, TensorShape([None] * rank_x))] * n
    a = _normalize_axis(a, rank_x, "split axis")
    dims = x.shape.as_list()
    if dims[a] is not None:
        if dims[a] % n:
            raise ValueError(f"Dimension size must be evenly divisible by {n} but is {dims[a]} "
                             f"for 'split' along axis {a}")
        dims[a] //= n
    return [(dt, TensorShape(dims))] * n


register_op("Split", _split_infer)


@RegisterGradient("Split")
def _split_grad(op, *grads):
    return [None, concat([_dense(g) for g in grads], op.inputs[0])]


def _split_v_infer(op):
    x, sizes_t, axis_t = op.inputs
    _check_index_dtype(sizes_t, "size_splits")
    _check_index_dtype(axis_t, "axis")
    n = op.get_attr("num_split")
    dt = x.dtype.base_dtype
    sizes = _partial_ints(sizes_t)
    if sizes is not None and len(sizes) != n:
        raise ValueError(f"size_splits has {len(sizes)} entries but num_split is {n}")
    if sizes is None:
        sizes = [None] * n
    if sizes.count(-1) > 1:
        raise ValueError("Only one of the size_splits may be -1")
    rank_x = x.shape.ndims
    a = scalar_int(axis_t)
    if rank_x is None:
        return [(dt, TensorShape(None))] * n
    if a is None:
        return [(dt, TensorShape([None] * rank_x))] * n
    a = _normalize_axis(a, rank_x, "split axis")
    d = x.shape.as_list()[a]
    known = [s for s in sizes if s is not None and s != -1]
    if any(s < -1 for s in known):
        raise ValueError(f"size_splits must be >= -1, got {sizes}")
    if d is not None and None not in sizes:
        if -1 in sizes:
            rest = d - sum(known)
            if rest < 0:
                raise ValueError(f"size_splits {sizes} exceed the dimension {d} being split")
            sizes = [rest if s == -1 else s for s in sizes]
        elif sum(sizes) != d:
            raise ValueError(f"Determined shape must either match input shape along split_dim "
                             f"exactly if fully specified, or be less than the size of the "
                             f"input along split_dim if not fully specified.  Got: {sum(sizes)} "
                             f"vs. {d}")
    out = []
    for s in sizes:
        dims = x.shape.as_list()
        dims[a] = None if s in (None, -1) else s
        out.append((dt, TensorShape(dims)))
    return out


register_op("SplitV", _split_v_infer)


@RegisterGradient("SplitV")
def _split_v_grad(op, *grads):
    return [concat([_dense(g) for g in grads], op.inputs[2]), None, None]


def split(value, num_or_size_splits, axis=0, num=None, name="split"):
    """Split ``value`` along ``axis`` into equal parts (an int) or parts of the given sizes
    (a list or 1-D tensor; one size may be -1). Returns a list of tensors."""
    value = _ops.convert_to_tensor(value)
    axis_t = _as_int_tensor(axis)
    if isinstance(num_or_size_splits, (numbers.Integral, Dimension)) and not isinstance(
            num_or_size_splits, bool):
        n = int(num_or_size_splits)
        return _ops.apply_op("Split", [axis_t, value], _ops.frozen_attrs(num_split=n),
                             name).outputs
    sizes = _as_int_tensor(num_or_size_splits)
    if num is None:
        dims = sizes.shape.as_tuple()
        if dims is None or len(dims) != 1 or dims[0] is None:
            raise ValueError(f"Cannot infer num from shape {sizes.shape}")
        num = dims[0]
    return _ops.apply_op("SplitV", [value, sizes, axis_t], {"num_split": int(num)}, name).outputs


# --- Pad / PadV2 / MirrorPad ---------------------------------------------------------------------
def _pad_infer(op):
    x, paddings = op.inputs[0], op.inputs[1]
    _check_index_dtype(paddings, "paddings")
    dt = x.dtype.base_dtype
    if op.type == "PadV2":
        cv = op.inputs[2]
        if cv.dtype.base_dtype is not dt:
            raise TypeError(f"constant_values must have the dtype of the tensor ({dt.name}), "
                            f"got {cv.dtype.base_dtype.name}")
        if cv.shape.ndims not in (None, 0):
            raise ValueError(f"constant_values must be a scalar, got shape {cv.shape}")
    rank_x = x.shape.ndims
    ps = paddings.shape.as_tuple()
    if ps is not None:
        if len(ps) != 2 or (ps[1] is not None and ps[1] != 2):
            raise ValueError(f"paddings must be a matrix with 2 columns, got shape "
                             f"{paddings.shape}")
        if rank_x is not None and ps[0] is not None and ps[0] != rank_x:
            raise ValueError(f"The first dimension of paddings must be the rank of inputs "
                             f"({rank_x}), got {ps[0]}")
        if rank_x is None and ps[0] is not None:
            rank_x = ps[0]
    if rank_x is None:
        return [(dt, TensorShape(None))]
    dims = x.shape.as_list() if x.shape.ndims is not None else [None] * rank_x
    pv = constant_value(paddings)
    if pv is None:
        return [(dt, TensorShape([None] * rank_x))]
    pv = np.asarray(pv).reshape(rank_x, 2)
    if (pv < 0).any():
        raise ValueError(f"paddings must be non-negative, got {pv.tolist()}")
    mode = op.attrs.get("mode")
    out = []
    for i, (d, (a, b)) in enumerate(zip(dims, pv.tolist())):
        if d is not None and mode is not None:
            limit = d - (1 if mode == "REFLECT" else 0)
            if a > limit or b > limit:
                raise ValueError(f"paddings must be no greater than the dimension size "
                                 f"{limit} in {mode} mode: {a}, {b} for dimension {i}")
        out.append(None if d is None else d + a + b)
    return [(dt, TensorShape(out))]


for _t in ("Pad", "PadV2", "MirrorPad"):
    register_op(_t, _pad_infer)


def _pad_begin(paddings):
    pv = constant_value(paddings)
    if pv is not None:
        return constant(np.asarray(pv)[:, 0], dtype=paddings.dtype.base_dtype)
    return _slice_helper(paddings, (_py_slice(None), 0))


def _crop(grad, x, paddings):
    """The part of a padded tensor's gradient that lies over the original ``x``."""
    size_t = _shape_of(x, out_type=paddings.dtype.base_dtype)
    return slice(_dense(grad), _pad_begin(paddings), size_t)


@RegisterGradient("Pad")
def _pad_grad(op, grad):
    return [_crop(grad, op.inputs[0], op.inputs[1]), None]


@RegisterGradient("PadV2")
def _pad_v2_grad(op, grad):
    return [_crop(grad, op.inputs[0], op.inputs[1]), None, None]


@RegisterGradient("MirrorPad")
def _mirror_pad_grad(op, grad):
    x, paddings = op.inputs
    g = _apply("MirrorPadGrad", [_dense(grad), paddings], {"mode": op.get_attr("mode")})
    return [g, None]


def _mirror_pad_grad_infer(op):
    g, paddings = op.inputs
    _check_index_dtype(paddings, "paddings")
    rank_g = g.shape.ndims
    pv = constant_value(paddings)
    if rank_g is None or pv is None:
        return [(g.dtype.base_dtype, TensorShape(None if rank_g is None else [None] * rank_g))]
    pv = np.asarray(pv).reshape(rank_g, 2)
    out = [None if d is None else d - int(a) - int(b)
           for d, (a, b) in zip(g.shape.as_list(), pv)]
    if any(d is not None and d < 0 for d in out):
        raise ValueError(f"paddings {pv.tolist()} exceed the gradient's shape {g.shape}")
    return [(g.dtype.base_dtype, TensorShape(out))]


register_op("MirrorPadGrad", _mirror_pad_grad_infer)


@RegisterGradient("MirrorPadGrad")
def _mirror_pad_grad_grad(op, grad):
    return [_apply("MirrorPad", [_dense(grad), op.inputs[1]], {"mode": op.get_attr("mode")}),
            None]


def pad(tensor, paddings, mode="CONSTANT", name=None, constant_values=0):
    """Pad ``tensor`` by ``paddings[i] = [before, after]`` along each axis; ``mode`` is
    CONSTANT (with ``constant_values``), REFLECT or SYMMETRIC (case-insensitive)."""
    tensor = _ops.convert_to_tensor(tensor)
    paddings = _as_int_tensor(paddings)
    mode = str(mode).upper()
    if mode == "CONSTANT":
        if constant_values == 0 if type(constant_values) in (int, float) else not isinstance(
                constant_values, _ops.Tensor) and np.all(np.asarray(constant_values) == 0):
            return _apply("Pad", [tensor, paddings], None, name)
        cv = _ops.convert_to_tensor(constant_values, dtype=tensor.dtype.base_dtype)
        return _apply("PadV2", [tensor, paddings, cv], None, name)
    if mode in ("REFLECT", "SYMMETRIC"):
        return _apply("MirrorPad", [tensor, paddings], {"mode": mode}, name)
    raise ValueError(f"Unknown padding mode: {mode}")


__all__ = ["slice", "strided_slice", "split", "pad"]
