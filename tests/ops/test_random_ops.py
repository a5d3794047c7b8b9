"""Random ops: static shapes and dtypes, TF1 seed rules, reproducibility across identically
built graphs and sessions, fresh numbers on every run, statistical sanity on large samples,
and error classes for bad arguments."""

import numpy as np
import pytest

import dflab as tf
from dflab.framework import random_seed
from dflab.framework.registry import get_op_def


def build_and_run(build, runs=1, seed=None):
    """Build ``build()`` in a fresh graph (graph seed ``seed``) and run it ``runs`` times in one
    session; returns the list of results."""
    g = tf.Graph()
    with g.as_default():
        if seed is not None:
            tf.set_random_seed(seed)
        t = build()
        with tf.Session(graph=g) as s:
            return [s.run(t) for _ in range(runs)]


SAMPLERS = [
    ("normal", lambda seed=None: tf.random_normal([3, 4], seed=seed), tf.float32),
    ("normal64", lambda seed=None: tf.random_normal([3, 4], 2.0, 3.0, tf.float64, seed=seed),
     tf.float64),
    ("truncated", lambda seed=None: tf.truncated_normal([3, 4], seed=seed), tf.float32),
    ("uniform", lambda seed=None: tf.random_uniform([3, 4], -1, 2, seed=seed), tf.float32),
    ("uniform16", lambda seed=None: tf.random_uniform([3, 4], dtype=tf.float16, seed=seed),
     tf.float16),
    ("uniform_int", lambda seed=None: tf.random_uniform([3, 4], 0, 1 << 30, tf.int32,
                                                        seed=seed), tf.int32),
    ("uniform_int64", lambda seed=None: tf.random_uniform([3, 4], -5, 1 << 40, tf.int64,
                                                          seed=seed), tf.int64),
    ("shuffle", lambda seed=None: tf.random_shuffle(tf.reshape(tf.range(12), [3, 4]),
                                                    seed=seed), tf.int32),
    ("multinomial", lambda seed=None: tf.multinomial(tf.zeros([3, 50]), 4, seed=seed),
     tf.int64),
    ("gamma", lambda seed=None: tf.random_gamma([3], [1.0, 2.0, 3.0, 4.0], seed=seed),
     tf.float32),
    ("poisson", lambda seed=None: tf.random_poisson([5.0, 50.0, 500.0, 9.0], [3], seed=seed),
     tf.float32),
    ("crop", lambda seed=None: tf.random_crop(tf.reshape(tf.range(400), [20, 20]), [3, 4],
                                              seed=seed), tf.int32),
]
IDS = [s[0] for s in SAMPLERS]


@pytest.mark.parametrize("name,build,dtype", SAMPLERS, ids=IDS)
def test_static_shape_dtype_and_stateful(name, build, dtype):
    t = build()
    assert t.dtype == dtype
    assert t.shape.as_list() == [3, 4]
    (v,) = build_and_run(build)
    assert v.shape == (3, 4) and v.dtype == dtype.as_numpy_dtype
    random_op = [op for op in tf.get_default_graph().get_operations()
                 if get_op_def(op.type).stateful]
    assert random_op, "random ops must be registered stateful"


@pytest.mark.parametrize("name,build,dtype", SAMPLERS, ids=IDS)
def test_graph_seed_reproducible_across_graphs_and_runs_differ(name, build, dtype):
    a1, a2 = build_and_run(build, runs=2, seed=42)
    b1, b2 = build_and_run(build, runs=2, seed=42)
    np.testing.assert_array_equal(a1, b1)
    np.testing.assert_array_equal(a2, b2)
    assert not np.array_equal(a1, a2), "a second run must continue the sequence"
    c1, = build_and_run(build, seed=43)
    assert not np.array_equal(a1, c1)


@pytest.mark.parametrize("name,build,dtype", SAMPLERS, ids=IDS)
def test_op_seed_alone_is_reproducible(name, build, dtype):
    (a,) = build_and_run(lambda: build(seed=7))
    (b,) = build_and_run(lambda: build(seed=7))
    (c,) = build_and_run(lambda: build(seed=8))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_unseeded_is_nondeterministic():
    (a,) = build_and_run(lambda: tf.random_normal([100]))
    (b,) = build_and_run(lambda: tf.random_normal([100]))
    assert not np.array_equal(a, b)


def test_two_random_ops_in_one_seeded_graph_differ():
    a, b = build_and_run(lambda: [tf.random_normal([50]), tf.random_normal([50])], seed=1)[0]
    assert not np.array_equal(a, b)


