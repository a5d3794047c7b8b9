"""tf.LMDBReader on LMDB databases written with the lmdb package: records in the database's
key order (the lmdb package's own cursor order: TF 2.21 no longer runs this reader, TF 1.x
read the same cursor), files and directories, read_up_to, the counters and reset, errors for
missing and damaged databases, and the error naming the extra without the package."""

import importlib.util

import numpy as np
import pytest

import dflab as tf
from dflab.kernels import lmdb_reader_kernels

lmdb = pytest.importorskip("lmdb", reason="tf.LMDBReader's tests need the lmdb extra")

DATA = {
    "a.mdb": [(b"k%02d" % i, b"value-%d" % i) for i in (3, 1, 2, 10, 0)],
    "b.mdb": [(b"\x00bin", b""), (b"zz", b"last"), (b"aa", bytes(range(256)) * 40),
              (b"Zeta", b"\xff")],
    "empty.mdb": [],
}


def _write(path, items, subdir=False) -> str:
    env = lmdb.open(str(path), subdir=subdir, map_size=1 << 22)
    with env.begin(write=True) as txn:
        for key, value in items:
            txn.put(key, value)
    env.close()
    return str(path)


def _cursor_order(path, subdir=False) -> list:
    env = lmdb.open(str(path), subdir=subdir, readonly=True, lock=False)
    with env.begin() as txn:
        out = [(bytes(k), bytes(v)) for k, v in txn.cursor()]
    env.close()
    return out


@pytest.fixture
def dbs(tmp_path):
    return {name: _write(tmp_path / name, items) for name, items in DATA.items()}


def _reader_on(files, read_up_to=None):
    q = tf.FIFOQueue(10, tf.string)
    reader = tf.LMDBReader()
    if read_up_to is None:
        key, value = reader.read(q)
    else:
        key, value = reader.read_up_to(q, read_up_to)
    return q.enqueue_many([files]), q.close(), reader, key, value


def _drain(sess, fetches, limit=100):
    out = []
    for _ in range(limit):
        try:
            out.append(sess.run(fetches))
        except tf.errors.OutOfRangeError:
            return out
    raise AssertionError("reader did not end")


def test_records_come_in_the_cursor_order_of_each_database(dbs):
    files = [dbs["a.mdb"], dbs["empty.mdb"], dbs["b.mdb"]]
    enqueue, close, reader, key, value = _reader_on(files)
    assert reader.reader_ref.op.type == "LMDBReader" and not reader.supports_serialize
    with tf.Session() as sess:
        sess.run(enqueue)
        sess.run(close)
        got = [(k, v) for k, v in _drain(sess, [key, value])]
        want = sum((_cursor_order(f) for f in files), [])
        assert got == want
        assert [k for k, _ in got[:5]] == [b"k00", b"k01", b"k02", b"k03", b"k10"]
        assert sess.run(reader.num_records_produced()) == len(want) == 9
        sess.run(reader.reset())
        assert sess.run(reader.num_records_produced()) == 0


def test_a_directory_database_and_read_up_to(tmp_path, dbs):
    items = [(b"%03d" % i, np.float32(i).tobytes()) for i in range(7)]
    folder = tmp_path / "dir_db"
    folder.mkdir()
    _write(folder, items, subdir=True)
    enqueue, close, _, keys, values = _reader_on([str(folder), dbs["a.mdb"]], read_up_to=3)
    with tf.Session() as sess:
        sess.run(enqueue)
        sess.run(close)
        batches = _drain(sess, [keys, values])
    # Up to 3 records of one database per call: fewer when it ends first.
    assert [len(k) for k, _ in batches] == [3, 3, 1, 3, 2]
    decoded = [np.frombuffer(v, np.float32)[0] for _, vs in batches[:3] for v in vs]
    np.testing.assert_array_equal(decoded, np.arange(7, dtype=np.float32))
    assert [list(k) for k, _ in batches[3:]] == [[b"k00", b"k01", b"k02"], [b"k03", b"k10"]]


def test_missing_and_damaged_databases_fail_the_read(tmp_path):
    damaged = tmp_path / "damaged.mdb"
    damaged.write_bytes(b"not an lmdb file" * 64)
    cases = [(str(tmp_path / "missing.mdb"), tf.errors.NotFoundError, "No such file"),
             (str(tmp_path), tf.errors.NotFoundError, r"data\.mdb; No such file"),
             (str(damaged), tf.errors.DataLossError, "not a readable LMDB database")]
    for path, error, match in cases:
        with tf.Graph().as_default():
            enqueue, _, _, key, _ = _reader_on([path])
            with tf.Session() as sess:
                sess.run(enqueue)
                with pytest.raises(error, match=match):
                    sess.run(key)


def test_without_the_package_the_error_names_the_extra(monkeypatch, dbs):
    q = tf.FIFOQueue(2, tf.string)
    key, _ = tf.LMDBReader(name="built_before").read(q)
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "lmdb" else real_find_spec(name, *a))
    with pytest.raises(ImportError, match=r"pip install 'dflab\[lmdb\]'"):
        tf.LMDBReader()
    monkeypatch.setitem(__import__("sys").modules, "lmdb", None)  # import lmdb fails
    with tf.Session() as sess:
        sess.run(q.enqueue(dbs["a.mdb"]))
        with pytest.raises(tf.errors.UnimplementedError, match=r"dflab\[lmdb\]"):
            sess.run(key)
    assert lmdb_reader_kernels.LMDBState().next_record() is None


def test_the_reader_is_in_compat_v1():
    assert tf.compat.v1.LMDBReader is tf.LMDBReader
