"""Partitioned variables and the sharded embedding lookup: shards made as TF makes them, a
lookup that moves only the rows asked for, gradients equal to the unsharded graph's, and a
checkpoint holding the one logical variable."""

import os

import numpy as np
import pytest

import dflab as tf

TABLE = np.arange(30, dtype=np.float32).reshape(10, 3) / 7


def test_partitioners_split_as_tf_does():
    f32 = tf.float32
    assert tf.fixed_size_partitioner(3)(shape=[10, 3], dtype=f32) == [3, 1]
    assert tf.fixed_size_partitioner(2, axis=1)(shape=[10, 3], dtype=f32) == [1, 2]
    # 120 bytes in slices of at least 16: ceil(7.5) = 8 pieces, at most 4.
    assert tf.min_max_variable_partitioner(4, min_slice_size=16)(shape=[10, 3], dtype=f32) \
        == [4, 1]
    assert tf.min_max_variable_partitioner(4)(shape=[10, 3], dtype=f32) == [1, 1]
    # 12 bytes per row, at most 40 per shard: 3 rows per shard, ceil(10 / 3) = 4 shards.
    assert tf.variable_axis_size_partitioner(40)(shape=[10, 3], dtype=f32) == [4, 1]
    assert tf.variable_axis_size_partitioner(40, max_shards=2)(shape=[10, 3], dtype=f32) \
        == [2, 1]


def test_get_variable_makes_shards_on_ps_tasks_and_reuses_them():
    with tf.device(tf.train.replica_device_setter(ps_tasks=2)):
        emb = tf.get_variable("emb", [10, 3], partitioner=tf.fixed_size_partitioner(3))
    assert [v.op.name for v in emb] == ["emb/part_0", "emb/part_1", "emb/part_2"]
    assert [v.shape.as_list() for v in emb] == [[4, 3], [3, 3], [3, 3]]
    assert [v.op.device for v in emb] == ["/job:ps/task:0", "/job:ps/task:1", "/job:ps/task:0"]
    assert [v._save_slice_info.spec for v in emb] == ["10 3 0,4:0,3", "10 3 4,3:0,3",
                                                      "10 3 7,3:0,3"]
    with tf.variable_scope("", reuse=True):
        assert tf.get_variable("emb", [10, 3], partitioner=tf.fixed_size_partitioner(3)) is emb
    with pytest.raises(ValueError, match="already exists"):
        tf.get_variable("emb", [10, 3], partitioner=tf.fixed_size_partitioner(3))
    with pytest.raises(ValueError, match="only one may be partitioned"):
        tf.get_variable("two_axes", [4, 4], partitioner=lambda shape, dtype: [2, 2])


@pytest.mark.parametrize("use_resource", [True, False])
@pytest.mark.parametrize("strategy", ["mod", "div"])
def test_sharded_lookup_and_its_gradient_match_numpy(strategy, use_resource):
    if strategy == "mod":
        shards = [TABLE[k::3] for k in range(3)]
    else:
        shards = [TABLE[0:4], TABLE[4:7], TABLE[7:10]]
    params = [tf.Variable(s, use_resource=use_resource) for s in shards]
    ids = tf.constant([[3, 9, 3], [0, 5, 7]])
    out = tf.nn.embedding_lookup(params, ids, partition_strategy=strategy)
    weights = tf.constant(np.linspace(-1, 1, 18, dtype=np.float32).reshape(2, 3, 3))
    grads = tf.gradients(tf.reduce_sum(out * weights), params)
    assert all(isinstance(g, tf.IndexedSlices) for g in grads)
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        got = s.run(out)
        dense = [s.run(tf.convert_to_tensor(g)) for g in grads]
    np.testing.assert_array_equal(got, TABLE[[[3, 9, 3], [0, 5, 7]]])
    # The gradient of row i of the table is the sum of the weights of its lookups.
    want = np.zeros_like(TABLE)
    np.add.at(want, np.array([[3, 9, 3], [0, 5, 7]]).ravel(),
              np.linspace(-1, 1, 18, dtype=np.float32).reshape(6, 3))
    got_table = np.concatenate(dense) if strategy == "div" else \
        np.stack([dense[i % 3][i // 3] for i in range(10)])
    np.testing.assert_allclose(got_table, want, rtol=1e-6)


def test_a_lookup_on_a_cluster_moves_only_the_rows_asked_for():
    spec = tf.train.ClusterSpec({"ps": ["emb-ps0:1", "emb-ps1:1"], "worker": ["emb-w0:1"]})
    servers = [tf.train.Server(spec, job_name=j, task_index=i)
               for j, i in [("ps", 0), ("ps", 1), ("worker", 0)]]
    try:
        with tf.device(tf.train.replica_device_setter(cluster=spec)):
            emb = tf.get_variable("big", [4000, 64], partitioner=tf.fixed_size_partitioner(2),
                                  initializer=tf.ones_initializer())
            rows = tf.nn.embedding_lookup(emb, tf.constant([5, 3000, 17]))
            total = tf.reduce_sum(rows)
        md = tf.RunMetadata()
        with tf.Session(servers[2].target) as s:
            s.run(tf.global_variables_initializer())
            assert s.run(total, options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE),
                         run_metadata=md) == 3 * 64
        moved = sum(t.bytes for t in md.transfers)
        # Three rows of 256 bytes (and the ids going the other way), not the 1 MB table.
        assert 3 * 64 * 4 <= moved < 4096, md.transfers
    finally:
        for server in servers:
            server.stop()


@pytest.mark.parametrize("written_by, read_by", [(True, False), (False, True)])
def test_a_checkpoint_holds_the_logical_variable_whatever_the_partitioning(tmp_path, written_by,
                                                                            read_by):
    # ... and whatever the kind of the shards: each kind restores what the other wrote.
    emb = tf.get_variable("emb", [10, 3], partitioner=tf.fixed_size_partitioner(3),
                          initializer=tf.constant_initializer(0.0), use_resource=written_by)
    assert all(getattr(v, "_is_resource", False) is written_by for v in emb)
    assign = [v.assign(TABLE[v._save_slice_info.var_offset[0]:][:v.shape[0]]) for v in emb]
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        s.run(assign)
        path = tf.train.Saver().save(s, os.path.join(tmp_path, "model"))
    assert tf.train.list_variables(path) == [("emb", [10, 3])]
    np.testing.assert_array_equal(tf.train.load_variable(path, "emb"), TABLE)
    tf.reset_default_graph()
    again = tf.get_variable("emb", [10, 3], partitioner=tf.fixed_size_partitioner(4),
                            use_resource=read_by)
    with tf.Session() as s:
        tf.train.Saver().restore(s, path)
        np.testing.assert_array_equal(s.run(tf.convert_to_tensor(again)), TABLE)
