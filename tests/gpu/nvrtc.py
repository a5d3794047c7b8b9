"""Compile CUDA C with NVRTC through ctypes, without a GPU (the ``nvidia-cuda-nvrtc-cu12``
wheel ships the compiler as a shared library), and wrap dflab's generated kernel arguments in
a translation unit shaped like the one CuPy builds for an ``ElementwiseKernel`` /
``ReductionKernel``."""

from __future__ import annotations

import ctypes
import pathlib


def load_nvrtc():
    """The NVRTC library from the pip wheel, else a CUDA toolkit's on the library path (a GPU
    machine), or None."""
    try:
        import nvidia.cuda_nvrtc

        lib_dir = pathlib.Path(list(nvidia.cuda_nvrtc.__path__)[0]) / "lib"
        for name in ("libnvrtc.so.12", "nvrtc64_120_0.dll"):
            if (lib_dir / name).exists():
                return ctypes.CDLL(str(lib_dir / name))
    except ImportError:
        pass
    try:
        return ctypes.CDLL("libnvrtc.so.12")
    except OSError:
        return None


class CompileError(RuntimeError):
    pass


def compile_cuda(lib, source: str, arch: str = "sm_90") -> bytes:
    """``source`` compiled for ``arch``; returns the cubin. Raises CompileError with NVRTC's
    log when the source does not compile."""
    prog = ctypes.c_void_p()
    _check(lib, lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), b"dflab.cu", 0,
                                       None, None))
    try:
        opts = [f"--gpu-architecture={arch}".encode(), b"--std=c++17"]
        arr = (ctypes.c_char_p * len(opts))(*opts)
        rc = lib.nvrtcCompileProgram(prog, len(opts), arr)
        if rc != 0:
            size = ctypes.c_size_t()
            lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
            log = ctypes.create_string_buffer(size.value)
            lib.nvrtcGetProgramLog(prog, log)
            raise CompileError(log.value.decode(errors="replace") + "\n--- source ---\n" + source)
        size = ctypes.c_size_t()
        _check(lib, lib.nvrtcGetCUBINSize(prog, ctypes.byref(size)))
        cubin = ctypes.create_string_buffer(size.value)
        _check(lib, lib.nvrtcGetCUBIN(prog, cubin))
        return cubin.raw
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))


def _check(lib, rc):
    if rc != 0:
        lib.nvrtcGetErrorString.restype = ctypes.c_char_p
        raise CompileError(lib.nvrtcGetErrorString(rc).decode())


# What CuPy's templates define around a kernel's code (math constants, its reduction names).
_PRELUDE = """
#define CUDART_INF_F __int_as_float(0x7f800000)
#define CUDART_INF __longlong_as_double(0x7ff0000000000000ULL)
struct _dflab_index { long long n; __device__ long long size() const { return n; } };
"""


def elementwise_unit(args: dict) -> str:
    """A translation unit for ``cupy.ElementwiseKernel(**args)`` over flat arrays."""
    ins = _params(args["in_params"])
    out_t, out_n = args["out_params"].split()
    params = ", ".join([f"const {_ct(t)}* __restrict__ _p_{n}" for t, n in ins]
                       + [f"{_ct(out_t)}* __restrict__ _p_{out_n}", "long long _n"])
    loads = "".join(f"    {_ct(t)} {n} = _p_{n}[i];\n" for t, n in ins)
    return (_PRELUDE + args["preamble"] + f'extern "C" __global__ void {args["name"]}'
            f"({params}) {{\n  for (long long i = blockIdx.x * blockDim.x + threadIdx.x; "
            f"i < _n; i += (long long)blockDim.x * gridDim.x) {{\n{loads}"
            f"    {_ct(out_t)} {out_n};\n    {args['operation']};\n"
            f"    _p_{out_n}[i] = {out_n};\n  }}\n}}\n")


def reduction_unit(args: dict) -> str:
    """A translation unit for ``cupy.ReductionKernel(**args)``: one thread per output, the
    reduction expression applied serially (CuPy's tree order differs, not its expressions)."""
    ins = _params(args["in_params"])
    out_t, out_n = args["out_params"].split()
    rt = args["reduce_type"]
    params = ", ".join([f"const {_ct(t)}* __restrict__ _p_{n}" for t, n in ins]
                       + [f"{_ct(out_t)}* __restrict__ _p_{out_n}", "long long _n_in",
                          "long long _n_out"])
    loads = "".join(f"      {_ct(t)} {n} = _p_{n}[o * _inner + j];\n" for t, n in ins)
    return (_PRELUDE + args["preamble"] + f"typedef {rt} _type_reduce;\n"
            f'extern "C" __global__ void {args["name"]}({params}) {{\n'
            f"  long long o = blockIdx.x * blockDim.x + threadIdx.x;\n"
            f"  if (o >= _n_out) return;\n  long long _inner = _n_in / _n_out;\n"
            f"  _dflab_index _in_ind{{_n_in}}, _out_ind{{_n_out}};\n"
            f"  {rt} a = {args['identity'] or '0'};\n"
            f"  for (long long j = 0; j < _inner; ++j) {{\n{loads}"
            f"      {rt} b = {args['map_expr']};\n      a = {args['reduce_expr']};\n  }}\n"
            f"  {_ct(out_t)} {out_n};\n  {args['post_map_expr']};\n"
            f"  _p_{out_n}[o] = {out_n};\n}}\n")


def _params(text: str) -> list[tuple[str, str]]:
    return [tuple(p.split()) for p in text.split(",")]


def _ct(dtype: str) -> str:
    return {"float32": "float", "float64": "double", "float16": "__half"}[dtype]
