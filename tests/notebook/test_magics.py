"""``%%dflab`` / ``%dflab`` through a real IPython shell: cells are run with ``run_cell`` as a
front-end would run them (with and without cell ids), and the graph, the sessions and what the
cell shows are checked."""

from __future__ import annotations

import re

import numpy as np
import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

import dflab as tf
from dflab.framework import errors
from dflab.notebook import magics as _magics
from dflab.visualize.graph import layout_graph

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture(autouse=True)
def _reference_variables():
    """Most tests here name and count a variable's ops: TF1's reference structure (``w``,
    ``w/Assign``, ``w/read``). The resource kind, the default, has its own tests below."""
    tf.disable_resource_variables()


@pytest.fixture
def resource_default():
    tf.enable_resource_variables()


@pytest.fixture
def shell():
    sh = InteractiveShell.instance()
    sh.reset()
    sh.run_cell("%load_ext dflab")
    sh.user_ns.update(tf=tf, np=np)
    return sh


class Ran:
    def __init__(self, result, captured):
        self.result = result
        self.stdout = _ANSI.sub("", captured.stdout)
        self.outputs = captured.outputs

    @property
    def error(self):
        return self.result.error_in_exec or self.result.error_before_exec


def run(sh, source, cell_id=None, ok=True) -> Ran:
    with capture_output() as cap:
        res = sh.run_cell(source, store_history=True, cell_id=cell_id)
    ran = Ran(res, cap)
    if ok:
        assert res.success, f"cell failed: {ran.error!r}\n{ran.stdout}"
    return ran


def op_names():
    return [op.name for op in tf.get_default_graph().get_operations()]


def book(sh):
    return _magics.magics_of(sh).book


MODEL = """%%dflab --no-show
with tf.name_scope("layer1"):
    w = tf.Variable(tf.ones([2, 3]), name="w")
    h = tf.matmul(x, w)
"""


# --- %%dflab: recording and display -------------------------------------------------------------
def test_ops_of_a_cell_say_they_were_created_in_that_cell(shell):
    # IPython counts a cell before it runs, and a nested run would name the body's code after
    # the next count: cell [n]'s ops must not read "created at Cell In[n+1]".
    ran = run(shell, "%%dflab --no-show\nc = tf.constant(1.0, name='c')")
    op = tf.get_default_graph().get_operation_by_name("c")
    assert errors._site_of(op) == f"Cell In[{ran.result.execution_count}], line 2"
    # A traceback through the cell's body names the same cell.
    failed = run(shell, "%%dflab --no-show\nraise ValueError('broken')", ok=False)
    assert f"Cell In[{failed.result.execution_count}], line 2" in failed.stdout
    assert f"Cell In[{failed.result.execution_count + 1}]" not in failed.stdout
    nxt = run(shell, "d = tf.constant(2.0, name='d')")
    assert nxt.result.execution_count == failed.result.execution_count + 1


def test_cell_shows_the_graph_with_its_new_ops_highlighted(shell):
    run(shell, "%%dflab --no-show\nx = tf.placeholder(tf.float32, [None, 2], name='x')", "a")
    ran = run(shell, MODEL.replace(" --no-show", ""), "b")
    svgs = [o.data["image/svg+xml"] for o in ran.outputs if "image/svg+xml" in o.data]
    assert len(svgs) == 1
    built = book(shell).records["id:b"].ops
    assert sorted(op.name for op in built) == sorted(set(op_names()) - {"x"})
    expected = layout_graph(tf.get_default_graph(), highlight=built).svg
    assert svgs[0] == expected
    highlighted = re.findall(r'class="node op [^"]*highlighted">\s*<title>(\S+)', svgs[0])
    # x, from the other cell, is drawn but not highlighted.
    assert sorted(highlighted) == sorted(op.name for op in built)
    assert re.search(r'class="node op [^"]*">\s*<title>x ', svgs[0])
    assert f"built {len(built)} ops" in ran.stdout


