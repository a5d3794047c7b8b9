"""The eager kernel cache: an op's second call (a hit) gives what its first (a miss) gave,
results and errors alike; a change of input dtype, attribute or device scope is a miss, a change
of shape reuses the kernel; the builders' one-output path equals the op path (graph and eager,
with and without a recording tape, on a thread of its own)."""

from __future__ import annotations

import copy
import inspect
import os
import pickle
import threading

import numpy as np
import pytest

import dflab as tf
from dflab.eager import EagerContext
from dflab.framework import ops as _ops


@pytest.fixture
def ctx():
    """A context of its own, so every test starts with an empty kernel cache."""
    c = EagerContext(tf.ConfigProto(device_count={"CPU": 2}))
    with c.as_default():
        yield c
    c.close()


def _kernels(c) -> int:
    return len(c._cache)


def _line_of(marker: str) -> str:
    """``file:line`` of this file's line holding ``marker`` (where an error must point)."""
    lines = inspect.getsource(inspect.getmodule(_line_of)).splitlines()
    n = next(i for i, text in enumerate(lines, 1) if marker in text and "_line_of" not in text)
    return f"{os.path.basename(__file__)}:{n}"


def test_a_hit_gives_the_result_of_the_miss(ctx):
    x = np.array([1.5, -2.0, 3.0, 0.25], np.float32)
    y = np.array([0.5, 4.0, -1.0, 2.0], np.float32)
    a, b = tf.constant(x), tf.constant(y)
    first = tf.add(a, b)
    n = _kernels(ctx)
    second = tf.add(a, b)
    assert _kernels(ctx) == n
    for t in (first, second):
        assert t.dtype is tf.float32 and t.shape.as_list() == [4]
        np.testing.assert_array_equal(t.numpy(), x + y)
    assert first.device == second.device
    # A Python number takes the tensor's dtype on a hit too.
    np.testing.assert_array_equal((a * 2.0).numpy(), x * 2)
    np.testing.assert_array_equal((a * 2.0).numpy(), x * 2)
    assert (a * 2).dtype is tf.float32


def test_a_hit_with_bad_shapes_raises_what_a_miss_raises(ctx):
    m = tf.constant(np.ones((2, 3), np.float32))
    with pytest.raises(tf.errors.InvalidArgumentError) as miss:
        tf.matmul(m, m)  # miss: the shape rule refuses
    assert "[Op:MatMul]" in str(miss.value) and _line_of("miss: the shape rule") in str(miss.value)
    good = tf.matmul(m, tf.transpose(m))
    np.testing.assert_array_equal(good.numpy(), np.full((2, 2), 3.0, np.float32))
    n = _kernels(ctx)
    with pytest.raises(tf.errors.InvalidArgumentError) as hit:
        tf.matmul(m, m)  # hit: the kernel refuses
    assert _kernels(ctx) == n
    assert "[Op:MatMul]" in str(hit.value) and _line_of("hit: the kernel") in str(hit.value)


def test_a_new_dtype_is_a_miss_and_a_new_shape_a_hit(ctx):
    tf.add(tf.constant([1.0, 2.0]), tf.constant([3.0, 4.0]))
    n = _kernels(ctx)
    wide = tf.add(tf.constant(np.arange(6.0).reshape(2, 3)), tf.constant(np.ones((2, 3))))
    assert _kernels(ctx) == n + 1 and wide.dtype is tf.float64
    np.testing.assert_array_equal(wide.numpy(), np.arange(6.0).reshape(2, 3) + 1)
    ints = tf.add(tf.constant([1, 2]), tf.constant([3, 4]))
    assert _kernels(ctx) == n + 2 and ints.dtype is tf.int32
    np.testing.assert_array_equal(ints.numpy(), [4, 6])
    # Another shape (and broadcasting) reuses the float32 kernel: kernels are per dtype.
    big = tf.add(tf.constant(np.ones((3, 4), np.float32)), tf.constant([1.0, 2.0, 3.0, 4.0]))
    assert _kernels(ctx) == n + 2
    np.testing.assert_array_equal(big.numpy(), np.ones((3, 4)) + [1, 2, 3, 4])


