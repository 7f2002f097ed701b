"""The logistic stochastic-gradient oracle at each vector width (same bits, different speed)."""

import numpy as np
import pytest

from rowstoch_fast import _core
from rowstoch_fast.objectives import NonconvexLogistic


@pytest.fixture(scope="module")
def problem():
    f = NonconvexLogistic.synthetic(64, total=64 * 400, seed=42)
    return f, 0.1 * np.random.default_rng(0).standard_normal((64, f.d))


@pytest.mark.parametrize("width", [2, 4], ids=["w2", "w4"])
def test_oracle(benchmark, problem, width):
    if width not in _core.simd_widths():
        pytest.skip("this CPU has no AVX2")
    f, X = problem
    want = f.stochastic_gradient(X, 3)
    _core.set_simd_width(width)
    try:
        benchmark.group = "logistic oracle n=64 batch=200 d=10"
        G = benchmark(f.stochastic_gradient, X, 3)
    finally:
        _core.set_simd_width(0)
    np.testing.assert_array_equal(G, want)
