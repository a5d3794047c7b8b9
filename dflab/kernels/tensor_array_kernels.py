"""TensorArray kernels: per-step arrays of tensors behind a ``resource`` handle.

``TensorArrayV3`` creates a fresh storage object every time it runs and outputs it as the
handle's value, so two steps (or two runs of a loop that creates an array) never share elements.
The other kernels take that handle and act on the storage under its lock (a loop's iterations
may write concurrently). Their float32 ``flow`` outputs order reads after the writes they
depend on (TF's trick).

Two storages, chosen by the creating op's ``tensor_list`` attribute:

* ``TensorArrayStorage`` — TF 1.x's ``TensorArray`` kernels, for arrays built in a graph: a
  forward array refuses a second write to an index and, by default, forgets an element once
  read (``clear_after_read``); reading an element never written gives zeros when the element
  shape is fully known and is an error otherwise. Its flows carry no data. A *gradient* array
  (``TensorArrayGradV3``, one per forward array and gradient source) sums repeated writes and
  reads zeros, shaped like the forward element, for elements nobody wrote.
* ``TensorListStorage`` — for arrays built inside a traced function, where TF 2 uses a
  ``TensorList``: reads never clear, a write replaces what an index held, ``unstack`` and
  ``split`` replace the whole list, ``scatter`` grows it, ``close`` does nothing, and an
  unwritten element reads as zeros shaped like the element shape or, failing that, like an
  element that was written. TF's lists are values; here each write numbers itself and its flow
  carries that *version*, so a read sees exactly the writes its flow has seen (even when a
  later overwrite of the same index has already run), and a gradient can tell the writes of
  one index apart: ``TensorListGradients`` sums what each read received under the write the
  read saw, and hands each write what its own reads received (zero for a value overwritten
  before anyone read it).

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
        value = _written_value(self, index, value)
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
        self._check_open()
        g = self.grads.get(source)
        if g is None:
            g = TensorArrayStorage(f"{self.name}@{source}", self.dtype, len(self.values), True,
                                   False, self.element_shape, self.identical, is_grad=True,
                                   xp=self.xp)
            g.shapes = list(self.shapes)
            self.grads[source] = g
        return g

    # --- what the kernels ask (the caller holds the lock; ``flow``: the op's flow input,
    # which carries nothing here) ------------------------------------------------------------
    def write_op(self, index, value, flow):
        self.write(index, value)
        return _FLOW

    def read_op(self, index, flow, element_shape):
        return self.read(index)

    def gather_op(self, indices, flow, element_shape, num_elements):
        """The elements at ``indices``, and the element shape an empty result has."""
        values = self.read_many(indices, element_shape)
        shape = self.element_shape if _fully_defined(self.element_shape) else element_shape
        return values, shape

    def scatter_op(self, indices, value, flow, replace):
        self._check_open()
        for i in indices:  # grow (or fail) before writing anything
            self._check_write_index(i)
        for k, i in enumerate(indices):
            self.write(i, value[k])
        return _FLOW

    def concat_op(self, flow):
        return [self.read(i) for i in range(len(self.values))]

    def split_op(self, value, lengths, flow):
        self._check_open()
        n = len(self.values)
        if not self.dynamic_size and n != lengths.size:
            raise _err(f"TensorArray {self.name}: TensorArray's size is not equal to the size of "
                       f"lengths ({n} vs. {lengths.size}), and the TensorArray is not marked as "
                       "dynamically resizeable.")
        ends = np.cumsum(lengths)
        for i, (end, ln) in enumerate(zip(ends, lengths)):
            self._check_write_index(i)
            self.write(i, value[int(end - ln):int(end)])
        return _FLOW

    def size_op(self, flow):
        return len(self.values)

    def close_op(self):
        self.closed = True
        self.values = [None] * len(self.values)


# --- inside a traced function: TF 2's TensorList semantics --------------------------------------
# A flow is a float32 scalar: it counts writes exactly up to 2**24.
_MAX_VERSION = 2 ** 24


class _Write:
    """One value written to one index; ``version`` numbers it among the array's writes."""

    __slots__ = ("version", "value")

    def __init__(self, version, value):
        self.version = version
        self.value = value


def _version(flow) -> int:
    return int(host(flow))