def test_a_new_attribute_is_a_miss(ctx):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    m = tf.constant(x)
    plain = tf.matmul(m, tf.constant(x.T))
    n = _kernels(ctx)
    flipped = tf.matmul(m, m, transpose_b=True)
    assert _kernels(ctx) == n + 1
    np.testing.assert_array_equal(plain.numpy(), x @ x.T)
    np.testing.assert_array_equal(flipped.numpy(), x @ x.T)
    np.testing.assert_array_equal(tf.matmul(m, m, transpose_a=True).numpy(), x.T @ x)


def test_a_device_scope_is_a_miss_and_leaves_the_unscoped_kernel_alone(ctx):
    a, b = tf.constant([1.0, 2.0]), tf.constant([3.0, 4.0])
    assert tf.add(a, b).device.endswith("CPU:0")
    n = _kernels(ctx)
    with tf.device("/cpu:1"):
        on_1 = tf.add(a, b)
        assert tf.add(a, b).device.endswith("CPU:1")
    assert _kernels(ctx) == n + 1 and on_1.device.endswith("CPU:1")
    np.testing.assert_array_equal(on_1.numpy(), [4.0, 6.0])
    after = tf.add(a, b)
    assert after.device.endswith("CPU:0") and _kernels(ctx) == n + 1


def test_the_one_output_path_equals_the_op_path(ctx):
    a, b = tf.constant([1.0, -2.0]), tf.constant([0.5, 0.5])
    op = _ops.apply_op("Mul", [a, b], None, "mul")
    out = _ops.apply_op_output("Mul", [a, b], None, "mul")
    assert op.type == "Mul" and op.outputs[0].dtype is out.dtype
    np.testing.assert_array_equal(op.outputs[0].numpy(), out.numpy())
    # Numbers and lists are converted as apply_op converts them.
    np.testing.assert_array_equal(_ops.apply_op_output("Mul", [a, [2.0, 3.0]]).numpy(),
                                  [2.0, -6.0])
    with tf.Graph().as_default() as g:
        p = tf.placeholder(tf.float32, [2])
        t = _ops.apply_op_output("Mul", [p, 2.0], None, "twice")
        assert t.graph is g and t.op.type == "Mul" and t.name == "twice:0"
        with tf.Session() as sess:
            np.testing.assert_array_equal(sess.run(t, {p: [1.0, 2.0]}), [2.0, 4.0])


def test_a_recording_tape_sees_ops_whose_kernels_were_cached_before(ctx):
    x = tf.constant([1.0, 2.0, 3.0])
    tf.multiply(x, x)  # cached outside any tape
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = tf.reduce_sum(tf.multiply(x, x))
    np.testing.assert_allclose(tape.gradient(y, x).numpy(), [2.0, 4.0, 6.0])


def test_variable_reads_hit_the_cache_and_follow_assignments(ctx):
    v = tf.Variable(np.array([1.0, 2.0], np.float32))
    first = v.read_value()
    v.assign([5.0, 6.0])
    n = _kernels(ctx)
    second = v.read_value()
    assert _kernels(ctx) == n
    np.testing.assert_array_equal(first.numpy(), [1.0, 2.0])
    np.testing.assert_array_equal(second.numpy(), [5.0, 6.0])
    np.testing.assert_array_equal((v + 1.0).numpy(), [6.0, 7.0])


def test_an_op_on_a_thread_that_never_entered_a_scope(ctx):
    # A thread's scope stacks start on its first op; a scope on another thread is not its own.
    a = tf.constant([1.0, 2.0])
    seen = {}

    def run():
        with ctx.as_default():
            seen["value"] = (a + a).numpy()
            seen["device"] = (a + a).device

    with tf.device("/cpu:1"):
        t = threading.Thread(target=run)
        t.start()
        t.join()
    np.testing.assert_array_equal(seen["value"], [2.0, 4.0])
    assert seen["device"].endswith("CPU:0")


