"""oneDNN's C API through ctypes: finding and loading ``libdnnl``, the prototypes of the
functions dflab calls, the enum values it passes, and the engine.

Loaded once, on first use (``load``), never at ``import dflab``. The library is the one the
``onednn-cpu-gomp`` wheel installs (the ``onednn`` extra: ``<prefix>/lib/libdnnl.so.3``, a
CPU-only build threaded with GNU OpenMP), or the file named by ``$DFLAB_ONEDNN_LIBRARY``. Any
oneDNN 3.x works: the enum values below are from its 3.2 headers, and oneDNN keeps them (and
the C ABI) within a major version. Every call goes through ``check``, which turns a status
other than success into ``OneDnnError`` naming the call.

Threads: the library runs each primitive on an OpenMP team of the calling thread; its size is
that thread's ``omp_set_num_threads`` (``Library.use_threads``), so each caller can give it
the intra-op setting of the session it runs for. GNU OpenMP's idle team threads spin for
300,000 rounds (milliseconds) before they sleep, taking a core from whatever runs next: a
split elementwise op right after a convolution took 2.5-2.8 ms instead of 1.1. Unless the
user chose (``OMP_WAIT_POLICY``, ``GOMP_SPINCOUNT``), the runtime is loaded with a spin of
``SPIN_COUNT`` rounds (about a tenth of a millisecond: long enough to go from one primitive to
the next of the same op).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import site
import sys
import threading

# --- enum values (oneapi/dnnl/dnnl_types.h, oneDNN 3.x) ----------------------------------------
SUCCESS = 0
ENGINE_CPU = 1
STREAM_DEFAULT_FLAGS = 1
F32 = 3
FORMAT_ANY = 1
TAG_A = 2  # a 1-d plain layout (a bias)

FORWARD_TRAINING = 64
FORWARD_INFERENCE = 96
BACKWARD = 128
# dnnl_normalization_flags_t
USE_GLOBAL_STATS = 0x1
USE_SCALE = 0x2
USE_SHIFT = 0x4
CONVOLUTION_DIRECT = 1
POOLING_MAX = 0x1FF
POOLING_AVG_EXCLUDE_PADDING = 0x3FF
ELTWISE_RELU = 0x20  # x > 0 ? x : alpha * x
ELTWISE_TANH = 0x21
ELTWISE_ELU = 0x22  # x > 0 ? x : alpha * (exp(x) - 1)
ELTWISE_SQRT = 0x25
ELTWISE_LINEAR = 0x26  # alpha * x + beta
ELTWISE_LOGISTIC = 0x29
ELTWISE_CLIP_V2 = 0x2F  # min(max(x, alpha), beta)
BINARY_ADD = 0x1FFF0
BINARY_MUL = 0x1FFF1
BINARY_DIV = 0x1FFF4
BINARY_SUB = 0x1FFF5

QUERY_IMPL_INFO_STR = 8
QUERY_SRC_MD = 129
QUERY_DIFF_SRC_MD = 130
QUERY_WEIGHTS_MD = 131
QUERY_DIFF_WEIGHTS_MD = 132
QUERY_DST_MD = 133
QUERY_DIFF_DST_MD = 134
QUERY_WORKSPACE_MD = 135
QUERY_SCRATCHPAD_MD = 136
SCRATCHPAD_USER = 1

ARG_SRC = 1
ARG_SRC_0 = ARG_SRC
ARG_SRC_1 = 2
ARG_DST = 17
ARG_WEIGHTS = 33
ARG_BIAS = 41
ARG_MEAN = 49
ARG_VARIANCE = 50
ARG_SCALE = 51
ARG_SHIFT = 52
ARG_WORKSPACE = 64
ARG_SCRATCHPAD = 80
ARG_DIFF_SRC = 129
ARG_DIFF_DST = 145
ARG_DIFF_WEIGHTS = 161
ARG_DIFF_SCALE = 255
ARG_DIFF_SHIFT = 256
ARG_FROM = ARG_SRC
ARG_TO = ARG_DST
ARG_ATTR_SCALES = 4096  # | the argument scaled: its runtime scale


def arg_post_op(index: int, arg: int) -> int:
    """The argument ``arg`` (``ARG_SRC_1``: the other operand) of post-op ``index``."""
    return 32768 * (index + 1) | arg


MAX_NDIMS = 12
LIBRARY_ENV = "DFLAB_ONEDNN_LIBRARY"
SPIN_COUNT = "10000"
_SONAME = "libdnnl.so.3"

Handle = ctypes.c_void_p
Dims = ctypes.c_int64 * MAX_NDIMS


class ExecArg(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_int), ("memory", Handle)]


class _Version(ctypes.Structure):
    _fields_ = [("major", ctypes.c_int), ("minor", ctypes.c_int), ("patch", ctypes.c_int),
                ("hash", ctypes.c_char_p), ("cpu_runtime", ctypes.c_uint),
                ("gpu_runtime", ctypes.c_uint)]


class OneDnnError(RuntimeError):
    """A oneDNN call failed (its status and the call are in the message)."""


# The status names of dnnl_status_t, for messages.
_STATUS = {1: "out_of_memory", 2: "invalid_arguments", 3: "unimplemented",
           4: "last_impl_reached", 5: "runtime_error", 6: "not_required",
           7: "invalid_graph", 8: "invalid_graph_op", 9: "invalid_shape", 10: "invalid_data_type"}

_H, _I, _S, _P = Handle, ctypes.c_int, ctypes.c_size_t, ctypes.POINTER(Handle)
# name: (argument types, result type); every function returning a status returns a c_int.
_PROTOTYPES = {
    "dnnl_version": ((), ctypes.POINTER(_Version)),
    "dnnl_engine_create": ((_P, _I, _S), _I),
    "dnnl_stream_create": ((_P, _H, ctypes.c_uint), _I),
    "dnnl_stream_wait": ((_H,), _I),
    "dnnl_memory_desc_create_with_tag": ((_P, _I, Dims, _I, _I), _I),
    "dnnl_memory_desc_create_with_strides": ((_P, _I, Dims, _I, Dims), _I),
    "dnnl_memory_desc_destroy": ((_H,), _I),
    "dnnl_memory_desc_get_size": ((_H,), _S),
    "dnnl_memory_desc_equal": ((_H, _H), _I),
    "dnnl_memory_create": ((_P, _H, _H, _H), _I),
    "dnnl_memory_set_data_handle": ((_H, _H), _I),
    "dnnl_memory_destroy": ((_H,), _I),
    "dnnl_primitive_attr_create": ((_P,), _I),
    "dnnl_primitive_attr_destroy": ((_H,), _I),
    "dnnl_primitive_attr_set_scratchpad_mode": ((_H, _I), _I),
    "dnnl_primitive_attr_set_scales_mask": ((_H, _I, _I), _I),
    "dnnl_primitive_attr_set_post_ops": ((_H, _H), _I),
    "dnnl_post_ops_create": ((_P,), _I),
    "dnnl_post_ops_destroy": ((_H,), _I),
    "dnnl_post_ops_append_eltwise": ((_H, _I, ctypes.c_float, ctypes.c_float), _I),
    "dnnl_post_ops_append_binary": ((_H, _I, _H), _I),
    "dnnl_post_ops_append_sum": ((_H, ctypes.c_float, ctypes.c_int32, _I), _I),
    "dnnl_binary_primitive_desc_create": ((_P, _H, _I, _H, _H, _H, _H), _I),
    "dnnl_convolution_forward_primitive_desc_create":
        ((_P, _H, _I, _I, _H, _H, _H, _H, Dims, Dims, Dims, Dims, _H), _I),
    "dnnl_convolution_backward_data_primitive_desc_create":
        ((_P, _H, _I, _H, _H, _H, Dims, Dims, Dims, Dims, _H, _H), _I),
    "dnnl_convolution_backward_weights_primitive_desc_create":
        ((_P, _H, _I, _H, _H, _H, _H, Dims, Dims, Dims, Dims, _H, _H), _I),
    "dnnl_pooling_forward_primitive_desc_create":
        ((_P, _H, _I, _I, _H, _H, Dims, Dims, Dims, Dims, Dims, _H), _I),
    "dnnl_pooling_backward_primitive_desc_create":
        ((_P, _H, _I, _H, _H, Dims, Dims, Dims, Dims, Dims, _H, _H), _I),
    "dnnl_batch_normalization_forward_primitive_desc_create":
        ((_P, _H, _I, _H, _H, ctypes.c_float, ctypes.c_uint, _H), _I),
    "dnnl_batch_normalization_backward_primitive_desc_create":
        ((_P, _H, _I, _H, _H, _H, ctypes.c_float, ctypes.c_uint, _H, _H), _I),
    "dnnl_matmul_primitive_desc_create": ((_P, _H, _H, _H, _H, _H, _H), _I),
    "dnnl_reorder_primitive_desc_create": ((_P, _H, _H, _H, _H, _H), _I),
    "dnnl_primitive_desc_query_md": ((_H, _I, _I), _H),
    "dnnl_primitive_desc_query": ((_H, _I, _I, _H), _I),
    "dnnl_primitive_desc_destroy": ((_H,), _I),
    "dnnl_primitive_create": ((_P, _H), _I),
    "dnnl_primitive_destroy": ((_H,), _I),
    "dnnl_primitive_execute": ((_H, _H, _I, ctypes.POINTER(ExecArg)), _I),
}


def candidates() -> list[str]:
    """Where ``libdnnl`` is looked for, in order: ``$DFLAB_ONEDNN_LIBRARY``, the ``lib``
    folder of this environment (where the wheel's data files go) and of the user's site
    (``pip install --user``), then the system's loader path."""
    named = os.environ.get(LIBRARY_ENV)
    if named:
        return [named]
    out = [os.path.join(prefix, "lib", _SONAME)
           for prefix in dict.fromkeys([sys.prefix, sys.base_prefix, site.getuserbase()])]
    found = ctypes.util.find_library("dnnl")
    return out + [found or _SONAME]


class Library:
    """The loaded library: its functions as attributes (``lib.dnnl_primitive_execute``), the
    CPU engine, one stream per calling thread (a stream is not shared between threads) and
    each thread's OpenMP team size."""

    def __init__(self, path: str):
        self.path = path
        # RTLD_GLOBAL is not needed: nothing else links against it.
        with _short_spin():
            self._dll = ctypes.CDLL(path)
        for name, (argtypes, restype) in _PROTOTYPES.items():
            fn = getattr(self._dll, name)
            fn.argtypes, fn.restype = argtypes, restype
            setattr(self, name, fn)
        v = self.dnnl_version().contents
        self.version = (v.major, v.minor, v.patch)
        if v.major != 3:
            raise OneDnnError(f"{path} is oneDNN {v.major}.{v.minor}; dflab needs oneDNN 3.x")
        # The OpenMP runtime the library was linked with (loaded with it, so already here).
        self._omp_set_num_threads = ctypes.CDLL("libgomp.so.1").omp_set_num_threads
        self._omp_set_num_threads.argtypes = (ctypes.c_int,)
        self.engine = Handle()
        check(self.dnnl_engine_create(ctypes.byref(self.engine), ENGINE_CPU, 0),
              "dnnl_engine_create")
        self._local = threading.local()

    def stream(self) -> Handle:
        """The calling thread's stream."""
        s = getattr(self._local, "stream", None)
        if s is None:
            s = Handle()
            check(self.dnnl_stream_create(ctypes.byref(s), self.engine, STREAM_DEFAULT_FLAGS),
                  "dnnl_stream_create")
            self._local.stream = s
        return s

    def use_threads(self, n: int) -> None:
        """Run the calling thread's next primitives (and create them) on ``n`` threads."""
        if getattr(self._local, "threads", None) != n:
            self._omp_set_num_threads(n)
            self._local.threads = n

    def impl_info(self, pd: Handle) -> str:
        """The implementation oneDNN chose for a primitive descriptor (``jit:avx2``...)."""
        out = ctypes.c_char_p()
        check(self.dnnl_primitive_desc_query(pd, QUERY_IMPL_INFO_STR, 0, ctypes.byref(out)),
              "dnnl_primitive_desc_query")
        return (out.value or b"").decode()


@contextlib.contextmanager
def _short_spin():
    """Sets ``GOMP_SPINCOUNT`` while the library (and with it GNU OpenMP, which reads it as
    it loads) is loaded, unless the user set a wait policy; the environment is restored."""
    chosen = {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT"} & os.environ.keys()
    if not chosen:
        os.environ["GOMP_SPINCOUNT"] = SPIN_COUNT
    try:
        yield
    finally:
        if not chosen:
            os.environ.pop("GOMP_SPINCOUNT", None)


def check(status: int, call: str) -> None:
    if status != SUCCESS:
        raise OneDnnError(f"{call} failed: {_STATUS.get(status, status)}")


def load() -> Library:
    """The first of ``candidates()`` that loads as oneDNN 3.x; ``OSError`` or ``OneDnnError``
    naming each place tried when none does."""
    tried = []
    for path in candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(f"{path} (no such file)")
            continue
        try:
            return Library(path)
        except (OSError, AttributeError, OneDnnError) as e:
            tried.append(f"{path} ({e})")
    raise OSError("oneDNN's library was not found: " + "; ".join(tried))
