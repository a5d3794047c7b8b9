"""``tf.TensorArray``: a per-step array of tensors, written and read one element (or many) at a
time. Its semantics depend on where it is made, as TF's do:

* In a graph (TF 1.x programs), TF 1.x's ``TensorArray``, built from the ``TensorArray*V3`` ops
  described below: an index is written once, and a read clears it unless
  ``clear_after_read=False``.
* Inside a traced function (``tf.function``, ``defun``), the same ops on a storage with TF 2's
  ``TensorList`` semantics (the creating op's ``tensor_list`` attribute; see
  ``dflab.kernels.tensor_array_kernels``): reads never clear, a write replaces an index's
  value, ``unstack``/``split`` replace the whole list, ``close`` does nothing. Each write's
  flow carries its version, which the gradients of writes read (``_written_version``).
* Executing eagerly, ``_EagerTensorArray``: TF 2's eager array, a Python list of eager tensors
  (reads clear by default, a write replaces, ``stack`` reads a cleared element as zeros), which a
  ``GradientTape`` differentiates through the tensors it holds; no ops of this module run.

The ``TensorArrayV3`` op outputs a ``resource`` handle and a float32 scalar *flow*. Each write
(``write``, ``scatter``, ``unstack``, ``split``) takes the current flow and returns a new one;
each read (``read``, ``gather``, ``stack``, ``concat``, ``size``) takes the flow as an input. The
flow carries no data: threading it through makes dataflow order reads after the writes they see,
including across the iterations of a ``while_loop``, where a ``TensorArray`` travels as one loop
variable (its flow; ``_as_loop_var``/``_from_loop_var``) while its handle enters the loop as an
invariant. A Python ``TensorArray`` object is immutable: every write returns a new object with
the same handle and the new flow, and all objects of one array share its inferred element shape.

Gradients (TF 1.x's scheme): ``TensorArrayGradV3`` gives, per forward array and per gradient
*source* (the ``gradients`` name scope), a gradient array that sums repeated writes. The
gradient of a read writes into it, the gradient of a write reads from it, and so on for
gather/scatter and concat/split; the flows order these backward accesses. Kernels live in
``dflab.kernels.tensor_array_kernels``.
"""

from __future__ import annotations

import contextvars

import numpy as np

from dflab.framework import dtypes as _dt
from dflab.framework import errors
from dflab.framework import ops as _ops
from dflab.framework.constant_op import constant_value
from dflab.framework.registry import NotDifferentiable, RegisterGradient, register_op
from dflab.framework.tensor_shape import TensorShape, as_shape, unknown_shape
from dflab.ops import array_ops, math_ops

_SCALAR = TensorShape([])


# --- schemas ------------------------------------------------------------------------------------
def _check_scalar(t, what):
    if t.shape.ndims not in (None, 0):
        raise ValueError(f"{what} must be a scalar, got shape {t.shape}")


def _check_int(t, what):
    if t.dtype.base_dtype not in (_dt.int32, _dt.int64):
        raise TypeError(f"{what} must be int32 or int64, got {t.dtype.base_dtype.name}")


def _check_handle(op):
    h = op.inputs[0]
    if h.dtype.base_dtype is not _dt.resource:
        raise TypeError(f"{op.type} needs a TensorArray handle (resource), got "
                        f"{h.dtype.base_dtype.name}")


def _check_flow(t):
    if t.dtype.base_dtype is not _dt.float32:
        raise TypeError(f"A TensorArray flow must be float32, got {t.dtype.base_dtype.name}")
    _check_scalar(t, "A TensorArray flow")


def _ta_infer(op):
    size = op.inputs[0]
    if size.dtype.base_dtype is not _dt.int32:
        raise TypeError(f"TensorArray size must be int32, got {size.dtype.base_dtype.name}")
    _check_scalar(size, "TensorArray size")
    return [(_dt.resource, _SCALAR), (_dt.float32, _SCALAR)]


def _grad_infer(op):
    _check_handle(op)
    _check_flow(op.inputs[1])
    return [(_dt.resource, _SCALAR), (_dt.float32, _SCALAR)]


def _write_infer(op):
    _check_handle(op)
    _check_int(op.inputs[1], "TensorArray write index")
    _check_scalar(op.inputs[1], "TensorArray write index")
    _check_flow(op.inputs[3])
    return [(_dt.float32, _SCALAR)]


