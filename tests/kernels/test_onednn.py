"""The host kernels on oneDNN (``dflab.kernels.onednn``) against NumPy's, the reference.

Each case runs the same graph in two sessions, one with ``ConfigProto(dflab={"onednn":
False})``, and compares every output. Tolerances, relative to the largest magnitude of the
NumPy result: matrix products, convolutions and their gradients 1e-5 (oneDNN sums in another
order: the differences seen are 1e-7 to 5e-7), average pooling and its gradient 1e-6; max
pooling and its gradient exactly (choosing a maximum and routing to it compute nothing), and
the Adam update exactly (NumPy's operations in NumPy's order). The
trace names the kernel that ran (``_MklConv2D``, TF's name for its oneDNN kernel); the NumPy
path keeps the op's type.

The cases that need the library are skipped where it is not installed (the ``onednn``
extra, which scripts/test installs, so CI runs them); the fallback tests run everywhere.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import dflab as tf
from dflab.kernels import intra_op, onednn
from dflab.kernels.onednn import capi, ops, plans

HAVE_LIBRARY = onednn.library() is not None
needs_library = pytest.mark.skipif(not HAVE_LIBRARY, reason=onednn.status())
RNG = np.random.default_rng(33)


def _kernel_types(run_metadata) -> dict[str, str]:
    """Node name -> the type its trace label names (``name = Type(inputs)``)."""
    out = {}
    for dev in run_metadata.step_stats.dev_stats:
        for ns in dev.node_stats:
            out[ns.node_name] = ns.timeline_label.split(" = ", 1)[1].split("(", 1)[0]
    return out


def run_both(build, feeds_fn, threads=0):
    """``build()`` -> (fetches, placeholders) run with oneDNN on and off: (on values, off
    values, kernel types with it on, kernel types with it off)."""
    results = []
    for on in (True, False):
        g = tf.Graph()
        with g.as_default():
            fetches, phs = build()
            init = tf.global_variables_initializer()
        config = tf.ConfigProto(intra_op_parallelism_threads=threads, dflab={"onednn": on})
        with tf.Session(graph=g, config=config) as sess:
            sess.run(init)
            md = tf.RunMetadata()
            vals = sess.run(fetches, dict(zip(phs, feeds_fn())),
                            options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE),
                            run_metadata=md)
        results.append((vals, _kernel_types(md)))
    (on_vals, on_types), (off_vals, off_types) = results
    return on_vals, off_vals, on_types, off_types


def assert_close(got, want, tol):
    scale = max(float(np.max(np.abs(want))), 1e-30) if want.size else 1.0
    assert got.shape == want.shape and got.dtype == want.dtype
    err = float(np.max(np.abs(got - want))) if want.size else 0.0
    assert err <= tol * scale, f"max error {err:.3g} > {tol} x {scale:.3g}"


def _weights(seed, y):
    """Random weights of ``y``'s shape, the same in both sessions (a seed drawn once)."""
    shape = y.shape.as_list()
    return tf.constant(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def _hw(values, fmt):
    """A spatial [h, w] pair as a 4-vector of ``fmt``."""
    return [1, 1, *values] if fmt == "NCHW" else [1, *values, 1]


# --- batch normalization ------------------------------------------------------------------
@needs_library
@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("shape", [(4, 8, 8, 16), (2, 5, 7, 64), (16, 3, 3, 256)])
def test_fused_batch_norm_and_its_gradient_match_numpy(shape, training, fmt):
    """FusedBatchNormV3 and its gradient op, with the input's gradient, gamma's and beta's;
    the statistics the op returns (unbiased variance, exponential averaging) too."""
    c = shape[-1]
    x_val = (RNG.standard_normal(shape) * 3 + 1).astype(np.float32)
    if fmt == "NCHW":
        x_val = np.ascontiguousarray(x_val.transpose(0, 3, 1, 2))
    params = [RNG.uniform(0.5, 1.5, c).astype(np.float32) for _ in range(4)]
    seed = int(RNG.integers(1 << 30))

    def build():
        x = tf.placeholder(tf.float32, x_val.shape)
        scale, offset, mean, var = (tf.constant(p) for p in params)
        y, m, v = tf.nn.fused_batch_norm(x, scale, offset, mean, var, epsilon=1e-3,
                                         data_format=fmt, is_training=training,
                                         exponential_avg_factor=0.5 if training else 1.0,
                                         name="bn")
        grads = tf.gradients(tf.reduce_sum(y * _weights(seed, y)), [x, scale, offset])
        return [y, m, v] + grads, [x]

    on, off, on_types, _ = run_both(build, lambda: [x_val])
    # (channels first stays on NumPy: oneDNN's batch norm for it is slower than NumPy's)
    mkl = "_Mkl" if fmt == "NHWC" else ""
    assert on_types["bn"] == f"{mkl}FusedBatchNormV3"
    assert f"{mkl}FusedBatchNormGradV3" in on_types.values()
    for got, want in zip(on, off):
        assert_close(got, want, 1e-5)


def test_a_small_batch_norm_stays_on_numpy():
    """Below a few thousand elements a primitive's call costs more than NumPy's passes."""
    def build():
        x = tf.placeholder(tf.float32, [2, 4, 4, 8])
        y, _, _ = tf.nn.fused_batch_norm(x, tf.ones([8]), tf.zeros([8]), name="bn")
        return [y], [x]

    _, _, on_types, _ = run_both(build, lambda: [np.ones((2, 4, 4, 8), np.float32)])
    assert on_types["bn"] == "FusedBatchNormV3"


# --- convolutions ---------------------------------------------------------------------------
CONV_CASES = [
    # (input NHWC, filter HWIO, strides, dilations, padding)
    ((2, 9, 11, 3), (3, 3, 3, 5), (1, 1), (1, 1), "SAME"),
    ((2, 9, 11, 3), (3, 3, 3, 5), (1, 1), (1, 1), "VALID"),
    ((2, 10, 9, 4), (3, 2, 4, 6), (2, 2), (1, 1), "SAME"),
    ((2, 10, 9, 4), (3, 3, 4, 6), (2, 1), (1, 1), "VALID"),
    ((2, 12, 12, 2), (3, 3, 2, 4), (1, 1), (2, 2), "SAME"),
    ((2, 12, 13, 2), (2, 3, 2, 4), (1, 1), (2, 3), "VALID"),
    ((3, 28, 28, 1), (5, 5, 1, 32), (1, 1), (1, 1), "SAME"),  # the MNIST CNN's first layer
    ((2, 14, 14, 32), (5, 5, 32, 64), (1, 1), (1, 1), "SAME"),  # and its second
    ((2, 7, 7, 8), (1, 1, 8, 16), (1, 1), (1, 1), "VALID"),  # a 1x1 convolution
    ((2, 5, 5, 3), (5, 5, 3, 4), (1, 1), (1, 1), "VALID"),  # one output pixel
]


def _conv_on_library(case) -> bool:
    """Whether oneDNN 3.2 has a fast kernel for all three ops of ``case`` (else only its
    reference one, and NumPy's runs): not for the gradients of a convolution with one output
    pixel. (Channels-first data is computed channels-last, so the layout does not matter.)"""
    x_shape, f_shape = case[:2]
    return f_shape[:2] != x_shape[1:3]


@needs_library
@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: f"{c[0]}x{c[1]}s{c[2]}d{c[3]}{c[4]}")
def test_convolution_and_its_gradients_match_numpy(case, fmt):
    x_shape, f_shape, strides, dilations, padding = case
    x_val = RNG.standard_normal(x_shape).astype(np.float32)
    f_val = RNG.standard_normal(f_shape).astype(np.float32)
    if fmt == "NCHW":
        x_val = np.ascontiguousarray(x_val.transpose(0, 3, 1, 2))
    seed = int(RNG.integers(1 << 30))

    def build():
        x = tf.placeholder(tf.float32, x_val.shape)
        f = tf.Variable(f_val)
        y = tf.nn.conv2d(x, f, strides=_hw(strides, fmt), padding=padding,
                         dilations=_hw(dilations, fmt), data_format=fmt, name="conv")
        w = _weights(seed, y)
        dx, df = tf.gradients(tf.reduce_sum(y * w), [x, f])
        return [y, dx, df], [x]

    on, off, on_types, off_types = run_both(build, lambda: [x_val])
    for got, want in zip(on, off):
        assert_close(got, want, 1e-5)
    grads = {t for n, t in on_types.items() if "conv_grad" in n and "Conv2D" in t}
    assert off_types["conv"] == "Conv2D"
    if _conv_on_library(case):
        assert on_types["conv"] == "_MklConv2D"
        assert grads == {"_MklConv2DBackpropInput", "_MklConv2DBackpropFilter"}
    else:  # every op still computes, on one path or the other, and says which
        assert grads <= {"_MklConv2DBackpropInput", "_MklConv2DBackpropFilter",
                         "Conv2DBackpropInput", "Conv2DBackpropFilter"}


