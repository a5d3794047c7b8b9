"""The model suite on a GPU: ``python benchmarks/bench_models.py --device gpu``.

The CNN, PTB-small LSTM, MLP and word2vec steps of ``bench_models`` at batch 64 and 512, each
under dflab with whole-step replay (the default) and without, PyTorch eager and PyTorch with
its step captured as a CUDA graph (``torch.cuda.graphs``), from the same weights; each
framework's first loss is checked against dflab's. Timing: CUDA-synchronised medians. Writes a
Markdown table (``--out``) naming the card; sized to fit ``scripts/gpu-check``'s 8 minutes.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import functools
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_models as bm  # noqa: E402

import dflab  # noqa: E402

BATCHES = (64, 512)
GOALS = {"cnn": {64: 1.5, 512: 1.2}, "mlp": {64: 1.1, 512: 1.1}, "lstm": {64: 1.5, 512: 1.5},
         "word2vec": {64: 1.5, 512: 1.5}}


def _time(step, sync, budget_s=1.0, repeat=5) -> float:
    step()
    sync()
    t0 = time.perf_counter()
    step()
    sync()
    n = max(1, int(budget_s / repeat / max(time.perf_counter() - t0, 1e-6)))
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(n):
            step()
        sync()
        samples.append((time.perf_counter() - t0) / n)
    return statistics.median(samples)


@contextlib.contextmanager
def _batch(batch):
    """The suite's batch sizes set to ``batch`` while a row is built, timed and profiled (the
    builders and their data read them; word2vec's loss divides by its)."""
    import bench_mlp_step

    names = [(bm, "CNN_BATCH"), (bm, "LM_BATCH"), (bm, "W2V_BATCH"), (bench_mlp_step, "BATCH")]
    saved = [getattr(m, n) for m, n in names]
    for m, n in names:
        setattr(m, n, batch)
    try:
        yield
    finally:
        for (m, n), v in zip(names, saved):
            setattr(m, n, v)


def _with_batch(name, rng):
    """The model's weights and inputs at the current batch (``_batch``)."""
    return bm.MODELS[name][1](rng)


def _dflab_model(name, data, replay):
    build = bm.MODELS[name][2]

    def session(tf_, graph, init):
        sess = tf_.Session(graph=graph, config=tf_.ConfigProto(
            dflab={"gpu_step_replay": replay}))
        sess.run(init)
        return sess

    original = bm._session
    bm._session = session
    try:
        return build(dflab, *data)
    finally:
        bm._session = original


def _torch_models(torch, name, data):
    """PyTorch eager and CUDA-graph steps on the GPU, built by the CPU suite's builders with
    the default device set to the GPU (host arrays from ``from_numpy`` moved there)."""
    original_from = torch.from_numpy
    torch.set_default_device("cuda")
    torch.from_numpy = lambda x: original_from(x).to("cuda")
    try:
        eager = bm.MODELS[name][3](torch, *data)
        # The graph is captured from a model of its own: replaying it rewrites the tensors
        # it captured (an LSTM's carried state), which the eager model's later steps (the
        # profiled ones) would otherwise find changed under them. Its Adam is built
        # capturable (its step count on the device), which a CUDA graph requires.
        adam = torch.optim.Adam
        torch.optim.Adam = functools.partial(adam, capturable=True)
        try:
            graphed = bm.MODELS[name][3](torch, *data)
        finally:
            torch.optim.Adam = adam
    finally:
        torch.from_numpy = original_from
    graph_step = None
    try:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(3):
                graphed.step()
        torch.cuda.current_stream().wait_stream(stream)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            graphed.step()
        # The replay holds the model: the graph reads and writes its tensors' memory, which
        # the caching allocator would hand to other tensors once the model were freed.
        graph_step = functools.partial(_replay, g, graphed)
    except Exception as e:  # noqa: BLE001 - reported as not capturable
        graph_step = str(e).splitlines()[0][:80]
    return eager, graph_step


def _replay(graph, model) -> None:
    """One replay of ``graph``, captured from ``model`` (kept alive by this call's binding)."""
    graph.replay()


def _kernels_per_step(step, sync, n=3, top=False) -> str:
    """Kernels, copies and sets, and GPU busy time per step of ``step``, as CUPTI sees them
    through PyTorch's profiler (it sees CuPy's and cuDNN's kernels too, not only PyTorch's);
    ``top`` also prints the kernels that take the most time."""
    try:
        from torch.profiler import ProfilerActivity, profile

        step()
        sync()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(n):
                step()
            sync()
    except Exception as e:  # noqa: BLE001 - a profiler failure does not lose the timing
        return f"profiler: {type(e).__name__}: {e}"[:80]
    events = [e for e in prof.events() if str(e.device_type).endswith("CUDA")]
    copies = [e for e in events if e.name.startswith(("Memcpy", "Memset"))]
    times: dict = {}
    for e in events:
        times[e.name] = times.get(e.name, 0.0) + getattr(e, "device_time",
                                                        getattr(e, "cuda_time", 0.0))
    if top:
        for name, t in sorted(times.items(), key=lambda kv: -kv[1])[:8]:
            print(f"    {t / n / 1e3:7.3f} ms  {name[:110]}", flush=True)
    return (f"{(len(events) - len(copies)) / n:.0f} kernels, {len(copies) / n:.0f} copies, "
            f"{sum(times.values()) / n / 1e3:.2f} ms busy")


