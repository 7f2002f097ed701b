"""Does the evaluation's climb rule read noise as a climb? Stationary noise floors, simulated, judged by
``verdict._climbing``'s rule for repetitions that differ: with :func:`~rowstoch_fast.compare.verdict.climb_factor`
(the factor from the repetitions' spread) and with the tenfold alone (the rule before it), on the same draws.

    python bench/climb_check.py [--trials 40] [--seed 2]

A floor: the mean of the squares of ``d`` AR(1) standard normals per repetition (a metric at a noise floor in ``d``
dimensions, each record correlated with the last by ``ar``), after a start 50x above it; ``d`` 1..128, 3..12
repetitions, 16..51 records, ``ar`` 0..0.97, ``--trials`` draws of each. Prints how many are flagged under each
rule, and the settings of the ones the factor flags and the tenfold does not. A false positive is a flagged floor.
"""

import argparse
import itertools

import numpy as np

from rowstoch_fast.compare import verdict
from rowstoch_fast.compare.tuning import CLIMB, off_its_minimum, rising, typical_curve


def flagged(x, runs, factor):
    """Whether the rule flags the typical curve of ``runs`` at ``factor`` (a climb, still rising)."""
    typical = typical_curve(runs)
    off = off_its_minimum(x, typical, factor)
    if off is None:
        return False
    after = x >= off[1]
    return bool(rising(x[after], np.log(typical[after])))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=40)
    p.add_argument("--seed", type=int, default=2)
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
            runs = np.vstack([np.full(reps, 50.0), (z ** 2).mean(axis=2)])
            x = np.arange(records + 1) * 10.0
            total += 1
            before = flagged(x, runs, CLIMB)
            now = flagged(x, runs, verdict.climb_factor(runs, 1e-300))
            old += before
            new += now
            if now and not before:
                extra[(d, reps, records, ar)] = extra.get((d, reps, records, ar), 0) + 1
    print(f"{total} stationary floors: flagged {old} with the tenfold alone, {new} with climb_factor")
    for (d, reps, records, ar), k in sorted(extra.items()):
        print(f"  flagged by climb_factor alone: d = {d}, {reps} repetitions, {records} records, ar = {ar}: {k}")


if __name__ == "__main__":
    main()
