"""TensorShape / Dimension algebra, dtypes and DeviceSpec parsing."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import dflab as tf
from dflab.framework.tensor_shape import broadcast_shapes


def test_shape_basics():
    s = tf.TensorShape([None, 3])
    assert s.ndims == 2 and s.as_list() == [None, 3]
    assert s[1].value == 3 and s[0].value is None and int(s[1]) == 3
    assert not s.is_fully_defined()
    assert s.merge_with([2, None]).as_list() == [2, 3]
    assert s.is_compatible_with([7, 3]) and not s.is_compatible_with([7, 4])
    assert tf.TensorShape(None).ndims is None
    assert tf.TensorShape([2, 3]).num_elements() == 6
    assert str(tf.TensorShape([None, 3])) == "(?, 3)"
    with pytest.raises(ValueError):
        s.merge_with([1, 4])
    with pytest.raises(ValueError):
        tf.TensorShape(None).as_list()


dims = st.lists(st.integers(1, 4), min_size=0, max_size=4)


@given(dims, dims)
def test_broadcast_matches_numpy(a, b):
    try:
        want = np.broadcast_shapes(tuple(a), tuple(b))
    except ValueError:
        with pytest.raises(ValueError):
            broadcast_shapes(tf.TensorShape(a), tf.TensorShape(b))
        return
    assert broadcast_shapes(tf.TensorShape(a), tf.TensorShape(b)).as_list() == list(want)


@given(dims, dims)
def test_unknown_dims_never_contradict_numpy(a, b):
    """Replacing dims with None keeps the inferred shape compatible with the real one."""
    try:
        want = np.broadcast_shapes(tuple(a), tuple(b))
    except ValueError:
        return
    pa = [None if i % 2 else d for i, d in enumerate(a)]
    got = broadcast_shapes(tf.TensorShape(pa), tf.TensorShape(b))
    assert got.is_compatible_with(list(want))


def test_dtypes():
    assert tf.as_dtype("float32") is tf.float32
    assert tf.as_dtype(np.int64) is tf.int64
    assert tf.float32.as_numpy_dtype is np.float32
    assert tf.float32.is_floating and tf.int8.is_integer and tf.uint8.is_unsigned
    assert tf.float32._as_ref().base_dtype is tf.float32
    assert tf.float32._as_ref().is_ref_dtype
    assert tf.int32.max == 2**31 - 1
    with pytest.raises(TypeError):
        tf.as_dtype("not_a_type")


@pytest.mark.parametrize("spec,want", [
    ("/cpu:0", "/device:CPU:0"),
    ("/GPU:1", "/device:GPU:1"),
    ("/job:ps/task:2", "/job:ps/task:2"),
    ("/job:worker/replica:0/task:1/device:gpu:3", "/job:worker/replica:0/task:1/device:GPU:3"),
    ("/device:CPU:*", "/device:CPU:*"),
])
def test_device_spec_parsing(spec, want):
    assert tf.DeviceSpec.from_string(spec).to_string() == want


def test_device_spec_merge():
    a = tf.DeviceSpec.from_string("/job:worker/task:1")
    a.merge_from(tf.DeviceSpec.from_string("/gpu:0"))
    assert a.to_string() == "/job:worker/task:1/device:GPU:0"
    with pytest.raises(ValueError):
        tf.DeviceSpec.from_string("/bogus!!")
