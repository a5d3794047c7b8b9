"""tf.Print / tf.print, the tf.assert_* checks and tf.py_func: values, text, errors, gradients,
placement, and that a graph read from a file never calls a Python function."""

import gc
import subprocess
import sys

import numpy as np
import pytest

import dflab as tf


@pytest.fixture(autouse=True)
def _fresh_graph():
    tf.reset_default_graph()
    yield
    tf.reset_default_graph()


# --- tf.Print and tf.print ------------------------------------------------------------------------
def test_print_passes_its_input_and_writes_tf1s_summary(capsys):
    x = tf.placeholder(tf.float32, [None])
    y = tf.Print(x * 2, [x, "label", tf.shape(x)], message="vals: ", summarize=2)
    with tf.Session() as sess:
        out = sess.run(y, {x: [1.5, -2.0, 3.0]})
    np.testing.assert_array_equal(out, [3.0, -4.0, 6.0])
    assert capsys.readouterr().err == "vals: [1.5 -2...][label][3]\n"


def test_print_first_n_and_gradient_to_its_input_only(capsys):
    x = tf.constant([1.0, 2.0])
    other = tf.constant(5.0)
    y = tf.Print(x, [other], first_n=2)
    loss = tf.reduce_sum(y * y)
    gx, go = tf.gradients(loss, [x, other])
    assert go is None
    with tf.Session() as sess:
        for _ in range(4):
            np.testing.assert_array_equal(sess.run(gx), [2.0, 4.0])
    assert capsys.readouterr().err.splitlines() == ["[5]", "[5]"]


def test_tf_print_formats_like_tf_and_runs_as_a_dependency(capsys):
    x = tf.constant(np.arange(10, dtype=np.float32))
    m = tf.constant([[0.5, 2.0], [3.0, 4.0]])
    p = tf.print("x:", x, "m:", m, {"k": 1}, output_stream="stdout", sep="|")
    with tf.control_dependencies([p]):
        y = tf.identity(x[0])
    with tf.Session() as sess:
        assert sess.run(y) == 0.0
    assert capsys.readouterr().out == "x:|[0 1 2 ... 7 8 9]|m:|[[0.5 2]\n [3 4]]|{'k': 1}\n"
    with pytest.raises(ValueError, match="output_stream"):
        tf.print(x, output_stream="a file")


# What TF 2.21's tf.print wrote for these values (compat.v1, graph mode, output_stream stdout).
TF_PRINTED = [
    (np.float32(1e10), "1e+10"), (np.float32([1.5, 2.0, 3.25]), "[1.5 2 3.25]"),
    (True, "1"), ([True, False], "[1 0]"), ("hi", "hi"), (["a", "bc"], '["a" "bc"]'),
    (np.arange(12, dtype=np.int32).reshape(3, 4), "[[0 1 2 3]\n [4 5 6 7]\n [8 9 10 11]]"),
    (np.arange(20, dtype=np.float32), "[0 1 2 ... 17 18 19]"), (np.float32(0.1), "0.1"),
    (np.float64(1) / 3, "0.33333333333333331"), (np.float32(-0.0), "-0"),
    (np.float32(123456789.0), "123456792"), (np.float32([np.nan, np.inf, -np.inf]),
                                             "[nan inf -inf]"),
]


@pytest.mark.parametrize("value,want", TF_PRINTED)
def test_tf_print_writes_values_as_tf(capsys, value, want):
    with tf.Session() as sess:
        sess.run(tf.print(tf.constant(value), output_stream="stdout"))
    assert capsys.readouterr().out == want + "\n"


def test_tf_print_writes_tensors_inside_structures_by_value(capsys):
    """TF writes a list or dict holding tensors as Python does, each tensor's value in its
    place (dflab once wrote the tensors' reprs)."""
    t = tf.constant(7)
    v = tf.constant([1.5, 2.0])
    with tf.Session() as sess:
        sess.run(tf.print("x =", v, "and", {"k": t, "a": "s"}, [t, 2, (v,)],
                          output_stream="stdout"))
    assert capsys.readouterr().out == "x = [1.5 2] and {'a': 's', 'k': 7} [7, 2, ([1.5 2],)]\n"


