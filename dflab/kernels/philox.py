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
    blocks = 3  # 6 candidates (3 for double): enough for all but about 0.3% of the groups
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
        # Each finished group keeps its first `group` accepted candidates, in order.
        keep = ok & (np.cumsum(ok, axis=1) <= group)
        out[pending[done]] = cand[done][keep[done]].reshape(-1, group)
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


class _BlockReader:
    """One output's generator, skipped to its reserved region: double normal and uniform
    pairs a block each, handed out last first as TF's ``*_remaining`` counters do."""

    def __init__(self, key, counter, first: np.ndarray, start: int):
        self._key, self._counter, self._start = key, counter, start
        self._blocks, self._used = first, 0
        self._normals: list = []
        self._uniforms: list = []

    def _block(self):
        if self._used == len(self._blocks):
            more = philox_blocks(self._key, self._counter, 0,
                                 skip=self._start + self._used + np.arange(4, dtype=np.uint64))
            self._blocks = np.concatenate([self._blocks, more])
        b = self._blocks[self._used]
        self._used += 1
        return b

    def normal(self) -> float:
        if not self._normals:
            b = self._block()
            self._normals = [float(v) for v in box_muller_double(*(np.uint64(w) for w in b))]
        return self._normals.pop()

    def uniform(self) -> float:
        if not self._uniforms:
            b = self._block()
            self._uniforms = [float(uint64_to_double(b[0], b[1])),
                              float(uint64_to_double(b[2], b[3]))]
        return self._uniforms.pop()


def _readers(key, counter, n_outputs: int, blocks: int = 3):
    """A ``_BlockReader`` per output, each at ``output * 256`` blocks (TF reserves 256 blocks
    per output of its gamma and Poisson samplers), their first blocks drawn at once."""
    starts = np.arange(n_outputs, dtype=np.uint64) * np.uint64(_RESERVED_PER_OUTPUT)
    offs = (starts[:, None] + np.arange(blocks, dtype=np.uint64)).reshape(-1)
    first = philox_blocks(key, counter, 0, skip=offs).reshape(n_outputs, blocks, 4)
    return [_BlockReader(key, counter, first[i], int(starts[i])) for i in range(n_outputs)]


def gamma(key, counter, alpha: np.ndarray, samples_per_alpha: int, dtype) -> np.ndarray:
    """TF's ``RandomGammaFunctor`` (Marsaglia and Tsang's method; alpha 1 is exponential,
    alpha below 1 is boosted by one and scaled by ``u ** (1 / alpha)``), in double: returns
    ``[samples_per_alpha, num_alphas]``."""
    alphas = np.asarray(alpha, np.float64).reshape(-1)
    out = np.empty((samples_per_alpha, alphas.size), np.float64)
    readers = _readers(key, counter, alphas.size * samples_per_alpha)
    for a_idx, a in enumerate(alphas):
        small = a < 1
        d = a + (2.0 / 3 if small else -1.0 / 3)
        c = 1.0 / 3 / np.sqrt(d)
        for s_idx in range(samples_per_alpha):
            r = readers[a_idx * samples_per_alpha + s_idx]
            if a == 1.0:
                out[s_idx, a_idx] = -np.log1p(-r.uniform())
                continue
            out[s_idx, a_idx] = _marsaglia_tsang(r, a, d, c, small)
    return out.astype(dtype)


def _marsaglia_tsang(r, alpha, d, c, small):
    while True:
        x = r.normal()
        v = 1 + c * x
        if v <= 0:
            continue
        v = v * v * v
        u = r.uniform()
        if u < 1 - 0.0331 * (x * x) * (x * x) or np.log(u) < 0.5 * x * x + d * (
                1 - v + np.log(v)):
            res = d * v
            if small:
                res *= r.uniform() ** (1 / alpha)
            return res


def poisson(key, counter, rate: np.ndarray, samples_per_rate: int, dtype) -> np.ndarray:
    """TF's ``PoissonFunctor`` in double: Knuth's product of uniforms for rates below 10,
    Hormann's transformed rejection above; returns ``[samples_per_rate, num_rates]``."""
    import math

    rates = np.asarray(rate, np.float64).reshape(-1)
    out = np.empty((samples_per_rate, rates.size), np.float64)
    readers = _readers(key, counter, rates.size * samples_per_rate)
    top = float(np.finfo(dtype).max) if np.dtype(dtype).kind == "f" else float(
        np.iinfo(dtype).max)
    for r_idx, lam in enumerate(rates):
        cells = [readers[r_idx * samples_per_rate + s] for s in range(samples_per_rate)]
        if lam < 10:
            limit = math.exp(-lam)
            for s_idx, r in enumerate(cells):
                prod, x = 1.0, 0.0
                while True:
                    prod *= r.uniform()
                    if prod <= limit and x <= top:
                        break
                    x += 1
                out[s_idx, r_idx] = x
            continue
        if math.isinf(lam):
            out[:, r_idx] = np.inf
            continue
        log_rate = math.log(lam)
        b = 0.931 + 2.53 * math.sqrt(lam)
        a = -0.059 + 0.02483 * b
        inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
        for s_idx, r in enumerate(cells):
            out[s_idx, r_idx] = _hormann(r, lam, log_rate, a, b, inv_alpha)
    return out.astype(dtype)


