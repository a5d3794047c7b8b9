"""Benchmark 14: wall time of ``import dflab`` in a fresh interpreter (target <= 0.5 s).

Every notebook kernel, test process and command-line tool pays this once. Each sample starts a
new Python process that imports the package and reports ``time.perf_counter()`` around the
import; the baseline is the same process importing NumPy alone (dflab's floor, since it needs
NumPy). Samples alternate between the two, after one warm-up import that writes the bytecode
caches, and the figure is the median. Also lists the
slowest modules of one ``-X importtime`` run, to show where the time goes.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys

import _harness as h

TARGET_S = 0.5
_TIMED = ("import time; t0 = time.perf_counter(); import {mod}; "
          "print(time.perf_counter() - t0)")


def _env() -> dict:
    """The child's environment: this checkout first on the path, and bytecode caching on (a
    user's interpreter writes and reuses ``__pycache__``; with PYTHONDONTWRITEBYTECODE set,
    as in some sandboxes, every import would recompile every module and time the compiler)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = os.pathsep.join([str(h.REPO), os.environ.get("PYTHONPATH", "")])
    return env


def _fresh_import(module: str) -> float:
    out = subprocess.run([sys.executable, "-c", _TIMED.format(mod=module)], env=_env(),
                         capture_output=True, text=True, check=True).stdout
    return float(out.strip().splitlines()[-1])


def _slowest_modules(count: int = 5) -> list[str]:
    """The ``count`` dflab modules with the largest self time in one ``-X importtime`` run."""
    env = _env()
    err = subprocess.run([sys.executable, "-X", "importtime", "-c", "import dflab"], env=env,
                         capture_output=True, text=True, check=True).stderr
    rows = []
    for line in err.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[0].startswith("import time:") and "self" not in line:
            rows.append((int(parts[0].split(":")[1]), parts[2].strip()))
    rows.sort(reverse=True)
    return [f"{name} {us / 1e3:.0f} ms" for us, name in rows[:count]]


def main() -> h.Result:
    args = h.parse_args(__doc__.splitlines()[0])
    result = h.Result("import", "14. import dflab in a fresh process")
    samples: dict[str, list[float]] = {"numpy": [], "dflab": []}
    for module in samples:  # warm-up: writes the bytecode caches, fills the OS file cache
        _fresh_import(module)
    for _ in range(h.repeats(args, 11)):
        for module in samples:
            samples[module].append(_fresh_import(module))
    numpy_s = statistics.median(samples["numpy"])
    dflab_s = statistics.median(samples["dflab"])
    result.add("import numpy", numpy_s * 1e3, "ms", "the floor")
    result.add("import dflab (numpy included)", dflab_s * 1e3, "ms",
               f"{dflab_s / numpy_s:.1f}x numpy")
    result.target = f"import dflab <= {TARGET_S:g} s"
    result.measured = f"{dflab_s:.2f} s"
    result.met = dflab_s <= TARGET_S
    result.notes.append("slowest modules (self time, one -X importtime run): "
                        + ", ".join(_slowest_modules()))
    h.report(result, args)
    return result


if __name__ == "__main__":
    main()
