"""The eager context: a graph whose ops run the moment they are built.

TF 1.x's eager execution (``tf.enable_eager_execution``) on the same engine as graphs. An
``EagerContext`` is a ``Graph`` whose ``apply_op``/``_create_op`` run the op at once instead of
adding it: every builder (``tf.add``, ``tf.matmul``, a variable's read, an optimizer's update)
reaches it through ``dflab.framework.ops.apply_op``, which asks the default graph whether it
``executes_eagerly`` — one attribute read, so building graphs costs what it did. The context
owns a ``Worker`` (the same devices, resource managers and intra-op pool a session's worker
has); each op is placed as the placer would (a ``tf.device`` request, a resource input's
device, else the device of highest priority with a kernel), and run by the kernel the kernel
registry builds from a typed ``NodeDef``, bound through the device's ``bind_kernel`` hook, as in
a plan. Kernels are cached per (op type, input dtypes, attributes, device), so the cost of an
op after its first call is a dictionary look-up, the kernel call and the wrapping of its
outputs in ``EagerTensor``s; shape and dtype rules run only when a kernel is built, and a bad
shape afterwards is the kernel's ``InvalidArgumentError``, as in TF. Builders that want one
output come through ``apply_op_output``, which makes no ``EagerOp`` record unless a tape is
recording: the per-op path is the builder, the cache look-up (``_entry``), the kernel and one
``EagerTensor``.

Tapes (``dflab.eager.backprop``) hear each op run while one is recording; op listeners
(timelines, per-op costs) hear each op with its start and end when any is attached.

Invariant: nothing is ever added to an eager context's op list; its collections stay empty of
variables (TF's eager variables live as long as Python holds them).
"""

from __future__ import annotations

import contextlib
import itertools
import random
import threading
import time
import weakref

import numpy as np

from dflab.framework import dtypes as _dt
from dflab.framework import errors
from dflab.framework import ops as _ops
from dflab.framework.device_spec import DeviceSpec
from dflab.framework.eager_tensor import EagerTensor
from dflab.framework.graph import Graph, _NameScope, _user_site
from dflab.framework.graph_io import NodeDef
from dflab.framework.registry import get_op_def
from dflab.framework.tensor_shape import TensorShape
from dflab.kernels.fp_errors import NO_FP_ERRORS, ignore_fp_errors, restore_fp_errors
from dflab.kernels.registry import get_kernel_def, has_kernel, is_host_only
from dflab.runtime.config import ConfigProto
from dflab.runtime.devices import spec_matches
from dflab.runtime.placer import holds_strings
from dflab.runtime.worker import Worker

# Ops whose attributes are unique per call (a variable's own shared name): never cached.
_UNCACHED = frozenset({"VarHandleOp"})
_CHECKED_SCOPES: set = set()  # scope names found valid (``EagerContext.name_scope``)
_NOT_FROZEN = object()
# Attribute values that are their own frozen form (``_freeze`` returns them unchanged).
_PLAIN_ATTRS = frozenset({str, int, float, bool, bytes, type(None), _dt.DType, TensorShape})
_eager_variable_ids = itertools.count(1)
# Python numbers an eager op converts to a cached constant of the other input's dtype.
_NUMBERS = frozenset({int, float, bool})


class EagerOp:
    """What an op run eagerly looks like to shape rules, gradient functions and errors: its
    type, name, inputs, outputs and attributes (no graph position)."""

    __slots__ = ("type", "name", "inputs", "outputs", "_outputs", "_attrs", "graph", "device",
                 "creation_site", "control_flow_info", "control_flow_context",
                 "skip_input_indices", "gradient_function")

    def __init__(self, op_type, name, inputs, attrs, graph, device="", outputs=None, site=""):
        self.type = op_type
        self.name = name
        self.inputs = tuple(inputs)
        self._attrs = attrs if attrs is not None else {}
        self.graph = graph
        self.device = device
        self.outputs = self._outputs = outputs if outputs is not None else []
        self.creation_site = site
        self.control_flow_info = None
        self.control_flow_context = None
        # Set by a tape while it differentiates the op: the positions of inputs no gradient
        # is wanted for (TF's ``op.skip_input_indices``), which a gradient function may skip.
        self.skip_input_indices = None
        self.gradient_function = None  # a custom gradient's own (``tf.custom_gradient``)

    @property
    def op_def(self):
        return get_op_def(self.type)

    @property
    def attrs(self):
        return self._attrs

    def get_attr(self, name):
        try:
            return self._attrs[name]
        except KeyError:
            raise ValueError(f"Operation {self.name!r} has no attr named {name!r}.") from None

    @property
    def control_inputs(self) -> tuple:
        return ()

    def values(self) -> tuple:
        return tuple(self.outputs)

    def __repr__(self):
        return f"<tf.Operation '{self.name}' type={self.type} (eager)>"


