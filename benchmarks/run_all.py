"""Run every benchmark, each in its own process, and summarise them as Markdown.

Usage: python benchmarks/run_all.py [--quick] [--markdown PATH]

Each benchmark prints its own table; this script then prints one summary (target, measured,
verdict) and, with --markdown, writes the full tables and the machine facts as a Markdown
report (the source of benchmarks/RESULTS.md). A separate process per benchmark keeps thread
pools, tracemalloc and memory high-water marks from leaking between them.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCHMARKS = [
    "bench_session_overhead.py",
    "bench_op_chain.py",
    "bench_mlp_step.py",
    "bench_inter_op.py",
    "bench_memory.py",
    "bench_while_loop.py",
    "bench_stepper_rewind.py",
    "bench_placement.py",
    "bench_partition.py",
    "bench_graph_layout.py",
    "bench_fusion.py",
    "bench_cluster.py",
    "bench_ray.py",
    "bench_sync_replicas.py",
    "bench_convergence.py",
    "bench_frontend.py",
    "bench_import.py",
    "bench_models.py",
    "bench_products.py",
    "bench_batch_norm.py",
    "bench_eager.py",
    "bench_rl.py",
]


def _fmt(value):
    if value is None:
        return "n/a"
    return f"{value:.3g}" if abs(value) < 10 else f"{value:,.1f}"


def _verdict(met):
    return {True: "met", False: "**missed**", None: "not judged"}[met]


def to_markdown(records: list[dict]) -> str:
    machine = records[0]["machine"] if records else {}
    lines = ["## Summary", "", "| benchmark | target | measured | verdict |", "|---|---|---|---|"]
    for rec in records:
        r = rec["result"]
        lines.append(f"| {r['title']} | {r['target']} | {r['measured']} | "
                     f"{_verdict(r['met'])} |")
    lines += ["", "## Machine", ""]
    lines += [f"* {k}: {v}" for k, v in machine.items()]
    for rec in records:
        r = rec["result"]
        lines += ["", f"## {r['title']}", "", "| candidate | value | unit | note |",
                  "|---|---:|---|---|"]
        for row in r["rows"]:
            lines.append(f"| {row['label']} | {_fmt(row['value'])} | {row['unit']} | "
                         f"{row['note']} |")
        lines += [""] + [f"* {n}" for n in r["notes"]]
    if any(rec["quick"] for rec in records):
        lines += ["", "_Quick run (--quick): too few samples for figures to quote._"]
    return "\n".join(lines).rstrip() + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--markdown", metavar="PATH", help="write the Markdown report to PATH")
    p.add_argument("only", nargs="*", help="run only these scripts (default: all)")
    args = p.parse_args()

    records, failed = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for script in args.only or BENCHMARKS:
            out = Path(tmp) / (Path(script).stem + ".json")
            cmd = [sys.executable, str(HERE / Path(script).name), "--json", str(out)]
            if args.quick:
                cmd.append("--quick")
            print(f"\n$ {' '.join(cmd[1:])}", flush=True)
            if subprocess.run(cmd).returncode != 0 or not out.exists():
                failed.append(script)
                continue
            records.append(json.loads(out.read_text(encoding="utf-8")))

    print("\nsummary")
    for rec in records:
        r = rec["result"]
        print(f"  {r['title']:<62} {r['measured']:>14}  {_verdict(r['met']).strip('*')}")
    for script in failed:
        print(f"  {script}: FAILED to run")
    if args.markdown:
        Path(args.markdown).write_text(to_markdown(records), encoding="utf-8")
        print(f"wrote {args.markdown}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
