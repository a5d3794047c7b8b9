"""tf.data under eager execution: ``for element in dataset`` gives the graph's elements for every
transformation, map functions capture eager tensors and variables, TF's iterator protocol
(StopIteration, OutOfRangeError, make_one_shot_iterator, tf.contrib.eager.Iterator, the
refusals), an iterator's state goes with it, errors name the user's line, dataset functions are
silent at inf and NaN, and a model trained over a dataset eagerly matches the same graph."""

from __future__ import annotations

import gc
import inspect
import warnings
import weakref

import numpy as np
import pytest

import dflab as tf
from dflab.eager import eager_mode
from dflab.kernels.iterator_kernels import IteratorState


@pytest.fixture
def eager():
    with eager_mode():
        yield


def _gen():
    for i in range(5):
        yield np.full([i % 3 + 1], i, np.float32), np.int64(i * i)


def _text_file(tmp_path):
    path = tmp_path / "lines.txt"
    path.write_text("alpha\nbeta\n\ngamma\n")
    return str(path)


def _records_file(tmp_path):
    path = str(tmp_path / "r.tfrecord")
    with tf.python_io.TFRecordWriter(path) as w:
        for i in range(4):
            w.write(f"record {i}".encode())
    return path


# Pipelines built the same way in a graph and eagerly (``tmp`` a directory for files).
PIPELINES = {
    "slices, tuple and dict": lambda tmp: tf.data.Dataset.from_tensor_slices(
        ({"a": np.arange(6.0).reshape(3, 2)}, np.array([1, 2, 3], np.int32))),
    "from_tensors": lambda tmp: tf.data.Dataset.from_tensors(
        (np.arange(4), np.float32(2.5))),
    "range, map, filter": lambda tmp: tf.data.Dataset.range(12).map(
        lambda x: (x, tf.cast(x, tf.float32) / 4.0)).filter(
        lambda x, y: tf.equal(x % 3, 1)),
    "from_generator, padded_batch": lambda tmp: tf.data.Dataset.from_generator(
        _gen, (tf.float32, tf.int64), ([None], [])).padded_batch(2, ([3], [])),
    "shuffle with seeds, batch, repeat": lambda tmp: tf.data.Dataset.range(10).shuffle(
        10, seed=7).batch(4).repeat(2),
    "batch dropping the remainder": lambda tmp: tf.data.Dataset.range(7).batch(
        3, drop_remainder=True),
    "take, skip, concatenate, zip": lambda tmp: tf.data.Dataset.zip((
        tf.data.Dataset.range(8).skip(2).take(3).concatenate(tf.data.Dataset.range(2)),
        tf.data.Dataset.from_tensor_slices(np.arange(5.0) ** 2))).prefetch(2),
    "text lines": lambda tmp: tf.data.TextLineDataset(_text_file(tmp)),
    "TFRecords": lambda tmp: tf.data.TFRecordDataset(_records_file(tmp)),
}


def _graph_elements(make, tmp):
    with tf.Graph().as_default(), tf.Session() as sess:
        nxt = tf.compat.v1.data.make_one_shot_iterator(make(tmp)).get_next()
        out = []
        while True:
            try:
                out.append(sess.run(nxt))
            except tf.errors.OutOfRangeError:
                return out


def _numpy(element):
    return tf.nest.map_structure(lambda t: t.numpy(), element)


def _assert_same(a, b):
    tf.nest.assert_same_structure(a, b)
    for x, y in zip(tf.nest.flatten(a), tf.nest.flatten(b)):
        assert np.asarray(x).dtype == np.asarray(y).dtype
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("name", list(PIPELINES))
def test_eager_iteration_gives_the_graphs_elements(name, tmp_path):
    expected = _graph_elements(PIPELINES[name], tmp_path)
    with eager_mode():
        ds = PIPELINES[name](tmp_path)
        got = [_numpy(e) for e in ds]
        assert all(isinstance(t, tf.Tensor) and t.is_eager for e in ds for t in tf.nest.flatten(e))
    assert len(got) == len(expected) > 0
    for g, e in zip(got, expected):
        _assert_same(g, e)


def test_map_captures_eager_tensors_and_reads_variables_at_each_element(eager):
    scale = tf.constant(3.0)
    offset = tf.Variable(1.0)
    it = iter(tf.data.Dataset.range(4).map(lambda x: tf.cast(x, tf.float32) * scale + offset))
    assert float(next(it)) == 1.0
    offset.assign(100.0)  # the function reads the variable's value when it runs
    assert [float(v) for v in it] == [103.0, 106.0, 109.0]


