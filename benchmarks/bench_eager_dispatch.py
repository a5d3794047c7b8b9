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
    result.target = "<= PyTorch eager"
    if torch is None:
        result.notes.append("PyTorch not installed: no side-by-side anchor")
    else:
        result.measured = f"worst untaped case {worst:.2f}x PyTorch's"
        result.met = worst <= 1.0
    h.report(result, args)
    return [result]


if __name__ == "__main__":
    sys.exit(main() and 0)