def test_a_first_cell_highlights_nothing_since_everything_is_new(shell):
    # Every node outlined as "highlighted" would highlight nothing.
    ran = run(shell, "%%dflab\na = tf.constant(1.0, name='a')\nb = a * 2.0")
    (svg,) = [o.data["image/svg+xml"] for o in ran.outputs if "image/svg+xml" in o.data]
    assert "highlighted" not in svg and "<title>a " in svg
    ran = run(shell, "%%dflab\nc = b + 1.0")
    (svg,) = [o.data["image/svg+xml"] for o in ran.outputs if "image/svg+xml" in o.data]
    assert len(re.findall(r'class="node op [^"]*highlighted"', svg)) == 2  # add and its const


def test_no_show_and_color_by(shell):
    ran = run(shell, "%%dflab --no-show\nc = tf.constant(1.0)")
    assert not ran.outputs
    ran = run(shell, "%%dflab --color-by device\nd = tf.constant(2.0)")
    (out,) = ran.outputs
    built = book(shell).records[next(reversed(book(shell).records))].ops
    assert out.data["image/svg+xml"] == layout_graph(
        tf.get_default_graph(), highlight=built, color_by="device").svg
    ran = run(shell, "%%dflab --color-by nonsense\ne = tf.constant(3.0)", ok=False)
    assert isinstance(ran.error, UsageError) and "--color-by must be one of" in str(ran.error)
    assert "e" not in shell.user_ns and len(op_names()) == 2  # refused before running


def test_cell_help_prints_usage_and_does_not_run_the_cell(shell):
    ran = run(shell, "%%dflab --help\nq = tf.constant(1.0)")
    assert "usage: %%dflab" in ran.stdout and "--name" in ran.stdout
    assert "q" not in shell.user_ns and op_names() == []


# --- re-running cells ----------------------------------------------------------------------------
def test_rerun_with_cell_id_replaces_ops_and_keeps_names(shell):
    run(shell, "%%dflab --no-show\nx = tf.placeholder(tf.float32, [None, 2], name='x')", "a")
    run(shell, MODEL, "b")
    first = op_names()
    for _ in range(3):
        run(shell, MODEL, "b")
    assert op_names() == first
    assert "layer1/w" in first and not any("_1" in n for n in first)
    # An edited cell (same id) still replaces its ops.
    run(shell, MODEL.replace("tf.ones([2, 3])", "tf.zeros([2, 4])"), "b")
    names = op_names()
    assert len(names) == len(first) and "layer1/w" in names and "layer1/zeros" in names
    assert shell.user_ns["w"].shape.as_list() == [2, 4]
    # A name the cell no longer binds keeps pointing at its removed op: the cell says so.
    ran = run(shell, MODEL.replace("    h = tf.matmul(x, w)\n", ""), "b")
    assert "still bound to removed ops: h" in ran.stdout


def test_name_scopes_of_other_cells_keep_their_suffixes(shell):
    run(shell, "%%dflab --no-show\nwith tf.name_scope('layer'):\n    a = tf.constant(1.0)", "A")
    run(shell, "%%dflab --no-show\nwith tf.name_scope('layer'):\n    b = tf.constant(2.0)", "B")
    assert op_names() == ["layer/Const", "layer_1/Const"]
    run(shell, "%%dflab --no-show\nwith tf.name_scope('layer'):\n    a = tf.constant(1.5)", "A")
    run(shell, "%%dflab --no-show\nwith tf.name_scope('layer'):\n    b = tf.constant(2.5)", "B")
    assert sorted(op_names()) == ["layer/Const", "layer_1/Const"]
    assert shell.user_ns["a"].name == "layer/Const:0"
    assert shell.user_ns["b"].name == "layer_1/Const:0"


def test_layers_and_get_variable_keep_their_names_on_rerun(shell):
    run(shell, "%%dflab --no-show\nx = tf.placeholder(tf.float32, [None, 3], name='x')", "a")
    cell = ("%%dflab --no-show\nh = tf.layers.dense(x, 4)\n"
            "with tf.variable_scope('extra'):\n    v = tf.get_variable('v', [2])\n")
    run(shell, cell, "b")
    first = op_names()
    run(shell, cell, "b")
    assert op_names() == first
    names = [v.op.name for v in tf.global_variables()]
    assert names == ["dense/kernel", "dense/bias", "extra/v"]