def _read_infer(op):
    _check_handle(op)
    _check_int(op.inputs[1], "TensorArray read index")
    _check_scalar(op.inputs[1], "TensorArray read index")
    _check_flow(op.inputs[2])
    return [(op.get_attr("dtype"), unknown_shape())]


def _gather_infer(op):
    _check_handle(op)
    indices = op.inputs[1]
    _check_int(indices, "TensorArray gather indices")
    if indices.shape.ndims not in (None, 1):
        raise ValueError(f"TensorArray gather indices must be a vector, got shape "
                         f"{indices.shape}")
    _check_flow(op.inputs[2])
    n = indices.shape.as_list()[0] if indices.shape.ndims == 1 else None
    elem = op.attrs.get("element_shape") or unknown_shape()
    shape = TensorShape([n]).concatenate(elem) if elem.ndims is not None else unknown_shape()
    return [(op.get_attr("dtype"), shape)]


def _scatter_infer(op):
    _check_handle(op)
    indices, value = op.inputs[1], op.inputs[2]
    _check_int(indices, "TensorArray scatter indices")
    if indices.shape.ndims not in (None, 1):
        raise ValueError(f"TensorArray scatter indices must be a vector, got shape "
                         f"{indices.shape}")
    if value.shape.ndims == 0:
        raise ValueError("TensorArray scatter value must have rank >= 1 (one row per index)")
    if indices.shape.ndims == 1 and value.shape.ndims is not None and \
            not value.shape[0].is_compatible_with(indices.shape[0]):
        raise ValueError(f"TensorArray scatter: {indices.shape[0]} indices but value has "
                         f"{value.shape[0]} rows")
    _check_flow(op.inputs[3])
    return [(_dt.float32, _SCALAR)]


def _size_infer(op):
    _check_handle(op)
    _check_flow(op.inputs[1])
    return [(_dt.int32, _SCALAR)]


def _concat_infer(op):
    _check_handle(op)
    _check_flow(op.inputs[1])
    except0 = op.attrs.get("element_shape_except0") or unknown_shape()
    shape = TensorShape([None]).concatenate(except0) if except0.ndims is not None \
        else unknown_shape()
    return [(op.get_attr("dtype"), shape), (_dt.int64, TensorShape([None]))]


def _split_infer(op):
    _check_handle(op)
    value, lengths = op.inputs[1], op.inputs[2]
    if value.shape.ndims == 0:
        raise ValueError("TensorArray split value must have rank >= 1")
    if lengths.dtype.base_dtype is not _dt.int64:
        raise TypeError(f"TensorArray split lengths must be int64, got "
                        f"{lengths.dtype.base_dtype.name}")
    if lengths.shape.ndims not in (None, 1):
        raise ValueError(f"TensorArray split lengths must be a vector, got {lengths.shape}")
    _check_flow(op.inputs[3])
    return [(_dt.float32, _SCALAR)]


def _close_infer(op):
    _check_handle(op)
    return []


# Every TensorArray op touches per-step state: none may be folded, deduplicated or reordered
# except through its inputs.
register_op("TensorArrayV3", _ta_infer, stateful=True)
register_op("TensorArrayGradV3", _grad_infer, stateful=True)
register_op("TensorArrayWriteV3", _write_infer, stateful=True)
register_op("TensorArrayReadV3", _read_infer, stateful=True)
register_op("TensorArrayGatherV3", _gather_infer, stateful=True)
register_op("TensorArrayScatterV3", _scatter_infer, stateful=True)
register_op("TensorArraySizeV3", _size_infer, stateful=True)
register_op("TensorArrayConcatV3", _concat_infer, stateful=True)
register_op("TensorArraySplitV3", _split_infer, stateful=True)
register_op("TensorArrayCloseV3", _close_infer, stateful=True)
for _t in ("TensorArrayV3", "TensorArrayGradV3", "TensorArraySizeV3", "TensorArrayCloseV3"):
    NotDifferentiable(_t)


# --- the Python object --------------------------------------------------------------------------
def _as_index(v, name):
    t = _ops.convert_to_tensor(v, dtype=_dt.int32 if not isinstance(v, _ops.Tensor) else None,
                               name=name)
    _check_int(t, f"TensorArray {name}")
    return t


