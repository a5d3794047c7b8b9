"""TF 1.x names classic programs use beyond the core: sub-namespaces (``tf.math`` …),
``tf.logging``/``tf.gfile``, TF2-era switches, ``arg_max``, bidirectional RNNs."""

import logging
import os

import numpy as np
import pytest

import dflab as tf


def test_sub_namespaces_are_modules_holding_the_top_level_functions():
    import dflab.math
    import dflab.random

    assert dflab.math is tf.math and dflab.random is tf.random
    assert tf.math.log1p is tf.log1p and tf.math.reduce_sum is tf.reduce_sum
    assert tf.math.softplus is tf.nn.softplus
    assert tf.random.normal is tf.random_normal and tf.random.uniform is tf.random_uniform
    assert tf.random.set_random_seed is tf.set_random_seed
    assert tf.initializers.glorot_uniform is tf.glorot_uniform_initializer
    assert tf.initializers.global_variables is tf.global_variables_initializer
    assert tf.dtypes.float32 is tf.float32 and tf.dtypes.as_dtype("float") is tf.float32
    assert tf.debugging.assert_equal is tf.assert_equal
    assert tf.io.gfile is tf.gfile and tf.linalg.einsum is tf.einsum
    assert tf.compat.v1.math is tf.math


def test_a_classic_program_header_runs():
    tf.compat.v1.disable_eager_execution()
    tf.disable_eager_execution()
    tf.compat.v1.disable_v2_behavior()
    assert not tf.executing_eagerly()
    tf.enable_eager_execution()  # dflab runs both modes: eager until switched back
    assert tf.executing_eagerly() and tf.constant(2.0).numpy() == 2.0
    tf.disable_eager_execution()
    assert not tf.executing_eagerly()
    x = tf.placeholder("float", [None, 2])  # "float" is float32, as in TF
    w = tf.Variable(tf.initializers.zeros()([2, 1]))
    y = tf.math.reduce_sum(tf.matmul(x, w) + tf.random.normal([1], seed=1) * 0)
    with tf.Session() as sess:
        sess.run(tf.initializers.global_variables())
        assert sess.run(y, {x: np.ones([3, 2], np.float32)}) == 0.0


def test_tf_logging_goes_to_the_dflab_logger(caplog):
    tf.logging.set_verbosity(tf.logging.INFO)
    assert tf.logging.get_verbosity() == logging.INFO
    with caplog.at_level(logging.INFO, logger="dflab"):
        tf.logging.info("step %d loss %.2f", 3, 0.5)
        tf.logging.debug("hidden")
        for _ in range(5):
            tf.logging.log_first_n(tf.logging.WARN, "first %d", 2, 7)
    msgs = [r.getMessage() for r in caplog.records]
    assert "step 3 loss 0.50" in msgs and "hidden" not in msgs
    assert msgs.count("first 7") == 2


def test_tf_gfile_on_the_local_file_system(tmp_path):
    d = str(tmp_path / "a" / "b")
    tf.gfile.MakeDirs(d)
    assert tf.gfile.IsDirectory(d) and tf.gfile.Exists(d)
    path = os.path.join(d, "f.txt")
    with tf.gfile.GFile(path, "w") as f:
        f.write("one\ntwo\n")
    with tf.gfile.Open(path) as f:
        assert f.readlines() == ["one\n", "two\n"]
    assert tf.gfile.ListDirectory(d) == ["f.txt"]
    assert tf.gfile.Glob(os.path.join(d, "*.txt")) == [path]
    tf.gfile.Copy(path, path + ".bak")
    with pytest.raises(tf.errors.AlreadyExistsError):
        tf.gfile.Copy(path, path + ".bak")
    tf.gfile.Rename(path + ".bak", path + ".old")
    assert tf.gfile.Stat(path).length == 8
    tf.gfile.Remove(path)
    with pytest.raises(tf.errors.NotFoundError, match="f.txt"):
        tf.gfile.GFile(path)
    tf.gfile.DeleteRecursively(str(tmp_path / "a"))
    assert not tf.gfile.Exists(d)


def test_compat_string_helpers():
    assert tf.compat.as_bytes("é") == "é".encode() and tf.compat.as_text(b"x") == "x"
    assert tf.compat.as_str_any(3) == "3"
    with pytest.raises(TypeError):
        tf.compat.as_bytes(3)


