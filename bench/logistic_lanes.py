"""The logistic oracle's passes over replicas that share their samples at each vector width this CPU runs
(``_core.set_simd_width``: 4 = AVX2, 8 = AVX-512F lanes for the replicas; the same bits), interleaved.

    OMP_NUM_THREADS=1 python bench/logistic_lanes.py [--rounds 7]

The default comparison's problem (16 nodes x 12,800 samples, d = 10, batch 200): the full pass of 5 (an
evaluation's record) and 8 / 22 / 30 replicas (a tuning's records), and 20 stochastic gradients of 8 / 22 / 30
replicas on two streams (``rep_period = 2``: a tuning's candidates). Prints each median and the ratio to width 4.
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _harness import interleaved, machine_line  # noqa: E402

from rowstoch_fast import _core  # noqa: E402
from rowstoch_fast.objectives import NonconvexLogistic  # noqa: E402


def contenders(f):
    def at_width(w, fn):
        def run():
            _core.set_simd_width(w)
            fn()
        return run

    def full(reps):
        X = np.random.default_rng(0).standard_normal((reps, 16, 10)) * 0.1
        return lambda: _core.logistic_full_grad(f.H, f.Y, 16, 0.01, X, None, False)

    def stochastic(reps):
        X = np.random.default_rng(0).standard_normal((reps, 16, 10)) * 0.1
        out = np.empty_like(X)

        def run():
            for it in range(20):
                _core.logistic_grad(f.H, f.Y, 16, 0.01, X, 200, 1, 7, it, 0, None, out, 2)
        return run

    cases = {f"full pass, {r} replicas": full(r) for r in (5, 8, 22, 30)}
    cases.update({f"20 stochastic, {r} replicas / 2 streams": stochastic(r) for r in (8, 22, 30)})
    return {(name, w): at_width(w, fn) for name, fn in cases.items() for w in _core.simd_widths() if w >= 4}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=7)
    args = p.parse_args()
    if 4 not in _core.simd_widths():
        sys.exit("this CPU has no AVX2: one vector width only")
    f = NonconvexLogistic.synthetic(16, total=204800, d=10, rho=0.01, batch=200, seed=42, heterogeneity=0.0)
    try:
        times, _ = interleaved(contenders(f), rounds=args.rounds)
    finally:
        _core.set_simd_width(0)
    print(machine_line(), f"widths {_core.simd_widths()}")
    for name in dict.fromkeys(k[0] for k in times):
        base = times[(name, 4)]
        cells = "  ".join(f"width {w}: {times[(name, w)] * 1e3:.2f} ms ({base / times[(name, w)]:.2f}x)"
                          for (n, w) in times if n == name)
        print(f"  {name:<40} {cells}")


if __name__ == "__main__":
    main()
