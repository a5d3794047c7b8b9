"""Sampled losses for many classes: ``tf.nn.nce_loss`` and ``tf.nn.sampled_softmax_loss``.

Both score each example against its true classes and a shared sample of negative classes
(by default ``log_uniform_candidate_sampler`` with ``unique=True``), built from ordinary ops
exactly as TF builds them: the rows of the weights and biases of the true and sampled ids
are looked up together (sharded weights included), each logit has ``log`` of its expected
count subtracted (so the loss estimates the full one), and, when asked, a sampled id that is
one of its example's true classes has ``-FLT_MAX`` added to its logit
(``compute_accidental_hits``). NCE then applies a sigmoid cross-entropy per logit (label
``1 / num_true`` for each true class) and sums over them; sampled softmax applies a softmax
cross-entropy over ``[true, sampled]``.
"""

from __future__ import annotations

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.ops import array_ops
from dflab.ops import candidate_sampling_ops as _cs
from dflab.ops import math_ops as _m
from dflab.ops.nn_impl import embedding_lookup, sigmoid_cross_entropy_with_logits
from dflab.ops.nn_ops import softmax_cross_entropy_with_logits_v2
from dflab.ops.slicing_ops import slice as _slice
from dflab.ops.sparse_ops import sparse_to_dense


def _sum_rows(x):
    """Row sums as a product with a column of ones (TF's way: its gradient is a matmul)."""
    cols = array_ops.shape(x)[1]
    ones = array_ops.ones(array_ops.stack([cols, 1]), x.dtype.base_dtype)
    return array_ops.reshape(_m.matmul(x, ones), [-1])


def _as_shards(weights):
    if hasattr(weights, "_get_variable_list"):  # a PartitionedVariable
        return list(weights._get_variable_list())
    return list(weights) if isinstance(weights, (list, tuple)) else [weights]


def _inputs_of(*xs):
    return [x for x in xs if _ops.is_tensor_like(x)]


def _compute_sampled_logits(weights, biases, labels, inputs, num_sampled, num_classes,
                            num_true=1, sampled_values=None, subtract_log_q=True,
                            remove_accidental_hits=False, partition_strategy="mod",
                            name=None, seed=None):
    """(logits, labels) of shape [batch, num_true + num_sampled]."""
    shards = _as_shards(weights)
    with _ops.name_scope(name, "compute_sampled_logits",
                         _inputs_of(*shards, biases, inputs, labels)):
        labels = _ops.convert_to_tensor(labels)
        if labels.dtype.base_dtype is not _dt.int64:
            labels = _m.cast(labels, _dt.int64)
        labels_flat = array_ops.reshape(labels, [-1])
        if sampled_values is None:
            sampled_values = _cs.log_uniform_candidate_sampler(
                true_classes=labels, num_true=num_true, num_sampled=num_sampled, unique=True,
                range_max=num_classes, seed=seed)
        sampled, true_expected, sampled_expected = (array_ops.stop_gradient(s)
                                                    for s in sampled_values)
        sampled = _m.cast(sampled, _dt.int64)
        all_ids = array_ops.concat([labels_flat, sampled], 0)

        all_w = embedding_lookup(shards, all_ids, partition_strategy=partition_strategy)
        if all_w.dtype.base_dtype is not inputs.dtype.base_dtype:
            all_w = _m.cast(all_w, inputs.dtype.base_dtype)
        n_true = array_ops.shape(labels_flat)[0]
        true_w = _slice(all_w, [0, 0], array_ops.stack([n_true, -1]))
        sampled_w = _slice(all_w, array_ops.stack([n_true, 0]), [-1, -1])
        sampled_logits = _m.matmul(inputs, sampled_w, transpose_b=True)

        all_b = embedding_lookup(biases, all_ids, partition_strategy=partition_strategy)
        if all_b.dtype.base_dtype is not inputs.dtype.base_dtype:
            all_b = _m.cast(all_b, inputs.dtype.base_dtype)
        true_b = _slice(all_b, [0], array_ops.shape(labels_flat))
        sampled_b = _slice(all_b, array_ops.shape(labels_flat), [-1])

        # true_logits[i, k] = inputs[i] . true_w[i * num_true + k]
        dim = array_ops.shape(true_w)[1:2]
        row_wise_dots = _m.multiply(
            array_ops.expand_dims(inputs, 1),
            array_ops.reshape(true_w, array_ops.concat([[-1, num_true], dim], 0)))
        dots = array_ops.reshape(row_wise_dots, array_ops.concat([[-1], dim], 0))
        true_logits = array_ops.reshape(_sum_rows(dots), [-1, num_true])
        true_logits = _m.add(true_logits, array_ops.reshape(true_b, [-1, num_true]))
        sampled_logits = _m.add(sampled_logits, sampled_b)

        if remove_accidental_hits:
            hits = _cs.compute_accidental_hits(labels, sampled, num_true=num_true)
            indices_2d = array_ops.reshape(hits.indices, [-1, 1])
            ids_2d = array_ops.reshape(_m.cast(hits.ids, _dt.int32), [-1, 1])
            sparse_indices = array_ops.concat([indices_2d, ids_2d], 1, "sparse_indices")
            logits_shape = array_ops.concat(
                [array_ops.shape(labels)[:1], array_ops.expand_dims(num_sampled, 0)], 0)
            weights_hit = hits.weights
            if sampled_logits.dtype.base_dtype is not weights_hit.dtype.base_dtype:
                weights_hit = _m.cast(weights_hit, sampled_logits.dtype.base_dtype)
            sampled_logits = _m.add(sampled_logits, sparse_to_dense(
                sparse_indices, logits_shape, weights_hit, default_value=0.0,
                validate_indices=False))

        if subtract_log_q:
            true_logits = _m.subtract(true_logits, _m.log(true_expected))
            sampled_logits = _m.subtract(sampled_logits, _m.log(sampled_expected))

        out_logits = array_ops.concat([true_logits, sampled_logits], 1)
        out_labels = array_ops.concat(
            [_m.truediv(array_ops.ones_like(true_logits), num_true),
             array_ops.zeros_like(sampled_logits)], 1)
        return out_logits, out_labels


