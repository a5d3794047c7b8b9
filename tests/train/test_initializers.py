"""Initializers: values, shapes, dtypes, the statistics of the random ones (Glorot and variance
scaling limits and standard deviations), argument errors and seeded reproducibility."""

import math

import numpy as np
import pytest

import dflab as tf

TRUNC_STD = 0.87962566103423978  # std of a unit normal truncated to [-2, 2]


def _values(init, shape, dtype=None, seed_graph=None):
    g = tf.Graph()
    with g.as_default():
        if seed_graph is not None:
            tf.set_random_seed(seed_graph)
        t = init(shape) if dtype is None else init(shape, dtype=dtype)
        with tf.Session(graph=g) as sess:
            out = sess.run(t)
    assert t.shape.as_list() == list(out.shape)
    return out


# --- deterministic initializers --------------------------------------------------------------
@pytest.mark.parametrize("init, shape, dtype, want", [
    (tf.zeros_initializer(), [2, 3], None, np.zeros((2, 3), np.float32)),
    (tf.zeros_initializer(dtype=tf.int32), [4], None, np.zeros(4, np.int32)),
    (tf.zeros_initializer(), [3], tf.float64, np.zeros(3, np.float64)),
    (tf.ones_initializer(), [2, 2], None, np.ones((2, 2), np.float32)),
    (tf.ones_initializer(), [5], tf.int64, np.ones(5, np.int64)),
    (tf.constant_initializer(3.5), [2, 3], None, np.full((2, 3), 3.5, np.float32)),
    (tf.constant_initializer([1, 2, 3, 4, 5, 6]), [2, 3], None,
     np.arange(1, 7, dtype=np.float32).reshape(2, 3)),
    (tf.constant_initializer([1, 2]), [4], tf.int32, np.array([1, 2, 2, 2], np.int32)),
    (tf.constant_initializer(np.eye(2)), [2, 2], tf.float64, np.eye(2)),
])
def test_deterministic_initializers(init, shape, dtype, want):
    got = _values(init, shape, dtype)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_constant_initializer_verify_shape_rejects_wrong_size():
    with pytest.raises(TypeError):
        tf.constant_initializer([1, 2], verify_shape=True)([4])


def test_constant_initializer_rejects_non_numeric_value():
    with pytest.raises(TypeError):
        tf.constant_initializer({"a": 1})


def test_identity_initializer_is_gain_times_eye():
    from dflab.ops.init_ops import Identity

    np.testing.assert_allclose(_values(Identity(gain=2.0), [3, 4]), 2.0 * np.eye(3, 4))
    with pytest.raises(ValueError):
        Identity()([2, 2, 2])


# --- random initializers: ranges and moments ---------------------------------------------------
def test_random_uniform_initializer_range_and_mean():
    v = _values(tf.random_uniform_initializer(-2.0, 3.0, seed=1), [200, 100])
    assert v.dtype == np.float32
    assert v.min() >= -2.0 and v.max() < 3.0
    assert abs(v.mean() - 0.5) < 0.05
    assert abs(v.std() - 5.0 / math.sqrt(12.0)) < 0.03


def test_random_uniform_initializer_integer_dtype():
    v = _values(tf.random_uniform_initializer(0, 10, seed=2, dtype=tf.int32), [1000])
    assert v.dtype == np.int32 and v.min() >= 0 and v.max() < 10


def test_random_normal_initializer_moments():
    v = _values(tf.random_normal_initializer(mean=1.0, stddev=2.0, seed=3), [400, 100])
    assert abs(v.mean() - 1.0) < 0.03
    assert abs(v.std() - 2.0) < 0.03


def test_truncated_normal_initializer_is_within_two_stddev():
    v = _values(tf.truncated_normal_initializer(mean=-1.0, stddev=0.5, seed=4), [400, 100])
    assert v.min() >= -2.0 and v.max() <= 0.0
    assert abs(v.mean() + 1.0) < 0.02
    assert abs(v.std() - 0.5 * TRUNC_STD) < 0.01


@pytest.mark.parametrize("cls", [tf.random_normal_initializer, tf.truncated_normal_initializer,
                                 tf.glorot_uniform_initializer, tf.variance_scaling_initializer])
def test_float_only_initializers_reject_integer_dtype(cls):
    with pytest.raises(ValueError):
        cls(dtype=tf.int32)
    with pytest.raises(ValueError):
        cls()([2, 2], dtype=tf.int32)


