"""Summary ops: each op's Summary proto against NumPy references and TF 1.x's own output.

The expected histogram and image values marked "from TF" were produced by running the same
program with TensorFlow 2.x's ``tf.compat.v1``.
"""

from __future__ import annotations

import io
import subprocess
import sys

import numpy as np
import pytest

import dflab as tf

pytest.importorskip("tensorboard")
from PIL import Image  # noqa: E402 - tensorboard's dependency
from tensorboard.compat.proto import summary_pb2  # noqa: E402
from tensorboard.util import tensor_util  # noqa: E402

DBL_MAX = sys.float_info.max


def run_summary(t, feed=None) -> summary_pb2.Summary:
    with tf.Session() as sess:
        serialized = sess.run(t, feed)
    assert isinstance(serialized, bytes)
    return summary_pb2.Summary.FromString(serialized)


# --- names and collections ------------------------------------------------------------------

def test_scalar_names_follow_name_scope_family_and_repeats():
    with tf.name_scope("outer"):
        a = tf.summary.scalar("loss", tf.constant(2.5), family="fam")
        b = tf.summary.scalar("loss", tf.constant(3))
        c = tf.summary.scalar("loss", tf.constant(3))
    d = tf.summary.scalar("a b:c", 1.0)
    assert [t.op.name for t in (a, b, c, d)] == ["outer/fam/loss", "outer/loss",
                                                  "outer/loss_1", "a_b_c"]
    tags = [run_summary(t).value[0].tag for t in (a, b, c, d)]
    assert tags == ["fam/outer/fam/loss", "outer/loss", "outer/loss_1", "a_b_c"]
    assert tf.get_collection(tf.GraphKeys.SUMMARIES) == [a, b, c, d]
    assert a.dtype == tf.string and a.shape.as_list() == []


def test_scalar_value_and_custom_collections():
    x = tf.placeholder(tf.float32, [])
    s = tf.summary.scalar("x", x, collections=["mine"])
    assert tf.get_collection("mine") == [s]
    assert tf.get_collection(tf.GraphKeys.SUMMARIES) == []
    value = run_summary(s, {x: 0.125}).value[0]
    assert value.tag == "x" and value.simple_value == 0.125
    assert run_summary(tf.summary.scalar("i", tf.constant(7))).value[0].simple_value == 7.0


def test_scalar_of_a_vector_fails_when_run():
    s = tf.summary.scalar("vec", tf.constant([1.0, 2.0]))
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"not the same shape: \[\] != \[2\]"):
        run_summary(s)


def test_summary_of_a_string_tensor_is_a_type_error():
    with pytest.raises(TypeError, match="real number"):
        tf.summary.scalar("s", tf.constant("text"))
    with pytest.raises(TypeError, match="real number"):
        tf.summary.histogram("s", tf.constant(["text"]))


# --- histogram ------------------------------------------------------------------------------

def test_histogram_matches_tf_bucket_layout_exactly():
    values = np.array([1.0, -2.0, 0.0, 3.5, 3.5, 1e-13, 100.0], np.float32)
    histo = run_summary(tf.summary.histogram("w hist", tf.constant(values))).value[0].histo
    # From TF: runs of empty buckets collapse into one empty bucket at the run's last limit.
    assert list(histo.bucket_limit) == [
        -2.1628190051144287, -1.9661990955585713, 0.0, 1e-12, 0.917246389039776,
        1.0089710279437536, 3.48324163592684, 3.8315657995195243, 97.88757810018231,
        107.67633591020055, DBL_MAX]
    assert list(histo.bucket) == [0, 1, 0, 2, 0, 1, 0, 2, 0, 1, 0]
    assert (histo.min, histo.max, histo.num) == (-2.0, 100.0, 7.0)
    assert histo.sum == 106.0000000000001  # float64 running sum, as TF adds
    assert histo.sum_squares == 10029.5


def test_histogram_and_images_of_random_data_are_identical_to_tfs():
    import hashlib

    rng = np.random.RandomState(7)
    v = (rng.randn(1000) * np.exp(rng.randn(1000) * 5)).astype(np.float32)
    img = (rng.randn(3, 5, 4, 3) * 3).astype(np.float32)
    img[1] = np.abs(img[1])
    img[2, 0, 0, 1] = np.inf
    tiny = rng.rand(1, 4, 4, 1) * 1e-7  # below TF's threshold: scaled by 0
    histo = run_summary(tf.summary.histogram("h", tf.constant(v)))
    images = run_summary(tf.summary.image("i", tf.constant(img))).value
    images = list(images) + list(run_summary(tf.summary.image("j", tf.constant(tiny))).value)

    def md5(data: bytes) -> str:
        return hashlib.md5(data).hexdigest()

    # From TF: the serialized Summary, and the decoded pixels of each image.
    assert md5(histo.SerializeToString()) == "005fdc4b12353300cab5321ff8110314"
    assert [md5(_pixels(v.image).tobytes()) for v in images] == [
        "bdce25ed18408fa1a4983dea68ac315c", "49eab9d45d8261128a33cd26952c3895",
        "a27289b9176fc95571fcd8204ea0c41f", "4ae71336e44bf9bf79d2752e234818a5"]


