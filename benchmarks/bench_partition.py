"""Benchmark 8: two independent branches on two CPU devices, and the cost of a transfer.

Part 1: two independent branches, each a chain of 4 matmuls (512x512 float32, tanh between),
BLAS at one thread, ``inter_op_parallelism_threads=1`` so that a device runs one op at a time.
On one device the branches run one after the other; on two devices (``device_count={"CPU":
2}``, branch k under ``tf.device("/cpu:k")``) the plan is partitioned and the two partitions run
concurrently. Target: two devices >= 1.6x faster than one.

Part 2: the cost of one ``_Send``/``_Recv`` transfer: a chain of 200 small adds (100 float32)
whose ops alternate between two devices (199 cut edges) against the same chain on one device;
the difference per transfer, beside a plain NumPy copy of the same array.
"""

from __future__ import annotations

import _harness as h
import numpy as np
from _harness import ONE_THREAD
from threadpoolctl import threadpool_limits

import dflab as tf

N = 512
DEPTH = 4
TARGET = 1.6
CHAIN = 200
SMALL = 100


def _branches(two_devices: bool):
    rng = np.random.default_rng(0)
    graph = tf.Graph()
    with graph.as_default():
        outs = []
        for b in range(2):
            with tf.device(f"/cpu:{b if two_devices else 0}"):
                x = tf.constant(rng.standard_normal((N, N)).astype(np.float32) / N ** 0.5)
                w = tf.constant(rng.standard_normal((N, N)).astype(np.float32) / N ** 0.5)
                for _ in range(DEPTH):
                    x = tf.tanh(tf.matmul(x, w))
                outs.append(tf.reduce_sum(x))
        with tf.device("/cpu:0"):
            total = tf.add_n(outs)
    return graph, total


def _chain(alternate: bool):
    graph = tf.Graph()
    with graph.as_default():
        x = tf.placeholder(tf.float32, [SMALL])
        one = tf.constant(np.ones(SMALL, np.float32))
        y = x
        for k in range(CHAIN):
            with tf.device(f"/cpu:{k % 2 if alternate else 0}"):
                y = tf.add(y, one)
    return graph, x, y


def main() -> h.Result:
    args = h.parse_args(__doc__.splitlines()[0])
    result = h.Result("partition", "8. Two branches on two CPU devices; cost of a transfer")
    config = tf.ConfigProto(device_count={"CPU": 2}, inter_op_parallelism_threads=1,
                            **ONE_THREAD)
    with threadpool_limits(1):
        sessions, candidates = [], {}
        for label, two in (("one device", False), ("two devices", True)):
            g, total = _branches(two)
            s = tf.Session(graph=g, config=config)
            sessions.append((s, total))
            candidates[label] = (lambda s=s, t=total: s.run(t))
        np.testing.assert_allclose(sessions[0][0].run(sessions[0][1]),
                                   sessions[1][0].run(sessions[1][1]), rtol=1e-5)
        times = h.compare(candidates, repeat=h.repeats(args, 9), sample_s=0.3)
        value = np.random.default_rng(1).random(SMALL, dtype=np.float32)
        chains = {}
        for label, alt in (("chain on one device", False), ("chain across two devices", True)):
            g, x, y = _chain(alt)
            s = tf.Session(graph=g, config=config)
            sessions.append((s, y))
            chains[label] = (lambda s=s, x=x, y=y: s.run(y, {x: value}))
        np.testing.assert_allclose(chains["chain on one device"](),
                                   chains["chain across two devices"](), rtol=1e-6)
        chains["numpy copy"] = lambda: np.copy(value)
        ctimes = h.compare(chains, repeat=h.repeats(args, 9), sample_s=0.2)
        for s, _ in sessions:
            s.close()
    for label, t in times.items():
        result.add(f"branches, {label}", t * 1e3, "ms/run",
                   f"{times['one device'] / t:.2f}x one device")
    per_transfer = (ctimes["chain across two devices"] - ctimes["chain on one device"]) / (
        CHAIN - 1)
    result.add("one _Send/_Recv transfer (100 float32)", per_transfer * 1e6, "us",
               f"{per_transfer / ctimes['numpy copy']:.0f}x a NumPy copy")
    result.add("numpy copy (100 float32)", ctimes["numpy copy"] * 1e6, "us")
    speedup = times["one device"] / times["two devices"]
    result.target = f"two devices >= {TARGET:g}x faster than one"
    result.measured = f"{speedup:.2f}x"
    result.met = speedup >= TARGET
    result.notes.append("a transfer costs a rendezvous hand-off and, when the receiver is idle, a "
                        "thread switch; values cross by reference (one process), not by copy")
    h.report(result, args)
    return result


if __name__ == "__main__":
    main()
