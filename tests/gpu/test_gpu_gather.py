"""Gathers and row scatters on the GPU (``dflab.kernels.cuda.gather``), on the strict stand-in:
one launch each, the CPU's numbers for indices in range, TF's GPU behaviour for the others
(zeros from a gather, a scatter skipping the row), and no host read, so a step with embedding
lookups and sparse updates can be captured."""

import numpy as np
import pytest

import dflab as tf

RNG = np.random.default_rng(9)


def _config(replay=False):
    return tf.ConfigProto(dflab={"gpu_step_replay": replay})


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather_is_one_launch_and_gives_zeros_out_of_range(strict_gpu, counts, axis,
                                                           index_dtype):
    params = RNG.normal(size=(5, 4, 3)).astype(np.float32)
    n = params.shape[axis]
    idx = np.array([[0, n - 1], [n, -1]], index_dtype)  # the second row is out of range
    with tf.device("/gpu:0"):
        y = tf.gather(tf.constant(params), tf.constant(idx), axis=axis)
    with tf.Session(config=_config()) as s:
        s.run(y)
        counts.reset()
        got = s.run(y)
    ok = (idx >= 0) & (idx < n)
    a = axis % 3
    want = np.moveaxis(np.take(params, np.where(ok, idx, 0), axis=a), (a, a + 1), (0, 1))
    want[~ok] = 0  # TF's GPU gather: zeros for an index out of range
    np.testing.assert_array_equal(got, np.moveaxis(want, (0, 1), (a, a + 1)))
    assert counts.by_name[f"dflab_gather_{np.dtype(index_dtype).name}_float32"] == 1


@pytest.mark.parametrize("use_resource", [False, True])
def test_scatter_sub_accumulates_repeats_and_skips_out_of_range(strict_gpu, counts,
                                                                use_resource):
    table = RNG.normal(size=(6, 3)).astype(np.float32)
    idx = np.array([1, 4, 1, 9, 0], np.int64)
    upd = RNG.normal(size=(5, 3)).astype(np.float32)
    with tf.device("/gpu:0"):
        v = tf.Variable(table, use_resource=use_resource)
        op = tf.scatter_sub(v, tf.constant(idx), tf.constant(upd))
    with tf.Session(config=_config()) as s:
        s.run(v.initializer)
        counts.reset()
        s.run(op)
        assert counts.by_name["dflab_scatter_add_int64_float32"] == 1
        got = s.run(v)
    want = table.copy()
    for i, u in zip(idx, upd):
        if i < 6:
            want[i] -= u
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_a_word2vec_step_with_sparse_updates_is_captured(strict_gpu):
    emb0 = RNG.normal(size=(50, 8)).astype(np.float32)

    def train(replay):
        g = tf.Graph()
        with g.as_default():
            ids = tf.placeholder(tf.int64, [6])
            with tf.device("/gpu:0"):
                emb = tf.Variable(emb0)
                u = tf.nn.embedding_lookup(emb, ids)
                loss = tf.reduce_sum(tf.square(u - 1.0))
                step = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
            init = tf.global_variables_initializer()
        with tf.Session(graph=g, config=_config(replay)) as s:
            s.run(init)
            feeds = [np.array([1, 2, 2, 7, 1, 3]), np.array([4, 4, 4, 5, 6, 1])] * 3
            losses = [s.run([step, loss], {ids: f})[1] for f in feeds]
            part = next(p for p in s._master._plans.values() if step in p.placement).parts[0]
            return losses, s.run(emb), part

    losses, emb, part = train(True)
    want_losses, want_emb, _ = train(False)
    assert part.replay_reason is None, part.replay_reason
    assert part.replay.replays == 5
    np.testing.assert_allclose(losses, want_losses, rtol=1e-6)
    np.testing.assert_allclose(emb, want_emb, rtol=1e-6)


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_unsorted_segment_sum_scatters_into_zeros_and_drops_ids_out_of_range(strict_gpu, counts,
                                                                            index_dtype):
    import strict_cupy

    data = RNG.normal(size=(6, 2, 3)).astype(np.float32)
    ids = np.array([2, 0, 2, 7, -1, 3], index_dtype)  # 7 and -1 are out of [0, 5)
    with tf.device("/gpu:0"):
        d = tf.constant(data)
        y = tf.unsorted_segment_sum(d, tf.constant(ids), 5)
    with tf.Session(config=_config()) as s:
        s.run(y)
        counts.reset()
        strict_cupy.transfers.clear()
        got = s.run(y)
    want = np.zeros((5, 2, 3), np.float32)
    for i, row in zip(ids, data):
        if 0 <= i < 5:  # TF's GPU kernel drops the others (its CPU kernel raises)
            want[i] += row
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert counts.by_name[f"dflab_scatter_add_{np.dtype(index_dtype).name}_float32"] == 1
    assert strict_cupy.transfers["device_to_host"] == 1  # the fetch: no id read on the host


SPARSE_OPTIMIZERS = {
    "adagrad": lambda: tf.train.AdagradOptimizer(0.5),
    "momentum": lambda: tf.train.MomentumOptimizer(0.1, 0.9, use_nesterov=True),
    "rms_prop": lambda: tf.train.RMSPropOptimizer(0.1, momentum=0.5),
    "adam": lambda: tf.train.AdamOptimizer(0.1),
}


