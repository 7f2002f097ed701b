"""The harness's cost against the engine's: the default ``rowstoch compare --topology exponential --n 16`` (19
methods, 2,000 communication rounds, 5 repetitions, every rate tuned) end to end, and the same methods stepped at
the rates it chose for the same budget and repetitions with no records (issue 47's "bare" run).

    python bench/compare_speed.py [--runs 3] [--jobs 1,2] [--algorithms issue47]

``--algorithms issue47``: the 19 methods the default ran when issue 47 set its target (the default now adds the
local-update and variance-reduced methods of issue 53: 26; Wang-Elia is out, as it needs a symmetric W); any other
value is passed to ``--algorithms`` as it is.

Prints each end-to-end time (interleaved over the --jobs settings), the split of the last run (tuning, evaluation
with its records, the rest: start-up, data, tables, figures) from its own lr.json and summary.csv, the bare time,
and the ratio; the machine, threads and load.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

COMMAND = ["compare", "--topology", "exponential", "--n", "16", "--no-progress"]
#: The default's methods when issue 47 measured it (8357380).
ISSUE47 = ("pull-diag-gt,mg-pull-diag-gt,frost,pull-diag-gd,dsgd,push-pull,compressed-push-pull,abm,push-diging,"
           "add-opt,sgp,robust-gradient-push,r-fast,centralized,dgd,choco-sgd,diging,gt-saga,aug-dgm")


def end_to_end(jobs, out, algorithms=None):
    start = time.perf_counter()
    chosen = [] if algorithms is None else ["--algorithms", ISSUE47 if algorithms == "issue47" else algorithms]
    subprocess.run([sys.executable, "-m", "rowstoch_fast.cli", *COMMAND, *chosen, "--jobs", str(jobs), "--out", out],
                   check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def bare(rates):
    """Every method stepped at its rate, 5 repetitions, the budget, no records: seconds."""
    import numpy as np

    import rowstoch_fast as rf
    from rowstoch_fast import compare as cmp
    from rowstoch_fast.objectives import NonconvexLogistic
    from rowstoch_fast.runner import build_replicas

    A = rf.topology.exponential(16)
    f = NonconvexLogistic.synthetic(16, total=204800, d=10, rho=0.01, batch=200, seed=42, heterogeneity=0.0)
    plan = cmp.make_plan(A, f, list(rates), 2000, lr=rates, repeats=5)
    total = 0.0
    for m in plan.methods:
        opt = build_replicas(m.algorithm(A, m.lr, "auto"), f, 5)
        oracle = f.oracle(seed=0, batches=opt.rounds)
        start = time.perf_counter()
        opt.initialize(oracle)
        for _ in range(m.iterations(2000)):
            opt.step(oracle)
        total += time.perf_counter() - start
    assert np.isfinite(total)
    return total


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--jobs", default="1,2")
    p.add_argument("--algorithms", default=None, help="'issue47' (its 19 methods) or a list for --algorithms")
    args = p.parse_args()
    jobs = [int(j) for j in args.jobs.split(",")]
    times = {j: [] for j in jobs}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.runs):
            for j in jobs:
                out = os.path.join(tmp, f"r{r}-j{j}")
                times[j].append(end_to_end(j, out, args.algorithms))
                print(f"--jobs {j}: {times[j][-1]:.1f} s", flush=True)
        rates = json.load(open(os.path.join(out, "lr.json")))["exponential"]
        tuning = sum(t.get("seconds", 0.0) for t in rates["tuning"].values())
        import pandas as pd

        evaluation = float(pd.read_csv(os.path.join(out, "summary.csv"))["wall_seconds"].sum())
        stepped = bare(rates["lr"])
    print(f"machine: {os.cpu_count()} cores, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}, "
          f"load {os.getloadavg()[0]:.2f}")
    for j in jobs:
        print(f"--jobs {j}: median {statistics.median(times[j]):.1f} s over {len(times[j])} runs "
              f"({', '.join(f'{t:.1f}' for t in times[j])}); {statistics.median(times[j]) / stepped:.1f}x the bare run")
    last = times[jobs[-1]][-1]
    print(f"last run (--jobs {jobs[-1]}, {last:.1f} s): tuning {tuning:.1f} s, evaluation with records "
          f"{evaluation:.1f} s (summed over the methods: across processes they overlap), the rest "
          f"{last - (tuning + evaluation) / jobs[-1]:.1f} s or more")
    print(f"bare: the {len(rates['lr'])} methods at their chosen rates, 5 repetitions, 2000 rounds, no records: "
          f"{stepped:.1f} s (one process)")


if __name__ == "__main__":
    main()
