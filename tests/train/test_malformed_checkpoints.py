"""Malformed meta graphs, collections, saver defs, checkpoint indexes and state files: each
defect is a TF error class naming the file and the entry. Also the Saver's handling of its
directory: the checkpoint's own directory is created, a def's ``max_to_keep`` is kept, and
checkpoints a killed save meant to delete are deleted by the next save."""

import copy
import json
import os

import numpy as np
import pytest

import dflab as tf
from dflab.train import saver as saver_module

DataLoss, Invalid, NotFound = (tf.errors.DataLossError, tf.errors.InvalidArgumentError,
                               tf.errors.NotFoundError)


@pytest.fixture
def saved(tmp_path):
    """A checkpoint ``model-1`` (with its .meta) of a graph with a variable, a queue runner
    and a saver, in dflab's earlier format (a JSON index, whose defects the tests below
    make); returns (prefix, meta JSON, index JSON)."""
    v = tf.Variable([1.0, 2.0], name="v")
    q = tf.FIFOQueue(3, tf.float32, name="q")
    tf.train.add_queue_runner(tf.train.QueueRunner(q, [q.enqueue([tf.constant(1.0)])]))
    tf.add_to_collection("things", v.op)
    saver = tf.train.Saver(max_to_keep=2, checkpoint_format="safetensors")
    with tf.Session() as sess:
        sess.run(v.initializer)
        prefix = saver.save(sess, str(tmp_path / "model"), global_step=1)
    with open(prefix + ".meta") as f:
        meta = json.load(f)
    with open(prefix + ".index") as f:
        index = json.load(f)
    return prefix, meta, index


def _collection(key, i, value):
    def mutate(meta):
        meta["collection_def"][key][i] = value
    return mutate


def _field(path, value=None, delete=False):
    def mutate(meta):
        target = meta
        for k in path[:-1]:
            target = target[k]
        if delete:
            del target[path[-1]]
        else:
            target[path[-1]] = value
    return mutate


_QR = ["collection_def", "queue_runners", 0, "queue_runner"]
_VAR = ["collection_def", "variables", 0, "variable"]

# (id, mutation, error class, entry named in the message)
META_CASES = [
    ("collection-not-a-list", _field(["collection_def", "variables"], 5), DataLoss,
     "'variables'"),
    ("collection-item-a-number", _collection("variables", 0, 5), DataLoss, "item #0"),
    ("collection-item-two-keys", _collection("variables", 0, {"op": "v", "tensor": "v:0"}),
     DataLoss, "item #0"),
    ("collection-item-unknown-kind", _collection("things", 0, {"blob": "v"}), DataLoss,
     "'things' item #0"),
    ("collection-op-missing", _collection("things", 0, {"op": "nope"}), NotFound, "'things'"),
    ("collection-op-a-tensor-name", _collection("things", 0, {"op": "v:0"}), DataLoss,
     "'things'"),
    ("collection-tensor-missing", _collection("things", 0, {"tensor": "nope:0"}), NotFound,
     "'things'"),
    ("collection-value-a-list", _collection("things", 0, {"value": [1]}), DataLoss,
     "'things'"),
    ("variable-def-no-name", _field(_VAR + ["variable_name"], delete=True), DataLoss,
     "'variables' item #0"),
    ("variable-def-name-missing", _field(_VAR + ["variable_name"], "zz:0"), NotFound,
     "'variables' item #0"),
    ("variable-def-not-a-variable", _field(_VAR + ["variable_name"], "save/Const:0"), Invalid,
     "'variables' item #0"),
    ("variable-def-trainable-a-string", _field(_VAR + ["trainable"], "yes"), DataLoss,
     "'variables' item #0"),
    ("queue-runner-empty", _field(_QR, {}), DataLoss, "'queue_runners' item #0"),
    ("queue-runner-a-number", _field(_QR, 5), DataLoss, "'queue_runners' item #0"),
    ("queue-runner-enqueue-a-string", _field(_QR + ["enqueue_op_name"], "abc"), DataLoss,
     "'queue_runners' item #0"),
    ("queue-runner-close-op-missing", _field(_QR + ["close_op_name"], "nope"), NotFound,
     "'queue_runners' item #0"),
    ("saver-def-max-to-keep-a-string", _field(["saver_def", "max_to_keep"], "x"), Invalid,
     "max_to_keep"),
    ("saver-def-max-to-keep-a-float", _field(["saver_def", "max_to_keep"], 2.5), Invalid,
     "max_to_keep"),
    ("saver-def-sharded-a-number", _field(["saver_def", "sharded"], 1), Invalid, "sharded"),
    ("saver-def-no-restore-op", _field(["saver_def", "restore_op_name"], delete=True), Invalid,
     "restore_op_name"),
    ("saver-def-restore-op-missing", _field(["saver_def", "restore_op_name"], "nope"), NotFound,
     "saver_def"),
    ("saver-def-a-number", _field(["saver_def"], 5), DataLoss, "saver_def"),
    ("collection-def-a-list", _field(["collection_def"], [1]), DataLoss, "collection_def"),
    ("no-graph-def", _field(["graph_def"], delete=True), DataLoss, "graph_def"),
    ("graph-def-not-a-graph", _field(["graph_def", "format"], "other"), DataLoss, "format"),
]


