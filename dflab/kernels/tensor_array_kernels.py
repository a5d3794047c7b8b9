"""TensorArray kernels: per-step arrays of tensors behind a ``resource`` handle.

``TensorArrayV3`` creates a fresh ``TensorArrayStorage`` every time it runs and outputs it as the
handle's value, so two steps (or two runs of a loop that creates an array) never share elements.
The other kernels take that handle and act on the storage under its lock (a loop's iterations
may write concurrently). Their float32 ``flow`` outputs carry no data: they exist so that
dataflow orders reads after the writes they depend on (TF's trick).

Semantics follow TF 1.x's ``TensorArray`` kernels: a forward array refuses a second write to an
index and, by default, forgets an element once read (``clear_after_read``); reading an element
never written gives zeros when the element shape is fully known and is an error otherwise. A
*gradient* array (``TensorArrayGradV3``, one per forward array and gradient source) sums repeated
writes and reads zeros, shaped like the forward element, for elements nobody wrote.

The elements live in the memory of the device that created the array: NumPy arrays on a CPU,
device arrays on a GPU (through the creating kernel's ``ctx.xp``), as TF keeps a TensorArray's
elements in GPU memory. The handle (the storage object), the ``flow`` scalars, sizes, indices
and concat lengths are host values (TF's ``HostMemory`` arguments), so no kernel here reads a
device array back to decide anything. A value written from another device is moved into the
storage's memory; a value read is handed over in the reader's memory.
"""

from __future__ import annotations

import threading

import numpy as np

from dflab.framework import errors
from dflab.kernels.context import host
from dflab.kernels.registry import kernel

_FLOW = np.float32(0.0)


def _err(msg):
    return errors.InvalidArgumentError(None, None, msg)


def _shape_str(shape):
    if shape is None:
        return "<unknown>"
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


def _compatible(a, b) -> bool:
    """Are partial shapes ``a`` and ``b`` (tuples with None dims, or None) compatible?"""
    if a is None or b is None:
        return True
    return len(a) == len(b) and all(x is None or y is None or x == y for x, y in zip(a, b))


def _fully_defined(shape) -> bool:
    return shape is not None and all(d is not None for d in shape)


