"""``tf.contrib.eager`` (TF 1.x's ``tfe``): eager execution's names as TF 1.x spelled them."""

from dflab.data.iterator import OwnedIterator as Iterator
from dflab.eager.backprop import GradientTape
from dflab.eager.context import (
    enable_eager_execution,
    executing_eagerly,
)
from dflab.eager.function import defun
from dflab.ops.resource_variable_ops import ResourceVariable as Variable
from dflab.ops.variable_scope import EagerVariableStore
from dflab.train.object_checkpoint import Checkpoint


def in_eager_mode() -> bool:
    return executing_eagerly()


def in_graph_mode() -> bool:
    return not executing_eagerly()


def num_gpus() -> int:
    """The eager context's GPU devices (simulated ones included)."""
    from dflab.eager.context import eager_context

    return sum(1 for d in eager_context().devices if d.device_type == "GPU")


__all__ = ["Checkpoint", "EagerVariableStore", "GradientTape", "Iterator", "Variable", "defun",
           "enable_eager_execution",
           "executing_eagerly", "in_eager_mode", "in_graph_mode", "num_gpus"]