@pytest.mark.parametrize("mutate,error,entry", [c[1:] for c in META_CASES],
                         ids=[c[0] for c in META_CASES])
def test_each_meta_graph_defect_names_file_and_entry(saved, tmp_path, mutate, error, entry):
    _, meta, _ = saved
    meta = copy.deepcopy(meta)
    mutate(meta)
    path = str(tmp_path / "broken.meta")
    with open(path, "w") as f:
        json.dump(meta, f)
    with tf.Graph().as_default(), pytest.raises(error) as info:
        tf.train.import_meta_graph(path)
    assert path in str(info.value)
    assert entry in str(info.value)


def test_undamaged_meta_graph_imports_with_its_collections(saved):
    prefix, _, _ = saved
    with tf.Graph().as_default() as g:
        saver = tf.train.import_meta_graph(prefix + ".meta")
        assert [v.op.name for v in tf.global_variables()] == ["v"]
        assert len(g.get_collection(tf.GraphKeys.QUEUE_RUNNERS)) == 1
        with tf.Session() as sess:
            saver.restore(sess, prefix)
            np.testing.assert_array_equal(sess.run("v:0"), [1.0, 2.0])


def test_non_utf8_meta_graph_is_data_loss(tmp_path):
    path = tmp_path / "x.meta"
    path.write_bytes(b'{"format": "\xff"}')
    with pytest.raises(DataLoss, match="x.meta"):
        tf.train.import_meta_graph(str(path))


def _entry(name, key, value=None, delete=False):
    def mutate(index):
        if delete:
            del index["tensors"][name][key]
        else:
            index["tensors"][name][key] = value
    return mutate


INDEX_CASES = [
    ("entry-without-sha256", _entry("v", "sha256", delete=True), "'v'"),
    ("entry-sha256-not-hex", _entry("v", "sha256", "zz"), "'v'"),
    ("entry-without-shape", _entry("v", "shape", delete=True), "'v'"),
    ("entry-shape-a-string", _entry("v", "shape", "ab"), "'v'"),
    ("entry-shape-negative", _entry("v", "shape", [-1]), "'v'"),
    ("entry-without-dtype", _entry("v", "dtype", delete=True), "'v'"),
    ("entry-dtype-unknown", _entry("v", "dtype", "float7"), "'v'"),
    ("entry-shard-negative", _entry("v", "shard", -1), "'v'"),
    ("entry-shard-beyond", _entry("v", "shard", 4), "'v'"),
    ("entry-shard-a-bool", _entry("v", "shard", False), "'v'"),
    ("entry-a-number", lambda index: index["tensors"].__setitem__("v", 5), "'v'"),
    ("tensors-a-list", lambda index: index.__setitem__("tensors", [5]), "'tensors'"),
    ("shard-without-file", lambda index: index["shards"][0].pop("file"), "shard #0"),
    ("shard-size-a-string", lambda index: index["shards"][0].__setitem__("size", "9"),
     "shard #0"),
]


@pytest.mark.parametrize("mutate,entry", [c[1:] for c in INDEX_CASES],
                         ids=[c[0] for c in INDEX_CASES])
