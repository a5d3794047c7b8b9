"""Math ops: forward vs NumPy (with static shapes), gradients vs finite differences, TF1 dtype
and shape rules, operator overloads, and error classes for bad inputs."""

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from op_test_util import check_forward, check_grads, evaluate

import dflab as tf
from dflab.eager import eager_mode

RNG = np.random.default_rng(1234)


def rand(shape, dtype=np.float64, low=-2.0, high=2.0):
    return RNG.uniform(low, high, size=shape).astype(dtype)


def positive(shape, dtype=np.float64):
    return rand(shape, dtype, 0.5, 2.0)


def ints(shape, dtype=np.int32, low=-9, high=10):
    return RNG.integers(low, high, size=shape).astype(dtype)


def nonzero_ints(shape, dtype=np.int32):
    v = ints(shape, dtype, 1, 10)
    return v * np.where(RNG.random(shape) < 0.5, -1, 1).astype(dtype)


def run(t, feed=None):
    with tf.Session() as s:
        return s.run(t, feed)


def _sigmoid(x):
    with np.errstate(over="ignore"):
        return 1 / (1 + np.exp(-x))


def _tf_floordiv(x, y):
    return np.floor(x / y) if x.dtype.kind == "f" else np.floor_divide(x, y)


# --- unary ops ------------------------------------------------------------------------------------
# (builder, NumPy reference, input generator, differentiable)
UNARY = [
    (tf.negative, np.negative, rand, True),
    (tf.abs, np.abs, rand, True),
    (tf.sign, np.sign, rand, True),
    (tf.square, np.square, rand, True),
    (tf.sqrt, np.sqrt, positive, True),
    (tf.rsqrt, lambda x: 1 / np.sqrt(x), positive, True),
    (tf.reciprocal, np.reciprocal, positive, True),
    (tf.exp, np.exp, rand, True),
    (tf.log, np.log, positive, True),
    (tf.log1p, np.log1p, positive, True),
    (tf.sin, np.sin, rand, True),
    (tf.cos, np.cos, rand, True),
    (tf.tanh, np.tanh, rand, True),
    (tf.sigmoid, _sigmoid, rand, True),
    (tf.floor, np.floor, rand, False),
    (tf.ceil, np.ceil, rand, False),
    (tf.round, np.round, rand, False),
    (tf.is_nan, np.isnan, rand, False),
    (tf.is_finite, np.isfinite, rand, False),
]


@pytest.mark.parametrize("fn,ref,gen,_", UNARY, ids=[u[0].__name__ for u in UNARY])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(), (5,), (2, 3)])
def test_unary_forward(fn, ref, gen, _, dtype, shape):
    check_forward(fn, [gen(shape, dtype)], ref, rtol=1e-6 if dtype == np.float64 else 2e-6)


@pytest.mark.parametrize("fn,ref,gen,diff", [u for u in UNARY if u[3]],
                         ids=[u[0].__name__ for u in UNARY if u[3]])
def test_unary_gradient(fn, ref, gen, diff):
    x = gen((2, 3))
    if fn in (tf.abs, tf.sign):
        x = np.where(np.abs(x) < 0.1, 0.5, x)  # keep away from the kink
    check_grads(fn, [x])


@pytest.mark.parametrize("fn,grad_type", [(tf.tanh, "TanhGrad"), (tf.sigmoid, "SigmoidGrad")])
def test_tanh_and_sigmoid_gradients_are_one_op_each_with_second_derivatives(fn, grad_type):
    # As in TF: the derivative from the output is one op; its own gradient (with respect to
    # the output and to the incoming gradient) is checked against finite differences through
    # an incoming gradient that depends on x too.
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float64, [4])
        (dx,) = tf.gradients(fn(x), x)
        assert dx.op.type == grad_type and dx.op.inputs[0].op.type == fn(x).op.type
    check_grads(lambda t: tf.gradients(fn(t), t, grad_ys=t * t)[0], [rand((2, 3))])


@pytest.mark.parametrize("fn,ref", [(tf.negative, np.negative), (tf.abs, np.abs),
                                    (tf.sign, np.sign), (tf.square, np.square),
                                    (tf.round, np.round)])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_unary_integer_forward(fn, ref, dtype):
    check_forward(fn, [ints((3, 4), dtype)], ref)


@pytest.mark.parametrize("fn", [tf.sqrt, tf.exp, tf.log, tf.sin, tf.tanh, tf.sigmoid, tf.floor])
def test_float_only_unary_rejects_integers(fn):
    with pytest.raises(TypeError):
        fn(tf.constant([1, 2]))


def test_round_is_bankers():
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 0.4, 0.6], np.float32)
    got = run(tf.round(tf.constant(x)))
    np.testing.assert_array_equal(got, [-2, -2, -0, 0, 2, 2, 4, 0, 1])


def test_sigmoid_extremes_are_finite_and_quiet():
    x = np.array([-1000.0, -50.0, 0.0, 50.0, 1000.0], np.float32)
    with np.errstate(all="raise"):
        got = run(tf.sigmoid(tf.constant(x)))
    np.testing.assert_allclose(got, _sigmoid(x.astype(np.float64)), atol=1e-30)
    assert got.dtype == np.float32


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_sigmoid_is_within_rounding_of_the_exact_value(dtype):
    """Within a few units in the last place of the exact value (float64's from the exact
    formula of each sign in extended precision), to the smallest normal number where the
    result underflows; NaN where NaN; never on the wrong side of 0.5."""
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((40, 30)) * 20).astype(dtype)
    x.flat[:9] = [0.0, -0.0, np.inf, -np.inf, np.nan, -1e-30, 1e-30, -80.0, 30.0]
    got = run(tf.sigmoid(tf.constant(x)))
    assert got.dtype == dtype
    wide = x.astype(np.longdouble)
    with np.errstate(all="ignore"):
        e = np.exp(-np.abs(wide))
        want = np.where(wide >= 0, 1 / (1 + e), e / (1 + e))
    info = np.finfo(dtype)
    err = np.abs(got.astype(np.longdouble) - want)
    assert np.all(np.isnan(got) == np.isnan(x))
    ok = np.isnan(x) | (err <= 4 * info.eps * want + info.tiny)
    assert ok.all(), (x[~ok], got[~ok], want[~ok])
    positive, negative = x > 0, x < 0
    assert np.all(got[positive] >= 0.5) and np.all(got[negative] <= 0.5)


def test_abs_of_complex_is_real():
    c = tf.constant(np.array([3 + 4j, -1j], np.complex64))
    y = tf.abs(c)
    assert y.dtype == tf.float32
    np.testing.assert_allclose(run(y), [5.0, 1.0])


def test_log_of_zero_is_minus_inf_without_warning():
    with np.errstate(all="raise"):
        got = run(tf.log(tf.constant([0.0, 1.0])))
    assert got[0] == -np.inf and got[1] == 0.0


# --- binary ops -----------------------------------------------------------------------------------
SHAPE_PAIRS = [((2, 3), (2, 3)), ((2, 3), (3,)), ((4, 1, 3), (2, 1)), ((), (2, 3)),
               ((3, 1), ())]

# (builder, NumPy reference, generator for y (x uses rand), differentiable, allows ints)
BINARY = [
    (tf.add, np.add, rand, True, True),
    (tf.subtract, np.subtract, rand, True, True),
    (tf.multiply, np.multiply, rand, True, True),
    (tf.realdiv, np.true_divide, positive, True, False),
    (tf.truediv, np.true_divide, positive, True, False),
    (tf.divide, np.true_divide, positive, True, False),
    (tf.floordiv, _tf_floordiv, positive, False, True),
    (tf.maximum, np.maximum, rand, True, True),
    (tf.minimum, np.minimum, rand, True, True),
    (tf.squared_difference, lambda x, y: (x - y) ** 2, rand, True, True),
]


