"""Kernels of ``tf.image``'s box ops (``dflab.ops.image_box_ops``), following TF's CPU
kernels: NMS pops candidates best score first (ties: the lower index) and compares each
with the boxes already kept, newest first; IOU, crop coordinates and interpolation weights are
float32 as in TF.

The kernels compute on the host (NMS is a sequential loop over candidates, crop-and-resize
gathers by box). Those TF also runs on GPUs (``NonMaxSuppressionV3`` and the crop-and-resize
ops) copy a GPU's inputs to the host and their results back (``_host_computed``); the others are
registered for host devices only, as in TF.
"""

from __future__ import annotations

import heapq

import numpy as np

from dflab.framework import errors
from dflab.kernels.context import host
from dflab.kernels.random_kernels import _host_reader
from dflab.kernels.registry import kernel, register_kernel

F32 = np.float32


def _host_computed(op_type, **declared):
    """Register the decorated factory for every device (``declared``: ``register_kernel``'s
    host-memory arguments): on a device whose arrays are not NumPy's, its inputs are copied to
    the host and its results to the device."""

    def deco(factory):
        def on_device(node, ctx):
            fn = factory(node, ctx)
            if ctx.xp is np:
                return fn
            read, to_device = _host_reader(ctx.xp), ctx.xp.asarray

            def run(*args):
                out = fn(*[read(a) for a in args])
                if isinstance(out, tuple):
                    return tuple(to_device(o) for o in out)
                return to_device(out)

            return run

        register_kernel(op_type, factory=on_device, **declared)
        return factory

    return deco


# --- NMS ------------------------------------------------------------------------------------------
def _iou_matrix(boxes: np.ndarray):
    """A function ``iou(i, js)``: TF's float32 IOU of box ``i`` with boxes ``js`` (corners
    ordered, 0 where either area is not positive)."""
    b = boxes.astype(F32)
    lo = np.minimum(b[:, :2], b[:, 2:])
    hi = np.maximum(b[:, :2], b[:, 2:])
    area = (hi[:, 0] - lo[:, 0]) * (hi[:, 1] - lo[:, 1])

    def iou(i, js):
        js = np.asarray(js, np.int64)
        top = np.maximum(lo[i], lo[js])
        bottom = np.minimum(hi[i], hi[js])
        inter = (np.maximum(bottom[:, 0] - top[:, 0], F32(0)) *
                 np.maximum(bottom[:, 1] - top[:, 1], F32(0)))
        with np.errstate(invalid="ignore", divide="ignore"):
            out = inter / (area[i] + area[js] - inter)
        return np.where((area[i] <= 0) | (area[js] <= 0), F32(0), out).astype(F32)

    return iou


def greedy_nms(similarity, scores, max_output: int, sim_threshold, score_threshold,
               soft_sigma=0.0):
    """TF's ``DoNonMaxSuppressionOp``: ``(selected indices, their scores)``. ``similarity(i,
    js)`` gives candidate ``i``'s similarity to the kept boxes ``js``; with ``soft_sigma > 0``
    each kept box multiplies a candidate's score by ``exp(-sim**2 / (2 sigma))`` (Soft-NMS),
    and a lowered candidate goes back into the queue."""
    dt = scores.dtype.type
    score_threshold = dt(score_threshold)
    heap = [(-scores[i], i, 0) for i in np.nonzero(scores > score_threshold)[0]]
    heapq.heapify(heap)
    soft = soft_sigma > 0
    scale = dt(-0.5) / dt(soft_sigma) if soft else dt(0)
    selected, kept_scores = [], []
    while len(selected) < max_output and heap:
        neg, i, begin = heapq.heappop(heap)
        score = original = -neg
        earlier = selected[begin:][::-1]  # the boxes kept since this one last competed
        if earlier:
            sims = similarity(i, earlier)
            if not soft:
                if np.any(sims > sim_threshold):
                    continue
            else:
                for sim in sims:
                    score = dt(score * np.exp(scale * dt(sim) * dt(sim)))
                    if score <= score_threshold:
                        break
        if score == original:
            selected.append(i)
            kept_scores.append(score)
        elif score > score_threshold:
            heapq.heappush(heap, (-score, i, len(selected)))
    return selected, kept_scores


