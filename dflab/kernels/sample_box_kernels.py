"""The kernel of ``SampleDistortedBoundingBoxV2`` (``tf.image.sample_distorted_bounding_box``),
TF's CPU kernel step for step.

Each run reserves ``max_attempts`` Philox blocks of the op's stream (4 words an attempt: an
aspect ratio, a height, a row and a column) and tries crops until one covers enough of a
bounding box, falling back to the whole image. The stream is TF's ``GuardedPhiloxRandom``:
keyed by ``seed`` with ``seed2`` in the counter, kept per op in the device's resources so
successive runs continue it; so a seeded op draws TF's crops, run after run. Arithmetic is
float32 where TF's is, with ``lrintf``'s rounding (halves to even).
"""

from __future__ import annotations

import os

import numpy as np

from dflab.framework import errors
from dflab.kernels import philox
from dflab.kernels.context import host
from dflab.kernels.registry import kernel

F32 = np.float32


class _Stream:
    """A stateful op's Philox key and next counter."""

    def __init__(self, seed: int, seed2: int):
        if seed == 0 and seed2 == 0:  # no seed: TF draws one from the OS
            seed, seed2 = (int.from_bytes(os.urandom(8), "little") for _ in range(2))
        self.key, self.counter = philox.stateful_key_counter(seed, seed2)

    def reserve(self, n_blocks: int):
        """The key and counter of the next ``n_blocks`` blocks, which are then used up."""
        counter = self.counter
        self.counter = philox.skip_counter(counter, n_blocks)
        return self.key, counter


def _lrint(x) -> int:
    return int(np.rint(F32(x)))


def _random_crop(width, height, min_rel, max_rel, aspect, rand):
    """TF's ``GenerateRandomCrop``: ``(x, y, w, h)`` or None."""
    if max_rel <= 0 or aspect <= 0 or width <= 0 or height <= 0 or min_rel > max_rel:
        return None
    min_area = F32(F32(min_rel * F32(width)) * F32(height))
    max_area = F32(F32(max_rel * F32(width)) * F32(height))
    h = _lrint(np.sqrt(F32(min_area / aspect)))
    max_h = _lrint(np.sqrt(F32(max_area / aspect)))
    if _lrint(F32(max_h) * aspect) > width:
        max_h = int((width + 0.5 - float(F32(1e-7))) / float(aspect))
        if _lrint(F32(max_h) * aspect) > width:
            max_h -= 1
    max_h = min(max_h, height)
    h = min(h, max_h)
    if h < max_h:
        h += rand.uniform(max_h - h + 1)
    w = _lrint(F32(h) * aspect)
    area = F32(w * h)
    if area < min_area:
        h += 1
        w = _lrint(F32(h) * aspect)
        area = F32(w * h)
    if area > max_area:
        h -= 1
        w = _lrint(F32(h) * aspect)
        area = F32(w * h)
    if area < min_area or area > max_area or w > width or h > height or w <= 0 or h <= 0:
        return None
    y = rand.uniform(height - h) if h < height else 0
    x = rand.uniform(width - w) if w < width else 0
    return x, y, w, h


def _area(x0, y0, x1, y1) -> int:
    return max(x1 - x0, 0) * max(y1 - y0, 0) if x1 > x0 and y1 > y0 else 0


def _covers(crop, covered, boxes) -> bool:
    """TF's ``SatisfiesOverlapConstraints``."""
    x, y, w, h = crop
    if w * h < 10:
        return False
    for bx0, by0, bx1, by1 in boxes:
        box_area = _area(bx0, by0, bx1, by1)
        if box_area == 0:
            continue
        inter = _area(max(x, bx0), max(y, by0), min(x + w, bx1), min(y + h, by1))
        if F32(F32(inter) / F32(box_area)) >= covered:
            return True
    return False