def _hormann(r, lam, log_rate, a, b, inv_alpha):
    import math

    while True:
        u = r.uniform() - 0.5
        v = r.uniform()
        u_shifted = 0.5 - abs(u)
        k = math.floor((2 * a / u_shifted + b) * u + lam + 0.43)
        if k < 0:
            continue
        if u_shifted >= 0.07 and v <= 0.9277 - 3.6224 / (b - 2):
            return k
        if u_shifted < 0.013 and v > u_shifted:
            continue
        s = math.log(v * inv_alpha / (a / (u_shifted * u_shifted) + b))
        t = -lam + k * log_rate - math.lgamma(k + 1)
        if s <= t:
            return k


_STIRLING_TAIL = (0.0810614667953272, 0.0413406959554092, 0.0276779256849983,
                  0.02079067210376509, 0.0166446911898211, 0.0138761288230707,
                  0.0118967099458917, 0.0104112652619720, 0.00925546218271273,
                  0.00833056343336287)


def _stirling_tail(k: float) -> float:
    if k <= 9:
        return _STIRLING_TAIL[int(k)]
    kp1sq = (k + 1) * (k + 1)
    return (1.0 / 12 - (1.0 / 360 - 1.0 / 1260 / kp1sq) / kp1sq) / (k + 1)


def _binomial_inversion(r, count, prob):
    import math

    geom_sum, num_geom = 0.0, 0
    while True:
        geom_sum += math.ceil(math.log(r.uniform()) / math.log1p(-prob))
        if geom_sum > count:
            return num_geom
        num_geom += 1


def _btrs(r, count, prob):
    """Hormann's BTRS, as TF writes it."""
    import math

    stddev = math.sqrt(count * prob * (1 - prob))
    b = 1.15 + 2.53 * stddev
    a = -0.0873 + 0.0248 * b + 0.01 * prob
    c = count * prob + 0.5
    v_r = 0.92 - 4.2 / b
    ratio = prob / (1 - prob)
    alpha = (2.83 + 5.1 / b) * stddev
    m = math.floor((count + 1) * prob)
    while True:
        u = r.uniform()
        v = r.uniform()
        u = u - 0.5
        us = 0.5 - abs(u)
        k = math.floor((2 * a / us + b) * u + c)
        if us >= 0.07 and v <= v_r:
            return k
        if k < 0 or k > count:
            continue
        v = math.log(v * alpha / (a / (us * us) + b))
        bound = ((m + 0.5) * math.log((m + 1) / (ratio * (count - m + 1)))
                 + (count + 1) * math.log((count - m + 1) / (count - k + 1))
                 + (k + 0.5) * math.log(ratio * (count - k + 1) / (k + 1))
                 + _stirling_tail(m) + _stirling_tail(count - m) - _stirling_tail(k)
                 - _stirling_tail(count - k))
        if v <= bound:
            return k


def binomial(key, counter, counts: np.ndarray, probs: np.ndarray, samples_per_batch: int,
             dtype) -> np.ndarray:
    """TF's ``RandomBinomialFunctor``: inversion (42 blocks reserved per output) where the
    mean is below 10, BTRS (256 blocks) above, on ``min(p, 1 - p)``; ``counts`` and ``probs``
    are the broadcast batch (same shape); returns ``[samples_per_batch, num_batches]``."""
    counts, probs = np.ravel(counts), np.ravel(probs)
    n_batches = counts.size
    out = np.empty((samples_per_batch, n_batches), np.float64)
    for b_idx in range(n_batches):
        count, prob = counts[b_idx], probs[b_idx]
        dcount = float(count)
        if dcount <= 0 or prob <= 0:
            out[:, b_idx] = 0
            continue
        if prob >= 1:
            out[:, b_idx] = dcount
            continue
        if np.isnan(prob):
            out[:, b_idx] = np.nan
            continue
        flip = prob > 0.5
        p = (prob.dtype.type(1) - prob) if flip else prob
        big = count * p >= 10
        reserve = 256 if big else 42
        idx = b_idx * samples_per_batch + np.arange(samples_per_batch, dtype=np.uint64)
        starts = idx * np.uint64(reserve)
        offs = (starts[:, None] + np.arange(2, dtype=np.uint64)).reshape(-1)
        first = philox_blocks(key, counter, 0, skip=offs).reshape(samples_per_batch, 2, 4)
        for s_idx in range(samples_per_batch):
            r = _BlockReader(key, counter, first[s_idx], int(starts[s_idx]))
            k = _btrs(r, dcount, float(p)) if big else _binomial_inversion(r, dcount,
                                                                           float(p))
            out[s_idx, b_idx] = dcount - k if flip else k
    return out.astype(dtype)


