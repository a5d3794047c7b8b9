"""Shared plumbing for the benchmark scripts: timing, machine facts, optional frameworks, tables.

Timing method: every candidate is warmed up, then the candidates of one benchmark are sampled
*interleaved* (A, B, C, A, B, C, …) so that a noisy neighbour on a shared machine slows all of
them alike; each sample times a calibrated batch of calls, and the reported figure is the
median per-call time over the samples. BLAS and OpenMP pools are pinned with threadpoolctl by
the scripts, never left to whatever the machine has.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]

# A session splits big kernels on every core by default, as TensorFlow's does; a benchmark that
# holds NumPy to one BLAS thread gives dflab's sessions one intra-op thread too
# (``tf.ConfigProto(**ONE_THREAD)``).
ONE_THREAD = {"intra_op_parallelism_threads": 1}
if str(REPO) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(REPO))


# --- timing -------------------------------------------------------------------------------------

def run_workers(n: int, replica: Callable[[int], object], servers, *, timeout_s: float = 600,
                on_failure: Callable[[], object] | None = None) -> None:
    """Run ``replica(i)`` for each of ``n`` workers on its own thread, then stop ``servers``;
    re-raise the first worker's failure (``on_failure`` lets the others stop waiting)."""
    failures = []

    def run(i):
        try:
            replica(i)
        except BaseException as e:  # noqa: BLE001 - re-raised below
            failures.append(e)
            if on_failure is not None:
                on_failure()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout_s)
    finally:
        for s in servers:
            s.stop()
    if failures:
        raise failures[0]


def _calibrate(fn: Callable[[], object], sample_s: float) -> int:
    """Calls per sample so that one sample lasts about ``sample_s`` seconds."""
    number = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        elapsed = time.perf_counter() - t0
        if elapsed >= sample_s / 4 or number >= 1 << 20:
            return max(1, int(number * sample_s / max(elapsed, 1e-9)))
        number *= 4


def compare(candidates: dict[str, Callable[[], object]], *, repeat: int = 15,
            sample_s: float = 0.05, warmup: int = 3, settle_s: float = 0.0) -> dict[str, float]:
    """Median seconds per call of each candidate, sampled interleaved. ``settle_s``: an
    untimed pause before each sample, long enough for the previous candidate's idle worker
    threads to stop spinning. Frameworks keep their thread pools' workers busy-waiting for a
    while after each parallel call (OpenBLAS for about 0.1 s), and on a machine with few cores
    such a spinner takes a core from whatever runs next: without the pause, TensorFlow's CNN
    step measured 48-62 ms interleaved with the others, against 37.5 ms alone."""
    for fn in candidates.values():
        for _ in range(warmup):
            fn()
    numbers = {name: _calibrate(fn, sample_s) for name, fn in candidates.items()}
    samples: dict[str, list[float]] = {name: [] for name in candidates}
    for _ in range(repeat):
        for name, fn in candidates.items():
            n = numbers[name]
            if settle_s:
                time.sleep(settle_s)
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            samples[name].append((time.perf_counter() - t0) / n)
    return {name: statistics.median(s) for name, s in samples.items()}


# --- optional frameworks ------------------------------------------------------------------------

def optional_tf1():
    """``tensorflow.compat.v1`` in graph mode, or None when TensorFlow is not installed."""
    try:
        import tensorflow.compat.v1 as tf1  # type: ignore[import-not-found]
    except Exception:  # noqa: BLE001 - absent or broken install: skip the column
        return None
    tf1.disable_eager_execution()
    return tf1


def optional_torch():
    try:
        import torch  # type: ignore[import-not-found]
    except Exception:  # noqa: BLE001
        return None
    torch.set_num_threads(1)
    return torch


# --- machine facts ------------------------------------------------------------------------------

def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git_revision() -> str:
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO,
                             capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=REPO, capture_output=True, text=True).stdout.strip()
        return rev + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _blas() -> str:
    from threadpoolctl import threadpool_info

    libs = [
        f"{i.get('internal_api')} {i.get('version') or ''} "
        f"({i.get('architecture') or '?'}, {i.get('threading_layer') or '?'})"
        for i in threadpool_info() if i.get("user_api") == "blas"
    ]
    return ", ".join(sorted(set(libs))) or "unknown"


def _host_kernels() -> str:
    """The library dflab's heavy host kernels run on (oneDNN, or NumPy's when it is absent);
    older trees without the backend say so."""
    try:
        from dflab.kernels import onednn
    except ImportError:
        return "NumPy (no oneDNN backend in this tree)"
    return onednn.status()


def machine_info() -> dict:
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    return {
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": _cpu_model(),
        "cores": f"{os.cpu_count()} logical, {usable} usable",
        "python": platform.python_version(),
        "numpy": np.__version__,
        "blas": _blas(),
        "kernels": _host_kernels(),
        "os": f"{platform.system()} {platform.release()}",
        "dflab": _git_revision(),
    }


# --- results and tables -------------------------------------------------------------------------

@dataclass
class Row:
    label: str
    value: float | None  # None: column not available (framework not installed)
    unit: str
    note: str = ""


@dataclass
class Result:
    name: str
    title: str
    rows: list[Row] = field(default_factory=list)
    target: str = ""
    measured: str = ""  # the figure the target is about, formatted
    met: bool | None = None
    notes: list[str] = field(default_factory=list)

    def add(self, label: str, value: float | None, unit: str, note: str = "") -> None:
        self.rows.append(Row(label, value, unit, note))


def _fmt(value: float | None) -> str:
    if value is None:
        return "n/a"
    if value == 0 or 0.01 <= abs(value) < 1e6:
        return f"{value:.3g}" if abs(value) < 10 else f"{value:,.1f}"
    return f"{value:.3e}"


def format_table(result: Result) -> str:
    width = max(len(r.label) for r in result.rows) if result.rows else 10
    lines = [result.title, "-" * len(result.title)]
    for r in result.rows:
        lines.append(f"  {r.label:<{width}}  {_fmt(r.value):>10} {r.unit:<8} {r.note}".rstrip())
    if result.target:
        verdict = {True: "MET", False: "MISSED", None: "not judged"}[result.met]
        lines.append(f"  target: {result.target}; measured {result.measured} -> {verdict}")
    lines.extend(f"  note: {n}" for n in result.notes)
    return "\n".join(lines)


def format_machine(info: dict) -> str:
    return "\n".join(f"  {k:<7} {v}" for k, v in info.items())


def parse_args(description: str) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--quick", action="store_true", help="few samples: a smoke run, not figures")
    p.add_argument("--json", metavar="PATH", help="also write the result as JSON to PATH")
    return p.parse_args()


def report(result: Result, args: argparse.Namespace) -> None:
    """Print the table and the machine facts; write JSON if asked; log to benchmarks/out/."""
    info = machine_info()
    print(format_table(result))
    print("machine:")
    print(format_machine(info))
    record = {"result": asdict(result), "machine": info, "quick": bool(args.quick)}
    if args.json:
        Path(args.json).write_text(json.dumps(record, indent=1), encoding="utf-8")
    out = REPO / "benchmarks" / "out"
    out.mkdir(exist_ok=True)
    with open(out / "history.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")


def repeats(args: argparse.Namespace, full: int) -> int:
    return 3 if args.quick else full
