"""``tf.data.Dataset`` (TF 1.x's ``DatasetV1``): builders of dataset ops and their structures.

A ``Dataset`` is a handle on one dataset op in the graph (its ``variant`` output, built when the
Python object is made) plus its element structure: a template of nested tuples/dicts and the flat
components' dtypes and static shapes (``output_types`` / ``output_shapes``). Transformations build
a new op over this one's output; iterators (``dflab.data.iterator``) read elements at run time.
"""

from __future__ import annotations

import numpy as np

from dflab.autograph.conversion import converted_call
from dflab.data import options as _options
from dflab.data import structure as _st
from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework import random_seed
from dflab.framework.composite import GraphIterable
from dflab.framework.constant_op import constant, constant_value
from dflab.framework.tensor_shape import TensorShape, as_shape, unknown_shape
from dflab.ops import dataset_ops as _dso
from dflab.ops.script_ops import register_function

AUTOTUNE = -1
# TF's cardinality of an endless dataset and of one it cannot count without reading it.
INFINITE_CARDINALITY = -1
UNKNOWN_CARDINALITY = -2


def _int64(value, name: str) -> _ops.Tensor:
    return _ops.convert_to_tensor(value, dtype=_dt.int64, name=name)


def _static_int(t) -> int | None:
    v = constant_value(t)
    return None if v is None else int(v)


def _components(tensors, name: str):
    """(structure template, flat tensors) of a nested value of tensors or convertibles."""
    flat = [_ops.convert_to_tensor(v, name=f"component_{i}")
            for i, v in enumerate(_st.flatten(tensors))]
    if not flat:
        raise ValueError(f"{name}: an element needs at least one component")
    return tensors, flat


