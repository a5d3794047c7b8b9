"""Ops that move elements between the batch, space and depth dimensions: ``SpaceToBatchND``,
``BatchToSpaceND``, ``SpaceToDepth``, ``DepthToSpace``, and the patch extractors
``ExtractImagePatches`` and ``ExtractVolumePatches``.

Part of the array family: schema, shape rule, gradient and builder side by side; kernels in
``dflab.kernels.space_kernels``. Every op here is a permutation (or, for the patch
extractors, a gather) of its input's elements, so each gradient is the inverse permutation or
a segment sum over the gathered positions, as TF's.
"""

from __future__ import annotations

import numpy as np

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.constant_op import constant, constant_value
from dflab.framework.registry import RegisterGradient, register_op
from dflab.framework.tensor_shape import TensorShape
from dflab.ops.array_ops import (
    _as_int_tensor,
    _check_index_dtype,
    _dense,
    _partial_ints,
    _shape_of,
    concat,
    reshape,
    stack,
    transpose,
    zeros,
)
from dflab.ops.conv_ops import _check_padding, conv_output_size
from dflab.ops.op_util import as_data


def _apply(op_type, inputs, attrs=None, name=None):
    return _ops.apply_op_output(op_type, inputs, attrs, name)


def _matrix_values(t, rows):
    """A [rows, 2] integer tensor's entries known at build time (None entries where not)."""
    v = constant_value(t)
    if v is not None:
        return [[int(a), int(b)] for a, b in np.reshape(v, (-1, 2))]
    return [[None, None]] * rows


def _divided(size, block):
    """``size / block`` for a dimension that must divide evenly (TF's shape rule)."""
    if size is None or block is None:
        return None
    if size % block:
        raise ValueError(f"Dimension size must be evenly divisible by {block} but is {size}")
    return size // block


# --- SpaceToBatchND / BatchToSpaceND -----------------------------------------------------------
def _block_dims(op, what):
    """(input dims or None, block sizes, the [M, 2] paddings or crops) of a space/batch op."""
    x, block_t, pads_t = op.inputs
    _check_index_dtype(block_t, "block_shape")
    _check_index_dtype(pads_t, what)
    if block_t.shape.ndims not in (None, 1):
        raise ValueError(f"Shape must be rank 1 but is rank {block_t.shape.ndims} for "
                         f"block_shape of '{op.type}'")
    block = _partial_ints(block_t)
    m = len(block) if block is not None else None
    if m is None and pads_t.shape.ndims == 2:
        m = pads_t.shape.as_list()[0]
    if m is None:
        return None, None, None
    if pads_t.shape.ndims is not None and pads_t.shape.as_list() not in ([m, 2], [None, 2],
                                                                         [m, None]):
        raise ValueError(f"{what} must have shape [{m}, 2], got {pads_t.shape}")
    block = block or [None] * m
    if any(b is not None and b < 1 for b in block):
        raise ValueError("block_shape must be positive")
    pads = _matrix_values(pads_t, m)
    if any(p is not None and p < 0 for row in pads for p in row):
        raise ValueError(f"{what} cannot be negative")
    dims = x.shape.as_list() if x.shape.ndims is not None else None
    if dims is not None and len(dims) < m + 1:
        raise ValueError(f"input rank should be >= {m + 1} instead of {len(dims)}")
    return dims, block, pads


def _space_to_batch_infer(op):
    dt = op.inputs[0].dtype.base_dtype
    dims, block, pads = _block_dims(op, "paddings")
    if dims is None:
        return [(dt, TensorShape(None if block is None else None))]
    m = len(block)
    prod = None if None in block else int(np.prod(block))
    batch = None if dims[0] is None or prod is None else dims[0] * prod
    spatial = []
    for d, b, (p0, p1) in zip(dims[1:m + 1], block, pads):
        full = None if d is None or p0 is None or p1 is None else d + p0 + p1
        spatial.append(_divided(full, b))
    return [(dt, TensorShape([batch] + spatial + dims[m + 1:]))]


def _batch_to_space_infer(op):
    dt = op.inputs[0].dtype.base_dtype
    dims, block, crops = _block_dims(op, "crops")
    if dims is None:
        return [(dt, TensorShape(None))]
    m = len(block)
    prod = None if None in block else int(np.prod(block))
    batch = _divided(dims[0], prod)
    spatial = []
    for d, b, (c0, c1) in zip(dims[1:m + 1], block, crops):
        if d is None or b is None or c0 is None or c1 is None:
            spatial.append(None)
            continue
        if d * b - c0 - c1 < 0:
            raise ValueError(f"Negative dimension size caused by subtracting {c0 + c1} from "
                             f"{d * b}")
        spatial.append(d * b - c0 - c1)
    return [(dt, TensorShape([batch] + spatial + dims[m + 1:]))]


