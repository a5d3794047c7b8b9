"""MaxPoolGrad's host fast path for 2x2, stride-2 windows against a direct loop and against the
general tap-by-tap path: ties go to the window's first maximum in row-major order (what TF's CPU
kernel does: checked against TF 2.21 on random 0/1 inputs), odd sizes under SAME and VALID
padding, NCHW, NaN windows, infinite gradients, blocks and intra-op chunks; and numerical
gradients through the op."""

import numpy as np
import pytest
from op_test_util import check_grads

import dflab as tf
from dflab.kernels import conv_kernels, intra_op

RNG = np.random.default_rng(21)


def first_max_grad(x, g, padding):
    """Direct loop: each 2x2/2 window's gradient to its first maximal cell (row-major); a NaN
    is the maximum, as dflab's MaxPool propagates it."""
    n, h, w, c = x.shape
    oh, ow = g.shape[1:3]
    dx = np.zeros_like(x)
    for b in range(n):
        for i in range(oh):
            for j in range(ow):
                for k in range(c):
                    cells = [(r, q) for r in range(2 * i, min(2 * i + 2, h))
                             for q in range(2 * j, min(2 * j + 2, w))]
                    vals = np.array([x[b, r, q, k] for r, q in cells])
                    nan = np.flatnonzero(np.isnan(vals))
                    pick = nan[0] if nan.size else int(np.argmax(vals))
                    r, q = cells[pick]
                    dx[b, r, q, k] += g[b, i, j, k]
    return dx


def pool_grad(x, g, padding, data_format="NHWC", onednn=False):
    """MaxPoolGrad through a session: NumPy's kernel, or oneDNN's where it is installed and
    ``onednn`` (the float32 host kernel on it: tests/kernels/test_onednn.py)."""
    xt, gt = tf.constant(x), tf.constant(g)
    if data_format == "NCHW":
        xt, gt = tf.transpose(xt, [0, 3, 1, 2]), tf.transpose(gt, [0, 3, 1, 2])
        ksize = strides = [1, 1, 2, 2]
    else:
        ksize = strides = [1, 2, 2, 1]
    y = tf.nn.max_pool(xt, ksize, strides, padding, data_format=data_format)
    dx = tf.gradients(y, [xt], grad_ys=[gt])[0]
    if data_format == "NCHW":
        dx = tf.transpose(dx, [0, 2, 3, 1])
    with tf.Session(config=tf.ConfigProto(dflab={"onednn": onednn})) as s:
        return s.run(dx)


def pooled(h, padding):
    return -(-h // 2) if padding == "SAME" else h // 2


SHAPES = [(2, 4, 4, 3), (3, 7, 6, 2), (1, 5, 5, 1), (2, 9, 3, 4), (1, 3, 2, 2), (2, 2, 8, 1)]


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("onednn", [False, True])
def test_ties_go_to_the_first_maximum(shape, padding, dtype, onednn):
    x = RNG.integers(0, 2, shape).astype(dtype)  # mostly ties
    n, h, w, c = shape
    g = RNG.uniform(0.5, 1.5, (n, pooled(h, padding), pooled(w, padding), c)).astype(dtype)
    got = pool_grad(x, g, padding, onednn=onednn)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, first_max_grad(x, g, padding))


def test_matches_tf_on_a_recorded_tie_case():
    # TF 2.21 (tf.compat.v1, CPU) on this input gives the gradient below: the top-left cell of
    # an all-equal window, and (0, 1) ahead of (1, 0) when both hold the maximum.
    x = np.array([[1, 1, 0, 1, 5, 2],
                  [1, 1, 1, 1, 5, 5]], np.float32).reshape(1, 2, 6, 1)
    g = np.array([1, 2, 3], np.float32).reshape(1, 1, 3, 1)
    want = np.array([[1, 0, 0, 2, 3, 0],
                     [0, 0, 0, 0, 0, 0]], np.float32)
    np.testing.assert_array_equal(pool_grad(x, g, "VALID")[0, :, :, 0], want)


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
def test_nchw_matches_nhwc(padding):
    x = RNG.integers(0, 3, (2, 5, 7, 3)).astype(np.float32)
    g = RNG.standard_normal((2, pooled(5, padding), pooled(7, padding), 3)).astype(np.float32)
    np.testing.assert_array_equal(pool_grad(x, g, padding, "NCHW"), pool_grad(x, g, padding))


def test_nan_windows_and_infinite_gradients():
    x = RNG.integers(0, 2, (2, 5, 5, 2)).astype(np.float32)
    x[0, 0, 1, 0] = x[0, 1, 0, 0] = np.nan  # first NaN of its window in row-major order: (0, 1)
    x[1, 3, 3, 1] = np.nan
    x[1, 4, 4, 0] = -np.inf
    g = RNG.uniform(1, 2, (2, 3, 3, 2)).astype(np.float32)
    g[0, 1, 1, 1] = np.inf
    g[1, 2, 2, 0] = -np.inf
    got = pool_grad(x, g, "SAME")
    want = first_max_grad(x, g, "SAME")
    assert got[0, 0, 1, 0] == g[0, 0, 0, 0] and got[0, 1, 0, 0] == 0
    assert not np.isnan(got).any()  # no inf * 0 in the cells the inf did not go to
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("threads", [1, 3])
def test_fast_path_agrees_with_the_tap_by_tap_path(monkeypatch, threads):
    x = np.maximum(RNG.standard_normal((7, 9, 10, 3)), 0).astype(np.float32)  # zero windows
    g = RNG.standard_normal((7, 5, 5, 3)).astype(np.float32)
    pool = intra_op.IntraOpPool(threads)
    win = conv_kernels._Window(np, 9, 10, 2, 2, 2, 2, 1, 1, "SAME", pool)
    general = conv_kernels._route_to_max(win, x, g)
    monkeypatch.setattr(conv_kernels, "_POOL_BLOCK_BYTES", 1)  # one image per block
    monkeypatch.setattr(intra_op, "MIN_WORK", 1)
    try:
        fast = conv_kernels._max_pool_grad_2x2(win, x, g)
    finally:
        pool.close()
    np.testing.assert_array_equal(fast, general)


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
def test_numerical_gradient(padding):
    def fn(a):
        return tf.nn.max_pool(a, [1, 2, 2, 1], [1, 2, 2, 1], padding)

    # distinct values, so that no window's maximum is within the finite difference of a tie
    x = RNG.permutation(2 * 5 * 7 * 2).reshape(2, 5, 7, 2) / 10.0
    check_grads(fn, [x])