class Dataset(_st.ElementsArgument, GraphIterable):
    """A dataset op and the structure of its elements (see the module docstring)."""

    def __init__(self, variant: _ops.Tensor, structure, types, shapes):
        self._variant_tensor = variant
        self._structure = structure
        self._types = [_dt.as_dtype(t).base_dtype for t in types]
        self._shapes = [as_shape(s) for s in shapes]
        self._options_attr = None

    def _derive(self, op_type, inputs, attrs, structure, types, shapes) -> Dataset:
        variant = _dso.dataset_op(op_type, [self._variant_tensor, *inputs], attrs, types, shapes)
        derived = Dataset(variant, structure, types, shapes)
        derived._options_attr = self._options_attr  # options hold for the whole pipeline
        return derived

    def _over(self, variant: _ops.Tensor) -> Dataset:
        """A dataset of these elements read from ``variant`` (a traced function's argument)."""
        out = Dataset(variant, self._structure, self._types, self._shapes)
        out._options_attr = self._options_attr
        return out

    # --- as a traced function's argument, and in AutoGraph's loops (``composite``) --------
    _KIND, _COMPONENT_DTYPE = "dataset", _dt.variant

    def _component(self):
        return self._variant_tensor

    def _over_tensors(self, tensors) -> Dataset:
        return self._over(tensors[0])

    def _graph_loop(self):
        from dflab.data.iterator import graph_loop_over

        return graph_loop_over(self)

    def options(self) -> _options.Options:
        """The options set on this dataset and the datasets it was made from."""
        return self._options_attr if self._options_attr is not None else _options.Options()

    def with_options(self, options: _options.Options) -> Dataset:
        """This dataset with ``options`` merged into its options (see ``dflab.data.options``:
        they are validated and kept; none changes the elements)."""
        if not isinstance(options, _options.Options):
            raise TypeError(f"options must be a tf.data.Options, got {type(options).__name__}")
        out = self._over(self._variant_tensor)
        out._options_attr = self.options().merge(options)
        return out

    def _same_structure(self, op_type, inputs, attrs=None) -> Dataset:
        return self._derive(op_type, inputs, attrs or {}, self._structure, self._types,
                            self._shapes)

    def __repr__(self):
        return f"<Dataset shapes: {self.output_shapes}, types: {self.output_types}>"

    # --- sources -----------------------------------------------------------------------------
    @staticmethod
    def from_tensors(tensors) -> Dataset:
        """One element: ``tensors`` itself."""
        with _ops.name_scope(None, "TensorDataset"):
            structure, flat = _components(tensors, "from_tensors")
            types = [t.dtype.base_dtype for t in flat]
            shapes = [t.shape for t in flat]
            variant = _dso.dataset_op("TensorDataset", flat, {}, types, shapes)
        return Dataset(variant, structure, types, shapes)

    @staticmethod
    def from_tensor_slices(tensors) -> Dataset:
        """One element per slice along the first dimension of every component."""
        with _ops.name_scope(None, "TensorSliceDataset"):
            structure, flat = _components(tensors, "from_tensor_slices")
            first = None
            for t in flat:
                if t.shape.ndims == 0:
                    raise ValueError(f"from_tensor_slices: component {t.name} is a scalar; "
                                     "every component needs a first dimension to slice")
                n = t.shape[0] if t.shape.ndims is not None else None
                first = n if first is None else first
                if n is not None and first is not None and n != first:
                    raise ValueError(f"Dimensions {first} and {n} are not compatible: every "
                                     "component must have the same size in dimension 0")
            types = [t.dtype.base_dtype for t in flat]
            shapes = [t.shape[1:] if t.shape.ndims is not None else unknown_shape()
                      for t in flat]
            variant = _dso.dataset_op("TensorSliceDataset", flat, {}, types, shapes)
        return Dataset(variant, structure, types, shapes)

    @staticmethod
    def range(*args, output_type=_dt.int64) -> Dataset:
        """``range(stop)``, ``range(start, stop)`` or ``range(start, stop, step)`` (int64)."""
        if not 1 <= len(args) <= 3:
            raise ValueError(f"Dataset.range takes 1 to 3 arguments, got {len(args)}")
        start, stop, step = (0, args[0], 1) if len(args) == 1 else (
            (args[0], args[1], 1) if len(args) == 2 else args)
        if _dt.as_dtype(output_type).base_dtype is not _dt.int64:
            raise NotImplementedError("Dataset.range supports output_type=tf.int64 only")
        with _ops.name_scope(None, "RangeDataset"):
            inputs = [_int64(start, "start"), _int64(stop, "stop"), _int64(step, "step")]
            variant = _dso.dataset_op("RangeDataset", inputs, {}, [_dt.int64], [TensorShape([])])
        return Dataset(variant, _dt.int64, [_dt.int64], [TensorShape([])])

    @staticmethod
    def from_generator(generator, output_types, output_shapes=None, args=None) -> Dataset:
        """Elements yielded by ``generator(*args)``, called afresh for every pass; each must fit
        ``output_types`` (and ``output_shapes``, unknown by default)."""
        if not callable(generator):
            raise TypeError("`generator` must be callable.")
        types = [_dt.as_dtype(t).base_dtype for t in _st.flatten(output_types)]
        if output_shapes is None:
            shapes = [unknown_shape()] * len(types)
        else:
            if not _st.same_structure(output_types, output_shapes):
                raise TypeError("`output_shapes` must have the same structure as "
                                "`output_types`")
            shapes = [as_shape(s) for s in _st.flatten_up_to(output_types, output_shapes,
                                                             "output_shapes")]
        # As in TF, the generator gets its arguments as NumPy values (strings as bytes).
        call_args = tuple(_generator_arg(a) for a in (args or ()))

        def flat_elements():
            for value in generator(*call_args):
                yield _generator_element(output_types, types, shapes, value)

        token = register_function(_ops.get_default_graph(), flat_elements)
        variant = _dso.dataset_op("GeneratorDataset", [], {"token": token}, types, shapes)
        return Dataset(variant, output_types, types, shapes)

    @staticmethod
    def list_files(file_pattern, shuffle=None, seed=None) -> Dataset:
        """The names of the files matching the glob ``file_pattern`` (or any of a list of
        patterns), sorted, then shuffled unless ``shuffle=False`` (TF's); no match fails
        with ``InvalidArgumentError`` when the dataset is made (run)."""
        from dflab.ops import array_ops, control_flow_ops, math_ops, string_ops
        from dflab.ops.tensor_io_ops import matching_files

        with _ops.name_scope(None, "list_files"):
            pattern = _ops.convert_to_tensor(file_pattern, dtype=_dt.string,
                                             name="file_pattern")
            matching = matching_files(pattern)
            found = math_ops.greater(array_ops.shape(matching)[0], 0, name="match_not_empty")
            message = math_ops.add("No files matched pattern: ",
                                   string_ops.reduce_join(pattern, separator=", "),
                                   name="message")
            check = control_flow_ops.Assert(found, [message], summarize=1,
                                            name="assert_not_empty")
            with _ops.control_dependencies([check]):
                matching = array_ops.identity(matching)
            dataset = Dataset.from_tensor_slices(matching)
            if shuffle is None or shuffle:
                count = array_ops.shape(matching, out_type=_dt.int64)[0]
                dataset = dataset.shuffle(math_ops.maximum(count, 1), seed=seed)
        return dataset

    @staticmethod
    def zip(datasets) -> Dataset:
        """Elements of several datasets side by side (a nested tuple/dict of datasets)."""
        flat = _st.flatten(datasets)
        if not flat or not all(isinstance(d, Dataset) for d in flat):
            raise TypeError("Dataset.zip needs a (nested) tuple or dict of datasets")
        structure = _st.pack(datasets, [d._structure for d in flat])
        types = [t for d in flat for t in d._types]
        shapes = [s for d in flat for s in d._shapes]
        variant = _dso.dataset_op("ZipDataset", [d._variant_tensor for d in flat], {}, types,
                                  shapes)
        return Dataset(variant, structure, types, shapes)

    # --- transformations ---------------------------------------------------------------------
    def map(self, map_func, num_parallel_calls=None) -> Dataset:
        """``map_func`` traced once on the element's tensors, then run per element (in order;
        ``num_parallel_calls`` is accepted and ignored)."""
        traced = self._trace(map_func, "map")
        return self._derive("MapDataset", traced.captured, {"f": traced.attr},
                            traced.out_structure, traced.out_types, traced.out_shapes)

    def filter(self, predicate) -> Dataset:
        """The elements for which ``predicate`` (traced like ``map``'s function) is true."""
        traced = self._trace(predicate, "filter")
        if len(traced.out_types) != 1 or traced.out_types[0] is not _dt.bool or \
                not traced.out_shapes[0].is_compatible_with(TensorShape([])):
            raise ValueError("`predicate` return type must be convertible to a scalar boolean "
                             f"tensor. Was {traced.out_types} with shapes {traced.out_shapes}.")
        return self._same_structure("FilterDataset", traced.captured, {"f": traced.attr})

    def _trace(self, fn, what: str, result=None):
        return _trace_function(fn, what, self._structure, self._types, self._shapes,
                               result or _element_result)

    def batch(self, batch_size, drop_remainder=False) -> Dataset:
        """Consecutive elements stacked; the last batch may be short unless
        ``drop_remainder``, so the static batch dimension is None unless it is set."""
        return self._batch("BatchDatasetV2", batch_size, drop_remainder, [], self._shapes)

    def padded_batch(self, batch_size, padded_shapes=None, padding_values=None,
                     drop_remainder=False) -> Dataset:
        """Batches whose components are padded to ``padded_shapes`` (a None or -1 dimension:
        the batch's largest) with ``padding_values`` (0, or b"" for strings, by default)."""
        if padded_shapes is None:
            for s in self._shapes:
                if s.ndims is None:
                    raise ValueError("padded_batch needs padded_shapes for components of "
                                     "unknown rank")
            padded = [TensorShape([None] * s.ndims) for s in self._shapes]
        else:
            padded = [as_shape(s) for s in _st.flatten_up_to(self._structure, padded_shapes,
                                                             "padded_shapes")]
        for k, (p, s) in enumerate(zip(padded, self._shapes)):
            if p.ndims is None or (s.ndims is not None and s.ndims != p.ndims):
                raise ValueError(f"padded_shapes[{k}] = {p} does not fit component shape {s}")
        if padding_values is None:
            values = [b"" if t is _dt.string else 0 for t in self._types]
        else:
            values = _st.flatten_up_to(self._structure, padding_values, "padding_values")
        with _ops.name_scope(None, "padded_batch"):
            inputs = [constant([-1 if d is None else d for d in p.as_list()], dtype=_dt.int64,
                               shape=[p.ndims], name="padded_shape") for p in padded]
            inputs += [_ops.convert_to_tensor(v, dtype=t, name="padding_value")
                       for v, t in zip(values, self._types)]
            for v in inputs[len(padded):]:
                if v.shape.ndims not in (None, 0):
                    raise ValueError("padding_values must be scalars")
        return self._batch("PaddedBatchDatasetV2", batch_size, drop_remainder, inputs, padded)

    def _batch(self, op_type, batch_size, drop_remainder, extra, element_shapes) -> Dataset:
        size = _int64(batch_size, "batch_size")
        drop = _ops.convert_to_tensor(drop_remainder, dtype=_dt.bool, name="drop_remainder")
        static = _static_int(size) if constant_value(drop) else None
        shapes = [TensorShape([static]).concatenate(s) for s in element_shapes]
        if op_type == "BatchDatasetV2":
            inputs = [size, drop]
        else:
            inputs = [size, *extra, drop]
        return self._derive(op_type, inputs, {}, self._structure, self._types, shapes)

    def shuffle(self, buffer_size, seed=None, reshuffle_each_iteration=None) -> Dataset:
        """Elements drawn at random from a buffer of ``buffer_size`` (TF's algorithm; a seeded
        shuffle repeats its order from run to run, though not TF's exact permutation)."""
        seed1, seed2 = random_seed.get_seed(seed)
        reshuffle = True if reshuffle_each_iteration is None else bool(reshuffle_each_iteration)
        inputs = [_int64(buffer_size, "buffer_size"), _int64(seed1 or 0, "seed"),
                  _int64(seed2 or 0, "seed2")]
        return self._same_structure("ShuffleDataset", inputs,
                                    {"reshuffle_each_iteration": reshuffle})

    def repeat(self, count=None) -> Dataset:
        """The dataset ``count`` times over (forever when None or -1)."""
        return self._same_structure("RepeatDataset", [_int64(-1 if count is None else count,
                                                             "count")])

    def prefetch(self, buffer_size) -> Dataset:
        """Accepted for compatibility: elements are produced on demand, with no look-ahead."""
        return self._same_structure("PrefetchDataset", [_int64(buffer_size, "buffer_size")])

    def take(self, count) -> Dataset:
        return self._same_structure("TakeDataset", [_int64(count, "count")])

    def enumerate(self, start=0) -> Dataset:  # noqa: A003 - TF's name
        """``(index, element)`` pairs, the index an int64 counting from ``start``."""
        return Dataset.zip((Dataset.range(start, np.iinfo(np.int64).max), self))

    # AutoGraph's ``iter()``, ``enumerate()`` and ``zip()`` of datasets while tracing (TF's).
    def _graph_iter(self):
        from dflab.data.iterator import OwnedIterator

        return OwnedIterator(self) if _ops.get_default_graph().is_function_graph else None

    def _graph_enumerate(self, start):
        return self.enumerate(start)

    def _graph_zip(self, iterables):
        if all(isinstance(d, Dataset) for d in iterables):
            return Dataset.zip(tuple(iterables))
        return None

    def skip(self, count) -> Dataset:
        return self._same_structure("SkipDataset", [_int64(count, "count")])

    def concatenate(self, dataset) -> Dataset:
        """This dataset's elements, then ``dataset``'s (same structure and dtypes)."""
        if not _st.same_structure(self._structure, dataset._structure) or \
                self._types != dataset._types:
            raise TypeError(f"Two datasets to concatenate have different types "
                            f"{self.output_types} and {dataset.output_types}")
        shapes = [_most_specific_common(a, b) for a, b in zip(self._shapes, dataset._shapes)]
        return self._derive("ConcatenateDataset", [dataset._variant_tensor], {},
                            self._structure, self._types, shapes)

    def apply(self, transformation_func) -> Dataset:
        return transformation_func(self)

    def flat_map(self, map_func) -> Dataset:
        """The elements of the datasets ``map_func`` makes of each element, one dataset after
        the other (``map_func`` is traced once, as ``map``'s, and returns a dataset)."""
        traced = self._trace(map_func, "flat_map", _dataset_result)
        inner = traced.out_structure
        return self._derive("FlatMapDataset", traced.captured, {"f": traced.attr},
                            inner._structure, inner._types, inner._shapes)

    def interleave(self, map_func, cycle_length=None, block_length=None,
                   num_parallel_calls=None, deterministic=None) -> Dataset:
        """The datasets ``map_func`` makes of ``cycle_length`` elements at a time, read
        ``block_length`` elements from each in turn, a finished one's place taken by the
        next element's dataset (TF's order). ``cycle_length`` None or ``AUTOTUNE``: the CPUs
        of the host (TF's); ``num_parallel_calls`` and ``deterministic`` are accepted and
        change nothing (the order is always TF's deterministic one)."""
        traced = self._trace(map_func, "interleave", _dataset_result)
        inner = traced.out_structure
        inputs = [*traced.captured,
                  _int64(AUTOTUNE if cycle_length is None else cycle_length, "cycle_length"),
                  _int64(1 if block_length is None else block_length, "block_length")]
        return self._derive("InterleaveDataset", inputs, {"f": traced.attr},
                            inner._structure, inner._types, inner._shapes)

    def unbatch(self) -> Dataset:
        """Each element cut along its first dimension into that many elements (every
        component must have the same first dimension)."""
        if any(s.ndims == 0 for s in self._shapes):
            raise ValueError("Cannot unbatch an input with scalar components.")
        known = None
        for s in self._shapes:
            d = s[0] if s.ndims else None
            if d is not None and known is not None and d != known:
                raise ValueError("`unbatch()` is only supported for datasets of elements whose "
                                 "components have a matching leading dimension. Encountered "
                                 f"both {known} and {d}.")
            known = d if d is not None else known
        shapes = [s[1:] if s.ndims is not None else unknown_shape() for s in self._shapes]
        return self._derive("UnbatchDataset", [], {}, self._structure, self._types, shapes)

    def window(self, size, shift=None, stride=1, drop_remainder=False) -> Dataset:
        """Windows of ``size`` elements (fewer at the end unless ``drop_remainder``), one
        starting every ``shift`` elements (``size`` by default), each taking every
        ``stride``-th element: an element of datasets, one per component, in the elements'
        structure (TF's; ``flat_map(lambda w: w.batch(size))`` makes them tensors)."""
        specs = [_st.DatasetSpec(leaf, [t], [s]) for leaf, t, s in
                 zip(_st.flatten(self._structure), self._types, self._shapes)]
        inputs = [_int64(size, "size"), _int64(size if shift is None else shift, "shift"),
                  _int64(stride, "stride"),
                  _ops.convert_to_tensor(drop_remainder, dtype=_dt.bool,
                                         name="drop_remainder")]
        return self._derive("WindowDataset", inputs, {}, _st.pack(self._structure, specs),
                            [_dt.variant] * len(specs), [TensorShape([])] * len(specs))

    def cache(self, filename="") -> Dataset:
        """The elements, kept in memory by the first pass that reads them all; later passes
        read the memory (TF's). Caching in files (a ``filename``) is refused when the dataset
        is made (``UnimplementedError``)."""
        name = _ops.convert_to_tensor(filename, dtype=_dt.string, name="filename")
        return self._same_structure("CacheDataset", [name])

    def shard(self, num_shards, index) -> Dataset:
        """Every ``num_shards``-th element, from the ``index``-th on."""
        return self._same_structure("ShardDataset", [_int64(num_shards, "num_shards"),
                                                     _int64(index, "index")],
                                    {"require_non_empty": False})

    def reduce(self, initial_state, reduce_func):
        """``reduce_func(state, element)`` folded over the elements from ``initial_state``:
        the final state, as tensors computed when run (at once, eagerly). Where the function
        changes a component's shape, the state takes the shape common to both (TF's)."""
        with _ops.name_scope(None, "ReduceDataset"):
            structure, flat = _components(initial_state, "reduce")
            types = [t.dtype.base_dtype for t in flat]
            shapes = [t.shape for t in flat]
            while True:
                traced = _trace_function(reduce_func, "reduce", (structure, self._structure),
                                         types + self._types, shapes + self._shapes,
                                         _element_result)
                _check_new_state(types, traced.out_types)
                relaxed = [_most_specific_common(a, b)
                           for a, b in zip(shapes, traced.out_shapes)]
                if all(_same_shape(a, b) for a, b in zip(shapes, relaxed)):
                    break
                shapes = relaxed
            outs = _dso.reduce_dataset(self._variant_tensor, flat, traced.captured,
                                       traced.attr, types, shapes)
        return _st.pack(structure, outs)

    def cardinality(self) -> _ops.Tensor:
        """The number of elements as an int64 scalar computed when run: the count, or
        ``INFINITE_CARDINALITY`` (-1) or ``UNKNOWN_CARDINALITY`` (-2), by TF's rules (TF 1.x's
        ``map`` does not keep its input's count: unknown)."""
        return _dso.dataset_cardinality(self._variant_tensor)

    def __len__(self) -> int:
        if not _ops.executing_eagerly():
            raise TypeError("`tf.data.Dataset` only supports `len` in eager mode. Use "
                            "`tf.data.Dataset.cardinality()` instead.")
        n = int(self.cardinality().numpy())
        if n == INFINITE_CARDINALITY:
            raise TypeError("The dataset is infinite.")
        if n == UNKNOWN_CARDINALITY:
            raise TypeError("The dataset length is unknown.")
        return n

    def __bool__(self) -> bool:
        return True  # (not by ``__len__``: a dataset is true, in a graph too)

    # --- iterators ---------------------------------------------------------------------------
    def __iter__(self):
        """An eager iterator over the elements (``for element in dataset``): eager execution
        only (AutoGraph turns a ``for`` over a dataset in a traced function into a loop of
        ops); a graph reads a dataset through ``make_one_shot_iterator``'s ops."""
        from dflab.data.iterator import OwnedIterator, graph_iteration_error

        if not _ops.executing_eagerly():
            raise graph_iteration_error(
                "a `tf.data.Dataset`", "a graph reads a dataset through "
                "tf.compat.v1.data.make_one_shot_iterator(dataset).get_next()")
        return OwnedIterator(self)

    def as_numpy_iterator(self):
        """The elements as NumPy values (eager execution only, as TF's)."""
        from dflab.data.iterator import NumpyIterator

        if not _ops.executing_eagerly():
            raise RuntimeError("`tf.data.Dataset.as_numpy_iterator()` is only supported in "
                               "eager mode.")
        return NumpyIterator(self)

    def make_one_shot_iterator(self):
        from dflab.data.iterator import make_one_shot_iterator

        return make_one_shot_iterator(self)

    def make_initializable_iterator(self, shared_name=None):
        from dflab.data.iterator import make_initializable_iterator

        return make_initializable_iterator(self, shared_name)