# --- the fast path (``run_binary``/``run_unary``): hits that skip the generic look-up ---------
def test_fast_path_hits_give_the_results_and_errors_of_misses(ctx):
    x = np.array([1.5, -2.0, np.nan, -0.0], np.float32)
    a, b = tf.constant(x), tf.constant(x[::-1].copy())
    firsts = [a + b, a - b, a * b, tf.nn.relu(a), tf.abs(a), a < b]
    seconds = [a + b, a - b, a * b, tf.nn.relu(a), tf.abs(a), a < b]
    for f, s, want in zip(firsts, seconds, [x + x[::-1], x - x[::-1], x * x[::-1],
                                             np.maximum(x, np.float32(0)), np.abs(x),
                                             x < x[::-1]]):
        assert f.dtype is s.dtype and s.device == f.device
        np.testing.assert_array_equal(s.numpy(), want)
        assert s.numpy().tobytes() == f.numpy().tobytes()  # NaN and -0.0 bit for bit
    # The fast path took them: their kernels are in the plain table the second time.
    assert ("AddV2", tf.float32, tf.float32) in ctx._plain and ("Relu", tf.float32) in ctx._plain
    m = tf.constant(np.ones((2, 3), np.float32))
    tf.add(m, m)
    with pytest.raises(tf.errors.InvalidArgumentError) as hit:
        tf.add(m, tf.constant(np.ones((2, 2), np.float32)))  # fast hit: the kernel refuses
    assert "[Op:AddV2]" in str(hit.value) and _line_of("fast hit: the kernel") in str(hit.value)


def test_numbers_on_the_fast_path_convert_as_on_a_miss(ctx):
    ints = tf.constant([1, 2, 3])
    assert (ints * 2).dtype is tf.int32 and (ints * 2).numpy().tolist() == [2, 4, 6]
    with pytest.raises(TypeError):
        ints * 2.5  # a float into an int32 tensor: refused on a hit as on a miss
    with pytest.raises(TypeError):
        ints * 2.5
    halves = tf.constant([1.0, 3.0], tf.float16)
    for _ in range(2):
        out = halves * 2
        assert out.dtype is tf.float16
        np.testing.assert_array_equal(out.numpy(), np.array([2.0, 6.0], np.float16))
    assert (tf.constant([True, False]) & True).numpy().tolist() == [True, False]


def test_signed_zeros_stay_apart_in_the_constant_cache(ctx):
    a = tf.constant([1.0, -2.0])
    for _ in range(2):  # miss, then hit
        assert np.signbit((a - -0.0).numpy()).tolist() == [False, True]
        assert np.signbit((a * 0.0).numpy()).tolist() == [False, True]
        assert np.signbit((a * -0.0).numpy()).tolist() == [True, False]
        assert (tf.constant([1, 2]) * 0).numpy().tolist() == [0, 0]


def test_fast_path_ops_are_recorded_by_a_tape_and_heard_by_listeners(ctx):
    x = tf.constant([-1.0, 2.0, 3.0])
    w = tf.constant([0.5, 0.5, 2.0])
    tf.nn.relu(x * w), tf.matmul(tf.reshape(x, [1, 3]), tf.reshape(w, [3, 1]))  # cache them
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = tf.reduce_sum(tf.nn.relu(x * w) * 3.0)
        z = tf.matmul(tf.reshape(x, [1, 3]), tf.reshape(w, [3, 1]))
    np.testing.assert_allclose(tape.gradient(y, x).numpy(), [0.0, 1.5, 6.0])
    np.testing.assert_allclose(tape.gradient(z, x).numpy(), [0.5, 0.5, 2.0])
    heard = []
    ctx.op_listeners.append(lambda op_type, device, start, end: heard.append((op_type, device)))
    try:
        tf.nn.relu(x * w)
    finally:
        ctx.op_listeners.pop()
    assert [t for t, _ in heard] == ["Mul", "Relu"] and heard[0][1].endswith("CPU:0")


