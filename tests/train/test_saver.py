"""Saver and checkpoints: round trips, path conventions, state file, sharding, meta graphs in a
fresh process, error classes for missing/corrupted/mismatched checkpoints, consistent snapshots."""

import json
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import dflab as tf
from dflab.train.saver import checkpoint_values


@pytest.fixture(autouse=True)
def _fresh_graph():
    tf.reset_default_graph()
    yield
    tf.reset_default_graph()


VALUES = {
    "float16": np.array([[1.5, -2.25], [np.inf, 0.0]], np.float16),
    "float32": np.array([1e-30, -3.5, np.nan], np.float32),
    "float64": np.array(np.pi),
    "int8": np.array([-128, 0, 127], np.int8),
    "int16": np.array([[-32768, 5]], np.int16),
    "int32": np.zeros((0, 3), np.int32),
    "int64": np.array([2**62, -(2**62)], np.int64),
    "uint8": np.array([0, 255, 7], np.uint8),
    "bool": np.array([[True, False, True]]),
    "string": np.array([b"", b"hello", "ünïcode".encode(), b"a\x00b"], dtype=object),
}


@pytest.mark.parametrize("dtype", sorted(VALUES))
def test_round_trip_every_dtype(tmp_path, dtype):
    value = VALUES[dtype]
    v = tf.Variable(value, name="v")
    tf.Variable(tf.zeros([2]), name="other")
    saver = tf.train.Saver()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        path = saver.save(sess, str(tmp_path / "model"))
        if dtype == "string":
            sess.run(v.assign(np.full(value.shape, b"x", dtype=object)))
        else:
            sess.run(v.assign(np.zeros(value.shape, value.dtype)))
        saver.restore(sess, path)
        got = sess.run(v)
        np.testing.assert_array_equal(np.asarray(got), value)
        assert np.asarray(got).dtype == value.dtype
        assert np.shape(got) == value.shape
    assert tf.train.load_variable(path, "v").dtype == value.dtype
    np.testing.assert_array_equal(tf.train.load_variable(path, "v"), value)
    assert dict(tf.train.list_variables(path)) == {"v": list(value.shape), "other": [2]}


def _counter_graph():
    gs = tf.train.get_or_create_global_step()
    w = tf.Variable([1.0, 2.0], name="w")
    step = tf.group(tf.assign_add(gs, 1), tf.assign_add(w, [1.0, 1.0]))
    return gs, w, step


def test_path_conventions_state_file_and_max_to_keep(tmp_path):
    gs, w, step = _counter_graph()
    saver = tf.train.Saver(max_to_keep=2)
    prefix = str(tmp_path / "model")
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        paths = []
        for _ in range(4):
            sess.run(step)
            paths.append(saver.save(sess, prefix, global_step=gs))
    assert paths == [f"{prefix}-{k}" for k in range(1, 5)]
    for suffix in (".index", ".data-00000-of-00001", ".meta"):
        assert os.path.exists(paths[-1] + suffix)
        assert os.path.exists(paths[-2] + suffix)
        assert not os.path.exists(paths[0] + suffix)  # beyond max_to_keep: deleted
    assert saver.last_checkpoints == paths[-2:]
    lines = (tmp_path / "checkpoint").read_text().splitlines()
    assert lines[0] == f'model_checkpoint_path: "{paths[-1]}"'
    assert lines[1:3] == [f'all_model_checkpoint_paths: "{p}"' for p in paths[-2:]]
    state = tf.train.get_checkpoint_state(str(tmp_path))
    assert state.model_checkpoint_path == paths[-1]
    assert state.all_model_checkpoint_paths == paths[-2:]
    assert tf.train.latest_checkpoint(str(tmp_path)) == paths[-1]
    reader = tf.train.NewCheckpointReader(paths[-1])  # TF's format by default
    assert reader.get_variable_to_dtype_map()["w"] is tf.float32
    assert open(paths[-1] + ".index", "rb").read()[-8:] == bytes.fromhex("57fb808b247547db")
    # Every write went through a temp file that was renamed: none is left behind.
    assert not [f for f in os.listdir(tmp_path) if ".tmp" in f]


def test_relative_paths_and_no_state_when_asked(tmp_path):
    _counter_graph()
    saver = tf.train.Saver(save_relative_paths=True)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        saver.save(sess, str(tmp_path / "m"), global_step=7)
        saver.save(sess, str(tmp_path / "other"), write_state=False)
    assert 'model_checkpoint_path: "m-7"' in (tmp_path / "checkpoint").read_text()
    assert tf.train.latest_checkpoint(str(tmp_path)) == str(tmp_path / "m-7")