class _EagerStep:
    """What a kernel that takes the step sees when it runs eagerly: a step of its own."""

    __slots__ = ("step_id", "rendezvous", "cancelled", "error")

    def __init__(self):
        self.step_id = 0
        self.rendezvous = None
        self.cancelled = False
        self.error = None


class _Entry:
    """A cached kernel: the bound function, its outputs' dtypes and the device it runs on."""

    __slots__ = ("fn", "out_dtypes", "n_out", "dtype", "device", "node_def", "quiet")

    def __init__(self, fn, out_dtypes, device, node_def, quiet=False):
        self.fn = fn
        self.quiet = quiet  # run with NumPy's floating-point errors ignored
        self.out_dtypes = out_dtypes
        self.n_out = len(out_dtypes)
        self.dtype = out_dtypes[0] if out_dtypes else None
        self.device = device
        self.node_def = node_def


def _freeze(value):
    """A hashable stand-in for an attribute value (``_NOT_FROZEN`` if there is none)."""
    if isinstance(value, float):
        return _ops.attr_key_value(value)
    if isinstance(value, (str, int, bool, bytes, _dt.DType, TensorShape)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        items = tuple(_freeze(v) for v in value)
        return _NOT_FROZEN if _NOT_FROZEN in items else ("list", items)
    if isinstance(value, dict):
        items = tuple(sorted((k, _freeze(v)) for k, v in value.items()))
        return _NOT_FROZEN if any(v is _NOT_FROZEN for _, v in items) else ("dict", items)
    if isinstance(value, np.generic):
        return _freeze(value.item())
    return _NOT_FROZEN


def _attrs_key(attrs):
    """A hashable key for an op's attributes (``_NOT_FROZEN`` if one has no frozen form), in
    the dict's order: builders list an op's attributes in one order, and another order only
    costs a second cache entry. (``FrozenAttrs`` carry theirs, made by the same rule: ``_entry``
    reads it.)"""
    out = []
    for k, v in attrs.items():
        if type(v) not in _PLAIN_ATTRS:
            v = _freeze(v)
            if v is _NOT_FROZEN:
                return _NOT_FROZEN
        elif type(v) is float:
            v = _ops.attr_key_value(v)
        out.append((k, v))
    return tuple(out)


def _holds_tensor(value) -> bool:
    if isinstance(value, (list, tuple)):
        return any(_holds_tensor(v) for v in value)
    return _ops.is_tensor_like(value)


class _MadeOnFirstUse:
    """An attribute of the eager context's devices (``worker``, ``devices``, ``host``): the
    first read makes them all, and they are then the instance's own attributes (a descriptor
    without ``__set__`` yields to them). Not ``__getattr__``: a class defining it loses
    CPython's fast reads of every instance attribute, 0.13 us an eager op."""

    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, ctx, owner=None):
        if ctx is None:
            return self
        ctx._make_devices()
        return ctx.__dict__[self.name]