@pytest.mark.parametrize("fn,ref,gen,_d,_i", BINARY, ids=[b[0].__name__ for b in BINARY])
@pytest.mark.parametrize("sx,sy", SHAPE_PAIRS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_binary_forward(fn, ref, gen, _d, _i, sx, sy, dtype):
    check_forward(fn, [rand(sx, dtype), gen(sy, dtype)], ref, rtol=2e-6)


@pytest.mark.parametrize("fn,ref,gen,diff,_i", [b for b in BINARY if b[3]],
                         ids=[b[0].__name__ for b in BINARY if b[3]])
@pytest.mark.parametrize("sx,sy", SHAPE_PAIRS)
def test_binary_gradient(fn, ref, gen, diff, _i, sx, sy):
    check_grads(fn, [rand(sx), gen(sy)])  # random floats: no ties for maximum/minimum


@pytest.mark.parametrize("fn,ref", [(b[0], b[1]) for b in BINARY if b[4]],
                         ids=[b[0].__name__ for b in BINARY if b[4]])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_binary_integer_forward(fn, ref, dtype):
    x = ints((4, 3), dtype)
    y = nonzero_ints((3,), dtype) if fn is tf.floordiv else ints((3,), dtype)
    check_forward(fn, [x, y], ref)


def test_pow_forward_and_gradient():
    check_forward(tf.pow, [positive((2, 3)), rand((3,))], np.power)
    check_grads(tf.pow, [positive((2, 3)), rand((3,))])
    check_forward(tf.pow, [ints((2, 3), low=-3, high=4), ints((3,), low=0, high=4)], np.power)


def test_pow_gradient_wrt_exponent_is_zero_for_nonpositive_base():
    x = tf.constant([-2.0, 0.0, 3.0], tf.float64)
    y = tf.constant([2.0, 2.0, 2.0], tf.float64)
    gx, gy = run(tf.gradients(tf.pow(x, y), [x, y]))
    np.testing.assert_allclose(gx, [-4.0, 0.0, 6.0])
    np.testing.assert_allclose(gy, [0.0, 0.0, 9.0 * np.log(3.0)])


def test_floormod_forward_and_gradient():
    x, y = ints((3, 4), low=-20, high=20), nonzero_ints((4,))
    check_forward(tf.floormod, [x, y], np.mod)
    xf, yf = rand((3, 4), low=-5, high=5), np.array([1.5, -2.0, 0.7, -0.3])
    check_forward(tf.mod, [xf, yf], np.mod, rtol=1e-12, atol=1e-12)
    check_grads(tf.floormod, [np.array([[0.3, 1.7], [-2.2, 4.1]]), np.array([0.9, -1.3])])


def test_integer_division_semantics():
    x = np.array([7, -7, 7, -7], np.int32)
    y = np.array([2, 2, -2, -2], np.int32)
    check_forward(tf.floordiv, [x, y], np.floor_divide)
    check_forward(tf.div, [x, y], np.floor_divide)
    check_forward(tf.floormod, [x, y], np.mod)
    check_forward(lambda a, b: a // b, [x, y], np.floor_divide)
    check_forward(lambda a, b: a % b, [x, y], np.mod)


def test_float_floordiv_is_floor_of_quotient():
    x, y = np.array([1.0, -1.0, 7.5], np.float64), np.array([0.1, 0.1, -2.0], np.float64)
    check_forward(tf.floordiv, [x, y], lambda a, b: np.floor(a / b))


@pytest.mark.parametrize("fn", [tf.floordiv, tf.floormod])
def test_integer_division_by_zero_is_invalid_argument(fn):
    x = tf.placeholder(tf.int32, [2])
    y = fn(x, tf.constant([1, 0]))
    with pytest.raises(tf.errors.InvalidArgumentError, match="division by zero"):
        run(y, {x: [4, 5]})


def test_float_division_by_zero_gives_inf_quietly():
    with np.errstate(all="raise"):
        got = run(tf.constant([1.0, -1.0, 0.0]) / tf.constant(0.0))
    assert got[0] == np.inf and got[1] == -np.inf and np.isnan(got[2])


@pytest.mark.parametrize("src,dst", [(np.int8, np.float32), (np.uint8, np.float32),
                                     (np.int16, np.float32), (np.int32, np.float64),
                                     (np.int64, np.float64), (np.float32, np.float32),
                                     (np.float64, np.float64)])
def test_truediv_dtype_table(src, dst):
    x = np.array([7, 3 if np.dtype(src).kind == "u" else -3, 9], src)
    y = np.array([2, 4, 3], src)
    for build in (tf.truediv, tf.divide, lambda a, b: a / b):
        got, t = evaluate(build, x, y)
        assert t.dtype == tf.as_dtype(dst)
        assert t.op.type == "RealDiv" and t.op.inputs[0].dtype == tf.as_dtype(dst)
        np.testing.assert_allclose(got, x.astype(dst) / y.astype(dst))


def test_realdiv_rejects_integers():
    with pytest.raises(TypeError):
        tf.realdiv(tf.constant([1, 2]), tf.constant([3, 4]))


def test_div_is_real_division_for_floats():
    check_forward(tf.div, [rand((3,)), positive((3,))], np.true_divide)


def test_maximum_minimum_ties_send_gradient_to_x():
    x = tf.constant([1.0, 2.0, 3.0], tf.float64)
    y = tf.constant([1.0, 5.0, 0.0], tf.float64)
    gx, gy = run(tf.gradients(tf.maximum(x, y), [x, y]))
    np.testing.assert_array_equal(gx, [1, 0, 1])
    np.testing.assert_array_equal(gy, [0, 1, 0])
    gx, gy = run(tf.gradients(tf.minimum(x, y), [x, y]))
    np.testing.assert_array_equal(gx, [1, 1, 0])
    np.testing.assert_array_equal(gy, [0, 0, 1])


def test_integer_inputs_get_no_gradient():
    x = tf.constant([1.0, 2.0])
    k = tf.constant([3, 4])
    y = x * tf.cast(k, tf.float32) + tf.cast(k * k, tf.float32)
    assert tf.gradients(y, k) == [None]
    assert tf.gradients(y, x)[0] is not None


def test_binary_gradient_with_partial_shapes_uses_runtime_broadcast_args():
    # Static shapes cannot tell which side was broadcast, so the gradient asks at run time.
    xv, yv = rand((4, 3)), rand((4, 1))
    x = tf.placeholder(tf.float64, [None, 3])
    y = tf.placeholder(tf.float64, [None, None])
    z = x * y
    assert z.shape.as_list() == [None, 3]
    gx, gy = tf.gradients(tf.reduce_sum(z), [x, y])
    gxv, gyv = run([gx, gy], {x: xv, y: yv})
    np.testing.assert_allclose(gxv, np.broadcast_to(yv, (4, 3)))
    np.testing.assert_allclose(gyv, xv.sum(axis=1, keepdims=True))


@pytest.mark.parametrize("sx,sy,fed_x,fed_y,static", [
    ([None, 3], [3], (4, 3), (3,), True),  # a dense layer's bias add
    ([None, 3], [3], (1, 3), (3,), True),  # ... at batch 1: summing a size-1 axis is harmless
    ([None, 1], [5], (3, 1), (5,), True),  # x broadcast along its known 1, y along the batch
    ([1, 4], [None, 4], (1, 4), (2, 4), True),  # x's 1 against an unknown dim: summed anyway
    ([1, None], [None, 4], (1, 4), (2, 4), False),  # x's unknown dim may be a broadcast 1
])
def test_binary_gradient_reads_the_broadcast_axes_from_both_static_shapes(sx, sy, fed_x, fed_y,
                                                                          static):
    # The other input's shape tells which unknown dims were not broadcast (TF's
    # _InferGradientReductionAxes): then no BroadcastGradientArgs runs; the sums are NumPy's.
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float64, sx)
        y = tf.placeholder(tf.float64, sy)
        wval = rand(np.broadcast_shapes(fed_x, fed_y)[-1:])
        w = tf.constant(wval)
        gx, gy = tf.gradients(tf.reduce_sum(x * y * w), [x, y])
        xv, yv = rand(fed_x), rand(fed_y)
        with tf.Session() as sess:
            gxv, gyv = sess.run([gx, gy], {x: xv, y: yv})
    types = {op.type for op in g.get_operations()}
    assert ("BroadcastGradientArgs" not in types) == static
    out = np.broadcast_shapes(fed_x, fed_y)
    upstream = np.broadcast_to(wval, out)

    def reduce_to(a, shape):
        lead = a.ndim - len(shape)
        a = a.sum(axis=tuple(range(lead)))
        return a.sum(axis=tuple(i for i, d in enumerate(shape) if d == 1 and a.shape[i] != 1),
                     keepdims=True)

    np.testing.assert_allclose(gxv, reduce_to(upstream * yv, fed_x))
    np.testing.assert_allclose(gyv, reduce_to(upstream * xv, fed_y))


# --- comparisons and logic ----------------------------------------------------------------------
COMPARE = [(tf.equal, np.equal), (tf.not_equal, np.not_equal), (tf.less, np.less),
           (tf.less_equal, np.less_equal), (tf.greater, np.greater),
           (tf.greater_equal, np.greater_equal)]


@pytest.mark.parametrize("fn,ref", COMPARE, ids=[c[0].__name__ for c in COMPARE])
@pytest.mark.parametrize("sx,sy", SHAPE_PAIRS)
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64])
def test_comparison_forward(fn, ref, sx, sy, dtype):
    x = ints(sx, low=-2, high=3).astype(dtype)
    y = ints(sy, low=-2, high=3).astype(dtype)
    got = check_forward(fn, [x, y], ref)
    assert np.asarray(got).dtype == np.bool_


