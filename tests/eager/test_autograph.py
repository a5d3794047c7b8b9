"""AutoGraph: Python control flow becomes cond/while_loop/print ops when its conditions are
tensors being traced, stays Python otherwise, and what cannot convert is refused naming the
line."""

from __future__ import annotations

import collections
import inspect

import numpy as np
import pytest

import dflab as tf
from dflab.autograph import ConversionError, convert
from dflab.eager import eager_mode


@pytest.fixture(autouse=True)
def _eager():
    with eager_mode():
        yield


def _op_types(fn, *args):
    concrete = fn.get_concrete_function(*args)
    return [op.type for op in concrete.graph.get_operations()]


def collatz_steps(n):
    steps = 0
    while n > 1:
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        steps += 1
    return steps


def _py_collatz(n):
    steps = 0
    while n > 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps


def test_a_tensor_while_and_if_become_a_while_loop_with_a_cond():
    f = tf.function(collatz_steps)
    for n in (1, 6, 27, 97):
        assert int(f(tf.constant(n))) == _py_collatz(n)
    types = _op_types(f, tf.constant(27))
    assert {"Enter", "Exit", "LoopCond", "NextIteration", "Switch", "Merge"} <= set(types)
    # One trace serves every n: the loop is in the graph.
    assert f.experimental_get_tracing_count() == 1


def test_python_conditions_stay_python():
    f = tf.function(collatz_steps)
    assert int(f(27)) == _py_collatz(27)  # a Python int: the loop unrolls at trace time
    types = _op_types(f, 27)
    assert "LoopCond" not in types and "Switch" not in types


def test_for_over_tf_range_with_break_and_continue():
    def odd_sum_until(n, limit):
        total = tf.constant(0)
        for i in tf.range(n):
            if i % 2 == 0:
                continue
            if total > limit:
                break
            total += i
        return total

    f = tf.function(odd_sum_until)

    def ref(n, limit):
        total = 0
        for i in range(n):
            if i % 2 == 0:
                continue
            if total > limit:
                break
            total += i
        return total

    for n, limit in ((10, 100), (20, 12), (0, 5)):
        assert int(f(tf.constant(n), tf.constant(limit))) == ref(n, limit)
    assert "LoopCond" in _op_types(f, tf.constant(10), tf.constant(5))


def test_for_over_a_tensor_iterates_its_rows():
    def row_norms(m):
        out = tf.constant(0.0)
        for row in m:
            out += tf.reduce_sum(row * row)
        return out

    m = np.arange(6.0, dtype=np.float32).reshape(3, 2)
    f = tf.function(row_norms, input_signature=[tf.TensorSpec([None, 2])])
    assert float(f(m)) == float((m * m).sum())


def test_early_returns_become_a_cond_and_boolean_operators_convert():
    def clip_sign(x):
        if x > 0 and x < 10:
            return x
        if not x > -10:
            return tf.constant(-10.0)
        return tf.minimum(x, 10.0)

    f = tf.function(clip_sign)
    for v, want in ((3.0, 3.0), (30.0, 10.0), (-30.0, -10.0), (-3.0, -3.0)):
        assert float(f(tf.constant(v))) == want
    assert "Merge" in _op_types(f, tf.constant(1.0))


def test_print_on_a_traced_tensor_is_a_print_op(capfd):
    def show(x):
        for i in tf.range(3):
            print("step", i)
        print("python side")
        return x

    f = tf.function(show)
    f(tf.constant(1.0))
    out = capfd.readouterr().out
    assert "python side" in out  # printed once, while tracing
    assert "step 0" in out and "step 2" in out  # printed by the graph's op, each iteration
    f(tf.constant(2.0))
    out = capfd.readouterr().out
    assert "python side" not in out and "step 1" in out


def test_a_variable_defined_in_one_branch_only_is_refused_naming_the_line():
    def bad(x):
        if x > 0:
            y = x
        return y

    line = inspect.getsourcelines(bad)[1] + 1
    with pytest.raises(ConversionError, match=f"'y' must also be initialized in the else "
                                              f"branch .*test_autograph.py:{line}"):
        tf.function(bad)(tf.constant(1.0))