def test_cells_without_id_are_known_by_first_line_and_likeness(shell):
    run(shell, "%%dflab --no-show\n# weights\nw = tf.Variable(1.0)\n")
    run(shell, "%%dflab --no-show\n# weights\nw = tf.Variable(1.0)\n")  # same cell again
    assert op_names() == ["Variable/initial_value", "Variable", "Variable/Assign",
                          "Variable/read"]
    run(shell, "%%dflab --no-show\n# weights\nw = tf.Variable(2.0)\n")  # the cell, edited
    assert len(op_names()) == 4 and shell.user_ns["w"].name == "Variable:0"
    # Same first line but a different cell altogether: kept apart.
    run(shell, "%%dflab --no-show\n# weights\nbias = tf.zeros([10], name='bias_init')\n"
               "scale = tf.ones([10], name='scale_init')\n")
    assert "bias_init" in op_names() and "Variable" in op_names()
    assert len(book(shell).records) == 2


def test_name_option_keys_the_cell(shell):
    run(shell, "%%dflab --no-show --name weights\nw = tf.Variable(1.0)", "id1")
    run(shell, "%%dflab --no-show --name weights\nw = tf.Variable(3.0)", "id2")
    assert op_names().count("Variable") == 1 and len(op_names()) == 4
    assert list(book(shell).records) == ["name:weights"]


def test_cell_that_builds_nothing_is_fine(shell):
    ran = run(shell, "%%dflab\nz = 1 + 1")
    assert "built 0 ops" in ran.stdout and shell.user_ns["z"] == 2 and not ran.outputs


# --- stale ops -----------------------------------------------------------------------------------
STALE_SETUP = [
    ("w", "%%dflab --no-show\nw = tf.Variable([1.0, 2.0], name='w')"),
    ("y", "%%dflab --no-show\ny = w * 3.0\n"),
    ("z", "%%dflab --no-show\nz = tf.reduce_sum(y, name='total')\n"),
]


def test_readers_of_replaced_ops_are_stale_and_cannot_run(shell):
    for cid, src in STALE_SETUP:
        run(shell, src, cid)
    y_cell = book(shell).records["id:y"]
    run(shell, "sess = tf.Session()\ninit = tf.global_variables_initializer()\nsess.run(init)")
    assert shell.user_ns["sess"].run(shell.user_ns["z"]) == pytest.approx(9.0)
    init = shell.user_ns["init"]

    ran = run(shell, "%%dflab --no-show\nw = tf.Variable([5.0, 6.0], name='w')", "w")
    assert f"stale: mul (cell {y_cell.label}) uses replaced w/read; re-run that cell" \
        in ran.stdout
    z_label = book(shell).records["id:z"].label
    assert f"then re-run the cells that depend on them: {z_label}" in ran.stdout
    # init, built outside %%dflab cells, runs w's old initializer: stale too, named by its line.
    assert "stale: init (Cell In[" in ran.stdout and "uses replaced w/Assign" in ran.stdout
    stale_op = tf.get_default_graph().get_operation_by_name("mul")  # kept, but marked
    assert [m.op for m in tf.get_default_graph().stale_marks()] == [stale_op, init]

    ran = run(shell, "sess.run(z)", ok=False)
    err = ran.error
    assert isinstance(err, errors.FailedPreconditionError)
    assert err.op is stale_op
    message = str(err)
    assert "'mul'" in message and "stale" in message and "'w/read:0'" in message
    # Where the stale op was built, as one cell (its label and line), not a temp file name.
    assert f"built in Cell {y_cell.label}, line 2)" in message
    assert f"defined at Cell {y_cell.label}, line 2)]]" in message

    # Re-running the stale cells, in order, clears the marks; values use the new w.
    run(shell, STALE_SETUP[1][1], "y")
    out = run(shell, STALE_SETUP[2][1], "z").stdout
    assert "stale: mul" not in out and "stale: init" in out
    assert [m.op for m in tf.get_default_graph().stale_marks()] == [init]
    err = run(shell, "sess.run(init)", ok=False).error
    assert isinstance(err, errors.FailedPreconditionError)
    assert "its control input 'w/Assign' was replaced" in str(err)
    run(shell, "sess.run(tf.variables_initializer([w]))")
    assert shell.user_ns["sess"].run(shell.user_ns["z"]) == pytest.approx(33.0)


