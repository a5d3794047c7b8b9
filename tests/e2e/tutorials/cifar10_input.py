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

"""Follows the CIFAR-10 tutorial's ``cifar10_input.py`` (reading the binary records with a
``FixedLengthRecordReader`` and queues, distorting training images;
https://github.com/tensorflow/models/blob/r1.13.0/tutorials/image/cifar10/cifar10_input.py,
Apache License 2.0), written with ``import dflab as tf``. Adapted: the examples per epoch
and preprocessing threads are parameters sized for the local files."""

import os

import dflab as tf

IMAGE_SIZE = 24
NUM_CLASSES = 10
NUM_EXAMPLES_PER_EPOCH_FOR_TRAIN = 1000
NUM_EXAMPLES_PER_EPOCH_FOR_EVAL = 200
NUM_PREPROCESS_THREADS = 2


def read_cifar10(filename_queue):
    """One record of the queue's files: ``.key``, ``.label`` (int32 [1]), ``.uint8image``."""

    class CIFAR10Record:
        pass

    result = CIFAR10Record()
    label_bytes = 1
    result.height = 32
    result.width = 32
    result.depth = 3
    image_bytes = result.height * result.width * result.depth
    record_bytes = label_bytes + image_bytes
    reader = tf.FixedLengthRecordReader(record_bytes=record_bytes)
    result.key, value = reader.read(filename_queue)
    record_bytes = tf.decode_raw(value, tf.uint8)
    result.label = tf.cast(tf.strided_slice(record_bytes, [0], [label_bytes]), tf.int32)
    depth_major = tf.reshape(
        tf.strided_slice(record_bytes, [label_bytes], [label_bytes + image_bytes]),
        [result.depth, result.height, result.width])
    result.uint8image = tf.transpose(depth_major, [1, 2, 0])
    return result


def _generate_image_and_label_batch(image, label, min_queue_examples, batch_size, shuffle):
    if shuffle:
        images, label_batch = tf.train.shuffle_batch(
            [image, label], batch_size=batch_size, num_threads=NUM_PREPROCESS_THREADS,
            capacity=min_queue_examples + 3 * batch_size,
            min_after_dequeue=min_queue_examples)
    else:
        images, label_batch = tf.train.batch(
            [image, label], batch_size=batch_size, num_threads=NUM_PREPROCESS_THREADS,
            capacity=min_queue_examples + 3 * batch_size)
    tf.summary.image("images", images)
    return images, tf.reshape(label_batch, [batch_size])


def distorted_inputs(data_dir, batch_size):
    """Randomly cropped, flipped, brightened and contrasted training batches."""
    filenames = [os.path.join(data_dir, f"data_batch_{i}.bin") for i in range(1, 6)]
    for f in filenames:
        if not tf.gfile.Exists(f):
            raise ValueError("Failed to find file: " + f)
    filename_queue = tf.train.string_input_producer(filenames)
    with tf.name_scope("data_augmentation"):
        read_input = read_cifar10(filename_queue)
        reshaped_image = tf.cast(read_input.uint8image, tf.float32)
        height = IMAGE_SIZE
        width = IMAGE_SIZE
        distorted_image = tf.random_crop(reshaped_image, [height, width, 3])
        distorted_image = tf.image.random_flip_left_right(distorted_image)
        distorted_image = tf.image.random_brightness(distorted_image, max_delta=63)
        distorted_image = tf.image.random_contrast(distorted_image, lower=0.2, upper=1.8)
        float_image = tf.image.per_image_standardization(distorted_image)
        float_image.set_shape([height, width, 3])
        read_input.label.set_shape([1])
        min_fraction_of_examples_in_queue = 0.4
        min_queue_examples = int(NUM_EXAMPLES_PER_EPOCH_FOR_TRAIN *
                                 min_fraction_of_examples_in_queue)
        print(f"Filling queue with {min_queue_examples} CIFAR images before starting to "
              "train. This will take a few minutes.")
    return _generate_image_and_label_batch(float_image, read_input.label, min_queue_examples,
                                           batch_size, shuffle=True)


def inputs(eval_data, data_dir, batch_size):
    """Centre-cropped evaluation (or training) batches, in order."""
    if not eval_data:
        filenames = [os.path.join(data_dir, f"data_batch_{i}.bin") for i in range(1, 6)]
        num_examples_per_epoch = NUM_EXAMPLES_PER_EPOCH_FOR_TRAIN
    else:
        filenames = [os.path.join(data_dir, "test_batch.bin")]
        num_examples_per_epoch = NUM_EXAMPLES_PER_EPOCH_FOR_EVAL
    for f in filenames:
        if not tf.gfile.Exists(f):
            raise ValueError("Failed to find file: " + f)
    with tf.name_scope("input"):
        filename_queue = tf.train.string_input_producer(filenames)
        read_input = read_cifar10(filename_queue)
        reshaped_image = tf.cast(read_input.uint8image, tf.float32)
        resized_image = tf.image.resize_image_with_crop_or_pad(reshaped_image, IMAGE_SIZE,
                                                               IMAGE_SIZE)
        float_image = tf.image.per_image_standardization(resized_image)
        float_image.set_shape([IMAGE_SIZE, IMAGE_SIZE, 3])
        read_input.label.set_shape([1])
        min_queue_examples = int(num_examples_per_epoch * 0.4)
    return _generate_image_and_label_batch(float_image, read_input.label, min_queue_examples,
                                           batch_size, shuffle=False)
