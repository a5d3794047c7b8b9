"""The ``%%dflab`` cell model without IPython: a ``CellBook`` runs cells given as plain Python
source (``exec`` in a dict namespace) and replaces, reports and rolls back what they built."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import dflab as tf
from dflab.framework import errors
from dflab.framework import graph_transaction as gt
from dflab.notebook.cells import CellBook


@pytest.fixture(autouse=True)
def _reference_variables():
    """Named ops below follow TF1's reference variables (``w``, ``w/Assign``, ``w/read``)."""
    tf.disable_resource_variables()


class Notebook:
    """A namespace and a book: ``run(key, source)`` is one ``%%dflab`` cell run."""

    def __init__(self):
        self.ns = {"tf": tf, "np": np}
        self.book = CellBook(tf.get_default_graph())
        self.count = 0

    def run(self, key, source, label=None):
        self.count += 1
        label = label or f"In[{self.count}]"
        body = textwrap.dedent(source)

        def execute():
            try:
                exec(compile(body, f"<cell {label}>", "exec"), self.ns)  # noqa: S102 - test code
            except Exception as e:  # noqa: BLE001 - a failed cell, as run_cell reports it
                self.error = e
                return False
            return True

        return self.book.run(key, label, body, execute, self.ns)


def op_names():
    return [op.name for op in tf.get_default_graph().get_operations()]


@pytest.fixture
def nb():
    return Notebook()


