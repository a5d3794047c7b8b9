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

"""Follows TensorFlow's how-to ``reading_data/fully_connected_reader.py`` (training from the
TFRecord files ``convert_to_records.py`` writes, through ``tf.data``;
https://github.com/tensorflow/tensorflow/blob/r1.15/tensorflow/examples/how_tos/reading_data/fully_connected_reader.py,
Apache License 2.0), written with ``import dflab as tf``. The steps run and the losses are
reported through ``results.record``."""

import argparse
import os
import sys
import time

import mnist
from results import record

import dflab as tf

FLAGS = None
TRAIN_FILE = "train.tfrecords"
VALIDATION_FILE = "validation.tfrecords"


def decode(serialized_example):
    features = tf.parse_single_example(
        serialized_example,
        features={"image_raw": tf.FixedLenFeature([], tf.string),
                  "label": tf.FixedLenFeature([], tf.int64)})
    image = tf.decode_raw(features["image_raw"], tf.uint8)
    image.set_shape((mnist.IMAGE_PIXELS))  # noqa: UP034 - the original's spelling
    label = tf.cast(features["label"], tf.int32)
    return image, label


def augment(image, label):
    return image, label


def normalize(image, label):
    image = tf.cast(image, tf.float32) * (1. / 255) - 0.5
    return image, label


def inputs(train, batch_size, num_epochs):
    if not num_epochs:
        num_epochs = None
    filename = os.path.join(FLAGS.train_dir, TRAIN_FILE if train else VALIDATION_FILE)
    with tf.name_scope("input"):
        dataset = tf.data.TFRecordDataset(filename)
        dataset = dataset.map(decode)
        dataset = dataset.map(augment)
        dataset = dataset.map(normalize)
        dataset = dataset.shuffle(1000 + 3 * batch_size)
        dataset = dataset.repeat(num_epochs)
        dataset = dataset.batch(batch_size)
        iterator = dataset.make_one_shot_iterator()
    return iterator.get_next()


def run_training():
    with tf.Graph().as_default():
        image_batch, label_batch = inputs(train=True, batch_size=FLAGS.batch_size,
                                          num_epochs=FLAGS.num_epochs)
        logits = mnist.inference(image_batch, FLAGS.hidden1, FLAGS.hidden2)
        loss = mnist.loss(logits, label_batch)
        train_op = mnist.training(loss, FLAGS.learning_rate)
        init_op = tf.group(tf.global_variables_initializer(),
                           tf.local_variables_initializer())
        losses = []
        with tf.Session() as sess:
            sess.run(init_op)
            try:
                step = 0
                while True:
                    start_time = time.time()
                    _, loss_value = sess.run([train_op, loss])
                    losses.append(loss_value)
                    duration = time.time() - start_time
                    if step % 100 == 0:
                        print(f"Step {step}: loss = {loss_value:.2f} ({duration:.3f} sec)")
                    step += 1
            except tf.errors.OutOfRangeError:
                print(f"Done training for {FLAGS.num_epochs} epochs, {step} steps.")
    record(steps=step, first_loss=losses[0], mean_last_losses=sum(losses[-5:]) / 5)


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
    FLAGS, unparsed = parser.parse_known_args()
    tf.app.run(main=main, argv=[sys.argv[0]] + unparsed)
