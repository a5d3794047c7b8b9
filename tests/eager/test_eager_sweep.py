"""Eager results equal graph results, op by op, across the op library.

One parametrised sweep over the op tables the op tests already keep (array ops, unary and binary
math, comparisons, logic, reductions, activations, functional ops) plus a table of the other
families (nn, convolution and pooling, losses, random with seeds, state, indexing): each case is
built once on placeholders and run in a session, and once on eager tensors; the values must be
equal (to float rounding) and have the same dtype. A last test checks that the sweep ran
kernels of most of the registered op families eagerly.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import dflab as tf
from dflab.eager import eager_context, eager_mode

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "ops"))
import test_array_ops as array_cases  # noqa: E402
import test_functional_ops as functional_cases  # noqa: E402
import test_math_ops as math_cases  # noqa: E402
import test_nn_ops as nn_cases  # noqa: E402

RNG = np.random.default_rng(7)


def _r(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def _cases():
    cases = []
    for name, fn, args, _ in array_cases.FORWARD:
        cases.append((f"array/{name}", fn, args))
    for fn, _, gen, _d in math_cases.UNARY:
        cases.append((f"unary/{fn.__name__}", fn, [gen((2, 3), np.float32)]))
    for fn, _, gen, _d, _i in math_cases.BINARY:
        cases.append((f"binary/{fn.__name__}", fn,
                      [math_cases.rand((2, 3), np.float32), gen((3,), np.float32)]))
    for fn, _ in math_cases.COMPARE:
        cases.append((f"compare/{fn.__name__}", fn, [_r(4), _r(4)]))
    for fn, _ in math_cases.LOGICAL:
        cases.append((f"logical/{fn.__name__}", fn,
                      [RNG.random(5) < 0.5, RNG.random(5) < 0.5]))
    for fn, _, _d in math_cases.REDUCTIONS:
        for axis in (None, 1, [0, 2]):
            cases.append((f"reduce/{fn.__name__}/{axis}",
                          lambda x, fn=fn, axis=axis: fn(x, axis), [_r(2, 3, 4)]))
    for name, fn, _, _ in nn_cases.ACTIVATIONS:
        cases.append((f"activation/{name}", fn, [_r(3, 4)]))
    x = RNG.standard_normal((5, 3))
    for name, fn, _ in functional_cases.FORWARD:
        cases.append((f"functional/{name}", fn, [x]))
    cases += [
        ("nn/softmax", tf.nn.softmax, [_r(3, 5)]),
        ("nn/log_softmax", tf.nn.log_softmax, [_r(3, 5)]),
        ("nn/xent", lambda a, b: tf.nn.softmax_cross_entropy_with_logits_v2(
            labels=tf.nn.softmax(b), logits=a), [_r(3, 5), _r(3, 5)]),
        ("nn/sparse_xent", lambda a: tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.constant([1, 0, 4]), logits=a), [_r(3, 5)]),
        ("nn/bias_add", tf.nn.bias_add, [_r(2, 3, 4), _r(4)]),
        ("nn/bias_add_nchw", lambda a, b: tf.nn.bias_add(a, b, data_format="NCHW"),
         [_r(2, 4, 3, 3), _r(4)]),
        ("nn/l2_loss", tf.nn.l2_loss, [_r(3, 4)]),
        ("nn/moments", lambda a: tf.nn.moments(a, [0]), [_r(5, 3)]),
        ("nn/dropout_keep1", lambda a: tf.nn.dropout(a, keep_prob=1.0), [_r(3, 3)]),
        ("nn/top_k", lambda a: tf.nn.top_k(a, 2), [_r(3, 5)]),
        ("nn/in_top_k", lambda a: tf.nn.in_top_k(a, tf.constant([0, 1, 2]), 2), [_r(3, 5)]),
        ("math/matmul", tf.matmul, [_r(3, 4), _r(4, 2)]),
        ("math/matmul_t", lambda a, b: tf.matmul(a, b, transpose_b=True),
         [_r(3, 4), _r(2, 4)]),
        ("math/batch_matmul", tf.matmul, [_r(2, 3, 4), _r(2, 4, 5)]),
        ("math/add_n", lambda a, b: tf.add_n([a, b, a]), [_r(3), _r(3)]),
        ("math/cast", lambda a: tf.cast(a, tf.int32), [_r(4) * 10]),
        ("math/argmax", lambda a: tf.argmax(a, 1), [_r(3, 5)]),
        ("math/cumsum", lambda a: tf.cumsum(a, 1), [_r(3, 5)]),
        ("math/segment_sum", lambda a: tf.unsorted_segment_sum(a, [0, 2, 0], 3), [_r(3, 2)]),
        ("math/range", lambda a: tf.range(0, 10, 3) + tf.cast(tf.size(a), tf.int32), [_r(2)]),
        ("math/clip", lambda a: tf.clip_by_value(a, -0.5, 0.5), [_r(3, 3)]),
        ("math/clip_norm", lambda a: tf.clip_by_global_norm([a], 1.0)[0], [_r(3, 3)]),
        ("math/einsum", lambda a, b: tf.einsum("ij,jk->ik", a, b), [_r(2, 3), _r(3, 2)]),
        ("conv/conv2d", lambda a, b: tf.nn.conv2d(a, b, [1, 1, 1, 1], "SAME"),
         [_r(2, 5, 5, 3), _r(3, 3, 3, 4)]),
        ("conv/conv2d_strided", lambda a, b: tf.nn.conv2d(a, b, [1, 2, 2, 1], "VALID"),
         [_r(1, 7, 6, 2), _r(3, 2, 2, 3)]),
        ("pool/max", lambda a: tf.nn.max_pool(a, [1, 2, 2, 1], [1, 2, 2, 1], "VALID"),
         [_r(2, 4, 4, 3)]),
        ("pool/avg", lambda a: tf.nn.avg_pool(a, [1, 3, 3, 1], [1, 1, 1, 1], "SAME"),
         [_r(1, 5, 6, 2)]),
        ("array/one_hot", lambda a: tf.one_hot(tf.cast(a, tf.int32), 4), [np.array([0, 3, 1.])]),
        ("array/gather", lambda a: tf.gather(a, [2, 0, 2]), [_r(3, 4)]),
        ("array/gather_nd", lambda a: tf.gather_nd(a, [[0, 1], [2, 3]]), [_r(3, 4)]),
        ("array/concat", lambda a, b: tf.concat([a, b], 0), [_r(2, 3), _r(1, 3)]),
        ("array/stack", lambda a, b: tf.stack([a, b], 1), [_r(2, 3), _r(2, 3)]),
        ("array/unstack", lambda a: tf.unstack(a), [_r(3, 2)]),
        ("array/split", lambda a: tf.split(a, 2, 1), [_r(2, 4)]),
        ("array/where", lambda a, b: tf.where(a > 0, a, b), [_r(3, 3), _r(3, 3)]),
        ("array/slice_ops", lambda a: a[1:, ::2] * 2.0, [_r(3, 4)]),
        ("array/pad", lambda a: tf.pad(a, [[1, 0], [0, 2]]), [_r(2, 2)]),
        ("array/tile", lambda a: tf.tile(a, [2, 1]), [_r(2, 2)]),
        ("array/scatter_nd", lambda a: tf.scatter_nd([[0], [2]], a, [4, 3]), [_r(2, 3)]),
        ("array/boolean_mask", lambda a: tf.boolean_mask(a, a[:, 0] > 0), [_r(5, 2)]),
        ("array/sequence_mask", lambda a: tf.sequence_mask(tf.cast(a, tf.int32), 4),
         [np.array([1., 3., 0.])]),
        ("random/seeded_uniform", lambda a: tf.random_uniform([3], seed=3) * 0 + a, [_r(3)]),
        ("losses/mse", lambda a, b: tf.losses.mean_squared_error(a, b), [_r(4, 2), _r(4, 2)]),
        ("losses/huber", lambda a, b: tf.losses.huber_loss(a, b), [_r(4, 2), _r(4, 2)]),
        ("control/cond", lambda a: tf.cond(tf.reduce_sum(a) > 0, lambda: a * 2.0,
                                           lambda: a - 1.0), [_r(3)]),
        ("control/while", lambda a: tf.while_loop(lambda i, x: i < 4,
                                                  lambda i, x: (i + 1, x * 1.5),
                                                  [tf.constant(0), a])[1], [_r(3)]),
        ("state/variable_read", lambda a: tf.Variable(tf.ones([3])).read_value() + a, [_r(3)]),
    ]
    return cases


CASES = _cases()
_EAGER_TYPES: set = set()


def _flatten(x):
    if isinstance(x, (list, tuple)):
        out = []
        for v in x:
            out.extend(_flatten(v))
        return out
    return [x]


def _graph_values(fn, args):
    g = tf.Graph()
    with g.as_default():
        phs = [tf.placeholder(tf.as_dtype(np.asarray(a).dtype), np.shape(a)) for a in args]
        out = fn(*phs)
        init = tf.global_variables_initializer()
        with tf.Session(graph=g) as sess:
            sess.run(init)
            return sess.run(out, {p: a for p, a in zip(phs, args)})


def _eager_values(fn, args):
    """``fn`` run eagerly twice: heard by a listener (every op on the generic path, its type
    recorded), then unheard (kernels met again take the fast path); both results."""
    ctx = eager_context()
    seen = []
    ctx.op_listeners.append(lambda op_type, *_: seen.append(op_type))
    try:
        with eager_mode():
            heard = fn(*[tf.constant(a) for a in args])
    finally:
        ctx.op_listeners.pop()
    _EAGER_TYPES.update(seen)
    with eager_mode():
        unheard = fn(*[tf.constant(a) for a in args])
    return heard, unheard


@pytest.mark.parametrize("name,fn,args", CASES, ids=[c[0] for c in CASES])
def test_eager_equals_graph(name, fn, args):
    want = _flatten(_graph_values(fn, args))
    heard, unheard = _eager_values(fn, args)
    got = _flatten(heard)
    assert len(got) == len(want)
    fast = _flatten(unheard)
    assert len(fast) == len(want)
    for g, w in zip(got + fast, want + want):
        assert isinstance(g, tf.Tensor) and g.is_eager, f"{name}: {g!r} is not an eager tensor"
        gv, wv = np.asarray(g.numpy()), np.asarray(w)
        assert gv.dtype == wv.dtype, f"{name}: dtype {gv.dtype} != graph {wv.dtype}"
        assert gv.shape == wv.shape, f"{name}: shape {gv.shape} != graph {wv.shape}"
        assert g.shape.as_list() == list(wv.shape)
        if wv.dtype.kind in "fc":
            np.testing.assert_allclose(gv, wv, rtol=2e-5, atol=1e-6, err_msg=name)
        else:
            np.testing.assert_array_equal(gv, wv, err_msg=name)


def test_the_sweep_ran_many_op_types_eagerly():
    """Runs after the sweep (same module): the eager kernels exercised cover the library."""
    if not _EAGER_TYPES:
        for _, fn, args in CASES:
            _eager_values(fn, args)
    assert len(_EAGER_TYPES) >= 100, sorted(_EAGER_TYPES)
    for op_type in ("MatMul", "Conv2D", "MaxPool", "SoftmaxCrossEntropyWithLogits", "GatherV2",
                    "ConcatV2", "StridedSlice", "Sum", "Relu", "Tanh", "Cast", "OneHot",
                    "ReadVariableOp", "AssignVariableOp", "VarHandleOp"):
        assert op_type in _EAGER_TYPES, op_type
