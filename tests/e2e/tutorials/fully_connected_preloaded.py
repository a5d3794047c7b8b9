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

"""Follows TensorFlow's how-to ``reading_data/fully_connected_preloaded.py`` (the data held
in constants, fed by ``slice_input_producer`` and ``batch`` through queue runners;
https://github.com/tensorflow/tensorflow/blob/r1.15/tensorflow/examples/how_tos/reading_data/fully_connected_preloaded.py,
Apache License 2.0), written with ``import dflab as tf``. Adapted for local data
(``local_data``); the steps run and the last loss are reported through ``results.record``.
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


def run_training():
    data_sets = input_data.read_data_sets(FLAGS.train_dir, FLAGS.fake_data)
    with tf.Graph().as_default():
        with tf.name_scope("input"):
            with tf.device("/cpu:0"):
                input_images = tf.constant(data_sets.train.images)
                input_labels = tf.constant(data_sets.train.labels)
            image, label = tf.train.slice_input_producer([input_images, input_labels],
                                                         num_epochs=FLAGS.num_epochs)
            label = tf.cast(label, tf.int32)
            images, labels = tf.train.batch([image, label], batch_size=FLAGS.batch_size)

        logits = mnist.inference(images, FLAGS.hidden1, FLAGS.hidden2)
        loss = mnist.loss(logits, labels)
        train_op = mnist.training(loss, FLAGS.learning_rate)
        mnist.evaluation(logits, labels)
        summary_op = tf.summary.merge_all()
        saver = tf.train.Saver()
        init_op = tf.group(tf.global_variables_initializer(),
                           tf.local_variables_initializer())
        sess = tf.Session()
        sess.run(init_op)
        summary_writer = tf.summary.FileWriter(FLAGS.train_dir, sess.graph)
        coord = tf.train.Coordinator()
        threads = tf.train.start_queue_runners(sess=sess, coord=coord)
        step, losses = 0, []
        try:
            while not coord.should_stop():
                start_time = time.time()
                _, loss_value = sess.run([train_op, loss])
                losses.append(loss_value)
                duration = time.time() - start_time
                if step % 100 == 0:
                    print(f"Step {step}: loss = {loss_value:.2f} ({duration:.3f} sec)")
                    summary_str = sess.run(summary_op)
                    summary_writer.add_summary(summary_str, step)
                    step += 1
                if (step + 1) % 1000 == 0:
                    saver.save(sess, FLAGS.train_dir, global_step=step)
                step += 1
        except tf.errors.OutOfRangeError:
            print("Saving")
            saver.save(sess, FLAGS.train_dir, global_step=step)
            print(f"Done training for {FLAGS.num_epochs} epochs, {step} steps.")
        finally:
            coord.request_stop()
        coord.join(threads)
        sess.close()
    record(steps=step, train_batches=len(losses), first_loss=losses[0],
           mean_last_losses=sum(losses[-5:]) / 5)


def main(_):
    run_training()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--learning_rate", type=float, default=0.01)
    parser.add_argument("--num_epochs", type=int, default=2)
    parser.add_argument("--hidden1", type=int, default=128)
    parser.add_argument("--hidden2", type=int, default=32)
    parser.add_argument("--batch_size", type=int, default=100)
    parser.add_argument("--train_dir", type=str, default="/tmp/data")
    parser.add_argument("--fake_data", default=False, action="store_true")
    FLAGS, unparsed = parser.parse_known_args()
    os.makedirs(FLAGS.train_dir, exist_ok=True)
    tf.app.run(main=main, argv=[sys.argv[0]] + unparsed)
