"""tf.function / defun: tracing and TF's retracing rules, input signatures, the once-only
variable rule, calls from graph mode (placed, differentiated, inside loops), errors."""

from __future__ import annotations

import collections

import numpy as np
import pytest

import dflab as tf
from dflab.eager import eager_mode
from dflab.eager.function import defun


@pytest.fixture
def eager():
    with eager_mode():
        yield
        tf.set_random_seed(None)  # (the process's eager context outlives the test)


def test_a_trace_per_signature_and_the_reason_of_each(eager):
    @tf.function
    def f(x, n):
        return x * n + 1

    a, b = tf.constant([1.0, 2.0]), tf.constant([3.0, 4.0])
    np.testing.assert_allclose(f(a, 2.0).numpy(), [3.0, 5.0])
    np.testing.assert_allclose(f(b, 2.0).numpy(), [7.0, 9.0])  # same signature: no trace
    assert f.experimental_get_tracing_count() == 1
    f(tf.constant([1.0, 2.0, 3.0]), 2.0)  # new shape
    f(a, 3.0)  # new Python value
    f(tf.constant([1, 2]), 2)  # new dtype (and value type)
    f(np.array([1.0, 2.0], np.float32), 2.0)  # a NumPy array traces as a tensor: no new trace
    assert f.experimental_get_tracing_count() == 4
    reasons = [r for _, r in f.traces]
    assert reasons[0] == "first call"
    assert "dtype/shape for x: float32[3] (traced with float32[2])" in reasons[1]
    assert "new value for n: 3.0 (traced with 2.0)" in reasons[2]
    assert "int32[2]" in reasons[3]


def test_input_signature_pins_the_trace(eager):
    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32)])
    def f(x):
        return tf.reduce_sum(x)

    assert float(f(tf.constant([1.0, 2.0]))) == 3.0
    assert float(f(tf.constant([1.0, 2.0, 3.0]))) == 6.0
    assert f.experimental_get_tracing_count() == 1
    with pytest.raises(ValueError, match="incompatible with input_signature"):
        f(tf.constant([[1.0]]))
    with pytest.raises(ValueError, match="incompatible"):
        f(tf.constant([1, 2]))


def test_structured_input_signature_names_each_spec_by_its_path(eager):
    # TF 2.21's names and Python values.
    @tf.function(input_signature=[{"a": tf.TensorSpec([None], tf.float32),
                                   "b": tf.TensorSpec([], tf.int32)}])
    def pinned(d):
        return d["a"]

    (spec,), kwargs = pinned.get_concrete_function().structured_input_signature
    assert kwargs == {} and spec["a"].name == "d_a" and spec["b"].name == "d_b"
    assert spec["a"].shape.as_list() == [None] and spec["b"].dtype == tf.int32

    @tf.function
    def scaled(x, n=3):
        return x * n

    args, _ = scaled.get_concrete_function(tf.TensorSpec([2], tf.float32)).\
        structured_input_signature
    assert args[0].name == "x" and args[0].shape.as_list() == [2] and args[1] == 3

    point = collections.namedtuple("P", ["u", "w"])

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32, name="inp")])
    def renamed(x):
        return x

    assert renamed.get_concrete_function().structured_input_signature[0][0].name == "inp"

    @tf.function(input_signature=[{"k": tf.TensorSpec([], tf.int32, name="kk"),
                                   "a": tf.TensorSpec([2], tf.float32, name="aa")}])
    def keyed(d):
        return d["a"]

    (spec,), _ = keyed.get_concrete_function().structured_input_signature
    assert (spec["k"].name, spec["a"].name) == ("kk", "aa")  # by key, not by position

    @tf.function
    def shaped(x, *rest, p, flag=False):  # a named tuple had failed the trace
        return x + rest[0] + tf.cast(p.u, tf.float32) * p.w

    args = (tf.constant(1.0), tf.constant(2.0))
    value = shaped(*args, p=point(tf.constant(2), tf.constant(3.0)))
    assert float(value) == 9.0
    sig_args, sig_kwargs = shaped.get_concrete_function(
        *args, p=point(tf.constant(2), tf.constant(3.0))).structured_input_signature
    assert [s.name for s in sig_args] == ["x", "rest_0"]
    assert sig_kwargs["p"].u.name == "p_u" and sig_kwargs["flag"] is False