def test_save_into_missing_parent_directory_is_value_error(tmp_path):
    # TF's save op creates the checkpoint's own directory, never its missing parents.
    _counter_graph()
    saver = tf.train.Saver()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        with pytest.raises(ValueError, match="doesn't exist"):
            saver.save(sess, str(tmp_path / "nope" / "deeper" / "model"))


def test_var_list_dict_renames_and_subset_restore(tmp_path):
    a = tf.Variable(3.0, name="a")
    b = tf.Variable(4.0, name="b")
    saver = tf.train.Saver({"renamed_a": a})
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        path = saver.save(sess, str(tmp_path / "ck"))
        sess.run([a.assign(0.0), b.assign(0.0)])
        saver.restore(sess, path)
        assert sess.run([a, b]) == [3.0, 0.0]
    assert [n for n, _ in tf.train.list_variables(path)] == ["renamed_a"]


def test_duplicate_names_and_empty_var_list_rejected():
    a = tf.Variable(1.0, name="a")
    with pytest.raises(ValueError, match="No variables to save"):
        tf.train.Saver([])
    with pytest.raises(TypeError):
        tf.train.Saver([tf.constant(1.0)])
    tf.train.Saver([a, a])  # the same variable twice is fine


def _saved(tmp_path, value=None):
    v = tf.Variable(np.arange(6, dtype=np.float32).reshape(2, 3) if value is None else value,
                    name="v")
    saver = tf.train.Saver()
    sess = tf.Session()
    sess.run(tf.global_variables_initializer())
    return v, saver, sess


def test_missing_checkpoint_is_not_found(tmp_path):
    v, saver, sess = _saved(tmp_path)
    with sess:
        with pytest.raises(tf.errors.NotFoundError, match="nothere"):
            saver.restore(sess, str(tmp_path / "nothere"))
        with pytest.raises(ValueError):
            saver.restore(sess, None)
    with pytest.raises(tf.errors.NotFoundError):
        tf.train.load_variable(str(tmp_path / "nothere"), "v")


def _new_graph_restore(path, build):
    tf.reset_default_graph()
    build()
    saver = tf.train.Saver()
    with tf.Session() as sess:
        saver.restore(sess, path)


def test_unknown_variable_wrong_dtype_wrong_shape(tmp_path):
    v, saver, sess = _saved(tmp_path)
    with sess:
        path = saver.save(sess, str(tmp_path / "ck"))
    with pytest.raises(tf.errors.NotFoundError, match=r"Key extra not found in checkpoint .*ck"):
        _new_graph_restore(path, lambda: (tf.Variable(1.0, name="v2"),
                                          tf.Variable(1.0, name="extra")))
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"tensor_name = v; expected dtype "
                       r"float64 does not equal original dtype float32 in checkpoint .*ck"):
        _new_graph_restore(path, lambda: tf.Variable(np.zeros((2, 3)), name="v"))
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"tensor_name = v; shape in "
                       r"checkpoint .*ck is \[2, 3\] but the variable has shape \[3, 2\]"):
        _new_graph_restore(path, lambda: tf.Variable(tf.zeros([3, 2]), name="v"))


def _two_checkpoints(tmp_path):
    gs, w, step = _counter_graph()
    saver = tf.train.Saver()
    sess = tf.Session()
    sess.run(tf.global_variables_initializer())
    first = saver.save(sess, str(tmp_path / "model"), global_step=1)
    sess.run(step)
    second = saver.save(sess, str(tmp_path / "model"), global_step=2)
    return w, saver, sess, first, second


def _flip_byte(path, offset_from_end=3):
    data = bytearray(open(path, "rb").read())
    data[-offset_from_end] ^= 0xFF
    open(path, "wb").write(bytes(data))


@pytest.mark.parametrize("damage", ["flip_data", "truncate_data", "garble_index",
                                    "truncate_index", "delete_data"])
