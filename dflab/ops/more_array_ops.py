"""More of TF 1.x's array names: ``identity_n``, ``ensure_shape``, ``guarantee_const``,
``parallel_stack``, ``broadcast_dynamic_shape``, ``broadcast_static_shape``,
``batch_gather``, ``to_complex64``/``to_complex128``, ``clip_by_average_norm`` and
``switch_case``.

The ops ``IdentityN``, ``EnsureShape``, ``GuaranteeConst``, ``ParallelConcat`` and
``BroadcastArgs`` have their schemas here and kernels in
``dflab.kernels.more_array_kernels``; the rest are compositions of existing ops, as TF
builds them. ``ParallelConcat`` and ``GuaranteeConst`` have no gradient, as in TF.
"""

from __future__ import annotations

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.constant_op import constant
from dflab.framework.registry import RegisterGradient, register_op
from dflab.framework.tensor_shape import TensorShape, as_shape
from dflab.ops import array_ops, control_flow_ops, indexing_ops, math_ops


# --- IdentityN ----------------------------------------------------------------------------------
def _identity_n_infer(op):
    return [(t.dtype.base_dtype, t.shape) for t in op.inputs]


register_op("IdentityN", _identity_n_infer)


@RegisterGradient("IdentityN")
def _identity_n_grad(op, *grads):
    return list(grads)


def identity_n(input, name=None):  # noqa: A002
    """The tensors of ``input``, each passed through, as one op (a list of tensors)."""
    tensors = [_ops.convert_to_tensor(t) for t in input]
    # No "T" attr: dflab's graphs keep "T" for a single dtype; the outputs' dtypes are the
    # inputs'.
    op = _ops.apply_op("IdentityN", tensors, None, name)
    return list(op.outputs)


# --- EnsureShape --------------------------------------------------------------------------------
def _ensure_shape_infer(op):
    x = op.inputs[0]
    want = as_shape(op.get_attr("shape"))
    if want.ndims is None:
        if x.shape.ndims is not None:
            raise ValueError(f"Shape must be rank -1 but is rank {x.shape.ndims}")
        return [(x.dtype.base_dtype, x.shape)]
    if x.shape.ndims is not None and x.shape.ndims != want.ndims:
        raise ValueError(f"Shape must be rank {want.ndims} but is rank {x.shape.ndims}")
    if not x.shape.is_compatible_with(want):
        raise ValueError(f"Shapes {x.shape} and {want} are incompatible")
    return [(x.dtype.base_dtype, x.shape.merge_with(want))]


register_op("EnsureShape", _ensure_shape_infer)


@RegisterGradient("EnsureShape")
def _ensure_shape_grad(op, grad):
    return [grad]


def ensure_shape(x, shape, name=None):
    """``x``, checked when the step runs to have a shape compatible with ``shape`` (an
    ``InvalidArgumentError`` otherwise); the static shape takes what ``shape`` says."""
    if not isinstance(shape, TensorShape):
        shape = TensorShape(shape)
    return _ops.apply_op_output("EnsureShape", [x], {"shape": shape}, name)


# --- GuaranteeConst -----------------------------------------------------------------------------
register_op("GuaranteeConst", lambda op: [(op.inputs[0].dtype.base_dtype,
                                            op.inputs[0].shape)], stateful=True)


def guarantee_const(input, name=None):  # noqa: A002
    """``input``, with the promise that it does not change between steps (TF's hint for its
    graph rewriters; dflab passes it through)."""
    return _ops.apply_op_output("GuaranteeConst", [input], None, name)


# --- ParallelConcat / parallel_stack ------------------------------------------------------------
def _parallel_concat_infer(op):
    shape = as_shape(op.get_attr("shape"))
    if not shape.is_fully_defined():
        raise ValueError("shape attr must be fully defined.")
    piece = TensorShape([1] + shape.as_list()[1:])
    for t in op.inputs:
        if not t.shape.is_compatible_with(piece):
            raise ValueError(f"Shapes {t.shape} and {piece} are incompatible")
    return [(op.inputs[0].dtype.base_dtype, shape)]


register_op("ParallelConcat", _parallel_concat_infer)