def test_readers_of_a_replaced_resource_variable_are_stale(shell, resource_default):
    # Each use of a resource variable is a read built in the using cell: that read is the
    # stale op when the variable's cell is re-run (a reference variable's is its own w/read).
    for cid, src in STALE_SETUP:
        run(shell, src, cid)
    assert tf.get_default_graph().get_operation_by_name("w").type == "VarHandleOp"
    y_cell = book(shell).records["id:y"]
    run(shell, "sess = tf.Session()\ninit = tf.global_variables_initializer()\nsess.run(init)")
    assert shell.user_ns["sess"].run(shell.user_ns["z"]) == pytest.approx(9.0)

    ran = run(shell, "%%dflab --no-show\nw = tf.Variable([5.0, 6.0], name='w')", "w")
    assert "built 5 ops, replacing 5" in ran.stdout
    assert "open sessions forgot the old values of w" in ran.stdout
    assert f"stale: ReadVariableOp (cell {y_cell.label}) uses replaced w; re-run that cell" \
        in ran.stdout
    stale_read = tf.get_default_graph().get_operation_by_name("ReadVariableOp")
    assert stale_read.type == "ReadVariableOp"
    err = run(shell, "sess.run(z)", ok=False).error
    assert isinstance(err, errors.FailedPreconditionError) and err.op is stale_read
    assert "its input 'w:0' was replaced" in str(err)

    run(shell, STALE_SETUP[1][1], "y")
    assert "stale: ReadVariableOp" not in run(shell, STALE_SETUP[2][1], "z").stdout
    run(shell, "sess.run(tf.variables_initializer([w]))")
    assert shell.user_ns["sess"].run(shell.user_ns["z"]) == pytest.approx(33.0)


def test_collections_forget_replaced_resource_variables(shell, resource_default):
    run(shell, "%%dflab --no-show\nw = tf.Variable(1.0, name='w')\n"
               "tf.add_to_collection(tf.GraphKeys.UPDATE_OPS, w.assign_add(1.0))", "w")
    run(shell, "%%dflab --no-show\nw = tf.Variable(2.0, name='w')\n"
               "tf.add_to_collection(tf.GraphKeys.UPDATE_OPS, w.assign_add(1.0))", "w")
    w = shell.user_ns["w"]
    assert tf.global_variables() == [w] and tf.trainable_variables() == [w]
    assert [op.name for op in tf.get_default_graph().get_operations()
            if op.type == "VarHandleOp"] == ["w"]
    (update,) = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        assert sess.run(update) == 3.0 and sess.run(w) == 3.0


def test_fetching_a_removed_op_fails_clearly(shell):
    run(shell, "%%dflab --no-show\nc = tf.constant(1.0, name='c')", "c")
    run(shell, "old = c")
    run(shell, "%%dflab --no-show\nc = tf.constant(2.0, name='c')", "c")
    ran = run(shell, "tf.Session().run(old)", ok=False)
    assert isinstance(ran.error, errors.FailedPreconditionError)
    assert "'c' was removed from the graph" in str(ran.error)
    ran = run(shell, "old + 1.0", ok=False)  # and no new op may read it
    assert isinstance(ran.error, ValueError) and "was removed" in str(ran.error)


# --- collections and variables -------------------------------------------------------------------
def test_collections_forget_replaced_variables(shell):
    run(shell, "%%dflab --no-show\nw = tf.Variable(1.0, name='w')\n"
               "tf.add_to_collection(tf.GraphKeys.UPDATE_OPS, w.assign_add(1.0))", "w")
    run(shell, "%%dflab --no-show\nv = tf.Variable(10.0, name='v', trainable=False)", "v")
    run(shell, "%%dflab --no-show\nw = tf.Variable(2.0, name='w')\n"
               "tf.add_to_collection(tf.GraphKeys.UPDATE_OPS, w.assign_add(1.0))", "w")
    w = shell.user_ns["w"]
    assert tf.global_variables() == [shell.user_ns["v"], w]
    assert tf.trainable_variables() == [w]
    (update,) = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
    assert update.op.inputs[0].op is w.op
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        assert sess.run(w) == 2.0


