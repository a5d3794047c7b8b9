"""GPU benchmarks, side by side with raw CuPy and PyTorch (CUDA) when installed.

Needs a CUDA GPU with CuPy; prints a Markdown table (or writes it with ``--out``). Runs from a
source tree: ``PYTHONPATH=. python benchmarks/bench_gpu.py``. Figures and targets:

1. per-op launch overhead, a chain of 1,000 dependent adds on 1,000 float32: dflab per op
   <= 1.2x a loop of raw ``cupy.add`` calls, executed op by op and replayed as a CUDA graph;
2. an 8-op elementwise chain on 10^8 float32: fused >= 5x unfused, and >= 70% of the
   device's measured copy bandwidth (bytes read + written per second);
3. an MLP training step (784-4096-4096-10, SGD), batch 512 and 8192: <= 1.1x PyTorch eager;
   with whole-step replay (``dflab={"gpu_step_replay": True}``), faster than PyTorch eager at
   batch 512;
4. a 8192x8192 float32 matmul: equal to CuPy's (same cuBLAS call).

Timing: CUDA events around calls that end with a device synchronisation, medians of samples.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import dflab as tf  # noqa: E402

try:
    import torch
    HAVE_TORCH = torch.cuda.is_available()
except ImportError:  # pragma: no cover - optional
    torch, HAVE_TORCH = None, False


def timeit(fn, sync, repeat=11, number=None):
    """Median seconds per call of ``fn`` (each sample ends with ``sync()``)."""
    fn()
    sync()
    if number is None:
        t0 = time.perf_counter()
        fn()
        sync()
        number = max(1, int(0.2 / max(time.perf_counter() - t0, 1e-6)))
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        sync()
        samples.append((time.perf_counter() - t0) / number)
    return statistics.median(samples)


def _config(fuse=True, replay=False):
    # Replay off unless a benchmark asks for it: what is measured is the executed path.
    rw = tf.RewriterConfig(remapping=tf.RewriterConfig.DEFAULT if fuse else
                           tf.RewriterConfig.OFF)
    return tf.ConfigProto(graph_options=tf.GraphOptions(rewrite_options=rw),
                          dflab={"gpu_step_replay": replay})


def bench_launch(cp, rows):
    for replay in (False, True):
        _bench_launch(cp, rows, replay)


def _bench_launch(cp, rows, replay):
    n, size = 1000, 1000
    g = tf.Graph()
    with g.as_default(), tf.device("/gpu:0"):
        x = tf.Variable(np.ones(size, np.float32))
        one = tf.constant(np.ones(size, np.float32))
        y = x
        for _ in range(n):
            y = tf.add(y, one)
        target = y.op
        init = tf.global_variables_initializer()
    config = _config(fuse=False)
    config.dflab = dataclasses.replace(config.dflab, gpu_step_replay=replay)
    sess = tf.Session(graph=g, config=config)
    sess.run(init)
    gpu = sess.devices["GPU:0"]
    a, b = cp.ones(size, cp.float32), cp.ones(size, cp.float32)

    def raw():
        y = a
        for _ in range(n):
            y = cp.add(y, b)

    t_df = timeit(lambda: sess.run(target), gpu.sync) / n
    t_cp = timeit(raw, cp.cuda.Device().synchronize) / n
    label = "1,000-op chain, per op" + (", step replay" if replay else ", executed")
    rows.append((label, f"{t_df * 1e6:.2f} us", f"{t_cp * 1e6:.2f} us",
                 "", "<= 1.2x CuPy", t_df / t_cp <= 1.2))
    sess.close()


def bench_fusion(cp, rows):
    n = 10 ** 8
    x_np = np.random.default_rng(0).random(n, dtype=np.float32)
    results = {}
    for fuse in (True, False):
        g = tf.Graph()
        with g.as_default(), tf.device("/gpu:0"):
            x = tf.Variable(x_np)
            y = x
            for k in range(4):
                y = tf.tanh(y * 1.01 + 0.5) if k % 2 else tf.exp(-y) * 0.5 - 0.1
            out = tf.identity(y)
            keep = tf.reduce_sum(out)
            init = tf.global_variables_initializer()
        sess = tf.Session(graph=g, config=_config(fuse))
        sess.run(init)
        results[fuse] = timeit(lambda s=sess, k=keep: s.run(k.op), sess.devices["GPU:0"].sync,
                               repeat=5)
        if fuse:
            kernel = _fused_kernel_time(lambda s=sess, k=keep: s.run(k.op),
                                        sess.devices["GPU:0"].sync)
        sess.close()
    src = cp.asarray(x_np)
    dst = cp.empty_like(src)
    t_copy = timeit(lambda: dst.__setitem__(Ellipsis, src), cp.cuda.Device().synchronize)
    bw = 2 * src.nbytes / t_copy
    achieved = 2 * src.nbytes / results[True]  # one read and one write per element, fused
    if kernel is not None:  # the fused kernel alone: one read and one write of 10^8 float32
        rows.append(("8-op chain's fused kernel alone (CUPTI)", f"{kernel * 1e3:.2f} ms",
                     f"copy {t_copy * 1e3:.2f} ms", "", ">= 70% copy bandwidth",
                     2 * src.nbytes / kernel >= 0.7 * bw))
    rows.append(("8-op chain, 10^8 float32", f"fused {results[True] * 1e3:.1f} ms, unfused "
                 f"{results[False] * 1e3:.1f} ms", f"copy {t_copy * 1e3:.1f} ms", "",
                 ">= 5x unfused, >= 70% copy bandwidth",
                 results[False] / results[True] >= 5 and achieved >= 0.7 * bw))


def _fused_kernel_time(step, sync):
    """Seconds the step's longest fused kernel takes on the device (PyTorch's profiler sees
    CuPy's kernels through CUPTI), or None without PyTorch."""
    if not HAVE_TORCH:
        return None
    from torch.profiler import ProfilerActivity, profile

    step()
    sync()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
        sync()
    times = [getattr(e, "device_time", getattr(e, "cuda_time", 0.0)) for e in prof.events()
             if "fused" in e.name]
    return max(times) / 1e6 if times else None


