"""flat_map, interleave (TF's order for every cycle and block length), parallel_interleave,
list_files and the TFRecord-files pipeline they make, in a graph and eagerly; the expected
values are what TF 2.21's ``tf.compat.v1`` gives for the same programs."""

import os

import numpy as np
import pytest

import dflab as tf

D = tf.data.Dataset


def repeated(x, times):
    return D.from_tensors(x).repeat(times)


def test_flat_map_reads_each_dataset_in_turn(read):
    assert read(D.range(1, 6).flat_map(lambda x: repeated(x, x))) == [
        1, 2, 2, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 5]


@pytest.mark.parametrize("cycle, block, times, expected", [
    (2, 1, "x", [1, 2, 2, 3, 3, 4, 3, 4, 4, 5, 4, 5, 5, 5, 5]),
    (2, 3, "x", [1, 2, 2, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 5]),
    (3, 2, "6-x", [1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 1, 4, 4, 5]),
])
def test_interleave_order_is_tfs(read, cycle, block, times, expected):
    def fn(x):
        return repeated(x, x if times == "x" else 6 - x)

    r = D.range(1, 6)
    assert read(r.interleave(fn, cycle_length=cycle, block_length=block)) == expected
    # TF's parallel versions give the same order when deterministic (their default)
    assert read(r.interleave(fn, cycle, block, num_parallel_calls=3, deterministic=True)) \
        == expected
    assert read(r.apply(tf.data.experimental.parallel_interleave(fn, cycle, block))) == \
        expected


def test_interleave_of_empty_datasets_and_structures(read):
    assert read(D.range(1, 6).interleave(lambda x: D.range(x % 2 * 3), cycle_length=2)) == [
        0, 1, 0, 2, 1, 2, 0, 1, 2]
    pairs = D.range(1, 6).interleave(
        lambda x: D.zip((D.range(x), D.range(x).map(lambda y: y * 10))), cycle_length=2)
    assert pairs.output_types == (tf.int64, tf.int64)
    assert read(pairs.take(6)) == [(0, 0), (0, 0), (1, 10), (0, 0), (1, 10), (0, 0)]
    # a tuple element is passed as arguments, a dict whole (map's rule)
    tuples = D.from_tensor_slices((np.array([1, 2]), np.array([3, 4])))
    assert read(tuples.flat_map(lambda a, b: D.range(a, b))) == [1, 2, 2, 3]
    dicts = D.from_tensor_slices({"a": np.array([1, 2]), "b": np.array([3, 4])})
    assert read(dicts.flat_map(lambda d: D.range(d["a"], d["b"]))) == [1, 2, 2, 3]


def test_the_inner_function_captures_the_outer_element(read):
    assert read(D.range(1, 6).flat_map(lambda x: D.range(x).map(lambda y: y * x))) == [
        0, 0, 2, 0, 3, 6, 0, 4, 8, 12, 0, 5, 10, 15, 20]


def test_default_cycle_length_is_the_hosts_cpus(read, monkeypatch):
    # TF's AUTOTUNE cycle: the CPUs the process may use (two here, as in TF's run on them)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert read(D.range(4).interleave(lambda x: repeated(x, 2))) == [0, 1, 0, 1, 2, 3, 2, 3]


def test_a_function_must_return_a_dataset():
    for make in (lambda r: r.flat_map(lambda x: (x, x)),
                 lambda r: r.interleave(lambda x: x, cycle_length=2)):
        with pytest.raises(TypeError, match=r"The `map_func` argument must return a `Dataset` "
                                            r"object. Got <class '.*'>"):
            make(D.range(3))


def _first(dataset):
    """The first element (an error raised as it is)."""
    if tf.executing_eagerly():
        return next(iter(dataset))
    with tf.Session() as sess:
        return sess.run(tf.data.make_one_shot_iterator(dataset).get_next())


def test_bad_cycle_and_block_lengths_fail_as_tfs(mode):
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match="cycle_length must be greater than zero."):
        _first(D.range(3).interleave(lambda x: D.range(x), cycle_length=0))
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match="block_length must be greater than zero."):
        _first(D.range(3).interleave(lambda x: D.range(x), cycle_length=1, block_length=0))


def _reciprocal(x, at):
    return tf.debugging.check_numerics(1.0 / tf.cast(x - at, tf.float32), "bad")


def test_failed_elements_are_raised_where_tf_raises_them(read):
    """A failed inner element does not count in its block; a failed input leaves its place
    to the next input (TF 2.21's order, errors where TF raised them)."""
    inner = D.range(1, 6).interleave(
        lambda x: D.range(3).map(lambda y: _reciprocal(y, 1) + tf.cast(x, tf.float32)),
        cycle_length=2, block_length=2)
    err = "InvalidArgumentError"
    assert read(inner) == [0.0, err, 2.0, 1.0, err, 3.0, 2.0, err, 4.0, 3.0, err, 5.0, 4.0,
                           err, 6.0]
    outer = D.range(1, 6).map(lambda x: _reciprocal(x, 2)).interleave(
        lambda x: repeated(x, 2), cycle_length=2)
    got = read(outer)
    assert got[:2] == [-1.0, err]
    np.testing.assert_allclose(got[2:], [1.0, -1.0, 1.0, 0.5, 1 / 3, 0.5, 1 / 3], rtol=1e-6)


def _write_records(directory, name, records):
    path = os.path.join(directory, name)
    with tf.python_io.TFRecordWriter(path) as w:
        for r in records:
            w.write(r)
    return path