# --- the assert_* checks --------------------------------------------------------------------------
@pytest.mark.parametrize("check,good,bad", [
    (tf.assert_equal, ([1, 2], [1, 2]), ([1, 2], [1, 3])),
    (tf.assert_none_equal, ([1, 2], [3, 4]), ([1, 2], [3, 2])),
    (tf.assert_less, ([1, 2], [2, 3]), ([1, 2], [2, 2])),
    (tf.assert_less_equal, ([1, 2], [1, 3]), ([1, 4], [1, 3])),
    (tf.assert_greater, ([2, 3], [1, 2]), ([2, 3], [1, 3])),
    (tf.assert_greater_equal, ([2, 3], [2, 3]), ([2, 3], [2, 4])),
])
def test_binary_checks_pass_and_fail_at_run_time_with_tf_messages(check, good, bad):
    x = tf.placeholder(tf.int32, [2], name="x")
    y = tf.placeholder(tf.int32, [2], name="y")
    op = check(x, y, message="my check")
    with tf.Session() as sess:
        sess.run(op, {x: good[0], y: good[1]})
        with pytest.raises(tf.errors.InvalidArgumentError) as e:
            sess.run(op, {x: bad[0], y: bad[1]})
    text = str(e.value)
    assert "assertion failed: [my check] [Condition x" in text
    assert f"[x (x:0) = ] [{bad[0][0]} {bad[0][1]}]" in text
    assert "test_debugging_ops.py" in text  # the user's line


def test_checks_of_constants_fail_while_the_graph_is_built():
    with pytest.raises(tf.errors.InvalidArgumentError, match="Condition x == y"):
        tf.assert_equal(tf.constant([1, 2]), [1, 3])
    ok = tf.assert_equal(tf.constant([1, 2]), [1, 2])
    with tf.Session() as sess:
        sess.run(ok)


@pytest.mark.parametrize("check,good,bad", [
    (tf.assert_positive, [1.0, 2.0], [1.0, 0.0]),
    (tf.assert_negative, [-1.0, -2.0], [-1.0, 0.0]),
    (tf.assert_non_negative, [0.0, 2.0], [0.0, -2.0]),
    (tf.assert_non_positive, [0.0, -2.0], [0.0, 2.0]),
])
def test_sign_checks(check, good, bad):
    x = tf.placeholder(tf.float32, [2])
    op = check(x)
    with tf.Session() as sess:
        sess.run(op, {x: good})
        with pytest.raises(tf.errors.InvalidArgumentError, match="did not hold"):
            sess.run(op, {x: bad})


def test_guarding_a_computation_with_a_control_dependency():
    x = tf.placeholder(tf.float32, [None])
    with tf.control_dependencies([tf.assert_positive(x)]):
        y = tf.log(x)
    with tf.Session() as sess:
        np.testing.assert_allclose(sess.run(y, {x: [1.0, np.e]}), [0.0, 1.0], rtol=1e-6)
        with pytest.raises(tf.errors.InvalidArgumentError):
            sess.run(y, {x: [1.0, -1.0]})


def test_assert_near_uses_tolerances():
    x = tf.placeholder(tf.float64, [2])
    op = tf.assert_near(x, tf.constant([1.0, 2.0], tf.float64), rtol=0.0, atol=0.01)
    with tf.Session() as sess:
        sess.run(op, {x: [1.005, 1.995]})
        with pytest.raises(tf.errors.InvalidArgumentError, match="not equal to tolerance"):
            sess.run(op, {x: [1.02, 2.0]})


def test_rank_checks_static_and_dynamic():
    with pytest.raises(ValueError, match=r"^Tensor zeros:0 must have rank 2\.  Received rank 1"):
        tf.assert_rank(tf.zeros([3]), 2)
    with pytest.raises(ValueError, match=r"^why\.  Tensor .* must have rank at least 3\.  "):
        tf.assert_rank_at_least(tf.zeros([3, 2]), 3, message="why")
    with pytest.raises(ValueError, match="must have rank at least 3"):
        tf.assert_rank_at_least(tf.zeros([3, 2]), 3)
    x = tf.placeholder(tf.float32)  # unknown rank: checked when it runs
    exact, at_least = tf.assert_rank(x, 2), tf.assert_rank_at_least(x, 2)
    with tf.Session() as sess:
        sess.run([exact, at_least], {x: np.zeros((2, 2))})
        sess.run(at_least, {x: np.zeros((2, 2, 2))})
        with pytest.raises(tf.errors.InvalidArgumentError, match="must have rank"):
            sess.run(exact, {x: np.zeros((2, 2, 2))})
        with pytest.raises(tf.errors.InvalidArgumentError, match="must have rank at least"):
            sess.run(at_least, {x: np.zeros(2)})


