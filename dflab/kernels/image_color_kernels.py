"""Kernels of the colour ops (``dflab.ops.image_color_ops``), against the device's ``xp``:
contrast, hue and saturation adjustments and the HSV conversions, computed as TF's kernels do
(per pixel, in the image's float type)."""

from __future__ import annotations

from dflab.kernels.context import host
from dflab.kernels.registry import kernel, register_kernel


def rgb_to_hsv(xp, rgb):
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    v = xp.maximum(xp.maximum(r, g), b)
    spread = v - xp.minimum(xp.minimum(r, g), b)
    s = xp.where(v > 0, spread / xp.where(v > 0, v, 1), 0)
    norm = 1.0 / (6.0 * xp.where(spread > 0, spread, 1))
    h = xp.where(r == v, norm * (g - b),
                 xp.where(g == v, norm * (b - r) + 2.0 / 6.0, norm * (r - g) + 4.0 / 6.0))
    h = xp.where(spread > 0, h, 0)
    h = xp.where(h < 0, h + 1, h)
    return xp.stack([h, s, v], axis=-1).astype(rgb.dtype, copy=False)


def hsv_to_rgb(xp, hsv):
    h, s, v = hsv[..., 0], hsv[..., 1], hsv[..., 2]
    c = s * v
    m = v - c
    dh = h * 6
    sector = xp.floor(dh)
    x = c * (1 - xp.abs(xp.fmod(dh, 2) - 1))
    zero = xp.zeros_like(c)
    # (r, g, b) before adding m, by the sector the hue is in; outside [0, 6) all zero.
    table = [(c, x, zero), (x, c, zero), (zero, c, x), (zero, x, c), (x, zero, c),
             (c, zero, x)]
    out = [zero, zero, zero]
    for k, rgb in enumerate(table):
        here = sector == k
        out = [xp.where(here, part, o) for part, o in zip(rgb, out)]
    return xp.stack([o + m for o in out], axis=-1).astype(hsv.dtype, copy=False)


register_kernel("RGBToHSV", xp=rgb_to_hsv, quiet_fp=True)
register_kernel("HSVToRGB", xp=hsv_to_rgb, quiet_fp=True)


@kernel("AdjustContrastv2", host_memory_inputs=(1,))
def _adjust_contrast(node, ctx):
    xp = ctx.xp

    def adjust(images, factor):
        f = float(host(factor))
        mean = xp.mean(images, axis=(-3, -2), keepdims=True, dtype=images.dtype)
        return ((images - mean) * images.dtype.type(f) + mean).astype(images.dtype, copy=False)

    return adjust


@kernel("AdjustHue", host_memory_inputs=(1,))
def _adjust_hue(node, ctx):
    xp = ctx.xp

    def adjust(images, delta):
        hsv = rgb_to_hsv(xp, images)
        h = xp.fmod(hsv[..., 0] + float(host(delta)), 1.0)
        h = xp.where(h < 0, h + 1, h)
        shifted = xp.stack([h, hsv[..., 1], hsv[..., 2]], axis=-1).astype(images.dtype)
        return hsv_to_rgb(xp, shifted)

    return adjust


@kernel("AdjustSaturation", host_memory_inputs=(1,))
def _adjust_saturation(node, ctx):
    xp = ctx.xp

    def adjust(images, factor):
        hsv = rgb_to_hsv(xp, images)
        s = xp.clip(hsv[..., 1] * float(host(factor)), 0.0, 1.0)
        scaled = xp.stack([hsv[..., 0], s, hsv[..., 2]], axis=-1).astype(images.dtype)
        return hsv_to_rgb(xp, scaled)

    return adjust