def _row(name, batch, sync, torch, later) -> dict:
    """One model at one batch: dflab with and without replay, PyTorch eager and graphed."""
    data = _with_batch(name, np.random.default_rng(0))
    row = {"model": f"{name}, batch {batch}"}
    firsts = {}
    for label, replay in (("dflab", True), ("dflab, no replay", False)):
        try:
            m = _dflab_model(name, data, replay)
            firsts[label] = m.first_loss
            row[label] = _time(m.step, sync)
            later.append((row, f"{label} kernels", m.step, sync, m.session.close))
            if replay:  # the plan the timed steps ran: the last one built
                part = list(m.session._master._plans.values())[-1].parts[0]
                row["replay"] = part.replay_reason or "replayed"
        except Exception as e:  # noqa: BLE001 - one failure does not end the suite
            row[label] = f"error: {type(e).__name__}: {e}"[:120]
    if torch is not None:
        try:
            eager, graphed = _torch_models(torch, name, data)
            firsts["pytorch"] = eager.first_loss
            row["pytorch eager"] = _time(eager.step, torch.cuda.synchronize)
            later.append((row, "pytorch kernels", eager.step, torch.cuda.synchronize, None))
            row["pytorch graph"] = (_time(graphed, torch.cuda.synchronize)
                                    if callable(graphed) else graphed)
        except Exception as e:  # noqa: BLE001
            row["pytorch eager"] = f"error: {type(e).__name__}: {e}"[:120]
    ref = firsts.get("dflab")
    row["first losses"] = ("equal" if ref is not None and all(
        np.isclose(v, ref, rtol=2e-3) for v in firsts.values() if np.isfinite(v))
        else f"DIFFER {firsts}")
    return row


def run(models, out_path=None) -> str:
    from dflab.runtime.gpu import cupy_or_none

    cp = cupy_or_none()
    if cp is None:
        return "No CUDA GPU with CuPy here: nothing measured.\n"
    try:
        import torch
        have_torch = torch.cuda.is_available()
    except ImportError:
        torch, have_torch = None, False
    props = cp.cuda.runtime.getDeviceProperties(0)
    card = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    sync = cp.cuda.Device().synchronize
    rows, later = [], []  # later: steps profiled once every timing is taken
    for name in models:
        for batch in BATCHES:
            with _batch(batch):
                rows.append(_row(name, batch, sync, torch if have_torch else None, later))
            print({k: (f"{v * 1e3:.3f} ms" if isinstance(v, float) else v)
                   for k, v in rows[-1].items()}, flush=True)
    # CUPTI stays attached once a profiler has run, which would slow every later launch: the
    # kernels are counted after all the timings.
    for row, key, step, sync_, close in later:
        if have_torch:
            if row["model"].startswith("cnn"):
                print(f"{row['model']}, {key}: the kernels taking the most time", flush=True)
            row[key] = _kernels_per_step(step, sync_, top=row["model"].startswith("cnn"))
        if close is not None:
            close()
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"GPU: {card}; CuPy {cp.__version__}; PyTorch "
             f"{torch.__version__ if have_torch else 'not installed'}; {when}", "",
             "| model | dflab | dflab, no replay | PyTorch eager | PyTorch CUDA graph | "
             "dflab / eager (goal) | replay | first losses |", "|---|---|---|---|---|---|---|---|"]

    def ms(v):
        return f"{v * 1e3:.2f} ms" if isinstance(v, float) else str(v or "")

    for r in rows:
        name, batch = r["model"].split(", batch ")
        ratio = ""
        if isinstance(r.get("dflab"), float) and isinstance(r.get("pytorch eager"), float):
            goal = GOALS[name][int(batch)]
            x = r["dflab"] / r["pytorch eager"]
            ratio = f"{x:.2f}x (<= {goal}x: {'met' if x <= goal else 'missed'})"
        lines.append(f"| {r['model']} | {ms(r.get('dflab'))} | {ms(r.get('dflab, no replay'))} "
                     f"| {ms(r.get('pytorch eager'))} | {ms(r.get('pytorch graph'))} | {ratio} "
                     f"| {r.get('replay', '')} | {r['first losses']} |")
    lines += ["", "Per step, as CUPTI sees it (PyTorch's profiler): kernels, copies and sets, "
              "GPU busy time.", "", "| model | dflab | dflab, no replay | PyTorch eager |",
              "|---|---|---|---|"]
    lines += [f"| {r['model']} | {r.get('dflab kernels', '')} | "
              f"{r.get('dflab, no replay kernels', '')} | {r.get('pytorch kernels', '')} |"
              for r in rows]
    text = "\n".join(lines) + "\n"
    if out_path:
        Path(out_path).write_text(text)
    return text


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # The CNN and MLP first: the figures the GPU goals name.
    p.add_argument("--models", default="cnn,mlp,lstm,word2vec")
    p.add_argument("--out")
    args, _ = p.parse_known_args(argv)
    print(run(args.models.split(","), args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