def test_open_sessions_see_replaced_variables_as_uninitialized(shell):
    run(shell, "%%dflab --no-show\nw = tf.Variable(tf.ones([2]), name='w')", "w")
    run(shell, "sess = tf.Session()\nsess.run(w.initializer)\nsess.run(w.assign_add([1., 1.]))")
    run(shell, "keep = tf.Variable(7.0, name='keep')\nsess.run(keep.initializer)")
    ran = run(shell, "%%dflab --no-show\nw = tf.Variable(tf.zeros([3]), name='w')", "w")
    assert "open sessions forgot the old values of w" in ran.stdout
    ran = run(shell, "sess.run(w)", ok=False)
    assert isinstance(ran.error, errors.FailedPreconditionError)
    assert "uninitialized" in str(ran.error)
    run(shell, "sess.run(tf.global_variables_initializer())")
    np.testing.assert_array_equal(shell.user_ns["sess"].run(shell.user_ns["w"]), [0, 0, 0])
    # Same shape and dtype: still a new variable, so still uninitialized, never the old value.
    run(shell, "sess.run(w.assign([4., 4., 4.]))")
    run(shell, "%%dflab --no-show\nw = tf.Variable(tf.zeros([3]) + 1, name='w')", "w")
    assert isinstance(run(shell, "sess.run(w)", ok=False).error,
                      errors.FailedPreconditionError)
    run(shell, "sess.run(w.initializer)")
    np.testing.assert_array_equal(shell.user_ns["sess"].run(shell.user_ns["w"]), [1, 1, 1])
    assert shell.user_ns["sess"].run(shell.user_ns["keep"]) == 7.0  # other state untouched


TRAIN_CELLS = [
    ("data", "%%dflab --no-show\nx = tf.placeholder(tf.float32, [None, 3], name='x')\n"
             "t = tf.placeholder(tf.float32, [None, 1], name='t')\n"),
    ("model", "%%dflab --no-show\n"
              "h = tf.layers.dense(x, 8, activation=tf.nn.tanh,\n"
              "                    kernel_initializer=tf.glorot_uniform_initializer(seed={seed}))\n"
              "pred = tf.layers.dense(h, 1, kernel_initializer=tf.random_normal_initializer("
              "stddev=0.5, seed=3))\n"),
    ("train", "%%dflab --no-show\nloss = tf.losses.mean_squared_error(t, pred)\n"
              "step = tf.train.get_or_create_global_step()\n"
              "train_op = tf.train.AdamOptimizer(0.05).minimize(loss, global_step=step)\n"
              "init = tf.global_variables_initializer()\n"),
]
TRAIN_LOOP = """sess.run(init)
start_loss = sess.run(loss, {x: X, t: T})
for _ in range(30):
    sess.run(train_op, {x: X, t: T})
result = sess.run(tf.global_variables() + [loss], {x: X, t: T})
"""


def _fresh_training(X, T):
    """The program of TRAIN_CELLS with seed=1, built once in a fresh graph and session."""
    g = tf.Graph()
    with g.as_default():
        ns = {"tf": tf}
        for _, src in TRAIN_CELLS:
            exec(src.split("\n", 1)[1].format(seed=1), ns)  # noqa: S102 - our own test source
        with tf.Session() as sess:
            ns.update(sess=sess, X=X, T=T)
            exec(TRAIN_LOOP, ns)  # noqa: S102
        return ns["result"], [op.name for op in g.get_operations()]