# Per eager context, the op seeds of random ops without one (``set_random_seed``'s sequence):
# kept here, not on the context, whose instance attributes stay under CPython's shared-key
# limit (its attribute reads on every eager op stay specialized).
_OP_SEEDS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class EagerContext(Graph):
    """A graph that runs its ops at once (see the module docstring)."""

    worker = _MadeOnFirstUse()
    devices = _MadeOnFirstUse()
    host = _MadeOnFirstUse()
    _spaces = _MadeOnFirstUse()

    executes_eagerly = True
    captures_foreign_tensors = True

    def __init__(self, config: ConfigProto | None = None):
        super().__init__()
        self.config = config if config is not None else ConfigProto()
        # The devices (``worker``, ``devices``, ``host``) are made when first used, not here:
        # until then ``tf.config`` may still choose them (TF initializes its context lazily).
        self._cache: dict = {}
        # (op type, *input dtypes[, FrozenAttrs token[, the input's device]]) -> entry, for
        # ops of one or two inputs, no attributes or constant ones, that ran outside any device
        # scope with one output on one memory space: the kernels ``run_binary``/``run_unary``
        # find without building ``_entry``'s key (``_entry`` fills it).
        self._plain: dict = {}
        self._scalars: dict = {}
        self.closed = False
        # fn(op_type, device_name, start_s, end_s): timelines and per-op costs.
        self.op_listeners: list = []

    def _make_devices(self) -> None:
        with _DEVICES_LOCK:
            if "worker" in self.__dict__:
                return
            worker = Worker(self.config, owner=self, ops_in_steps=False)
            self.devices = worker.devices
            self.host = worker.devices.host
            self._spaces = len({d.memory_space for d in worker.devices}) > 1
            self.worker = worker  # (last: the sign that the others are set)

    @property
    def devices_made(self) -> bool:
        return "worker" in self.__dict__

    # --- random seeds -------------------------------------------------------------------------
    def reset_random_streams(self, seed) -> None:
        """``tf.set_random_seed`` eagerly (TF's ``context.set_global_seed``): random ops
        without an op seed draw theirs from a sequence ``seed`` starts, and every random op's
        stream starts again (the kernels' generators are dropped)."""
        _OP_SEEDS[self] = random.Random(seed)
        # Kernels hold their generators: dropped too, as TF clears its kernel cache.
        self._cache.clear()
        self._plain.clear()
        if self.devices_made:
            for device in self.devices:
                device.resources.drop_kind("rng")

    def internal_op_seed(self) -> int:
        seeds = _OP_SEEDS.get(self)
        if seeds is None:
            seeds = _OP_SEEDS[self] = random.Random(self.seed)
        return seeds.randint(0, 2**31 - 2)

    # --- graph behaviour that differs in eager mode -------------------------------------------
    def unique_name(self, name: str, mark_as_used: bool = True) -> str:
        # TF's eager names are not made unique: every unnamed variable is "Variable:0".
        scope = self._st().name_scope
        return scope + name if scope else name

    def name_scope(self, name):
        """``Graph.name_scope``'s rules for the context's scopes, which only name variables:
        nothing is made unique (``unique_name``), and a name is checked once, not at every
        op (every nn builder opens a scope: 1.5 against 0.8 us)."""
        st = self._st()
        if not name:
            return _NameScope(st, "")
        if name not in _CHECKED_SCOPES:
            super().name_scope(name)  # raises for an invalid name
            if len(_CHECKED_SCOPES) < 4096:
                _CHECKED_SCOPES.add(name)
        if name[-1] == "/":
            return _NameScope(st, name)
        scope = st.name_scope
        return _NameScope(st, (scope + name if scope else name) + "/")

    @contextlib.contextmanager
    def control_dependencies(self, control_inputs):
        """Ops run in program order when executing eagerly: nothing to wait for."""
        yield None

    @contextlib.contextmanager
    def colocate_with(self, op, ignore_existing=False):
        yield

    def add_to_collection(self, name, value) -> None:
        # TF keeps no collections of eager objects (a variable lives while Python holds it).
        return None

    def get_collection_ref(self, name) -> list:
        return []

    def finalize(self) -> None:
        raise RuntimeError("An eager context cannot be finalized.")

    def get_operations(self) -> list:
        return []

    def __repr__(self):
        names = ", ".join(d.short_name for d in self.devices)
        return f"<dflab eager context on {names}>"

    # --- running ops ---------------------------------------------------------------------------
    def _create_op(self, op_type, inputs, attrs, name, site=None, extra_control=None):
        if op_type == "Const":
            return self._const_op(attrs, name)
        return self.apply_op(op_type, inputs, attrs, name)

    def create_op(self, op_type, inputs, dtypes=None, input_types=None, name=None, attrs=None,
                  op_def=None, compute_shapes=True, compute_device=True):
        return self.apply_op(op_type, list(inputs), attrs or {}, name)

    def _const_op(self, attrs, name):
        t = self.constant_tensor(attrs["value"], attrs["dtype"])
        return EagerOp("Const", name or "Const", (), attrs, self, self.host.name, [t])

    def constant_tensor(self, value, dtype):
        """An eager tensor of ``value`` (a read-only array ``tf.constant`` made) on the
        host, where TF's eager constants live until an op on another device reads them."""
        return EagerTensor(value, dtype, self.host)

    def from_numpy(self, array: np.ndarray):
        """An eager tensor holding a copy of ``array`` (a NumPy array of a dtype dflab has)."""
        try:
            dtype = _dt.as_dtype(array.dtype)
        except (TypeError, KeyError, ValueError):
            dtype = None
        if dtype is None or array.dtype.kind in "OUS":
            return _ops.convert_to_tensor(array)
        value = np.array(array)
        value.flags.writeable = False
        return EagerTensor(value, dtype, self.host)

    def scalar(self, value, dtype):
        """An eager tensor of the Python number (or tuple of ints: a shape, axes) ``value`` in
        ``dtype`` (cached: tensors are immutable, and ``x + 1`` in a loop should not rebuild
        its constant). Zeros are keyed by their text: 0.0 and -0.0 are equal, and hash alike,
        but are different constants."""
        key = (type(value), value if value else repr(value), dtype)
        t = self._scalars.get(key)
        if t is None:
            from dflab.framework.constant_op import eager_constant

            t = self.cached_constant(key, lambda: eager_constant(self, value, dtype))
        return t

    def literal(self, value, dtype):
        """A new eager tensor of the literal ``value`` (``scalar``'s keys) sharing the cached
        tensor's read-only array: what ``tf.constant`` hands a user. Tapes and ``id``-keyed
        maps tell tensors apart by identity, so a tensor a user may watch is never one a
        builder also passes inside ops (``tf.constant(3.0)`` twice are two tensors, as in TF)."""
        return self.fresh(self.scalar(value, dtype))

    @staticmethod
    def fresh(t):
        """A new eager tensor holding cached tensor ``t``'s value (see ``literal``)."""
        return EagerTensor(t._value, t.dtype, t._device_obj)

    def cached_constant(self, key, make):
        """The context's tensor for ``key`` (a tuple whose first item names what it is, apart
        from ``scalar``'s keys), made by ``make()`` the first time: constants a builder would
        make anew at every call (``tf.zeros`` and ``tf.ones`` of a static shape)."""
        t = self._scalars.get(key)
        if t is None:
            t = make()
            if len(self._scalars) < 4096:
                self._scalars[key] = t
        return t

    def _convert_inputs(self, inputs, dtype):
        tensors = []
        missing = False
        for v in inputs:
            if type(v) is EagerTensor:
                tensors.append(v)
            elif isinstance(v, _ops.Tensor):
                if not v.is_eager:
                    raise _graph_tensor_error(v)
                tensors.append(v)
            elif hasattr(v, "_as_tensor"):
                tensors.append(_ops.convert_to_tensor(v))
            elif isinstance(v, (list, tuple)) and _holds_tensor(v):
                tensors.append(_ops.convert_to_tensor(v))
            else:
                tensors.append(None)
                missing = True
        if missing:
            given = dtype is not None
            if not given:
                for t in tensors:  # the first tensor's dtype is the one numbers take
                    if t is not None:
                        dtype = t.dtype.base_dtype
                        break
            for i, v in enumerate(inputs):
                if tensors[i] is None:
                    if dtype is not None and type(v) in (int, float, bool) and \
                            not (type(v) is float and dtype.is_integer):
                        tensors[i] = self.scalar(v, dtype)
                    else:
                        tensors[i] = _ops.convert_to_tensor(
                            v, dtype=dtype if given else _ops.sibling_dtype(v, dtype))
        return tensors

    def apply_op(self, op_type, inputs, attrs=None, name=None, dtype=None):
        """Run ``op_type`` on ``inputs`` now; returns an ``EagerOp`` whose outputs are eager
        tensors (what builders read from the op ``apply_op`` returns in a graph)."""
        if not isinstance(inputs, list):
            inputs = list(inputs)
        tensors = self._convert_inputs(inputs, dtype)
        entry = self._entry(op_type, tensors, attrs, name)
        outputs = self._run(entry, op_type, tensors, attrs, name)
        if op_type in _UNCACHED:
            op = EagerOp(op_type, name or op_type, tensors, entry.node_def.attr, self,
                         entry.device.name, outputs)
            _name_handle(op, outputs)
        else:
            op = EagerOp(op_type, name or op_type, tensors, attrs, self, entry.device.name,
                         outputs)
        if _TAPES:
            _record(op)
        return op

    def apply_op_output(self, op_type, inputs, attrs=None, name=None, dtype=None):
        """``apply_op(...).outputs[0]`` without the ``EagerOp``, which only a recording tape
        (and a variable's handle) reads: the path of most builders' ops."""
        if type(inputs) is not list:
            inputs = list(inputs)
        for t in inputs:
            if type(t) is not EagerTensor:
                tensors = self._convert_inputs(inputs, dtype)
                break
        else:
            tensors = inputs
        if (attrs is None or type(attrs) is _ops.FrozenAttrs) and not self.op_listeners:
            out = self._run_plain(op_type, tensors, attrs, name)
            if out is not None:
                return out
        if _TAPES or op_type in _UNCACHED:
            return self.apply_op(op_type, tensors, attrs, name, dtype).outputs[0]
        entry = self._entry(op_type, tensors, attrs, name)
        if entry.n_out != 1 or self._spaces or self.op_listeners:
            return self._run(entry, op_type, tensors, attrs, name)[0]
        # _run for one output on one memory space, unobserved: the common case, inlined.
        token = ignore_fp_errors() if entry.quiet else None
        try:
            if len(tensors) == 2:
                out = entry.fn(tensors[0]._value, tensors[1]._value)
            elif len(tensors) == 1:
                out = entry.fn(tensors[0]._value)
            else:
                out = entry.fn(*[t._value for t in tensors])
        except Exception as e:  # noqa: BLE001 - every kernel failure becomes a TF error
            raise _kernel_error(e, op_type, name, tensors, attrs, self, entry.device) from None
        finally:
            if token is not None:
                restore_fp_errors(token)
        return EagerTensor(out, entry.out_dtypes[0], entry.device)

    def _run_plain(self, op_type, inputs, attrs, name):
        """``run_binary``'s fast path for eager tensors of any number, found by (op type,
        input dtypes[, attribute token]); None where it does not apply (a miss, an input that
        is not an eager tensor, a ``tf.device`` scope)."""
        key = [op_type]
        for t in inputs:
            if type(t) is not EagerTensor:
                return None
            key.append(t.dtype)
        if attrs is not None:
            key.append(attrs.token)
        entry = self._plain.get(tuple(key))
        if entry is None:
            return None
        try:
            if self._stacks.device:  # inside a ``tf.device`` scope: the generic look-up
                return None
        except AttributeError:  # this thread's first op here: no scope yet
            pass
        token = ignore_fp_errors() if entry.quiet else None
        try:
            out = entry.fn(*[t._value for t in inputs])
        except Exception as e:  # noqa: BLE001 - every kernel failure becomes a TF error
            raise _kernel_error(e, op_type, name, list(inputs), attrs, self,
                                entry.device) from None
        finally:
            if token is not None:
                restore_fp_errors(token)
        out = EagerTensor(out, entry.dtype, entry.device)
        if _TAPES:
            _record(EagerOp(op_type, name or op_type, tuple(inputs), attrs, self,
                            entry.device.name, [out]))
        return out

    def run_binary(self, op_type, x, y, name=None, attrs=None):
        """``apply_op_output(op_type, [x, y], attrs, name)`` for an op without attributes or
        with ``FrozenAttrs`` (``ops.apply_binary``). When two eager tensors meet a kernel in
        ``_plain`` and no listener listens, the kernel runs at once (TF's fast path for eager
        ops, ``TFE_Py_FastPathExecute``): no input list, no scope key, no second look-up; a
        recording tape gets the op's record as ``apply_op`` would give it. A variable operand
        is read first (as the generic path reads it), and its value may take the fast path."""
        if type(x) is not EagerTensor:
            as_tensor = getattr(x, "_as_tensor", None)
            if as_tensor is None:
                return self.apply_op_output(op_type, [x, y], attrs, name)
            x = as_tensor()
        if type(x) is EagerTensor and not self.op_listeners:
            if type(y) is not EagerTensor:
                if type(y) in _NUMBERS:  # a Python number: its cached constant, if made
                    number = y  # (``scalar``'s key: a zero by its text, which keeps its sign)
                    y = self._scalars.get((type(y), y if y else repr(y), x.dtype))
                    if y is None:
                        return self.apply_op_output(op_type, [x, number], attrs, name)
                else:
                    as_tensor = getattr(y, "_as_tensor", None)
                    if as_tensor is not None:
                        y = as_tensor()
                    if type(y) is not EagerTensor:
                        return self.apply_op_output(op_type, [x, y], attrs, name)
            entry = self._plain.get((op_type, x.dtype, y.dtype) if attrs is None else
                                    (op_type, x.dtype, y.dtype, attrs.token))
            if entry is not None:
                try:
                    scoped = self._stacks.device
                except AttributeError:  # this thread's first op here: no scope yet
                    scoped = None
                if scoped:  # inside a ``tf.device`` scope the kernel may be another device's
                    return self.apply_op_output(op_type, [x, y], attrs, name)
                token = ignore_fp_errors() if entry.quiet else None
                try:
                    out = entry.fn(x._value, y._value)
                except Exception as e:  # noqa: BLE001 - every kernel failure is a TF error
                    raise _kernel_error(e, op_type, name, [x, y], attrs, self,
                                        entry.device) from None
                finally:
                    if token is not None:
                        restore_fp_errors(token)
                out = EagerTensor(out, entry.dtype, entry.device)
                if _TAPES:
                    _record(EagerOp(op_type, name or op_type, (x, y), attrs, self,
                                    entry.device.name, [out]))
                return out
        return self.apply_op_output(op_type, [x, y], attrs, name)

    def run_unary(self, op_type, x, name=None, attrs=None):
        """``run_binary`` for an op of one input (``ops.apply_unary``). Written out, not
        shared with ``run_binary`` through a helper: a frame is a tenth of a small op's cost.
        An op with attributes is keyed by its input's device too: its input may be a
        resource handle (a variable's read), whose op runs where the resource lives."""
        if type(x) is EagerTensor and not self.op_listeners:
            entry = self._plain.get((op_type, x.dtype) if attrs is None else
                                    (op_type, x.dtype, attrs.token, x._device_obj))
            if entry is not None:
                try:
                    scoped = self._stacks.device
                except AttributeError:  # this thread's first op here: no scope yet
                    scoped = None
                if scoped:  # inside a ``tf.device`` scope the kernel may be another device's
                    return self.apply_op_output(op_type, [x], attrs, name)
                token = ignore_fp_errors() if entry.quiet else None
                try:
                    out = entry.fn(x._value)
                except Exception as e:  # noqa: BLE001 - every kernel failure is a TF error
                    raise _kernel_error(e, op_type, name, [x], attrs, self,
                                        entry.device) from None
                finally:
                    if token is not None:
                        restore_fp_errors(token)
                out = EagerTensor(out, entry.dtype, entry.device)
                if _TAPES:
                    _record(EagerOp(op_type, name or op_type, (x,), attrs, self,
                                    entry.device.name, [out]))
                return out
        return self.apply_op_output(op_type, [x], attrs, name)

    def _entry(self, op_type, tensors, attrs, name) -> _Entry:
        """The kernel for ``op_type`` on ``tensors``: from the cache, keyed by (op type, input
        dtypes, attributes, ``tf.device`` scopes, a resource input's device), else built."""
        # Tuples built by arity: a generic tuple(...) over the inputs costs several times more.
        n = len(tensors)
        if n == 2:
            dts = (tensors[0].dtype, tensors[1].dtype)
        elif n == 1:
            dts = (tensors[0].dtype,)
        else:
            dts = tuple([t.dtype for t in tensors])
        try:
            request = self._stacks.device
        except AttributeError:  # this thread's first op here: it starts the scope stacks
            request = self._st().device
        resource = _dt.resource in dts
        if type(attrs) is _ops.FrozenAttrs:  # its key made once (``_attrs_key``'s rule)
            akey = attrs.key
        else:
            akey = _attrs_key(attrs) if attrs else None
        key = (op_type, dts, akey, _request_key(self._st(), request) if request else None,
               tensors[dts.index(_dt.resource)]._device_obj if resource else None)
        entry = self._cache.get(key) if akey is not _NOT_FROZEN else None
        if entry is None:
            entry = self._build(op_type, tensors, attrs, name, request, resource)
            if akey is not _NOT_FROZEN and op_type not in _UNCACHED:
                self._cache[key] = entry
        # What the fast path may find next time (a hit too: the kernel may have been built
        # by a caller that passed the same attributes as a plain dict).
        if not request and n and not self._spaces and entry.n_out == 1 and \
                (akey is None or type(attrs) is _ops.FrozenAttrs) and op_type not in _UNCACHED:
            if n == 1 and akey is not None:  # ``run_unary``'s key: the input's device too
                self._plain[(op_type, dts[0], attrs.token, tensors[0]._device_obj)] = entry
            elif not resource:
                self._plain[(op_type, *dts) if akey is None else (op_type, *dts, attrs.token)] \
                    = entry
        return entry

    def _run(self, entry, op_type, tensors, attrs, name) -> list:
        """The kernel of ``entry`` run on ``tensors`` (copied to its device first where the
        context has several memory spaces); its outputs as eager tensors."""
        device = entry.device
        if self._spaces:
            args = [device.from_host(t._value) if t._device_obj is None else
                    t._device_obj.copy_to(t._value, device) for t in tensors]
        else:
            args = [t._value for t in tensors]
        listeners = self.op_listeners
        start = time.perf_counter() if listeners else 0.0
        token = ignore_fp_errors() if entry.quiet else None
        try:
            out = entry.fn(*args)
        except Exception as e:  # noqa: BLE001 - every kernel failure becomes a TF error
            raise _kernel_error(e, op_type, name, tensors, attrs, self, device) from None
        finally:
            if token is not None:
                restore_fp_errors(token)
        if listeners:
            end = time.perf_counter()
            for fn in listeners:
                fn(op_type, device.name, start, end)
        n = entry.n_out
        if n == 1:
            return [EagerTensor(out, entry.out_dtypes[0], device)]
        if n == 0:
            return []
        return [EagerTensor(v, dt, device) for v, dt in zip(out, entry.out_dtypes)]

    # --- building a kernel ---------------------------------------------------------------------
    def _build(self, op_type, tensors, attrs, name, request, resource) -> _Entry:
        attrs = dict(attrs or {})
        if op_type in _UNCACHED:
            # Each eager variable has state of its own, whatever its name (TF: anonymous).
            base = attrs.get("shared_name") or (name or "Variable").rstrip("/")
            attrs["shared_name"] = f"{base}_eager{next(_eager_variable_ids)}"
        op = EagerOp(op_type, (name or op_type).rstrip("/"), tensors, attrs, self)
        try:
            specs = op.op_def.infer(op)
        except (ValueError, TypeError) as e:
            op.creation_site = _user_site()
            raise errors.InvalidArgumentError(None, op, f"{e} [Op:{op_type}]") from None
        out_dtypes = tuple(dt for dt, _ in specs)
        device = self._place(op, request, tensors if resource else None, out_dtypes)
        node_def = NodeDef(op.name, op_type, [f"input{i}" for i in range(len(tensors))],
                           device.name, attrs, "", input_types=tuple(t.dtype for t in tensors),
                           output_types=out_dtypes,
                           output_shapes=tuple(TensorShape(sh) if not isinstance(
                               sh, TensorShape) else sh for _, sh in specs))
        try:
            kd = get_kernel_def(node_def, device.kernel_device_type)
            fn = kd.factory(node_def, device.context)
        except errors.OpError as e:
            op.creation_site = _user_site()
            raise type(e)(None, op, e.message) from None
        # Silent at inf and NaN, as the executor runs it: the paths that call ``entry.fn``
        # ignore floating-point errors around it (``fp_errors``) where ``entry.quiet``.
        quiet = not getattr(fn, "quiet_fp", False) and _may_raise_fp_errors(op_type, tensors,
                                                                           out_dtypes)
        fn = device.bind_kernel(kd, node_def, fn)
        if kd.is_async:
            fn = _blocking(fn)
        elif kd.takes_step:
            fn = _with_step(fn)
        entry = _Entry(fn, out_dtypes, device, node_def, quiet)
        if op_type in _UNCACHED:
            entry.node_def = node_def
        return entry

    def _place(self, op, request, tensors, out_dtypes):
        """The device ``op`` runs on: its resource input's; else the request of the ``device``
        scopes (soft: another device where the requested one has no kernel); else the device of
        highest priority with a kernel, as TF's eager placement does."""
        if tensors is not None:
            for t in tensors:
                if t.dtype is _dt.resource and t._device_obj is not None:
                    return t._device_obj
        spec = _requested_spec(request)
        strings = _dt.string in out_dtypes or any(t.dtype is _dt.string for t in op.inputs) \
            or holds_strings(op.attrs, out_dtypes)
        candidates = self.devices.prioritized
        if spec is not None:
            wanted = [d for d in candidates if spec_matches(spec, d.spec)]
            found = self._runnable(op.type, wanted, strings)
            if found is not None:
                return found
            if not _SOFT_PLACEMENT[0]:
                raise errors.InvalidArgumentError(
                    None, op, f"Could not satisfy device specification '{spec.to_string()}'. "
                    f"enable_soft_placement=0. Supported device types "
                    f"[{', '.join(sorted({d.device_type for d in candidates}))}]. All available "
                    f"devices [{', '.join(d.name for d in self.devices.devices)}].")
        found = self._runnable(op.type, candidates, strings)
        if found is None:
            raise errors.NotFoundError(None, op, f"No registered '{op.type}' OpKernel for any "
                                       "device of the eager context")
        return found

    def forget_placements(self) -> None:
        """Place every op again at its next use (the placement rule changed)."""
        self._cache.clear()
        self._plain.clear()

    @staticmethod
    def _runnable(op_type, devices, strings):
        for d in devices:
            if d.type.accelerator and (strings or is_host_only(op_type)):
                continue
            if has_kernel(op_type, d.kernel_device_type):
                return d
        return None

    def close(self) -> None:
        self.closed = True
        if self.devices_made:
            self.worker.close()


