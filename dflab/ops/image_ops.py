"""``tf.image`` geometry: resizing (the four resize ops with their gradients, and TF 1.x's
``resize_images``), flips, rotations, transposes, crops and pads.

The resize ops are registered here with their shape rules and gradients (kernels in
``dflab.kernels.image_kernels``); the rest are built from array ops the way TF builds them, so
they run on any device and differentiate through those ops. Images are ``[height, width,
channels]`` or batches ``[batch, height, width, channels]``; a 3-D image is treated as a
batch of one where an op needs 4-D. Colour ops, codecs and boxes are in ``image_color_ops``,
``image_codec_ops`` and ``image_box_ops``.
"""

from __future__ import annotations

import builtins as _py

import numpy as np

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.constant_op import constant_value, constant_value_as_shape
from dflab.framework.registry import NotDifferentiable, RegisterGradient, register_op
from dflab.framework.tensor_shape import TensorShape
from dflab.ops import array_ops, control_flow_ops, random_ops
from dflab.ops import math_ops as _m
from dflab.ops.manip_ops import reverse
from dflab.ops.slicing_ops import slice as _slice

_NUMERIC_IMAGE = (_dt.int8, _dt.uint8, _dt.int16, _dt.uint16, _dt.int32, _dt.int64,
                  _dt.float16, _dt.float32, _dt.float64)


# --- resize ops -----------------------------------------------------------------------------------
def _resize_infer(op, out_dtype=None):
    images, size = op.inputs
    if images.dtype.base_dtype not in _NUMERIC_IMAGE:
        raise TypeError(f"{op.type}: images of type {images.dtype.base_dtype.name} cannot be "
                        "resized")
    shape = images.shape.with_rank(4)
    size.shape.with_rank(1)
    hw = constant_value_as_shape(size) if size.shape.as_tuple() == (2,) else TensorShape(
        [None, None])
    if hw.ndims is None:
        hw = TensorShape([None, None])
    dims = shape.as_list()
    return [(out_dtype or images.dtype.base_dtype,
             TensorShape([dims[0], hw.as_list()[0], hw.as_list()[1], dims[3]]))]


for _t in ("ResizeBilinear", "ResizeBicubic", "ResizeArea"):
    register_op(_t, lambda op: _resize_infer(op, _dt.float32))
register_op("ResizeNearestNeighbor", _resize_infer)
NotDifferentiable("ResizeArea")


def _grad_like_original_infer(op):
    grads, original = op.inputs
    return [(original.dtype.base_dtype, original.shape)]


def _nearest_grad_infer(op):
    grads, size = op.inputs
    hw = constant_value_as_shape(size) if size.shape.as_tuple() == (2,) else TensorShape(
        [None, None])
    dims = grads.shape.with_rank(4).as_list()
    return [(grads.dtype.base_dtype, TensorShape([dims[0], *hw.as_list(), dims[3]]))]


for _t in ("ResizeBilinearGrad", "ResizeBicubicGrad"):
    register_op(_t, _grad_like_original_infer)
    NotDifferentiable(_t)
register_op("ResizeNearestNeighborGrad", _nearest_grad_infer)
NotDifferentiable("ResizeNearestNeighborGrad")


def _resize_attrs(op):
    return {"align_corners": op.get_attr("align_corners"),
            "half_pixel_centers": op.get_attr("half_pixel_centers")}


def _float_image_grad(op_type):
    def grad(op, g):
        image = op.inputs[0]
        if not image.dtype.base_dtype.is_floating:
            return [None, None]
        return [_ops.apply_op(op_type, [g, image], _resize_attrs(op)).outputs[0], None]

    return grad


RegisterGradient("ResizeBilinear")(_float_image_grad("ResizeBilinearGrad"))
RegisterGradient("ResizeBicubic")(_float_image_grad("ResizeBicubicGrad"))


@RegisterGradient("ResizeNearestNeighbor")
def _resize_nearest_grad(op, g):
    image = op.inputs[0]
    size = array_ops.shape(image)[1:3] if not image.shape.is_fully_defined() else \
        image.shape.as_list()[1:3]
    size = _ops.convert_to_tensor(size, dtype=_dt.int32)
    return [_ops.apply_op("ResizeNearestNeighborGrad", [g, size], _resize_attrs(op)).outputs[0],
            None]


