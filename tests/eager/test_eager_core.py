"""Eager execution: values, printing, placement, errors at the op naming the user's line,
resource variables, optimizers (apply_gradients, minimize(loss_fn)) and tf.train.Checkpoint;
graph mode untouched next to it."""

from __future__ import annotations

import inspect
import os

import numpy as np
import pytest

import dflab as tf
from dflab.eager import EagerContext, eager_mode


@pytest.fixture
def eager():
    with eager_mode():
        yield


def test_values_shapes_dtypes_and_tf_printing(eager):
    a = tf.constant([1, 2])
    assert repr(a) == "<tf.Tensor: shape=(2,), dtype=int32, numpy=array([1, 2], dtype=int32)>"
    assert str(a) == "tf.Tensor([1 2], shape=(2,), dtype=int32)"
    m = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    assert str(m) == "tf.Tensor(\n[[1. 2.]\n [3. 4.]], shape=(2, 2), dtype=float32)"
    assert repr(tf.constant(1.5)) == "<tf.Tensor: shape=(), dtype=float32, numpy=1.5>"
    b = m * 2 + 1
    assert isinstance(b, tf.Tensor) and b.is_eager
    assert b.shape.as_list() == [2, 2] and b.dtype == tf.float32
    np.testing.assert_array_equal(b.numpy(), [[3.0, 5.0], [7.0, 9.0]])
    assert tf.executing_eagerly()
    assert float(tf.reduce_sum(m)) == 10.0 and int(a[1]) == 2 and len(a) == 2
    assert [int(x) for x in a] == [1, 2]
    with pytest.raises(AttributeError, match="meaningless"):
        _ = b.op


def test_python_control_flow_just_works(eager):
    x = tf.constant(0.0)
    steps = 0
    while x < 5.0:
        x = x + 1.5 if x > 1.0 else x + 1.0
        steps += 1
    assert float(x) == 5.0 and steps == 4


def test_graph_mode_is_untouched_beside_eager_mode():
    with tf.Graph().as_default() as g:
        assert not tf.executing_eagerly()
        x = tf.constant(2.0) * 3.0
        assert not x.is_eager and x.graph is g
        with eager_mode():
            assert tf.executing_eagerly()
            assert float(tf.constant(2.0) * 3.0) == 6.0
        assert not tf.executing_eagerly()
        with tf.Session() as s:
            assert s.run(x) == 6.0


def test_a_kernel_error_is_raised_at_the_op_naming_the_users_line(eager):
    line = inspect.currentframe().f_lineno + 2
    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        tf.matmul(tf.ones([2, 3]), tf.ones([2, 3]))
    text = str(info.value)
    assert "[Op:MatMul]" in text and f"test_eager_core.py:{line}" in text
    with pytest.raises(tf.errors.InvalidArgumentError, match="Op:GatherV2"):
        tf.gather(tf.ones([3]), [5])


def test_ops_run_on_the_device_placement_picks():
    ctx = EagerContext(tf.ConfigProto(device_count={"CPU": 2}))
    with ctx.as_default():
        a = tf.constant([1.0, 2.0])
        assert (a + 1.0).device.endswith("CPU:0")
        with tf.device("/cpu:1"):
            b = a * 2.0
            v = tf.Variable(1.0)
        assert b.device.endswith("CPU:1")
        # A resource op runs where its variable lives, whatever the scope says.
        assert v.value().device.endswith("CPU:1")
        c = b + a  # inputs from two devices meet on the op's device
        np.testing.assert_array_equal(c.numpy(), [3.0, 6.0])
    ctx.close()


def test_kernels_are_cached_per_signature(eager):
    from dflab.eager import eager_context

    ctx = eager_context()
    before = len(ctx._cache)
    x = tf.constant([1.0, 2.0])
    for _ in range(20):
        x = x * 1.5 + 0.5
    added = len(ctx._cache) - before
    assert added <= 2  # Mul and AddV2, once each


def test_variables_print_read_assign_and_die_with_python(eager):
    v = tf.Variable([1.0, 2.0])
    assert repr(v) == ("<tf.Variable 'Variable:0' shape=(2,) dtype=float32, "
                       "numpy=array([1., 2.], dtype=float32)>")
    assert repr(tf.Variable(3.0, name="s")) == \
        "<tf.Variable 's:0' shape=() dtype=float32, numpy=3.0>"
    v.assign_add([1.0, 1.0])
    np.testing.assert_array_equal(v.numpy(), [2.0, 3.0])
    w = tf.Variable([0.0, 0.0])  # same name, its own state
    np.testing.assert_array_equal(w.numpy(), [0.0, 0.0])
    assert tf.get_collection(tf.GraphKeys.GLOBAL_VARIABLES) == []


