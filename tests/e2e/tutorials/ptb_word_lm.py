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

"""Follows the PTB tutorial ``ptb_word_lm.py`` (an LSTM language model after Zaremba et al.;
https://github.com/tensorflow/models/blob/r1.13.0/tutorials/rnn/ptb/ptb_word_lm.py and its
``util.py``, Apache License 2.0), written with ``import dflab as tf``: the same flags,
models, meta-graph export and import, Supervisor-managed training and perplexities.
Adapted: local PTB-style files (``local_data.write_ptb``); ``tf.contrib`` (gone from TF 2.x)
replaced by ``tf.nn.rnn_cell`` and a ``sequence_loss`` written out below; a "tiny" model
config for CI; the perplexities reported through ``results.record``. The cuDNN and block
LSTM modes and the multi-GPU path are left out.
"""

import time

import local_data
import numpy as np
import ptb_reader as reader
from results import record

import dflab as tf
from dflab.python.client import device_lib

flags = tf.flags
logging = tf.logging

flags.DEFINE_string("model", "small", "A type of model. Possible options are: small, "
                    "medium, large, tiny.")
flags.DEFINE_string("data_path", None, "Where the training/test data is stored.")
flags.DEFINE_string("save_path", None, "Model output directory.")
flags.DEFINE_bool("use_fp16", False, "Train using 16-bit floats instead of 32bit floats")
flags.DEFINE_integer("num_gpus", 0, "How many GPUs to use (the original's default is 1).")
flags.DEFINE_string("rnn_mode", None, "The low level implementation of lstm cell.")
FLAGS = flags.FLAGS
BASIC = "basic"


def data_type():
    return tf.float16 if FLAGS.use_fp16 else tf.float32


def with_prefix(prefix, name):
    return "/".join((prefix, name))


def export_state_tuples(state_tuples, name):
    for state_tuple in state_tuples:
        tf.add_to_collection(name, state_tuple.c)
        tf.add_to_collection(name, state_tuple.h)


def import_state_tuples(state_tuples, name, num_replicas):
    restored = []
    for i in range(len(state_tuples) * num_replicas):
        c = tf.get_collection_ref(name)[2 * i + 0]
        h = tf.get_collection_ref(name)[2 * i + 1]
        restored.append(tf.nn.rnn_cell.LSTMStateTuple(c, h))
    return tuple(restored)


def sequence_loss(logits, targets, weights, average_across_timesteps=True,
                  average_across_batch=True):
    """``tf.contrib.seq2seq.sequence_loss``: weighted cross-entropy per time step."""
    num_classes = tf.shape(logits)[2]
    logits_flat = tf.reshape(logits, [-1, num_classes])
    targets = tf.reshape(targets, [-1])
    crossent = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=targets,
                                                              logits=logits_flat)
    crossent *= tf.reshape(weights, [-1])
    crossent = tf.reshape(crossent, tf.shape(logits)[0:2])
    if average_across_timesteps and average_across_batch:
        return tf.reduce_sum(crossent) / tf.reduce_sum(weights)
    if average_across_batch:
        return tf.reduce_sum(crossent, axis=[0]) / tf.reduce_sum(weights, axis=[0])
    if average_across_timesteps:
        return tf.reduce_sum(crossent, axis=[1]) / tf.reduce_sum(weights, axis=[1])
    return crossent


