"""The device paths of the segment-product and running log-sum-exp kernels (what a GPU runs,
where CuPy has no ``multiply.at`` or ``logaddexp.accumulate``), checked on NumPy against the
host paths."""

import numpy as np
import pytest

from dflab.kernels.bitwise_kernels import _log_cumsum_exp
from dflab.kernels.math_kernels import _segment_scatter
from dflab.kernels.segment_kernels import _masked_product


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_doubling_scan_matches_logaddexp_accumulate(axis):
    x = np.random.default_rng(0).standard_normal((5, 11)) * 50
    x[0, 0] = -1000.0  # a tiny early term a shift by the maximum would lose
    np.testing.assert_allclose(_log_cumsum_exp(np, x, axis),
                               np.logaddexp.accumulate(x, axis=axis), rtol=1e-12)


def test_masked_product_matches_multiply_at():
    rng = np.random.default_rng(1)
    data = rng.standard_normal((2, 3, 4))
    ids = np.array([[0, 3, -1], [3, 3, 1]])
    want = _segment_scatter(np, data, ids, 5, "multiply", 1)
    np.testing.assert_allclose(_masked_product(np, data, ids, 5), want, rtol=1e-12)
    with pytest.raises(ValueError, match="out of range"):
        _masked_product(np, data, ids, 3)
