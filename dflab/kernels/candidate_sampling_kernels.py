"""Kernels of the candidate samplers and ``ComputeAccidentalHits`` (host only, as TF's).

A sampler is a distribution over ``[0, range)`` (``probability(ids)``, ``draw(gen, n)``) and
the batch rule shared by all of them: draw with replacement, or draw until ``num_sampled``
distinct ids are in hand counting the tries; then the expected counts (see
``dflab.ops.candidate_sampling_ops``). Each op keeps its generator (Philox keyed by its seeds,
as the random ops) and, for the learned unigram sampler, its class counts in the device's
resource manager under the op's name, so they last as long as the session.
"""

from __future__ import annotations

import numpy as np

from dflab.framework import errors
from dflab.kernels.context import host
from dflab.kernels.random_kernels import op_generator
from dflab.kernels.registry import kernel

_FLT_MAX = np.finfo(np.float32).max


class _Uniform:
    def __init__(self, range_max):
        self.range = range_max

    def probability(self, ids):
        return np.full(np.shape(ids), 1.0 / self.range)

    def draw(self, gen, n):
        return gen.integers(0, self.range, size=n)


class _LogUniform:
    """P(c) = log((c + 2) / (c + 1)) / log(range + 1); drawn as floor(exp(u log(range + 1)))
    - 1, folded into the range."""

    def __init__(self, range_max):
        self.range = range_max
        self.log_range = np.log(range_max + 1.0)

    def probability(self, ids):
        ids = np.asarray(ids, dtype=np.float64)
        return (np.log(ids + 2.0) - np.log(ids + 1.0)) / self.log_range

    def draw(self, gen, n):
        values = np.exp(gen.random(n) * self.log_range).astype(np.int64) - 1
        return values % self.range


class _Weighted:
    """Ids drawn in proportion to weights (the unigram samplers)."""

    def __init__(self, weights):
        self.weights = np.asarray(weights, dtype=np.float64)
        self.range = len(self.weights)

    def probability(self, ids):
        return self.weights[np.asarray(ids)] / self.weights.sum()

    def draw(self, gen, n):
        cdf = np.cumsum(self.weights)
        picks = np.searchsorted(cdf, gen.random(n) * cdf[-1], side="right")
        return np.minimum(picks, self.range - 1)

    def update(self, ids):
        np.add.at(self.weights, np.asarray(ids).ravel(), 1.0)


def _expected(p, num_sampled, num_tries):
    if num_tries == num_sampled:
        return p * num_sampled
    return -np.expm1(num_tries * np.log1p(-p))


def _sample_batch(sampler, gen, num_sampled, unique):
    """(ids, num_tries): ``num_sampled`` ids, distinct when ``unique``."""
    if not unique:
        return sampler.draw(gen, num_sampled), num_sampled
    picked: dict[int, None] = {}
    tries = 0
    while len(picked) < num_sampled:
        # Draw in small rounds and take them in order, counting each draw as a try.
        for v in sampler.draw(gen, max(num_sampled - len(picked), 1)):
            tries += 1
            picked.setdefault(int(v), None)
            if len(picked) == num_sampled:
                break
    return np.fromiter(picked, dtype=np.int64, count=num_sampled), tries


def _sampler_kernel(node, ctx, sampler, learns=False):
    gen = op_generator(node, ctx)
    num_true, num_sampled = node.attr["num_true"], node.attr["num_sampled"]
    unique = node.attr["unique"]

    def run(true_classes):
        true = host(true_classes, np.int64)
        if true.ndim != 2 or true.shape[1] != num_true:
            raise errors.InvalidArgumentError(
                None, node, f"true_classes must be a matrix with num_true = {num_true} "
                f"columns, got shape {list(true.shape)}")
        bad = true[(true < 0) | (true >= sampler.range)]
        if bad.size:
            raise errors.InvalidArgumentError(
                None, node, f"`true_candidate` out of range [0, {sampler.range}), received "
                f"{int(bad[0])}")
        sampled, tries = _sample_batch(sampler, gen, num_sampled, unique)
        sampled_expected = _expected(sampler.probability(sampled), num_sampled, tries)
        true_expected = _expected(sampler.probability(true), num_sampled, tries)
        if learns:
            sampler.update(true)
        return (sampled.astype(np.int64), true_expected.astype(np.float32),
                sampled_expected.astype(np.float32))

    return run


