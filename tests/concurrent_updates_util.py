"""Concurrent updates of one shared variable, as a table: every form of assign, scatter and
optimizer apply, run by several threads many times on one variable, must lose no update.

TF's rule: an update of a reference variable with ``use_locking=True`` holds the variable's lock
across its read-modify-write, and an update of a resource variable always does (TF's resource
kernels take the variable's mutex). Each case is built so that the serial result is exact in
floating point (small integers, powers of two, or sums of them), so one lost update shows as a
wrong total. For reference variables with ``use_locking=False`` TF promises nothing about the
totals; those runs only must not fail or change the variable's shape and dtype.

The CPU table runs in ``tests/ops/test_concurrent_updates.py``, the same table on the strict
GPU stand-in in ``tests/gpu/test_concurrent_updates_on_strict_gpu.py``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Callable

import numpy as np
import pytest

import dflab as tf
from dflab.ops import resource_variable_ops, training_ops

THREADS = 8
RUNS = 200

# Rows of a repeated-index case: row 0 three times, row 1 once, row 2 twice, row 3 never.
REPEATED = [0, 2, 0, 1, 2, 0]
REPEATS = np.bincount(REPEATED, minlength=4).astype(np.float64)  # [3, 1, 2, 0]


@dataclasses.dataclass(frozen=True)
class Case:
    """``build(make, n, lock) -> (updates, [(variable, expected value)])``: ``make(value)``
    makes a variable of the kind under test, ``lock`` are the locking keywords to pass, and
    ``n`` is how many times each of ``updates`` runs in all; thread ``k`` runs
    ``updates[k % len(updates)]``."""

    name: str
    build: Callable
    resource_only: bool = False
    runs: int = RUNS
    updates: int = 1  # how many updates ``build`` returns


def _op(x):
    """What a thread runs for ``x``: a scatter of a resource variable returns the variable's
    value read after the update, which is run too, as a user's ``sess.run(scatter)`` does."""
    return x if isinstance(x, tf.Operation) else x.op


# --- scatters ------------------------------------------------------------------------------------
def _scatter_add(indices, sign=1.0, fn=None):
    def build(make, n, lock):
        v = make(np.zeros((4, 3), np.float32))
        upd = np.full((len(indices), 3), 1.0, np.float32)
        op = (fn or tf.scatter_add)(v, indices, upd, **lock)
        counts = np.bincount(indices, minlength=4).astype(np.float32)
        return [_op(op)], [(v, sign * n * np.repeat(counts[:, None], 3, axis=1))]

    return build


def _scatter_power(fn, start_exponent, step):
    """Multiply (``step`` 1) or divide (``step`` -1) by two at repeated indices, in float64:
    every value is an exact power of two."""

    def build(make, n, lock):
        v = make(np.full((4, 3), 2.0 ** start_exponent))
        op = fn(v, REPEATED, np.full((len(REPEATED), 3), 2.0), **lock)
        exponent = start_exponent + step * n * REPEATS
        return [_op(op)], [(v, np.repeat(2.0 ** exponent[:, None], 3, axis=1))]

    return build


def _racing_adds(other):
    """``other(v)`` (an update that leaves the rows the adds touch as they are, or touches
    others) racing scatter adds of ones at repeated indices: the adds' totals are exact only if
    neither update writes back rows it read before the other's write."""

    def build(make, n, lock):
        v = make(np.zeros((6, 3), np.float32))
        add = tf.scatter_add(v, REPEATED, np.ones((len(REPEATED), 3), np.float32), **lock)
        want = np.zeros((6, 3), np.float32)
        want[:4] = n * REPEATS[:, None]
        write, rows_after = other(v, lock)
        for row, value in rows_after.items():
            want[row] = value
        return [_op(add), _op(write)], [(v, want)]

    return build


def _update_other_rows(v, lock):
    return tf.scatter_update(v, [4, 5], np.full((2, 3), 7.0, np.float32), **lock), {4: 7, 5: 7}


def _resource_max(v, lock):
    return resource_variable_ops.scatter_op("Max", v, [0, 1, 2, 3],
                                            np.zeros((4, 3), np.float32)), {}