@needs_library
def test_channels_first_convolutions_run_the_channels_last_kernels():
    """oneDNN's kernels for channels-first data are generic ones, slower than NumPy's: NCHW
    data is reordered to channels-last around the same kernel NHWC data runs."""
    lib = onednn.library()
    x = RNG.standard_normal((2, 14, 14, 32)).astype(np.float32)
    f = RNG.standard_normal((5, 5, 32, 64)).astype(np.float32)
    g = ops.Geometry(5, 5, 1, 1, 1, 1, 2, 2, 2, 2)
    impls, outs = {}, {}
    for fmt, data in (("NHWC", x), ("NCHW", np.ascontiguousarray(x.transpose(0, 3, 1, 2)))):
        plans.clear_cache()
        y = ops.conv2d(lib, 1, data, f, fmt, g, (14, 14))
        dy = RNG.standard_normal(y.shape).astype(np.float32)
        ops.conv2d_backprop_input(lib, 1, data.shape, f, dy, fmt, g)
        ops.conv2d_backprop_filter(lib, 1, data, f.shape, dy, fmt, g)
        impls[fmt] = sorted((k[0], p.impl) for k, p in plans._cache.items())
        outs[fmt] = y if fmt == "NHWC" else y.transpose(0, 2, 3, 1)
    plans.clear_cache()
    assert impls["NCHW"] == impls["NHWC"]
    assert_close(outs["NCHW"], outs["NHWC"], 1e-6)


