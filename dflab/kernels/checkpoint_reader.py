"""Reading checkpoints in either of their formats (``io_kernels`` describes both):
``CheckpointReader(prefix)`` looks at the index's bytes and returns the reader of its format,
TF's tensor bundle (a table ending in its magic number) or dflab's earlier JSON index with
safetensors data files.

Invariant: a reader returns a tensor only after checking it (CRC32C or sha256, size, dtype
and shape against the index); every defect of a file is a TF error naming the file and the
entry at fault, and nothing read is unpickled or executed.
"""

from __future__ import annotations

import hashlib
import json
import os
import re

import numpy as np

from dflab.framework import dtypes as _dt
from dflab.framework import errors
from dflab.lib.io import tensor_bundle
from dflab.lib.io.tensor_bundle import data_file_error, data_filename, index_filename

FORMAT = "dflab.checkpoint"  # dflab's earlier format: the JSON index's "format" tag
VERSION = 1
_LENGTHS = ":lengths"
TF_FORMAT, SAFETENSORS_FORMAT = "tf", "safetensors"  # what SaveV2 writes
CHECKPOINT_FORMATS = (TF_FORMAT, SAFETENSORS_FORMAT)


def _sha256(arrays) -> str:
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()



def _contiguous(arr: np.ndarray) -> np.ndarray:
    # np.ascontiguousarray would turn a 0-d array into a 1-d one.
    return arr if arr.flags.c_contiguous else arr.copy(order="C")


def _from_stored(name: str, entry: dict, get) -> np.ndarray:
    """Rebuild a tensor from its stored arrays (``get(key)``), checking its checksum."""
    dt = _dt.as_dtype(entry["dtype"])
    shape = tuple(int(s) for s in entry["shape"])
    parts = [get(name)] + ([get(name + _LENGTHS)] if dt is _dt.string else [])
    if _sha256(parts) != entry["sha256"]:
        raise ValueError("checksum mismatch")
    if dt is _dt.string:
        data, lengths = parts[0].tobytes(), parts[1]
        ends = np.cumsum(lengths)
        starts = ends - lengths
        flat = [data[s:e] for s, e in zip(starts.tolist(), ends.tolist())]
        out = np.empty(len(flat), dtype=object)
        out[:] = flat
        return out.reshape(shape)
    arr = parts[0]
    if dt.is_complex:
        arr = _contiguous(arr).view(dt._np).reshape(shape)
    if arr.dtype != dt._np or arr.shape != shape:
        raise ValueError(f"stored as {arr.dtype}{list(arr.shape)}, index says "
                         f"{dt.name}{list(shape)}")
    return arr


# --- reading ------------------------------------------------------------------------------------
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_plain_file_name(name) -> bool:
    return isinstance(name, str) and name not in ("", ".", "..") and "\0" not in name \
        and os.path.basename(name) == name


def _check_index(index) -> None:
    """Every field of a parsed index, so that readers can trust it; ``ValueError`` names the
    shard or tensor entry at fault."""
    if not isinstance(index, dict) or index.get("format") != FORMAT or \
            index.get("version") != VERSION:
        raise ValueError("not a dflab checkpoint index (format/version)")
    shards, tensors = index.get("shards"), index.get("tensors")
    if not isinstance(shards, list) or not isinstance(tensors, dict):
        raise ValueError("'shards' must be a list and 'tensors' an object")
    for k, info in enumerate(shards):
        if not (isinstance(info, dict) and _is_plain_file_name(info.get("file"))
                and _is_int(info.get("size")) and info["size"] >= 0):
            raise ValueError(f"shard #{k} needs a 'file' name (in the index's directory) and "
                             "a non-negative 'size'")
    for name, entry in tensors.items():
        _check_entry(name, entry, len(shards))