def _sparse_training(device, name, index_dtype, replay=False, feeds=None):
    emb0 = np.random.default_rng(4).normal(size=(20, 3)).astype(np.float32)
    g = tf.Graph()
    with g.as_default(), tf.device(device):
        ids = tf.placeholder(index_dtype, [None])
        emb = tf.Variable(emb0, use_resource=True)
        loss = tf.reduce_sum(tf.square(tf.nn.embedding_lookup(emb, ids) - 1.0))
        step = SPARSE_OPTIMIZERS[name]().minimize(loss)
        init = tf.global_variables_initializer()
    s = tf.Session(graph=g, config=_config(replay))
    s.run(init)
    for f in feeds or [[1, 2, 2, 7, 1, 3], [4, 4, 4, 5, 6, 1]] * 2:
        s.run(step, {ids: np.array(f, index_dtype)})
    return s, step, ids, emb


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("name", ["adagrad", "momentum", "rms_prop"])
def test_a_sparse_update_sums_repeated_rows_in_five_launches_reading_nothing_back(
        strict_gpu, counts, name, index_dtype):
    launched, reads = _equal_to_the_cpu_then_counted(name, index_dtype, counts, rtol=1e-6)
    it = np.dtype(index_dtype).name
    assert launched[f"dflab_sparse_owner_{it}"] == 1
    assert launched[f"dflab_sparse_sum_{it}_float32"] == 1
    assert launched[f"dflab_sparse_apply_{name}_{it}_float32"] == 1
    assert launched["full"] == launched["zeros"] == 1  # the owner table, the summed rows
    assert reads == 0  # no index read on the host


def _equal_to_the_cpu_then_counted(name, index_dtype, counts, rtol):
    """Train on the CPU and the stand-in GPU, compare, then run one more GPU step with repeated
    rows; its launches by name and its device-to-host reads."""
    import strict_cupy

    cpu, *_, cpu_emb = _sparse_training("/cpu:0", name, index_dtype)
    gpu, step, ids, gpu_emb = _sparse_training("/gpu:0", name, index_dtype)
    with cpu, gpu:
        np.testing.assert_allclose(gpu.run(gpu_emb), cpu.run(cpu_emb), rtol=rtol, atol=1e-7)
        counts.reset()
        strict_cupy.transfers.clear()
        gpu.run(step, {ids: np.array([3, 3, 9, 0, 3, 9], index_dtype)})
    return counts.by_name, strict_cupy.transfers["device_to_host"]


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_a_sparse_adam_update_decays_every_row_in_three_launches(strict_gpu, counts,
                                                                index_dtype):
    # TF 1.x's sparse Adam moves rows that had no gradient too (their moments decay).
    launched, reads = _equal_to_the_cpu_then_counted("adam", index_dtype, counts, rtol=2e-6)
    it = np.dtype(index_dtype).name
    assert launched[f"dflab_scatter_add_{it}_float32"] == 1
    assert launched["dflab_apply_adam_float32"] == 1
    assert reads == 0


@pytest.mark.parametrize("name", sorted(SPARSE_OPTIMIZERS))
def test_a_step_with_a_sparse_update_is_captured_and_replays_the_same_numbers(strict_gpu, name):
    replayed, step, _, emb = _sparse_training("/gpu:0", name, np.int64, replay=True)
    executed, _, _, emb2 = _sparse_training("/gpu:0", name, np.int64)
    with replayed, executed:
        part = next(p for p in replayed._master._plans.values() if step in p.placement).parts[0]
        assert part.replay_reason is None, part.replay_reason
        assert part.replay.replays == 3
        np.testing.assert_array_equal(replayed.run(emb), executed.run(emb2))


def test_a_sparse_update_skips_an_index_out_of_range_as_tfs_gpu_kernel(strict_gpu):
    # The CPU's kernel raises InvalidArgumentError (tests/train/test_optimizers.py).
    feeds = [[1, 25, 2, -1, 1, 3]]
    gpu, _, _, emb = _sparse_training("/gpu:0", "adagrad", np.int64, feeds=feeds)
    cpu, *_, cpu_emb = _sparse_training("/cpu:0", "adagrad", np.int64, feeds=[[1, 1, 2, 3]])
    with gpu, cpu:
        got, want = gpu.run(emb), cpu.run(cpu_emb)
    # Rows 1 (twice), 2 and 3 were updated as on the CPU, where the same rows are fed without
    # the two out of range; every other row is unchanged.
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_no_sparse_update_program_hides_a_scalar_of_its_rule():
    """The stand-in runs each program's NumPy reference, not its CUDA C: a loop variable that
    hides one of the rule's scalars (RMSProp's rho is ``r``) compiles and is wrong only on a
    GPU. Every name the sparse loop declares differs from every name its rule declares."""
    import re

    from dflab.kernels.cuda import optimizers as O

    declared = re.compile(r"(?:\bT|\bint|long long)\s+(\w+)\s*=|,\s*(\w+)\s*=")

    def names(text):
        return {a or b for a, b in declared.findall(text)}

    for (rule, _, _), prog in O.SPARSE.items():
        prelude, element = O._RULES[rule]
        scalars = names(prelude)
        # What the loop itself declares (``i``, the element both write, aside).
        loop = names(prog.body[len(prelude):]) - names(element) - {"i"}
        assert scalars and loop, prog.name
        assert not scalars & loop, f"{prog.name} hides {scalars & loop}"