# --- pooling --------------------------------------------------------------------------------
POOL_CASES = [
    # (input NHWC, window, strides, padding)
    ((2, 8, 8, 3), (2, 2), (2, 2), "SAME"),
    ((2, 9, 7, 3), (2, 2), (2, 2), "SAME"),
    ((2, 9, 7, 3), (2, 2), (2, 2), "VALID"),
    ((2, 9, 9, 4), (3, 3), (2, 2), "SAME"),  # overlapping windows
    ((2, 9, 9, 4), (3, 3), (1, 1), "VALID"),
    ((1, 6, 10, 2), (3, 2), (2, 2), "SAME"),
    ((1, 6, 10, 2), (3, 2), (2, 3), "SAME"),  # a stride wider than the window
    ((3, 28, 28, 32), (2, 2), (2, 2), "SAME"),  # the MNIST CNN's first pool
]


@needs_library
@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("case", POOL_CASES, ids=lambda c: f"{c[0]}k{c[1]}s{c[2]}{c[3]}")
def test_pooling_and_its_gradient_match_numpy(case, kind, fmt):
    x_shape, window, strides, padding = case
    # Few distinct values: many windows have tied maxima, which must route alike.
    x_val = RNG.integers(-2, 3, x_shape).astype(np.float32)
    if fmt == "NCHW":
        x_val = np.ascontiguousarray(x_val.transpose(0, 3, 1, 2))
    pool_fn = tf.nn.max_pool if kind == "max" else tf.nn.avg_pool
    seed = int(RNG.integers(1 << 30))

    def build():
        x = tf.placeholder(tf.float32, x_val.shape)
        y = pool_fn(x, _hw(window, fmt), _hw(strides, fmt), padding, data_format=fmt,
                    name="pool")
        w = _weights(seed, y)
        (dx,) = tf.gradients(tf.reduce_sum(y * w), [x])
        return [y, dx], [x]

    on, off, on_types, off_types = run_both(build, lambda: [x_val])
    op = "MaxPool" if kind == "max" else "AvgPool"
    assert off_types["pool"] == op
    assert on_types["pool"] == f"_Mkl{op}"
    assert {t for n, t in on_types.items() if "pool_grad" in n and "Pool" in t} == {
        f"_Mkl{op}Grad"}
    overlapping = strides[0] < window[0] or strides[1] < window[1]
    if kind == "max":
        np.testing.assert_array_equal(on[0], off[0])
        if overlapping:  # a cell in several windows sums their gradients in another order
            assert_close(on[1], off[1], 1e-6)
        else:
            np.testing.assert_array_equal(on[1], off[1])
    else:
        assert_close(on[0], off[0], 1e-6)
        assert_close(on[1], off[1], 1e-6)


