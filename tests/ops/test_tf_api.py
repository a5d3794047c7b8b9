"""dflab against TensorFlow's own results: every case of ``tests/fixtures/tf_api/cases_*.py``
run on dflab and compared with what TF 2.21's ``compat.v1`` computed for the same inputs
(outputs, the gradients of a weighted sum of the outputs, or the class of the error TF
raised), and, for float64 cases, dflab's gradients against finite differences.

The fixtures are written by ``tests/fixtures/tf_api/generate.py`` under TensorFlow; CI needs
no TensorFlow. Each case lists the public names it exercises, and those names must exist.
"""

from __future__ import annotations

import functools
import importlib
import pathlib
import sys

import numpy as np
import pytest
from op_test_util import check_grads

import dflab as tf
from dflab.framework import errors

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "tf_api"
sys.path.insert(0, str(FIXTURES))
import tfcase  # noqa: E402

FAMILIES = sorted(p.stem[len("cases_"):] for p in FIXTURES.glob("cases_*.py"))


def _module(family):
    return importlib.import_module(f"cases_{family}")


@functools.cache
def _fixture(family) -> dict:
    with np.load(FIXTURES / f"{family}.npz", allow_pickle=False) as f:
        return {k: f[k] for k in f.files}


def _all_cases():
    for fam in FAMILIES:
        for case in _module(fam).CASES:
            yield pytest.param(fam, case, id=f"{fam}-{case.name}")


def _lookup(dotted):
    obj = tf
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def _compare(got, want, case, what):
    got = np.asarray(got)
    if want.dtype.kind == "S":
        flat = [v if isinstance(v, bytes) else str(v).encode() for v in got.ravel()]
        assert flat == [bytes(v) for v in want.ravel()], what
        assert got.shape == want.shape, what
        return
    assert got.shape == want.shape, f"{what}: shape {got.shape} != TF's {want.shape}"
    if want.dtype.kind in "fc":
        assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != TF's {want.dtype}"
        np.testing.assert_allclose(got, want, rtol=case.rtol, atol=case.atol, err_msg=what)
    else:
        assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != TF's {want.dtype}"
        np.testing.assert_array_equal(got, want, err_msg=what)


def _stored(data, key, prefix):
    out, i = [], 0
    while f"{key}/{prefix}{i}" in data:
        out.append(data[f"{key}/{prefix}{i}"])
        i += 1
    return out


@pytest.mark.parametrize("family,case", list(_all_cases()))
def test_matches_tensorflow(family, case):
    for name in case.names:
        _lookup(name)  # every name the case stands for exists
    data = _fixture(family)
    key = case.name
    if f"{key}/error" in data:
        want = str(data[f"{key}/error"])
        cls = getattr(errors, want, None) or getattr(__builtins__, want, None) or \
            __import__("builtins").__dict__[want]
        with pytest.raises(cls):
            if isinstance(case, tfcase.Script):
                tfcase.run_script(tf, case)
            else:
                tfcase.build_and_run(tf, case, _stored(data, key, "in"))
        return
    if isinstance(case, tfcase.Script):
        outs = tfcase.run_script(tf, case)
        wants = _stored(data, key, "out")
        assert len(outs) == len(wants)
        for i, (o, w) in enumerate(zip(outs, wants)):
            _compare(o, w, case, f"{key} output {i}")
        return
    inputs = _stored(data, key, "in")
    weights = _stored(data, key, "w") or None
    outs, grads, _ = tfcase.build_and_run(tf, case, inputs, weights)
    wants = _stored(data, key, "out")
    assert len(outs) == len(wants)
    for i, (o, w) in enumerate(zip(outs, wants)):
        _compare(o, w, case, f"{key} output {i}")
    if not case.grad:
        return
    for i, g in enumerate(grads):
        if f"{key}/nograd{i}" in data:
            assert g is None, f"{key}: TF has no gradient for input {i}, dflab has one"
            continue
        assert g is not None, f"{key}: no gradient for input {i}"
        _compare(g, data[f"{key}/grad{i}"], case, f"{key} gradient {i}")
    wrt = [k for k, g in zip(tfcase.float_positions(inputs, case.wrt), grads) if g is not None]
    numgrad = case.numgrad
    if numgrad is None:
        numgrad = all(inputs[k].dtype == np.float64 for k in wrt)
    if numgrad and wrt:
        check_grads(lambda *xs: case.fn(tf, *xs), inputs, wrt=wrt)
