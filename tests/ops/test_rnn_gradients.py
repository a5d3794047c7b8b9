"""Gradients through dynamic_rnn's while loop: equal to the unrolled static_rnn's gradients,
and to numerical differentiation; an LSTM language model on variable-length batches trained
with Adam whose loss decreases."""

import numpy as np
import pytest

import dflab as tf

RNG = np.random.default_rng(3)
rnn_cell = tf.nn.rnn_cell

CELLS = [
    ("basic_rnn", lambda: rnn_cell.BasicRNNCell(4)),
    ("basic_lstm", lambda: rnn_cell.BasicLSTMCell(4)),
    ("lstm_peep_proj", lambda: rnn_cell.LSTMCell(4, use_peepholes=True, num_proj=3,
                                                 cell_clip=0.8)),
    ("gru", lambda: rnn_cell.GRUCell(4)),
    ("multi", lambda: rnn_cell.MultiRNNCell([rnn_cell.BasicLSTMCell(3),
                                             rnn_cell.GRUCell(4)])),
]


def _loss(outputs, state):
    flat = _flatten(state)
    return tf.reduce_sum(tf.sin(outputs)) + tf.add_n([tf.reduce_sum(s * s) for s in flat])


def _flatten(s):
    if isinstance(s, tuple):
        return [e for x in s for e in _flatten(x)]
    return [s]


@pytest.mark.parametrize("name,make", CELLS, ids=[c[0] for c in CELLS])
@pytest.mark.parametrize("lengths", [None, [5, 2, 0]], ids=["full", "seqlen"])
@pytest.mark.parametrize("time_major", [False, True], ids=["batch_major", "time_major"])
def test_dynamic_grads_equal_static_grads(name, make, lengths, time_major):
    cell = make()
    batch, steps = 3, 5
    x = tf.placeholder(tf.float64, [steps, batch, 2] if time_major else [batch, steps, 2])
    sl = None if lengths is None else tf.placeholder(tf.int32, [batch])
    out, st = tf.nn.dynamic_rnn(cell, x, sequence_length=sl, dtype=tf.float64,
                                time_major=time_major)
    souts, sst = tf.nn.static_rnn(cell, tf.unstack(x, axis=0 if time_major else 1),
                                  sequence_length=sl, dtype=tf.float64)
    sout = tf.stack(souts, 0 if time_major else 1)
    params = tf.trainable_variables() + [x]
    gd = tf.gradients(_loss(out, st), params)
    gs = tf.gradients(_loss(sout, sst), params)
    assert all(g is not None for g in gd)
    feed = {x: RNG.standard_normal(x.shape.as_list())}
    if sl is not None:
        feed[sl] = lengths
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        a, b = sess.run([gd, gs], feed)
    for p, u, v in zip(params, a, b):
        np.testing.assert_allclose(u, v, rtol=1e-10, atol=1e-12, err_msg=p.name)


def test_dynamic_rnn_grads_vs_numerical():
    cell = rnn_cell.LSTMCell(3)
    x = tf.placeholder(tf.float64, [2, 4, 2])
    c0 = tf.placeholder(tf.float64, [2, 3])
    h0 = tf.placeholder(tf.float64, [2, 3])
    out, st = tf.nn.dynamic_rnn(cell, x, sequence_length=[4, 2],
                                initial_state=rnn_cell.LSTMStateTuple(c0, h0))
    loss = _loss(out, st)
    grads = tf.gradients(loss, [x, c0, h0, cell.trainable_weights[0]])
    vals = [RNG.standard_normal((2, 4, 2)), RNG.standard_normal((2, 3)),
            RNG.standard_normal((2, 3))]
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        feed = dict(zip([x, c0, h0], vals))
        sym = sess.run(grads, feed)
        kernel = cell.trainable_weights[0]
        k0 = sess.run(kernel)

        def objective(vs, k):
            kernel.load(k, sess)
            return sess.run(loss, dict(zip([x, c0, h0], vs)))

        eps = 1e-6
        for pos in range(3):
            num = np.zeros_like(vals[pos])
            for idx in np.ndindex(vals[pos].shape):
                hi = [v.copy() for v in vals]
                lo = [v.copy() for v in vals]
                hi[pos][idx] += eps
                lo[pos][idx] -= eps
                num[idx] = (objective(hi, k0) - objective(lo, k0)) / (2 * eps)
            np.testing.assert_allclose(sym[pos], num, rtol=1e-5, atol=1e-7)
        num = np.zeros_like(k0)
        for idx in list(np.ndindex(k0.shape))[::5]:
            hi, lo = k0.copy(), k0.copy()
            hi[idx] += eps
            lo[idx] -= eps
            num[idx] = (objective(vals, hi) - objective(vals, lo)) / (2 * eps)
            np.testing.assert_allclose(sym[3][idx], num[idx], rtol=1e-5, atol=1e-7)


