"""CUDA C programs that dflab's GPU kernels launch: one ``__global__`` function each, compiled
with NVRTC (through CuPy's ``RawKernel``) once per source and device module, and launched with
arguments whose types the program declares.

A ``CudaProgram`` is plain data: its name, its parameters (C type and name), its body, and a
**reference**, a NumPy function of the same arguments that writes the same outputs. The
reference is the program's specification: the tests compare it with the CPU kernels, the strict
CuPy stand-in runs it in place of the CUDA C (finding it in ``catalogue()`` by source), and the
NVRTC test compiles every source in the catalogue. ``family`` makes one program per dtype from a
body written against ``T`` (``float`` or ``double``) and ``ACC`` (the accumulation type).

Launches (``launch``) pass each argument as the program declares it: a device array for a
pointer, a NumPy scalar of the exact C width for a value (CuPy passes a Python ``int`` as 64
bits, which a kernel reading ``int`` would misread). Sources use 32-bit indices where the sizes
fit (callers check ``fits_int32``), float literals with an ``f`` suffix and ``expf``/``logf``
in float code, so that float32 math never goes through double.

Invariant: a program's source is generated only from constants of this package and integer or
dtype parameters, never from a graph's names or strings.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

# C parameter types and the NumPy scalar type a launch passes for each value parameter.
SCALAR_TYPES = {"int": np.int32, "unsigned int": np.uint32, "long long": np.int64,
                "float": np.float32, "double": np.float64}
POINTER_DTYPES = {"float": np.float32, "double": np.float64, "int": np.int32,
                  "long long": np.int64, "unsigned char": np.uint8, "bool": np.bool_}
C_TYPE = {"float32": "float", "float64": "double"}
INT32_MAX = 2 ** 31 - 1
# Threads per block of the elementwise programs: 256 keeps every SM's warp slots busy with
# few registers per thread; grids are sized to cover the work, capped by MAX_BLOCKS (the
# programs loop over what remains: a grid-stride loop).
BLOCK = 256
MAX_BLOCKS = 65535


@dataclass(frozen=True)
class Param:
    """One parameter: ``ctype`` as written in C (``const float*``, ``int``) and its name."""

    ctype: str
    name: str

    @property
    def is_pointer(self) -> bool:
        return self.ctype.endswith("*")

    @property
    def is_const(self) -> bool:
        return self.ctype.startswith("const ")

    @property
    def base(self) -> str:
        return self.ctype.removeprefix("const ").rstrip("*").strip()

    def check(self, value, program: str) -> None:
        """Refuse an argument a CUDA launch would misread (the stand-in calls this on every
        launch; on a GPU the types are right by construction)."""
        if self.is_pointer:
            dtype = POINTER_DTYPES[self.base]
            if getattr(value, "dtype", None) != dtype or not value.flags.c_contiguous:
                raise TypeError(f"{program}: {self.name} must be a C-contiguous {dtype.__name__}"
                                f" device array, got {getattr(value, 'dtype', type(value))}")
        elif type(value) is not SCALAR_TYPES[self.ctype]:
            raise TypeError(f"{program}: {self.name} must be passed as "
                            f"numpy.{SCALAR_TYPES[self.ctype].__name__}, got {type(value)}")


@dataclass(frozen=True, eq=False)
class CudaProgram:
    """A ``__global__`` function (see the module docstring). ``kind`` is "copy" for programs
    that only move data (what the launch counts of the tests tell apart)."""

    name: str
    params: tuple[Param, ...]
    body: str
    reference: Callable
    preamble: str = ""
    kind: str = "compute"
    source: str = field(init=False)

    def __post_init__(self):
        signature = ", ".join(f"{p.ctype} {p.name}" for p in self.params)
        src = (f"{_PRELUDE}{self.preamble}\nextern \"C\" __global__ void {self.name}"
               f"({signature}) {{\n{self.body}\n}}\n")
        object.__setattr__(self, "source", src)
        _register(self)

    def check_args(self, args) -> None:
        if len(args) != len(self.params):
            raise TypeError(f"{self.name} takes {len(self.params)} arguments, got {len(args)}")
        for p, a in zip(self.params, args):
            p.check(a, self.name)

    def compiled(self, cupy):
        """This program compiled for ``cupy`` (a ``RawKernel``, built once per module)."""
        key = (id(cupy), self.source)
        k = _COMPILED.get(key)
        if k is None:
            with _LOCK:
                k = _COMPILED.get(key)
                if k is None:
                    k = _COMPILED[key] = cupy.RawKernel(self.source, self.name,
                                                        options=("--std=c++17",))
        return k


# Helpers every source may use: a block-wide sum and maximum in shared memory (blockDim.x a
# power of two, at most 1024), warp shuffles first.
_PRELUDE = r"""
#define DFLAB_FULL_MASK 0xffffffffu
#define DFLAB_INF __int_as_float(0x7f800000)
#define DFLAB_NAN __int_as_float(0x7fffffff)
template <typename A> __device__ __forceinline__ A dflab_warp_sum(A v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(DFLAB_FULL_MASK, v, o);
  return v;
}
template <typename A> __device__ __forceinline__ A dflab_warp_max(A v) {
  for (int o = 16; o > 0; o >>= 1) { A w = __shfl_down_sync(DFLAB_FULL_MASK, v, o);
    v = (w > v || w != w) ? w : v; }
  return v;
}
// Every thread of the block calls these; every thread gets the result.
template <typename A> __device__ A dflab_block_sum(A v, A* shared) {
  v = dflab_warp_sum(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + 31) >> 5;
  v = threadIdx.x < warps ? shared[threadIdx.x] : (A)0;
  if (warp == 0) v = dflab_warp_sum(v);
  if (threadIdx.x == 0) shared[0] = v;
  __syncthreads();
  v = shared[0];
  __syncthreads();
  return v;
}
template <typename A> __device__ A dflab_block_max(A v, A* shared) {
  v = dflab_warp_max(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + 31) >> 5;
  if (warp == 0) {
    A m = threadIdx.x < warps ? shared[threadIdx.x] : shared[0];
    m = dflab_warp_max(m);
    if (threadIdx.x == 0) shared[0] = m;
  }
  __syncthreads();
  v = shared[0];
  __syncthreads();
  return v;
}
"""

_CATALOGUE: dict[str, CudaProgram] = {}
_COMPILED: dict[tuple, object] = {}
_LOCK = threading.Lock()


def _register(program: CudaProgram) -> None:
    with _LOCK:
        _CATALOGUE.setdefault(program.source, program)


def catalogue() -> list[CudaProgram]:
    """Every program made so far (the package's own at import, generated ones as made)."""
    with _LOCK:
        return list(_CATALOGUE.values())


def program_for(source: str) -> CudaProgram | None:
    """The program whose source is ``source`` (what a stand-in runs in place of CUDA C)."""
    return _CATALOGUE.get(source)


def family(name: str, params: str, body: str, reference: Callable, preamble: str = "",
           kind: str = "compute", dtypes=("float32", "float64")) -> dict[str, CudaProgram]:
    """One program per dtype of ``dtypes``, from a body and parameters written against ``T``
    (the element type) and ``ACC`` (float for float32 data, double for float64): dtype ->
    program, named ``<name>_<dtype>``."""
    out = {}
    for dt in dtypes:
        ct = C_TYPE[dt]
        types = f"typedef {ct} T;\ntypedef {ct} ACC;\n"
        ps = tuple(parse_param(p.replace("T*", f"{ct}*").replace("T ", f"{ct} "))
                   for p in params.split(","))
        out[dt] = CudaProgram(f"{name}_{dt}", ps, body, reference, types + preamble, kind)
    return out


def parse_param(text: str) -> Param:
    text = " ".join(text.split())
    ctype, _, pname = text.rpartition(" ")
    if ctype.endswith("*") or "*" not in pname:
        return Param(ctype, pname)
    return Param(ctype + "*", pname.lstrip("*"))


def grid_for(n: int, block: int = BLOCK) -> int:
    """Blocks covering ``n`` threads of ``block``, capped (programs loop over the rest)."""
    return max(1, min(MAX_BLOCKS, -(-int(n) // block)))


def fits_int32(*sizes: int) -> bool:
    return all(int(s) <= INT32_MAX for s in sizes)


def launch(cupy, program: CudaProgram, grid: int, block: int, args, shared_mem: int = 0):
    """Launch ``program`` on the current stream (CuPy's ``RawKernel`` call)."""
    program.compiled(cupy)((int(grid),), (int(block),), tuple(args), shared_mem=int(shared_mem))


def source_digest(source: str) -> str:
    return hashlib.sha1(source.encode()).hexdigest()[:12]
