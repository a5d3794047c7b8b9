"""``tf.train``: optimizers, global step, graph writing (checkpoints and queues come later)."""

from dflab.framework.graph_io import write_graph  # noqa: F401
