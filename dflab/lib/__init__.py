"""File formats TensorFlow writes, read and written without TensorFlow: TFRecord files
(``lib/io/tf_record.py``), the tables and tensor bundles of TF's checkpoints
(``lib/io/table.py``, ``lib/io/tensor_bundle.py``) and the protocol buffers they carry
(``lib/protos.py``); and the string hashes TF's ops compute (``lib/hash.py``: FarmHash's
Fingerprint64, TF's Hash64, SipHash), which must match TF's bit for bit.

The layer sits just above ``framework`` (it raises TF's error classes) and below everything
else, so kernels, the training layer and the public API share one implementation of each
format. Nothing here builds graphs or runs ops.
"""

import importlib as _importlib
import types as _types


class _LoadedOnFirstUse(_types.ModuleType):
    """Stands for a submodule until one of its attributes is read, then imports it and hands
    on every read. ``import dflab`` then skips protobuf and TF's descriptors, which most
    programs never use; the import itself is the interpreter's, so it is thread-safe (unlike
    ``importlib.util.LazyLoader`` before Python 3.12)."""

    def __getattr__(self, name: str):
        return getattr(_importlib.import_module(self.__name__), name)


# Until dflab.lib.protos is imported, ``from dflab.lib import protos`` gets its stand-in.
protos = _LoadedOnFirstUse(f"{__name__}.protos")
