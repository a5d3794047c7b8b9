"""The checkpoint formats, and the CPU kernels of ``SaveV2``, ``RestoreV2``,
``MergeV2Checkpoints``, ``ShardedFilename`` and ``StringJoin``.

A checkpoint ``prefix`` (TF's V2 layout and file names) is an index ``prefix.index`` and data
files ``prefix.data-0000i-of-0000N``, in one of two formats, told apart by the index's bytes:

* **TF's tensor bundle** (``dflab.lib.io.tensor_bundle``; written by default): the index is a
  table of ``BundleEntryProto``s, the data files the tensors' raw bytes. TensorFlow reads what
  dflab writes and the other way round.
* **dflab's earlier format** (``checkpoint_format="safetensors"``, and every checkpoint dflab
  wrote before TF's format became the default): safetensors data files and a JSON index
  ``{"format", "version", "shards": [{"file", "size"}], "tensors": {name: {"dtype", "shape",
  "shard", "sha256"}}}``.

Invariants: every file is written atomically (a temp file in the same directory, fsync, rename,
fsync of the directory) and the index is written last, so an index that exists names complete
data files; a crash at any moment leaves earlier checkpoints intact. Loading parses tables,
protos, JSON and safetensors only (nothing is unpickled) and verifies each tensor's checksum
(CRC32C or sha256) and size, so corrupted or truncated data is a ``DataLossError`` naming the
file and the tensor.

In dflab's earlier format, tensors safetensors cannot hold are stored as byte views: a string
tensor as its utf-8 bytes concatenated (uint8, key ``name``) plus their lengths (int64, key
``name:lengths``; ``:`` never occurs in an op name, so keys cannot collide); complex tensors as
their real view with a trailing dimension of 2. The index keeps the true dtype and shape.

Temp files and their cleanup. A temp file is named ``<target>.tmp-<host>-<pid>-<random>`` and a
sharded save's temp directory ``<prefix>_temp_<hex>`` (made by the Saver) holds, besides its
``part-*`` files, one empty ``.writer-<host>-<pid>`` file per process that writes into it
(``SaveV2`` adds it before writing a part: the directory's name is fixed when the graph is
built, and a graph may be saved from another process than the one that built it).
``<host>`` is a short hash of the host name, boot id and pid namespace, so a pid is only ever
checked where it means something. A writer killed mid-save leaves these behind;
``remove_stale_temp_files(directory)`` (run by ``Saver.save`` before each save) removes an entry
only if it matches this naming exactly (a directory only if everything in it does too, and
symbolic links never) and every writer named by it is gone:

* written on this host (same ``<host>``): its pid is not a live process (a live or reused pid
  keeps the entry; a zombie counts as live);
* written elsewhere (another machine on a shared file system, another container, before a
  reboot): nothing in it was modified for ``STALE_TEMP_AGE_SECS`` (a day; a live write keeps
  touching its files).

A temp directory naming no writer yet (just created) is judged by age alone. Everything else in
the directory, and temp files of the older ``<target>.tmpXXXX`` naming, is never touched.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import socket
import stat
import tempfile
import time

import numpy as np

from dflab.framework import dtypes as _dt
from dflab.framework import errors
from dflab.kernels.checkpoint_reader import (
    _LENGTHS,
    CHECKPOINT_FORMATS,
    FORMAT,
    SAFETENSORS_FORMAT,
    TF_FORMAT,
    VERSION,
    CheckpointReader,
    _BundleReader,
    _read_index_bytes,
    _SafetensorsReader,
    _sha256,
)
from dflab.kernels.registry import kernel
from dflab.lib.io import tensor_bundle

__all__ = ["CHECKPOINT_FORMATS", "FORMAT", "SAFETENSORS_FORMAT", "TF_FORMAT", "VERSION",
           "CheckpointReader", "atomic_write", "checkpoint_exists", "checkpoint_files",
           "data_filename", "delete_checkpoint_files", "index_filename",
           "remove_stale_temp_files", "write_checkpoint"]



# --- file names ---------------------------------------------------------------------------------
def data_filename(prefix: str, shard: int = 0, num_shards: int = 1) -> str:
    return f"{prefix}.data-{shard:05d}-of-{num_shards:05d}"


def index_filename(prefix: str) -> str:
    return prefix + ".index"


def as_str(value) -> str:
    """A scalar string tensor (bytes or str, maybe in a 0-d object array) as ``str``."""
    v = np.asarray(value, dtype=object).reshape(-1)[0] if np.ndim(value) else value
    if isinstance(v, np.ndarray):
        v = v.item()
    return v.decode("utf-8") if isinstance(v, bytes) else str(v)


def as_str_list(value) -> list[str]:
    return [as_str(v) for v in np.asarray(value, dtype=object).reshape(-1)]


# --- temp names ---------------------------------------------------------------------------------
STALE_TEMP_AGE_SECS = 24 * 3600.0
TEMP_DIR_INFIX = "_temp_"  # the Saver's sharded-save directory: "<prefix>_temp_<hex>"
_TEMP_FILE_RE = re.compile(
    r"^(?P<target>.+)\.tmp-(?P<host>[0-9a-f]{8})-(?P<pid>[0-9]+)-[a-z0-9_]+$")
_TEMP_DIR_RE = re.compile(r"^.+" + TEMP_DIR_INFIX + r"[0-9a-f]+$")
_WRITER_RE = re.compile(r"^\.writer-(?P<host>[0-9a-f]{8})-(?P<pid>[0-9]+)$")
_PART_RE = re.compile(r"^part-[0-9]{5}-of-[0-9]{5}\.(index|data-[0-9]{5}-of-[0-9]{5})$")


def _read_first_line(path: str) -> str:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.readline().strip()
    except OSError:
        return ""


def _pid_namespace() -> str:
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return ""


@functools.lru_cache(maxsize=1)
def host_tag() -> str:
    """Where a pid is meaningful: the same tag means ``os.kill(pid, 0)`` tells about its writer.
    The boot id and pid namespace keep pids from before a reboot or from another container (with
    the same host name, sharing the directory) from being mistaken for ours."""
    where = "|".join([socket.gethostname(), _read_first_line("/proc/sys/kernel/random/boot_id"),
                      _pid_namespace()])
    return hashlib.sha256(where.encode()).hexdigest()[:8]


def temp_file_prefix(path: str, pid: int | None = None) -> str:
    """The name a temp file for ``path`` starts with (``mkstemp`` appends a random part)."""
    pid = os.getpid() if pid is None else pid
    return f"{os.path.basename(path)}.tmp-{host_tag()}-{pid}-"


def writer_mark_name(pid: int | None = None) -> str:
    """The file that records, inside a sharded-save temp directory, a process writing into it."""
    return f".writer-{host_tag()}-{os.getpid() if pid is None else pid}"


def _mark_temp_dir_writer(directory: str) -> None:
    # Before any part is written, so a directory with parts always names its writer.
    if not _TEMP_DIR_RE.match(os.path.basename(directory)):
        return
    fd = os.open(os.path.join(directory, writer_mark_name()), os.O_CREAT | os.O_WRONLY, 0o644)
    os.close(fd)


# --- atomic writes ------------------------------------------------------------------------------
def _fsync_dir(path: str) -> None:
    # The rename is durable only once the directory entry is: fsync the directory too.
    try:
        fd = os.open(path or ".", os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the whole new one."""
    directory = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=temp_file_prefix(path))
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(directory)