def test_the_traced_graph_is_an_ordinary_graph(eager):
    @tf.function
    def f(x):
        return tf.nn.relu(tf.matmul(x, x))

    concrete = f.get_concrete_function(tf.constant(np.eye(2, dtype=np.float32)))
    types = [op.type for op in concrete.graph.get_operations()]
    assert types.count("Placeholder") == 1 and "MatMul" in types and "Relu" in types
    assert isinstance(concrete.graph, tf.Graph)
    # A session runs it like any graph.
    with tf.Session(graph=concrete.graph) as s:
        out = s.run(concrete.outputs[0], {concrete.inputs[0]: [[1.0, -2.0], [0.0, 1.0]]})
    np.testing.assert_allclose(out, np.maximum(np.array([[1.0, -4.0], [0.0, 1.0]]), 0))


def test_variables_are_made_once_and_captured(eager):
    class Counter:
        def __init__(self):
            self.v = None

        @tf.function
        def __call__(self, x):
            if self.v is None:
                self.v = tf.Variable(tf.zeros([2]))
            self.v.assign_add(x)
            return self.v.read_value()

    c = Counter()
    np.testing.assert_allclose(c(tf.constant([1.0, 2.0])).numpy(), [1.0, 2.0])
    np.testing.assert_allclose(c(tf.constant([1.0, 2.0])).numpy(), [2.0, 4.0])
    np.testing.assert_allclose(c.v.numpy(), [2.0, 4.0])

    @tf.function
    def makes_one_each_call(x):
        v = tf.Variable(1.0)
        return v + x

    with pytest.raises(ValueError, match="singleton tf.Variables created on the first call"):
        makes_one_each_call(tf.constant(1.0))


def test_side_effects_run_in_program_order(eager):
    v = tf.Variable(1.0)

    @tf.function
    def f():
        v.assign(5.0)
        a = v.read_value()
        v.assign_add(1.0)
        return a, v.read_value()

    a, b = f()
    assert (float(a), float(b)) == (5.0, 6.0)
    v.assign(0.0)

    @tf.function
    def update_only(x):
        v.assign_add(x)  # read by nothing: runs anyway

    update_only(tf.constant(2.0))
    assert float(v.numpy()) == 2.0


def test_a_tensor_if_is_one_step_of_the_program_order(eager):
    """What follows a converted ``if`` sees the taken branch's effects, a branch's effects
    follow what came before it, and the same holds for branches and loops nested in each
    other (TF 2.21 returns these numbers; the read had run before the branch)."""
    v = tf.Variable(0)

    @tf.function
    def bump(x):
        if x > 0:
            v.assign_add(1)
        else:
            v.assign_add(10)
        return v.read_value()

    assert [int(bump(tf.constant(1))) for _ in range(3)] == [1, 2, 3]
    assert int(bump(tf.constant(-1))) == 13

    @tf.function
    def set_then_bump(x):
        v.assign(5)
        if x > 0:
            v.assign(v * 3)  # reads v after the assign before the if
        return v.read_value()

    assert [int(set_then_bump(tf.constant(1))) for _ in range(3)] == [15] * 3
    assert int(set_then_bump(tf.constant(0))) == 5

    @tf.function
    def nested(n):
        v.assign(0)
        for i in tf.range(n):
            if i % 2 == 0:
                v.assign_add(1)
                if i > 1:
                    v.assign(v * 10)
            else:
                v.assign_add(100)
            v.assign(v * 2)
        return v.read_value()

    expected = 0
    for i in range(5):
        expected += 1 if i % 2 == 0 else 100
        expected = expected * 10 if i % 2 == 0 and i > 1 else expected
        expected *= 2
    assert [int(nested(tf.constant(5))) for _ in range(3)] == [expected] * 3

    w = tf.Variable(1.0)

    @tf.function
    def tf_cond(b):
        tf.cond(b, lambda: w.assign_add(1.0), lambda: w.assign_sub(1.0))
        return w.read_value()

    assert float(tf_cond(tf.constant(True))) == 2.0
    assert float(tf_cond(tf.constant(False))) == 1.0


def test_tape_through_a_call_reaches_arguments_and_captured_variables(eager):
    w = tf.Variable([2.0, 3.0])

    @tf.function
    def f(x):
        return tf.reduce_sum(w * x * x)

    x = tf.constant([1.0, 4.0])
    with tf.GradientTape() as t:
        t.watch(x)
        y = f(x)
    gx, gw = t.gradient(y, [x, w])
    np.testing.assert_allclose(gx.numpy(), [4.0, 24.0])
    np.testing.assert_allclose(gw.numpy(), [1.0, 16.0])


