"""TensorFlow's Philox4x32-10 counter-based generator and its sample distributions, in NumPy.

TF's stateless random ops (``StatelessRandomUniform`` and the rest) are pure functions of a
seed pair: the seed is scrambled into a Philox key and counter (``seed_key_counter``, TF's
``GenerateKey``), and the outputs are TF's distributions (``random_distributions.h``) applied
to the generator's 32-bit words, block by block. Everything here follows TF's CPU kernels
word for word, so the same seed gives TF's numbers (uniform and integer samples bit for bit;
normal samples up to the last bit of the platform's ``log``/``sin``/``cos``).

Invariant: pure functions of their arguments; counters and keys are ``uint32`` arrays of 4 and 2
words, and every generated block is 4 words.
"""

from __future__ import annotations

import numpy as np

_M0, _M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_W0, _W1 = np.uint32(0x9E3779B9), np.uint32(0xBB67AE85)
_LO = np.uint64(0xFFFFFFFF)
_SHIFT = np.uint64(32)


def philox_blocks(key, counter, n_blocks: int, skip=None) -> np.ndarray:
    """``(n, 4)`` uint32 words: Philox4x32-10 of ``counter + i`` (128-bit), ``i`` in
    ``range(n_blocks)`` or, given ``skip``, the array ``skip`` itself (uint64 offsets)."""
    offs = (np.arange(n_blocks, dtype=np.uint64) if skip is None
            else np.asarray(skip, dtype=np.uint64))
    c = _add_counter(counter, offs)
    k0 = np.uint32(key[0])
    k1 = np.uint32(key[1])
    with np.errstate(over="ignore"):
        for r in range(10):
            p0 = _M0 * c[0].astype(np.uint64)
            p1 = _M1 * c[2].astype(np.uint64)
            c = [((p1 >> _SHIFT).astype(np.uint32) ^ c[1] ^ k0), (p1 & _LO).astype(np.uint32),
                 ((p0 >> _SHIFT).astype(np.uint32) ^ c[3] ^ k1), (p0 & _LO).astype(np.uint32)]
            if r < 9:
                k0, k1 = k0 + _W0, k1 + _W1
    return np.stack(c, axis=-1)


def _add_counter(counter, offs):
    """The four counter words of ``counter + offs`` (TF's ``PhiloxRandom::Skip``: the offset
    spans the low 64 bits, and its carry ripples into the high words)."""
    counter = [np.uint64(int(w) & 0xFFFFFFFF) for w in counter]
    low = counter[0] + (offs & _LO)
    c0 = low & _LO
    mid = counter[1] + (offs >> _SHIFT) + (low >> _SHIFT)
    c1 = mid & _LO
    high = counter[2] + (mid >> _SHIFT)
    c2 = high & _LO
    c3 = (counter[3] + (high >> _SHIFT)) & _LO
    return [w.astype(np.uint32) for w in (c0, c1, c2, c3)]


def seed_key_counter(seed0: int, seed1: int):
    """TF's ``GenerateKey``: the Philox key and counter of a stateless op's seed pair."""
    s0, s1 = int(seed0) & (2**64 - 1), int(seed1) & (2**64 - 1)
    counter = [s0 & 0xFFFFFFFF, s0 >> 32, s1 & 0xFFFFFFFF, s1 >> 32]
    mix = philox_blocks([0x3EC8F720, 0x02461E29], counter, 1)[0]
    return [int(mix[0]), int(mix[1])], [0, 0, int(mix[2]), int(mix[3])]


