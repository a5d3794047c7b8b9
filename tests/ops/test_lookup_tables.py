"""Lookup tables as session state (what the TF fixtures of cases_misc.py cannot show): a
table keeps its entries across runs of one session, a new session starts it uninitialized,
and lookups of scalars and empty batches keep the keys' shape."""

import numpy as np
import pytest

import dflab as tf


def _table():
    init = tf.lookup.KeyValueTensorInitializer(["x", "y", "z"], [7.0, 8.0, 9.0])
    return tf.lookup.StaticHashTable(init, -1.0)


def test_entries_live_with_the_session():
    table = _table()
    keys = tf.placeholder(tf.string, [None])
    found = table.lookup(keys)
    with tf.Session() as sess:
        sess.run(tf.tables_initializer())
        for batch in (["x"], ["z", "q", "y"], []):
            want = [{"x": 7.0, "y": 8.0, "z": 9.0}.get(k, -1.0) for k in batch]
            got = sess.run(found, {keys: batch})
            assert got.dtype == np.float32 and got.shape == (len(batch),)
            np.testing.assert_array_equal(got, want)
        assert sess.run(table.lookup(tf.constant("y"))) == 8.0
    with tf.Session() as sess:  # a new session: the table is new too
        assert sess.run(table.size()) == 0
        with pytest.raises(tf.errors.FailedPreconditionError, match="not initialized"):
            sess.run(found, {keys: ["x"]})


def test_initializers_collection_and_reinitialization():
    table = _table()
    assert tf.get_collection(tf.GraphKeys.TABLE_INITIALIZERS) == [table.initializer]
    with tf.Session() as sess:
        sess.run(table.initializer)
        sess.run(table.initializer)  # the same entries again: allowed, as in TF
        assert sess.run(table.size()) == 3


def test_table_ops_stay_with_the_table():
    table = _table()
    found = table.lookup(tf.constant(["x"]))
    assert found.op.colocation_groups() == table.resource_handle.op.colocation_groups()


def test_monitored_session_initializes_tables():
    # TF's Scaffold puts tables_initializer into its default local_init_op.
    found = _table().lookup(tf.constant(["y", "w"]))
    tf.train.get_or_create_global_step()
    with tf.train.MonitoredTrainingSession() as sess:
        np.testing.assert_array_equal(sess.run(found), [8.0, -1.0])


def test_supervisor_initializes_tables(tmp_path):
    found = _table().lookup(tf.constant(["z"]))
    sv = tf.train.Supervisor(logdir=str(tmp_path), summary_op=None, save_model_secs=0)
    with sv.managed_session() as sess:
        assert sess.run(found)[0] == 9.0


def _vocab(num_oov_buckets=3, **kw):
    init = tf.lookup.KeyValueTensorInitializer(["x", "y"], tf.constant([0, 1], tf.int64))
    return tf.lookup.StaticVocabularyTable(init, num_oov_buckets, **kw)


def test_vocabulary_table_buckets_are_fingerprints():
    # The bucket of an unknown key is 2 + Fingerprint64(key) % 3 (FarmHash, dflab.lib.hash).
    from dflab.lib.hash import fingerprint64

    table = _vocab()
    words = ["x", "q", "zebra", "", "y"]
    ids = table.lookup(tf.constant(words))
    with tf.Session() as sess:
        with pytest.raises(tf.errors.FailedPreconditionError, match="not initialized"):
            sess.run(ids)
        sess.run(table.initializer)
        want = [{"x": 0, "y": 1}.get(w, 2 + fingerprint64(w.encode()) % 3) for w in words]
        np.testing.assert_array_equal(sess.run(ids), want)
        assert sess.run(table.size()) == 5


def test_vocabulary_table_errors_as_tf():
    with pytest.raises(ValueError, match=r"`num_oov_buckets` must be > 0; use StaticHashTable"):
        _vocab(0)
    with pytest.raises(TypeError, match="Invalid `key_dtype`, expected integer but got"):
        _vocab(lookup_key_dtype=tf.int32)
    with pytest.raises(TypeError, match="Dtype of argument `keys` must be <dtype: .string.>, "
                       "received: <dtype: .int32.>"):
        _vocab().lookup(tf.constant([1]))
    init = tf.lookup.KeyValueTensorInitializer(["a"], [1])
    with pytest.raises(TypeError, match="Invalid `value_dtype`, expected <dtype: .int64.> but "
                       "got <dtype: .int32.>"):
        tf.lookup.StaticVocabularyTable(init, 2)


def test_vocabulary_table_in_compat_v1():
    assert tf.compat.v1.lookup.StaticVocabularyTable is tf.lookup.StaticVocabularyTable
    assert _vocab(name="vocab/").name == "vocab"
