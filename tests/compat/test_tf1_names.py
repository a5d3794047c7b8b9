"""TF 1.x's spellings: dtype names, builders' default op names, lists of tensors as inputs.

Expected values were read off ``tensorflow.compat.v1`` (2.21, graph mode) running the same
expressions; they are TF's behaviour, not dflab's output copied back.
"""

import numpy as np
import pytest

import dflab as tf

# Every key of TF's string -> DType table that has a NumPy type (TF also lists bfloat16, the
# quantized types and 2/4/8-bit types, which dflab does not have).
TF_DTYPE_NAMES = {
    "bool": "bool", "complex128": "complex128", "complex64": "complex64", "double": "float64",
    "float": "float32", "float16": "float16", "float32": "float32", "float64": "float64",
    "half": "float16", "int16": "int16", "int32": "int32", "int64": "int64", "int8": "int8",
    "resource": "resource", "string": "string", "uint16": "uint16", "uint32": "uint32",
    "uint64": "uint64", "uint8": "uint8", "variant": "variant",
}


@pytest.mark.parametrize("alias,name", sorted(TF_DTYPE_NAMES.items()))
def test_every_tf_type_name_means_what_it_means_in_tf(alias, name):
    assert tf.as_dtype(alias).name == name
    if alias not in ("resource", "variant"):
        assert tf.as_dtype(alias + "_ref") is tf.as_dtype(name)._as_ref()


def test_float_is_float32_everywhere_a_dtype_is_taken():
    assert tf.zeros([2], dtype="float").dtype == tf.float32
    assert tf.placeholder("float", [None]).dtype == tf.float32
    assert tf.Variable([1.0], dtype="double").dtype.base_dtype == tf.float64
    assert tf.cast(tf.constant(1), "half").dtype == tf.float16


@pytest.mark.parametrize("name", ["int", "f4", "float_", "long", "bfloat16", "qint8"])
def test_names_tf_does_not_know_are_refused(name):
    with pytest.raises(TypeError, match=repr(name)):
        tf.as_dtype(name)


# (expression, names of the ops it adds, types of those ops) under TF 1.x.
DEFAULT_NAMES = [
    ("tf.add(a, a)", ["Add"], ["AddV2"]),
    ("a + a", ["add_1"], ["AddV2"]),  # uniquified case-insensitively after "Add"
    ("tf.subtract(a, a)", ["Sub"], ["Sub"]),
    ("tf.multiply(a, a)", ["Mul"], ["Mul"]),
    ("tf.div(a, a)", ["div"], ["RealDiv"]),
    ("tf.truediv(a, a)", ["truediv"], ["RealDiv"]),
    ("tf.realdiv(a, a)", ["RealDiv"], ["RealDiv"]),
    ("tf.floordiv(a, a)", ["floordiv"], ["FloorDiv"]),
    ("tf.div(i, i)", ["div_1"], ["FloorDiv"]),
    ("tf.group(a.op)", ["group_deps"], ["NoOp"]),
    ("tf.convert_to_tensor([a, a])", ["packed"], ["Pack"]),
]


def test_builders_name_their_ops_as_tf_does():
    g = tf.Graph()
    with g.as_default():
        a = tf.constant(1.0, name="a")  # noqa: F841 - used by the expressions
        i = tf.constant(3, name="i")  # noqa: F841
        for expr, names, types in DEFAULT_NAMES:
            before = {o.name for o in g.get_operations()}
            eval(expr)
            new = [o for o in g.get_operations() if o.name not in before]
            assert [o.name for o in new] == names, expr
            assert [o.type for o in new] == types, expr


def test_zeros_like_and_ones_like_take_tf_names():
    a = tf.placeholder(tf.float32, [None])
    assert tf.zeros_like(a).op.name == "zeros_like"
    assert tf.ones_like(a).op.name == "ones_like"
    with tf.name_scope("s"):
        assert tf.group(a.op).name == "s/group_deps"


def test_lists_mixing_tensors_and_numbers_are_packed():
    a = tf.placeholder(tf.float32, [])
    n = tf.placeholder(tf.int32, [])
    nested = tf.convert_to_tensor([[a, 1.0], [2.0, a]])
    tiled = tf.tile([a], [2])  # the list input takes a's dtype, not the multiples' int32
    reshaped = tf.reshape(tf.range(6), [n, 3])
    assert nested.shape.as_list() == [2, 2] and nested.dtype == tf.float32
    with tf.Session() as sess:
        out = sess.run([nested, tiled, reshaped], {a: 3.0, n: 2})
    np.testing.assert_array_equal(out[0], [[3.0, 1.0], [2.0, 3.0]])
    np.testing.assert_array_equal(out[1], [3.0, 3.0])
    np.testing.assert_array_equal(out[2], np.arange(6).reshape(2, 3))


def test_a_packed_list_of_mixed_dtypes_is_refused():
    with pytest.raises(TypeError, match="tensor of dtype int32 to float32"):
        tf.convert_to_tensor([tf.constant(1.0), tf.constant(1, tf.int32)])