def test_constant_attributes_are_read_only_and_graph_ops_copy_them():
    attrs = _ops.FrozenAttrs(transpose_a=False, transpose_b=True)
    assert attrs.key == (("transpose_a", False), ("transpose_b", True))
    for change in (lambda: attrs.__setitem__("transpose_a", True), lambda: attrs.pop("x"),
                   lambda: attrs.update(a=1), lambda: attrs.clear(),
                   lambda: attrs.__ior__({"a": 1})):
        with pytest.raises(TypeError, match="read-only"):
            change()
    assert copy.deepcopy(attrs) is attrs and copy.copy(attrs) is attrs
    again = pickle.loads(pickle.dumps(attrs))
    assert type(again) is _ops.FrozenAttrs and again == attrs and again.key == attrs.key
    assert {**attrs, "transpose_a": True}["transpose_a"] is True  # a copy is a plain dict
    with tf.Graph().as_default():
        m = tf.constant(np.arange(6, dtype=np.float32).reshape(2, 3))
        p = tf.matmul(m, m, transpose_b=True)
        q = tf.matmul(m, m, transpose_b=True)
        assert type(p.op._attrs) is dict and p.op._attrs is not q.op._attrs
        p.op._attrs["transpose_a"] = True  # one op's attributes are its own
        assert q.op.get_attr("transpose_a") is False and p.op.get_attr("transpose_a") is True
    from dflab.ops.math_ops import _MATMUL_ATTRS
    assert _MATMUL_ATTRS[False, True]["transpose_a"] is False


def test_an_error_inside_a_device_scope_is_the_scoped_ops_own(ctx):
    a = tf.constant([1.0, -2.0])
    tf.nn.relu(a)  # the unscoped kernel, cached
    with tf.device("/cpu:1"), pytest.raises(AttributeError):
        tf.nn.relu(a, name=7)  # a bad name fails the scoped op; the cached kernel must not run


def test_float_attributes_key_kernels_by_sign_and_nan_by_text(ctx):
    x = tf.constant([-1.0, 2.0])
    assert np.signbit(tf.nn.leaky_relu(x, alpha=0.0).numpy()).tolist() == [True, False]
    assert np.signbit(tf.nn.leaky_relu(x, alpha=-0.0).numpy()).tolist() == [False, False]
    n = _kernels(ctx)
    for _ in range(5):
        assert np.isnan(tf.nn.leaky_relu(x, alpha=float("nan")).numpy()[0])
    assert _kernels(ctx) == n + 1  # one kernel for NaN, not one per call
    assert _ops.FrozenAttrs(a=0.0).key != _ops.FrozenAttrs(a=-0.0).key
    assert _ops.FrozenAttrs(a=float("nan")).key == _ops.FrozenAttrs(a=float("nan")).key


def test_constant_attributes_share_a_token_exactly_when_their_keys_are_equal():
    """The fast path keys kernels by ``FrozenAttrs.token``: equal keys, one token (however
    made, pickled ones too); any other key, another token (signed zeros included)."""
    made = [_ops.FrozenAttrs(transpose_a=False, transpose_b=True),
            _ops.FrozenAttrs(transpose_a=False, transpose_b=False),
            _ops.FrozenAttrs(transpose_b=True, transpose_a=False),  # another order: another key
            _ops.FrozenAttrs(a=0.0), _ops.FrozenAttrs(a=-0.0), _ops.FrozenAttrs(a=0),
            _ops.FrozenAttrs(a=float("nan"))]
    again = [_ops.FrozenAttrs(**dict(a)) for a in made] + [pickle.loads(pickle.dumps(a))
                                                           for a in made]
    for x in made + again:
        for y in made + again:
            assert (x.token == y.token) == (x.key == y.key), (x.key, y.key)