def _request_key(st, request):
    """A hashable key for a stack of ``tf.device`` scopes (by content: a loop that enters the
    same scope each iteration reuses its kernels), remembered for the stack object in use."""
    memo = getattr(st, "eager_request", None)
    if memo is not None and memo[0] is request:
        return memo[1]
    key = tuple((kind, val.to_string() if kind == "spec" else id(val)) for kind, val in request)
    st.eager_request = (request, key)
    return key


def _requested_spec(request):
    """The device a stack of ``tf.device`` scopes asks for (innermost fields first)."""
    if not request:
        return None
    spec = DeviceSpec()
    for kind, val in reversed(request):
        if kind == "reset":
            break
        if kind == "spec":
            spec = val.make_merged_spec(spec)
        else:
            raise RuntimeError("tf.device does not support functions when eager execution "
                               "is enabled.")
    return spec if spec.to_string() else None


def _name_handle(op, outputs) -> None:
    """A variable's handle is named (``Variable:0``) and records the op that made it, whose
    attributes give the variable's dtype and shape to the rules that read them."""
    handle = outputs[0]
    op.name = op.name.rstrip("/")
    handle.set_source(op, f"{op.name}:0")
    state = handle._value
    device = handle._device_obj
    weakref.finalize(handle, _forget_variable, device, state.name)