def test_the_cell_model_does_not_import_ipython():
    code = ("import sys, dflab.notebook.cells\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('IPython', 'ipywidgets', 'anywidget')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


def test_rerunning_a_cell_replaces_its_ops_under_the_same_names(nb):
    nb.run("x", "x = tf.placeholder(tf.float32, [None, 2], name='x')")
    cell = """
    with tf.name_scope('layer1'):
        w = tf.Variable(tf.ones([2, 3]), name='w')
        h = tf.matmul(x, w)
    """
    first = nb.run("m", cell)
    names = op_names()
    assert first.record.ops == tf.get_default_graph().get_operations()[1:]
    assert nb.book.report(first) == [f"%%dflab {first.label}: built {len(names) - 1} ops."]
    again = nb.run("m", cell.replace("tf.ones([2, 3])", "tf.zeros([2, 4])"))
    assert op_names() == [n.replace("ones", "zeros") for n in names]  # layer1/w, never _1
    assert again.previous is first.record and list(nb.book.records) == ["x", "m"]
    assert nb.ns["w"].shape.as_list() == [2, 4]
    assert nb.book.report(again)[0] == (f"%%dflab {again.label}: built {len(names) - 1} ops, "
                                        f"replacing {len(names) - 1} from its last run.")
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        np.testing.assert_array_equal(sess.run(nb.ns["h"], {nb.ns["x"]: np.ones((1, 2))}),
                                      np.zeros((1, 4)))


def test_names_still_bound_to_removed_ops_are_reported(nb):
    nb.run("c", "a = tf.constant(1.0, name='a')\nb = tf.constant(2.0, name='b')")
    run = nb.run("c", "a = tf.constant(1.5, name='a')")
    assert run.dangling == ["b"]
    assert nb.book.report(run)[-1] == \
        "  no longer built by this cell, still bound to removed ops: b"


def test_layers_and_variable_scopes_keep_their_names(nb):
    nb.run("x", "x = tf.placeholder(tf.float32, [None, 3], name='x')")
    cell = ("h = tf.layers.dense(x, 4)\n"
            "with tf.variable_scope('extra'):\n    v = tf.get_variable('v', [2])\n")
    nb.run("m", cell)
    names = op_names()
    nb.run("m", cell)  # get_variable needs no reuse: the store forgot the replaced variable
    assert op_names() == names
    assert [v.op.name for v in tf.global_variables()] == ["dense/kernel", "dense/bias",
                                                          "extra/v"]


def test_readers_of_replaced_ops_are_stale_and_reported_by_cell(nb):
    nb.run("w", "w = tf.Variable([1.0, 2.0], name='w')", label="'w'")
    y_run = nb.run("y", "y = w * 3.0")
    nb.run("z", "z = tf.reduce_sum(y, name='total')")
    run = nb.run("w", "w = tf.Variable([5.0, 6.0], name='w')", label="'w'")
    mul = tf.get_default_graph().get_operation_by_name("mul")
    assert [(m.op, m.replaced) for m in run.stale] == [(mul, "w/read:0")]
    assert run.stale[0].origin == f"Cell {y_run.label}, line 1"
    lines = nb.book.report(run)
    assert f"stale: mul (cell {y_run.label}) uses replaced w/read; re-run that cell" in lines
    assert "  then re-run the cells that depend on them: In[3]" in lines
    assert "    stale: mul" in nb.book.listing()
    with tf.Session() as sess, pytest.raises(errors.FailedPreconditionError) as info:
        sess.run(nb.ns["z"])
    assert f"(built in Cell {y_run.label}, line 1)" in str(info.value)
    # Re-running the stale cell clears its mark; the next one down becomes stale in turn.
    run = nb.run("y", "y = w * 3.0")
    assert [m.op.name for m in run.stale] == ["total"]
    nb.run("z", "z = tf.reduce_sum(y, name='total')")
    assert tf.get_default_graph().stale_marks() == []
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        assert sess.run(nb.ns["z"]) == pytest.approx(33.0)


def test_open_sessions_forget_the_state_of_replaced_ops(nb):
    nb.run("w", "w = tf.Variable(tf.ones([2]), name='w')\nkeep = tf.Variable(7.0, name='keep')")
    sess = tf.Session()
    sess.run(tf.global_variables_initializer())
    run = nb.run("w", "w = tf.Variable(tf.ones([2]), name='w')\n"
                      "keep = tf.Variable(7.0, name='keep')")
    assert run.forgotten == ["keep", "w"]
    assert ("  open sessions forgot the old values of keep, w: run the initializer again."
            in nb.book.report(run))
    with pytest.raises(errors.FailedPreconditionError, match="uninitialized"):
        sess.run(nb.ns["w"])
    sess.close()


def test_a_failed_run_is_rolled_back_as_a_whole(nb):
    nb.run("w", "w = tf.Variable([1.0], name='w')\nwith tf.variable_scope('s'):\n"
                "    g = tf.get_variable('g', [1])")
    nb.run("y", "y = w * 2.0")
    sess = nb.ns["sess"] = tf.Session()
    sess.run(tf.global_variables_initializer())
    sess.run(nb.ns["w"].assign([4.0]))
    before, old_w, old_g = op_names(), nb.ns["w"], nb.ns["g"]
    n_old = len(nb.book.records["w"].ops)
    created = []
    tf.get_default_graph().add_op_observer(created.append)
    run = nb.run("w", """
    w = tf.Variable([5.0, 6.0], name='w')
    with tf.variable_scope('s'):
        g = tf.get_variable('g', [3])
    sess.run(w.initializer)
    extra = w + 1.0
    boom = undefined_name
    """)
    tf.get_default_graph().remove_op_observer(created.append)
    assert run.failed and run.record is None and isinstance(nb.error, NameError)
    assert "undefined_name" in str(nb.error)
    assert run.failure().startswith(f"%%dflab: cell {run.label} failed and was rolled back: ")
    assert f"the {n_old} ops of its previous run are back" in run.failure()
    assert run.removed == len(created) > n_old and f"{len(created)} new ops removed" in \
        run.failure()
    assert op_names() == before and tf.get_default_graph().stale_marks() == []
    assert nb.ns["w"] is old_w and nb.ns["g"] is old_g and "extra" not in nb.ns
    assert tf.global_variables() == [old_w, old_g]
    assert list(nb.book.records) == ["w", "y"] and nb.book.cell_of(old_w.op).key == "w"
    # The session gives the old w its value back; get_variable finds the old g again.
    np.testing.assert_array_equal(sess.run(nb.ns["y"]), [8.0])
    with tf.variable_scope("s", reuse=True):
        assert tf.get_variable("g", [1]) is old_g
    sess.close()


def test_an_exception_from_execute_rolls_back_and_propagates(nb):
    book = nb.book

    def execute():
        tf.constant(1.0, name="half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        book.run("k", "In[1]", "...", execute, nb.ns)
    assert op_names() == [] and not book.records
    assert gt.innermost(tf.get_default_graph()) is None


def test_nested_cells_own_their_ops_and_roll_back_together(nb):
    inner_src = "c = tf.constant(2.0, name='inner')"
    nb.ns["run_inner"] = lambda: nb.run("inner", inner_src)
    nb.run("outer", "a = tf.constant(1.0, name='outer')\nrun_inner()\nb = a * c\n")
    outer, inner = nb.book.records["outer"], nb.book.records["inner"]
    assert [op.name for op in inner.ops] == ["inner"]
    assert [op.name for op in outer.ops] == ["outer", "mul"]  # not the inner cell's op
    before = op_names()
    run = nb.run("outer", "a = tf.constant(1.0, name='outer')\nrun_inner()\nboom\n")
    assert run.failed and op_names() == before
    assert nb.book.records["inner"] is inner and nb.book.records["outer"] is outer


def test_a_failed_cell_undoes_what_a_cell_it_ran_replaced(nb):
    nb.run("inner", "v = tf.Variable(1.0, name='v')")
    sess = tf.Session()
    sess.run(nb.ns["v"].initializer)
    sess.run(nb.ns["v"].assign(5.0))
    old_v = nb.ns["v"]
    nb.ns["rerun_inner"] = lambda: nb.run("inner", "v = tf.Variable(2.0, name='v')")
    run = nb.run("outer", "rerun_inner()\nboom\n")
    # The inner re-run made open sessions forget v; the outer failure gives it back.
    assert run.failed and nb.ns["v"] is old_v and nb.book.records["inner"].ops[1] is old_v.op
    assert sess.run(old_v) == 5.0
    sess.close()


def test_a_cell_that_makes_a_new_default_graph_records_nothing(nb):
    g = tf.get_default_graph()
    nb.ns["tf"] = tf
    run = nb.run("r", "tf.constant(1.0)\ntf.reset_default_graph()")
    assert run.new_graph and run.record is None and not nb.book.records
    assert nb.book.graph is g


def test_cells_without_an_id_are_known_by_first_line_and_likeness(nb):
    book = nb.book
    src = "# weights\nw = tf.Variable(1.0)\n"
    key = book.key(None, None, src)
    assert key == "line:# weights"
    nb.run(key, src)
    assert book.key(None, None, src.replace("1.0", "2.0")) == key  # an edit of that cell
    other = "# weights\nbias = tf.zeros([10], name='bias_init')\nscale = tf.ones([10])\n"
    assert book.key(None, None, other) == "line:# weights#2"  # a different cell
    assert book.key("model", "abc", src) == "name:model"
    assert book.key(None, "abc", src) == "id:abc"


def test_listing_names_each_cell_and_its_key_kind(nb):
    assert nb.book.listing() == ["No %%dflab cells recorded for the default graph."]
    nb.run("id:a", "c = tf.constant(1.0, name='c')")
    assert nb.book.listing() == ["In[1] [id key] 1 ops: c"]
