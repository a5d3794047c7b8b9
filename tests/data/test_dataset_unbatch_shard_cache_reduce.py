"""Dataset.unbatch (and tf.data.experimental.unbatch), shard, cache (in memory) and reduce,
in a graph and eagerly; expected values and errors are TF 2.21's ``tf.compat.v1``'s."""

import numpy as np
import pytest

import dflab as tf

D = tf.data.Dataset
ERR = "InvalidArgumentError"


def _reciprocal(x, at):
    return tf.debugging.check_numerics(1.0 / tf.cast(x - at, tf.float32), "bad")


def _rounded(values):
    return [v if isinstance(v, str) else round(v, 6) for v in values]


# --- unbatch --------------------------------------------------------------------------------------
def test_unbatch(read):
    assert read(D.range(7).batch(3).unbatch()) == list(range(7))
    assert read(D.range(5).batch(2).apply(tf.data.experimental.unbatch())) == list(range(5))
    ds = D.from_tensor_slices((np.arange(12).reshape(2, 3, 2),
                               np.array([[1, 2, 3], [4, 5, 6]]))).unbatch()
    assert [s.as_list() for s in ds.output_shapes] == [[2], []]
    assert ds.output_types == (tf.int64, tf.int64)
    assert read(ds) == [([0, 1], 1), ([2, 3], 2), ([4, 5], 3), ([6, 7], 4), ([8, 9], 5),
                        ([10, 11], 6)]


def test_unbatch_refuses_what_tf_refuses(read):
    with pytest.raises(ValueError, match="^Cannot unbatch an input with scalar components.$"):
        D.range(3).unbatch()
    with pytest.raises(ValueError, match="components have a matching leading dimension. "
                                         "Encountered both 5 and 6."):
        D.from_tensor_slices((np.zeros([4, 5]), np.zeros([4, 6]))).unbatch()
    unknown = D.from_generator(lambda: iter([np.zeros(2), np.float64(1), np.ones(2)]),
                               tf.float64)
    assert unknown.unbatch().output_shapes.ndims is None
    assert read(unknown.unbatch()) == [0.0, 0.0, ERR, 1.0, 1.0]
    pairs = D.from_generator(lambda: iter([(np.zeros(2), np.zeros(3)), (np.ones(1),
                                                                         np.ones(1))]),
                             (tf.float64, tf.float64), ([None], [None]))
    assert read(pairs.unbatch()) == [ERR, (1.0, 1.0)]


def test_unbatch_messages(eager):
    pairs = D.from_generator(lambda: iter([(np.zeros(2), np.zeros(3))]),
                             (tf.float64, tf.float64), ([None], [None]))
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"Input element must have the same batch size in each component\. "
                             r"Component 0 had size 2 but component 1 had size, 3\."):
        next(iter(pairs.unbatch()))
    scalar = D.from_generator(lambda: iter([np.float64(1)]), tf.float64)
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match="Input element must have a non-scalar value in each component."):
        next(iter(scalar.unbatch()))


def test_unbatch_passes_failed_elements_on(read):
    one = D.range(4).map(lambda x: _reciprocal(x, 1)).batch(1).unbatch()
    assert _rounded(read(one)) == [-1.0, ERR, 1.0, 0.5]
    two = D.range(4).map(lambda x: _reciprocal(x, 1)).map(lambda x: tf.stack([x, x]))
    assert _rounded(read(two.unbatch())) == [-1.0, -1.0, ERR, 1.0, 1.0, 0.5, 0.5]


# --- shard ----------------------------------------------------------------------------------------
def test_shard(read):
    assert read(D.range(10).shard(3, 1)) == [1, 4, 7]
    assert read(D.range(10).shard(3, 0)) == [0, 3, 6, 9]
    assert read(D.range(10).shard(1, 0)) == list(range(10))


@pytest.mark.parametrize("args, message", [
    ((0, 0), r"Number of shards must be greater than zero \(currently num_shards = 0\)\."),
    ((3, 3), r"Index must be between 0 and 2 \(currently index = 3\)\."),
    ((3, -1), r"Index must be between 0 and 2 \(currently index = -1\)\."),
])
def test_shard_arguments_are_checked(mode, args, message):
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
        ds = D.range(10).shard(*args)
        with tf.Session() as sess:
            sess.run(tf.data.make_one_shot_iterator(ds).get_next())


@pytest.mark.parametrize("index, expected", [
    (0, [-0.5, ERR, 1 / 3]),  # the failure met while skipping loses the skip's count
    (1, [-1.0, ERR, 1 / 3]),
    (2, [ERR, 1.0, 0.25]),
])
def test_shard_over_failures_shifts_as_tfs(read, index, expected):
    ds = D.range(8).map(lambda x: _reciprocal(x, 2)).shard(3, index)
    assert _rounded(read(ds)) == _rounded(expected)


# --- cache ----------------------------------------------------------------------------------------
def _counting_generator(calls):
    def gen():
        calls.append(1)
        yield from range(3)

    return gen


def test_cache_reads_its_source_once_per_filled_cache(eager):
    calls = []
    cached = D.from_generator(_counting_generator(calls), tf.int64).cache()
    assert [int(x) for x in cached] == [0, 1, 2]
    assert [int(x) for x in cached] == [0, 1, 2]
    assert len(calls) == 1
    calls.clear()
    partly = D.from_generator(_counting_generator(calls), tf.int64).cache()
    it = iter(partly)
    next(it)
    del it  # an unfinished pass keeps nothing
    assert [int(x) for x in partly] == [0, 1, 2]
    assert [int(x) for x in partly] == [0, 1, 2]
    assert len(calls) == 2
    shuffled = D.range(5).shuffle(5).cache()
    assert [int(x) for x in shuffled] == [int(x) for x in shuffled]