def _resize(op_type, images, size, align_corners, half_pixel_centers, name):
    images = _ops.convert_to_tensor(images, name="images")
    size = _ops.convert_to_tensor(size, dtype=_dt.int32, name="size")
    if align_corners and half_pixel_centers:
        raise ValueError("If half_pixel_centers is True, align_corners must be False.")
    attrs = {"align_corners": bool(align_corners), "half_pixel_centers": bool(half_pixel_centers)}
    return _ops.apply_op(op_type, [images, size], attrs, name).outputs[0]


def resize_bilinear(images, size, align_corners=False, name=None, half_pixel_centers=False):
    """Bilinear resize of a 4-D batch to ``size`` = [height, width]; float32 result."""
    return _resize("ResizeBilinear", images, size, align_corners, half_pixel_centers, name)


def resize_bicubic(images, size, align_corners=False, name=None, half_pixel_centers=False):
    """Bicubic resize (TF's kernel: a = -0.75; Keys' a = -0.5 with half-pixel centres)."""
    return _resize("ResizeBicubic", images, size, align_corners, half_pixel_centers, name)


def resize_nearest_neighbor(images, size, align_corners=False, name=None,
                            half_pixel_centers=False):
    """Nearest-neighbour resize; keeps the images' dtype."""
    return _resize("ResizeNearestNeighbor", images, size, align_corners, half_pixel_centers,
                   name)


def resize_area(images, size, align_corners=False, name=None):
    """Area (box-average) resize; float32 result, no gradient (as TF)."""
    return _resize("ResizeArea", images, size, align_corners, False, name)


class ResizeMethod:
    """TF 1.x's resize methods (``tf.compat.v1.image.ResizeMethod``)."""

    BILINEAR = 0
    NEAREST_NEIGHBOR = 1
    BICUBIC = 2
    AREA = 3


_RESIZERS = {ResizeMethod.BILINEAR: resize_bilinear,
             ResizeMethod.NEAREST_NEIGHBOR: resize_nearest_neighbor,
             ResizeMethod.BICUBIC: resize_bicubic, ResizeMethod.AREA: resize_area}
_METHOD_NAMES = {"bilinear": 0, "nearest": 1, "bicubic": 2, "area": 3}


def _as_batch(images):
    """(4-D images, whether the input was a batch)."""
    rank = images.shape.ndims
    if rank is None:
        raise ValueError("'images' contains no shape.")
    if rank not in (3, 4):
        raise ValueError("'images' must have either 3 or 4 dimensions.")
    if rank == 3:
        return array_ops.expand_dims(images, 0), False
    return images, True


def resize_images(images, size, method=ResizeMethod.BILINEAR, align_corners=False,
                  preserve_aspect_ratio=False, name=None):
    """TF 1.x's ``tf.image.resize_images`` (and ``tf.compat.v1.image.resize``): 3-D or 4-D
    images to ``size``; a resize to the same static size returns the images unchanged."""
    method = _METHOD_NAMES.get(method, method)
    if method not in _RESIZERS:
        raise ValueError(f"Resize method is not implemented: {method}")
    with _ops.name_scope(name, "resize", [images, size]):
        images = _ops.convert_to_tensor(images, name="images")
        images, is_batch = _as_batch(images)
        _, height, width, _ = images.shape.as_list()
        if not isinstance(size, _ops.Tensor) and len(size) != 2:
            raise ValueError("'size' must be a 1-D Tensor of 2 elements: new_height, "
                             "new_width")
        size = _ops.convert_to_tensor(size, dtype=_dt.int32, name="size")
        if not size.shape.is_compatible_with([2]) or not size.dtype.is_integer:
            raise ValueError("'size' must be a 1-D int32 Tensor")
        if preserve_aspect_ratio and None not in (height, width) and \
                constant_value(size) is not None:
            # Static sizes: TF's float32 arithmetic here, so the new size is known statically
            # (as TF's constant folding of the same ops makes it).
            wanted = constant_value(size)
            f32 = np.float32
            scale = _py.min(f32(wanted[0]) / f32(height), f32(wanted[1]) / f32(width))
            size = _ops.convert_to_tensor(
                [int(np.round(scale * f32(height))), int(np.round(scale * f32(width)))],
                dtype=_dt.int32, name="size")
        elif preserve_aspect_ratio:
            shape = array_ops.shape(images)
            h = _m.cast(shape[1], _dt.float32)
            w = _m.cast(shape[2], _dt.float32)
            scale = _m.minimum(_m.truediv(_m.cast(size[0], _dt.float32), h),
                               _m.truediv(_m.cast(size[1], _dt.float32), w))
            size = array_ops.stack([_m.cast(_m.round(_m.multiply(scale, h)), _dt.int32),
                                    _m.cast(_m.round(_m.multiply(scale, w)), _dt.int32)])
        new = constant_value(size)
        new_h, new_w = (int(new[0]), int(new[1])) if new is not None else (None, None)
        if None not in (height, width, new_h) and (height, width) == (new_h, new_w):
            return images if is_batch else array_ops.squeeze(images, [0])
        out = _RESIZERS[method](images, size, align_corners=align_corners)
        out.set_shape([None, new_h, new_w, None])
        return out if is_batch else array_ops.squeeze(out, [0])


