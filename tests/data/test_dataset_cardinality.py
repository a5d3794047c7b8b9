"""tf.data.experimental.cardinality and Dataset.cardinality(): an int64 computed by the
DatasetCardinality op when run, TF's value for every transformation (the table is what TF
2.21's ``tf.compat.v1`` gives), a count known only at run time, and ``len(dataset)``."""

import numpy as np
import pytest

import dflab as tf

D = tf.data.Dataset
INF, UNKNOWN = tf.data.experimental.INFINITE_CARDINALITY, \
    tf.data.experimental.UNKNOWN_CARDINALITY


def _r():
    return D.range(10)


def _unknown():
    return D.range(10).filter(lambda x: x > 2)


CASES = {
    "range": (lambda: _r(), 10),
    "range with a step": (lambda: D.range(2, 11, 3), 3),
    "range downwards": (lambda: D.range(5, 0, -2), 3),
    "empty range": (lambda: D.range(5, 0), 0),
    "from_tensors": (lambda: D.from_tensors([1, 2]), 1),
    "from_tensor_slices": (lambda: D.from_tensor_slices([1, 2, 3]), 3),
    "from_generator": (lambda: D.from_generator(lambda: iter([1]), tf.int64), UNKNOWN),
    "map (TF 1.x's: uncounted)": (lambda: _r().map(lambda x: x), UNKNOWN),
    "filter": (lambda: _unknown(), UNKNOWN),
    "batch": (lambda: _r().batch(3), 4),
    "batch dropping the remainder": (lambda: _r().batch(3, drop_remainder=True), 3),
    "padded_batch": (lambda: _r().padded_batch(3, []), 4),
    "padded_batch dropping": (lambda: _r().padded_batch(3, [], drop_remainder=True), 3),
    "batch of infinite": (lambda: _r().repeat().batch(3), INF),
    "batch of infinite dropping": (lambda: _r().repeat().batch(4, drop_remainder=True), INF),
    "batch of unknown": (lambda: _unknown().batch(3), UNKNOWN),
    "repeat forever": (lambda: _r().repeat(), INF),
    "repeat 3": (lambda: _r().repeat(3), 30),
    "repeat 0": (lambda: _r().repeat(0), 0),
    "empty repeated forever": (lambda: D.range(0).repeat(), 0),
    "unknown repeated forever": (lambda: _unknown().repeat(), INF),
    "unknown repeated twice": (lambda: _unknown().repeat(2), UNKNOWN),
    "unknown repeated 0 times": (lambda: _unknown().repeat(0), 0),
    "infinite repeated twice": (lambda: _r().repeat().repeat(2), INF),
    "infinite repeated 0 times": (lambda: _r().repeat().repeat(0), 0),
    "take 3": (lambda: _r().take(3), 3),
    "take 20": (lambda: _r().take(20), 10),
    "take -1": (lambda: _r().take(-1), 10),
    "take 0": (lambda: _r().take(0), 0),
    "infinite take 3": (lambda: _r().repeat().take(3), 3),
    "infinite take -1": (lambda: _r().repeat().take(-1), INF),
    "unknown take 3": (lambda: _unknown().take(3), UNKNOWN),
    "unknown take 0": (lambda: _unknown().take(0), UNKNOWN),
    "skip 3": (lambda: _r().skip(3), 7),
    "skip 20": (lambda: _r().skip(20), 0),
    "skip -1": (lambda: _r().skip(-1), 0),
    "infinite skip 3": (lambda: _r().repeat().skip(3), INF),
    "infinite skip -1": (lambda: _r().repeat().skip(-1), INF),
    "unknown skip -1": (lambda: _unknown().skip(-1), UNKNOWN),
    "zip": (lambda: D.zip((_r(), D.range(4))), 4),
    "zip with infinite": (lambda: D.zip((_r().repeat(), D.range(4))), 4),
    "zip of infinites": (lambda: D.zip((_r().repeat(), _r().repeat())), INF),
    "zip with unknown": (lambda: D.zip((_unknown(), D.range(4))), UNKNOWN),
    "zip of unknown and empty": (lambda: D.zip((_unknown(), D.range(0))), UNKNOWN),
    "concatenate": (lambda: _r().concatenate(D.range(4)), 14),
    "concatenate infinite": (lambda: _r().concatenate(D.range(4).repeat()), INF),
    "concatenate unknown": (lambda: _r().concatenate(_unknown()), UNKNOWN),
    "infinite then unknown": (lambda: _r().repeat().concatenate(_unknown()), INF),
    "unknown then infinite": (lambda: _unknown().concatenate(_r().repeat()), INF),
    "shuffle": (lambda: _r().shuffle(3), 10),
    "prefetch": (lambda: _r().prefetch(3), 10),
    "enumerate": (lambda: _r().enumerate(), 10),
    "with_options": (lambda: _r().with_options(tf.data.Options()), 10),
    "flat_map": (lambda: _r().flat_map(lambda x: D.range(x)), UNKNOWN),
    "interleave": (lambda: _r().interleave(lambda x: D.range(x), cycle_length=2), UNKNOWN),
    "cache": (lambda: _r().cache(), 10),
    "cache of infinite": (lambda: _r().repeat().cache(), INF),
    "shard 3, 0": (lambda: _r().shard(3, 0), 4),
    "shard 3, 1": (lambda: _r().shard(3, 1), 3),
    "shard 3, 2": (lambda: _r().shard(3, 2), 3),
    "shard of infinite": (lambda: _r().repeat().shard(3, 2), INF),
    "shard of unknown": (lambda: _unknown().shard(3, 2), UNKNOWN),
    "unbatch": (lambda: _r().batch(3).unbatch(), UNKNOWN),
    "unbatch of fixed batches": (lambda: D.from_tensor_slices(np.zeros([4, 5])).unbatch(),
                                 UNKNOWN),
    "unbatch of infinite": (lambda: _r().batch(3).repeat().unbatch(), UNKNOWN),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_cardinality_is_tfs(value, name):
    make, expected = CASES[name]
    ds = make()
    assert value(tf.data.experimental.cardinality(ds)) == expected
    assert value(ds.cardinality()) == expected


def test_the_constants_and_the_op():
    assert (INF, UNKNOWN) == (-1, -2)
    assert (tf.data.INFINITE_CARDINALITY, tf.data.UNKNOWN_CARDINALITY) == (-1, -2)
    t = tf.data.experimental.cardinality(D.range(10))
    assert t.dtype == tf.int64 and t.shape.as_list() == []
    assert t.op.type == "DatasetCardinality"
    assert [i.op.type for i in t.op.inputs] == ["RangeDataset"]


def test_a_count_known_only_when_run(tmp_path):
    n = tf.placeholder(tf.int64, [])
    card = D.range(n).batch(3).cardinality()
    for name in ("a", "b", "c"):
        (tmp_path / name).write_text(name)
    files = D.list_files(str(tmp_path / "*"))
    with tf.Session() as sess:
        assert sess.run(card, {n: 10}) == 4
        assert sess.run(card, {n: 3}) == 1
        assert sess.run(files.cardinality()) == 3


def test_len_eagerly(eager):
    assert len(D.range(10)) == 10
    assert len(D.range(10).batch(3)) == 4
    assert isinstance(len(D.range(10)), int)
    with pytest.raises(TypeError, match="^The dataset is infinite.$"):
        len(D.range(10).repeat())
    with pytest.raises(TypeError, match="^The dataset length is unknown.$"):
        len(_unknown())


def test_len_in_a_graph_is_tfs_type_error():
    ds = D.range(10)
    with pytest.raises(TypeError, match=r"^`tf.data.Dataset` only supports `len` in eager "
                                        r"mode. Use `tf.data.Dataset.cardinality\(\)` "
                                        r"instead.$"):
        len(ds)
    assert ds  # a dataset is true, though len() of it is refused
