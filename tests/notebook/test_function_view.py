"""FunctionView and ``%dflab function``: a tf.function's traces with why each happened and
their graphs; eager against traced timelines and per-op costs."""

from __future__ import annotations

from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

import dflab as tf
from dflab.eager import eager_mode
from dflab.notebook.function_view import EagerVsTraced, FunctionView


def _fn():
    @tf.function
    def f(x, n):
        return tf.reduce_sum(x * n)

    with eager_mode():
        f(tf.constant([1.0, 2.0]), 2.0)
        f(tf.constant([1.0, 2.0, 3.0]), 2.0)
        f(tf.constant([1.0, 2.0]), 3.0)
    return f


def test_the_view_lists_each_trace_with_its_reason_and_draws_its_graph():
    view = FunctionView(_fn())
    rows = view.rows()
    assert [r["reason"] for r in rows][0] == "first call"
    assert "float32[3]" in rows[1]["reason"] and "new value for n: 3.0" in rows[2]["reason"]
    assert all(r["ops"] >= 3 for r in rows)
    bundle = view._repr_mimebundle_()
    assert bundle["text/html"].count("<tr>") == 3 and "first call" in bundle["text/html"]
    assert "<svg" in bundle["text/html"]  # the concrete graphs, drawn
    assert "3 trace(s)" in bundle["text/plain"]
    assert all(isinstance(g, tf.Graph) for g in view.graphs())


def test_the_magic_shows_a_function_of_the_notebook():
    sh = InteractiveShell.instance()
    sh.reset()
    sh.run_cell("%load_ext dflab")
    sh.user_ns.update(f=_fn(), g=42)
    with capture_output():
        res = sh.run_cell("view = %dflab function f --no-graphs")
    assert res.success, res.error_in_exec
    assert isinstance(sh.user_ns["view"], FunctionView)
    with capture_output():
        res = sh.run_cell("%dflab function g")
    assert "is not a tf.function" in str(res.error_in_exec)


def test_eager_against_traced_shows_both_timelines_and_per_op_costs():
    with eager_mode():
        w = tf.Variable(tf.ones([8, 8]))

    def mlp(x):
        for _ in range(3):
            x = tf.nn.relu(tf.matmul(x, w))
        return tf.reduce_sum(x)

    with eager_mode():
        view = EagerVsTraced(mlp, tf.ones([4, 8]), repeat=2)
    rows = {r["op"]: r for r in view.cost_rows()}
    assert rows["MatMul"]["eager_count"] == 6 and rows["MatMul"]["graph_count"] == 3
    assert rows["Relu"]["graph_us"] is not None
    eager_nodes = sum(len(d.node_stats) for d in view.eager_metadata.step_stats.dev_stats)
    assert eager_nodes == len(view.eager.records) >= 14
    left, right = view.timelines()
    assert left is not None and right is not None
    assert "eager µs/op" in view._repr_mimebundle_()["text/html"]


def test_the_stepper_steps_into_a_traced_functions_graph():
    from dflab.notebook import Stepper

    def countdown(n):
        steps = 0
        while n > 0:
            n -= 1
            steps += 1
        return steps

    f = tf.function(countdown)
    with eager_mode():
        concrete = f.get_concrete_function(tf.constant(3))
    graph = concrete.graph
    with tf.Session(graph=graph) as sess:
        stepper = Stepper(sess, concrete.outputs[0], feed_dict={concrete.inputs[0]: 3})
        stepper.step()
        assert stepper.history  # one node ran
        stepper.resume()
        assert stepper.result == 3
        assert any(e.name.endswith("LoopCond") for e in stepper.history)
