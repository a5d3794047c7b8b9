"""Fixtures of the tf.data tests: each test runs in a TF 1.x graph (a session and a one-shot
iterator) and eagerly (``for element in dataset``), and reads elements as plain Python."""

import numpy as np
import pytest

import dflab as tf
from dflab.eager import eager_mode


@pytest.fixture(params=["graph", "eager"])
def mode(request):
    """The test body builds its pipelines in this mode (eager execution on, or a graph)."""
    if request.param == "eager":
        with eager_mode():
            yield "eager"
    else:
        yield "graph"


def _plain(value):
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    if isinstance(value, tf.Tensor):
        value = value.numpy()
    return np.asarray(value).tolist()


def _steps(dataset, limit=1000):
    """Up to ``limit`` elements as plain Python values; an element that fails is its error's
    class name, and the reading goes on (as TF's iterators do)."""
    out = []
    if tf.executing_eagerly():
        it = iter(dataset)
        for _ in range(limit):
            try:
                out.append(_plain(it.get_next()))
            except tf.errors.OutOfRangeError:
                return out
            except tf.errors.OpError as e:
                out.append(type(e).__name__)
        return out
    nxt = tf.data.make_one_shot_iterator(dataset).get_next()
    with tf.Session() as sess:
        for _ in range(limit):
            try:
                out.append(_plain(sess.run(nxt)))
            except tf.errors.OutOfRangeError:
                return out
            except tf.errors.OpError as e:
                out.append(type(e).__name__)
    return out


def _value(tensors):
    """Tensors (a structure) evaluated: eagerly as they are, in a graph by a session."""
    if tf.executing_eagerly():
        return _plain(tensors)
    with tf.Session() as sess:
        return _plain(sess.run(tensors))


@pytest.fixture
def read(mode):
    """``read(dataset, limit=1000)``: its elements in ``mode`` (see ``_steps``)."""
    return _steps


@pytest.fixture
def value(mode):
    """``value(tensors)``: their values in ``mode``."""
    return _value


@pytest.fixture
def eager():
    """Eager execution on for the test (what ``tf.train.Checkpoint`` of iterators needs)."""
    with eager_mode():
        yield
