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

"""Follows TensorFlow's tutorial ``mnist_with_summaries.py`` (a two-layer network with
TensorBoard summaries of every variable, traced runs and separate train/test writers;
https://github.com/tensorflow/tensorflow/blob/r1.15/tensorflow/examples/tutorials/mnist/mnist_with_summaries.py,
Apache License 2.0), written with ``import dflab as tf``. Adapted for local data
(``local_data``); the final test accuracy and what was written are reported through
``results.record``.
"""

import argparse
import os
import sys

import local_data as input_data
from results import record

import dflab as tf

FLAGS = None


def train():
    mnist = input_data.read_data_sets(FLAGS.data_dir, fake_data=FLAGS.fake_data)
    sess = tf.InteractiveSession()

    with tf.name_scope("input"):
        x = tf.placeholder(tf.float32, [None, 784], name="x-input")
        y_ = tf.placeholder(tf.int64, [None], name="y-input")

    with tf.name_scope("input_reshape"):
        image_shaped_input = tf.reshape(x, [-1, 28, 28, 1])
        tf.summary.image("input", image_shaped_input, 10)

    def weight_variable(shape):
        return tf.Variable(tf.truncated_normal(shape, stddev=0.1))

    def bias_variable(shape):
        return tf.Variable(tf.constant(0.1, shape=shape))

    def variable_summaries(var):
        with tf.name_scope("summaries"):
            mean = tf.reduce_mean(var)
            tf.summary.scalar("mean", mean)
            with tf.name_scope("stddev"):
                stddev = tf.sqrt(tf.reduce_mean(tf.square(var - mean)))
            tf.summary.scalar("stddev", stddev)
            tf.summary.scalar("max", tf.reduce_max(var))
            tf.summary.scalar("min", tf.reduce_min(var))
            tf.summary.histogram("histogram", var)

    def nn_layer(input_tensor, input_dim, output_dim, layer_name, act=tf.nn.relu):
        with tf.name_scope(layer_name):
            with tf.name_scope("weights"):
                weights = weight_variable([input_dim, output_dim])
                variable_summaries(weights)
            with tf.name_scope("biases"):
                biases = bias_variable([output_dim])
                variable_summaries(biases)
            with tf.name_scope("Wx_plus_b"):
                preactivate = tf.matmul(input_tensor, weights) + biases
                tf.summary.histogram("pre_activations", preactivate)
            activations = act(preactivate, name="activation")
            tf.summary.histogram("activations", activations)
            return activations

    hidden1 = nn_layer(x, 784, 500, "layer1")

    with tf.name_scope("dropout"):
        keep_prob = tf.placeholder(tf.float32)
        tf.summary.scalar("dropout_keep_probability", keep_prob)
        dropped = tf.nn.dropout(hidden1, keep_prob)

    y = nn_layer(dropped, 500, 10, "layer2", act=tf.identity)

    with tf.name_scope("cross_entropy"):
        with tf.name_scope("total"):
            cross_entropy = tf.losses.sparse_softmax_cross_entropy(labels=y_, logits=y)
    tf.summary.scalar("cross_entropy", cross_entropy)

    with tf.name_scope("train"):
        train_step = tf.train.AdamOptimizer(FLAGS.learning_rate).minimize(cross_entropy)

    with tf.name_scope("accuracy"):
        with tf.name_scope("correct_prediction"):
            correct_prediction = tf.equal(tf.argmax(y, 1), y_)
        with tf.name_scope("accuracy"):
            accuracy = tf.reduce_mean(tf.cast(correct_prediction, tf.float32))
    tf.summary.scalar("accuracy", accuracy)

    merged = tf.summary.merge_all()
    train_writer = tf.summary.FileWriter(FLAGS.log_dir + "/train", sess.graph)
    test_writer = tf.summary.FileWriter(FLAGS.log_dir + "/test")
    tf.global_variables_initializer().run()

    def feed_dict(is_train):
        if is_train or FLAGS.fake_data:
            xs, ys = mnist.train.next_batch(100, fake_data=FLAGS.fake_data)
            k = FLAGS.dropout
        else:
            xs, ys = mnist.test.images, mnist.test.labels
            k = 1.0
        return {x: xs, y_: ys, keep_prob: k}

    acc = 0.0
    for i in range(FLAGS.max_steps):
        if i % 10 == 0:
            summary, acc = sess.run([merged, accuracy], feed_dict=feed_dict(False))
            test_writer.add_summary(summary, i)
            print(f"Accuracy at step {i}: {acc}")
        else:
            if i % 100 == 99:
                run_options = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)
                run_metadata = tf.RunMetadata()
                summary, _ = sess.run([merged, train_step], feed_dict=feed_dict(True),
                                      options=run_options, run_metadata=run_metadata)
                train_writer.add_run_metadata(run_metadata, f"step{i:03d}")
                train_writer.add_summary(summary, i)
                print("Adding run metadata for", i)
            else:
                summary, _ = sess.run([merged, train_step], feed_dict=feed_dict(True))
                train_writer.add_summary(summary, i)
    final = sess.run(accuracy, feed_dict=feed_dict(False))
    train_writer.close()
    test_writer.close()
    wrote = all(any(f.startswith("events") for f in os.listdir(os.path.join(FLAGS.log_dir, d)))
                for d in ("train", "test"))
    record(test_accuracy=final, last_logged_accuracy=acc, wrote_events=wrote)


def main(_):
    if tf.gfile.Exists(FLAGS.log_dir):
        tf.gfile.DeleteRecursively(FLAGS.log_dir)
    tf.gfile.MakeDirs(FLAGS.log_dir)
    with tf.Graph().as_default():
        train()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--fake_data", nargs="?", const=True, type=bool, default=False)
    parser.add_argument("--max_steps", type=int, default=1000)
    parser.add_argument("--learning_rate", type=float, default=0.001)
    parser.add_argument("--dropout", type=float, default=0.9)
    parser.add_argument("--data_dir", type=str,
                        default=os.path.join(os.getenv("TEST_TMPDIR", "/tmp"),
                                             "tensorflow/mnist/input_data"))
    parser.add_argument("--log_dir", type=str,
                        default=os.path.join(os.getenv("TEST_TMPDIR", "/tmp"),
                                             "tensorflow/mnist/logs/mnist_with_summaries"))
    FLAGS, unparsed = parser.parse_known_args()
    tf.app.run(main=main, argv=[sys.argv[0]] + unparsed)
