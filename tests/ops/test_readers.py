"""File readers on filename queues (TextLineReader, WholeFileReader), decode_csv and read_file,
against Python references, with TF's errors for missing files and bad records."""

import csv
import io

import numpy as np
import pytest

import dflab as tf


def write(path, data: bytes) -> str:
    path.write_bytes(data)
    return str(path)


def read_all(sess, key, value, limit=1000):
    out = []
    for _ in range(limit):
        try:
            out.append(tuple(sess.run([key, value])))
        except tf.errors.OutOfRangeError:
            return out
    raise AssertionError("reader did not end")


def run_with_runners(fetch):
    """Start the queue runners, call ``fetch(sess)``, stop them."""
    with tf.Session() as sess:
        sess.run(tf.local_variables_initializer())
        coord = tf.train.Coordinator()
        threads = tf.train.start_queue_runners(sess, coord=coord)
        try:
            return fetch(sess)
        finally:
            coord.request_stop()
            coord.join(threads)


def test_text_line_reader_reads_every_line_with_keys(tmp_path):
    a = write(tmp_path / "a.csv", b"h1\nx1\r\nx2\n")
    b = write(tmp_path / "b.csv", b"h2\ny1")
    queue = tf.train.string_input_producer([a, b], num_epochs=1, shuffle=False)
    key, value = tf.TextLineReader(skip_header_lines=1).read(queue)
    assert key.dtype == tf.string and value.shape.as_list() == []
    got = run_with_runners(lambda sess: read_all(sess, key, value))
    assert got == [(f"{a}:2".encode(), b"x1"), (f"{a}:3".encode(), b"x2"),
                   (f"{b}:2".encode(), b"y1")]


def test_text_line_reader_over_epochs_and_record_count(tmp_path):
    a = write(tmp_path / "a.txt", b"1\n2\n")
    queue = tf.train.string_input_producer([a], num_epochs=3, shuffle=False)
    reader = tf.TextLineReader()
    key, value = reader.read(queue)
    produced = reader.num_records_produced()

    def fetch(sess):
        return [v for _, v in read_all(sess, key, value)], sess.run(produced)

    values, count = run_with_runners(fetch)
    assert values == [b"1", b"2"] * 3
    assert count == 6


def test_reader_on_a_plain_queue_and_missing_file(tmp_path):
    good = write(tmp_path / "good.txt", b"only\n")
    q = tf.FIFOQueue(4, tf.string)
    names = tf.placeholder(tf.string, [None])
    enqueue = q.enqueue_many([names])
    key, value = tf.TextLineReader().read(q)
    with tf.Session() as sess:
        sess.run(enqueue, {names: [good, str(tmp_path / "gone.txt")]})
        sess.run(q.close())
        assert sess.run(value) == b"only"
        with pytest.raises(tf.errors.NotFoundError, match="gone.txt"):
            sess.run(value)
        with pytest.raises(tf.errors.OutOfRangeError):
            sess.run(value)


def test_whole_file_reader(tmp_path):
    contents = {"a.bin": bytes(range(256)), "b.txt": b"hello\nworld\n", "c.txt": b""}
    files = [write(tmp_path / n, d) for n, d in contents.items()]
    queue = tf.train.string_input_producer(files, num_epochs=1, shuffle=False)
    key, value = tf.WholeFileReader().read(queue)
    got = run_with_runners(lambda sess: read_all(sess, key, value))
    assert got == [(f.encode(), d) for f, d in zip(files, contents.values())]


def test_identity_reader_gives_each_work_item_as_key_and_value():
    q = tf.FIFOQueue(5, tf.string)
    reader = tf.IdentityReader()
    key, value = reader.read(q)
    assert reader.reader_ref.op.type == "IdentityReaderV2"
    with tf.Session() as sess:
        sess.run(q.enqueue_many([[b"x", b"yy", b"", b"\xff"]]))
        sess.run(q.close())
        assert [sess.run([key, value]) for _ in range(4)] == [
            [b"x", b"x"], [b"yy", b"yy"], [b"", b""], [b"\xff", b"\xff"]]
        assert sess.run(reader.num_records_produced()) == 4
        with pytest.raises(tf.errors.OutOfRangeError):
            sess.run(key)
        sess.run(reader.reset())
        assert sess.run(reader.num_records_produced()) == 0