def _check_nms_inputs(node, boxes, scores, size, iou):
    if size.ndim != 0:
        raise errors.InvalidArgumentError(
            None, node, f"max_output_size must be 0-D, got shape {list(size.shape)}")
    if not 0 <= float(iou) <= 1:
        raise errors.InvalidArgumentError(None, node, "iou_threshold must be in [0, 1]")
    if node.op == "NonMaxSuppressionWithOverlaps":
        if boxes.ndim != 2 or boxes.shape[0] != boxes.shape[1]:
            raise errors.InvalidArgumentError(
                None, node, f"overlaps must be square, got shape {list(boxes.shape)}")
    elif boxes.ndim != 2 or boxes.shape[1] != 4:
        raise errors.InvalidArgumentError(
            None, node, f"boxes must be 2-D with 4 columns, got shape {list(boxes.shape)}")
    if scores.ndim != 1 or scores.shape[0] != boxes.shape[0]:
        raise errors.InvalidArgumentError(
            None, node, f"scores has incompatible shape {list(scores.shape)}")


def _similarity(node, boxes):
    if node.op == "NonMaxSuppressionWithOverlaps":
        return lambda i, js: boxes[i, js].astype(F32)
    return _iou_matrix(boxes)


@_host_computed("NonMaxSuppressionV3", host_memory_inputs=(2, 3, 4))
@kernel("NonMaxSuppressionWithOverlaps", host_only=True)
def _nms(node, ctx):
    def nms(boxes, scores, size, iou, score):
        boxes, scores, size = np.asarray(boxes), np.asarray(scores), host(size)
        _check_nms_inputs(node, boxes, scores, size, iou)
        sel, _ = greedy_nms(_similarity(node, boxes), scores, int(size), F32(iou),
                            float(score))
        return np.asarray(sel, np.int32)

    return nms


@kernel("NonMaxSuppressionV5", host_only=True)
def _nms_v5(node, ctx):
    pad = bool(node.attr.get("pad_to_max_output_size", False))

    def nms(boxes, scores, size, iou, score, sigma):
        boxes, scores, size = np.asarray(boxes), np.asarray(scores), host(size)
        _check_nms_inputs(node, boxes, scores, size, iou)
        if float(sigma) < 0:
            raise errors.InvalidArgumentError(None, node,
                                              "soft_nms_sigma must be non-negative")
        sel, kept = greedy_nms(_similarity(node, boxes), scores, int(size),
                               scores.dtype.type(iou), float(score), float(sigma))
        n = len(sel)
        if pad:
            sel = sel + [0] * (int(size) - n)
            kept = kept + [0] * (int(size) - n)
        return (np.asarray(sel, np.int32), np.asarray(kept, scores.dtype),
                np.asarray(n, np.int32))

    return nms