def test_comparisons_are_not_differentiable():
    x = tf.constant([1.0, 2.0])
    y = tf.cast(tf.less(x, 1.5), tf.float32) * x
    (g,) = run(tf.gradients(y, [x]))
    np.testing.assert_array_equal(g, [1.0, 0.0])


def test_equal_supports_bool_and_rejects_mixed_types():
    check_forward(tf.equal, [np.array([True, False]), np.array([True, True])], np.equal)
    with pytest.raises(TypeError):
        tf.less(tf.constant([True]), tf.constant([False]))
    with pytest.raises(TypeError):
        tf.equal(tf.constant([1.0]), tf.constant([1]))


LOGICAL = [(tf.logical_and, np.logical_and), (tf.logical_or, np.logical_or),
           (tf.logical_xor, np.logical_xor)]


@pytest.mark.parametrize("fn,ref", LOGICAL, ids=[c[0].__name__ for c in LOGICAL])
@pytest.mark.parametrize("sx,sy", SHAPE_PAIRS)
def test_logical_forward(fn, ref, sx, sy):
    x, y = RNG.random(sx) < 0.5, RNG.random(sy) < 0.5
    check_forward(fn, [np.asarray(x), np.asarray(y)], ref)


def test_logical_not_and_type_checks():
    check_forward(tf.logical_not, [np.array([True, False, True])], np.logical_not)
    with pytest.raises(TypeError):
        tf.logical_and(tf.constant([1]), tf.constant([0]))
    with pytest.raises(TypeError):
        tf.logical_not(tf.constant([1.0]))


# --- build-time errors ----------------------------------------------------------------------------
@pytest.mark.parametrize("fn", [tf.add, tf.subtract, tf.multiply, tf.truediv, tf.maximum,
                                tf.pow, tf.squared_difference, tf.less, tf.floordiv])
def test_mismatched_dtypes_raise_type_error(fn):
    with pytest.raises(TypeError):
        fn(tf.constant([1.0, 2.0]), tf.constant([1.0, 2.0], tf.float64))


@pytest.mark.parametrize("fn", [tf.add, tf.multiply, tf.maximum, tf.equal, tf.truediv])
def test_incompatible_shapes_raise_value_error(fn):
    with pytest.raises(ValueError, match="broadcast"):
        fn(tf.placeholder(tf.float32, [2, 3]), tf.placeholder(tf.float32, [4]))


def test_incompatible_shapes_at_run_time_are_invalid_argument():
    x = tf.placeholder(tf.float32, [None])
    y = tf.placeholder(tf.float32, [None])
    with pytest.raises(tf.errors.InvalidArgumentError):
        run(x + y, {x: np.ones(2), y: np.ones(3)})


def test_add_rejects_bool():
    with pytest.raises(TypeError):
        tf.add(tf.constant([True]), tf.constant([False]))