def test_every_call_tells_the_tape_the_variables_it_reads(eager):
    """A tape watches the variables a call reads on every call, not only the call that traced
    (its gradient had been None from the second call on)."""
    w = tf.Variable(2.0)
    frozen = tf.Variable(5.0, trainable=False)

    @tf.function
    def f(x):
        return w * x + frozen

    for x in (3.0, -1.0, 4.0):
        with tf.GradientTape() as t:
            y = f(tf.constant(x))
        assert float(t.gradient(y, w)) == x
        assert [v.name for v in t.watched_variables()] == [w.name]
    with tf.GradientTape(watch_accessed_variables=False) as t:
        y = f(tf.constant(1.0))
    assert t.gradient(y, w) is None


def test_gradients_through_traced_branches_and_loops_after_effects(eager):
    """A branch that uses a variable the other does not, a stateful op before a loop: the
    gradient function builds and runs (it had refused the branch's zero gradient for the
    handle, and waited for the loop's end before making the loop's accumulators)."""
    w = tf.Variable(2.0)

    @tf.function
    def f(x):
        if x > 0:
            y = w * x * x
            w.assign_add(0.0)
        else:
            y = w * 3.0
        for i in tf.range(3):
            y = y + w * tf.cast(i, tf.float32)
        return y

    for x, (value, grad) in ((2.0, (14.0, 7.0)), (-2.0, (12.0, 6.0)), (1.0, (8.0, 4.0))):
        with tf.GradientTape() as t:
            y = f(tf.constant(x))
        assert float(y) == value
        assert float(t.gradient(y, w)) == grad


def test_a_learner_step_traced_whole(eager):
    w = tf.Variable(tf.zeros([3, 1]))
    opt = tf.train.AdamOptimizer(0.1)
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((64, 3)).astype(np.float32)
    ys = xs @ np.array([[1.0], [-2.0], [0.5]], np.float32)

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
        grads = tape.gradient(loss, [w])
        opt.apply_gradients(zip(grads, [w]))
        return loss

    losses = [float(step(xs, ys)) for _ in range(200)]
    assert step.experimental_get_tracing_count() == 1
    assert losses[-1] < 1e-3 < losses[0]
    np.testing.assert_allclose(w.numpy().ravel(), [1.0, -2.0, 0.5], atol=0.03)


def test_called_from_graph_mode_as_a_call_op_placed_and_differentiated():
    @tf.function
    def f(x):
        return tf.reduce_sum(x * x)

    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [3])
        with tf.device("/cpu:1"):
            y = f(x)
        (dx,) = tf.gradients(y, [x])
        call = [op for op in g.get_operations() if op.type == "PartitionedCall"][0]
        assert call.device.endswith("CPU:1")
        with tf.Session(config=tf.ConfigProto(device_count={"CPU": 2})) as s:
            out, grad = s.run([y, dx], {x: [1.0, 2.0, 3.0]})
            md = tf.RunMetadata()
            s.run(y, {x: [1.0, 1.0, 1.0]}, options=tf.RunOptions(
                trace_level=tf.RunOptions.FULL_TRACE), run_metadata=md)
    assert out == 14.0
    np.testing.assert_allclose(grad, [2.0, 4.0, 6.0])
    devices = [d.device for d in md.step_stats.dev_stats
               if any(n.node_name == call.name for n in d.node_stats)]
    assert devices and devices[0].endswith("CPU:1")


def test_called_from_a_graph_run_inline_on_one_device():
    """A one-device step runs its compiled straight-line schedule, which passes the step to a
    call's kernel (it once called the kernel without it: 'not enough values to unpack')."""
    @tf.function
    def inner(x):
        return x * 2.0 + 1.0

    @tf.function
    def outer(x):
        return inner(x) - inner(x * 0.5)

    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [3])
        y, z = inner(x), outer(x)
        with tf.Session() as s:
            got_y, got_z = s.run([y, z], {x: [0.0, 1.0, 2.0]})
    np.testing.assert_allclose(got_y, [1.0, 3.0, 5.0])
    np.testing.assert_allclose(got_z, [0.0, 1.0, 2.0])