@needs_library
@pytest.mark.parametrize("poison", [np.nan, -np.inf])
def test_max_pool_over_nan_or_minus_infinity_keeps_numpys_results(poison):
    """oneDNN never picks a NaN and starts a maximum from the lowest finite float; such
    inputs go to NumPy, which takes a NaN as its window's maximum and keeps -inf."""
    x_val = RNG.standard_normal((1, 4, 4, 2)).astype(np.float32)
    x_val[0, :2, :2, 0] = poison  # a whole window of it
    x_val[0, 2, 3, 1] = poison

    def build():
        x = tf.placeholder(tf.float32, x_val.shape)
        y = tf.nn.max_pool(x, [1, 2, 2, 1], [1, 2, 2, 1], "SAME", name="pool")
        (dx,) = tf.gradients(tf.reduce_sum(y), [x])
        return [y, dx], [x]

    on, off, on_types, _ = run_both(build, lambda: [x_val])
    np.testing.assert_array_equal(on[0], off[0])
    np.testing.assert_array_equal(on[1], off[1])
    assert on[0][0, 0, 0, 0] == poison or (np.isnan(poison) and np.isnan(on[0][0, 0, 0, 0]))
    assert on_types["pool"] == "MaxPool"  # NumPy's kernel ran


# --- what stays on NumPy --------------------------------------------------------------------
@needs_library
def test_float64_and_empty_tensors_stay_on_numpy():
    x_val = RNG.standard_normal((2, 5, 5, 3))
    f_val = RNG.standard_normal((3, 3, 3, 2))

    def build():
        x = tf.placeholder(tf.float64, x_val.shape)
        y = tf.nn.conv2d(x, tf.constant(f_val), [1, 1, 1, 1], "SAME", name="conv")
        e = tf.nn.max_pool(tf.zeros([0, 4, 4, 2]), [1, 2, 2, 1], [1, 2, 2, 1], "SAME",
                           name="empty_pool")
        return [y, e], [x]

    on, off, on_types, _ = run_both(build, lambda: [x_val])
    np.testing.assert_array_equal(on[0], off[0])
    assert on[1].shape == (0, 2, 2, 2)
    assert on_types["conv"] == "Conv2D" and on_types["empty_pool"] == "MaxPool"


# --- matrix products ------------------------------------------------------------------------
MATMUL_CASES = [
    # (a's shape as stored, b's shape as stored, transpose_a, transpose_b)
    ((20, 400), (400, 800), False, False),  # an LSTM cell's product
    ((20, 800), (400, 800), False, True),  # its input gradient
    ((20, 400), (20, 800), True, False),  # its weight gradient
    ((128, 512), (512, 256), False, False),
    ((512, 128), (256, 512), True, True),
    ((128, 784), (784, 512), False, False),  # the MLP's first layer
    ((64, 3136), (3136, 1024), False, False),  # the CNN's dense layer
    ((7, 5), (5, 3), False, False),  # below ONEDNN_MIN_PRODUCT: BLAS's too
]


def _products_both_ways(a_shape, b_shape, **matmul_args):
    """``tf.matmul(a, b, **matmul_args)`` (named "mm") and the two products of its gradient,
    with oneDNN and without: (a, b, on values, off values, on kernel types, off ones)."""
    a_val, b_val = (RNG.standard_normal(s).astype(np.float32) for s in (a_shape, b_shape))

    def build():
        a, b = tf.placeholder(tf.float32, a_shape), tf.placeholder(tf.float32, b_shape)
        y = tf.matmul(a, b, name="mm", **matmul_args)
        ga, gb = tf.gradients(tf.reduce_sum(y * y), [a, b])
        return [y, ga, gb], [a, b]

    return (a_val, b_val) + run_both(build, lambda: [a_val, b_val])