def test_the_iterator_protocol(eager):
    ds = tf.data.Dataset.range(3)
    it = iter(ds)
    assert iter(it) is it
    assert it.output_types == tf.int64 and it.output_shapes.as_list() == []
    assert int(next(it)) == 0 and int(it.next()) == 1 and int(it.get_next()) == 2
    with pytest.raises(StopIteration):
        next(it)
    with pytest.raises(tf.errors.OutOfRangeError):
        it.get_next()
    one_shot = ds.make_one_shot_iterator()
    assert type(one_shot) is type(it)
    assert [int(v) for v in tf.compat.v1.data.make_one_shot_iterator(ds)] == [0, 1, 2]
    assert [int(v) for v in tf.contrib.eager.Iterator(ds)] == [0, 1, 2]
    with pytest.raises(RuntimeError, match="not supported in eager mode"):
        ds.make_initializable_iterator()
    with pytest.raises(RuntimeError, match="not supported in eager mode"):
        tf.compat.v1.data.make_initializable_iterator(ds)


def test_python_iteration_in_a_graph_is_refused_with_the_way_out():
    with tf.Graph().as_default():
        ds = tf.data.Dataset.range(3)
        with pytest.raises(RuntimeError, match="make_one_shot_iterator"):
            iter(ds)

        @tf.function(autograph=False)
        def unconverted(ds):
            return [x for x in ds]

        with pytest.raises(RuntimeError, match="AutoGraph converts"):
            unconverted(ds)
        with pytest.raises(RuntimeError, match="eager"):
            tf.contrib.eager.Iterator(ds)


def test_a_traced_function_reads_an_iterator_passed_in(eager):
    it = iter(tf.data.Dataset.range(4).map(lambda x: x * 2))

    @tf.function
    def step(iterator):
        return next(iterator) + 1

    assert [int(step(it)) for _ in range(4)] == [1, 3, 5, 7]
    with pytest.raises(tf.errors.OutOfRangeError):
        step(it)
    # An iterator enters as its handle, traced by its elements: a new epoch's iterator
    # takes the same trace; other elements trace anew, saying why.
    assert int(step(iter(tf.data.Dataset.range(4).map(lambda x: x * 2)))) == 1
    assert step.experimental_get_tracing_count() == 1
    assert float(step(iter(tf.data.Dataset.from_tensors(0.5)))) == 1.5
    assert step.experimental_get_tracing_count() == 2
    assert "iterator of float32" in step.traces[-1][0]



def test_autograph_turns_a_for_over_a_dataset_into_a_loop_of_ops(eager):
    @tf.function
    def total(ds):
        s = tf.constant(0, tf.int64)
        for x in ds:
            s += x
        return s

    assert int(total(tf.data.Dataset.range(5))) == 10
    assert int(total(tf.data.Dataset.range(5))) == 10  # each call a new pass, one trace
    assert total.experimental_get_tracing_count() == 1
    assert int(total(tf.data.Dataset.range(0))) == 0  # an empty dataset: no iteration

    @tf.function
    def until_three(ds):
        s = tf.constant(0, tf.int64)
        for x in ds:
            if x > 2:
                break
            s += x
        return s

    assert int(until_three(tf.data.Dataset.range(10))) == 0 + 1 + 2

    weights = tf.Variable(np.zeros(2, np.float32))

    @tf.function
    def accumulate(ds):
        n = tf.constant(0)
        for x, y in ds:  # an element's structure, unpacked
            weights.assign_add(x * y)
            n += 1
        return n

    xs, ys = np.ones((3, 2), np.float32), np.arange(3, dtype=np.float32)[:, None]
    assert int(accumulate(tf.data.Dataset.from_tensor_slices((xs, ys)))) == 3
    np.testing.assert_array_equal(weights.numpy(), (xs * ys).sum(0))

    it = iter(tf.data.Dataset.range(6))
    next(it)

    @tf.function
    def rest(iterator):
        s = tf.constant(0, tf.int64)
        for x in iterator:  # the rest of an eager iterator's pass
            s += x
        return s

    assert int(rest(it)) == 1 + 2 + 3 + 4 + 5
    with pytest.raises(StopIteration):
        next(it)

    @tf.function
    def listed(iterator):
        return [x for x in iterator]  # a comprehension is not converted: it would not end

    with pytest.raises(RuntimeError, match="only supported in eager mode"):
        listed(iter(tf.data.Dataset.range(3)))


