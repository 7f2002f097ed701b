"""Y = A X: dense BLAS vs scipy.sparse vs rowstoch_fast (and torch.sparse where installed)."""

import numpy as np
import pytest
import scipy.sparse as sp

from _harness import BENCH_LOG2N as LOG2N
from rowstoch_fast import _core, topology

IMPLS = ["dense", "scipy", "cpu", "torch"]


def _impl(name, A, X, R):
    c = A.csr
    if name == "dense":
        if A.n > 2**12:
            pytest.skip("dense A beyond n = 2^12 (memory and time)")
        D = A.toarray()
        return lambda: np.linalg.matrix_power(D, R) @ X if R > 1 else D @ X
    if name == "scipy":
        S = sp.csr_matrix(c)

        def f():
            Y = X
            for _ in range(R):
                Y = S @ Y
            return Y

        return f
    if name == "cpu":
        out, work = np.empty_like(X), np.empty_like(X)
        return lambda: _core.mix_power(c.indptr, c.indices, c.data, X, R, out, work, check_indices=False)
    torch = pytest.importorskip("torch")
    T = torch.sparse_csr_tensor(torch.from_numpy(c.indptr.astype(np.int64)), torch.from_numpy(c.indices.astype(np.int64)),
                                torch.from_numpy(c.data.copy()), size=c.shape)
    TX = torch.from_numpy(X)

    def g():
        Y = TX
        for _ in range(R):
            Y = T @ Y
        return Y

    return g


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("impl", IMPLS, ids=IMPLS)
@pytest.mark.parametrize("d, R", [(1, 1), (10, 1), (100, 1), (10, 10)], ids=["d1", "d10", "d100", "d10-R10"])
@pytest.mark.parametrize("log2n", LOG2N, ids=[f"n2^{k}" for k in LOG2N])
def test_mix_exponential(benchmark, impl, d, R, log2n):
    A = topology.exponential(2**log2n)
    X = np.random.default_rng(1).standard_normal((A.n, d))
    benchmark.group = f"mix exponential n=2^{log2n} d={d} R={R}"
    f = _impl(impl, A, X, R)
    Y = np.asarray(benchmark(f))
    ref = X
    for _ in range(R):
        ref = A.csr @ ref
    np.testing.assert_allclose(Y, ref, rtol=1e-10, atol=1e-12)