def test_a_cached_matmul_kernel_refuses_what_is_not_a_matrix(ctx):
    """An eager op's shapes are checked when its kernel is built; a later call with the
    cached kernel is checked by the kernel, as TF's: ``MatMul`` of a rank-3 input is an
    error, not a batched product."""
    m = tf.constant(np.eye(2, dtype=np.float32))
    attrs = {"transpose_a": False, "transpose_b": False}
    _ops.apply_op_output("MatMul", [m, m], attrs)
    cube = tf.constant(np.ones((2, 2, 2), np.float32))
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"In\[0\] is not a matrix"):
        _ops.apply_op_output("MatMul", [cube, m], attrs)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"In\[1\] is not a matrix.*\[2\]"):
        _ops.apply_op_output("MatMul", [m, tf.constant([1.0, 2.0])], attrs)
    assert tf.matmul(cube, m).shape == (2, 2, 2)  # the builder's batched product


def test_a_kernel_built_for_plain_attributes_serves_the_fast_path(ctx):
    m = tf.constant(np.eye(2, dtype=np.float32))
    _ops.apply_op_output("MatMul", [m, m], {"transpose_a": False, "transpose_b": False})
    tf.matmul(m, m)
    assert any(k[0] == "MatMul" for k in ctx._plain)


def test_the_tape_follows_the_dtypes_it_always_did():
    from dflab.eager import backprop
    from dflab.framework import dtypes

    names = ["float16", "float32", "float64", "complex64", "complex128", "int32", "int64",
             "bool", "string", "uint8", "resource", "variant"]
    every = [dtypes.as_dtype(n) for n in names] + [
        dtypes.as_dtype(n + "_ref") for n in names if n not in ("resource", "variant")]
    for dt in every:
        assert (dt in backprop._DIFFERENTIABLE) == backprop._differentiable(dt), dt


def test_variable_reads_run_where_each_variable_lives(ctx):
    """A read's kernel is found by the variable's device as well: two variables on two
    devices, read outside any scope (the fast path, from the second read on), each read on
    its own device, its own value."""
    with tf.device("/cpu:0"):
        v0 = tf.Variable(np.array([1.0, 2.0], np.float32))
    with tf.device("/cpu:1"):
        v1 = tf.Variable(np.array([3.0, 4.0], np.float32))
    for _ in range(3):
        for v, device, want in ((v0, "CPU:0", [1.0, 2.0]), (v1, "CPU:1", [3.0, 4.0]),
                                (v0, "CPU:0", [1.0, 2.0])):
            value = v.value()  # (``read_value``'s identity runs on the default device)
            assert value.device.endswith(device) and value.numpy().tolist() == want
            assert v.read_value().numpy().tolist() == want
            total = tf.add(v, tf.constant([1.0, 1.0]))  # a variable operand, read, then added
            assert total.numpy().tolist() == [w + 1.0 for w in want]
    v1.assign_add([1.0, 1.0])
    assert v1.read_value().numpy().tolist() == [4.0, 5.0]


def test_a_variable_operand_on_the_fast_path_is_watched_and_differentiated(ctx):
    v = tf.Variable(np.array([1.0, -2.0], np.float32))
    b = tf.constant([0.5, 0.5])
    tf.multiply(v, b), tf.multiply(b, v)  # both kernels cached: the taped calls are hits
    with tf.GradientTape() as tape:
        y = tf.multiply(v, b) + tf.multiply(b, v) * v
    assert [w is v for w in tape.watched_variables()] == [True]
    np.testing.assert_allclose(tape.gradient(y, v).numpy(), 0.5 + 2 * 0.5 * v.numpy())
    heard = []
    ctx.op_listeners.append(lambda op_type, device, start, end: heard.append(op_type))
    try:
        tf.add(v, b)
    finally:
        ctx.op_listeners.pop()
    assert heard == ["ReadVariableOp", "AddV2"]  # read once, on the generic path, and heard