resize = resize_images


# --- flips, rotations, transposes -----------------------------------------------------------------
def _check_at_least_3d(image, what="image"):
    rank = image.shape.ndims
    if rank is not None and rank < 3:
        raise ValueError(f"'{what}' (shape {image.shape}) must be at least three-dimensional.")
    if image.shape.ndims is None:
        raise ValueError(f"'{what}' must be fully defined.")
    if image.shape.ndims is not None and any(
            d == 0 for d in image.shape.as_list()[-3:]):
        raise ValueError(f"inner 3 dims of '{what}.shape' must be > 0: {image.shape}")


def _flip(image, axis, scope):
    with _ops.name_scope(None, scope, [image]):
        image = _ops.convert_to_tensor(image, name="image")
        _check_at_least_3d(image)
        rank = image.shape.ndims
        if rank not in (3, 4):
            raise ValueError("'image' must have either 3 or 4 dimensions.")
        return reverse(image, [axis + rank - 3])


def flip_left_right(image):
    """Mirror the width axis."""
    return _flip(image, 1, "flip_left_right")


def flip_up_down(image):
    """Mirror the height axis."""
    return _flip(image, 0, "flip_up_down")


def _random_flip(image, axis, seed, scope):
    with _ops.name_scope(None, scope, [image]) as name:
        image = _ops.convert_to_tensor(image, name="image")
        _check_at_least_3d(image)
        rank = image.shape.ndims
        if rank == 3:
            flip = _m.less(random_ops.random_uniform([], 0, 1.0, seed=seed), 0.5)
            out = control_flow_ops.cond(flip, lambda: reverse(image, [axis]),
                                        lambda: image, name=name)
            out.set_shape(image.shape)
            return out
        if rank != 4:
            raise ValueError("'image' must have either 3 or 4 dimensions.")
        batch = array_ops.shape(image)[0]
        draws = random_ops.random_uniform(array_ops.stack([batch]), 0, 1.0, seed=seed)
        flips = _m.cast(_m.round(array_ops.reshape(draws, array_ops.stack([batch, 1, 1, 1]))),
                        image.dtype.base_dtype)
        one = _ops.convert_to_tensor(1, dtype=image.dtype.base_dtype)
        return _m.add(_m.multiply(flips, reverse(image, [axis + 1])),
                      _m.multiply(_m.subtract(one, flips), image))


def random_flip_left_right(image, seed=None):
    """Mirror the width axis with probability 1/2 (each image of a batch on its own)."""
    return _random_flip(image, 1, seed, "random_flip_left_right")


def random_flip_up_down(image, seed=None):
    """Mirror the height axis with probability 1/2 (each image of a batch on its own)."""
    return _random_flip(image, 0, seed, "random_flip_up_down")


def transpose(image, name=None):
    """Swap height and width."""
    with _ops.name_scope(name, "transpose", [image]):
        image = _ops.convert_to_tensor(image, name="image")
        _check_at_least_3d(image)
        rank = image.shape.ndims
        if rank == 3:
            return array_ops.transpose(image, [1, 0, 2], name=name)
        if rank == 4:
            return array_ops.transpose(image, [0, 2, 1, 3], name=name)
        raise ValueError("'image' must have either 3 or 4 dimensions.")


transpose_image = transpose


def _rot90_once(image, k, batch):
    h, w = (1, 2) if batch else (0, 1)
    perm = [0, 2, 1, 3] if batch else [1, 0, 2]
    if k == 1:
        return array_ops.transpose(reverse(image, [w]), perm)
    if k == 2:
        return reverse(image, [h, w])
    if k == 3:
        return reverse(array_ops.transpose(image, perm), [w])
    return image