@kernel("CombinedNonMaxSuppression", host_only=True)
def _combined_nms(node, ctx):
    pad_per_class = bool(node.attr.get("pad_per_class", False))
    clip = bool(node.attr.get("clip_boxes", True))

    def combined(boxes, scores, per_class, total, iou, score):
        boxes, scores = np.asarray(boxes, F32), np.asarray(scores, F32)
        per_class, total = int(host(per_class)), int(host(total))
        if boxes.ndim != 4 or scores.ndim != 3 or boxes.shape[3] != 4:
            raise errors.InvalidArgumentError(
                None, node, "boxes must be 4-D [batch, num_boxes, q, 4] and scores 3-D "
                f"[batch, num_boxes, num_classes], got {list(boxes.shape)} and "
                f"{list(scores.shape)}")
        batch, _, q, _ = boxes.shape
        classes = scores.shape[2]
        if q not in (1, classes):
            raise errors.InvalidArgumentError(
                None, node, f"third dimension of boxes must be either 1 or {classes}")
        if not 0 <= float(iou) <= 1:
            raise errors.InvalidArgumentError(None, node, "iou_threshold must be in [0, 1]")
        if total <= 0 or per_class <= 0:
            raise errors.InvalidArgumentError(
                None, node, "max_total_size and max_output_size_per_class must be > 0")
        size = min(total, per_class * classes) if pad_per_class else total
        out_boxes = np.zeros((batch, size, 4), F32)
        out_scores = np.zeros((batch, size), F32)
        out_classes = np.zeros((batch, size), F32)
        valid = np.zeros(batch, np.int32)
        for b in range(batch):
            found = []  # (score, class, box index) over all classes
            for c in range(classes):
                bx = boxes[b, :, c if q > 1 else 0]
                sel, kept = greedy_nms(_iou_matrix(bx), scores[b, :, c], per_class, F32(iou),
                                       float(score))
                found += [(s, c, i, bx[i]) for i, s in zip(sel, kept)]
            # Best first; a stable sort keeps class order, then selection order, for ties.
            found.sort(key=lambda r: -r[0])
            found = found[:size]
            valid[b] = len(found)
            for k, (s, c, _, box) in enumerate(found):
                out_boxes[b, k] = np.clip(box, 0, 1) if clip else box
                out_scores[b, k], out_classes[b, k] = s, c
        return out_boxes, out_scores, out_classes, valid

    return combined


# --- crop and resize ------------------------------------------------------------------------
def _check_crop(node, image, boxes, box_ind, crop_size):
    crop = [int(v) for v in np.ravel(host(crop_size))]
    if len(crop) != 2 or min(crop) <= 0:
        raise errors.InvalidArgumentError(
            None, node, f"crop dimensions must be positive, got {crop}")
    if image.ndim != 4:
        raise errors.InvalidArgumentError(
            None, node, f"input image must be 4-D, got shape {list(image.shape)}")
    if boxes.ndim != 2 or boxes.shape[1] != 4 or box_ind.shape != (boxes.shape[0],):
        raise errors.InvalidArgumentError(
            None, node, f"boxes must be [num_boxes, 4] and box_index [num_boxes], got "
            f"{list(boxes.shape)} and {list(box_ind.shape)}")
    if box_ind.size and (box_ind.min() < 0 or box_ind.max() >= image.shape[0]):
        raise errors.OutOfRangeError(
            None, node, f"box_index has values outside [0, {image.shape[0]})")
    return crop


def _sample_coords(lo, hi, in_size, out_size):
    """TF's crop sample positions (float32): ``[num_boxes, out_size]``, and per box the
    scale factor the box gradient uses."""
    in_m1 = F32(in_size - 1)
    if out_size > 1:
        ratio = in_m1 / F32(out_size - 1)
        scale = (hi - lo) * in_m1 / F32(out_size - 1)
        pos = lo[:, None] * in_m1 + np.arange(out_size, dtype=F32)[None, :] * scale[:, None]
    else:
        ratio = F32(0)
        pos = (F32(0.5) * (lo + hi) * in_m1)[:, None]
    valid = (pos >= 0) & (pos <= in_m1)
    return pos.astype(F32), valid, ratio


def _crop_geometry(image_shape, boxes, crop):
    _, height, width, _ = image_shape
    b = boxes.astype(F32)
    ys, y_ok, h_ratio = _sample_coords(b[:, 0], b[:, 2], height, crop[0])
    xs, x_ok, w_ratio = _sample_coords(b[:, 1], b[:, 3], width, crop[1])
    return ys, y_ok, h_ratio, xs, x_ok, w_ratio


def _lerp_parts(pos, ok, size):
    """Floor and ceil indices (clipped where the sample is outside) and the fraction."""
    p = np.where(ok, pos, 0)
    lo, hi = np.floor(p), np.ceil(p)
    return (np.clip(lo, 0, size - 1).astype(np.int64), np.clip(hi, 0, size - 1).astype(
        np.int64), (p - lo).astype(F32))


