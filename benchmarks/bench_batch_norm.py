"""Benchmark 20: batch normalization, the fused op against the composite, TF and PyTorch.

A training step's batch-norm work on a (32, 16, 16, 64) float32 NHWC batch, one thread
everywhere: the forward in training mode, the gradients of ``sum(y * w)`` with respect to the
input, gamma and beta, and the moving averages' updates. dflab runs it as a graph built as
``tf.layers.batch_normalization`` builds it, with the fused ``FusedBatchNormV3`` op and its
gradient op (a 4-D input's default) and with moments and elementwise ops (``fused=False``, and
what dflab built for every input before it had the fused op); the baseline is the same step
written by hand in NumPy; TensorFlow 1.x runs the same graph and PyTorch ``F.batch_norm``
under autograd, when installed. All start from the same values and are checked to agree.

Then the eager layer: a built ``BatchNormalization`` called on a small (2, 8, 8, 4) batch,
inference and training (which also updates the moving statistics), against PyTorch's
``BatchNorm2d`` in ``eval``/``train`` mode without autograd.
Target: dflab's fused graph step no slower than TensorFlow's (NumPy's when TF is absent).
"""

from __future__ import annotations

import _harness as h
import numpy as np
from _harness import ONE_THREAD
from threadpoolctl import threadpool_limits

import dflab as tf
from dflab.eager import eager_mode

SHAPE = (32, 16, 16, 64)
EAGER_SHAPE = (2, 8, 8, 4)
EPS, MOMENTUM = 1e-3, 0.9


class NumpyBatchNorm:
    """The step by hand: batch statistics, the normalised output, the three gradients (the
    textbook backward pass) and the moving averages, over the channels of an NHWC batch."""

    def __init__(self, channels):
        self.gamma = np.linspace(0.5, 1.5, channels, dtype=np.float32)
        self.beta = np.zeros(channels, np.float32)
        self.moving_mean = np.zeros(channels, np.float32)
        self.moving_var = np.ones(channels, np.float32)

    def step(self, x, w):
        c = x.shape[-1]
        flat, wf = x.reshape(-1, c), w.reshape(-1, c)
        n = flat.shape[0]
        mean = flat.mean(axis=0)
        centred = flat - mean
        var = (centred * centred).mean(axis=0)
        inv = 1 / np.sqrt(var + EPS)
        x_hat = centred * inv
        y = x_hat * self.gamma + self.beta
        d_beta = wf.sum(axis=0)
        d_gamma = (wf * x_hat).sum(axis=0)
        dx = (self.gamma * inv / n) * (n * wf - d_beta - x_hat * d_gamma)
        self.moving_mean += (mean - self.moving_mean) * (1 - MOMENTUM)
        self.moving_var += (var * n / (n - 1) - self.moving_var) * (1 - MOMENTUM)
        return y.reshape(x.shape), dx.reshape(x.shape), d_gamma, d_beta


def _build(tf_mod, x_val, w_val, fused, config=None):
    """The step as ``tf.layers.batch_normalization`` builds it (written with ``tf.nn`` ops, as
    TensorFlow 2's ``compat.v1`` has no layers under Keras 3): the fused op, or moments and
    ``batch_normalization``; moving averages of the unbiased variance."""
    graph = tf_mod.Graph()
    with graph.as_default():
        # (variables, not constants: TF's graph optimizer would fold the batch statistics)
        x, c = tf_mod.Variable(x_val, trainable=False), x_val.shape[-1]
        gamma = tf_mod.Variable(np.linspace(0.5, 1.5, c, dtype=np.float32))
        beta = tf_mod.Variable(np.zeros(c, np.float32))
        moving = [tf_mod.Variable(np.full(c, v, np.float32), trainable=False) for v in (0, 1)]
        if fused:
            y, mean, var = tf_mod.nn.fused_batch_norm(x, gamma, beta, epsilon=EPS)
        else:
            mean, var = tf_mod.nn.moments(x, [0, 1, 2])
            y = tf_mod.nn.batch_normalization(x, mean, var, beta, gamma, EPS)
            n = x_val.size // c
            var = var * (n / (n - 1))
        updates = [m.assign_sub((m - s) * (1 - MOMENTUM)) for m, s in zip(moving, (mean, var))]
        w = tf_mod.Variable(w_val, trainable=False)
        grads = tf_mod.gradients(tf_mod.reduce_sum(y * w), [x, gamma, beta])
        fetch = [y] + grads
        step = tf_mod.group(*fetch, *updates)
        init = tf_mod.global_variables_initializer()
    sess = tf_mod.Session(graph=graph, config=config)
    sess.run(init)
    return sess, fetch, step