def rot90(image, k=1, name=None):
    """Rotate by ``k`` quarter turns counter-clockwise."""
    with _ops.name_scope(name, "rot90", [image, k]) as scope:
        image = _ops.convert_to_tensor(image, name="image")
        _check_at_least_3d(image)
        rank = image.shape.ndims
        if rank not in (3, 4):
            raise ValueError("'image' must have either 3 or 4 dimensions.")
        batch = rank == 4
        # Always through a case on k, as TF builds it (so height and width are not static).
        k_mod = _m.floormod(_ops.convert_to_tensor(k, dtype=_dt.int32), 4)
        cases = [(_m.equal(k_mod, i), lambda i=i: _rot90_once(image, i, batch))
                 for i in (1, 2, 3)]
        out = control_flow_ops.case(cases, default=lambda: image, exclusive=True, name=scope)
        dims = image.shape.as_list()
        if batch:
            out.set_shape([dims[0], None, None, dims[3]])
        else:
            out.set_shape([None, None, dims[2]])
        return out


# --- crops and pads -------------------------------------------------------------------------------
def _dims(image):
    """[batch?, height, width, channels] as ints where static, else scalar tensors."""
    static = image.shape.as_list()
    dynamic = array_ops.shape(image)
    return [d if d is not None else dynamic[i] for i, d in enumerate(static)]


def _static_int(v):
    if isinstance(v, _ops.Tensor):
        c = constant_value(v)
        return None if c is None else int(c)
    return int(v)


def _to_batch(image):
    image = _ops.convert_to_tensor(image, name="image")
    _check_at_least_3d(image)
    if image.shape.ndims == 3:
        return array_ops.expand_dims(image, 0), False
    if image.shape.ndims != 4:
        raise ValueError(f"'image' (shape {image.shape}) must have either 3 or 4 dimensions.")
    return image, True


def _from_batch(image, is_batch):
    return image if is_batch else array_ops.squeeze(image, [0])


def crop_to_bounding_box(image, offset_height, offset_width, target_height, target_width):
    """The ``target_height x target_width`` window at (``offset_height``,
    ``offset_width``)."""
    with _ops.name_scope(None, "crop_to_bounding_box", [image]):
        image, is_batch = _to_batch(image)
        _, h, w, _ = _dims(image)
        oh, ow = _static_int(offset_height), _static_int(offset_width)
        th, tw = _static_int(target_height), _static_int(target_width)
        if oh is not None and oh < 0:
            raise ValueError("offset_height must be >= 0.")
        if ow is not None and ow < 0:
            raise ValueError("offset_width must be >= 0.")
        if th is not None and th <= 0:
            raise ValueError("target_height must be > 0.")
        if tw is not None and tw <= 0:
            raise ValueError("target_width must be > 0.")
        if None not in (oh, th) and isinstance(h, int) and h < oh + th:
            raise ValueError("height must be >= target + offset.")
        if None not in (ow, tw) and isinstance(w, int) and w < ow + tw:
            raise ValueError("width must be >= target + offset.")
        begin = array_ops.stack([0, offset_height, offset_width, 0])
        size = array_ops.stack([-1, target_height, target_width, -1])
        cropped = _slice(image, begin, size)
        cropped.set_shape([image.shape.as_list()[0], th, tw, image.shape.as_list()[3]])
        return _from_batch(cropped, is_batch)


def pad_to_bounding_box(image, offset_height, offset_width, target_height, target_width):
    """Zero-pad to ``target_height x target_width`` with the image at (``offset_height``,
    ``offset_width``)."""
    with _ops.name_scope(None, "pad_to_bounding_box", [image]):
        image, is_batch = _to_batch(image)
        _, h, w, _ = _dims(image)
        oh, ow = _static_int(offset_height), _static_int(offset_width)
        th, tw = _static_int(target_height), _static_int(target_width)
        after_h = _m.subtract(_m.subtract(target_height, offset_height), h) \
            if None in (oh, th) or not isinstance(h, int) else th - oh - h
        after_w = _m.subtract(_m.subtract(target_width, offset_width), w) \
            if None in (ow, tw) or not isinstance(w, int) else tw - ow - w
        if oh is not None and oh < 0:
            raise ValueError("offset_height must be >= 0")
        if ow is not None and ow < 0:
            raise ValueError("offset_width must be >= 0")
        if isinstance(after_h, int) and after_h < 0:
            raise ValueError("height must be <= target - offset")
        if isinstance(after_w, int) and after_w < 0:
            raise ValueError("width must be <= target - offset")
        paddings = array_ops.reshape(
            array_ops.stack([0, 0, offset_height, after_h, offset_width, after_w, 0, 0]),
            [4, 2])
        padded = array_ops.pad(image, paddings)
        padded.set_shape([image.shape.as_list()[0], th, tw, image.shape.as_list()[3]])
        return _from_batch(padded, is_batch)


