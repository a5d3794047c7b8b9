"""``tf.image``'s box ops: non-maximum suppression (plain, soft, over given overlaps, padded,
combined per class), crop-and-resize with its gradients, and drawing boxes.

Boxes are ``[y1, x1, y2, x2]`` (either diagonal pair of corners; NMS orders each pair, as TF
does). The schemas, shape rules and gradients are here; the kernels, which follow TF's CPU
kernels step for step, are in ``dflab.kernels.image_box_kernels``.
"""

from __future__ import annotations

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.constant_op import constant_value, constant_value_as_shape
from dflab.framework.registry import NotDifferentiable, RegisterGradient, register_op
from dflab.framework.tensor_shape import TensorShape
from dflab.ops import array_ops

_FLOAT_BOXES = (_dt.float16, _dt.float32)


def _scalar(op, t, what):
    if t.shape.ndims not in (None, 0):
        raise ValueError(f"Shape must be rank 0 but is rank {t.shape.ndims} for '{op.name}' "
                         f"({op.type}): {what}")


def _rank(op, t, n, what):
    if t.shape.ndims not in (None, n):
        raise ValueError(f"Shape must be rank {n} but is rank {t.shape.ndims} for "
                         f"'{op.name}' ({op.type}): {what}")


def _check_boxes_scores(op, boxes, scores):
    _rank(op, boxes, 2, "boxes")
    _rank(op, scores, 1, "scores")
    cols = boxes.shape.as_list()[1] if boxes.shape.ndims == 2 else None
    if cols not in (None, 4):
        raise ValueError(f"Dimension must be 4 but is {cols} for '{op.name}' ({op.type}): "
                         "boxes")
    n_boxes = boxes.shape.as_list()[0] if boxes.shape.ndims == 2 else None
    n_scores = scores.shape.as_list()[0] if scores.shape.ndims == 1 else None
    if None not in (n_boxes, n_scores) and n_boxes != n_scores:
        raise ValueError(f"Dimensions must be equal, but are {n_boxes} and {n_scores} for "
                         f"'{op.name}' ({op.type}): boxes and scores")


def _nms_infer(op):
    boxes, scores, size, *thresholds = op.inputs
    if op.type == "NonMaxSuppressionWithOverlaps":
        _rank(op, boxes, 2, "overlaps")
        _rank(op, scores, 1, "scores")
    else:
        _check_boxes_scores(op, boxes, scores)
    _scalar(op, size, "max_output_size")
    for t in thresholds:
        _scalar(op, t, "threshold")
    n = constant_value(size)
    padded = op.type == "NonMaxSuppressionV5" and op.get_attr("pad_to_max_output_size")
    m = TensorShape([int(n) if padded and n is not None else None])
    if op.type == "NonMaxSuppressionV5":
        return [(_dt.int32, m), (scores.dtype.base_dtype, m), (_dt.int32, TensorShape([]))]
    return [(_dt.int32, m)]


for _t in ("NonMaxSuppressionV3", "NonMaxSuppressionV5", "NonMaxSuppressionWithOverlaps"):
    register_op(_t, _nms_infer)
    NotDifferentiable(_t)


def _float_arg(value, dtype, name):
    return _ops.convert_to_tensor(value, dtype=dtype, name=name)


def non_max_suppression(boxes, scores, max_output_size, iou_threshold=0.5,
                        score_threshold=float("-inf"), name=None):
    """Indices of the boxes greedy NMS keeps, best score first: a box is dropped when its
    IOU with a kept box exceeds ``iou_threshold`` or its score is not above
    ``score_threshold``."""
    with _ops.name_scope(name, "non_max_suppression"):
        iou = _float_arg(iou_threshold, _dt.float32, "iou_threshold")
        score = _float_arg(score_threshold, _dt.float32, "score_threshold")
        boxes = _ops.convert_to_tensor(boxes, name="boxes")
        scores = _ops.convert_to_tensor(scores, name="scores")
        size = _ops.convert_to_tensor(max_output_size, dtype=_dt.int32,
                                      name="max_output_size")
        return _ops.apply_op("NonMaxSuppressionV3", [boxes, scores, size, iou, score],
                             {}).outputs[0]