def _element_result(ret):
    """A function's result as an element: (structure, flat components); a list it returns
    is a tuple (TF's), a dataset in it a component (its variant; a ``DatasetSpec`` in the
    structure)."""
    if isinstance(ret, list):
        ret = tuple(ret)
    flat = _st.flatten(ret)
    if not any(isinstance(v, Dataset) for v in flat):
        return ret, flat
    specs = [_st.DatasetSpec(v._structure, v._types, v._shapes) if isinstance(v, Dataset)
             else v for v in flat]
    return _st.pack(ret, specs), [v._variant_tensor if isinstance(v, Dataset) else v
                                  for v in flat]


def _dataset_result(ret):
    """A function's result that must be a dataset (``flat_map``, ``interleave``): (the
    dataset, its variant)."""
    if not isinstance(ret, Dataset):
        raise TypeError(f"The `map_func` argument must return a `Dataset` object. Got "
                        f"{type(ret)}.")
    return ret, [ret._variant_tensor]


def _trace_function(fn, what: str, structure, types, shapes, result):
    """``fn`` traced once on an element of ``structure`` (flat ``types``/``shapes``), its
    result read by ``result`` (``_element_result``, ``_dataset_result``)."""
    if not callable(fn):
        raise TypeError(f"{what} needs a callable, got {type(fn).__name__}")

    def call(f, args):
        element = _st.pack_element(structure, args)
        # TF's rule: a plain tuple is passed as positional arguments, anything else whole.
        return result(f(*element) if type(element) is tuple else f(element))

    # TF's datasets trace their functions with AutoGraph: a tensor ``if`` there is a cond.
    try:
        return _dso.trace_function(converted_call(fn), types, shapes, call, f"Dataset.{what}")
    except _dso.LoopInFunctionError:
        # A loop (a tensor ``for``/``while``, ``tf.while_loop``) needs the executor's
        # frames: the function becomes a traced function, called by one op.
        from dflab.eager.function import function

        if result is _dataset_result:  # (a traced function's results are tensors)
            raise NotImplementedError(
                f"Dataset.{what}: a function returning a dataset cannot hold a loop "
                "(tf.while_loop, or a tensor for/while) in dflab; compute the loop in a map "
                f"before it: ds.map(loop_fn).{what}(...)") from None

        return _dso.trace_function(function(fn), types, shapes, call, f"Dataset.{what}")


