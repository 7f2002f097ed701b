"""Y = A X: dense BLAS vs scipy.sparse vs rowstoch_fast (vs torch.sparse and MKL where installed)."""

import numpy as np
import pytest

import mix_scaling
from _harness import BENCH_LOG2N as LOG2N
from rowstoch_fast import topology

IMPLS = ["dense", "scipy", "rowstoch", "torch", "mkl"]


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("impl", IMPLS, ids=IMPLS)
@pytest.mark.parametrize("d, R", [(1, 1), (10, 1), (100, 1), (10, 10)], ids=["d1", "d10", "d100", "d10-R10"])
@pytest.mark.parametrize("log2n", LOG2N, ids=[f"n2^{k}" for k in LOG2N])
def test_mix_exponential(benchmark, impl, d, R, log2n):
    A = topology.exponential(2**log2n)
    X = np.random.default_rng(1).standard_normal((A.n, d))
    contenders = mix_scaling.contenders(A, X, R)  # the same contenders as bench/mix_scaling.py
    if impl not in contenders:
        pytest.skip(f"{impl} is not available here (or not run at n = 2^{log2n})")
    benchmark.group = f"mix exponential n=2^{log2n} d={d} R={R}"
    Y = np.asarray(benchmark(contenders[impl]))
    ref = X
    for _ in range(R):
        ref = A.csr @ ref
    np.testing.assert_allclose(Y, ref, rtol=1e-10, atol=1e-12)