def _check_entry(name: str, entry, num_shards: int) -> None:
    where = f"tensor entry {name!r}"
    if not isinstance(entry, dict):
        raise ValueError(f"{where} is not an object")
    dtype = entry.get("dtype")
    try:
        if not isinstance(dtype, str):
            raise TypeError(dtype)
        _dt.as_dtype(dtype)
    except TypeError:
        raise ValueError(f"{where} has no valid 'dtype' (got {dtype!r})") from None
    shape = entry.get("shape")
    if not isinstance(shape, list) or not all(_is_int(d) and d >= 0 for d in shape):
        raise ValueError(f"{where} needs a 'shape' of non-negative integers")
    shard = entry.get("shard")
    if not _is_int(shard) or not 0 <= shard < num_shards:
        raise ValueError(f"{where} names shard {shard!r} of {num_shards}")
    if not isinstance(entry.get("sha256"), str) or not _SHA256.match(entry["sha256"]):
        raise ValueError(f"{where} has no valid 'sha256'")


def _read_index_bytes(prefix: str) -> bytes:
    path = index_filename(prefix)
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise errors.NotFoundError(
            None, None, f"Unsuccessful TensorSliceReader constructor: Failed to find any "
            f"matching files for {prefix} (no {path})") from None
    except PermissionError as e:
        raise errors.PermissionDeniedError(None, None, f"Checkpoint index {path}: "
                                           f"{e.strerror}") from None
    except OSError as e:
        raise errors.DataLossError(None, None, f"Checkpoint index {path} cannot be read: "
                                   f"{e.strerror}") from None


class CheckpointReader:
    """Reads one checkpoint, in either format: the index at once, tensors on demand and
    checksummed (TF's ``CheckpointReader``). ``CheckpointReader(prefix)`` returns the reader
    of the checkpoint's own format."""

    def __new__(cls, prefix: str):
        if cls is CheckpointReader:
            data = _read_index_bytes(prefix)
            cls = _BundleReader if tensor_bundle.is_bundle_index(data) else _SafetensorsReader
            reader = object.__new__(cls)
            reader._index_bytes = data
            return reader
        return object.__new__(cls)

    format = ""

    def tensor_names(self) -> list[str]:
        raise NotImplementedError

    def dtype_of(self, name: str):
        """The tensor's dflab dtype; None for a dtype dflab lacks."""
        raise NotImplementedError

    def shape_of(self, name: str) -> list[int]:
        raise NotImplementedError

    def get_tensor(self, name: str) -> np.ndarray:
        raise NotImplementedError

    def data_files(self) -> list[str]:
        """The paths of the data files the index names."""
        raise NotImplementedError

    def has_tensor(self, name: str) -> bool:
        return name in set(self.tensor_names())

    def get_variable_to_shape_map(self) -> dict:
        return {n: self.shape_of(n) for n in self.tensor_names()}

    def get_variable_to_dtype_map(self) -> dict:
        return {n: self.dtype_of(n) for n in self.tensor_names()}

    def debug_string(self) -> bytes:
        """One line per tensor, ``name (dtype) [shape]``, as TF's reader prints them."""
        lines = [f"{n} ({getattr(self.dtype_of(n), 'name', '?')}) {self.shape_of(n)}"
                 for n in sorted(self.tensor_names())]
        return "".join(line + "\n" for line in lines).encode()

    def _missing(self, name: str) -> errors.NotFoundError:
        return errors.NotFoundError(None, None, f"Key {name} not found in checkpoint "
                                    f"{self.prefix}")


class _BundleReader(CheckpointReader):
    """A checkpoint in TF's tensor-bundle format."""

    format = TF_FORMAT

    def __init__(self, prefix: str):
        self.prefix = prefix
        data = getattr(self, "_index_bytes", None)
        self._bundle = tensor_bundle.BundleReader(
            prefix, data if data is not None else _read_index_bytes(prefix))

    def tensor_names(self) -> list[str]:
        return list(self._bundle.entries)

    def has_tensor(self, name: str) -> bool:
        return name in self._bundle.entries

    def dtype_of(self, name: str):
        return self._bundle.dtype(name)

    def shape_of(self, name: str) -> list[int]:
        return self._bundle.shape(name)

    def get_tensor(self, name: str) -> np.ndarray:
        if name not in self._bundle.entries:
            raise self._missing(name)
        if self._bundle.dtype(name) is None:
            raise errors.UnimplementedError(
                None, None, f"Checkpoint {self.prefix}: tensor {name!r} has a dtype dflab "
                "does not support")
        return self._bundle.get_tensor(name)

    def data_files(self) -> list[str]:
        return self._bundle.data_files()

    def entries(self) -> dict:
        return self._bundle.entries


