"""tf.data: every transformation against a plain-Python reference, the iterators (one-shot,
initializable, from_structure), OutOfRangeError at the end, re-initialisation, map/filter
functions capturing constants, variables and placeholders, and a training loop over a dataset."""

import collections

import numpy as np
import pytest

import dflab as tf


def drain(sess, next_element, limit=10_000):
    """Every element an iterator yields until OutOfRangeError (at most ``limit``)."""
    out = []
    for _ in range(limit):
        try:
            out.append(sess.run(next_element))
        except tf.errors.OutOfRangeError:
            return out
    raise AssertionError("iterator did not end")


def elements(dataset):
    with tf.Session() as sess:
        return drain(sess, dataset.make_one_shot_iterator().get_next())


def scalars(dataset):
    return [v.item() for v in elements(dataset)]


# --- sources --------------------------------------------------------------------------------------
def test_from_tensor_slices_tuple_and_dict():
    xs = np.arange(12, dtype=np.float32).reshape(4, 3)
    ys = np.array([1, 2, 3, 4], dtype=np.int32)
    got = elements(tf.data.Dataset.from_tensor_slices((xs, ys)))
    assert len(got) == 4
    for i, (x, y) in enumerate(got):
        np.testing.assert_array_equal(x, xs[i])
        assert y == ys[i] and y.dtype == np.int32
    got = elements(tf.data.Dataset.from_tensor_slices({"a": xs, "b": ys}))
    assert [sorted(e) for e in got] == [["a", "b"]] * 4
    np.testing.assert_array_equal(got[2]["a"], xs[2])


def test_a_list_is_one_component():
    ds = tf.data.Dataset.from_tensor_slices([[1, 2], [3, 4], [5, 6]])
    assert ds.output_types == tf.int32
    assert ds.output_shapes.as_list() == [2]
    np.testing.assert_array_equal(np.stack(elements(ds)), [[1, 2], [3, 4], [5, 6]])


def test_from_tensor_slices_rejects_mismatched_sizes():
    with pytest.raises(ValueError):
        tf.data.Dataset.from_tensor_slices((np.zeros(3), np.zeros(4)))
    with pytest.raises(ValueError):
        tf.data.Dataset.from_tensor_slices(np.float32(1.0))


def test_from_tensors_and_range():
    got = elements(tf.data.Dataset.from_tensors(([1, 2, 3], "s")))
    assert len(got) == 1
    np.testing.assert_array_equal(got[0][0], [1, 2, 3])
    assert got[0][1] == b"s"
    assert scalars(tf.data.Dataset.range(5)) == list(range(5))
    assert scalars(tf.data.Dataset.range(2, 11, 3)) == list(range(2, 11, 3))
    assert scalars(tf.data.Dataset.range(5, 0, -2)) == list(range(5, 0, -2))
    assert tf.data.Dataset.range(3).output_types == tf.int64


def test_from_generator_structure_and_errors():
    def gen():
        for i in range(3):
            yield i, [float(i)] * (i + 1)

    ds = tf.data.Dataset.from_generator(gen, (tf.int64, tf.float32), (tf.TensorShape([]),
                                                                      tf.TensorShape([None])))
    got = elements(ds)
    assert [int(a) for a, _ in got] == [0, 1, 2]
    assert [b.tolist() for _, b in got] == [[0.0], [1.0, 1.0], [2.0, 2.0, 2.0]]
    assert got[1][1].dtype == np.float32
    bad = tf.data.Dataset.from_generator(lambda: iter([1, "x"]), tf.int32)
    with tf.Session() as sess:
        n = bad.make_one_shot_iterator().get_next()
        assert sess.run(n) == 1
        with pytest.raises(tf.errors.InvalidArgumentError, match="expected type was int32"):
            sess.run(n)
    wrong_shape = tf.data.Dataset.from_generator(lambda: iter([[1, 2, 3]]), tf.int32, [2])
    with tf.Session() as sess:
        with pytest.raises(tf.errors.InvalidArgumentError, match="shape"):
            sess.run(wrong_shape.make_one_shot_iterator().get_next())


