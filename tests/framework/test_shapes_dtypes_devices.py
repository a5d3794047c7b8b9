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


# --- DeviceSpec: parsing, merging, and tf.device scopes (TF 1.x semantics) ------------------------

@pytest.mark.parametrize("spec,fields", [
    ("", (None, None, None, None, None)),
    ("/job:ps", ("ps", None, None, None, None)),
    ("/job:worker/replica:1/task:2/device:GPU:3", ("worker", 1, 2, "GPU", 3)),
    ("/replica:0/task:0/cpu:1", (None, 0, 0, "CPU", 1)),
    ("/Gpu:2", (None, None, None, "GPU", 2)),
    ("/gpu", (None, None, None, "GPU", None)),
    ("/device:gpu:*", (None, None, None, "GPU", None)),
    ("/job:w/", ("w", None, None, None, None)),
])
def test_device_spec_fields(spec, fields):
    d = tf.DeviceSpec.from_string(spec)
    assert (d.job, d.replica, d.task, d.device_type, d.device_index) == fields
    # The canonical string parses back to the same spec.
    assert tf.DeviceSpec.from_string(d.to_string()) == d


@pytest.mark.parametrize("bad", ["/cpu:0/gpu:0", "/replica:x", "/task:", "/device:GPU:0:1",
                                 "/bogus!!", "/job:a/what:3"])
def test_device_spec_rejects(bad):
    with pytest.raises(ValueError, match="Invalid device specification"):
        tf.DeviceSpec.from_string(bad)


@pytest.mark.parametrize("base,other,want", [
    ("/job:worker/task:1", "/gpu:0", "/job:worker/task:1/device:GPU:0"),
    ("/job:worker/device:CPU:0", "/job:ps", "/job:ps/device:CPU:0"),
    # Only fields set in the other spec override: "*" is unset, so the index survives.
    ("/device:GPU:1", "/device:CPU:*", "/device:CPU:1"),
    ("/job:a/replica:2/task:3/device:GPU:1", "", "/job:a/replica:2/task:3/device:GPU:1"),
    ("", "/job:b/task:0", "/job:b/task:0"),
])
def test_device_spec_merge_table(base, other, want):
    a = tf.DeviceSpec.from_string(base)
    b = tf.DeviceSpec.from_string(other)
    merged = a.make_merged_spec(b)
    assert merged.to_string() == want
    assert a.to_string() == tf.DeviceSpec.from_string(base).to_string()  # not modified
    a.merge_from(b)
    assert a == merged


def test_device_spec_constructor_and_parse_in_place():
    d = tf.DeviceSpec(job="ps", task=0, device_type="cpu", device_index=0)
    assert d.to_string() == "/job:ps/task:0/device:CPU:0"
    assert d.parse_from_string("/gpu:1") is d
    assert (d.job, d.task, d.device_type, d.device_index) == (None, None, "GPU", 1)
    assert str(tf.DeviceSpec(device_type="GPU")) == "/device:GPU:*"


def test_nested_device_scopes_like_tf():
    # TF's testNestingWithMergeDeviceFunction, written with strings.
    with tf.device("/device:GPU:0"):
        a = tf.constant(1.0)
        with tf.device("/job:worker"):
            b = tf.constant(1.0)
            with tf.device("/device:CPU:0"):
                c = tf.constant(1.0)
                with tf.device("/job:ps"):
                    d = tf.constant(1.0)
                    with tf.device(""):
                        e = tf.constant(1.0)
                    with tf.device(None):
                        f = tf.constant(1.0)
    assert [t.op.device for t in (a, b, c, d, e, f)] == [
        "/device:GPU:0", "/job:worker/device:GPU:0", "/job:worker/device:CPU:0",
        "/job:ps/device:CPU:0", "/job:ps/device:CPU:0", ""]


def test_device_functions_see_inner_scopes_and_win_over_them():
    seen = []

    def to_cpu(op):
        seen.append(op.device)
        return "/cpu:0"

    with tf.device(to_cpu):
        with tf.device("/gpu:1"):
            a = tf.constant(1.0)
    # TF applies the innermost scope first; the outer function sees its result and replaces it.
    assert seen == ["/device:GPU:1"]
    assert a.op.device == "/device:CPU:0"

    with tf.device("/job:worker/task:2"):
        with tf.device(lambda op: tf.DeviceSpec(device_type="GPU", device_index=0)):
            b = tf.constant(1.0)
        with tf.device(lambda op: None):
            c = tf.constant(1.0)
    assert b.op.device == "/job:worker/task:2/device:GPU:0"  # outer string fills the rest
    assert c.op.device == "/job:worker/task:2"


@pytest.mark.parametrize("use_resource, var_op", [(False, "VariableV2"),
                                                   (True, "VarHandleOp")])
def test_device_function_chooses_by_op_type(use_resource, var_op):
    def params_on_cpu(op):
        return "/cpu:0" if op.type == var_op else "/gpu:0"

    with tf.device(params_on_cpu):
        v = tf.Variable(1.0, name="v", use_resource=use_resource)
        y = v * 2.0
    assert v.op.device == "/device:CPU:0"
    assert y.op.device == "/device:GPU:0"
    # The initializer is colocated with the variable, whatever the device function says.
    assert v.initializer.device == "/device:CPU:0"


def test_colocate_with_overrides_device_scope():
    with tf.device("/cpu:0"):
        a = tf.constant(1.0, name="a")
    with tf.device("/gpu:0"):
        with tf.colocate_with(a):
            b = tf.identity(a, name="b")
        c = tf.identity(a, name="c")
    assert b.op.device == "/device:CPU:0" and b.op.colocation_groups() == [b"loc:@a"]
    assert c.op.device == "/device:GPU:0"


class _Opaque:
    pass


@pytest.mark.parametrize("value", [_Opaque(), {1: 2}, [_Opaque()], [1, None], ["a", None]])
def test_values_that_are_no_tensor_raise_tfs_type_error(value):
    """TF 2.21 refuses to make a tensor of an arbitrary object (dflab once made a string
    constant of its repr, which failed later and far from the user's line)."""
    with tf.Graph().as_default():
        with pytest.raises(TypeError, match="Failed to convert elements of .* to Tensor"):
            tf.convert_to_tensor(value)
        with pytest.raises(TypeError, match="Failed to convert elements"):
            tf.add(tf.constant(1.0), value)


def test_none_is_no_tensor_value():
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="None values not supported"):
            tf.convert_to_tensor(None)


@pytest.mark.parametrize("value,shape", [("s", []), ([b"a", "b"], [2]),
                                         (np.array(["x", "y"]), [2]), (np.array([b"x"]), [1])])
def test_strings_still_make_string_tensors(value, shape):
    with tf.Graph().as_default():
        t = tf.convert_to_tensor(value)
        assert t.dtype == tf.string and t.shape.as_list() == shape
