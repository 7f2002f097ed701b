"""Does a comparison's verdict depend on the units of its data? The check of the tuner's search past its grid.

The same least-squares data (16 nodes, exponential graph) with features and targets ``c`` times larger: every
loss is ``c**2`` times larger and every rate that works ``c**-2`` times smaller, so the comparison should give the
same statuses and ranks at every ``c``, its rates ``c**-2`` times those at ``c = 1`` (where ``c**-2`` is a power
of the grid's half-decade step; else within one step) and its final values ``c**2`` times. Before the tuner
searched past its grid (1e-4 .. 10), a scale that put every rate that works outside it turned methods into
"diverged" or "no-progress" (bench/RESULTS.md section 37).

    python bench/units_check.py                         # exact and mini-batch gradients, c in 1 .. 1e-3
    python bench/units_check.py --scales 1,100 --batch none --methods dsgd,push-pull

One line per (gradients, c): the time, then per method its status, rate, final value over ``c**2`` and rank; then
the (gradients, c) whose verdict (statuses and ranks) differs from ``c = 1``'s.
"""

import argparse
import sys
import time
import warnings

from rowstoch_fast import topology
from rowstoch_fast import compare as cmp
from rowstoch_fast.objectives import LeastSquares


def verdict(table):
    return [(row.algorithm, row.status, row["rank"] if row.status == "ok" else None) for _, row in table.iterrows()]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scales", default="1,10,30,100,1000,0.1,0.001", help="comma-separated c (the first: reference)")
    p.add_argument("--methods", default="dsgd,pull-diag-gt,push-pull,frost,sgp")
    p.add_argument("--batch", default="none,4", help="mini-batch sizes ('none': exact gradients)")
    p.add_argument("--budget", type=int, default=500)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    A = topology.exponential(16)
    scales = [float(c) for c in args.scales.split(",")]
    differs = []
    for batch in [None if b == "none" else int(b) for b in args.batch.split(",")]:
        base = LeastSquares.synthetic(16, seed=3, batch=batch)
        reference = None
        for c in scales:
            f = LeastSquares(base.H.reshape(-1, base.d) * c, base.y.reshape(-1) * c, 16, batch=batch)
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                table = cmp.summary(cmp.compare(A, f, args.methods, args.budget, repeats=args.repeats,
                                                progress=False))
            print(f"batch={batch} c={c:g} {time.perf_counter() - start:.1f}s | " + " | ".join(
                f"{r.algorithm} {r.status} {r.lr:.3g} {r.final / c ** 2:.3g} r{r['rank']}" for _, r in
                table.iterrows()), flush=True)
            if reference is None:
                reference = verdict(table)
            elif verdict(table) != reference:
                differs.append(f"batch={batch} c={c:g}")
    print("verdict as at the first scale everywhere" if not differs else "verdict differs: " + ", ".join(differs))
    return 1 if differs else 0


if __name__ == "__main__":
    sys.exit(main())