def test_each_pass_is_new_and_iterators_are_independent(eager):
    ds = tf.data.Dataset.range(5).shuffle(5, seed=1)
    first, second = [int(v) for v in ds], [int(v) for v in ds]
    assert sorted(first) == sorted(second) == [0, 1, 2, 3, 4]
    assert first != second  # reshuffled at each pass, as TF's default
    fixed = tf.data.Dataset.range(5).shuffle(5, seed=1, reshuffle_each_iteration=False)
    assert [int(v) for v in fixed] == [int(v) for v in fixed]
    a, b = iter(tf.data.Dataset.range(3)), iter(tf.data.Dataset.range(3))
    assert [int(next(a)), int(next(a)), int(next(b)), int(next(a))] == [0, 1, 0, 2]


def test_an_iterators_state_goes_with_it(eager):
    """An epoch's iterator holds its pass (and the data it reads): nothing of it may stay in the
    device once the loop is done, or every epoch would leak one."""
    it = iter(tf.data.Dataset.from_tensor_slices(np.zeros((100, 10))))
    next(it)
    state = it._handle._value
    assert isinstance(state, IteratorState)
    ref = weakref.ref(state)
    del it, state
    gc.collect()
    assert ref() is None
    host = tf.get_default_graph().host
    assert not [k for k in host.resources._other if k[0] == "iterator"]


def test_an_error_in_a_map_function_names_the_users_line(eager):
    ds = tf.data.Dataset.from_tensor_slices(np.array([2, 1, 0], np.int32)).map(
        lambda x: tf.math.floordiv(10, x))
    it = iter(ds)
    assert [int(next(it)), int(next(it))] == [5, 10]
    line = inspect.currentframe().f_lineno + 2
    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        next(it)
    assert f"{__file__}:{line}" in str(info.value)


@pytest.mark.parametrize("mode", ["eager", "graph"])
def test_dataset_functions_are_silent_at_inf_and_nan(mode):
    """A map function that overflows (its element an integer, so nothing around the iterator's
    op guards it) makes inf silently, as TF's kernels do."""
    ds_fn = lambda: tf.data.Dataset.from_tensor_slices(  # noqa: E731
        np.array([1e30, -1e30], np.float32)).map(
        lambda x: tf.cast(tf.math.is_inf(x * x - x * x), tf.int32))
    with warnings.catch_warnings(), np.errstate(all="raise"):
        warnings.simplefilter("error")
        if mode == "eager":
            with eager_mode():
                got = [int(v) for v in ds_fn()]
        else:
            got = [int(v) for v in _graph_elements(lambda tmp: ds_fn(), None)]
    assert got == [0, 0]  # inf - inf is NaN, not inf: computed, not raised


def _train(dataset_fn, eager: bool, steps_per_epoch: int) -> list[float]:
    """Losses of a linear regression trained by SGD over two epochs of ``dataset_fn()``."""
    init = np.array([[0.5], [-0.25], [1.0]], np.float32)
    if eager:
        w = tf.Variable(init)
        opt = tf.train.GradientDescentOptimizer(0.1)
        losses = []
        for _ in range(2):
            for x, y in dataset_fn():
                with tf.GradientTape() as tape:
                    loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
                opt.apply_gradients([(tape.gradient(loss, w), w)])
                losses.append(float(loss))
        return losses
    with tf.Graph().as_default(), tf.Session() as sess:
        x, y = tf.compat.v1.data.make_one_shot_iterator(dataset_fn().repeat(2)).get_next()
        w = tf.Variable(init)
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
        train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
        sess.run(tf.global_variables_initializer())
        return [float(sess.run([loss, train])[0]) for _ in range(2 * steps_per_epoch)]


def test_training_over_a_dataset_eagerly_matches_the_graph():
    rng = np.random.default_rng(0)
    xs = rng.normal(size=(40, 3)).astype(np.float32)
    ys = (xs @ np.array([[1.0], [2.0], [-1.0]], np.float32) + 0.5).astype(np.float32)

    def dataset():
        return tf.data.Dataset.from_tensor_slices((xs, ys)).batch(8)

    graph = _train(dataset, eager=False, steps_per_epoch=5)
    with eager_mode():
        eager_losses = _train(dataset, eager=True, steps_per_epoch=5)
    assert len(eager_losses) == 10
    np.testing.assert_allclose(eager_losses, graph, rtol=1e-6)
    assert eager_losses[-1] < eager_losses[0] / 2


