"""Benchmark 2: per-op cost of a chain of 1,000 dependent small adds (target <= 1.5x NumPy).

The graph is ``x -> add -> add -> ... -> add`` (1,000 ``Add`` ops sharing one constant), fed
by a placeholder. The baseline is the Python loop a user would write: 1,000 calls of
``np.add`` on the same 100-element float32 arrays (written plainly, and with ``np.add`` bound
to a local). The ratio is dflab's time per op over the faster loop's time per call; it
measures the executor's per-node bookkeeping. Also reports a traced run (RunOptions
FULL_TRACE), and TensorFlow 1.x / PyTorch when installed.
"""

from __future__ import annotations

import _harness as h
import numpy as np
from _harness import ONE_THREAD
from threadpoolctl import threadpool_limits

import dflab as tf

N_OPS = 1000
SIZE = 100
TARGET_RATIO = 1.5


def _dflab_chain():
    graph = tf.Graph()
    with graph.as_default():
        x = tf.placeholder(tf.float32, [SIZE], name="x")
        one = tf.constant(np.ones(SIZE, np.float32), name="one")
        y = x
        for _ in range(N_OPS):
            y = tf.add(y, one)
    return graph, x, y


def main() -> h.Result:
    args = h.parse_args(__doc__.splitlines()[0])
    result = h.Result("op_chain", f"2. Chain of {N_OPS:,} dependent adds ({SIZE} x float32)")
    x_val = np.random.default_rng(0).random(SIZE, dtype=np.float32)
    one_np = np.ones(SIZE, np.float32)

    def numpy_loop():
        y = x_val
        for _ in range(N_OPS):
            y = np.add(y, one_np)
        return y

    def numpy_loop_bound(add=np.add, one=one_np):
        # The tightest Python loop: no global or attribute lookups per iteration.
        y = x_val
        for _ in range(N_OPS):
            y = add(y, one)
        return y

    with threadpool_limits(1):
        graph, x, y = _dflab_chain()
        sess = tf.Session(graph=graph, config=tf.ConfigProto(**ONE_THREAD))
        np.testing.assert_allclose(sess.run(y, {x: x_val}), numpy_loop(), rtol=1e-5)
        options = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)

        def traced():
            sess.run(y, {x: x_val}, options=options, run_metadata=tf.RunMetadata())

        candidates = {
            "numpy loop (np.add)": numpy_loop,
            "numpy loop (add bound locally)": numpy_loop_bound,
            "dflab sess.run": lambda: sess.run(y, {x: x_val}),
            "dflab sess.run FULL_TRACE": traced,
        }
        tf1 = h.optional_tf1()
        if tf1 is not None:
            g1 = tf1.Graph()
            with g1.as_default():
                x1 = tf1.placeholder(tf1.float32, [SIZE])
                one1 = tf1.constant(one_np)
                y1 = x1
                for _ in range(N_OPS):
                    y1 = tf1.add(y1, one1)
            s1 = tf1.Session(graph=g1)
            candidates["tensorflow 1.x sess.run"] = lambda: s1.run(y1, {x1: x_val})
        torch = h.optional_torch()
        if torch is not None:
            xt, onet = torch.from_numpy(x_val), torch.from_numpy(one_np)

            def torch_loop():
                yt = xt
                for _ in range(N_OPS):
                    yt = torch.add(yt, onet)
                return yt

            candidates["pytorch eager loop"] = torch_loop
        times = h.compare(candidates, repeat=h.repeats(args, 15), sample_s=0.1)

    # Judge against the faster of the two hand-written loops.
    base = min(times["numpy loop (np.add)"], times["numpy loop (add bound locally)"])
    for label, seconds in times.items():
        result.add(label, seconds / N_OPS * 1e6, "us/op", f"{seconds / base:.2f}x numpy")
    if tf1 is None:
        result.add("tensorflow 1.x sess.run", None, "us/op", "not installed")
    if torch is None:
        result.add("pytorch eager loop", None, "us/op", "not installed")
    ratio = times["dflab sess.run"] / base
    trace_x = times["dflab sess.run FULL_TRACE"] / times["dflab sess.run"]
    result.target = f"dflab / numpy loop <= {TARGET_RATIO:g}x"
    result.measured = f"{ratio:.2f}x"
    result.met = ratio <= TARGET_RATIO
    result.notes.append(f"tracing overhead: FULL_TRACE run costs {trace_x:.2f}x a plain run")
    h.report(result, args)
    return result


if __name__ == "__main__":
    main()