def test_training_after_rerunning_cells_matches_a_fresh_graph(shell):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(32, 3)).astype(np.float32)
    T = (np.sin(X @ np.array([[1.0], [-2.0], [0.5]])) + 0.3).astype(np.float32)
    shell.user_ns.update(X=X, T=T)
    for cid, src in TRAIN_CELLS:
        run(shell, src.format(seed=7), cid)
    run(shell, "sess = tf.Session()\n" + TRAIN_LOOP)
    first = shell.user_ns["result"]
    # Edit the model (another seed), re-run it and the cell it made stale, in the same session
    # (whose random streams, Adam slots and global step must all start afresh).
    out = run(shell, TRAIN_CELLS[1][1].format(seed=1), "model").stdout
    assert "stale: " in out and "(cell In[" in out
    assert isinstance(run(shell, "sess.run(init)", ok=False).error,
                      errors.FailedPreconditionError)
    run(shell, TRAIN_CELLS[2][1], "train")
    run(shell, TRAIN_LOOP)
    again = shell.user_ns["result"]
    expected, fresh_names = _fresh_training(X, T)
    # Nothing piled up: every op has the name it has in a fresh graph (dense, not dense_2;
    # dense/kernel/Adam, not dense/kernel_1/Adam), in the same order.
    assert op_names() == fresh_names
    variables = [v.op.name for v in tf.global_variables()]
    assert variables[:4] == ["dense/kernel", "dense/bias", "dense_1/kernel", "dense_1/bias"]
    assert "dense/kernel/Adam" in variables
    assert len(again) == len(expected) == len(first)
    for got, want in zip(again, expected):
        np.testing.assert_array_equal(got, want)
    assert again[variables.index("global_step")] == 30  # counted from 0 again
    assert not np.array_equal(first[0], again[0])  # the edit did change the model
    assert again[-1] < 0.7 * shell.user_ns["start_loss"]  # and it trained


# --- failures roll back ---------------------------------------------------------------------------
def test_failed_rerun_rolls_back_to_the_previous_run(shell):
    run(shell, "%%dflab --no-show\nw = tf.Variable([1.0], name='w')", "w")
    run(shell, "%%dflab --no-show\ny = w * 2.0", "y")
    run(shell, "sess = tf.Session()\nsess.run(w.initializer)")
    before = op_names()
    old_w = shell.user_ns["w"]
    ran = run(shell, "%%dflab --no-show\nw = tf.Variable([5.0, 6.0], name='w')\n"
                     "extra = w + 1.0\nboom = undefined_name\n", "w", ok=False)
    assert isinstance(ran.error, _magics.CellFailedError)
    # 4 ops for the new Variable, 2 for "extra"; w's previous run built 4.
    assert "rolled back: 6 new ops removed; the 4 ops of its previous run are back" \
        in str(ran.error)
    # The user's traceback points at the cell's own line 4 (line 1 is %%dflab).
    assert "NameError" in ran.stdout and re.search(r"line 4\b", ran.stdout)
    assert "----> 4 boom = undefined_name" in ran.stdout
    assert op_names() == before
    assert shell.user_ns["w"] is old_w and "extra" not in shell.user_ns
    assert tf.get_default_graph().stale_marks() == []
    assert tf.global_variables() == [old_w]
    # Session state of the restored variable survived, and everything still runs.
    np.testing.assert_array_equal(shell.user_ns["sess"].run(shell.user_ns["y"]), [2.0])
    # The next successful run replaces the previous ops as if the failure never happened.
    run(shell, "%%dflab --no-show\nw = tf.Variable([3.0], name='w')", "w")
    assert sorted(op_names()) == sorted(before)


def test_failed_run_that_used_a_session_gives_the_old_variable_its_value_back(shell):
    run(shell, "%%dflab --no-show\nw = tf.Variable(1.0, name='w')", "w")
    run(shell, "sess = tf.Session()\nsess.run(w.initializer)")
    ran = run(shell, "%%dflab --no-show\nw = tf.Variable(9.0, name='w')\n"
                     "sess.run(w.initializer)\nboom\n", "w", ok=False)
    assert isinstance(ran.error, _magics.CellFailedError)
    assert shell.user_ns["sess"].run(shell.user_ns["w"]) == 1.0
    run(shell, "%%dflab --no-show\nw = tf.Variable(2.0, name='w')", "w")
    assert isinstance(run(shell, "sess.run(w)", ok=False).error, errors.FailedPreconditionError)


def test_failed_first_run_leaves_nothing_behind(shell):
    ran = run(shell, "%%dflab --no-show\na = tf.constant(1.0, name='a')\nb = a + 'x'\n", "f",
              ok=False)
    assert isinstance(ran.error, _magics.CellFailedError)
    assert op_names() == [] and "a" not in shell.user_ns and not book(shell).records
    run(shell, "%%dflab --no-show\na = tf.constant(1.0, name='a')", "f")
    assert op_names() == ["a"]


