"""Kernels of ``dflab.ops.string_hash_ops``: hash buckets and fingerprints, on the host
(TF has them for CPUs only), one string at a time through ``dflab.lib.hash``."""

from __future__ import annotations

import numpy as np

from dflab.framework import errors
from dflab.kernels.context import host
from dflab.kernels.registry import kernel
from dflab.lib.hash import fingerprint64, hash64, siphash24


def _bytes(v) -> bytes:
    return v if isinstance(v, bytes) else str(v).encode()


def _buckets(hash_fn, num_buckets):
    def run(x):
        a = np.asarray(host(x, object), dtype=object)
        out = np.empty(a.shape, dtype=np.int64)
        for idx in np.ndindex(a.shape):
            out[idx] = hash_fn(_bytes(a[idx])) % num_buckets
        return out
    return run


@kernel("StringToHashBucketFast", host_only=True)
def _to_hash_bucket_fast(node, ctx):
    return _buckets(fingerprint64, int(node.attr["num_buckets"]))


@kernel("StringToHashBucket", host_only=True)
def _to_hash_bucket(node, ctx):
    return _buckets(hash64, int(node.attr["num_buckets"]))


@kernel("StringToHashBucketStrong", host_only=True)
def _to_hash_bucket_strong(node, ctx):
    key = list(node.attr["key"])
    if len(key) != 2:
        def refuse(x):
            raise errors.InvalidArgumentError(
                None, node, f"Key must have 2 elements but has {len(key)} elements")
        return refuse
    key = (key[0] & (2**64 - 1), key[1] & (2**64 - 1))
    return _buckets(lambda s: siphash24(key, s), int(node.attr["num_buckets"]))


def _le_bytes(value: int) -> np.ndarray:
    return np.frombuffer(value.to_bytes(8, "little"), dtype=np.uint8)


@kernel("Fingerprint", host_only=True, host_memory_inputs=(1,))
def _fingerprint(node, ctx):
    def run(data, method):
        m = _bytes(np.asarray(host(method, object)).reshape(-1)[0])
        if m != b"farmhash64":
            raise errors.InvalidArgumentError(None, node,
                                              f"Unsupported fingerprint method: {m.decode()}")
        a = np.asarray(host(data))
        if a.ndim < 1:
            raise errors.InvalidArgumentError(None, node, "`data` should have at least one "
                                                          "dimension")
        rows = a.shape[0]
        flat = a.reshape(rows, -1)
        out = np.empty((rows, 8), dtype=np.uint8)
        for i in range(rows):
            out[i] = _le_bytes(fingerprint64(_row_bytes(flat[i])))
        return out

    return run


def _row_bytes(row: np.ndarray) -> bytes:
    """What TF fingerprints for one row: its raw little-endian bytes, or, for strings, the
    string itself (one per row) or the concatenated fingerprints of its strings."""
    if row.dtype == object:
        if row.size == 1:
            return _bytes(row[0])
        return b"".join(fingerprint64(_bytes(s)).to_bytes(8, "little") for s in row)
    return np.ascontiguousarray(row, dtype=row.dtype.newbyteorder("<")).tobytes()