def test_read_file(tmp_path):
    path = write(tmp_path / "x.bin", b"\x00abc\n\xff")
    name = tf.placeholder(tf.string, [])
    data = tf.read_file(name)
    assert data.dtype == tf.string
    with tf.Session() as sess:
        assert sess.run(data, {name: path}) == b"\x00abc\n\xff"
        with pytest.raises(tf.errors.NotFoundError, match="nope.txt"):
            sess.run(data, {name: str(tmp_path / "nope.txt")})


# --- decode_csv -----------------------------------------------------------------------------------
def csv_reference(lines, defaults):
    """Python's csv module and the defaults: the expected columns."""
    cols = [[] for _ in defaults]
    for row in csv.reader(io.StringIO("\n".join(lines))):
        for c, (field, (kind, default)) in enumerate(zip(row, defaults)):
            cols[c].append(kind(field) if field else default)
    return cols


def test_decode_csv_matches_python_csv():
    lines = ['1,2.5,hello', '-4,,"quoted, with comma"', ',1e3,"say ""hi"""', '7,0.125,']
    defaults = [(int, 42), (float, -1.0), (str, "none")]
    records = tf.constant(lines)
    cols = tf.decode_csv(records, [[42], [-1.0], ["none"]])
    assert [c.dtype for c in cols] == [tf.int32, tf.float32, tf.string]
    assert all(c.shape.as_list() == [4] for c in cols)
    with tf.Session() as sess:
        got = sess.run(cols)
    ref = csv_reference(lines, defaults)
    assert got[0].tolist() == ref[0]
    np.testing.assert_allclose(got[1], ref[1])
    assert [s.decode() for s in got[2]] == ref[2]


def test_decode_csv_options():
    rec = tf.constant([["a|NA|3", "b|2|NA"]])
    cols = tf.decode_csv(rec, [[""], [0], [9]], field_delim="|", na_value="NA")
    assert cols[1].shape.as_list() == [1, 2]
    sel = tf.decode_csv(tf.constant("1,2,3,4"), [[0], [0]], select_cols=[1, 3])
    raw = tf.decode_csv(tf.constant('"x",y'), [[""], [""]], use_quote_delim=False)
    with tf.Session() as sess:
        a, b, c = sess.run(cols)
        assert a.tolist() == [[b"a", b"b"]] and b.tolist() == [[0, 2]] and c.tolist() == [[3, 9]]
        assert [int(v) for v in sess.run(sel)] == [2, 4]
        assert sess.run(raw) == [b'"x"', b"y"]


@pytest.mark.parametrize("record, defaults, message", [
    ("1,2", [[1], [2], [3]], "Expect 3 fields but have 2 in record 0"),
    ("1,2,3,4", [[1], [2], [3]], "Expect 3 fields but have 4 in record 0"),
    ("1,x,3", [[1], [2.0], [3]], "Field 1 in record 0 is not a valid float: x"),
    ("1.5,2", [[1], [2]], "Field 0 in record 0 is not a valid int32: 1.5"),
    ("1,3000000000", [[1], [2]], "Field 1 in record 0 is not a valid int32: 3000000000"),
    ("1_0,2", [[1], [2]], "Field 0 in record 0 is not a valid int32: 1_0"),
    ("1,2_0.5", [[1], [2.0]], "Field 1 in record 0 is not a valid float: 2_0.5"),
    ("1,,3", [[1], np.array([], np.int32), [3]], "Field 1 is required but missing in "
                                                    "record 0"),
    ('"a"b,2', [[""], [1]], "Quote inside a string has to be escaped"),
    ('"abc,2', [[""], [1]], "Quoted field has to end"),
])
def test_decode_csv_bad_records(record, defaults, message):
    out = tf.decode_csv(record, defaults)
    with tf.Session() as sess:
        with pytest.raises(tf.errors.InvalidArgumentError, match=message) as e:
            sess.run(out)
    assert "DecodeCSV" in str(e.value)  # the error names the op