# --- operator overloads ---------------------------------------------------------------------------
OPERATORS = [
    ("x + 1", lambda x, y: x + 1), ("1 - x", lambda x, y: 1 - x), ("x / 2", lambda x, y: x / 2),
    ("2 / x", lambda x, y: 2 / x), ("x // 2", lambda x, y: x // 2),
    ("x % 3", lambda x, y: x % 3), ("7 % x", lambda x, y: 7 % x), ("x ** 2", lambda x, y: x ** 2),
    ("2 ** x", lambda x, y: 2 ** x), ("-x", lambda x, y: -x), ("abs(x)", lambda x, y: abs(x)),
    ("x < y", lambda x, y: x < y), ("x <= y", lambda x, y: x <= y),
    ("x > y", lambda x, y: x > y), ("x >= y", lambda x, y: x >= y),
    ("x * y - y", lambda x, y: x * y - y), ("x / y", lambda x, y: x / y),
    ("3 * x", lambda x, y: 3 * x), ("3 + x", lambda x, y: 3 + x),
]


@pytest.mark.parametrize("expr,fn", OPERATORS, ids=[o[0] for o in OPERATORS])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_operator_overloads(expr, fn, dtype):
    x, y = positive((2, 3), dtype), positive((3,), dtype)
    got, t = evaluate(fn, x, y)
    want = fn(x, y)
    assert t.dtype == tf.as_dtype(np.asarray(want).dtype)
    assert t.shape.as_list() == list(np.shape(want))
    np.testing.assert_allclose(got, want, rtol=2e-6)


def test_matmul_operator_and_numpy_on_the_left():
    a, b = rand((2, 3), np.float32), rand((3, 4), np.float32)
    check_forward(lambda p, q: p @ q, [a, b], np.matmul)
    x = tf.placeholder(tf.float32, [2, 3])
    z = np.ones((2, 3)) + x  # NumPy defers to the tensor (__array_priority__)
    assert isinstance(z, tf.Tensor) and z.dtype == tf.float32
    w = np.full(3, 2.0) * x
    np.testing.assert_allclose(run(z, {x: a}), a + 1)
    np.testing.assert_allclose(run(w, {x: a}), a * 2)


@pytest.mark.parametrize("dtype", [tf.int32, tf.int64, tf.float16, tf.float64, tf.uint8])
def test_python_scalars_take_the_tensor_dtype(dtype):
    x = tf.placeholder(dtype, [3])
    for y in (x + 1, 2 * x, x - 1, 1 - x, tf.maximum(x, 1), tf.add(1, x), x // 2):
        assert y.dtype == dtype, y
    if dtype is not tf.uint8:  # TF's Pow has no uint8 kernel
        assert (x ** 2).dtype == dtype
    if dtype.is_integer:
        with pytest.raises(TypeError):
            x + 1.5
        assert (x / 2).dtype.is_floating


def test_integer_operators():
    x = np.array([7, -7, 3, 0], np.int32)
    check_forward(lambda a: a // 2, [x], lambda a: a // 2)
    check_forward(lambda a: a % 3, [x], lambda a: a % 3)
    check_forward(lambda a: a ** 2, [x], lambda a: a ** 2)
    check_forward(lambda a: abs(-a), [x], lambda a: abs(-a))
    got, t = evaluate(lambda a: a / 2, x)
    assert t.dtype == tf.float64
    np.testing.assert_allclose(got, x / 2)


def test_boolean_operators():
    p, q = np.array([True, True, False, False]), np.array([True, False, True, False])
    check_forward(lambda a, b: a & b, [p, q], np.logical_and)
    check_forward(lambda a, b: a | b, [p, q], np.logical_or)
    check_forward(lambda a, b: a ^ b, [p, q], np.logical_xor)
    check_forward(lambda a: ~a, [p], np.logical_not)


def test_operator_results_have_tf1_names():
    x = tf.placeholder(tf.float32, [2], name="x")
    assert (x + 1).op.name == "add"
    assert (x + 1).op.name == "add_1"
    assert (x * 2).op.name == "mul"
    assert (x / 2).op.name == "truediv"
    assert (x - 1).op.name == "sub"


def test_tensor_equality_is_identity_in_tf1():
    x = tf.constant([1.0])
    assert (x == x) is True
    assert (x == tf.constant([1.0])) is False


def test_operator_dtype_mismatch_raises_type_error():
    x = tf.placeholder(tf.float32, [2])
    with pytest.raises(TypeError):
        x + tf.constant([1, 2])
    with pytest.raises((TypeError, ValueError)):
        tf.constant([1, 2]) * x


# --- add_n and cast -------------------------------------------------------------------------------
def test_add_n_forward_gradient_and_errors():
    check_forward(lambda a, b, c: tf.add_n([a, b, c]), [rand((2, 3)), rand((2, 3)),
                                                        rand((2, 3))], lambda a, b, c: a + b + c)
    check_forward(lambda a: tf.add_n([a]), [rand((3,))], lambda a: a)
    check_grads(lambda a, b: tf.add_n([a, b, a]), [rand((2, 2)), rand((2, 2))])
    with pytest.raises(ValueError):
        tf.add_n([])
    with pytest.raises(ValueError):
        tf.add_n([tf.zeros([2]), tf.zeros([3])])
    with pytest.raises(TypeError):
        tf.add_n([tf.zeros([2]), tf.zeros([2], tf.float64)])


@pytest.mark.parametrize("src,dst", [(np.float32, np.int32), (np.float64, np.float32),
                                     (np.int32, np.float64), (np.int64, np.bool_),
                                     (np.bool_, np.float32)])
def test_cast_forward(src, dst):
    x = (rand((2, 3)) * 3).astype(src)
    check_forward(lambda a: tf.cast(a, dst), [x], lambda a: a.astype(dst))


def test_cast_gradient_and_helpers():
    x64 = tf.constant([1.0, 2.0], tf.float64)
    w = tf.constant([0.5, -3.0])
    (g,) = tf.gradients(tf.reduce_sum(tf.cast(x64, tf.float32) * w), [x64])
    assert g.dtype == tf.float64
    np.testing.assert_array_equal(run(g), [0.5, -3.0])
    assert tf.to_float(tf.constant([1])).dtype == tf.float32
    assert tf.to_double(tf.constant([1])).dtype == tf.float64
    assert tf.to_int32(tf.constant([1.0])).dtype == tf.int32
    assert tf.to_int64(tf.constant([1.0])).dtype == tf.int64
    x = tf.constant([1.5, 2.5])
    assert tf.gradients(tf.reduce_sum(tf.cast(tf.cast(x, tf.int32), tf.float32)), x) == [None]


# --- matmul ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
def test_matmul_transposes(ta, tb):
    a = rand((4, 3) if ta else (3, 4))
    b = rand((5, 4) if tb else (4, 5))

    def ref(p, q):
        return np.matmul(p.T if ta else p, q.T if tb else q)

    def fn(p, q):
        return tf.matmul(p, q, transpose_a=ta, transpose_b=tb)

    check_forward(fn, [a, b], ref)
    check_grads(fn, [a, b])


@pytest.mark.parametrize("sa,sb", [((2, 3, 4), (2, 4, 5)), ((2, 3, 4), (4, 5)),
                                   ((3, 4), (2, 4, 5)), ((2, 1, 3, 4), (3, 4, 2))])
@pytest.mark.parametrize("adj", [(False, False), (True, False), (False, True), (True, True)])
def test_batch_matmul_with_broadcasting(sa, sb, adj):
    aa, ab = adj
    a = rand(sa[:-2] + (sa[-1], sa[-2]) if aa else sa)
    b = rand(sb[:-2] + (sb[-1], sb[-2]) if ab else sb)

    def ref(p, q):
        return np.matmul(np.swapaxes(p, -1, -2) if aa else p, np.swapaxes(q, -1, -2) if ab else q)

    def fn(p, q):
        return tf.matmul(p, q, adjoint_a=aa, adjoint_b=ab)

    check_forward(fn, [a, b], ref)
    check_grads(fn, [a, b])


MATMUL_SHAPES = [(1, 1, 1), (2, 2, 2), (1, 7, 3), (3, 7, 1), (5, 1, 4), (17, 33, 9),
                 (0, 3, 2), (3, 0, 2)]


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.complex64,
                                   np.complex128, np.int32, np.int64])
def test_matmul_gives_numpys_bits(dtype):
    """The host's small real products go through ``ndarray.dot``, NumPy's cheaper call to the
    same BLAS routine as ``np.matmul``: the same bits for every dtype, shape (vectors and
    empty ones too) and transposition, in a graph and eagerly. 1x1 complex operands with
    real values are the case ``dot`` would give other signed zeros for."""
    cases = []
    for m, k, n in MATMUL_SHAPES:
        for ta in (False, True):
            for tb in (False, True):
                a = (RNG.standard_normal((k, m) if ta else (m, k)) * 3).astype(dtype)
                b = (RNG.standard_normal((n, k) if tb else (k, n)) * 3).astype(dtype)
                if (m, k, n) == (1, 1, 1):  # both negative: where the signs of zeros part
                    a, b = (-abs(a.real)).astype(dtype), (-abs(b.real)).astype(dtype)
                want = np.matmul(a.T if ta else a, b.T if tb else b)
                cases.append((a, b, ta, tb, want))

    def products():  # on the host: a GPU's products are its BLAS's, not NumPy's
        with tf.device("/cpu:0"):
            return [tf.matmul(tf.constant(a), tf.constant(b), transpose_a=ta, transpose_b=tb)
                    for a, b, ta, tb, _ in cases]

    with tf.Graph().as_default(), tf.Session() as sess:
        in_graph = sess.run(products())
    with eager_mode():
        eager = [p.numpy() for p in products()]
    for got_graph, got_eager, (*_, want) in zip(in_graph, eager, cases):
        for got in (got_graph, got_eager):
            assert got.dtype == want.dtype and got.shape == want.shape
            assert got.tobytes() == want.tobytes()


def test_matmul_errors():
    with pytest.raises(ValueError, match="must be equal"):
        tf.matmul(tf.zeros([2, 3]), tf.zeros([4, 5]))
    with pytest.raises(ValueError):
        tf.matmul(tf.zeros([3]), tf.zeros([3, 2]))
    with pytest.raises(TypeError):
        tf.matmul(tf.zeros([2, 2]), tf.zeros([2, 2], tf.float64))
    with pytest.raises(ValueError, match="must be equal"):
        tf.matmul(tf.zeros([2, 2, 3]), tf.zeros([2, 4, 5]))
    with pytest.raises(TypeError):
        tf.matmul(tf.constant([[True]]), tf.constant([[True]]))


def test_matmul_partial_shapes_and_integers():
    a = tf.placeholder(tf.float32, [None, 3])
    b = tf.placeholder(tf.float32, [3, None])
    assert tf.matmul(a, b).shape.as_list() == [None, None]
    check_forward(tf.matmul, [ints((2, 3)), ints((3, 2))], np.matmul)


# --- reductions -----------------------------------------------------------------------------------
REDUCTIONS = [
    (tf.reduce_sum, np.sum, True), (tf.reduce_mean, np.mean, True),
    (tf.reduce_max, np.max, True), (tf.reduce_min, np.min, True),
    (tf.reduce_prod, np.prod, True), (tf.reduce_logsumexp, None, True),
]
AXES = [None, 0, 1, -1, [0, 2], [], (-1, 0), [1, 1], [0, 1, 2]]


def _logsumexp(x, axis=None, keepdims=False):
    m = np.max(x, axis=axis, keepdims=True)
    out = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axis if axis is not None else None)


def _np_axis(axis):
    return tuple(sorted(set(np.ravel(axis).tolist()))) if axis is not None else None


def _lowest(dtype):
    return np.array(-np.inf, dtype)


def _highest(dtype):
    return np.array(np.inf, dtype)


