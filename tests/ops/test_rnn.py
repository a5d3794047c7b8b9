"""RNN cells vs NumPy implementations of the same equations with the same (fetched) weights;
dynamic_rnn vs static_rnn and vs a NumPy roll-out, with and without sequence_length, batch- and
time-major; TF's variable names; argument errors. Gradient tests are in test_rnn_gradients.py.
"""

import numpy as np
import pytest

import dflab as tf

RNG = np.random.default_rng(2)
rnn_cell = tf.nn.rnn_cell


def sig(x):
    return 1 / (1 + np.exp(-x))


# --- NumPy references (TF's equations and gate orders) ----------------------------------------
def np_basic_rnn(w, x, h):
    h = np.tanh(np.concatenate([x, h], 1) @ w["kernel"] + w["bias"])
    return h, h


def np_basic_lstm(w, x, state, forget_bias=1.0):
    c, h = state
    z = np.concatenate([x, h], 1) @ w["kernel"] + w["bias"]
    i, j, f, o = np.split(z, 4, axis=1)
    c = c * sig(f + forget_bias) + sig(i) * np.tanh(j)
    h = np.tanh(c) * sig(o)
    return h, (c, h)


def np_lstm(w, x, state, peep=False, cell_clip=None, proj=False, proj_clip=None,
            forget_bias=1.0):
    c, m = state
    z = np.concatenate([x, m], 1) @ w["kernel"] + w["bias"]
    i, j, f, o = np.split(z, 4, axis=1)
    if peep:
        c = sig(f + forget_bias + w["w_f_diag"] * c) * c + sig(i + w["w_i_diag"] * c) * \
            np.tanh(j)
    else:
        c = sig(f + forget_bias) * c + sig(i) * np.tanh(j)
    if cell_clip is not None:
        c = np.clip(c, -cell_clip, cell_clip)
    m = sig(o + w["w_o_diag"] * c) * np.tanh(c) if peep else sig(o) * np.tanh(c)
    if proj:
        m = m @ w["projection/kernel"]
        if proj_clip is not None:
            m = np.clip(m, -proj_clip, proj_clip)
    return m, (c, m)


def np_gru(w, x, h):
    g = sig(np.concatenate([x, h], 1) @ w["gates/kernel"] + w["gates/bias"])
    r, u = np.split(g, 2, axis=1)
    cand = np.tanh(np.concatenate([x, r * h], 1) @ w["candidate/kernel"] + w["candidate/bias"])
    h = u * h + (1 - u) * cand
    return h, h


def _weights(sess, prefix):
    """name (relative to ``prefix``) -> value of every variable under ``prefix``."""
    out = {}
    for v in tf.global_variables():
        name = v.name[:-2]
        if name.startswith(prefix + "/"):
            out[name[len(prefix) + 1:]] = sess.run(v)
    return out


# name, cell factory, numpy step (weights, x, state) -> (out, state), tuple-state?, num_units,
# expected variable names
CELLS = [
    ("basic_rnn", lambda: rnn_cell.BasicRNNCell(5), np_basic_rnn, False, "basic_rnn_cell",
     {"kernel": [4 + 5, 5], "bias": [5]}),
    ("basic_lstm", lambda: rnn_cell.BasicLSTMCell(5, forget_bias=0.5),
     lambda w, x, s: np_basic_lstm(w, x, s, 0.5), True, "basic_lstm_cell",
     {"kernel": [9, 20], "bias": [20]}),
    ("lstm", lambda: rnn_cell.LSTMCell(5), np_lstm, True, "lstm_cell",
     {"kernel": [9, 20], "bias": [20]}),
    ("lstm_peep_clip_proj",
     lambda: rnn_cell.LSTMCell(5, use_peepholes=True, cell_clip=0.3, num_proj=3,
                               proj_clip=0.2, initializer=tf.random_uniform_initializer(-1, 1)),
     lambda w, x, s: np_lstm(w, x, s, True, 0.3, True, 0.2), True, "lstm_cell",
     {"kernel": [7, 20], "bias": [20], "w_f_diag": [5], "w_i_diag": [5], "w_o_diag": [5],
      "projection/kernel": [5, 3]}),
    ("gru", lambda: rnn_cell.GRUCell(5), np_gru, False, "gru_cell",
     {"gates/kernel": [9, 10], "gates/bias": [10], "candidate/kernel": [9, 5],
      "candidate/bias": [5]}),
]
IDS = [c[0] for c in CELLS]


