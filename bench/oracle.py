"""The stochastic-gradient oracle alone: ns per sampled gradient, by vector width and thread count.

Usage::

    python bench/oracle.py [--n 512] [--rounds 7]

Times ``NonconvexLogistic.stochastic_gradient`` on the paper's synthetic problem
(d = 10, 204,800 samples, batch 200: n x 200 sampled gradients per call) with the
kernels forced to 2-lane vectors (SSE2/NEON) and, where the CPU has AVX2, 4-lane
vectors (``_core.set_simd_width``; both give the same bits), on 1 and 2 threads,
interleaved. Also times one recording evaluation (exact gradients + losses of
20 repetitions in one pass, as the runner records them).
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _harness import interleaved, machine_info  # noqa: E402

from rowstoch_fast import _core  # noqa: E402
from rowstoch_fast.objectives import NonconvexLogistic  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=512)
    p.add_argument("--rounds", type=int, default=7)
    args = p.parse_args(argv)
    info = machine_info()
    print(f"# {info['cpu']}, {info['cores']} cores, vector widths available: {_core.simd_widths()}")
    f = NonconvexLogistic.synthetic(args.n, seed=42)
    X = 0.1 * np.random.default_rng(0).standard_normal((args.n, f.d))
    it = itertools.count()

    def oracle(w):
        def call():
            _core.set_simd_width(w)
            return f.stochastic_gradient(X, next(it))
        return call

    samples = args.n * f.batch
    try:
        for threads in (1, 2):
            _core.set_num_threads(threads)
            med, _ = interleaved({f"width {w}": oracle(w) for w in _core.simd_widths()}, rounds=args.rounds,
                                 min_time=0.3)
            row = ", ".join(f"{k}: {v * 1e3:.3f} ms ({v / samples * 1e9:.2f} ns/sample)" for k, v in med.items())
            print(f"threads {threads}: {row}")
        Xr = np.broadcast_to(X, (20,) + X.shape).copy()
        med, _ = interleaved({"evaluate": lambda: f.evaluate(Xr), "full_gradient": lambda: f.full_gradient(Xr)},
                             rounds=args.rounds, min_time=0.3)
        print(f"record evaluation, 20 repetitions x {f.n * f.samples_per_node} samples: "
              + ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in med.items()))
    finally:
        _core.set_simd_width(0)
        _core.set_num_threads(os.cpu_count() or 1)


if __name__ == "__main__":
    main()
