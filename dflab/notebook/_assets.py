"""Where the built front-end lives: ``static/<widget>.js`` and ``static/widgets.css``.

The files are built from ``extension/`` (see extension/README.md) and shipped inside the package,
so installing dflab needs no Node. A missing file means a broken checkout or wheel; say how to
rebuild instead of failing later in the browser.
"""

from __future__ import annotations

import pathlib

STATIC = pathlib.Path(__file__).resolve().parent / "static"


def asset(name: str) -> pathlib.Path:
    path = STATIC / name
    if not path.is_file():
        raise FileNotFoundError(
            f"dflab's widget front-end {path} is missing; rebuild it with "
            "`cd extension && npm ci && npm run build`")
    return path


def esm(widget: str) -> pathlib.Path:
    return asset(f"{widget}.js")


CSS = "widgets.css"


def css() -> pathlib.Path:
    return asset(CSS)