def test_an_eager_variables_state_goes_when_python_drops_it(eager):
    import gc

    from dflab.eager import eager_context

    resources = eager_context().host.resources
    before = set(resources.variables())
    v = tf.Variable(tf.ones([1000]))
    name = v.handle.op.get_attr("shared_name")
    assert name in set(resources.variables()) - before
    del v
    gc.collect()
    assert name not in resources.variables()


@pytest.mark.parametrize("make", [
    lambda: tf.train.GradientDescentOptimizer(0.1),
    lambda: tf.train.MomentumOptimizer(0.1, 0.9),
    lambda: tf.train.AdamOptimizer(0.1),
    lambda: tf.train.RMSPropOptimizer(0.05),
    lambda: tf.train.AdagradOptimizer(0.5),
])
def test_optimizers_minimize_a_loss_function_eagerly(eager, make):
    w = tf.Variable([3.0, -2.0])
    opt = make()
    for _ in range(150):
        opt.minimize(lambda: tf.reduce_sum(tf.square(w - [1.0, 1.0])))
    np.testing.assert_allclose(w.numpy(), [1.0, 1.0], atol=0.05)


def test_minimize_eagerly_needs_a_function_and_counts_the_global_step(eager):
    w = tf.Variable(1.0)
    step = tf.train.get_or_create_global_step()
    opt = tf.train.GradientDescentOptimizer(0.5)
    with pytest.raises(RuntimeError, match="should be a function"):
        opt.minimize(w * w)
    opt.minimize(lambda: w * w, global_step=step)
    assert float(w.numpy()) == 0.0 and int(step.numpy()) == 1


def test_checkpoint_saves_and_restores_model_and_optimizer(eager, tmp_path):
    class Model:
        def __init__(self):
            self.w = tf.Variable(tf.ones([2, 2]))
            self.layers = [tf.Variable(3.0)]

    m, opt = Model(), tf.train.AdamOptimizer(0.1)
    opt.minimize(lambda: tf.reduce_sum(m.w * m.w) + m.layers[0])
    ckpt = tf.train.Checkpoint(model=m, optimizer=opt)
    path = ckpt.save(os.path.join(tmp_path, "ckpt"))
    assert path.endswith("ckpt-1") and tf.train.latest_checkpoint(str(tmp_path)) == path
    keys = set(tf.train.load_checkpoint(path).get_variable_to_shape_map())
    assert {"model/w/.ATTRIBUTES/VARIABLE_VALUE", "model/layers/0/.ATTRIBUTES/VARIABLE_VALUE",
            "model/w/.OPTIMIZER_SLOT/optimizer/m/.ATTRIBUTES/VARIABLE_VALUE",
            "optimizer/beta1_power/.ATTRIBUTES/VARIABLE_VALUE",
            "save_counter/.ATTRIBUTES/VARIABLE_VALUE"} <= keys
    saved_w = m.w.numpy().copy()
    saved_m = opt.get_slot(m.w, "m").numpy().copy()
    opt.minimize(lambda: tf.reduce_sum(m.w * m.w) + m.layers[0])
    assert not np.allclose(m.w.numpy(), saved_w)
    status = tf.train.Checkpoint(model=m, optimizer=opt).restore(path)
    status.assert_consumed()
    np.testing.assert_array_equal(m.w.numpy(), saved_w)
    np.testing.assert_array_equal(opt.get_slot(m.w, "m").numpy(), saved_m)
    assert ckpt.save(os.path.join(tmp_path, "ckpt")).endswith("ckpt-2")


def test_a_device_scope_entered_in_a_loop_reuses_its_kernels(eager):
    from dflab.eager import eager_context

    ctx = eager_context()
    x = tf.constant([1.0])
    with tf.device("/cpu:0"):
        x = x * 3.0
    before = len(ctx._cache)
    for _ in range(10):
        with tf.device("/cpu:0"):
            x = x * 3.0
    assert len(ctx._cache) == before
    assert float(x[0]) == 3.0 ** 11


def test_an_eager_assert_tests_a_python_values_truth(eager):
    """TF 2.21's eager Assert: ``tf.Assert(1, …)`` passes, ``tf.Assert(0, …)`` fails (a
    graph's Assert refuses the Python number: a bool tensor is its input)."""
    tf.Assert(1, [tf.constant(1)])
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.Assert(0, [tf.constant(1)])


def test_an_eager_tensor_given_to_a_graph_op_is_tfs_runtime_error():
    # TF 2.21: "Attempting to capture an EagerTensor without building a function." (it had
    # been an AttributeError about the eager tensor's name).
    with eager_mode():
        e = tf.constant(1.0)
    with tf.Graph().as_default():
        with pytest.raises(RuntimeError, match="capture an EagerTensor without building a "
                                               "function"):
            tf.add(e, 1.0)
        with pytest.raises(RuntimeError, match="capture an EagerTensor"):
            tf.cond(tf.constant(True), lambda: e, lambda: e)