def test_arg_max_and_arg_min():
    x = np.array([[1.0, 3.0, 2.0], [5.0, 0.0, 4.0]], np.float32)
    a = tf.arg_max(x, 1)
    b = tf.arg_min(x, 0, output_type=tf.int32)
    assert a.op.type == "ArgMax" and a.dtype == tf.int64 and b.dtype == tf.int32
    with tf.Session() as sess:
        got_a, got_b = sess.run([a, b])
    np.testing.assert_array_equal(got_a, x.argmax(1))
    np.testing.assert_array_equal(got_b, x.argmin(0))


def _np_reverse_sequence(x, lengths, seq_axis, batch_axis):
    out = np.array(x, copy=True)
    for b, n in enumerate(lengths):
        idx = [slice(None)] * x.ndim
        idx[batch_axis] = b
        idx[seq_axis] = slice(0, n)
        src = [slice(None)] * x.ndim
        src[batch_axis] = b
        src[seq_axis] = slice(n - 1, None, -1) if n > 0 else slice(0, 0)
        out[tuple(idx)] = x[tuple(src)]
    return out


@pytest.mark.parametrize("seq_axis,batch_axis", [(1, 0), (0, 1), (2, 0)])
def test_reverse_sequence_matches_numpy(seq_axis, batch_axis):
    rng = np.random.RandomState(0)
    shape = [3, 4, 5]
    x = rng.randn(*shape).astype(np.float32)
    lengths = rng.randint(0, shape[seq_axis] + 1, size=shape[batch_axis])
    got = tf.reverse_sequence(x, lengths, seq_axis=seq_axis, batch_axis=batch_axis)
    with tf.Session() as sess:
        np.testing.assert_array_equal(sess.run(got),
                                      _np_reverse_sequence(x, lengths, seq_axis, batch_axis))


def _np_rnn(x, kernel, bias, lengths):
    """BasicRNNCell over batch-major ``x``; outputs are zero and the state frozen past a
    sequence's length, as dynamic_rnn does."""
    batch, steps, _ = x.shape
    h = np.zeros([batch, bias.shape[0]], np.float32)
    outs = np.zeros([batch, steps, bias.shape[0]], np.float32)
    for t in range(steps):
        new = np.tanh(np.concatenate([x[:, t], h], 1) @ kernel + bias)
        live = (t < lengths)[:, None]
        h = np.where(live, new, h)
        outs[:, t] = np.where(live, new, 0)
    return outs, h