def _resource_min(v, lock):
    return resource_variable_ops.scatter_op("Min", v, [0, 1, 2, 3],
                                            np.full((4, 3), 1e9, np.float32)), {}


# --- dense assigns -------------------------------------------------------------------------------
def _assign_add(sign):
    def build(make, n, lock):
        v = make(np.zeros((8, 5), np.float32))
        fn = tf.assign_add if sign > 0 else tf.assign_sub
        return [_op(fn(v, np.ones((8, 5), np.float32), **lock))], \
            [(v, np.full((8, 5), sign * n, np.float32))]

    return build


# --- optimizer applies ---------------------------------------------------------------------------
# Hyper-parameters that make each rule count exactly: every apply moves var by a whole number.
def _gradient_descent(shape):
    def build(make, n, lock):
        var = make(np.zeros(shape, np.float32))
        op = training_ops.apply_gradient_descent(var, 1.0, -np.ones(shape, np.float32), **lock)
        return [_op(op)], [(var, np.full(shape, n, np.float32))]

    return build


def _momentum(make, n, lock):  # momentum 0: accum = grad; var -= lr * grad
    var, accum = make(np.zeros((4, 3), np.float32)), make(np.zeros((4, 3), np.float32))
    op = training_ops.apply_momentum(var, accum, 1.0, -np.ones((4, 3), np.float32), 0.0, **lock)
    return [_op(op)], [(var, np.full((4, 3), n)), (accum, np.full((4, 3), -1.0))]


def _adagrad_var(grad_sum, n):
    """Var after ``n`` serial Adagrad steps (lr 1) whose summed gradient is ``grad_sum``:
    TF's expression in float32, step by step."""
    var, g, one = np.float32(0), np.float32(grad_sum), np.float32(1)
    for k in range(1, n + 1):
        var = var - g * one * (one / np.sqrt(np.float32(grad_sum * grad_sum * k)))
    return var


def _adagrad(make, n, lock):
    var, accum = make(np.zeros((4, 3), np.float32)), make(np.zeros((4, 3), np.float32))
    op = training_ops.apply_adagrad(var, accum, 1.0, np.ones((4, 3), np.float32), **lock)
    return [_op(op)], [(accum, np.full((4, 3), n)), (var, np.full((4, 3), _adagrad_var(1, n)))]


def _rms_prop(make, n, lock):  # rho 0, momentum 1: ms = g^2 = 1, mom += 1, var -= mom
    var, ms, mom = (make(np.zeros((4, 3), np.float32)) for _ in range(3))
    op = training_ops.apply_rms_prop(var, ms, mom, 1.0, 0.0, 1.0, 0.0,
                                     np.ones((4, 3), np.float32), **lock)
    return [_op(op)], [(mom, np.full((4, 3), n)), (ms, np.ones((4, 3))),
                       (var, np.full((4, 3), -n * (n + 1) / 2))]


def _centered_rms_prop(make, n, lock):  # mg = g, ms = g^2, denominator eps = 1: mom += 1
    var, mg, ms, mom = (make(np.zeros((4, 3), np.float32)) for _ in range(4))
    op = training_ops.apply_centered_rms_prop(var, mg, ms, mom, 1.0, 0.0, 1.0, 1.0,
                                              np.ones((4, 3), np.float32), **lock)
    return [_op(op)], [(mom, np.full((4, 3), n)), (var, np.full((4, 3), -n * (n + 1) / 2))]


def _adam(shape):
    """beta1 = beta2 = 0, powers 0, epsilon 0, lr 1: m = g, v = g^2, var -= g / |g|."""

    def build(make, n, lock):
        var, m, v = (make(np.zeros(shape, np.float32)) for _ in range(3))
        op = training_ops.apply_adam(var, m, v, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0,
                                     np.ones(shape, np.float32), **lock)
        return [_op(op)], [(var, np.full(shape, -n)), (m, np.ones(shape)), (v, np.ones(shape))]

    return build


def _sparse(grad_per_use=1.0):
    return (np.full((len(REPEATED), 3), grad_per_use, np.float32),
            np.asarray(REPEATED, np.int32))