class TensorArray:
    """``tf.TensorArray`` (see the module docstring): made eagerly, an ``_EagerTensorArray``."""

    def __new__(cls, *args, **kwargs):
        if cls is TensorArray and _ops.executing_eagerly():
            return object.__new__(_EagerTensorArray)
        return object.__new__(cls)

    def __init__(self, dtype, size=None, dynamic_size=None, clear_after_read=None,
                 tensor_array_name=None, handle=None, flow=None, infer_shape=True,
                 element_shape=None, colocate_with_first_write_call=True, name=None):
        if handle is not None:
            if tensor_array_name:
                raise ValueError("Cannot construct with both handle and tensor_array_name")
            if not isinstance(handle, _ops.Tensor):
                raise TypeError(f"Handle must be a Tensor, got {handle!r}")
            if flow is None:
                raise ValueError("flow must not be None if handle is not None.")
            if size is not None:
                raise ValueError("Cannot provide both a handle and size at the same time")
            if element_shape is not None:
                raise ValueError("Cannot provide both a handle and element_shape at the same "
                                 "time")
            if dynamic_size is not None:
                raise ValueError("Cannot provide both a handle and dynamic_size at the same "
                                 "time")
            if clear_after_read is not None:
                raise ValueError("Cannot provide both a handle and clear_after_read at the "
                                 "same time")
        elif size is None:
            raise ValueError("Size must be provided if handle is not provided")
        self._dtype = _dt.as_dtype(dtype).base_dtype
        self._dynamic_size = bool(dynamic_size)
        self._infer_shape = infer_shape
        self._colocate_with_first_write_call = colocate_with_first_write_call
        # Made inside a traced function: TF 2's TensorList semantics (module docstring).
        self._tensor_list = _ops.get_default_graph().is_function_graph
        # One mutable cell shared by every TensorArray object of this array (TF's idiom), so a
        # shape learnt from a write inside a loop body is known to reads after the loop.
        self._element_shape = [as_shape(element_shape) if element_shape is not None
                               else unknown_shape()]
        self._size = None
        with _ops.name_scope(name, "TensorArray", [t for t in (handle, size, flow)
                                                   if isinstance(t, _ops.Tensor)]) as scope:
            if handle is not None:
                self._handle = handle
                self._flow = _ops.convert_to_tensor(flow, dtype=_dt.float32)
            else:
                size_t = _ops.convert_to_tensor(size, dtype=_dt.int32, name="size")
                if not dynamic_size:
                    self._size = size_t
                attrs = {
                    "dtype": self._dtype,
                    "element_shape": self._element_shape[0],
                    "dynamic_size": self._dynamic_size,
                    "clear_after_read": True if clear_after_read is None
                    else bool(clear_after_read),
                    "identical_element_shapes": bool(infer_shape),
                    "tensor_array_name": tensor_array_name or (scope or "").rstrip("/"),
                }
                if self._tensor_list:
                    attrs["tensor_list"] = True
                    attrs["clear_after_read"] = False  # a TensorList's reads never clear
                op = _ops.apply_op("TensorArrayV3", [size_t], attrs, name=None)
                self._handle, self._flow = op.outputs

    # --- properties ------------------------------------------------------------------------
    @property
    def flow(self):
        return self._flow

    @property
    def dtype(self):
        return self._dtype

    @property
    def handle(self):
        return self._handle

    @property
    def element_shape(self) -> TensorShape:
        return self._element_shape[0]

    @property
    def dynamic_size(self) -> bool:
        return self._dynamic_size

    def _with_flow(self, flow):
        ta = object.__new__(type(self))
        ta.__dict__.update(self.__dict__)
        ta._flow = flow
        return ta

    # while_loop's protocol: a TensorArray travels through a loop as its flow.
    def _as_loop_var(self):
        return self._flow

    def _from_loop_var(self, flow):
        return self._with_flow(flow)

    def _merge_element_shape(self, shape):
        shape = as_shape(shape)
        try:
            self._element_shape[0] = self._element_shape[0].merge_with(shape)
        except ValueError:
            raise ValueError(f"Inconsistent shapes: saw {shape} but expected "
                             f"{self._element_shape[0]} (and infer_shape=True)") from None

    def _apply(self, op_type, inputs, attrs=None, name=None):
        return _ops.apply_op(op_type, [self._handle] + list(inputs), attrs, name)

    def _write_attrs(self, attrs):
        """A write-like op's attributes: one of a TensorList array says so, for its gradient
        (``_written_version``)."""
        if self._tensor_list:
            attrs["tensor_list"] = True
        return attrs

    # --- API -------------------------------------------------------------------------------
    def identity(self):
        """A TensorArray with the same handle and an identity of the flow (an ordering point
        for control dependencies)."""
        return self._with_flow(array_ops.identity(self._flow))

    def grad(self, source, flow=None, name=None):
        """The gradient array of this one for gradient ``source`` (created on first use); TF 1.x
        graphs only, as in TF."""
        if self._tensor_list:
            raise NotImplementedError("TensorArray.grad is not supported for a TensorArray made "
                                      "inside a tf.function (TF 2's TensorList-backed array).")
        return self._gradient_array(source, flow, name)

    def _gradient_array(self, source, flow=None, name=None):
        flow = self._flow if flow is None else flow
        with _ops.name_scope(name, "TensorArrayGrad", [self._handle]):
            op = self._apply("TensorArrayGradV3", [flow], {"source": source})
            g_handle = op.outputs[0]
            with _ops.control_dependencies([g_handle]):
                g_flow = array_ops.identity(flow, name="gradient_flow")
            g = TensorArray(self._dtype, handle=g_handle, flow=g_flow,
                            infer_shape=self._infer_shape,
                            colocate_with_first_write_call=False)
            g._element_shape = self._element_shape
            return g

    def read(self, index, name=None):
        """The element at ``index`` (a scalar int32 tensor)."""
        with _ops.name_scope(name, "TensorArrayRead", [self._handle, index]):
            index = _as_index(index, "index")
            attrs = {"dtype": self._dtype}
            if self._tensor_list:  # the shape an unwritten element reads as
                attrs["element_shape"] = self.element_shape
            value = self._apply("TensorArrayReadV3", [index, self._flow], attrs).outputs[0]
            if self.element_shape.ndims is not None:
                value.set_shape(self.element_shape)
            return value

    def write(self, index, value, name=None):
        """A TensorArray with ``value`` written at ``index``."""
        with _ops.name_scope(name, "TensorArrayWrite", [self._handle, index, value]):
            index = _as_index(index, "index")
            value = _ops.convert_to_tensor(
                value, dtype=None if isinstance(value, _ops.Tensor) else self._dtype,
                name="value")
            if self._infer_shape:
                self._merge_element_shape(value.shape)
            flow = self._apply("TensorArrayWriteV3", [index, value, self._flow],
                               self._write_attrs({"T": value.dtype.base_dtype})).outputs[0]
            return self._with_flow(flow)

    def stack(self, name=None):
        """All elements stacked along a new first dimension."""
        with _ops.name_scope(name, "TensorArrayStack", [self._handle]):
            num_elements = None
            if self._tensor_list and self._size is not None:
                # TF's TensorList stack insists on the static size, when there is one.
                n = constant_value(self._size)
                num_elements = None if n is None else int(n)
            indices = math_ops.range(0, self.size())
            with _ops.name_scope(None, "TensorArrayGather", [self._handle, indices]):
                return self._gather(indices, num_elements)

    def gather(self, indices, name=None):
        """The elements at ``indices`` stacked along a new first dimension."""
        with _ops.name_scope(name, "TensorArrayGather", [self._handle, indices]):
            return self._gather(indices)

    def _gather(self, indices, num_elements=None):
        indices = _as_index(indices, "indices")
        attrs = {"dtype": self._dtype, "element_shape": self.element_shape}
        if num_elements is not None:
            attrs["num_elements"] = num_elements
        return self._apply("TensorArrayGatherV3", [indices, self._flow], attrs).outputs[0]

    def concat(self, name=None):
        """All elements concatenated along their first dimension."""
        with _ops.name_scope(name, "TensorArrayConcat", [self._handle]):
            es = self.element_shape
            except0 = es[1:] if es.ndims else unknown_shape()
            return self._apply("TensorArrayConcatV3", [self._flow],
                               {"dtype": self._dtype,
                                "element_shape_except0": except0}).outputs[0]

    def unstack(self, value, name=None):
        """A TensorArray whose element i is ``value[i]``."""
        with _ops.name_scope(name, "TensorArrayUnstack", [self._handle, value]):
            value = _ops.convert_to_tensor(
                value, dtype=None if isinstance(value, _ops.Tensor) else self._dtype,
                name="value")
            n = value.shape.as_list()[0] if value.shape.ndims else None
            num = n if n is not None else array_ops.shape(value)[0]
            # A TensorList's unstack makes the rows the whole list (TF 2).
            indices = math_ops.range(0, num)
            with _ops.name_scope(None, "TensorArrayScatter", [self._handle, value, indices]):
                return self._scatter(indices, value, replace=self._tensor_list)

    def scatter(self, indices, value, name=None):
        """A TensorArray with ``value[k]`` written at ``indices[k]``."""
        with _ops.name_scope(name, "TensorArrayScatter", [self._handle, value, indices]):
            return self._scatter(indices, value)

    def _scatter(self, indices, value, replace=False):
        indices = _as_index(indices, "indices")
        value = _ops.convert_to_tensor(
            value, dtype=None if isinstance(value, _ops.Tensor) else self._dtype, name="value")
        if self._infer_shape and value.shape.ndims is not None:
            self._merge_element_shape(value.shape[1:])
        attrs = self._write_attrs({"T": value.dtype.base_dtype})
        if replace:
            attrs["replace"] = True
        flow = self._apply("TensorArrayScatterV3", [indices, value, self._flow],
                           attrs).outputs[0]
        return self._with_flow(flow)

    def split(self, value, lengths, name=None):
        """A TensorArray whose elements are consecutive row blocks of ``value``."""
        with _ops.name_scope(name, "TensorArraySplit", [self._handle, value, lengths]):
            value = _ops.convert_to_tensor(
                value, dtype=None if isinstance(value, _ops.Tensor) else self._dtype,
                name="value")
            lengths = _ops.convert_to_tensor(
                lengths, dtype=None if isinstance(lengths, _ops.Tensor) else _dt.int64,
                name="lengths")
            if lengths.dtype.base_dtype is not _dt.int64:
                lengths = math_ops.cast(lengths, _dt.int64)
            if self._infer_shape and value.shape.ndims is not None:
                cl = constant_value(lengths)
                if cl is not None and cl.size and cl.max() == cl.min():
                    self._merge_element_shape(
                        TensorShape([int(cl.reshape(-1)[0])]).concatenate(value.shape[1:]))
            flow = self._apply("TensorArraySplitV3", [value, lengths, self._flow],
                               self._write_attrs({"T": value.dtype.base_dtype})).outputs[0]
            return self._with_flow(flow)

    def size(self, name=None):
        """The number of elements (a constant for a fixed-size array, as in TF)."""
        if not self._dynamic_size and self._size is not None:
            return self._size
        with _ops.name_scope(name, "TensorArraySize", [self._handle]):
            return self._apply("TensorArraySizeV3", [self._flow]).outputs[0]

    def close(self, name=None):
        """An op that frees the array's elements (inside a traced function: does nothing, as
        TF 2's)."""
        with _ops.name_scope(name, "TensorArrayClose", [self._handle]):
            return self._apply("TensorArrayCloseV3", [])

    def __repr__(self):
        return f"<TensorArray handle={self._handle.name} flow={self._flow.name}>"