def test_each_index_defect_is_data_loss_naming_file_and_entry(saved, mutate, entry):
    prefix, _, index = saved
    index = copy.deepcopy(index)
    mutate(index)
    with open(prefix + ".index", "w") as f:
        json.dump(index, f)
    with pytest.raises(DataLoss) as info:
        tf.train.NewCheckpointReader(prefix)
    assert prefix + ".index" in str(info.value)
    assert entry in str(info.value)
    # Restoring through the graph reports the same, naming the restore op.
    with tf.Graph().as_default():
        v = tf.Variable([0.0, 0.0], name="v")
        with tf.Session() as sess, pytest.raises(DataLoss, match="RestoreV2"):
            tf.train.Saver([v]).restore(sess, prefix)


def test_non_utf8_index_is_data_loss(saved):
    prefix, _, _ = saved
    with open(prefix + ".index", "wb") as f:
        f.write(b"\xff\xfe\x00")
    with pytest.raises(DataLoss, match="model-1.index"):
        tf.train.list_variables(prefix)


def test_corrupt_index_never_deletes_outside_its_directory(saved, tmp_path):
    prefix, _, index = saved
    outside = tmp_path.parent / f"{tmp_path.name}-outside.txt"
    outside.write_text("keep me")
    index = copy.deepcopy(index)
    index["shards"][0]["file"] = f"../{outside.name}"
    with open(prefix + ".index", "w") as f:
        json.dump(index, f)
    from dflab.kernels.io_kernels import delete_checkpoint_files
    delete_checkpoint_files(prefix)
    assert outside.read_text() == "keep me"
    assert not os.path.exists(prefix + ".index")
    outside.unlink()


@pytest.mark.parametrize("text", [b'model_checkpoint_path: "\xff\xfe"\n',
                                  b"model_checkpoint_path: 5\n",
                                  b'model_checkpoint_path: "m"\nall_model_checkpoint_paths: [1]\n',
                                  b"model_checkpoint_path: " + b"[" * 50_000 + b"\n"],
                         ids=["not-utf8", "path-a-number", "paths-a-list", "deep-nesting"])
def test_bad_state_file_is_data_loss_naming_it(tmp_path, text):
    (tmp_path / "checkpoint").write_bytes(text)
    with pytest.raises(DataLoss, match="checkpoint"):
        tf.train.get_checkpoint_state(str(tmp_path))
    assert tf.train.latest_checkpoint(str(tmp_path)) is None


# --- the Saver and its directory -----------------------------------------------------------------
def test_save_creates_the_checkpoint_directory_but_not_its_parents(tmp_path):
    v = tf.Variable(3.0, name="v")
    saver = tf.train.Saver()
    with tf.Session() as sess:
        sess.run(v.initializer)
        path = saver.save(sess, str(tmp_path / "new" / "model"))
        assert path == str(tmp_path / "new" / "model")
        assert tf.train.latest_checkpoint(str(tmp_path / "new")) == path
        with pytest.raises(ValueError, match="doesn't exist"):
            saver.save(sess, str(tmp_path / "a" / "b" / "model"))
        assert not os.path.exists(tmp_path / "a")


def test_saver_from_a_def_keeps_its_max_to_keep(tmp_path):
    v = tf.Variable(1.0, name="v")
    built = tf.train.Saver(max_to_keep=1)
    saver = tf.train.Saver(saver_def=built.as_saver_def())
    with tf.Session() as sess:
        sess.run(v.initializer)
        for step in range(3):
            saver.save(sess, str(tmp_path / "m"), global_step=step)
    kept = sorted(p for p in os.listdir(tmp_path) if p.endswith(".index"))
    assert kept == ["m-2.index"]


def test_saver_def_dict_with_a_non_integer_max_to_keep_is_invalid_argument():
    v = tf.Variable(1.0, name="v")
    d = tf.train.Saver().as_saver_def().to_json()
    del v
    d["max_to_keep"] = "5"
    with pytest.raises(Invalid, match="max_to_keep"):
        tf.train.Saver(saver_def=d)


def _kill_after_state_update(monkeypatch):
    """Make the next save stop (as a kill would) right after it rewrote the state file."""
    def killed(prefixes, suffix):
        raise KeyboardInterrupt("killed")
    monkeypatch.setattr(saver_module, "_delete_checkpoints", killed)