class PTBInput:
    """The input data."""

    def __init__(self, config, data, name=None):
        self.batch_size = batch_size = config.batch_size
        self.num_steps = num_steps = config.num_steps
        self.epoch_size = ((len(data) // batch_size) - 1) // num_steps
        self.input_data, self.targets = reader.ptb_producer(data, batch_size, num_steps,
                                                            name=name)


class PTBModel:
    """The PTB model."""

    def __init__(self, is_training, config, input_):
        self._is_training = is_training
        self._input = input_
        self._rnn_params = None
        self._cell = None
        self.batch_size = input_.batch_size
        self.num_steps = input_.num_steps
        size = config.hidden_size
        vocab_size = config.vocab_size

        with tf.device("/cpu:0"):
            embedding = tf.get_variable("embedding", [vocab_size, size], dtype=data_type())
            inputs = tf.nn.embedding_lookup(embedding, input_.input_data)

        if is_training and config.keep_prob < 1:
            inputs = tf.nn.dropout(inputs, config.keep_prob)

        output, state = self._build_rnn_graph(inputs, config, is_training)

        softmax_w = tf.get_variable("softmax_w", [size, vocab_size], dtype=data_type())
        softmax_b = tf.get_variable("softmax_b", [vocab_size], dtype=data_type())
        logits = tf.nn.xw_plus_b(output, softmax_w, softmax_b)
        logits = tf.reshape(logits, [self.batch_size, self.num_steps, vocab_size])
        loss = sequence_loss(logits, input_.targets,
                             tf.ones([self.batch_size, self.num_steps], dtype=data_type()),
                             average_across_timesteps=False, average_across_batch=True)
        self._cost = tf.reduce_sum(loss)
        self._final_state = state

        if not is_training:
            return

        self._lr = tf.Variable(0.0, trainable=False)
        tvars = tf.trainable_variables()
        grads, _ = tf.clip_by_global_norm(tf.gradients(self._cost, tvars),
                                          config.max_grad_norm)
        optimizer = tf.train.GradientDescentOptimizer(self._lr)
        self._train_op = optimizer.apply_gradients(
            zip(grads, tvars), global_step=tf.train.get_or_create_global_step())
        self._new_lr = tf.placeholder(tf.float32, shape=[], name="new_learning_rate")
        self._lr_update = tf.assign(self._lr, self._new_lr)

    def _build_rnn_graph(self, inputs, config, is_training):
        return self._build_rnn_graph_lstm(inputs, config, is_training)

    def _get_lstm_cell(self, config, is_training):
        if config.rnn_mode == BASIC:
            return tf.nn.rnn_cell.BasicLSTMCell(config.hidden_size, forget_bias=0.0,
                                                state_is_tuple=True,
                                                reuse=not is_training)
        raise ValueError(f"rnn_mode {config.rnn_mode} not supported")

    def _build_rnn_graph_lstm(self, inputs, config, is_training):
        def make_cell():
            cell = self._get_lstm_cell(config, is_training)
            if is_training and config.keep_prob < 1:
                cell = tf.nn.rnn_cell.DropoutWrapper(cell, output_keep_prob=config.keep_prob)
            return cell

        cell = tf.nn.rnn_cell.MultiRNNCell([make_cell() for _ in range(config.num_layers)],
                                           state_is_tuple=True)
        self._initial_state = cell.zero_state(config.batch_size, data_type())
        state = self._initial_state
        outputs = []
        with tf.variable_scope("RNN"):
            for time_step in range(self.num_steps):
                if time_step > 0:
                    tf.get_variable_scope().reuse_variables()
                (cell_output, state) = cell(inputs[:, time_step, :], state)
                outputs.append(cell_output)
        output = tf.reshape(tf.concat(outputs, 1), [-1, config.hidden_size])
        return output, state

    def assign_lr(self, session, lr_value):
        session.run(self._lr_update, feed_dict={self._new_lr: lr_value})

    def export_ops(self, name):
        """Exports ops to collections."""
        self._name = name
        ops = {with_prefix(self._name, "cost"): self._cost}
        if self._is_training:
            ops.update(lr=self._lr, new_lr=self._new_lr, lr_update=self._lr_update)
        for op_name, op in ops.items():
            tf.add_to_collection(op_name, op)
        self._initial_state_name = with_prefix(self._name, "initial")
        self._final_state_name = with_prefix(self._name, "final")
        export_state_tuples(self._initial_state, self._initial_state_name)
        export_state_tuples(self._final_state, self._final_state_name)

    def import_ops(self):
        """Imports ops from collections."""
        if self._is_training:
            self._train_op = tf.get_collection_ref("train_op")[0]
            self._lr = tf.get_collection_ref("lr")[0]
            self._new_lr = tf.get_collection_ref("new_lr")[0]
            self._lr_update = tf.get_collection_ref("lr_update")[0]
        self._cost = tf.get_collection_ref(with_prefix(self._name, "cost"))[0]
        num_replicas = 1
        self._initial_state = import_state_tuples(self._initial_state,
                                                  self._initial_state_name, num_replicas)
        self._final_state = import_state_tuples(self._final_state, self._final_state_name,
                                                num_replicas)

    input = property(lambda self: self._input)  # noqa: A003 - the tutorial's name
    initial_state = property(lambda self: self._initial_state)
    cost = property(lambda self: self._cost)
    final_state = property(lambda self: self._final_state)
    lr = property(lambda self: self._lr)
    train_op = property(lambda self: self._train_op)
    initial_state_name = property(lambda self: self._initial_state_name)
    final_state_name = property(lambda self: self._final_state_name)


class SmallConfig:
    init_scale = 0.1
    learning_rate = 1.0
    max_grad_norm = 5
    num_layers = 2
    num_steps = 20
    hidden_size = 200
    max_epoch = 4
    max_max_epoch = 13
    keep_prob = 1.0
    lr_decay = 0.5
    batch_size = 20
    vocab_size = 10000
    rnn_mode = BASIC


class TinyConfig:
    """Small enough for CI (the adaptation's)."""
    init_scale = 0.1
    learning_rate = 1.0
    max_grad_norm = 5
    num_layers = 2
    num_steps = 8
    hidden_size = 24
    max_epoch = 1
    max_max_epoch = 2
    keep_prob = 0.9
    lr_decay = 0.5
    batch_size = 8
    vocab_size = 10000
    rnn_mode = BASIC


def run_epoch(session, model, eval_op=None, verbose=False):
    """Runs the model on the given data; returns its perplexity."""
    start_time = time.time()
    costs = 0.0
    iters = 0
    state = session.run(model.initial_state)
    fetches = {"cost": model.cost, "final_state": model.final_state}
    if eval_op is not None:
        fetches["eval_op"] = eval_op
    for step in range(model.input.epoch_size):
        feed_dict = {}
        for i, (c, h) in enumerate(model.initial_state):
            feed_dict[c] = state[i].c
            feed_dict[h] = state[i].h
        vals = session.run(fetches, feed_dict)
        cost = vals["cost"]
        state = vals["final_state"]
        costs += cost
        iters += model.input.num_steps
        if verbose and step % max(model.input.epoch_size // 10, 1) == 10:
            print(f"{step * 1.0 / model.input.epoch_size:.3f} perplexity: "
                  f"{np.exp(costs / iters):.3f} speed: "
                  f"{iters * model.input.batch_size / (time.time() - start_time):.0f} wps")
    return np.exp(costs / iters)


def get_config():
    configs = {"small": SmallConfig, "tiny": TinyConfig}
    if FLAGS.model not in configs:
        raise ValueError(f"Invalid model: {FLAGS.model}")
    config = configs[FLAGS.model]()
    if FLAGS.rnn_mode:
        config.rnn_mode = FLAGS.rnn_mode
    return config


def main(_):
    if not FLAGS.data_path:
        raise ValueError("Must set --data_path to PTB data directory")
    local_data.write_ptb(FLAGS.data_path)
    gpus = [x.name for x in device_lib.list_local_devices() if x.device_type == "GPU"]
    if FLAGS.num_gpus > len(gpus):
        raise ValueError(f"Your machine has only {len(gpus)} gpus which is less than the "
                         f"requested --num_gpus={FLAGS.num_gpus}.")

    raw_data = reader.ptb_raw_data(FLAGS.data_path)
    train_data, valid_data, test_data, vocabulary = raw_data

    config = get_config()
    config.vocab_size = vocabulary
    eval_config = get_config()
    eval_config.vocab_size = vocabulary
    eval_config.batch_size = 1
    eval_config.num_steps = 1

    with tf.Graph().as_default():
        initializer = tf.random_uniform_initializer(-config.init_scale, config.init_scale)

        with tf.name_scope("Train"):
            train_input = PTBInput(config=config, data=train_data, name="TrainInput")
            with tf.variable_scope("Model", reuse=None, initializer=initializer):
                m = PTBModel(is_training=True, config=config, input_=train_input)
            tf.summary.scalar("Training Loss", m.cost)
            tf.summary.scalar("Learning Rate", m.lr)

        with tf.name_scope("Valid"):
            valid_input = PTBInput(config=config, data=valid_data, name="ValidInput")
            with tf.variable_scope("Model", reuse=True, initializer=initializer):
                mvalid = PTBModel(is_training=False, config=config, input_=valid_input)
            tf.summary.scalar("Validation Loss", mvalid.cost)

        with tf.name_scope("Test"):
            test_input = PTBInput(config=eval_config, data=test_data, name="TestInput")
            with tf.variable_scope("Model", reuse=True, initializer=initializer):
                mtest = PTBModel(is_training=False, config=eval_config, input_=test_input)

        models = {"Train": m, "Valid": mvalid, "Test": mtest}
        for name, model in models.items():
            model.export_ops(name)
        metagraph = tf.train.export_meta_graph()
        soft_placement = False

    with tf.Graph().as_default():
        tf.train.import_meta_graph(metagraph)
        for model in models.values():
            model.import_ops()
        sv = tf.train.Supervisor(logdir=FLAGS.save_path)
        config_proto = tf.ConfigProto(allow_soft_placement=soft_placement)
        with sv.managed_session(config=config_proto) as session:
            for i in range(config.max_max_epoch):
                lr_decay = config.lr_decay ** max(i + 1 - config.max_epoch, 0.0)
                m.assign_lr(session, config.learning_rate * lr_decay)
                print(f"Epoch: {i + 1} Learning rate: {session.run(m.lr):.3f}")
                train_perplexity = run_epoch(session, m, eval_op=m.train_op, verbose=True)
                print(f"Epoch: {i + 1} Train Perplexity: {train_perplexity:.3f}")
                valid_perplexity = run_epoch(session, mvalid)
                print(f"Epoch: {i + 1} Valid Perplexity: {valid_perplexity:.3f}")
            test_perplexity = run_epoch(session, mtest)
            print(f"Test Perplexity: {test_perplexity:.3f}")
            if FLAGS.save_path:
                print(f"Saving model to {FLAGS.save_path}.")
                sv.saver.save(session, FLAGS.save_path, global_step=sv.global_step)
    record(train_perplexity=train_perplexity, valid_perplexity=valid_perplexity,
           test_perplexity=test_perplexity, vocabulary=vocabulary)


if __name__ == "__main__":
    tf.app.run()
