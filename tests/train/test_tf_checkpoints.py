"""TF's checkpoint format (the V2 tensor bundle) both ways: checkpoints TF 2.21 wrote
(tests/fixtures/tf) restore into dflab bit for bit, dflab writes the very same bytes for the
same variables, TF restores what dflab writes, and dflab's earlier format stays readable."""

import json
import os
import shutil

import numpy as np
import pytest
from tf_interop import FIXTURES, recipe, requires_tf, run_tf

import dflab as tf

R = recipe()
LEGACY = FIXTURES.parent / "dflab_safetensors"


def _same(got, want, name=""):
    got = np.asarray(got)
    assert got.dtype == want.dtype and got.shape == want.shape, (name, got.dtype, got.shape)
    if want.dtype == object:
        assert list(got.reshape(-1)) == list(want.reshape(-1)), name
    else:
        assert got.tobytes() == want.tobytes(), name  # bit for bit


def _variables(values, zero=True):
    out = {}
    for name, value in values.items():
        init = np.zeros_like(value) if zero and value.dtype != object else value
        if zero and value.dtype == object:
            init = np.full(value.shape, b"", dtype=object)
        out[name] = tf.Variable(init, name=name)
    return out


@pytest.mark.parametrize("directory,step,values", [
    ("ckpt", 7, R.checkpoint_values()), ("ckpt_sharded", 3, R.sharded_values())])
def test_tf_checkpoint_restores_bit_for_bit(directory, step, values):
    variables = _variables(values)
    saver = tf.train.Saver()
    prefix = tf.train.latest_checkpoint(str(FIXTURES / directory))
    assert prefix == str(FIXTURES / directory / f"model-{step}")
    with tf.Session() as sess:
        saver.restore(sess, prefix)
        for name, v in variables.items():
            _same(sess.run(v), values[name], name)


def test_list_load_and_reader_on_a_tf_checkpoint():
    values = R.checkpoint_values()
    path = str(FIXTURES / "ckpt")
    assert tf.train.list_variables(path) == sorted(
        (n, list(v.shape)) for n, v in values.items())
    _same(tf.train.load_variable(path, "dense/kernel"), values["dense/kernel"])
    _same(tf.train.load_variable(path, "names:0"), values["names"])
    reader = tf.train.NewCheckpointReader(str(FIXTURES / "ckpt" / "model-7"))
    assert reader.has_tensor("half") and not reader.has_tensor("nope")
    dtypes = reader.get_variable_to_dtype_map()
    assert {n: d.name for n, d in dtypes.items()} == {
        n: ("string" if v.dtype == object else v.dtype.name) for n, v in values.items()}
    assert b"dense/kernel (float32) [4, 3]\n" in reader.debug_string()
    with pytest.raises(tf.errors.NotFoundError, match="Key nope not found in checkpoint"):
        reader.get_tensor("nope")


def test_saver_writes_the_bytes_tf_writes(tmp_path):
    values = R.checkpoint_values()
    _variables(values, zero=False)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        # (No .meta: dflab's graph JSON cannot hold the complex constant.)
        prefix = tf.train.Saver().save(sess, str(tmp_path / "model"), global_step=7,
                                       write_meta_graph=False)
    for suffix in (".index", ".data-00000-of-00001"):
        assert open(prefix + suffix, "rb").read() == \
            (FIXTURES / "ckpt" / f"model-7{suffix}").read_bytes(), suffix


def test_sharded_save_writes_the_bytes_tf_writes(tmp_path):
    values = R.sharded_values()
    for name, value in values.items():
        with tf.device("/cpu:0" if name.startswith("a/") else "/cpu:1"):
            tf.Variable(value, name=name)
    saver = tf.train.Saver(sharded=True)
    with tf.Session(config=tf.ConfigProto(device_count={"CPU": 2})) as sess:
        sess.run(tf.global_variables_initializer())
        prefix = saver.save(sess, str(tmp_path / "model"), global_step=3)
    for suffix in (".index", ".data-00000-of-00002", ".data-00001-of-00002"):
        assert open(prefix + suffix, "rb").read() == \
            (FIXTURES / "ckpt_sharded" / f"model-3{suffix}").read_bytes(), suffix
    assert sorted(os.listdir(tmp_path)) == sorted(
        ["checkpoint", "model-3.index", "model-3.data-00000-of-00002",
         "model-3.data-00001-of-00002", "model-3.meta"])


def test_dflabs_earlier_format_stays_readable():
    values = R.sharded_values()
    values["dense/kernel"] = R.checkpoint_values()["dense/kernel"]
    values["complex"] = R.checkpoint_values()["complex"]
    variables = _variables(values)
    with tf.Session() as sess:
        tf.train.Saver().restore(sess, tf.train.latest_checkpoint(str(LEGACY)))
        for name, v in variables.items():
            _same(sess.run(v), values[name], name)
    assert [n for n, _ in tf.train.list_variables(str(LEGACY))] == sorted(values)


def test_earlier_format_is_written_on_request_and_converts(tmp_path):
    values = R.sharded_values()
    _variables(values, zero=False)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        old = tf.train.Saver(checkpoint_format="safetensors").save(sess, str(tmp_path / "old"))
        assert open(old + ".index", "rb").read(1) == b"{"
        # Restoring an old checkpoint and saving again writes TF's format.
        tf.train.Saver().restore(sess, old)
        new = tf.train.Saver().save(sess, str(tmp_path / "new"))
    reader = tf.train.NewCheckpointReader(new)
    for name, value in values.items():
        _same(reader.get_tensor(name), value, name)
    with pytest.raises(ValueError, match="checkpoint_format"):
        tf.train.Saver(checkpoint_format="h5")


