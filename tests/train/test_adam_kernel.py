"""The host's blocked ApplyAdam update gives the same bits as the whole-array update."""

import numpy as np
import pytest

from dflab.kernels import training_kernels as tk


@pytest.mark.parametrize("size", [2 * 64, 2 * 64 + 37, 1000])
def test_blocked_adam_matches_the_whole_array_update_bit_for_bit(monkeypatch, size):
    monkeypatch.setattr(tk, "_ADAM_BLOCK", 64)  # several blocks and a partial last one
    rng = np.random.default_rng(size)
    var, m, g = (rng.standard_normal((size,)).astype(np.float32) for _ in range(3))
    v = rng.random(size).astype(np.float32)
    scalars = [np.float32(x) for x in (0.9 ** 3, 0.999 ** 3, 1e-3, 0.9, 0.999, 1e-8)]
    blocked = tk._adam(np, {}, [var, m, v], scalars, g)
    monkeypatch.setattr(tk, "_ADAM_BLOCK", 10 ** 9)  # too big to block: the plain update
    plain = tk._adam(np, {}, [var, m, v], scalars, g)
    for b, p in zip(blocked, plain):
        assert b.shape == (size,) and b.dtype == np.float32
        np.testing.assert_array_equal(b, p)
    # and it is Adam: m, v and the step from TF's formulas
    alpha = 1e-3 * np.sqrt(1 - 0.999 ** 3) / (1 - 0.9 ** 3)
    m_want = m + (g - m) * 0.1
    v_want = v + (g * g - v) * (1 - 0.999)
    np.testing.assert_allclose(blocked[1], m_want, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(blocked[2], v_want, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(blocked[0], var - alpha * m_want / (np.sqrt(v_want) + 1e-8),
                               rtol=1e-5, atol=1e-6)