def test_type_and_scalar_checks_are_static():
    x = tf.constant([1.0])
    with pytest.raises(TypeError, match="must be of type int32; got float32"):
        tf.assert_type(x, tf.int32)
    assert tf.assert_type(x, tf.float32).type == "NoOp"
    with pytest.raises(TypeError, match="Expected integer type"):
        tf.assert_integer(x)
    assert tf.assert_integer(tf.constant(1)).type == "NoOp"
    s = tf.constant(3.0)
    assert tf.assert_scalar(s) is s
    with pytest.raises(ValueError, match="Expected scalar shape"):
        tf.assert_scalar(x)


# --- tf.py_func -----------------------------------------------------------------------------------
def test_py_func_single_and_several_outputs():
    x = tf.placeholder(tf.float32, [None])
    y = tf.py_func(lambda v: v * 3, [x], tf.float32)
    a, b = tf.py_func(lambda v: (v.sum(), [b"n", "u"]), [x], [tf.float32, tf.string])
    assert y.shape.ndims is None and y.dtype == tf.float32
    calls = []
    side = tf.py_func(lambda: calls.append(1), [], [])
    assert isinstance(side, tf.Operation)
    with tf.Session() as sess:
        out = sess.run([y, a, b, side], {x: [1.0, 2.0]})
    np.testing.assert_array_equal(out[0], [3.0, 6.0])
    assert out[1] == 3.0 and out[2].tolist() == [b"n", b"u"] and calls == [1]


def test_py_func_result_of_the_wrong_dtype_is_an_error_naming_the_op():
    x = tf.constant([1.0, 2.0])
    y = tf.py_func(lambda v: v.astype(np.float64), [x], tf.float32, name="f")
    with tf.Session() as sess:
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match="0-th value returned by pyfunc_.* is float64, but expects "
                                 "float32") as e:
            sess.run(y)
    assert e.value.op.name == "f"


@pytest.mark.parametrize("value,kind", [(3, "int"), (2.5, "float"), (True, "bool"),
                                        (None, "NoneType"), (np.array([1.5]), "float")])
def test_py_func_string_result_refuses_numbers_as_tf_does(value, kind):
    y = tf.py_func(lambda: value, [], tf.string, name="text")
    with tf.Session() as sess:
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match=f"0-th value returned by pyfunc_.* is {kind}, but expects "
                                 "string") as e:
            sess.run(y)
    assert e.value.op.name == "text"


def test_py_func_string_result_takes_text_bytes_and_numpy_text():
    outs = [tf.py_func(lambda v=v: v, [], tf.string)
            for v in (b"ok", "txt", np.array(["x", "yz"]))]
    with tf.Session() as sess:
        got = sess.run(outs)
    assert got[0] == b"ok" and got[1] == b"txt" and got[2].tolist() == [b"x", b"yz"]


def _raise(exc):
    def fn(*args):
        raise exc
    return fn


@pytest.mark.parametrize("exc,cls", [
    (ValueError("bad value"), tf.errors.InvalidArgumentError),
    (StopIteration(), tf.errors.OutOfRangeError),
    (NotImplementedError("later"), tf.errors.UnimplementedError),
    (RuntimeError("boom"), tf.errors.UnknownError),
])
def test_py_func_exceptions_map_to_tf_errors_and_the_session_survives(exc, cls):
    x = tf.constant(1.0)
    y = tf.py_func(_raise(exc), [x], tf.float32)
    z = x + 1.0
    with tf.Session() as sess:
        with pytest.raises(cls) as e:
            sess.run(y)
        assert sess.run(z) == 2.0
    assert type(exc).__name__ in str(e.value)
    assert "test_debugging_ops.py" in str(e.value)  # where the function raised


