"""Set-up and one iteration at scale (issue 13): what a user with millions of nodes waits for.

For each n = 2^k, in a fresh process (peak memory is per process): build
``topology.exponential(n)``, compute ``A.pi``, construct
``PullDiagGT(A, x0, lr, tracker="perron")`` with ``x0`` of shape (n, d), run one
iteration on a quadratic objective, and report the peak resident memory
(``resource.getrusage``). Sizes that the memory guard refuses are reported as such.

    python bench/scale.py --min-log2n 16 --max-log2n 23 --d 10
"""

import argparse
import json
import os
import subprocess
import sys

CHILD = r"""
import json, resource, sys, time
import numpy as np
import rowstoch_fast as rf
n, d = int(sys.argv[1]), int(sys.argv[2])
out = {"n": n}
try:
    t = time.perf_counter(); A = rf.topology.exponential(n); out["build_s"] = time.perf_counter() - t
    t = time.perf_counter(); A.pi; out["pi_s"] = time.perf_counter() - t
    x0 = np.zeros((n, d))
    t = time.perf_counter(); opt = rf.PullDiagGT(A, x0, lr=1e-3 / n, tracker="perron"); out["construct_s"] = time.perf_counter() - t
    b = np.random.default_rng(0).standard_normal((n, d))
    grad = lambda X: X - b
    opt.step(grad)  # y_0 = g_0 and the first iteration
    t = time.perf_counter(); opt.step(grad); out["iteration_s"] = time.perf_counter() - t
except MemoryError as exc:
    out["refused"] = str(exc)
out["peak_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
print(json.dumps(out))
"""


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--min-log2n", type=int, default=16)
    p.add_argument("--max-log2n", type=int, default=23)
    p.add_argument("--d", type=int, default=10)
    p.add_argument("--out", default=None, help="also write the rows as JSON here")
    args = p.parse_args()
    print(f"machine: {os.cpu_count()} cores; exponential graph, perron tracker, d = {args.d}, fresh process per n")
    print(f"{'n':>10}{'build s':>10}{'pi s':>8}{'PullDiagGT s':>14}{'1 iteration s':>15}{'peak GiB':>10}")
    rows = []
    for k in range(args.min_log2n, args.max_log2n + 1):
        proc = subprocess.run([sys.executable, "-c", CHILD, str(2**k), str(args.d)], capture_output=True, text=True)
        if proc.returncode != 0:
            print(f"{'2^' + str(k):>10}  failed: {proc.stderr.strip().splitlines()[-1] if proc.stderr else proc.returncode}")
            continue
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        rows.append(r)
        if "refused" in r:
            print(f"{'2^' + str(k):>10}  refused: {r['refused']}")
            continue
        print(f"{'2^' + str(k):>10}{r['build_s']:>10.2f}{r['pi_s']:>8.2f}{r['construct_s']:>14.2f}"
              f"{r['iteration_s']:>15.3f}{r['peak_gib']:>10.2f}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