def _torch_step(torch, x_val, w_val):
    x = torch.tensor(x_val).permute(0, 3, 1, 2).contiguous().requires_grad_(True)
    w = torch.tensor(w_val).permute(0, 3, 1, 2).contiguous()
    gamma = torch.tensor(np.linspace(0.5, 1.5, x_val.shape[-1], dtype=np.float32),
                         requires_grad=True)
    beta = torch.zeros(x_val.shape[-1], requires_grad=True)
    mean, var = torch.zeros(x_val.shape[-1]), torch.ones(x_val.shape[-1])

    def step():
        y = torch.nn.functional.batch_norm(x, mean, var, gamma, beta, training=True,
                                           momentum=1 - MOMENTUM, eps=EPS)
        return torch.autograd.grad((y * w).sum(), [x, gamma, beta])

    return step


def _graph_steps(args, result):
    rng = np.random.default_rng(0)
    x_val = rng.standard_normal(SHAPE).astype(np.float32)
    w_val = rng.standard_normal(SHAPE).astype(np.float32)
    reference = NumpyBatchNorm(SHAPE[-1])
    want = reference.step(x_val, w_val)
    config = tf.ConfigProto(**ONE_THREAD)
    fused, fused_fetch, fused_step = _build(tf, x_val, w_val, True, config)
    comp, comp_fetch, comp_step = _build(tf, x_val, w_val, False, config)
    for sess, fetch in ((fused, fused_fetch), (comp, comp_fetch)):
        for got, ref in zip(sess.run(fetch), want):
            np.testing.assert_allclose(got, ref, rtol=2e-3, atol=2e-3)
    candidates = {
        "numpy by hand": lambda: reference.step(x_val, w_val),
        "dflab fused op": lambda: fused.run(fused_step),
        "dflab composite (fused=False)": lambda: comp.run(comp_step),
    }
    tf1 = h.optional_tf1()
    if tf1 is not None:
        one = tf1.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
        s1, fetch1, step1 = _build(tf1, x_val, w_val, True, one)
        for got, ref in zip(s1.run(fetch1), want):
            np.testing.assert_allclose(got, ref, rtol=2e-3, atol=2e-3)
        candidates["tensorflow 1.x"] = lambda: s1.run(step1)
    torch = h.optional_torch()
    if torch is not None:
        candidates["pytorch autograd"] = _torch_step(torch, x_val, w_val)
    times = h.compare(candidates, repeat=h.repeats(args, 15), sample_s=0.2, warmup=3)
    base = times["numpy by hand"]
    for label, seconds in times.items():
        result.add(f"graph step: {label}", seconds * 1e3, "ms/step",
                   f"{seconds / base:.2f}x numpy")
    return times, "tensorflow 1.x" if tf1 is not None else "numpy by hand"


def _eager_calls(args, result):
    torch = h.optional_torch()
    x_val = np.random.default_rng(1).standard_normal(EAGER_SHAPE).astype(np.float32)
    with eager_mode():
        bn = tf.layers.BatchNormalization(momentum=MOMENTUM, epsilon=EPS)
        x = tf.constant(x_val)
        bn(x, training=True)
        candidates = {"dflab inference": lambda: bn(x, training=False),
                      "dflab training": lambda: bn(x, training=True)}
        if torch is not None:
            tx = torch.tensor(x_val).permute(0, 3, 1, 2).contiguous()
            t_eval = torch.nn.BatchNorm2d(EAGER_SHAPE[-1], eps=EPS).requires_grad_(False).eval()
            t_train = torch.nn.BatchNorm2d(EAGER_SHAPE[-1], eps=EPS).requires_grad_(False)
            candidates["pytorch inference"] = lambda: t_eval(tx)
            candidates["pytorch training"] = lambda: t_train(tx)
        times = h.compare(candidates, repeat=h.repeats(args, 15), sample_s=0.05, warmup=20)
    for label, seconds in times.items():
        result.add(f"eager layer call: {label}", seconds * 1e6, "us/call", "")


def main() -> list:
    args = h.parse_args(__doc__.splitlines()[0])
    result = h.Result("batch_norm", "20. Batch normalization: fused op, graph step and eager "
                      "layer (1 thread)")
    with threadpool_limits(1):
        times, anchor = _graph_steps(args, result)
        _eager_calls(args, result)
    ratio = times["dflab fused op"] / times[anchor]
    result.target = f"dflab fused step <= {anchor}'s"
    result.measured = (f"{ratio:.2f}x {anchor}; composite "
                       f"{times['dflab composite (fused=False)'] / times[anchor]:.2f}x")
    result.met = ratio <= 1.0
    h.report(result, args)
    return [result]


if __name__ == "__main__":
    main()