def _check_new_state(types, new_types) -> None:
    """A reduce function's new state has the initial state's components and dtypes."""
    from dflab.framework import errors

    if len(new_types) != len(types):
        raise errors.InvalidArgumentError(
            None, None, "The number of components of the initial state and the reduce "
            f"function output does not match. (initial_state={len(types)}, "
            f"output={len(new_types)}).")
    for t, new in zip(types, new_types):
        if new is not t:
            raise TypeError("The element types for the new state must match the initial "
                            f"state. Expected <dtype: '{t.name}'> but got <dtype: "
                            f"'{new.name}'>.")


def _same_shape(a: TensorShape, b: TensorShape) -> bool:
    return a.ndims == b.ndims and (a.ndims is None or a.as_list() == b.as_list())


def _most_specific_common(a: TensorShape, b: TensorShape) -> TensorShape:
    if a.ndims is None or b.ndims is None or a.ndims != b.ndims:
        return unknown_shape()
    return TensorShape([x if x == y else None for x, y in zip(a.as_list(), b.as_list())])


def _generator_element(output_types, types, shapes, value) -> tuple:
    """A yielded value as a flat tuple of arrays of the declared dtypes and shapes."""
    from dflab.framework import errors

    flat = _st.flatten_up_to(output_types, value, "`generator` yielded an element")
    out = []
    for v, t, s in zip(flat, types, shapes):
        try:
            arr = np.asarray(v, dtype=object if t is _dt.string else t._np)
            if t is _dt.string:
                arr = np.vectorize(_as_bytes, otypes=[object])(arr) if arr.size else arr
        except (TypeError, ValueError):
            raise errors.InvalidArgumentError(
                None, None, f"TypeError: `generator` yielded an element that could not be "
                f"converted to the expected type. The expected type was {t.name}, but the "
                f"yielded element was {v!r}.") from None
        if not s.is_compatible_with(TensorShape(list(arr.shape))):
            raise errors.InvalidArgumentError(
                None, None, f"`generator` yielded an element of shape {tuple(arr.shape)} where "
                f"an element of shape {s} was expected.")
        out.append(arr)
    return tuple(out)


