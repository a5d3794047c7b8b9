"""Benchmark 1: the fixed cost of one ``Session.run`` (target <= 25 us).

Fetches a 4-byte float32 constant whose plan is already cached, so the figure is pure
per-call machinery: fetch mapping, plan lookup, executor start, fetch copy. Also reports the
cost of ``make_callable`` (the per-call lookups skipped), of full tracing (RunOptions
FULL_TRACE with a RunMetadata), and TensorFlow 1.x when it is installed.
"""

from __future__ import annotations

import _harness as h
import numpy as np
from threadpoolctl import threadpool_limits

import dflab as tf

TARGET_US = 25.0


def main() -> h.Result:
    args = h.parse_args(__doc__.splitlines()[0])
    result = h.Result("session_overhead", "1. Session.run fixed overhead (4-byte constant)")
    with threadpool_limits(1):
        graph = tf.Graph()
        with graph.as_default():
            c = tf.constant(np.float32(1.0), name="c")
        sess = tf.Session(graph=graph)
        call = sess.make_callable(c)
        options = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)

        def traced():
            sess.run(c, options=options, run_metadata=tf.RunMetadata())

        candidates = {
            "dflab sess.run": lambda: sess.run(c),
            "dflab make_callable": call,
            "dflab sess.run FULL_TRACE": traced,
        }
        tf1 = h.optional_tf1()
        if tf1 is not None:
            g1 = tf1.Graph()
            with g1.as_default():
                c1 = tf1.constant(np.float32(1.0))
            s1 = tf1.Session(graph=g1)
            candidates["tensorflow 1.x sess.run"] = lambda: s1.run(c1)
        times = h.compare(candidates, repeat=h.repeats(args, 21))

    for label, seconds in times.items():
        result.add(label, seconds * 1e6, "us/run")
    if tf1 is None:
        result.add("tensorflow 1.x sess.run", None, "us/run", "not installed")
    run_us = times["dflab sess.run"] * 1e6
    trace_x = times["dflab sess.run FULL_TRACE"] / times["dflab sess.run"]
    result.target = f"sess.run <= {TARGET_US:g} us"
    result.measured = f"{run_us:.1f} us"
    result.met = run_us <= TARGET_US
    result.notes.append(f"tracing overhead: FULL_TRACE run costs {trace_x:.2f}x a plain run")
    h.report(result, args)
    return result


if __name__ == "__main__":
    main()