def words(key, counter, n_words: int) -> np.ndarray:
    """The first ``n_words`` 32-bit words of the stream (whole blocks drawn, the rest cut)."""
    return philox_blocks(key, counter, -(-n_words // 4)).reshape(-1)[:n_words]


# --- TF's conversions of words to floats ----------------------------------------------------------
def uint32_to_float(x) -> np.ndarray:
    """``[0, 1)``: 23 random mantissa bits under exponent 0 (TF's ``Uint32ToFloat``)."""
    bits = (np.asarray(x, np.uint32) & np.uint32(0x7FFFFF)) | np.uint32(0x3F800000)
    return bits.view(np.float32) - np.float32(1.0)


def uint64_to_double(x0, x1) -> np.ndarray:
    """``[0, 1)`` from 52 mantissa bits: 20 of ``x0`` above the 32 of ``x1``."""
    man = ((np.asarray(x0, np.uint64) & np.uint64(0xFFFFF)) << _SHIFT) | np.asarray(x1,
                                                                                     np.uint64)
    return (man | np.uint64(1023 << 52)).view(np.float64) - 1.0


def uint16_to_half(x) -> np.ndarray:
    bits = (np.asarray(x, np.uint32) & np.uint32(0x3FF)) | np.uint32(15 << 10)
    return bits.astype(np.uint16).view(np.float16) - np.float16(1.0)


def box_muller_float(x0, x1):
    """Two standard normal float32 arrays from word arrays (TF's ``BoxMullerFloat``)."""
    u1 = np.maximum(uint32_to_float(x0), np.float32(1.0e-7))
    # 2.0f * M_PI is a double: the angle is computed in double and rounded to float.
    v1 = (2.0 * np.pi * uint32_to_float(x1).astype(np.float64)).astype(np.float32)
    u2 = np.sqrt(np.float32(-2.0) * _f32(np.log, u1))
    return _f32(np.sin, v1) * u2, _f32(np.cos, v1) * u2


def _f32(fn, x):
    """``fn`` of float32 ``x`` rounded from double: the C library's correctly rounded float
    functions, which NumPy's vectorised float32 ones miss by an ulp now and then."""
    return fn(x.astype(np.float64)).astype(np.float32)


def box_muller_double(x0, x1, x2, x3):
    u1 = np.maximum(uint64_to_double(x0, x1), 1.0e-7)
    v1 = 2.0 * np.pi * uint64_to_double(x2, x3)
    u2 = np.sqrt(-2.0 * np.log(u1))
    return np.sin(v1) * u2, np.cos(v1) * u2


# --- distributions over the whole stream --------------------------------------------------------
def uniform(key, counter, size: int, dtype) -> np.ndarray:
    """TF's ``UniformDistribution`` of a float type: half and float take a word each, double
    two."""
    dtype = np.dtype(dtype)
    if dtype == np.float64:
        w = words(key, counter, 2 * size).reshape(-1, 2)
        return uint64_to_double(w[:, 0], w[:, 1])
    w = words(key, counter, size)
    return uint16_to_half(w) if dtype == np.float16 else uint32_to_float(w)


def normal(key, counter, size: int, dtype) -> np.ndarray:
    """TF's ``NormalDistribution``: Box-Muller pairs, a pair per two words (four for
    double); half is float's sample rounded."""
    dtype = np.dtype(dtype)
    if dtype == np.float64:
        w = words(key, counter, 2 * size + 2 * (size % 2)).reshape(-1, 4)
        pair = box_muller_double(w[:, 0], w[:, 1], w[:, 2], w[:, 3])
    else:
        w = words(key, counter, size + size % 2).reshape(-1, 2)
        pair = box_muller_float(w[:, 0], w[:, 1])
    return np.stack(pair, axis=-1).reshape(-1)[:size].astype(dtype)


# TF reserves 256 samples of the generator for each output group of a truncated normal, so that
# a group's values do not depend on how the work was split.
_RESERVED_PER_OUTPUT = 256


def truncated_normal(key, counter, size: int, dtype) -> np.ndarray:
    """TF's ``TruncatedNormalDistribution``: groups of 4 outputs (2 for double), each from a
    generator skipped to ``group * 256`` blocks (128 for double), keeping the Box-Muller
    samples with ``|x| < 2`` in order."""
    dtype = np.dtype(dtype)
    double = dtype == np.float64
    group = 2 if double else 4
    skip = group * _RESERVED_PER_OUTPUT // 4
    n_groups = -(-size // group)
    out = np.empty((n_groups, group), np.float64 if double else np.float32)
    blocks = 4  # words for 8 candidates (4 for double): enough for nearly every group
    starts = np.arange(n_groups, dtype=np.uint64) * np.uint64(skip)
    pending = np.arange(n_groups)
    while pending.size:
        offs = (starts[pending][:, None] + np.arange(blocks, dtype=np.uint64)).reshape(-1)
        w = philox_blocks(key, counter, 0, skip=offs).reshape(pending.size, -1)
        if double:
            q = w.reshape(pending.size, -1, 4)
            pair = box_muller_double(q[..., 0], q[..., 1], q[..., 2], q[..., 3])
        else:
            q = w.reshape(pending.size, -1, 2)
            pair = box_muller_float(q[..., 0], q[..., 1])
        cand = np.stack(pair, axis=-1).reshape(pending.size, -1)
        ok = np.abs(cand) < 2.0
        done = ok.sum(axis=1) >= group
        for row in np.nonzero(done)[0]:
            out[pending[row]] = cand[row][ok[row]][:group]
        pending = pending[~done]
        blocks *= 4  # the rare group that needs more candidates draws again, from its start
    return out.reshape(-1)[:size].astype(dtype)


def uniform_int(key, counter, size: int, lo: int, hi: int, dtype) -> np.ndarray:
    """TF's ``UniformDistribution`` of an integer type: ``lo + bits % (hi - lo)``, a word per
    int32 and two (low word first) per int64."""
    dtype = np.dtype(dtype)
    bits = _int_bits(key, counter, size, dtype)
    rng = np.uint64((hi - lo) & (2**64 - 1))
    return (np.uint64(lo & (2**64 - 1)) + bits % rng).astype(dtype) if rng else (
        np.full(size, lo, dtype))


def uniform_full_int(key, counter, size: int, dtype) -> np.ndarray:
    """Every bit random (TF's ``UniformFullIntDistribution``)."""
    dtype = np.dtype(dtype)
    unsigned = np.uint32 if dtype.itemsize == 4 else np.uint64
    return _int_bits(key, counter, size, dtype).astype(unsigned).view(dtype)


def _int_bits(key, counter, size, dtype):
    if np.dtype(dtype).itemsize == 8:
        w = words(key, counter, 2 * size).reshape(-1, 2).astype(np.uint64)
        return w[:, 0] | (w[:, 1] << _SHIFT)
    return words(key, counter, size).astype(np.uint64)


def multinomial(key, counter, logits: np.ndarray, num_samples: int, dtype) -> np.ndarray:
    """TF's ``MultinomialFunctor`` on the CPU, run as one shard: per row, the CDF of
    ``exp(logits - max)`` over the finite logits, summed in double in order, and for each
    sample the first class whose CDF exceeds ``RandDouble() * total`` (two words a sample,
    the rows one after another)."""
    batch, classes = logits.shape
    finite = np.isfinite(logits)
    with np.errstate(invalid="ignore", over="ignore"):
        top = np.where(finite, logits, -np.inf).max(axis=1, initial=np.finfo(
            logits.dtype).min)
        p = np.exp(logits.astype(np.float64) - top.astype(np.float64)[:, None])
    cdf = np.cumsum(np.where(finite, p, 0.0), axis=1)
    w = words(key, counter, 2 * batch * num_samples).reshape(batch, num_samples, 2)
    u = uint64_to_double(w[..., 0], w[..., 1]) * cdf[:, -1:]
    out = np.empty((batch, num_samples), dtype)
    for b in range(batch):
        out[b] = np.searchsorted(cdf[b], u[b], side="right")
    return out


def skip_counter(counter, n_blocks: int) -> list[int]:
    """``counter`` advanced by ``n_blocks`` (TF's ``PhiloxRandom::Skip``)."""
    return [int(w[0]) for w in _add_counter(counter, np.array([n_blocks], np.uint64))]


def stateful_key_counter(seed: int, seed2: int):
    """The key and counter of TF's seeded stateful ``PhiloxRandom(seed, seed2)`` (TF's
    ``GuardedPhiloxRandom`` of a stateful op): ``seed`` is the key, ``seed2`` the high half of
    the counter."""
    s, s2 = int(seed) & (2**64 - 1), int(seed2) & (2**64 - 1)
    return [s & 0xFFFFFFFF, s >> 32], [0, 0, s2 & 0xFFFFFFFF, s2 >> 32]


class WordStream:
    """TF's ``SimplePhilox`` over a block of reserved words: ``next()`` is ``Rand32``."""

    def __init__(self, key, counter, n_words: int):
        self._words = words(key, counter, n_words)
        self._at = 0

    def next(self) -> int:
        w = int(self._words[self._at])
        self._at += 1
        return w

    def rand_float(self) -> np.float32:
        return uint32_to_float(np.uint32(self.next()))[()]

    def uniform(self, n: int) -> int:
        """A number in ``[0, n)`` (``Rand32() % n``)."""
        return self.next() % n if n else self.next() * 0