def test_a_return_inside_a_tensor_loop_is_refused_naming_the_line():
    def bad(n):
        i = tf.constant(0)
        while i < n:
            if i > 3:
                return i
            i += 1
        return i

    line = inspect.getsourcelines(bad)[1] + 2
    with pytest.raises(ConversionError, match=f"`while` at .*test_autograph.py:{line}.*"
                                              "its body returns"):
        tf.function(bad)(tf.constant(10))
    assert int(bad(tf.constant(10))) == 4  # eagerly, the same code is plain Python


def test_converted_code_keeps_the_users_line_numbers():
    def fails(x):
        if x > 0:
            y = tf.reshape(x, [3])  # a static shape error while tracing
        else:
            y = x
        return y

    line = inspect.getsourcelines(fails)[1] + 2
    with pytest.raises(ValueError) as info:
        tf.function(fails)(tf.constant(1.0))
    assert f"test_autograph.py:{line}" in str(info.value)


def test_convert_leaves_what_it_cannot_read_as_it_is():
    twins = [lambda x: x + 1, lambda x: x - 1]  # one line: which is which cannot be read
    assert convert(twins[0]) is twins[0]
    assert convert(len) is len
    namespace = {}
    exec("def typed(x):\n    return x\n", namespace)  # no file holds its source
    assert convert(namespace["typed"]) is namespace["typed"]


def test_closures_and_defaults_survive_conversion():
    k = 3.0

    def scale(x, n=2):
        total = x
        for _ in range(n):
            total = total * k
        return total

    f = tf.function(scale)
    assert float(f(tf.constant(1.0))) == 9.0
    assert float(f(tf.constant(1.0), 3)) == 27.0


def _linear_batches():
    """64 rows of a linear model's data, and them as a dataset of batches of 16."""
    rng = np.random.RandomState(0)
    x_all = rng.randn(64, 3).astype(np.float32)
    y_all = x_all @ np.array([[1.0], [-2.0], [0.5]], np.float32)
    return x_all, y_all, tf.data.Dataset.from_tensor_slices((x_all, y_all)).batch(16)


def test_a_with_block_in_a_converted_loop_runs_each_iteration():
    """The common training loop: a tape inside a ``for`` over a dataset in a ``tf.function``,
    each step's gradient applied (the numbers of the same loop in NumPy); a ``break`` and a
    ``continue`` inside a ``with`` block are lowered like any other."""
    x_all, y_all, ds = _linear_batches()
    w = tf.Variable(tf.zeros([3, 1]))
    opt = tf.train.GradientDescentOptimizer(0.1)

    @tf.function
    def epoch(ds):
        total = tf.constant(0.0)
        for x, y in ds:
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
            grads = tape.gradient(loss, [w])
            opt.apply_gradients(zip(grads, [w]))
            total += loss
        return total

    w_np = np.zeros([3, 1], np.float32)
    for _ in range(3):
        expected = 0.0
        for i in range(0, 64, 16):
            x, y = x_all[i:i + 16], y_all[i:i + 16]
            r = x @ w_np - y
            expected += np.mean(r ** 2)
            w_np -= 0.1 * (2 * x.T @ r / r.size)
        np.testing.assert_allclose(float(epoch(ds)), expected, rtol=1e-5)
        np.testing.assert_allclose(w.numpy(), w_np, rtol=1e-5, atol=1e-7)
    assert epoch.experimental_get_tracing_count() == 1

    @tf.function
    def jumps(n):
        s = tf.constant(0)
        for i in tf.range(n):
            with tf.name_scope("step"):
                if i % 2 == 1:
                    continue
                if i > 6:
                    break
                s += i
        return s

    assert int(jumps(tf.constant(20))) == 0 + 2 + 4 + 6
    assert "LoopCond" in _op_types(jumps, tf.constant(20))


