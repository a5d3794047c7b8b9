"""An op error as a notebook reader needs it: the user's frames and TensorFlow's message.

IPython shows an exception's ``_render_traceback_()`` instead of its own traceback; ``OpError``
asks ``render`` (installed by ``import dflab``), so this holds whether or not ``%load_ext
dflab`` ran. ``render`` keeps the frames of the user's code (notebook cells, the user's own
files) and drops the rest (dflab's engine, IPython's machinery, the standard library, installed
packages), formats what is left with IPython's own formatter in its current ``%xmode`` (a cell
reads ``Cell In[3], line 2`` with its lines), and ends with one line saying how many frames
were hidden and how to see them. The message itself names the op and where it was made.

Invariant: it never hides everything. With ``%xmode Verbose``, or when no frame is the user's,
it gives IPython's full traceback (outside IPython, Python's).
"""

from __future__ import annotations

import os
import sys
import sysconfig
import traceback
import types

_DFLAB_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
# Where code that is not the user's lives: the interpreter's libraries and installed packages.
_LIBRARY_DIRS = tuple(sorted({os.path.join(os.path.realpath(p), "") for p in (
    sysconfig.get_paths().get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")) if p}))


def _shell():
    ipython = sys.modules.get("IPython")  # only when IPython already runs this code
    return ipython.get_ipython() if ipython is not None else None


def _is_users(frame, shell) -> bool:
    """Whether ``frame`` runs the user's code: a notebook cell, or a file of the user's."""
    name = frame.f_code.co_filename
    if shell.compile.format_code_name(name) is not None:
        return True  # a cell (IPython compiled it under a generated file name)
    if name.startswith("<") or name.startswith(_DFLAB_DIR):
        return False
    return not os.path.realpath(name).startswith(_LIBRARY_DIRS)


def render(error: BaseException) -> list[str]:
    """IPython's traceback lines for ``error`` with only the user's frames (see the module
    docstring)."""
    shell = _shell()
    formatter = getattr(shell, "InteractiveTB", None)
    if formatter is None:
        return traceback.format_exception(type(error), error, error.__traceback__)
    if formatter.mode == "Verbose":  # the full traceback is asked for
        return formatter.structured_traceback(type(error), error, error.__traceback__)
    frames, hidden = [], 0
    tb = error.__traceback__
    while tb is not None:
        if _is_users(tb.tb_frame, shell):
            frames.append(tb)
        else:
            hidden += 1
        tb = tb.tb_next
    if not frames:  # then the full traceback says more
        return formatter.structured_traceback(type(error), error, error.__traceback__)
    users = None
    for t in reversed(frames):
        users = types.TracebackType(users, t.tb_frame, t.tb_lasti, t.tb_lineno)
    # Only this error: the exceptions it replaced inside dflab are internals too.
    saved = error.__cause__, error.__context__, error.__suppress_context__
    error.__cause__, error.__suppress_context__ = None, True
    try:
        lines = formatter.structured_traceback(type(error), error, users, tb_offset=0)
    finally:
        error.__cause__, error.__context__, error.__suppress_context__ = saved
    if hidden:
        lines = [*lines, f"({hidden} frames of dflab and libraries hidden: %xmode Verbose "
                         "shows them)"]
    return lines