@pytest.mark.parametrize("shape, fan_in, fan_out", [
    ([], 1, 1),
    ([7], 7, 7),
    ([300, 200], 300, 200),
    ([3, 3, 16, 32], 9 * 16, 9 * 32),
    ([2, 5, 40, 8], 10 * 40, 10 * 8),
])
def test_compute_fans(shape, fan_in, fan_out):
    from dflab.ops.init_ops import _compute_fans

    assert _compute_fans(shape) == (fan_in, fan_out)


def test_glorot_uniform_limit_and_variance():
    fan_in, fan_out = 300, 200
    limit = math.sqrt(6.0 / (fan_in + fan_out))
    v = _values(tf.glorot_uniform_initializer(seed=5), [fan_in, fan_out])
    assert v.min() >= -limit and v.max() <= limit
    assert v.max() > 0.98 * limit and v.min() < -0.98 * limit
    assert abs(v.std() - math.sqrt(2.0 / (fan_in + fan_out))) < 0.002


def test_glorot_uniform_for_conv_kernels_uses_receptive_field():
    shape = [3, 3, 16, 32]
    limit = math.sqrt(6.0 / (9 * 16 + 9 * 32))
    v = _values(tf.glorot_uniform_initializer(seed=6), shape)
    assert v.shape == tuple(shape)
    assert np.abs(v).max() <= limit and np.abs(v).max() > 0.95 * limit


def test_glorot_normal_std_and_truncation():
    fan_in, fan_out = 400, 200
    std = math.sqrt(2.0 / (fan_in + fan_out))
    v = _values(tf.glorot_normal_initializer(seed=7), [fan_in, fan_out])
    assert abs(v.std() - std) < 0.03 * std
    assert np.abs(v).max() <= 2 * std / TRUNC_STD + 1e-6


@pytest.mark.parametrize("scale, mode, n", [
    (1.0, "fan_in", 500),
    (2.0, "fan_in", 500),
    (2.0, "fan_out", 250),
    (3.0, "fan_avg", 375),
])
@pytest.mark.parametrize("distribution", ["normal", "truncated_normal", "untruncated_normal",
                                          "uniform"])
def test_variance_scaling_std(scale, mode, n, distribution):
    init = tf.variance_scaling_initializer(scale=scale, mode=mode, distribution=distribution,
                                           seed=8)
    v = _values(init, [500, 250])
    want_std = math.sqrt(scale / n)
    assert abs(v.mean()) < 0.05 * want_std
    assert abs(v.std() - want_std) < 0.03 * want_std
    if distribution == "uniform":
        limit = math.sqrt(3.0 * scale / n)
        assert np.abs(v).max() <= limit and np.abs(v).max() > 0.99 * limit
    elif distribution != "untruncated_normal":
        # TF1's "normal" is the truncated normal, rescaled to keep the variance.
        assert np.abs(v).max() <= 2 * want_std / TRUNC_STD + 1e-6


def test_variance_scaling_fan_uses_partition_full_shape():
    class Info:
        full_shape = [800, 100]

    g = tf.Graph()
    with g.as_default():
        t = tf.variance_scaling_initializer(distribution="uniform", seed=9)(
            [200, 100], partition_info=Info())
        v = tf.Session(graph=g).run(t)
    assert v.shape == (200, 100)
    assert np.abs(v).max() <= math.sqrt(3.0 / 800)


@pytest.mark.parametrize("kwargs", [
    {"scale": 0.0}, {"scale": -1.0}, {"mode": "fan_sum"}, {"distribution": "cauchy"},
])
def test_variance_scaling_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        tf.variance_scaling_initializer(**kwargs)


def test_uniform_unit_scaling_limit():
    v = _values(tf.uniform_unit_scaling_initializer(factor=1.5, seed=10), [50, 40])
    limit = math.sqrt(3.0 / 50) * 1.5
    assert np.abs(v).max() <= limit and np.abs(v).max() > 0.95 * limit


# --- orthogonal ----------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [[4, 4], [3, 7], [7, 3], [2, 3, 5]])
def test_orthogonal_initializer_rows_or_columns_are_orthonormal(shape):
    v = _values(tf.orthogonal_initializer(gain=2.0, seed=11), shape)
    assert v.shape == tuple(shape)
    flat = v.reshape(-1, shape[-1]) / 2.0
    if flat.shape[0] >= flat.shape[1]:
        np.testing.assert_allclose(flat.T @ flat, np.eye(flat.shape[1]), atol=1e-5)
    else:
        np.testing.assert_allclose(flat @ flat.T, np.eye(flat.shape[0]), atol=1e-5)


def test_orthogonal_initializer_needs_two_dimensions():
    with pytest.raises(ValueError):
        tf.orthogonal_initializer()([5])