def test_next_save_deletes_checkpoints_a_killed_save_left(tmp_path, monkeypatch):
    v = tf.Variable(1.0, name="v")
    saver = tf.train.Saver(max_to_keep=2)
    with tf.Session() as sess:
        sess.run(v.initializer)
        for step in (1, 2):
            saver.save(sess, str(tmp_path / "m"), global_step=step)
        with monkeypatch.context() as m:
            _kill_after_state_update(m)
            with pytest.raises(KeyboardInterrupt):
                saver.save(sess, str(tmp_path / "m"), global_step=3)
        # The state file no longer lists m-1, whose files are still there.
        state = tf.train.get_checkpoint_state(str(tmp_path))
        assert [os.path.basename(p) for p in state.all_model_checkpoint_paths] == ["m-2", "m-3"]
        assert os.path.exists(tmp_path / "m-1.index")
        # A new Saver (a restarted process knows nothing of m-1) cleans it on its first save.
        fresh = tf.train.Saver(max_to_keep=5)
        fresh.save(sess, str(tmp_path / "m"), global_step=4)
    left = sorted(p for p in os.listdir(tmp_path) if p.startswith("m-1"))
    assert left == []
    assert os.path.exists(tmp_path / "m-2.index") and os.path.exists(tmp_path / "m-3.index")
    assert not os.path.exists(tmp_path / "checkpoint.pending_deletes")


def test_pending_deletes_spare_a_checkpoint_the_state_file_lists(tmp_path):
    outside = tmp_path.parent / f"{tmp_path.name}-outside.txt"
    outside.write_text("keep me")
    v = tf.Variable(1.0, name="v")
    saver = tf.train.Saver(max_to_keep=3)
    with tf.Session() as sess:
        sess.run(v.initializer)
        saver.save(sess, str(tmp_path / "m"), global_step=1)
        # A leftover record naming a listed checkpoint, one outside the directory and junk.
        (tmp_path / "checkpoint.pending_deletes").write_text(json.dumps(
            {"format": "dflab.pending_deletes", "meta_suffix": "meta",
             "checkpoints": {"m-1": ["m-1.index"], "../elsewhere": [],
                             "gone": [f"../{outside.name}", str(outside)], "x": 7}}))
        saver.save(sess, str(tmp_path / "m"), global_step=2)
    assert os.path.exists(tmp_path / "m-1.index")
    assert outside.read_text() == "keep me"  # the record's paths out of the directory
    assert not os.path.exists(tmp_path / "checkpoint.pending_deletes")
    outside.unlink()


@pytest.mark.parametrize("bad", [b"\xff not json", json.dumps(
    {"format": "other", "meta_suffix": "meta", "checkpoints": {"m-1": []}}).encode()])
def test_unreadable_pending_deletes_record_deletes_nothing(tmp_path, bad):
    v = tf.Variable(1.0, name="v")
    saver = tf.train.Saver(max_to_keep=3)
    with tf.Session() as sess:
        sess.run(v.initializer)
        saver.save(sess, str(tmp_path / "m"), global_step=1)
        tf.train.update_checkpoint_state(str(tmp_path), str(tmp_path / "other"))
        # Unreadable, or not in our format: it names m-1, which the state file does not list.
        (tmp_path / "checkpoint.pending_deletes").write_bytes(bad)
        saver.save(sess, str(tmp_path / "m"), global_step=2)
    assert os.path.exists(tmp_path / "m-1.index")


def test_next_save_finds_data_files_whose_index_a_killed_save_deleted(tmp_path, monkeypatch):
    v = tf.Variable(1.0, name="v")
    saver = tf.train.Saver(max_to_keep=1)
    with tf.Session() as sess:
        sess.run(v.initializer)
        saver.save(sess, str(tmp_path / "m"), global_step=1)

        def killed_after_the_index(prefixes, suffix):
            os.unlink(prefixes[0] + ".index")
            raise KeyboardInterrupt("killed")

        with monkeypatch.context() as m:
            m.setattr(saver_module, "_delete_checkpoints", killed_after_the_index)
            with pytest.raises(KeyboardInterrupt):
                saver.save(sess, str(tmp_path / "m"), global_step=2)
        assert os.path.exists(tmp_path / "m-1.data-00000-of-00001")
        tf.train.Saver(max_to_keep=1).save(sess, str(tmp_path / "m"), global_step=3)
    assert sorted(p for p in os.listdir(tmp_path) if p.startswith("m-1")) == []