def _nms_v5(boxes, scores, max_output_size, iou_threshold, score_threshold, soft_nms_sigma,
            pad):
    boxes = _ops.convert_to_tensor(boxes, name="boxes")
    dtype = boxes.dtype.base_dtype
    scores = _ops.convert_to_tensor(scores, dtype=dtype, name="scores")
    size = _ops.convert_to_tensor(max_output_size, dtype=_dt.int32, name="max_output_size")
    args = [_float_arg(v, dtype, n) for v, n in ((iou_threshold, "iou_threshold"),
                                                  (score_threshold, "score_threshold"),
                                                  (soft_nms_sigma, "soft_nms_sigma"))]
    return _ops.apply_op("NonMaxSuppressionV5", [boxes, scores, size, *args],
                         {"pad_to_max_output_size": bool(pad)}).outputs


def non_max_suppression_with_scores(boxes, scores, max_output_size, iou_threshold=0.5,
                                    score_threshold=float("-inf"), soft_nms_sigma=0.0,
                                    name=None):
    """``(indices, scores)`` of the boxes NMS keeps; with ``soft_nms_sigma > 0`` overlapping
    boxes are down-weighted by ``exp(-iou**2 / (2 sigma))`` instead of dropped (Soft-NMS)."""
    with _ops.name_scope(name, "non_max_suppression_with_scores"):
        idx, sc, _ = _nms_v5(boxes, scores, max_output_size, iou_threshold, score_threshold,
                             soft_nms_sigma, False)
        return idx, sc


def non_max_suppression_with_overlaps(overlaps, scores, max_output_size,
                                      overlap_threshold=0.5, score_threshold=float("-inf"),
                                      name=None):
    """Greedy NMS over a given ``[n, n]`` overlap matrix instead of boxes' IOU."""
    with _ops.name_scope(name, "non_max_suppression_overlaps"):
        overlaps = _ops.convert_to_tensor(overlaps, name="overlaps")
        scores = _ops.convert_to_tensor(scores, name="scores")
        size = _ops.convert_to_tensor(max_output_size, dtype=_dt.int32,
                                      name="max_output_size")
        ov = _float_arg(overlap_threshold, _dt.float32, "overlap_threshold")
        score = _float_arg(score_threshold, _dt.float32, "score_threshold")
        return _ops.apply_op("NonMaxSuppressionWithOverlaps",
                             [overlaps, scores, size, ov, score], {}).outputs[0]


def non_max_suppression_padded(boxes, scores, max_output_size, iou_threshold=0.5,
                               score_threshold=float("-inf"), pad_to_max_output_size=False,
                               name=None, sorted_input=False, canonicalized_coordinates=False,
                               tile_size=512):
    """``(indices, num_valid)`` of greedy NMS, the indices padded with zeros to
    ``max_output_size`` when ``pad_to_max_output_size``.

    As TF's, the corner order of the *first* box decides which coordinates are the minima for
    every box (unless ``canonicalized_coordinates``). TF's tiled algorithm, which
    ``sorted_input`` and ``tile_size`` tune, selects the boxes greedy NMS selects, except that
    it never reports a box whose four coordinates are all zero or negative; here such a box
    is an ordinary box. One image's boxes (``[num_boxes, 4]``) only: batched boxes raise
    ``NotImplementedError``."""
    del sorted_input, tile_size
    with _ops.name_scope(name, "non_max_suppression_padded"):
        boxes = _ops.convert_to_tensor(boxes, name="boxes")
        if boxes.shape.ndims is None or boxes.shape.ndims > 2:
            raise NotImplementedError("non_max_suppression_padded takes one image's boxes "
                                      "([num_boxes, 4]); batched boxes are not offered")
        if not canonicalized_coordinates:
            boxes = _canonicalize_like_first_box(boxes)
        idx, _, valid = _nms_v5(boxes, scores, max_output_size, iou_threshold,
                                score_threshold, 0.0, pad_to_max_output_size)
        return idx, valid


def _canonicalize_like_first_box(boxes):
    """Swap the y (x) coordinates of every box when the first box's y1 > y2 (x1 > x2)."""
    from dflab.ops import math_ops

    first = boxes[0]
    ys = math_ops.cast(math_ops.greater(first[0], first[2]), _dt.int32)
    xs = math_ops.cast(math_ops.greater(first[1], first[3]), _dt.int32)
    cols = array_ops.stack([2 * ys, 1 + 2 * xs, 2 - 2 * ys, 3 - 2 * xs])
    return array_ops.gather(boxes, cols, axis=1)


