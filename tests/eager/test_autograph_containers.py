"""AutoGraph and the variables a statement carries: a global or closure container changed in
place (``d[k] = v``) stays what it is, and loops nested in a loop's branches (after a
``continue``, with ``break``s) carry only what is read after them. Expected values read off
TF 2.21."""

from __future__ import annotations

import pytest

import dflab as tf
from dflab.eager import eager_mode

CACHE: dict = {}
SCALE = {"scale": 1.0}
BUF = [0.0]


@pytest.fixture(autouse=True)
def eager():
    with eager_mode():
        yield


def test_a_global_container_changed_in_place_stays_global():
    CACHE.clear()

    @tf.function
    def f(x):
        if "k" not in CACHE:  # (a Python condition)
            CACHE["k"] = tf.constant(7.0)
        for _ in range(3):  # (a Python loop)
            SCALE["scale"] = SCALE["scale"] + 1
        if True:
            BUF[0] = 5.0
        return x + CACHE["k"] + BUF[0]

    assert float(f(tf.constant(1.0))) == 13.0  # it had been an UnboundLocalError
    assert SCALE["scale"] == 4.0 and BUF == [5.0]


def test_a_closure_container_changed_under_a_tensor_condition():
    seen = {}

    @tf.function
    def f(x):
        if x > 0:
            seen["branch"] = "taken"
            y = x * 2.0
        else:
            y = -x
        return y

    assert float(f(tf.constant(3.0))) == 6.0
    assert seen == {"branch": "taken"}  # (both branches are traced, as TF's)


def test_a_local_dict_assigned_in_a_tensor_branch_is_carried():
    @tf.function
    def f(x):
        d = {"v": x}
        if x > 0:
            d["v"] = x * 10.0
        return d["v"]

    assert float(f(tf.constant(2.0))) == 20.0
    assert float(f(tf.constant(-2.0))) == -2.0


def test_loops_inside_a_tensor_loops_branches():
    @tf.function
    def odd_sums(n):
        total = tf.constant(0)
        for i in tf.range(n):
            if i % 2 == 1:
                for j in tf.range(i):
                    total += j
        return total

    @tf.function
    def capped(n):
        total = tf.constant(0)
        for i in tf.range(n):
            if i % 2 == 0:
                continue
            for j in tf.range(i):
                if j > 2:
                    break
                total += j
            if total > 20:
                break
        return total

    assert int(odd_sums(tf.constant(6))) == 13  # a ConversionError before
    assert [int(capped(tf.constant(n))) for n in (0, 3, 6, 10, 30)] == [0, 0, 6, 12, 21]
