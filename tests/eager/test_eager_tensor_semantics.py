"""An eager tensor as a Python value, as TF 2's: ``numpy()`` hands out a writable copy (the
tensor, and tensors sharing its array, never change), ``np.asarray`` the array itself;
formatting, printing, truth and the small methods (``ref``, ``cpu``). Expected values read
off TensorFlow 2.21."""

from __future__ import annotations

import numpy as np
import pytest

import dflab as tf
from dflab.eager import eager_mode


@pytest.fixture(autouse=True)
def eager():
    with eager_mode():
        yield


# --- numpy() is a copy --------------------------------------------------------------------
def test_changing_numpy_leaves_the_tensor_alone():
    x = tf.constant([1.0, 2.0]) + 0.0
    n = x.numpy()
    n += 10
    np.testing.assert_array_equal(x.numpy(), [1.0, 2.0])
    a = tf.ones([4]) * 1.0
    b = tf.reshape(a, [2, 2])  # shares a's array
    b.numpy()[0, 0] = -1
    tf.identity(a).numpy()[1] = -1
    np.testing.assert_array_equal(a.numpy(), [1.0, 1.0, 1.0, 1.0])
    np.testing.assert_array_equal(b.numpy(), [[1.0, 1.0], [1.0, 1.0]])


def test_numpy_of_constants_reads_and_elements_is_writable():
    c = tf.constant([1.0, 2.0]).numpy()
    c += 1  # constants' own arrays are read-only; their copies are not
    np.testing.assert_array_equal(c, [2.0, 3.0])
    v = tf.Variable([1.0, 2.0])
    r = v.read_value().numpy()
    r += 1
    np.testing.assert_array_equal(v.numpy(), [1.0, 2.0])
    for e in tf.data.Dataset.from_tensor_slices(np.ones((2, 2), np.float32)):
        n = e.numpy()
        n *= 2
        np.testing.assert_array_equal(n, [2.0, 2.0])
        np.testing.assert_array_equal(e.numpy(), [1.0, 1.0])
    s = tf.constant([b"a", b"b"]).numpy()
    s[0] = b"z"
    assert list(s) == [b"z", b"b"]


def test_scalars_and_np_asarray():
    assert type(tf.constant(1.0).numpy()) is np.float32
    assert type(tf.constant(b"hi").numpy()) is bytes
    x = tf.constant([1.0, 2.0]) + 1
    assert np.shares_memory(np.asarray(x), np.asarray(x))  # the array itself, as TF's
    assert not np.shares_memory(np.asarray(x), x.numpy())
    assert not np.shares_memory(np.array(x), np.asarray(x))


def test_as_numpy_iterator_gives_read_only_arrays():
    e = next(tf.data.Dataset.from_tensor_slices(np.ones((2, 2), np.float32))
             .as_numpy_iterator())
    assert isinstance(e, np.ndarray) and not e.flags.writeable
    assert next(tf.data.Dataset.from_tensors(b"x").as_numpy_iterator()) == b"x"


# --- formatting -----------------------------------------------------------------------------
def test_format_gives_the_value():
    loss = tf.constant(0.25)
    assert f"loss: {loss}" == "loss: 0.25" and format(loss) == "0.25"
    assert f"{loss:.3f}" == "0.250" and format(tf.constant(2), ">8") == "       2"
    assert f"{tf.constant([[1.0, 2.0], [3.0, 4.0]])}" == "[[1. 2.]\n [3. 4.]]"
    assert f"{tf.constant(b'hi')}" == "b'hi'" and f"{tf.constant(True)}" == "True"
    assert f"{tf.constant([])}" == "[]"
    with pytest.raises(TypeError, match="unsupported format string"):
        f"{tf.constant([1.0, 2.0]):.2f}"  # noqa: B018 - NumPy's refusal, as TF's


def test_np_asarray_gives_a_read_only_array():
    x = tf.constant([1.0, 2.0]) + 1
    a = np.asarray(x)
    assert not a.flags.writeable
    with pytest.raises(ValueError):
        a[0] = 5.0
    np.testing.assert_array_equal(x.numpy(), [2.0, 3.0])
    assert np.array(x).flags.writeable  # np.array copies


# --- printing, truth, small methods ---------------------------------------------------------
def test_printing_as_tfs():
    assert str(tf.constant(b"hi")) == "tf.Tensor(b'hi', shape=(), dtype=string)"
    assert repr(tf.constant(b"hi")) == "<tf.Tensor: shape=(), dtype=string, numpy=b'hi'>"
    assert repr(tf.constant([[1.0, 2.0], [3.0, 4.0]])) == (
        "<tf.Tensor: shape=(2, 2), dtype=float32, numpy=\n"
        "array([[1., 2.],\n       [3., 4.]], dtype=float32)>")
    assert str(tf.constant(True)) == "tf.Tensor(True, shape=(), dtype=bool)"
    assert repr(tf.Variable(b"hi")) == (
        "<tf.Variable 'Variable:0' shape=() dtype=string, numpy=b'hi'>")
    assert repr(tf.Variable([[1.0, 2.0], [3.0, 4.0]])) == (
        "<tf.Variable 'Variable:0' shape=(2, 2) dtype=float32, numpy=\n"
        "array([[1., 2.],\n       [3., 4.]], dtype=float32)>")
    assert repr(tf.Variable(2)) == "<tf.Variable 'Variable:0' shape=() dtype=int32, numpy=2>"


def test_truth_of_tensors():
    assert bool(tf.constant([])) is False
    assert bool(tf.constant([[1]])) is True and bool(tf.constant([0])) is False
    with pytest.raises(ValueError, match="ambiguous"):
        bool(tf.constant([1, 2]))


def test_ref_and_cpu():
    c = tf.constant(1.0)
    r = c.ref()
    assert r.deref() is c and r == c.ref() and hash(r) == hash(c.ref())
    assert r != tf.constant(1.0).ref()
    assert c.experimental_ref().deref() is c
    assert repr(r) == "<Reference wrapping <tf.Tensor: shape=(), dtype=float32, numpy=1.0>>"
    v = tf.Variable([1.0])
    assert v.ref().deref() is v and {v.ref(): 1}[v.ref()] == 1
    assert v.experimental_ref() == v.ref()
    on_cpu = tf.constant([1.0]).cpu()
    assert "CPU" in on_cpu.device.upper()
    np.testing.assert_array_equal(on_cpu.numpy(), [1.0])


def test_placeholder_is_refused():
    with pytest.raises(RuntimeError, match=r"^tf.placeholder\(\) is not compatible with eager "
                       r"execution.$"):
        tf.placeholder(tf.float32)