# --- combined NMS -------------------------------------------------------------------------------
def _combined_infer(op):
    boxes, scores, per_class, total, iou, score = op.inputs
    _rank(op, boxes, 4, "boxes")
    _rank(op, scores, 3, "scores")
    for t, w in ((per_class, "max_output_size_per_class"), (total, "max_total_size"),
                 (iou, "iou_threshold"), (score, "score_threshold")):
        _scalar(op, t, w)
    b = boxes.shape.as_list()[0] if boxes.shape.ndims == 4 else None
    q = boxes.shape.as_list()[2] if boxes.shape.ndims == 4 else None
    classes = scores.shape.as_list()[2] if scores.shape.ndims == 3 else None
    if None not in (q, classes) and q not in (1, classes):
        raise ValueError(f"third dimension of boxes must be either 1 or {classes} for "
                         f"'{op.name}' ({op.type})")
    t, p = constant_value(total), constant_value(per_class)
    if t is not None and int(t) <= 0:
        raise ValueError(f"max_total_size should be > 0 for '{op.name}' ({op.type})")
    if p is not None and int(p) <= 0:
        raise ValueError(f"max_output_size_per_class should be > 0 for '{op.name}' "
                         f"({op.type})")
    m = None if t is None else int(t)
    if op.get_attr("pad_per_class"):
        m = None if None in (t, p, classes) else min(int(t), int(p) * classes)
    return [(_dt.float32, TensorShape([b, m, 4])), (_dt.float32, TensorShape([b, m])),
            (_dt.float32, TensorShape([b, m])), (_dt.int32, TensorShape([b]))]


register_op("CombinedNonMaxSuppression", _combined_infer)
NotDifferentiable("CombinedNonMaxSuppression")


def combined_non_max_suppression(boxes, scores, max_output_size_per_class, max_total_size,
                                 iou_threshold=0.5, score_threshold=float("-inf"),
                                 pad_per_class=False, clip_boxes=True, name=None):
    """Per image of a batch: greedy NMS per class, then the best ``max_total_size``
    detections over all classes; ``(boxes, scores, classes, valid_detections)``."""
    with _ops.name_scope(name, "combined_non_max_suppression"):
        iou = _float_arg(iou_threshold, _dt.float32, "iou_threshold")
        score = _float_arg(score_threshold, _dt.float32, "score_threshold")
        total = _ops.convert_to_tensor(max_total_size, dtype=_dt.int32)
        per_class = _ops.convert_to_tensor(max_output_size_per_class, dtype=_dt.int32)
        boxes = _ops.convert_to_tensor(boxes, name="boxes")
        scores = _ops.convert_to_tensor(scores, name="scores")
        return tuple(_ops.apply_op(
            "CombinedNonMaxSuppression", [boxes, scores, per_class, total, iou, score],
            {"pad_per_class": bool(pad_per_class), "clip_boxes": bool(clip_boxes)}).outputs)


# --- crop and resize ----------------------------------------------------------------------------
def _crop_infer(op):
    image, boxes, box_ind, crop_size = op.inputs
    _rank(op, image, 4, "image")
    _rank(op, boxes, 2, "boxes")
    _rank(op, box_ind, 1, "box_ind")
    _rank(op, crop_size, 1, "crop_size")
    n = boxes.shape.as_list()[0] if boxes.shape.ndims == 2 else None
    hw = constant_value_as_shape(crop_size) if crop_size.shape.as_tuple() == (2,) else None
    hw = hw.as_list() if hw is not None and hw.ndims == 2 else [None, None]
    depth = image.shape.as_list()[3] if image.shape.ndims == 4 else None
    return [(_dt.float32, TensorShape([n, *hw, depth]))]


def _crop_grad_image_infer(op):
    image_size = op.inputs[3]
    dims = constant_value_as_shape(image_size)
    return [(op.get_attr("T"), dims if dims.ndims is not None else TensorShape(None))]


def _crop_grad_boxes_infer(op):
    return [(_dt.float32, op.inputs[2].shape)]


register_op("CropAndResize", _crop_infer)
register_op("CropAndResizeGradImage", _crop_grad_image_infer)
register_op("CropAndResizeGradBoxes", _crop_grad_boxes_infer)
NotDifferentiable("CropAndResizeGradImage")
NotDifferentiable("CropAndResizeGradBoxes")


