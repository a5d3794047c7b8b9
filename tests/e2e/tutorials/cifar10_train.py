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

"""Follows the CIFAR-10 tutorial's ``cifar10_train.py`` (training with
``MonitoredTrainingSession``, a stop-at-step hook, a NaN hook and a logging hook;
https://github.com/tensorflow/models/blob/r1.13.0/tutorials/image/cifar10/cifar10_train.py,
Apache License 2.0), written with ``import dflab as tf``. Adapted for local data; the
losses are reported through ``results.record``."""

import time
from datetime import datetime

import cifar10
from results import record

import dflab as tf

FLAGS = tf.app.flags.FLAGS
tf.app.flags.DEFINE_string("train_dir", "/tmp/cifar10_train", "Where to write event logs "
                           "and checkpoint.")
tf.app.flags.DEFINE_integer("max_steps", 1000000, "Number of batches to run.")
tf.app.flags.DEFINE_boolean("log_device_placement", False, "Whether to log device placement.")
tf.app.flags.DEFINE_integer("log_frequency", 10, "How often to log results to the console.")

LOSSES = []


def train():
    with tf.Graph().as_default():
        global_step = tf.train.get_or_create_global_step()
        with tf.device("/cpu:0"):
            images, labels = cifar10.distorted_inputs()
        logits = cifar10.inference(images)
        loss = cifar10.loss(logits, labels)
        train_op = cifar10.train(loss, global_step)

        class _LoggerHook(tf.train.SessionRunHook):
            def begin(self):
                self._step = -1
                self._start_time = time.time()

            def before_run(self, run_context):
                self._step += 1
                return tf.train.SessionRunArgs(loss)

            def after_run(self, run_context, run_values):
                LOSSES.append(run_values.results)
                if self._step % FLAGS.log_frequency == 0:
                    current_time = time.time()
                    duration = current_time - self._start_time
                    self._start_time = current_time
                    loss_value = run_values.results
                    examples_per_sec = FLAGS.log_frequency * FLAGS.batch_size / duration
                    sec_per_batch = float(duration / FLAGS.log_frequency)
                    print(f"{datetime.now()}: step {self._step}, loss = {loss_value:.2f} "
                          f"({examples_per_sec:.1f} examples/sec; {sec_per_batch:.3f} "
                          "sec/batch)")

        with tf.train.MonitoredTrainingSession(
                checkpoint_dir=FLAGS.train_dir,
                hooks=[tf.train.StopAtStepHook(last_step=FLAGS.max_steps),
                       tf.train.NanTensorHook(loss), _LoggerHook()],
                config=tf.ConfigProto(log_device_placement=FLAGS.log_device_placement)
        ) as mon_sess:
            while not mon_sess.should_stop():
                mon_sess.run(train_op)
    record(first_loss=LOSSES[0], last_loss=LOSSES[-1], steps=len(LOSSES),
           mean_last_losses=sum(LOSSES[-3:]) / 3,
           checkpoint_saved=tf.train.latest_checkpoint(FLAGS.train_dir) is not None)


def main(argv=None):
    cifar10.maybe_download_and_extract()
    if tf.gfile.Exists(FLAGS.train_dir):
        tf.gfile.DeleteRecursively(FLAGS.train_dir)
    tf.gfile.MakeDirs(FLAGS.train_dir)
    train()


if __name__ == "__main__":
    tf.app.run()
