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

"""Follows TensorFlow's tutorial ``fully_connected_feed.py`` (train and evaluate ``mnist.py``'s
network with feed dicts, summaries and checkpoints;
https://github.com/tensorflow/tensorflow/blob/r1.15/tensorflow/examples/tutorials/mnist/fully_connected_feed.py,
Apache License 2.0), written with ``import dflab as tf``. Adapted for local data
(``local_data``); the last evaluation's precisions are reported through ``results.record``.
"""

import argparse
import os
import sys
import time

import local_data as input_data
import mnist
from results import record

import dflab as tf

FLAGS = None


def placeholder_inputs(batch_size):
    images_placeholder = tf.placeholder(tf.float32, shape=(batch_size, mnist.IMAGE_PIXELS))
    labels_placeholder = tf.placeholder(tf.int32, shape=(batch_size))
    return images_placeholder, labels_placeholder


def fill_feed_dict(data_set, images_pl, labels_pl):
    images_feed, labels_feed = data_set.next_batch(FLAGS.batch_size, FLAGS.fake_data)
    return {images_pl: images_feed, labels_pl: labels_feed}


def do_eval(sess, eval_correct, images_placeholder, labels_placeholder, data_set):
    """One epoch of evaluation; returns the precision."""
    true_count = 0
    steps_per_epoch = data_set.num_examples // FLAGS.batch_size
    num_examples = steps_per_epoch * FLAGS.batch_size
    for _ in range(steps_per_epoch):
        feed_dict = fill_feed_dict(data_set, images_placeholder, labels_placeholder)
        true_count += sess.run(eval_correct, feed_dict=feed_dict)
    precision = float(true_count) / num_examples
    print(f"Num examples: {num_examples}  Num correct: {true_count}  "
          f"Precision @ 1: {precision:0.04f}")
    return precision


def run_training():
    data_sets = input_data.read_data_sets(FLAGS.input_data_dir, FLAGS.fake_data)
    with tf.Graph().as_default():
        images_placeholder, labels_placeholder = placeholder_inputs(FLAGS.batch_size)
        logits = mnist.inference(images_placeholder, FLAGS.hidden1, FLAGS.hidden2)
        loss = mnist.loss(logits, labels_placeholder)
        train_op = mnist.training(loss, FLAGS.learning_rate)
        eval_correct = mnist.evaluation(logits, labels_placeholder)
        summary = tf.summary.merge_all()
        init = tf.global_variables_initializer()
        saver = tf.train.Saver()
        sess = tf.Session()
        summary_writer = tf.summary.FileWriter(FLAGS.log_dir, sess.graph)
        sess.run(init)

        for step in range(FLAGS.max_steps):
            start_time = time.time()
            feed_dict = fill_feed_dict(data_sets.train, images_placeholder, labels_placeholder)
            _, loss_value = sess.run([train_op, loss], feed_dict=feed_dict)
            duration = time.time() - start_time
            if step % 100 == 0:
                print(f"Step {step}: loss = {loss_value:.2f} ({duration:.3f} sec)")
                summary_str = sess.run(summary, feed_dict=feed_dict)
                summary_writer.add_summary(summary_str, step)
                summary_writer.flush()
            if (step + 1) % 1000 == 0 or (step + 1) == FLAGS.max_steps:
                checkpoint_file = os.path.join(FLAGS.log_dir, "model.ckpt")
                saver.save(sess, checkpoint_file, global_step=step)
                print("Training Data Eval:")
                train = do_eval(sess, eval_correct, images_placeholder, labels_placeholder,
                                data_sets.train)
                print("Validation Data Eval:")
                valid = do_eval(sess, eval_correct, images_placeholder, labels_placeholder,
                                data_sets.validation)
                print("Test Data Eval:")
                test = do_eval(sess, eval_correct, images_placeholder, labels_placeholder,
                               data_sets.test)
        record(train_precision=train, validation_precision=valid, test_precision=test,
               final_loss=loss_value,
               checkpoint_saved=tf.train.latest_checkpoint(FLAGS.log_dir) is not None)


def main(_):
    if tf.gfile.Exists(FLAGS.log_dir):
        tf.gfile.DeleteRecursively(FLAGS.log_dir)
    tf.gfile.MakeDirs(FLAGS.log_dir)
    run_training()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--learning_rate", type=float, default=0.01)
    parser.add_argument("--max_steps", type=int, default=2000)
    parser.add_argument("--hidden1", type=int, default=128)
    parser.add_argument("--hidden2", type=int, default=32)
    parser.add_argument("--batch_size", type=int, default=100)
    parser.add_argument("--input_data_dir", type=str,
                        default=os.path.join(os.getenv("TEST_TMPDIR", "/tmp"),
                                             "tensorflow/mnist/input_data"))
    parser.add_argument("--log_dir", type=str,
                        default=os.path.join(os.getenv("TEST_TMPDIR", "/tmp"),
                                             "tensorflow/mnist/logs/fully_connected_feed"))
    parser.add_argument("--fake_data", default=False, action="store_true")
    FLAGS, unparsed = parser.parse_known_args()
    tf.app.run(main=main, argv=[sys.argv[0]] + unparsed)
