"""PullDiagGT of this checkout against another checkout (e.g. the commit before a refactor): same bits, same speed.

Usage::

    git worktree add /tmp/old <commit> && (cd /tmp/old && python setup.py build_ext --inplace)
    python bench/compare_trees.py --other /tmp/old [--repeats 5]

Each measurement runs in a fresh process that imports ``rowstoch_fast`` from one tree (this checkout's
installed package, or ``--other`` put first on ``sys.path``); the two trees alternate (A B A B ...), and
each process reports the median time of ``PullDiagGT.step`` with a constant gradient (the whole step:
gradient copy and NaN check, x phase, fused y phase, commit) and the SHA-256 of the iterates of a set
of small runs (exact and perron trackers, R = 1 and 3, replicas).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CHILD = r"""
import hashlib, json, sys, time
import numpy as np
from rowstoch_fast import PullDiagGT, topology
out = {"file": __import__("rowstoch_fast").__file__}
h = hashlib.sha256()
for A in (topology.exponential(64), topology.erdos_renyi(30, 0.2, seed=3)):
    rng = np.random.default_rng(0)
    Q, b = rng.uniform(0.5, 2, (A.n, 3)), rng.standard_normal((A.n, 3))
    for R in (1, 3):
        for tracker in ("exact", "perron"):
            for shape in ((A.n, 3), (2, A.n, 3)):
                opt = PullDiagGT(A, np.broadcast_to(rng.standard_normal(shape[-2:]), shape), 0.01, rounds=R,
                                 tracker=tracker)
                for _ in range(50):
                    opt.step(lambda X: Q * X - b)
                h.update(np.ascontiguousarray(opt.x).tobytes()); h.update(np.ascontiguousarray(opt.y).tobytes())
out["bits"] = h.hexdigest()
for log2n, d, R in SIZES:
    n = 2 ** log2n
    A = topology.exponential(n)
    g = np.random.default_rng(1).standard_normal((n, d))
    opt = PullDiagGT(A, np.zeros((n, d)), 1e-3, rounds=R, tracker="perron")
    opt.step(lambda X: g)
    times = []
    for _ in range(CALLS):
        t = time.perf_counter(); opt.step(lambda X: g); times.append(time.perf_counter() - t)
    out[f"2^{log2n},d={d},R={R}"] = float(np.median(times))
print(json.dumps(out))
"""


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--other", required=True, help="the other checkout (built in place)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--calls", type=int, default=200)
    p.add_argument("--sizes", default="10:10:1,14:10:1,16:10:1,16:10:5")
    args = p.parse_args(argv)
    sizes = [tuple(int(v) for v in s.split(":")) for s in args.sizes.split(",")]
    code = f"SIZES = {sizes!r}\nCALLS = {args.calls}\n" + CHILD
    trees = {"this": None, "other": os.path.abspath(args.other)}
    runs = {k: [] for k in trees}
    neutral = os.path.expanduser("~")  # not the repo root, whose rowstoch_fast/ would shadow the package
    for _ in range(args.repeats):
        for name, path in trees.items():
            env = dict(os.environ, PYTHONPATH=path) if path else {k: v for k, v in os.environ.items()
                                                                  if k != "PYTHONPATH"}
            res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=neutral,
                                 check=True)
            runs[name].append(json.loads(res.stdout))
    import numpy as np

    for name in trees:
        print(f"{name}: {runs[name][0]['file']}, bits {runs[name][0]['bits'][:16]}")
    same = {r["bits"] for r in runs["this"]} == {r["bits"] for r in runs["other"]}
    print(f"same bits: {same}\n")
    print("| case | this ms (median of medians) | other ms | this / other | per-repeat ratios |")
    print("|---|---|---|---|---|")
    for key in [k for k in runs["this"][0] if k.startswith("2^")]:
        a = np.array([r[key] for r in runs["this"]])
        b = np.array([r[key] for r in runs["other"]])
        print(f"| {key} | {np.median(a) * 1e3:.4f} | {np.median(b) * 1e3:.4f} | {np.median(a) / np.median(b):.3f} | "
              f"{', '.join(f'{x:.2f}' for x in a / b)} |")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
