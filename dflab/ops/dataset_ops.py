"""``tf.data`` ops: the dataset ops, the iterator ops, and the tracing of dataset functions.

Every dataset transformation is an op whose one output is a scalar ``variant`` tensor: at run
time its value is a small host object describing the dataset (``dflab.kernels.dataset_kernels``),
built from the op's input values when the op runs. Nothing is read or computed then; elements
are produced only when ``IteratorGetNext`` asks for them. The element structure (dtypes and
static shapes, flattened) rides on each op as the attrs ``output_types`` / ``output_shapes``.

Iterators are resources like queues: ``IteratorV2`` (re-initialisable by ``MakeIterator``) and
``OneShotIterator`` (initialised from its dataset input the first time it runs) output a handle;
``IteratorGetNext`` reads the next element from it (``IteratorGetNextAsOptional`` an
optional one: a variant that ``OptionalHasValue`` and ``OptionalGetValue`` read, what a loop
over a dataset in a traced function tests). ``AnonymousIterator`` makes a new iterator
each time it runs, owned by its handle rather than kept by name: what eager iteration over a
dataset uses (``for element in dataset``), as TF's eager iterators do. ``ReduceDataset`` and
``DatasetCardinality`` read a dataset into tensors when they run.

A function given to ``map``, ``filter``, ``flat_map``/``interleave`` (whose result is a
dataset op's variant) or ``reduce`` is *traced* once into a ``FunctionGraph``, with a
placeholder per element component, and stored on the op as plain data (the attr ``f``: typed
node defs in the graph JSON format, argument and result names) so a kernel can run it per
element without the user's Python function. Tensors the function uses from the outer graph are
captured: constants are copied in, variables are re-declared by name (the kernel reads the
variable's current value on every call), and any other tensor becomes an extra input of the
dataset op (evaluated when the iterator is initialised, as in TF).
"""

from __future__ import annotations

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.graph import Graph
from dflab.framework.graph_io import NodeDef
from dflab.framework.op_kinds import LOOP_OPS, REF_VARIABLE_OPS
from dflab.framework.registry import NotDifferentiable, register_op
from dflab.framework.tensor_shape import TensorShape, as_shape
from dflab.ops.op_util import capture_placeholder_attrs
from dflab.ops.script_ops import adopt_functions

DATASET_OPS = (
    "TensorDataset", "TensorSliceDataset", "RangeDataset", "GeneratorDataset", "MapDataset",
    "FilterDataset", "BatchDatasetV2", "PaddedBatchDatasetV2", "ShuffleDataset",
    "RepeatDataset", "PrefetchDataset", "TakeDataset", "SkipDataset", "ZipDataset",
    "ConcatenateDataset", "TextLineDataset", "TFRecordDataset", "FixedLengthRecordDatasetV2",
    "FlatMapDataset", "InterleaveDataset", "UnbatchDataset", "ShardDataset", "CacheDataset",
    "WindowDataset",
)
# Ops that read a whole dataset when they run, into tensors.
DATASET_READING_OPS = ("ReduceDataset", "DatasetCardinality")
ITERATOR_OPS = ("IteratorV2", "OneShotIterator", "AnonymousIterator", "MakeIterator",
                "IteratorGetNext", "IteratorGetNextAsOptional", "OptionalHasValue",
                "OptionalGetValue", "SerializeIterator", "DeserializeIterator")


# --- schemas --------------------------------------------------------------------------------------
def _dataset_infer(op):
    types = op.attrs.get("output_types")
    shapes = op.attrs.get("output_shapes")
    if types is None or shapes is None or len(types) != len(shapes):
        raise ValueError(f"{op.type} needs output_types and output_shapes of the same length")
    return [(_dt.variant, TensorShape([]))]


def _iterator_infer(op):
    return [(_dt.resource, TensorShape([]))]


def _make_iterator_infer(op):
    if op.inputs[0].dtype.base_dtype is not _dt.variant:
        raise TypeError(f"MakeIterator: input 0 must be a dataset (variant), got "
                        f"{op.inputs[0].dtype.name}")
    return []


def _get_next_infer(op):
    return [(_dt.as_dtype(t), as_shape(s))
            for t, s in zip(op.get_attr("output_types"), op.get_attr("output_shapes"))]


for _t in DATASET_OPS:
    register_op(_t, _dataset_infer, stateful=True)
register_op("IteratorV2", _iterator_infer, stateful=True)
register_op("OneShotIterator", _iterator_infer, stateful=True)
register_op("AnonymousIterator", _iterator_infer, stateful=True)
register_op("MakeIterator", _make_iterator_infer, stateful=True)
register_op("IteratorGetNext", _get_next_infer, stateful=True, expensive=True)
register_op("IteratorGetNextAsOptional", _dataset_infer, stateful=True, expensive=True)
register_op("OptionalHasValue", lambda op: [(_dt.bool, TensorShape([]))])
register_op("OptionalGetValue", _get_next_infer)
register_op("SerializeIterator", lambda op: [(_dt.string, TensorShape([]))], stateful=True)
register_op("DeserializeIterator", lambda op: [], stateful=True)
register_op("ReduceDataset", _get_next_infer, stateful=True, expensive=True)
register_op("DatasetCardinality", lambda op: [(_dt.int64, TensorShape([]))])
for _t in DATASET_OPS + ITERATOR_OPS + DATASET_READING_OPS:
    NotDifferentiable(_t)


