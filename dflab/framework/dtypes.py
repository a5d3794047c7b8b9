"""Data types (``tf.float32`` …): a thin, interned wrapper over NumPy dtypes.

Invariant: there is exactly one ``DType`` object per type, so two ``DType``s are equal exactly
when they are the same object, and the objects can be used as dict keys in plans and caches.
As in TF, a ``DType`` also equals what names its type (``tf.float32 == np.float32``, ``==
"float32"``, ``== np.dtype("float32")``, ``== float``; TF's conversions for comparison, not
``as_dtype``'s), while hashing, as TF's does, by the type alone: equal ``DType``s hash
alike, a NumPy type equal to one need not. The hash is the object's own (one object per
type), which keeps a kernel-cache key's hash in C on the eager fast path.
"""

from __future__ import annotations

import builtins as _builtins

import numpy as np


class DType:
    __slots__ = ("name", "_np", "_ref")

    def __init__(self, name: str, np_type, is_ref: bool = False):
        self.name = name
        self._np = np.dtype(np_type)
        self._ref = is_ref

    # --- TF1 attributes -------------------------------------------------------------------
    @property
    def as_numpy_dtype(self):
        return self._np.type

    @property
    def base_dtype(self) -> DType:
        return _BY_NAME[self.name[:-4]] if self._ref else self

    @property
    def is_ref_dtype(self) -> bool:
        return self._ref

    def _as_ref(self) -> DType:
        return self if self._ref else _REF[self.name]

    @property
    def is_floating(self) -> bool:
        return self._np.kind == "f"

    @property
    def is_integer(self) -> bool:
        return self._np.kind in "iu"

    @property
    def is_unsigned(self) -> bool:
        return self._np.kind == "u"

    @property
    def is_bool(self) -> bool:
        return self._np.kind == "b"

    @property
    def is_complex(self) -> bool:
        return self._np.kind == "c"

    @property
    def is_numeric(self) -> bool:
        return self._np.kind in "iufc"

    @property
    def size(self) -> int:
        return self._np.itemsize

    @property
    def min(self):
        return np.finfo(self._np).min if self.is_floating else np.iinfo(self._np).min

    @property
    def max(self):
        return np.finfo(self._np).max if self.is_floating else np.iinfo(self._np).max

    def is_compatible_with(self, other) -> bool:
        return self.base_dtype is as_dtype(other).base_dtype

    def __eq__(self, other) -> bool:
        if other is self:
            return True
        if type(other) is DType:
            return False
        return _comparable(other) is self

    def __ne__(self, other) -> bool:
        return not self.__eq__(other)

    __hash__ = object.__hash__  # one object per type: TF's hash by type, kept in C

    def __repr__(self) -> str:
        return f"tf.{self.name}"

    def __str__(self) -> str:
        return f"<dtype: {self.name!r}>"

    def __reduce__(self):
        return as_dtype, (self.name,)


_SPECS = [
    ("float16", np.float16), ("float32", np.float32), ("float64", np.float64),
    ("int8", np.int8), ("int16", np.int16), ("int32", np.int32), ("int64", np.int64),
    ("uint8", np.uint8), ("uint16", np.uint16), ("uint32", np.uint32), ("uint64", np.uint64),
    ("bool", np.bool_), ("complex64", np.complex64), ("complex128", np.complex128),
    ("string", np.object_),
]
_BY_NAME: dict[str, DType] = {n: DType(n, t) for n, t in _SPECS}
_REF: dict[str, DType] = {n: DType(n + "_ref", t, True) for n, t in _SPECS}
_BY_NAME.update({d.name: d for d in _REF.values()})
_BY_NP = {d._np: d for n, d in _BY_NAME.items() if not d._ref}
_BY_NP[np.dtype(np.str_)] = _BY_NAME["string"]
_BY_NP[np.dtype(np.bytes_)] = _BY_NAME["string"]
# Handles to per-step or per-session state (TensorArrays, accumulators, queues): opaque Python
# objects, never converted from NumPy data.
_BY_NAME["resource"] = DType("resource", np.object_)
_BY_NAME["variant"] = DType("variant", np.object_)

float16 = half = _BY_NAME["float16"]
float32 = _BY_NAME["float32"]
float64 = double = _BY_NAME["float64"]
int8 = _BY_NAME["int8"]
int16 = _BY_NAME["int16"]
int32 = _BY_NAME["int32"]
int64 = _BY_NAME["int64"]
uint8 = _BY_NAME["uint8"]
uint16 = _BY_NAME["uint16"]
uint32 = _BY_NAME["uint32"]
uint64 = _BY_NAME["uint64"]
bool = _BY_NAME["bool"]  # noqa: A001 - TF's public name
complex64 = _BY_NAME["complex64"]
complex128 = _BY_NAME["complex128"]
string = _BY_NAME["string"]
resource = _BY_NAME["resource"]
variant = _BY_NAME["variant"]