@RegisterGradient("CropAndResize")
def _crop_and_resize_grad(op, grad):
    image, boxes, box_ind, _ = op.inputs
    if image.shape.is_fully_defined():
        image_shape = _ops.convert_to_tensor(image.shape.as_list(), dtype=_dt.int32)
    else:
        image_shape = array_ops.shape(image)
    grad0 = None
    if image.dtype.base_dtype in (_dt.float16, _dt.float32, _dt.float64):
        grad0 = _ops.apply_op("CropAndResizeGradImage", [grad, boxes, box_ind, image_shape],
                              {"T": image.dtype.base_dtype,
                               "method": op.get_attr("method")}).outputs[0]
    grad1 = _ops.apply_op("CropAndResizeGradBoxes", [grad, image, boxes, box_ind],
                          {"method": "bilinear"}).outputs[0]
    return [grad0, grad1, None, None]


def crop_and_resize(image, boxes, box_ind=None, crop_size=None, method="bilinear",
                    extrapolation_value=0, name=None, box_indices=None):
    """Crops ``boxes`` (normalised ``[y1, x1, y2, x2]``) out of the images ``box_ind`` names
    and resizes each to ``crop_size`` by bilinear or nearest sampling: ``[num_boxes,
    crop_height, crop_width, depth]`` float32; samples outside the image take
    ``extrapolation_value``."""
    if box_indices is not None:
        if box_ind is not None:
            raise ValueError("Cannot specify both 'box_indices' and 'box_ind'")
        box_ind = box_indices
    if method not in ("bilinear", "nearest"):
        raise ValueError(f"method must be 'bilinear' or 'nearest', got {method!r}")
    image = _ops.convert_to_tensor(image, name="image")
    boxes = _ops.convert_to_tensor(boxes, dtype=_dt.float32, name="boxes")
    box_ind = _ops.convert_to_tensor(box_ind, dtype=_dt.int32, name="box_ind")
    crop_size = _ops.convert_to_tensor(crop_size, dtype=_dt.int32, name="crop_size")
    attrs = {"method": method, "extrapolation_value": float(extrapolation_value)}
    return _ops.apply_op("CropAndResize", [image, boxes, box_ind, crop_size], attrs,
                         name).outputs[0]


# --- drawing --------------------------------------------------------------------------------------
def _draw_infer(op):
    images, boxes, colors = op.inputs
    _rank(op, images, 4, "images")
    _rank(op, boxes, 3, "boxes")
    if images.shape.ndims == 4 and images.shape.as_list()[3] not in (None, 1, 3, 4):
        raise ValueError(f"Dimension must be 1, 3 or 4 but is {images.shape.as_list()[3]} for "
                         f"'{op.name}' ({op.type}): images")
    return [(images.dtype.base_dtype, images.shape)]


register_op("DrawBoundingBoxesV2", _draw_infer)


def draw_bounding_boxes(images, boxes, name=None, colors=None):
    """``images`` with the outlines of ``boxes`` (normalised ``[y_min, x_min, y_max,
    x_max]``, ``[batch, num_boxes, 4]``) drawn one pixel wide, box ``i`` in colour
    ``colors[i % len(colors)]`` (TF's ten colours by default)."""
    with _ops.name_scope(name, "draw_bounding_boxes") as scope:
        images = _ops.convert_to_tensor(images, name="images")
        boxes = _ops.convert_to_tensor(boxes, dtype=_dt.float32, name="boxes")
        if colors is None:
            colors = array_ops.zeros([0, 0], dtype=_dt.float32)
        colors = _ops.convert_to_tensor(colors, dtype=_dt.float32, name="colors")
        return _ops.apply_op("DrawBoundingBoxesV2", [images, boxes, colors], {},
                             scope.rstrip("/") or None).outputs[0]


# --- sampling a distorted crop ----------------------------------------------------------------
def _sample_box_infer(op):
    image_size, boxes, covered = op.inputs
    _rank(op, image_size, 1, "image_size")
    _rank(op, boxes, 3, "bounding_boxes")
    _scalar(op, covered, "min_object_covered")
    if image_size.shape.ndims == 1 and image_size.shape.as_list()[0] not in (None, 3):
        raise ValueError(f"Dimension must be 3 but is {image_size.shape.as_list()[0]} for "
                         f"'{op.name}' ({op.type}): image_size")
    t = image_size.dtype.base_dtype
    return [(t, TensorShape([3])), (t, TensorShape([3])), (_dt.float32, TensorShape([1, 1, 4]))]


register_op("SampleDistortedBoundingBoxV2", _sample_box_infer, stateful=True)
NotDifferentiable("SampleDistortedBoundingBoxV2")


