"""Graph transactions: begin/commit/roll back, removing ops, released names, stale marks,
nested transactions and op observers (``dflab.framework.graph_transaction``)."""

import numpy as np
import pytest

import dflab as tf
from dflab.framework import errors
from dflab.framework import graph_transaction as gt


def names(g=None):
    return [op.name for op in (g or tf.get_default_graph()).get_operations()]


def built_in(txn_source):
    """Run ``txn_source()`` in a committed transaction; returns the transaction."""
    txn = gt.begin(tf.get_default_graph())
    txn_source()
    txn.commit()
    return txn


# --- begin / commit / roll back -----------------------------------------------------------------
def test_commit_keeps_the_ops_and_records_what_was_built():
    tf.constant(1.0, name="before")
    txn = gt.begin(tf.get_default_graph())
    a = tf.constant(2.0, name="a")
    with tf.name_scope("s"):
        b = a * 3.0
    txn.commit()
    assert txn.state == "committed" and gt.innermost(tf.get_default_graph()) is None
    assert txn.ops == [a.op, b.op.inputs[1].op, b.op]  # creation order
    assert names() == ["before", "a", "s/Const", "s/mul"]
    assert txn.names.added == {"a", "s", "s/const", "s/mul"} and not txn.names.bumped
    with tf.Session() as sess:
        assert sess.run(b) == pytest.approx(6.0)


def test_roll_back_returns_the_graph_to_begin():
    g = tf.get_default_graph()
    x = tf.constant([1.0, 2.0], name="x")
    v = tf.Variable(1.0, name="v")
    before_names, before_version = names(), g.version
    txn = gt.begin(g)
    y = tf.multiply(x, 2.0, name="y")
    tf.Variable(5.0, name="w")
    tf.add_to_collection("extra", y)
    added = g.get_operations()[len(before_names):]
    removed = txn.roll_back("testing")
    assert txn.state == "rolled back"
    assert names() == before_names and g.version > before_version
    assert removed == added and y.op in removed and len(added) > 3
    assert tf.global_variables() == [v] and tf.get_collection("extra") == []
    # The names the rolled-back ops took are free again.
    assert tf.multiply(x, 2.0, name="y").op.name == "y"
    assert tf.Variable(5.0, name="w").op.name == "w"
    # A removed op may not be used, and says why it went.
    with pytest.raises(ValueError, match="removed from the graph when testing"):
        y + 1.0


def test_roll_back_removes_exactly_what_was_added_since_begin():
    g = tf.get_default_graph()
    tf.constant(1.0, name="keep")
    txn = gt.begin(g)
    tf.constant(2.0, name="new1")
    tf.constant(3.0, name="new2")
    assert [op.name for op in txn.added_ops()] == ["new1", "new2"]
    removed = txn.roll_back()
    assert [op.name for op in removed] == ["new1", "new2"] and names() == ["keep"]


def test_context_manager_commits_or_rolls_back():
    g = tf.get_default_graph()
    with gt.begin(g) as txn:
        tf.constant(1.0, name="kept")
    assert txn.state == "committed" and names() == ["kept"]
    with pytest.raises(ZeroDivisionError):
        with gt.begin(g) as txn:
            tf.constant(2.0, name="dropped")
            1 / 0  # noqa: B018 - the block fails
    assert txn.state == "rolled back" and names() == ["kept"]


def test_a_closed_transaction_refuses_further_use():
    txn = gt.begin(tf.get_default_graph())
    txn.commit()
    for attempt in (txn.commit, txn.roll_back, lambda: txn.remove([]),
                    lambda: txn.on_roll_back(lambda: None)):
        with pytest.raises(RuntimeError, match="was committed"):
            attempt()


# --- removing ops, names --------------------------------------------------------------------------
def test_removed_and_rebuilt_ops_get_the_same_names():
    def cell():
        with tf.name_scope("layer1"):
            w = tf.Variable(tf.ones([2, 3]), name="w")
            return tf.matmul(tf.ones([1, 2]), w)

    first = built_in(cell)
    first_names = names()
    for _ in range(3):
        txn = gt.begin(tf.get_default_graph())
        removal = txn.remove(first.ops, "re-run", first.names)
        assert removal.ops == first.ops and removal.stale == []
        cell()
        txn.commit()
        assert names() == first_names  # never layer1_1/w
        first = txn