# --- reproducibility -----------------------------------------------------------------------------
@pytest.mark.parametrize("make", [
    lambda s: tf.random_uniform_initializer(seed=s),
    lambda s: tf.random_normal_initializer(seed=s),
    lambda s: tf.truncated_normal_initializer(seed=s),
    lambda s: tf.glorot_uniform_initializer(seed=s),
    lambda s: tf.glorot_normal_initializer(seed=s),
    lambda s: tf.variance_scaling_initializer(seed=s, distribution="untruncated_normal"),
    lambda s: tf.orthogonal_initializer(seed=s),
])
def test_op_seed_reproduces_values_and_other_seed_differs(make):
    a = _values(make(42), [6, 5])
    b = _values(make(42), [6, 5])
    c = _values(make(43), [6, 5])
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_graph_seed_reproduces_get_variable_initial_values():
    def build():
        g = tf.Graph()
        with g.as_default():
            tf.set_random_seed(1234)
            a = tf.get_variable("a", [4, 3])
            b = tf.get_variable("b", [4, 3], initializer=tf.random_normal_initializer())
            with tf.Session(graph=g) as sess:
                sess.run(tf.global_variables_initializer())
                return sess.run([a, b])

    (a1, b1), (a2, b2) = build(), build()
    np.testing.assert_array_equal(a1, a2)
    np.testing.assert_array_equal(b1, b2)
    assert not np.array_equal(a1, b1)


def test_initializer_config_round_trip():
    init = tf.variance_scaling_initializer(scale=2.0, mode="fan_out", distribution="uniform",
                                           seed=3)
    cfg = init.get_config()
    assert cfg == {"scale": 2.0, "mode": "fan_out", "distribution": "uniform", "seed": 3,
                   "dtype": "float32"}
    again = tf.variance_scaling_initializer.from_config(cfg)
    assert (again.scale, again.mode, again.distribution, again.seed) == (2.0, "fan_out",
                                                                         "uniform", 3)


# --- tf.initializers' He and LeCun spellings (TF1: VarianceScaling with fixed arguments) ------
@pytest.mark.parametrize("name, scale, distribution", [
    ("he_normal", 2.0, "truncated_normal"),
    ("he_uniform", 2.0, "uniform"),
    ("lecun_normal", 1.0, "truncated_normal"),
    ("lecun_uniform", 1.0, "uniform"),
])
def test_he_and_lecun_initializers_scale_by_fan_in(name, scale, distribution):
    make = getattr(tf.initializers, name)
    init = make(seed=11)
    assert init.get_config() == {"scale": scale, "mode": "fan_in",
                                 "distribution": distribution, "seed": 11, "dtype": "float32"}
    shape = [3, 3, 40, 20]  # fan_in = 9 * 40 = 360 (the output depth does not count)
    v = _values(init, shape)
    assert v.shape == tuple(shape) and v.dtype == np.float32
    want_std = math.sqrt(scale / 360)
    assert abs(v.mean()) < 0.05 * want_std
    assert abs(v.std() - want_std) < 0.03 * want_std
    if distribution == "uniform":
        limit = math.sqrt(3.0 * scale / 360)
        assert np.abs(v).max() <= limit and np.abs(v).max() > 0.99 * limit
    else:
        assert np.abs(v).max() <= 2 * want_std / TRUNC_STD + 1e-6
    again = _values(make(seed=11), shape)
    np.testing.assert_array_equal(v, again)
    assert _values(init, [4, 5], dtype=tf.float64).dtype == np.float64
    with pytest.raises(ValueError):
        init([4, 5], dtype=tf.int32)


def test_he_normal_with_get_variable_under_graph_seed():
    def initial(seed_graph):
        with tf.Graph().as_default():
            tf.set_random_seed(seed_graph)
            v = tf.get_variable("w", [50, 30], initializer=tf.initializers.he_normal())
            with tf.Session() as sess:
                sess.run(tf.global_variables_initializer())
                return sess.run(v)

    a, b, c = initial(1), initial(1), initial(2)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert np.abs(a).max() <= 2 * math.sqrt(2.0 / 50) / TRUNC_STD + 1e-6


def test_initializers_identity_rejects_non_matrices_and_integer_dtypes():
    from dflab.ops.init_ops import Identity

    assert tf.initializers.identity is Identity
    with pytest.raises(ValueError, match="2D matrices"):
        tf.initializers.identity()([2, 2, 2])
    with pytest.raises(ValueError):
        tf.initializers.identity(dtype=tf.int32)