def _sparse_momentum(make, n, lock):  # momentum 0, gradient -1 per use: var += uses
    var, accum = make(np.zeros((4, 3), np.float32)), make(np.zeros((4, 3), np.float32))
    grad, idx = _sparse(-1.0)
    op = training_ops.sparse_apply_momentum(var, accum, 1.0, grad, idx, 0.0, **lock)
    return [_op(op)], [(var, n * REPEATS[:, None] * np.ones(3))]


def _sparse_adagrad(make, n, lock):  # accum += (summed gradient)^2
    var, accum = make(np.zeros((4, 3), np.float32)), make(np.zeros((4, 3), np.float32))
    grad, idx = _sparse()
    op = training_ops.sparse_apply_adagrad(var, accum, 1.0, grad, idx, **lock)
    var_want = [_adagrad_var(r, n) if r else 0.0 for r in REPEATS]
    return [_op(op)], [(accum, n * REPEATS[:, None] ** 2 * np.ones(3)),
                       (var, np.repeat(np.float32(var_want)[:, None], 3, axis=1))]


def _sparse_rms_prop(make, n, lock):  # mom += g / |g| = 1 on touched rows
    var, ms, mom = (make(np.zeros((4, 3), np.float32)) for _ in range(3))
    grad, idx = _sparse()
    op = training_ops.sparse_apply_rms_prop(var, ms, mom, 1.0, 0.0, 1.0, 0.0, grad, idx, **lock)
    touched = (REPEATS > 0)[:, None] * np.ones(3)
    return [_op(op)], [(mom, n * touched), (var, -n * (n + 1) / 2 * touched)]


def _sparse_centered_rms_prop(make, n, lock):  # denominator eps = 1: mom += summed gradient
    var, mg, ms, mom = (make(np.zeros((4, 3), np.float32)) for _ in range(4))
    grad, idx = _sparse()
    op = training_ops.sparse_apply_centered_rms_prop(var, mg, ms, mom, 1.0, 0.0, 1.0, 1.0,
                                                     grad, idx, **lock)
    uses = REPEATS[:, None] * np.ones(3)
    return [_op(op)], [(mom, n * uses), (var, -uses * n * (n + 1) / 2)]


def _sparse_adam(make, n, lock):
    """Gradients summing to 1 on each touched row; epsilon 1: var -= 1 / (1 + 1) there."""
    var, m, v = (make(np.zeros((4, 3), np.float32)) for _ in range(3))
    idx = np.asarray(REPEATED, np.int32)
    grad = np.repeat(np.float32([[0.25], [0.5], [0.25], [1.0], [0.5], [0.5]]), 3, axis=1)
    op = training_ops.sparse_apply_adam(var, m, v, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0, grad, idx,
                                        **lock)
    touched = (REPEATS > 0)[:, None] * np.ones(3)
    return [_op(op)], [(var, -0.5 * n * touched), (m, touched), (v, touched)]


BIG = (256, 256)  # one block of the host's blocked dense update (in place when unshared)

CASES = [
    Case("scatter_add all rows", _scatter_add([0, 1, 2, 3])),
    Case("scatter_add repeated", _scatter_add(REPEATED)),
    Case("scatter_sub all rows", _scatter_add([0, 1, 2, 3], -1.0, tf.scatter_sub)),
    Case("scatter_sub repeated", _scatter_add(REPEATED, -1.0, tf.scatter_sub)),
    # 2**(8 threads x 60 runs x 3 uses) stays inside float64's exponents.
    Case("scatter_mul repeated", _scatter_power(tf.scatter_mul, -700, 1), runs=60),
    Case("scatter_div repeated", _scatter_power(tf.scatter_div, 700, -1), runs=60),
    Case("scatter_update racing adds", _racing_adds(_update_other_rows), updates=2),
    Case("scatter_max racing adds", _racing_adds(_resource_max), resource_only=True,
         updates=2),
    Case("scatter_min racing adds", _racing_adds(_resource_min), resource_only=True,
         updates=2),
    Case("assign_add", _assign_add(1.0)),
    Case("assign_sub", _assign_add(-1.0)),
    Case("apply_gradient_descent", _gradient_descent((4, 3))),
    Case("apply_gradient_descent big", _gradient_descent(BIG), runs=40),
    Case("apply_momentum", _momentum),
    Case("apply_adagrad", _adagrad),
    Case("apply_rms_prop", _rms_prop),
    Case("apply_centered_rms_prop", _centered_rms_prop),
    Case("apply_adam", _adam((4, 3))),
    Case("apply_adam big", _adam(BIG), runs=40),
    Case("sparse_apply_momentum", _sparse_momentum),
    Case("sparse_apply_adagrad", _sparse_adagrad),
    Case("sparse_apply_rms_prop", _sparse_rms_prop),
    Case("sparse_apply_centered_rms_prop", _sparse_centered_rms_prop),
    Case("sparse_apply_adam", _sparse_adam),
]

