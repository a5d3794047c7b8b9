"""``tf.gfile`` (TF 1.x): file-system helpers on the local file system (TF's also reach
GCS/HDFS; dflab reads and writes local paths only). Errors are TF's: a missing path is
``NotFoundError``, an existing one where none may be is ``AlreadyExistsError``.
"""

from __future__ import annotations

import glob as _glob
import os
import shutil

from dflab.framework import errors


def _not_found(path, e=None):
    return errors.NotFoundError(None, None, f"{path}; No such file or directory")


class GFile:
    """A file object (``tf.gfile.GFile(name, mode)``): text for "r"/"w", bytes with "b"."""

    def __init__(self, name, mode="r"):
        self._name = os.fspath(name)
        self._mode = mode
        try:
            self._f = open(self._name, mode)  # noqa: SIM115 - closed by close()/__exit__
        except FileNotFoundError:
            raise _not_found(self._name) from None

    @property
    def name(self):
        return self._name

    @property
    def mode(self):
        return self._mode

    def read(self, n=-1):
        return self._f.read(n)

    def readline(self):
        return self._f.readline()

    def readlines(self):
        return self._f.readlines()

    def write(self, data):
        return self._f.write(data)

    def flush(self):
        self._f.flush()

    def seek(self, offset, whence=0):
        return self._f.seek(offset, whence)

    def tell(self):
        return self._f.tell()

    def size(self):
        return os.path.getsize(self._name)

    def close(self):
        self._f.close()

    def __iter__(self):
        return iter(self._f)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


Open = GFile
FastGFile = GFile


def Exists(filename) -> bool:  # noqa: N802 - TF's names
    return os.path.exists(filename)


def IsDirectory(dirname) -> bool:  # noqa: N802
    return os.path.isdir(dirname)


def MakeDirs(dirname) -> None:  # noqa: N802
    os.makedirs(dirname, exist_ok=True)


def MkDir(dirname) -> None:  # noqa: N802
    try:
        os.mkdir(dirname)
    except FileExistsError:
        raise errors.AlreadyExistsError(None, None, f"{dirname}; File exists") from None
    except FileNotFoundError:
        raise _not_found(os.path.dirname(dirname)) from None


def ListDirectory(dirname) -> list:  # noqa: N802
    try:
        return os.listdir(dirname)
    except FileNotFoundError:
        raise _not_found(dirname) from None


def Glob(filename) -> list:  # noqa: N802
    return sorted(_glob.glob(filename))


def Remove(filename) -> None:  # noqa: N802
    try:
        os.remove(filename)
    except FileNotFoundError:
        raise _not_found(filename) from None


def DeleteRecursively(dirname) -> None:  # noqa: N802
    if not os.path.exists(dirname):
        raise _not_found(dirname)
    if os.path.isdir(dirname):
        shutil.rmtree(dirname)
    else:
        os.remove(dirname)


def Rename(oldname, newname, overwrite=False) -> None:  # noqa: N802
    if not overwrite and os.path.exists(newname):
        raise errors.AlreadyExistsError(None, None, f"{newname}; File exists")
    try:
        os.replace(oldname, newname)
    except FileNotFoundError:
        raise _not_found(oldname) from None


def Copy(oldpath, newpath, overwrite=False) -> None:  # noqa: N802
    if not overwrite and os.path.exists(newpath):
        raise errors.AlreadyExistsError(None, None, f"{newpath}; File exists")
    try:
        shutil.copyfile(oldpath, newpath)
    except FileNotFoundError:
        raise _not_found(oldpath) from None


def Walk(top, in_order=True):  # noqa: N802
    yield from os.walk(top, topdown=in_order)


class _FileStatistics:
    def __init__(self, st):
        self.length = st.st_size
        self.mtime_nsec = st.st_mtime_ns
        self.is_directory = os.path.stat.S_ISDIR(st.st_mode)


def Stat(filename):  # noqa: N802
    try:
        return _FileStatistics(os.stat(filename))
    except FileNotFoundError:
        raise _not_found(filename) from None
