"""Dataset.window: windows of every size, shift and stride (with and without the remainder)
as datasets per component, read through flat_map and directly, TF 1.x's DatasetSpec
structures, failures, cardinality and checkpoints; expected values are TF 2.21's."""

import numpy as np
import pytest

import dflab as tf

D = tf.data.Dataset
ERR = "InvalidArgumentError"


@pytest.mark.parametrize("n, args, expected", [
    (7, (3,), [[0, 1, 2], [3, 4, 5], [6]]),
    (7, (3, 2), [[0, 1, 2], [2, 3, 4], [4, 5, 6], [6]]),
    (5, (3, 1), [[0, 1, 2], [1, 2, 3], [2, 3, 4], [3, 4], [4]]),
    (5, (3, 1, 1, True), [[0, 1, 2], [1, 2, 3], [2, 3, 4]]),
    (10, (2, 3, 2), [[0, 2], [3, 5], [6, 8], [9]]),
    (8, (3, 1, 2), [[0, 2, 4], [1, 3, 5], [2, 4, 6], [3, 5, 7], [4, 6], [5, 7], [6], [7]]),
    (8, (3, 1, 2, True), [[0, 2, 4], [1, 3, 5], [2, 4, 6], [3, 5, 7]]),
])
def test_windows_are_tfs(read, n, args, expected):
    # (a window's elements batched whole: each window is one batch)
    assert read(D.range(n).window(*args).flat_map(lambda w: w.batch(8))) == expected


def test_windows_of_structures(read):
    pairs = D.from_tensor_slices((np.arange(4), np.arange(4) * 10)).window(2)
    assert read(pairs.flat_map(lambda a, b: D.zip((a.batch(2), b.batch(2))))) == [
        ([0, 1], [0, 10]), ([2, 3], [20, 30])]
    dicts = D.from_tensor_slices({"a": np.arange(5)}).window(2)
    assert read(dicts.flat_map(lambda d: D.zip({"a": d["a"].batch(2)}))) == [
        {"a": [0, 1]}, {"a": [2, 3]}, {"a": [4]}]


def test_the_structure_is_tf_1s_dataset_specs():
    pairs = D.from_tensor_slices((np.arange(4), np.arange(4.0))).window(2)
    spec = "DatasetSpec(TensorSpec(shape=(), dtype=tf.int64, name=None), TensorShape([]))"
    for got in (pairs.output_types, pairs.output_shapes, pairs.output_classes,
                tf.data.get_output_types(pairs)):
        assert isinstance(got, tuple) and repr(got[0]) == spec
        assert "dtype=tf.float64" in repr(got[1])


def test_eager_windows_are_datasets(eager):
    windows = D.from_tensor_slices((np.arange(4), np.arange(4) * 10)).window(2)
    got = [[(int(a), int(b)) for a, b in zip(x, y)] for x, y in windows]
    assert got == [[(0, 0), (1, 10)], [(2, 20), (3, 30)]]
    first = next(iter(D.range(5).window(2)))
    assert isinstance(first, tf.data.Dataset) and len(first) == 2


def test_a_graphs_get_next_gives_datasets():
    nxt = tf.data.make_one_shot_iterator(D.range(5).window(2)).get_next()
    assert isinstance(nxt, tf.data.Dataset)
    assert nxt.output_types == tf.int64


@pytest.mark.parametrize("args, what", [((0,), "size"), ((2, 0), "shift"),
                                        ((2, 1, 0), "stride"), ((-1,), "size")])
def test_bad_arguments_fail_as_tfs(mode, args, what):
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=f"Window {what} must be greater than zero."):
        ds = D.range(5).window(*args)  # eagerly: here, as TF's
        with tf.Session() as sess:
            sess.run(ds.cardinality())


def _reciprocal(x):
    return tf.debugging.check_numerics(1.0 / tf.cast(x - 1, tf.float32), "bad")


@pytest.mark.parametrize("args, expected", [
    ((2,), [ERR, [1.0, 0.5], [1 / 3, 0.25]]),
    ((2, 1, 2), [[-1.0, 1.0], ERR, [1.0, 1 / 3], [0.5, 0.25], [1 / 3], [0.25]]),
])
def test_a_window_holding_a_failed_element_fails(read, args, expected):
    ds = D.range(6).map(_reciprocal).window(*args).flat_map(lambda w: w.batch(8))
    got = read(ds)
    assert [g if g == ERR else np.round(g, 6).tolist() for g in got] == \
        [e if e == ERR else np.round(e, 6).tolist() for e in expected]


@pytest.mark.parametrize("n, args, expected", [
    (7, (3,), 3), (7, (3, 2), 4), (5, (3, 1, 1, True), 3), (8, (3, 1, 2, True), 4),
    (2, (3, 1, 2, True), 0), (10, (2, 3, 2), 4),
])
def test_cardinality(value, n, args, expected):
    assert value(D.range(n).window(*args).cardinality()) == expected


def test_cardinality_of_infinite_and_unknown_inputs(value):
    assert value(D.range(3).repeat().window(2).cardinality()) == -1
    assert value(D.range(3).filter(lambda x: x > 0).window(2).cardinality()) == -2


def test_a_checkpoint_restores_windows_midway(eager, tmp_path):
    def pipeline():
        return D.range(9).shuffle(9, seed=2).window(3, 2).flat_map(lambda w: w.batch(3))

    it = iter(pipeline())
    head = [next(it).numpy().tolist() for _ in range(2)]
    path = tf.train.Checkpoint(it=it).save(str(tmp_path / "ckpt"))
    rest = [x.numpy().tolist() for x in it]
    restored = iter(pipeline())
    tf.train.Checkpoint(it=restored).restore(path)
    assert [x.numpy().tolist() for x in restored] == rest
    assert len(head + rest) == 5


def test_a_map_function_may_return_datasets(read):
    ds = D.range(5).window(2).map(lambda w: (w.batch(2), w.map(lambda x: x * 10)))
    assert "DatasetSpec" in repr(ds.output_types[0])
    pairs = ds.flat_map(lambda a, b: D.zip((a, b.batch(2))))
    assert read(pairs) == [([0, 1], [0, 10]), ([2, 3], [20, 30]), ([4], [40])]


def test_filter_and_reduce_read_windows(read):
    kept = D.range(6).window(2).filter(
        lambda w: w.reduce(np.int64(0), lambda s, x: s + x) > 2)
    assert read(kept.flat_map(lambda w: w.batch(2))) == [[2, 3], [4, 5]]