def _check_attrs(node, aspect, area, attempts):
    def bad(msg):
        return errors.InvalidArgumentError(None, node, msg)

    if len(aspect) != 2:
        raise bad("Aspect ratio range field must specify 2 dimensions")
    if not (aspect[0] > 0 and aspect[1] > 0):
        raise bad(f"Aspect ratio range must be positive: [{aspect[0]}, {aspect[1]}]")
    if len(area) != 2:
        raise bad("Area range field must specify 2 dimensions")
    if not (area[0] <= 1 and area[1] <= 1):
        raise bad(f"Area range must be less then or equal to 1.0: [{area[0]}, {area[1]}]")
    if not (area[0] > 0 and area[1] > 0):
        raise bad(f"Area range must be positive: [{area[0]}, {area[1]}]")
    if attempts <= 0:
        raise bad(f"Max attempts must be non-negative: {attempts}")


@kernel("SampleDistortedBoundingBoxV2", host_only=True)
def _sample_distorted_bounding_box(node, ctx):
    a = node.attr
    aspect = [F32(v) for v in a.get("aspect_ratio_range", [0.75, 1.33])]
    area = [F32(v) for v in a.get("area_range", [0.05, 1.0])]
    attempts = int(a.get("max_attempts", 100))
    use_image = bool(a.get("use_image_if_no_bounding_boxes", False))
    seed, seed2 = int(a.get("seed", 0)), int(a.get("seed2", 0))

    def sample(image_size, bounding_boxes, min_object_covered):
        _check_attrs(node, aspect, area, attempts)
        size = host(image_size)
        if size.shape != (3,):
            raise errors.InvalidArgumentError(
                None, node, f"image_size must be 1-dimensional with 3 elements, got shape "
                f"{list(size.shape)}")
        height, width = int(size[0]), int(size[1])
        boxes = np.asarray(bounding_boxes, F32)
        if boxes.ndim != 3 or boxes.shape[-1] != 4:
            raise errors.InvalidArgumentError(
                None, node, "input boxes must be 3-dimensional [batch, num_boxes, coords]: "
                f"{list(boxes.shape)}")
        covered = F32(host(min_object_covered))
        if covered < 0:
            raise errors.InvalidArgumentError(None, node,
                                              f"min_object_covered must be non-negative: "
                                              f"{covered}")
        rects = []
        for b in boxes.reshape(-1, 4):
            if np.any(b < 0) or np.any(b > 1):
                raise errors.InvalidArgumentError(
                    None, node, "All bounding box coordinates must be in [0.0, 1.0]: "
                    f"{b[(b < 0) | (b > 1)][0]}")
            rects.append((int(b[1] * F32(width)), int(b[0] * F32(height)),
                          int(b[3] * F32(width)), int(b[2] * F32(height))))
        if not rects:
            if not use_image:
                raise errors.InvalidArgumentError(
                    None, node, "No bounding boxes provided as input. One must enable "
                    "use_image_if_no_bounding_boxes if you wish to not provide any bounding "
                    "boxes.")
            rects.append((0, 0, width, height))
        stream = ctx.resources.lookup_or_create("rng", f"{node.name}:{seed}:{seed2}",
                                                lambda: _Stream(seed, seed2))
        rand = philox.WordStream(*stream.reserve(attempts), 4 * attempts)
        crop = (0, 0, width, height)
        for _ in range(attempts):
            ratio = F32(rand.rand_float() * F32(aspect[1] - aspect[0]) + aspect[0])
            found = _random_crop(width, height, area[0], area[1], ratio, rand)
            if found is not None and _covers(found, covered, rects):
                crop = found
                break
        x, y, w, h = crop
        dt = size.dtype
        begin = np.array([y, x, 0], dt)
        extent = np.array([h, w, -1], dt)
        bbox = np.array([[[F32(y) / F32(height), F32(x) / F32(width), F32(y + h) / F32(height),
                           F32(x + w) / F32(width)]]], F32)
        return begin, extent, bbox

    return sample
