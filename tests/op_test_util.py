"""Helpers that make every op test one line: forward vs NumPy, static shape vs actual shape,
and symbolic gradients vs central finite differences."""

from __future__ import annotations

import numpy as np

import dflab as tf


def evaluate(fn, *args, feed_shapes=None, dtype=None):
    """Build ``fn`` on placeholders for ``args`` (NumPy arrays) and run it.

    Returns (outputs, tensors): numpy results and the symbolic outputs. Placeholders get the
    arrays' full static shapes unless ``feed_shapes`` gives others (e.g. with None dims).
    """
    g = tf.Graph()
    with g.as_default():
        phs = []
        for k, a in enumerate(args):
            a = np.asarray(a)
            shape = a.shape if feed_shapes is None else feed_shapes[k]
            phs.append(tf.placeholder(tf.as_dtype(a.dtype), shape, name=f"arg{k}"))
        out = fn(*phs)
        single = not isinstance(out, (list, tuple))
        outs = [out] if single else list(out)
        with tf.Session(graph=g) as sess:
            vals = sess.run(outs, {p: np.asarray(a) for p, a in zip(phs, args)})
    return (vals[0] if single else vals), (outs[0] if single else outs)


def check_forward(fn, args, ref, rtol=1e-5, atol=1e-6, check_shape=True):
    """``fn`` on dflab vs ``ref`` on NumPy; also the inferred static shape vs the real one."""
    got, t = evaluate(fn, *args)
    want = ref(*[np.asarray(a) for a in args])
    gots, ts, wants = (got, t, want) if isinstance(got, list) else ([got], [t], [want])
    for gv, tv, wv in zip(gots, ts, wants):
        gv, wv = np.asarray(gv), np.asarray(wv)
        assert gv.shape == wv.shape, f"shape {gv.shape} != reference {wv.shape}"
        if wv.dtype.kind in "fc":
            np.testing.assert_allclose(gv, wv, rtol=rtol, atol=atol)
        else:
            np.testing.assert_array_equal(gv, wv)
        if check_shape:
            inferred = tv.shape
            assert inferred.is_compatible_with(gv.shape), f"{inferred} vs actual {gv.shape}"
            assert inferred.is_fully_defined(), f"static shape {inferred} not inferred"
            assert inferred.as_list() == list(gv.shape)
    return got


def check_grads(fn, args, wrt=None, delta=1e-6, rtol=1e-4, atol=1e-6, seed=0):
    """Symbolic gradients of ``sum(fn(*args) * w)`` (w random) vs central differences.

    ``args`` should be float64 arrays for accurate finite differences; ``wrt`` lists the
    argument positions to check (default: all float arguments).
    """
    args = [np.asarray(a) for a in args]
    if wrt is None:
        wrt = [k for k, a in enumerate(args) if a.dtype.kind == "f"]
    rng = np.random.default_rng(seed)
    g = tf.Graph()
    with g.as_default():
        phs = [tf.placeholder(tf.as_dtype(a.dtype), a.shape, name=f"arg{k}")
               for k, a in enumerate(args)]
        y = fn(*phs)
        ys = list(y) if isinstance(y, (list, tuple)) else [y]
        sess = tf.Session(graph=g)
        y_vals = sess.run(ys, dict(zip(phs, args)))
        weights = [rng.standard_normal(np.shape(v)) for v in y_vals]
        wts = [tf.constant(w, dtype=t.dtype) for w, t in zip(weights, ys)]
        total = tf.add_n([tf.reduce_sum(t * w) for t, w in zip(ys, wts)])
        grads = tf.gradients(total, [phs[k] for k in wrt])
        assert all(gr is not None for gr in grads), "gradient unexpectedly None"
        sym = sess.run(grads, dict(zip(phs, args)))

        def objective(vals):
            outs = sess.run(ys, dict(zip(phs, vals)))
            return sum(float(np.sum(np.asarray(o, dtype=np.float64) * w))
                       for o, w in zip(outs, weights))

        for pos, sg in zip(wrt, sym):
            base = [a.copy() for a in args]
            num = np.zeros(args[pos].shape, dtype=np.float64)
            flat = base[pos].reshape(-1)
            for i in range(flat.size):
                orig = flat[i]
                flat[i] = orig + delta
                hi = objective(base)
                flat[i] = orig - delta
                lo = objective(base)
                flat[i] = orig
                num.reshape(-1)[i] = (hi - lo) / (2 * delta)
            np.testing.assert_allclose(_dense_value(sg), num, rtol=rtol,
                                       atol=atol, err_msg=f"gradient wrt argument {pos}")
        sess.close()


def _dense_value(g) -> np.ndarray:
    """A fetched gradient as a dense array (an ``IndexedSlicesValue``'s rows added up)."""
    if hasattr(g, "indices") and hasattr(g, "values"):
        out = np.zeros(tuple(g.dense_shape), dtype=np.float64)
        np.add.at(out, np.asarray(g.indices), np.asarray(g.values, dtype=np.float64))
        return out
    return np.asarray(g, dtype=np.float64)