def nce_loss(weights, biases, labels, inputs, num_sampled, num_classes, num_true=1,
             sampled_values=None, remove_accidental_hits=False, partition_strategy="mod",
             name="nce_loss"):
    """Noise-contrastive estimation loss, one value per example: ``weights`` ``[num_classes,
    dim]`` (or its shards), ``biases`` ``[num_classes]``, ``labels`` ``[batch, num_true]``,
    ``inputs`` ``[batch, dim]``."""
    logits, labels = _compute_sampled_logits(
        weights=weights, biases=biases, labels=labels, inputs=inputs,
        num_sampled=num_sampled, num_classes=num_classes, num_true=num_true,
        sampled_values=sampled_values, subtract_log_q=True,
        remove_accidental_hits=remove_accidental_hits, partition_strategy=partition_strategy,
        name=name)
    sampled_losses = sigmoid_cross_entropy_with_logits(labels=labels, logits=logits,
                                                       name="sampled_losses")
    return _sum_rows(sampled_losses)


def sampled_softmax_loss(weights, biases, labels, inputs, num_sampled, num_classes,
                         num_true=1, sampled_values=None, remove_accidental_hits=True,
                         partition_strategy="mod", name="sampled_softmax_loss", seed=None):
    """The softmax cross-entropy over the true and the sampled classes, one value per
    example (arguments as ``nce_loss``'s; accidental hits are removed by default)."""
    logits, labels = _compute_sampled_logits(
        weights=weights, biases=biases, labels=labels, inputs=inputs,
        num_sampled=num_sampled, num_classes=num_classes, num_true=num_true,
        sampled_values=sampled_values, subtract_log_q=True,
        remove_accidental_hits=remove_accidental_hits, partition_strategy=partition_strategy,
        name=name, seed=seed)
    labels = array_ops.stop_gradient(labels, name="labels_stop_gradient")
    return softmax_cross_entropy_with_logits_v2(labels=labels, logits=logits)


__all__: list[str] = []  # reached as tf.nn.* (see dflab.namespaces)
