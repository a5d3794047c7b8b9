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

"""Follows TensorFlow's tutorial ``word2vec_basic.py`` (skip-gram word embeddings trained
with the NCE loss;
https://github.com/tensorflow/tensorflow/blob/r1.15/tensorflow/examples/tutorials/word2vec/word2vec_basic.py,
Apache License 2.0), written with ``import dflab as tf``: the same dataset building, batch
generator, graph, training loop, similarity evaluation and checkpoint. Adapted for local
data: a synthetic corpus (``local_data.text_corpus``) instead of text8, a smaller vocabulary,
a ``--steps`` flag, and the losses reported through ``results.record``; the embedding
projector and the t-SNE plot (optional in the original) are left out.
"""

import argparse
import collections
import math
import os
import random
import sys
import tempfile

import local_data
import numpy as np
from results import record

import dflab as tf


def word2vec_basic(log_dir, num_steps):
    vocabulary = local_data.text_corpus()
    print("Data size", len(vocabulary))

    vocabulary_size = 300

    def build_dataset(words, n_words):
        count = [["UNK", -1]]
        count.extend(collections.Counter(words).most_common(n_words - 1))
        dictionary = {}
        for word, _ in count:
            dictionary[word] = len(dictionary)
        data = []
        unk_count = 0
        for word in words:
            index = dictionary.get(word, 0)
            if index == 0:
                unk_count += 1
            data.append(index)
        count[0][1] = unk_count
        reversed_dictionary = dict(zip(dictionary.values(), dictionary.keys()))
        return data, count, dictionary, reversed_dictionary

    data, count, unused_dictionary, reverse_dictionary = build_dataset(vocabulary,
                                                                       vocabulary_size)
    del vocabulary
    print("Most common words (+UNK)", count[:5])

    data_index = 0

    def generate_batch(batch_size, num_skips, skip_window):
        nonlocal data_index
        assert batch_size % num_skips == 0
        assert num_skips <= 2 * skip_window
        batch = np.ndarray(shape=(batch_size), dtype=np.int32)
        labels = np.ndarray(shape=(batch_size, 1), dtype=np.int32)
        span = 2 * skip_window + 1
        buffer = collections.deque(maxlen=span)
        if data_index + span > len(data):
            data_index = 0
        buffer.extend(data[data_index:data_index + span])
        data_index += span
        for i in range(batch_size // num_skips):
            context_words = [w for w in range(span) if w != skip_window]
            words_to_use = random.sample(context_words, num_skips)
            for j, context_word in enumerate(words_to_use):
                batch[i * num_skips + j] = buffer[skip_window]
                labels[i * num_skips + j, 0] = buffer[context_word]
            if data_index == len(data):
                buffer.extend(data[0:span])
                data_index = span
            else:
                buffer.append(data[data_index])
                data_index += 1
        data_index = (data_index + len(data) - span) % len(data)
        return batch, labels

    batch_size = 128
    embedding_size = 128
    skip_window = 1
    num_skips = 2
    num_sampled = 64

    valid_size = 16
    valid_window = 100
    valid_examples = np.random.choice(valid_window, valid_size, replace=False)

    graph = tf.Graph()
    with graph.as_default():
        with tf.name_scope("inputs"):
            train_inputs = tf.placeholder(tf.int32, shape=[batch_size])
            train_labels = tf.placeholder(tf.int32, shape=[batch_size, 1])
            valid_dataset = tf.constant(valid_examples, dtype=tf.int32)

        with tf.device("/cpu:0"):
            with tf.name_scope("embeddings"):
                embeddings = tf.Variable(
                    tf.random_uniform([vocabulary_size, embedding_size], -1.0, 1.0))
                embed = tf.nn.embedding_lookup(embeddings, train_inputs)
            with tf.name_scope("weights"):
                nce_weights = tf.Variable(
                    tf.truncated_normal([vocabulary_size, embedding_size],
                                        stddev=1.0 / math.sqrt(embedding_size)))
            with tf.name_scope("biases"):
                nce_biases = tf.Variable(tf.zeros([vocabulary_size]))

        with tf.name_scope("loss"):
            loss = tf.reduce_mean(
                tf.nn.nce_loss(weights=nce_weights, biases=nce_biases, labels=train_labels,
                               inputs=embed, num_sampled=num_sampled,
                               num_classes=vocabulary_size))
        tf.summary.scalar("loss", loss)

        with tf.name_scope("optimizer"):
            optimizer = tf.train.GradientDescentOptimizer(1.0).minimize(loss)

        norm = tf.sqrt(tf.reduce_sum(tf.square(embeddings), 1, keepdims=True))
        normalized_embeddings = embeddings / norm
        valid_embeddings = tf.nn.embedding_lookup(normalized_embeddings, valid_dataset)
        similarity = tf.matmul(valid_embeddings, normalized_embeddings, transpose_b=True)

        merged = tf.summary.merge_all()
        init = tf.global_variables_initializer()
        saver = tf.train.Saver()

    first_average = None
    with tf.Session(graph=graph) as session:
        writer = tf.summary.FileWriter(log_dir, session.graph)
        init.run()
        print("Initialized")

        average_loss = 0
        for step in range(num_steps):
            batch_inputs, batch_labels = generate_batch(batch_size, num_skips, skip_window)
            feed_dict = {train_inputs: batch_inputs, train_labels: batch_labels}
            run_metadata = tf.RunMetadata()
            _, summary, loss_val = session.run([optimizer, merged, loss], feed_dict=feed_dict,
                                               run_metadata=run_metadata)
            average_loss += loss_val
            writer.add_summary(summary, step)
            if step == (num_steps - 1):
                writer.add_run_metadata(run_metadata, f"step{step}")
            if step % 200 == 0:
                if step > 0:
                    average_loss /= 200
                    first_average = first_average or average_loss
                print("Average loss at step ", step, ": ", average_loss)
                last_average = average_loss
                average_loss = 0
            if step % 1000 == 0:
                sim = similarity.eval()
                for i in range(valid_size):
                    valid_word = reverse_dictionary[valid_examples[i]]
                    top_k = 8
                    nearest = (-sim[i, :]).argsort()[1:top_k + 1]
                    close = ", ".join(reverse_dictionary[nearest[k]] for k in range(top_k))
                    print(f"Nearest to {valid_word}: {close}")
        final_embeddings = normalized_embeddings.eval()

        with open(log_dir + "/metadata.tsv", "w") as f:
            for i in range(vocabulary_size):
                f.write(reverse_dictionary[i] + "\n")
        saver.save(session, os.path.join(log_dir, "model.ckpt"))
    writer.close()
    record(first_average_loss=first_average, last_average_loss=last_average,
           embedding_norm=float(np.mean(np.linalg.norm(final_embeddings, axis=1))))


def main(unused_argv):
    current_path = os.path.dirname(os.path.realpath(sys.argv[0]))
    parser = argparse.ArgumentParser()
    parser.add_argument("--log_dir", type=str,
                        default=os.path.join(tempfile.mkdtemp(), "log"),
                        help=f"The log directory for TensorBoard summaries (near {current_path})")
    parser.add_argument("--steps", type=int, default=100001)
    flags, unused_flags = parser.parse_known_args()
    if not os.path.exists(flags.log_dir):
        os.makedirs(flags.log_dir)
    word2vec_basic(flags.log_dir, flags.steps)


if __name__ == "__main__":
    tf.app.run()
