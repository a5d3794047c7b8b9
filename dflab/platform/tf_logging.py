"""``tf.logging`` (TF 1.x): verbosity levels and messages, on Python's ``logging`` under the
logger named "dflab", so classic programs' ``tf.logging.set_verbosity(tf.logging.INFO)`` and
``tf.logging.info(...)`` work and a notebook can route the messages as it routes any logger's.
"""

from __future__ import annotations

import logging as _logging
import sys

DEBUG = _logging.DEBUG
INFO = _logging.INFO
WARN = _logging.WARN
ERROR = _logging.ERROR
FATAL = _logging.FATAL

_logger = _logging.getLogger("dflab")
_counts: dict = {}


def _handler_installed() -> None:
    if not _logger.handlers:
        h = _logging.StreamHandler(sys.stderr)
        h.setFormatter(_logging.Formatter("%(levelname)s:dflab:%(message)s"))
        _logger.addHandler(h)


def get_logger():
    return _logger


def set_verbosity(v) -> None:
    _handler_installed()
    _logger.setLevel(v)


def get_verbosity() -> int:
    return _logger.getEffectiveLevel()


def log(level, msg, *args, **kwargs) -> None:
    _handler_installed()
    _logger.log(level, msg, *args, **kwargs)


def debug(msg, *args, **kwargs) -> None:
    log(DEBUG, msg, *args, **kwargs)


def info(msg, *args, **kwargs) -> None:
    log(INFO, msg, *args, **kwargs)


def warning(msg, *args, **kwargs) -> None:
    log(WARN, msg, *args, **kwargs)


warn = warning


def error(msg, *args, **kwargs) -> None:
    log(ERROR, msg, *args, **kwargs)


def fatal(msg, *args, **kwargs) -> None:
    log(FATAL, msg, *args, **kwargs)


def vlog(level, msg, *args, **kwargs) -> None:
    log(level, msg, *args, **kwargs)


def _caller_key():
    f = sys._getframe(3)
    return f.f_code.co_filename, f.f_lineno


def log_every_n(level, msg, n, *args) -> None:
    """Log on the 1st, (n+1)th, (2n+1)th … call from the same line."""
    key = _caller_key()
    count = _counts.get(key, 0)
    _counts[key] = count + 1
    if count % max(int(n), 1) == 0:
        log(level, msg, *args)


def log_first_n(level, msg, n, *args) -> None:
    """Log only the first ``n`` calls from the same line."""
    key = _caller_key()
    count = _counts.get(key, 0)
    _counts[key] = count + 1
    if count < n:
        log(level, msg, *args)


def log_if(level, msg, condition, *args) -> None:
    if condition:
        log(level, msg, *args)


def flush() -> None:
    for h in _logger.handlers:
        h.flush()