def test_damaged_checkpoint_errors_and_previous_stays_usable(tmp_path, damage):
    w, saver, sess, first, second = _two_checkpoints(tmp_path)
    data, index = second + ".data-00000-of-00001", second + ".index"
    if damage == "flip_data":
        _flip_byte(data)
        expected = tf.errors.DataLossError
    elif damage == "truncate_data":
        os.truncate(data, os.path.getsize(data) - 10)
        expected = tf.errors.DataLossError
    elif damage == "garble_index":
        open(index, "w").write('{"format": "dflab.checkpoint", "version": 1, "tensors": 3}')
        expected = tf.errors.DataLossError
    elif damage == "truncate_index":
        os.truncate(index, os.path.getsize(index) // 2)
        expected = tf.errors.DataLossError
    else:
        os.unlink(data)
        expected = tf.errors.NotFoundError
    with sess:
        with pytest.raises(expected, match=os.path.basename(second)):
            saver.restore(sess, second)
        saver.restore(sess, first)  # the last good checkpoint still restores
        np.testing.assert_array_equal(sess.run(w), [1.0, 2.0])
    with pytest.raises(expected):
        tf.train.load_variable(second, "w")


def test_checksum_names_the_tensor(tmp_path):
    v, saver, sess = _saved(tmp_path, np.arange(1000, dtype=np.float64))
    with sess:
        path = saver.save(sess, str(tmp_path / "ck"))
        # Flip a byte in the middle of the tensor data (the file size stays the same).
        data = path + ".data-00000-of-00001"
        raw = bytearray(open(data, "rb").read())
        raw[len(raw) - 4000] ^= 1
        open(data, "wb").write(bytes(raw))
        with pytest.raises(tf.errors.DataLossError, match=r"tensor 'v' is corrupted"):
            saver.restore(sess, path)


def test_latest_checkpoint_falls_back_when_newest_vanished(tmp_path):
    w, saver, sess, first, second = _two_checkpoints(tmp_path)
    sess.close()
    os.unlink(second + ".index")
    assert tf.train.latest_checkpoint(str(tmp_path)) == first
    assert tf.train.latest_checkpoint(str(tmp_path / "empty")) is None


def test_sharded_save_one_file_per_device(tmp_path):
    with tf.device("/cpu:0"):
        a = tf.Variable([1.0, 2.0], name="a")
    with tf.device("/cpu:1"):
        b = tf.Variable([[3, 4]], name="b")
    saver = tf.train.Saver(sharded=True)
    saves = [op for op in tf.get_default_graph().get_operations() if op.type == "SaveV2"]
    assert sorted(op.device for op in saves) == ["/device:CPU:0", "/device:CPU:1"]
    config = tf.ConfigProto(device_count={"CPU": 2})
    with tf.Session(config=config) as sess:
        sess.run(tf.global_variables_initializer())
        path = saver.save(sess, str(tmp_path / "model"), global_step=3)
        sess.run([a.assign([0.0, 0.0]), b.assign([[0, 0]])])
        saver.restore(sess, path)
        np.testing.assert_array_equal(sess.run(a), [1.0, 2.0])
        np.testing.assert_array_equal(sess.run(b), [[3, 4]])
    files = sorted(os.listdir(tmp_path))
    assert "model-3.data-00000-of-00002" in files and "model-3.data-00001-of-00002" in files
    assert not [f for f in files if "_temp" in f]  # the shards' temp directory is gone
    assert checkpoint_values(path)["b"].tolist() == [[3, 4]]


def test_uninitialized_variable_save_fails(tmp_path):
    tf.Variable(1.0, name="never_initialized")
    saver = tf.train.Saver()
    with tf.Session() as sess:
        with pytest.raises(tf.errors.FailedPreconditionError, match="never_initialized"):
            saver.save(sess, str(tmp_path / "m"))
    assert tf.train.latest_checkpoint(str(tmp_path)) is None


def test_meta_graph_restores_in_a_fresh_process(tmp_path):
    x = tf.placeholder(tf.float32, [None, 2], name="x")
    w = tf.Variable([[1.0], [2.0]], name="w")
    y = tf.matmul(x, w, name="y")
    tf.add_to_collection("outputs", y)
    gs = tf.train.get_or_create_global_step()
    inc = tf.assign_add(gs, 5)
    saver = tf.train.Saver()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run([w.assign([[3.0], [-1.0]]), inc])
        path = saver.save(sess, str(tmp_path / "model"), global_step=gs)
    script = textwrap.dedent(f"""
        import dflab as tf
        saver = tf.train.import_meta_graph({path + '.meta'!r})
        y = tf.get_collection("outputs")[0]
        names = sorted(v.op.name for v in tf.global_variables())
        with tf.Session() as sess:
            saver.restore(sess, tf.train.latest_checkpoint({str(tmp_path)!r}))
            out = sess.run(y, {{"x:0": [[1.0, 1.0], [2.0, 0.0]]}})
            step = sess.run(tf.train.get_global_step())
        print(names, out.ravel().tolist(), int(step))
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=120, cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['global_step', 'w'] [2.0, 6.0] 5"


def test_meta_graph_is_json_not_pickle(tmp_path):
    _counter_graph()
    meta = tf.train.export_meta_graph(str(tmp_path / "g.meta"))
    obj = json.loads((tmp_path / "g.meta").read_text())
    assert obj["format"] == "dflab.meta_graph"
    assert {"variables", "trainable_variables"} <= set(obj["collection_def"])
    assert meta.graph_def.node
    (tmp_path / "bad.meta").write_bytes(b"\x80\x04garbage")
    with pytest.raises(tf.errors.DataLossError):
        tf.train.import_meta_graph(str(tmp_path / "bad.meta"))


def _slow_op(after):
    """A matmul (it releases the GIL) between the two increments widens the window."""
    with tf.control_dependencies([after]):
        m = tf.ones([400, 400])
        return tf.reduce_sum(tf.matmul(m, m)).op


def test_consistent_snapshots_under_concurrent_training(tmp_path):
    """Threads increment a and b together; every consistent checkpoint has a == b and the
    global step the file is named after."""
    gs = tf.train.get_or_create_global_step()
    a = tf.Variable(0, dtype=tf.int64, name="a")
    b = tf.Variable(0, dtype=tf.int64, name="b")
    # Split updates: a first, then (after it) b, then the step; a non-gated save could land
    # between any two of them.
    # use_locking: concurrent increments must not lose updates (that is a different race).
    inc_a = tf.assign_add(a, 1, use_locking=True)
    with tf.control_dependencies([inc_a, _slow_op(inc_a)]):
        inc_b = tf.assign_add(b, 1, use_locking=True)
    with tf.control_dependencies([inc_b]):
        step = tf.assign_add(gs, 1, use_locking=True)
    saver = tf.train.Saver(consistent=True, max_to_keep=None)
    stop = threading.Event()
    errors_seen = []
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        saver.restore(sess, saver.save(sess, str(tmp_path / "m"), global_step=gs))

        def train():
            try:
                while not stop.is_set():
                    sess.run(step)
            except Exception as e:  # noqa: BLE001
                errors_seen.append(e)

        threads = [threading.Thread(target=train) for _ in range(3)]
        for t in threads:
            t.start()
        paths = [saver.save(sess, str(tmp_path / "m"), global_step=gs) for _ in range(25)]
        stop.set()
        for t in threads:
            t.join()
    assert not errors_seen
    for p in paths:
        vals = checkpoint_values(p)
        assert vals["a"] == vals["b"] == vals["global_step"], p
        assert p.endswith(f"-{int(vals['global_step'])}")


def test_savers_and_queue_runners_in_collections_survive_a_meta_graph(tmp_path):
    """Saver and QueueRunner objects in collections are written as their defs and come back
    as working objects, under an import scope too (names prefixed as TF's import does)."""
    a = tf.Variable(1.0, name="a")
    b = tf.Variable(2.0, name="b")
    only_a = tf.train.Saver([a], name="only_a")
    tf.add_to_collection(tf.GraphKeys.SAVERS, only_a)
    q = tf.FIFOQueue(10, tf.float32, name="q")
    tf.train.add_queue_runner(tf.train.QueueRunner(q, [q.enqueue(b)]))
    q.dequeue(name="dq")
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(a.assign(7.0))
        prefix = only_a.save(sess, str(tmp_path / "a"))
    tf.train.export_meta_graph(str(tmp_path / "g.meta"))

    tf.reset_default_graph()
    tf.train.import_meta_graph(str(tmp_path / "g.meta"), import_scope="m")
    saver, = tf.get_collection(tf.GraphKeys.SAVERS)
    runner, = tf.get_collection(tf.GraphKeys.QUEUE_RUNNERS)
    assert saver.saver_def.restore_op_name.startswith("m/only_a/")
    assert runner.name == "m/q"
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        saver.restore(sess, prefix)
        assert sess.run("m/a:0") == 7.0 and sess.run("m/b:0") == 2.0  # b is not in that saver
        coord = tf.train.Coordinator()
        threads = tf.train.start_queue_runners(sess, coord)
        assert sess.run("m/dq:0") == 2.0
        coord.request_stop()
        coord.join(threads, stop_grace_period_secs=5)