def test_as_numpy_iterator_gives_numpy_values_in_the_structure(eager):
    ds = tf.data.Dataset.from_tensor_slices(
        ({"a": np.arange(3)}, np.array([b"x", b"y", b"z"]), np.ones((3, 2), np.float32)))
    got = list(ds.as_numpy_iterator())
    assert len(got) == 3
    first = got[0]
    assert type(first[0]["a"]) is np.int64 and type(first[1]) is bytes
    assert isinstance(first[2], np.ndarray) and first[2].dtype == np.float32
    assert [e[1] for e in got] == [b"x", b"y", b"z"]
    assert list(tf.data.Dataset.range(3).as_numpy_iterator()) == [0, 1, 2]
    assert isinstance(ds.as_numpy_iterator(), tf.data.NumpyIterator)
    with tf.Graph().as_default(), pytest.raises(RuntimeError, match="only supported in eager"):
        tf.data.Dataset.range(3).as_numpy_iterator()


def test_a_traced_loop_is_one_step_of_the_program_order(eager):
    """What follows a loop in a tf.function sees all of its effects, a later loop or next()
    takes the elements the earlier one left, and a break leaves the next element unread
    (TF 2.21's answers for these programs)."""
    v = tf.Variable(0, dtype=tf.int64)

    @tf.function
    def train(ds):
        for x in ds:
            v.assign_add(x)
        return v.read_value()

    assert [int(train(tf.data.Dataset.range(5))) for _ in range(3)] == [10, 20, 30]

    counter = tf.Variable(0)

    @tf.function
    def counted():
        counter.assign(0)
        for _ in tf.range(50):
            counter.assign_add(1)
        counter.assign_add(1000)
        return counter.read_value()

    assert [int(counted()) for _ in range(3)] == [1050] * 3

    @tf.function
    def loop_then_next(iterator):
        s = tf.constant(0, tf.int64)
        for x in iterator:
            s += x
            if x >= 1:
                break
        return s, next(iterator)

    for _ in range(3):
        got = loop_then_next(iter(tf.data.Dataset.range(5)))
        assert (int(got[0]), int(got[1])) == (1, 2)

    @tf.function
    def two_loops(iterator):
        a = tf.constant(0, tf.int64)
        for x in iterator:
            a += x
        b = tf.constant(0, tf.int64)
        for x in iterator:
            b += x
        return a, b

    for _ in range(3):
        a, b = two_loops(iter(tf.data.Dataset.range(4)))
        assert (int(a), int(b)) == (6, 0)


def test_a_traced_function_keeps_no_iterator_it_was_traced_with(eager):
    @tf.function
    def first(iterator):
        return next(iterator)

    it = iter(tf.data.Dataset.from_tensor_slices(np.zeros((100, 10))))
    first(it)
    ref = weakref.ref(it._handle._value)
    del it
    gc.collect()
    assert ref() is None


def test_iter_of_a_dataset_in_a_traced_function(eager):
    """``iter(dataset)`` inside a tf.function starts a pass there: ``next()`` reads one
    element, a ``for`` over it goes on from there (TF 2.21 gives [0, 1, 14] and 6); a
    comprehension, not converted, still refuses."""
    @tf.function
    def head_and_rest(ds):
        it = iter(ds)
        a = next(it)
        b = next(iter(it))
        s = tf.constant(0, tf.int64)
        for x in it:
            s += x
        return a, b, s

    for _ in range(2):  # each call a new pass
        assert [int(t) for t in head_and_rest(tf.data.Dataset.range(6))] == [0, 1, 14]

    @tf.function
    def total(ds):
        s = tf.constant(0, tf.int64)
        for x in iter(ds):
            s += x
        return s

    assert int(total(tf.data.Dataset.range(4))) == 6

    @tf.function
    def listed(ds):
        return [x for x in iter(ds)]

    with pytest.raises(RuntimeError, match="comprehensions"):
        listed(tf.data.Dataset.range(3))


def _pipeline(seed=None):
    return (tf.data.Dataset.range(12).shuffle(5, seed=seed).map(lambda x: x * 10)
            .batch(2).repeat(2))


def _values(it, n):
    return [next(it).numpy().tolist() for _ in range(n)]


def test_a_checkpoint_saves_and_restores_an_iterators_position(eager, tmp_path):
    """TF's ``Checkpoint(iterator=it)``: the position is saved beside the variables (key
    ``iterator/.ATTRIBUTES/ITERATOR_STATE``); restoring it into the same iterator, or into a
    new one over a rebuilt pipeline (an unseeded shuffle draws another key), goes on with the
    elements the saved iterator would have given, across the repeat's second pass."""
    it = iter(_pipeline())
    _values(it, 4)
    step = tf.Variable(4)
    ckpt = tf.train.Checkpoint(step=step, iterator=it)
    path = ckpt.save(str(tmp_path / "ckpt"))
    assert "iterator/.ATTRIBUTES/ITERATOR_STATE" in dict(tf.train.list_variables(path))
    expected = _values(it, 6)  # crosses from the first pass of the shuffle into the second
    ckpt.restore(path)
    assert _values(it, 6) == expected
    fresh = iter(_pipeline())
    tf.train.Checkpoint(step=tf.Variable(0), iterator=fresh).restore(path).assert_consumed()
    assert _values(fresh, 6) == expected
    assert len(list(fresh)) == 2  # 6 batches a pass, twice
    everything = sorted(v for batch in _values(iter(_pipeline()), 12) for v in batch)
    assert everything == sorted(list(range(0, 120, 10)) * 2)


