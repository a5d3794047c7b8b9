"""The ``tf.assert_*`` checks executing eagerly, as TF's: None when they hold, TF's eager
``InvalidArgumentError``/``ValueError``/``TypeError`` text when they fail (eager tensors have
no names). Expected messages read off TensorFlow 2.21."""

from __future__ import annotations

import numpy as np
import pytest

import dflab as tf
from dflab.eager import eager_mode


@pytest.fixture(autouse=True)
def eager():
    with eager_mode():
        yield


def _message(fn, error=tf.errors.InvalidArgumentError):
    with pytest.raises(error) as info:
        fn()
    return info.value.message if hasattr(info.value, "message") else str(info.value)


def test_passing_checks_return_none():
    x = tf.constant([1.0, 2.0])
    m = tf.constant([[1, 2], [3, 4]])
    assert tf.assert_equal(x, x) is None
    assert tf.debugging.assert_positive(x) is None
    assert tf.debugging.assert_less_equal(x, x) is None
    assert tf.debugging.assert_near(x, x) is None
    assert tf.assert_rank(x, 1) is None and tf.assert_rank_at_least(x, 1) is None
    assert tf.assert_rank_in(x, [1, 2]) is None
    assert tf.assert_type(x, tf.float32) is None and tf.assert_integer(m) is None
    assert tf.debugging.assert_shapes([(x, ("N",)), (m, ("N", "N"))]) is None


def test_a_failed_comparison_shows_the_differing_entries():
    x, y = tf.constant([1.0, 2.0]), tf.constant([1.0, 3.0])
    assert _message(lambda: tf.assert_equal(x, y, message="boom")) == (
        "boom\nCondition x == y did not hold.\nIndices of first 1 different values:\n[[1]]\n"
        "Corresponding x values:\n[2.]\nCorresponding y values:\n[3.]\n"
        "First 2 elements of x:\n[1. 2.]\nFirst 2 elements of y:\n[1. 3.]")
    m = tf.constant([[1, 2], [3, 4]])
    assert _message(lambda: tf.assert_equal(m, m * 0 + 1)) == (
        "Condition x == y did not hold.\nIndices of first 3 different values:\n"
        "[[0 1]\n [1 0]\n [1 1]]\nCorresponding x values:\n[2 3 4]\n"
        "Corresponding y values:\n[1 1 1]\nFirst 3 elements of x:\n[1 2 3]\n"
        "First 3 elements of y:\n[1 1 1]")
    assert _message(lambda: tf.assert_equal(tf.range(10), tf.zeros([10], tf.int32),
                                            summarize=2)) == (
        "Condition x == y did not hold.\nIndices of first 2 different values:\n[[1]\n [2]]\n"
        "Corresponding x values:\n[1 2]\nCorresponding y values:\n[0 0]\n"
        "First 2 elements of x:\n[0 1]\nFirst 2 elements of y:\n[0 0]")
    # shapes that differ (or scalars): the first entries only
    assert _message(lambda: tf.assert_equal(x, 5.0)) == (
        "Condition x == y did not hold.\nFirst 2 elements of x:\n[1. 2.]\n"
        "First 1 elements of y:\n[5.]")
    assert _message(lambda: tf.assert_less(tf.constant([[5.0]]), x)) == (
        "Condition x < y did not hold.\nFirst 1 elements of x:\n[5.]\n"
        "First 2 elements of y:\n[1. 2.]")
    assert _message(lambda: tf.assert_equal(x, y, data=["custom", x], message="mm")) == (
        "mm\ncustom\n['1.0', '2.0']")


def test_sign_checks_name_the_tensor_by_shape_and_dtype():
    v = tf.constant([1.0, -2.0, 0.0, 3.0, -4.0])
    assert _message(lambda: tf.debugging.assert_positive(v)) == (
        "\nCondition x > 0 did not hold element-wise:\nx (shape=(5,) dtype=float32) = \n"
        "['1.0', '-2.0', '0.0', '...']")
    assert _message(lambda: tf.debugging.assert_negative(tf.constant([0.0]), message="mm")) \
        == ("mm.  \nCondition x < 0 did not hold element-wise:\n"
            "x (shape=(1,) dtype=float32) = \n['0.0']")
    # TF's ``<= 0`` message runs its two lines together
    assert _message(lambda: tf.debugging.assert_non_positive(v)) == (
        "\nCondition x <= 0 did not hold element-wise:x (shape=(5,) dtype=float32) = \n"
        "['1.0', '-2.0', '0.0', '...']")