def sample_distorted_bounding_box(image_size, bounding_boxes, seed=None, seed2=None,
                                  min_object_covered=0.1, aspect_ratio_range=None,
                                  area_range=None, max_attempts=None,
                                  use_image_if_no_bounding_boxes=None, name=None):
    """A random crop of an image of ``image_size`` (``[height, width, channels]``) that
    covers at least ``min_object_covered`` of one of ``bounding_boxes``: ``(begin, size,
    bbox)`` for ``tf.slice`` and ``draw_bounding_boxes``. As TF 1.x's, the op takes ``seed``
    and ``seed2`` as given (not through the graph-level seed), and with a seed it draws TF's
    numbers."""
    with _ops.name_scope(name, "sample_distorted_bounding_box"):
        image_size = _ops.convert_to_tensor(image_size, name="image_size")
        if image_size.dtype.base_dtype not in (_dt.uint8, _dt.int8, _dt.int16, _dt.int32,
                                               _dt.int64):
            raise TypeError(f"image_size must be an integer tensor, got "
                            f"{image_size.dtype.name}")
        boxes = _ops.convert_to_tensor(bounding_boxes, dtype=_dt.float32,
                                       name="bounding_boxes")
        covered = _ops.convert_to_tensor(min_object_covered, dtype=_dt.float32,
                                         name="min_object_covered")
        attrs = {"seed": int(seed or 0), "seed2": int(seed2 or 0),
                 "aspect_ratio_range": [float(v) for v in (aspect_ratio_range or
                                                           (0.75, 1.33))],
                 "area_range": [float(v) for v in (area_range or (0.05, 1.0))],
                 "max_attempts": int(100 if max_attempts is None else max_attempts),
                 "use_image_if_no_bounding_boxes": bool(use_image_if_no_bounding_boxes)}
        return tuple(_ops.apply_op("SampleDistortedBoundingBoxV2",
                                   [image_size, boxes, covered], attrs).outputs)


# --- glimpses ------------------------------------------------------------------------------------
def _glimpse_infer(op):
    images, size, offsets = op.inputs
    _rank(op, images, 4, "input")
    _rank(op, size, 1, "size")
    _rank(op, offsets, 2, "offsets")
    if size.shape.ndims == 1 and size.shape.as_list()[0] not in (None, 2):
        raise ValueError(f"Dimension must be 2 but is {size.shape.as_list()[0]} for "
                         f"'{op.name}' ({op.type}): size")
    dims = images.shape.as_list() if images.shape.ndims == 4 else [None] * 4
    n_off = offsets.shape.as_list()[0] if offsets.shape.ndims == 2 else None
    if None not in (dims[0], n_off) and dims[0] != n_off:
        raise ValueError(f"Dimensions must be equal, but are {dims[0]} and {n_off} for "
                         f"'{op.name}' ({op.type}): input and offsets")
    hw = constant_value_as_shape(size) if size.shape.as_tuple() == (2,) else None
    hw = hw.as_list() if hw is not None and hw.ndims == 2 else [None, None]
    return [(_dt.float32, TensorShape([dims[0], *hw, dims[3]]))]


register_op("ExtractGlimpse", _glimpse_infer, stateful=True)  # draws its noise
NotDifferentiable("ExtractGlimpse")


def extract_glimpse(input, size, offsets, centered=True, normalized=True,  # noqa: A002
                    uniform_noise=True, name=None):
    """``size`` (``[height, width]``) windows of the images of ``input``, centred at
    ``offsets`` (``[batch, 2]``, ``(y, x)``: fractions of the image when ``normalized``,
    from its centre when ``centered``, scaled by half the image when both); the part of a
    window outside its image is noise drawn from the image's range (as in TF 1.x, whatever
    ``uniform_noise`` says)."""
    images = _ops.convert_to_tensor(input, dtype=_dt.float32, name="input")
    size = _ops.convert_to_tensor(size, dtype=_dt.int32, name="size")
    offsets = _ops.convert_to_tensor(offsets, dtype=_dt.float32, name="offsets")
    attrs = {"centered": bool(centered), "normalized": bool(normalized),
             "uniform_noise": bool(uniform_noise), "noise": "uniform"}
    return _ops.apply_op("ExtractGlimpse", [images, size, offsets], attrs, name).outputs[0]


non_max_suppression_overlaps = non_max_suppression_with_overlaps

__all__: list[str] = []  # tf.image.* only (see dflab.namespaces)