def dataset_op(op_type: str, inputs, attrs: dict, types, shapes, name=None) -> _ops.Tensor:
    """Build a dataset op producing elements of flat ``types`` / ``shapes``; its variant."""
    attrs = dict(attrs)
    attrs["output_types"] = [_dt.as_dtype(t).base_dtype for t in types]
    attrs["output_shapes"] = [as_shape(s) for s in shapes]
    return _ops.apply_op(op_type, list(inputs), attrs, name or op_type).outputs[0]


def reduce_dataset(variant, initial_state, captured, f, types, shapes, name=None) -> list:
    """The state ``f`` (a traced function of the state and an element) folds over the
    dataset's elements, from ``initial_state`` (flat tensors): one tensor per component."""
    op = _ops.apply_op("ReduceDataset", [variant, *initial_state, *captured],
                       {"f": f, "output_types": [_dt.as_dtype(t).base_dtype for t in types],
                        "output_shapes": [as_shape(s) for s in shapes]},
                       name or "ReduceDataset")
    return list(op.outputs)


def dataset_cardinality(variant, name=None) -> _ops.Tensor:
    """The number of elements of the dataset, or -1 (infinite) or -2 (unknown): an int64."""
    return _ops.apply_op("DatasetCardinality", [variant], {},
                         name or "DatasetCardinality").outputs[0]


# --- function tracing -----------------------------------------------------------------------------
class FunctionGraph(Graph):
    """The graph a dataset function is traced into: it captures what it uses from ``outer``."""

    captures_foreign_tensors = True

    def __init__(self, outer: Graph):
        super().__init__()
        self.outer = outer
        self.seed = outer.seed  # random ops inside follow the program's graph-level seed
        self.captured: list[tuple[_ops.Tensor, _ops.Tensor]] = []  # (outer, placeholder)
        self._stand_ins: dict[int, _ops.Tensor] = {}

    def _capture(self, t, op_type):
        stand_in = self._stand_ins.get(id(t))
        if stand_in is None:
            stand_in = self._stand_ins[id(t)] = self._bring_in(t)
        return stand_in

    def _bring_in(self, t):
        if t.is_eager:  # an eager tensor or variable handle: an input of the dataset op
            return self._captured_input(t)
        src = t.op
        if src.type == "Const":
            return self._create_op("Const", [], dict(src.attrs), "captured_const").outputs[0]
        if src.type in REF_VARIABLE_OPS:
            return self._redeclare(src).outputs[0]
        if src.type == "Identity" and src.inputs[0].op.type in REF_VARIABLE_OPS:
            var = self._redeclare(src.inputs[0].op)
            return self._create_op("Identity", [var.outputs[0]], {}, "read").outputs[0]
        return self._captured_input(t)

    def _captured_input(self, t):
        arg = self._create_op("Placeholder", [], capture_placeholder_attrs(t),
                              "captured").outputs[0]
        self.captured.append((t, arg))
        return arg

    def _redeclare(self, var_op):
        """The variable under its own name: the kernel finds the same state by that name."""
        existing = self.find_operation(var_op.name)
        if existing is not None:
            if existing.type != var_op.type:
                raise ValueError(f"A dataset function uses variable {var_op.name!r} and also "
                                 "builds an op of that name")
            return existing
        return self._create_op(var_op.type, [], dict(var_op.attrs), var_op.name + "/")


class TracedFunction:
    """A traced dataset function: its plain-data form (``attr``), what it captured from the
    outer graph (``captured``, extra op inputs), and its results' flat dtypes and shapes."""

    def __init__(self, attr, captured, out_types, out_shapes, out_structure):
        self.attr = attr
        self.captured = captured
        self.out_types = out_types
        self.out_shapes = out_shapes
        self.out_structure = out_structure


def _typed_node_def(op) -> dict:
    inputs = [t.op.name if t.value_index == 0 else t.name for t in op.inputs]
    inputs += ["^" + c.name for c in op.control_inputs]
    nd = NodeDef(op.name, op.type, inputs, "", dict(op.attrs), op.creation_site,
                 input_types=[t.dtype for t in op.inputs],
                 output_types=[t.dtype for t in op.outputs],
                 output_shapes=[t.shape for t in op.outputs])
    return nd.to_json()


class LoopInFunctionError(NotImplementedError):
    """A dataset function traced with a loop among its own ops (``Dataset`` traces it again
    calling it as a traced function: one call op, which runs the loop)."""


