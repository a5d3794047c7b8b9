"""Execution plans: oneDNN primitives built once per shape and run on NumPy buffers.

A ``Plan`` is what one kernel call runs for one set of shapes, strides and thread count: a
few primitives in order (a reorder of the filter into the layout the convolution chose, the
convolution, a reorder of its result), and the memories they read and write, by name. A
*slot* is a NumPy array the caller passes on each call (the input, the output), described by
its own shape and strides, so oneDNN reads and writes the array's buffer in place, with no
copy; a *buffer* is scratch memory the plan owns (a reordered filter, oneDNN's scratchpad, a
max pool's workspace), one set per calling thread, allocated once.

Invariant: a plan is immutable once built and shared by every thread (a primitive may run on
several threads at once); each thread runs it with its own memory objects, buffers and stream,
so nothing a call writes is shared. Plans are cached by key (``cached``), at most
``CACHE_SIZE`` of them; an evicted plan is destroyed when the last call running it returns.
"""

from __future__ import annotations

import ctypes
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence

import numpy as np

from dflab.kernels.onednn import capi
from dflab.kernels.onednn.capi import Handle, check

CACHE_SIZE = 512
_ALIGN = 64  # bytes: oneDNN's buffers are cache-line aligned


class UnsupportedError(Exception):
    """oneDNN has no fast implementation for these shapes (or only its reference one):
    the caller computes with NumPy instead."""


def dims(values: Sequence[int]) -> capi.Dims:
    return capi.Dims(*values)


