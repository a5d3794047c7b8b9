"""Summaries of tensors that live on a GPU (the strict CuPy stand-in): the summary ops stay on
the host, the values cross to it, and the protos hold the same numbers as on a CPU."""

import numpy as np
import pytest

import dflab as tf
from dflab.runtime.config import ConfigProto, GraphOptions, RewriterConfig

pytest.importorskip("tensorboard")
from tensorboard.compat.proto import summary_pb2  # noqa: E402


def test_summaries_of_gpu_tensors_run_on_the_host(strict_gpu):
    w0 = np.array([[0.5, -1.5], [2.0, 0.25]], np.float32)
    with tf.device("/gpu:0"):
        w = tf.Variable(w0, name="w")
        loss = tf.reduce_sum(w * w)
        tf.summary.scalar("loss", loss)
        tf.summary.histogram("weights", w)
        tf.summary.image("w_image", tf.reshape(w, [1, 2, 2, 1]))
        merged = tf.summary.merge_all()
    # The stand-in cannot run CUDA C: keep the fused elementwise kernel off.
    config = ConfigProto(allow_soft_placement=True, graph_options=GraphOptions(
        rewrite_options=RewriterConfig(remapping=RewriterConfig.OFF)))
    with tf.Session(config=config) as sess:
        sess.run(w.initializer)
        summary = summary_pb2.Summary.FromString(sess.run(merged))
        plan = next(p for p in sess._master._plans.values() if merged.op in p.placement)
    for op in tf.get_default_graph().get_operations():
        if op.type.endswith("Summary") or op.type == "TensorSummaryV2":
            assert plan.placement[op].device.endswith("CPU:0"), op.name
    assert plan.placement[loss.op].device.endswith("GPU:0")
    values = {v.tag: v for v in summary.value}
    assert values["loss"].simple_value == pytest.approx(float(np.sum(w0 * w0)))
    histo = values["weights"].histo
    assert (histo.num, histo.min, histo.max) == (4, -1.5, 2.0)
    assert histo.sum == pytest.approx(float(w0.sum()))
    assert values["w_image/image/0"].image.colorspace == 1