@needs_library
@pytest.mark.parametrize("case", MATMUL_CASES, ids=lambda c: f"{c[0]}{c[1]}t{c[2]:d}{c[3]:d}")
def test_matrix_products_and_their_gradients_match_numpy(case):
    """MatMul and the two MatMuls of its gradient, through oneDNN (transposed operands read
    through their strides) against NumPy's BLAS: within 1e-5 of the largest magnitude."""
    from dflab.kernels.math_kernels import ONEDNN_MIN_PRODUCT

    a_shape, b_shape, ta, tb = case
    a_val, b_val, on, off, on_types, off_types = _products_both_ways(
        a_shape, b_shape, transpose_a=ta, transpose_b=tb)
    want = (a_val.T if ta else a_val) @ (b_val.T if tb else b_val)
    assert_close(off[0], want, 1e-5)
    for got, ref in zip(on, off):
        assert_close(got, ref, 1e-5)
        assert got.flags.c_contiguous
    m, k = want.shape[0], (a_shape[0] if ta else a_shape[1])
    on_library = m * k * want.shape[1] >= ONEDNN_MIN_PRODUCT
    assert on_types["mm"] == ("_MklMatMul" if on_library else "MatMul")
    assert off_types["mm"] == "MatMul"
    products = [t for name, t in on_types.items() if name.startswith("gradients")
                and t.endswith("MatMul")]
    assert len(products) == 2 and all(t == on_types["mm"] for t in products)


BATCH_CASES = [
    # (a's shape, b's shape, adj_x, adj_y, on oneDNN)
    ((64, 64, 64), (64, 64, 64), False, False, True),
    ((8, 20, 400), (8, 800, 400), False, True, True),  # a transposed batch: read by strides
    ((2, 4, 128, 32), (2, 4, 128, 96), True, False, True),  # two batch axes, merged
    ((4, 8, 8), (4, 8, 8), False, False, False),  # below ONEDNN_MIN_PRODUCT
    ((1, 128, 256), (16, 256, 128), False, False, False),  # a broadcast batch: NumPy's
]


@needs_library
@pytest.mark.parametrize("case", BATCH_CASES, ids=lambda c: f"{c[0]}{c[1]}a{c[2]:d}{c[3]:d}")
def test_batched_products_and_their_gradients_match_numpy(case):
    """BatchMatMulV2 and its gradient's products on oneDNN's batched GEMM against NumPy's
    stacked product: within 1e-5 of the largest magnitude; the trace names the kernel."""
    a_shape, b_shape, adj_x, adj_y, on_library = case
    a_val, b_val, on, off, on_types, off_types = _products_both_ways(
        a_shape, b_shape, adjoint_a=adj_x, adjoint_b=adj_y)
    want = (np.swapaxes(a_val, -1, -2) if adj_x else a_val) @ \
        (np.swapaxes(b_val, -1, -2) if adj_y else b_val)
    assert_close(off[0], want, 1e-5)
    for got, ref in zip(on, off):
        assert got.shape == ref.shape
        assert_close(got, ref, 1e-5)
    assert on_types["mm"] == ("_MklBatchMatMulV2" if on_library else "BatchMatMulV2")
    assert off_types["mm"] == "BatchMatMulV2"


@needs_library
def test_product_operands_onednn_cannot_take_go_to_blas():
    """Every other column (an inner stride of 2), a broadcast row, float64 and empty operands:
    oneDNN refuses or is not asked, and the kernel's product is NumPy's, exactly."""
    from dflab.kernels import math_kernels
    from dflab.kernels.onednn import ops, plans

    lib = onednn.library()
    a = RNG.standard_normal((64, 512)).astype(np.float32)
    b = RNG.standard_normal((256, 256)).astype(np.float32)
    with pytest.raises(plans.UnsupportedError, match="broadcast"):
        ops.matmul(lib, 1, np.broadcast_to(a[:1], (64, 512))[:, :256], b)
    with pytest.raises(plans.UnsupportedError, match="dtype"):
        ops.matmul(lib, 1, a[:, :256].astype(np.float64), b)
    with pytest.raises(plans.UnsupportedError, match="non-empty"):
        ops.matmul(lib, 1, a[:0, :256], b)
    backend = onednn.Backend(lib, 1)
    for kernel in (math_kernels._on_onednn(backend, np.matmul),
                   math_kernels._host_matmul(backend)):
        for x in (a[:, ::2], np.broadcast_to(a[:1], (64, 512))[:, :256]):
            got = kernel(x, b)
            try:
                want = ops.matmul(lib, 1, x, b)  # where oneDNN takes it, it is its result
            except plans.UnsupportedError:
                want = np.matmul(x, b)
                assert kernel.kernel_label is None
            assert_close(got, want, 0)
            assert_close(got, np.matmul(x, b), 1e-5)