register_op("SpaceToBatchND", _space_to_batch_infer)
register_op("BatchToSpaceND", _batch_to_space_infer)


@RegisterGradient("SpaceToBatchND")
def _space_to_batch_grad(op, grad):
    return [batch_to_space_nd(_dense(grad), op.inputs[1], op.inputs[2]), None, None]


@RegisterGradient("BatchToSpaceND")
def _batch_to_space_grad(op, grad):
    return [space_to_batch_nd(_dense(grad), op.inputs[1], op.inputs[2]), None, None]


def _block_shape_tensor(block_shape):
    # TF 1.0 took one int for every spatial dimension of a 4-D input.
    if isinstance(block_shape, (int, np.integer)):
        return constant(np.array([block_shape, block_shape], np.int64))
    return _as_int_tensor(block_shape)


def space_to_batch_nd(input, block_shape, paddings, name=None):  # noqa: A002
    """Zero-pad the spatial dimensions ``1..M`` of ``input`` by ``paddings``, cut them into
    blocks of ``block_shape`` and move each block's offset into the batch dimension."""
    return _apply("SpaceToBatchND", [as_data(input), _block_shape_tensor(block_shape),
                                     _as_int_tensor(paddings)], None, name)


def batch_to_space_nd(input, block_shape, crops, name=None):  # noqa: A002
    """The inverse of ``space_to_batch_nd``: move batch blocks back into the spatial
    dimensions, then crop them by ``crops``."""
    return _apply("BatchToSpaceND", [as_data(input), _block_shape_tensor(block_shape),
                                     _as_int_tensor(crops)], None, name)


def _rank4(t):
    t.set_shape(t.shape.merge_with(TensorShape([None] * 4)))
    return t


def _block_size(block_size, block_shape):
    if block_shape is not None:
        if block_size is not None:
            raise ValueError("Cannot specify both 'block_shape' and 'block_size'")
        return block_shape
    return block_size


def space_to_batch(input, paddings, block_size=None, name=None,  # noqa: A002
                   block_shape=None):
    """TF 1.x's 4-D form of ``space_to_batch_nd``: one square ``block_size``."""
    size = _block_size(block_size, block_shape)
    return _rank4(space_to_batch_nd(input, np.array([size, size], np.int64), paddings, name))


def batch_to_space(input, crops, block_size, name=None, block_shape=None):  # noqa: A002
    """TF 1.x's 4-D form of ``batch_to_space_nd``: one square ``block_size``."""
    size = _block_size(block_size, block_shape)
    return _rank4(batch_to_space_nd(input, np.array([size, size], np.int64), crops, name))


def required_space_to_batch_paddings(input_shape, block_shape, base_paddings=None, name=None):
    """(paddings, crops): the least padding, beyond ``base_paddings``, that makes every
    ``block_shape[i]`` divide ``input_shape[i]``, and the crops that undo it."""
    with _ops.name_scope(name, "required_space_to_batch_paddings",
                         [input_shape, block_shape]):
        input_shape = _ops.convert_to_tensor(input_shape, _dt.int32, name="input_shape")
        block_shape = _ops.convert_to_tensor(block_shape, _dt.int32, name="block_shape")
        if not block_shape.shape.is_fully_defined() or block_shape.shape.ndims != 1:
            raise ValueError(f"block_shape must be a vector of known length, got "
                             f"{block_shape.shape}")
        m = block_shape.shape.as_list()[0]
        if m == 0:
            return zeros([0, 2], _dt.int32), zeros([0, 2], _dt.int32)
        input_shape.shape.assert_is_compatible_with([m])
        if base_paddings is not None:
            base_paddings = _ops.convert_to_tensor(base_paddings, _dt.int32,
                                                   name="base_paddings")
            base_paddings.shape.assert_is_compatible_with([m, 2])
        else:
            base_paddings = zeros([m, 2], _dt.int32)
        known = [constant_value(t) for t in (block_shape, input_shape, base_paddings)]
        if all(v is not None for v in known):
            block_shape, input_shape, base_paddings = known
        pad_start = base_paddings[:, 0]
        orig_pad_end = base_paddings[:, 1]
        full = input_shape + pad_start + orig_pad_end
        pad_end_extra = (block_shape - full % block_shape) % block_shape
        pad_end = orig_pad_end + pad_end_extra
        paddings = stack([[pad_start[i], pad_end[i]] for i in range(m)], name="paddings")
        crops = stack([[0, pad_end_extra[i]] for i in range(m)], name="crops")
        return paddings, crops