# --- executing eagerly ----------------------------------------------------------------------------
def _eager_error(cls, method, message):
    """``cls`` (a TF error class, or ValueError) naming the method and the user's file:line."""
    text = f"TensorArray.{method} (at {_ops._user_site()}): {message}"
    return cls(None, None, text) if issubclass(cls, errors.OpError) else cls(text)


def _host(value) -> np.ndarray:
    return value.numpy() if isinstance(value, _ops.Tensor) else np.asarray(value)


def _as_int(value) -> int:
    return int(_host(value))


def _rows(value) -> list:
    if value.shape.ndims == 0:
        raise ValueError(f"Cannot unstack a scalar ({value.shape}) into TensorArray elements")
    if value.shape.as_list()[0] == 1:
        return [value[0]]  # (Unpack and Split of one piece hand back a 1-tuple as it)
    return array_ops.unstack(value)


class _EagerTensorArray(TensorArray):
    """TF 2's eager ``TensorArray``: a Python list of eager tensors, changed in place (every
    object of one array is the same object). A read hands out the tensor written, so a tape
    differentiates the array through the tensors it holds, as any other eager value; reads
    clear by default, a write replaces, and bulk reads give zeros for elements never written or
    cleared by a read. ``flow`` and ``handle`` are TF's placeholders (a 0 and None)."""

    def __init__(self, dtype, size=None, dynamic_size=None, clear_after_read=None,
                 tensor_array_name=None, handle=None, flow=None, infer_shape=True,
                 element_shape=None, colocate_with_first_write_call=True, name=None):
        if handle is not None:
            raise ValueError("TensorArray handles are not supported when eager execution is "
                             "enabled.")
        if size is None:
            raise ValueError("Size must be declared for TensorArrays when eager execution is "
                             "enabled.")
        self._dtype = _dt.as_dtype(dtype).base_dtype
        self._dynamic_size = bool(dynamic_size)
        self._clear_after_read = True if clear_after_read is None else bool(clear_after_read)
        self._infer_shape = infer_shape
        self._colocate_with_first_write_call = colocate_with_first_write_call
        self._element_shape = [as_shape(element_shape) if element_shape is not None
                               else unknown_shape()]
        self._tensor_list = False
        self._size = None
        self._handle = None
        self._flow = None
        self._elements: list = [None] * _as_int(size)
        self._cleared: set[int] = set()  # indices a read has cleared

    @property
    def flow(self):
        if self._flow is None:
            self._flow = _ops.convert_to_tensor(0, dtype=_dt.int32)
        return self._flow

    def _with_flow(self, flow):
        return self

    # Eager control flow is Python and carries the object itself; a traced function's loop or
    # cond would carry only a flow, which holds none of this array's elements (TF refuses too).
    def _as_loop_var(self):
        return self.flow

    def _from_loop_var(self, flow):
        raise NotImplementedError(
            f"A TensorArray made eagerly cannot be carried through a loop or cond of a traced "
            f"function (at {_ops._user_site()}): make the TensorArray inside the function.")

    def identity(self):
        return self

    def grad(self, source, flow=None, name=None):
        raise NotImplementedError("TensorArray.grad is not supported when executing eagerly: a "
                                  "GradientTape differentiates an eager TensorArray through "
                                  "the tensors it holds.")

    def _zero(self, index, method):
        """Element ``index`` read in bulk: zeros where nothing is held (kept, as TF keeps
        them)."""
        value = self._elements[index]
        if value is None:
            shape = self.element_shape
            if not shape.is_fully_defined():
                raise _eager_error(ValueError, method, f"element {index} holds no value and the "
                                   f"element shape {shape} is not fully defined, so it has no "
                                   "zeros to read as.")
            value = self._elements[index] = array_ops.zeros(shape, self._dtype)
        return value

    def _index_in_range(self, index, method):
        i = _as_int(index)
        if i < 0:
            raise _eager_error(errors.OutOfRangeError, method,
                               f"Reading from negative indices (index {i}) is not allowed.")
        if i >= len(self._elements):
            raise _eager_error(errors.OutOfRangeError, method,
                               f"Tried to read from index {i} but array size is: "
                               f"{len(self._elements)}")
        return i

    def read(self, index, name=None):
        i = self._index_in_range(index, "read")
        if self._elements[i] is None and i in self._cleared:
            raise _eager_error(errors.InvalidArgumentError, "read",
                               f"Could not read index {i} twice because it was cleared after a "
                               "previous read (perhaps try setting clear_after_read = false?)")
        value = self._zero(i, "read")
        if self._clear_after_read:
            self._elements[i] = None
            self._cleared.add(i)
        return value

    def _convert(self, value):
        if isinstance(value, _ops.Tensor):
            return value
        return _ops.convert_to_tensor(value, preferred_dtype=self._dtype, name="value")

    def _put(self, index, value, method):
        i = _as_int(index)
        if i < 0:
            raise _eager_error(errors.OutOfRangeError, method,
                               f"Writing to negative indices (index {i}) is not allowed.")
        n = len(self._elements)
        if i >= n:
            if not self._dynamic_size:
                raise _eager_error(errors.OutOfRangeError, method,
                                   f"Tried to write to index {i} but array is not resizeable "
                                   f"and size is: {n}")
            self._elements += [None] * (i + 1 - n)
        value = self._convert(value)
        if value.dtype.base_dtype != self._dtype:
            raise _eager_error(errors.InvalidArgumentError, method,
                               f"TensorArray dtype is {self._dtype.name} but Op is trying to "
                               f"write dtype {value.dtype.base_dtype.name}")
        if not self.element_shape.is_compatible_with(value.shape):
            raise _eager_error(ValueError, method, f"Incompatible shape for value "
                               f"({value.shape}), expected ({self.element_shape})")
        if self._infer_shape:
            self._element_shape[0] = self.element_shape.merge_with(value.shape)
        self._elements[i] = value

    def write(self, index, value, name=None):
        self._put(index, value, "write")
        return self

    def _stacked(self, values):
        if not values and self.element_shape.is_fully_defined():
            return array_ops.zeros([0] + self.element_shape.as_list(), self._dtype)
        if not values:
            return array_ops.zeros([0], self._dtype)
        return array_ops.stack(values)

    def stack(self, name=None):
        return self._stacked([self._zero(i, "stack") for i in range(len(self._elements))])

    def gather(self, indices, name=None):
        idx = [int(i) for i in _host(indices).reshape(-1)]
        return self._stacked([self._zero(self._index_in_range(i, "gather"), "gather")
                              for i in idx])

    def concat(self, name=None):
        values = [self._zero(i, "concat") for i in range(len(self._elements))]
        for i, v in enumerate(values):
            if v.shape.ndims == 0:
                raise _eager_error(errors.InvalidArgumentError, "concat",
                                   f"Concat saw a scalar shape at index {i} but requires at "
                                   "least vectors.")
        if not values:
            rest = self.element_shape[1:] if self.element_shape.ndims else TensorShape([])
            dims = [0] + (rest.as_list() if rest.is_fully_defined() else [])
            return array_ops.zeros(dims, self._dtype)
        return array_ops.concat(values, 0)

    def unstack(self, value, name=None):
        """The rows of ``value`` become the whole array (its size too, as in TF)."""
        value = self._convert(value)
        rows = _rows(value)
        if len(rows) > len(self._elements) and not self._dynamic_size:
            raise _eager_error(ValueError, "unstack",
                               f"Cannot unstack {len(rows)} tensors into a TensorArray of "
                               f"static size {len(self._elements)}")
        self._elements = list(rows)
        return self

    def scatter(self, indices, value, name=None):
        idx = _host(indices).reshape(-1)
        for i, row in zip(idx, _rows(self._convert(value))):
            self._put(int(i), row, "scatter")
        return self

    def split(self, value, lengths, name=None):
        """Consecutive row blocks of ``value`` become the whole array."""
        value = self._convert(value)
        lengths = _host(lengths)
        err = errors.InvalidArgumentError
        if lengths.ndim != 1:
            raise _eager_error(err, "split", f"Expected lengths to be a vector, received shape: "
                               f"{list(lengths.shape)}")
        if value.shape.ndims == 0:
            raise _eager_error(err, "split", "Expected value to be at least a vector, but "
                               "received a scalar.")
        if int(lengths.sum()) != value.shape.as_list()[0]:
            raise _eager_error(err, "split", f"Expected sum of lengths to be equal to "
                               f"values.shape[0], but sum of lengths is {int(lengths.sum())} "
                               f"and value's shape is: {value.shape.as_list()}")
        if not self._dynamic_size and lengths.size != len(self._elements):
            raise _eager_error(err, "split", f"TensorArray's size is not equal to the size of "
                               f"lengths ({len(self._elements)} vs. {lengths.size}), and the "
                               "TensorArray is not marked as dynamically resizeable.")
        sizes = [int(n) for n in lengths]
        self._elements = [value] if len(sizes) == 1 else list(array_ops.split(value, sizes))
        return self

    def size(self, name=None):
        return _ops.convert_to_tensor(len(self._elements), dtype=_dt.int32)

    def close(self, name=None):
        """Forgets every element: the array's size is 0 after (TF's eager close)."""
        self._elements = []

    def __repr__(self):
        return (f"<TensorArray (eager) dtype={self._dtype.name} size={len(self._elements)} "
                f"element_shape={self.element_shape}>")