@needs_library
def test_host_matmul_names_where_each_call_ran():
    """The host's MatMul kernel with oneDNN: a product from ``ONEDNN_MIN_PRODUCT`` runs there
    and says so; a small one after it runs on ``ndarray.dot`` (``np.matmul``'s bits) and the
    label goes back to None; a big one again sets it."""
    from dflab.kernels import math_kernels

    lib = onednn.library()
    kernel = math_kernels._host_matmul(onednn.Backend(lib, 1))
    big_a = RNG.standard_normal((256, 64)).astype(np.float32)
    big_b = RNG.standard_normal((64, 128)).astype(np.float32)
    small = RNG.standard_normal((3, 3)).astype(np.float32)
    assert 256 * 64 * 128 >= math_kernels.ONEDNN_MIN_PRODUCT
    for _ in range(2):
        assert_close(kernel(big_a, big_b), np.matmul(big_a, big_b), 1e-5)
        assert kernel.kernel_label == onednn.label("MatMul")
        assert kernel(small, small).tobytes() == np.matmul(small, small).tobytes()
        assert kernel.kernel_label is None


# --- threads, concurrency -------------------------------------------------------------------
@needs_library
@pytest.mark.parametrize("threads, expected", [(0, intra_op.usable_cores()), (1, 1), (2, 2)])
def test_library_threads_follow_the_sessions_intra_op_setting(threads, expected):
    config = tf.ConfigProto(intra_op_parallelism_threads=threads)
    with tf.Session(graph=tf.Graph(), config=config) as sess:
        ctx = sess.devices["CPU:0"].context
        backend = onednn.for_kernel(ctx, np.float32)
        assert backend is not None and backend.threads == expected
        assert onednn.for_kernel(ctx, np.float64) is None
    off = tf.ConfigProto(dflab={"onednn": False})
    with tf.Session(graph=tf.Graph(), config=off) as sess:
        assert onednn.for_kernel(sess.devices["CPU:0"].context, np.float32) is None


@needs_library
def test_one_convolution_runs_on_several_threads_at_once():
    """A plan is shared by the threads that run it; each runs it on memories of its own."""
    x_vals = [RNG.standard_normal((4, 14, 14, 8)).astype(np.float32) for _ in range(4)]
    f_val = RNG.standard_normal((5, 5, 8, 16)).astype(np.float32)
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [4, 14, 14, 8])
        y = tf.nn.conv2d(x, tf.constant(f_val), [1, 1, 1, 1], "SAME")
    with tf.Session(graph=g, config=tf.ConfigProto(dflab={"onednn": False})) as ref:
        want = [ref.run(y, {x: v}) for v in x_vals]
    sess = tf.Session(graph=g)
    got = [[None] * 20 for _ in x_vals]
    errors = []

    def worker(k):
        try:
            for i in range(20):
                got[k][i] = sess.run(y, {x: x_vals[k]})
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(len(x_vals))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    sess.close()
    assert not errors
    for k, runs in enumerate(got):
        for value in runs:
            assert_close(value, want[k], 1e-5)


