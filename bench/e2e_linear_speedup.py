"""End to end, the paper's linear-speedup setting: rowstoch_fast vs the research-code baseline.

Usage::

    python bench/e2e_linear_speedup.py [--n 512] [--iterations 50] [--rounds 5]

Times one Pull-Diag-GT iteration *with* the stochastic gradients (exponential
graph, d = 10, 204,800 samples, batch 200, rho = 0.01) for

* ``rowstoch``: ``PullDiagGT.step`` with ``NonconvexLogistic``'s oracle (one
  threaded C++ call samples and differentiates for all nodes);
* ``research``: ``bench/research_baseline.py`` (dense A, dense V <- A V,
  a Python loop over nodes with ``rng.choice``),

interleaved, medians over rounds, and estimates how long
``rowstoch reproduce linear-speedup`` would take with the baseline.
"""

from __future__ import annotations

import argparse
import os
import sys
import time


sys.path.insert(0, os.path.dirname(__file__))
from _harness import interleaved, machine_info  # noqa: E402
from research_baseline import ResearchPullDiagGT  # noqa: E402

from rowstoch_fast import PullDiagGT, _core, topology  # noqa: E402
from rowstoch_fast.experiments import LINEAR_SPEEDUP_LR  # noqa: E402
from rowstoch_fast.objectives import NonconvexLogistic  # noqa: E402


def contenders(n):
    f = NonconvexLogistic.synthetic(n, seed=42)
    A = topology.exponential(n)
    lr = LINEAR_SPEEDUP_LR.get(n, 1e-4)
    oracle = f.oracle(seed=0)
    opt = PullDiagGT(A, f.x0(), lr=lr)
    opt.initialize(oracle)
    base = ResearchPullDiagGT(A.toarray(), f.H, f.Y, f.rho, f.batch, lr, f.x0())
    return {"rowstoch": lambda: opt.step(oracle), "research": base.step}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=512)
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args(argv)
    info = machine_info()
    print(f"# {info['cpu']}, {info['cores']} cores, kernels on {_core.get_num_threads()} threads")
    med, _ = interleaved(contenders(args.n), rounds=args.rounds, min_time=0.5)
    print(f"n = {args.n}: rowstoch {med['rowstoch'] * 1e3:.3f} ms/iteration, research code {med['research'] * 1e3:.2f} ms/iteration, "
          f"speedup {med['research'] / med['rowstoch']:.1f}x")
    # Baseline cost of the whole reproduce linear-speedup run (6 sizes x 20 repeats x 4000 iterations).
    total = 0.0
    for n in (1, 2, 8, 16, 128, 512):
        c = contenders(n)
        t = time.perf_counter()
        k = 0
        while time.perf_counter() - t < 1.0:
            c["research"]()
            k += 1
        per = (time.perf_counter() - t) / k
        total += per * 4000 * 20
        print(f"  research code at n = {n:>3}: {per * 1e3:.2f} ms/iteration")
    print(f"estimated research-code time for 'rowstoch reproduce linear-speedup': {total / 60:.0f} min")


if __name__ == "__main__":
    main()
