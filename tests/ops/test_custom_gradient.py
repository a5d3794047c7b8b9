"""custom_gradient in graph mode beyond the TF fixtures: the forward ops get no gradient of
their own (so an op without one is fine), reference variables, the refusals, and a graph
holding one still exports."""

import numpy as np
import pytest

import dflab as tf
from dflab.eager import eager_mode


@pytest.fixture(autouse=True)
def _fresh_graph():
    tf.reset_default_graph()
    yield
    tf.reset_default_graph()


def test_forward_ops_are_not_differentiated():
    @tf.custom_gradient
    def floor_ste(x):
        # Floor through an op with no gradient: only grad_fn is ever called.
        y = tf.py_func(np.floor, [x], tf.float32)
        y.set_shape(x.shape)
        return y, lambda dy: dy * 2.0

    x = tf.constant([1.5, -0.5])
    y = floor_ste(x)
    g = tf.gradients(tf.reduce_sum(y), x)[0]
    with tf.Session() as sess:
        np.testing.assert_array_equal(sess.run([y, g]), [[1.0, -1.0], [2.0, 2.0]])


def test_reference_variable_gets_grad_fn_gradient():
    w = tf.Variable(3.0, use_resource=False)

    @tf.custom_gradient
    def f(x):
        def grad(dy, variables=None):
            assert variables == [w]
            return dy, [tf.constant(7.0)]

        return x * w, grad

    x = tf.constant(2.0)
    gx, gw = tf.gradients(f(x), [x, w])
    with tf.Session() as sess:
        sess.run(w.initializer)
        assert sess.run([gx, gw]) == [1.0, 7.0]


def test_wrong_number_of_variable_gradients():
    w = tf.Variable(3.0)

    @tf.custom_gradient
    def f(x):
        return x * w, lambda dy, variables=None: (dy, [])

    x = tf.constant(2.0)
    with pytest.raises(ValueError, match="gradient for each variable"):
        tf.gradients(f(x), x)


def test_keyword_arguments_are_refused_in_graph_mode():
    @tf.custom_gradient
    def f(x, scale=1.0):
        return x * scale, lambda dy: dy

    with pytest.raises(ValueError, match="keywords arguments"):
        f(tf.constant(1.0), scale=2.0)


def test_eagerly_the_tape_calls_grad_fn():
    # TF 2.21 gives the same numbers: the clipped gradient, the variable's, the recomputed
    # and the passed-through ones.
    @tf.custom_gradient
    def clip_grad(x):
        return tf.identity(x), lambda dy: tf.clip_by_value(dy, -0.5, 0.5)

    with eager_mode():
        x = tf.constant([1.0, 2.0, 3.0])
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.reduce_sum(clip_grad(x) * 10.0)
        np.testing.assert_allclose(tape.gradient(y, x).numpy(), [0.5, 0.5, 0.5])

        w = tf.Variable(3.0)

        @tf.custom_gradient
        def scaled(v):
            def grad(dy, variables=None):
                return dy * 100.0, [tf.reduce_sum(dy) * 7.0 for _ in variables]
            return v * w, grad

        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.reduce_sum(scaled(x))
        gx, gw = tape.gradient(y, [x, w])
        np.testing.assert_allclose(gx.numpy(), [100.0] * 3)
        assert float(gw) == 21.0  # three elements, 7 each

        @tf.custom_gradient
        def forgets_variables(v):
            return v * w, lambda dy: dy

        with pytest.raises(TypeError, match="must accept keyword argument 'variables'"):
            forgets_variables(x)

        @tf.custom_gradient
        def two_args(a, b):
            return a * b, lambda dy: dy  # one gradient for two arguments

        with tf.GradientTape() as tape:
            tape.watch(x)
            y = two_args(x, x)
        with pytest.raises(ValueError, match="expected to return 2 gradients, but returned 1"):
            tape.gradient(y, x)

        sin_times = tf.recompute_grad(lambda v: tf.sin(v) * v)
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.reduce_sum(sin_times(x))
        want = np.sin([1.0, 2.0, 3.0]) + np.array([1.0, 2.0, 3.0]) * np.cos([1.0, 2.0, 3.0])
        np.testing.assert_allclose(tape.gradient(y, x).numpy(), want, rtol=1e-6)

        rounded = tf.grad_pass_through(tf.round)
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.reduce_sum(rounded(x * 1.3) * 2.0)
        np.testing.assert_allclose(tape.gradient(y, x).numpy(), [2.6] * 3, rtol=1e-6)
        assert clip_grad(tf.constant(4.0)).numpy() == 4.0  # no tape: just the value