def parallel_stack(values, name="parallel_stack"):
    """``stack(values)`` for values whose shapes are all known when the graph is built
    (TF's form that copies each value into place as it arrives; no gradient)."""
    with _ops.name_scope(name):
        values = [_ops.convert_to_tensor(v) for v in values]
        first = values[0].shape
        for v in values[1:]:
            first = first.merge_with(v.shape)
        shape = TensorShape([len(values)]).concatenate(first)
        pieces = [array_ops.expand_dims(v, 0) for v in values]
        return _ops.apply_op_output("ParallelConcat", pieces,
                                    {"N": len(values), "shape": shape})


# --- broadcast shapes ---------------------------------------------------------------------------
def _broadcast_args_infer(op):
    s0, s1 = op.inputs
    for t in (s0, s1):
        if t.dtype.base_dtype not in (_dt.int32, _dt.int64):
            raise TypeError(f"Value passed to parameter 's0' has DataType "
                            f"{t.dtype.base_dtype.name} not in list of allowed values: "
                            "int32, int64")
        if t.shape.ndims not in (None, 1):
            raise ValueError(f"Shape must be rank 1 but is rank {t.shape.ndims}")
    n0 = s0.shape.as_list()[0] if s0.shape.ndims == 1 else None
    n1 = s1.shape.as_list()[0] if s1.shape.ndims == 1 else None
    n = None if n0 is None or n1 is None else max(n0, n1)
    return [(s0.dtype.base_dtype, TensorShape([n]))]


register_op("BroadcastArgs", _broadcast_args_infer)


def broadcast_dynamic_shape(shape_x, shape_y):
    """The shape that tensors of shapes ``shape_x`` and ``shape_y`` broadcast to (1-D int
    tensors)."""
    return _ops.apply_op_output("BroadcastArgs", [shape_x, shape_y])


def broadcast_static_shape(shape_x, shape_y):
    """The ``TensorShape`` that ``shape_x`` and ``shape_y`` broadcast to; ``ValueError``
    when they cannot."""
    x, y = as_shape(shape_x), as_shape(shape_y)
    if x.ndims is None or y.ndims is None:
        return TensorShape(None)
    dx, dy = x.as_list(), y.as_list()
    n = max(len(dx), len(dy))
    dx, dy = [1] * (n - len(dx)) + dx, [1] * (n - len(dy)) + dy
    out = []
    for a, b in zip(dx, dy):
        if a is None or b is None:
            # Unknown against 1 is the unknown; against anything else it must be that.
            known = b if a is None else a
            out.append(None if known in (None, 1) else known)
        elif a == b or b == 1:
            out.append(a)
        elif a == 1:
            out.append(b)
        else:
            raise ValueError(
                "Incompatible shapes for broadcasting. Two shapes are compatible if for each "
                "dimension pair they are either equal or one of them is 1. Received: "
                f"{x} and {y}.")
    return TensorShape(out)


# --- batch_gather -------------------------------------------------------------------------------
def batch_gather(params, indices, name=None):
    """``params[b..., indices[b..., j], ...]`` for each batch index ``b``: a gather along the
    axis after the leading ``rank(indices) - 1`` batch axes that both share."""
    with _ops.name_scope(name, "BatchGather", [params, indices]):
        indices = _ops.convert_to_tensor(indices, name="indices")
        params = _ops.convert_to_tensor(params, name="params")
        if indices.shape.ndims is None:
            raise ValueError("batch_gather does not allow indices with unknown shape.")
        return _batch_gather(params, indices, indices.shape.ndims - 1)


def _batch_gather(params, indices, batch_dims):
    """TF's construction: offset each batch's indices into the flattened leading axes, then
    one gather of the flattened params."""
    ndims = indices.shape.ndims
    indices_shape = array_ops.shape(indices)
    params_shape = array_ops.shape(params)
    dtype = indices.dtype.base_dtype
    batch_indices = indices
    accum = array_ops.ones((), dtype=dtype)
    shape_t = math_ops.cast(params_shape, dtype)
    for dim in range(batch_dims, 0, -1):
        dim_value = shape_t[dim - 1]
        accum *= shape_t[dim]
        dim_indices = math_ops.range(array_ops.zeros((), dtype=dtype), dim_value,
                                     array_ops.ones((), dtype=dtype))
        dim_indices *= accum
        dim_shape = array_ops.stack([1] * (dim - 1) + [dim_value] + [1] * (ndims - dim))
        batch_indices += array_ops.reshape(dim_indices, dim_shape)
    flat_indices = array_ops.reshape(batch_indices, [-1])
    outer_shape = params_shape[batch_dims + 1:]
    flat_inner = math_ops.reduce_prod(params_shape[:batch_dims + 1], [0], keepdims=False)
    flat_params = array_ops.reshape(params, array_ops.concat([[flat_inner], outer_shape], 0))
    flat_result = indexing_ops.gather(flat_params, flat_indices)
    result = array_ops.reshape(flat_result, array_ops.concat([indices_shape, outer_shape], 0))
    final = indices.shape[:batch_dims].merge_with(params.shape[:batch_dims])
    final = final.concatenate(indices.shape[batch_dims:])
    if params.shape.ndims is not None:
        final = final.concatenate(params.shape[batch_dims + 1:])
        result.set_shape(final)
    return result


