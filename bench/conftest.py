"""pytest-benchmark suites: sizes come from ROWSTOCH_BENCH_LOG2N (default: a quick smoke).

The benchmarks are not in the test run (``pytest`` collects ``tests/`` only); they run by their own command, in
this process (``-n 0``: timings under pytest-xdist's workers would measure the neighbours). Full run (recorded in
bench/RESULTS.md)::

    ROWSTOCH_BENCH_LOG2N=10,14,18 pytest bench -n 0 --benchmark-enable --benchmark-only \
        --benchmark-group-by=group --benchmark-columns=median,iqr,rounds

``pytest bench -n 0`` alone executes each target once, untimed, and checks its result.
"""

import numpy as np
import pytest


@pytest.fixture(scope="session")
def rng():
    return np.random.default_rng(0)
