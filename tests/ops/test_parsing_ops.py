"""tf.train.Example protos, parse_example / parse_single_example /
parse_single_sequence_example and decode_raw, against what TF 2.21 wrote and parsed
(tests/fixtures/tf) and against TF's error messages for the same input."""

import json

import numpy as np
import pytest
from tf_interop import FIXTURES, recipe, requires_tf, run_tf

import dflab as tf
from dflab.lib import protos
from dflab.lib.io.tf_record import read_records

R = recipe()
RECORDS = list(read_records(str(FIXTURES / "examples.tfrecord")))
PARSED = json.loads((FIXTURES / "examples_parsed.json").read_text())
SPEC = {
    "image": tf.FixedLenFeature([], tf.string),
    "label": tf.FixedLenFeature([], tf.int64),
    "weights": tf.FixedLenFeature([2], tf.float32),
    "seq": tf.FixedLenSequenceFeature([], tf.float32, allow_missing=True, default_value=-1.0),
    "missing": tf.FixedLenFeature([2], tf.int64, default_value=[7, 8]),
}


def feature(kind, values):
    if kind == "bytes":
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=values))
    if kind == "int64":
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values))
    return tf.train.Feature(float_list=tf.train.FloatList(value=values))


def example(spec: dict):
    return tf.train.Example(features=tf.train.Features(
        feature={k: feature(*v) for k, v in spec.items()}))


def expected(entry):
    """A fixture's JSON value as the array TF returned."""
    if "bytes_hex" in entry:
        flat = np.empty(len(entry["bytes_hex"]), dtype=object)
        flat[:] = [bytes.fromhex(h) for h in entry["bytes_hex"]]
        return flat.reshape(entry["shape"])
    return np.array(entry["values"], dtype=entry["dtype"]).reshape(entry["shape"])


def assert_same(got, want):
    got = np.asarray(got, dtype=object if isinstance(got, bytes) else None)
    want = np.asarray(want, dtype=object if isinstance(want, bytes) else None)
    assert got.shape == want.shape
    if want.dtype == object:
        assert list(got.reshape(-1)) == list(want.reshape(-1))
    else:
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes()


# --- the protos -----------------------------------------------------------------------------
def test_examples_serialize_to_tfs_bytes_and_parse_back():
    # TF wrote them deterministically (a map's entries sorted by key); without that flag the
    # order of map entries is a hash table's, in TF's protobuf as here.
    for spec, record in zip(R.examples(), RECORDS):
        proto = example(spec)
        assert proto.SerializeToString(deterministic=True) == record
        assert tf.train.Example.FromString(proto.SerializeToString()) == proto
        assert tf.train.Example.FromString(record) == proto
        again = tf.train.Example()
        again.ParseFromString(record)
        assert again == proto
    assert tf.train.Example.DESCRIPTOR.full_name == "tensorflow.Example"


def test_sequence_example_serializes_to_tfs_bytes():
    context, lists = R.sequence_example()
    proto = tf.train.SequenceExample(
        context=tf.train.Features(feature={k: feature(*v) for k, v in context.items()}),
        feature_lists=tf.train.FeatureLists(feature_list={
            k: tf.train.FeatureList(feature=[feature(kind, v) for v in steps])
            for k, (kind, steps) in lists.items()}))
    assert proto.SerializeToString(deterministic=True) == \
        (FIXTURES / "sequence_example.pb").read_bytes()
    assert tf.train.FloatList(value=[0.5, -2.0]).SerializeToString() == \
        bytes.fromhex("0a080000003f000000c0")  # packed, as TF writes it


@requires_tf
def test_proto_descriptors_are_tfs():
    out = run_tf("""
        from google.protobuf import descriptor_pb2
        from tensorflow.core.example import example_pb2, feature_pb2
        from tensorflow.core.protobuf import tensor_bundle_pb2, trackable_object_graph_pb2
        from tensorflow.core.framework import (resource_handle_pb2, tensor_pb2,
                                               tensor_shape_pb2, tensor_slice_pb2,
                                               types_pb2, versions_pb2)
        for m in (types_pb2, tensor_shape_pb2, tensor_slice_pb2, versions_pb2,
                  tensor_bundle_pb2, feature_pb2, example_pb2, resource_handle_pb2,
                  tensor_pb2, trackable_object_graph_pb2):
            fd = descriptor_pb2.FileDescriptorProto()
            m.DESCRIPTOR.CopyToProto(fd)
            fd.ClearField("options")
            print(fd.SerializeToString(deterministic=True).hex())
    """)
    tf_files = [bytes.fromhex(line) for line in out.split()]
    ours = protos.file_descriptor_protos()
    assert len(tf_files) == len(ours)
    for mine, theirs in zip(ours, tf_files):
        from google.protobuf import descriptor_pb2

        tf_fd = descriptor_pb2.FileDescriptorProto.FromString(theirs)
        if mine.name.endswith("types.proto"):  # TF's enum also has the _REF and newer types
            names = {v.name: v.number for v in tf_fd.enum_type[0].value}
            assert {v.name: v.number for v in mine.enum_type[0].value}.items() <= names.items()
            continue
        assert mine == tf_fd, mine.name


