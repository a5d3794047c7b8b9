"""``Scaffold(copy_from_scaffold=other)``: every field not given is taken from ``other`` (TF1's
behaviour); given fields win; anything but a Scaffold is a TypeError; a monitored session runs
with the copy."""

import numpy as np
import pytest

import dflab as tf

FIELDS = ("init_op", "init_feed_dict", "init_fn", "ready_op", "ready_for_local_init_op",
          "local_init_op", "summary_op", "saver")


def _fields(**overrides):
    """A distinct stand-in value per field (a Scaffold only stores them until ``finalize``)."""
    values = {f: object() for f in FIELDS}
    values.update(overrides)
    return values


def test_every_field_not_given_is_copied():
    values = _fields()
    copy = tf.train.Scaffold(copy_from_scaffold=tf.train.Scaffold(**values))
    for field in FIELDS:
        assert getattr(copy, field) is values[field], field


@pytest.mark.parametrize("field", FIELDS)
def test_a_given_field_wins_over_the_copied_one(field):
    base, mine = _fields(), object()
    copy = tf.train.Scaffold(copy_from_scaffold=tf.train.Scaffold(**base), **{field: mine})
    assert getattr(copy, field) is mine
    for other in FIELDS:
        if other != field:
            assert getattr(copy, other) is base[other], other


def test_fields_left_none_stay_none_and_the_source_is_unchanged():
    base = tf.train.Scaffold(init_fn=print)
    copy = tf.train.Scaffold(copy_from_scaffold=base, ready_op=object())
    assert copy.init_fn is print and copy.saver is None and copy.init_op is None
    assert base.ready_op is None


@pytest.mark.parametrize("not_a_scaffold", [object(), {"init_op": None}, "scaffold", 0])
def test_copy_from_something_else_is_a_type_error(not_a_scaffold):
    with pytest.raises(TypeError, match="copy_from_scaffold"):
        tf.train.Scaffold(copy_from_scaffold=not_a_scaffold)


def test_copy_from_a_finalized_scaffold_takes_its_defaults():
    tf.Variable(1.0, name="v")
    base = tf.train.Scaffold().finalize()
    copy = tf.train.Scaffold(copy_from_scaffold=base)
    assert copy.init_op is base.init_op and copy.saver is base.saver
    assert copy.ready_op is base.ready_op and copy.local_init_op is base.local_init_op
    assert copy.finalize() is copy and copy.saver is base.saver


def test_a_monitored_session_with_the_copy_initialises_and_runs(tmp_path):
    w = tf.Variable(0.0, name="w")
    start = tf.placeholder(tf.float32, [], name="start")
    init = tf.assign(w, start).op
    calls = []
    base = tf.train.Scaffold(init_op=init, init_feed_dict={start: 5.0},
                             init_fn=lambda scaffold, sess: calls.append(scaffold))
    saver = tf.train.Saver(max_to_keep=1)
    copy = tf.train.Scaffold(copy_from_scaffold=base, saver=saver)
    step = tf.assign_add(w, 1.0)
    creator = tf.train.ChiefSessionCreator(scaffold=copy, checkpoint_dir=str(tmp_path))
    with tf.train.MonitoredSession(session_creator=creator) as sess:
        assert sess.run(w) == 5.0  # base's init op, fed with base's feed dict
        assert sess.run(step) == 6.0
        path = copy.saver.save(sess._tf_sess(), str(tmp_path / "model"), global_step=1)
    assert calls == [copy]  # base's init_fn, called with the scaffold in use
    assert copy.saver is saver and copy.init_op is init
    tf.reset_default_graph()
    # A fresh graph restores what the copied scaffold's saver wrote.
    w2 = tf.Variable(0.0, name="w")
    restored = tf.train.Scaffold(copy_from_scaffold=tf.train.Scaffold())
    creator = tf.train.ChiefSessionCreator(scaffold=restored, checkpoint_dir=str(tmp_path))
    with tf.train.MonitoredSession(session_creator=creator) as sess:
        np.testing.assert_allclose(sess.run(w2), 6.0)
    assert tf.train.latest_checkpoint(str(tmp_path)) == path