def trace_function(fn, arg_types, arg_shapes, call, name: str) -> TracedFunction:
    """Trace ``fn`` once: ``call(fn, placeholders)`` calls it on one placeholder per argument
    component and returns ``(structure, flat results)``."""
    outer = _ops.get_default_graph()
    graph = FunctionGraph(outer)
    # Node names unique in the outer graph too: per-op kernel state keyed by name (a random
    # op's generator) is never shared between the function and the outer graph.
    scope = outer.unique_name(name.split(".")[-1] + "_fn")
    with graph.as_default(), graph.name_scope(scope):
        args = [graph.create_op("Placeholder", [], name=f"arg{i}",
                                attrs={"dtype": _dt.as_dtype(t).base_dtype,
                                       "shape": as_shape(s)}).outputs[0]
                for i, (t, s) in enumerate(zip(arg_types, arg_shapes))]
        structure, flat = call(fn, args)
        rets = []
        for r in flat:
            r = _ops.convert_to_tensor(r)
            if r.graph is not graph or r.op.type == "Placeholder" or r.dtype.is_ref_dtype:
                r = graph.create_op("Identity", [r], name="ret").outputs[0]
            rets.append(r)
    adopt_functions(graph, outer)
    if any(op.type in LOOP_OPS for op in graph.get_operations()):
        raise LoopInFunctionError(f"{name}: a dataset function runs its ops in order, without "
                             "frames: a loop in it must be inside a function it calls")
    attr = {"node": [_typed_node_def(op) for op in graph.get_operations()],
            "args": [a.op.name for a in args],
            "captures": [p.op.name for _, p in graph.captured],
            "rets": [r.name for r in rets]}
    return TracedFunction(attr, [t for t, _ in graph.captured],
                          [r.dtype.base_dtype for r in rets], [r.shape for r in rets], structure)


# --- iterator builders ----------------------------------------------------------------------------
def iterator_resource(shared_name: str | None, types, shapes, name=None) -> _ops.Tensor:
    return _ops.apply_op("IteratorV2", [], {"shared_name": shared_name or "", "container": "",
                                            "output_types": list(types),
                                            "output_shapes": list(shapes)},
                         name or "Iterator").outputs[0]


def one_shot_iterator(variant, types, shapes, name=None) -> _ops.Tensor:
    return _ops.apply_op("OneShotIterator", [variant], {"output_types": list(types),
                                                        "output_shapes": list(shapes),
                                                        "shared_name": "", "container": ""},
                         name or "OneShotIterator").outputs[0]


def anonymous_iterator(types, shapes, name=None) -> _ops.Tensor:
    return _ops.apply_op("AnonymousIterator", [], {"output_types": list(types),
                                                   "output_shapes": list(shapes)},
                         name or "AnonymousIterator").outputs[0]


def make_iterator(variant, handle, name=None) -> _ops.Operation:
    with _ops.colocate_with(handle):
        return _ops.apply_op("MakeIterator", [variant, handle], {}, name or "MakeIterator")


def iterator_get_next(handle, types, shapes, name=None) -> list:
    with _ops.colocate_with(handle):
        op = _ops.apply_op("IteratorGetNext", [handle], {"output_types": list(types),
                                                         "output_shapes": list(shapes)},
                           name or "IteratorGetNext")
    return list(op.outputs)


def iterator_get_next_as_optional(handle, types, shapes, name=None) -> _ops.Tensor:
    """The next element or, past the last, none: a scalar variant (no ``OutOfRangeError``)."""
    with _ops.colocate_with(handle):
        return _ops.apply_op("IteratorGetNextAsOptional", [handle],
                             {"output_types": list(types), "output_shapes": list(shapes)},
                             name or "IteratorGetNextAsOptional").outputs[0]


def optional_has_value(optional, name=None) -> _ops.Tensor:
    return _ops.apply_op("OptionalHasValue", [optional], {},
                         name or "OptionalHasValue").outputs[0]


def optional_get_value(optional, types, shapes, name=None) -> list:
    op = _ops.apply_op("OptionalGetValue", [optional], {"output_types": list(types),
                                                        "output_shapes": list(shapes)},
                       name or "OptionalGetValue")
    return list(op.outputs)


def serialize_iterator(handle, name=None) -> _ops.Tensor:
    """The iterator's position as a string scalar (what a checkpoint saves)."""
    with _ops.colocate_with(handle):
        return _ops.apply_op("SerializeIterator", [handle], {},
                             name or "SerializeIterator").outputs[0]


def deserialize_iterator(handle, state, name=None) -> _ops.Operation:
    """Put the iterator at the position ``state`` (``serialize_iterator``'s) holds."""
    with _ops.colocate_with(handle):
        return _ops.apply_op("DeserializeIterator", [handle, state], {},
                             name or "DeserializeIterator")


__all__: list[str] = []
