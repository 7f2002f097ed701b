"""One Pull-Diag-GT iteration (no gradient): the compiled phases vs the scipy composition of eq. (7)/(12)."""

import pytest

import gt_step
from _harness import BENCH_LOG2N as LOG2N


@pytest.mark.parametrize("impl", ["rowstoch", "scipy"], ids=["cpu", "scipy"])
@pytest.mark.parametrize("R", [1, 10], ids=["R1", "R10"])
@pytest.mark.parametrize("log2n", LOG2N, ids=[f"n2^{k}" for k in LOG2N])
def test_gt_iteration(benchmark, impl, R, log2n):
    contenders = gt_step.make_contenders(2**log2n, 10, R)
    benchmark.group = f"gt iteration n=2^{log2n} d=10 R={R}"
    benchmark(contenders[impl])


def test_e2e_step_matches_between_implementations():
    import e2e_linear_speedup

    c = e2e_linear_speedup.contenders(8)
    for _ in range(3):
        c["rowstoch"]()
        c["research"]()