def test_decode_csv_checks_its_arguments():
    with pytest.raises(TypeError):
        tf.decode_csv("1", [[True]])
    with pytest.raises(ValueError):
        tf.decode_csv("1", [[1]], field_delim="||")


def test_csv_pipeline_with_queue_runners(tmp_path):
    rows = [(i, i * 0.5) for i in range(7)]
    path = write(tmp_path / "d.csv", b"id,val\n" + "".join(f"{a},{b}\n" for a, b in rows).encode())
    queue = tf.train.string_input_producer([path], num_epochs=1, shuffle=False)
    _, line = tf.TextLineReader(skip_header_lines=1).read(queue)
    ident, val = tf.decode_csv(line, [[0], [0.0]])
    batch = tf.train.batch([ident, val], batch_size=3, allow_smaller_final_batch=True)

    def fetch(sess):
        out = []
        while True:
            try:
                out.append(sess.run(batch))
            except tf.errors.OutOfRangeError:
                return out

    batches = run_with_runners(fetch)
    ids = [int(i) for b in batches for i in b[0]]
    vals = [float(v) for b in batches for v in b[1]]
    assert ids == [a for a, _ in rows] and vals == [b for _, b in rows]


# --- TFRecordReader -----------------------------------------------------------------------------
def _records_file(path, records, compression=None) -> str:
    with tf.python_io.TFRecordWriter(str(path), compression) as writer:
        for record in records:
            writer.write(record)
    return str(path)


def test_tf_record_reader_gives_tfs_keys_and_records(tmp_path):
    a = _records_file(tmp_path / "a.tfrecord", [b"hello", b"", b"x" * 300])
    b = _records_file(tmp_path / "b.tfrecord", [b"gz"], "GZIP")
    queue = tf.train.string_input_producer([a], num_epochs=1, shuffle=False)
    key, value = tf.TFRecordReader().read(queue)
    got = run_with_runners(lambda sess: read_all(sess, key, value))
    # TF 2.21's keys for the same file: the offset of each record.
    assert got == [(f"{a}:0".encode(), b"hello"), (f"{a}:21".encode(), b""),
                   (f"{a}:37".encode(), b"x" * 300)]
    tf.reset_default_graph()
    queue = tf.train.string_input_producer([b, b], num_epochs=1, shuffle=False)
    reader = tf.TFRecordReader(options=tf.python_io.TFRecordOptions("GZIP"))
    key, value = reader.read(queue)
    produced = reader.num_records_produced()
    got = run_with_runners(lambda sess: (read_all(sess, key, value), sess.run(produced)))
    assert got == ([(f"{b}:0".encode(), b"gz")] * 2, 2)


def test_tf_record_reader_fails_at_a_damaged_record_after_the_good_ones(tmp_path):
    a = _records_file(tmp_path / "a.tfrecord", [b"one", b"two"])
    data = bytearray(open(a, "rb").read())
    data[-6] ^= 1  # inside the second record's data
    open(a, "wb").write(bytes(data))
    queue = tf.train.string_input_producer([a], num_epochs=1, shuffle=False)
    key, value = tf.TFRecordReader().read(queue)

    def fetch(sess):
        first = sess.run(value)
        with pytest.raises(tf.errors.DataLossError, match="corrupted record at 31"):
            sess.run(value)
        return first

    assert run_with_runners(fetch) == b"one"
    assert tf.TFRecordReader().reader_ref.op.type == "TFRecordReaderV2"
