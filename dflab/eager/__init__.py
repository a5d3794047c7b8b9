"""Dynamic computation on the dataflow engine: eager execution, tapes and traced functions.

``context`` runs ops at once (TF 1.x's ``tf.enable_eager_execution``); ``backprop`` records
them on ``GradientTape``s and differentiates with the same gradient functions graphs use;
``function`` traces Python into ordinary dflab graphs (``tf.function``,
``tf.contrib.eager.defun``), called from eager code or from graphs through a call op;
``checkpoint`` saves and restores objects' variables (``tf.train.Checkpoint``). This layer sits
above the runtime (it runs kernels on a worker's devices) and below ``train``.
"""

from dflab.eager.context import (
    EagerContext,
    disable_eager_execution,
    eager_context,
    eager_mode,
    enable_eager_execution,
    executing_eagerly,
    graph_mode,
    init_scope,
)

__all__ = ["EagerContext", "eager_context", "disable_eager_execution", "eager_mode",
           "enable_eager_execution", "executing_eagerly", "graph_mode", "init_scope"]