# --- parse_example --------------------------------------------------------------------------
def test_parse_example_gives_what_tf_gave():
    out = tf.parse_example(RECORDS, SPEC)
    assert out["weights"].shape.as_list() == [3, 2]
    assert out["seq"].shape.as_list() == [3, None]
    with tf.Session() as sess:
        got = sess.run(out)
    assert sorted(got) == sorted(SPEC)
    for key in SPEC:
        assert_same(got[key], expected(PARSED[key]))


def test_var_len_feature_gives_tfs_sparse_tensor():
    out = tf.parse_example(RECORDS, {"tags": tf.VarLenFeature(tf.string),
                                     "label": tf.io.FixedLenFeature([], tf.int64)})
    assert isinstance(out["tags"], tf.SparseTensor)
    assert out["tags"].indices.shape.as_list() == [None, 2]
    with tf.Session() as sess:
        got = sess.run(out)
    want = PARSED["tags"]
    assert isinstance(got["tags"], tf.SparseTensorValue)
    assert got["tags"].indices.tolist() == want["indices"]
    assert_same(got["tags"].values, expected(want["values"]))
    assert got["tags"].dense_shape.tolist() == want["dense_shape"]
    assert_same(got["label"], expected(PARSED["label"]))
    single = tf.parse_single_example(RECORDS[2], {"tags": tf.io.VarLenFeature(tf.string)})
    assert single["tags"].indices.shape.as_list() == [None, 1]
    with tf.Session() as sess:
        one = sess.run(single["tags"])
    assert one.indices.tolist() == [[0]] and one.dense_shape.tolist() == [1]
    assert_same(one.values, expected(want["values"])[2:])


def test_sparse_feature_merges_index_and_value_features():
    records = [example({"ix": ("int64", [3, 0]), "v": ("float", [1.5, -2.0])})
               .SerializeToString(),
               example({"ix": ("int64", [1]), "v": ("float", [4.0])}).SerializeToString()]
    spec = {"sp": tf.SparseFeature("ix", "v", tf.float32, 5)}
    out = tf.parse_example(records, spec)
    assert sorted(out) == ["sp"]
    with tf.Session() as sess:
        got = sess.run(out["sp"])
    assert got.indices.tolist() == [[0, 0], [0, 3], [1, 1]]
    np.testing.assert_array_equal(got.values, np.float32([-2.0, 1.5, 4.0]))
    assert got.dense_shape.tolist() == [2, 5]
    with pytest.raises(ValueError, match="Conflicting type"):
        tf.parse_example(records, {"sp": spec["sp"], "ix": tf.VarLenFeature(tf.float32)})


def test_parse_single_example_drops_the_batch_dimension():
    out = tf.parse_single_example(RECORDS[1], SPEC)
    assert out["weights"].shape.as_list() == [2]
    assert out["label"].shape.as_list() == []
    with tf.Session() as sess:
        got = sess.run(out)
    for key in set(SPEC) - {"seq"}:
        assert_same(got[key], expected(PARSED[key])[1])
    assert_same(got["seq"], np.array([4.0], np.float32))  # alone: no padding to the batch's
    assert tf.io.parse_single_example is tf.parse_single_example


def test_parse_example_of_a_fed_batch():
    serialized = tf.placeholder(tf.string, [None])
    out = tf.parse_example(serialized, {"w": tf.FixedLenFeature([2], tf.float32)})
    assert out["w"].shape.as_list() == [None, 2]
    with tf.Session() as sess:
        got = sess.run(out["w"], {serialized: [example({"w": ("float", [1.0, 2.0])})
                                               .SerializeToString(), b""][:1]})
    np.testing.assert_array_equal(got, [[1.0, 2.0]])


