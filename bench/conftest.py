"""pytest-benchmark suites: sizes come from ROWSTOCH_BENCH_LOG2N (default: a quick smoke).

Full run (recorded in bench/RESULTS.md)::

    ROWSTOCH_BENCH_LOG2N=10,14,18 pytest bench --benchmark-enable --benchmark-only \
        --benchmark-group-by=group --benchmark-columns=median,iqr,rounds

In the default test run (``pytest``) the benchmarks are collected with
``--benchmark-disable``: each target runs once and its result is checked.
"""

import numpy as np
import pytest


@pytest.fixture(scope="session")
def rng():
    return np.random.default_rng(0)
