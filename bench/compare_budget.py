"""The harness's own cost: ``rowstoch compare`` of the nine algorithms x 5 repetitions on a 16-node graph with a
budget of 4,000 communication rounds (the issue's target: under a minute on the 2-core development machine).

Runs the command line end to end (import, data, tuning, evaluation, tables and figures) ``--runs`` times and
prints each wall time and the median; with ``--variants`` it interleaves settings of the tuner in one process
(``TUNE_REPEATS=2,3``), so that a noisy machine affects every variant alike.

    python bench/compare_budget.py --runs 3
    python bench/compare_budget.py --runs 3 --variants TUNE_REPEATS=2,3
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

COMMAND = ["compare", "--topology", "exponential", "--n", "16", "--rounds-budget", "4000", "--repeats", "5",
           "--no-progress"]


def one(env_extra):
    with tempfile.TemporaryDirectory() as out:
        env = dict(os.environ, **env_extra)
        code = ("import sys, rowstoch_fast.compare as c\n"
                + "".join(f"c.{k} = {v}\n" for k, v in env_extra.items() if k.isupper() and k.startswith("TUNE"))
                + "from rowstoch_fast.cli import main\nsys.exit(main(sys.argv[1:]))")
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code, *COMMAND, "--out", out], check=True, env=env,
                       stdout=subprocess.DEVNULL)
        return time.perf_counter() - start


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--variants", default=None, help="NAME=v1,v2: interleave these settings of rowstoch_fast.compare")
    args = p.parse_args()
    variants = [{}]
    if args.variants:
        name, values = args.variants.split("=")
        variants = [{name: v} for v in values.split(",")]
    times = {i: [] for i in range(len(variants))}
    for _ in range(args.runs):
        for i, v in enumerate(variants):
            times[i].append(one(v))
            print(f"{v or 'default'}: {times[i][-1]:.1f} s", flush=True)
    print(f"machine: {os.cpu_count()} cores, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}, "
          f"load {os.getloadavg()[0]:.2f}")
    for i, v in enumerate(variants):
        print(f"{v or 'default'}: median {statistics.median(times[i]):.1f} s over {len(times[i])} runs "
              f"({', '.join(f'{t:.1f}' for t in times[i])})")


if __name__ == "__main__":
    main()