EX = example({"f": ("float", [1.5, 2.5]), "s": ("bytes", [b"ab", b"c"])}).SerializeToString()
# (features, input, TF 2.21's message): single-example input first, then batches.
RUN_ERRORS = [
    ({"f": tf.FixedLenFeature([3], tf.float32)}, EX,
     "Key: f.  Can't parse serialized Example: Some float_list slice was not parsed."),
    ({"f": tf.FixedLenFeature([2], tf.int64)}, EX,
     "Key: f.  Data types don't match. Data type: float but expected type: int64"),
    ({"x": tf.FixedLenFeature([2], tf.int64)}, EX,
     "Feature: x \\(data type: int64\\) is required but could not be found."),
    ({"f": tf.FixedLenSequenceFeature([3], tf.float32, allow_missing=True)}, EX,
     "Error while parsing feature with key f: number of elements should be divisible by 3, "
     "found 2 instead"),
    ({"f": tf.FixedLenFeature([2], tf.float32)}, b"garbage",
     "Could not parse example input, value: 'garbage'"),
    ({"f": tf.FixedLenFeature([3], tf.float32)}, [EX, EX],
     "Name: <unknown>, Key: f, Index: 0.  Number of float values != expected.  Values size: "
     "2 but output shape: \\[3\\]"),
    ({"s": tf.FixedLenFeature([3], tf.string)}, [EX],
     "Name: <unknown>, Key: s, Index: 0.  Number of bytes values != expected.  Values size: "
     "2 but output shape: \\[3\\]"),
    ({"f": tf.FixedLenSequenceFeature([], tf.int64, allow_missing=True)}, [EX],
     "Name: <unknown>, Key: f, Index: 0.  Data types don't match. Data type: float but "
     "expected type: int64"),
    ({"f": tf.FixedLenSequenceFeature([3], tf.float32, allow_missing=True)}, [EX],
     "Name: <unknown>, Key: f, Index: 0.  Number of float values is not a multiple of stride "
     "length. Saw 2 values but output shape is: \\[\\?,3\\]"),
    ({"f": tf.FixedLenFeature([2], tf.float32)}, [EX, b""],
     "Name: <unknown>, Feature: f \\(data type: float\\) is required but could not be found."),
    ({"f": tf.FixedLenFeature([2], tf.float32)}, [b"ok", b"\x0a\x05garbage"],
     "Could not parse example input, value: 'ok'"),
]


@pytest.mark.parametrize("features,serialized,message", RUN_ERRORS)
def test_run_time_errors_are_tfs(features, serialized, message):
    single = not isinstance(serialized, list)
    out = (tf.parse_single_example if single else tf.parse_example)(serialized, features)
    with tf.Session() as sess:
        with pytest.raises(tf.errors.InvalidArgumentError, match=message):
            sess.run(out)


def test_a_missing_feature_takes_its_default_and_an_empty_record_parses():
    out = tf.parse_example([b""], {"f": tf.FixedLenFeature([2], tf.float32,
                                                           default_value=[1.0, 2.0])})
    with tf.Session() as sess:
        np.testing.assert_array_equal(sess.run(out["f"]), [[1.0, 2.0]])


BUILD_ERRORS = [
    ({"x": tf.FixedLenFeature([2], tf.int32)}, TypeError,
     "DataType int32 not in list of allowed values: float32, int64, string"),
    ({"x": tf.FixedLenFeature([None], tf.int64)}, ValueError,
     "First dimension of shape for feature x unknown. Consider using FixedLenSequenceFeature"),
    ({"f": tf.FixedLenSequenceFeature([], tf.float32)}, ValueError,
     "FixedLenSequenceFeature requires allow_missing to be True"),
    ({"x": tf.FixedLenFeature([2], tf.int64, default_value=7)}, ValueError,
     "Cannot reshape a tensor with 1 elements to shape \\[2\\]"),
    ({"f": "x"}, ValueError, "Unsupported str x for key 'f'"),
    ({}, ValueError, "features cannot be empty"),
]


@pytest.mark.parametrize("features,error,message", BUILD_ERRORS)
def test_build_time_errors_are_tfs(features, error, message):
    with pytest.raises(error, match=message):
        tf.parse_single_example(EX, features)


def test_shape_errors_of_the_input():
    with pytest.raises(ValueError, match="Input serialized must be a scalar"):
        tf.parse_single_example([EX, EX], {"f": tf.FixedLenFeature([2], tf.float32)})
    with pytest.raises(ValueError, match="at most rank 1 but is rank 2"):
        tf.parse_example([[EX]], {"f": tf.FixedLenFeature([2], tf.float32)})


def test_config_tuples_print_as_tfs():
    assert repr(tf.FixedLenFeature([2], tf.float32)) == \
        "FixedLenFeature(shape=[2], dtype=tf.float32, default_value=None)"
    assert repr(tf.FixedLenSequenceFeature([1], tf.float32)) == \
        "FixedLenSequenceFeature(shape=[1], dtype=tf.float32, allow_missing=False, " \
        "default_value=None)"