def test_called_inside_a_while_loop_in_a_graph():
    @tf.function
    def double(x):
        return x * 2.0

    with tf.Graph().as_default():
        _, out = tf.while_loop(lambda i, v: i < 5, lambda i, v: (i + 1, double(v)),
                               [tf.constant(0), tf.constant(1.0)])
        with tf.Session() as s:
            assert s.run(out) == 32.0


def test_called_inside_an_eager_python_loop_reuses_its_trace(eager):
    @tf.function
    def step(x):
        return x + 1.0

    x = tf.constant(0.0)
    for _ in range(50):
        x = step(x)
    assert float(x) == 50.0
    assert step.experimental_get_tracing_count() == 1


def test_defun_has_no_autograph_by_default(eager):
    @defun
    def f(x):
        if x > 0:  # a Python if on a tensor being traced: refused as in graph mode
            return x
        return -x

    with pytest.raises(TypeError, match="Python `bool`"):
        f(tf.constant(1.0))
    g = tf.function(f.python_function)
    assert float(g(tf.constant(-2.0))) == 2.0


def test_a_kernel_error_inside_a_function_names_the_op_and_the_line(eager):
    @tf.function(input_signature=[tf.TensorSpec([None])])
    def f(x):
        return tf.reshape(x, [5])

    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        f(tf.constant([1.0, 2.0]))
    assert "Reshape" in str(info.value)
    assert "PartitionedCall" in str(info.value)


def test_methods_get_a_trace_per_instance(eager):
    class M:
        def __init__(self, k):
            self.k = k

        @tf.function
        def f(self, x):
            return x * self.k

    a, b = M(2.0), M(3.0)
    assert float(a.f(tf.constant(1.0))) == 2.0
    assert float(b.f(tf.constant(1.0))) == 3.0


def test_eager_tensors_a_function_closes_over_are_captured(eager):
    table = tf.constant([[1.0, 2.0], [3.0, 4.0]])

    @tf.function
    def f(x):
        return tf.matmul(x, table)

    np.testing.assert_allclose(f(tf.constant([[1.0, 1.0]])).numpy(), [[4.0, 6.0]])
    assert len(f.get_concrete_function(tf.constant([[1.0, 1.0]])).captured_inputs) == 1


def test_executing_eagerly_outside_functions_looks_past_traced_functions():
    seen = []

    @tf.function
    def probe(x):
        seen.append((tf.executing_eagerly(), tf.executing_eagerly_outside_functions()))
        return x

    with tf.Graph().as_default():
        assert not tf.executing_eagerly_outside_functions()
        probe(tf.constant(1.0))
    with eager_mode():
        assert tf.executing_eagerly_outside_functions()
        probe(tf.constant(1.0))
    assert seen == [(False, False), (False, True)]


def test_reduce_retracing_relaxes_shapes_as_tf_does(eager):
    """TF 2.21's counts for this program: a second shape traces once more with the differing
    dimension unknown, later shapes reuse it, a new rank relaxes to an unknown rank."""
    for option in ({"reduce_retracing": True}, {"experimental_relax_shapes": True}):
        @tf.function(**option)
        def f(x):
            return tf.reduce_sum(x * 2.0)

        counts = []
        for shape in ([1, 3], [2, 3], [3, 3], [4, 3], [2, 3, 4], [5]):
            np.testing.assert_allclose(float(f(tf.ones(shape))), 2.0 * np.prod(shape))
            counts.append(f.experimental_get_tracing_count())
        assert counts == [1, 2, 2, 2, 3, 3]
        assert [c.inputs[0].shape.as_list() if c.inputs[0].shape.ndims is not None else None
                for c in f.concrete_functions()] == [[1, 3], [None, 3], None]

    @tf.function
    def plain(x):
        return x + 1.0

    for n in (1, 2, 3):
        plain(tf.ones([n]))
    assert plain.experimental_get_tracing_count() == 3  # TF's default: no relaxing


