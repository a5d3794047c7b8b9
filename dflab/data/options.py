"""``tf.data.Options`` and ``tf.data.ThreadingOptions``: typed, validated options attached to a
dataset with ``Dataset.with_options`` and read back with ``Dataset.options()``, as TF's.

dflab's input pipelines produce elements one at a time, in order, on the thread that asks for
them: they are always deterministic and use no thread pool, autotuning or graph rewrites. The
options are therefore checked (an unknown name is ``AttributeError``, a value of the wrong type
``TypeError``, as in TF), merged and kept, but none changes which elements a dataset yields.
Offered: ``deterministic`` (and ``experimental_deterministic``), ``threading`` (and
``experimental_threading``), ``autotune``, ``experimental_optimization``,
``experimental_slack``, ``dataset_name``.
"""

from __future__ import annotations


def _option(name: str, ty, doc: str, default_factory=lambda: None) -> property:
    def get(self):
        if name not in self._options:
            self._options[name] = default_factory()
        return self._options[name]

    def set_(self, value):
        if not isinstance(value, ty):
            raise TypeError(f'Property "{name}" must be of type {ty}, got: {value} (type: '
                            f"{type(value)})")
        self._options[name] = value

    return property(get, set_, None, doc)


def _alias(name: str, doc: str) -> property:
    return property(lambda self: getattr(self, name),
                    lambda self, value: setattr(self, name, value), None, doc)


class _OptionsBase:
    """Options as typed properties; setting anything else is an error."""

    def __init__(self):
        object.__setattr__(self, "_options", {})

    def __setattr__(self, name, value):
        if not isinstance(getattr(type(self), name, None), property):
            raise AttributeError(f"Cannot set the property {name} on {type(self).__name__}.")
        object.__setattr__(self, name, value)

    def __eq__(self, other):
        if type(self) is not type(other):
            return NotImplemented
        names = set(self._options) | set(other._options)
        return all(getattr(self, n) == getattr(other, n) for n in names)

    __hash__ = None

    def __repr__(self):
        set_ = ", ".join(f"{k}={v!r}" for k, v in sorted(self._options.items())
                         if v is not None)
        return f"{type(self).__name__}({set_})"


def _merge(options_list):
    """Later options win where set; nested options merge field by field."""
    result = type(options_list[0])()
    for options in options_list:
        for name, value in options._options.items():
            if isinstance(value, _OptionsBase):
                setattr(result, name, _merge([getattr(result, name), value]))
            elif value is not None:
                setattr(result, name, value)
    return result


class ThreadingOptions(_OptionsBase):
    """Thread pools of a dataset's pipeline (dflab's run on the caller's thread)."""

    max_intra_op_parallelism = _option(
        "max_intra_op_parallelism", int,
        "If set, the maximum intra-op parallelism within a dataset's ops.")
    private_threadpool_size = _option(
        "private_threadpool_size", int,
        "If set, a private threadpool of this size serves the dataset.")


class AutotuneOptions(_OptionsBase):
    """Autotuning of parallelism and buffer sizes (dflab's pipelines have none to tune)."""

    enabled = _option("enabled", bool, "Whether to autotune.")
    cpu_budget = _option("cpu_budget", int, "CPU cores autotuning may use.")
    ram_budget = _option("ram_budget", int, "Bytes of memory autotuning may use.")


class OptimizationOptions(_OptionsBase):
    """Static rewrites of a dataset's graph (dflab applies none)."""

    apply_default_optimizations = _option("apply_default_optimizations", bool,
                                          "Whether to apply the default rewrites.")
    filter_fusion = _option("filter_fusion", bool, "Fuse filter transformations.")
    map_and_batch_fusion = _option("map_and_batch_fusion", bool, "Fuse map and batch.")
    map_and_filter_fusion = _option("map_and_filter_fusion", bool, "Fuse map and filter.")
    map_fusion = _option("map_fusion", bool, "Fuse map transformations.")
    map_parallelization = _option("map_parallelization", bool, "Parallelize maps.")
    noop_elimination = _option("noop_elimination", bool, "Remove no-op transformations.")
    parallel_batch = _option("parallel_batch", bool, "Batch in parallel.")
    shuffle_and_repeat_fusion = _option("shuffle_and_repeat_fusion", bool,
                                        "Fuse shuffle and repeat.")


class Options(_OptionsBase):
    """The options of a dataset (see the module docstring)."""

    deterministic = _option("deterministic", bool,
                            "Whether elements must come in a deterministic order.")
    experimental_deterministic = _alias("deterministic", "An alias of ``deterministic``.")
    threading = _option("threading", ThreadingOptions, "The threading options.",
                        ThreadingOptions)
    experimental_threading = _alias("threading", "An alias of ``threading``.")
    autotune = _option("autotune", AutotuneOptions, "The autotuning options.", AutotuneOptions)
    experimental_optimization = _option("experimental_optimization", OptimizationOptions,
                                        "The optimization options.", OptimizationOptions)
    experimental_slack = _option("experimental_slack", bool,
                                 "Whether to introduce slack in the last prefetch.")
    dataset_name = _option("dataset_name", str, "A name for the dataset.")

    def merge(self, options: Options) -> Options:
        """These options with ``options`` merged in (``options`` wins where both are set)."""
        return _merge([self, options])
