"""Does the evaluation's climb rule read noise as a climb? Stationary noise floors, simulated, judged by
``verdict.climbed_back`` (the rule of ``verdict._climbing`` for repetitions that differ): with its
:func:`~rowstoch_fast.compare.verdict.climb_factor` (the factor from the repetitions' spread) and with the tenfold
alone (the rule before it), on the same draws.

    python bench/climb_check.py [--trials 40] [--seed 2]

A floor: the mean of the squares of ``d`` AR(1) standard normals per repetition (a metric at a noise floor in ``d``
dimensions, each record correlated with the last by ``ar``), after a start 50x above it (and ``--descent`` records
falling to it alike in every repetition); ``d`` 1..128, 3..12
repetitions, 16..51 records, ``ar`` 0..0.97, ``--trials`` draws of each. Prints how many are flagged under each
rule, and the settings of the ones the factor flags and the tenfold does not. A false positive is a flagged floor.
"""

import argparse
import itertools

import numpy as np

from rowstoch_fast.compare import verdict
from rowstoch_fast.compare.tuning import CLIMB, typical_curve


def flagged(x, runs, tenfold=False):
    """Whether ``verdict.climbed_back`` flags the repetitions ``runs`` (records at ``x``), with the tenfold alone
    where ``tenfold`` (the rule before ``climb_factor``)."""
    factor = verdict.climb_factor
    if tenfold:
        verdict.climb_factor = lambda records, floor: CLIMB
    try:
        return verdict.climbed_back(x, runs, typical_curve(runs), 1e-300) is not None
    finally:
        verdict.climb_factor = factor


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=40)
    p.add_argument("--seed", type=int, default=2)
    p.add_argument("--descent", type=int, default=0, help="records of a descent the repetitions share, from the "
                   "start to the floor, before it (helper 157: they had narrowed the factor)")
    args = p.parse_args()
    rng = np.random.default_rng(args.seed)
    total = old = new = 0
    extra = {}
    for d, reps, records, ar in itertools.product([1, 2, 4, 8, 16, 24, 32, 64, 128], [3, 4, 5, 8, 12], [16, 26, 51],
                                                  [0.0, 0.5, 0.9, 0.97]):
        for _ in range(args.trials):
            z = np.empty((records, reps, d))
            z[0] = rng.standard_normal((reps, d))
            for t in range(1, records):
                z[t] = ar * z[t - 1] + np.sqrt(1 - ar * ar) * rng.standard_normal((reps, d))
            down = np.geomspace(50.0, 1.0, args.descent + 2)[1:-1, None] * np.ones(reps)
            runs = np.vstack([np.full(reps, 50.0), down, (z ** 2).mean(axis=2)])
            x = np.arange(len(runs)) * 10.0
            total += 1
            before = flagged(x, runs, tenfold=True)
            now = flagged(x, runs)
            old += before
            new += now
            if now and not before:
                extra[(d, reps, records, ar)] = extra.get((d, reps, records, ar), 0) + 1
    print(f"{total} stationary floors: flagged {old} with the tenfold alone, {new} with climb_factor")
    for (d, reps, records, ar), k in sorted(extra.items()):
        print(f"  flagged by climb_factor alone: d = {d}, {reps} repetitions, {records} records, ar = {ar}: {k}")


if __name__ == "__main__":
    main()