# --- encoding -----------------------------------------------------------------------------------
def _contiguous(arr: np.ndarray) -> np.ndarray:
    # np.ascontiguousarray would turn a 0-d array into a 1-d one.
    return arr if arr.flags.c_contiguous else arr.copy(order="C")


def _to_stored(name: str, value) -> tuple[dict, dict]:
    """``value`` as safetensors-storable arrays, and its index entry."""
    arr = value if isinstance(value, np.ndarray) else np.asarray(value)
    dt = _dt.as_dtype(arr.dtype)
    if dt is _dt.string:
        items = [x.encode("utf-8") if isinstance(x, str) else bytes(x) for x in arr.reshape(-1)]
        stored = {name: np.frombuffer(b"".join(items), dtype=np.uint8),
                  name + _LENGTHS: np.array([len(x) for x in items], dtype=np.int64)}
    elif dt.is_complex:
        real = _contiguous(arr).view(arr.real.dtype).reshape(arr.shape + (2,))
        stored = {name: real}
    else:
        stored = {name: _contiguous(arr)}
    entry = {"dtype": dt.name, "shape": list(arr.shape), "sha256": _sha256(stored.values())}
    return stored, entry


def write_shard(prefix: str, names, values, shard: int = 0, num_shards: int = 1) -> dict:
    """Write one data file; returns its index fragment ``{"shard": {...}, "tensors": {...}}``."""
    from safetensors.numpy import save as st_save

    stored, tensors = {}, {}
    for name, value in zip(names, values):
        if name in tensors:
            raise errors.InvalidArgumentError(None, None, f"Duplicate tensor name {name!r} in "
                                              f"checkpoint {prefix}")
        arrays, entry = _to_stored(name, value)
        entry["shard"] = shard
        stored.update(arrays)
        tensors[name] = entry
    blob = st_save(stored, metadata={"format": FORMAT})
    path = data_filename(prefix, shard, num_shards)
    atomic_write(path, blob)
    return {"shard": {"file": os.path.basename(path), "size": len(blob)}, "tensors": tensors}