def test_a_general_trace_serves_every_call_it_fits(eager):
    @tf.function
    def rows(x):
        return tf.shape(x)[0]

    concrete = rows.get_concrete_function(tf.TensorSpec([None, 3], tf.float32))
    assert concrete.inputs[0].shape.as_list() == [None, 3]
    assert int(concrete(tf.ones([7, 3]))) == 7
    assert int(rows(tf.ones([9, 3]))) == 9
    assert rows.experimental_get_tracing_count() == 1
    assert int(rows(tf.ones([9, 4]))) == 9  # does not fit: a trace of its own
    assert rows.experimental_get_tracing_count() == 2

    @tf.function(jit_compile=True, experimental_implements="x")
    def accepted(x):
        return x * 2.0

    assert float(accepted(tf.constant(2.0))) == 4.0
    with pytest.raises(TypeError, match="unexpected keyword argument 'experimental_nonsense'"):
        tf.function(lambda x: x, experimental_nonsense=True)


def test_differentiating_a_call_runs_nothing_of_it_again(eager):
    """A call a tape records runs a forward that also gives what its gradient reads: the
    gradient is taken at the values of that call, and its updates and random draws happen
    once (TF 2.21: y=4, dy/dx=2, w=2 for the first; they had been 4, 3 and 3)."""
    w = tf.Variable(1.0)

    @tf.function
    def bump_then_scale(x):
        w.assign_add(1.0)
        return w * x

    x = tf.constant(2.0)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = bump_then_scale(x)
    assert (float(y), float(tape.gradient(y, x)), float(w)) == (4.0, 2.0, 2.0)

    tf.set_random_seed(0)

    @tf.function
    def dropped(x):
        return tf.reduce_sum(tf.nn.dropout(x * 3.0, keep_prob=0.5))

    ones = tf.ones([1000])
    with tf.GradientTape() as tape:
        tape.watch(ones)
        y = dropped(ones)
    grad = tape.gradient(y, ones).numpy()
    assert float(y) > 0 and np.isclose(grad.sum(), float(y))  # the forward's own mask

    # A loop: its saved values cross from the forward call to the gradient's.
    v = tf.Variable(0.5)
    calls = tf.Variable(0)

    @tf.function
    def rnn(h, n):
        for _ in tf.range(n):
            h = tf.tanh(h * v + 1.0)
            calls.assign_add(1)
        return h

    h0 = tf.constant([0.1, 0.2])
    with tf.GradientTape() as tape:
        tape.watch(h0)
        y = tf.reduce_sum(rnn(h0, tf.constant(3)))
    gh, gv = tape.gradient(y, [h0, v])

    def reference(h, vv):
        for _ in range(3):
            h = np.tanh(h * vv + 1.0)
        return h.sum()

    eps = 1e-3
    base = np.array([0.1, 0.2])
    np.testing.assert_allclose(float(gv), (reference(base, 0.5 + eps) -
                                           reference(base, 0.5 - eps)) / (2 * eps), rtol=1e-4)
    np.testing.assert_allclose(gh.numpy(), [(reference(base + eps * e, 0.5) -
                                             reference(base - eps * e, 0.5)) / (2 * eps)
                                            for e in np.eye(2)], rtol=1e-3)
    assert int(calls) == 3


def test_a_differentiated_call_with_branches_runs_once(eager):
    """Values the gradient reads inside a tensor if (nested ones too) leave the forward call
    and stay dead in the gradient where their branch did not run: a counter moves once a
    call (TF 2.21: 1, 2, 3), gradients are TF's, a dropout mask drawn in a branch is the one
    the gradient uses."""
    w = tf.Variable(0.5)
    calls = tf.Variable(0)

    @tf.function
    def branches(x):
        calls.assign_add(1)
        if tf.reduce_sum(x) > 0:
            y = x * w
            if tf.reduce_sum(x) > 2.5:
                y = y * y * w
        else:
            y = x * x
        return tf.reduce_sum(y)

    want = [(0.625, [0.25, 0.5], 3.75), (1.0, [0.5, 0.5], 2.0), (5.0, [-2.0, -4.0], 0.0)]
    for k, (xs, (value, gx, gw)) in enumerate(zip(([1.0, 2.0], [1.0, 1.0], [-1.0, -2.0]),
                                                   want)):
        x = tf.constant(xs)
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = branches(x)
        got_x, got_w = tape.gradient(y, [x, w])
        assert float(y) == value and int(calls) == k + 1
        np.testing.assert_allclose(got_x.numpy(), gx)
        np.testing.assert_allclose(float(got_w), gw)

    tf.set_random_seed(1)

    @tf.function
    def maybe_dropped(x, training):
        if training:
            x = tf.nn.dropout(x, keep_prob=0.5)
        return tf.reduce_sum(x * 2.0)

    ones = tf.ones([1000])
    with tf.GradientTape() as tape:
        tape.watch(ones)
        y = maybe_dropped(ones, tf.constant(True))
    assert np.isclose(tape.gradient(y, ones).numpy().sum(), float(y))


