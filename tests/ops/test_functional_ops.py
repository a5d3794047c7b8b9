"""map_fn, scan, foldl, foldr: forward vs NumPy (nested structures, reverse, initializers,
dynamic lengths) and gradients through their while loops vs numerical differentiation."""

import collections

import numpy as np
import pytest
from op_test_util import check_forward, check_grads, evaluate

import dflab as tf

RNG = np.random.default_rng(1)
Pair = collections.namedtuple("Pair", ["a", "b"])


def _cumsum_rev(x):
    return np.cumsum(x[::-1], axis=0)[::-1]


FORWARD = [
    ("map", lambda x: tf.map_fn(lambda r: tf.sin(r) * 2.0, x), lambda x: np.sin(x) * 2),
    ("map_dtype", lambda x: tf.map_fn(lambda r: tf.cast(tf.reduce_sum(r) > 0, tf.int32), x,
                                      dtype=tf.int32),
     lambda x: (x.sum(1) > 0).astype(np.int32)),
    ("map_nested_in_out",
     lambda x: tf.map_fn(lambda t: Pair(t[0] + t[1], t[0] * t[1]), (x, x * 2.0),
                         dtype=Pair(tf.float64, tf.float64)),
     lambda x: [x + 2 * x, 2 * x * x]),
    ("map_dict", lambda x: tf.map_fn(lambda d: {"u": d["u"] * 2.0, "v": d["v"] - 1.0},
                                     {"u": x, "v": x[:, :1]})["v"],
     lambda x: x[:, :1] - 1),
    ("scan", lambda x: tf.scan(lambda a, e: a + e, x), lambda x: np.cumsum(x, 0)),
    ("scan_reverse", lambda x: tf.scan(lambda a, e: a + e, x, reverse=True), _cumsum_rev),
    ("scan_init", lambda x: tf.scan(lambda a, e: a * 0.5 + e, x,
                                    initializer=tf.ones([3], tf.float64)),
     lambda x: _scan_ref(lambda a, e: a * 0.5 + e, x, np.ones(3))),
    ("scan_init_reverse", lambda x: tf.scan(lambda a, e: a * 0.5 + e, x,
                                            initializer=tf.ones([3], tf.float64),
                                            reverse=True),
     lambda x: _scan_ref(lambda a, e: a * 0.5 + e, x[::-1], np.ones(3))[::-1]),
    ("scan_nested_init",
     lambda x: tf.scan(lambda acc, e: (acc[0] + e, acc[1] * 2.0), x,
                       initializer=(tf.zeros([3], tf.float64), tf.constant(1.0, tf.float64))),
     lambda x: [np.cumsum(x, 0), 2.0 ** np.arange(1, len(x) + 1)]),
    ("scan_nested_elems",
     lambda x: tf.scan(lambda a, e: Pair(a.a + e.b, a.b * e.a), Pair(x, x + 1.0)),
     lambda x: [x[0] + np.concatenate([[0 * x[0]], np.cumsum(x[1:] + 1, 0)]),
                (x[0] + 1) * np.concatenate([[1 + 0 * x[0]], np.cumprod(x[1:], 0)])]),
    ("foldl", lambda x: tf.foldl(lambda a, e: a * 2.0 + e, x),
     lambda x: _fold_ref(lambda a, e: a * 2 + e, x[1:], x[0])),
    ("foldr", lambda x: tf.foldr(lambda a, e: a * 2.0 + e, x),
     lambda x: _fold_ref(lambda a, e: a * 2 + e, x[::-1][1:], x[-1])),
    ("foldl_init", lambda x: tf.foldl(lambda a, e: a - e, x, initializer=tf.zeros([3],
                                                                                   tf.float64)),
     lambda x: -x.sum(0)),
    ("foldr_init", lambda x: tf.foldr(lambda a, e: a * 0.5 + e, x,
                                      initializer=tf.ones([3], tf.float64)),
     lambda x: _fold_ref(lambda a, e: a * 0.5 + e, x[::-1], np.ones(3))),
    ("foldl_nested", lambda x: tf.foldl(lambda a, e: (a[0] + e[0] * e[1], a[1] + 1.0),
                                        (x, x), initializer=(tf.zeros([3], tf.float64),
                                                             tf.constant(0.0, tf.float64))),
     lambda x: [(x * x).sum(0), float(len(x))]),
]


def _scan_ref(fn, xs, a):
    out = []
    for k, e in enumerate(xs):
        if k == 0 and a is xs[0]:
            a = e
        else:
            a = fn(a, e)
        out.append(a)
    return np.stack(out)


def _fold_ref(fn, xs, a):
    for e in xs:
        a = fn(a, e)
    return a


@pytest.mark.parametrize("name,fn,ref", FORWARD, ids=[f[0] for f in FORWARD])
def test_forward(name, fn, ref):
    x = RNG.standard_normal((5, 3))
    check_forward(fn, [x], ref)


def test_map_fn_dynamic_length():
    x = tf.placeholder(tf.float32, [None, 2])
    y = tf.map_fn(lambda r: r * r, x)
    assert y.shape.as_list() == [None, 2]
    with tf.Session() as sess:
        for n in (1, 3, 8):
            v = RNG.standard_normal((n, 2)).astype(np.float32)
            np.testing.assert_allclose(sess.run(y, {x: v}), v * v, rtol=1e-6)


def test_map_fn_parallel_iterations_and_options():
    x = RNG.standard_normal((9, 4))
    for p in (1, 3, 10):
        got, _ = evaluate(lambda t, p=p: tf.map_fn(tf.exp, t, parallel_iterations=p,
                                                   back_prop=False, swap_memory=True,
                                                   infer_shape=False), x)
        np.testing.assert_allclose(got, np.exp(x))


def test_map_fn_one_loop_in_graph():
    x = tf.placeholder(tf.float32, [100, 2])
    tf.map_fn(tf.sin, x)
    ops = tf.get_default_graph().get_operations()
    assert sum(op.type == "LoopCond" for op in ops) == 1
    assert sum(op.type == "Sin" for op in ops) == 1


def test_errors():
    x = tf.zeros([3])
    with pytest.raises(TypeError):
        tf.map_fn(3, x)
    with pytest.raises(TypeError):
        tf.foldl("f", x)
    with pytest.raises(ValueError):
        tf.map_fn(lambda r: (r, r), x)  # structure differs from elems without dtype


GRADS = [
    ("map", lambda x: tf.map_fn(lambda r: tf.sin(r) * r, x)),
    ("map_nested", lambda x, y: tf.map_fn(lambda t: t[0] * tf.exp(t[1]), (x, y),
                                          dtype=tf.float64)),
    ("scan", lambda x: tf.scan(lambda a, e: a * e + tf.sin(e), x)),
    ("scan_reverse_init", lambda x, y: tf.scan(lambda a, e: a * e + 1.0, x, initializer=y[0],
                                               reverse=True)),
    ("foldl", lambda x: tf.foldl(lambda a, e: a * tf.cos(e), x)),
    ("foldr_init", lambda x, y: tf.foldr(lambda a, e: a * e + a, x, initializer=y[1])),
]


@pytest.mark.parametrize("name,fn", GRADS, ids=[g[0] for g in GRADS])
def test_gradients(name, fn):
    nargs = fn.__code__.co_argcount
    args = [RNG.standard_normal((4, 3)) for _ in range(nargs)]
    check_grads(fn, args)