def resize_image_with_crop_or_pad(image, target_height, target_width):
    """Centre-crop or zero-pad (each axis on its own) to the target size."""
    with _ops.name_scope(None, "resize_image_with_crop_or_pad", [image]):
        image, is_batch = _to_batch(image)
        th, tw = _static_int(target_height), _static_int(target_width)
        if th is not None and th <= 0:
            raise ValueError("target_height must be > 0.")
        if tw is not None and tw <= 0:
            raise ValueError("target_width must be > 0.")
        _, h, w, _ = _dims(image)

        def half_diff(target, size):
            if isinstance(target, int) and isinstance(size, int):
                return _py.max((target - size) // 2, 0), _py.max((size - target) // 2, 0)
            diff = _m.subtract(target, size)
            return (_m.maximum(_m.floordiv(diff, 2), 0),
                    _m.maximum(_m.floordiv(_m.negative(diff), 2), 0))

        th_v = th if th is not None else target_height
        tw_v = tw if tw is not None else target_width
        pad_h, crop_h = half_diff(th_v, h)
        pad_w, crop_w = half_diff(tw_v, w)
        min_h = _py.min(th_v, h) if isinstance(th_v, int) and isinstance(h, int) else \
            _m.minimum(th_v, h)
        min_w = _py.min(tw_v, w) if isinstance(tw_v, int) and isinstance(w, int) else \
            _m.minimum(tw_v, w)
        cropped = crop_to_bounding_box(image, crop_h, crop_w, min_h, min_w)
        padded = pad_to_bounding_box(cropped, pad_h, pad_w, th_v, tw_v)
        padded.set_shape([image.shape.as_list()[0], th, tw, image.shape.as_list()[3]])
        return _from_batch(padded, is_batch)


resize_with_crop_or_pad = resize_image_with_crop_or_pad


def central_crop(image, central_fraction):
    """The central ``central_fraction`` of the height and the width."""
    with _ops.name_scope(None, "central_crop", [image]):
        image = _ops.convert_to_tensor(image, name="image")
        fraction = float(central_fraction)
        if fraction <= 0.0 or fraction > 1.0:
            raise ValueError("central_fraction must be within (0, 1]")
        if fraction == 1.0:
            return image
        _check_at_least_3d(image)
        rank = image.shape.ndims
        if rank not in (3, 4):
            raise ValueError(f"`image` should either be a Tensor with rank = 3 or rank = 4. "
                             f"Had rank = {rank}.")
        hw = image.shape.as_list()[-3:-1]
        if None in hw:
            raise ValueError("central_crop needs a static height and width")
        starts = [int((float(d) - float(d) * fraction) / 2) for d in hw]
        sizes = [d - 2 * s for d, s in zip(hw, starts)]
        if rank == 3:
            return _slice(image, [starts[0], starts[1], 0], [sizes[0], sizes[1], -1])
        return _slice(image, [0, starts[0], starts[1], 0], [-1, sizes[0], sizes[1], -1])


def resize_image_with_pad(image, target_height, target_width, method=ResizeMethod.BILINEAR,
                          align_corners=False):
    """Resize keeping the aspect ratio so the image fits, then zero-pad to the target."""
    with _ops.name_scope(None, "resize_image_with_pad", [image]):
        image, is_batch = _to_batch(image)
        _, h, w, _ = image.shape.as_list()
        th, tw = int(target_height), int(target_width)
        if th <= 0 or tw <= 0:
            raise ValueError("target_height and target_width must be > 0.")
        if None in (h, w):
            raise ValueError("resize_image_with_pad needs a static height and width")
        # TF's float32 arithmetic: the padding comes from the unrounded resized size.
        f32 = np.float32
        ratio = _py.max(f32(w) / f32(tw), f32(h) / f32(th))
        resized_hf, resized_wf = f32(h) / ratio, f32(w) / ratio
        resized_h, resized_w = int(np.floor(resized_hf)), int(np.floor(resized_wf))
        pad_h = _py.max(0, int(np.floor((f32(th) - resized_hf) / 2)))
        pad_w = _py.max(0, int(np.floor((f32(tw) - resized_wf) / 2)))
        resized = resize_images(image, [resized_h, resized_w], method, align_corners)
        padded = pad_to_bounding_box(resized, pad_h, pad_w, th, tw)
        return _from_batch(padded, is_batch)


def random_crop(value, size, seed=None, name=None):
    """A random ``size`` slice of ``value`` (uniform offsets)."""
    from dflab.ops.random_ops import random_crop as _random_crop

    return _random_crop(value, size, seed=seed, name=name)


__all__: list[str] = []  # reached as tf.image.* (see dflab.namespaces)
