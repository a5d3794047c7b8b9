"""How an adapted tutorial reports its numbers: ``record(name=value, ...)`` appends them to
the JSON file named by ``$TUTORIAL_RESULTS`` (nothing happens when it is unset)."""

from __future__ import annotations

import json
import os


def record(**values) -> None:
    path = os.environ.get("TUTORIAL_RESULTS")
    if not path:
        return
    data = {}
    if os.path.exists(path):
        with open(path) as f:
            data = json.load(f)
    data.update({k: float(v) for k, v in values.items()})
    with open(path, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