class TensorArrayStorage:
    """The elements of one TensorArray in one step (the value of its handle)."""

    def __init__(self, name, dtype, size, dynamic_size, clear_after_read, element_shape,
                 identical_element_shapes, is_grad=False, xp=np):
        self.name = name
        self.xp = xp  # the array namespace of the device holding the elements
        self.dtype = np.dtype(dtype)
        self.dynamic_size = dynamic_size
        self.clear_after_read = clear_after_read
        self.element_shape = element_shape  # tuple with None dims, or None (unknown rank)
        self.identical = identical_element_shapes
        self.is_grad = is_grad
        self.values = [None] * size
        self.written = [False] * size
        self.cleared = [False] * size
        self.shapes = [None] * size  # kept after a read clears the value
        self.closed = False
        self.grads: dict[str, TensorArrayStorage] = {}
        self.lock = threading.Lock()

    def __repr__(self):
        return f"<TensorArray {self.name} size={len(self.values)}>"

    # --- helpers (caller holds the lock) ---------------------------------------------------
    def _check_open(self):
        if self.closed:
            raise _err(f"TensorArray {self.name} has already been closed.")

    def _grow(self, n):
        extra = n - len(self.values)
        if extra > 0:
            self.values += [None] * extra
            self.written += [False] * extra
            self.cleared += [False] * extra
            self.shapes += [None] * extra

    def _check_write_index(self, index):
        if index < 0:
            raise _err(f"TensorArray {self.name}: Tried to write to index {index} but array "
                       "index must be non-negative.")
        if index >= len(self.values):
            if not (self.dynamic_size or self.is_grad):
                raise _err(f"TensorArray {self.name}: Tried to write to index {index} but array "
                           f"is not resizeable and size is: {len(self.values)}")
            self._grow(index + 1)

    def write(self, index, value):
        value = _in_memory_of(self.xp, value)
        if value.dtype != self.dtype:
            raise _err(f"TensorArray {self.name}: Could not write to TensorArray index {index} "
                       f"because the value dtype is {value.dtype.name} but the TensorArray "
                       f"dtype is {self.dtype.name}.")
        self._check_open()
        self._check_write_index(index)
        shape = value.shape
        if not _compatible(self.element_shape, shape):
            raise _err(f"TensorArray {self.name}: Could not write to TensorArray index {index} "
                       f"because the value shape is {_shape_str(shape)} which is incompatible "
                       f"with the TensorArray's inferred element shape: "
                       f"{_shape_str(self.element_shape)} (consider setting infer_shape=False).")
        if self.identical and not _fully_defined(self.element_shape):
            self.element_shape = shape
        if self.written[index]:
            if not self.is_grad:
                raise _err(f"TensorArray {self.name}: Could not write to TensorArray index "
                           f"{index} because it has already been written to.")
            old = self.values[index]
            if old.shape != shape:
                raise _err(f"TensorArray {self.name}: Could not aggregate to TensorArray index "
                           f"{index} because the existing shape is {_shape_str(old.shape)} but "
                           f"the new input shape is {_shape_str(shape)}.")
            value = old + value  # a new array: neither input is modified
        self.values[index] = value
        self.written[index] = True
        self.shapes[index] = shape

    def read(self, index):
        self._check_open()
        n = len(self.values)
        if index < 0 or (index >= n and not self.is_grad):
            raise _err(f"TensorArray {self.name}: Tried to read from index {index} but array "
                       f"size is: {n}")
        if index >= n or not self.written[index]:
            shape = self.shapes[index] if index < n else None
            if shape is None:
                if not _fully_defined(self.element_shape):
                    raise _err(
                        f"TensorArray {self.name}: Could not read from TensorArray index "
                        f"{index} because it has not yet been written to, and the element "
                        f"shape {_shape_str(self.element_shape)} is not fully defined (only "
                        "then does an unwritten element read as zeros).")
                shape = self.element_shape
            return self.xp.zeros(shape, self.dtype)
        if self.cleared[index]:
            raise _err(f"TensorArray {self.name}: Could not read index {index} twice because it "
                       "was cleared after a previous read (perhaps try setting "
                       "clear_after_read = false?).")
        value = self.values[index]
        if self.clear_after_read and not self.is_grad:
            self.values[index] = None
            self.cleared[index] = True
        return value

    def read_many(self, indices, element_shape_attr):
        if not indices:
            shape = element_shape_attr if _fully_defined(element_shape_attr) else \
                self.element_shape
            if not _fully_defined(shape):
                raise _err(f"TensorArray {self.name}: TensorArray has size zero, but element "
                           f"shape {_shape_str(shape)} is not fully defined. Currently only "
                           "static shapes are supported when packing zero-size TensorArrays.")
            return []
        values = [self.read(i) for i in indices]
        first = values[0].shape
        for i, v in zip(indices, values):
            if v.shape != first:
                raise _err(f"TensorArray {self.name}: TensorArray has inconsistent shapes. "
                           f"Index {indices[0]} has shape: {_shape_str(first)} but index {i} "
                           f"has shape: {_shape_str(v.shape)}")
        return values

    def grad(self, source):
        g = self.grads.get(source)
        if g is None:
            g = TensorArrayStorage(f"{self.name}@{source}", self.dtype, len(self.values), True,
                                   False, self.element_shape, self.identical, is_grad=True,
                                   xp=self.xp)
            g.shapes = list(self.shapes)
            self.grads[source] = g
        return g


# --- kernels --------------------------------------------------------------------------------
def _shape_attr(node, name):
    shape = node.attr.get(name)
    if shape is None or shape.ndims is None:
        return None
    return tuple(shape.as_list())


def _index(v):
    return int(host(v))


def _in_memory_of(xp, value):
    """``value`` as an array of the namespace ``xp`` (the host's when ``xp`` is NumPy): a value
    already there is returned as is, another is copied across."""
    if xp is np:
        return host(value)
    return xp.asarray(value)


@kernel("TensorArrayV3", host_memory_inputs=(0,))
def _tensor_array(node, ctx):
    a = node.attr
    dtype = a["dtype"].as_numpy_dtype
    element_shape = _shape_attr(node, "element_shape")
    name = a.get("tensor_array_name") or node.name
    xp = ctx.xp

    def create(size):
        size = _index(size)
        if size < 0:
            raise _err(f"TensorArray {name}: size must be non-negative, got {size}")
        storage = TensorArrayStorage(name, dtype, size, a["dynamic_size"], a["clear_after_read"],
                                     element_shape, a["identical_element_shapes"], xp=xp)
        return storage, _FLOW

    return create


@kernel("TensorArrayGradV3")
def _tensor_array_grad(node, ctx):
    source = node.attr["source"]

    def grad(handle, flow):
        with handle.lock:
            handle._check_open()
            return handle.grad(source), _FLOW

    return grad


@kernel("TensorArrayWriteV3", host_memory_inputs=(1,))
def _write(node, ctx):
    def write(handle, index, value, flow):
        with handle.lock:
            handle.write(_index(index), value)
        return _FLOW

    return write


