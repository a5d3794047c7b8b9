"""``tf.nn``: neural-network ops (activations, losses, convolution, pooling, normalisation…).

A namespace only: the ops live in ``dflab.ops.nn_ops`` (ops with their own kernels) and
``dflab.ops.nn_impl`` (composites); ``sigmoid`` and ``tanh`` are the math ops, re-exported
under ``tf.nn`` as TF1 does.
"""

from dflab.ops.math_ops import sigmoid, tanh
from dflab.ops.nn_impl import (
    batch_normalization,
    conv1d,
    embedding_lookup,
    l2_normalize,
    moments,
    sigmoid_cross_entropy_with_logits,
    weighted_cross_entropy_with_logits,
    xw_plus_b,
    zero_fraction,
)
from dflab.ops.nn_ops import (
    avg_pool,
    bias_add,
    conv2d,
    conv2d_backprop_filter,
    conv2d_backprop_input,
    conv2d_transpose,
    dropout,
    elu,
    in_top_k,
    l2_loss,
    leaky_relu,
    log_softmax,
    max_pool,
    relu,
    relu6,
    selu,
    softmax,
    softmax_cross_entropy_with_logits,
    softmax_cross_entropy_with_logits_v2,
    softplus,
    softsign,
    sparse_softmax_cross_entropy_with_logits,
    top_k,
)
from dflab.ops.normalization_ops import fused_batch_norm

# TF 1.14+ names for the 2-D pools.
max_pool2d = max_pool
avg_pool2d = avg_pool

__all__ = [
    "avg_pool", "avg_pool2d", "batch_normalization", "bias_add", "conv1d", "conv2d",
    "conv2d_backprop_filter", "conv2d_backprop_input", "conv2d_transpose", "dropout", "elu",
    "embedding_lookup", "fused_batch_norm", "in_top_k", "l2_loss", "l2_normalize",
    "leaky_relu", "log_softmax", "max_pool", "max_pool2d", "moments", "relu", "relu6", "selu",
    "sigmoid", "sigmoid_cross_entropy_with_logits", "softmax",
    "softmax_cross_entropy_with_logits", "softmax_cross_entropy_with_logits_v2", "softplus",
    "softsign", "sparse_softmax_cross_entropy_with_logits", "tanh", "top_k",
    "weighted_cross_entropy_with_logits", "xw_plus_b", "zero_fraction",
]

# Recurrent networks: the cells (``tf.nn.rnn_cell.*``) and the loops that run them.
from dflab.ops import rnn_cell_impl as rnn_cell  # noqa: E402
from dflab.ops.rnn import (  # noqa: E402
    bidirectional_dynamic_rnn,
    dynamic_rnn,
    static_bidirectional_rnn,
    static_rnn,
)

__all__ += ["bidirectional_dynamic_rnn", "dynamic_rnn", "rnn_cell", "static_bidirectional_rnn",
            "static_rnn"]

# Moving elements between space, depth and batch (TF 1.x's 4-D ``space_to_batch``).
from dflab.ops.space_ops import depth_to_space, space_to_batch, space_to_depth  # noqa: E402

__all__ += ["depth_to_space", "space_to_batch", "space_to_depth"]
# 3-D and depthwise convolutions and 3-D pools (their own ops).
from dflab.ops.conv_nd_ops import (  # noqa: E402
    avg_pool3d,
    conv3d,
    conv3d_backprop_filter,
    conv3d_backprop_filter_v2,
    conv3d_transpose,
    depthwise_conv2d_native,
    depthwise_conv2d_native_backprop_filter,
    depthwise_conv2d_native_backprop_input,
    max_pool3d,
)

# TF1 also spells the depthwise backprops without "native".
depthwise_conv2d_backprop_filter = depthwise_conv2d_native_backprop_filter
depthwise_conv2d_backprop_input = depthwise_conv2d_native_backprop_input

__all__ += ["avg_pool3d", "conv3d", "conv3d_backprop_filter", "conv3d_backprop_filter_v2",
            "conv3d_transpose", "depthwise_conv2d_backprop_filter",
            "depthwise_conv2d_backprop_input", "depthwise_conv2d_native",
            "depthwise_conv2d_native_backprop_filter", "depthwise_conv2d_native_backprop_input",
            "max_pool3d"]

# Rank-generic, 1-D, atrous, depthwise and separable front ends (compositions).
from dflab.ops.conv_impl import (  # noqa: E402
    atrous_conv2d,
    atrous_conv2d_transpose,
    avg_pool1d,
    avg_pool_v2,
    conv1d_transpose,
    conv_transpose,
    convolution,
    depthwise_conv2d,
    max_pool1d,
    max_pool_v2,
    pool,
    separable_conv2d,
)

__all__ += ["atrous_conv2d", "atrous_conv2d_transpose", "avg_pool1d", "avg_pool_v2",
            "conv1d_transpose", "conv_transpose", "convolution", "depthwise_conv2d",
            "max_pool1d", "max_pool_v2", "pool", "separable_conv2d"]

# Max pooling with argmax, grayscale dilation and erosion.
from dflab.ops.morphology_ops import dilation2d, erosion2d, max_pool_with_argmax  # noqa: E402

__all__ += ["dilation2d", "erosion2d", "max_pool_with_argmax"]

# More activations, losses and moments (compositions).
from dflab.ops.nn_impl_extra import (  # noqa: E402
    batch_norm_with_global_normalization,
    collapse_repeated,
    compute_average_loss,
    crelu,
    log_poisson_loss,
    normalize_moments,
    relu_layer,
    scale_regularization_loss,
    silu,
    sufficient_statistics,
    swish,
    weighted_moments,
)

__all__ += ["batch_norm_with_global_normalization", "collapse_repeated",
            "compute_average_loss", "crelu", "log_poisson_loss", "normalize_moments",
            "relu_layer", "scale_regularization_loss", "silu", "sufficient_statistics",
            "swish", "weighted_moments"]

from dflab.ops.raw_rnn import raw_rnn, static_state_saving_rnn  # noqa: E402

__all__ += ["raw_rnn", "static_state_saving_rnn"]