def test_graph_with_custom_gradient_exports():
    @tf.custom_gradient
    def f(x):
        return x * 2.0, lambda dy: dy

    f(tf.constant(1.0))
    meta = tf.train.export_meta_graph()
    with tf.Graph().as_default():
        tf.train.import_meta_graph(meta)
        op = tf.get_default_graph().get_operation_by_name("IdentityN")
        assert op.get_attr("_gradient_op_type").startswith("CustomGradient-")


def test_hessians_need_known_shapes():
    x = tf.placeholder(tf.float32, [None])
    with pytest.raises(ValueError, match="fully known shape"):
        tf.hessians(tf.reduce_sum(x * x), x)


def test_hessians_of_a_linear_function_are_zero():
    x = tf.placeholder(tf.float64, [2])
    h = tf.hessians(tf.reduce_sum(x * 3.0), [x])[0]
    with tf.Session() as sess:
        np.testing.assert_array_equal(sess.run(h, {x: [1.0, 2.0]}), np.zeros([2, 2]))


# --- Graph.gradient_override_map (TF1) ----------------------------------------------------------
@tf.RegisterGradient("GuidedReluForOverrideTest")
def _guided_relu(op, grad):
    return tf.where(grad > 0.0, grad, tf.zeros_like(grad)) * tf.cast(op.outputs[0] > 0.0,
                                                                     grad.dtype)


def test_gradient_override_map_gives_mapped_ops_the_named_gradient():
    """Guided backpropagation as TF1 programs write it; the numbers are TF 2.21's for the same
    program ([1, 0, 0, 0] overridden, [1, -2, 0, -4] for ReLU's own gradient)."""
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [4])
        with g.gradient_override_map({"Relu": "GuidedReluForOverrideTest"}):
            y = tf.nn.relu(x)
            with g.gradient_override_map({"Relu": "Relu"}):  # nested: mapped back
                y2 = tf.nn.relu(x)
            z = tf.identity(x)  # a type the map does not name
        y3 = tf.nn.relu(x)  # after the block: no override
        assert y.op.get_attr("_gradient_op_type") == "GuidedReluForOverrideTest"
        assert y2.op.get_attr("_gradient_op_type") == "Relu"
        for t in (y3, z):
            with pytest.raises(ValueError, match="no attr named '_gradient_op_type'"):
                t.op.get_attr("_gradient_op_type")
        w = tf.constant([1.0, -2.0, 3.0, -4.0])
        gx = tf.gradients(y * w, x)[0]
        gx2 = tf.gradients(y2 * w, x)[0]
        gx3 = tf.gradients(y3 * w, x)[0]
        with tf.Session() as s:
            got = s.run([gx, gx2, gx3], {x: [1.0, 2.0, -3.0, 4.0]})
    np.testing.assert_array_equal(got[0], [1.0, 0.0, 0.0, 0.0])
    np.testing.assert_array_equal(got[1], [1.0, -2.0, 0.0, -4.0])
    np.testing.assert_array_equal(got[2], [1.0, -2.0, 0.0, -4.0])


@pytest.mark.parametrize("bad", [[("Relu", "X")], {"Relu": 3}, {1: "Relu"}])
def test_gradient_override_map_takes_a_dict_of_strings(bad):
    g = tf.Graph()
    with pytest.raises(TypeError, match="dictionary mapping strings to strings"):
        with g.gradient_override_map(bad):
            pass


def test_an_override_naming_no_gradient_fails_as_tf():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [2])
        with g.gradient_override_map({"Relu": "NoGradientRegisteredUnderThisName"}):
            y = tf.nn.relu(x)
        with pytest.raises(LookupError, match="No gradient defined for operation 'Relu'"):
            tf.gradients(y, x)


def test_a_method_binds_its_instance_first():
    # TF 2.21: 100.0 eagerly and traced (``self`` is bound, not an argument).
    class Layer:
        scale = 100.0

        @tf.custom_gradient
        def forward(self, x):
            return x * 1.0, lambda dy: dy * self.scale

    layer = Layer()
    with eager_mode():
        x = tf.constant(2.0)
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer.forward(x)
        assert float(tape.gradient(y, x)) == 100.0

        @tf.function
        def traced(v):
            with tf.GradientTape() as t:
                t.watch(v)
                out = layer.forward(v)
            return t.gradient(out, v)

        assert float(traced(x)) == 100.0


def test_a_traced_function_finds_the_variables_f_reads():
    # TF 2.21: [7.0, 11.0] (the variable's handle is a capture there, which the graph walk
    # cannot name: its read is seen instead).
    with eager_mode():
        v = tf.Variable(3.0)

        @tf.custom_gradient
        def uses_variable(x):
            def grad(dy, variables=None):
                return dy * 7.0, [dy * 11.0 for _ in variables]
            return x * v, grad

        @tf.function
        def traced(x):
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = uses_variable(x)
            return tape.gradient(y, [x, v])

        assert [float(g) for g in traced(tf.constant(2.0))] == [7.0, 11.0]