def write_index(prefix: str, fragments: list[dict]) -> None:
    """Write ``prefix.index`` from the shards' fragments (in shard order): the commit point."""
    index = {"format": FORMAT, "version": VERSION, "shards": [], "tensors": {}}
    for i, frag in enumerate(fragments):
        index["shards"].append(frag["shard"])
        for name, entry in frag["tensors"].items():
            index["tensors"][name] = dict(entry, shard=i)
    atomic_write(index_filename(prefix), json.dumps(index, sort_keys=True).encode())


def checkpoint_exists(prefix: str) -> bool:
    return os.path.isfile(index_filename(prefix))


def checkpoint_files(prefix: str) -> list[str]:
    """The files of the checkpoint at ``prefix``: its index first, then the data files the
    index names (none if the index is missing or unreadable)."""
    try:
        # Either format names only files beside its index: a corrupt one never points
        # elsewhere (plain file names in a JSON index; the prefix itself in a bundle's).
        files = CheckpointReader(prefix).data_files()
    except errors.OpError:
        files = []
    return [index_filename(prefix)] + files


def delete_checkpoint_files(prefix: str, files: list[str] | None = None) -> None:
    """Remove a checkpoint, index first so that it is never seen half-deleted. ``files``
    (from ``checkpoint_files``, taken earlier) also finds data files whose index is gone."""
    paths = checkpoint_files(prefix)
    paths += [p for p in files or () if p not in paths]
    for path in paths:
        try:
            os.unlink(path)
        except OSError:
            pass


# --- stale temp files ---------------------------------------------------------------------------
def _pid_alive(pid: int) -> bool:
    if os.name != "posix" or pid <= 0:
        return True  # no safe way to ask (signal 0 means something else on Windows): keep
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # e.g. EPERM: the process exists but belongs to another user
    return True


def _writer_gone(host: str, pid: int, newest_mtime: float, now: float) -> bool:
    if host == host_tag():
        return not _pid_alive(pid)
    # A pid from elsewhere says nothing here; a live write keeps its files' mtime fresh.
    return now - newest_mtime > STALE_TEMP_AGE_SECS


