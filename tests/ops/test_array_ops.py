"""Array ops: forward values vs NumPy, static shape inference (full and partial), gradients vs
finite differences, ``Tensor.__getitem__`` vs NumPy basic indexing, and errors for bad inputs."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from op_test_util import check_forward, check_grads, evaluate

import dflab as tf
from dflab.eager import eager_mode
from dflab.ops import array_ops, gradients
from dflab.ops.gradients import IndexedSlices

RNG = np.random.default_rng(1234)


def rand(*shape, dtype=np.float64):
    return RNG.standard_normal(shape).astype(dtype)


X = rand(2, 3, 4)
M = rand(3, 4)
V = rand(5)
C = (rand(2, 3) + 1j * rand(2, 3)).astype(np.complex128)
I32 = np.array([[0, 2], [1, 1]], dtype=np.int32)


def _one_hot_ref(idx, depth, on=1.0, off=0.0, axis=-1, dtype=np.float32):
    out = np.where(idx[..., None] == np.arange(depth), on, off).astype(dtype)
    return out if axis == -1 else np.moveaxis(out, -1, axis)


def _np_unique(x):
    _, first = np.unique(x, return_index=True)
    y = x[np.sort(first)]
    return y, np.array([list(y).index(v) for v in x], dtype=np.int32)


# (id, builder on placeholders, args, NumPy reference). Outputs must have fully static shapes.
FORWARD = [
    ("identity", tf.identity, [M], lambda x: x),
    ("reshape", lambda x: tf.reshape(x, [4, -1]), [X], lambda x: x.reshape(4, -1)),
    ("reshape_scalar", lambda x: tf.reshape(x, []), [np.ones((1, 1))],
     lambda x: x.reshape(())),
    ("shape", tf.shape, [X], lambda x: np.array(x.shape, np.int32)),
    ("shape_int64", lambda x: tf.shape(x, out_type=tf.int64), [X],
     lambda x: np.array(x.shape, np.int64)),
    ("shape_n", lambda x, y: tf.shape_n([x, y]), [X, V],
     lambda x, y: [np.array(x.shape, np.int32), np.array(y.shape, np.int32)]),
    ("size", tf.size, [X], lambda x: np.array(x.size, np.int32)),
    ("rank", tf.rank, [X], lambda x: np.array(x.ndim, np.int32)),
    ("expand_dims_0", lambda x: tf.expand_dims(x, 0), [M], lambda x: x[None]),
    ("expand_dims_neg", lambda x: tf.expand_dims(x, -1), [M], lambda x: x[..., None]),
    ("expand_dims_dim", lambda x: tf.expand_dims(x, dim=1), [M], lambda x: x[:, None]),
    ("squeeze_all", tf.squeeze, [rand(1, 3, 1, 2)], np.squeeze),
    ("squeeze_axis", lambda x: tf.squeeze(x, [2]), [rand(1, 3, 1, 2)],
     lambda x: np.squeeze(x, 2)),
    ("squeeze_dims", lambda x: tf.squeeze(x, squeeze_dims=[-2, 0]), [rand(1, 3, 1, 2)],
     lambda x: np.squeeze(x, (0, 2))),
    ("transpose_default", tf.transpose, [X], np.transpose),
    ("transpose_perm", lambda x: tf.transpose(x, [1, 0, 2]), [X],
     lambda x: np.transpose(x, (1, 0, 2))),
    ("transpose_conjugate", lambda x: tf.transpose(x, conjugate=True), [C],
     lambda x: np.conj(x.T)),
    ("matrix_transpose", tf.matrix_transpose, [X], lambda x: np.swapaxes(x, -1, -2)),
    ("invert_permutation", tf.invert_permutation, [np.array([2, 0, 3, 1], np.int32)],
     np.argsort),
    ("concat_0", lambda x, y: tf.concat([x, y], 0), [M, M[:1]],
     lambda x, y: np.concatenate([x, y], 0)),
    ("concat_neg", lambda x, y, z: tf.concat([x, y, z], -1), [M, M[:, :1], M],
     lambda x, y, z: np.concatenate([x, y, z], -1)),
    ("concat_one", lambda x: tf.concat([x], 1), [M], lambda x: x),
    ("stack", lambda x, y: tf.stack([x, y], axis=1), [M, M * 2],
     lambda x, y: np.stack([x, y], 1)),
    ("unstack", lambda x: tf.unstack(x, axis=1), [M], lambda x: list(np.moveaxis(x, 1, 0))),
    ("split_int", lambda x: tf.split(x, 2, axis=2), [X], lambda x: np.split(x, 2, 2)),
    ("split_sizes", lambda x: tf.split(x, [1, -1, 1], axis=-1), [X],
     lambda x: np.split(x, [1, 3], -1)),
    ("split_tensor_sizes", lambda x: tf.split(x, tf.constant([2, 1]), axis=1), [X],
     lambda x: np.split(x, [2], 1)),
    ("slice", lambda x: tf.slice(x, [1, 0, 1], [-1, 2, 3]), [X], lambda x: x[1:, 0:2, 1:4]),
    ("strided_slice", lambda x: tf.strided_slice(x, [0, 1], [0, 3], [1, 1], begin_mask=1,
                                                  end_mask=1), [M], lambda x: x[:, 1:3]),
    ("strided_slice_masks", lambda x: tf.strided_slice(
        x, [0, 1, 0, 2], [0, 2, 0, 0], [1, 1, 1, -1], ellipsis_mask=1, new_axis_mask=4,
        shrink_axis_mask=2, end_mask=8), [X], lambda x: x[..., 1, None, 2::-1]),
    ("gather", lambda p: tf.gather(p, [2, 0, 2]), [M], lambda p: p[[2, 0, 2]]),
    ("gather_axis1", lambda p, i: tf.gather(p, i, axis=1), [X, I32],
     lambda p, i: np.take(p, i, axis=1)),
    ("gather_axis_neg", lambda p: tf.gather(p, 3, axis=-1), [X], lambda p: p[..., 3]),
    ("gather_int64", lambda p: tf.gather(p, np.array([1, 0], np.int64)), [V],
     lambda p: p[[1, 0]]),
    ("gather_nd", lambda p: tf.gather_nd(p, [[0, 1], [1, 2], [0, 1]]), [X],
     lambda p: p[[0, 1, 0], [1, 2, 1]]),
    ("gather_nd_full", lambda p: tf.gather_nd(p, [[[1, 2, 3]], [[0, 0, 0]]]), [X],
     lambda p: p[[[1], [0]], [[2], [0]], [[3], [0]]]),
    ("scatter_nd", lambda u: tf.scatter_nd([[1], [3], [1]], u, [5, 4]), [M],
     lambda u: np.stack([np.zeros(4), u[0] + u[2], np.zeros(4), u[1], np.zeros(4)])),
    ("tile", lambda x: tf.tile(x, [2, 1, 3]), [X], lambda x: np.tile(x, (2, 1, 3))),
    ("tile_zero", lambda x: tf.tile(x, [0, 2]), [M], lambda x: np.tile(x, (0, 2))),
    ("pad", lambda x: tf.pad(x, [[1, 2], [0, 3]]), [M], lambda x: np.pad(x, [(1, 2), (0, 3)])),
    ("pad_value", lambda x: tf.pad(x, [[1, 0], [2, 1]], constant_values=-7.5), [M],
     lambda x: np.pad(x, [(1, 0), (2, 1)], constant_values=-7.5)),
    ("pad_reflect", lambda x: tf.pad(x, [[2, 1], [3, 3]], "REFLECT"), [M],
     lambda x: np.pad(x, [(2, 1), (3, 3)], mode="reflect")),
    ("pad_symmetric", lambda x: tf.pad(x, [[3, 2], [4, 1]], mode="symmetric"), [M],
     lambda x: np.pad(x, [(3, 2), (4, 1)], mode="symmetric")),
    ("one_hot", lambda i: tf.one_hot(i, 4), [np.array([0, 3, -1, 5, 2], np.int32)],
     lambda i: _one_hot_ref(i, 4)),
    ("one_hot_values_axis0", lambda i: tf.one_hot(i, 3, on_value=5, off_value=-1, axis=0),
     [I32], lambda i: _one_hot_ref(i, 3, 5, -1, 0, np.int32)),
    ("one_hot_dtype", lambda i: tf.one_hot(i, 3, dtype=tf.float64, axis=1), [I32],
     lambda i: _one_hot_ref(i, 3, axis=1, dtype=np.float64)),
    ("where_select", lambda c, x, y: tf.where(c, x, y), [M > 0, M, -M],
     lambda c, x, y: np.where(c, x, y)),
    ("where_vector_cond", lambda c, x, y: tf.where(c, x, y),
     [np.array([True, False, True]), M, 2 * M], lambda c, x, y: np.where(c[:, None], x, y)),
    ("where_scalar_cond", lambda c, x, y: tf.where(c, x, y), [np.array(False), M, 2 * M],
     lambda c, x, y: y),
    ("where_v2", lambda c, x, y: tf.where_v2(c, x, y), [V > 0, V[:, None], M[:1, :1]],
     lambda c, x, y: np.where(c, x, y)),
    ("broadcast_to", lambda x: tf.broadcast_to(x, [2, 3, 4]), [M[:1]],
     lambda x: np.broadcast_to(x, (2, 3, 4))),
    ("reverse", lambda x: tf.reverse(x, [0, -1]), [X], lambda x: x[::-1, :, ::-1]),
    ("reverse_none", lambda x: tf.reverse(x, []), [M], lambda x: x),
    ("sequence_mask", lambda n: tf.sequence_mask(n, 4), [np.array([[0, 2], [4, 1]], np.int32)],
     lambda n: np.arange(4) < n[..., None]),
    ("sequence_mask_float", lambda n: tf.sequence_mask(n, 3, dtype=tf.float32),
     [np.array([1, 3], np.int64)], lambda n: (np.arange(3) < n[:, None]).astype(np.float32)),
    # A float maxlen ranges in its own dtype, as TF 1.x's: ceil(2.5) = 3 columns.
    ("sequence_mask_float_maxlen", lambda n: tf.sequence_mask(n, 2.5),
     [np.array([1, 3], np.int32)], lambda n: np.arange(3) < n[:, None]),
    # Float lengths, or a float tensor as maxlen: TF's range in maxlen's dtype, compared with
    # the lengths cast to it (values checked against TF 2.21).
    ("sequence_mask_float_lengths", lambda n: tf.sequence_mask(n, tf.constant(4.0)),
     [np.array([[1.5], [0.2]], np.float32)], lambda n: np.arange(4.0) < n[..., None]),
    # An integer maxlen casts float lengths to its dtype (TF's), in the one op.
    ("sequence_mask_float_lengths_int_maxlen", lambda n: tf.sequence_mask(n, 3),
     [np.array([1.5, 2.0], np.float32)], lambda n: np.arange(3) < n.astype(np.int32)[:, None]),
    ("sequence_mask_float_maxlen_tensor",
     lambda n: tf.sequence_mask(n, tf.constant(2.0), dtype=tf.float32),
     [np.array([1, 3], np.int32)], lambda n: (np.arange(2.0) < n[:, None]).astype(np.float32)),
    ("fill", lambda v: tf.fill([2, 3], v), [np.array(2.5)], lambda v: np.full((2, 3), 2.5)),
    ("zeros_like", tf.zeros_like, [M], np.zeros_like),
    ("ones_like_dtype", lambda x: tf.ones_like(x, dtype=tf.int32), [M],
     lambda x: np.ones(x.shape, np.int32)),
    ("placeholder_with_default", lambda x: tf.placeholder_with_default(x, [3, 4]), [M],
     lambda x: x),
]


@pytest.mark.parametrize("fn,args,ref", [c[1:] for c in FORWARD], ids=[c[0] for c in FORWARD])
def test_forward(fn, args, ref):
    check_forward(fn, args, ref)


# Ops whose output size depends on values: compare values; the static shape must be compatible.
DATA_DEPENDENT = [
    ("where_coords", lambda c: tf.where(c), [X > 0], lambda c: np.argwhere(c), [None, 3]),
    ("boolean_mask", lambda x, m: tf.boolean_mask(x, m), [M, np.array([True, False, True])],
     lambda x, m: x[m], [None, 4]),
    ("boolean_mask_2d", lambda x, m: tf.boolean_mask(x, m), [X, X[:, :, 0] > 0],
     lambda x, m: x[m], [None, 4]),
    ("boolean_mask_axis", lambda x, m: tf.boolean_mask(x, m, axis=1),
     [X, np.array([False, True, True])], lambda x, m: x[:, m], [2, None, 4]),
    ("sequence_mask_nomax", lambda n: tf.sequence_mask(n), [np.array([1, 3, 2], np.int32)],
     lambda n: np.arange(3) < n[:, None], [3, None]),
    ("sequence_mask_float_nomax", lambda n: tf.sequence_mask(n),
     [np.array([1.5, 3.0], np.float32)], lambda n: np.arange(3.0) < n[:, None], [2, None]),
    ("unique", lambda x: tf.unique(x), [np.array([4, 1, 4, 7, 1, 1], np.int32)], _np_unique,
     None),
]


@pytest.mark.parametrize("fn,args,ref,static", [c[1:] for c in DATA_DEPENDENT],
                         ids=[c[0] for c in DATA_DEPENDENT])
def test_forward_data_dependent(fn, args, ref, static):
    got, out = evaluate(fn, *args)
    want = ref(*args)
    gots, outs, wants = (got, out, want) if isinstance(got, list) else ([got], [out], [want])
    for g, t, w in zip(gots, outs, wants):
        np.testing.assert_array_equal(g, w)
        assert g.dtype == np.asarray(w).dtype and t.dtype.as_numpy_dtype == g.dtype.type
        assert t.shape.is_compatible_with(g.shape)
    if static is not None:
        assert outs[0].shape.as_list() == static


def test_unique_structure():
    out = tf.unique(tf.constant([3, 3, 1]), out_idx=tf.int64)
    assert out.y.op.type == "Unique" and out.idx.dtype is tf.int64
    y, idx = out
    assert y.shape.as_list() == [None] and idx.shape.as_list() == [3]


# --- static shapes with unknown dims -------------------------------------------------------
def _ph(*shape, dtype=tf.float32):
    return tf.placeholder(dtype, list(shape))


PARTIAL = [
    ("reshape_minus1", lambda: tf.reshape(_ph(None, 3), [-1, 3]), [None, 3]),
    ("reshape_known_leading", lambda: tf.reshape(_ph(None, 3), [3, -1]), [3, None]),
    ("reshape_flatten", lambda: tf.reshape(_ph(2, None), [-1]), [None]),
    ("reshape_from_count", lambda: tf.reshape(_ph(2, 3), tf.stack([2, _ph(dtype=tf.int32)])),
     [2, 3]),
    ("reshape_unknown_rank", lambda: tf.reshape(tf.placeholder(tf.float32), [2, -1, 4]),
     [2, None, 4]),
    ("concat_rows", lambda: tf.concat([_ph(None, 3), _ph(2, 3)], 0), [None, 3]),
    ("concat_cols", lambda: tf.concat([_ph(None, 3), _ph(2, None)], 1), [2, None]),
    ("concat_sum", lambda: tf.concat([_ph(None, 3), _ph(2, 4)], -1), [2, 7]),
    ("concat_unknown_rank", lambda: tf.concat([tf.placeholder(tf.float32), _ph(2, 3)], 1),
     [2, None]),
    ("expand_dims", lambda: tf.expand_dims(_ph(None, 3), 1), [None, 1, 3]),
    ("squeeze_axis", lambda: tf.squeeze(_ph(None, 1, 3), [1]), [None, 3]),
    ("squeeze_unknown", lambda: tf.squeeze(_ph(None, 1, 3)), None),
    ("transpose", lambda: tf.transpose(_ph(None, 3, 4), [2, 0, 1]), [4, None, 3]),
    ("transpose_default", lambda: tf.transpose(_ph(None, 3)), [3, None]),
    ("split", lambda: tf.split(_ph(None, 4), 2, axis=1)[1], [None, 2]),
    ("split_v", lambda: tf.split(_ph(6, None), [1, -1], axis=0)[1], [5, None]),
    ("slice", lambda: tf.slice(_ph(None, 5), [0, 1], [-1, 2]), [None, 2]),
    ("getitem_cols", lambda: _ph(None, 5)[:, 1:3], [None, 2]),
    ("getitem_row", lambda: _ph(None, 5)[0], [5]),
    ("getitem_newaxis", lambda: _ph(None, 5)[..., None], [None, 5, 1]),
    ("getitem_tensor_index", lambda: _ph(4, 5)[_ph(dtype=tf.int32)], [5]),
    ("getitem_tensor_slice", lambda: _ph(4, 5)[_ph(dtype=tf.int32):], [None, 5]),
    ("getitem_tensor_col", lambda: _ph(4, 5)[1:3, _ph(dtype=tf.int64)], [2]),
    ("gather", lambda: tf.gather(_ph(None, 3), _ph(4, dtype=tf.int32)), [4, 3]),
    ("gather_axis1", lambda: tf.gather(_ph(None, 3), _ph(4, dtype=tf.int32), axis=1),
     [None, 4]),
    ("gather_nd", lambda: tf.gather_nd(_ph(None, 4, 5), _ph(7, 2, dtype=tf.int32)), [7, 5]),
    ("tile", lambda: tf.tile(_ph(None, 3), [2, 2]), [None, 6]),
    ("tile_zero", lambda: tf.tile(_ph(None, 3), [0, 1]), [0, 3]),
    ("pad", lambda: tf.pad(_ph(None, 3), [[1, 1], [2, 2]]), [None, 7]),
    ("one_hot", lambda: tf.one_hot(_ph(None, dtype=tf.int32), 5), [None, 5]),
    ("where_select", lambda: tf.where(_ph(None, 3, dtype=tf.bool), _ph(None, 3), _ph(2, 3)),
     [2, 3]),
    ("where_coords", lambda: tf.where(_ph(None, 3, dtype=tf.bool)), [None, 2]),
    ("broadcast_to", lambda: tf.broadcast_to(_ph(1, 3), tf.stack([_ph(dtype=tf.int32), 3])),
     [None, 3]),
    ("boolean_mask", lambda: tf.boolean_mask(_ph(None, 3), _ph(None, dtype=tf.bool)),
     [None, 3]),
    ("sequence_mask", lambda: tf.sequence_mask(_ph(None, dtype=tf.int32), 5), [None, 5]),
    ("stack", lambda: tf.stack([_ph(None, 3), _ph(2, None)]), [2, 2, 3]),
    ("reverse", lambda: tf.reverse(_ph(None, 3), [1]), [None, 3]),
    ("shape_n", lambda: tf.shape_n([_ph(None, 3), _ph(2)])[0], [2]),
    ("matrix_transpose", lambda: tf.matrix_transpose(_ph(None, 2, 3)), [None, 3, 2]),
]


@pytest.mark.parametrize("build,expected", [c[1:] for c in PARTIAL], ids=[c[0] for c in PARTIAL])
def test_partial_static_shape(build, expected):
    out = build()
    if expected is None:
        assert out.shape.ndims is None
    else:
        assert out.shape.as_list() == expected


def test_shape_of_known_shape_is_constant():
    # TF1 folds shape/size/rank of fully known shapes into constants.
    x = _ph(2, 3)
    assert tf.shape(x).op.type == "Const" and tf.size(x).op.type == "Const"
    assert tf.rank(x).op.type == "Const"
    y = _ph(None, 3)
    assert tf.shape(y).op.type == "Shape" and tf.size(y).op.type == "Size"
    assert tf.rank(tf.placeholder(tf.float32)).op.type == "Rank"
    with tf.Session() as s:
        vals = s.run([tf.shape(y), tf.size(y), tf.rank(tf.placeholder_with_default(
            np.zeros((1, 2, 3)), None))], {y: np.zeros((5, 3))})
    assert vals[0].tolist() == [5, 3] and int(vals[1]) == 15 and int(vals[2]) == 3


def test_op_types_and_names():
    x = _ph(4, 6)
    assert tf.concat([x, x], 1).op.type == "ConcatV2"
    assert tf.split(x, 2, 1)[0].op.type == "Split"
    assert tf.split(x, [2, 4], 1)[0].op.type == "SplitV"
    s = x[1:]
    assert s.op.type == "StridedSlice" and s.op.name == "strided_slice"
    assert x[0].op.name == "strided_slice_1"
    assert tf.gather(x, [0]).op.type == "GatherV2"
    assert tf.pad(x, [[1, 1], [1, 1]], constant_values=1.0).op.type == "PadV2"
    assert tf.pad(x, [[1, 1], [1, 1]], "REFLECT").op.type == "MirrorPad"
    assert tf.where(x > 0).op.type == "Where" and tf.where(x > 0, x, x).op.type == "Select"
    assert tf.transpose(x).op.type == "Transpose"


# --- gradients ---------------------------------------------------------------------------------
def _tensor_index_grad(x):
    i = tf.constant(1)
    return x[i, :, i + 1]


GRADS = [
    ("identity", tf.identity, [M]),
    ("reshape", lambda x: tf.reshape(x, [4, -1]), [X]),
    ("expand_dims", lambda x: tf.expand_dims(x, 1), [M]),
    ("squeeze", lambda x: tf.squeeze(x, [0]), [rand(1, 3, 2)]),
    ("transpose", lambda x: tf.transpose(x, [2, 0, 1]), [X]),
    ("transpose_default", tf.transpose, [X]),
    ("matrix_transpose", tf.matrix_transpose, [X]),
    ("concat", lambda x, y: tf.concat([x, y], 0), [M, M[:2]]),
    ("concat_neg_axis", lambda x, y, z: tf.concat([x, y, z], -1), [M, M[:, :1], M]),
    ("stack", lambda x, y: tf.stack([x, y], 1), [M, M]),
    ("unstack", lambda x: tf.unstack(x, axis=1), [M]),
    ("unstack_partial", lambda x: tf.unstack(x)[1], [M]),
    ("split", lambda x: tf.split(x, 2, axis=2), [X]),
    ("split_partial_use", lambda x: tf.split(x, 3, axis=1)[1], [X]),
    ("split_sizes", lambda x: tf.split(x, [1, -1], axis=1), [X]),
    ("slice", lambda x: tf.slice(x, [1, 0, 1], [-1, 2, 2]), [X]),
    ("strided_slice", lambda x: tf.strided_slice(x, [0, 1], [0, 3], [1, 1], begin_mask=1,
                                                  end_mask=1), [M]),
    ("getitem_neg_step", lambda x: x[::-2, 1], [M]),
    ("getitem_mixed", lambda x: x[..., None, 1:3], [X]),
    ("getitem_tensor", _tensor_index_grad, [X]),
    # Along axis 0 the gradient is an IndexedSlices, which a session cannot fetch yet: the
    # Reshape in front densifies it (test_gather_gradient_is_indexed_slices checks it as is).
    ("gather", lambda p: tf.gather(tf.reshape(p, [3, 4]), [2, 0, 2]), [M]),
    ("gather_2d_indices", lambda p: tf.gather(tf.reshape(p, [3, 4]), [[1, 1], [0, 2]]), [M]),
    ("gather_axis1", lambda p: tf.gather(p, [[2, 0], [2, 2]], axis=1), [X]),
    ("gather_axis2", lambda p: tf.gather(p, [1, 1, 0], axis=-1), [X]),
    ("gather_nd", lambda p: tf.gather_nd(p, [[0, 1], [1, 2], [0, 1]]), [X]),
    ("scatter_nd", lambda u: tf.scatter_nd([[1], [3], [1]], u, [5, 4]), [M]),
    ("tile", lambda x: tf.tile(x, [2, 1, 3]), [X]),
    ("pad", lambda x: tf.pad(x, [[1, 2], [0, 3]]), [M]),
    ("pad_value", lambda x: tf.pad(x, [[1, 0], [2, 1]], constant_values=3.0), [M]),
    ("pad_reflect", lambda x: tf.pad(x, [[2, 1], [3, 3]], "REFLECT"), [M]),
    ("pad_symmetric", lambda x: tf.pad(x, [[3, 2], [4, 1]], "SYMMETRIC"), [M]),
    ("where", lambda x, y: tf.where(tf.constant(M > 0), x, y), [M, 2 * M]),
    ("where_vector", lambda x, y: tf.where(tf.constant([True, False, True]), x, y), [M, M]),
    ("where_scalar", lambda x, y: tf.where(tf.constant(True), x, y), [M, M]),
    ("where_v2", lambda x, y: tf.where_v2(tf.constant(V > 0)[:, None], x, y), [M[0], V[:, None]]),
    ("broadcast_to", lambda x: tf.broadcast_to(x, [2, 3, 4]), [M[:, :1]]),
    ("reverse", lambda x: tf.reverse(x, [0, 2]), [X]),
    ("fill", lambda v: tf.fill([2, 3], v), [np.array(1.5)]),
    ("boolean_mask", lambda x: tf.boolean_mask(x, tf.constant([True, False, True])), [M]),
    ("boolean_mask_2d", lambda x: tf.boolean_mask(x, tf.constant(M > 0)), [M]),
    ("boolean_mask_axis", lambda x: tf.boolean_mask(x, tf.constant([False, True, True, True]),
                                                    axis=2), [X]),
    ("strided_slice_grad_grad",
     lambda x, dy: tf.gradients(x[1:, ::-2], x, grad_ys=dy)[0], [M, rand(2, 2)]),
    ("mirror_pad_grad_grad",
     lambda x, dy: tf.gradients(tf.pad(x, [[1, 1], [0, 2]], "REFLECT"), x, grad_ys=dy)[0],
     [M, rand(5, 6)]),
]


@pytest.mark.parametrize("case,fn,args", GRADS, ids=[c[0] for c in GRADS])
def test_gradients(case, fn, args):
    # A gradient of a gradient is linear in ``dy`` alone: check that argument only.
    check_grads(fn, args, wrt=[1] if case.endswith("grad_grad") else None)


def _as_list(v):
    return v if isinstance(v, list) else [v]


def _grad_values(fn, args, shapes):
    """d sum(fn(args) * w) / d args, built on placeholders of ``shapes`` (may hold None)."""
    g = tf.Graph()
    with g.as_default():
        phs = [tf.placeholder(tf.float64, s) for s in shapes]
        ys = _as_list(fn(*phs))
        values = _as_list(evaluate(fn, *args)[0])
        total = tf.add_n([tf.reduce_sum(tf.reshape(y, [-1]) * tf.constant(
            np.linspace(-1.0, 2.0, num=np.size(v)))) for y, v in zip(ys, values)])
        grads = tf.gradients(total, phs)
        grads = [gradients.as_dense(gr) if isinstance(gr, IndexedSlices)
                 else gr for gr in grads]
        with tf.Session(graph=g) as s:
            return s.run(grads, dict(zip(phs, args)))


DYNAMIC = [
    ("tile", lambda x: tf.tile(x, [2, 3]), [M]),
    ("slice", lambda x: tf.slice(x, [1, 1], [-1, 2]), [M]),
    ("pad", lambda x: tf.pad(x, [[1, 0], [2, 2]]), [M]),
    ("concat", lambda x, y: tf.concat([x, y], 1), [M, M]),
    ("gather_axis1", lambda x: tf.gather(x, [2, 2, 0], axis=1), [M]),
    ("gather_axis0", lambda x: tf.gather(x, [2, 2, 0]), [M]),
    ("gather_axis_neg", lambda x: tf.gather(x, [[1], [0]], axis=-2), [X]),
    ("gather_tensor_axis", lambda x: tf.gather(x, [3, 1], axis=tf.constant(2) * 1), [X]),
    ("broadcast_to", lambda x: tf.broadcast_to(x, [2, 3, 4]), [M[:1]]),
    ("boolean_mask", lambda x: tf.boolean_mask(x, tf.constant(M > 0)), [M]),
    ("getitem", lambda x: x[1:, ::-1], [M]),
    ("reshape", lambda x: tf.reshape(x, [-1]), [M]),
    ("transpose", tf.transpose, [M]),
    ("transpose_perm", lambda x: tf.transpose(x, [1, 2, 0]), [X]),
    ("concat_tensor_axis", lambda x, y: tf.concat([x, y], tf.constant(-1) * 1), [M, M]),
    ("split", lambda x: tf.split(x, [1, 3], axis=1), [M]),
    ("strided_slice_tensor", lambda x: x[tf.constant(1):, tf.constant(2)], [M]),
    ("expand_squeeze", lambda x: tf.squeeze(tf.expand_dims(x, 1), [1]), [M]),
    ("pad_reflect", lambda x: tf.pad(x, [[1, 0], [2, 2]], "REFLECT"), [M]),
    ("gather_nd", lambda x: tf.gather_nd(x, [[1, 2], [0, 0], [1, 2]]), [M]),
    ("stack", lambda x: tf.stack([x, x], axis=1), [M]),
    ("where", lambda x: tf.where(tf.constant(M > 0), x, x * x), [M]),
    ("reverse", lambda x: tf.reverse(x, [1]), [M]),
]


@pytest.mark.parametrize("unknown_rank", [False, True], ids=["unknown_dims", "unknown_rank"])
@pytest.mark.parametrize("fn,args", [c[1:] for c in DYNAMIC], ids=[c[0] for c in DYNAMIC])
def test_gradients_with_unknown_shapes(fn, args, unknown_rank):
    """The run-time-shape gradient paths give what the static ones give."""
    static = _grad_values(fn, args, [a.shape for a in args])
    dynamic = _grad_values(fn, args, [None if unknown_rank else [None] * a.ndim for a in args])
    for s, d in zip(static, dynamic):
        np.testing.assert_allclose(np.asarray(d), np.asarray(s))


def test_gather_gradient_is_indexed_slices():
    p = tf.placeholder(tf.float64, [4, 3])
    idx = tf.constant([[3, 0], [3, 1]])
    w = tf.constant(rand(2, 2, 3))
    (g,) = tf.gradients(tf.reduce_sum(tf.gather(p, idx) * w), [p])
    assert isinstance(g, IndexedSlices)
    assert g.values.shape.as_list() == [4, 3] and g.indices.shape.as_list() == [4]
    assert g.shape.as_list() == [4, 3]
    dense = gradients.as_dense(g)
    want = np.zeros((4, 3))
    np.add.at(want, np.array([3, 0, 3, 1]), w.op.get_attr("value").reshape(4, 3))
    with tf.Session() as s:
        values, indices, shape_v, dense_v = s.run([g.values, g.indices, g.dense_shape, dense],
                                                  {p: rand(4, 3)})
    assert indices.tolist() == [3, 0, 3, 1] and shape_v.tolist() == [4, 3]
    np.testing.assert_allclose(values, w.op.get_attr("value").reshape(4, 3))
    np.testing.assert_allclose(dense_v, want)


def test_gather_gradient_through_reshape_is_dense():
    # boolean_mask = reshape + gather: the IndexedSlices must densify inside Reshape's gradient.
    x = tf.placeholder(tf.float64, [2, 4])
    (g,) = tf.gradients(tf.reduce_sum(tf.boolean_mask(x, tf.constant(M[:2] > 0))), [x])
    assert isinstance(g, tf.Tensor)
    with tf.Session() as s:
        np.testing.assert_array_equal(s.run(g, {x: M[:2]}), (M[:2] > 0).astype(float))


# --- __getitem__ vs NumPy ------------------------------------------------------------------------
KEYS = [
    1, -1, (1, 2), (slice(None), 2), slice(1, 3), slice(None, None, -1), slice(3, 0, -2),
    (Ellipsis, 1), (1, Ellipsis), (None, 1), (Ellipsis, None), (slice(None), None,
                                                                slice(1, None, 2), -1),
    slice(-3, -1), slice(10, None), slice(-100, 100), Ellipsis, (), (0, 0, 0), (-1, -2, -3),
    (None, Ellipsis, None), (slice(None, None, -2), Ellipsis, slice(None, 2)),
    (-1, slice(None, None, -1), None, 3), np.int64(2), (slice(None, -1), 1, slice(None, None, 2)),
    (slice(2, None, -1), slice(-1, None, -3)), (Ellipsis, slice(4, 1, -1)),
    (slice(None), slice(None), slice(None), None),
]
XI = np.arange(4 * 5 * 6, dtype=np.float64).reshape(4, 5, 6)


@pytest.mark.parametrize("key", KEYS, ids=[repr(k) for k in KEYS])
def test_getitem_matches_numpy(key):
    check_forward(lambda x: x[key], [XI], lambda x: x[key])


@pytest.mark.parametrize("key", KEYS[::3], ids=[repr(k) for k in KEYS[::3]])
def test_getitem_gradient(key):
    check_grads(lambda x: x[key], [rand(3, 4, 5)[:3, :4, :5]])


def test_getitem_tensor_indices():
    x = tf.placeholder(tf.float64, [4, 5, 6])
    i = tf.placeholder(tf.int32, [])
    j = tf.placeholder(tf.int64, [])
    outs = [x[i], x[i:, j], x[:i, ::-1, -1], x[j, i:i + 2], x[..., i]]
    with tf.Session() as s:
        vals = s.run(outs, {x: XI, i: 1, j: 3})
    for v, w in zip(vals, [XI[1], XI[1:, 3], XI[:1, ::-1, -1], XI[3, 1:3], XI[..., 1]]):
        np.testing.assert_array_equal(v, w)
    assert outs[0].shape.as_list() == [5, 6]
    assert outs[1].shape.as_list() == [None, 6]
    with tf.Session() as s:
        np.testing.assert_array_equal(s.run(x[i], {x: XI, i: -2}), XI[-2])


@pytest.mark.parametrize("key", [[1, 2], 1.5, (0, [1]), np.array([1, 2]), "a"])
def test_getitem_unsupported_keys(key):
    x = tf.placeholder(tf.float32, [4, 5])
    with pytest.raises(TypeError):
        x[key]


def test_getitem_unsupported_tensor_keys():
    x = tf.placeholder(tf.float32, [4, 5])
    with pytest.raises(TypeError):
        x[tf.constant(1.0)]
    with pytest.raises(TypeError):
        x[tf.constant([0, 1])]
    with pytest.raises(TypeError):
        x[tf.constant(True)]


# --- bad inputs ----------------------------------------------------------------------------------
BUILD_ERRORS = [
    ("reshape_size", ValueError, lambda: tf.reshape(_ph(2, 3), [4, 2])),
    ("reshape_minus1_divisible", ValueError, lambda: tf.reshape(_ph(2, 3), [4, -1])),
    ("reshape_two_unknown", ValueError, lambda: tf.reshape(_ph(2, 3), [-1, -1])),
    ("reshape_partial_indivisible", ValueError, lambda: tf.reshape(_ph(None, 4), [3, 3])),
    ("reshape_float_shape", TypeError, lambda: tf.reshape(_ph(2, 3), tf.constant([6.0]))),
    ("concat_ranks", ValueError, lambda: tf.concat([_ph(2, 3), _ph(2, 3, 1)], 0)),
    ("concat_dims", ValueError, lambda: tf.concat([_ph(2, 3), _ph(3, 3)], 1)),
    ("concat_axis", ValueError, lambda: tf.concat([_ph(2, 3), _ph(2, 3)], 2)),
    ("concat_dtypes", TypeError, lambda: tf.concat([_ph(2), _ph(2, dtype=tf.int32)], 0)),
    ("concat_scalars", ValueError, lambda: tf.concat([_ph(), _ph()], 0)),
    ("transpose_perm", ValueError, lambda: tf.transpose(_ph(2, 3), [0, 0])),
    ("transpose_perm_len", ValueError, lambda: tf.transpose(_ph(2, 3), [0, 1, 2])),
    ("split_uneven", ValueError, lambda: tf.split(_ph(5, 2), 2)),
    ("split_sizes_sum", ValueError, lambda: tf.split(_ph(5, 2), [2, 2])),
    ("split_sizes_num", ValueError, lambda: tf.split(_ph(5, 2), _ph(None, dtype=tf.int32))),
    ("squeeze_not_one", ValueError, lambda: tf.squeeze(_ph(2, 3), [0])),
    ("expand_dims_axis", ValueError, lambda: tf.expand_dims(_ph(2, 3), 3)),
    ("expand_dims_both", ValueError, lambda: tf.expand_dims(_ph(2), 0, dim=0)),
    ("expand_dims_none", ValueError, lambda: tf.expand_dims(_ph(2))),
    ("slice_size", ValueError, lambda: tf.slice(_ph(4, 3), [2, 0], [3, 1])),
    ("slice_rank", ValueError, lambda: tf.slice(_ph(4, 3), [0], [1])),
    ("getitem_too_many", ValueError, lambda: _ph(4, 3)[0, 0, 0]),
    ("getitem_out_of_range", ValueError, lambda: _ph(4, 3)[:, 3]),
    ("getitem_zero_step", ValueError, lambda: _ph(4, 3)[::0]),
    ("getitem_two_ellipses", ValueError, lambda: _ph(4, 3)[..., 0, ...]),
    ("gather_axis", ValueError, lambda: tf.gather(_ph(4, 3), [0], axis=2)),
    ("gather_float_indices", TypeError, lambda: tf.gather(_ph(4, 3), tf.constant([0.0]))),
    ("gather_nd_depth", ValueError, lambda: tf.gather_nd(_ph(4, 3), [[0, 0, 0]])),
    ("scatter_nd_updates", ValueError, lambda: tf.scatter_nd([[0], [1]], _ph(3, 2), [4, 2])),
    ("tile_len", ValueError, lambda: tf.tile(_ph(4, 3), [2])),
    ("pad_rows", ValueError, lambda: tf.pad(_ph(4, 3), [[1, 1]])),
    ("pad_negative", ValueError, lambda: tf.pad(_ph(4, 3), [[1, -1], [0, 0]])),
    ("pad_reflect_too_big", ValueError, lambda: tf.pad(_ph(4, 3), [[0, 0], [3, 0]], "REFLECT")),
    ("pad_symmetric_too_big", ValueError, lambda: tf.pad(_ph(4, 3), [[5, 0], [0, 0]],
                                                         "SYMMETRIC")),
    ("pad_mode", ValueError, lambda: tf.pad(_ph(4, 3), [[1, 1], [1, 1]], "WRAP")),
    ("one_hot_dtype", TypeError, lambda: tf.one_hot([1], 3, on_value=1.0, dtype=tf.int32)),
    ("one_hot_on_off", TypeError, lambda: tf.one_hot([1], 3, on_value=1.0, off_value=0)),
    ("one_hot_axis", ValueError, lambda: tf.one_hot(_ph(2, dtype=tf.int32), 3, axis=3)),
    ("where_only_x", ValueError, lambda: tf.where(_ph(2, dtype=tf.bool), _ph(2))),
    ("where_cond_shape", ValueError, lambda: tf.where(_ph(3, 2, dtype=tf.bool), _ph(2, 3),
                                                      _ph(2, 3))),
    ("where_xy_shape", ValueError, lambda: tf.where(_ph(2, dtype=tf.bool), _ph(2), _ph(3))),
    ("where_dtypes", TypeError, lambda: tf.where(_ph(2, dtype=tf.bool), _ph(2),
                                                 _ph(2, dtype=tf.int32))),
    ("where_cond_dtype", TypeError, lambda: tf.where(_ph(2), _ph(2), _ph(2))),
    ("broadcast_to", ValueError, lambda: tf.broadcast_to(_ph(2, 3), [2, 4])),
    ("reverse_twice", ValueError, lambda: tf.reverse(_ph(2, 3), [1, -1])),
    ("boolean_mask_scalar", ValueError, lambda: tf.boolean_mask(_ph(2), True)),
    ("boolean_mask_shape", ValueError, lambda: tf.boolean_mask(_ph(2, 3), _ph(3, dtype=tf.bool))),
    ("unique_rank", ValueError, lambda: tf.unique(_ph(2, 2))),
    ("stack_shapes", ValueError, lambda: tf.stack([_ph(2), _ph(3)])),
    ("unstack_num", ValueError, lambda: tf.unstack(_ph(None, 2))),
]


@pytest.mark.parametrize("err,build", [c[1:] for c in BUILD_ERRORS],
                         ids=[c[0] for c in BUILD_ERRORS])
def test_build_errors(err, build):
    with pytest.raises(err):
        build()


RUN_ERRORS = [
    ("reshape", lambda x: tf.reshape(x, [2, 3]), np.zeros(5), [None]),
    ("reshape_minus1", lambda x: tf.reshape(x, [4, -1]), np.zeros(6), [None]),
    ("reshape_runtime_shape", lambda x: tf.reshape(
        x, tf.placeholder_with_default(np.array([4, 2], np.int32), [None])), np.zeros(6), [6]),
    ("gather_index", lambda x: tf.gather(x, [0, 7, 1]), np.zeros(5), [None]),
    ("gather_negative", lambda x: tf.gather(x, [[0], [-1]], axis=1), np.zeros((2, 3)),
     [None, None]),
    ("gather_nd_index", lambda x: tf.gather_nd(x, [[0, 0], [2, 0]]), np.zeros((2, 3)),
     [None, None]),
    ("scatter_nd_index", lambda u: tf.scatter_nd([[0], [4]], u, [4]), np.zeros(2), [None]),
    ("getitem_index", lambda x: x[3], np.zeros(3), [None]),
    ("slice", lambda x: tf.slice(x, [1], [4]), np.zeros(3), [None]),
    ("squeeze", lambda x: tf.squeeze(x, [0]), np.zeros((2, 1)), [None, 1]),
    ("concat", lambda x: tf.concat([x, tf.zeros([2, 3], tf.float64)], 0), np.zeros((2, 4)),
     [None, None]),
    ("split", lambda x: tf.split(x, 2)[0], np.zeros(3), [None]),
    ("where_cond", lambda x: tf.where(x[:2] > 0, x, x), np.zeros(3), [None]),
    ("pad_reflect", lambda x: tf.pad(x, [[3, 0]], "REFLECT"), np.zeros(3), [None]),
    ("broadcast_to", lambda x: tf.broadcast_to(x, [2, 2]), np.zeros(3), [None]),
    ("transpose", lambda x: tf.transpose(x, [1, 0]), np.zeros(3), None),
]


@pytest.mark.parametrize("fn,arg,shape", [c[1:] for c in RUN_ERRORS],
                         ids=[c[0] for c in RUN_ERRORS])
def test_run_time_errors(fn, arg, shape):
    x = tf.placeholder(tf.float64, shape)
    y = fn(x)
    with tf.Session() as s:
        with pytest.raises(tf.errors.InvalidArgumentError) as info:
            s.run(y, {x: arg})
    assert info.value.op is not None


def test_gather_error_names_the_op():
    x = tf.placeholder(tf.float32, [None])
    y = tf.gather(x, tf.constant([0, 9]), name="lookup")
    with tf.Session() as s:
        with pytest.raises(tf.errors.InvalidArgumentError) as info:
            s.run(y, {x: np.zeros(4, np.float32)})
    assert info.value.op is y.op
    assert "lookup" in str(info.value) and "indices[1] = 9 is not in [0, 4)" in str(info.value)


# --- reshape: inferred shape vs NumPy, property-based ---------------------------------------
def _factor(n):
    out, p = [], 2
    while n > 1:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    return out


@st.composite
def _reshape_case(draw):
    shape = draw(st.lists(st.integers(1, 5), min_size=0, max_size=4))
    n = int(np.prod(shape)) if shape else 1
    factors = draw(st.permutations(_factor(n)))
    rank_out = draw(st.integers(1, 4))
    target = [1] * rank_out
    for f in factors:
        target[draw(st.integers(0, rank_out - 1))] *= f
    if draw(st.booleans()):
        target[draw(st.integers(0, rank_out - 1))] = -1
    hidden = draw(st.lists(st.booleans(), min_size=len(shape), max_size=len(shape)))
    return shape, target, hidden


@settings(max_examples=60, deadline=None)
@given(_reshape_case())
def test_reshape_inference_matches_numpy(case):
    shape, target, hidden = case
    want = np.empty(shape).reshape(target).shape
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, shape)
        y = tf.reshape(x, target)
        assert tuple(y.shape.as_list()) == want
        # With some input dims unknown the inference may know less, never something else.
        partial = tf.placeholder(tf.float32, [None if h else d for h, d in zip(hidden, shape)])
        z = tf.reshape(partial, target)
        assert z.shape.is_compatible_with(want)
        if -1 not in target:
            assert tuple(z.shape.as_list()) == want
        with tf.Session(graph=g) as s:
            assert s.run(z, {partial: np.zeros(shape, np.float32)}).shape == want


def test_exports():
    for name in array_ops.__all__:
        assert getattr(tf, name) is getattr(array_ops, name), name
    assert tf.newaxis is None


def test_gather_gradient_densifies_via_gradients_module():
    # Last on purpose: densify uses math_ops.unsorted_segment_sum (another op family).
    p = tf.placeholder(tf.float64, [4, 3])
    (g,) = tf.gradients(tf.reduce_sum(tf.gather(p, [1, 1, 3])), [p])
    dense = tf.convert_to_tensor(g)
    with tf.Session() as s:
        np.testing.assert_array_equal(s.run(dense, {p: rand(4, 3)}),
                                      np.array([[0.0] * 3, [2.0] * 3, [0.0] * 3, [1.0] * 3]))


def test_sequence_mask_without_a_dtype_is_boolean():
    for lengths in ([1, 2], [1.5, 2.0]):  # TF 2.21: the comparison's own dtype
        assert tf.sequence_mask(lengths, dtype=None).dtype == tf.bool


def test_ops_of_a_variable_number_of_outputs_give_one_output_as_itself():
    # With one output, a kernel's 1-tuple had been taken for the value: tf.unstack of a
    # one-row matrix gave the matrix, tf.split(x, 1) a tensor of one more dimension.
    def built():
        x = tf.constant([[1.0, 2.0]])
        return {"unstack": tf.unstack(x), "unstack_axis1": tf.unstack(tf.transpose(x), axis=1),
                "split": tf.split(x, 1), "split_v": tf.split(x, [2], axis=1),
                "dynamic_partition": tf.dynamic_partition(x[0], [0, 0], 1),
                "identity_n": tf.identity_n([x]), "shape_n": tf.shape_n([x])}

    want = {"unstack": [[1.0, 2.0]], "unstack_axis1": [[1.0, 2.0]], "split": [[[1.0, 2.0]]],
            "split_v": [[[1.0, 2.0]]], "dynamic_partition": [[1.0, 2.0]],
            "identity_n": [[[1.0, 2.0]]], "shape_n": [[1, 2]]}
    with tf.Graph().as_default(), tf.Session() as sess:
        got = sess.run(built())
    for name, values in want.items():
        assert [np.asarray(v).tolist() for v in got[name]] == values, name
    with eager_mode():
        got = built()
        for name, values in want.items():
            assert [v.numpy().tolist() for v in got[name]] == values, name
