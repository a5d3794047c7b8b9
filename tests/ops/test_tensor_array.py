"""TensorArray: forward vs NumPy, dynamic size inside while loops, TF1 errors, per-step storage,
and gradients (outside loops, vs numerical differentiation)."""

import threading

import numpy as np
import pytest
from op_test_util import check_forward, check_grads, evaluate

import dflab as tf

RNG = np.random.default_rng(0)


def _run(fetches, feed=None):
    with tf.Session() as sess:
        return sess.run(fetches, feed)


# --- forward ---------------------------------------------------------------------------------
def _write_stack(x):
    ta = tf.TensorArray(x.dtype, size=3)
    for i in range(3):
        ta = ta.write(i, x[i] * (i + 1))
    return ta.stack()


def _unstack_reads(x):
    ta = tf.TensorArray(x.dtype, size=4).unstack(x)
    return [ta.read(3), ta.read(0)]


def _scatter_gather(x):
    ta = tf.TensorArray(x.dtype, size=4).scatter([2, 0, 3, 1], x)
    return ta.gather([1, 2])


def _split_concat(x):
    ta = tf.TensorArray(x.dtype, size=3, infer_shape=False, clear_after_read=False)
    ta = ta.split(x, [1, 3, 2])
    return [ta.concat(), ta.read(1)]


def _split_even(x):
    ta = tf.TensorArray(x.dtype, size=3).split(x, [2, 2, 2])
    return ta.stack()


FORWARD = [
    ("write_stack", _write_stack, lambda x: x[:3] * np.arange(1, 4)[:, None]),
    ("unstack_read", _unstack_reads, lambda x: [x[3], x[0]]),
    ("scatter_gather", _scatter_gather, lambda x: x[[3, 0]]),
    ("split_even", _split_even, lambda x: x.reshape(3, 2, 3)),
]


@pytest.mark.parametrize("name,fn,ref", FORWARD, ids=[f[0] for f in FORWARD])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_forward(name, fn, ref, dtype):
    x = (RNG.standard_normal((6, 3)) * 10).astype(dtype)
    if name != "split_even":
        x = x[:4]
    check_forward(fn, [x], ref)


def test_split_concat_ragged():
    x = RNG.standard_normal((6, 2))
    (cat, second), _ = _eval(_split_concat, x)
    np.testing.assert_array_equal(cat, x)
    np.testing.assert_array_equal(second, x[1:4])


def _eval(fn, *args):
    return evaluate(fn, *args)


def test_size_static_and_dynamic():
    ta = tf.TensorArray(tf.float32, size=5)
    dyn = tf.TensorArray(tf.float32, size=0, dynamic_size=True).write(6, 1.0)
    assert tf.get_default_graph() is ta.size().graph
    assert _run([ta.size(), dyn.size()]) == [5, 7]


def test_element_shape_inferred_from_writes():
    ta = tf.TensorArray(tf.float32, size=2)
    assert ta.element_shape.ndims is None
    ta = ta.write(0, tf.zeros([2, 3]))
    assert ta.element_shape.as_list() == [2, 3]
    assert ta.read(1).shape.as_list() == [2, 3]
    assert ta.stack().shape.as_list() == [2, 2, 3]
    with pytest.raises(ValueError, match="Inconsistent shapes"):
        ta.write(1, tf.zeros([3, 3]))


def test_dynamic_growth_in_while_loop():
    ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
    n = tf.placeholder(tf.int32, [])

    def body(i, ta):
        v = tf.cast(i, tf.float32) * tf.ones([3])
        return i + 1, ta.write(i, v * v)

    _, ta = tf.while_loop(lambda i, ta: i < n, body, [0, ta])
    stacked, size = ta.stack(), ta.size()
    assert stacked.shape.as_list() == [None, 3]
    for k in (1, 4, 9):
        got, sz = _run([stacked, size], {n: k})
        np.testing.assert_array_equal(got, (np.arange(k, dtype=np.float32) ** 2)[:, None]
                                      * np.ones(3))
        assert sz == k


def test_tensor_array_read_and_written_in_loop():
    """Read one array and write another inside a loop (the map_fn pattern), parallel
    iterations allowed."""
    x = RNG.standard_normal((7, 2)).astype(np.float32)
    inp = tf.TensorArray(tf.float32, size=7).unstack(x)
    out = tf.TensorArray(tf.float32, size=7)

    def body(i, out):
        return i + 1, out.write(i, tf.exp(inp.read(i)))

    _, out = tf.while_loop(lambda i, _: i < 7, body, [0, out], parallel_iterations=4)
    np.testing.assert_allclose(_run(out.stack()), np.exp(x), rtol=1e-6)


