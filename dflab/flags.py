"""``tf.flags`` (and ``tf.app.flags``): absl's flags, as TF 1.x exposed them.

Everything absl.flags exports, with two of TF's adjustments: the ``DEFINE_*`` functions also
take TF's old keyword names (``flag_name``, ``default_value``, ``docstring``), and ``FLAGS``
parses ``sys.argv`` by itself the first time a flag is read before any explicit parse
(absl raises ``UnparsedFlagAccessError`` there), so that a script reading its flags at module
level, or a notebook that never calls ``tf.app.run``, sees the defaults.
"""

from __future__ import annotations

import functools as _functools
import sys as _sys

from absl.flags import *  # noqa: F403 - the module re-exports absl's flags API
from absl.flags import FLAGS as _ABSL_FLAGS
from absl.flags import disclaim_key_flags

from dflab.platform import tf_logging as _logging

# This module's DEFINE wrappers must not make it the "key flags" module of the flags defined
# through them (absl's notion of which module a flag belongs to).
disclaim_key_flags()

_RENAMED_ARGUMENTS = {"flag_name": "name", "default_value": "default", "docstring": "help"}


def _accept_old_names(define):
    @_functools.wraps(define)
    def wrapper(*args, **kwargs):
        renamed = [old for old in _RENAMED_ARGUMENTS if old in kwargs]
        for old in renamed:
            kwargs[_RENAMED_ARGUMENTS[old]] = kwargs.pop(old)
        if renamed:
            _logging.warning("Use of the keyword argument names (flag_name, default_value, "
                             "docstring) is deprecated, please use (name, default, help) "
                             "instead.")
        return define(*args, **kwargs)

    return wrapper


_DEFINES = ("DEFINE", "DEFINE_alias", "DEFINE_bool", "DEFINE_boolean", "DEFINE_enum",
            "DEFINE_enum_class", "DEFINE_flag", "DEFINE_float", "DEFINE_integer",
            "DEFINE_list", "DEFINE_multi", "DEFINE_multi_enum", "DEFINE_multi_enum_class",
            "DEFINE_multi_float", "DEFINE_multi_integer", "DEFINE_multi_string",
            "DEFINE_spaceseplist", "DEFINE_string")
for _name in _DEFINES:
    globals()[_name] = _accept_old_names(globals()[_name])


class _FlagValuesWrapper:
    """absl's ``FLAGS``, parsing ``sys.argv`` on the first read of a flag before an explicit
    parse (an unknown flag there is an error, as in TF; ``tf.app.run`` tolerates them)."""

    def __init__(self, wrapped):
        self.__dict__["_wrapped"] = wrapped

    def __getattribute__(self, name):
        if name in ("__dict__", "__class__"):
            return super().__getattribute__(name)
        return self.__dict__["_wrapped"].__getattribute__(name)

    def __getattr__(self, name):
        wrapped = self.__dict__["_wrapped"]
        if not wrapped.is_parsed():
            wrapped(_sys.argv)
        return wrapped.__getattr__(name)

    def __setattr__(self, name, value):
        return self.__dict__["_wrapped"].__setattr__(name, value)

    def __delattr__(self, name):
        return self.__dict__["_wrapped"].__delattr__(name)

    def __dir__(self):
        return self.__dict__["_wrapped"].__dir__()

    def __getitem__(self, name):
        return self.__dict__["_wrapped"].__getitem__(name)

    def __setitem__(self, name, flag):
        return self.__dict__["_wrapped"].__setitem__(name, flag)

    def __len__(self):
        return self.__dict__["_wrapped"].__len__()

    def __iter__(self):
        return self.__dict__["_wrapped"].__iter__()

    def __str__(self):
        return self.__dict__["_wrapped"].__str__()

    def __call__(self, *args, **kwargs):
        return self.__dict__["_wrapped"].__call__(*args, **kwargs)


FLAGS = _FlagValuesWrapper(_ABSL_FLAGS)