# --- casts and clipping -------------------------------------------------------------------------
def to_complex64(x, name="ToComplex64"):
    """``cast(x, complex64)`` (TF 1.x's spelling)."""
    return math_ops.cast(x, _dt.complex64, name=name)


def to_complex128(x, name="ToComplex128"):
    """``cast(x, complex128)`` (TF 1.x's spelling)."""
    return math_ops.cast(x, _dt.complex128, name=name)


def clip_by_average_norm(t, clip_norm, name=None):
    """``t * clip_norm / max(l2norm(t) / size(t), clip_norm)``: ``t`` scaled so that its L2
    norm divided by its number of elements is at most ``clip_norm`` (float32, as TF's)."""
    with _ops.name_scope(name, "clip_by_average_norm", [t, clip_norm]) as scope:
        t = _ops.convert_to_tensor(t, name="t")
        n_element = math_ops.cast(array_ops.size(t), _dt.float32)
        l2norm_inv = math_ops.rsqrt(math_ops.reduce_sum(t * t, math_ops.range(
            array_ops.rank(t))))
        scale = math_ops.minimum(l2norm_inv * n_element, constant(1.0) / clip_norm)
        return array_ops.identity(t * clip_norm * scale, name=scope)


# --- switch_case --------------------------------------------------------------------------------
def _branches(branch_fns):
    """``branch_fns`` (a list, a dict keyed 0..n-1, or (index, fn) pairs) as a list."""
    if isinstance(branch_fns, dict):
        pairs = list(branch_fns.items())
    elif isinstance(branch_fns, (list, tuple)) and branch_fns and \
            isinstance(branch_fns[0], (list, tuple)):
        pairs = list(branch_fns)
    elif isinstance(branch_fns, (list, tuple)):
        pairs = list(enumerate(branch_fns))
    else:
        raise TypeError("branch_fns must be a list, tuple, or dict")
    keys = [k for k, _ in pairs]
    if not all(isinstance(k, int) for k in keys):
        raise TypeError("branch_index must an int")
    if sorted(keys) != list(range(len(keys))):
        found = ",".join(str(k) for k in sorted(keys))
        raise ValueError(f"branch indices (keys) must form contiguous range of [0 to "
                         f"{len(keys)}) but found {{{found}}}")
    fns = [fn for _, fn in sorted(pairs, key=lambda p: p[0])]
    if not fns:
        raise ValueError("Must provide at least one item in branch_fns")
    if not all(callable(f) for f in fns):
        raise TypeError("fn for branch must be callable")
    return fns


def switch_case(branch_index, branch_fns, default=None, name="switch_case"):
    """Run ``branch_fns[branch_index]`` (the ``default``, or the last branch when there is
    none, for an index out of range): a chain of ``cond``s on the int32 index, so only the
    chosen branch runs."""
    fns = _branches(branch_fns)
    with _ops.name_scope(name, "switch_case", [branch_index]):
        index = _ops.convert_to_tensor(branch_index, name="branch_index")
        if index.dtype.base_dtype != _dt.int32:
            raise TypeError("branch_index must an int32 tensor")
        if index.shape.ndims not in (None, 0):
            raise ValueError("branch_index should be a scalar")
        if default is None:
            fns, default = fns[:-1], fns[-1]
        else:
            fns = list(fns)
        return _chain(index, fns, default, 0)


def _chain(index, fns, default, k):
    if k == len(fns):
        return default()
    return control_flow_ops.cond(math_ops.equal(index, k), fns[k],
                                 lambda: _chain(index, fns, default, k + 1))


__all__ = ["identity_n", "ensure_shape", "guarantee_const", "parallel_stack",
           "broadcast_dynamic_shape", "broadcast_static_shape", "batch_gather",
           "to_complex64", "to_complex128", "clip_by_average_norm", "switch_case"]
