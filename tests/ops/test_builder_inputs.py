"""A builder's data argument given as a NumPy array or a list keeps its own dtype beside the
op's index arguments (a shape, multiples, axes, begin/size, ids), in graphs and eagerly; a
value beside a tensor of its own kind still takes that tensor's dtype (``x + [1, 2]``), and so
does a NumPy value beside an int tensor of a shared type (TF casts it).

TF converts each input by its own type attribute: ``Reshape``'s ``T`` and ``Tshape`` differ,
``AddV2``'s ``x`` and ``y`` share one. dflab's builders had converted the data argument to the
index's int32: a float array of integral values came back as int32, and any other float
array was refused."""

from __future__ import annotations

import numpy as np
import pytest

import dflab as tf
from dflab.eager import eager_mode

F = np.array([[1.5, 2.5], [3.5, 4.5]], np.float32)
ONES = np.ones((2, 2), np.float32)  # integral values: were silently made int32

# (name, builder of the value, NumPy of the float32 array)
CASES = [
    ("reshape", lambda v: tf.reshape(v, [4]), lambda a: a.reshape(4)),
    ("tile", lambda v: tf.tile(v, [1, 2]), lambda a: np.tile(a, [1, 2])),
    ("expand_dims", lambda v: tf.expand_dims(v, 0), lambda a: a[None]),
    ("reverse", lambda v: tf.reverse(v, [0]), lambda a: a[::-1]),
    ("broadcast_to", lambda v: tf.broadcast_to(v, [2, 2, 2]),
     lambda a: np.broadcast_to(a, (2, 2, 2))),
    ("slice", lambda v: tf.slice(v, [0, 0], [1, 2]), lambda a: a[:1]),
    ("strided_slice", lambda v: tf.strided_slice(v, [1], [2]), lambda a: a[1:2]),
    ("segment_sum", lambda v: tf.segment_sum(v, [0, 0]), lambda a: a.sum(0, keepdims=True)),
    ("scatter_nd", lambda v: tf.scatter_nd([[0], [2]], v, [3, 2]),
     lambda a: np.stack([a[0], np.zeros(2, np.float32), a[1]])),
    ("top_k", lambda v: tf.nn.top_k(v, 1)[0], lambda a: a.max(1, keepdims=True)),
    ("space_to_batch_nd", lambda v: tf.space_to_batch_nd(tf.reshape(v, [1, 2, 2, 1]), [1, 1],
                                                         [[0, 0], [0, 0]]),
     lambda a: a.reshape(1, 2, 2, 1)),
    ("pad", lambda v: tf.pad(v, [[1, 0], [0, 0]]), lambda a: np.pad(a, [[1, 0], [0, 0]])),
    ("transpose", lambda v: tf.transpose(v, [1, 0]), lambda a: a.T),
    ("gather", lambda v: tf.gather(v, [1]), lambda a: a[[1]]),
]


def _values(build, eager):
    """What ``build()`` (a tensor or a tuple of them) evaluates to, eagerly or in a session."""
    if eager:
        with eager_mode():
            out = build()
            return out.numpy() if isinstance(out, tf.Tensor) else [t.numpy() for t in out]
    with tf.Graph().as_default(), tf.Session() as sess:
        return sess.run(build())


@pytest.mark.parametrize("eager", [False, True], ids=["graph", "eager"])
@pytest.mark.parametrize("form", ["ndarray", "integral ndarray", "list"])
@pytest.mark.parametrize("name,build,numpy_fn", CASES, ids=[c[0] for c in CASES])
def test_a_data_argument_keeps_its_dtype_beside_index_arguments(name, build, numpy_fn, form,
                                                                 eager):
    array = ONES if form == "integral ndarray" else F
    value = array.tolist() if form == "list" else array
    got = _values(lambda: build(value), eager)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, numpy_fn(array))


@pytest.mark.parametrize("eager", [False, True], ids=["graph", "eager"])
def test_values_beside_a_tensor_of_their_kind_still_take_its_dtype(eager):
    def build():
        x32 = tf.constant([1.0, 2.0], tf.float32)
        i64 = tf.constant([1, 2], tf.int64)
        return x32 + [1, 2], x32 + np.array([0.5, 0.25]), i64 + [3, 4], x32 * 2

    got = _values(build, eager)
    assert [g.dtype for g in got] == [np.float32, np.float32, np.int64, np.float32]
    assert got[0].tolist() == [2.0, 4.0] and got[1].tolist() == [1.5, 2.25]


@pytest.mark.parametrize("value", [[1.5, 2.5], [1.0, 2.0]], ids=["list", "integral list"])
def test_float_lists_added_to_ints_are_refused_as_tf_refuses_them(value):
    """``AddV2``'s inputs share a type: TF 2.21 refuses a list of floats added to an int32
    tensor, a graph with ``TypeError`` naming the op's inputs, an eager op with
    ``InvalidArgumentError`` (integral floats too: [1.0, 2.0] is not made ints)."""
    with tf.Graph().as_default():
        with pytest.raises(TypeError, match="Input 'y' of 'AddV2' Op has type float32 that "
                                            "does not match type int32"):
            tf.constant([1, 2]) + value
    with eager_mode():
        with pytest.raises(tf.errors.InvalidArgumentError, match="AddV2"):
            tf.constant([1, 2]) + value


@pytest.mark.parametrize("eager", [False, True], ids=["graph", "eager"])
def test_numpy_floats_beside_an_int_tensor_of_a_shared_type_take_its_dtype(eager):
    """TF casts a NumPy value to a type attribute it shares with a tensor (checked under TF
    2.21: every one of these is int32 or bool there): clipping int labels by NumPy bounds,
    comparing, adding, stacking."""
    def build():
        labels = tf.constant([-1, 7])
        return (tf.clip_by_value(labels, np.float32(0), np.float32(5)),
                tf.equal(tf.constant([0, 1]), np.float32(1.0)),
                tf.add(tf.constant([0, 1]), np.array([1.0, 1.0])),
                tf.stack([tf.constant([0, 1]), np.array([1.0, 2.0])]),
                tf.logical_and(tf.constant([True, False]), np.array([1.0, 0.0])))

    got = _values(build, eager)
    assert [g.tolist() for g in got] == [[0, 5], [False, True], [1, 2], [[0, 1], [1, 2]],
                                         [True, False]]
    assert [g.dtype for g in got] == [np.int32, bool, np.int32, np.int32, bool]


def test_a_fractional_number_added_to_ints_is_refused_at_conversion():
    for mode in (tf.Graph().as_default, eager_mode):
        with mode():
            with pytest.raises(TypeError, match="Expected int32, got 1.5"):
                tf.constant([1, 2]) + 1.5


@pytest.mark.parametrize("eager", [False, True], ids=["graph", "eager"])
def test_an_int64_array_reshaped_stays_int64(eager):
    """TF: ``tf.reshape(np.arange(4), [2, 2])`` is int64, the array's own (the shape's int32
    is another type attribute); a list of ints is int32."""
    with eager_mode() if eager else tf.Graph().as_default():
        assert tf.reshape(np.arange(4), [2, 2]).dtype is tf.int64
        assert tf.tile(np.arange(2), [2]).dtype is tf.int64
        assert tf.reshape([1, 2, 3, 4], [2, 2]).dtype is tf.int32