def test_from_generator_is_called_afresh_each_pass():
    calls = []

    def gen():
        calls.append(1)
        yield from range(3)

    ds = tf.data.Dataset.from_generator(gen, tf.int64).repeat(2)
    assert scalars(ds) == [0, 1, 2, 0, 1, 2]
    assert len(calls) == 2


# --- transformations ------------------------------------------------------------------------------
def test_map_unpacks_tuples_and_builds_graph_ops():
    xs = np.arange(6, dtype=np.float32)
    ds = tf.data.Dataset.from_tensor_slices((xs, xs * 10)).map(
        lambda a, b: {"sum": a + b, "sq": tf.square(a)})
    assert ds.output_types == {"sq": tf.float32, "sum": tf.float32}
    got = elements(ds)
    np.testing.assert_allclose([e["sum"] for e in got], xs + xs * 10)
    np.testing.assert_allclose([e["sq"] for e in got], xs ** 2)
    # A dict element is passed whole; a list result becomes a tuple.
    back = tf.data.Dataset.from_tensor_slices({"a": xs}).map(lambda d: [d["a"], d["a"] * 2])
    assert isinstance(back.output_types, tuple)
    assert [tuple(map(float, e)) for e in elements(back)] == [(x, 2 * x) for x in xs]


def test_map_traces_once_and_has_static_shapes():
    traced = []

    def fn(x):
        traced.append(x)
        return tf.reshape(x, [2, 2])

    ds = tf.data.Dataset.from_tensor_slices(np.arange(12).reshape(3, 4)).map(fn)
    assert ds.output_shapes.as_list() == [2, 2]
    got = elements(ds)
    assert len(traced) == 1 and isinstance(traced[0], tf.Tensor)
    np.testing.assert_array_equal(got[2], np.arange(8, 12).reshape(2, 2))


def test_map_functions_may_hold_conditions_and_loops():
    # TF 2.21 gives the same elements (its datasets trace functions with AutoGraph).
    def spread(x):
        if x > 2:
            y = x * 10
        else:
            y = -x
        return y

    def triangle(x):  # a tensor ``for``: a while_loop, run in a function the map calls
        s = tf.constant(0, tf.int64)
        for i in tf.range(x):
            s += i
        return s

    def doubled_three_times(x):  # a TF 1.x while_loop, with a captured tensor
        return tf.while_loop(lambda i, v: i < three, lambda i, v: (i + 1, v * 2), [0, x])[1]

    three = tf.constant(3)
    assert scalars(tf.data.Dataset.range(5).map(spread)) == [0, -1, -2, 30, 40]
    assert scalars(tf.data.Dataset.range(5).map(triangle)) == [0, 0, 1, 3, 6]
    assert scalars(tf.data.Dataset.range(3).map(doubled_three_times)) == [0, 8, 16]
    evens = tf.data.Dataset.range(6).filter(lambda x: triangle(x) % 2 == 0)
    assert scalars(evens) == [0, 1, 4, 5]  # triangles 0, 0, 1, 3, 6, 10
    batched = tf.data.Dataset.range(4).map(triangle).batch(2)
    assert [e.tolist() for e in elements(batched)] == [[0, 0], [1, 3]]


def test_map_captures_constants_variables_and_placeholders():
    scale = tf.constant(3.0)
    v = tf.Variable(1.0, name="offset")
    p = tf.placeholder(tf.float32, [])
    ds = tf.data.Dataset.from_tensor_slices(np.arange(4, dtype=np.float32))
    ds = ds.map(lambda x: x * scale + v + p)
    it = ds.make_initializable_iterator()
    n = it.get_next()
    with tf.Session() as sess:
        sess.run(v.initializer)
        sess.run(it.initializer, {p: 100.0})
        assert sess.run(n) == 0 * 3 + 1 + 100
        sess.run(v.assign(50.0))  # the variable is read at every call, not at initialisation
        assert sess.run(n) == 1 * 3 + 50 + 100
        sess.run(it.initializer, {p: 0.0})  # the placeholder at initialisation
        assert sess.run(n) == 50