@_host_computed("CropAndResize", host_memory_inputs=(3,))
def _crop_and_resize(node, ctx):
    method = node.attr.get("method", "bilinear")
    method = method.decode() if isinstance(method, bytes) else method
    extrapolation = F32(node.attr.get("extrapolation_value", 0.0))

    def crop_and_resize(image, boxes, box_ind, crop_size):
        image, boxes, box_ind = np.asarray(image), np.asarray(boxes), np.asarray(box_ind)
        crop = _check_crop(node, image, boxes, box_ind, crop_size)
        _, height, width, depth = image.shape
        ys, y_ok, _, xs, x_ok, _ = _crop_geometry(image.shape, boxes, crop)
        img = image[box_ind]  # [num_boxes, height, width, depth]
        nb = np.arange(len(box_ind))[:, None, None]
        if method == "nearest":
            yi = np.clip(_round(np.where(y_ok, ys, 0)), 0, height - 1)
            xi = np.clip(_round(np.where(x_ok, xs, 0)), 0, width - 1)
            out = img[nb, yi[:, :, None], xi[:, None, :]].astype(F32)
        else:
            y0, y1, fy = _lerp_parts(ys, y_ok, height)
            x0, x1, fx = _lerp_parts(xs, x_ok, width)

            def at(yy, xx):
                return img[nb, yy[:, :, None], xx[:, None, :]].astype(F32)

            fx4, fy4 = fx[:, None, :, None], fy[:, :, None, None]
            top = at(y0, x0) + (at(y0, x1) - at(y0, x0)) * fx4
            bottom = at(y1, x0) + (at(y1, x1) - at(y1, x0)) * fx4
            out = top + (bottom - top) * fy4
        ok = (y_ok[:, :, None] & x_ok[:, None, :])[..., None]
        return np.where(ok, out, extrapolation).astype(F32).reshape(
            len(box_ind), crop[0], crop[1], depth)

    return crop_and_resize


def _round(x):
    """C's ``roundf``: halves away from zero."""
    return (np.sign(x) * np.floor(np.abs(x) + F32(0.5))).astype(np.int64)


@_host_computed("CropAndResizeGradImage", host_memory_inputs=(3,))
def _crop_grad_image(node, ctx):
    method = node.attr.get("method", "bilinear")
    method = method.decode() if isinstance(method, bytes) else method
    dt = node.attr["T"]._np

    def grad_image(grads, boxes, box_ind, image_size):
        grads, boxes, box_ind = (np.asarray(grads, F32), np.asarray(boxes),
                                 np.asarray(box_ind))
        shape = tuple(int(v) for v in np.ravel(host(image_size)))
        if len(shape) != 4 or min(shape) <= 0:
            raise errors.InvalidArgumentError(
                None, node, f"image_size must be 4 positive numbers, got {list(shape)}")
        if box_ind.size and (box_ind.min() < 0 or box_ind.max() >= shape[0]):
            raise errors.OutOfRangeError(
                None, node, f"box_index has values outside [0, {shape[0]})")
        _, height, width, _ = shape
        crop = grads.shape[1:3]
        out = np.zeros(shape, dt)
        ys, y_ok, _, xs, x_ok, _ = _crop_geometry(shape, boxes, crop)
        ok = (y_ok[:, :, None] & x_ok[:, None, :])[..., None]
        g = np.where(ok, grads, F32(0))
        bi = np.broadcast_to(box_ind[:, None, None], g.shape[:3])
        if method == "nearest":
            yi = np.clip(_round(np.where(y_ok, ys, 0)), 0, height - 1)
            xi = np.clip(_round(np.where(x_ok, xs, 0)), 0, width - 1)
            _scatter(out, bi, yi[:, :, None], xi[:, None, :], g)
            return out
        y0, y1, fy = _lerp_parts(ys, y_ok, height)
        x0, x1, fx = _lerp_parts(xs, x_ok, width)
        fy4, fx4 = fy[:, :, None, None], fx[:, None, :, None]
        dtop, dbottom = (F32(1) - fy4) * g, fy4 * g
        for yy, part in ((y0, dtop), (y1, dbottom)):
            _scatter(out, bi, yy[:, :, None], x0[:, None, :], (F32(1) - fx4) * part)
            _scatter(out, bi, yy[:, :, None], x1[:, None, :], fx4 * part)
        return out

    return grad_image


