"""``DType`` equality with what names a type, as TF's: NumPy types and dtypes, TF's names,
``float``/``bool``/``object`` and type numbers; its ``str``/``repr``; hashing by type (one
object per type). Expected values read off TensorFlow 2.21."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

import dflab as tf

EQUAL = [
    (tf.float32, np.float32), (tf.float32, "float32"), (tf.float32, "float"),
    (tf.float32, float), (tf.float32, np.dtype("float32")), (tf.float32, 1),
    (tf.float64, "double"), (tf.float16, "half"), (tf.float16, np.float16),
    (tf.int64, np.int64), (tf.int32, np.int32), (tf.bool, bool), (tf.bool, np.bool_),
    (tf.bool, np.dtype(bool)), (tf.string, np.bytes_), (tf.string, np.object_),
    (tf.string, np.dtype("S3")), (tf.string, np.dtype(object)), (tf.string, np.dtype("U3")),
    (tf.string, object), (tf.string, "string"),
]
UNEQUAL = [
    (tf.float32, None), (tf.float32, "foo"), (tf.float32, []), (tf.float32, "f4"),
    (tf.float32, tf.float64), (tf.float32, np.float64), (tf.float32, 2.0),
    (tf.float32, "float32_ref"), (tf.float32, 101), (tf.int32, int), (tf.int64, int),
    (tf.int32, "int"), (tf.string, str), (tf.string, np.str_), (tf.string, bytes),
]


@pytest.mark.parametrize("dtype,other", EQUAL)
def test_a_dtype_equals_what_names_its_type(dtype, other):
    assert dtype == other and not dtype != other
    assert other == dtype  # NumPy's and Python's comparisons defer to the DType's


@pytest.mark.parametrize("dtype,other", UNEQUAL)
def test_a_dtype_differs_from_other_types_and_from_non_types(dtype, other):
    assert dtype != other and not dtype == other


def test_a_tensor_dtype_in_a_tuple_of_numpy_types():
    t = tf.constant([1.0])
    assert t.dtype in (np.float32, np.float64)
    assert t.dtype not in (np.int32, np.float64)
    assert tf.float32._as_ref() != tf.float32


def test_str_and_repr_are_tfs():
    assert str(tf.float32) == "<dtype: 'float32'>"
    assert repr(tf.float32) == "tf.float32"
    assert f"{tf.int64}" == "<dtype: 'int64'>" and str([tf.int8]) == "[tf.int8]"
    assert repr(tf.string) == "tf.string"


def test_hash_by_type_one_object_per_type():
    assert hash(tf.float32) == hash(tf.as_dtype("float32")) == hash(tf.as_dtype(np.float32))
    assert len({tf.float32, tf.as_dtype(np.float32), tf.float32._as_ref()}) == 2
    assert {tf.float32: 1}.get(tf.as_dtype("float32")) == 1
    assert tf.float32 not in {np.float32: 1}  # as TF: equal, but NumPy's type hashes apart
    assert pickle.loads(pickle.dumps(tf.float32)) is tf.float32
    assert copy.deepcopy(tf.int64) is tf.int64