def test_damaged_tf_checkpoints_are_data_loss(tmp_path):
    shutil.copytree(FIXTURES / "ckpt", tmp_path / "ckpt")
    prefix = str(tmp_path / "ckpt" / "model-7")
    data = bytearray(open(prefix + ".data-00000-of-00001", "rb").read())
    data[3] ^= 1  # inside the first tensor (sorted first: bytes/i16)
    open(prefix + ".data-00000-of-00001", "wb").write(bytes(data))
    reader = tf.train.NewCheckpointReader(prefix)
    with pytest.raises(tf.errors.DataLossError, match=r"'bytes/i16' is corrupted \(Checksum"):
        reader.get_tensor("bytes/i16")
    _same(reader.get_tensor("dense/kernel"), R.checkpoint_values()["dense/kernel"])
    os.truncate(prefix + ".data-00000-of-00001", 100)
    with pytest.raises(tf.errors.DataLossError, match="'names' is truncated"):
        tf.train.NewCheckpointReader(prefix).get_tensor("names")
    index = bytearray(open(prefix + ".index", "rb").read())
    index[20] ^= 0x40
    open(prefix + ".index", "wb").write(bytes(index))
    with pytest.raises(tf.errors.DataLossError, match="model-7.index: corrupted table: block "
                                                      "checksum mismatch"):
        tf.train.NewCheckpointReader(prefix)


def test_restore_checks_dtype_and_shape_against_a_tf_checkpoint():
    tf.Variable(np.zeros([4, 3], np.float64), name="dense/kernel")
    with tf.Session() as sess:
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match="expected dtype float64 does not equal original dtype "
                                 "float32"):
            tf.train.Saver().restore(sess, str(FIXTURES / "ckpt" / "model-7"))


@requires_tf
def test_tf_restores_what_dflab_saves(tmp_path):
    values = R.checkpoint_values()
    _variables(values, zero=False)
    with tf.device("/cpu:1"):
        extra = tf.Variable(np.arange(6, dtype=np.float32).reshape(2, 3), name="other/w")
    with tf.Session(config=tf.ConfigProto(device_count={"CPU": 2})) as sess:
        sess.run(tf.global_variables_initializer())
        single = tf.train.Saver().save(sess, str(tmp_path / "one" / "model"), global_step=1,
                                       write_meta_graph=False)
        sharded = tf.train.Saver(sharded=True).save(sess, str(tmp_path / "two" / "model"),
                                                    write_meta_graph=False)
        want_extra = sess.run(extra)
    out = run_tf(f"""
        values = recipe.checkpoint_values()
        values["other/w"] = np.arange(6, dtype=np.float32).reshape(2, 3)
        bad = []
        for prefix in ({single!r}, {sharded!r}):
            with tf.Graph().as_default():
                vs = {{n: tf.Variable(np.zeros_like(v) if v.dtype != object else
                                      np.full(v.shape, b"", object), name=n)
                       for n, v in values.items()}}
                with tf.Session() as s:
                    tf.train.Saver().restore(s, prefix)
                    for n, v in vs.items():
                        got = s.run(v)
                        same = (list(got.reshape(-1)) == list(values[n].reshape(-1))
                                if values[n].dtype == object else
                                got.dtype == values[n].dtype and
                                got.tobytes() == values[n].tobytes())
                        if not same:
                            bad.append((prefix, n))
            print(sorted(n for n, _ in tf.train.list_variables(prefix)) == sorted(values))
        print(tf.train.latest_checkpoint({str(tmp_path / "one")!r}) == {single!r})
        print(bad)
    """)
    assert out.split() == ["True", "True", "True", "[]"]
    np.testing.assert_array_equal(want_extra, np.arange(6).reshape(2, 3))


def test_tf_partitioned_variables_read_whole_from_their_slices():
    values = R.partitioned_values()
    path = str(FIXTURES / "ckpt_partitioned")
    # The slices' own keys (TF's ordered code, 1 to 3 bytes per bound here) are not listed.
    assert tf.train.list_variables(path) == [("big", [20000, 1]), ("emb", [300, 2])]
    for name, value in values.items():
        _same(tf.train.load_variable(path, name), value, name)
    # Restored into a dflab variable partitioned otherwise, and into a whole one.
    emb = tf.get_variable("emb", shape=[300, 2], partitioner=tf.fixed_size_partitioner(4))
    big = tf.get_variable("big", shape=[20000, 1], dtype=tf.int8,
                          initializer=tf.zeros_initializer())
    with tf.Session() as sess:
        tf.train.Saver().restore(sess, tf.train.latest_checkpoint(path))
        _same(np.concatenate(sess.run(list(emb))), values["emb"], "emb")
        _same(sess.run(big), values["big"], "big")


@requires_tf
def test_tf_restores_a_partitioned_variable_dflab_saved_whole(tmp_path):
    value = np.arange(12, dtype=np.float32).reshape(6, 2)
    emb = tf.get_variable("emb", shape=[6, 2], partitioner=tf.fixed_size_partitioner(2))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run([tf.assign(p, value[3 * i:3 * i + 3]) for i, p in enumerate(emb)])
        prefix = tf.train.Saver().save(sess, str(tmp_path / "model"), write_meta_graph=False)
    out = run_tf(f"""
        emb = tf.get_variable("emb", shape=[6, 2], partitioner=tf.fixed_size_partitioner(3))
        with tf.Session() as s:
            tf.train.Saver().restore(s, {prefix!r})
            print(json.dumps(s.run(tf.concat(list(emb), 0)).tolist()))
    """)
    assert json.loads(out) == value.tolist()
