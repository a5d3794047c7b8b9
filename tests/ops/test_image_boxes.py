"""tf.image's box ops beyond the TF fixtures: an unseeded sample_distorted_bounding_box keeps
its contract (inside the image, covering enough of a box, within the area and aspect
ranges), and its begin/size slice an image as Inception's preprocessing does."""

import numpy as np

import dflab as tf


def test_unseeded_distorted_crops_keep_the_contract():
    box = np.array([[[0.2, 0.1, 0.7, 0.6]]], np.float32)
    with tf.Graph().as_default():
        image = tf.zeros([60, 80, 3])
        begin, size, bbox = tf.image.sample_distorted_bounding_box(
            tf.shape(image), box, min_object_covered=0.6, aspect_ratio_range=[0.5, 2.0],
            area_range=[0.1, 1.0])
        crop = tf.slice(image, begin, size)
        with tf.Session() as sess:
            seen = set()
            for _ in range(30):
                (y, x, _), (h, w, _), bb, shape = sess.run([begin, size, bbox, tf.shape(crop)])
                assert shape.tolist() == [h, w, 3]
                assert 0 <= y and y + h <= 60 and 0 <= x and x + w <= 80
                np.testing.assert_allclose(bb[0, 0], [y / 60, x / 80, (y + h) / 60,
                                                      (x + w) / 80], rtol=1e-6)
                if (h, w) != (60, 80):  # a sampled crop, not the fallback
                    assert 0.1 * 4800 <= h * w <= 4800
                    assert 0.5 <= w / h * (1 + 1e-9) and w / h <= 2.0 + 1 / h
                    iy = max(0, min(y + h, 42) - max(y, 12))
                    ix = max(0, min(x + w, 48) - max(x, 8))
                    assert iy * ix / (30 * 40) >= 0.6 - 1e-6
                seen.add((y, x, h, w))
    assert len(seen) > 5  # unseeded, the op draws a new crop on every run