def test_map_of_uninitialized_variable_fails_cleanly():
    v = tf.Variable(1.0, name="never_initialized")
    ds = tf.data.Dataset.range(3).map(lambda x: tf.cast(x, tf.float32) * v)
    with tf.Session() as sess:
        with pytest.raises(tf.errors.FailedPreconditionError, match="never_initialized"):
            sess.run(ds.make_one_shot_iterator().get_next())


def test_filter():
    ds = tf.data.Dataset.range(20).filter(lambda x: tf.equal(x % 3, 0))
    assert scalars(ds) == [x for x in range(20) if x % 3 == 0]
    pairs = tf.data.Dataset.from_tensor_slices((np.arange(6), np.arange(6) * 2.0))
    kept = pairs.filter(lambda a, b: b > 5.0)
    assert [(int(a), float(b)) for a, b in elements(kept)] == [(3, 6.0), (4, 8.0), (5, 10.0)]
    with pytest.raises(ValueError, match="predicate"):
        tf.data.Dataset.range(3).filter(lambda x: x)


@pytest.mark.parametrize("drop", [False, True])
def test_batch(drop):
    xs = np.arange(10 * 2).reshape(10, 2)
    ds = tf.data.Dataset.from_tensor_slices(xs).batch(4, drop_remainder=drop)
    assert ds.output_shapes.as_list() == [4 if drop else None, 2]
    got = elements(ds)
    ref = [xs[i:i + 4] for i in range(0, 10, 4)]
    if drop:
        ref = [b for b in ref if len(b) == 4]
    assert len(got) == len(ref)
    for g, r in zip(got, ref):
        np.testing.assert_array_equal(g, r)


def test_batch_of_different_shapes_fails():
    ds = tf.data.Dataset.range(1, 4).map(lambda n: tf.zeros(tf.cast(tf.reshape(n, [1]),
                                                                     tf.int32)))
    with tf.Session() as sess:
        with pytest.raises(tf.errors.InvalidArgumentError, match="different shapes"):
            sess.run(ds.batch(3).make_one_shot_iterator().get_next())


def test_padded_batch():
    rows = [[1], [2, 2], [3, 3, 3], [4, 4, 4, 4], [5]]
    ds = tf.data.Dataset.from_generator(lambda: iter(rows), tf.int32, [None])
    got = elements(ds.padded_batch(2, padded_shapes=[None], padding_values=-1))
    ref = []
    for i in range(0, len(rows), 2):
        chunk = rows[i:i + 2]
        width = max(len(r) for r in chunk)
        ref.append([r + [-1] * (width - len(r)) for r in chunk])
    assert [g.tolist() for g in got] == ref
    fixed = ds.padded_batch(2, padded_shapes=[5], drop_remainder=True)
    assert fixed.output_shapes.as_list() == [2, 5]
    assert [g.tolist() for g in elements(fixed)] == [[[1, 0, 0, 0, 0], [2, 2, 0, 0, 0]],
                                                     [[3, 3, 3, 0, 0], [4, 4, 4, 4, 0]]]
    too_small = ds.padded_batch(5, padded_shapes=[2])
    with tf.Session() as sess:
        with pytest.raises(tf.errors.InvalidArgumentError, match="smaller size"):
            sess.run(too_small.make_one_shot_iterator().get_next())


