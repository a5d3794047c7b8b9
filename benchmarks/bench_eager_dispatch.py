"""Benchmark 17a in detail: what one eager op costs, op by op, counted as well as timed.

Each case runs a small eager op on 4-element float32 tensors (a 2x2 matmul): ``tf.add``,
``a + b``, ``tf.matmul``, ``tf.nn.relu``, ``a * 2.0`` (a Python number converted), a variable's
``read_value()``, ``tf.add(variable, b)`` and ``tf.multiply`` under a recording tape; then the
ops of a small model's layers: ``reduce_mean``, ``reduce_sum`` over an axis, ``softmax``,
``reshape``, ``bias_add``, a slice ``a[:2]``, a product with a variable, and a
``tf.layers.Dense`` call (4x3 in, 5 out, ReLU; PyTorch's ``nn.Linear`` and ``relu`` without
autograd).

Two measures per case:
* **Python calls per op**, counted with ``sys.setprofile`` ('call' events: Python frames;
  'c_call': builtins called from Python) over 1,000 ops: independent of the machine's load.
* **CPU time per op**: ``time.process_time`` over batches of calls, best of N, sampled
  interleaved with ``np.add`` on the same NumPy arrays (the local anchor) and, when it is
  installed, the same op in PyTorch eager (one thread); the ratio to ``np.add`` is what to
  compare between runs on this shared machine.
Target (issue 36): dflab's eager op <= PyTorch eager.

Then **the library sweep**: thirty more ops a small dynamic model calls (joins and splits,
gathers, casts, activations, random draws, ``range``, padding, a sparse cross-entropy…), each
on a (2, 3) float32 tensor (int64 indices) beside its PyTorch counterpart, CPU time only: where
the generic path (builders that convert, name and key) still costs more than the kernel.
"""

from __future__ import annotations

import sys
import time

import _harness as h
import numpy as np
from threadpoolctl import threadpool_limits

import dflab as tf
from dflab.eager import eager_mode

COUNTED = 1000


def calls_per_op(fn, n: int = COUNTED) -> tuple[float, float]:
    """(Python frames, builtin calls) per call of ``fn``, not counting ``fn``'s own frame."""
    fn()
    counts = {"call": 0, "c_call": 0}

    def hook(frame, event, arg):
        if event in counts:
            counts[event] += 1

    sys.setprofile(hook)
    try:
        for _ in range(n):
            fn()
    finally:
        sys.setprofile(None)
    return (counts["call"] - n) / n, counts["c_call"] / n


def best_cpu_us(candidates: dict, number: int, rounds: int) -> dict:
    """Best-of-``rounds`` CPU microseconds per call of each candidate, sampled interleaved."""
    best = dict.fromkeys(candidates, float("inf"))
    for fn in candidates.values():
        fn()
    for _ in range(rounds):
        for label, fn in candidates.items():
            t0 = time.process_time()
            for _ in range(number):
                fn()
            best[label] = min(best[label], (time.process_time() - t0) / number * 1e6)
    return best