class TensorListStorage:
    """The elements of one TensorArray built in a traced function, in one call (see the
    module docstring). ``writes[i]`` lists index i's writes, oldest first; ``version`` counts
    the array's writes, and each write-like op outputs the version of its last one."""

    def __init__(self, name, dtype, size, dynamic_size, element_shape, xp=np):
        self.name = name
        self.xp = xp
        self.dtype = np.dtype(dtype)
        self.dynamic_size = dynamic_size
        self.element_shape = element_shape  # the creating op's (partial) shape, or None
        self.writes: list[list[_Write]] = [[] for _ in range(size)]
        self.version = 0
        self.split_sizes: dict[int, int] = {}  # a split's version -> how many pieces it wrote
        self.dropped: dict[int, tuple] = {}  # version -> shape, of writes a resize cut off
        self.grads: dict[str, TensorListGradients] = {}
        self.lock = threading.Lock()

    def __repr__(self):
        return f"<TensorArray {self.name} size={len(self.writes)} (traced function)>"

    # --- helpers (caller holds the lock) ---------------------------------------------------
    def seen(self, index, version):
        """The write of ``index`` a reader whose flow carries ``version`` sees, or None."""
        for w in reversed(self.writes[index]):
            if w.version <= version:
                return w
        return None

    def _check_read_index(self, index):
        n = len(self.writes)
        if index < 0 or index >= n:
            raise _err(f"TensorArray {self.name}: Tried to read from index {index} but array "
                       f"size is: {n}")

    def _zeros(self, index, element_shape):
        """What an unwritten element reads as: zeros of the element shape if it is fully
        known, else shaped like an element that was written (TF's TensorList rule)."""
        shape = _merged(element_shape, self.element_shape)
        if not _fully_defined(shape):
            shape = next((ws[-1].value.shape for ws in self.writes if ws), None)
        if shape is None:
            raise _err(f"TensorArray {self.name}: Could not read from TensorArray index {index} "
                       "because it has not yet been written to, and the element shape "
                       f"{_shape_str(_merged(element_shape, self.element_shape))} is not fully "
                       "defined and no element has been written to take the shape from.")
        return self.xp.zeros(shape, self.dtype)

    def _element(self, index, version, element_shape):
        w = self.seen(index, version)
        return w.value if w is not None else self._zeros(index, element_shape)

    def _put(self, index, value):
        """Write ``value`` at ``index`` (which exists) as the next version."""
        value = _written_value(self, index, value)
        if not _compatible(self.element_shape, value.shape):
            raise _err(f"TensorArray {self.name}: Could not write to TensorArray index {index} "
                       f"because the value shape is {_shape_str(value.shape)} which is "
                       f"incompatible with the TensorArray's element shape: "
                       f"{_shape_str(self.element_shape)}.")
        if self.version + 1 >= _MAX_VERSION:
            raise _err(f"TensorArray {self.name}: more than {_MAX_VERSION - 1} writes in one "
                       "call of a traced function.")
        self.version += 1
        self.writes[index].append(_Write(self.version, value))

    def _resize(self, n):
        """Make the list ``n`` long (``unstack``, ``split``): writes cut off are forgotten but
        for their shapes, which their gradients take zeros of."""
        for ws in self.writes[n:]:
            for w in ws:
                self.dropped[w.version] = w.value.shape
        del self.writes[n:]
        self.writes += [[] for _ in range(n - len(self.writes))]

    def _check_write_index(self, index, grow):
        if index < 0:
            raise _err(f"TensorArray {self.name}: Tried to write to index {index} but array "
                       "index must be non-negative.")
        n = len(self.writes)
        if index >= n:
            if not grow:
                raise _err(f"TensorArray {self.name}: Tried to write to index {index} but array "
                           f"is not resizeable and size is: {n}")
            self.writes += [[] for _ in range(index + 1 - n)]

    # --- what the kernels ask --------------------------------------------------------------
    def write_op(self, index, value, flow):
        self._check_write_index(index, self.dynamic_size)
        self._put(index, value)
        return np.float32(self.version)

    def read_op(self, index, flow, element_shape):
        self._check_read_index(index)
        return self._element(index, _version(flow), element_shape)

    def gather_op(self, indices, flow, element_shape, num_elements):
        n = len(self.writes)
        if num_elements is not None and num_elements != n:
            raise _err(f"TensorArray {self.name}: stack expected the array's {num_elements} "
                       f"elements (its size) but it holds {n}: an unstack, split or scatter "
                       "changed its length.")
        version = _version(flow)
        for i in indices:
            self._check_read_index(i)
        values = [self._element(i, version, element_shape) for i in indices]
        for i, v in zip(indices, values):
            if v.shape != values[0].shape:
                raise _err(f"TensorArray {self.name}: TensorArray has inconsistent shapes. "
                           f"Index {indices[0]} has shape: {_shape_str(values[0].shape)} but "
                           f"index {i} has shape: {_shape_str(v.shape)}")
        shape = _merged(element_shape, self.element_shape)
        if not values and not _fully_defined(shape):
            raise _err(f"TensorArray {self.name}: TensorArray has size zero, but element "
                       f"shape {_shape_str(shape)} is not fully defined. Currently only "
                       "static shapes are supported when packing zero-size TensorArrays.")
        return values, shape

    def scatter_op(self, indices, value, flow, replace):
        """``replace`` (``unstack``): the rows become the whole list. Otherwise a scatter past
        the end grows the list whatever ``dynamic_size`` says, as TF's TensorList does."""
        if replace:
            self._resize(len(indices))
        for i in indices:
            self._check_write_index(i, True)
        for k, i in enumerate(indices):
            self._put(i, value[k])
        return np.float32(self.version)

    def concat_op(self, flow):
        version = _version(flow)
        return [self._element(i, version, None) for i in range(len(self.writes))]

    def split_op(self, value, lengths, flow):
        """The pieces become the whole list, whatever its size was."""
        self._resize(int(lengths.size))
        ends = np.cumsum(lengths)
        for i, (end, ln) in enumerate(zip(ends, lengths)):
            self._put(i, value[int(end - ln):int(end)])
        self.split_sizes[self.version] = int(lengths.size)
        return np.float32(self.version)

    def size_op(self, flow):
        return len(self.writes)

    def close_op(self):
        pass  # TF 2's close does nothing: the list is a value, freed when unused

    def grad(self, source):
        g = self.grads.get(source)
        if g is None:
            g = self.grads[source] = TensorListGradients(self, source)
        return g