def test_py_func_has_no_gradient_and_stays_on_the_cpu():
    with tf.device("/gpu:0"):
        x = tf.constant([1.0, 2.0])
        y = tf.py_func(lambda v: v * 2, [x], tf.float32, stateful=False)
    assert y.op.type == "PyFuncStateless"
    assert tf.gradients(tf.reduce_sum(y), x) == [None]
    config = tf.ConfigProto(device_count={"GPU": 1}, allow_soft_placement=True,
                            dflab={"simulated_devices": {"GPU": 1}})
    with tf.Session(config=config) as sess:
        sess.run(y)
        (plan,) = sess._master._plans.values()
    assert plan.placement[y.op].device.endswith("CPU:0")


_WRITE_PY_FUNC_GRAPH = """
import sys
import dflab as tf
x = tf.constant(2.0, name="x")
tf.py_func(lambda v: v * 10, [x], tf.float32, name="f")
open(sys.argv[1], "wb").write(tf.get_default_graph().as_graph_def().SerializeToString())
"""


def test_a_graph_from_another_process_names_its_functions_but_never_calls_them(tmp_path):
    # The file holds a token, never the function; tokens carry a random part drawn once per
    # process, so another process's token names no function of this one.
    path = tmp_path / "graph.json"
    subprocess.run([sys.executable, "-c", _WRITE_PY_FUNC_GRAPH, str(path)], check=True,
                   timeout=120)
    data = path.read_bytes()
    assert b"lambda" not in data
    x = tf.constant(2.0, name="x")
    tf.py_func(lambda v: v * 10, [x], tf.float32, name="g")  # a function of this process
    with tf.Graph().as_default():
        tf.import_graph_def(tf.GraphDef.FromString(data), name="")
        with tf.Session() as sess:
            with pytest.raises(tf.errors.NotFoundError, match="no Python function"):
                sess.run("f:0")


def test_a_graph_read_back_in_its_process_calls_the_registered_function_while_it_lives():
    # As TF's process-wide registry: the token names the function while the graph that
    # registered it lives, and nothing once that graph is gone.
    g = tf.Graph()
    with g.as_default():
        x = tf.constant(2.0, name="x")
        tf.py_func(lambda v: v * 10, [x], tf.float32, name="f")
    graph_def = g.as_graph_def()
    with tf.Graph().as_default():
        tf.import_graph_def(graph_def, name="")
        with tf.Session() as sess:
            assert sess.run("f:0") == 20.0
    del g, x
    gc.collect()
    with tf.Graph().as_default():
        tf.import_graph_def(graph_def, name="")
        with tf.Session() as sess:
            with pytest.raises(tf.errors.NotFoundError, match="no Python function"):
                sess.run("f:0")


def test_assert_shapes_guards_a_computation_at_run_time():
    # The shapes are unknown while the graph is built: the check runs with the step, and
    # the step fails naming the Assert op; once the sizes agree, the guarded value flows.
    x = tf.placeholder(tf.float32, [None, 3])
    w = tf.placeholder(tf.float32, [None, None])
    check = tf.debugging.assert_shapes([(x, ("N", "D")), (w, ("D", "K"))])
    with tf.control_dependencies([check]):
        y = tf.matmul(x, w)
    xs = np.arange(6, dtype=np.float32).reshape(2, 3)
    ws = np.ones((3, 4), np.float32)
    with tf.Session() as sess:
        np.testing.assert_allclose(sess.run(y, {x: xs, w: ws}), xs @ ws)
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match=r"Specified by tensor .* dimension 1.*must have size.*\[3\]"):
            sess.run(y, {x: xs, w: np.ones((4, 4), np.float32)})


def test_assert_shapes_static_checks_build_no_assert():
    a, b = tf.zeros([5, 2]), tf.zeros([7, 5, 2])
    op = tf.debugging.assert_shapes([(a, ("N", "Q")), (b, ("*", "N", "Q"))])
    assert op.type == "NoOp"
    assert not [o for o in tf.get_default_graph().get_operations() if o.type == "Assert"]
    with pytest.raises(ValueError, match=r"^Specified by tensor zeros:0 dimension 1\.  Tensor "
                                         r"zeros_1:0 dimension -2 must have size 2\.  "
                                         r"Received size 5, shape \(7, 5, 2\)$"):
        tf.debugging.assert_shapes([(a, ("N", "Q")), (b, ("*", "Q", "N"))])
    assert tf.compat.v1.debugging.assert_shapes is tf.debugging.assert_shapes
    assert not hasattr(tf, "assert_shapes")  # TF 1.x has it only in tf.debugging