def test_histogram_buckets_count_every_value_once():
    rng = np.random.RandomState(3)
    values = np.concatenate([rng.randn(500) * 10, np.zeros(7), rng.rand(50) * 1e-3])
    histo = run_summary(tf.summary.histogram("h", tf.constant(values))).value[0].histo
    limits = np.array(histo.bucket_limit)
    counts = np.array(histo.bucket)
    assert counts.sum() == values.size == histo.num
    assert np.all(np.diff(limits) > 0)
    # Each emitted bucket holds exactly the values in [previous limit, its limit).
    lower = np.concatenate([[-np.inf], limits[:-1]])
    reference = [np.count_nonzero((values >= lo) & (values < hi)) for lo, hi in zip(lower, limits)]
    np.testing.assert_array_equal(counts, reference)
    assert histo.min == values.min() and histo.max == values.max()
    np.testing.assert_allclose(histo.sum, values.sum(), rtol=1e-12)
    np.testing.assert_allclose(histo.sum_squares, np.sum(values ** 2), rtol=1e-12)


def test_histogram_of_nothing_and_of_integers():
    empty = run_summary(tf.summary.histogram("empty", tf.zeros([0]))).value[0].histo
    assert (empty.min, empty.max, empty.num) == (DBL_MAX, -DBL_MAX, 0.0)
    assert list(empty.bucket_limit) == [DBL_MAX] and list(empty.bucket) == [0.0]
    ints = run_summary(tf.summary.histogram("ints", tf.constant([1, 2, 3]))).value[0].histo
    assert (ints.num, ints.sum, ints.sum_squares) == (3.0, 6.0, 14.0)


@pytest.mark.parametrize("bad, message", [(np.nan, "Nan in summary histogram for: h"),
                                          (np.inf, "Infinity in Histogram for: h")])
def test_histogram_rejects_non_finite_values(bad, message):
    h = tf.summary.histogram("h", tf.constant([1.0, bad]))
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
        run_summary(h)


# --- image ----------------------------------------------------------------------------------

def _pixels(image_proto) -> np.ndarray:
    return np.array(Image.open(io.BytesIO(image_proto.encoded_image_string)))


def test_float_images_are_scaled_per_image_like_tf():
    images = np.array([[[[0.0], [0.5]], [[1.0], [2.0]]],
                       [[[-1.0], [0.5]], [[1.0], [np.nan]]]], np.float32)
    summary = run_summary(tf.summary.image("img", tf.constant(images), max_outputs=3))
    assert [v.tag for v in summary.value] == ["img/image/0", "img/image/1"]
    first, second = summary.value
    assert (first.image.height, first.image.width, first.image.colorspace) == (2, 2, 1)
    assert first.image.encoded_image_string.startswith(b"\x89PNG")
    # From TF: all >= 0 scales by 255/max; with negatives, 127/max|v| around 128; NaN is red.
    np.testing.assert_array_equal(_pixels(first.image), [[0, 63], [127, 255]])
    np.testing.assert_array_equal(_pixels(second.image), [[1, 191], [255, 255]])


def test_uint8_images_are_stored_unchanged_and_max_outputs_bounds_the_batch():
    rgba = np.random.RandomState(0).randint(0, 256, (5, 3, 4, 4)).astype(np.uint8)
    summary = run_summary(tf.summary.image("rgba", tf.constant(rgba), max_outputs=2))
    assert [v.tag for v in summary.value] == ["rgba/image/0", "rgba/image/1"]
    for i, value in enumerate(summary.value):
        assert (value.image.height, value.image.width, value.image.colorspace) == (3, 4, 4)
        np.testing.assert_array_equal(_pixels(value.image), rgba[i])
    one = run_summary(tf.summary.image("one", tf.constant(rgba[:, :, :, :3]), max_outputs=1))
    assert [v.tag for v in one.value] == ["one/image"]
    np.testing.assert_array_equal(_pixels(one.value[0].image), rgba[0, :, :, :3])


def test_image_with_two_channels_fails_when_run():
    s = tf.summary.image("bad", tf.zeros([1, 2, 2, 2]))
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"not \[1,2,2,2\]"):
        run_summary(s)
    with pytest.raises(TypeError, match="dtype int32"):
        tf.summary.image("ints", tf.zeros([1, 2, 2, 1], tf.int32))


# --- text and tensors -----------------------------------------------------------------------

def test_text_is_a_string_tensor_with_the_text_plugin_metadata():
    t = tf.summary.text("txt", tf.constant(["hello", "wörld"]))
    assert t.op.type == "TensorSummaryV2"
    value = run_summary(t).value[0]
    assert value.tag == "txt"
    assert value.metadata.plugin_data.plugin_name == "text"
    assert list(value.tensor.string_val) == [b"hello", "wörld".encode()]
    assert [d.size for d in value.tensor.tensor_shape.dim] == [2]
    with pytest.raises(ValueError, match="to have dtype string"):
        tf.summary.text("num", tf.constant(1.0))


