"""``MemoryTable``: per-device memory figures (``memory_summary``, ``Session.memory_stats``)
that display as a table with readable sizes, in a terminal and in a notebook."""

from __future__ import annotations

import html


class MemoryTable(dict):
    """``{device: {figure: value}}`` (what ``memory_summary`` and ``Session.memory_stats``
    return), shown as a table with readable sizes instead of a raw dict: one row per device,
    one column per figure. Still a plain dict to code."""

    def _columns(self) -> list[str]:
        cols: list[str] = []
        for figures in self.values():
            cols += [k for k in figures if k not in cols]
        return cols

    def _rows(self) -> list[list[str]]:
        cols = self._columns()
        return [[_short_device(d)] + [_figure(c, figures.get(c)) for c in cols]
                for d, figures in self.items()]

    def __str__(self) -> str:
        table = [["device", *self._columns()], *self._rows()]
        widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
        lines = ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in
                           enumerate(zip(row, widths))) for row in table]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        head = "".join(f"<th style='text-align:left'>{html.escape(c)}</th>"
                       for c in ["device", *self._columns()])
        body = "".join("<tr>" + "".join(f"<td style='text-align:left'>{html.escape(c)}</td>"
                                        for c in row) + "</tr>" for row in self._rows())
        return (f"<table class='dflab-memory'><thead><tr>{head}</tr></thead>"
                f"<tbody>{body}</tbody></table>")

    def _repr_pretty_(self, printer, cycle) -> None:
        printer.text(str(self))


def _short_device(name: str) -> str:
    return name.rsplit("device:", 1)[-1] if "device:" in name else name


def _figure(column: str, value) -> str:
    if value is None:
        return "-"
    if ("bytes" in column or column.endswith("_size")) and isinstance(value, (int, float)):
        return _readable_bytes(value)
    return str(value)


def _readable_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"
