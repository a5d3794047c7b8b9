"""Classic TF1 programs on a GPU against the same machine's CPU: first run and warm steps.

Three programs in the form of the classic community examples (a ``dynamic_rnn`` LSTM over
variable-length sequences, a two-layer MLP, a small GAN), built unchanged but for
``import dflab as tf``, run with default placement (every op that has a GPU kernel on
``/gpu:0``) and with the GPU hidden (``device_count={"GPU": 0}``). Reported per program and
device: the **first run** (session, initialisation and the first training step: on a GPU with
an empty kernel cache this is where CuPy and NVRTC compile) and the **warm step** (median).
Goals (issue: GPU speed on real silicon): no program slower warm on the GPU than on the CPU;
the first run of ``dynamic_rnn`` on the GPU within 3 s of the CPU's.

Run the GPU side first in a fresh process with a fresh kernel cache for a cold figure
(``scripts/gpu-check`` points ``CUPY_CACHE_DIR`` at an empty folder).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import dflab as tf  # noqa: E402


def dynamic_rnn_program(rng):
    """The classic dynamic_rnn example: an LSTM over sequences of 1..20 steps, the output at
    each sequence's last step classified (batch 128, 64 hidden units, SGD)."""
    seq_max, hidden, batch = 20, 64, 128
    x = tf.placeholder(tf.float32, [None, seq_max, 1])
    y = tf.placeholder(tf.float32, [None, 2])
    seqlen = tf.placeholder(tf.int32, [None])
    w = tf.Variable(tf.random_normal([hidden, 2], seed=1))
    b = tf.Variable(tf.random_normal([2], seed=2))
    cell = tf.nn.rnn_cell.BasicLSTMCell(hidden)
    outputs, _ = tf.nn.dynamic_rnn(cell, x, dtype=tf.float32, sequence_length=seqlen)
    index = tf.range(0, tf.shape(outputs)[0]) * seq_max + (seqlen - 1)
    last = tf.gather(tf.reshape(outputs, [-1, hidden]), index)
    logits = tf.matmul(last, w) + b
    loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits_v2(logits=logits, labels=y))
    train = tf.train.GradientDescentOptimizer(0.01).minimize(loss)
    lengths = rng.integers(1, seq_max + 1, batch).astype(np.int32)
    feed = {x: rng.random((batch, seq_max, 1), dtype=np.float32),
            y: np.eye(2, dtype=np.float32)[rng.integers(0, 2, batch)], seqlen: lengths}
    return [train, loss], feed


def mlp_program(rng):
    """The classic neural_network example: 784-256-256-10, batch 128, Adam."""
    x = tf.placeholder(tf.float32, [None, 784])
    y = tf.placeholder(tf.float32, [None, 10])
    h = x
    for i, (m, n) in enumerate([(784, 256), (256, 256)]):
        h = tf.nn.relu(tf.matmul(h, tf.Variable(tf.random_normal([m, n], seed=i)))
                       + tf.Variable(tf.zeros([n])))
    logits = tf.matmul(h, tf.Variable(tf.random_normal([256, 10], seed=9)))
    loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits_v2(logits=logits, labels=y))
    train = tf.train.AdamOptimizer(1e-3).minimize(loss)
    feed = {x: rng.random((128, 784), dtype=np.float32),
            y: np.eye(10, dtype=np.float32)[rng.integers(0, 10, 128)]}
    return [train, loss], feed