# --- without the library --------------------------------------------------------------------
def test_without_the_library_kernels_run_numpys_and_say_so(monkeypatch):
    monkeypatch.setattr(onednn, "library", lambda: None)
    x_val = RNG.standard_normal((2, 8, 8, 3)).astype(np.float32)
    f_val = RNG.standard_normal((3, 3, 3, 4)).astype(np.float32)
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, x_val.shape)
        y = tf.nn.conv2d(x, tf.constant(f_val), [1, 1, 1, 1], "SAME", name="conv")
        p = tf.nn.max_pool(y, [1, 2, 2, 1], [1, 2, 2, 1], "SAME", name="pool")
    with tf.Session(graph=g) as sess:
        assert onednn.for_kernel(sess.devices["CPU:0"].context, np.float32) is None
        md = tf.RunMetadata()
        out = sess.run(p, {x: x_val}, options=tf.RunOptions(trace_level=3), run_metadata=md)
    types = _kernel_types(md)
    assert types["conv"] == "Conv2D" and types["pool"] == "MaxPool"
    assert out.shape == (2, 4, 4, 4)


def test_a_missing_library_is_reported_with_where_it_was_looked_for(monkeypatch, tmp_path):
    missing = tmp_path / "libdnnl.so.3"
    monkeypatch.setenv(capi.LIBRARY_ENV, str(missing))
    with pytest.raises(OSError, match="oneDNN's library was not found") as info:
        capi.load()
    assert str(missing) in str(info.value)
    not_a_library = tmp_path / "bad.so"
    not_a_library.write_bytes(b"not an ELF file")
    monkeypatch.setenv(capi.LIBRARY_ENV, str(not_a_library))
    with pytest.raises(OSError, match="bad.so"):
        capi.load()


def test_the_library_is_there_where_it_is_required():
    """scripts/test sets DFLAB_REQUIRE_ONEDNN where the extra installs it (Linux x86-64), so
    that CI runs the cases above instead of skipping them."""
    if os.environ.get("DFLAB_REQUIRE_ONEDNN"):
        assert HAVE_LIBRARY, onednn.status()


def test_status_says_what_is_in_use():
    status = onednn.status()
    if HAVE_LIBRARY:
        assert status.startswith("oneDNN 3.") and "libdnnl" in status
    else:
        assert status.startswith("oneDNN not in use (NumPy kernels)")


def test_option_is_typed():
    with pytest.raises(TypeError, match="onednn must be bool"):
        tf.ConfigProto(dflab={"onednn": "no"})
    with pytest.raises(TypeError, match="onednn_products must be bool"):
        tf.ConfigProto(dflab={"onednn_products": 1})
    assert tf.ConfigProto().dflab.onednn is True
    assert tf.ConfigProto().dflab.onednn_products is True


@needs_library
def test_products_can_stay_on_blas_while_convolutions_use_the_library():
    x_val = RNG.standard_normal((2, 8, 8, 4)).astype(np.float32)
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, x_val.shape)
        y = tf.nn.conv2d(x, tf.ones([3, 3, 4, 8]), [1, 1, 1, 1], "SAME", name="conv")
        z = tf.matmul(tf.reshape(y, [2, -1]), tf.ones([512, 1024]), name="mm")
    config = tf.ConfigProto(dflab={"onednn_products": False})
    with tf.Session(graph=g, config=config) as sess:
        md = tf.RunMetadata()
        got = sess.run(z, {x: x_val}, options=tf.RunOptions(trace_level=3), run_metadata=md)
    types = _kernel_types(md)
    assert types["conv"] == "_MklConv2D" and types["mm"] == "MatMul"
    np.testing.assert_allclose(got[:, :1], got[:, 1:2])  # every column sums the same row