def _map(fn, s):
    if isinstance(s, tuple):
        return type(s)(*[_map(fn, e) for e in s]) if hasattr(s, "_fields") else \
            tuple(_map(fn, e) for e in s)
    return fn(s)


def _feed_state(ph, val, feed):
    if isinstance(ph, tuple):
        for p, v in zip(ph, val):
            _feed_state(p, v, feed)
    else:
        feed[ph] = val


def _placeholders(size, batch, dtype=tf.float64):
    if isinstance(size, tuple):
        parts = [_placeholders(s, batch, dtype) for s in size]
        return type(size)(*parts) if hasattr(size, "_fields") else tuple(parts)
    return tf.placeholder(dtype, [batch, size])


@pytest.mark.parametrize("name,make,ref,is_tuple,scope,var_shapes", CELLS, ids=IDS)
def test_cell_one_step_vs_numpy(name, make, ref, is_tuple, scope, var_shapes):
    cell = make()
    x = tf.placeholder(tf.float64, [3, 4])
    state = _placeholders(cell.state_size, 3)
    out, new_state = cell(x, state)
    assert out.shape.as_list() == [3, cell.output_size]
    if is_tuple:
        assert isinstance(new_state, rnn_cell.LSTMStateTuple)
    names = {v.name[:-2]: v.shape.as_list() for v in tf.global_variables()}
    assert names == {f"{scope}/{k}": s for k, s in var_shapes.items()}
    xv = RNG.standard_normal((3, 4))
    sv = _map(lambda n: RNG.standard_normal((3, n)), cell.state_size)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        w = _weights(sess, scope)
        w = {k: v + RNG.standard_normal(v.shape) * 0.5 for k, v in w.items()}  # biases too
        for v in tf.global_variables():
            sess.run(v.assign(w[v.name[len(scope) + 1:-2]]))
        feed = {x: xv}
        _feed_state(state, sv, feed)
        got_out, got_state = sess.run([out, new_state], feed)
    want_out, want_state = ref(w, xv, sv)
    np.testing.assert_allclose(got_out, want_out, rtol=1e-10, atol=1e-12)
    for g, wv in zip(_flat(got_state), _flat(want_state)):
        np.testing.assert_allclose(g, wv, rtol=1e-10, atol=1e-12)


def test_variables_created_once_and_reused():
    cell = rnn_cell.BasicLSTMCell(4)
    x = tf.zeros([2, 3])
    s = cell.zero_state(2, tf.float32)
    cell(x, s)
    cell(x, s)
    assert len(tf.global_variables()) == 2
    assert len(cell.trainable_weights) == 2
    # A second cell in the same scope gets its own (uniquified) scope, as in TF.
    rnn_cell.BasicLSTMCell(4)(x, s)
    assert sorted(v.name for v in tf.global_variables())[-1].startswith("basic_lstm_cell_1/")


def test_non_tuple_lstm_state():
    cell = rnn_cell.BasicLSTMCell(3, state_is_tuple=False)
    assert cell.state_size == 6
    out, st = cell(tf.ones([2, 4]), cell.zero_state(2, tf.float32))
    assert st.shape.as_list() == [2, 6]
    cell2 = rnn_cell.LSTMCell(3, num_proj=2, state_is_tuple=False)
    assert cell2.state_size == 5
    out, st = cell2(tf.ones([2, 4]), cell2.zero_state(2, tf.float32))
    assert out.shape.as_list() == [2, 2] and st.shape.as_list() == [2, 5]


def test_multi_rnn_cell_names_and_values():
    cells = [rnn_cell.BasicLSTMCell(4), rnn_cell.GRUCell(3)]
    multi = rnn_cell.MultiRNNCell(cells)
    assert multi.state_size == (rnn_cell.LSTMStateTuple(4, 4), 3)
    assert multi.output_size == 3
    x = tf.placeholder(tf.float64, [2, 5])
    out, st = tf.nn.dynamic_rnn(multi, tf.expand_dims(x, 1), dtype=tf.float64)
    names = sorted(v.name[:-2] for v in tf.global_variables())
    assert names == ["rnn/multi_rnn_cell/cell_0/basic_lstm_cell/bias",
                     "rnn/multi_rnn_cell/cell_0/basic_lstm_cell/kernel",
                     "rnn/multi_rnn_cell/cell_1/gru_cell/candidate/bias",
                     "rnn/multi_rnn_cell/cell_1/gru_cell/candidate/kernel",
                     "rnn/multi_rnn_cell/cell_1/gru_cell/gates/bias",
                     "rnn/multi_rnn_cell/cell_1/gru_cell/gates/kernel"]
    xv = RNG.standard_normal((2, 5))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        w0 = _weights(sess, "rnn/multi_rnn_cell/cell_0/basic_lstm_cell")
        w1 = _weights(sess, "rnn/multi_rnn_cell/cell_1/gru_cell")
        got_out, got_st = sess.run([out, st], {x: xv})
    h0, s0 = np_basic_lstm(w0, xv, (np.zeros((2, 4)), np.zeros((2, 4))))
    h1, s1 = np_gru(w1, h0, np.zeros((2, 3)))
    np.testing.assert_allclose(got_out[:, 0], h1, rtol=1e-10)
    np.testing.assert_allclose(got_st[0].c, s0[0], rtol=1e-10)
    np.testing.assert_allclose(got_st[1], s1, rtol=1e-10)