def test_released_names_keep_other_code_suffixes():
    # A took "layer", B got "layer_1": each keeps its own however often either is rebuilt.
    def build(value):
        with tf.name_scope("layer"):
            return tf.constant(value)

    def rebuild(old, value):
        txn = gt.begin(tf.get_default_graph())
        txn.remove(old.ops, "re-run", old.names)
        out = build(value)
        txn.commit()
        return txn, out.op.name

    a = built_in(lambda: build(1.0))
    b = built_in(lambda: build(2.0))
    assert b.names.bumped == {"layer"} and "layer_1" in b.names.added
    a, name = rebuild(a, 1.5)
    assert name == "layer/Const"
    b, name = rebuild(b, 2.5)
    assert name == "layer_1/Const"
    a, name = rebuild(a, 1.75)
    assert name == "layer/Const"
    assert sorted(names()) == ["layer/Const", "layer_1/Const"]
    assert tf.constant(0.0, name="layer").op.name == "layer_2"  # no gap, no reuse


def test_removal_forgets_collection_entries_and_bumps_the_plan_epoch():
    g = tf.get_default_graph()
    keep = tf.Variable(1.0, name="keep")
    made = built_in(lambda: tf.Variable(2.0, name="gone"))
    version = g.version
    with gt.begin(g) as txn:
        txn.remove(made.ops, "replaced")
    assert tf.global_variables() == [keep] and g.version > version
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        assert sess.run(keep) == 1.0


def test_remove_refuses_a_finalized_graph():
    made = built_in(lambda: tf.constant(1.0))
    g = tf.get_default_graph()
    g.finalize()
    txn = gt.begin(g)
    with pytest.raises(RuntimeError, match="finalized"):
        txn.remove(made.ops)
    txn.roll_back()


# --- stale marks ----------------------------------------------------------------------------------
def test_readers_of_removed_ops_are_stale_and_refused():
    g = tf.get_default_graph()
    made = built_in(lambda: tf.constant([1.0, 2.0], name="w"))
    w = made.ops[0].outputs[0]
    y = tf.multiply(w, 3.0, name="y")
    with tf.control_dependencies([made.ops[0]]):
        z = tf.constant(0.0, name="z")
    with gt.begin(g) as txn:
        removal = txn.remove(made.ops, "cell In[1] was re-run", made.names)
    assert [(m.op, m.replaced, m.replaced_op) for m in removal.stale] == [
        (y.op, "w:0", "w"), (z.op, "^w", "w")]
    assert g.stale_marks() == removal.stale
    with tf.Session() as sess:
        with pytest.raises(errors.FailedPreconditionError) as info:
            sess.run(y)
        assert info.value.op is y.op
        assert "'y' is stale: its input 'w:0' was replaced when cell In[1] was re-run" \
            in str(info.value)
        with pytest.raises(errors.FailedPreconditionError, match="control input 'w'"):
            sess.run(z)
        with pytest.raises(errors.FailedPreconditionError, match="'w' was removed"):
            sess.run(w)
    with pytest.raises(ValueError, match="'w' was removed from the graph when cell In"):
        tf.identity(w)
    # Removing the stale ops (their own code re-run) clears their marks.
    with gt.begin(g) as txn:
        txn.remove([y.op, z.op])
    assert g.stale_marks() == []


def test_readers_of_follows_data_and_control_edges():
    a = tf.constant(1.0, name="a")
    b = tf.add(a, 1.0, name="b")
    with tf.control_dependencies([b]):
        c = tf.constant(2.0, name="c")
    d = tf.multiply(c, 2.0, name="d")
    tf.constant(3.0, name="other")
    assert gt.readers_of([b.op]) == {b.op, c.op, d.op}
    assert gt.readers_of([a.op]) == {a.op, b.op, c.op, d.op}
    assert gt.readers_of([d.op]) == {d.op}


def test_graph_ops_of_values():
    v = tf.Variable(1.0, name="v")
    t = tf.constant(1.0)
    assert gt.graph_ops_of(v) == {v.op} and gt.graph_ops_of(t) == {t.op}
    assert gt.graph_ops_of(t.op) == {t.op} and gt.graph_ops_of(3) == set()