def test_shuffle_is_a_seeded_permutation():
    def order(seed, reshuffle=True, graph_seed=None):
        with tf.Graph().as_default() as g:
            if graph_seed is not None:
                tf.set_random_seed(graph_seed)
            ds = tf.data.Dataset.range(50).shuffle(10, seed=seed,
                                                   reshuffle_each_iteration=reshuffle).repeat(2)
            with tf.Session(graph=g) as sess:
                return [int(v) for v in drain(sess, ds.make_one_shot_iterator().get_next())]

    a = order(7)
    assert sorted(a[:50]) == list(range(50)) and sorted(a[50:]) == list(range(50))
    assert a[:50] != list(range(50))
    assert a == order(7)  # the same program gives the same order
    assert a != order(8)
    assert a[:50] != a[50:]  # reshuffled for the second epoch
    same = order(7, reshuffle=False)
    assert same[:50] == same[50:]
    assert order(None, graph_seed=3) == order(None, graph_seed=3)


def test_shuffle_buffer_bounds_displacement():
    # When the element at position ``pos`` is drawn, at most pos + 5 elements have been read.
    got = scalars(tf.data.Dataset.range(100).shuffle(5, seed=1))
    assert sorted(got) == list(range(100))
    for pos, v in enumerate(got):
        assert v <= pos + 4


def test_repeat_take_skip_concatenate_zip_prefetch():
    r = tf.data.Dataset.range
    assert scalars(r(3).repeat(3)) == [0, 1, 2] * 3
    assert scalars(r(3).repeat().take(8)) == ([0, 1, 2] * 3)[:8]
    assert scalars(r(10).skip(7)) == [7, 8, 9]
    assert scalars(r(10).take(-1)) == list(range(10))
    assert scalars(r(10).skip(-1)) == []
    assert scalars(r(3).concatenate(r(10, 12))) == [0, 1, 2, 10, 11]
    assert scalars(r(5).prefetch(2)) == list(range(5))
    assert scalars(r(0).repeat()) == []  # an empty dataset repeated forever ends
    zipped = tf.data.Dataset.zip((r(4), tf.data.Dataset.from_tensor_slices(["a", "b", "c"])))
    got = elements(zipped)
    assert [(int(a), b) for a, b in got] == [(0, b"a"), (1, b"b"), (2, b"c")]
    assert elements(zipped.batch(3))[0][1].dtype == object  # strings: object arrays of bytes
    nested = tf.data.Dataset.zip({"x": r(2), "y": zipped})
    got = elements(nested)
    assert int(got[1]["x"]) == 1 and got[1]["y"][1] == b"b"
    with pytest.raises(TypeError):
        r(3).concatenate(tf.data.Dataset.from_tensor_slices([1.0]))


def test_concatenate_relaxes_shapes():
    a = tf.data.Dataset.from_tensors([1, 2])
    b = tf.data.Dataset.from_tensors([1, 2, 3])
    assert a.concatenate(b).output_shapes.as_list() == [None]


def test_namedtuple_elements_keep_their_type():
    Point = collections.namedtuple("Point", "x y")
    ds = tf.data.Dataset.from_tensor_slices(Point(np.arange(3), np.arange(3) * 2))
    ds = ds.map(lambda p: Point(p.y, p.x))  # a namedtuple is passed whole, like TF
    got = elements(ds)
    assert isinstance(got[0], Point) and (int(got[2].x), int(got[2].y)) == (4, 2)


def test_text_line_dataset(tmp_path):
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_bytes(b"first\r\nsecond\n\nlast")
    b.write_bytes(b"x\ny\n")
    ds = tf.data.TextLineDataset([str(a), str(b)])
    assert ds.output_types == tf.string
    assert elements(ds) == [b"first", b"second", b"", b"last", b"x", b"y"]
    missing = tf.data.TextLineDataset(str(tmp_path / "missing.txt"))
    with tf.Session() as sess:
        with pytest.raises(tf.errors.NotFoundError, match="missing.txt"):
            sess.run(missing.make_one_shot_iterator().get_next())


def test_text_line_dataset_gzip(tmp_path):
    import gzip

    path = tmp_path / "a.gz"
    path.write_bytes(gzip.compress(b"1,2\n3,4\n"))
    ds = tf.data.TextLineDataset(str(path), compression_type="GZIP")
    ds = ds.map(lambda line: tf.decode_csv(line, [[0], [0]]))
    assert [(int(a), int(b)) for a, b in elements(ds)] == [(1, 2), (3, 4)]