def _forget_variable(device, name) -> None:
    try:
        device.resources.destroy_variable(name)
    except Exception:  # noqa: BLE001 - at interpreter exit the device may be gone
        pass


def _may_raise_fp_errors(op_type, tensors, out_dtypes) -> bool:
    """Whether a kernel may raise a NumPy floating-point error (an overflow, inf - inf, NaN
    cast to an int): it reads or makes complex values (complex ``tanh``, ``sign`` and ``abs``
    overflow too), or floating-point ones in an op not of ``NO_FP_ERRORS``."""
    dtypes = [t.dtype for t in tensors]
    dtypes += out_dtypes
    if any(dt.is_complex for dt in dtypes):
        return True
    return op_type not in NO_FP_ERRORS and any(dt.is_floating for dt in dtypes)


def _blocking(fn):
    """An asynchronous kernel (``fn(step, done, *inputs)``) run to its end on this thread."""

    def run(*args):
        event = threading.Event()
        result = {}

        def done(outputs=None, error=None):
            result["outputs"], result["error"] = outputs, error
            event.set()

        fn(_EagerStep(), done, *args)
        event.wait()
        if result["error"] is not None:
            raise result["error"]
        return result["outputs"]

    return run


def _with_step(fn):
    def run(*args):
        return fn(_EagerStep(), *args)

    return run