@kernel("UniformCandidateSampler", host_only=True)
def _uniform(node, ctx):
    return _sampler_kernel(node, ctx, _Uniform(node.attr["range_max"]))


@kernel("LogUniformCandidateSampler", host_only=True)
def _log_uniform(node, ctx):
    return _sampler_kernel(node, ctx, _LogUniform(node.attr["range_max"]))


@kernel("LearnedUnigramCandidateSampler", host_only=True)
def _learned_unigram(node, ctx):
    seed, seed2 = node.attr.get("seed", 0), node.attr.get("seed2", 0)
    range_max = node.attr["range_max"]
    sampler = ctx.resources.lookup_or_create(
        "unigram_counts", f"{node.name}:{seed}:{seed2}", lambda: _Weighted(np.ones(range_max)))
    return _sampler_kernel(node, ctx, sampler, learns=True)


def _unigram_weights(node) -> list[float]:
    counts = list(node.attr["unigrams"])
    if not counts:
        with open(node.attr["vocab_file"], encoding="utf-8") as f:
            counts = [float(line.rstrip("\n").split(",")[-1]) for line in f if line.strip()]
    shards, shard = node.attr["num_shards"], node.attr["shard"]
    distortion = node.attr["distortion"]
    weights = []
    word_id = 0
    for _ in range(node.attr["num_reserved_ids"]):
        if word_id % shards == shard:
            weights.append(0.0)
        word_id += 1
    for count in counts:
        if word_id % shards == shard:
            weights.append(float(count) ** distortion)
        word_id += 1
    return weights


@kernel("FixedUnigramCandidateSampler", host_only=True)
def _fixed_unigram(node, ctx):
    weights = _unigram_weights(node)
    if len(weights) != node.attr["range_max"]:
        raise errors.InvalidArgumentError(
            None, node, f"range is {node.attr['range_max']} but the unigram distribution has "
            f"{len(weights)} ids (reserved ids and this shard's ids counted)")
    return _sampler_kernel(node, ctx, _Weighted(weights))


class _All:
    def __init__(self, n):
        self.range = n

    def probability(self, ids):
        return np.ones(np.shape(ids))


@kernel("AllCandidateSampler", host_only=True)
def _all(node, ctx):
    n = node.attr["num_sampled"]
    sampler = _All(n)

    def run(true_classes):
        true = host(true_classes, np.int64)
        bad = true[(true < 0) | (true >= n)]
        if bad.size:
            raise errors.InvalidArgumentError(
                None, node, f"`true_candidate` out of range [0, {n}), received {int(bad[0])}")
        return (np.arange(n, dtype=np.int64),
                sampler.probability(true).astype(np.float32), np.ones(n, np.float32))

    return run


@kernel("ComputeAccidentalHits", host_only=True)
def _accidental_hits(node, ctx):
    num_true = node.attr["num_true"]

    def run(true_classes, sampled):
        true = host(true_classes, np.int64)
        if true.ndim != 2 or true.shape[1] != num_true:
            raise errors.InvalidArgumentError(
                None, node, f"true_classes must be a matrix with num_true = {num_true} "
                f"columns, got shape {list(true.shape)}")
        position = {int(v): j for j, v in enumerate(host(sampled, np.int64))}  # last wins
        rows, ids = [], []
        for i, row in enumerate(true):
            for v in row:
                j = position.get(int(v))
                if j is not None:
                    rows.append(i)
                    ids.append(j)
        return (np.array(rows, np.int32), np.array(ids, np.int64),
                np.full(len(rows), -_FLT_MAX, np.float32))

    return run