def test_import_dflab_does_not_load_the_library():
    code = ("import sys, dflab; "
            "print('dflab.kernels.onednn.capi' in sys.modules, "
            "'libdnnl' in open('/proc/self/maps').read())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert out.stdout.split() == ["False", "False"]


def test_openmp_spins_briefly_unless_the_user_chose(monkeypatch):
    """GNU OpenMP's idle threads would spin for milliseconds after each op, taking a core
    from the intra-op pool's next chunks; the library loads with a short spin, the
    environment left as it was, and a wait policy the user set is kept."""
    for name in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT"):
        monkeypatch.delenv(name, raising=False)
    with capi._short_spin():
        assert os.environ["GOMP_SPINCOUNT"] == capi.SPIN_COUNT
    assert "GOMP_SPINCOUNT" not in os.environ
    monkeypatch.setenv("OMP_WAIT_POLICY", "active")
    with capi._short_spin():
        assert "GOMP_SPINCOUNT" not in os.environ


@needs_library
def test_operands_onednn_cannot_describe_go_to_numpy():
    """A broadcast operand (stride 0) or one oneDNN refuses is computed by NumPy's kernel;
    a refusal is remembered for those shapes."""
    from dflab.kernels.onednn import ops, plans

    lib = onednn.library()
    g = ops.Geometry(3, 3, 1, 1, 1, 1, 1, 1, 1, 1)
    x = np.broadcast_to(np.float32(1), (2, 6, 6, 3))
    f = np.ones((3, 3, 3, 4), np.float32)
    with pytest.raises(plans.UnsupportedError, match="broadcast"):
        ops.conv2d(lib, 1, x, f, "NHWC", g, (6, 6))
    backend = onednn.Backend(lib, 1)
    assert backend.conv2d(np.ones((2, 6, 6, 3), np.float64), f, "NHWC", _Win(g, 6, 6)) is None
    calls = []

    def refuse():
        calls.append(1)
        raise capi.OneDnnError("dnnl_convolution_forward_primitive_desc_create failed")

    key = ("test refusal",)
    for _ in range(2):
        with pytest.raises(plans.UnsupportedError, match="failed"):
            plans.cached(key, refuse)
    assert calls == [1]


class _Win:
    """A window as the NumPy kernels' ``_Window`` gives it to the backend."""

    def __init__(self, g, oh, ow):
        for name, value in g._asdict().items():
            setattr(self, name, value)
        self.oh, self.ow = oh, ow


@needs_library
def test_the_label_shows_through_the_executors_wrappers():
    """A reference variable's filter reaches the kernel through the executor's dereferencing
    wrapper; the trace still names the kernel that ran."""
    tf.disable_resource_variables()
    x_val = RNG.standard_normal((2, 6, 6, 3)).astype(np.float32)
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, x_val.shape)
        f = tf.Variable(RNG.standard_normal((3, 3, 3, 4)).astype(np.float32))
        ref = f.op.outputs[0]  # the variable's reference itself, not its "read" snapshot
        assert ref.dtype.is_ref_dtype
        y = tf.nn.conv2d(x, ref, [1, 1, 1, 1], "SAME", name="conv")
        init = tf.global_variables_initializer()
    with tf.Session(graph=g) as sess:
        sess.run(init)
        md = tf.RunMetadata()
        sess.run(y, {x: x_val}, options=tf.RunOptions(trace_level=3), run_metadata=md)
    assert _kernel_types(md)["conv"] == "_MklConv2D"


# --- the Adam update (the host update's own tests: tests/train/test_adam_kernel.py) -----------
@needs_library
@pytest.mark.parametrize("use_resource", [True, False])
def test_adam_training_on_the_library_matches_numpy_bit_for_bit(use_resource):
    """Three Adam steps on a variable big enough for the blocked update, with oneDNN and
    without: the same values, and the trace names the kernel that ran."""
    results = []
    for on in (True, False):
        g = tf.Graph()
        with g.as_default():
            rng = np.random.default_rng(2)
            w = tf.get_variable("w", initializer=rng.standard_normal((300, 256))
                                .astype(np.float32), use_resource=use_resource)
            x = tf.constant(rng.standard_normal((4, 300)).astype(np.float32))
            loss = tf.reduce_sum(tf.square(tf.matmul(x, w)))
            train = tf.train.AdamOptimizer(0.01).minimize(loss)
            init = tf.global_variables_initializer()
        with tf.Session(graph=g, config=tf.ConfigProto(dflab={"onednn": on})) as sess:
            sess.run(init)
            md = tf.RunMetadata()
            for _ in range(3):
                sess.run(train, options=tf.RunOptions(trace_level=3), run_metadata=md)
            labels = {t for t in _kernel_types(md).values() if "Adam" in t}
            results.append((sess.run(w), labels))
    (on_w, on_labels), (off_w, off_labels) = results
    op = "ResourceApplyAdam" if use_resource else "ApplyAdam"
    assert on_labels == {"_Mkl" + op} and off_labels == {op}
    np.testing.assert_array_equal(on_w, off_w)