_PY = {float: float32, int: int32, complex: complex128, str: string, bytes: string}

# TF's other spellings of type names: ``dtype="float"`` means float32 in TF, not NumPy's float64.
_ALIASES = {"half": float16, "float": float32, "double": float64}
_BY_NAME.update(_ALIASES)
_BY_NAME.update({a + "_ref": d._as_ref() for a, d in _ALIASES.items()})
# Types TF names that have no NumPy counterpart here: named in the error rather than guessed.
_UNSUPPORTED = ("bfloat16", "qint8", "qint16", "qint32", "quint8", "quint16", "int4", "uint4",
                "int2", "uint2")


# TF's type numbers (``DataType`` in types.proto): what a DType compares equal to as an int.
_ENUMS = {"float32": 1, "float64": 2, "int32": 3, "uint8": 4, "int16": 5, "int8": 6,
          "string": 7, "complex64": 8, "int64": 9, "bool": 10, "uint16": 17, "complex128": 18,
          "float16": 19, "resource": 20, "variant": 21, "uint32": 22, "uint64": 23}
_BY_ENUM = {e: _BY_NAME[n] for n, e in _ENUMS.items()}
_BY_ENUM.update({e + 100: _BY_NAME[n]._as_ref() for n, e in _ENUMS.items()
                 if n not in ("resource", "variant")})
# The Python types TF's comparisons take (not ``int`` or ``str``, which name no one type).
_PY_FOR_EQ = {float: float32, _builtins.bool: _BY_NAME["bool"], object: string}


def _comparable(value):
    """The ``DType`` TF's ``==`` takes ``value`` for (a name, a type number, a NumPy type or
    dtype, ``float``/``bool``/``object``), or None when it names no type."""
    try:
        if isinstance(value, str):
            return _BY_NAME.get(value)
        if isinstance(value, int):
            return _BY_ENUM.get(value)
        if isinstance(value, type):
            if value in _PY_FOR_EQ:
                return _PY_FOR_EQ[value]
            if not issubclass(value, np.generic) or value is np.str_:
                return None
            value = np.dtype(value)
        if not isinstance(value, np.dtype):
            return None
        return string if value.kind in "US" else _BY_NP.get(value)
    except TypeError:  # a NumPy type with no dtype of its own (``np.generic``)
        return None


def as_dtype(value) -> DType:
    """Convert a DType, name, NumPy dtype or Python type into a ``DType``."""
    if isinstance(value, DType):
        return value
    if isinstance(value, str):
        return _dtype_named(value)
    if value is _builtins.bool:
        return _BY_NAME["bool"]
    if value in _PY:
        return _PY[value]
    try:
        npd = np.dtype(value)
    except TypeError:
        raise TypeError(f"Cannot convert {value!r} to a dflab DType.") from None
    if npd.kind in "US":
        return string
    if npd in _BY_NP:
        return _BY_NP[npd]
    raise TypeError(f"Cannot convert {value!r} to a dflab DType.")


def _dtype_named(name: str) -> DType:
    """TF's table of type names only: NumPy's spellings ("float" is float64 there, "int", "f4")
    would silently give another type than TF gives for the same program."""
    if name in _BY_NAME:
        return _BY_NAME[name]
    if name.removesuffix("_ref") in _UNSUPPORTED:
        raise TypeError(f"dflab has no {name!r} type (TF's quantized and bfloat16 types "
                        "are not supported; see docs/compat.md).")
    raise TypeError(f"Cannot convert {name!r} to a dflab DType: not one of TF's type names "
                    f"({', '.join(sorted(n for n in _BY_NAME if not n.endswith('_ref')))}).")


def dtype_of_value(value) -> DType:
    """The DType TF gives a Python/NumPy value passed to ``constant`` without a dtype."""
    if isinstance(value, np.ndarray) or isinstance(value, np.generic):
        return as_dtype(value.dtype)
    if type(value) is float:  # the common scalars, without an array
        return float32
    if type(value) is int and -(2**63) <= value < 2**63:
        return int32 if -(2**31) <= value < 2**31 else int64
    arr = np.asarray(value)
    if arr.dtype == np.float64:
        return float32
    if arr.dtype == np.int64:
        # TF picks int32 unless the values do not fit.
        if arr.size and (arr.max() > 2**31 - 1 or arr.min() < -(2**31)):
            return int64
        return int32
    return as_dtype(arr.dtype)


__all__ = [n for n, d in globals().items() if isinstance(d, DType)] + ["DType", "as_dtype"]
