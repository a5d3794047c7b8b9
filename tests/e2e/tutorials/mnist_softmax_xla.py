# Copyright The TensorFlow Authors. All Rights Reserved.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
# ==============================================================================
# Modified from the TensorFlow original named in the docstring below: it runs on dflab and
# on local data; the changes are listed there and in README.md beside this file.

"""Follows TensorFlow's tutorial ``mnist_softmax_xla.py`` (softmax regression with the XLA JIT
turned on and a traced step written as a Chrome timeline;
https://github.com/tensorflow/tensorflow/blob/r1.15/tensorflow/examples/tutorials/mnist/mnist_softmax_xla.py,
Apache License 2.0), written with ``import dflab as tf``. dflab compiles nothing: the JIT
level is accepted and kept. Adapted for local data (``local_data``) and reporting through
``results.record``.
"""

import argparse
import os
import sys

import local_data as input_data
from results import record

import dflab as tf
from dflab.python.client import timeline

FLAGS = None


def main(_):
    mnist = input_data.read_data_sets(FLAGS.data_dir)

    x = tf.placeholder(tf.float32, [None, 784])
    w = tf.Variable(tf.zeros([784, 10]))
    b = tf.Variable(tf.zeros([10]))
    y = tf.matmul(x, w) + b

    y_ = tf.placeholder(tf.int64, [None])
    cross_entropy = tf.losses.sparse_softmax_cross_entropy(labels=y_, logits=y)
    train_step = tf.train.GradientDescentOptimizer(0.5).minimize(cross_entropy)

    config = tf.ConfigProto()
    jit_level = 0
    if FLAGS.xla:
        jit_level = tf.OptimizerOptions.ON_1
    config.graph_options.optimizer_options.global_jit_level = jit_level
    run_metadata = tf.RunMetadata()
    sess = tf.Session(config=config)
    tf.global_variables_initializer().run(session=sess)

    train_loops = FLAGS.steps
    for i in range(train_loops):
        batch_xs, batch_ys = mnist.train.next_batch(100)
        if i == train_loops - 1:
            sess.run(train_step, feed_dict={x: batch_xs, y_: batch_ys},
                     options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE),
                     run_metadata=run_metadata)
            trace = timeline.Timeline(step_stats=run_metadata.step_stats)
            with open(os.path.join(FLAGS.trace_dir, "timeline.ctf.json"), "w") as trace_file:
                trace_file.write(trace.generate_chrome_trace_format())
        else:
            sess.run(train_step, feed_dict={x: batch_xs, y_: batch_ys})

    correct_prediction = tf.equal(tf.argmax(y, 1), y_)
    accuracy = tf.reduce_mean(tf.cast(correct_prediction, tf.float32))
    acc = sess.run(accuracy, feed_dict={x: mnist.test.images, y_: mnist.test.labels})
    print(acc)
    sess.close()
    traced = os.path.getsize(os.path.join(FLAGS.trace_dir, "timeline.ctf.json")) > 100
    record(test_accuracy=acc, wrote_trace=traced)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--data_dir", type=str, default="/tmp/tensorflow/mnist/input_data")
    parser.add_argument("--xla", type=bool, default=True, help="Turn xla via JIT on")
    parser.add_argument("--steps", type=int, default=1000, help="training steps")
    parser.add_argument("--trace_dir", type=str, default=".", help="where the trace goes")
    FLAGS, unparsed = parser.parse_known_args()
    tf.app.run(main=main, argv=[sys.argv[0]] + unparsed)
