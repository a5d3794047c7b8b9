"""``tf.image`` colour and statistics: dtype conversion, brightness, contrast, gamma, hue and
saturation (and their random versions), HSV/YIQ/YUV/greyscale conversions, per-image
standardization, total variation, image gradients, Sobel edges, PSNR and (MS-)SSIM.

``AdjustContrastv2``, ``AdjustHue``, ``AdjustSaturation``, ``RGBToHSV`` and ``HSVToRGB`` are
ops (kernels in ``dflab.kernels.image_color_kernels``; like TF's, only ``RGBToHSV`` has a
gradient); the rest are composites built as TF builds them: an integer image is converted to
float32 in [0, 1] before an adjustment and back (saturating) after it.
"""

from __future__ import annotations

import numpy as np

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.registry import NotDifferentiable, RegisterGradient, register_op
from dflab.ops import array_ops, random_ops
from dflab.ops import math_ops as _m
from dflab.ops.more_math_ops import reduce_std, saturate_cast


# --- dtype conversion -----------------------------------------------------------------------------
def convert_image_dtype(image, dtype, saturate=False, name=None):
    """Convert between image dtypes, rescaling: floats are in [0, 1), integers in [0, MAX]."""
    image = _ops.convert_to_tensor(image, name="image")
    dtype = _dt.as_dtype(dtype).base_dtype
    src = image.dtype.base_dtype
    if not (dtype.is_floating or dtype.is_integer):
        raise AttributeError("dtype must be either floating point or integer")
    if not (src.is_floating or src.is_integer):
        raise AttributeError("image dtype must be either floating point or integer")
    if dtype is src:
        return array_ops.identity(image, name=name)
    with _ops.name_scope(name, "convert_image", [image]) as scope:
        if src.is_integer and dtype.is_integer:
            scale_in, scale_out = int(src.max), int(dtype.max)
            if scale_in > scale_out:
                scaled = _m.floordiv(image, _ops.convert_to_tensor(
                    (scale_in + 1) // (scale_out + 1), dtype=src))
                return (saturate_cast if saturate else _m.cast)(scaled, dtype, name=scope)
            cast = (saturate_cast if saturate else _m.cast)(image, dtype)
            return _m.multiply(cast, _ops.convert_to_tensor((scale_out + 1) // (scale_in + 1),
                                                            dtype=dtype), name=scope)
        if src.is_floating and dtype.is_floating:
            return _m.cast(image, dtype, name=scope)
        if src.is_integer:
            cast = _m.cast(image, dtype)
            return _m.multiply(cast, _ops.convert_to_tensor(1.0 / float(src.max), dtype=dtype),
                               name=scope)
        scaled = _m.multiply(image, _ops.convert_to_tensor(float(dtype.max) + 0.5, dtype=src))
        return (saturate_cast if saturate else _m.cast)(scaled, dtype, name=scope)


def _as_float(image):
    """(float image, original dtype): float16/32 stay, others go to float32 in [0, 1]."""
    image = _ops.convert_to_tensor(image, name="image")
    orig = image.dtype.base_dtype
    if orig in (_dt.float16, _dt.float32):
        return image, orig
    return convert_image_dtype(image, _dt.float32), orig


# --- ops: contrast, hue, saturation, HSV --------------------------------------------------------
def _float_image_infer(op):
    image = op.inputs[0]
    if image.dtype.base_dtype not in (_dt.float16, _dt.float32, _dt.float64):
        raise TypeError(f"{op.type}: images must be float16, float32 or float64, got "
                        f"{image.dtype.base_dtype.name}")
    image.shape.with_rank_at_least(3)
    if image.shape.ndims is not None and image.shape.as_list()[-1] not in (None, 3) and \
            op.type != "AdjustContrastv2":
        raise ValueError(f"{op.type}: the last dimension must be 3 (RGB), got {image.shape}")
    return [(image.dtype.base_dtype, image.shape)]


for _t in ("AdjustContrastv2", "AdjustHue", "AdjustSaturation", "RGBToHSV", "HSVToRGB"):
    register_op(_t, _float_image_infer)
for _t in ("AdjustContrastv2", "AdjustHue", "AdjustSaturation", "HSVToRGB"):
    NotDifferentiable(_t)


def _apply_with_scalar(op_type, image, value, name):
    value = _ops.convert_to_tensor(value, dtype=_dt.float32)
    return _ops.apply_op(op_type, [image, value], None, name).outputs[0]


def rgb_to_hsv(images, name=None):
    """RGB in [0, 1] to HSV (hue in [0, 1))."""
    images = _ops.convert_to_tensor(images, name="images")
    return _ops.apply_op("RGBToHSV", [images], None, name).outputs[0]


def hsv_to_rgb(images, name=None):
    images = _ops.convert_to_tensor(images, name="images")
    return _ops.apply_op("HSVToRGB", [images], None, name).outputs[0]


def _hsv_composite(rgb):
    """RGB to HSV from elementwise ops: its derivative is RGBToHSV's gradient (TF's
    piecewise formula away from ties)."""
    r, g, b = array_ops.unstack(rgb, axis=-1)
    v = _m.maximum(_m.maximum(r, g), b)
    spread = _m.subtract(v, _m.minimum(_m.minimum(r, g), b))
    zero = array_ops.zeros_like(v)
    safe_v = array_ops.where(_m.greater(v, zero), v, array_ops.ones_like(v))
    s = array_ops.where(_m.greater(v, zero), _m.truediv(spread, safe_v), zero)
    safe_spread = array_ops.where(_m.greater(spread, zero), spread, array_ops.ones_like(v))
    norm = _m.truediv(array_ops.ones_like(v), _m.multiply(safe_spread, 6.0))
    h = array_ops.where(_m.equal(r, v), _m.multiply(norm, _m.subtract(g, b)),
                        array_ops.where(_m.equal(g, v),
                                        _m.add(_m.multiply(norm, _m.subtract(b, r)), 2.0 / 6.0),
                                        _m.add(_m.multiply(norm, _m.subtract(r, g)), 4.0 / 6.0)))
    h = array_ops.where(_m.greater(spread, zero), h, zero)
    h = array_ops.where(_m.less(h, zero), _m.add(h, 1.0), h)
    return array_ops.stack([h, s, v], axis=-1)


@RegisterGradient("RGBToHSV")
def _rgb_to_hsv_grad(op, grad):
    from dflab.ops.gradients import gradients

    rgb = op.inputs[0]
    return gradients(_hsv_composite(rgb), [rgb], grad_ys=[grad])


def adjust_contrast(images, contrast_factor):
    """``(x - mean) * contrast_factor + mean``, the mean over each image's height and width
    per channel."""
    with _ops.name_scope(None, "adjust_contrast", [images, contrast_factor]) as name:
        flt, orig = _as_float(images)
        adjusted = _apply_with_scalar("AdjustContrastv2", flt, contrast_factor, name)
        return convert_image_dtype(adjusted, orig, saturate=True)


def adjust_brightness(image, delta):
    """``image + delta`` (in [0, 1] floats for integer images, saturating back)."""
    with _ops.name_scope(None, "adjust_brightness", [image, delta]) as name:
        flt, orig = _as_float(image)
        adjusted = _m.add(flt, _m.cast(delta, flt.dtype.base_dtype), name=name)
        return convert_image_dtype(adjusted, orig, saturate=True)


def adjust_gamma(image, gamma=1, gain=1):
    """``gain * image ** gamma``."""
    with _ops.name_scope(None, "adjust_gamma", [image, gamma, gain]):
        flt, orig = _as_float(image)
        if not _ops.is_tensor_like(gamma) and gamma < 0:
            raise ValueError("Gamma should be a non-negative real number.")
        dt = flt.dtype.base_dtype
        adjusted = _m.multiply(_ops.convert_to_tensor(gain, dtype=dt),
                               _m.pow(flt, _ops.convert_to_tensor(gamma, dtype=dt)))
        return convert_image_dtype(adjusted, orig, saturate=True)


def adjust_hue(image, delta, name=None):
    """Rotate the hue by ``delta`` (a fraction of a turn, in [-1, 1])."""
    with _ops.name_scope(name, "adjust_hue", [image]) as scope:
        flt, orig = _as_float(image)
        return convert_image_dtype(_apply_with_scalar("AdjustHue", flt, delta, scope), orig)


def adjust_saturation(image, saturation_factor, name=None):
    """Scale the saturation by ``saturation_factor`` (clipped to [0, 1])."""
    with _ops.name_scope(name, "adjust_saturation", [image]) as scope:
        flt, orig = _as_float(image)
        return convert_image_dtype(
            _apply_with_scalar("AdjustSaturation", flt, saturation_factor, scope), orig)


def random_brightness(image, max_delta, seed=None):
    if max_delta < 0:
        raise ValueError("max_delta must be non-negative.")
    return adjust_brightness(image, random_ops.random_uniform([], -max_delta, max_delta,
                                                              seed=seed))


def random_contrast(image, lower, upper, seed=None):
    if upper <= lower:
        raise ValueError("upper must be > lower.")
    if lower < 0:
        raise ValueError("lower must be non-negative.")
    return adjust_contrast(image, random_ops.random_uniform([], lower, upper, seed=seed))


def random_hue(image, max_delta, seed=None):
    if max_delta > 0.5:
        raise ValueError("max_delta must be <= 0.5.")
    if max_delta < 0:
        raise ValueError("max_delta must be non-negative.")
    return adjust_hue(image, random_ops.random_uniform([], -max_delta, max_delta, seed=seed))


def random_saturation(image, lower, upper, seed=None):
    if upper <= lower:
        raise ValueError("upper must be > lower.")
    if lower < 0:
        raise ValueError("lower must be non-negative.")
    return adjust_saturation(image, random_ops.random_uniform([], lower, upper, seed=seed))


# --- colour spaces ------------------------------------------------------------------------------
# TF's conversion matrices (each multiplies a pixel's channel vector from the right).
_RGB_TO_YIQ = [[0.299, 0.59590059, 0.2115], [0.587, -0.27455667, -0.52273617],
               [0.114, -0.32134392, 0.31119955]]
_YIQ_TO_RGB = [[1, 1, 1], [0.95598634, -0.27201283, -1.10674021],
               [0.6208248, -0.64720424, 1.70423049]]
_RGB_TO_YUV = [[0.299, -0.14714119, 0.61497538], [0.587, -0.28886916, -0.51496512],
               [0.114, 0.43601035, -0.10001026]]
_YUV_TO_RGB = [[1, 1, 1], [0, -0.394642334, 2.03206185], [1.13988303, -0.58062185, 0]]


def _linear_colour(images, matrix):
    images = _ops.convert_to_tensor(images, name="images")
    kernel = _ops.convert_to_tensor(matrix, dtype=images.dtype.base_dtype, name="kernel")
    ndims = images.shape.ndims
    return _m.tensordot(images, kernel, axes=[[ndims - 1], [0]])


def rgb_to_yiq(images):
    return _linear_colour(images, _RGB_TO_YIQ)


def yiq_to_rgb(images):
    return _linear_colour(images, _YIQ_TO_RGB)


def rgb_to_yuv(images):
    return _linear_colour(images, _RGB_TO_YUV)


def yuv_to_rgb(images):
    return _linear_colour(images, _YUV_TO_RGB)


def rgb_to_grayscale(images, name=None):
    """Luma (ITU-R 601 weights) as a one-channel image of the same dtype."""
    with _ops.name_scope(name, "rgb_to_grayscale", [images]) as scope:
        images = _ops.convert_to_tensor(images, name="images")
        orig = images.dtype.base_dtype
        flt = convert_image_dtype(images, _dt.float32)
        gray = _m.tensordot(flt, _ops.convert_to_tensor([0.2989, 0.5870, 0.1140]), [-1, -1])
        return convert_image_dtype(array_ops.expand_dims(gray, -1), orig, name=scope)


def grayscale_to_rgb(images, name=None):
    """The one channel repeated three times."""
    with _ops.name_scope(name, "grayscale_to_rgb", [images]) as scope:
        images = _ops.convert_to_tensor(images, name="images")
        shape = images.shape
        if shape.ndims is not None and (shape.ndims < 2 or shape.as_list()[-1] not in
                                        (None, 1)):
            raise ValueError("Last dimension of a grayscale image should be size 1.")
        multiples = [1] * (shape.ndims - 1) + [3]
        return array_ops.tile(images, multiples, name=scope)


# --- statistics -----------------------------------------------------------------------------------
def per_image_standardization(image):
    """Each image scaled to zero mean and unit variance (the deviation at least
    ``1 / sqrt(pixels)``), in float32."""
    with _ops.name_scope(None, "per_image_standardization", [image]) as scope:
        image = _ops.convert_to_tensor(image, name="image")
        if image.shape.ndims is not None and image.shape.ndims < 3:
            raise ValueError(f"'image' (shape {image.shape}) must be at least "
                             "three-dimensional.")
        image = _m.cast(image, _dt.float32)
        num_pixels = _m.reduce_prod(array_ops.shape(image)[-3:])
        mean = _m.reduce_mean(image, axis=[-1, -2, -3], keepdims=True)
        stddev = reduce_std(image, axis=[-1, -2, -3], keepdims=True)
        adjusted = _m.maximum(stddev, _m.rsqrt(_m.cast(num_pixels, _dt.float32)))
        return _m.divide(_m.subtract(image, mean), adjusted, name=scope)


def total_variation(images, name=None):
    """The sum of absolute differences of neighbouring pixels (per image of a batch)."""
    with _ops.name_scope(name, "total_variation"):
        images = _ops.convert_to_tensor(images)
        ndims = images.shape.ndims
        if ndims == 3:
            dif1 = _m.subtract(images[1:, :, :], images[:-1, :, :])
            dif2 = _m.subtract(images[:, 1:, :], images[:, :-1, :])
            axis = None
        elif ndims == 4:
            dif1 = _m.subtract(images[:, 1:, :, :], images[:, :-1, :, :])
            dif2 = _m.subtract(images[:, :, 1:, :], images[:, :, :-1, :])
            axis = [1, 2, 3]
        else:
            raise ValueError("'images' must be either 3 or 4-dimensional.")
        return _m.add(_m.reduce_sum(_m.abs(dif1), axis=axis),
                      _m.reduce_sum(_m.abs(dif2), axis=axis))


def image_gradients(image):
    """(dy, dx): forward differences, zero in the last row (column)."""
    if image.shape.ndims != 4:
        raise ValueError(f"image_gradients expects a 4D tensor [batch_size, h, w, d], not "
                         f"{image.shape}.")
    shape = array_ops.shape(image)
    batch, height, width, depth = array_ops.unstack(shape)
    dy = _m.subtract(image[:, 1:, :, :], image[:, :-1, :, :])
    dx = _m.subtract(image[:, :, 1:, :], image[:, :, :-1, :])
    dy = array_ops.concat([dy, array_ops.zeros(array_ops.stack([batch, 1, width, depth]),
                                               image.dtype.base_dtype)], 1)
    dx = array_ops.concat([dx, array_ops.zeros(array_ops.stack([batch, height, 1, depth]),
                                               image.dtype.base_dtype)], 2)
    return array_ops.reshape(dy, shape), array_ops.reshape(dx, shape)


def _per_channel_conv(x, kernel_hw):
    """Each channel of the 4-D ``x`` convolved (VALID) with the 2-D ``kernel_hw``: channels
    are folded into the batch, so one conv2d with a single input and output channel does
    what TF's depthwise convolution with the kernel tiled over channels does."""
    from dflab.ops.nn_ops import conv2d

    shape = array_ops.shape(x)
    c = x.shape.as_list()[-1]
    folded = array_ops.reshape(array_ops.transpose(x, [0, 3, 1, 2]),
                               array_ops.stack([-1, shape[1], shape[2], 1]))
    k = array_ops.reshape(kernel_hw, array_ops.stack([array_ops.shape(kernel_hw)[0],
                                                      array_ops.shape(kernel_hw)[1], 1, 1]))
    y = conv2d(folded, k, strides=[1, 1, 1, 1], padding="VALID")
    ys = array_ops.shape(y)
    y = array_ops.reshape(y, array_ops.stack([shape[0], c if c is not None else shape[3],
                                              ys[1], ys[2]]))
    return array_ops.transpose(y, [0, 2, 3, 1])


def sobel_edges(image):
    """Sobel responses ``[..., 2]`` (vertical then horizontal) per channel, with the image
    padded by reflection."""
    kernels = np.array([[[-1, -2, -1], [0, 0, 0], [1, 2, 1]],
                        [[-1, 0, 1], [-2, 0, 2], [-1, 0, 1]]], dtype=np.float64)
    static = image.shape
    padded = array_ops.pad(image, [[0, 0], [1, 1], [1, 1], [0, 0]], mode="REFLECT")
    outs = [_per_channel_conv(padded, _ops.convert_to_tensor(k, dtype=image.dtype.base_dtype))
            for k in kernels]
    out = array_ops.stack(outs, axis=-1)
    out.set_shape(static.concatenate([2]))
    return out


def _check_compatible(img1, img2):
    s1, s2 = img1.shape.with_rank_at_least(3), img2.shape.with_rank_at_least(3)
    s1[-3:].assert_is_compatible_with(s2[-3:])


def psnr(a, b, max_val, name=None):
    """Peak signal-to-noise ratio in dB, per image."""
    with _ops.name_scope(name, "PSNR", [a, b]):
        a, b = _ops.convert_to_tensor(a), _ops.convert_to_tensor(b)
        _check_compatible(a, b)
        max_val = convert_image_dtype(_m.cast(max_val, a.dtype.base_dtype), _dt.float32)
        a, b = convert_image_dtype(a, _dt.float32), convert_image_dtype(b, _dt.float32)
        mse = _m.reduce_mean(_m.squared_difference(a, b), [-3, -2, -1])
        return array_ops.identity(_m.subtract(
            _m.truediv(_m.multiply(20.0, _m.log(max_val)), _m.log(10.0)),
            _m.multiply(np.float32(10 / np.log(10)), _m.log(mse)), name="psnr"))


def _gaussian(size, sigma, dtype):
    coords = np.arange(size, dtype=np.float64) - (size - 1) / 2.0
    g = coords ** 2 * (-0.5 / sigma ** 2)
    g = g[None, :] + g[:, None]
    g = np.exp(g - g.max())
    return _ops.convert_to_tensor((g / g.sum()).astype(dtype.as_numpy_dtype))


def _ssim_per_channel(img1, img2, max_val, filter_size, filter_sigma, k1, k2,
                      return_index_map=False):
    kernel = _gaussian(int(filter_size), float(filter_sigma), img1.dtype.base_dtype)

    def reducer(x):
        shape = array_ops.shape(x)
        flat = array_ops.reshape(x, array_ops.concat([[-1], shape[-3:]], 0))
        y = _per_channel_conv(flat, kernel)
        return array_ops.reshape(y, array_ops.concat([shape[:-3], array_ops.shape(y)[1:]], 0))

    c1 = (k1 * max_val) ** 2
    c2 = (k2 * max_val) ** 2
    mean0, mean1 = reducer(img1), reducer(img2)
    num0 = _m.multiply(_m.multiply(mean0, mean1), 2.0)
    den0 = _m.add(_m.square(mean0), _m.square(mean1))
    luminance = _m.truediv(_m.add(num0, c1), _m.add(den0, c1))
    num1 = _m.multiply(reducer(_m.multiply(img1, img2)), 2.0)
    den1 = reducer(_m.add(_m.square(img1), _m.square(img2)))
    cs = _m.truediv(_m.add(_m.subtract(num1, num0), c2), _m.add(_m.subtract(den1, den0), c2))
    if return_index_map:
        return _m.multiply(luminance, cs), cs
    return (_m.reduce_mean(_m.multiply(luminance, cs), [-3, -2]), _m.reduce_mean(cs, [-3, -2]))


def ssim(img1, img2, max_val, filter_size=11, filter_sigma=1.5, k1=0.01, k2=0.03,
         return_index_map=False):
    """Structural similarity with a Gaussian window, averaged over channels."""
    with _ops.name_scope(None, "SSIM", [img1, img2]):
        img1, img2 = _ops.convert_to_tensor(img1, name="img1"), _ops.convert_to_tensor(
            img2, name="img2")
        _check_compatible(img1, img2)
        max_val = convert_image_dtype(_m.cast(max_val, img1.dtype.base_dtype), _dt.float32)
        img1 = convert_image_dtype(img1, _dt.float32)
        img2 = convert_image_dtype(img2, _dt.float32)
        per_channel, _ = _ssim_per_channel(img1, img2, max_val, filter_size, filter_sigma,
                                           k1, k2, return_index_map)
        return _m.reduce_mean(per_channel, [-1])


_MSSSIM_WEIGHTS = (0.0448, 0.2856, 0.3001, 0.2363, 0.1333)


def ssim_multiscale(img1, img2, max_val, power_factors=_MSSSIM_WEIGHTS, filter_size=11,
                    filter_sigma=1.5, k1=0.01, k2=0.03):
    """Multi-scale SSIM: contrast-structure terms at each 2x-downsampled scale and SSIM at
    the last, combined with ``power_factors``."""
    from dflab.ops.nn_ops import avg_pool, relu

    with _ops.name_scope(None, "MS-SSIM", [img1, img2]):
        img1, img2 = _ops.convert_to_tensor(img1, name="img1"), _ops.convert_to_tensor(
            img2, name="img2")
        _check_compatible(img1, img2)
        max_val = convert_image_dtype(_m.cast(max_val, img1.dtype.base_dtype), _dt.float32)
        imgs = [convert_image_dtype(img1, _dt.float32), convert_image_dtype(img2, _dt.float32)]
        mcs = []
        for k in range(len(power_factors)):
            with _ops.name_scope(None, f"Scale{k}", imgs):
                if k > 0:
                    imgs = [_downscale(x, avg_pool) for x in imgs]
                ssim_per_channel, cs = _ssim_per_channel(imgs[0], imgs[1], max_val,
                                                         filter_size, filter_sigma, k1, k2)
                mcs.append(relu(cs))
        mcs.pop()
        stacked = array_ops.stack(mcs + [relu(ssim_per_channel)], axis=-1)
        weights = _ops.convert_to_tensor(np.asarray(power_factors, np.float32))
        return _m.reduce_mean(_m.reduce_prod(_m.pow(stacked, weights), [-1]), [-1])


def _downscale(x, avg_pool):
    """Halve height and width by 2x2 averages, padding an odd size symmetrically first."""
    dims = x.shape.as_list()
    lead = dims[:-3]
    h, w, c = dims[-3:]
    flat = array_ops.reshape(x, [-1, h, w, c])
    pad = [[0, 0], [0, h % 2], [0, w % 2], [0, 0]]
    if h % 2 or w % 2:
        flat = array_ops.pad(flat, pad, mode="SYMMETRIC")
    y = avg_pool(flat, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="VALID")
    ys = y.shape.as_list()
    return array_ops.reshape(y, lead + ys[1:])


__all__: list[str] = []  # reached as tf.image.* (see dflab.namespaces)