@kernel("TensorArrayReadV3", host_memory_inputs=(1,))
def _read(node, ctx):
    xp = ctx.xp

    def read(handle, index, flow):
        with handle.lock:
            return _in_memory_of(xp, handle.read(_index(index)))

    return read


@kernel("TensorArrayGatherV3", host_memory_inputs=(1,))
def _gather(node, ctx):
    element_shape = _shape_attr(node, "element_shape")
    dtype = node.attr["dtype"].as_numpy_dtype
    xp = ctx.xp

    def gather(handle, indices, flow):
        idx = [int(i) for i in host(indices).reshape(-1)]
        with handle.lock:
            values = handle.read_many(idx, element_shape)
            shape = handle.element_shape if _fully_defined(handle.element_shape) else \
                element_shape
        if not values:
            return xp.zeros((0,) + tuple(shape), dtype)
        return _in_memory_of(xp, handle.xp.stack(values))

    return gather


@kernel("TensorArrayScatterV3", host_memory_inputs=(1,))
def _scatter(node, ctx):
    def scatter(handle, indices, value, flow):
        idx = host(indices).reshape(-1)
        value = _in_memory_of(handle.xp, value)
        if value.ndim == 0 or value.shape[0] != idx.size:
            raise _err(f"TensorArray {handle.name}: Expected len(indices) == values.shape[0], "
                       f"but saw: {idx.size} vs. {value.shape[0] if value.ndim else 'scalar'}")
        with handle.lock:
            handle._check_open()
            for i in idx:  # grow (or fail) before writing anything
                handle._check_write_index(int(i))
            for k, i in enumerate(idx):
                handle.write(int(i), value[k])
        return _FLOW

    return scatter


@kernel("TensorArraySizeV3", host_memory_outputs=(0,))
def _size(node, ctx):
    def size(handle, flow):
        with handle.lock:
            return np.int32(len(handle.values))

    return size


@kernel("TensorArrayConcatV3", host_memory_outputs=(1,))
def _concat(node, ctx):
    except0 = _shape_attr(node, "element_shape_except0")
    dtype = node.attr["dtype"].as_numpy_dtype
    xp = ctx.xp

    def concat(handle, flow):
        with handle.lock:
            values = [handle.read(i) for i in range(len(handle.values))]
        if not values:
            if not _fully_defined(except0):
                raise _err(f"TensorArray {handle.name}: Concat saw a TensorArray of size zero "
                           "and element_shape_except0 is not fully defined.")
            return xp.zeros((0,) + tuple(except0), dtype), np.zeros([0], np.int64)
        for i, v in enumerate(values):
            if v.ndim == 0:
                raise _err(f"TensorArray {handle.name}: Concat saw a scalar shape at index {i} "
                           "but requires at least vectors.")
            if v.shape[1:] != values[0].shape[1:]:
                raise _err(f"TensorArray {handle.name}: Concat saw element {i} with shape "
                           f"{_shape_str(v.shape)} but element 0 has shape "
                           f"{_shape_str(values[0].shape)}: all dims except the first must "
                           "agree.")
        lengths = np.array([v.shape[0] for v in values], np.int64)
        return _in_memory_of(xp, handle.xp.concatenate(values, axis=0)), lengths

    return concat


@kernel("TensorArraySplitV3", host_memory_inputs=(2,))
def _split(node, ctx):
    def split(handle, value, lengths, flow):
        value = _in_memory_of(handle.xp, value)
        lengths = host(lengths).reshape(-1).astype(np.int64)
        if value.ndim == 0:
            raise _err(f"TensorArray {handle.name}: Expected value to be at least a vector, but "
                       "received a scalar.")
        if np.any(lengths < 0) or int(lengths.sum()) != value.shape[0]:
            raise _err(f"TensorArray {handle.name}: Expected sum of lengths to be equal to "
                       f"values.shape[0], but sum of lengths is {int(lengths.sum())} and value's "
                       f"shape is: {_shape_str(value.shape)}")
        with handle.lock:
            handle._check_open()
            n = len(handle.values)
            if not handle.dynamic_size and n != lengths.size:
                raise _err(f"TensorArray {handle.name}: TensorArray's size is not equal to the "
                           f"size of lengths ({n} vs. {lengths.size}), and the TensorArray is not "
                           "marked as dynamically resizeable.")
            ends = np.cumsum(lengths)
            for i, (end, ln) in enumerate(zip(ends, lengths)):
                handle._check_write_index(i)
                handle.write(i, value[int(end - ln):int(end)])
        return _FLOW

    return split


@kernel("TensorArrayCloseV3")
def _close(node, ctx):
    def close(handle):
        with handle.lock:
            handle.closed = True
            handle.values = [None] * len(handle.values)
        return None

    return close
