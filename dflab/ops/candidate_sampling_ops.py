"""Candidate sampling: the samplers (``tf.random.*_candidate_sampler``, also under ``tf.nn``)
and ``compute_accidental_hits``, the ops under sampled losses such as ``nce_loss``.

Each sampler op draws ``num_sampled`` class ids from its distribution over ``[0, range_max)``
and gives, as TF's, the expected count of every sampled id and every true class: ``p *
num_sampled`` when ids are drawn with replacement (or when a unique draw needed no retry),
else ``-expm1(num_tries * log1p(-p))``, ``num_tries`` being how many draws a unique sample of
``num_sampled`` ids took. The samplers are stateful random ops (seeded as TF's, a generator
per op and session); the learned-unigram sampler also counts, across runs, the true classes
it has seen. Nothing here is differentiable. Kernels: ``dflab.kernels.candidate_sampling_kernels``.
"""

from __future__ import annotations

import collections

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.random_seed import get_seed
from dflab.framework.registry import NotDifferentiable, register_op
from dflab.framework.tensor_shape import TensorShape

_SAMPLERS = ("UniformCandidateSampler", "LogUniformCandidateSampler",
             "LearnedUnigramCandidateSampler", "FixedUnigramCandidateSampler",
             "AllCandidateSampler")


# Each sampler's outputs, as the named tuple TF's op wrappers return.
_OUTPUTS = {t: collections.namedtuple(t, ["sampled_candidates", "true_expected_count",
                                          "sampled_expected_count"]) for t in _SAMPLERS}
_HITS = collections.namedtuple("ComputeAccidentalHits", ["indices", "ids", "weights"])


def _sampler_infer(op):
    true_classes = op.inputs[0]
    if true_classes.dtype.base_dtype is not _dt.int64:
        raise TypeError(f"true_classes of '{op.type}' must be int64, got "
                        f"{true_classes.dtype.base_dtype.name}")
    num_true, num_sampled = op.get_attr("num_true"), op.get_attr("num_sampled")
    shape = true_classes.shape.with_rank(2)
    if shape[1].value is not None and shape[1].value != num_true:
        raise ValueError(f"true_classes must have num_true = {num_true} columns, got "
                         f"{shape[1].value}")
    return [(_dt.int64, TensorShape([num_sampled])),
            (_dt.float32, TensorShape([shape[0].value, num_true])),
            (_dt.float32, TensorShape([num_sampled]))]


for _t in _SAMPLERS:
    register_op(_t, _sampler_infer)
    NotDifferentiable(_t)


def _check_sizes(num_sampled, range_max, unique):
    if num_sampled < 1:
        raise ValueError(f"num_sampled must be at least 1, got {num_sampled}")
    if unique and num_sampled > range_max:
        raise ValueError(f"Sampler's range is too small: num_sampled {num_sampled} > "
                         f"range_max {range_max} with unique=True")


def _sample(op_type, true_classes, num_true, num_sampled, unique, range_max, seed, name,
            **attrs):
    true_classes = _ops.convert_to_tensor(true_classes, dtype=_dt.int64)
    seed1, seed2 = get_seed(seed)
    all_attrs = {"num_true": int(num_true), "num_sampled": int(num_sampled),
                 "unique": bool(unique), "seed": seed1 or 0, "seed2": seed2 or 0, **attrs}
    if range_max is not None:
        all_attrs["range_max"] = int(range_max)
    return _OUTPUTS[op_type](*_ops.apply_op(op_type, [true_classes], all_attrs, name).outputs)


def uniform_candidate_sampler(true_classes, num_true, num_sampled, unique, range_max,
                              seed=None, name=None):
    """Samples classes uniformly from ``[0, range_max)``.

    Returns ``(sampled_candidates, true_expected_count, sampled_expected_count)``."""
    _check_sizes(num_sampled, range_max, unique)
    return _sample("UniformCandidateSampler", true_classes, num_true, num_sampled, unique,
                   range_max, seed, name)