def test_enumerate_and_zip_of_datasets_become_dataset_loops():
    @tf.function
    def weighted(ds):
        s = tf.constant(0, tf.int64)
        for i, x in enumerate(ds, 1):
            s += i * x
        return s

    assert int(weighted(tf.data.Dataset.range(5))) == sum((i + 1) * i for i in range(5))
    assert "ZipDataset" in _op_types(weighted, tf.data.Dataset.range(5))

    @tf.function
    def dot(a, b):
        s = tf.constant(0, tf.int64)
        for x, y in zip(a, b):
            s += x * y
        return s

    got = dot(tf.data.Dataset.range(5), tf.data.Dataset.range(10, 20))
    assert int(got) == sum(x * y for x, y in zip(range(5), range(10, 20)))

    @tf.function
    def python_lists(n):
        s = 0
        for i, (a, b) in enumerate(zip([1, 2, 3], [4, 5, 6])):
            s += i * a * b
        return n + s

    assert int(python_lists(tf.constant(1))) == 1 + 0 * 4 + 1 * 10 + 2 * 18
    assert list(tf.data.Dataset.range(3).enumerate(5).as_numpy_iterator()) == [
        (5, 0), (6, 1), (7, 2)]


def test_a_shadowed_builtin_is_called_as_the_user_wrote_it():
    def f(x):
        def enumerate(xs):  # noqa: A001 - the point of the test
            return [("mine", v) for v in xs]

        return x, [tag for tag, _ in enumerate([1, 2])]

    out = tf.function(f)(tf.constant(1.0))
    assert [t.numpy() for t in out[1]] == [b"mine", b"mine"]


SCALE = 2.0


def test_converted_code_reads_the_modules_globals_as_they_are_now():
    """A global rebound after the first trace is what a retrace sees (the converted function
    had kept a copy of the module's globals), and conversion adds no name to the module."""
    global SCALE

    @tf.function
    def f(x, k):
        if x > 0:
            y = x * SCALE
        else:
            y = x
        return y + k

    before = set(globals())
    try:
        assert float(f(tf.constant(1.0), 0)) == 2.0
        SCALE = 10.0
        assert float(f(tf.constant(1.0), 1)) == 11.0  # a new Python value: a new trace
    finally:
        SCALE = 2.0
    assert set(globals()) == before


def test_a_variable_a_tensor_loop_first_defines_is_read_after_it():
    """TF's rule: a variable first assigned in the loop and read after it starts as zeros of
    the type one staged iteration gives it (TF 2.21 returns 6, 16 and 3 for the first three);
    the loop must then run at least once. A variable only the body reads is not carried,
    so a loop that never runs is fine."""
    @tf.function
    def last_double(n):
        for i in tf.range(n):
            last = i * 2
        return last

    assert int(last_double(tf.constant(4))) == 6
    with pytest.raises(tf.errors.InvalidArgumentError, match="must iterate at least once: "
                                                             "it defines 'last'"):
        last_double(tf.constant(0))

    @tf.function
    def square_of_last(n):
        i = tf.constant(0)
        while i < n:
            sq = i * i
            i += 1
        return sq

    assert int(square_of_last(tf.constant(5))) == 16

    @tf.function
    def python_value(n):
        for _ in tf.range(n):
            k = 3
        return k

    assert int(python_value(tf.constant(2))) == 3

    @tf.function
    def last_batch(ds):
        for x in ds:
            last = x
        return last

    np.testing.assert_array_equal(last_batch(tf.data.Dataset.range(10).batch(3)).numpy(), [9])

    @tf.function
    def local_only(n):
        s = tf.constant(0)
        for i in tf.range(n):
            t = i * 2
            s += t
        return s

    assert [int(local_only(tf.constant(n))) for n in (0, 3)] == [0, 6]

    def keeps_an_object(n):
        for _ in tf.range(n):
            o = object()
        return o

    line = inspect.getsourcelines(keeps_an_object)[1] + 1
    with pytest.raises(ConversionError, match=f"'o' must be defined before the loop at "
                                              f".*test_autograph.py:{line}"):
        tf.function(keeps_an_object)(tf.constant(2))


