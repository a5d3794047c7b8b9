"""Kernels make inf and NaN silently, as TF's do: every executor driver, the intra-op helper
threads and the eager paths run kernels with NumPy's floating-point errors ignored, and give
the caller's error state back; the user's own NumPy code (a ``py_func``) is not silenced."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dflab as tf
from dflab.eager import eager_mode
from dflab.kernels import fp_errors, registry
from dflab.runtime.stepping import StepRun

F32 = np.float32
# Every pair of these meets (an outer product as two flat vectors): inf - inf, inf * 0,
# 3e38 + 3e38, NaN cast to an int, a product that underflows, 1 / 0.
SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -1.0, 1.0, 3e38, -3e38, 1e-45], F32)
A = np.repeat(SPECIAL, SPECIAL.size)
B = np.tile(SPECIAL, SPECIAL.size)
M = A.reshape(10, 10)
N = B.reshape(10, 10)

# Ops whose NumPy kernels warn on these values when NumPy's errors are not ignored.
ARITHMETIC = {
    "add": lambda: tf.add(A, B),
    "subtract": lambda: tf.subtract(A, B),
    "multiply": lambda: tf.multiply(A, B),
    "square": lambda: tf.square(A),
    "sin": lambda: tf.sin(A),
    "add_n": lambda: tf.add_n([A, B, A]),
    "reduce_sum": lambda: tf.reduce_sum(M, 1),
    "reduce_prod": lambda: tf.reduce_prod(M, 1),
    "matmul": lambda: tf.matmul(M, N),
    "einsum": lambda: tf.einsum("ij,jk->ik", M, N),
    "cast to int32": lambda: tf.cast(A, tf.int32),
    "cast to float16": lambda: tf.cast(A, tf.float16),
    "bias_add": lambda: tf.nn.bias_add(M, SPECIAL),
    "l2_normalize": lambda: tf.nn.l2_normalize(M, 1),
    "batch_normalization": lambda: tf.nn.batch_normalization(A, B, B, None, None, 1e-3),
    "lrn": lambda: tf.nn.lrn(M.reshape(1, 1, 10, 10)),
    "sigmoid cross-entropy": lambda: tf.nn.sigmoid_cross_entropy_with_logits(labels=B,
                                                                               logits=A),
    "huber": lambda: tf.losses.huber_loss(A, B),
    "unsorted_segment_mean": lambda: tf.unsorted_segment_mean(A, np.repeat(np.arange(10), 10),
                                                              10),
}


def _numpy_warns_on_its_own():
    """The premise: NumPy, left to itself, warns on these values."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(RuntimeWarning):
            np.add(A, B)


@pytest.mark.parametrize("make", ARITHMETIC.values(), ids=list(ARITHMETIC))
def test_a_graph_run_is_silent_at_inf_and_nan(make):
    _numpy_warns_on_its_own()
    with tf.Graph().as_default():
        y = make()
        with tf.Session() as sess, warnings.catch_warnings():
            warnings.simplefilter("error")
            sess.run(y)  # the straight-line schedule
            sess.run([y, tf.identity(y)], options=tf.RunOptions(timeout_in_ms=60_000))


@pytest.mark.parametrize("make", ARITHMETIC.values(), ids=list(ARITHMETIC))
def test_an_eager_op_is_silent_at_inf_and_nan(make):
    with eager_mode(), warnings.catch_warnings():
        warnings.simplefilter("error")
        make()
        make()  # the cached kernel, on the fast paths


def test_the_dataflow_driver_the_stepper_and_intra_op_threads_are_silent():
    """Branches run on the inter-op pool; a big elementwise op is split among intra-op
    threads (NumPy's error state is per thread); the stepper runs node by node."""
    big = np.full((512, 1024), 3e38, F32)
    config = tf.ConfigProto(intra_op_parallelism_threads=2, inter_op_parallelism_threads=2)
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32)
        branches = [x * x + x, x - x * 2, tf.matmul(x[:64], tf.transpose(x[:64]))]
        with tf.Session(config=config) as sess, warnings.catch_warnings():
            warnings.simplefilter("error")
            for _ in range(3):
                out = sess.run(branches, {x: big})
            assert np.isinf(out[0]).all() and np.isinf(out[1]).all()
        with tf.Session() as sess, warnings.catch_warnings():
            warnings.simplefilter("error")
            run = StepRun(sess, branches[0], feed_dict={x: big[:2]})
            while not run.finished:
                run.step()
            assert np.isinf(run.result).all()