def _scatter(out, bi, yi, xi, values):
    bi, yi, xi = np.broadcast_arrays(bi, yi, xi)
    np.add.at(out, (bi, yi, xi), values.astype(out.dtype))


@_host_computed("CropAndResizeGradBoxes")
def _crop_grad_boxes(node, ctx):
    def grad_boxes(grads, image, boxes, box_ind):
        grads, image = np.asarray(grads, F32), np.asarray(image)
        boxes, box_ind = np.asarray(boxes), np.asarray(box_ind)
        crop = _check_crop(node, image, boxes, box_ind, grads.shape[1:3])
        _, height, width, _ = image.shape
        ys, y_ok, h_ratio, xs, x_ok, w_ratio = _crop_geometry(image.shape, boxes, crop)
        y0, y1, fy = _lerp_parts(ys, y_ok, height)
        x0, x1, fx = _lerp_parts(xs, x_ok, width)
        img = image[box_ind].astype(F32)
        nb = np.arange(len(box_ind))[:, None, None]

        def at(yy, xx):
            return img[nb, yy[:, :, None], xx[:, None, :]]

        fy4, fx4 = fy[:, :, None, None], fx[:, None, :, None]
        tl, tr, bl, br = at(y0, x0), at(y0, x1), at(y1, x0), at(y1, x1)
        ok = (y_ok[:, :, None] & x_ok[:, None, :])[..., None]
        gy = ((F32(1) - fx4) * (bl - tl) + fx4 * (br - tr)) * grads * ok
        gx = ((F32(1) - fy4) * (tr - tl) + fy4 * (br - bl)) * grads * ok
        out = np.zeros((len(box_ind), 4), F32)
        _box_terms(out, 0, 2, gy.sum(axis=(2, 3)), crop[0], h_ratio, height)
        _box_terms(out, 1, 3, gx.sum(axis=(1, 3)), crop[1], w_ratio, width)
        return out

    return grad_boxes


def _box_terms(out, lo_col, hi_col, g, n, ratio, size):
    """The derivative of each box's two coordinates along one axis from the per-sample
    image gradients ``g`` (``[num_boxes, n]``)."""
    if n > 1:
        k = np.arange(n, dtype=F32) * ratio
        out[:, lo_col] = (g * (F32(size - 1) - k)).sum(axis=1)
        out[:, hi_col] = (g * k).sum(axis=1)
    else:
        half = F32(0.5) * F32(size - 1)
        out[:, lo_col] = out[:, hi_col] = g[:, 0] * half


# --- drawing --------------------------------------------------------------------------------------
_COLORS = np.array([[1, 1, 0, 1], [0, 0, 1, 1], [1, 0, 0, 1], [0, 1, 0, 1], [0.5, 0, 0.5, 1],
                    [0.5, 0.5, 0, 1], [0.5, 0, 0, 1], [0, 0, 0.5, 1], [0, 1, 1, 1],
                    [1, 0, 1, 1]], F32)


@kernel("DrawBoundingBoxesV2", host_only=True)
def _draw_boxes(node, ctx):
    def draw(images, boxes, colors):
        images, boxes, colors = np.asarray(images), np.asarray(boxes, F32), np.asarray(colors)
        if images.ndim != 4 or images.shape[3] not in (1, 3, 4):
            raise errors.InvalidArgumentError(
                None, node, "Channel depth should be either 1 (GRY), 3 (RGB), or 4 (RGBA)")
        batch, height, width, depth = images.shape
        if boxes.ndim != 3 or boxes.shape[0] != batch or boxes.shape[2] != 4:
            raise errors.InvalidArgumentError(
                None, node, f"boxes must be [batch, num_boxes, 4], got {list(boxes.shape)}")
        table = colors.astype(F32) if colors.size else _COLORS.copy()
        if table.ndim != 2 or table.shape[1] < depth:
            raise errors.InvalidArgumentError(
                None, node, f"colors must be a 2-D matrix with at least {depth} columns")
        if depth == 1:
            table[:, 0] = 1  # a grey image's boxes are white
        canvas = images.copy()
        for b in range(batch):
            for k, box in enumerate(boxes[b]):
                _draw_box(canvas[b], box, table[k % len(table), :depth], height, width)
        return canvas

    return draw