def _mlp_step_time(x_np, y_np, widths, replay=False):
    """Seconds per SGD step of an MLP on /gpu:0 (data in variables: no feeds); with
    ``replay``, whole-step replay is on and the reason is returned if it did not apply."""
    rng = np.random.default_rng(0)
    g = tf.Graph()
    with g.as_default(), tf.device("/gpu:0"):
        x = tf.Variable(x_np, trainable=False)
        y = tf.Variable(y_np, trainable=False)
        h = x
        for k, (i, o) in enumerate(zip(widths[:-1], widths[1:])):
            w = tf.Variable(rng.normal(size=(i, o)).astype(np.float32) * 0.01)
            h = tf.matmul(h, w)
            h = tf.nn.relu(h) if k < len(widths) - 2 else h
        loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits_v2(labels=y, logits=h))
        step = tf.train.GradientDescentOptimizer(0.01).minimize(loss)
        init = tf.global_variables_initializer()
    config = _config()
    config.dflab = dataclasses.replace(config.dflab, gpu_step_replay=replay)
    with tf.Session(graph=g, config=config) as sess:
        sess.run(init)
        t = timeit(lambda: sess.run(step), sess.devices["GPU:0"].sync, repeat=7)
        part = next(p for p in sess._master._plans.values() if step in p.placement).parts[0]
        reason = part.replay_reason if replay else None
    return t, reason