# --- gradients ----------------------------------------------------------------------------------
# A tape's ``gradient`` call runs the gradient functions eagerly, outside any name scope: it
# names its source here (one per call), so that calls sum into gradient arrays of their own.
# (Eager arrays run none of these ops — a tape sees the tensors they hold — so this serves only
# a graph array's ops differentiated eagerly.)
EAGER_GRADIENT_SOURCE: contextvars.ContextVar = contextvars.ContextVar(
    "tensor_array_eager_gradient_source", default=None)


def _grad_source():
    """The gradient source this backward op belongs to: the ``gradients`` scope it is built
    in (``gradients``, ``gradients_1``, ...), so that separate ``tf.gradients`` calls use
    separate gradient arrays. The *outermost* such scope counts: the backward body of a while
    loop is built in a nested ``gradients`` scope of the same call. Eagerly, the tape's call."""
    eager_source = EAGER_GRADIENT_SOURCE.get()
    if eager_source is not None and _ops.executing_eagerly():
        return eager_source  # (a user's own "gradients" name scope around it changes nothing)
    tokens = _ops.get_default_graph().get_name_scope().split("/")
    pos = [i for i, t in enumerate(tokens) if t.startswith("gradients")]
    if not pos:
        raise ValueError(f"Expected a TensorArray gradient to be built inside a 'gradients' "
                         f"name scope, got {'/'.join(tokens)!r}")
    return "/".join(tokens[:pos[0] + 1])


