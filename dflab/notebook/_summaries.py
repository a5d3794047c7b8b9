"""Values as short text for tooltips and detail panels: dtype, shape and the first elements.

Computed in the kernel so the front-end only ever receives (and inserts as text) a bounded
string, whatever the size of the tensor.
"""

from __future__ import annotations

import numpy as np

MAX_ITEMS = 6
MAX_CHARS = 160


def _first_values(a: np.ndarray, max_items: int) -> str:
    flat = a.reshape(-1)[:max_items]
    if a.dtype.kind in "fc":
        items = [np.format_float_positional(x, precision=4, trim="-")
                 if a.dtype.kind == "f" else repr(complex(x)) for x in flat]
    else:
        items = [repr(x.item()) if hasattr(x, "item") else repr(x) for x in flat]
    more = ", …" if a.size > max_items else ""
    return "[" + ", ".join(items) + more + "]"


def summarize(value, max_items: int = MAX_ITEMS) -> str:
    """``float32[2,3] [0, 1, 2, 3, 4, 5]``; ``dead`` for None; a short repr for other objects."""
    if value is None:
        return "dead"
    if hasattr(value, "indices") and hasattr(value, "values"):  # IndexedSlicesValue
        return (f"IndexedSlices(values={summarize(value.values, max_items)}, "
                f"indices={summarize(value.indices, max_items)})")
    if isinstance(value, (np.ndarray, np.generic, bool, int, float, complex)):
        a = np.asarray(value)
        dims = ",".join(str(d) for d in a.shape)
        dtype = "string" if a.dtype.kind in "SUO" else a.dtype.name  # TF's name, not bytes224
        if a.ndim == 0:
            text = f"{dtype} {_first_values(a.reshape(1), 1)[1:-1]}"
        else:
            text = f"{dtype}[{dims}] {_first_values(a, max_items)}"
        if a.dtype.kind in "fc" and a.size and not np.all(np.isfinite(a)):
            text += "  (has inf/nan)"
    else:
        text = repr(value)
    return text if len(text) <= MAX_CHARS else text[: MAX_CHARS - 1] + "…"


def summarize_outputs(outputs) -> str:
    """All outputs of one node: one line per output (``:1`` etc. for the extra ones)."""
    outputs = tuple(outputs or ())
    if len(outputs) == 1:
        return summarize(outputs[0])
    return "\n".join(f":{i} {summarize(v)}" for i, v in enumerate(outputs)) or "(no outputs)"