# (builder, the NumPy call the host kernel's result must equal bit for bit)
BIT_REDUCTIONS = [
    (tf.reduce_sum, lambda x, ax, k: np.sum(x, axis=ax, keepdims=k, dtype=x.dtype)),
    (tf.reduce_prod, lambda x, ax, k: np.prod(x, axis=ax, keepdims=k, dtype=x.dtype)),
    (tf.reduce_mean, lambda x, ax, k: np.mean(x, axis=ax, keepdims=k, dtype=x.dtype)),
    (tf.reduce_max, lambda x, ax, k: np.max(x, axis=ax, keepdims=k, initial=_lowest(x.dtype))),
    (tf.reduce_min, lambda x, ax, k: np.min(x, axis=ax, keepdims=k, initial=_highest(x.dtype))),
]


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("fn,ref", BIT_REDUCTIONS, ids=[r[0].__name__ for r in BIT_REDUCTIONS])
def test_host_reductions_give_numpys_bits(fn, ref, dtype):
    """The host's reductions call the ufuncs' ``reduce`` themselves, and ``Mean`` divides its
    sum itself: the bits of ``np.sum``/``prod``/``mean``/``max``/``min``, for every rank, axis
    set and ``keepdims``, in a graph and eagerly (a second eager call takes the fast path,
    with its axes cached). An empty mean is NaN, with no warning (TF's)."""
    cases = []
    rng = np.random.default_rng(11)
    for shape, axes in [((4, 3), [None, 0, 1, -1, (0, 1)]), ((2, 3, 5), [None, (0, 2), 1]),
                        ((7,), [None, 0]), ((), [None]), ((0, 3), [0, 1, None])]:
        # Magnitudes whose products stay finite in float16, of both signs.
        x = (rng.uniform(0.5, 1.25, shape) * rng.choice([-1, 1], shape)).astype(dtype)
        for axis in axes:
            for keep in (False, True):
                with warnings.catch_warnings(), np.errstate(all="ignore"):
                    warnings.simplefilter("ignore")  # NumPy's own empty means warn
                    want = np.asarray(ref(x, axis, keep))
                cases.append((x, list(axis) if isinstance(axis, tuple) else axis, keep, want))

    def reductions():
        with tf.device("/cpu:0"):  # the host's kernels: a GPU's sums go their own way
            return [fn(tf.constant(x), axis=axis, keepdims=keep) for x, axis, keep, _ in cases]

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with tf.Graph().as_default(), tf.Session() as sess:
            in_graph = sess.run(reductions())
        with eager_mode():
            eager = [[t.numpy() for t in reductions()] for _ in range(2)]
    for got_all in (in_graph, *eager):
        for got, (*_, want) in zip(got_all, cases):
            assert got.dtype == want.dtype and got.shape == want.shape
            assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_a_whole_mean_of_infinities_overflows_and_nans_gives_numpys_bits(dtype):
    """A mean to a scalar divides as NumPy divides a scalar sum by its count (in double):
    infinities, NaN and a sum that overflows the dtype give ``np.mean``'s bits, quietly."""
    big = np.finfo(dtype).max
    rows = [[np.inf, 1.0], [-np.inf, np.inf], [np.nan, 2.0], [big, big], [1.0, 2.0, 2.0],
            [0.1, 0.2, 0.7, 1e-3, -0.3, 5.0, 3.0]]
    with eager_mode(), warnings.catch_warnings():
        warnings.simplefilter("error")
        for row in rows:
            x = np.array(row, dtype)
            with np.errstate(all="ignore"):
                want = np.mean(x, dtype=dtype)
            for _ in range(2):  # the generic path, then the fast path
                got = tf.reduce_mean(tf.constant(x)).numpy()
                assert got.dtype == dtype and got.tobytes() == np.asarray(want).tobytes(), row


@pytest.mark.parametrize("fn,ref,_", REDUCTIONS, ids=[r[0].__name__ for r in REDUCTIONS])
@pytest.mark.parametrize("axis", AXES, ids=str)
@pytest.mark.parametrize("keepdims", [False, True])
def test_reduction_forward(fn, ref, _, axis, keepdims):
    x = rand((2, 3, 4), np.float32)
    ref = ref or _logsumexp
    ax = _np_axis(axis)
    if ax == ():
        want = lambda a: a.astype(np.float32)  # noqa: E731 - reducing over no axes
    else:
        want = lambda a: np.asarray(ref(a, axis=ax, keepdims=keepdims), np.float32)  # noqa: E731
    check_forward(lambda a: fn(a, axis=axis, keepdims=keepdims), [x], want, rtol=1e-5)


@pytest.mark.parametrize("fn,_r,_d", REDUCTIONS, ids=[r[0].__name__ for r in REDUCTIONS])
@pytest.mark.parametrize("axis", [None, 1, [0, 2], -1], ids=str)
@pytest.mark.parametrize("keepdims", [False, True])
def test_reduction_gradient(fn, _r, _d, axis, keepdims):
    x = rand((2, 3, 2))
    if fn is tf.reduce_prod:
        x = np.where(np.abs(x) < 0.3, 0.7, x)
    check_grads(lambda a: fn(a, axis=axis, keepdims=keepdims), [x])


def test_reduce_prod_gradient_with_zeros():
    x = np.array([[0.0, 2.0, 3.0], [0.0, 0.0, 5.0], [1.5, -2.0, 4.0]])
    for axis in (None, 0, 1, [0, 1], -1):
        check_grads(lambda a, ax=axis: tf.reduce_prod(a, axis=ax), [x])
    check_grads(lambda a: tf.reduce_prod(a, axis=[0, 2]), [np.array(
        [[[0.0, 1.0], [2.0, 3.0]], [[4.0, 0.5], [1.5, -1.0]]])])


def test_reduce_max_min_gradient_splits_ties():
    x = tf.constant([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]], tf.float64)
    (g,) = run(tf.gradients(tf.reduce_max(x, axis=1), [x]))
    np.testing.assert_allclose(g, [[0, 0.5, 0.5], [1 / 3, 1 / 3, 1 / 3]])
    (g,) = run(tf.gradients(tf.reduce_min(x), [x]))
    np.testing.assert_allclose(g, [[1, 0, 0], [0, 0, 0]])


@pytest.mark.parametrize("fn,ref", [(tf.reduce_any, np.any), (tf.reduce_all, np.all)])
@pytest.mark.parametrize("axis", [None, 0, -1, [0, 1]], ids=str)
@pytest.mark.parametrize("keepdims", [False, True])
def test_boolean_reductions(fn, ref, axis, keepdims):
    x = RNG.random((3, 4)) < 0.5
    ax = _np_axis(axis)
    check_forward(lambda a: fn(a, axis=axis, keepdims=keepdims), [x],
                  lambda a: np.asarray(ref(a, axis=ax, keepdims=keepdims)))
    with pytest.raises(TypeError):
        fn(tf.constant([1.0]))


@pytest.mark.parametrize("fn,ref", [(tf.reduce_sum, np.sum), (tf.reduce_prod, np.prod),
                                    (tf.reduce_max, np.max), (tf.reduce_min, np.min)])
@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64])
def test_integer_reductions_keep_dtype(fn, ref, dtype):
    x = ints((3, 4), dtype, low=-3, high=4)
    got = check_forward(lambda a: fn(a, axis=1), [x], lambda a: ref(a, axis=1).astype(dtype))
    assert got.dtype == dtype


def test_integer_mean_truncates_toward_zero():
    x = np.array([[-3, -4], [3, 4], [1, 1], [-1, 0]], np.int32)
    check_forward(lambda a: tf.reduce_mean(a, axis=1), [x],
                  lambda a: np.trunc(a.sum(axis=1) / 2).astype(np.int32))


def test_legacy_reduction_arguments():
    x = rand((2, 3))
    check_forward(lambda a: tf.reduce_sum(a, reduction_indices=[1], keep_dims=True), [x],
                  lambda a: a.sum(axis=1, keepdims=True))
    check_forward(lambda a: tf.reduce_mean(a, reduction_indices=0), [x],
                  lambda a: a.mean(axis=0))
    with pytest.raises(ValueError):
        tf.reduce_sum(tf.zeros([2]), axis=0, reduction_indices=0)
    with pytest.raises(ValueError):
        tf.reduce_sum(tf.zeros([2]), keepdims=True, keep_dims=True)


@pytest.mark.parametrize("fn", [tf.reduce_sum, tf.reduce_mean, tf.reduce_max, tf.reduce_prod,
                                tf.reduce_logsumexp, tf.count_nonzero])
@pytest.mark.parametrize("axis", [2, -3, [0, 5]], ids=str)
def test_bad_reduction_axis_raises_value_error(fn, axis):
    with pytest.raises(ValueError, match="out of range"):
        fn(tf.zeros([2, 3]), axis=axis)


def test_reduction_axis_must_be_integer():
    with pytest.raises(TypeError):
        tf.reduce_sum(tf.zeros([2, 3]), axis=tf.constant([0.0]))


def test_reduction_with_runtime_axes():
    x = tf.placeholder(tf.float32, [2, 3, 4])
    ax = tf.placeholder(tf.int32, [None])
    y = tf.reduce_sum(x, ax)
    k = tf.reduce_max(x, ax, keepdims=True)
    assert y.shape.ndims is None and k.shape.as_list() == [None, None, None]
    xv = rand((2, 3, 4), np.float32)
    got = run([y, k], {x: xv, ax: [0, -1]})
    np.testing.assert_allclose(got[0], xv.sum(axis=(0, 2)), rtol=1e-6)
    np.testing.assert_allclose(got[1], xv.max(axis=(0, 2), keepdims=True))
    with pytest.raises(tf.errors.InvalidArgumentError):
        run(y, {x: xv, ax: [3]})
    (g,) = tf.gradients(tf.reduce_max(x, ax), [x])
    gv = run(g, {x: xv, ax: [1]})
    np.testing.assert_allclose(gv, (xv == xv.max(axis=1, keepdims=True)).astype(np.float32))
    (g,) = tf.gradients(tf.reduce_sum(x, ax), [x])
    np.testing.assert_allclose(run(g, {x: xv, ax: [0, 2]}), np.ones_like(xv))