def test_an_exhausted_iterator_restores_exhausted_and_bad_states_are_refused(eager, tmp_path):
    it = iter(tf.data.Dataset.range(3))
    assert [int(x) for x in it] == [0, 1, 2]
    path = tf.train.Checkpoint(it=it).save(str(tmp_path / "done"))
    fresh = iter(tf.data.Dataset.range(3))
    tf.train.Checkpoint(it=fresh).restore(path)
    assert list(fresh) == []

    other = iter(tf.data.Dataset.range(3).batch(2))
    w = tf.Variable(0)
    with pytest.raises(tf.errors.InvalidArgumentError, match="over another pipeline"):
        tf.train.Checkpoint(it=other, w=w).restore(
            tf.train.Checkpoint(it=it, w=tf.Variable(7)).save(str(tmp_path / "both")))
    assert int(w.numpy()) == 7  # the variables are restored before the refusal

    from dflab.ops import dataset_ops

    for junk in (b"not json", b'{"format": "x"}', b"[1, 2]"):
        with pytest.raises(tf.errors.InvalidArgumentError, match="not an iterator position"):
            dataset_ops.deserialize_iterator(other._handle, tf.constant(junk))
    assert [b.numpy().tolist() for b in other] == [[0, 1], [2]]  # untouched

    def gen():
        yield from range(3)

    from_py = iter(tf.data.Dataset.from_generator(gen, output_types=tf.int64))
    with pytest.raises(tf.errors.FailedPreconditionError, match="from_generator cannot be saved"):
        tf.train.Checkpoint(it=from_py).save(str(tmp_path / "gen"))


def test_a_restored_position_is_the_iterators_own_whatever_else_reads_the_dataset(
        eager, tmp_path):
    """Each iterator numbers its own passes of a shuffle: another pass over the same dataset
    in between, or another live iterator, changes neither what the saved iterator gives next
    (across the repeat's next epochs too) nor what the others give."""
    ds = tf.data.Dataset.range(6).shuffle(6)
    it = iter(ds.repeat())
    _values(it, 3)
    [int(x) for x in ds]  # an evaluation pass over the same dataset
    _values(it, 5)
    ckpt = tf.train.Checkpoint(it=it)
    path = ckpt.save(str(tmp_path / "own"))
    other = iter(ds.repeat())
    other_first = _values(other, 2)
    after = _values(it, 10)  # two more epochs begin
    ckpt.restore(path)
    assert _values(it, 10) == after
    restored = iter(ds.repeat())
    tf.train.Checkpoint(it=restored).restore(path)
    assert _values(restored, 10) == after
    assert len(other_first + _values(other, 4)) == 6  # the other iterator's epoch goes on


def test_what_cannot_be_replayed_is_refused_at_save(eager, tmp_path):
    noisy = iter(tf.data.Dataset.range(100).filter(lambda x: tf.random_uniform([]) < 0.5))
    next(noisy)
    with pytest.raises(tf.errors.FailedPreconditionError,
                       match="draws random numbers \\(RandomUniform\\)"):
        tf.train.Checkpoint(it=noisy).save(str(tmp_path / "noisy"))

    def noisy_loop(x):  # the loop makes the function a called one: its draws are seen there
        for _ in tf.range(2):
            x += tf.cast(tf.random_uniform([]) * 0, tf.int64)
        return x

    looped = iter(tf.data.Dataset.range(10).map(noisy_loop))
    next(looped)
    with pytest.raises(tf.errors.FailedPreconditionError, match="\\(RandomUniform\\)"):
        tf.train.Checkpoint(it=looped).save(str(tmp_path / "looped"))
    seeded = iter(tf.data.Dataset.range(10).map(
        lambda x: x + tf.random.stateless_uniform([], [1, 2], maxval=3, dtype=tf.int64)))
    next(seeded)
    tf.train.Checkpoint(it=seeded).save(str(tmp_path / "stateless"))  # replays the same