def _cases(torch):
    x = np.arange(4, dtype=np.float32)
    y = x + 1
    m = np.ones((2, 2), np.float32)
    a, b, em = tf.constant(x), tf.constant(y), tf.constant(m)
    v = tf.Variable(x)
    tape = tf.GradientTape(persistent=True)
    tape.watch(a)
    rows = np.arange(12, dtype=np.float32).reshape(4, 3) / 12
    er, w, bias = tf.constant(rows), tf.Variable(np.ones((3, 5), np.float32)), tf.constant(y[:2])
    dense = tf.layers.Dense(5, activation=tf.nn.relu)
    if torch is not None:
        ta, tb, tm = torch.tensor(x), torch.tensor(y), torch.tensor(m)
        tg = torch.tensor(x, requires_grad=True)
        tr, tw, tb2 = torch.tensor(rows), torch.ones((3, 5)), torch.tensor(y[:2])
        linear = torch.nn.Linear(3, 5).requires_grad_(False)
    t = torch is not None
    # label: (dflab op, PyTorch's op or None, whether the dflab op runs under the tape)
    return {
        "tf.add(a, b)": (lambda: tf.add(a, b), t and (lambda: torch.add(ta, tb)), False),
        "a + b": (lambda: a + b, t and (lambda: ta + tb), False),
        "tf.matmul 2x2": (lambda: tf.matmul(em, em), t and (lambda: torch.matmul(tm, tm)),
                          False),
        "tf.nn.relu(a)": (lambda: tf.nn.relu(a), t and (lambda: torch.relu(ta)), False),
        "a * 2.0": (lambda: a * 2.0, t and (lambda: ta * 2.0), False),
        "v.read_value()": (lambda: v.read_value(), None, False),
        "tf.add(v, b)": (lambda: tf.add(v, b), None, False),
        "taped tf.multiply": (lambda: tf.multiply(a, b), t and (lambda: tg * tb), True),
        "tf.reduce_mean(m)": (lambda: tf.reduce_mean(em), t and (lambda: torch.mean(tm)), False),
        "tf.reduce_sum(m, 1)": (lambda: tf.reduce_sum(em, 1),
                                t and (lambda: torch.sum(tm, 1)), False),
        "tf.nn.softmax(m)": (lambda: tf.nn.softmax(em),
                             t and (lambda: torch.softmax(tm, -1)), False),
        "tf.reshape(m, [-1])": (lambda: tf.reshape(em, [-1]),
                                t and (lambda: torch.reshape(tm, (-1,))), False),
        "tf.nn.bias_add(m, b2)": (lambda: tf.nn.bias_add(em, bias),
                                  t and (lambda: tm + tb2), False),
        "a[:2]": (lambda: a[:2], t and (lambda: ta[:2]), False),
        "tf.matmul(x, v) 4x3x5": (lambda: tf.matmul(er, w), t and (lambda: tr @ tw), False),
        "Dense(5, relu) 4x3": (lambda: dense(er), t and (lambda: torch.relu(linear(tr))),
                               False),
    }, tape, (x, y)


def _library_cases(torch):
    """label -> (dflab op, PyTorch's op): the library sweep (see the module docstring)."""
    m = np.arange(6, dtype=np.float32).reshape(2, 3)
    idx = np.array([1, 0], np.int64)
    em, ei, eb = tf.constant(m), tf.constant(idx), tf.constant(m > 2)
    tm, ti = torch.tensor(m), torch.tensor(idx)
    tb = tm > 2
    fn = torch.nn.functional
    return {
        "tf.concat([m, m], 0)": (lambda: tf.concat([em, em], 0), lambda: torch.cat([tm, tm])),
        "tf.stack([m, m])": (lambda: tf.stack([em, em]), lambda: torch.stack([tm, tm])),
        "tf.unstack(m)": (lambda: tf.unstack(em), lambda: torch.unbind(tm)),
        "tf.split(m, 3, axis=1)": (lambda: tf.split(em, 3, axis=1),
                                   lambda: torch.split(tm, 1, 1)),
        "tf.transpose(m)": (lambda: tf.transpose(em), lambda: tm.t().contiguous()),
        "tf.expand_dims(m, 0)": (lambda: tf.expand_dims(em, 0), lambda: tm.unsqueeze(0)),
        "tf.tile(m, [2, 1])": (lambda: tf.tile(em, [2, 1]), lambda: tm.repeat(2, 1)),
        "tf.pad(m, [[1, 1], [0, 0]])": (lambda: tf.pad(em, [[1, 1], [0, 0]]),
                                        lambda: fn.pad(tm, (0, 0, 1, 1))),
        "tf.cast(m, tf.int32)": (lambda: tf.cast(em, tf.int32), lambda: tm.to(torch.int32)),
        "tf.gather(m, i)": (lambda: tf.gather(em, ei), lambda: tm.index_select(0, ti)),
        "tf.argmax(m, 1)": (lambda: tf.argmax(em, 1), lambda: tm.argmax(1)),
        "tf.where(c, m, m)": (lambda: tf.where(eb, em, em), lambda: torch.where(tb, tm, tm)),
        "tf.one_hot(i, 3)": (lambda: tf.one_hot(ei, 3), lambda: fn.one_hot(ti, 3)),
        "tf.equal(m, m)": (lambda: tf.equal(em, em), lambda: tm == tm),
        "tf.maximum(m, 0.0)": (lambda: tf.maximum(em, 0.0), lambda: torch.clamp_min(tm, 0.0)),
        "tf.clip_by_value(m, 0, 1)": (lambda: tf.clip_by_value(em, 0.0, 1.0),
                                      lambda: tm.clamp(0.0, 1.0)),
        "tf.square(m)": (lambda: tf.square(em), lambda: torch.square(tm)),
        "tf.sqrt(m)": (lambda: tf.sqrt(em), lambda: torch.sqrt(tm)),
        "tf.exp(m)": (lambda: tf.exp(em), lambda: torch.exp(tm)),
        "tf.tanh(m)": (lambda: tf.tanh(em), lambda: torch.tanh(tm)),
        "tf.sigmoid(m)": (lambda: tf.sigmoid(em), lambda: torch.sigmoid(tm)),
        "tf.nn.log_softmax(m)": (lambda: tf.nn.log_softmax(em),
                                 lambda: torch.log_softmax(tm, -1)),
        "sparse softmax xent": (
            lambda: tf.nn.sparse_softmax_cross_entropy_with_logits(labels=ei, logits=em),
            lambda: fn.cross_entropy(tm, ti, reduction="none")),
        "tf.reduce_max(m, 1)": (lambda: tf.reduce_max(em, 1), lambda: tm.amax(1)),
        "tf.reduce_any(c)": (lambda: tf.reduce_any(eb), lambda: tb.any()),
        "tf.add_n([m, m, m])": (lambda: tf.add_n([em, em, em]), lambda: tm + tm + tm),
        "tf.zeros_like(m)": (lambda: tf.zeros_like(em), lambda: torch.zeros_like(tm)),
        "tf.ones([2, 3])": (lambda: tf.ones([2, 3]), lambda: torch.ones(2, 3)),
        "tf.fill([2, 3], 1.0)": (lambda: tf.fill([2, 3], 1.0), lambda: torch.full((2, 3), 1.0)),
        "tf.range(5)": (lambda: tf.range(5), lambda: torch.arange(5)),
        "tf.random_uniform([2, 3])": (lambda: tf.random_uniform([2, 3]),
                                      lambda: torch.rand(2, 3)),
        "tf.random_normal([2, 3])": (lambda: tf.random_normal([2, 3]),
                                     lambda: torch.randn(2, 3)),
    }