def test_reduction_with_partial_shape_gradient():
    x = tf.placeholder(tf.float64, [None, 3])
    y = tf.reduce_mean(x * x, axis=0)
    assert y.shape.as_list() == [3]
    (g,) = tf.gradients(tf.reduce_sum(y), [x])
    xv = rand((4, 3))
    np.testing.assert_allclose(run(g, {x: xv}), 2 * xv / 4)


def test_a_whole_reduction_of_unknown_rank_is_a_scalar():
    """TF's wrappers: no axis and no keepdims is a scalar whatever the rank (TF 1.x gives
    these shapes); keepdims or an axis leaves the shape unknown (values and gradients:
    test_reduction_over_unknown_rank)."""
    x = tf.placeholder(tf.float32, None)
    for reduce in (tf.reduce_sum, tf.reduce_mean, tf.reduce_max, tf.reduce_prod,
                   tf.reduce_logsumexp):
        assert reduce(x).shape.ndims == 0
        assert reduce(x, keepdims=True).shape.ndims is None
        assert reduce(x, axis=0).shape.ndims is None
    assert tf.reduce_all(tf.placeholder(tf.bool, None)).shape.ndims == 0


def test_empty_reductions_give_identities():
    e = tf.zeros([0, 3])
    got = run([tf.reduce_sum(e, 0), tf.reduce_prod(e, 0), tf.reduce_max(e, 0),
               tf.reduce_min(e, 0)])
    np.testing.assert_array_equal(got[0], np.zeros(3))
    np.testing.assert_array_equal(got[1], np.ones(3))
    assert np.all(got[2] == -np.inf) and np.all(got[3] == np.inf)


def test_reduce_logsumexp_extremes_and_gradient():
    x = np.array([[1000.0, 1000.0], [-np.inf, -np.inf], [np.inf, 1.0], [-1000.0, 0.0]])
    got = run(tf.reduce_logsumexp(tf.constant(x), axis=1))
    np.testing.assert_allclose(got[0], 1000.0 + np.log(2.0))
    assert got[1] == -np.inf and got[2] == np.inf
    np.testing.assert_allclose(got[3], 0.0)
    check_grads(lambda a: tf.reduce_logsumexp(a, axis=1), [rand((3, 4))])
    check_grads(lambda a: tf.reduce_logsumexp(a), [rand((3, 4))])


@pytest.mark.parametrize("axis", [None, 0, 1, [0, 1]], ids=str)
@pytest.mark.parametrize("keepdims", [False, True])
def test_count_nonzero(axis, keepdims):
    x = ints((3, 4), low=-1, high=2)
    ax = _np_axis(axis)
    got, t = evaluate(lambda a: tf.count_nonzero(a, axis=axis, keepdims=keepdims), x)
    np.testing.assert_array_equal(got, np.count_nonzero(x, axis=ax, keepdims=keepdims))
    assert t.dtype == tf.int64
    assert tf.count_nonzero(tf.constant([True, False]), dtype=tf.int32).dtype == tf.int32
    assert run(tf.count_nonzero(tf.constant([0.0, 0.5, -1.0]))) == 2


