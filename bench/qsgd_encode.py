"""QSGD's encoding alone: ``Compressed(..., "qsgd", bits=4).encode`` at n = 2^18, d = 10, on 2 threads (the
median and the minimum of 15 calls). ``python bench/qsgd_encode.py``; bench/RESULTS.md sections 16b and 18."""

import time

import numpy as np

import rowstoch_fast
from rowstoch_fast import _core, topology
from rowstoch_fast.network import Compressed


def main(n=2**18, d=10, calls=15, threads=2):
    _core.set_num_threads(threads)
    net = Compressed(topology.exponential(n), "qsgd", bits=4, seed=1)
    X = np.random.default_rng(0).standard_normal((n, d))
    out = np.empty_like(X)
    times = []
    for k in range(calls):
        start = time.perf_counter()
        net.encode(X, out, k, 0, d=d)
        times.append(time.perf_counter() - start)
    print(f"{rowstoch_fast.__file__}: QSGD encode n = {n}, d = {d}, {threads} threads: median "
          f"{np.median(times) * 1e3:.2f} ms, min {min(times) * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
