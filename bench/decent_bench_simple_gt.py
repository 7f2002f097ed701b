"""Side by side with decent-bench 0.3.0: SimpleGT.

Run (from the repository root) with a Python >= 3.13 environment that has decent-bench::

    /tmp/db313/bin/python bench/decent_bench_simple_gt.py [--iterations 1000] [--ours-python python3]

Where that environment's ``rowstoch_fast`` has no ``SimpleGT``, our side runs in a subprocess of ``--ours-python``
(default ``python3``, whose ``rowstoch_fast`` is this checkout), fed the same data through a temporary ``.npz``, as
in ``decent_bench_admm_tracking.py``, whose timing and reporting helpers this script uses.

Setup as there: n = 8 undirected ring, Metropolis W (= I - L/3), d = 5, m = 20 rows per node, f_i = ||A_i x -
b_i||^2 / (2m) (decent-bench ``LinearRegressionCost``), one random start row per node, the same for both. The
methods are the same recursion (decent-bench's ``step_size`` is our ``lr``, its step ``k`` our iteration ``k``);
ours keeps ``u = x - y`` in place of its ``y``, so the two differ by rounding only.

Printed: max |x_ours - x_db| after 1, 10, 100, 1000 iterations, max |x - x*| of each at the end (x* = the
least-squares minimiser of (1/n) sum_i f_i), and the wall time per iteration of each, gradient included.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from decent_bench_admm_tracking import grad_fn_for, ours_in, report, run_db, run_ours  # noqa: E402


def ours_side(cfg: dict) -> dict:
    """Our SimpleGT on the problem in ``cfg``: ``{"sgt:<k>": x, ..., "sgt_t": s/iteration}``."""
    import rowstoch_fast as rsf

    Wm = rsf.MixingMatrix(cfg["W"], stochastic="doubly")
    out = {"version": np.array(rsf.__file__)}
    xs, t = run_ours(lambda X: rsf.SimpleGT(Wm, X, float(cfg["lr"])), grad_fn_for(cfg["A"], cfg["b"]), cfg["X0"],
                     int(cfg["iterations"]), 1)
    out.update({f"sgt:{k}": v for k, v in xs.items()}, sgt_t=np.array(t))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ours-only", nargs=2, metavar=("IN", "OUT"), help=argparse.SUPPRESS)
    ap.add_argument("--ours-python", default="python3", help="a Python whose rowstoch_fast has SimpleGT")
    ap.add_argument("--iterations", type=int, default=1000)
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--d", type=int, default=5)
    ap.add_argument("--m", type=int, default=20, help="rows of A_i per node")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lr", type=float, default=0.1, help="decent-bench's step_size")
    args = ap.parse_args()
    if args.ours_only:
        with np.load(args.ours_only[0]) as f:
            cfg = {k: f[k] for k in f.files}
        np.savez(args.ours_only[1], **ours_side(cfg))
        return

    import networkx as nx
    from _decent_bench import dbp, make_problem  # (exits with a message without decent-bench)
    from importlib.metadata import version

    A, b, X0 = make_problem(args.n, args.d, args.m, args.seed)
    G = nx.cycle_graph(args.n)
    Lap = nx.laplacian_matrix(G, nodelist=list(G.nodes())).toarray().astype(float)
    W = np.eye(args.n) - Lap / float(Lap.diagonal().max() + 1)
    assert np.allclose(W, W.T) and np.allclose(W.sum(0), 1) and W.min() >= 0
    x_star = np.linalg.lstsq(A.reshape(-1, args.d), b.reshape(-1), rcond=None)[0]
    L = max(np.linalg.eigvalsh(A[i].T @ A[i] / args.m)[-1] for i in range(args.n))
    cfg = {"A": A, "b": b, "X0": X0, "W": W, "iterations": args.iterations, "lr": args.lr}
    print(f"decent-bench {version('decent-bench')}, numpy {np.__version__}, Python {sys.version.split()[0]}")
    print(f"problem: n={args.n} ring, W = I - L/3 (the Metropolis weights), d={args.d}, m={args.m} rows/node, "
          f"f_i = ||A_i x - b_i||^2/(2m), L={L:.2f}, x0 = random (n, d), seed={args.seed}")
    ours = ours_in(args.ours_python, cfg, ours_side, __file__, ("SimpleGT",))
    print(f"ours: rowstoch_fast at {ours.pop('version')}")
    print(f"\nSimpleGT: lr = step_size = {args.lr}; db step k <-> our iteration k")
    db, db_t = run_db(lambda x0: dbp.SimpleGT(step_size=args.lr, x0=x0), A, b, W, X0, args.iterations)
    mine = {int(k.split(":")[1]): v for k, v in ours.items() if k.startswith("sgt:")}
    report("SimpleGT vs db.SimpleGT", "it", mine, float(ours["sgt_t"]), db, db_t, x_star)


if __name__ == "__main__":
    main()