# --- SpaceToDepth / DepthToSpace ---------------------------------------------------------------
def _depth_attrs(op):
    size = op.get_attr("block_size")
    fmt = op.get_attr("data_format")
    if size < 2:
        raise ValueError(f"Attr 'block_size' of '{op.type}' Op passed {size} less than "
                         "minimum 2.")
    if fmt not in ("NHWC", "NCHW"):
        raise ValueError(f"data_format must be NHWC or NCHW, got {fmt!r}")
    x = op.inputs[0]
    if x.shape.ndims not in (None, 4):
        raise ValueError(f"Shape must be rank 4 but is rank {x.shape.ndims} for '{op.type}'")
    dims = x.shape.as_list() if x.shape.ndims is not None else [None] * 4
    return size, fmt, dims


def _layout(fmt, dims):
    """(batch, height, width, channels) of ``dims`` in ``fmt``."""
    if fmt == "NHWC":
        return dims[0], dims[1], dims[2], dims[3]
    return dims[0], dims[2], dims[3], dims[1]


def _in_layout(fmt, n, h, w, c):
    return [n, h, w, c] if fmt == "NHWC" else [n, c, h, w]


def _mul(a, b):
    return None if a is None or b is None else a * b


def _space_to_depth_infer(op):
    size, fmt, dims = _depth_attrs(op)
    n, h, w, c = _layout(fmt, dims)
    out = _in_layout(fmt, n, _divided(h, size), _divided(w, size), _mul(c, size * size))
    return [(op.inputs[0].dtype.base_dtype, TensorShape(out))]


def _depth_to_space_infer(op):
    size, fmt, dims = _depth_attrs(op)
    n, h, w, c = _layout(fmt, dims)
    out = _in_layout(fmt, n, _mul(h, size), _mul(w, size), _divided(c, size * size))
    return [(op.inputs[0].dtype.base_dtype, TensorShape(out))]


register_op("SpaceToDepth", _space_to_depth_infer)
register_op("DepthToSpace", _depth_to_space_infer)


@RegisterGradient("SpaceToDepth")
def _space_to_depth_grad(op, grad):
    return [depth_to_space(_dense(grad), op.get_attr("block_size"),
                           data_format=op.get_attr("data_format"))]


@RegisterGradient("DepthToSpace")
def _depth_to_space_grad(op, grad):
    return [space_to_depth(_dense(grad), op.get_attr("block_size"),
                           data_format=op.get_attr("data_format"))]


def _format(data_format):
    return data_format.decode() if isinstance(data_format, bytes) else data_format


def space_to_depth(input, block_size, name=None, data_format="NHWC"):  # noqa: A002
    """Move each ``block_size x block_size`` block of the spatial dimensions into depth."""
    return _apply("SpaceToDepth", [input], {"block_size": int(block_size),
                                            "data_format": _format(data_format)}, name)


def depth_to_space(input, block_size, name=None, data_format="NHWC"):  # noqa: A002
    """The inverse of ``space_to_depth``: spread depth over ``block_size x block_size``
    spatial blocks."""
    return _apply("DepthToSpace", [input], {"block_size": int(block_size),
                                            "data_format": _format(data_format)}, name)


# --- ExtractImagePatches / ExtractVolumePatches -----------------------------------------------
def _window_list(op, attr, rank):
    v = list(op.get_attr(attr))
    if len(v) < rank:
        raise ValueError(f"Attr '{attr}' of '{op.type}' Op passed list of length {len(v)} "
                         f"less than minimum {rank}.")
    return v


def _patches_infer(op, rank, attrs):
    """Shape of a patch extractor over ``rank - 2`` spatial dimensions."""
    x = op.inputs[0]
    ksizes, strides = _window_list(op, attrs[0], rank), _window_list(op, attrs[1], rank)
    rates = _window_list(op, attrs[2], rank) if len(attrs) > 2 else [1] * rank
    padding = _check_padding(op.get_attr("padding"))
    if x.shape.ndims not in (None, rank):
        raise ValueError(f"Shape must be rank {rank} but is rank {x.shape.ndims} for "
                         f"'{op.type}'")
    dims = x.shape.as_list() if x.shape.ndims is not None else [None] * rank
    spatial = [conv_output_size(d, k, s, r, padding)[0]
               for d, k, s, r in zip(dims[1:-1], ksizes[1:-1], strides[1:-1], rates[1:-1])]
    depth = _mul(dims[-1], int(np.prod(ksizes[1:-1])))
    return [(x.dtype.base_dtype, TensorShape([dims[0]] + spatial + [depth]))]