class _SafetensorsReader(CheckpointReader):
    """A checkpoint in dflab's earlier format (JSON index, safetensors data files)."""

    format = SAFETENSORS_FORMAT

    def __init__(self, prefix: str):
        self.prefix = prefix
        data = getattr(self, "_index_bytes", None)
        self._index = self._parse_index(data if data is not None
                                        else _read_index_bytes(prefix))
        self._shards: dict[int, dict] = {}

    def _parse_index(self, raw: bytes) -> dict:
        path = index_filename(self.prefix)
        if not raw.lstrip()[:1] == b"{":
            raise errors.DataLossError(
                None, None, f"Checkpoint index {path} is corrupted: neither a TF table "
                "(no magic number at its end) nor dflab's JSON index")
        try:
            index = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as e:
            raise errors.DataLossError(
                None, None, f"Checkpoint index {path} is corrupted: not JSON text "
                f"({type(e).__name__})") from None
        try:
            _check_index(index)
        except ValueError as e:
            raise errors.DataLossError(
                None, None, f"Checkpoint index {path} is corrupted: {e}") from None
        return index

    def tensor_names(self) -> list[str]:
        return list(self._index["tensors"])

    def has_tensor(self, name: str) -> bool:
        return name in self._index["tensors"]

    def dtype_of(self, name: str):
        return _dt.as_dtype(self._index["tensors"][name]["dtype"])

    def shape_of(self, name: str) -> list[int]:
        return list(self._index["tensors"][name]["shape"])

    def data_files(self) -> list[str]:
        directory = os.path.dirname(self.prefix)
        return [os.path.join(directory, s["file"]) for s in self._index["shards"]]

    def _shard(self, k: int) -> dict:
        """All arrays of shard ``k`` (read once per reader), with the file's size checked."""
        if k in self._shards:
            return self._shards[k]
        from safetensors.numpy import load as st_load

        try:
            info = self._index["shards"][k]
            path = os.path.join(os.path.dirname(self.prefix), os.path.basename(info["file"]))
        except (IndexError, KeyError, TypeError):
            raise errors.DataLossError(None, None, f"Checkpoint index {self.prefix}.index names "
                                       f"no shard {k}") from None
        try:
            with open(path, "rb") as f:
                blob = f.read()
        except OSError as e:
            raise data_file_error(path, index_filename(self.prefix), e) from None
        if len(blob) != info.get("size"):
            raise errors.DataLossError(None, None, f"Checkpoint data file {path} is truncated or "
                                       f"corrupted: {len(blob)} bytes, expected {info.get('size')}")
        try:
            arrays = st_load(blob)
        except Exception as e:  # noqa: BLE001 - safetensors raises its own error class
            raise errors.DataLossError(None, None, f"Checkpoint data file {path} is corrupted: "
                                       f"{e}") from None
        self._shards[k] = arrays
        return arrays

    def get_tensor(self, name: str) -> np.ndarray:
        entry = self._index["tensors"].get(name)
        if entry is None:
            raise self._missing(name)
        arrays = self._shard(int(entry["shard"]))
        path = data_filename(self.prefix, int(entry["shard"]), len(self._index["shards"]))

        def get(key):
            if key not in arrays:
                raise ValueError(f"key {key!r} missing from the data file")
            return arrays[key]

        try:
            return _from_stored(name, entry, get)
        except ValueError as e:
            raise errors.DataLossError(None, None, f"Checkpoint {path}: tensor {name!r} is "
                                       f"corrupted ({e})") from None