# --- argmax / argmin ------------------------------------------------------------------------------
@pytest.mark.parametrize("fn,ref", [(tf.argmax, np.argmax), (tf.argmin, np.argmin)])
@pytest.mark.parametrize("axis", [0, 1, -1, None], ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_argmax_argmin(fn, ref, axis, dtype):
    x = ints((3, 4), low=-50, high=50).astype(dtype)
    got, t = evaluate(lambda a: fn(a, axis=axis), x)
    np.testing.assert_array_equal(got, ref(x, axis=0 if axis is None else axis))
    assert t.dtype == tf.int64 and got.dtype == np.int64
    assert t.shape.as_list() == list(got.shape)


def test_argmax_options_and_errors():
    x = tf.constant([[1, 5, 2], [7, 0, 3]])
    y = tf.argmax(x, dimension=1, output_type=tf.int32)
    assert y.dtype == tf.int32
    np.testing.assert_array_equal(run(y), [1, 0])
    with pytest.raises(ValueError):
        tf.argmax(x, axis=2)
    with pytest.raises(ValueError):
        tf.argmax(x, axis=0, dimension=0)
    with pytest.raises(TypeError):
        tf.argmin(x, output_type=tf.float32)
    assert tf.gradients(tf.cast(tf.argmax(tf.constant([1.0, 2.0])), tf.float32),
                        [tf.constant(1.0)]) == [None]


# --- scans ----------------------------------------------------------------------------------------
def _np_scan(ufunc, identity, x, axis, exclusive, reverse):
    if reverse:
        x = np.flip(x, axis)
    out = ufunc.accumulate(x, axis=axis)
    if exclusive:
        head = np.full_like(np.take(out, [0], axis=axis), identity)
        out = np.concatenate([head, np.delete(out, -1, axis=axis)], axis=axis)
    return np.flip(out, axis) if reverse else out


@pytest.mark.parametrize("fn,ufunc,ident", [(tf.cumsum, np.add, 0), (tf.cumprod, np.multiply, 1)])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
def test_scans(fn, ufunc, ident, axis, exclusive, reverse):
    x = rand((3, 4))
    if fn is tf.cumprod:
        x = np.where(np.abs(x) < 0.3, 0.9, x)

    def build(a):
        return fn(a, axis=axis, exclusive=exclusive, reverse=reverse)

    check_forward(build, [x], lambda a: _np_scan(ufunc, ident, a, axis % 2, exclusive, reverse))
    check_grads(build, [x])


def test_cumsum_integers_and_errors():
    x = ints((5,), np.int8, -3, 4)
    got = check_forward(lambda a: tf.cumsum(a), [x], lambda a: np.cumsum(a).astype(np.int8))
    assert got.dtype == np.int8
    with pytest.raises(ValueError):
        tf.cumsum(tf.zeros([2, 3]), axis=2)


# --- sequences ------------------------------------------------------------------------------------
@pytest.mark.parametrize("args,kwargs,dtype,want", [
    ((5,), {}, tf.int32, np.arange(5)),
    ((2, 9, 3), {}, tf.int32, np.arange(2, 9, 3)),
    ((10, 2, -3), {}, tf.int32, np.arange(10, 2, -3)),
    ((3.0,), {}, tf.float32, np.arange(3.0)),
    ((1, 2.5, 0.5), {}, tf.float32, np.arange(1, 2.5, 0.5)),
    ((4,), {"dtype": tf.float64}, tf.float64, np.arange(4.0)),
    ((0, 0), {}, tf.int32, np.arange(0)),
], ids=str)
def test_range(args, kwargs, dtype, want):
    r = tf.range(*args, **kwargs)
    assert r.dtype == dtype
    assert r.shape.as_list() == [len(want)]
    got = run(r)
    assert got.dtype == dtype.as_numpy_dtype
    np.testing.assert_allclose(got, want)


def test_range_dtype_follows_tensor_arguments():
    n = tf.placeholder(tf.int64, [])
    r = tf.range(n)
    assert r.dtype == tf.int64 and r.shape.as_list() == [None]
    np.testing.assert_array_equal(run(r, {n: 4}), np.arange(4))
    r = tf.range(tf.constant(0.0, tf.float64), 1, 0.25)
    assert r.dtype == tf.float64 and r.shape.as_list() == [4]


def test_range_float_accumulates_in_its_dtype():
    # TF computes ``val += delta`` in float32; the values must match that, bit for bit.
    r = run(tf.range(0.0, 2.0, 0.1))
    want, v = [], np.float32(0.0)
    for _ in range(20):
        want.append(v)
        v = np.float32(v + np.float32(0.1))
    np.testing.assert_array_equal(r, np.array(want, np.float32))


def test_range_errors():
    assert tf.range(3).op.name == "range"
    with pytest.raises(ValueError, match="delta != 0"):
        tf.range(0, 5, 0)
    with pytest.raises(ValueError, match="start <= limit"):
        tf.range(5, 1)
    with pytest.raises(TypeError):
        tf.range(1.5, dtype=tf.int32)
    d = tf.placeholder(tf.int32, [])
    with pytest.raises(tf.errors.InvalidArgumentError):
        run(tf.range(0, 5, d), {d: 0})


def test_linspace():
    check_forward(lambda: tf.linspace(-1.0, 2.0, 7), [], lambda: np.linspace(-1, 2, 7)
                  .astype(np.float32))
    got = run(tf.lin_space(tf.constant(1.0, tf.float64), 3.0, 1))
    np.testing.assert_array_equal(got, [1.0])
    n = tf.placeholder(tf.int32, [])
    y = tf.linspace(0.0, 1.0, n)
    assert y.shape.as_list() == [None]
    np.testing.assert_allclose(run(y, {n: 3}), [0.0, 0.5, 1.0])
    with pytest.raises(ValueError):
        tf.linspace(0.0, 1.0, 0)
    with pytest.raises(TypeError):
        tf.linspace(0, 1, 3)
    with pytest.raises(tf.errors.InvalidArgumentError):
        run(y, {n: 0})


# --- segment sums -------------------------------------------------------------------------------
def _np_segment_sum(data, ids, n):
    out = np.zeros((n,) + data.shape[ids.ndim:], data.dtype)
    for j in np.ndindex(*ids.shape):
        if ids[j] >= 0:
            out[ids[j]] += data[j]
    return out


@pytest.mark.parametrize("data_shape,ids,n", [
    ((5,), [0, 1, 0, 3, 1], 4),
    ((4, 3), [2, 0, 2, -1], 3),
    ((2, 3, 2), [[0, 1, 1], [4, 0, -1]], 5),
    ((3, 2), [0, 0, 0], 1),
], ids=str)
def test_unsorted_segment_sum(data_shape, ids, n):
    ids = np.array(ids, np.int32)
    data = rand(data_shape)
    check_forward(lambda d: tf.unsorted_segment_sum(d, ids, n), [data],
                  lambda d: _np_segment_sum(d, ids, n))


def test_unsorted_segment_sum_errors():
    with pytest.raises(ValueError):
        tf.unsorted_segment_sum(tf.zeros([4, 2]), tf.constant([0, 1, 2]), 3)
    with pytest.raises(TypeError):
        tf.unsorted_segment_sum(tf.zeros([3]), tf.constant([0.0, 1.0, 2.0]), 3)


def test_unsorted_segment_sum_id_out_of_range_is_invalid_argument():
    ids = tf.placeholder(tf.int32, [3])
    with pytest.raises(tf.errors.InvalidArgumentError, match="out of range"):
        run(tf.unsorted_segment_sum(tf.zeros([3]), ids, 2), {ids: [0, 1, 2]})


def test_segment_sum():
    data, ids = rand((5, 2)), np.array([0, 0, 1, 3, 3], np.int32)
    got, t = evaluate(lambda d: tf.segment_sum(d, ids), data)
    np.testing.assert_allclose(got, _np_segment_sum(data, ids, 4))
    assert t.shape.as_list() == [None, 2]
    with pytest.raises(tf.errors.InvalidArgumentError):
        run(tf.segment_sum(tf.zeros([3]), tf.constant([1, 0, 2])))


# --- clipping -------------------------------------------------------------------------------------
@pytest.mark.parametrize("lo,hi", [(-0.5, 0.7), (np.array([-1.0, 0.0, -0.2]), 1.0),
                                   (-1.0, np.array([0.5, 0.1, 2.0]))], ids=str)
def test_clip_by_value(lo, hi):
    x = rand((4, 3))
    check_forward(lambda a: tf.clip_by_value(a, lo, hi), [x], lambda a: np.clip(a, lo, hi))
    # away from the clip boundaries the gradient is 1 inside and 0 outside
    x = np.where(np.abs(x - np.broadcast_to(lo, x.shape)) < 0.05, x + 0.1, x)
    x = np.where(np.abs(x - np.broadcast_to(hi, x.shape)) < 0.05, x - 0.1, x)
    xt = tf.constant(x)
    (g,) = run(tf.gradients(tf.clip_by_value(xt, lo, hi), [xt]))
    np.testing.assert_array_equal(g, ((x >= lo) & (x <= hi)).astype(np.float64))


def test_clip_by_value_must_not_broadcast_t():
    with pytest.raises(ValueError):
        tf.clip_by_value(tf.zeros([3]), tf.zeros([2, 3]), 1.0)


def test_global_norm_and_clip_by_global_norm():
    a, b = rand((2, 3), np.float32), rand((4,), np.float32)
    ta, tb = tf.constant(a), tf.constant(b)
    norm = np.sqrt(np.sum(a.astype(np.float64) ** 2) + np.sum(b.astype(np.float64) ** 2))
    np.testing.assert_allclose(run(tf.global_norm([ta, None, tb])), norm, rtol=1e-6)
    for clip in (norm / 2, norm * 2):
        clipped, n = tf.clip_by_global_norm([ta, None, tb], clip)
        assert clipped[1] is None and len(clipped) == 3
        ca, cb, nv = run([clipped[0], clipped[2], n])
        scale = clip / max(norm, clip)
        np.testing.assert_allclose(nv, norm, rtol=1e-6)
        np.testing.assert_allclose(ca, a * scale, rtol=1e-5)
        np.testing.assert_allclose(cb, b * scale, rtol=1e-5)
    clipped, _ = tf.clip_by_global_norm([ta], 1.0, use_norm=tf.constant(np.inf, tf.float32))
    with np.errstate(invalid="ignore"):  # inf - inf: NaN on purpose
        assert np.all(np.isnan(run(clipped[0])))
    with pytest.raises(TypeError):
        tf.clip_by_global_norm(ta, 1.0)


def test_clip_by_global_norm_gradient():
    def fn(a, b):
        clipped, _ = tf.clip_by_global_norm([a, b], 1.5)
        return tf.add_n([tf.reduce_sum(clipped[0] * clipped[0]), tf.reduce_sum(clipped[1])])

    check_grads(fn, [rand((2, 2)), rand((3,))])


# --- contractions -------------------------------------------------------------------------------
@pytest.mark.parametrize("eq,shapes", [
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("ij,kj->ik", [(2, 3), (4, 3)]),
    ("bij,bjk->bik", [(2, 2, 3), (2, 3, 2)]),
    ("ij->ji", [(2, 3)]),
    ("ij->i", [(2, 3)]),
    ("i,j->ij", [(3,), (2,)]),
    ("ij,j", [(2, 3), (3,)]),
    ("...ij,jk->...ik", [(2, 2, 3), (3, 2)]),
    ("ij,ij,j->i", [(2, 3), (2, 3), (3,)]),
    ("ij,kj->ik", [(2, 1), (4, 3)]),
], ids=str)
def test_einsum(eq, shapes):
    args = [rand(s) for s in shapes]
    check_forward(lambda *a: tf.einsum(eq, *a), args, lambda *a: np.einsum(eq, *a))
    check_grads(lambda *a: tf.einsum(eq, *a), args)


def test_einsum_errors():
    with pytest.raises(ValueError):
        tf.einsum("ij,jk->ik", tf.zeros([2, 3]), tf.zeros([4, 5]))
    with pytest.raises(ValueError):
        tf.einsum("ij->ik", tf.zeros([2, 3]))
    with pytest.raises(ValueError):
        tf.einsum("ijk->i", tf.zeros([2, 3]))


@pytest.mark.parametrize("sa,sb,axes", [((2, 3), (3, 4), 1), ((2, 3, 4), (3, 4, 5), 2),
                                        ((2, 3), (4, 3), [[1], [1]]), ((3, 2), (3, 4), [0, 0]),
                                        ((2, 3), (4,), 0), ((4, 3, 2), (2, 4), [[0, 2], [1, 0]])],
                         ids=str)
def test_tensordot(sa, sb, axes):
    a, b = rand(sa), rand(sb)
    check_forward(lambda p, q: tf.tensordot(p, q, axes), [a, b],
                  lambda p, q: np.tensordot(p, q, axes))
    check_grads(lambda p, q: tf.tensordot(p, q, axes), [a, b])


# --- gradients through ops owned by other modules, and unknown-rank reductions ---------------
def test_unsorted_segment_sum_gradient():
    ids = np.array([[0, 2, -1], [2, 1, 0]], np.int32)
    data = rand((2, 3, 2))
    check_grads(lambda d: tf.unsorted_segment_sum(d, ids, 3) ** 2, [data])


def test_segment_sum_gradient():
    ids = np.array([0, 0, 1, 1, 1], np.int32)
    check_grads(lambda d: tf.segment_sum(d, ids) ** 2, [rand((5, 2))])


@pytest.mark.parametrize("fn,ref", [(tf.reduce_sum, np.sum), (tf.reduce_mean, np.mean),
                                    (tf.reduce_max, np.max)])
def test_reduction_over_unknown_rank(fn, ref):
    x = tf.placeholder(tf.float64, None)
    y = fn(x)
    assert y.shape.ndims == 0  # every axis: a scalar whatever the rank (TF's)
    xv = rand((2, 3))
    np.testing.assert_allclose(run(y, {x: xv}), ref(xv))
    (g,) = tf.gradients(y, [x])
    gsum = run(g, {x: xv})
    assert gsum.shape == xv.shape


# --- property: static broadcasting matches NumPy ------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, max_side=4))
def test_static_broadcast_shape_matches_numpy(shapes):
    sx, sy = shapes.input_shapes
    g = tf.Graph()
    with g.as_default():
        z = tf.placeholder(tf.float32, sx) + tf.placeholder(tf.float32, sy)
    assert tuple(z.shape.as_list()) == np.broadcast_shapes(sx, sy)


def _broadcasts(sx, sy):
    try:
        np.broadcast_shapes(sx, sy)
        return True
    except ValueError:
        return False


@settings(max_examples=60, deadline=None)
@given(st.tuples(hnp.array_shapes(min_dims=0, max_dims=4, min_side=1, max_side=4),
                 hnp.array_shapes(min_dims=0, max_dims=4, min_side=1, max_side=4))
       .filter(lambda p: not _broadcasts(*p)))
def test_non_broadcastable_shapes_raise_value_error(pair):
    sx, sy = pair
    g = tf.Graph()
    with g.as_default():
        x, y = tf.placeholder(tf.float32, sx), tf.placeholder(tf.float32, sy)
        with pytest.raises(ValueError):
            x + y
        with pytest.raises(ValueError):
            tf.multiply(y, x)


@pytest.mark.parametrize("axes", [[0, 1, 2], [1, 2, 3], [1, 2], [0, 3], [0, 2], [-1], [0, 1, 2, 3]])
@pytest.mark.parametrize("keep_dims", [False, True])
@pytest.mark.parametrize("op", ["reduce_sum", "reduce_max", "reduce_prod", "reduce_any"])
def test_reductions_over_merged_adjacent_axes(axes, keep_dims, op):
    # a C-contiguous input's adjacent reduced (and kept) axes are merged before reducing (a
    # bias gradient sums a (N, H, W, C) array as an (N*H*W, C) one): same values and shapes
    rng = np.random.default_rng(len(axes))
    x = rng.uniform(0.5, 1.5, (3, 4, 5, 2)).astype(np.float32)
    if op == "reduce_any":
        x = x > 1.2
    ref = {"reduce_sum": np.sum, "reduce_max": np.max, "reduce_prod": np.prod,
           "reduce_any": np.any}[op]
    want = ref(x.astype(np.float64) if x.dtype != bool else x, axis=tuple(axes),
               keepdims=keep_dims)
    got, _ = evaluate(lambda a: getattr(tf, op)(a, axes, keepdims=keep_dims), x)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5)
    # a non-contiguous input (a transposed view) takes NumPy's own path: the same values
    xt = np.ascontiguousarray(np.swapaxes(x, 0, 3))
    got_t, _ = evaluate(
        lambda a: getattr(tf, op)(tf.transpose(a, [3, 1, 2, 0]), axes, keepdims=keep_dims), xt)
    np.testing.assert_allclose(got_t, want, rtol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape, axes", [((64, 14, 14, 8), [0, 1, 2]), ((400, 300), [0]),
                                         ((400, 300), 0), ((3, 500, 40), [0, 1])])