def bench_mlp(cp, rows):
    widths = (784, 4096, 4096, 10)
    for batch in (512, 8192):
        rng = np.random.default_rng(0)
        x_np = rng.random((batch, 784), dtype=np.float32)
        y_np = np.eye(10, dtype=np.float32)[rng.integers(0, 10, batch)]
        t_df, _ = _mlp_step_time(x_np, y_np, widths)
        t_replay, why_not = _mlp_step_time(x_np, y_np, widths, replay=True)
        tt = None
        if HAVE_TORCH:
            dev = torch.device("cuda")
            model = torch.nn.Sequential(torch.nn.Linear(784, 4096, bias=False), torch.nn.ReLU(),
                                        torch.nn.Linear(4096, 4096, bias=False),
                                        torch.nn.ReLU(), torch.nn.Linear(4096, 10, bias=False))
            model.to(dev)
            opt = torch.optim.SGD(model.parameters(), lr=0.01)
            xt, yt = torch.tensor(x_np, device=dev), torch.tensor(y_np.argmax(1), device=dev)

            def torch_step(model=model, opt=opt, xt=xt, yt=yt):
                opt.zero_grad()
                torch.nn.functional.cross_entropy(model(xt), yt).backward()
                opt.step()

            tt = timeit(torch_step, torch.cuda.synchronize, repeat=7)
        t_torch = "" if tt is None else f"{tt * 1e3:.2f} ms"
        label = f"MLP step 784-4096-4096-10, batch {batch}"
        rows.append((label, f"{t_df * 1e3:.2f} ms", "", t_torch, "<= 1.1x PyTorch eager",
                     None if tt is None else t_df / tt <= 1.1))
        replayed = f"{t_replay * 1e3:.2f} ms" + ("" if why_not is None else
                                                 f" (not replayed: {why_not})")
        target = "< PyTorch eager" if batch == 512 else "(reported)"
        verdict = None if tt is None or batch != 512 else (why_not is None and t_replay < tt)
        rows.append((f"{label}, step replay", replayed, "", t_torch, target, verdict))


def bench_matmul(cp, rows):
    n = 8192
    a_np = np.random.default_rng(0).random((n, n), dtype=np.float32)
    g = tf.Graph()
    with g.as_default(), tf.device("/gpu:0"):
        a = tf.Variable(a_np)
        c = tf.matmul(a, a)
        init = tf.global_variables_initializer()
    sess = tf.Session(graph=g, config=_config())
    sess.run(init)
    t_df = timeit(lambda: sess.run(c.op), sess.devices["GPU:0"].sync, repeat=5)
    sess.close()
    a_cp = cp.asarray(a_np)
    t_cp = timeit(lambda: cp.matmul(a_cp, a_cp), cp.cuda.Device().synchronize, repeat=5)
    rows.append((f"matmul {n}x{n} float32", f"{t_df * 1e3:.2f} ms", f"{t_cp * 1e3:.2f} ms", "",
                 "equal to CuPy (<= 1.05x)", t_df / t_cp <= 1.05))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="write the Markdown table here too")
    args = parser.parse_args(argv)
    from dflab.runtime.gpu import cupy_or_none

    cp = cupy_or_none()
    if cp is None:
        print("No CUDA GPU with CuPy here: nothing measured.")
        return 2
    props = cp.cuda.runtime.getDeviceProperties(0)
    name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    rows: list = []
    # The fusion benchmark runs a profiler (CUPTI stays attached after it): last.
    for bench in (bench_launch, bench_mlp, bench_matmul, bench_fusion):
        try:
            bench(cp, rows)
        except Exception as e:  # noqa: BLE001 - report every benchmark, even after a failure
            rows.append((bench.__name__, f"error: {type(e).__name__}: {e}", "", "", "", False))
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"GPU: {name}; CuPy {cp.__version__}; "
             f"PyTorch {torch.__version__ if HAVE_TORCH else 'not installed'}; {when}", "",
             "| benchmark | dflab | CuPy | PyTorch | target | verdict |",
             "|---|---|---|---|---|---|"]
    for label, ours, cupy_t, torch_t, target, ok in rows:
        verdict = "n/a" if ok is None else ("met" if ok else "missed")
        lines.append(f"| {label} | {ours} | {cupy_t} | {torch_t} | {target} | {verdict} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