def test_the_usual_epoch_returns_its_last_loss_and_step():
    """An Adam epoch over a dataset in one tf.function, returning the last step's index and
    loss: the numbers of the same loop in NumPy."""
    x_all, y_all, ds = _linear_batches()
    w = tf.Variable(tf.zeros([3, 1]))
    opt = tf.train.AdamOptimizer(0.1)

    @tf.function
    def epoch(ds):
        for step, (x, y) in enumerate(ds):  # noqa: B007 - read after the loop
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
            opt.apply_gradients(zip(tape.gradient(loss, [w]), [w]))
        return step, loss

    w_np, m, v, t = np.zeros([3, 1]), np.zeros([3, 1]), np.zeros([3, 1]), 0
    for _ in range(3):
        for i in range(0, 64, 16):
            x, y = x_all[i:i + 16], y_all[i:i + 16]
            r = x @ w_np - y
            loss, g = np.mean(r ** 2), 2 * x.T @ r / r.size
            t += 1
            m, v = 0.9 * m + 0.1 * g, 0.999 * v + 0.001 * g * g
            w_np = w_np - 0.1 * np.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t) * m / (
                np.sqrt(v) + 1e-8)
        step, got = epoch(ds)
        assert int(step) == 3
        np.testing.assert_allclose(float(got), loss, rtol=1e-5)
    np.testing.assert_allclose(w.numpy(), w_np, rtol=1e-4)


def test_liveness_counts_augmented_reads_try_blocks_and_the_next_iteration():
    """What a converted statement hands on (TF 2.21's numbers): ``s += x`` reads ``s``; an if
    in a ``try``/``finally`` hands on everything; a value local to a branch inside a loop,
    or a tape bound there, stays local."""
    @tf.function
    def mean_of_range(n):
        total = tf.constant(0.0)
        count = tf.constant(0.0)

        def mean():
            return total / count

        for i in tf.range(n):
            total += tf.cast(i, tf.float32)
            count += 1.0
        return mean()

    assert float(mean_of_range(tf.constant(4))) == 1.5

    @tf.function
    def in_finally(x):
        y = tf.constant(0.0)
        try:
            pass
        finally:
            if x > 0:
                y = x * 2.0
        return y

    assert float(in_finally(tf.constant(3.0))) == 6.0

    @tf.function
    def read_in_finally(x):
        y = tf.constant(1.0)
        try:
            if x > 0:
                y = x * 2.0
        finally:
            y = y + 1.0
        return y

    assert float(read_in_finally(tf.constant(3.0))) == 7.0

    @tf.function
    def local_to_branch(n, x):
        total = tf.constant(0.0)
        for i in tf.range(n):
            if i % 2 == 0:
                g = x * 2.0
                total += g
        return total

    assert float(local_to_branch(tf.constant(4), tf.constant(2.0))) == 8.0

    @tf.function
    def tape_in_a_branch_of_a_loop(x):
        i = tf.constant(0)
        s = tf.constant(0.0)
        while i < 3:
            if x > 0:
                with tf.GradientTape() as tape:
                    tape.watch(x)
                    y = x * x
                s += tape.gradient(y, x)
            i += 1
        return s

    assert float(tape_in_a_branch_of_a_loop(tf.constant(3.0))) == 18.0


State = collections.namedtuple("State", "h c")


def test_tensor_statements_carry_nested_structures():
    """Loop and branch variables may be tuples, lists, dicts and named tuples of tensors (Python
    numbers in them become tensors): TF 2.21 gives the same values and types."""
    @tf.function
    def pair(x):
        s = (tf.zeros([2]), 0)
        for _ in tf.range(3):
            s = (s[0] + x, s[1] + 1)
        return s

    vec, count = pair(tf.constant([1.0, 2.0]))
    np.testing.assert_array_equal(vec.numpy(), [3.0, 6.0])
    assert count.dtype == tf.int32 and int(count) == 3

    @tf.function
    def as_list(n):
        v = [0.0, 1.0]
        for _ in tf.range(n):
            v = [v[0] + 1.0, v[1] * 2.0]
        return v

    out = as_list(tf.constant(3))
    assert isinstance(out, list) and [float(t) for t in out] == [3.0, 8.0]

    @tf.function
    def cell(x):
        s = State(tf.zeros([2]), tf.zeros([2]))
        i = 0
        while i < 3:
            s = State(s.h + x, s.c * 2.0 + 1.0)
            i += 1
        return s

    s = cell(tf.constant([1.0, 2.0]))
    assert isinstance(s, State)
    np.testing.assert_array_equal(s.h.numpy(), [3.0, 6.0])
    np.testing.assert_array_equal(s.c.numpy(), [7.0, 7.0])

    @tf.function
    def scaled(x):
        d = {"a": x, "b": tf.zeros([3])}
        if tf.reduce_sum(x) > 0:
            d = {"a": x * 2.0, "b": d["b"] + 1.0}
        return d

    for xs, a, b in (([1.0, 2.0], [2.0, 4.0], 1.0), ([-1.0, 0.0], [-1.0, 0.0], 0.0)):
        d = scaled(tf.constant(xs))
        np.testing.assert_array_equal(d["a"].numpy(), a)
        np.testing.assert_array_equal(d["b"].numpy(), [b] * 3)
    assert scaled.experimental_get_tracing_count() == 1

    @tf.function
    def last_pair(n):  # first defined in the loop: zeros of the staged structure
        for i in tf.range(n):
            p = (i, tf.cast(i, tf.float32) * 2.0)
        return p

    i, f = last_pair(tf.constant(4))
    assert (int(i), float(f)) == (3, 6.0)