def _draw_box(canvas, box, color, height, width):
    """One box's outline, as TF's kernel draws it (corners truncated toward zero)."""
    top, left = int(box[0] * F32(height - 1)), int(box[1] * F32(width - 1))
    bottom, right = int(box[2] * F32(height - 1)), int(box[3] * F32(width - 1))
    if top > bottom or left > right:
        return  # inverted: not drawn
    if top >= height or bottom < 0 or left >= width or right < 0:
        return  # wholly outside the image
    t, bo = max(top, 0), min(bottom, height - 1)
    le, ri = max(left, 0), min(right, width - 1)
    if top >= 0:
        canvas[top, le:ri + 1] = color
    if bottom < height:
        canvas[bottom, le:ri + 1] = color
    if left >= 0:
        canvas[t:bo + 1, left] = color
    if right < width:
        canvas[t:bo + 1, right] = color


# --- glimpses ------------------------------------------------------------------------------------
def _glimpse_origin(offset, image_hw, size, centered, normalized):
    """TF's top-left corner of a glimpse: the offset is its centre (in pixels, from the
    corner, or, ``centered``, half-scaled from the image's centre); truncated toward zero."""
    y, x = F32(offset[0]), F32(offset[1])
    h, w = F32(image_hw[0]), F32(image_hw[1])
    if normalized:
        y, x = y * h, x * w
    if centered:
        y, x = y / F32(2) + h / F32(2), x / F32(2) + w / F32(2)
    y, x = y - F32(size[0]) / F32(2), x - F32(size[1]) / F32(2)
    return int(y), int(x)


@kernel("ExtractGlimpse", host_only=True)
def _extract_glimpse(node, ctx):
    centered = bool(node.attr.get("centered", True))
    normalized = bool(node.attr.get("normalized", True))
    noise = node.attr.get("noise", "uniform")
    noise = noise.decode() if isinstance(noise, bytes) else noise
    if not noise:
        noise = "uniform" if node.attr.get("uniform_noise", True) else "gaussian"
    rng = np.random.default_rng()

    def glimpse(images, size, offsets):
        images, offsets = np.asarray(images, F32), np.asarray(offsets, F32)
        hw = [int(v) for v in np.ravel(host(size))]
        if images.ndim != 4 or len(hw) != 2 or offsets.shape != (images.shape[0], 2):
            raise errors.InvalidArgumentError(
                None, node, "input must be 4-D, size a vector of 2 and offsets "
                f"[batch, 2]; got {list(images.shape)}, {hw}, {list(offsets.shape)}")
        if min(hw) <= 0:
            raise errors.InvalidArgumentError(None, node, f"size must be positive, got {hw}")
        batch, height, width, depth = images.shape
        out = np.empty((batch, hw[0], hw[1], depth), F32)
        for i in range(batch):
            y, x = _glimpse_origin(offsets[i], (height, width), hw, centered, normalized)
            out[i] = _noise(rng, noise, images[i], hw)
            y0, y1 = max(y, 0), min(y + hw[0], height)
            x0, x1 = max(x, 0), min(x + hw[1], width)
            if y1 > y0 and x1 > x0:
                out[i, y0 - y:y1 - y, x0 - x:x1 - x] = images[i, y0:y1, x0:x1]
        return out

    return glimpse


def _noise(rng, mode, image, hw):
    """What fills the part of a glimpse outside its image (TF draws it unseeded)."""
    shape = (hw[0], hw[1], image.shape[-1])
    if mode == "zero" or image.size == 0:
        return np.zeros(shape, F32)
    if mode == "gaussian":
        mean, std = image.mean(axis=(0, 1)), image.std(axis=(0, 1))
        return (mean + rng.standard_normal(shape) * std).astype(F32)
    lo, hi = image.min(), image.max()
    return (lo + rng.random(shape, dtype=F32) * (hi - lo)).astype(F32)