def test_a_cached_slice_kernel_slices_every_shape_and_refuses_every_bad_index(ctx):
    """A slice's kernel remembers the NumPy index of each (vectors, shape) it met: the same
    slice of other shapes is worked out anew, and a bad index is refused every time."""
    for shape in ((4,), (3, 5), (2, 3, 4), (4,)):
        x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
        t = tf.constant(x)
        for _ in range(2):
            np.testing.assert_array_equal(t[:2].numpy(), x[:2])
            np.testing.assert_array_equal(t[..., -1].numpy(), x[..., -1])
            np.testing.assert_array_equal(t[1:, None].numpy(), x[1:, None])
    short = tf.constant([1.0, 2.0])
    for _ in range(2):
        with pytest.raises(tf.errors.InvalidArgumentError, match="out of bounds"):
            short[5]


def test_slices_take_the_fast_path_with_tapes_listeners_and_scopes(ctx):
    """An index of Python values is worked out once; its vectors are the context's cached
    constants, and its kernel is found by (op, dtypes, masks) as a binary op's is."""
    x = tf.constant([1.0, 2.0, 3.0, 4.0])
    for _ in range(2):
        assert x[1:].numpy().tolist() == [2.0, 3.0, 4.0]
    assert sum(1 for k in ctx._plain if k[0] == "StridedSlice") == 1
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = tf.reduce_sum(x[1:] * x[1:])
    assert tape.gradient(y, x).numpy().tolist() == [0.0, 4.0, 6.0, 8.0]
    heard = []
    ctx.op_listeners.append(lambda op_type, device, start, end: heard.append((op_type, device)))
    try:
        x[::2]
    finally:
        ctx.op_listeners.pop()
    assert heard[0][0] == "StridedSlice"
    with tf.device("/cpu:1"):
        scoped = x[1:]
    assert scoped.device.endswith("CPU:1") and scoped.numpy().tolist() == [2.0, 3.0, 4.0]
    with pytest.raises(tf.errors.InvalidArgumentError) as e:
        x[7]  # a hit whose kernel refuses: the error names this line
    assert _line_of("x[7]  # a hit") in str(e.value)


def test_a_slice_in_a_new_context_uses_that_contexts_constants():
    from dflab.ops import slicing_ops

    for _ in range(2):
        c = EagerContext()
        with c.as_default():
            assert tf.constant([[1, 2], [3, 4]])[:, 1].numpy().tolist() == [2, 4]
            assert slicing_ops._SPECS[((None, None, None), 1)][0] is c
        c.close()


def test_a_reshape_follows_a_shape_that_changes_between_runs():
    """Shapes read from frozen constants are remembered; a fed shape is read at every run."""
    with tf.Graph().as_default(), tf.Session() as sess:
        x = tf.constant(np.arange(6.0))
        shape = tf.placeholder(tf.int32, [2])
        y = tf.reshape(x, shape)
        fed = np.array([2, 3], np.int32)
        assert sess.run(y, {shape: fed}).shape == (2, 3)
        fed[:] = [3, 2]  # the same array, written
        assert sess.run(y, {shape: fed}).shape == (3, 2)
        with pytest.raises(tf.errors.InvalidArgumentError, match="requested shape has 4"):
            sess.run(y, {shape: [2, 2]})


@pytest.mark.parametrize("use_resource", [False, True])
def test_a_reshape_follows_a_shape_variable_updated_in_place(use_resource):
    """A variable's buffer may be written in place (a scatter): a kernel reading a shape from
    it reads it again at every run."""
    with tf.Graph().as_default(), tf.Session() as sess:
        x = tf.constant(np.arange(6.0))
        v = tf.Variable([2, 3], use_resource=use_resource)
        y = tf.reshape(x, v)
        swap = tf.scatter_update(v, [0, 1], [3, 2])
        sess.run(tf.global_variables_initializer())
        assert sess.run(y).shape == (2, 3)
        sess.run(swap)
        assert sess.run(y).shape == (3, 2)