# --- iterators ------------------------------------------------------------------------------------
def test_one_shot_iterator_ends_with_out_of_range_and_stays_there():
    n = tf.data.make_one_shot_iterator(tf.data.Dataset.range(2)).get_next()
    assert n.op.type == "IteratorGetNext" and n.dtype == tf.int64 and n.shape.as_list() == []
    with tf.Session() as sess:
        assert [sess.run(n), sess.run(n)] == [0, 1]
        for _ in range(2):
            with pytest.raises(tf.errors.OutOfRangeError, match="End of sequence"):
                sess.run(n)
    with tf.Session() as sess:  # state is per session: a new session starts over
        assert sess.run(n) == 0


def test_initializable_iterator_reinitialises():
    limit = tf.placeholder(tf.int64, [])
    it = tf.data.make_initializable_iterator(tf.data.Dataset.range(limit))
    n = it.get_next()
    with tf.Session() as sess:
        with pytest.raises(tf.errors.FailedPreconditionError, match="not been initialized"):
            sess.run(n)
        sess.run(it.initializer, {limit: 3})
        assert drain(sess, n) == [0, 1, 2]
        sess.run(it.initializer, {limit: 2})
        assert drain(sess, n) == [0, 1]


def test_one_shot_iterator_has_no_initializer():
    it = tf.data.Dataset.range(2).make_one_shot_iterator()
    with pytest.raises(ValueError):
        it.initializer  # noqa: B018


def test_from_structure_switches_datasets():
    train = tf.data.Dataset.from_tensor_slices((np.arange(4.0), np.arange(4))).batch(2)
    test = tf.data.Dataset.from_tensor_slices((np.arange(10.0, 13.0), np.arange(3))).batch(3)
    it = tf.data.Iterator.from_structure(train.output_types, train.output_shapes)
    assert tf.data.get_output_types(it) == (tf.float64, tf.int64)
    x, y = it.get_next()
    assert x.shape.as_list() == [None]
    init_train, init_test = it.make_initializer(train), it.make_initializer(test)
    with tf.Session() as sess:
        sess.run(init_train)
        assert [v.tolist() for v, _ in drain(sess, (x, y))] == [[0.0, 1.0], [2.0, 3.0]]
        sess.run(init_test)
        assert sess.run(x).tolist() == [10.0, 11.0, 12.0]
        sess.run(init_train)
        assert sess.run(x).tolist() == [0.0, 1.0]


def test_from_structure_rejects_incompatible_datasets():
    it = tf.data.Iterator.from_structure(tf.int64, tf.TensorShape([]))
    with pytest.raises(TypeError, match="output types"):
        it.make_initializer(tf.data.Dataset.from_tensors(1.0))
    with pytest.raises(ValueError, match="structure"):
        it.make_initializer(tf.data.Dataset.from_tensors((1, 2)))
    with pytest.raises(TypeError, match="output shapes"):
        it.make_initializer(tf.data.Dataset.from_tensors(np.array([1, 2], np.int64)))
    it.make_initializer(tf.data.Dataset.range(3))  # compatible: fine


def test_shared_iterator_state_across_get_next_ops():
    it = tf.data.Dataset.range(4).make_initializable_iterator()
    a, b = it.get_next(), it.get_next()
    with tf.Session() as sess:
        sess.run(it.initializer)
        assert [sess.run(a), sess.run(b), sess.run(a)] == [0, 1, 2]


def test_dataset_ops_stay_on_the_host_under_a_gpu_scope():
    with tf.device("/gpu:0"):
        ds = tf.data.Dataset.range(3).map(lambda x: x * 2)
        n = ds.make_one_shot_iterator().get_next()
    config = tf.ConfigProto(allow_soft_placement=True)
    with tf.Session(config=config) as sess:
        assert drain(sess, n) == [0, 2, 4]