def test_a_changed_structure_is_a_type_error_naming_the_variable_and_line():
    def grows(x):
        s = (x, x)
        for _ in tf.range(3):
            s = (s[0], s[1], x)
        return s

    def branches(x):
        s = (x, x)
        if x > 0:
            s = x
        return s

    for fn, what in ((grows, "does not have the same nested structure after one iteration "
                             "of the loop at"),
                     (branches, "must have the same nested structure in the main and else "
                                "branches")):
        line = inspect.getsourcelines(fn)[1] + 2
        with pytest.raises(TypeError, match=f"'s' {what} .*test_autograph.py:{line}"):
            tf.function(fn)(tf.constant(1.0))


def _np_rnn(x, w):
    h = np.zeros((x.shape[1], w.shape[1]))
    outs = []
    for row in x:
        h = np.tanh(row @ w + h)
        outs.append(h)
    return np.stack(outs)


def test_tensor_arrays_are_carried_by_loops_and_branches():
    """The usual TF 2 recurrence: a TensorArray written in a ``for`` over ``tf.range`` (and in
    a tensor ``while`` and ``if``), its gradient under a tape equal to eager execution's and to
    central differences."""
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((4, 2, 3))
    w = tf.Variable(rng.standard_normal((3, 3)) * 0.5)

    def rnn(x):
        outs = tf.TensorArray(tf.float64, size=tf.shape(x)[0])
        h = tf.zeros([2, 3], tf.float64)
        for i in tf.range(tf.shape(x)[0]):
            h = tf.tanh(tf.matmul(x[i], w) + h)
            outs = outs.write(i, h)
        out = outs.stack()
        return tf.reduce_sum(out * out), out

    x = tf.constant(xs)
    traced = tf.function(rnn)
    grads = []
    for fn in (rnn, traced):
        with tf.GradientTape() as tape:
            y, out = fn(x)
        np.testing.assert_allclose(out.numpy(), _np_rnn(xs, w.numpy()), rtol=1e-12)
        grads.append(tape.gradient(y, w).numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-12)
    w0, eps, numeric = w.numpy(), 1e-6, np.zeros((3, 3))
    for k in np.ndindex(3, 3):
        for sign in (1, -1):
            bumped = w0.copy()
            bumped[k] += sign * eps
            numeric[k] += sign * np.sum(_np_rnn(xs, bumped) ** 2) / (2 * eps)
    np.testing.assert_allclose(grads[1], numeric, rtol=1e-6, atol=1e-8)

    @tf.function
    def doublings(x):
        ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
        i = 0
        while tf.reduce_sum(x) < 100.0:
            x = x * 2.0
            ta = ta.write(i, x)
            i += 1
        if i > 5:
            ta = ta.write(i, -x)
        else:
            ta = ta.write(i, x)
        return ta.stack(), i

    stacked, n = doublings(tf.constant([1.0, 2.0]))
    assert int(n) == 6
    np.testing.assert_array_equal(stacked.numpy(),
                                  [[2.0 ** k, 2.0 ** (k + 1)] for k in range(1, 7)]
                                  + [[-64.0, -128.0]])