def test_the_callers_error_state_is_back_after_a_run_an_op_and_a_failure():
    with np.errstate(all="raise"):
        with tf.Graph().as_default():
            x = tf.placeholder(tf.float32)
            y = x * x
            bad = tf.reshape(x, [3])
            with tf.Session() as sess:
                assert np.isinf(sess.run(y, {x: F32(3e38)}))
                assert np.geterr()["over"] == "raise"
                with pytest.raises(tf.errors.InvalidArgumentError):
                    sess.run(bad, {x: np.ones(2, F32)})
                assert np.geterr()["invalid"] == "raise"
        with eager_mode():
            assert np.isinf((tf.constant(3e38) * 10.0).numpy())
            assert np.geterr()["over"] == "raise"
            with pytest.raises(tf.errors.InvalidArgumentError):
                tf.matmul(tf.ones([2, 3]), tf.ones([2, 3]))
            assert np.geterr()["over"] == "raise"
        with pytest.raises(FloatingPointError):
            np.float32(3e38) * np.float32(10)


def test_a_py_funcs_own_numpy_code_still_warns():
    def user_code(x):
        return np.log(x)  # the user's NumPy: warned, as under TF

    with tf.Graph().as_default():
        y = tf.py_func(user_code, [tf.constant(0.0)], tf.float32)
        with tf.Session() as sess, warnings.catch_warnings():
            warnings.simplefilter("error")
            with pytest.raises(tf.errors.UnknownError, match="divide by zero"):
                sess.run(y)


# Each op type of ``NO_FP_ERRORS``, built on the special values: the claim that it skips the
# error state at no risk is tested, not trusted.
_NO_FP = {
    "Identity": lambda: tf.identity(A),
    "StopGradient": lambda: tf.stop_gradient(A),
    "Reshape": lambda: tf.reshape(A, [10, 10]),
    "Transpose": lambda: tf.transpose(M),
    "ExpandDims": lambda: tf.expand_dims(A, 0),
    "Squeeze": lambda: tf.squeeze(A[None]),
    "ConcatV2": lambda: tf.concat([M, N], 1),
    "Pack": lambda: tf.stack([A, B]),
    "Unpack": lambda: tf.unstack(M),
    "Split": lambda: tf.split(A, 4),
    "SplitV": lambda: tf.split(A, [30, 70]),
    "Slice": lambda: tf.slice(M, [1, 2], [3, 4]),
    "StridedSlice": lambda: tf.constant(M)[1:5, ::2],
    "GatherV2": lambda: tf.gather(A, [0, 4, 2]),
    "GatherNd": lambda: tf.gather_nd(M, [[0, 1], [4, 2]]),
    "Tile": lambda: tf.tile(M, [2, 1]),
    "Pad": lambda: tf.pad(M, [[1, 1], [0, 2]]),
    "Fill": lambda: tf.fill([2, 3], np.inf),
    "ZerosLike": lambda: tf.zeros_like(A),
    "OnesLike": lambda: tf.ones_like(A),
    "ReverseV2": lambda: tf.reverse(M, [1]),
    "BroadcastTo": lambda: tf.broadcast_to(SPECIAL, [3, 10]),
    "Select": lambda: tf.where(A > 0, A, B),
    "SelectV2": lambda: tf.where_v2(A > 0, A, B),
    "ReadVariableOp": lambda: tf.Variable(A).read_value(),
    "AssignVariableOp": lambda: tf.Variable(A).assign(B),
    "Neg": lambda: tf.negative(A),
    "Abs": lambda: tf.abs(A),
    "Relu": lambda: tf.nn.relu(A),
    "Relu6": lambda: tf.nn.relu6(A),
    "Tanh": lambda: tf.tanh(A),
    "Sign": lambda: tf.sign(A),
    "Floor": lambda: tf.floor(A),
    "Ceil": lambda: tf.ceil(A),
    "Round": lambda: tf.round(A),
    "Rint": lambda: tf.rint(A),
    "Maximum": lambda: tf.maximum(A, B),
    "Minimum": lambda: tf.minimum(A, B),
    "Equal": lambda: tf.equal(A, B),
    "NotEqual": lambda: tf.not_equal(A, B),
    "Less": lambda: tf.less(A, B),
    "LessEqual": lambda: tf.less_equal(A, B),
    "Greater": lambda: tf.greater(A, B),
    "GreaterEqual": lambda: tf.greater_equal(A, B),
    "ArgMax": lambda: tf.argmax(M, 1),
    "ArgMin": lambda: tf.argmin(M, 1),
    "Max": lambda: tf.reduce_max(M, 1),
    "Min": lambda: tf.reduce_min(M, 1),
    "IsNan": lambda: tf.is_nan(A),
    "IsInf": lambda: tf.is_inf(A),
    "IsFinite": lambda: tf.is_finite(A),
    "PadV2": lambda: tf.pad(M, [[1, 1], [0, 0]], constant_values=np.nan),
    "MirrorPad": lambda: tf.pad(M, [[1, 1], [0, 2]], "REFLECT"),
    "OneHot": lambda: tf.one_hot([0, 5, -1], 3, on_value=np.inf, off_value=np.nan),
}