# --- a training loop ------------------------------------------------------------------------------
def test_mlp_trains_over_a_shuffled_batched_repeated_dataset():
    rng = np.random.RandomState(0)
    xs = rng.randn(256, 2).astype(np.float32)
    ys = (xs[:, 0] * xs[:, 1] > 0).astype(np.int64)  # XOR-like: needs the hidden layer
    ds = tf.data.Dataset.from_tensor_slices((xs, ys)).shuffle(256, seed=1).batch(32).repeat()
    x, y = ds.make_one_shot_iterator().get_next()
    tf.set_random_seed(0)
    h = tf.layers.dense(x, 16, activation=tf.nn.relu)
    logits = tf.layers.dense(h, 2)
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y,
                                                                         logits=logits))
    train = tf.train.AdamOptimizer(0.05).minimize(loss)
    all_x = tf.constant(xs)
    acc = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(tf.layers.dense(
        tf.layers.dense(all_x, 16, activation=tf.nn.relu, name="dense", reuse=True),
        2, name="dense_1", reuse=True), 1), ys), tf.float32))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        first = sess.run(loss)
        for _ in range(300):
            last, _ = sess.run([loss, train])
        assert last < first / 3
        assert sess.run(acc) > 0.9


def test_map_with_a_seeded_random_op_draws_per_element():
    def run():
        with tf.Graph().as_default() as g:
            tf.set_random_seed(5)
            outer = tf.random_uniform([])  # same op name as the function's: separate state
            ds = tf.data.Dataset.range(4).map(lambda x: tf.random_uniform([]))
            n = ds.make_one_shot_iterator().get_next()
            with tf.Session(graph=g) as sess:
                return [float(v) for v in drain(sess, n)], float(sess.run(outer))

    draws, outer = run()
    assert len(set(draws)) == 4 and all(0 <= d < 1 for d in draws)
    assert (draws, outer) == run()


def test_compat_v1_names():
    ds = tf.data.Dataset.range(3).batch(2)
    assert tf.compat.v1.data.get_output_types(ds) == tf.int64
    assert tf.compat.v1.data.get_output_shapes(ds).as_list() == [None]
    assert tf.compat.v1.data.get_output_classes(ds) is tf.Tensor
    it = tf.compat.v1.data.Iterator.from_structure(tf.int64, [None])
    assert isinstance(it, tf.data.Iterator)
    assert tf.data.experimental.AUTOTUNE == tf.data.AUTOTUNE


def test_map_function_survives_graph_serialization():
    # The traced function is plain data on the op: a graph read back from its JSON runs it.
    v = tf.Variable(2.0, name="v")
    ds = tf.data.Dataset.from_tensor_slices(np.arange(3, dtype=np.float32))
    it = ds.map(lambda x: x * v + 1.0).batch(3).make_initializable_iterator()
    n = it.get_next()
    data = tf.get_default_graph().as_graph_def().SerializeToString()
    with tf.Graph().as_default() as g:
        tf.import_graph_def(tf.GraphDef.FromString(data), name="")
        with tf.Session(graph=g) as sess:
            sess.run("v/Assign")
            sess.run(g.get_operation_by_name(it.initializer.name))
            np.testing.assert_allclose(sess.run(g.get_tensor_by_name(n.name)), [1.0, 3.0, 5.0])


def test_monitored_session_stops_at_the_end_of_a_dataset():
    tf.train.get_or_create_global_step()
    n = tf.data.Dataset.range(5).batch(2).make_one_shot_iterator().get_next()
    got = []
    with tf.train.MonitoredTrainingSession() as sess:
        while not sess.should_stop():
            got.append(sess.run(n).tolist())
    assert got == [[0, 1], [2, 3], [4]]