def test_syntax_error_rolls_back_too(shell):
    run(shell, "%%dflab --no-show\nc = tf.constant(1.0, name='c')", "s")
    ran = run(shell, "%%dflab --no-show\nc = tf.constant(2.0, name='c'\n", "s", ok=False)
    assert isinstance(ran.error, _magics.CellFailedError) and "SyntaxError" in ran.stdout
    assert op_names() == ["c"]


# --- %dflab ---------------------------------------------------------------------------------------
def _small_graph(shell):
    run(shell, "%%dflab --no-show\nx = tf.placeholder(tf.float32, [2], name='x')\n"
               "w = tf.Variable([1.0, 2.0], name='w')\nloss = tf.reduce_sum(x * w, name='loss')\n"
               "train_op = tf.assign_add(w, x, name='train_op')", "g")


def test_line_help_and_usage_errors(shell):
    ran = run(shell, "%dflab --help")
    for command in ("show", "reset", "step", "trace", "placement", "cells"):
        assert command in ran.stdout
    assert "usage: %dflab" in run(shell, "%dflab").stdout
    assert "--feed NAME=EXPR" in run(shell, "%dflab step --help").stdout
    ran = run(shell, "%dflab frobnicate", ok=False)
    assert isinstance(ran.error, UsageError) and "invalid choice: 'frobnicate'" in str(ran.error)
    _small_graph(shell)
    ran = run(shell, "%dflab placement nosuchthing", ok=False)
    assert isinstance(ran.error, UsageError) and "'nosuchthing'" in str(ran.error)


def test_show_returns_a_graph_view(shell):
    from dflab.notebook.graph_view import GraphView

    _small_graph(shell)
    run(shell, "view = %dflab show --color-by device loss:0")
    view = shell.user_ns["view"]
    assert isinstance(view, GraphView) and view.color_by == "device"
    assert view._options["fetches"] == [tf.get_default_graph().get_tensor_by_name("loss:0")]


def test_step_walks_a_run_with_feeds(shell):
    _small_graph(shell)
    run(shell, "sess = tf.Session()\nsess.run(w.initializer)\nxs = np.array([3.0, 4.0])")
    run(shell, "stepper = %dflab step loss --feed x=xs")
    stepper = shell.user_ns["stepper"]
    assert stepper.session is shell.user_ns["sess"]
    stepper.resume()
    assert stepper.result == pytest.approx(11.0)


def test_trace_shows_a_timeline_of_one_traced_run(shell):
    from dflab.notebook.timeline import Timeline

    _small_graph(shell)
    run(shell, "sess = tf.Session()\nsess.run(w.initializer)")
    run(shell, "tl = %dflab trace train_op --feed 'x=np.ones(2)'")
    assert isinstance(shell.user_ns["tl"], Timeline)
    np.testing.assert_array_equal(shell.user_ns["sess"].run(shell.user_ns["w"]), [2.0, 3.0])
    bars = [bar["name"] for bar in shell.user_ns["tl"].data["bars"]]
    assert "train_op" in bars


def test_trace_of_stale_op_reports_the_stale_error(shell):
    _small_graph(shell)
    run(shell, "%%dflab --no-show\ndouble = loss * 2.0", "d")
    run(shell, "%%dflab --no-show\nx = tf.placeholder(tf.float32, [2], name='x')\n"
               "w = tf.Variable([1.0, 2.0], name='w')\nloss = tf.reduce_sum(x * w, name='loss')\n"
               "train_op = tf.assign_add(w, x, name='train_op')", "g")
    ran = run(shell, "%dflab trace double --feed x=np.ones(2)", ok=False)
    assert isinstance(ran.error, errors.FailedPreconditionError) and "stale" in str(ran.error)
    assert "Traceback" not in ran.stdout  # shown as the error alone, not dflab's frames