def library_sweep(torch, number: int, rounds: int) -> h.Result:
    result = h.Result("eager_library", "17a, the library sweep: CPU us per op against PyTorch")
    ratios = []
    for label, (op, torch_op) in _library_cases(torch).items():
        us = best_cpu_us({label: op, "torch": torch_op}, number, rounds)
        ratios.append(us[label] / us["torch"])
        result.add(label, us[label], "us/op",
                   f"PyTorch {us['torch']:.2f} us; {ratios[-1]:.2f}x")
    ratios.sort()
    result.target = "<= PyTorch eager"
    result.measured = (f"median {ratios[len(ratios) // 2]:.2f}x, worst {ratios[-1]:.2f}x; "
                       f"{sum(r <= 1.0 for r in ratios)} of {len(ratios)} at or under 1.0x")
    result.met = ratios[-1] <= 1.0
    return result


def main() -> list:
    args = h.parse_args(__doc__.splitlines()[0])
    number, rounds = (200, 3) if args.quick else (2000, 15)
    torch = h.optional_torch()
    result = h.Result("eager_dispatch", "17a. Eager per-op cost: Python calls and CPU us per op")
    with threadpool_limits(1), eager_mode():
        cases, tape, (x, y) = _cases(torch)
        anchor = {"np.add": lambda: np.add(x, y)}
        worst = 0.0
        for label, (op, torch_op, taped) in cases.items():
            if taped:
                tape.__enter__()
            try:
                frames, builtins = calls_per_op(op, COUNTED // 5 if taped else COUNTED)
                cands = {**anchor, label: op}
                if torch_op:
                    cands["torch"] = torch_op
                us = best_cpu_us(cands, number // 5 if taped else number, rounds)
            finally:
                if taped:
                    tape.__exit__(None, None, None)
            ratio = us[label] / us["np.add"]
            note = f"{frames:.0f} py calls, {builtins:.0f} builtins; {ratio:.1f}x np.add " \
                   f"({us['np.add']:.2f} us)"
            if "torch" in us:
                note += f"; PyTorch {us['torch']:.2f} us ({us['torch'] / us['np.add']:.1f}x)"
                if not taped:
                    worst = max(worst, us[label] / us["torch"])
            result.add(label, us[label], "us/op", note)
        library = library_sweep(torch, number // 2, max(rounds // 3, 3)) if torch else None
    result.target = "<= PyTorch eager"
    if torch is None:
        result.notes.append("PyTorch not installed: no side-by-side anchor (nor library sweep)")
    else:
        result.measured = f"worst untaped case {worst:.2f}x PyTorch's"
        result.met = worst <= 1.0
    h.report(result, args)
    if library is None:
        return [result]
    h.report(library, args)
    return [result, library]


if __name__ == "__main__":
    sys.exit(main() and 0)