def test_from_generator_with_dict_elements_and_args():
    def gen(n, word):
        assert isinstance(word, bytes)  # arguments arrive as NumPy values, strings as bytes
        for i in range(int(n)):
            yield {"i": i, "w": word * (i + 1)}

    ds = tf.data.Dataset.from_generator(gen, {"i": tf.int32, "w": tf.string},
                                        {"i": [], "w": []}, args=(3, "ab"))
    assert ds.output_shapes["i"].as_list() == []
    got = elements(ds.batch(3))
    assert got[0]["i"].tolist() == [0, 1, 2]
    assert got[0]["w"].tolist() == [b"ab", b"abab", b"ababab"]


def test_an_error_in_map_names_the_function_node_and_the_pass_goes_on():
    ds = tf.data.Dataset.from_tensor_slices(np.array([4, 3, 4])).map(
        lambda n: tf.reshape(tf.range(n), [2, 2]))
    it = ds.make_initializable_iterator()
    n = it.get_next()
    with tf.Session() as sess:
        sess.run(it.initializer)
        assert sess.run(n).tolist() == [[0, 1], [2, 3]]
        with pytest.raises(tf.errors.InvalidArgumentError, match="Reshape"):
            sess.run(n)
        assert sess.run(n).tolist() == [[0, 1], [2, 3]]  # the next element, as TF's
        with pytest.raises(tf.errors.OutOfRangeError):
            sess.run(n)
        sess.run(it.initializer)
        assert sess.run(n).tolist() == [[0, 1], [2, 3]]


def test_map_with_cond_runs_only_the_taken_branch():
    v = tf.Variable(100, dtype=tf.int64, name="v")

    def fn(x):
        # The true branch fails unless x == 2: it must run only where it is taken.
        pair = tf.cond(tf.equal(x, 2), lambda: tf.reshape(tf.range(x), [2]),
                       lambda: tf.fill([2], x))
        safe = tf.reduce_sum(pair)
        return tf.cond(tf.equal(x % 2, 0), lambda: safe + v, lambda: safe), \
            tf.cond(x > 2, lambda: tf.constant("big"), lambda: tf.constant("small"))

    ds = tf.data.Dataset.range(5).map(fn)
    it = ds.make_initializable_iterator()
    n = it.get_next()
    with tf.Session() as sess:
        sess.run(v.initializer)
        sess.run(it.initializer)
        got = [(int(a), b) for a, b in drain(sess, n)]
    ref = []
    for x in range(5):
        safe = 0 + 1 if x == 2 else 2 * x
        ref.append((safe + 100 if x % 2 == 0 else safe, b"big" if x > 2 else b"small"))
    assert got == ref


def test_a_loop_bounded_by_the_element_runs_in_a_map_function():
    ds = tf.data.Dataset.range(3).map(
        lambda x: tf.while_loop(lambda i: i < x, lambda i: i + 1, [tf.constant(0, tf.int64)]))
    assert scalars(ds) == [0, 1, 2]  # (refused before: dataset functions had no loops)


def test_map_with_py_func():
    def shout(word, n):
        return (np.asarray(word).item().decode().upper() * int(n)).encode()

    ds = tf.data.Dataset.from_tensor_slices((["ab", "c"], [2, 3]))
    ds = ds.map(lambda w, n: tf.py_func(shout, [w, n], tf.string))
    assert elements(ds) == [b"ABAB", b"CCC"]


@pytest.mark.parametrize("drop", [False, True])
def test_batching_slices_whole_gives_what_stacking_elements_gives(drop):
    """``from_tensor_slices(...).batch`` cuts batches out of the arrays at once; a ``map`` in
    between makes ``batch`` stack element by element: the two must agree, strings too."""
    x = np.arange(30, dtype=np.float32).reshape(10, 3)
    names = np.array([f"row{i}".encode() for i in range(10)], dtype=object)
    ids = np.arange(10, dtype=np.int64)

    def pipeline(mapped):
        ds = tf.data.Dataset.from_tensor_slices((x, names, ids))
        if mapped:
            ds = ds.map(lambda a, b, c: (a, b, c))
        return elements(ds.batch(4, drop_remainder=drop))

    whole, stacked = pipeline(False), pipeline(True)
    assert [len(b[0]) for b in whole] == ([4, 4] if drop else [4, 4, 2])
    assert len(whole) == len(stacked)
    for a, b in zip(whole, stacked):
        for u, v in zip(a, b):
            assert u.dtype == v.dtype and u.shape == v.shape
            assert u.tolist() == v.tolist()