def test_lstm_language_model_trains_with_adam():
    """A tiny LSTM language model over variable-length sentences of a toy grammar: the
    masked next-token cross-entropy decreases under Adam, and its gradients equal those of
    the unrolled graph."""
    vocab, emb, units, batch, max_len = 8, 6, 12, 6, 7
    tf.set_random_seed(0)
    tokens = tf.placeholder(tf.int32, [batch, max_len])
    lengths = tf.placeholder(tf.int32, [batch])
    embedding = tf.get_variable("embedding", [vocab, emb])
    inputs = tf.nn.embedding_lookup(embedding, tokens[:, :-1])
    cell = rnn_cell.BasicLSTMCell(units)
    out, _ = tf.nn.dynamic_rnn(cell, inputs, sequence_length=lengths - 1, dtype=tf.float32)
    w = tf.get_variable("softmax_w", [units, vocab])
    b = tf.get_variable("softmax_b", [vocab], initializer=tf.zeros_initializer())
    logits = tf.reshape(tf.matmul(tf.reshape(out, [-1, units]), w) + b,
                        [batch, max_len - 1, vocab])
    xent = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tokens[:, 1:], logits=logits)
    mask = tf.sequence_mask(lengths - 1, max_len - 1, dtype=tf.float32)
    loss = tf.reduce_sum(xent * mask) / tf.reduce_sum(mask)
    train = tf.train.AdamOptimizer(0.05).minimize(loss)

    # The same model unrolled (shares every variable): gradients must agree.
    souts, _ = tf.nn.static_rnn(cell, tf.unstack(inputs, axis=1), sequence_length=lengths - 1,
                                dtype=tf.float32)
    slogits = tf.reshape(tf.matmul(tf.reshape(tf.stack(souts, 1), [-1, units]), w) + b,
                         [batch, max_len - 1, vocab])
    sxent = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tokens[:, 1:],
                                                           logits=slogits)
    sloss = tf.reduce_sum(sxent * mask) / tf.reduce_sum(mask)
    params = tf.trainable_variables()
    gd, gs = tf.gradients(loss, params), tf.gradients(sloss, params)

    def sample():
        # Sentences 1 (2 3)* ... : counting patterns an LSTM learns quickly; pad with 0.
        toks = np.zeros((batch, max_len), np.int32)
        lens = RNG.integers(3, max_len + 1, batch)
        for k, n in enumerate(lens):
            start = RNG.integers(1, vocab)
            toks[k, :n] = (start + np.arange(n)) % (vocab - 1) + 1
        return {tokens: toks, lengths: lens}

    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        feed = sample()
        a, b_ = sess.run([gd, gs], feed)
        for p, u, v in zip(params, a, b_):
            u = _dense(u, p)
            v = _dense(v, p)
            np.testing.assert_allclose(u, v, rtol=1e-4, atol=1e-6, err_msg=p.name)
        fixed = [sample() for _ in range(4)]
        first = np.mean([sess.run(loss, f) for f in fixed])
        for step in range(60):
            sess.run(train, fixed[step % 4])
        last = np.mean([sess.run(loss, f) for f in fixed])
    assert last < 0.5 * first, (first, last)


def _dense(g, p):
    if hasattr(g, "indices"):
        out = np.zeros(p.shape.as_list(), g.values.dtype)
        np.add.at(out, g.indices, g.values)
        return out
    return g