register_op("ExtractImagePatches",
            lambda op: _patches_infer(op, 4, ("ksizes", "strides", "rates")))
register_op("ExtractVolumePatches", lambda op: _patches_infer(op, 5, ("ksizes", "strides")))


def _patches_grad(op, grad, extract):
    """The gradient of a patch extractor: every patch element adds its gradient to the input
    position it was copied from. The same extraction run on an image of positions (1-based;
    0 marks padding) says which one that is, and a segment sum adds them up (TF's gradient
    does the same through a sparse matrix product)."""
    from dflab.ops.math_ops import unsorted_segment_sum
    from dflab.ops.reduction_ops import reduce_prod
    from dflab.ops.sequence_ops import range as range_

    x = op.inputs[0]
    grad = _dense(grad)
    dims = _shape_of(x, out_type=_dt.int64)
    spatial = dims[1:-1]
    count = reduce_prod(spatial)
    ones = constant([1], _dt.int64)
    positions = reshape(range_(constant(1, _dt.int64), count + 1),
                        concat([ones, spatial, ones], 0))
    index = extract(positions)
    # [batch, out..., k..., depth] gradient against [out..., k...] positions, one per depth.
    k = reduce_prod(_shape_of(index, out_type=_dt.int64)[1:])
    batch, depth = dims[0], dims[-1]
    g = reshape(grad, stack([batch, k, depth]))
    g = transpose(g, [1, 0, 2])
    summed = unsorted_segment_sum(g, reshape(index, [-1]), count + 1)
    out = transpose(summed[1:], [1, 0, 2])
    return [reshape(out, dims)]


@RegisterGradient("ExtractImagePatches")
def _extract_image_patches_grad(op, grad):
    def extract(images):
        return _apply("ExtractImagePatches", [images], _attrs(op, "ksizes", "strides", "rates"))
    return _patches_grad(op, grad, extract)


@RegisterGradient("ExtractVolumePatches")
def _extract_volume_patches_grad(op, grad):
    def extract(volumes):
        return _apply("ExtractVolumePatches", [volumes], _attrs(op, "ksizes", "strides"))
    return _patches_grad(op, grad, extract)


def _attrs(op, *names):
    out = {n: list(op.get_attr(n)) for n in names}
    out["padding"] = op.get_attr("padding")
    return out


def _ints_attr(v, what):
    if v is None:
        raise TypeError(f"extract patches missing required argument '{what}'")
    return [int(e) for e in v]


def extract_image_patches(images, ksizes=None, strides=None, rates=None, padding=None,
                          name=None, sizes=None):
    """Patches of ``images`` ([batch, rows, cols, depth]) laid out in the depth dimension:
    each output position holds its ``ksizes`` window (sampled every ``rates``), row-major,
    ``depth`` values per window element."""
    if sizes is not None:
        if ksizes is not None:
            raise ValueError("Cannot specify both 'sizes' and 'ksizes'")
        ksizes = sizes
    attrs = {"ksizes": _ints_attr(ksizes, "ksizes"), "strides": _ints_attr(strides, "strides"),
             "rates": _ints_attr(rates, "rates"), "padding": _check_padding(padding)}
    return _apply("ExtractImagePatches", [images], attrs, name)


def extract_patches(images, sizes, strides, rates, padding, name=None):
    """TF 2.x's spelling of ``extract_image_patches`` (``tf.image.extract_patches``)."""
    return extract_image_patches(images, sizes, strides, rates, padding, name)


def extract_volume_patches(input, ksizes, strides, padding, name=None):  # noqa: A002
    """The 3-D ``extract_image_patches``: ``input`` is [batch, planes, rows, cols, depth]."""
    attrs = {"ksizes": _ints_attr(ksizes, "ksizes"), "strides": _ints_attr(strides, "strides"),
             "padding": _check_padding(padding)}
    return _apply("ExtractVolumePatches", [input], attrs, name)


__all__ = ["space_to_batch_nd", "batch_to_space_nd", "space_to_batch", "batch_to_space",
           "required_space_to_batch_paddings", "space_to_depth", "depth_to_space",
           "extract_image_patches", "extract_volume_patches"]