def test_tensor_summary_keeps_numeric_tensors_exactly():
    x = np.arange(6, dtype=np.float64).reshape(2, 3) / 7
    value = run_summary(tf.summary.tensor_summary("nums", tf.constant(x))).value[0]
    np.testing.assert_array_equal(tensor_util.make_ndarray(value.tensor), x)


# --- merge ----------------------------------------------------------------------------------

def test_merge_all_joins_every_summary_in_order():
    a = tf.summary.scalar("a", 1.0)
    h = tf.summary.histogram("h", tf.constant([1.0, 2.0]))
    t = tf.summary.text("t", tf.constant("x"))
    merged = tf.summary.merge_all()
    assert merged.op.name == "Merge/MergeSummary"
    assert [x.name for x in merged.op.inputs] == [a.name, h.name, t.name]
    summary = run_summary(merged)
    assert [v.tag for v in summary.value] == ["a", "h", "t"]
    assert summary.value[0].simple_value == 1.0
    assert summary.value[1].histo.num == 2
    # merge adds nothing to the summaries collection by default
    assert tf.get_collection(tf.GraphKeys.SUMMARIES) == [a, h, t]


def test_merge_of_a_merge_and_errors():
    a = tf.summary.scalar("a", 1.0)
    b = tf.summary.scalar("b", 2.0)
    inner = tf.summary.merge([a], name="inner")
    assert inner.op.name == "inner/inner"
    outer = tf.summary.merge([inner, b], collections=["merged"])
    assert tf.get_collection("merged") == [outer]
    assert [v.tag for v in run_summary(outer).value] == ["a", "b"]
    with pytest.raises(tf.errors.InvalidArgumentError, match="Duplicate tag a found"):
        run_summary(tf.summary.merge([a, inner]))
    with pytest.raises(tf.errors.InvalidArgumentError, match="Could not parse one of"):
        run_summary(tf.summary.merge([tf.constant(b"garbage\xff")]))
    assert tf.summary.merge_all(key="nothing here") is None
    with pytest.raises(TypeError, match="expected string"):
        tf.summary.merge([tf.constant(1.0)])


def test_summary_ops_stay_on_the_host():
    from dflab.kernels.registry import has_kernel, is_host_only

    for op_type in ("ScalarSummary", "HistogramSummary", "ImageSummary", "TensorSummaryV2",
                    "MergeSummary"):
        assert is_host_only(op_type)
        assert has_kernel(op_type, "CPU") and not has_kernel(op_type, "GPU")


def test_summary_protos_are_reachable_as_tf_summary_names():
    s = tf.summary.Summary(value=[tf.summary.Summary.Value(tag="x", simple_value=1.0)])
    assert tf.summary.Event(summary=s).summary.value[0].tag == "x"
    with pytest.raises(AttributeError):
        tf.summary.NoSuchThing  # noqa: B018


# --- tensorboard stays optional --------------------------------------------------------------

def _run_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)


def test_tensorboard_is_imported_only_when_needed_and_named_when_missing():
    # One interpreter for both checks: starting one costs more than the checks themselves.
    code = ("import sys\n"
            "import dflab as tf\n"
            "s = tf.summary.scalar('x', 1.0)\n"
            "print('tensorboard' in sys.modules)\n"
            "sys.modules['tensorboard'] = None  # as if it were not installed\n"
            "for use in (lambda: tf.Session().run(s), lambda: tf.summary.FileWriter('/tmp/x'),\n"
            "            lambda: tf.summary.text('t', tf.constant('a'))):\n"
            "    try:\n"
            "        use()\n"
            "    except ImportError as e:\n"
            "        print('dflab[summary]' in str(e))\n")
    out = _run_python(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "True", "True", "True"]


# --- input queues report how full they are, as in TF --------------------------------------------

def test_input_queues_add_fill_fraction_summaries():
    x = tf.constant([1.0, 2.0])
    tf.train.batch([x], 2, capacity=10)
    tf.train.shuffle_batch([x], 2, capacity=20, min_after_dequeue=5)
    tf.train.string_input_producer(["a", "b"])
    summaries = tf.get_collection(tf.GraphKeys.SUMMARIES)
    # the names TF 1.x gives them
    assert [s.op.name for s in summaries] == [
        "batch/fraction_of_10_full", "shuffle_batch/fraction_over_5_of_15_full",
        "input_producer/fraction_of_32_full"]
    batch_runner, shuffle_runner, _ = tf.get_collection(tf.GraphKeys.QUEUE_RUNNERS)
    merged = tf.summary.merge(summaries[:2])
    with tf.Session() as sess:
        for _ in range(3):
            sess.run(batch_runner.enqueue_ops[0])
        values = {v.tag: v.simple_value
                  for v in summary_pb2.Summary.FromString(sess.run(merged)).value}
        assert values == {"batch/fraction_of_10_full": pytest.approx(0.3),
                          "shuffle_batch/fraction_over_5_of_15_full": 0.0}
        for _ in range(8):
            sess.run(shuffle_runner.enqueue_ops[0])
        values = {v.tag: v.simple_value
                  for v in summary_pb2.Summary.FromString(sess.run(merged)).value}
        assert values["shuffle_batch/fraction_over_5_of_15_full"] == pytest.approx(3 / 15)