def _grad_array(op, flow):
    dtype = op.attrs.get("dtype") or op.attrs.get("T")
    ta = TensorArray(dtype, handle=op.inputs[0], flow=flow,
                     colocate_with_first_write_call=False)
    return ta._gradient_array(_grad_source(), flow=flow)


def _after_forward(op, flow_grad):
    """``flow_grad``, but only once ``op`` (a write) has run: its gradient must not read the
    gradient array before the forward write is done."""
    flow_out = array_ops.identity(op.outputs[0], name="flow_out")
    with _ops.control_dependencies([flow_out]):
        return array_ops.identity(flow_grad, name="write_barrier")


def _written_version(op, flow_grad):
    """For a write-like ``op`` of a TensorList array: its flow output, the version of its last
    write, once ``flow_grad`` has arrived (the gradients of the reads after it). The gradient
    array hands a write what was summed under its version, so an overwritten value gets only
    what the reads before the overwrite received."""
    with _ops.control_dependencies([flow_grad]):
        return array_ops.identity(op.outputs[0], name="written_version")


@RegisterGradient("TensorArrayReadV3")
def _read_grad(op, grad):
    from dflab.ops.gradients import as_dense

    index, flow = op.inputs[1], op.inputs[2]
    g = _grad_array(op, flow)
    return [None, None, g.write(index, as_dense(grad)).flow]


