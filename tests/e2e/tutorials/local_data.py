"""Local stand-ins for the data the official tutorials download: a synthetic MNIST with the
``input_data.read_data_sets`` interface (DataSet with ``next_batch``, ``images``, ``labels``,
``num_examples``), a synthetic text corpus for word2vec, PTB-style text files, and
CIFAR-10-style binary record files. Deterministic (fixed seeds), small, NumPy only, so the
same data reaches dflab and TensorFlow.
"""

from __future__ import annotations

import collections
import os

import numpy as np

IMAGE_SIZE = 28
NUM_CLASSES = 10


class DataSet:
    """A set of images and labels, served in shuffled batches epoch after epoch."""

    def __init__(self, images, labels, seed=0):
        self._images = images
        self._labels = labels
        self._num_examples = images.shape[0]
        self._epochs_completed = 0
        self._index_in_epoch = 0
        self._rng = np.random.RandomState(seed)

    images = property(lambda self: self._images)
    labels = property(lambda self: self._labels)
    num_examples = property(lambda self: self._num_examples)
    epochs_completed = property(lambda self: self._epochs_completed)

    def next_batch(self, batch_size, fake_data=False, shuffle=True):
        """The next ``batch_size`` examples (reshuffled at each epoch)."""
        start = self._index_in_epoch
        if self._epochs_completed == 0 and start == 0 and shuffle:
            self._shuffle()
        if start + batch_size > self._num_examples:
            self._epochs_completed += 1
            rest = self._num_examples - start
            images_rest, labels_rest = self._images[start:], self._labels[start:]
            if shuffle:
                self._shuffle()
            self._index_in_epoch = batch_size - rest
            end = self._index_in_epoch
            return (np.concatenate([images_rest, self._images[:end]], 0),
                    np.concatenate([labels_rest, self._labels[:end]], 0))
        self._index_in_epoch += batch_size
        return self._images[start:self._index_in_epoch], self._labels[start:self._index_in_epoch]

    def _shuffle(self):
        perm = self._rng.permutation(self._num_examples)
        self._images, self._labels = self._images[perm], self._labels[perm]


Datasets = collections.namedtuple("Datasets", ["train", "validation", "test"])


def _synthetic_mnist(n, seed, reshape=True):
    """Digits as noisy copies of ten smooth prototype strokes, values in [0, 1]."""
    proto_rng = np.random.RandomState(1234)
    yy, xx = np.mgrid[0:IMAGE_SIZE, 0:IMAGE_SIZE] / (IMAGE_SIZE - 1.0)
    prototypes = []
    for _ in range(NUM_CLASSES):
        cy, cx, r, w = proto_rng.uniform([0.3, 0.3, 0.15, 0.05], [0.7, 0.7, 0.35, 0.12])
        ring = np.exp(-((np.hypot(yy - cy, xx - cx) - r) / w) ** 2)
        prototypes.append(ring / ring.max())
    rng = np.random.RandomState(seed)
    labels = rng.randint(0, NUM_CLASSES, size=n).astype(np.uint8)
    # Strokes of random intensity over a mostly dark background, with bright specks and a
    # stroke of another digit faintly mixed in: sparse like MNIST, and not separable.
    images = np.stack([prototypes[k] for k in labels]) * rng.uniform(0.2, 1.0, (n, 1, 1))
    images *= rng.uniform(0.5, 1.0, images.shape)
    others = rng.randint(0, NUM_CLASSES, size=n)
    images += 0.6 * np.stack([prototypes[k] for k in others]) * rng.uniform(0, 1, (n, 1, 1))
    specks = rng.rand(n, IMAGE_SIZE, IMAGE_SIZE) < 0.08
    images = np.where(specks, rng.rand(n, IMAGE_SIZE, IMAGE_SIZE), images)
    images = np.clip(images, 0.0, 1.0).astype(np.float32)
    if reshape:
        images = images.reshape(n, IMAGE_SIZE * IMAGE_SIZE)
    else:
        images = images[..., None]
    return images, labels


def read_data_sets(train_dir, fake_data=False, one_hot=False, dtype=None, reshape=True,
                   validation_size=200, seed=None, train_size=2000, test_size=500):
    """``input_data.read_data_sets`` on synthetic data (``train_dir`` is not read); with
    ``dtype`` uint8 the images are bytes in [0, 255], as MNIST's files hold them."""
    del train_dir, fake_data, seed
    images, labels = _synthetic_mnist(train_size + validation_size + test_size, 1, reshape)
    if getattr(dtype, "name", dtype) == "uint8":
        images = np.round(images * 255).astype(np.uint8)
    if one_hot:
        labels = np.eye(NUM_CLASSES, dtype=np.float32)[labels]
    train = slice(0, train_size)
    valid = slice(train_size, train_size + validation_size)
    test = slice(train_size + validation_size, None)
    return Datasets(DataSet(images[train], labels[train], 0),
                    DataSet(images[valid], labels[valid], 1),
                    DataSet(images[test], labels[test], 2))


def text_corpus(num_words=20000, vocab=400, seed=5):
    """Words drawn from a Zipf-like distribution with short repeated phrases, so that
    neighbouring words predict each other (what word2vec learns)."""
    rng = np.random.RandomState(seed)
    words = [f"w{i}" for i in range(vocab)]
    phrases = [rng.randint(0, vocab, size=rng.randint(2, 5)) for _ in range(60)]
    weights = 1.0 / np.arange(1, vocab + 1)
    weights /= weights.sum()
    out = []
    while len(out) < num_words:
        if rng.rand() < 0.5:
            out.extend(words[i] for i in phrases[rng.randint(len(phrases))])
        else:
            out.append(words[rng.choice(vocab, p=weights)])
    return out[:num_words]


def write_ptb(directory, vocab=60, seed=9):
    """``ptb.{train,valid,test}.txt`` of sentences from a small Markov chain."""
    rng = np.random.RandomState(seed)
    words = [f"t{i}" for i in range(vocab)]
    nxt = rng.dirichlet(np.full(vocab, 0.1), size=vocab)
    os.makedirs(directory, exist_ok=True)
    for part, lines in (("train", 300), ("valid", 40), ("test", 40)):
        with open(os.path.join(directory, f"ptb.{part}.txt"), "w") as f:
            for _ in range(lines):
                w = rng.randint(vocab)
                sentence = []
                for _ in range(rng.randint(5, 15)):
                    sentence.append(words[w])
                    w = rng.choice(vocab, p=nxt[w])
                f.write(" " + " ".join(sentence) + " \n")
    return directory


def write_cifar10(directory, records_per_file=200, seed=11):
    """CIFAR-10's binary layout: ``data_batch_{1..5}.bin`` and ``test_batch.bin`` of
    records [label byte][3072 bytes: 32x32 red, green, blue planes]."""
    rng = np.random.RandomState(seed)
    base = os.path.join(directory, "cifar-10-batches-bin")
    os.makedirs(base, exist_ok=True)
    colours = rng.randint(0, 256, size=(10, 3))
    names = [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]
    for name in names:
        labels = rng.randint(0, 10, size=records_per_file)
        planes = colours[labels][:, :, None, None] + rng.randint(-40, 40, (records_per_file, 3,
                                                                           32, 32))
        data = np.clip(planes, 0, 255).astype(np.uint8).reshape(records_per_file, -1)
        records = np.concatenate([labels.astype(np.uint8)[:, None], data], axis=1)
        with open(os.path.join(base, name), "wb") as f:
            f.write(records.tobytes())
    return directory