def _graph_tensor_error(t):
    return errors.InvalidArgumentError(
        None, None, f"A graph tensor ({t.name}) was passed to an op running eagerly; use "
        "tensors computed eagerly, or build the op inside that tensor's graph.")


def _kernel_error(e, op_type, name, tensors, attrs, ctx, device):
    op = EagerOp(op_type, (name or op_type).rstrip("/"), tensors, attrs, ctx, device.name,
                 site=_user_site())
    if isinstance(e, errors.OpError):
        inner = getattr(e, "op", None)
        where = ""
        if inner is not None and inner is not op:
            site = getattr(inner, "creation_site", "") or ""
            where = f"\n\t [[function node {inner.name}" + (
                f" (defined at {site})]]" if site else "]]")
        return type(e)(None, op, f"{e.message} [Op:{op_type}]{where}")
    shapes = ", ".join(str(list(np.shape(t._value))) for t in tensors
                       if t.dtype is not _dt.resource)
    return errors.InvalidArgumentError(
        None, op, f"{type(e).__name__}: {e} (input shapes: [{shapes}]) [Op:{op_type}]")


# --- tapes: filled by dflab.eager.backprop -------------------------------------------------------
_TAPES: list = []


def _record(op) -> None:
    for tape in _TAPES:
        tape.record(op)