# (case, use_resource) pairs for pytest: every case on both kinds of variable, except where TF
# has no reference form of the update.
LOCKED_RUNS = [pytest.param(c, r, id=f"{c.name}-{'resource' if r else 'ref'}")
               for c in CASES for r in (False, True) if r or not c.resource_only]


def run_concurrently(sess, updates, runs: int, threads: int = THREADS) -> None:
    """``threads`` threads, started together, each running its update ``runs`` times."""
    start = threading.Barrier(threads)
    failures = []

    def work(op):
        try:
            start.wait()
            for _ in range(runs):
                sess.run(op)
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
            failures.append(e)

    workers = [threading.Thread(target=work, args=(updates[k % len(updates)],))
               for k in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    if failures:
        raise failures[0]


def run_case(case: Case, use_resource: bool, use_locking: bool = True, device=None,
             config=None, runs: int | None = None) -> list[tuple[np.ndarray, np.ndarray]]:
    """Build ``case`` on a fresh graph (on ``device``), run it concurrently (``runs`` times per
    thread, the case's own count by default) and return each checked variable's (final
    value, expected value in the variable's dtype). A resource variable's updates are built
    with ``use_locking=False``: they must lock anyway."""
    runs = case.runs if runs is None else runs
    graph = tf.Graph()
    placed = tf.device(device) if device else contextlib.nullcontext()
    with graph.as_default(), placed:
        def make(value):
            return tf.Variable(value, use_resource=use_resource)

        lock = {"use_locking": use_locking and not use_resource}
        updates, expected = case.build(make, THREADS // case.updates * runs, lock)
        assert len(updates) == case.updates and THREADS % case.updates == 0
        init = tf.global_variables_initializer()
    with tf.Session(graph=graph, config=config) as sess:
        sess.run(init)
        run_concurrently(sess, updates, runs)
        values = [(sess.run(v), np.asarray(want, v.dtype.base_dtype.as_numpy_dtype))
                  for v, want in expected]
        if device:
            _check_placed(sess, graph, updates, tf.DeviceSpec.from_string(device).device_type)
        return values


def _is_update(op_type: str) -> bool:
    return op_type.removeprefix("Resource").startswith(("Scatter", "Assign", "Apply",
                                                        "SparseApply"))


def _check_placed(sess, graph, updates, device_type: str) -> None:
    """Each update's own op ran on a device of ``device_type`` (one more traced run)."""
    for op in updates:
        md = tf.RunMetadata()
        sess.run(op, options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE),
                 run_metadata=md)
        ran = {ns.node_name: d.device for d in md.step_stats.dev_stats for ns in d.node_stats}
        writers = [o.name for o in graph.get_operations() if o.name in ran and _is_update(o.type)]
        assert writers and all(f"{device_type}:" in ran[n] for n in writers), ran


def check_case(case: Case, use_resource: bool, device=None, config=None) -> None:
    """Run ``case`` with locking (resource variables: always) and check every total exactly."""
    for k, (got, want) in enumerate(run_case(case, use_resource, True, device, config)):
        np.testing.assert_array_equal(got, want, err_msg=f"{case.name}: variable {k}")


def check_unlocked_case(case: Case, device=None, config=None, runs: int = 20) -> None:
    """A reference variable's updates without ``use_locking``: no promise about the totals,
    but every run succeeds and each variable keeps its shape and dtype."""
    for got, want in run_case(case, False, False, device, config, runs):
        assert got.shape == want.shape and got.dtype == want.dtype, case.name
