"""Does the evaluation's rule for repetitions that run off below their start read noise as a run-off? Stationary
noise floors, simulated, judged by ``verdict._repetitions_run_off`` (helper 253).

    python bench/run_off_check.py [--trials 20] [--seed 3]

A floor: the mean of the squares of ``d`` AR(1) standard normals per repetition and record (a metric at a noise
floor in ``d`` dimensions, each record correlated with the last by ``ar``), each repetition's scaled by its own
draw of U(1, ``spread``) (draws of a network that end at different levels), after a start ``start_over`` times
above it and three records falling to it alike in every repetition; ``d`` 1..32, 3..32 repetitions, 16..51
records, ``ar`` 0..0.97, ``--trials`` draws of each. Prints how many are flagged, and the settings of those. A
false positive is a flagged floor: every one of them converged.
"""

import argparse
import itertools

import numpy as np
import pandas as pd

from rowstoch_fast.compare import verdict


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=20)
    p.add_argument("--seed", type=int, default=3)
    args = p.parse_args()
    rng = np.random.default_rng(args.seed)
    total, found = 0, {}
    for d, reps, records, ar, spread, start_over in itertools.product(
            [1, 2, 4, 32], [3, 5, 8, 12, 32], [16, 26, 51], [0.0, 0.5, 0.9, 0.97], [1.0, 3.0, 10.0], [10.0, 1000.0]):
        for _ in range(args.trials):
            z = np.empty((records, reps, d))
            z[0] = rng.standard_normal((reps, d))
            for t in range(1, records):
                z[t] = ar * z[t - 1] + np.sqrt(1 - ar * ar) * rng.standard_normal((reps, d))
            floor = (z ** 2).mean(axis=2) * rng.uniform(1.0, spread, reps)
            descent = np.geomspace(start_over, 1.0, 5)[1:-1, None] * np.ones(reps)
            runs = np.vstack([np.full(reps, start_over), descent, floor])
            x = np.arange(len(runs)) * 10.0
            frame = pd.DataFrame({"iteration": np.repeat(x, reps), "rep": np.tile(np.arange(reps), len(x)),
                                  "suboptimality": runs.ravel()})
            total += 1
            if verdict._repetitions_run_off(frame, "suboptimality", start_over, 1e-12):
                key = (d, reps, records, ar, spread, start_over)
                found[key] = found.get(key, 0) + 1
    print(f"{sum(found.values())} of {total} simulated noise floors flagged")
    for key, k in sorted(found.items(), key=lambda kv: -kv[1]):
        print("  d %d, %d repetitions, %d records, ar %g, spread %g, start %gx the floor: %d" % (key + (k,)))


if __name__ == "__main__":
    main()