def test_sums_over_leading_axes_of_big_arrays_are_as_exact_as_numpy(dtype, shape, axes):
    # Bias gradients: the host sums these as a product with a vector of ones (BLAS).
    from dflab.kernels.math_kernels import column_sums

    x = (np.random.default_rng(0).random(shape) - 0.3).astype(dtype)
    ax = tuple(np.atleast_1d(axes))
    assert column_sums(x.reshape(int(np.prod([shape[a] for a in ax])), -1)) is not None
    got = run(tf.reduce_sum(tf.constant(x), axis=axes))
    rows = np.moveaxis(x, ax, range(len(ax))).reshape(-1, *[d for i, d in enumerate(shape)
                                                           if i not in ax])
    exact = np.array([math.fsum(col) for col in rows.reshape(rows.shape[0], -1).T],
                     np.float64).reshape(rows.shape[1:])  # correctly rounded sums
    assert got.dtype == dtype and got.shape == exact.shape
    numpy_error = np.abs(x.sum(axis=ax, dtype=dtype) - exact).max()
    tolerance = 2 * max(numpy_error, np.finfo(dtype).eps * np.abs(exact).max())
    assert np.abs(got - exact).max() <= tolerance
    kept = run(tf.reduce_sum(tf.constant(x), axis=axes, keepdims=True))
    np.testing.assert_array_equal(kept.reshape(got.shape), got)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape, axes", [((128, 17, 128), [2]), ((65536, 10), 1),
                                         ((300, 4, 8), [1, 2]), ((2000, 256), -1)])
def test_sums_along_short_rows_of_big_arrays_are_as_exact_as_numpy(dtype, shape, axes):
    # word2vec's logits: the host sums short rows as a product with a vector of ones (BLAS).
    from dflab.kernels.math_kernels import row_sums

    x = (np.random.default_rng(0).random(shape) - 0.3).astype(dtype)
    ax = tuple(a % len(shape) for a in np.atleast_1d(axes))
    per_row = int(np.prod([shape[a] for a in ax]))
    assert row_sums(x.reshape(-1, per_row)) is not None
    got = run(tf.reduce_sum(tf.constant(x), axis=axes))
    flat = x.reshape(-1, per_row)
    exact = np.array([math.fsum(row) for row in flat]).reshape(got.shape)
    assert got.dtype == dtype
    numpy_error = np.abs(x.sum(axis=ax, dtype=dtype) - exact).max()
    tolerance = 2 * max(numpy_error, np.finfo(dtype).eps * np.abs(exact).max())
    assert np.abs(got - exact).max() <= tolerance
    kept = run(tf.reduce_sum(tf.constant(x), axis=axes, keepdims=True))
    np.testing.assert_array_equal(kept.reshape(got.shape), got)


def test_row_sums_leave_long_rows_small_integer_and_special_arrays_to_numpy():
    from dflab.kernels.math_kernels import row_sums

    assert row_sums(np.ones((8, 8), np.float32)) is None  # too small to pay
    assert row_sums(np.ones((50, 10000), np.float32)) is None  # long rows: NumPy's pairwise
    assert row_sums(np.ones((5000, 4), np.int32)) is None  # BLAS sums floats only
    x = np.zeros((5000, 4), np.float32)
    x[7, 0], x[9, 1], x[11, 2], x[11, 3] = np.inf, np.nan, np.inf, -np.inf
    _assert_host_sum_is_numpys(x, 1)


def _assert_host_sum_is_numpys(x, axis):
    """The host's sum of ``x`` over ``axis`` (a product with ones) is NumPy's, inf, NaN and
    inf - inf included, and raises no floating-point warning."""
    with tf.device("/cpu:0"):  # the host's sum by a product with ones
        total = tf.reduce_sum(tf.constant(x), axis=axis)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the kernel sums inf - inf to NaN silently, as TF
        got = run(total)
    with np.errstate(invalid="ignore"):
        want = x.sum(axis=axis)
    np.testing.assert_array_equal(got, want)


def test_column_sums_leave_small_integer_and_special_arrays_to_numpy():
    from dflab.kernels.math_kernels import column_sums

    assert column_sums(np.ones((8, 8), np.float32)) is None  # too small to pay
    assert column_sums(np.ones((5000, 4), np.int32)) is None  # BLAS sums floats only
    x = np.zeros((5000, 4), np.float32)
    x[7, 0], x[9, 1], x[11, 2], x[12, 2] = np.inf, np.nan, np.inf, -np.inf
    _assert_host_sum_is_numpys(x, 0)
    g = (np.random.default_rng(1).random((32, 9, 9, 16)) - 0.5).astype(np.float32)
    b = tf.zeros([16])
    y = tf.nn.bias_add(tf.zeros([32, 9, 9, 16]), b)
    grad_b = tf.gradients(y, [b], grad_ys=[tf.constant(g)])[0]
    assert grad_b.op.type == "BiasAddGrad"
    np.testing.assert_allclose(run(grad_b), g.astype(np.float64).sum(axis=(0, 1, 2)),
                               rtol=1e-5, atol=1e-5)
