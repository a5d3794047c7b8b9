"""TFRecord files (dflab.lib.io.tf_record): TF's files read here, files written here
byte-identical to TF's (uncompressed) and readable by TF, and TF's errors for damage."""

import gzip
import json
import zlib

import pytest
from tf_interop import FIXTURES, recipe, requires_tf, run_tf

import dflab as tf
from dflab.lib.io import tf_record

RECORDS = recipe().TFRECORD_STRINGS
FILES = {None: "records.tfrecord", "GZIP": "records_gzip.tfrecord",
         "ZLIB": "records_zlib.tfrecord"}


@pytest.mark.parametrize("compression", list(FILES))
def test_tf_written_files_read_back_their_records(compression):
    path = str(FIXTURES / FILES[compression])
    assert list(tf.python_io.tf_record_iterator(path, compression)) == RECORDS
    options = tf.python_io.TFRecordOptions(compression)
    assert list(tf.io.tf_record_iterator(path, options)) == RECORDS


def test_uncompressed_file_is_byte_identical_to_tfs(tmp_path):
    path = str(tmp_path / "r.tfrecord")
    with tf.python_io.TFRecordWriter(path) as writer:
        for record in RECORDS:
            writer.write(record)
    assert open(path, "rb").read() == (FIXTURES / FILES[None]).read_bytes()


@pytest.mark.parametrize("compression,inflate", [
    ("GZIP", gzip.decompress), ("ZLIB", zlib.decompress)])
def test_compressed_files_hold_tfs_record_stream(tmp_path, compression, inflate):
    path = str(tmp_path / "r.tfrecord")
    with tf.io.TFRecordWriter(path, tf.io.TFRecordOptions(compression,
                                                          compression_level=9)) as writer:
        for record in RECORDS:
            writer.write(record)
    tf_stream = inflate((FIXTURES / FILES[compression]).read_bytes())
    assert inflate(open(path, "rb").read()) == tf_stream
    assert list(tf.python_io.tf_record_iterator(path, compression)) == RECORDS


def test_a_flush_makes_compressed_records_readable_before_close(tmp_path):
    path = str(tmp_path / "r.tfrecord")
    writer = tf.python_io.TFRecordWriter(path, "ZLIB")
    writer.write(b"one")
    writer.flush()
    assert zlib.decompressobj().decompress(open(path, "rb").read())[12:15] == b"one"
    writer.close()
    writer.close()  # idempotent
    with pytest.raises(tf.errors.FailedPreconditionError, match="Writer is closed"):
        writer.write(b"two")


def test_gzip_file_of_several_members_reads_through(tmp_path):
    one, two = tf_record.encode_record(b"a"), tf_record.encode_record(b"bc")
    path = tmp_path / "r.gz"
    path.write_bytes(gzip.compress(one) + gzip.compress(two))
    assert list(tf.python_io.tf_record_iterator(str(path), "GZIP")) == [b"a", b"bc"]


# TF 2.21's messages for the same damage (recorded from tf.python_io.tf_record_iterator).
DAMAGE = [
    ("truncated data", lambda b: b[:-3], "truncated record at 37"),
    ("truncated header", lambda b: b[:45], "truncated record at 37"),
    ("data checksum", lambda b: b[:14] + bytes([b[14] ^ 1]) + b[15:], "corrupted record at 12"),
    ("length checksum", lambda b: b[:2] + bytes([b[2] ^ 1]) + b[3:],
     r"corrupted record at 0 \(Is this even a TFRecord file\?\)"),
    ("later length", lambda b: b[:23] + bytes([b[23] ^ 4]) + b[24:], r"corrupted record at 21$"),
]


@pytest.mark.parametrize("what,damage,message", DAMAGE, ids=[d[0] for d in DAMAGE])
def test_damage_is_data_loss_with_tfs_message(tmp_path, what, damage, message):
    path = tmp_path / "r.tfrecord"
    with tf.python_io.TFRecordWriter(str(path)) as writer:
        for record in (b"hello", b"", b"x" * 300):
            writer.write(record)
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(tf.errors.DataLossError, match=message):
        list(tf.python_io.tf_record_iterator(str(path)))


def test_wrong_compression_is_data_loss():
    with pytest.raises(tf.errors.DataLossError, match="incorrect header check"):
        list(tf.python_io.tf_record_iterator(str(FIXTURES / FILES[None]), "GZIP"))
    with pytest.raises(tf.errors.DataLossError, match="Is this even a TFRecord"):
        list(tf.python_io.tf_record_iterator(str(FIXTURES / FILES["GZIP"])))


def test_missing_file_fails_at_the_call(tmp_path):
    with pytest.raises(tf.errors.NotFoundError, match="No such file or directory"):
        tf.python_io.tf_record_iterator(str(tmp_path / "nope"))


def test_options_take_tfs_spellings_and_refuse_others():
    get = tf.python_io.TFRecordOptions.get_compression_type_string
    kinds = tf.python_io.TFRecordCompressionType
    assert [get(x) for x in (None, "", kinds.NONE, kinds.GZIP, kinds.ZLIB, "GZIP")] == \
        ["", "", "", "GZIP", "ZLIB", "GZIP"]
    assert get(tf.python_io.TFRecordOptions(kinds.ZLIB)) == "ZLIB"
    with pytest.raises(ValueError, match='Not a valid compression_type: "BAD"'):
        tf.python_io.TFRecordOptions("BAD")
    assert tf.io.TFRecordCompressionType is kinds


@requires_tf
def test_tf_reads_files_written_here(tmp_path):
    paths = {}
    for compression in FILES:
        path = str(tmp_path / f"{compression}.tfrecord")
        with tf.python_io.TFRecordWriter(path, compression) as writer:
            for record in RECORDS:
                writer.write(record)
        paths[compression or ""] = path
    out = run_tf(f"""
        paths = {paths!r}
        print(json.dumps({{c: [r.hex() for r in tf.python_io.tf_record_iterator(p, c)]
                          for c, p in paths.items()}}))
    """)
    read = json.loads(out)
    assert read == {c: [r.hex() for r in RECORDS] for c in paths}
