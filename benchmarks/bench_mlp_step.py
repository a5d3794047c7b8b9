"""Benchmark 3: one SGD training step of an MLP, dflab vs the same step in NumPy (target <= 1.15x).

Model 784-512-512-10 with ReLU, mean sparse softmax cross-entropy, plain SGD, batch 128,
float32, BLAS pinned to one thread and dflab's session on one intra-op thread (its default
splits on every core). dflab runs ``sess.run(train_op, feed)`` with
``GradientDescentOptimizer(0.1).minimize(loss)``; the baseline is the forward pass, the
hand-derived backward pass and in-place updates written directly in NumPy. Both start from the
same weights and are checked to agree after a step. TensorFlow 1.x and PyTorch columns are
added when those are installed.
"""

from __future__ import annotations

import _harness as h
import numpy as np
from _harness import ONE_THREAD
from threadpoolctl import threadpool_limits

import dflab as tf

SIZES = (784, 512, 512, 10)
BATCH = 128
LR = 0.1
TARGET_RATIO = 1.15


def initial_params(seed=0):
    rng = np.random.default_rng(seed)
    params = []
    for fan_in, fan_out in zip(SIZES[:-1], SIZES[1:]):
        limit = np.sqrt(6.0 / (fan_in + fan_out))
        params.append(rng.uniform(-limit, limit, (fan_in, fan_out)).astype(np.float32))
        params.append(np.zeros(fan_out, np.float32))
    return params


class NumpyMLP:
    """The training step by hand: forward, backward, in-place SGD update."""

    def __init__(self, params):
        self.params = [p.copy() for p in params]

    def step(self, x, labels):
        W1, b1, W2, b2, W3, b3 = self.params
        n = x.shape[0]
        h1 = x @ W1 + b1
        a1 = np.maximum(h1, 0)
        h2 = a1 @ W2 + b2
        a2 = np.maximum(h2, 0)
        logits = a2 @ W3 + b3
        shifted = logits - logits.max(axis=1, keepdims=True)
        exp = np.exp(shifted)
        total = exp.sum(axis=1, keepdims=True)
        rows = np.arange(n)
        loss = np.mean(np.log(total[:, 0]) - shifted[rows, labels])
        g = exp / total  # d loss / d logits = (softmax - onehot) / n
        g[rows, labels] -= 1.0
        g /= n
        dW3, db3 = a2.T @ g, g.sum(axis=0)
        d2 = (g @ W3.T) * (h2 > 0)
        dW2, db2 = a1.T @ d2, d2.sum(axis=0)
        d1 = (d2 @ W2.T) * (h1 > 0)
        dW1, db1 = x.T @ d1, d1.sum(axis=0)
        for p, d in zip(self.params, (dW1, db1, dW2, db2, dW3, db3)):
            p -= LR * d
        return loss


def build_dflab(params):
    graph = tf.Graph()
    with graph.as_default():
        x = tf.placeholder(tf.float32, [None, SIZES[0]], name="x")
        labels = tf.placeholder(tf.int64, [None], name="labels")
        variables = [tf.Variable(p, name=f"p{i}") for i, p in enumerate(params)]
        h = x
        for layer in range(3):
            h = tf.matmul(h, variables[2 * layer]) + variables[2 * layer + 1]
            if layer < 2:
                h = tf.nn.relu(h)
        loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=h))
        train_op = tf.train.GradientDescentOptimizer(LR).minimize(loss)
        init = tf.global_variables_initializer()
    sess = tf.Session(graph=graph, config=tf.ConfigProto(**ONE_THREAD))
    sess.run(init)
    return sess, x, labels, variables, train_op


def build_tf1(tf1, params):
    graph = tf1.Graph()
    with graph.as_default():
        x = tf1.placeholder(tf1.float32, [None, SIZES[0]])
        labels = tf1.placeholder(tf1.int64, [None])
        variables = [tf1.Variable(p) for p in params]
        h = x
        for layer in range(3):
            h = tf1.matmul(h, variables[2 * layer]) + variables[2 * layer + 1]
            if layer < 2:
                h = tf1.nn.relu(h)
        loss = tf1.reduce_mean(
            tf1.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=h))
        train_op = tf1.train.GradientDescentOptimizer(LR).minimize(loss)
        init = tf1.global_variables_initializer()
    config = tf1.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
    sess = tf1.Session(graph=graph, config=config)
    sess.run(init)
    return sess, x, labels, train_op


def torch_step_fn(torch, params, x_val, y_val):
    ps = [torch.tensor(p, requires_grad=True) for p in params]
    xt, yt = torch.from_numpy(x_val), torch.from_numpy(y_val)
    fn = torch.nn.functional

    def step():
        h = xt
        for layer in range(3):
            h = h @ ps[2 * layer] + ps[2 * layer + 1]
            if layer < 2:
                h = torch.relu(h)
        loss = fn.cross_entropy(h, yt)
        grads = torch.autograd.grad(loss, ps)
        with torch.no_grad():
            for p, g in zip(ps, grads):
                p.sub_(LR * g)

    return step


def main() -> h.Result:
    args = h.parse_args(__doc__.splitlines()[0])
    result = h.Result("mlp_step", "3. MLP 784-512-512-10 SGD step, batch 128 (1 BLAS thread)")
    rng = np.random.default_rng(1)
    x_val = rng.standard_normal((BATCH, SIZES[0])).astype(np.float32)
    y_val = rng.integers(0, SIZES[-1], BATCH).astype(np.int64)
    params = initial_params()

    with threadpool_limits(1):
        reference = NumpyMLP(params)
        sess, x, labels, variables, train_op = build_dflab(params)
        feed = {x: x_val, labels: y_val}
        # Same start, one step each: the weights must agree.
        reference.step(x_val, y_val)
        sess.run(train_op, feed)
        for got, want in zip(sess.run(variables), reference.params):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)

        candidates = {
            "numpy by hand": lambda: reference.step(x_val, y_val),
            "dflab sess.run(train_op)": lambda: sess.run(train_op, feed),
        }
        tf1 = h.optional_tf1()
        if tf1 is not None:
            s1, x1, l1, t1 = build_tf1(tf1, params)
            candidates["tensorflow 1.x sess.run"] = lambda: s1.run(t1, {x1: x_val, l1: y_val})
        torch = h.optional_torch()
        if torch is not None:
            candidates["pytorch autograd step"] = torch_step_fn(torch, params, x_val, y_val)
        times = h.compare(candidates, repeat=h.repeats(args, 15), sample_s=0.3, warmup=5)

    base = times["numpy by hand"]
    for label, seconds in times.items():
        result.add(label, seconds * 1e3, "ms/step", f"{seconds / base:.2f}x numpy")
    if tf1 is None:
        result.add("tensorflow 1.x sess.run", None, "ms/step", "not installed")
    if torch is None:
        result.add("pytorch autograd step", None, "ms/step", "not installed")
    ratio = times["dflab sess.run(train_op)"] / base
    result.target = f"dflab / numpy <= {TARGET_RATIO:g}x"
    result.measured = f"{ratio:.2f}x"
    result.met = ratio <= TARGET_RATIO
    h.report(result, args)
    return result


if __name__ == "__main__":
    main()