def _generator_arg(value):
    arr = np.asarray(value)
    if arr.dtype.kind in "USO":
        arr = np.vectorize(_as_bytes, otypes=[object])(arr) if arr.size else arr.astype(object)
    return arr[()] if arr.ndim == 0 else arr


def _as_bytes(x):
    return x if isinstance(x, bytes) else str(x).encode()


_st.register_dataset_class(Dataset)


class TextLineDataset(Dataset):
    """The lines of text files, without their line endings, as scalar strings."""

    def __init__(self, filenames, compression_type=None, buffer_size=None):
        with _ops.name_scope(None, "TextLineDataset"):
            files = _ops.convert_to_tensor(filenames, dtype=_dt.string, name="filenames")
            if files.shape.ndims not in (None, 0, 1):
                raise ValueError("filenames must be a scalar or a vector of strings")
            inputs = [files,
                      _ops.convert_to_tensor(compression_type or "", dtype=_dt.string,
                                             name="compression_type"),
                      _int64(buffer_size or 0, "buffer_size")]
            variant = _dso.dataset_op("TextLineDataset", inputs, {}, [_dt.string],
                                      [TensorShape([])])
        super().__init__(variant, _dt.string, [_dt.string], [TensorShape([])])


class TFRecordDataset(Dataset):
    """The records of TFRecord files as scalar strings (TF1's ``tf.data.TFRecordDataset``):
    ``compression_type`` ``""``/``"ZLIB"``/``"GZIP"``; with ``num_parallel_reads`` above one,
    that many files are read at once and their records interleaved one by one, in TF's
    order (reading itself stays sequential). ``buffer_size`` is accepted and unused."""

    def __init__(self, filenames, compression_type=None, buffer_size=None,
                 num_parallel_reads=None):
        cycle = 1 if num_parallel_reads is None else int(num_parallel_reads)
        if cycle == AUTOTUNE:
            cycle = 1
        if cycle < 1:
            raise ValueError(f"num_parallel_reads must be positive, got {num_parallel_reads}")
        with _ops.name_scope(None, "TFRecordDataset"):
            files = _ops.convert_to_tensor(filenames, dtype=_dt.string, name="filenames")
            if files.shape.ndims not in (None, 0, 1):
                raise TypeError("`filenames` must be a `tf.Tensor` of `tf.string` of rank 0 "
                                "or 1")
            inputs = [files,
                      _ops.convert_to_tensor(compression_type or "", dtype=_dt.string,
                                             name="compression_type"),
                      _int64(buffer_size or 0, "buffer_size")]
            variant = _dso.dataset_op("TFRecordDataset", inputs,
                                      {"num_parallel_reads": cycle}, [_dt.string],
                                      [TensorShape([])])
        super().__init__(variant, _dt.string, [_dt.string], [TensorShape([])])