def test_identity_and_close():
    ta = tf.TensorArray(tf.float32, size=1).write(0, [1.0, 2.0]).identity()
    v = ta.read(0)
    with tf.control_dependencies([v]):
        close = ta.close()
    with tf.Session() as sess:
        got, _ = sess.run([v, close])
    np.testing.assert_array_equal(got, [1.0, 2.0])


def test_fresh_storage_per_step_and_concurrent_steps():
    x = tf.placeholder(tf.float32, [None])
    ta = tf.TensorArray(tf.float32, size=2).write(0, x).write(1, x * 2.0)
    y = ta.stack()
    sess = tf.Session()
    results, errs = {}, []

    def run(k):
        try:
            for _ in range(5):
                results[k] = sess.run(y, {x: np.full(3, k, np.float32)})
        except Exception as e:  # noqa: BLE001 - reported below
            errs.append(e)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errs, errs
    for k in range(4):
        np.testing.assert_array_equal(results[k], [[k] * 3, [2 * k] * 3])
    sess.close()


def test_zero_size_stack_needs_static_shape():
    ok = tf.TensorArray(tf.float32, size=0, element_shape=[2]).stack()
    bad = tf.TensorArray(tf.float32, size=0).stack()
    assert _run(ok).shape == (0, 2)
    with pytest.raises(tf.errors.InvalidArgumentError, match="size zero"):
        _run(bad)


def test_unwritten_read_is_zeros_when_shape_known():
    # TF 1.x: an element never written reads as zeros once the element shape is fully known.
    ta = tf.TensorArray(tf.float32, size=3, element_shape=[2]).write(0, [1.0, 2.0])
    np.testing.assert_array_equal(_run(ta.stack()), [[1, 2], [0, 0], [0, 0]])


def test_clear_after_read_false_allows_rereads():
    ta = tf.TensorArray(tf.float32, size=1, clear_after_read=False).write(0, 3.0)
    assert _run([ta.read(0), ta.read(0)]) == [3.0, 3.0]


# --- errors ----------------------------------------------------------------------------------
def _ta(**kw):
    return tf.TensorArray(tf.float32, **kw)


RUNTIME_ERRORS = [
    ("double write", lambda: _ta(size=2).write(0, 1.0).write(0, 2.0).read(0),
     "already been written"),
    ("write out of range", lambda: _ta(size=2).write(2, 1.0).read(0), "not resizeable"),
    ("read out of range", lambda: _ta(size=2).write(0, 1.0).read(5), "array size is: 2"),
    ("unwritten unknown shape", lambda: _ta(size=2).read(1), "not yet been written"),
    ("read twice", lambda: _two_reads(_ta(size=1).write(0, 1.0)), "twice"),
    ("dtype mismatch", lambda: _ta(size=1).write(0, tf.constant(1, tf.int32)).read(0),
     "dtype"),
    ("shape mismatch", lambda: _shape_mismatch(), "incompatible"),
    ("scatter length", lambda: _ta(size=3, infer_shape=False).scatter(
        tf.placeholder_with_default([0, 1], [None]), tf.zeros([3, 2])).read(0), "len"),
    ("split lengths", lambda: _ta(size=2, infer_shape=False).split(
        tf.zeros([5]), tf.placeholder_with_default(np.array([1, 2], np.int64), [None]))
     .read(0), "sum of lengths"),
]


def _two_reads(ta):
    return tf.add(ta.read(0), ta.read(0))


def _shape_mismatch():
    v = tf.placeholder_with_default(np.zeros(3, np.float32), [None])
    return _ta(size=1, element_shape=[2], infer_shape=False).write(0, v).read(0)


@pytest.mark.parametrize("name,build,match", RUNTIME_ERRORS, ids=[e[0] for e in RUNTIME_ERRORS])
def test_runtime_errors(name, build, match):
    t = build()
    with pytest.raises(tf.errors.InvalidArgumentError, match=match) as info:
        _run(t)
    assert "TensorArray" in str(info.value)


@pytest.mark.parametrize("kwargs,exc", [
    (dict(), ValueError),  # no size, no handle
    (dict(handle="x", flow=None), TypeError),
])
def test_constructor_errors(kwargs, exc):
    with pytest.raises(exc):
        tf.TensorArray(tf.float32, **kwargs)