def test_a_tape_that_does_not_watch_a_variable_gives_it_no_gradient(eager):
    """TF 2.21: with ``watch_accessed_variables=False`` a variable a traced call reads gets
    None, as it does from eager ops (the call's gradient had reached it through the call)."""
    w = tf.Variable(3.0)

    @tf.function
    def f(x):
        return x * w

    x = tf.constant(2.0)
    with tf.GradientTape(watch_accessed_variables=False) as tape:
        tape.watch(x)
        y = f(x)
    gx, gw = tape.gradient(y, [x, w])
    assert float(gx) == 3.0 and gw is None


def test_a_traced_step_differentiates_a_traced_model_once(eager):
    """A traced train step whose tape records a call of another traced function that
    updates state: the update happens once, the step's numbers are NumPy's."""
    w = tf.Variable(0.5)
    calls = tf.Variable(0)

    @tf.function
    def model(x):
        calls.assign_add(1)
        return tf.reduce_sum(x * w)

    opt = tf.train.GradientDescentOptimizer(0.1)

    @tf.function
    def step(x):
        with tf.GradientTape() as tape:
            loss = model(x)
        opt.apply_gradients(zip(tape.gradient(loss, [w]), [w]))
        return loss

    assert float(step(tf.constant([1.0, 2.0]))) == 1.5
    np.testing.assert_allclose(float(w), 0.5 - 0.1 * 3.0)
    assert int(calls) == 1


def test_gradients_inside_branches_and_loops_reach_values_from_outside(eager):
    """tape.gradient in a converted if or loop, of a loss computed before it (TF 2.21: 6.0,
    then w = 2.4; 18.0 from a persistent tape read in a loop), and a tape bound in a branch
    or rebound in a loop (TF's: 6.0 and 3.0; 18.0)."""
    w = tf.Variable(3.0)

    @tf.function
    def step_if(x):
        with tf.GradientTape() as tape:
            loss = w * w
        g = tf.constant(0.0)
        if x > 0:
            g = tape.gradient(loss, w)
            w.assign_sub(0.1 * g)
        return g

    assert float(step_if(tf.constant(1.0))) == 6.0
    np.testing.assert_allclose(float(w), 2.4)

    w.assign(3.0)

    @tf.function
    def read_in_loop(n):
        with tf.GradientTape(persistent=True) as tape:
            loss = w * w
        total = tf.constant(0.0)
        for _ in tf.range(n):
            total += tape.gradient(loss, w)
        return total

    assert float(read_in_loop(tf.constant(3))) == 18.0

    @tf.function
    def tape_in_branch(x):
        s = tf.constant(0.0)
        if x > 0:
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = x * x
            s = tape.gradient(y, x)
        else:
            s = -x
        return s

    assert float(tape_in_branch(tf.constant(3.0))) == 6.0
    assert float(tape_in_branch(tf.constant(-3.0))) == 3.0

    w.assign(1.0)

    @tf.function
    def rebound_in_loop(x):
        with tf.GradientTape() as tape:
            y = w * x
        g0 = tape.gradient(y, w)
        i = tf.constant(0)
        while i < 3:
            with tf.GradientTape() as tape:
                y = w * w * x
            g = tape.gradient(y, w)
            w.assign_add(g)
            i += 1
        return g0, g

    g0, g = rebound_in_loop(tf.constant(1.0))
    assert (float(g0), float(g), float(w)) == (1.0, 18.0, 27.0)