@RegisterGradient("TensorArrayWriteV3")
def _write_grad(op, flow):
    index = op.inputs[1]
    if op.attrs.get("tensor_list"):
        return [None, None, _grad_array(op, _written_version(op, flow)).read(index), flow]
    flow = _after_forward(op, flow)
    g = _grad_array(op, flow)
    return [None, None, g.read(index), flow]


@RegisterGradient("TensorArrayGatherV3")
def _gather_grad(op, grad):
    from dflab.ops.gradients import as_dense

    indices, flow = op.inputs[1], op.inputs[2]
    g = _grad_array(op, flow)
    return [None, None, g.scatter(indices, as_dense(grad)).flow]


@RegisterGradient("TensorArrayScatterV3")
def _scatter_grad(op, flow):
    indices = op.inputs[1]
    if op.attrs.get("tensor_list"):
        return [None, None, _grad_array(op, _written_version(op, flow)).gather(indices), flow]
    flow = _after_forward(op, flow)
    g = _grad_array(op, flow)
    return [None, None, g.gather(indices), flow]


@RegisterGradient("TensorArrayConcatV3")
def _concat_grad(op, grad, _lengths_grad):
    from dflab.ops.gradients import as_dense

    flow = op.inputs[1]
    lengths = op.outputs[1]
    g = _grad_array(op, flow)
    return [None, g.split(as_dense(grad), lengths).flow]


@RegisterGradient("TensorArraySplitV3")
def _split_grad(op, flow):
    if op.attrs.get("tensor_list"):
        return [None, _grad_array(op, _written_version(op, flow)).concat(), None, flow]
    flow = _after_forward(op, flow)
    g = _grad_array(op, flow)
    return [None, g.concat(), None, flow]


__all__ = ["TensorArray"]
