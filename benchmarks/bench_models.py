"""Model suite: real training steps under dflab, TensorFlow 1.x and PyTorch eager, side by side.

Each model is built once by a function that takes the TF1 module (``dflab`` or
``tensorflow.compat.v1``), so the two graph-mode columns run literally the same program; the
PyTorch column is the same step written with ``torch.nn.functional`` and ``torch.optim``. All
start from the same NumPy weights and are checked to compute the same first loss. Candidates of
one model are sampled interleaved (see ``_harness.py``), with BLAS and every framework's
intra-op pool at ``THREADS`` threads.

Models (float32):

* ``cnn``: the classic TF1 MNIST convolutional net, batch 64 of 28x28x1: conv 5x5x32 (SAME),
  ReLU, max-pool 2x2, conv 5x5x64, ReLU, max-pool, fc 1024 ReLU, fc 10, sparse softmax
  cross-entropy, Adam(1e-4).
* ``lstm``: a PTB-small language-model step: vocabulary 10,000, embeddings of 200, two LSTM
  layers of 200 units unrolled over 20 steps, batch 20, softmax over the vocabulary, SGD(1.0)
  with gradients clipped to a global norm of 5. The LSTM cell is written out with matmul,
  split, sigmoid and tanh so that every framework runs the same arithmetic.
* ``mlp``: 784-512-512-10 ReLU, batch 128, SGD(0.1) (as benchmark 3, here at ``THREADS``).
* ``word2vec``: skip-gram with negative sampling: vocabulary 50,000, embeddings of 128, batch
  of 128 centre words, each with one context word and 16 fed negative words; sigmoid
  cross-entropy; SGD(1.0) on sparse (IndexedSlices) gradients of two embedding tables.

With ``--alone`` each framework's step of each model is instead timed in a fresh process of
its own, the others not even imported: no other framework's threads, caches or memory beside it.
The interleaved run pauses before each sample so that the previous framework's spinning workers
go idle, but on a machine with few cores it still drifts (TensorFlow's CNN step: 37.5 ms alone,
41-54 ms interleaved); the two are reported separately.

Usage: ``python benchmarks/bench_models.py [--quick] [--alone] [--json PATH] [--models
cnn,lstm]``; ``scripts/bench-models`` makes an environment with TensorFlow and PyTorch and
runs this. ``--device gpu [--out PATH]`` runs the GPU suite instead (``bench_models_gpu.py``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Callable

import _harness as h
import numpy as np
from threadpoolctl import threadpool_limits

import dflab

THREADS = 2
# Untimed pause before each sample: the previous framework's spinning workers go idle first
# (see ``_harness.compare``).
SETTLE_S = 0.3
TARGET_RATIO = 1.5  # every model: dflab <= 1.5x TensorFlow 1.x
GOALS = {"cnn": 1.5, "lstm": 1.2}


def _uniform(rng, shape, scale):
    return rng.uniform(-scale, scale, shape).astype(np.float32)


# --- the models, as TF1 programs ----------------------------------------------------------------
class Model:
    """A built training step: ``step()`` runs one step, ``first_loss`` is the loss it reported
    on its first step from the shared initial weights. Graph models also keep their session,
    fetch and feed (for ``profile_models.py``)."""

    def __init__(self, step: Callable[[], object], first_loss: float, session=None,
                 fetch=None, feed=None):
        self.step = step
        self.first_loss = first_loss
        self.session, self.fetch, self.feed = session, fetch, feed


def _session(tf, graph, init):
    # One inter-op thread: each framework's parallelism is inside its ops, at THREADS.
    config = tf.ConfigProto(intra_op_parallelism_threads=THREADS,
                            inter_op_parallelism_threads=1)
    sess = tf.Session(graph=graph, config=config)
    sess.run(init)
    return sess


def _graph_model(tf, graph, loss, train_op, feed) -> Model:
    with graph.as_default():
        init = tf.global_variables_initializer()
    sess = _session(tf, graph, init)
    first = float(sess.run([loss, train_op], feed)[0])
    return Model(lambda: sess.run(train_op, feed), first, sess, train_op, feed)


# CNN
CNN_BATCH = 64


def cnn_data(rng):
    weights = {
        "w1": rng.normal(0, 0.1, (5, 5, 1, 32)).astype(np.float32),
        "b1": np.full(32, 0.1, np.float32),
        "w2": rng.normal(0, 0.1, (5, 5, 32, 64)).astype(np.float32),
        "b2": np.full(64, 0.1, np.float32),
        "w3": rng.normal(0, 0.02, (7 * 7 * 64, 1024)).astype(np.float32),
        "b3": np.full(1024, 0.1, np.float32),
        "w4": rng.normal(0, 0.1, (1024, 10)).astype(np.float32),
        "b4": np.full(10, 0.1, np.float32),
    }
    x = rng.random((CNN_BATCH, 28, 28, 1), dtype=np.float32)
    y = rng.integers(0, 10, CNN_BATCH).astype(np.int64)
    return weights, x, y


def cnn_tf(tf, weights, x_val, y_val) -> Model:
    graph = tf.Graph()
    with graph.as_default():
        x = tf.placeholder(tf.float32, [None, 28, 28, 1])
        labels = tf.placeholder(tf.int64, [None])
        v = {k: tf.Variable(w, name=k) for k, w in weights.items()}

        def conv_pool(inp, w, b):
            c = tf.nn.relu(tf.nn.conv2d(inp, w, strides=[1, 1, 1, 1], padding="SAME") + b)
            return tf.nn.max_pool(c, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="SAME")

        p2 = conv_pool(conv_pool(x, v["w1"], v["b1"]), v["w2"], v["b2"])
        fc1 = tf.nn.relu(tf.matmul(tf.reshape(p2, [-1, 7 * 7 * 64]), v["w3"]) + v["b3"])
        logits = tf.matmul(fc1, v["w4"]) + v["b4"]
        loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
        train_op = tf.train.AdamOptimizer(1e-4).minimize(loss)
    return _graph_model(tf, graph, loss, train_op, {x: x_val, labels: y_val})


def cnn_torch(torch, weights, x_val, y_val) -> Model:
    f = torch.nn.functional
    # Torch convolves NCHW with OIHW filters: the same weights, transposed once.
    p = {k: torch.tensor(w.transpose(3, 2, 0, 1) if w.ndim == 4 else w, requires_grad=True)
         for k, w in weights.items()}
    opt = torch.optim.Adam(p.values(), lr=1e-4, eps=1e-8)
    x = torch.from_numpy(x_val.transpose(0, 3, 1, 2).copy())
    y = torch.from_numpy(y_val)

    def step():
        h1 = f.max_pool2d(f.relu(f.conv2d(x, p["w1"], p["b1"], padding=2)), 2)
        h2 = f.max_pool2d(f.relu(f.conv2d(h1, p["w2"], p["b2"], padding=2)), 2)
        flat = h2.permute(0, 2, 3, 1).reshape(-1, 7 * 7 * 64)  # NHWC order, as the TF model
        logits = f.relu(flat @ p["w3"] + p["b3"]) @ p["w4"] + p["b4"]
        loss = f.cross_entropy(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    return Model(step, float(step().detach()))


# LSTM language model
VOCAB, EMBED, UNITS, LAYERS, STEPS, LM_BATCH = 10_000, 200, 200, 2, 20, 20


def lstm_data(rng):
    weights = {"embedding": _uniform(rng, (VOCAB, EMBED), 0.1),
               "softmax_w": _uniform(rng, (UNITS, VOCAB), 0.1),
               "softmax_b": np.zeros(VOCAB, np.float32)}
    for layer in range(LAYERS):
        fan_in = EMBED if layer == 0 else UNITS
        weights[f"kernel{layer}"] = _uniform(rng, (fan_in + UNITS, 4 * UNITS), 0.1)
        weights[f"bias{layer}"] = np.zeros(4 * UNITS, np.float32)
    ids = rng.integers(0, VOCAB, (LM_BATCH, STEPS)).astype(np.int64)
    targets = rng.integers(0, VOCAB, (LM_BATCH, STEPS)).astype(np.int64)
    return weights, ids, targets


def lstm_tf(tf, weights, ids_val, targets_val) -> Model:
    graph = tf.Graph()
    with graph.as_default():
        ids = tf.placeholder(tf.int64, [LM_BATCH, STEPS])
        targets = tf.placeholder(tf.int64, [LM_BATCH, STEPS])
        v = {k: tf.Variable(w, name=k) for k, w in weights.items()}
        inputs = tf.nn.embedding_lookup(v["embedding"], ids)
        states = [(tf.zeros([LM_BATCH, UNITS]), tf.zeros([LM_BATCH, UNITS]))] * LAYERS
        outputs = []
        for t in range(STEPS):
            h = inputs[:, t, :]
            for layer in range(LAYERS):
                c_prev, h_prev = states[layer]
                z = tf.matmul(tf.concat([h, h_prev], 1), v[f"kernel{layer}"]) + v[f"bias{layer}"]
                i, j, f, o = tf.split(z, 4, axis=1)
                c = tf.sigmoid(f) * c_prev + tf.sigmoid(i) * tf.tanh(j)
                h = tf.sigmoid(o) * tf.tanh(c)
                states[layer] = (c, h)
            outputs.append(h)
        out = tf.reshape(tf.stack(outputs, axis=1), [-1, UNITS])
        logits = tf.matmul(out, v["softmax_w"]) + v["softmax_b"]
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.reshape(targets, [-1]), logits=logits))
        params = tf.trainable_variables()
        grads, _ = tf.clip_by_global_norm(tf.gradients(loss, params), 5.0)
        train_op = tf.train.GradientDescentOptimizer(1.0).apply_gradients(zip(grads, params))
    return _graph_model(tf, graph, loss, train_op, {ids: ids_val, targets: targets_val})


def lstm_torch(torch, weights, ids_val, targets_val) -> Model:
    f = torch.nn.functional
    p = {k: torch.tensor(w, requires_grad=True) for k, w in weights.items()}
    opt = torch.optim.SGD(p.values(), lr=1.0)
    ids, targets = torch.from_numpy(ids_val), torch.from_numpy(targets_val)
    batch = ids_val.shape[0]  # not LM_BATCH, which the GPU suite changes between models

    def step():
        inputs = f.embedding(ids, p["embedding"])
        zeros = torch.zeros(batch, UNITS)
        states = [(zeros, zeros)] * LAYERS
        outputs = []
        for t in range(STEPS):
            h = inputs[:, t, :]
            for layer in range(LAYERS):
                c_prev, h_prev = states[layer]
                z = torch.cat([h, h_prev], 1) @ p[f"kernel{layer}"] + p[f"bias{layer}"]
                i, j, g, o = z.chunk(4, dim=1)
                c = torch.sigmoid(g) * c_prev + torch.sigmoid(i) * torch.tanh(j)
                h = torch.sigmoid(o) * torch.tanh(c)
                states[layer] = (c, h)
            outputs.append(h)
        out = torch.stack(outputs, 1).reshape(-1, UNITS)
        loss = f.cross_entropy(out @ p["softmax_w"] + p["softmax_b"], targets.reshape(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(p.values(), 5.0)
        opt.step()
        return loss

    return Model(step, float(step().detach()))


# MLP (benchmark 3's model and its hand-written NumPy step)
def mlp_data(rng):
    from bench_mlp_step import BATCH, SIZES, initial_params

    x = rng.standard_normal((BATCH, SIZES[0])).astype(np.float32)
    y = rng.integers(0, SIZES[-1], BATCH).astype(np.int64)
    return initial_params(), x, y


def mlp_tf(tf, params, x_val, y_val) -> Model:
    from bench_mlp_step import LR, SIZES

    graph = tf.Graph()
    with graph.as_default():
        x = tf.placeholder(tf.float32, [None, SIZES[0]])
        labels = tf.placeholder(tf.int64, [None])
        variables = [tf.Variable(p) for p in params]
        act = x
        for layer in range(3):
            act = tf.matmul(act, variables[2 * layer]) + variables[2 * layer + 1]
            if layer < 2:
                act = tf.nn.relu(act)
        loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=act))
        train_op = tf.train.GradientDescentOptimizer(LR).minimize(loss)
    return _graph_model(tf, graph, loss, train_op, {x: x_val, labels: y_val})


def mlp_torch(torch, params, x_val, y_val) -> Model:
    from bench_mlp_step import torch_step_fn

    return Model(torch_step_fn(torch, params, x_val, y_val), float("nan"))


def mlp_numpy(params, x_val, y_val) -> Model:
    from bench_mlp_step import NumpyMLP

    net = NumpyMLP(params)
    return Model(lambda: net.step(x_val, y_val), float(net.step(x_val, y_val)))


# word2vec: skip-gram with fed negative samples
W2V_VOCAB, W2V_DIM, W2V_BATCH, W2V_NEG = 50_000, 128, 128, 16


def w2v_data(rng):
    weights = {"emb": _uniform(rng, (W2V_VOCAB, W2V_DIM), 0.5 / W2V_DIM),
               "ctx": _uniform(rng, (W2V_VOCAB, W2V_DIM), 0.1)}
    centre = rng.integers(0, W2V_VOCAB, W2V_BATCH).astype(np.int64)
    context = rng.integers(0, W2V_VOCAB, (W2V_BATCH, 1 + W2V_NEG)).astype(np.int64)
    return weights, centre, context


def _w2v_labels():
    labels = np.zeros((W2V_BATCH, 1 + W2V_NEG), np.float32)
    labels[:, 0] = 1.0  # column 0 is the true context word, the rest are negatives
    return labels


def w2v_tf(tf, weights, centre_val, context_val) -> Model:
    graph = tf.Graph()
    with graph.as_default():
        centre = tf.placeholder(tf.int64, [W2V_BATCH])
        context = tf.placeholder(tf.int64, [W2V_BATCH, 1 + W2V_NEG])
        emb = tf.Variable(weights["emb"])
        ctx = tf.Variable(weights["ctx"])
        u = tf.nn.embedding_lookup(emb, centre)                   # [B, D]
        c = tf.nn.embedding_lookup(ctx, context)                  # [B, 1+K, D]
        logits = tf.reduce_sum(c * tf.expand_dims(u, 1), axis=2)  # [B, 1+K]
        loss = tf.reduce_sum(tf.nn.sigmoid_cross_entropy_with_logits(
            labels=tf.constant(_w2v_labels()), logits=logits)) / W2V_BATCH
        train_op = tf.train.GradientDescentOptimizer(1.0).minimize(loss)
    return _graph_model(tf, graph, loss, train_op, {centre: centre_val, context: context_val})


def w2v_torch(torch, weights, centre_val, context_val) -> Model:
    f = torch.nn.functional
    emb = torch.tensor(weights["emb"], requires_grad=True)
    ctx = torch.tensor(weights["ctx"], requires_grad=True)
    opt = torch.optim.SGD([emb, ctx], lr=1.0)
    centre, context = torch.from_numpy(centre_val), torch.from_numpy(context_val)
    labels = torch.from_numpy(_w2v_labels())

    def step():
        # sparse=True: row gradients, as TF's IndexedSlices
        u = f.embedding(centre, emb, sparse=True)
        c = f.embedding(context, ctx, sparse=True)
        logits = (c * u[:, None, :]).sum(2)
        loss = f.binary_cross_entropy_with_logits(logits, labels, reduction="sum") / W2V_BATCH
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    return Model(step, float(step().detach()))


def w2v_numpy(weights, centre_val, context_val) -> Model:
    emb, ctx = weights["emb"].copy(), weights["ctx"].copy()
    labels = _w2v_labels()

    def step():
        u = emb[centre_val]
        c = ctx[context_val]
        logits = np.einsum("bkd,bd->bk", c, u)
        loss = np.sum(np.maximum(logits, 0) - logits * labels
                      + np.log1p(np.exp(-np.abs(logits)))) / W2V_BATCH
        g = (1.0 / (1.0 + np.exp(-logits)) - labels) / W2V_BATCH
        du = np.einsum("bk,bkd->bd", g, c)
        dc = g[:, :, None] * u[:, None, :]
        np.add.at(emb, centre_val, -du)  # repeated ids accumulate, as a sparse update must
        np.add.at(ctx, context_val.ravel(), -dc.reshape(-1, W2V_DIM))
        return loss

    return Model(step, float(step()))


MODELS = {
    "cnn": ("MNIST CNN, batch 64, Adam", cnn_data, cnn_tf, cnn_torch, None),
    "lstm": ("PTB-small LSTM LM, 2x200, 20 steps, batch 20, SGD+clip", lstm_data, lstm_tf,
             lstm_torch, None),
    "mlp": ("MLP 784-512-512-10, batch 128, SGD", mlp_data, mlp_tf, mlp_torch, mlp_numpy),
    "word2vec": ("word2vec skip-gram, 16 negatives, batch 128, sparse SGD", w2v_data, w2v_tf,
                 w2v_torch, w2v_numpy),
}


# --- running ------------------------------------------------------------------------------------
def _parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="few samples: a smoke run, not figures")
    p.add_argument("--json", metavar="PATH", help="also write the result as JSON to PATH")
    p.add_argument("--models", default=",".join(MODELS),
                   help=f"comma-separated subset of {', '.join(MODELS)}")
    p.add_argument("--threads", type=int, default=THREADS,
                   help=f"intra-op / BLAS threads of every framework (default {THREADS})")
    p.add_argument("--alone", action="store_true",
                   help="time each framework in a fresh process of its own")
    p.add_argument("--only", help=argparse.SUPPRESS)  # one framework: a child of --alone
    return p.parse_args()


LABELS = ("dflab", "tensorflow 1.x", "pytorch eager", "numpy by hand")


def _build(name: str, label: str, args, tf1, torch) -> Model | None:
    """``label``'s step of model ``name`` on the data ``args``, or None where that framework
    is not installed or the model has no hand-written NumPy step."""
    _, _, build_tf, build_torch, build_numpy = MODELS[name]
    if label == "dflab":
        return build_tf(dflab, *args)
    if label == "tensorflow 1.x":
        return None if tf1 is None else build_tf(tf1, *args)
    if label == "pytorch eager":
        return None if torch is None else build_torch(torch, *args)
    return None if build_numpy is None else _with_blas_threads(build_numpy(*args))


def _candidates(name, tf1, torch) -> dict[str, Model]:
    args = MODELS[name][1](np.random.default_rng(0))
    models = {label: _build(name, label, args, tf1, torch) for label in LABELS}
    return {label: m for label, m in models.items() if m is not None}


def _with_blas_threads(model: Model) -> Model:
    """``model`` whose steps run with BLAS at ``THREADS`` threads: a dflab session with
    intra-op threads pins BLAS to one thread process-wide (it splits work itself), which the
    hand-written NumPy step would otherwise inherit."""
    from threadpoolctl import ThreadpoolController

    limit = ThreadpoolController().limit
    step = model.step

    def blas_step():
        with limit(limits=THREADS, user_api="blas"):
            return step()

    return Model(blas_step, model.first_loss)


def _check_same_loss(name: str, first_losses: dict[str, float]) -> None:
    ref = first_losses["dflab"]
    for label, loss in first_losses.items():
        if np.isfinite(loss) and not np.isclose(loss, ref, rtol=2e-3):
            sys.exit(f"{name}: first loss differs: dflab {ref} vs {label} {loss}")


def _times_interleaved(name: str, args, tf1, torch) -> dict[str, float]:
    """Seconds per step of every installed framework, sampled interleaved in this process."""
    models = _candidates(name, tf1, torch)
    _check_same_loss(name, {label: m.first_loss for label, m in models.items()})
    return h.compare({k: m.step for k, m in models.items()}, repeat=h.repeats(args, 9),
                     sample_s=0.5, warmup=3, settle_s=SETTLE_S)


def _times_alone(name: str, args) -> dict[str, float]:
    """Seconds per step of every installed framework, each timed in a fresh process."""
    times, losses = {}, {}
    for label in LABELS:
        cmd = [sys.executable, __file__, "--models", name, "--only", label,
               "--threads", str(THREADS)] + (["--quick"] if args.quick else [])
        out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True,
                             timeout=1800).stdout
        got = json.loads(out.strip().splitlines()[-1])
        if got is not None:
            times[label], losses[label] = got["seconds"], got["first_loss"]
    _check_same_loss(name, losses)
    return times


def _time_one(args) -> None:
    """The child of ``--alone``: time one framework's step of one model; print it as JSON
    (null when that framework is not installed)."""
    name, label = args.models, args.only
    tf1 = h.optional_tf1() if label == "tensorflow 1.x" else None
    torch = h.optional_torch() if label == "pytorch eager" else None
    if torch is not None:
        torch.set_num_threads(THREADS)
    with threadpool_limits(THREADS):
        model = _build(name, label, MODELS[name][1](np.random.default_rng(0)), tf1, torch)
        if model is None:
            print("null")
            return
        seconds = h.compare({label: model.step}, repeat=h.repeats(args, 9), sample_s=0.5,
                            warmup=3)[label]
    print(json.dumps({"seconds": seconds, "first_loss": model.first_loss}))


def main() -> h.Result | None:
    global THREADS
    if "--device" in sys.argv and sys.argv[sys.argv.index("--device") + 1:][:1] == ["gpu"]:
        import bench_models_gpu  # the GPU suite: its own module and options

        argv = [a for a in sys.argv[1:] if a not in ("--device", "gpu")]
        sys.exit(bench_models_gpu.main(argv))
    args = _parse_args()
    THREADS = args.threads
    if args.only:
        return _time_one(args)
    how = "each alone in its own process" if args.alone else "interleaved"
    result = h.Result("models", f"15. Model training steps, dflab vs TF 1.x and PyTorch "
                                f"({THREADS} threads, {how})")
    tf1 = torch = None
    if not args.alone:
        tf1, torch = h.optional_tf1(), h.optional_torch()
        if torch is not None:
            torch.set_num_threads(THREADS)
    worst = None
    with threadpool_limits(THREADS):
        for name in args.models.split(","):
            times = (_times_alone(name, args) if args.alone
                     else _times_interleaved(name, args, tf1, torch))
            _add_rows(result, name, times)
            if "tensorflow 1.x" in times:
                ratio = times["dflab"] / times["tensorflow 1.x"]
                worst = max(worst or 0.0, ratio)
                goal = GOALS.get(name, TARGET_RATIO)
                result.notes.append(f"{name}: dflab / TF = {ratio:.2f}x (goal <= {goal:g}x)"
                                    f" -> {'met' if ratio <= goal else 'MISSED'}")
    result.target = f"every model: dflab / TensorFlow 1.x <= {TARGET_RATIO:g}x"
    result.measured = "TF not installed" if worst is None else f"worst {worst:.2f}x"
    result.met = None if worst is None else worst <= TARGET_RATIO
    h.report(result, args)
    return result


def _add_rows(result: h.Result, name: str, times: dict[str, float]) -> None:
    tf_s, np_s = times.get("tensorflow 1.x"), times.get("numpy by hand")
    for label in LABELS:
        seconds = times.get(label)
        if seconds is None:
            if label != "numpy by hand":
                result.add(f"{name}: {label}", None, "ms/step", "not installed")
            continue
        notes = [f"{seconds / tf_s:.2f}x TF" if tf_s else "",
                 f"{seconds / np_s:.2f}x numpy" if np_s else ""]
        result.add(f"{name}: {label}", seconds * 1e3, "ms/step", ", ".join(n for n in notes if n))


if __name__ == "__main__":
    main()