def test_set_loop_options_gives_the_loop_its_invariants_and_limits():
    @tf.function
    def growing(n):
        s = tf.zeros([0])
        for i in tf.range(n):
            tf.autograph.experimental.set_loop_options(
                shape_invariants=[(s, tf.TensorShape([None]))])
            s = tf.concat([s, [tf.cast(i, tf.float32)]], 0)
        return s

    np.testing.assert_array_equal(growing(tf.constant(3)).numpy(), [0.0, 1.0, 2.0])
    assert growing.experimental_get_tracing_count() == 1
    assert growing(tf.constant(5)).shape == (5,)

    @tf.function
    def capped(n):  # TF 2.21: (3, 3.0) for n = 10
        i = tf.constant(0)
        s = tf.constant(0.0)
        while i < n:
            tf.autograph.experimental.set_loop_options(maximum_iterations=3,
                                                       parallel_iterations=1)
            s += 1.0
            i += 1
        return i, s

    assert [float(t) for t in capped(tf.constant(10))] == [3.0, 3.0]
    assert [float(t) for t in capped(tf.constant(2))] == [2.0, 2.0]
    concrete = capped.get_concrete_function(tf.TensorSpec([], tf.int32))
    enters = [op for op in concrete.graph.get_operations() if op.type == "Enter"]
    assert enters and {op.attrs["parallel_iterations"] for op in enters} == {1}

    def no_invariant(n):
        s = tf.zeros([0])
        for _ in tf.range(n):
            s = tf.concat([s, [1.0]], 0)
        return s

    line = inspect.getsourcelines(no_invariant)[1] + 2
    with pytest.raises(ValueError, match=f"'s' has shape \\(0,\\) before the loop at "
                                         f".*test_autograph.py:{line}, but shape \\(1,\\) after "
                                         "one iteration. Use tf.autograph.experimental"):
        tf.function(no_invariant)(tf.constant(2))

    def typo(n):
        for _ in tf.range(n):
            tf.autograph.experimental.set_loop_options(max_iterations=2)
            n -= 1
        return n

    with pytest.raises(TypeError, match="unexpected arguments: \\['max_iterations'\\]"):
        tf.function(typo)(tf.constant(2))


def test_do_not_convert_to_code_and_trace(capsys):
    @tf.autograph.experimental.do_not_convert
    def python_if(x):
        if x > 0:
            return x
        return -x

    with pytest.raises(TypeError, match="bool"):
        tf.function(python_if)(tf.constant(2.0))  # a tensor condition, left to Python
    assert float(tf.function(python_if)(3.0)) == 3.0

    def doubling(n):
        i = 0
        while i < n:
            tf.autograph.trace("step", i)
            i = i * 2 + 1
        return i

    code = tf.autograph.to_code(doubling)
    assert "ag__.while_stmt(" in code and "def doubling(n):" in code
    assert int(tf.function(doubling)(tf.constant(5))) == 7
    assert "step" in capsys.readouterr().out  # once, at trace time
    with pytest.raises(ValueError, match="cannot read the source"):
        tf.autograph.to_code(len)


def test_items_assigned_into_a_carried_dict_or_list_are_carried():
    """``d["k"] += x`` and ``s[0] = ...`` change the container: a tensor loop or branch
    carries it (TF 2.21: {'evens': 6, 'odds': 9}; -2.0 and 20.0; [6, 4])."""
    @tf.function
    def parity_sums(n):
        res = {"evens": 0, "odds": 0}
        for i in tf.range(n):
            if i % 2 == 0:
                res["evens"] += i
            else:
                res["odds"] += i
        return res

    assert {k: int(v) for k, v in parity_sums(tf.constant(6)).items()} == \
        {"evens": 6, "odds": 9}

    @tf.function
    def scaled_if_positive(x):
        d = {"a": x}
        if x > 0:
            d["a"] = x * 10.0
        return d

    assert [float(scaled_if_positive(tf.constant(v))["a"]) for v in (-2.0, 2.0)] == \
        [-2.0, 20.0]

    @tf.function
    def counted(n):
        s = [0, 0]
        for i in tf.range(n):
            s[0] += i
            s[1] += 1
        return s

    assert [int(t) for t in counted(tf.constant(4))] == [6, 4]