class TensorListGradients:
    """The gradient array of a ``TensorListStorage`` for one gradient source. Backward reads
    (a write's gradient) and writes (a read's gradient) take a *forward* flow: a read's
    gradient is summed under the write its read saw, and a write's gradient reads what was
    summed under itself, or zeros shaped like its value. It shares the forward array's lock."""

    def __init__(self, forward, source):
        self.forward = forward
        self.name = f"{forward.name}@{source}"
        self.xp = forward.xp
        self.dtype = forward.dtype
        self.lock = forward.lock
        self.sums: dict[tuple[int, int], object] = {}  # (index, write version) -> gradient

    # --- a read's gradient: add to the write it saw ---------------------------------------
    def _add(self, index, version, value):
        w = self.forward.seen(index, version) if 0 <= index < len(self.forward.writes) \
            else None
        if w is None:
            return  # the read gave zeros: nothing upstream gets a gradient
        value = _in_memory_of(self.xp, value)
        key = (index, w.version)
        old = self.sums.get(key)
        self.sums[key] = value if old is None else old + value

    def write_op(self, index, value, flow):
        self._add(index, _version(flow), value)
        return _FLOW

    def scatter_op(self, indices, value, flow, replace):
        version = _version(flow)
        value = _in_memory_of(self.xp, value)
        for k, i in enumerate(indices):
            self._add(i, version, value[k])
        return _FLOW

    def split_op(self, value, lengths, flow):
        version = _version(flow)
        value = _in_memory_of(self.xp, value)
        ends = np.cumsum(lengths)
        for i, (end, ln) in enumerate(zip(ends, lengths)):
            self._add(i, version, value[int(end - ln):int(end)])
        return _FLOW

    # --- a write's gradient: what its reads received ---------------------------------------
    def _taken(self, index, version):
        s = self.sums.get((index, version))
        if s is not None:
            return s
        forward = self.forward
        shape = forward.dropped.get(version)
        if shape is None and 0 <= index < len(forward.writes):
            shape = next((w.value.shape for w in forward.writes[index] if w.version == version),
                         None)
        if shape is None:
            raise _err(f"TensorArray {self.name}: no write of index {index} at version "
                       f"{version} to take the gradient of.")
        return self.xp.zeros(shape, self.dtype)

    def read_op(self, index, flow, element_shape):
        return self._taken(index, _version(flow))

    def gather_op(self, indices, flow, element_shape, num_elements):
        # A scatter's k-th of n writes has version (its last version) - n + 1 + k.
        last = _version(flow)
        first = last - len(indices) + 1
        values = [self._taken(i, first + k) for k, i in enumerate(indices)]
        return values, _merged(element_shape, self.forward.element_shape)

    def concat_op(self, flow):
        last = _version(flow)
        n = self.forward.split_sizes.get(last)
        if n is None:
            raise _err(f"TensorArray {self.name}: no split ended at version {last} to take the "
                       "gradient of.")
        return [self._taken(i, last - n + 1 + i) for i in range(n)]

    def size_op(self, flow):
        return len(self.forward.writes)

    def close_op(self):
        pass

    def grad(self, source):
        raise _err(f"TensorArray {self.name}: a gradient of a TensorArray's gradient inside a "
                   "traced function is not supported.")


