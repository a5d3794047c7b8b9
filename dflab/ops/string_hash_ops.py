"""Hashing strings into buckets and fingerprinting tensors (``tf.strings.to_hash_bucket*``,
TF 1.x's ``tf.string_to_hash_bucket*``, ``tf.fingerprint``).

The hashes are TF's own, bit for bit (``dflab.lib.hash``): FarmHash's ``Fingerprint64`` for
``StringToHashBucketFast`` and ``Fingerprint``, TF's legacy ``Hash64`` for
``StringToHashBucket``, keyed SipHash-2-4 for ``StringToHashBucketStrong``; a bucket is the
hash modulo ``num_buckets``. Host-only, as in TF; kernels in
``dflab.kernels.string_hash_kernels``. None is differentiable.
"""

from __future__ import annotations

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.constant_op import constant_value
from dflab.framework.registry import NotDifferentiable, register_op
from dflab.framework.tensor_shape import TensorShape


def _string_input(op_type, value, name="input"):
    """``value`` as a string tensor; another dtype is TF's ``TypeError``."""
    t = _ops.convert_to_tensor(value, dtype=_dt.string if not _ops.is_tensor_like(value)
                               else None, name=name)
    if t.dtype.base_dtype is not _dt.string:
        raise TypeError(f"Input '{name}' of '{op_type}' Op has type {t.dtype.base_dtype.name} "
                        f"that does not match expected type of string.")
    return t


def _num_buckets(op_type, num_buckets):
    n = int(num_buckets)
    if n < 1:
        raise ValueError(f"Attr 'num_buckets' of '{op_type}' Op passed {n} less than minimum "
                         f"1.")
    return n


def _bucket_infer(op):
    return [(_dt.int64, op.inputs[0].shape)]


def _fingerprint_infer(op):
    data, method = op.inputs
    if data.shape.ndims is not None and data.shape.ndims < 1:
        raise ValueError(f"Shape must be at least rank 1 but is rank {data.shape.ndims}")
    m = constant_value(method)
    if m is not None:
        m = m.item() if hasattr(m, "item") else m
        m = m.decode() if isinstance(m, bytes) else str(m)
        if m != "farmhash64":
            raise ValueError(f"Unsupported method: {m}")
    rows = None if data.shape.ndims is None else data.shape.as_list()[0]
    return [(_dt.uint8, TensorShape([rows, 8]))]


for _t in ("StringToHashBucketFast", "StringToHashBucket", "StringToHashBucketStrong"):
    register_op(_t, _bucket_infer)
    NotDifferentiable(_t)
register_op("Fingerprint", _fingerprint_infer)
NotDifferentiable("Fingerprint")


def string_to_hash_bucket_fast(input, num_buckets, name=None):  # noqa: A002 - TF's name
    """``Fingerprint64(s) % num_buckets`` for each string (stable across runs and
    platforms)."""
    op_type = "StringToHashBucketFast"
    return _ops.apply_op(op_type, [_string_input(op_type, input)],
                         {"num_buckets": _num_buckets(op_type, num_buckets)}, name).outputs[0]


def string_to_hash_bucket(string_tensor=None, num_buckets=None, name=None, input=None):  # noqa: A002
    """TF's legacy bucket: ``Hash64(s) % num_buckets`` (``to_hash_bucket_fast`` is
    faster and is what new code should use)."""
    if input is not None:
        if string_tensor is not None:
            raise ValueError("Cannot specify both 'string_tensor' and 'input'.")
        string_tensor = input
    op_type = "StringToHashBucket"
    return _ops.apply_op(op_type, [_string_input(op_type, string_tensor, "string_tensor")],
                         {"num_buckets": _num_buckets(op_type, num_buckets)}, name).outputs[0]


def string_to_hash_bucket_strong(input, num_buckets, key, name=None):  # noqa: A002
    """``SipHash-2-4(key, s) % num_buckets``: a keyed hash an adversary cannot steer
    without the two-integer ``key``."""
    op_type = "StringToHashBucketStrong"
    return _ops.apply_op(op_type, [_string_input(op_type, input)],
                         {"num_buckets": _num_buckets(op_type, num_buckets),
                          "key": [int(k) for k in key]}, name).outputs[0]


def fingerprint(data, method="farmhash64", name=None):
    """An 8-byte fingerprint (``uint8 [N, 8]``) of each row ``data[i]`` of a tensor."""
    data = _ops.convert_to_tensor(data, name="data")
    method = _ops.convert_to_tensor(method, dtype=_dt.string, name="method")
    return _ops.apply_op("Fingerprint", [data, method], None, name).outputs[0]


__all__ = ["fingerprint", "string_to_hash_bucket", "string_to_hash_bucket_fast",
           "string_to_hash_bucket_strong"]