def _plain_file_mtime(path: str) -> float | None:
    """The mtime of a regular file; None for anything else (a link, a directory, gone)."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st.st_mtime if stat.S_ISREG(st.st_mode) else None


def _is_stale_temp_file(path: str, now: float) -> bool:
    m = _TEMP_FILE_RE.match(os.path.basename(path))
    mtime = _plain_file_mtime(path) if m else None
    return mtime is not None and _writer_gone(m["host"], int(m["pid"]), mtime, now)


def _temp_dir_entry_writer(directory: str, name: str):
    """``(writer or None, mtime)`` of an entry of a sharded-save temp directory; None if the
    entry is not one the Saver makes there (then the directory is not ours to remove)."""
    mtime = _plain_file_mtime(os.path.join(directory, name))
    if mtime is None:
        return None
    mark, temp = _WRITER_RE.match(name), _TEMP_FILE_RE.match(name)
    if mark:
        return (mark["host"], int(mark["pid"])), mtime
    if temp and _PART_RE.match(temp["target"]):
        return (temp["host"], int(temp["pid"])), mtime
    return (None, mtime) if _PART_RE.match(name) else None


def _temp_dir_writers(path: str):
    """The writers a sharded-save temp directory names and its newest mtime, or None when
    ``path`` is not such a directory (a link, unreadable, or holding anything else)."""
    try:
        st = os.lstat(path)
        names = os.listdir(path) if stat.S_ISDIR(st.st_mode) else None
    except OSError:
        return None
    if names is None:
        return None
    writers, newest = set(), st.st_mtime
    for name in names:
        entry = _temp_dir_entry_writer(path, name)
        if entry is None:
            return None
        writer, mtime = entry
        newest = max(newest, mtime)
        if writer is not None:
            writers.add(writer)
    return writers, newest


def _is_stale_temp_dir(path: str, now: float) -> bool:
    found = _temp_dir_writers(path) if _TEMP_DIR_RE.match(os.path.basename(path)) else None
    if found is None:
        return False
    writers, newest = found
    if not writers:  # just made (its writer mark comes next), or from an older naming
        return now - newest > STALE_TEMP_AGE_SECS
    return all(_writer_gone(host, pid, newest, now) for host, pid in writers)


def remove_stale_temp_files(directory: str) -> list[str]:
    """Remove the temp files and sharded-save temp directories in ``directory`` whose writers
    are gone (the rule is in the module docstring); returns the paths removed."""
    try:
        names = sorted(os.listdir(directory or "."))
    except OSError:
        return []
    now, removed = time.time(), []
    for name in names:
        path = os.path.join(directory, name)
        try:
            if _is_stale_temp_file(path, now):
                os.unlink(path)
            elif _is_stale_temp_dir(path, now):
                shutil.rmtree(path)
            else:
                continue
        except OSError:
            continue  # e.g. removed meanwhile by another process's cleanup
        removed.append(path)
    return removed


# --- kernels ------------------------------------------------------------------------------------
def _check_slices(slices, op_type):
    if any(s for s in as_str_list(slices)):
        raise errors.UnimplementedError(None, None, f"{op_type}: partitioned (sliced) "
                                        "variables are not supported; shape_and_slices must be ''")


def write_checkpoint(prefix: str, names, values, checkpoint_format: str = TF_FORMAT) -> None:
    """Write a one-shard checkpoint: the data file, then the index (the commit point)."""
    if checkpoint_format == TF_FORMAT:
        entries = tensor_bundle.write_data_file(prefix, names, values, atomic_write)
        tensor_bundle.write_index(prefix, entries, 1, atomic_write)
    elif checkpoint_format == SAFETENSORS_FORMAT:
        write_index(prefix, [write_shard(prefix, names, values)])
    else:
        raise errors.InvalidArgumentError(None, None, f"Unknown checkpoint format "
                                          f"{checkpoint_format!r}; expected one of "
                                          f"{CHECKPOINT_FORMATS}")


@kernel("SaveV2", host_only=True)
def _save_v2(node, ctx):
    checkpoint_format = node.attr.get("_checkpoint_format", TF_FORMAT)

    def save(prefix, tensor_names, shape_and_slices, *tensors):
        prefix = as_str(prefix)
        names = as_str_list(tensor_names)
        _check_slices(shape_and_slices, "SaveV2")
        directory = os.path.dirname(prefix)
        if directory:
            os.makedirs(directory, exist_ok=True)
            _mark_temp_dir_writer(directory)
        write_checkpoint(prefix, names, tensors, checkpoint_format)
        return None

    return save


@kernel("RestoreV2", host_only=True)
def _restore_v2(node, ctx):
    dtypes = node.attr["dtypes"]
    shapes = node.attr.get("shapes") or [None] * len(dtypes)

    def restore(prefix, tensor_names, shape_and_slices):
        prefix = as_str(prefix)
        names = as_str_list(tensor_names)
        _check_slices(shape_and_slices, "RestoreV2")
        reader = CheckpointReader(prefix)
        outs = tuple(_restore_one(reader, n, dt, sh) for n, dt, sh in zip(names, dtypes, shapes))
        return outs[0] if len(outs) == 1 else outs  # a single-output op returns one value

    return restore


def _restore_one(reader: CheckpointReader, name, dtype, shape):
    if not reader.has_tensor(name):
        raise reader._missing(name)
    stored_dtype, stored_shape = reader.dtype_of(name), reader.shape_of(name)
    if stored_dtype is not dtype.base_dtype:
        stored = getattr(stored_dtype, "name", "unsupported by dflab")
        raise errors.InvalidArgumentError(
            None, None, f"tensor_name = {name}; expected dtype {dtype.base_dtype.name} does not "
            f"equal original dtype {stored} in checkpoint {reader.prefix}")
    if shape is not None and shape.ndims is not None and \
            not shape.is_compatible_with(stored_shape):
        raise errors.InvalidArgumentError(
            None, None, f"tensor_name = {name}; shape in checkpoint {reader.prefix} is "
            f"{stored_shape} but the variable has shape {shape.as_list()}")
    return reader.get_tensor(name)


def _merge_bundles(parts: list[str], dest: str) -> None:
    """TF's merge: each part's one data file becomes shard i of ``dest``, its entries point
    there, and one index lists them all (written last)."""
    entries = {}
    for i, part in enumerate(parts):
        reader = CheckpointReader(part)
        if not isinstance(reader, _BundleReader) or reader._bundle.num_shards != 1:
            raise errors.InvalidArgumentError(None, None, f"MergeV2Checkpoints: {part} is not "
                                              "a one-shard checkpoint in TF's format")
        os.replace(tensor_bundle.data_filename(part), data_filename(dest, i, len(parts)))
        for name, entry in reader.entries().items():
            if name in entries:
                raise errors.InvalidArgumentError(None, None, f"Duplicate tensor name "
                                                  f"{name!r} in checkpoint {dest}")
            entry.shard_id = i
            entries[name] = entry
    tensor_bundle.write_index(dest, entries, len(parts), atomic_write)


def _merge_safetensors(parts: list[str], dest: str) -> None:
    fragments = []
    for i, part in enumerate(parts):
        index = _SafetensorsReader(part)._index
        src = os.path.join(os.path.dirname(part), index["shards"][0]["file"])
        target = data_filename(dest, i, len(parts))
        os.replace(src, target)  # same file system: the part's bytes, renamed atomically
        fragments.append({"shard": dict(index["shards"][0], file=os.path.basename(target)),
                          "tensors": index["tensors"]})
    write_index(dest, fragments)


@kernel("MergeV2Checkpoints", host_only=True)
def _merge_v2(node, ctx):
    delete_old_dirs = node.attr.get("delete_old_dirs", True)

    def merge(checkpoint_prefixes, destination_prefix):
        parts = as_str_list(checkpoint_prefixes)
        dest = as_str(destination_prefix)
        bundles = parts and tensor_bundle.is_bundle_index(_read_index_bytes(parts[0]))
        (_merge_bundles if bundles else _merge_safetensors)(parts, dest)
        for part in parts:
            _remove_part(part, delete_old_dirs)
        return None

    return merge


def _remove_part(part: str, delete_dir: bool) -> None:
    try:
        os.unlink(index_filename(part))
    except OSError:
        pass
    if delete_dir:
        shutil.rmtree(os.path.dirname(part), ignore_errors=True)


@kernel("ShardedFilename", host_only=True)
def _sharded_filename(node, ctx):
    def sharded(basename, shard, num_shards):
        name = f"{as_str(basename)}-{int(shard):05d}-of-{int(num_shards):05d}"
        return np.array(name.encode(), dtype=object)

    return sharded


@kernel("StringJoin")
def _string_join(node, ctx):
    sep = node.attr.get("separator", "")

    def join(*inputs):
        arrays = np.broadcast_arrays(*[np.asarray(x, dtype=object) for x in inputs])
        out = np.empty(arrays[0].shape, dtype=object)
        flat = [sep.join(as_str(v) for v in vals) for vals in zip(*[a.reshape(-1)
                                                                    for a in arrays])]
        out.reshape(-1)[:] = [s.encode() for s in flat]
        return out

    return join