def test_constructor_handle_conflicts():
    ta = _ta(size=1)
    with pytest.raises(ValueError, match="flow"):
        tf.TensorArray(tf.float32, handle=ta.handle)
    with pytest.raises(ValueError, match="size"):
        tf.TensorArray(tf.float32, handle=ta.handle, flow=ta.flow, size=3)


def test_build_time_type_errors():
    ta = _ta(size=2)
    with pytest.raises(TypeError):
        ta.read(tf.constant(1.0))
    with pytest.raises(ValueError):
        ta.read([0, 1])


# --- gradients -------------------------------------------------------------------------------
def _g_write_stack(x, y):
    return tf.TensorArray(tf.float64, size=2).write(0, x).write(1, tf.sin(y)).stack() * 2.0


def _g_unstack_read(x):
    ta = tf.TensorArray(tf.float64, size=4).unstack(x)
    return ta.read(1) * ta.read(3)


def _g_split_concat(x):
    return tf.sin(tf.TensorArray(tf.float64, size=3, infer_shape=False)
                  .split(x, [1, 2, 3]).concat())


def _g_scatter_gather(x):
    return tf.TensorArray(tf.float64, size=4).scatter([3, 0, 1, 2], x).gather([2, 0])


def _g_partial_read(x):
    # index 1 is written but never read: its gradient is zero.
    ta = tf.TensorArray(tf.float64, size=3).write(0, x).write(1, x * 3.0).write(2, x * x)
    return ta.read(0) + ta.read(2)


def _g_dynamic(x):
    ta = tf.TensorArray(tf.float64, size=0, dynamic_size=True).unstack(x)
    return ta.stack() * x


GRADS = [
    ("write_stack", _g_write_stack, [(3,), (3,)]),
    ("unstack_read", _g_unstack_read, [(4, 2)]),
    ("split_concat", _g_split_concat, [(6, 2)]),
    ("scatter_gather", _g_scatter_gather, [(4, 2)]),
    ("partial_read", _g_partial_read, [(2,)]),
    ("dynamic", _g_dynamic, [(3, 2)]),
]


@pytest.mark.parametrize("name,fn,shapes", GRADS, ids=[g[0] for g in GRADS])
def test_gradients(name, fn, shapes):
    check_grads(fn, [RNG.standard_normal(s) for s in shapes])


def test_two_gradient_calls_use_separate_gradient_arrays():
    x = tf.placeholder(tf.float64, [3])
    ta = tf.TensorArray(tf.float64, size=1).write(0, x)
    y = ta.read(0)
    g1 = tf.gradients(tf.reduce_sum(y * 2.0), x)[0]
    g2 = tf.gradients(tf.reduce_sum(y * 5.0), x)[0]
    a, b = _run([g1, g2], {x: np.ones(3)})
    np.testing.assert_array_equal(a, [2, 2, 2])
    np.testing.assert_array_equal(b, [5, 5, 5])


def test_gradient_through_tensor_array_in_while_loop():
    def fn(x):
        inp = tf.TensorArray(tf.float64, size=4).unstack(x)
        out = tf.TensorArray(tf.float64, size=4)

        def body(i, acc, out):
            v = inp.read(i)
            acc = acc * v + 1.0
            return i + 1, acc, out.write(i, acc)

        _, acc, out = tf.while_loop(lambda i, *_: i < 4, body,
                                    [0, tf.zeros([2], tf.float64), out])
        return [out.stack(), acc]

    check_grads(fn, [RNG.standard_normal((4, 2))])


def test_cond_returns_tensor_arrays_written_in_either_branch():
    """TF 1.x's cond carries a TensorArray out of a branch as its flow; the gradient reaches
    the value the taken branch wrote."""
    x = tf.placeholder(tf.float64, [2])
    p = tf.placeholder(tf.bool, [])
    ta = tf.TensorArray(tf.float64, size=2).write(1, x * 10.0)
    out = tf.cond(p, lambda: ta.write(0, x * 2.0), lambda: (ta.write(0, -x)))
    assert isinstance(out, tf.TensorArray)
    stacked = out.stack()
    g = tf.gradients(tf.reduce_sum(stacked), x)[0]
    xs = np.array([1.0, 3.0])
    for taken, first, grad in ((True, 2 * xs, 12.0), (False, -xs, 9.0)):
        s, gx = _run([stacked, g], {x: xs, p: taken})
        np.testing.assert_array_equal(s, [first, 10 * xs])
        np.testing.assert_array_equal(gx, [grad, grad])
    with pytest.raises(TypeError, match="different kinds of value: TensorArray and Tensor"):
        tf.cond(p, lambda: ta.write(0, x), lambda: tf.zeros([]))
