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

"""Follows TensorFlow's how-to ``reading_data/convert_to_records.py`` (MNIST written as
TFRecord files of ``tf.train.Example`` protos;
https://github.com/tensorflow/tensorflow/blob/r1.15/tensorflow/examples/how_tos/reading_data/convert_to_records.py,
Apache License 2.0), written with ``import dflab as tf``. Adapted for local data
(``local_data``)."""

import argparse
import os
import sys

import local_data as mnist

import dflab as tf

FLAGS = None


def _int64_feature(value):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))


def _bytes_feature(value):
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))


def convert_to(data_set, name):
    images = data_set.images
    labels = data_set.labels
    num_examples = data_set.num_examples
    if images.shape[0] != num_examples:
        raise ValueError(f"Images size {images.shape[0]} does not match label size "
                         f"{num_examples}.")
    rows, cols, depth = images.shape[1], images.shape[2], images.shape[3]
    filename = os.path.join(FLAGS.directory, name + ".tfrecords")
    print("Writing", filename)
    with tf.python_io.TFRecordWriter(filename) as writer:
        for index in range(num_examples):
            image_raw = images[index].tobytes()
            example = tf.train.Example(features=tf.train.Features(feature={
                "height": _int64_feature(rows), "width": _int64_feature(cols),
                "depth": _int64_feature(depth), "label": _int64_feature(int(labels[index])),
                "image_raw": _bytes_feature(image_raw)}))
            writer.write(example.SerializeToString())


def main(unused_argv):
    data_sets = mnist.read_data_sets(FLAGS.directory, dtype=tf.uint8, reshape=False,
                                     validation_size=FLAGS.validation_size)
    convert_to(data_sets.train, "train")
    convert_to(data_sets.validation, "validation")
    convert_to(data_sets.test, "test")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--directory", type=str, default="/tmp/data")
    parser.add_argument("--validation_size", type=int, default=200)
    FLAGS, unparsed = parser.parse_known_args()
    os.makedirs(FLAGS.directory, exist_ok=True)
    tf.app.run(main=main, argv=[sys.argv[0]] + unparsed)