def _block_stream(key, counter, chunk: int = 64):
    """The stream's blocks one after another, drawn ``chunk`` at a time."""
    start = 0
    while True:
        yield from philox_blocks(key, counter, 0,
                                 skip=np.arange(start, start + chunk, dtype=np.uint64))
        start += chunk


_MAX_ITERATIONS = 1000  # TF accepts a uniform or exponential proposal after this many misses


def parameterized_truncated_normal(key, counter, means, stddevs, minvals, maxvals,
                                   samples_per_batch: int, dtype) -> np.ndarray:
    """TF's ``TruncatedNormalFunctorV2`` run as one shard (TF splits a big output among its
    threads, each from its own offset, so its numbers for a big output depend on its thread
    count): per batch element, normal rejection when a bound is far out, uniform proposals
    for a narrow interval, Robert's exponential proposals otherwise (an interval below the
    mean is flipped above it). Invalid parameters (``stddev <= 0``, ``min >= max``, both
    bounds infinite) raise ``ValueError``. ``means`` … ``maxvals``
    are the broadcast batch (same shape); returns ``[samples_per_batch, num_batches]``."""
    dt = np.dtype(dtype)
    t = dt.type
    double = dt == np.float64
    blocks = _block_stream(key, counter)

    def uniforms():
        b = next(blocks)
        if double:
            return [uint64_to_double(b[0], b[1]), uint64_to_double(b[2], b[3])]
        return list(uint32_to_float(b).astype(dt))

    def normals():
        b = next(blocks)
        if double:
            return list(box_muller_double(*(np.uint64(w) for w in b)))
        f0, f1 = box_muller_float(b[[0, 2]], b[[1, 3]])
        return [t(f0[0]), t(f1[0]), t(f0[1]), t(f1[1])]

    def fn(f, x):  # the C library's function of a float, as TF calls it
        return t(f(np.float64(x)))

    params = [np.ravel(v) for v in (means, stddevs, minvals, maxvals)]
    out = np.empty((samples_per_batch, params[0].size), dt)
    for b in range(params[0].size):
        mean, sd, lo, hi = (t(p[b]) for p in params)
        if not (sd > 0 and lo < hi and (np.isfinite(lo) or np.isfinite(hi))):
            raise ValueError("Invalid parameters")
        if np.isinf(lo) or hi < mean:  # flipped, so that the lower bound is the nearer one
            lo, hi, sd = hi, lo, -sd
        nmin, nmax = t((lo - mean) / sd), t((hi - mean) / sd)
        sq = fn(np.sqrt, t(nmin * nmin) + t(4))
        cutoff = t(t(2) * fn(np.exp, t(0.5) + t(t(nmin * t(nmin - sq)) / t(4))) / t(nmin + sq))
        if (nmin < -1.3 and nmax >= 0) or (nmax > 1.3 and nmin <= 0):
            draws = _normal_rejection(normals, nmin, nmax)
        elif t(nmax - nmin) < cutoff:
            draws = _uniform_rejection(uniforms, nmin, t(nmax - nmin), t, fn)
        else:
            draws = _exponential_rejection(uniforms, nmin, nmax, t, fn)
        for s in range(samples_per_batch):
            out[s, b] = t(next(draws) * sd + mean)
    return out


def _normal_rejection(normals, nmin, nmax):
    while True:
        for v in normals():
            if nmin <= v <= nmax:
                yield v


def _uniform_rejection(uniforms, nmin, diff, t, fn):
    plus = t(0) if nmin < 0 else t(nmin * nmin)
    misses = 0
    while True:
        z = [t(x * diff + nmin) for x in uniforms()]
        g = [t(t(plus - v * v) / t(2)) for v in z]
        u = uniforms()
        for i in range(len(z)):
            if u[i] <= fn(np.exp, g[i]) or misses + 1 >= _MAX_ITERATIONS:
                misses = 0
                yield z[i]
            else:
                misses += 1


def _exponential_rejection(uniforms, nmin, nmax, t, fn):
    alpha = t(t(nmin + fn(np.sqrt, t(nmin * nmin) + t(4))) / t(2))
    misses = 0
    while True:
        r = uniforms()
        for i in range(0, len(r), 2):
            z = t(t(-fn(np.log, r[i]) / alpha) + nmin)
            x = t(alpha - z) if nmin < alpha else t(nmin - alpha)
            g = fn(np.exp, t(-x * x) / t(2))
            if (r[i + 1] <= g and z < nmax) or misses + 1 >= _MAX_ITERATIONS:
                misses = 0
                yield z
            else:
                misses += 1
