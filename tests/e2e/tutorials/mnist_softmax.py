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

"""Follows TensorFlow's tutorial ``mnist_softmax.py`` (softmax regression on MNIST;
https://github.com/tensorflow/tensorflow/blob/r1.15/tensorflow/examples/tutorials/mnist/mnist_softmax.py,
Apache License 2.0): the same graph, optimizer, loop and evaluation, written with
``import dflab as tf``. Adapted for local data: ``local_data.read_data_sets`` (synthetic
digits) instead of the download; the result is reported through ``results.record``.
"""

import argparse
import sys

import local_data as input_data
from results import record

import dflab as tf

FLAGS = None


def main(_):
    mnist = input_data.read_data_sets(FLAGS.data_dir)

    x = tf.placeholder(tf.float32, [None, 784])
    W = tf.Variable(tf.zeros([784, 10]))
    b = tf.Variable(tf.zeros([10]))
    y = tf.matmul(x, W) + b

    y_ = tf.placeholder(tf.int64, [None])
    cross_entropy = tf.losses.sparse_softmax_cross_entropy(labels=y_, logits=y)
    train_step = tf.train.GradientDescentOptimizer(0.5).minimize(cross_entropy)

    sess = tf.InteractiveSession()
    tf.global_variables_initializer().run()
    for _ in range(FLAGS.steps):
        batch_xs, batch_ys = mnist.train.next_batch(100)
        sess.run(train_step, feed_dict={x: batch_xs, y_: batch_ys})

    correct_prediction = tf.equal(tf.argmax(y, 1), y_)
    accuracy = tf.reduce_mean(tf.cast(correct_prediction, tf.float32))
    acc, loss = sess.run([accuracy, cross_entropy],
                         feed_dict={x: mnist.test.images, y_: mnist.test.labels})
    print(acc)
    record(test_accuracy=acc, test_loss=loss)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--data_dir", type=str, default="/tmp/tensorflow/mnist/input_data",
                        help="Directory for storing input data")
    parser.add_argument("--steps", type=int, default=1000, help="training steps")
    FLAGS, unparsed = parser.parse_known_args()
    tf.app.run(main=main, argv=[sys.argv[0]] + unparsed)
