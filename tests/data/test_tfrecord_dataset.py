"""tf.data.TFRecordDataset over files TF wrote and files written here, compressed or not,
with TF's interleaving for num_parallel_reads and TF's errors for damaged files."""

import numpy as np
import pytest
from tf_interop import FIXTURES, recipe

import dflab as tf

RECORDS = recipe().TFRECORD_STRINGS


def read(dataset):
    nxt = tf.data.make_one_shot_iterator(dataset).get_next()
    out = []
    with tf.Session() as sess:
        while True:
            try:
                out.append(sess.run(nxt))
            except tf.errors.OutOfRangeError:
                return out


@pytest.mark.parametrize("name,compression", [
    ("records.tfrecord", None), ("records_gzip.tfrecord", "GZIP"),
    ("records_zlib.tfrecord", "ZLIB")])
def test_reads_tfs_files(name, compression):
    ds = tf.data.TFRecordDataset(str(FIXTURES / name), compression_type=compression)
    assert ds.output_types == tf.string and ds.output_shapes.as_list() == []
    assert read(ds) == RECORDS


def test_files_in_order_then_interleaved_as_tf_interleaves(tmp_path):
    files = []
    for k, n in enumerate([3, 1, 2]):
        path = str(tmp_path / f"{k}.tfrecord")
        with tf.python_io.TFRecordWriter(path) as w:
            for i in range(n):
                w.write(f"{k}.{i}".encode())
        files.append(path)
    assert read(tf.data.TFRecordDataset(files)) == [b"0.0", b"0.1", b"0.2", b"1.0", b"2.0",
                                                    b"2.1"]
    # TF 2.21's orders for the same files (a finished file's slot is refilled on its next
    # turn, and that turn passes).
    assert read(tf.data.TFRecordDataset(files, num_parallel_reads=2)) == [
        b"0.0", b"1.0", b"0.1", b"0.2", b"2.0", b"2.1"]
    assert read(tf.data.TFRecordDataset(files, num_parallel_reads=3)) == [
        b"0.0", b"1.0", b"2.0", b"0.1", b"2.1", b"0.2"]


def test_parses_examples_in_a_pipeline():
    ds = tf.data.TFRecordDataset([str(FIXTURES / "examples.tfrecord")]).map(
        lambda r: tf.parse_single_example(r, {"label": tf.FixedLenFeature([], tf.int64),
                                              "weights": tf.FixedLenFeature([2],
                                                                            tf.float32)}))
    got = read(ds.batch(3))
    np.testing.assert_array_equal(got[0]["label"], [3, -1, 2**40])
    np.testing.assert_array_equal(got[0]["weights"][1], np.float32([2.0, -0.25]))


def test_a_damaged_file_is_data_loss(tmp_path):
    path = tmp_path / "bad.tfrecord"
    path.write_bytes((FIXTURES / "records.tfrecord").read_bytes()[:-3])
    with pytest.raises(tf.errors.DataLossError, match="truncated record at"):
        read(tf.data.TFRecordDataset(str(path)))
    with pytest.raises(tf.errors.InvalidArgumentError, match="Unsupported compression"):
        read(tf.data.TFRecordDataset(str(path), compression_type="LZ4"))
