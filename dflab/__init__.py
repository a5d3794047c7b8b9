"""dflab: a dataflow engine in the spirit of the TensorFlow paper, with TF 1.x graph-mode API.

``import dflab as tf`` gives the ``tf.compat.v1`` names: graphs, ops, sessions, variables,
gradients and training. Layers (see docs/architecture.md): framework (graph IR) <- ops
(schemas, gradients, builders) <- kernels, runtime (placement, executor, session) <- train.
Nothing here imports the notebook layer except ``load_ipython_extension``, which ``%load_ext
dflab`` calls, and only when it is called.
"""

import sys

from dflab import kernels as _kernels  # noqa: F401 - registers every kernel
from dflab.framework import display as _display
from dflab.framework import errors
from dflab.framework.constant_op import constant
from dflab.framework.device_spec import DeviceSpec
from dflab.framework.dtypes import *  # noqa: F403
from dflab.framework.dtypes import DType, as_dtype
from dflab.framework.graph_io import GraphDef, NodeDef, import_graph_def
from dflab.framework.ops import (
    Graph,
    GraphKeys,
    Operation,
    Tensor,
    add_to_collection,
    add_to_collections,
    colocate_with,
    container,
    control_dependencies,
    convert_to_tensor,
    device,
    get_all_collection_keys,
    get_collection,
    get_collection_ref,
    get_default_graph,
    name_scope,
    register_tensor_conversion_function,
    reset_default_graph,
)
from dflab.framework.registry import NotDifferentiable, RegisterGradient, no_gradient
from dflab.framework.tensor_shape import Dimension, TensorShape
from dflab.ops.api import *  # noqa: F403
from dflab.runtime.config import (
    ConfigProto,
    GPUOptions,
    GraphOptions,
    OptimizerOptions,
    RewriterConfig,
    RunMetadata,
    RunOptions,
)
from dflab.runtime.session import InteractiveSession, Session, get_default_session

from dflab import compat, data, layers, losses, nn, summary, train  # noqa: E402  isort: skip
from dflab import python_io  # noqa: E402  isort: skip
from dflab.framework import graph_util  # noqa: E402  isort: skip
from dflab import autograph, contrib  # noqa: E402  isort: skip
from dflab import config  # noqa: E402  isort: skip
from dflab.distributed.cluster import ClusterSpec as _ClusterSpec  # noqa: E402  isort: skip
from dflab.distributed.server import Server as _Server  # noqa: E402  isort: skip
from dflab.summary.iterator import summary_iterator as _summary_iterator  # noqa: E402  isort: skip

from dflab.compat import (  # noqa: E402  isort: skip
    control_flow_v2_enabled,
    disable_control_flow_v2,
    disable_eager_execution,
    disable_tensor_equality,
    disable_v2_behavior,
    disable_v2_tensorshape,
    enable_eager_execution,
    enable_v2_behavior,
    executing_eagerly,
    executing_eagerly_outside_functions,
)
from dflab.compat import dimension_at_index, dimension_value  # noqa: E402  isort: skip
from dflab import namespaces as _namespaces  # noqa: E402  isort: skip
from dflab.framework.constant_op import constant_value as get_static_value  # noqa: E402
from dflab.framework.errors import OpError  # noqa: E402
from dflab.eager.backprop import GradientTape, UnconnectedGradients  # noqa: E402  isort: skip
from dflab.eager.context import init_scope  # noqa: E402  isort: skip
from dflab.eager.function import TensorSpec, function  # noqa: E402  isort: skip
from dflab.eager.vectorized_map import vectorized_map  # noqa: E402  isort: skip
from dflab.module import Module  # noqa: E402  isort: skip
from dflab.eager.py_function import py_function  # noqa: E402  isort: skip
from dflab.ops.gradients import AggregationMethod  # noqa: E402  isort: skip
from dflab.ops.variables import variable_creator_scope  # noqa: E402  isort: skip
from dflab.framework.registry import NotDifferentiable as NoGradient  # noqa: E402


# tf.math, tf.random, tf.initializers, tf.logging, tf.gfile …: the TF1 sub-namespaces.
_namespaces.install(sys.modules[__name__])

# tf.train's cluster names live in the distributed layer, above train: attached here.
train.ClusterSpec = _ClusterSpec
train.SummarySaverHook = summary.SummarySaverHook
from dflab.summary.hooks import ProfilerHook as _ProfilerHook  # noqa: E402  isort: skip
train.ProfilerHook = _ProfilerHook
train.summary_iterator = _summary_iterator
train.Server = _Server

__version__ = "0.1.0"

def _render(obj, include=None, exclude=None):
    # Imported at display time: pygraphviz is an optional extra and costs nothing until then.
    from dflab.visualize import mimebundle

    return mimebundle(obj, include, exclude)


_display.set_renderer(_render)


def _site(op) -> str:
    # A site in a notebook cell reads "Cell In[3], line 2", as IPython names it.
    from dflab.visualize.text import readable_site

    return readable_site(op.creation_site or "")


def _render_traceback(error) -> list:
    # In IPython, an op error shows the user's frames and the message, not dflab's internals.
    from dflab.visualize.tracebacks import render

    return render(error)


errors.set_site_formatter(_site)
errors.set_traceback_renderer(_render_traceback)


def load_ipython_extension(ipython):
    """``%load_ext dflab``: registers the ``%%dflab`` and ``%dflab`` magics."""
    from dflab.notebook.magics import load_ipython_extension as load

    load(ipython)

# The wider TF1 API's names that live in ops modules (tf.math.erfinv, tf.image, tf.sparse, …).
_namespaces.install_more(sys.modules[__name__])
_namespaces.refill(sys.modules[__name__])

# tf.train.Supervisor writes summaries, so it lives above the training layer.
from dflab.supervisor import Supervisor as _Supervisor  # noqa: E402  isort: skip

train.Supervisor = _Supervisor

# Names loaded on first use, so that ``import dflab`` imports neither absl nor tensorboard:
# tf.app and tf.flags (dflab/app.py, dflab/flags.py: absl's flags, for scripts' entry points)
# and TensorBoard's protos TF also has at the top level (tf.Summary, tf.Event, ...).
_SUBMODULES_ON_FIRST_USE = ("app", "flags")
_TOP_LEVEL_PROTOS = {"Summary": ("summary_pb2", "Summary"),
                     "SummaryMetadata": ("summary_pb2", "SummaryMetadata"),
                     "HistogramProto": ("histogram_pb2", "HistogramProto"),
                     "Event": ("event_pb2", "Event"),
                     "SessionLog": ("event_pb2", "SessionLog")}


def __getattr__(name: str):
    if name in _SUBMODULES_ON_FIRST_USE:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    if name in _TOP_LEVEL_PROTOS:
        from dflab.ops.summary_ops import tb_proto as _tb_proto

        module, cls = _TOP_LEVEL_PROTOS[name]
        return getattr(_tb_proto(module), cls)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_SUBMODULES_ON_FIRST_USE) | set(_TOP_LEVEL_PROTOS))