class FixedLengthRecordDataset(Dataset):
    """The ``record_bytes``-long records of binary files, after ``header_bytes`` and before
    ``footer_bytes``, as scalar strings (TF1's ``tf.data.FixedLengthRecordDataset``);
    ``compression_type`` and ``num_parallel_reads`` as for ``TFRecordDataset``; ``buffer_size``
    is accepted and unused."""

    def __init__(self, filenames, record_bytes, header_bytes=None, footer_bytes=None,
                 buffer_size=None, compression_type=None, num_parallel_reads=None):
        cycle = 1 if num_parallel_reads in (None, AUTOTUNE) else int(num_parallel_reads)
        if cycle < 1:
            raise ValueError(f"num_parallel_reads must be positive, got {num_parallel_reads}")
        with _ops.name_scope(None, "FixedLengthRecordDataset"):
            files = _ops.convert_to_tensor(filenames, dtype=_dt.string, name="filenames")
            if files.shape.ndims not in (None, 0, 1):
                raise TypeError("`filenames` must be a `tf.Tensor` of `tf.string` of rank 0 "
                                "or 1")
            inputs = [files, _int64(header_bytes or 0, "header_bytes"),
                      _int64(record_bytes, "record_bytes"),
                      _int64(footer_bytes or 0, "footer_bytes"),
                      _int64(buffer_size or 0, "buffer_size"),
                      _ops.convert_to_tensor(compression_type or "", dtype=_dt.string,
                                             name="compression_type")]
            variant = _dso.dataset_op("FixedLengthRecordDatasetV2", inputs,
                                      {"num_parallel_reads": cycle}, [_dt.string],
                                      [TensorShape([])])
        super().__init__(variant, _dt.string, [_dt.string], [TensorShape([])])