# --- the process's context -----------------------------------------------------------------------
_context: EagerContext | None = None
_context_lock = threading.Lock()


def eager_context(config: ConfigProto | None = None) -> EagerContext:
    """The process's eager context (made on first use, with ``config`` if given then, else
    with what ``tf.config`` set before: ``context_config()``)."""
    global _context
    if _context is None or _context.closed:
        with _context_lock:
            if _context is None or _context.closed:
                _context = EagerContext(config if config is not None else _pending_config)
    return _context


def context_initialized() -> bool:
    """Whether the eager context has made its devices (``tf.config``'s device settings are
    then fixed)."""
    return _context is not None and not _context.closed and _context.devices_made


def context_config() -> ConfigProto:
    """The eager context's config: the one it has, or (before it is made) the one it will be
    made with, which ``tf.config`` fills."""
    global _pending_config
    with _context_lock:
        if _context is not None and not _context.closed:
            return _context.config
        if _pending_config is None:
            _pending_config = ConfigProto()
        return _pending_config


_pending_config: ConfigProto | None = None
# A ``tf.device`` request no device can meet runs elsewhere (TF's eager default);
# ``tf.config.set_soft_device_placement(False)`` makes it an error.
_SOFT_PLACEMENT = [True]
_DEVICES_LOCK = threading.Lock()


