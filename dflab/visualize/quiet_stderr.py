"""Keep Fontconfig's start-up warnings off the user's screen.

The Graphviz bundled in pygraphviz's wheels carries its own (older) Fontconfig, which reads the
system's font configuration on the first layout of a process and complains, on file
descriptor 2, about elements it does not know (e.g. ``<reset-dirs>`` in recent Debian). In a
notebook that is a red block under the first drawing of every kernel, about nothing the user
did. The first layout therefore runs with descriptor 2 captured: Fontconfig's lines are
dropped and anything else written meanwhile is passed on to ``sys.stderr``.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading

_DONE = threading.Event()
_PREFIX = b"Fontconfig "


def _pass_on(captured: bytes) -> None:
    kept = b"".join(line for line in captured.splitlines(keepends=True)
                    if not line.startswith(_PREFIX))
    if kept:
        sys.stderr.write(kept.decode("utf-8", "replace"))
        sys.stderr.flush()


def first_call_without_fontconfig_warnings(fn):
    """``fn()``; on the first call in the process, with Fontconfig's warnings on descriptor 2
    dropped (later calls run plainly: Fontconfig reads its configuration once)."""
    if _DONE.is_set():
        return fn()
    try:
        saved = os.dup(2)
    except OSError:  # no descriptor 2 to capture (an embedded interpreter)
        _DONE.set()
        return fn()
    with tempfile.TemporaryFile() as sink:
        try:
            sys.stderr.flush()
        except (AttributeError, ValueError):
            pass
        os.dup2(sink.fileno(), 2)
        try:
            return fn()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            _DONE.set()
            sink.seek(0)
            _pass_on(sink.read())