def test_two_sessions_on_one_graph_restart_the_sequence():
    tf.set_random_seed(3)
    t = tf.random_uniform([5])
    with tf.Session() as s1:
        first = [s1.run(t), s1.run(t)]
    with tf.Session() as s2:
        second = [s2.run(t), s2.run(t)]
    np.testing.assert_array_equal(first, second)


def test_get_seed_rules():
    g = tf.Graph()
    with g.as_default():
        assert random_seed.get_seed(None) == (None, None)
        assert random_seed.get_seed(5) == (random_seed.DEFAULT_GRAPH_SEED, 5)
        tf.set_random_seed(11)
        assert g.seed == 11
        assert random_seed.get_seed(5) == (11, 5)
        tf.constant(1.0)
        tf.constant(2.0)
        assert random_seed.get_seed(None) == (11, 2)  # ops created so far
        tf.set_random_seed(0)
        assert random_seed.get_seed(0) == (0, 2**31 - 1)  # (0, 0) would mean "unseeded"


# --- statistics -------------------------------------------------------------------------------
N = 200_000


def sample(build):
    return build_and_run(build, seed=123)[0]


def test_normal_moments():
    v = sample(lambda: tf.random_normal([N], mean=1.5, stddev=2.0))
    assert abs(v.mean() - 1.5) < 0.03 and abs(v.std() - 2.0) < 0.03


def test_truncated_normal_bounds_and_moments():
    v = sample(lambda: tf.truncated_normal([N], mean=-1.0, stddev=0.5, dtype=tf.float64))
    assert v.min() >= -2.0 and v.max() <= 0.0  # within two stddevs of the mean
    assert abs(v.mean() + 1.0) < 0.01
    # the standard deviation of N(0, 1) truncated to [-2, 2] is about 0.8796
    assert abs(v.std() / 0.5 - 0.8796) < 0.01


@pytest.mark.parametrize("dtype", [tf.float16, tf.float32, tf.float64])
def test_uniform_float_range_and_mean(dtype):
    v = sample(lambda: tf.random_uniform([N], -2, 3, dtype=dtype)).astype(np.float64)
    assert v.min() >= -2 and v.max() < 3
    assert abs(v.mean() - 0.5) < 0.03


@pytest.mark.parametrize("dtype", [tf.int32, tf.int64])
def test_uniform_int_range_and_frequencies(dtype):
    v = sample(lambda: tf.random_uniform([N], -3, 7, dtype=dtype))
    assert v.dtype == dtype.as_numpy_dtype
    counts = np.bincount(v + 3, minlength=10)
    assert counts.size == 10
    np.testing.assert_allclose(counts / N, 0.1, atol=0.01)


def test_uniform_int_needs_maxval_and_minval_below_maxval():
    with pytest.raises(ValueError, match="maxval"):
        tf.random_uniform([3], dtype=tf.int32)
    with pytest.raises(ValueError):
        tf.random_uniform([3], 5, 5, dtype=tf.int32)
    hi = tf.placeholder(tf.int32, [])
    t = tf.random_uniform([3], 5, hi, dtype=tf.int32)
    with tf.Session() as s:
        with pytest.raises(tf.errors.InvalidArgumentError):
            s.run(t, {hi: 2})
        assert np.all(s.run(t, {hi: 6}) == 5)


def test_shuffle_is_a_permutation_of_rows():
    x = np.arange(30).reshape(10, 3)
    v = sample(lambda: tf.random_shuffle(tf.constant(x)))
    assert sorted(map(tuple, v)) == sorted(map(tuple, x))
    assert not np.array_equal(v, x)
    (scalar,) = build_and_run(lambda: tf.random_shuffle(tf.constant(5.0)))
    assert scalar == 5.0


def test_multinomial_frequencies_match_softmax():
    logits = np.log(np.array([[0.1, 0.2, 0.7], [0.5, 0.25, 0.25]]))
    v = sample(lambda: tf.multinomial(tf.constant(logits, tf.float32), 50_000))
    assert v.shape == (2, 50_000) and v.dtype == np.int64
    for row, p in zip(v, np.exp(logits)):
        np.testing.assert_allclose(np.bincount(row, minlength=3) / row.size, p, atol=0.01)
    ninf = sample(lambda: tf.multinomial(tf.constant([[0.0, -np.inf, 0.0]]), 1000,
                                         output_dtype=tf.int32))
    assert ninf.dtype == np.int32 and 1 not in ninf


def test_multinomial_bad_arguments():
    with pytest.raises(ValueError):
        tf.multinomial(tf.zeros([2, 3, 4]), 2)
    with pytest.raises(TypeError):
        tf.multinomial(tf.zeros([2, 3]), 2, output_dtype=tf.float32)
    n = tf.placeholder(tf.int32, [])
    t = tf.multinomial(tf.zeros([2, 3]), n)
    assert t.shape.as_list() == [2, None]