def test_a_failed_element_is_raised_in_its_place_and_the_pass_goes_on():
    """TF 2.21 gives these sequences for the same pipelines (a map that fails at x = 0);
    ``skip`` follows TF 1.x (TF 2 loses the count skipped before a failure)."""
    base = tf.data.Dataset.from_tensor_slices([1.0, 0.0, 2.0, 4.0, 0.0, 5.0])
    bad = base.map(lambda x: tf.debugging.check_numerics(1.0 / x, "inf"))
    err = tf.errors.InvalidArgumentError
    cases = [
        (bad, [1.0, err, 0.5, 0.25, err, 0.2]),
        (bad.batch(2), [err, [0.5, 0.25], err]),
        (bad.batch(4, drop_remainder=True), [err, err]),  # the short last one fails too
        (bad.take(3), [1.0, err, 0.5, 0.25]),
        (bad.skip(2), [err, 0.25, err, 0.2]),
        (bad.filter(lambda x: x > 0.3), [1.0, err, 0.5, err]),
        (tf.data.Dataset.zip((bad, base)).map(lambda a, b: a * b), [1.0, err, 1.0, 1.0, err,
                                                                    1.0]),
        (bad.repeat(2), [1.0, err, 0.5, 0.25, err, 0.2] * 2),
    ]
    for ds, want in cases:
        got = _run_through(ds)
        _check_elements(got, want)


def _run_through(ds) -> list:
    next_element = tf.data.make_one_shot_iterator(ds).get_next()
    got = []
    with tf.Session() as sess:
        while True:
            try:
                got.append(np.asarray(sess.run(next_element)).tolist())
            except tf.errors.OutOfRangeError:
                return got
            except tf.errors.OpError as e:
                got.append(type(e))


def _check_elements(got, want):
    assert len(got) == len(want), (got, want)
    for g, w in zip(got, want):
        if isinstance(w, type):
            assert g is w, (got, want)
        else:
            np.testing.assert_allclose(g, w, rtol=1e-6)


def test_a_shuffle_raises_a_failed_element_as_it_comes_and_padded_batch_stops_at_it():
    """TF 2.21: a failed element never enters a shuffle's buffer (the first get_next raises it
    here) and is not counted by take; ``padded_batch`` fails at the failed element, losing
    those gathered before it, and starts its next batch after it."""
    err = tf.errors.InvalidArgumentError
    fails_at_2 = tf.data.Dataset.range(10).map(
        lambda x: tf.debugging.check_numerics(1.0 / tf.cast(x - 2, tf.float32), "inf"))
    got = _run_through(fails_at_2.shuffle(5, seed=1))
    assert got[0] is err and len(got) == 10
    np.testing.assert_allclose(sorted(got[1:]), sorted(1.0 / (k - 2) for k in range(10)
                                                       if k != 2), rtol=1e-6)
    assert len(_run_through(fails_at_2.shuffle(5, seed=1).take(3))) == 4
    fails_at_4 = tf.data.Dataset.range(10).map(
        lambda x: tf.debugging.check_numerics(1.0 / tf.cast(x - 4, tf.float32), "inf") * 0
        + tf.cast(x, tf.float32))
    rows = fails_at_4.map(lambda x: tf.fill([tf.cast(x, tf.int32)], x))
    got = _run_through(rows.padded_batch(3, padded_shapes=[None]))
    assert got[1] is err and len(got) == 4
    assert [[r[0] for r in batch] for batch in (got[0], got[2], got[3])] == \
        [[0.0, 1.0, 2.0], [5.0, 6.0, 7.0], [8.0, 9.0]]