def test_literals_are_cached_by_value_type_and_dtype(ctx):
    """Numbers and short lists of ints (shapes, axes, paddings) become cached constants;
    their dtype, sign and refusals are those of a fresh constant, hit or miss."""
    for _ in range(2):  # miss, then hit
        assert tf.constant([1, 2]).dtype is tf.int32
        assert tf.constant([[1, 2], [3, 4]]).numpy().tolist() == [[1, 2], [3, 4]]
        assert tf.constant(True).dtype is tf.bool and tf.constant(1).dtype is tf.int32
        assert tf.constant(2**40).dtype is tf.int64
        assert tf.constant(5, dtype=tf.float32).numpy() == 5.0
        assert np.signbit(tf.constant(-0.0).numpy()) and not np.signbit(tf.constant(0.0).numpy())
        assert np.signbit(tf.constant([-0.0]).numpy()[0])  # floats in lists: never merged
        assert not np.signbit(tf.constant([0.0]).numpy()[0])
        with pytest.raises(TypeError):
            tf.constant(2.5, dtype=tf.int32)
        with pytest.raises(TypeError):
            tf.constant([2**40], dtype=tf.int32)
        with pytest.raises(ValueError):
            tf.constant([[1, 2], [3]])  # ragged
    a, b = tf.constant([1, 2]), tf.constant((1, 2))
    assert a._value is b._value  # one cached array per value ...
    assert a is not b  # ... in a new tensor for every call, as TF's


_LITERAL_MAKERS = {
    "constant": lambda: tf.constant(3.0),
    "constant of ints": lambda: tf.constant([1, 2]),
    "convert_to_tensor": lambda: tf.convert_to_tensor(3.0),
    "zeros": lambda: tf.zeros([2]),
    "ones": lambda: tf.ones([2, 2]),
    "cast of a number": lambda: tf.cast(3.0, tf.float32),
    "identity of a number": lambda: tf.identity(3.0),
    "fill": lambda: tf.fill([2], 3.0),
}


@pytest.mark.parametrize("make", _LITERAL_MAKERS.values(), ids=list(_LITERAL_MAKERS))
def test_every_literal_a_user_gets_is_a_tensor_of_its_own(ctx, make):
    """A tape watches tensors by identity: had two calls returned one cached tensor, watching
    one would watch the other, and every op reading that literal anywhere would join the
    gradient."""
    assert make() is not make()


def test_watching_a_constant_leaves_an_equal_constant_unwatched(ctx):
    """TF: d(x * y)/dx with y an equal, unwatched constant is y; the same for a number that a
    builder converts, and for ``tf.zeros`` of the watched tensor's shape."""
    x, y = tf.constant(3.0), tf.constant(3.0)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        by_constant = x * y
        by_number = x * 3.0
        z = tf.zeros([2])
        tape.watch(z)
        by_zeros = tf.reduce_sum((z + 1.0) * (tf.zeros([2]) + 2.0))
    assert tape.gradient(by_constant, x).numpy() == 3.0
    assert tape.gradient(by_number, x).numpy() == 3.0
    assert tape.gradient(by_zeros, z).numpy().tolist() == [2.0, 2.0]


def test_eager_name_scopes_check_names_and_nest_as_in_graphs(ctx):
    for _ in range(2):
        with pytest.raises(ValueError, match="not a valid scope name"):
            with tf.name_scope("bad name!"):
                pass
        with tf.name_scope("outer"):
            with tf.name_scope("inner") as scope:
                assert scope == "outer/inner/"
                v = tf.Variable(1.0, name="v")
            with tf.name_scope("exact/") as exact:
                assert exact == "exact/"
        assert v.name == "outer/inner/v:0"


def test_the_eager_context_keeps_cpythons_fast_attribute_reads():
    # A class with __getattr__ (or an instance with more attributes than a shared-key dict
    # holds, 30) loses CPython's specialized attribute reads: 0.13 us on every eager op.
    from dflab.eager import eager_mode
    from dflab.eager.context import EagerContext, eager_context

    assert "__getattr__" not in vars(EagerContext)
    with eager_mode():
        tf.add(tf.constant(1.0), 2.0)
        assert len(vars(eager_context())) <= 30