def test_gamma_moments():
    v = sample(lambda: tf.random_gamma([N], [0.5, 4.0], beta=[1.0, 2.0]))
    assert v.shape == (N, 2) and v.min() > 0
    # mean alpha / beta, variance alpha / beta**2
    np.testing.assert_allclose(v.mean(axis=0), [0.5, 2.0], rtol=0.02)
    np.testing.assert_allclose(v.var(axis=0), [0.5, 1.0], rtol=0.05)


def test_dynamic_and_partial_shapes():
    n = tf.placeholder(tf.int32, [])
    t = tf.random_normal(tf.stack([n, 3]))
    assert t.shape.as_list() == [None, 3]
    with tf.Session() as s:
        assert s.run(t, {n: 4}).shape == (4, 3)
    u = tf.random_uniform(tf.placeholder(tf.int32, [2]))
    assert u.shape.as_list() == [None, None]


def test_bad_dtypes_and_shapes():
    with pytest.raises(ValueError):
        tf.random_normal([2], dtype=tf.int32)
    with pytest.raises(ValueError):
        tf.truncated_normal([2], dtype=tf.int64)
    with pytest.raises(ValueError):
        tf.random_uniform([2], dtype=tf.bool)
    with pytest.raises(ValueError):
        tf.random_normal(tf.zeros([2, 2], tf.int32))
    with pytest.raises(TypeError):
        tf.random_normal(tf.zeros([2]))
    shape = tf.placeholder(tf.int32, [1])
    t = tf.random_normal(shape)
    with tf.Session() as s:
        with pytest.raises(tf.errors.InvalidArgumentError):
            s.run(t, {shape: [-1]})


def test_gradient_flows_through_mean_and_stddev():
    x = tf.constant(2.0)
    y = tf.random_normal([3], mean=x, stddev=x)
    gm = tf.gradients(tf.reduce_sum(y), [x])[0]
    with tf.Session() as s:
        yv, g = s.run([y, gm])  # one run: y and its gradient share the same draw
    # y = mean + stddev * z  ->  dy/dx summed = sum(z) + 3
    assert g == pytest.approx(np.sum((yv - 2.0) / 2.0) + 3.0, rel=1e-5)


def test_poisson_moments_and_dtype():
    v = sample(lambda: tf.random_poisson([0.5, 20.0], [N], dtype=tf.int64))
    assert v.shape == (N, 2) and v.dtype == np.int64 and v.min() >= 0
    np.testing.assert_allclose(v.mean(axis=0), [0.5, 20.0], rtol=0.02)
    np.testing.assert_allclose(v.var(axis=0), [0.5, 20.0], rtol=0.05)


def test_random_crop_is_a_block_of_the_input():
    x = np.arange(60).reshape(6, 10)
    tf.set_random_seed(9)
    t = tf.random_crop(tf.constant(x), [2, 3])
    assert t.shape.as_list() == [2, 3]
    corners = set()
    with tf.Session() as s:
        for _ in range(40):
            v = s.run(t)
            r, c = divmod(int(v[0, 0]), 10)
            np.testing.assert_array_equal(v, x[r:r + 2, c:c + 3])
            corners.add((r, c))
    assert len(corners) > 10  # offsets vary over the 5 x 8 possible corners
    with pytest.raises(ValueError):
        tf.random_crop(tf.constant(x), [7, 3])


def test_eager_draws_are_the_graphs_draws_from_the_same_seeds():
    """Executing eagerly, ``random_uniform`` over [0, 1) is its sample alone (the graph's
    ``* 1 + 0`` gives back its bits): the same numbers as the graph's ops, every dtype."""
    from dflab.eager import EagerContext

    def draws():
        tf.set_random_seed(7)
        return [tf.random_uniform([3, 4], seed=3), tf.random_normal([2], seed=5),
                tf.random_uniform([2, 2], dtype=tf.float16, seed=1),
                tf.random_uniform([2], minval=2.0, maxval=3.0, dtype=tf.float64, seed=2),
                tf.random_uniform([4], maxval=9, dtype=tf.int32, seed=4)]

    with tf.Graph().as_default(), tf.Session() as sess:
        in_graph = sess.run(draws())
    context = EagerContext()
    with context.as_default():
        eager = [t.numpy() for t in draws()]
    context.close()
    for g, e in zip(in_graph, eager):
        assert g.dtype == e.dtype and g.tobytes() == e.tobytes()
    assert 0 <= eager[0].min() and eager[0].max() < 1 and 2 <= eager[3].min() < 3
