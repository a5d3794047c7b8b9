"""TensorFlow's error classes (``tf.errors``).

Every runtime failure is an ``OpError`` subclass carrying the failing node and, where known, the
user's file:line where that node was created, so a message points at the user's code rather than
at dflab's internals.
"""

from __future__ import annotations

import warnings

OK = 0
CANCELLED = 1
UNKNOWN = 2
INVALID_ARGUMENT = 3
DEADLINE_EXCEEDED = 4
NOT_FOUND = 5
ALREADY_EXISTS = 6
PERMISSION_DENIED = 7
RESOURCE_EXHAUSTED = 8
FAILED_PRECONDITION = 9
ABORTED = 10
OUT_OF_RANGE = 11
UNIMPLEMENTED = 12
INTERNAL = 13
UNAVAILABLE = 14
DATA_LOSS = 15
UNAUTHENTICATED = 16


# How an op's creation site is shown in error messages: ``(op) -> str`` or None for the raw
# ``file:line``. ``import dflab`` sets one, and ``%load_ext dflab`` its own, so that an op built
# in a cell reads as that cell ("Cell In[3], line 2"), not as IPython's temporary file name.
_site_formatter = None


def set_site_formatter(formatter) -> None:
    global _site_formatter
    _site_formatter = formatter


# How an error shows in IPython: ``(error) -> list of traceback lines`` (the user's frames and
# the message, dflab's own frames hidden), or None for IPython's full traceback. Filled by
# ``import dflab`` (the drawing layer above the framework formats it).
_traceback_renderer = None


def set_traceback_renderer(renderer) -> None:
    global _traceback_renderer
    _traceback_renderer = renderer


def _site_of(op) -> str:
    raw = getattr(op, "creation_site", None) or ""
    if _site_formatter is not None and raw:
        try:
            return _site_formatter(op) or raw
        except Exception:  # noqa: BLE001 - a display helper must never hide the real error
            return raw
    return raw


class OpError(Exception):
    """A failure while building or running an op; ``node_def``/``op`` name the culprit."""

    error_code = UNKNOWN

    def __init__(self, node_def=None, op=None, message: str = "", error_code: int | None = None):
        self.node_def = node_def
        self.op = op
        self.message = message
        if error_code is not None:
            self.error_code = error_code
        super().__init__(self._format())

    def _format(self) -> str:
        if self.op is None:
            return self.message
        where = _site_of(self.op)
        site = f" (defined at {where})" if where else ""
        return f"{self.message}\n\t [[node {self.op.name}{site}]]"

    def __str__(self) -> str:
        return self._format()

    def _render_traceback_(self) -> list:
        """The traceback lines IPython shows for this error."""
        if _traceback_renderer is None:
            import traceback

            return traceback.format_exception(type(self), self, self.__traceback__)
        return _traceback_renderer(self)


def _subclass(name: str, code: int) -> type:
    def init(self, node_def=None, op=None, message: str = "", *args, **kwargs):
        OpError.__init__(self, node_def, op, message, code)

    return type(name, (OpError,), {"__init__": init, "error_code": code})


CancelledError = _subclass("CancelledError", CANCELLED)
UnknownError = _subclass("UnknownError", UNKNOWN)
InvalidArgumentError = _subclass("InvalidArgumentError", INVALID_ARGUMENT)
DeadlineExceededError = _subclass("DeadlineExceededError", DEADLINE_EXCEEDED)
NotFoundError = _subclass("NotFoundError", NOT_FOUND)
AlreadyExistsError = _subclass("AlreadyExistsError", ALREADY_EXISTS)
PermissionDeniedError = _subclass("PermissionDeniedError", PERMISSION_DENIED)
ResourceExhaustedError = _subclass("ResourceExhaustedError", RESOURCE_EXHAUSTED)
FailedPreconditionError = _subclass("FailedPreconditionError", FAILED_PRECONDITION)
AbortedError = _subclass("AbortedError", ABORTED)
OutOfRangeError = _subclass("OutOfRangeError", OUT_OF_RANGE)
UnimplementedError = _subclass("UnimplementedError", UNIMPLEMENTED)
InternalError = _subclass("InternalError", INTERNAL)
UnavailableError = _subclass("UnavailableError", UNAVAILABLE)
DataLossError = _subclass("DataLossError", DATA_LOSS)
UnauthenticatedError = _subclass("UnauthenticatedError", UNAUTHENTICATED)

for _cls in list(globals().values()):
    if isinstance(_cls, type) and issubclass(_cls, OpError) and _cls is not OpError:
        _cls.__module__ = __name__

_CODE_TO_EXCEPTION_CLASS = {cls.error_code: cls for cls in list(globals().values())
                            if isinstance(cls, type) and issubclass(cls, OpError)
                            and cls is not OpError}
_EXCEPTION_CLASS_TO_CODE = {cls: code for code, cls in _CODE_TO_EXCEPTION_CLASS.items()}


def exception_type_from_error_code(error_code: int) -> type:
    """The OpError subclass for a canonical error code (KeyError for OK or an unknown code)."""
    return _CODE_TO_EXCEPTION_CLASS[error_code]


def error_code_from_exception_type(cls: type) -> int | None:
    """The canonical error code of an OpError subclass; None, with a warning, for any other
    class (OpError itself included), as TF does."""
    try:
        return _EXCEPTION_CLASS_TO_CODE[cls]
    except (KeyError, TypeError):
        warnings.warn("Unknown class exception", stacklevel=2)
        return None


__all__ = [n for n in dir() if (n.endswith("Error") or n.isupper()) and n[0] != "_"] + [
    "exception_type_from_error_code", "error_code_from_exception_type"]
