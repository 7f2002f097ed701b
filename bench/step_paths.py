"""Two host paths of a step, each against the path it replaced, interleaved in one process (bench/RESULTS.md
section 31):

* ``carry``: blocks a step leaves as they were kept in their buffers (``Backend.keeps_blocks``, the default on the
  host) against copied (the GPU's way), for the methods that carry blocks; each method built twice, its iterates
  asserted equal at the end;
* ``table``: a per-sample table's reads and writes in one compiled pass (``CpuBackend.take_samples`` /
  ``put_samples``) against NumPy's ``take`` and fancy assignment (``Backend``'s), alternated on one optimizer.

``python bench/step_paths.py [--log2n 16] [--d 10] [--rounds 7] [--only carry|table]``: medians of ``rounds``
interleaved rounds, milliseconds a step.
"""

import argparse
import os
import time

import numpy as np

from rowstoch_fast import topology
from rowstoch_fast.algorithms import REGISTRY
from rowstoch_fast.backends.base import Backend
from rowstoch_fast.backends.cpu import CpuBackend
from rowstoch_fast.objectives import SampleOracle

CARRYING = ("lt-admm", "k-gt", "led", "dinno", "prox-skip", "fedavg")
TABLES = ("lt-admm-vr", "gt-saga", "gt-saga-atc")


def _build(cls, n, d):
    if not cls.matrices:  # (federated: clients, no matrix)
        return cls(n, np.zeros((n, d)), 0.001)
    M = topology.exponential(n) if cls.matrices == ("A",) else topology.ring(n, directed=False, weights="metropolis")
    return cls.build(M, np.zeros((n, d)), 0.001)


def _timed(opt, grad, steps):
    start = time.perf_counter()
    for _ in range(steps):
        opt.step(grad)
    return (time.perf_counter() - start) / steps * 1e3


def carry(n, d, rounds, steps=40):
    g = np.random.default_rng(0).standard_normal((n, d))
    grad = (lambda X: g)
    for name in CARRYING:
        opts = {}
        for keep in (True, False):
            CpuBackend.keeps_blocks = keep
            opts[keep] = _build(REGISTRY[name], n, d)
            _timed(opts[keep], grad, 8)
        times = {True: [], False: []}
        for _ in range(rounds):
            for keep in (True, False):
                CpuBackend.keeps_blocks = keep
                times[keep].append(_timed(opts[keep], grad, steps))
        CpuBackend.keeps_blocks = True
        np.testing.assert_array_equal(opts[True].x, opts[False].x)
        a, b = np.median(times[True]), np.median(times[False])
        print(f"| {name} | {a:.3f} ms | {b:.3f} ms | {b / a:.2f}x |")


def table(n, d, rounds, steps=10):
    compiled = (CpuBackend.take_samples, CpuBackend.put_samples)
    g = np.random.default_rng(0).standard_normal((n, d))
    grad = SampleOracle(lambda X, idx: g, samples=4)
    for name in TABLES:
        opt = _build(REGISTRY[name], n, d)
        _timed(opt, grad, 3)
        times = {"compiled": [], "numpy": []}
        try:
            for _ in range(rounds):
                for path in times:
                    CpuBackend.take_samples, CpuBackend.put_samples = \
                        compiled if path == "compiled" else (Backend.take_samples, Backend.put_samples)
                    times[path].append(_timed(opt, grad, steps))
        finally:
            CpuBackend.take_samples, CpuBackend.put_samples = compiled
        a, b = np.median(times["compiled"]), np.median(times["numpy"])
        print(f"| {name} | {a:.3f} ms | {b:.3f} ms | {b / a:.2f}x |")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--log2n", type=int, default=16)
    parser.add_argument("--d", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--only", choices=("carry", "table"))
    args = parser.parse_args(argv)
    n = 2 ** args.log2n
    print(f"# {os.cpu_count()} cores, n = 2^{args.log2n}, d = {args.d}, medians of {args.rounds} interleaved rounds; "
          f"load {os.getloadavg()[0]:.2f}")
    if args.only in (None, "carry"):
        print("| method | carried | copied | speed-up |\n|---|---|---|---|")
        carry(n, args.d, args.rounds)
    if args.only in (None, "table"):
        print("| method | compiled | NumPy | speed-up |\n|---|---|---|---|")
        table(n, args.d, args.rounds)


if __name__ == "__main__":
    main()