def test_placement_explains_the_graph(shell):
    from dflab.runtime.placer import PlacementReport

    _small_graph(shell)
    run(shell, "report = %dflab placement loss")
    report = shell.user_ns["report"]
    assert isinstance(report, PlacementReport)
    assert {r.op for r in report.rows} == {"x", "w", "w/read", "mul", "Const", "loss"}
    assert all(r.assigned.endswith("CPU:0") for r in report.rows)
    run(shell, "everything = %dflab placement")
    assert len(shell.user_ns["everything"].rows) == len(op_names())


def test_cells_lists_records_and_stale_ops(shell):
    for cid, src in STALE_SETUP:
        run(shell, src, cid)
    run(shell, STALE_SETUP[0][1], "w")
    out = run(shell, "%dflab cells").stdout
    labels = [r.label for r in book(shell).records.values()]
    assert all(label in out for label in labels)
    assert "stale: mul" in out and "[id key]" in out


def test_reset_clears_graph_and_records(shell):
    _small_graph(shell)
    run(shell, "%dflab reset")
    assert op_names() == [] and not book(shell).records
    assert "No %%dflab cells" in run(shell, "%dflab cells").stdout


def test_reloading_the_extension_keeps_one_hook(shell):
    run(shell, "%reload_ext dflab")
    hooks = [cb for cb in shell.events.callbacks["pre_run_cell"]
             if getattr(cb, "__self__", None).__class__ is _magics.DflabMagics]
    assert len(hooks) == 1


def test_placement_leaves_out_or_refuses_stale_ops(shell):
    for cid, src in STALE_SETUP:
        run(shell, src, cid)
    run(shell, STALE_SETUP[0][1], "w")  # mul (y) is stale, total (z) depends on it
    ran = run(shell, "everything = %dflab placement")
    assert "2 stale ops and their dependents left out" in ran.stdout
    rows = [r.op for r in shell.user_ns["everything"].rows]
    assert sorted(rows) == sorted(set(op_names()) - {"mul", "total"})
    assert len(rows) == len(set(rows))  # no removed op placed beside its replacement
    ran = run(shell, "%dflab placement z", ok=False)
    assert isinstance(ran.error, errors.FailedPreconditionError) and "'mul'" in str(ran.error)


def test_placement_uses_the_devices_of_the_notebooks_session(shell):
    run(shell, "%%dflab --no-show\nwith tf.device('/gpu:0'):\n    a = tf.constant(1.0) * 2.0", "p")
    # No session: only the host CPU. The GPU requests are rows saying why and what to do.
    run(shell, "unsatisfied = %dflab placement a")
    rows = shell.user_ns["unsatisfied"].rows
    assert {r.rule for r in rows} == {"unsatisfiable"}
    assert all("device_count={'GPU': 1}" in r.reason and "allow_soft_placement" in r.reason
               for r in rows)
    run(shell, "sess = tf.Session(config=tf.ConfigProto(device_count={'GPU': 1}))")
    run(shell, "report = %dflab placement a")
    assert {r.assigned.rsplit("/", 1)[-1] for r in shell.user_ns["report"].rows} == {
        "device:GPU:0"}


def test_the_cell_label_is_its_prompt_number(shell):
    ran = run(shell, "%%dflab --no-show\nlabelled = tf.constant(1.0)")
    assert f"%%dflab In[{ran.result.execution_count}]:" in ran.stdout


def test_stale_ops_are_marked_in_the_drawing_with_a_legend_entry(shell):
    for cid, src in STALE_SETUP:
        run(shell, src, cid)
    run(shell, STALE_SETUP[0][1], "w")  # mul (y) is now stale
    layout = layout_graph(tf.get_default_graph())
    mul = layout.name_to_id["mul"]
    assert "stale" in layout.svg and "stale: re-run its cell" in layout.svg
    assert "stale: reads what a re-run cell replaced" in layout.svg  # the legend says why
    node = re.search(rf'<g id="{re.escape(mul)}"[^>]*class="([^"]*)"', layout.svg)
    assert node is not None and "stale" in node.group(1).split()
    fresh = layout.name_to_id["w"]
    other = re.search(rf'<g id="{re.escape(fresh)}"[^>]*class="([^"]*)"', layout.svg)
    assert other is not None and "stale" not in other.group(1).split()