def test_list_files_interleaved_into_tfrecord_datasets(read, tmp_path):
    for k in range(3):
        _write_records(str(tmp_path), f"part-{k}.tfrecord",
                       [f"f{k}-r{i}".encode() for i in range(k + 2)])
    (tmp_path / "notes.txt").write_text("not a record file")
    files = D.list_files(str(tmp_path / "*.tfrecord"), shuffle=False)
    assert files.output_types == tf.string and files.output_shapes.as_list() == []
    assert [os.path.basename(f) for f in read(files)] == [
        b"part-0.tfrecord", b"part-1.tfrecord", b"part-2.tfrecord"]
    records = files.interleave(lambda f: tf.data.TFRecordDataset(f), cycle_length=2)
    assert read(records) == [b"f0-r0", b"f1-r0", b"f0-r1", b"f1-r1", b"f1-r2", b"f2-r0",
                             b"f2-r1", b"f2-r2", b"f2-r3"]
    # the same pipeline over from_tensor_slices(filenames), record blocks of two
    names = sorted(str(p) for p in tmp_path.glob("*.tfrecord"))
    blocks = D.from_tensor_slices(names).interleave(tf.data.TFRecordDataset, 3, 2)
    assert read(blocks) == [b"f0-r0", b"f0-r1", b"f1-r0", b"f1-r1", b"f2-r0", b"f2-r1",
                            b"f1-r2", b"f2-r2", b"f2-r3"]


def test_list_files_shuffles_by_default_and_takes_several_patterns(read, tmp_path):
    for name in ("b.txt", "a.txt", "c.txt", "d.dat"):
        (tmp_path / name).write_text(name)
    patterns = [str(tmp_path / "c*"), str(tmp_path / "a*")]
    assert [os.path.basename(f) for f in read(D.list_files(patterns, shuffle=False))] == [
        b"a.txt", b"c.txt"]
    shuffled = read(D.list_files(str(tmp_path / "*.txt"), seed=3))
    assert sorted(os.path.basename(f) for f in shuffled) == [b"a.txt", b"b.txt", b"c.txt"]
    assert read(D.list_files(str(tmp_path / "*.txt"), seed=3)) == shuffled  # seeded: same


def test_list_files_without_a_match_fails(mode, tmp_path):
    pattern = str(tmp_path / "missing-*")
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=f"No files matched pattern: {pattern}"):
        files = D.list_files(pattern)  # eagerly: here, as TF's
        with tf.Session() as sess:
            sess.run(files.cardinality())


def test_an_initializable_iterator_reinterleaves_with_new_feeds():
    n = tf.placeholder(tf.int64, [])
    ds = D.range(n).interleave(lambda x: D.range(x, x + 2), cycle_length=2)
    it = tf.data.make_initializable_iterator(ds)
    nxt = it.get_next()
    with tf.Session() as sess:
        for count, expected in ((2, [0, 1, 1, 2]), (3, [0, 1, 1, 2, 2, 3])):
            sess.run(it.initializer, {n: count})
            got = []
            while True:
                try:
                    got.append(int(sess.run(nxt)))
                except tf.errors.OutOfRangeError:
                    break
            assert got == expected


def test_a_checkpoint_restores_an_interleave_midway(eager, tmp_path):

    def pipeline():
        return D.range(1, 6).interleave(lambda x: D.range(x).shuffle(4, seed=1),
                                        cycle_length=2, block_length=2)

    it = iter(pipeline())
    head = [int(next(it)) for _ in range(5)]
    path = tf.train.Checkpoint(it=it).save(str(tmp_path / "ckpt"))
    rest = [int(x) for x in it]
    restored = iter(pipeline())
    tf.train.Checkpoint(it=restored).restore(path)
    assert [int(x) for x in restored] == rest
    assert sorted(head + rest) == sorted(v for x in range(1, 6) for v in range(x))


def test_what_a_function_makes_unreplayable_is_refused_at_save(eager, tmp_path):
    tf.set_random_seed(None)  # (unseeded: no global seed left by an earlier test)
    unseeded = iter(D.range(1, 4).flat_map(lambda x: D.range(x).shuffle(3)))
    next(unseeded)
    with pytest.raises(tf.errors.FailedPreconditionError, match="unseeded shuffle"):
        tf.train.Checkpoint(it=unseeded).save(str(tmp_path / "a"))
    generated = iter(D.range(2).flat_map(
        lambda x: D.from_generator(lambda: iter([1, 2]), tf.int64)))
    next(generated)
    with pytest.raises(tf.errors.FailedPreconditionError, match="from_generator"):
        tf.train.Checkpoint(it=generated).save(str(tmp_path / "b"))


def test_a_loop_in_a_function_returning_a_dataset_is_refused_with_the_way_out():
    def loop(x):
        return tf.while_loop(lambda i: i < x, lambda i: i + 2, [tf.constant(0, tf.int64)])

    with pytest.raises(NotImplementedError, match=r"cannot hold a loop .* ds.map\(loop_fn\)"
                                                  r".flat_map\(...\)"):
        D.range(1, 4).flat_map(lambda x: D.from_tensors(loop(x)))
    # the way out: the loop in a map before
    assert _steps_graph(D.range(1, 4).map(loop).flat_map(lambda y: D.from_tensors(y))) == [
        2, 2, 4]


def _steps_graph(dataset):
    nxt = tf.data.make_one_shot_iterator(dataset).get_next()
    out = []
    with tf.Session() as sess:
        while True:
            try:
                out.append(int(sess.run(nxt)))
            except tf.errors.OutOfRangeError:
                return out