def test_every_op_said_to_make_no_fp_errors_has_a_case_here():
    assert set(_NO_FP) == set(fp_errors.NO_FP_ERRORS)


@pytest.mark.parametrize("op_type", sorted(_NO_FP))
def test_ops_said_to_make_no_fp_errors_make_none(op_type):
    """Run eagerly with NumPy's errors raising: these kernels run without the guard. A
    listener hears which op types ran, so each case is known to run its type."""
    ran = []
    with eager_mode() as ctx:
        ctx.op_listeners.append(lambda op, device, start, end: ran.append(op))
        try:
            with np.errstate(all="raise"), warnings.catch_warnings():
                warnings.simplefilter("error")
                _NO_FP[op_type]()
        finally:
            ctx.op_listeners.pop()
    assert op_type in ran


@pytest.mark.parametrize("make", [
    lambda z: tf.tanh(z), lambda z: tf.sign(z), lambda z: tf.abs(z), lambda z: -z,
    lambda z: tf.equal(z, z)], ids=["tanh", "sign", "abs", "neg", "equal"])
def test_complex_values_keep_the_guard_in_ops_that_skip_it_for_real_ones(make):
    """Complex ``tanh`` of inf*j is invalid, complex ``sign`` and ``abs`` overflow: an op of
    ``NO_FP_ERRORS`` on complex values is guarded all the same."""
    z = np.array([complex(0, np.inf), 3e38 + 3e38j, 1000 + 1j, np.nan], np.complex64)
    with eager_mode(), warnings.catch_warnings():
        warnings.simplefilter("error")
        make(tf.constant(z))
        make(tf.constant(z))  # the cached kernel


def test_quiet_silences_inside_and_restores_the_callers_error_state():
    def divide(x, y, out=None):
        return np.true_divide(x, y, out=out)

    quiet_divide = registry.quiet(divide)
    x, zero = np.array([1.0, 0.0]), np.array([0.0, 0.0])
    with np.errstate(all="raise"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = quiet_divide(x, zero)
            into = np.empty(2)
            quiet_divide(x, zero, out=into)  # ``out=``, as split_elementwise passes it
        assert got[0] == np.inf and np.isnan(got[1]) and np.isnan(into[1])
        assert np.geterr()["divide"] == "raise"  # the caller's state, back
        with pytest.raises(FloatingPointError):
            divide(x, zero)

        def fails(x):
            raise KeyError("boom")

        with pytest.raises(KeyError):
            registry.quiet(fails)(x)
        assert np.geterr()["invalid"] == "raise"  # restored on the way out of an error too


def test_ignore_and_restore_nest_as_a_stack():
    with np.errstate(all="raise"):
        outer = fp_errors.ignore_fp_errors()
        inner = fp_errors.ignore_fp_errors()
        assert np.geterr()["over"] == "ignore"
        fp_errors.restore_fp_errors(inner)
        assert np.geterr()["over"] == "ignore"
        fp_errors.restore_fp_errors(outer)
        assert np.geterr()["over"] == "raise"


@pytest.mark.parametrize("draw", [tf.random_uniform, tf.random_normal, tf.truncated_normal],
                         ids=["uniform", "normal", "truncated_normal"])
def test_float16_draws_are_silent_under_the_callers_errstate(draw):
    """A float16 sample is a wider draw cast down, which underflows near zero: the draws keep
    the guard (they are not among ``NO_FP_ERRORS``)."""
    with eager_mode(), np.errstate(all="raise"):
        for _ in range(20):
            draw([64, 64], dtype=tf.float16)