# --- failed edits come back -------------------------------------------------------------------
def test_roll_back_brings_back_removed_ops_with_edges_names_and_marks():
    g = tf.get_default_graph()
    made = built_in(lambda: tf.constant([1.0, 2.0], name="w"))
    w = made.ops[0].outputs[0]
    y = tf.multiply(w, 3.0, name="y")
    stale_before = built_in(lambda: tf.constant(0.0, name="s"))
    reader = tf.identity(stale_before.ops[0].outputs[0], name="reader")
    with gt.begin(g) as txn:
        txn.remove(stale_before.ops, "earlier")
    marks_before = g.stale_marks()
    assert [m.op for m in marks_before] == [reader.op]
    with tf.Session() as sess:
        np.testing.assert_array_equal(sess.run(y), [3.0, 6.0])
        txn = gt.begin(g)
        txn.remove(made.ops, "re-run", made.names)
        tf.constant([9.0], name="w")  # the new run's op, same name
        removed = txn.roll_back("its cell failed")
        assert [op.name for op in removed] == ["w"] and removed[0] is not made.ops[0]
        assert g.get_operation_by_name("w") is made.ops[0]
        assert w.consumers() == [y.op] and g.stale_marks() == marks_before
        np.testing.assert_array_equal(sess.run(y), [3.0, 6.0])  # edges and plans are back
    assert tf.constant(0.0, name="w").op.name == "w_1"  # "w" is taken again


# --- nesting, undo callbacks, observers ---------------------------------------------------------
def test_nested_transactions_own_their_ops_and_close_innermost_first():
    g = tf.get_default_graph()
    outer = gt.begin(g)
    a = tf.constant(1.0, name="a")
    inner = gt.begin(g)
    assert inner.parent is outer and gt.innermost(g) is inner
    b = tf.constant(2.0, name="b")
    with pytest.raises(RuntimeError, match="nested in it is open"):
        outer.commit()
    inner.commit()
    c = tf.constant(3.0, name="c")
    outer.commit()
    assert inner.ops == [b.op] and outer.ops == [a.op, c.op]
    assert inner.names.added == {"b"} and outer.names.added == {"a", "c"}


def test_rolling_back_a_parent_undoes_its_committed_children():
    g = tf.get_default_graph()
    tf.constant(0.0, name="base")
    calls = []
    outer = gt.begin(g)
    outer.on_roll_back(lambda: calls.append("outer"))
    tf.constant(1.0, name="a")
    with gt.begin(g) as inner:
        inner.on_roll_back(lambda: calls.append("inner"))
        tf.constant(2.0, name="b")
    removed = outer.roll_back()
    assert [op.name for op in removed] == ["a", "b"] and names() == ["base"]
    assert calls == ["inner", "outer"]  # newest first


def test_rolling_back_a_child_keeps_the_parents_ops():
    g = tf.get_default_graph()
    with gt.begin(g) as outer:
        a = tf.constant(1.0, name="a")
        inner = gt.begin(g)
        inner.on_roll_back(lambda: calls.append("inner"))
        calls = []
        tf.constant(2.0, name="b")
        inner.roll_back()
        assert calls == ["inner"]
    assert names() == ["a"] and outer.ops == [a.op]


def test_every_undo_runs_even_when_one_fails():
    calls = []
    txn = gt.begin(tf.get_default_graph())
    txn.on_roll_back(lambda: calls.append(1))
    txn.on_roll_back(lambda: 1 / 0)
    txn.on_roll_back(lambda: calls.append(3))
    with pytest.raises(ZeroDivisionError):
        txn.roll_back()
    assert calls == [3, 1] and txn.state == "rolled back"


def test_op_observers_see_new_ops_until_removed():
    g = tf.get_default_graph()
    seen = []
    g.add_op_observer(seen.append)
    a = tf.constant(1.0)
    g.remove_op_observer(seen.append)
    tf.constant(2.0)
    assert seen == [a.op]


def test_a_closed_transaction_no_longer_records_ops():
    g = tf.get_default_graph()
    first = gt.begin(g)
    first.roll_back()
    second = gt.begin(g)
    x = tf.constant(1.0)
    second.commit()
    assert second.ops == [x.op] and first.added_ops() == [x.op] and first.ops == []
    assert gt.innermost(g) is None


def test_transactions_of_different_graphs_are_independent():
    g1, g2 = tf.Graph(), tf.Graph()
    t1, t2 = gt.begin(g1), gt.begin(g2)
    assert t2.parent is None
    with g1.as_default():
        tf.constant(1.0, name="one")
    with g2.as_default():
        tf.constant(2.0, name="two")
    t1.roll_back()
    t2.commit()
    assert names(g1) == [] and names(g2) == ["two"] and [op.name for op in t2.ops] == ["two"]


def test_name_claims_between_counter_states():
    claims = gt.NameClaims.between({"a": 1, "b": 1}, {"a": 2, "b": 1, "c": 1})
    assert claims == gt.NameClaims(frozenset({"c"}), frozenset({"a"})) and claims
    assert not gt.NameClaims()