# --- kernels --------------------------------------------------------------------------------
def _shape_attr(node, name):
    shape = node.attr.get(name)
    if shape is None or shape.ndims is None:
        return None
    return tuple(shape.as_list())


def _merged(a, b):
    """Partial shapes ``a`` and ``b`` (tuples with None dims, or None) merged; ``a`` wins where
    they disagree (the caller checked compatibility, or does not care)."""
    if a is None:
        return b
    if b is None or len(a) != len(b):
        return a
    return tuple(x if x is not None else y for x, y in zip(a, b))


def _index(v):
    return int(host(v))


def _written_value(array, index, value):
    """``value`` in the array's memory, of the array's dtype (else TF's error)."""
    value = _in_memory_of(array.xp, value)
    if value.dtype != array.dtype:
        raise _err(f"TensorArray {array.name}: Could not write to TensorArray index {index} "
                   f"because the value dtype is {value.dtype.name} but the TensorArray "
                   f"dtype is {array.dtype.name}.")
    return value


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
    tensor_list = a.get("tensor_list", False)
    xp = ctx.xp

    def create(size):
        size = _index(size)
        if size < 0:
            raise _err(f"TensorArray {name}: size must be non-negative, got {size}")
        if tensor_list:
            return TensorListStorage(name, dtype, size, a["dynamic_size"], element_shape,
                                     xp=xp), _FLOW
        storage = TensorArrayStorage(name, dtype, size, a["dynamic_size"], a["clear_after_read"],
                                     element_shape, a["identical_element_shapes"], xp=xp)
        return storage, _FLOW

    return create


@kernel("TensorArrayGradV3")
def _tensor_array_grad(node, ctx):
    source = node.attr["source"]

    def grad(handle, flow):
        with handle.lock:
            return handle.grad(source), _FLOW

    return grad


@kernel("TensorArrayWriteV3", host_memory_inputs=(1,))
def _write(node, ctx):
    def write(handle, index, value, flow):
        with handle.lock:
            return handle.write_op(_index(index), value, flow)

    return write


@kernel("TensorArrayReadV3", host_memory_inputs=(1,))
def _read(node, ctx):
    element_shape = _shape_attr(node, "element_shape")
    xp = ctx.xp

    def read(handle, index, flow):
        with handle.lock:
            return _in_memory_of(xp, handle.read_op(_index(index), flow, element_shape))

    return read


@kernel("TensorArrayGatherV3", host_memory_inputs=(1,))
def _gather(node, ctx):
    element_shape = _shape_attr(node, "element_shape")
    num_elements = node.attr.get("num_elements")
    dtype = node.attr["dtype"].as_numpy_dtype
    xp = ctx.xp

    def gather(handle, indices, flow):
        idx = [int(i) for i in host(indices).reshape(-1)]
        with handle.lock:
            values, shape = handle.gather_op(idx, flow, element_shape, num_elements)
        if not values:
            return xp.zeros((0,) + tuple(shape), dtype)
        return _in_memory_of(xp, handle.xp.stack(values))

    return gather


@kernel("TensorArrayScatterV3", host_memory_inputs=(1,))
def _scatter(node, ctx):
    replace = node.attr.get("replace", False)

    def scatter(handle, indices, value, flow):
        idx = host(indices).reshape(-1)
        value = _in_memory_of(handle.xp, value)
        if value.ndim == 0 or value.shape[0] != idx.size:
            raise _err(f"TensorArray {handle.name}: Expected len(indices) == values.shape[0], "
                       f"but saw: {idx.size} vs. {value.shape[0] if value.ndim else 'scalar'}")
        with handle.lock:
            return handle.scatter_op([int(i) for i in idx], value, flow, replace)

    return scatter


@kernel("TensorArraySizeV3", host_memory_outputs=(0,))
def _size(node, ctx):
    def size(handle, flow):
        with handle.lock:
            return np.int32(handle.size_op(flow))

    return size


@kernel("TensorArrayConcatV3", host_memory_outputs=(1,))
def _concat(node, ctx):
    except0 = _shape_attr(node, "element_shape_except0")
    dtype = node.attr["dtype"].as_numpy_dtype
    xp = ctx.xp

    def concat(handle, flow):
        with handle.lock:
            values = handle.concat_op(flow)
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
            return handle.split_op(value, lengths, flow)

    return split


@kernel("TensorArrayCloseV3")
def _close(node, ctx):
    def close(handle):
        with handle.lock:
            handle.close_op()
        return None

    return close