# --- dynamic_rnn vs static_rnn vs NumPy ---------------------------------------------------------
def _np_rollout(step, w, xs, state, lengths):
    """xs: [batch, time, depth]. Copy-through semantics of TF's sequence_length."""
    outs = []
    for t in range(xs.shape[1]):
        out, new = step(w, xs[:, t], state)
        if lengths is not None:
            alive = (t < lengths)[:, None]
            out = np.where(alive, out, 0.0)
            new = _zip_map(lambda a, b: np.where(alive, a, b), new, state)
        outs.append(out)
        state = new
    return np.stack(outs, 1), state


def _zip_map(fn, a, b):
    if isinstance(a, tuple):
        return tuple(_zip_map(fn, x, y) for x, y in zip(a, b))
    return fn(a, b)


def _flat(s):
    if isinstance(s, tuple):
        return [e for x in s for e in _flat(x)]
    return [s]


@pytest.mark.parametrize("name,make,ref,is_tuple,scope,var_shapes", CELLS, ids=IDS)
@pytest.mark.parametrize("lengths", [None, [6, 2, 0, 4]], ids=["full", "seqlen"])
@pytest.mark.parametrize("time_major", [False, True], ids=["batch_major", "time_major"])
def test_dynamic_vs_static_vs_numpy(name, make, ref, is_tuple, scope, var_shapes, lengths,
                                    time_major):
    cell = make()
    batch, steps = 4, 6
    x = tf.placeholder(tf.float64, [steps, batch, 4] if time_major else [batch, steps, 4])
    sl = None if lengths is None else tf.placeholder(tf.int32, [batch])
    out, st = tf.nn.dynamic_rnn(cell, x, sequence_length=sl, dtype=tf.float64,
                                time_major=time_major)
    assert out.shape.as_list() == ([steps, batch, cell.output_size] if time_major
                                   else [batch, steps, cell.output_size])
    inputs = tf.unstack(x, axis=0 if time_major else 1)
    souts, sst = tf.nn.static_rnn(cell, inputs, sequence_length=sl, dtype=tf.float64)
    assert len(tf.global_variables()) == len(var_shapes)  # one set of weights, shared
    xv = RNG.standard_normal(x.shape.as_list())
    feed = {x: xv}
    if sl is not None:
        feed[sl] = lengths
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        w = _weights(sess, f"rnn/{scope}")
        d_out, d_st, s_out, s_st = sess.run([out, st, souts, sst], feed)
    s_out = np.stack(s_out, 0 if time_major else 1)
    np.testing.assert_allclose(d_out, s_out, rtol=1e-12, atol=1e-14)
    for a, b in zip(_flat(d_st), _flat(s_st)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    xb = np.swapaxes(xv, 0, 1) if time_major else xv
    zero = _map(lambda n: np.zeros((batch, n)), cell.state_size)
    want_out, want_st = _np_rollout(ref, w, xb, zero,
                                    None if lengths is None else np.array(lengths))
    got_out = np.swapaxes(d_out, 0, 1) if time_major else d_out
    np.testing.assert_allclose(got_out, want_out, rtol=1e-10, atol=1e-12)
    for a, b in zip(_flat(d_st), _flat(want_st)):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    if lengths is not None:
        for b, n in enumerate(lengths):
            assert not np.any(got_out[b, n:]), "outputs past the sequence length must be 0"


def test_dynamic_rnn_final_state_is_state_at_last_step():
    cell = rnn_cell.BasicRNNCell(3)
    x = tf.placeholder(tf.float32, [3, 5, 2])
    out, st = tf.nn.dynamic_rnn(cell, x, sequence_length=[5, 1, 3], dtype=tf.float32)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        o, s = sess.run([out, st], {x: RNG.standard_normal((3, 5, 2))})
    # For a BasicRNNCell the output is the state: the final state is the last live output.
    np.testing.assert_allclose(s, o[[0, 1, 2], [4, 0, 2]], rtol=1e-6)


class _CountingCell(rnn_cell.BasicRNNCell):
    """A BasicRNNCell that counts its steps in a variable."""

    def build(self, inputs_shape):
        super().build(inputs_shape)
        self.calls = self.add_variable("calls", [], dtype=tf.int32,
                                       initializer=tf.zeros_initializer(), trainable=False)

    def call(self, inputs, state):
        with tf.control_dependencies([tf.assign_add(self.calls, 1)]):
            return super().call(tf.identity(inputs), state)


@pytest.mark.parametrize("lengths,steps", [([2, 4], 4), ([0, 0], 1), (None, 6)])
def test_loop_runs_max_sequence_length_steps(lengths, steps):
    cell = _CountingCell(3)
    x = tf.placeholder(tf.float32, [2, 6, 2])
    out, _ = tf.nn.dynamic_rnn(cell, x, sequence_length=lengths, dtype=tf.float32)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(out, {x: np.ones((2, 6, 2), np.float32)})
        assert sess.run(cell.calls) == steps


def test_dynamic_shapes_and_initial_state():
    cell = rnn_cell.GRUCell(3)
    x = tf.placeholder(tf.float32, [None, None, 2])
    h0 = tf.placeholder(tf.float32, [None, 3])
    sl = tf.placeholder(tf.int32, [None])
    out, st = tf.nn.dynamic_rnn(cell, x, sequence_length=sl, initial_state=h0)
    assert out.shape.as_list() == [None, None, 3]
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for b, t in ((1, 1), (3, 7)):
            lengths = RNG.integers(0, t + 1, b)
            h0v = RNG.standard_normal((b, 3)).astype(np.float32)
            o, s = sess.run([out, st], {x: RNG.standard_normal((b, t, 2)), h0: h0v,
                                        sl: lengths})
            assert o.shape == (b, t, 3)
            for k, n in enumerate(lengths):
                want = h0v[k] if n == 0 else o[k, n - 1]
                np.testing.assert_allclose(s[k], want, rtol=1e-6)
        with pytest.raises(tf.errors.InvalidArgumentError, match="sequence_length"):
            sess.run(out, {x: np.zeros((2, 3, 2)), h0: np.zeros((2, 3)), sl: [1, 2, 3]})


def test_nested_inputs():
    class TwoInputs(rnn_cell.BasicRNNCell):
        def call(self, inputs, state):
            a, b = inputs
            return super().call(tf.concat([a, b], 1), state)

        def build(self, shapes):
            super().build(tf.TensorShape([None, shapes[0][-1] + shapes[1][-1]]))

    cell = TwoInputs(3)
    a = tf.placeholder(tf.float32, [2, 4, 1])
    b = tf.placeholder(tf.float32, [2, 4, 2])
    out, _ = tf.nn.dynamic_rnn(cell, (a, b), dtype=tf.float32)
    outs, _ = tf.nn.static_rnn(cell, [(a[:, t], b[:, t]) for t in range(4)],
                               dtype=tf.float32)
    feed = {a: RNG.standard_normal((2, 4, 1)), b: RNG.standard_normal((2, 4, 2))}
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        o, so = sess.run([out, outs], feed)
    np.testing.assert_allclose(o, np.stack(so, 1), rtol=1e-6)


def test_errors():
    cell = rnn_cell.BasicRNNCell(3)
    x = tf.zeros([2, 4, 3])
    with pytest.raises(ValueError, match="dtype"):
        tf.nn.dynamic_rnn(cell, x)
    with pytest.raises(ValueError, match="sequence_length"):
        tf.nn.dynamic_rnn(cell, x, sequence_length=[[1, 2]], dtype=tf.float32)
    with pytest.raises(ValueError, match="depth"):
        tf.nn.dynamic_rnn(cell, tf.placeholder(tf.float32, [2, 4, None]), dtype=tf.float32)
    with pytest.raises(TypeError):
        tf.nn.dynamic_rnn("not a cell", x, dtype=tf.float32)
    with pytest.raises(TypeError):
        tf.nn.static_rnn(cell, x, dtype=tf.float32)
    with pytest.raises(ValueError):
        rnn_cell.MultiRNNCell([])