def test_differentiated_calls_with_tensor_arrays_and_changed_python_state(eager):
    """map_fn and scan (TensorArrays) in a traced call under a tape give TF's numbers (the
    split forward keeps such state to itself); a function whose Python code now builds
    another graph (a global changed since the trace) still returns what it traced, and its
    gradient is refused rather than taken of the other function."""
    w = tf.Variable(2.0)

    @tf.function
    def mapped(x):
        return tf.reduce_sum(tf.map_fn(lambda a: a * a * w, x))

    with tf.GradientTape() as tape:
        y = mapped(tf.constant([1.0, 3.0, 2.0]))
    assert (float(y), float(tape.gradient(y, w))) == (28.0, 14.0)

    @tf.function
    def scanned(x):
        return tf.scan(lambda a, b: a + b * w, x)

    xs = tf.constant([1.0, 3.0, 2.0])
    with tf.GradientTape() as tape:
        tape.watch(xs)
        y = tf.reduce_sum(scanned(xs))
    assert float(y) == 19.0
    np.testing.assert_allclose(tape.gradient(y, xs).numpy(), [3.0, 4.0, 2.0])

    state = {"scale": 2.0}

    @tf.function
    def scaled(x):
        return x * state["scale"]

    x = tf.constant(1.0)
    scaled(x)
    state["scale"] = 10.0
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = scaled(x)
    assert float(y) == 2.0
    # The traced graph is differentiated (as TF's), not the function traced again.
    assert float(tape.gradient(y, x)) == 2.0


def test_a_differentiated_call_runs_its_python_once(eager):
    """The gradient of a call copies the traced graph (TF differentiates the traced graph):
    the Python function, its side effects included, ran once, for the trace; a loop whose
    variable changes shape keeps its shape invariant in the copy."""
    traced = []
    w = tf.Variable(2.0)

    @tf.function
    def grow(x):
        traced.append(1)
        _, out = tf.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, tf.concat([v, v * w], 0)),
                               [0, x], shape_invariants=[tf.TensorShape([]),
                                                          tf.TensorShape([None])])
        return tf.reduce_sum(tf.cond(out[0] > 0, lambda: out * out, lambda: -out))

    x = tf.constant([1.0, -1.0])
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = grow(x)
    dx, dw = tape.gradient(y, [x, w])
    assert traced == [1]
    with tf.GradientTape() as tape:  # the same, eagerly
        tape.watch(x)
        v = x
        for _ in range(3):
            v = tf.concat([v, v * w], 0)
        expected = tape.gradient(tf.reduce_sum(v * v), [x, w])
    np.testing.assert_allclose(float(y), float(tf.reduce_sum(v * v)))
    np.testing.assert_allclose(dx.numpy(), expected[0].numpy())
    np.testing.assert_allclose(float(dw), float(expected[1]))

    @tf.function
    def doubled(x):
        traced.append(2)
        return tf.reduce_sum(tf.while_loop(lambda v: tf.reduce_sum(v) < 10.0, lambda v: v * 2.0,
                                           [x]) ** 2)

    with tf.Graph().as_default():  # TF 1.x gradients of a call in a graph
        xg = tf.placeholder(tf.float32, [2])
        (g,) = tf.gradients(doubled(xg), xg)
        with tf.Session() as sess:
            np.testing.assert_allclose(sess.run(g, {xg: [1.0, 2.0]}), [32.0, 64.0])
    assert traced == [1, 2]  # no trace for the gradients


def test_the_gradient_of_a_traced_gather_stays_sparse(eager):
    """A gather inside a traced function gives ``IndexedSlices`` through the call, as TF's
    (it had been a dense table-sized gradient): under a tape, and under TF 1.x
    ``tf.gradients`` of a call in a graph; the values equal eager execution's."""
    table = tf.Variable(np.arange(40, dtype=np.float32).reshape(10, 4) / 10)
    ids = tf.constant([1, 3, 3])

    def loss():
        return tf.reduce_sum(tf.gather(table, ids) ** 2)

    grads = []
    for fn in (loss, tf.function(loss)):
        with tf.GradientTape() as tape:
            y = fn()
        g = tape.gradient(y, table)
        assert isinstance(g, tf.IndexedSlices)
        grads.append(tf.math.unsorted_segment_sum(g.values, g.indices, 10).numpy())
    np.testing.assert_array_equal(grads[1], grads[0])
    want = np.zeros((10, 4), np.float32)
    np.add.at(want, [1, 3, 3], 2 * table.numpy()[[1, 3, 3]])
    np.testing.assert_allclose(grads[1], want, rtol=1e-6)

    g = tf.Graph()
    with g.as_default():
        v = tf.get_variable("v", initializer=np.ones((5, 2), np.float32), use_resource=True)
        f = tf.function(lambda i: tf.reduce_sum(tf.gather(v, i)))
        grad = tf.gradients(f(tf.constant([0, 2])), v)[0]
        assert isinstance(grad, tf.IndexedSlices)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            value = sess.run(grad)
    assert value.indices.tolist() == [0, 2] and value.values.tolist() == [[1, 1], [1, 1]]