def test_bidirectional_dynamic_rnn_matches_a_numpy_reference():
    rng = np.random.RandomState(1)
    x = rng.randn(2, 4, 3).astype(np.float32)
    lengths = np.array([4, 2])
    cell_fw, cell_bw = tf.nn.rnn_cell.BasicRNNCell(5), tf.nn.rnn_cell.BasicRNNCell(5)
    (out_fw, out_bw), (st_fw, st_bw) = tf.nn.bidirectional_dynamic_rnn(
        cell_fw, cell_bw, tf.constant(x), sequence_length=lengths, dtype=tf.float32)
    names = [v.op.name for v in tf.trainable_variables()]
    assert names == ["bidirectional_rnn/fw/basic_rnn_cell/kernel",
                     "bidirectional_rnn/fw/basic_rnn_cell/bias",
                     "bidirectional_rnn/bw/basic_rnn_cell/kernel",
                     "bidirectional_rnn/bw/basic_rnn_cell/bias"]
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        kf, bf, kb, bb = sess.run(tf.trainable_variables())
        of, ob, sf, sb = sess.run([out_fw, out_bw, st_fw, st_bw])
    want_of, want_sf = _np_rnn(x, kf, bf, lengths)
    rev = _np_reverse_sequence(x, lengths, 1, 0)
    tmp, want_sb = _np_rnn(rev, kb, bb, lengths)
    np.testing.assert_allclose(of, want_of, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(sf, want_sf, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ob, _np_reverse_sequence(tmp, lengths, 1, 0), rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(sb, want_sb, rtol=1e-5, atol=1e-6)


def test_static_bidirectional_rnn_concatenates_both_directions():
    rng = np.random.RandomState(2)
    x = rng.randn(2, 3, 4).astype(np.float32)
    outputs, st_fw, st_bw = tf.nn.static_bidirectional_rnn(
        tf.nn.rnn_cell.BasicRNNCell(2), tf.nn.rnn_cell.BasicRNNCell(2),
        tf.unstack(tf.constant(x), axis=1), dtype=tf.float32)
    assert len(outputs) == 3 and outputs[0].shape.as_list() == [2, 4]
    grads = tf.gradients(tf.reduce_sum(outputs[0]), tf.trainable_variables())
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        kf, bf, kb, bb = sess.run(tf.trainable_variables())
        outs = sess.run(outputs)
        assert all(g is not None for g in grads)
        sess.run(grads)
    lengths = np.array([3, 3])
    fw, _ = _np_rnn(x, kf, bf, lengths)
    bw, _ = _np_rnn(x[:, ::-1], kb, bb, lengths)
    for t in range(3):
        np.testing.assert_allclose(outs[t], np.concatenate([fw[:, t], bw[:, 2 - t]], 1),
                                   rtol=1e-5, atol=1e-6)


def test_clip_by_norm_matches_numpy_and_keeps_zero_rows_finite():
    x = np.array([[3.0, 4.0], [0.0, 0.0], [0.3, 0.4]], np.float32)
    whole = tf.clip_by_norm(x, 2.5)
    rows = tf.clip_by_norm(tf.constant(x), 2.5, axes=[1])
    v = tf.constant(np.zeros([3], np.float32))
    grad = tf.gradients(tf.reduce_sum(tf.clip_by_norm(v, 1.0)), [v])[0]
    with tf.Session() as sess:
        got_whole, got_rows, got_grad = sess.run([whole, rows, grad])
    np.testing.assert_allclose(got_whole, x * 2.5 / np.linalg.norm(x), rtol=1e-6)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    np.testing.assert_allclose(got_rows, x * 2.5 / np.maximum(norms, 2.5), rtol=1e-6)
    assert np.all(np.isfinite(got_grad))


def test_small_tf1_helpers():
    x = tf.constant([[1.0, 2.0]])
    assert tf.is_tensor(x) and not tf.is_tensor(np.ones(2))
    np.testing.assert_array_equal(tf.get_static_value(x), [[1.0, 2.0]])
    assert tf.get_static_value(tf.placeholder(tf.float32)) is None
    assert tf.dimension_value(x.shape[1]) == 2 and tf.compat.dimension_value(None) is None
    assert tf.OpError is tf.errors.OpError
    assert tf.queue.FIFOQueue is tf.FIFOQueue and tf.manip.reshape is tf.reshape
    with tf.Session() as sess:
        np.testing.assert_array_equal(sess.run(tf.scalar_mul(3.0, x)), [[3.0, 6.0]])


def test_convert_to_tensor_or_indexed_slices_as_tf():
    # TF 2.21: the IndexedSlices itself (dtype permitting), else a Tensor.
    with tf.Graph().as_default():
        s = tf.IndexedSlices(tf.constant([[1.0, 2.0]]), tf.constant([0]), tf.constant([3, 2]))
        assert tf.convert_to_tensor_or_indexed_slices(s) is s
        assert tf.convert_to_tensor_or_indexed_slices(s, dtype=tf.float32) is s
        with pytest.raises(ValueError, match="Incompatible tensor conversion"):
            tf.convert_to_tensor_or_indexed_slices(s, dtype=tf.int32)
        t = tf.convert_to_tensor_or_indexed_slices([1, 2])
        assert isinstance(t, tf.Tensor) and t.dtype == tf.int32


def test_register_tensor_conversion_function_as_tf():
    # TF 2.21's behaviour and messages for the same program.
    class Pair:
        def __init__(self, v):
            self.v = v

    class Five:
        pass

    class Pass:
        pass

    tf.register_tensor_conversion_function(
        Pair, lambda v, dtype=None, name=None, as_ref=False: tf.constant(v.v, dtype=dtype,
                                                                         name=name))
    tf.register_tensor_conversion_function(Five, lambda v, dtype=None, name=None, as_ref=False: 5)
    tf.register_tensor_conversion_function(
        Pass, lambda v, dtype=None, name=None, as_ref=False: NotImplemented)
    with tf.Graph().as_default():
        t = tf.add(Pair(1.0), 2.0)
        assert t.dtype == tf.float32
        with tf.Session() as sess:
            assert sess.run(t) == 3.0
        with pytest.raises(RuntimeError, match="returned non-Tensor: 5"):
            tf.convert_to_tensor(Five())
        # A function returning NotImplemented passes: the next one registered for the type
        # converts it.
        tf.register_tensor_conversion_function(
            Pass, lambda v, dtype=None, name=None, as_ref=False: tf.constant(7), priority=200)
        with tf.Session() as sess:
            assert sess.run(tf.convert_to_tensor(Pass())) == 7
    with pytest.raises(TypeError, match="Python numeric types"):
        tf.register_tensor_conversion_function(float, lambda *a, **k: None)
    with pytest.raises(TypeError, match="must be a type or a tuple of types"):
        tf.register_tensor_conversion_function(3, lambda *a, **k: None)