def test_cache_under_repeat_reads_the_source_once(read):
    calls = []
    ds = D.from_generator(_counting_generator(calls), tf.int64).cache().repeat(3)
    assert read(ds) == [0, 1, 2] * 3
    assert len(calls) == 1
    once = read(D.range(6).shuffle(6).cache().repeat(2))
    assert once[:6] == once[6:] and sorted(once[:6]) == list(range(6))


def test_cache_keeps_no_failed_element(read):
    ds = D.range(4).map(lambda x: _reciprocal(x, 1)).cache().repeat(2)
    assert _rounded(read(ds)) == [-1.0, ERR, 1.0, 0.5, -1.0, 1.0, 0.5]


def test_a_graph_caches_per_initialisation():
    calls = []
    ds = D.from_generator(_counting_generator(calls), tf.int64).cache().repeat(2)
    it = tf.data.make_initializable_iterator(ds)
    nxt = it.get_next()
    with tf.Session() as sess:
        for _ in range(2):
            sess.run(it.initializer)
            assert [int(sess.run(nxt)) for _ in range(6)] == [0, 1, 2] * 2
    assert len(calls) == 2  # each initialisation makes the dataset, and its cache, anew


def test_caching_in_files_is_refused_clearly(mode, tmp_path):
    with pytest.raises(tf.errors.UnimplementedError,
                       match="caching a dataset in files .* is not supported"):
        ds = D.range(3).cache(str(tmp_path / "cache"))
        with tf.Session() as sess:
            sess.run(tf.data.make_one_shot_iterator(ds).get_next())


def test_a_cached_pipeline_restores_from_a_checkpoint(eager, tmp_path):
    def pipeline():
        return D.range(5).shuffle(5, seed=4).cache().repeat(2)

    it = iter(pipeline())
    head = [int(next(it)) for _ in range(7)]
    path = tf.train.Checkpoint(it=it).save(str(tmp_path / "ckpt"))
    rest = [int(x) for x in it]
    restored = iter(pipeline())
    tf.train.Checkpoint(it=restored).restore(path)
    assert [int(x) for x in restored] == rest
    assert head[:5] == head[5:] + rest  # the second epoch is the cached first


# --- reduce ---------------------------------------------------------------------------------------
def test_reduce(value):
    assert value(D.range(5).reduce(np.int64(0), lambda s, x: s + x)) == 10
    assert value(D.range(5).reduce((np.int64(0), np.int64(1)),
                                   lambda s, x: (s[0] + x, s[1] * (x + 1)))) == (10, 120)
    assert value(D.range(0).reduce(np.int64(7), lambda s, x: s + x)) == 7
    dicts = D.from_tensor_slices({"a": np.arange(3.0, dtype=np.float32)})
    assert value(dicts.reduce({"t": 0.0}, lambda s, e: {"t": s["t"] + e["a"]})) == {"t": 3.0}


def test_reduce_relaxes_a_growing_state(value):
    grown = D.range(4).reduce(tf.zeros([0], tf.int64), lambda s, x: tf.concat([s, [x]], 0))
    if not tf.executing_eagerly():  # (an eager result has its value's shape)
        assert grown.shape.as_list() == [None]
    assert value(grown) == [0, 1, 2, 3]
    reshaped = D.range(3).reduce(tf.zeros([2]), lambda s, x: tf.zeros([2, 2]))
    if not tf.executing_eagerly():
        assert reshaped.shape.ndims is None
    assert value(reshaped) == [[0.0, 0.0], [0.0, 0.0]]


def test_reduce_in_a_graph_runs_when_run():
    v = tf.Variable(0, dtype=tf.int64)
    total = D.range(4).reduce(np.int64(0), lambda s, x: s + x + v)
    assert total.op.type == "ReduceDataset" and total.dtype == tf.int64
    with tf.Session() as sess:
        sess.run(v.initializer)
        assert sess.run(total) == 6
        sess.run(v.assign(10))
        assert sess.run(total) == 46


def test_reduce_inside_a_map_function(read):
    assert read(D.range(1, 5).map(lambda n: D.range(n).reduce(np.int64(0),
                                                              lambda s, x: s + x))) == [
        0, 1, 3, 6]


def test_reduce_refuses_what_tf_refuses(mode):
    with pytest.raises(TypeError, match=r"The element types for the new state must match the "
                                        r"initial state. Expected <dtype: 'int64'> but got "
                                        r"<dtype: 'float32'>."):
        D.range(5).reduce(np.int64(0), lambda s, x: tf.cast(s + x, tf.float32))
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"The number of components of the initial state and the reduce "
                             r"function output does not match. \(initial_state=2, "
                             r"output=1\)."):
        D.range(5).reduce((np.int64(0), np.int64(0)), lambda s, x: s[0] + x)


def test_a_failed_element_fails_the_reduction(mode):
    total = None
    with pytest.raises(tf.errors.InvalidArgumentError, match="bad"):
        total = D.range(5).map(lambda x: _reciprocal(x, 2)).reduce(0.0, lambda s, x: s + x)
        with tf.Session() as sess:
            sess.run(total)