def test_what_a_statement_cannot_carry_is_refused_not_mixed_up():
    """A tuple that becomes a list (or a named tuple), a TensorArray that becomes a tensor, and
    a new TensorArray in a loop or branch (only the flow would travel: the values would be
    another array's) are refused naming the variable."""
    def becomes_list(x):
        s = (x, x)
        if x > 0:
            s = [x, x]
        return s

    def becomes_tensor(n):
        ta = tf.TensorArray(tf.float32, size=1)
        for _ in tf.range(n):
            ta = tf.constant(1.0)
        return ta

    def new_array(n):
        ta = tf.TensorArray(tf.float32, size=1).write(0, -1.0)
        for i in tf.range(n):
            ta = tf.TensorArray(tf.float32, size=1).write(0, tf.cast(i, tf.float32))
        return ta.stack()

    def swapped(x):
        a = tf.TensorArray(tf.float32, size=1).write(0, 1.0)
        b = tf.TensorArray(tf.float32, size=1).write(0, 2.0)
        if x > 0:
            a, b = b, a
        return a.stack()

    for fn, match in ((becomes_list, "'s' must have the same nested structure .* sequence "
                                     "type"),
                      (becomes_tensor, "'ta' does not have the same nested structure .* a "
                                       "TensorArray where the other has a Tensor"),
                      (new_array, "'ta' holds another TensorArray"),
                      (swapped, "'a' holds another TensorArray")):
        with pytest.raises(TypeError, match="(?s)" + match):
            tf.function(fn)(tf.constant(1))
    ta = tf.TensorArray(tf.float32, size=1)
    with pytest.raises(ValueError, match="return different TensorArrays"):
        tf.function(lambda p: tf.cond(p, lambda: ta.write(0, 1.0),
                                      lambda: tf.TensorArray(tf.float32, size=1).write(0, 2.0)
                                      ).stack())(tf.constant(True))


def test_loop_options_follow_tf_on_aliases_and_dataset_loops():
    @tf.function
    def aliases(n):  # TF 2.21: ([1, 1], [2, 2])
        e = tf.zeros([0])
        a = e
        b = e
        for _ in tf.range(n):
            tf.autograph.experimental.set_loop_options(
                shape_invariants=[(a, tf.TensorShape([None]))])
            a = tf.concat([a, [1.0]], 0)
            b = tf.concat([b, [2.0]], 0)
        return a, b

    a, b = aliases(tf.constant(2))
    assert a.numpy().tolist() == [1.0, 1.0] and b.numpy().tolist() == [2.0, 2.0]

    @tf.function
    def total(ds):  # TF ignores maximum_iterations on a dataset loop: 45
        s = tf.constant(0, tf.int64)
        for x in ds:
            tf.autograph.experimental.set_loop_options(maximum_iterations=3)
            s += x
        return s

    assert int(total(tf.data.Dataset.range(10))) == 45

    def sign(x):
        if x > 0:
            return x
        return -x

    assert float(tf.function(tf.autograph.to_graph(sign))(tf.constant(-3.0))) == 3.0


def test_a_branch_that_changes_a_dtype_or_leaves_none_is_refused_naming_the_variable():
    def retyped(x):
        s = 1.0
        if x > 0:
            s = 2
        return s

    def none_in_else(x):
        s = None
        if x > 0:
            s = x
        return s

    line = inspect.getsourcelines(retyped)[1] + 2
    with pytest.raises(TypeError, match=f"'s' has dtype int32 in the main branch, but dtype "
                                        f"float32 in the else branch .*:{line}"):
        tf.function(retyped)(tf.constant(1.0))
    with pytest.raises(ValueError, match="'s' is None at the end of the else branch"):
        tf.function(none_in_else)(tf.constant(1.0))


class _Cell:
    """A stand-in for a user's model object holding state as attributes."""