def test_assert_near_fails_as_tfs_eager_assert():
    x, y = tf.constant([1.0, 2.0]), tf.constant([1.0, 3.0])
    assert _message(lambda: tf.debugging.assert_near(x, y, message="mm")) == (
        "Expected 'tf.Tensor(False, shape=(), dtype=bool)' to be true. Summarized data: "
        "b'mm.  '\nb'x and y not equal to tolerance rtol = tf.Tensor(1.1920929e-06, "
        "shape=(), dtype=float32), atol = tf.Tensor(1.1920929e-06, shape=(), "
        "dtype=float32)'\nb'x (shape=(2,) dtype=float32) = '\n1.0, 2.0\n"
        "b'y (shape=(2,) dtype=float32) = '\n1.0, 3.0")


def test_static_checks_fail_with_tfs_eager_text():
    x = tf.constant([1.0, 2.0])
    assert _message(lambda: tf.assert_rank(x, 2, message="mm"), ValueError) == (
        "mm.  Tensor  must have rank 2.  Received rank 1, shape (2,)")
    assert _message(lambda: tf.assert_rank_at_least(x, 3), ValueError) == (
        "Tensor  must have rank at least 3.  Received rank 1, shape (2,)")
    assert _message(lambda: tf.assert_rank_in(x, [0, 2]), ValueError) == (
        "Tensor  must have rank in (0, 2).  Received rank 1, shape (2,)")
    assert _message(lambda: tf.assert_type(x, tf.int32, message="mm"), TypeError) == (
        "mm.  tensor must be of type tf.int32; got tf.float32")
    assert _message(lambda: tf.assert_integer(x), TypeError) == (
        "Expected \"x\" to be integer type.  Found: tensor of dtype <dtype: 'float32'>")
    assert _message(lambda: tf.assert_scalar(x, message="mm"), ValueError) == (
        "mm.  Expected scalar shape, saw shape: (2,).")
    m = tf.constant([[1, 2], [3, 4]])
    assert _message(lambda: tf.debugging.assert_shapes([(x, ("N",)), (m, ("N", 3))]),
                    ValueError) == (
        "Specified explicitly.  Tensor shape=(2, 2) dtype=int32 dimension 1 must have size "
        "3.  Received size 2, shape (2, 2)")
    assert _message(lambda: tf.debugging.assert_shapes([(x, ("N",)),
                                                        (tf.zeros([3, 2]), ("N", 2))]),
                    ValueError) == (
        "Specified by tensor shape=(2,) dtype=float32 dimension 0.  Tensor shape=(3, 2) "
        "dtype=float32 dimension 0 must have size 2.  Received size 3, shape (3, 2)")
    assert _message(lambda: tf.debugging.assert_same_float_dtype(
        [x, tf.constant([1.0], tf.float64)]), ValueError) == (
        "tf.Tensor([1.], shape=(1,), dtype=float64), type=<dtype: 'float64'>, must be of the "
        "same type (<dtype: 'float32'>) as tf.Tensor([1. 2.], shape=(2,), dtype=float32).")


def test_confusion_matrix_checks_its_labels():
    np.testing.assert_array_equal(tf.confusion_matrix([0, 1, 2], [1, 1, 2]).numpy(),
                                  [[0, 1, 0], [0, 1, 0], [0, 0, 1]])
    assert _message(lambda: tf.confusion_matrix([0, -1], [1, 1])) == (
        "`labels` contains negative values.  \nCondition x >= 0 did not hold element-wise:\n"
        "x (shape=(2,) dtype=int64) = \n['0', '-1']")
    assert _message(lambda: tf.confusion_matrix([0, 3], [1, 1], num_classes=2)) == (
        "`labels` out of bound\nCondition x < y did not hold.\nFirst 2 elements of x:\n"
        "[0 3]\nFirst 1 elements of y:\n[2]")