# --- parse_single_sequence_example ----------------------------------------------------------
def test_parse_single_sequence_example_gives_what_tf_gave():
    want = json.loads((FIXTURES / "sequence_example_parsed.json").read_text())
    ctx, seq = tf.parse_single_sequence_example(
        (FIXTURES / "sequence_example.pb").read_bytes(),
        context_features={"length": tf.FixedLenFeature([], tf.int64),
                          "title": tf.FixedLenFeature([], tf.string),
                          "absent": tf.FixedLenFeature([], tf.float32, default_value=2.5)},
        sequence_features={"tokens": tf.FixedLenSequenceFeature([2], tf.int64),
                           "scores": tf.FixedLenSequenceFeature([], tf.float32),
                           "words": tf.VarLenFeature(tf.string),
                           "none": tf.FixedLenSequenceFeature([], tf.int64,
                                                              allow_missing=True)})
    assert seq["tokens"].shape.as_list() == [None, 2]
    assert seq["words"].indices.shape.as_list() == [None, 2]
    with tf.Session() as sess:
        got_ctx, got_seq = sess.run((ctx, seq))
    for key, value in got_ctx.items():
        assert_same(value, expected(want["context"][key]))
    words, got_words = want["sequence"].pop("words"), got_seq.pop("words")
    assert got_words.indices.tolist() == words["indices"]
    assert_same(got_words.values, expected(words["values"]))
    assert got_words.dense_shape.tolist() == words["dense_shape"]
    for key, value in got_seq.items():
        assert_same(value, expected(want["sequence"][key]))


SEQ = (FIXTURES / "sequence_example.pb").read_bytes()
SEQ_ERRORS = [
    ({}, {"zz": tf.FixedLenSequenceFeature([], tf.float32)},
     "Name: <unknown>, Feature list 'zz' is required but could not be found.  Did you mean "
     "to include it in feature_list_dense_missing_assumed_empty or "
     "feature_list_dense_defaults\\?"),
    ({}, {"tokens": tf.FixedLenSequenceFeature([3], tf.int64)},
     "Name: <unknown>, Key: tokens, Index: 0.  Number of values != expected.  values size: 2 "
     "but output shape: \\[3\\]"),
    ({}, {"scores": tf.FixedLenSequenceFeature([], tf.int64)},
     "Name: <unknown>, Feature list: scores, Index: 0.  Data types don't match. Expected "
     "type: int64"),
    ({"q": tf.FixedLenFeature([], tf.int64)}, {},
     "Inconsistent max number of elements for feature q: expected 1, but found 0"),
]


@pytest.mark.parametrize("context,sequence,message", SEQ_ERRORS)
def test_sequence_example_errors_are_tfs(context, sequence, message):
    ctx, seq = tf.parse_single_sequence_example(SEQ, context, sequence)
    with tf.Session() as sess:
        with pytest.raises(tf.errors.InvalidArgumentError, match=message):
            sess.run((ctx, seq))


def test_sequence_example_build_errors_are_tfs():
    with pytest.raises(ValueError, match="Both context_features and sequence_features are "
                                         "None"):
        tf.parse_single_sequence_example(SEQ)
    with pytest.raises(ValueError, match="Unsupported FixedLenFeature .* for key 'tokens'"):
        tf.parse_single_sequence_example(SEQ, {}, {"tokens": tf.FixedLenFeature([2],
                                                                                 tf.int64)})


# --- decode_raw -----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int32", "uint16", "uint8",
                                   "int16", "int8", "int64", "complex64", "complex128",
                                   "bool"])
@pytest.mark.parametrize("little_endian", [True, False])
def test_decode_raw_reinterprets_bytes_as_numpy_does(dtype, little_endian):
    rng = np.random.RandomState(0)
    values = (rng.randn(2, 3, 4) * 50).astype(dtype)
    order = "<" if little_endian else ">"
    raw = values.astype(values.dtype.newbyteorder(order))
    strings = np.array([[row.tobytes() for row in m] for m in raw], dtype=object)
    out = tf.decode_raw(strings, tf.as_dtype(dtype), little_endian=little_endian)
    assert out.shape.as_list() == [2, 3, None]
    with tf.Session() as sess:
        got = sess.run(out)
    assert got.dtype == values.dtype and got.tobytes() == values.tobytes()


def test_decode_raw_errors_are_tfs():
    x = tf.placeholder(tf.string, [None])
    out = tf.decode_raw(x, tf.float32)
    with tf.Session() as sess:
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match="Input to DecodeRaw has length 3 that is not a multiple of "
                                 "4, the size of float"):
            sess.run(out, {x: [b"\x01\x02\x03"]})
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match="DecodeRaw requires input strings to all be the same size, "
                                 "but element 1 has size 8 != 4"):
            sess.run(out, {x: [b"\x01\x02\x03\x04", b"\x00" * 8]})
        assert sess.run(out, {x: []}).shape == (0, 0)
    with pytest.raises(TypeError, match="DataType string not in list of allowed values"):
        tf.decode_raw(b"a", tf.string)
    assert tf.decode_raw(bytes=b"ab", out_type=tf.uint8).shape.as_list() == [None]
    assert tf.io.decode_raw is tf.decode_raw
