"""Stepper time travel: what stepping, going back and coming forward cost on a training step.

Model: an MLP 784-128-10 with ReLU, softmax cross-entropy and Adam, batch 64, float32, BLAS
pinned to one thread — the size of a tutorial's network. Candidates: the whole step in one
``Session.run``; the same step walked node by node by a ``StepRun``; ``back(1)`` then
``forward(1)`` at the end of the step (going back re-executes every earlier event on fresh
executions after restoring the variables, so it costs about one stepped step); ``back(all)``
then ``forward(all)``. Each rewound state is checked to equal the recorded one first.
"""

from __future__ import annotations

import _harness as h
import numpy as np
from threadpoolctl import threadpool_limits

import dflab as tf
from dflab.runtime.stepping import StepRun

BATCH = 64


def build():
    rng = np.random.default_rng(0)
    graph = tf.Graph()
    with graph.as_default():
        x = tf.constant(rng.standard_normal((BATCH, 784)).astype(np.float32), name="x")
        y = tf.constant(np.eye(10, dtype=np.float32)[rng.integers(0, 10, BATCH)], name="y")
        w1 = tf.Variable(rng.standard_normal((784, 128)).astype(np.float32) * 0.05, name="w1")
        w2 = tf.Variable(rng.standard_normal((128, 10)).astype(np.float32) * 0.1, name="w2")
        logits = tf.matmul(tf.nn.relu(tf.matmul(x, w1)), w2)
        loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits_v2(labels=y,
                                                                         logits=logits))
        train_op = tf.train.AdamOptimizer(1e-3).minimize(loss)
        init = tf.global_variables_initializer()
    sess = tf.Session(graph=graph)
    sess.run(init)
    return sess, train_op, [w1, w2]


def main() -> h.Result:
    args = h.parse_args(__doc__.splitlines()[0])
    result = h.Result("stepper_rewind", "Stepper time travel: MLP 784-128-10 Adam step, batch 64")
    with threadpool_limits(1):
        sess, train_op, weights = build()
        run = StepRun(sess, train_op)
        run.resume()
        events = run.position
        at_end = sess.run(weights)
        run.back(1)
        run.forward(1)
        for got, want in zip(sess.run(weights), at_end, strict=True):
            np.testing.assert_array_equal(got, want)

        def one_step_by_hand():
            StepRun(sess, train_op).resume()

        def back_one_and_forward():
            run.back(1)
            run.forward(1)

        def back_all_and_forward():
            run.back(events)
            run.forward(events)

        times = h.compare({
            "Session.run(train_op)": lambda: sess.run(train_op),
            "StepRun: every node by hand": one_step_by_hand,
            "back(1) + forward(1) at the end": back_one_and_forward,
            "back(all) + forward(all)": back_all_and_forward,
        }, repeat=h.repeats(args, 9), sample_s=0.3, warmup=2)
    base = times["Session.run(train_op)"]
    for label, seconds in times.items():
        result.add(label, seconds * 1e3, "ms", f"{seconds / base:.1f}x Session.run")
    result.notes.append(f"{events} events per step; a rewind re-executes the events before "
                        "the cursor on fresh executions")
    h.report(result, args)
    return result


if __name__ == "__main__":
    main()