def soft_placement() -> bool:
    return _SOFT_PLACEMENT[0]


def set_soft_placement(enabled: bool) -> None:
    """Soft placement for the eager context, now and when it is made."""
    _SOFT_PLACEMENT[0] = bool(enabled)
    if _context is not None and not _context.closed:
        _context.forget_placements()


def enable_eager_execution(config=None, device_policy=None, execution_mode=None) -> None:
    """TF 1.x ``tf.enable_eager_execution``: from now on ops run at once (on every thread
    that has not entered a graph with ``as_default``). Call it at program start: a default
    graph that already holds ops is refused, as TF refuses it."""
    current = _ops.get_default_graph()
    if current.executes_eagerly:
        return
    if _ops._default_graph_stack():
        raise ValueError("tf.enable_eager_execution must be called at program startup "
                         "(not inside a `with graph.as_default()` block).")
    if config is not None and _context is not None and _context.config is not config:
        raise ValueError("tf.enable_eager_execution was called with another config after the "
                         "eager context was made.")
    _ops.set_global_default_graph(eager_context(config))


def disable_eager_execution() -> None:
    """Graph mode again: a fresh default graph (TF 2.x's ``disable_eager_execution``)."""
    if _ops.get_default_graph().executes_eagerly and not _ops._default_graph_stack():
        _ops.set_global_default_graph(Graph())


def executing_eagerly() -> bool:
    return _ops.executing_eagerly()


def executing_eagerly_outside_functions() -> bool:
    """Whether the outermost context executes eagerly (TF's): True inside a function traced
    from eager code too, where ``executing_eagerly()`` is False; what library code asks to
    know whether its variables will be eager ones."""
    with init_scope():
        return _ops.executing_eagerly()


def eager_mode():
    """A block in which this thread executes eagerly (the process's context as its default
    graph), whatever the global mode: what tests and notebooks comparing modes use."""
    return eager_context().as_default()


@contextlib.contextmanager
def graph_mode(graph: Graph | None = None):
    """A block building ``graph`` (a new one by default) even where eager execution is on."""
    g = graph if graph is not None else Graph()
    with g.as_default():
        yield g


@contextlib.contextmanager
def init_scope():
    """TF's ``init_scope``: leave any function being traced for the outermost context (the
    eager context where eager execution is on, else the default graph outside functions),
    with no control dependencies — where variables and their initializers are made."""
    stack = _ops._default_graph_stack()
    outer = None
    for g in reversed(stack):
        if not getattr(g, "is_function_graph", False):
            outer = g
            break
    if outer is None:
        outer = _ops.get_global_default_graph()
    with outer.as_default(), outer.control_dependencies(None):
        yield