def test_attributes_assigned_in_tensor_statements_are_carried():
    # ``self.h = ...`` in a tensor loop or branch is carried as a variable named ``self.h``
    # (TF's AutoGraph carries such composite names); it had escaped the loop as a tensor of
    # the loop's body ("computed inside a while loop").
    class RNN:
        def __init__(self):
            self.w = tf.Variable(0.5)

        @tf.function
        def run(self, xs):
            self.h = tf.zeros([])
            for x in xs:
                self.h = tf.tanh(self.w * self.h + x)
            return self.h

    def reference(w):
        h = 0.0
        for v in (1.0, 2.0, 3.0):
            h = np.tanh(w * h + v)
        return h

    rnn = RNN()
    xs = tf.constant([1.0, 2.0, 3.0])
    with tf.GradientTape() as tape:
        y = rnn.run(xs)
    assert float(y) == pytest.approx(reference(0.5), rel=1e-6)
    numeric = (reference(0.5 + 1e-4) - reference(0.5 - 1e-4)) / 2e-4
    assert float(tape.gradient(y, rnn.w)) == pytest.approx(numeric, rel=1e-4)

    def branch(x):
        s = _Cell()
        s.y = tf.constant(0.0)
        if x > 0:
            s.y = x
        s.count = 0
        for _ in tf.range(3):
            s.count += 2
        return s.y, s.count

    traced = tf.function(branch)
    assert [float(t) for t in traced(tf.constant(-1.0))] == [0.0, 6.0]
    assert [float(t) for t in traced(tf.constant(2.0))] == [2.0, 6.0]

    def one_branch(self, x):
        if x > 0:
            self.flag = x
        return x

    line = inspect.getsourcelines(one_branch)[1] + 1
    with pytest.raises(ConversionError, match=f"'self.flag' must also be initialized in the "
                                              f"else branch .*test_autograph.py:{line}"):
        tf.function(one_branch)(_Cell(), tf.constant(1.0))

    def python_branch(self, flag):
        if flag:
            self.set = 1
        else:
            self.other = 2

    cell = _Cell()
    tf.autograph.to_graph(python_branch)(cell, True)  # a Python condition: Python's effects
    assert cell.set == 1 and not hasattr(cell, "other")


def test_len_range_abs_float_and_int_of_traced_tensors_are_tfs_conversions():
    # Each read off TF 2.21 (its AutoGraph converts these builtins; min and max it leaves).
    @tf.function
    def over_range(n):
        s = tf.constant(0)
        for i in range(2, n, 2):  # range of a tensor: tf.range, a while_loop
            s += i
        return s

    assert int(over_range(tf.constant(9))) == 20
    assert int(tf.function(lambda n: tf.reduce_sum(range(5, n)))(tf.constant(2))) == 0

    @tf.function
    def by_len(x):
        s = tf.constant(0.0)
        for i in range(len(x)):  # a static length: a Python loop of three steps
            s += x[i]
        return s

    assert float(by_len(tf.constant([1.0, 2.0, 4.0]))) == 7.0

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32)])
    def dynamic_len(x):
        return len(x)

    length = dynamic_len(tf.constant([1.0, 2.0]))
    assert int(length) == 2 and length.dtype == tf.int32
    with pytest.raises(ValueError, match="len requires a non-scalar tensor"):
        tf.function(lambda x: len(x))(tf.constant(1.0))

    @tf.function
    def array_len(n):
        return len(tf.TensorArray(tf.float32, size=n))

    assert int(array_len(tf.constant(3))) == 3
    np.testing.assert_array_equal(tf.function(lambda x: abs(x))(tf.constant([-1.5, 2.0])),
                                  [1.5, 2.0])
    as_float = tf.function(lambda x: float(x))(tf.constant(3))
    assert float(as_float) == 3.0 and as_float.dtype == tf.float32
    as_int = tf.function(lambda x: int(x))(tf.constant(3.7))
    assert int(as_int) == 3 and as_int.dtype == tf.int32
    assert int(tf.function(lambda x: int(x))(tf.constant("42"))) == 42
    with pytest.raises(TypeError, match="Python `bool`"):  # TF 2.21: not converted either
        tf.function(lambda x, y: max(x, y))(tf.constant(3.0), tf.constant(5.0))
    assert int(tf.function(lambda x: x + int(2.5) + len([1, 2]))(tf.constant(1))) == 5