def log_uniform_candidate_sampler(true_classes, num_true, num_sampled, unique, range_max,
                                  seed=None, name=None):
    """Samples class ``c`` with probability ``log((c + 2) / (c + 1)) / log(range_max + 1)``
    (Zipf-like: low ids, e.g. frequent words, more often)."""
    _check_sizes(num_sampled, range_max, unique)
    return _sample("LogUniformCandidateSampler", true_classes, num_true, num_sampled, unique,
                   range_max, seed, name)


def learned_unigram_candidate_sampler(true_classes, num_true, num_sampled, unique,
                                      range_max, seed=None, name=None):
    """Samples from the unigram distribution of the true classes seen so far (each class
    starts with a count of one; the counts grow with every run, after it samples)."""
    _check_sizes(num_sampled, range_max, unique)
    return _sample("LearnedUnigramCandidateSampler", true_classes, num_true, num_sampled,
                   unique, range_max, seed, name)


def fixed_unigram_candidate_sampler(true_classes, num_true, num_sampled, unique, range_max,
                                    vocab_file="", distortion=1.0, num_reserved_ids=0,
                                    num_shards=1, shard=0, unigrams=(), seed=None,
                                    name=None):
    """Samples from a fixed unigram distribution: counts from ``unigrams`` or from the last
    comma-separated column of each line of ``vocab_file``, raised to ``distortion``;
    ``num_reserved_ids`` ids of weight 0 come first, and with ``num_shards`` > 1 only the ids
    ``i`` with ``i % num_shards == shard`` are drawn."""
    _check_sizes(num_sampled, range_max, unique)
    if bool(vocab_file) == bool(len(unigrams)):
        raise ValueError("fixed_unigram_candidate_sampler needs exactly one of vocab_file "
                         "and unigrams")
    if not 0 <= shard < num_shards:
        raise ValueError(f"shard {shard} is not in [0, num_shards={num_shards})")
    return _sample("FixedUnigramCandidateSampler", true_classes, num_true, num_sampled,
                   unique, range_max, seed, name, vocab_file=str(vocab_file),
                   distortion=float(distortion), num_reserved_ids=int(num_reserved_ids),
                   num_shards=int(num_shards), shard=int(shard),
                   unigrams=[float(u) for u in unigrams])


def all_candidate_sampler(true_classes, num_true, num_sampled, unique, seed=None, name=None):
    """"Samples" every class ``0 .. num_sampled - 1``, each with an expected count of 1."""
    return _sample("AllCandidateSampler", true_classes, num_true, num_sampled, unique, None,
                   seed, name)


def _accidental_hits_infer(op):
    true_classes, sampled = op.inputs
    if true_classes.dtype.base_dtype is not _dt.int64 or \
            sampled.dtype.base_dtype is not _dt.int64:
        raise TypeError("compute_accidental_hits takes int64 true classes and candidates")
    true_classes.shape.with_rank(2)
    sampled.shape.with_rank(1)
    return [(_dt.int32, TensorShape([None])), (_dt.int64, TensorShape([None])),
            (_dt.float32, TensorShape([None]))]


register_op("ComputeAccidentalHits", _accidental_hits_infer)
NotDifferentiable("ComputeAccidentalHits")


def compute_accidental_hits(true_classes, sampled_candidates, num_true, seed=None, name=None):
    """Where a sampled candidate is one of its row's true classes: ``(indices, ids,
    weights)``, the row, the candidate's (last) position among the samples, and ``-FLT_MAX``
    to add to that sampled logit so the true class is not counted as a negative."""
    true_classes = _ops.convert_to_tensor(true_classes, dtype=_dt.int64)
    sampled = _ops.convert_to_tensor(sampled_candidates, dtype=_dt.int64)
    seed1, seed2 = get_seed(seed)
    return _HITS(*_ops.apply_op("ComputeAccidentalHits", [true_classes, sampled],
                                {"num_true": int(num_true), "seed": seed1 or 0,
                                 "seed2": seed2 or 0}, name).outputs)


__all__: list[str] = []  # reached as tf.nn.* and tf.random.* (see dflab.namespaces)