def array_dims(a: np.ndarray, order: Sequence[int]) -> tuple[tuple, tuple]:
    """(dims, strides in elements) of ``a``'s axes taken in ``order``: oneDNN's logical
    dimensions (NCHW, OIHW) of a float32 NumPy array in any layout. ``UnsupportedError`` for
    another dtype, or a stride that is negative, not a whole number of elements, or 0 (a
    broadcast)."""
    if a.dtype != np.float32:
        raise UnsupportedError(f"dtype {a.dtype}")
    item = a.itemsize
    strides = []
    for i in order:
        s = a.strides[i]
        if s < 0 or s % item or (s == 0 and a.shape[i] > 1):
            raise UnsupportedError("negative, unaligned or broadcast strides")
        # A dimension of size 1 keeps NumPy's stride where it has one (what a contiguous
        # array's layout says it is: oneDNN recognises its fast layouts by the strides).
        strides.append(s // item if s or a.shape[i] > 1 else 1)
    return tuple(a.shape[i] for i in order), tuple(strides)


def contiguous_strides(shape: Sequence[int], order: Sequence[int]) -> tuple:
    """Element strides, in logical axis order, of a C-contiguous array whose axes are the
    logical axes taken in ``order`` (``order`` maps array axis -> logical axis)."""
    strides = [0] * len(shape)
    step = 1
    for logical in reversed(order):
        strides[logical] = step
        step *= shape[logical]
    return tuple(strides)


class Plan:
    """Primitives and the memories they run on (see the module docstring)."""

    def __init__(self, lib: capi.Library, threads: int):
        self.lib = lib
        self.threads = threads
        self.impl = ""  # the main primitive's implementation, for messages and tests
        self._slots: dict[str, Handle] = {}  # name -> memory desc
        self._buffers: dict[str, tuple[Handle, int]] = {}  # name -> (memory desc, bytes)
        self._steps: list[tuple[Handle, list[tuple[int, str]]]] = []
        self._owned_mds: list[Handle] = []
        self._pds: list[Handle] = []
        self._attrs: list[Handle] = []
        self._per_thread: dict[int, tuple] = {}

    # --- building -----------------------------------------------------------------------------
    def desc(self, dims_: Sequence[int], strides: Sequence[int]) -> Handle:
        """A plain memory desc (float32) owned by this plan."""
        md = Handle()
        check(self.lib.dnnl_memory_desc_create_with_strides(
            ctypes.byref(md), len(dims_), dims(dims_), capi.F32, dims(strides)),
            "dnnl_memory_desc_create_with_strides")
        self._owned_mds.append(md)
        return md

    def any_desc(self, dims_: Sequence[int], tag: int = capi.FORMAT_ANY) -> Handle:
        """A memory desc whose layout the primitive chooses (``FORMAT_ANY``), or of a tag."""
        md = Handle()
        check(self.lib.dnnl_memory_desc_create_with_tag(
            ctypes.byref(md), len(dims_), dims(dims_), capi.F32, tag),
            "dnnl_memory_desc_create_with_tag")
        self._owned_mds.append(md)
        return md

    def primitive_desc(self, create: Callable[[ctypes.c_void_p], int], call: str) -> Handle:
        """A primitive descriptor made by ``create(byref(pd))``, kept by the plan.
        ``UnsupportedError`` when oneDNN has no implementation or only its reference one."""
        pd = Handle()
        status = create(ctypes.byref(pd))
        if status == 3:  # unimplemented: no implementation for these shapes
            raise UnsupportedError(f"{call}: unimplemented")
        check(status, call)
        self._pds.append(pd)
        impl = self.lib.impl_info(pd)
        if impl.startswith("ref"):  # correct but an order of magnitude slower than NumPy
            raise UnsupportedError(f"{call}: only the reference implementation ({impl})")
        return pd

    def query(self, pd: Handle, what: int) -> Handle:
        return Handle(self.lib.dnnl_primitive_desc_query_md(pd, what, 0))

    def same(self, a: Handle, b: Handle) -> bool:
        return bool(self.lib.dnnl_memory_desc_equal(a, b))

    def attr(self, post_ops: Sequence[tuple] = (), scaled: Sequence[int] = ()) -> Handle:
        """Primitive attributes with a user scratchpad (one per calling thread, see
        ``scratchpad``), so that a primitive may run on several threads at once; with
        ``post_ops`` applied to its result in order, each ``("eltwise", alg, alpha, beta)``,
        ``("sum",)`` (plus what the destination held: an accumulation) or
        ``("binary", alg, md)`` (the result op another memory, given at run time as
        ``capi.arg_post_op(index, capi.ARG_SRC_1)``); ``scaled``: the arguments multiplied
        by a runtime scale first (one value, ``capi.ARG_ATTR_SCALES | arg``)."""
        attr = Handle()
        check(self.lib.dnnl_primitive_attr_create(ctypes.byref(attr)),
              "dnnl_primitive_attr_create")
        self._attrs.append(attr)
        check(self.lib.dnnl_primitive_attr_set_scratchpad_mode(attr, capi.SCRATCHPAD_USER),
              "dnnl_primitive_attr_set_scratchpad_mode")
        for arg in scaled:
            check(self.lib.dnnl_primitive_attr_set_scales_mask(attr, arg, 0),
                  "dnnl_primitive_attr_set_scales_mask")
        if post_ops:
            chain = Handle()
            check(self.lib.dnnl_post_ops_create(ctypes.byref(chain)), "dnnl_post_ops_create")
            try:
                for kind, *params in post_ops:
                    if kind == "eltwise":
                        check(self.lib.dnnl_post_ops_append_eltwise(chain, *params),
                              "dnnl_post_ops_append_eltwise")
                    elif kind == "sum":  # the result plus what the destination held
                        check(self.lib.dnnl_post_ops_append_sum(chain, 1.0, 0, capi.F32),
                              "dnnl_post_ops_append_sum")
                    else:
                        check(self.lib.dnnl_post_ops_append_binary(chain, *params),
                              "dnnl_post_ops_append_binary")
                # The attributes keep a copy of the chain.
                check(self.lib.dnnl_primitive_attr_set_post_ops(attr, chain),
                      "dnnl_primitive_attr_set_post_ops")
            finally:
                self.lib.dnnl_post_ops_destroy(chain)
        return attr

    def slot(self, name: str, md: Handle) -> None:
        self._slots[name] = md

    def buffer(self, name: str, md: Handle) -> bool:
        """Declare a buffer of layout ``md``; False (nothing declared) when it is empty."""
        size = int(self.lib.dnnl_memory_desc_get_size(md))
        if size:
            self._buffers[name] = (md, size)
        return bool(size)

    def step(self, pd: Handle, args: list[tuple[int, str]], scratchpad: bool = True) -> None:
        """Run the primitive of ``pd`` on the named memories, with its scratchpad if any."""
        prim = Handle()
        check(self.lib.dnnl_primitive_create(ctypes.byref(prim), pd), "dnnl_primitive_create")
        if scratchpad:
            name = f"scratchpad{len(self._steps)}"
            if self.buffer(name, self.query(pd, capi.QUERY_SCRATCHPAD_MD)):
                args = args + [(capi.ARG_SCRATCHPAD, name)]
        self._steps.append((prim, args))

    def reorder(self, src: str, src_md: Handle, dst: str, dst_md: Handle) -> None:
        """A step copying memory ``src`` into ``dst`` in ``dst_md``'s layout."""
        pd = self.primitive_desc(
            lambda out: self.lib.dnnl_reorder_primitive_desc_create(
                out, src_md, self.lib.engine, dst_md, self.lib.engine, self.attr()),
            "dnnl_reorder_primitive_desc_create")
        self.step(pd, [(capi.ARG_FROM, src), (capi.ARG_TO, dst)])

    # --- running ------------------------------------------------------------------------------
    def run(self, **arrays: np.ndarray) -> None:
        """Run the steps with each slot bound to the array of that name, on the calling
        thread's memories and buffers, on ``threads`` threads."""
        lib = self.lib
        state = self._per_thread.get(threading.get_ident())
        if state is None:
            state = self._thread_state()
        memories, steps, _ = state
        lib.use_threads(self.threads)
        for name, a in arrays.items():
            check(lib.dnnl_memory_set_data_handle(memories[name], a.ctypes.data),
                  "dnnl_memory_set_data_handle")
        stream = lib.stream()
        for prim, n, args in steps:
            check(lib.dnnl_primitive_execute(prim, stream, n, args), "dnnl_primitive_execute")
        check(lib.dnnl_stream_wait(stream), "dnnl_stream_wait")

    def _thread_state(self) -> tuple:
        """The calling thread's memory objects (slots without a buffer yet, buffers on
        aligned NumPy memory of its own) and argument arrays, made on its first run."""
        memories, raw = {}, []
        for name, md in self._slots.items():
            memories[name] = self._memory(md, None)
        for name, (md, size) in self._buffers.items():
            block = np.empty(size + _ALIGN, np.uint8)
            raw.append(block)
            address = block.ctypes.data
            memories[name] = self._memory(md, address + -address % _ALIGN)
        steps = []
        for prim, args in self._steps:
            packed = (capi.ExecArg * len(args))(
                *[capi.ExecArg(arg, memories[name]) for arg, name in args])
            steps.append((prim, len(args), packed))
        state = (memories, steps, raw)
        self._per_thread[threading.get_ident()] = state
        return state

    def _memory(self, md: Handle, ptr) -> Handle:
        mem = Handle()
        check(self.lib.dnnl_memory_create(ctypes.byref(mem), md, self.lib.engine, ptr),
              "dnnl_memory_create")
        return mem

    def __del__(self):
        lib = getattr(self, "lib", None)
        if lib is None:
            return
        for memories, _, _ in self._per_thread.values():
            for mem in memories.values():
                lib.dnnl_memory_destroy(mem)
        for prim, _ in self._steps:
            lib.dnnl_primitive_destroy(prim)
        for pd in self._pds:
            lib.dnnl_primitive_desc_destroy(pd)
        for attr in self._attrs:
            lib.dnnl_primitive_attr_destroy(attr)
        for md in self._owned_mds:
            lib.dnnl_memory_desc_destroy(md)


_cache: OrderedDict = OrderedDict()
_cache_lock = threading.Lock()


def cached(key: tuple, build: Callable[[], Plan]) -> Plan:
    """The plan for ``key``, built by ``build`` the first time. ``UnsupportedError`` when it
    cannot be (oneDNN has no fast kernel, or refuses the shapes or strides), remembered too:
    those shapes go to NumPy without asking oneDNN again."""
    plan = _cache.get(key)
    if plan is None:
        with _cache_lock:
            plan = _cache.get(key)
            if plan is None:
                try:
                    plan = build()
                except UnsupportedError as e:
                    plan = e
                except capi.OneDnnError as e:  # oneDNN refused these descriptions
                    plan = UnsupportedError(str(e))
                _cache[key] = plan
                while len(_cache) > CACHE_SIZE:
                    _cache.popitem(last=False)
    if isinstance(plan, UnsupportedError):
        raise plan
    return plan


def clear_cache() -> None:
    """Forget every plan (each is destroyed when the last call running it returns)."""
    with _cache_lock:
        _cache.clear()