def gan_program(rng):
    """The classic gan example: generator 100-256-784 and discriminator 784-256-1, batch 128,
    one Adam step for each network per training step."""
    def dense(h, m, n, name, act):
        w = tf.get_variable(f"{name}_w", [m, n], initializer=tf.glorot_uniform_initializer(1))
        b = tf.get_variable(f"{name}_b", [n], initializer=tf.zeros_initializer())
        return act(tf.matmul(h, w) + b)

    z = tf.placeholder(tf.float32, [None, 100])
    real = tf.placeholder(tf.float32, [None, 784])
    with tf.variable_scope("gen"):
        fake = dense(dense(z, 100, 256, "h", tf.nn.relu), 256, 784, "o", tf.nn.sigmoid)

    def disc(h, reuse):
        with tf.variable_scope("disc", reuse=reuse):
            return dense(dense(h, 784, 256, "h", tf.nn.relu), 256, 1, "o", tf.nn.sigmoid)

    d_real, d_fake = disc(real, False), disc(fake, True)
    g_loss = -tf.reduce_mean(tf.log(d_fake + 1e-8))
    d_loss = -tf.reduce_mean(tf.log(d_real + 1e-8) + tf.log(1.0 - d_fake + 1e-8))
    g_vars = tf.trainable_variables("gen")
    d_vars = tf.trainable_variables("disc")
    g_train = tf.train.AdamOptimizer(2e-4).minimize(g_loss, var_list=g_vars)
    d_train = tf.train.AdamOptimizer(2e-4).minimize(d_loss, var_list=d_vars)
    feed = {z: rng.uniform(-1, 1, (128, 100)).astype(np.float32),
            real: rng.random((128, 784), dtype=np.float32)}
    return [g_train, d_train, g_loss, d_loss], feed


PROGRAMS = {"dynamic_rnn": dynamic_rnn_program, "mlp": mlp_program, "gan": gan_program}


def measure(program, gpu: bool, steps: int = 30) -> tuple[float, float, float]:
    """(first run s, warm step s, first loss) of ``program`` with or without the GPU."""
    graph = tf.Graph()
    t0 = time.perf_counter()
    with graph.as_default():
        tf.set_random_seed(0)  # the initializers left unseeded draw the same on both devices
        fetches, feed = program(np.random.default_rng(0))
        init = tf.global_variables_initializer()
    config = tf.ConfigProto() if gpu else tf.ConfigProto(device_count={"GPU": 0})
    with tf.Session(graph=graph, config=config) as sess:
        sess.run(init)
        first = sess.run(fetches, feed)
        t_first = time.perf_counter() - t0
        samples = []
        for _ in range(steps):
            t = time.perf_counter()
            sess.run(fetches, feed)  # a fetch returns to the host: the step has finished
            samples.append(time.perf_counter() - t)
    return t_first, statistics.median(samples), float(first[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", default=",".join(PROGRAMS))
    parser.add_argument("--out", help="write the Markdown table here too")
    args = parser.parse_args(argv)
    from dflab.runtime.gpu import cupy_or_none

    have_gpu = cupy_or_none() is not None
    lines = ["| program | GPU first run | CPU first run | GPU warm step | CPU warm step | "
             "GPU / CPU warm | first losses |", "|---|---|---|---|---|---|---|"]
    print("\n".join(lines), flush=True)
    for name in args.programs.split(","):
        try:
            gpu = measure(PROGRAMS[name], True) if have_gpu else None
            cpu = measure(PROGRAMS[name], False)
        except Exception as e:  # noqa: BLE001 - report every program, even after a failure
            lines.append(f"| {name} | error: {type(e).__name__}: {str(e)[:100]} |||||")
            print(lines[-1], flush=True)
            continue
        if gpu is None:
            row = (f"| {name} | no GPU | {cpu[0]:.2f} s | | {cpu[1] * 1e3:.2f} ms | | |")
        else:
            same = np.isclose(gpu[2], cpu[2], rtol=1e-3)
            row = (f"| {name} | {gpu[0]:.2f} s | {cpu[0]:.2f} s | {gpu[1] * 1e3:.2f} ms | "
                   f"{cpu[1] * 1e3:.2f} ms | {gpu[1] / cpu[1]:.2f}x | "
                   f"{'equal' if same else f'DIFFER {gpu[2]} {cpu[2]}'} |")
        lines.append(row)
        print(row, flush=True)
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
