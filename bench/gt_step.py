"""One (MG-)Pull-Diag-GT iteration without the gradient: rowstoch_fast vs the straightforward NumPy/SciPy code.

Usage::

    python bench/gt_step.py [--log2n 14,18] [--d 10] [--rounds 5] [--json bench/gt_step.json]

Contenders (interleaved, medians, same run):

* ``rowstoch``: the x phase (``A^R w``) and the fused y phase of ``PullDiagGT``
  (tracker input, gossip, next ``x - lr y``, NaN check), with the exact
  tracker's cached diagonal scales;
* ``step``: the whole ``PullDiagGT.step`` with a constant gradient (adds the
  gradient copy and its NaN check and the Python around the kernels);
* ``scipy+V``: the paper's equations written directly, ``scipy.sparse`` for A and
  the tracker as ``V <- A V`` on a dense ``n x n`` V (Appendix B), where it fits;
* ``scipy``: the same without the tracker (mixing and element-wise work only).

A second table times the exact tracker: total cost to freeze (``tracker="exact"``,
computed once per matrix) against one dense ``V <- A V`` step.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, os.path.dirname(__file__))
from _harness import interleaved, machine_info, save_json  # noqa: E402

from rowstoch_fast import PullDiagGT, _core, topology  # noqa: E402
from rowstoch_fast.tracker import DiagTracker  # noqa: E402

V_MAX_BYTES = 4 * 2**30  # dense V for the baseline's tracker only up to this size


def make_contenders(n, d, R, lr=1e-3, seed=0):
    rng = np.random.default_rng(seed)
    A = topology.exponential(n)
    g_const = rng.standard_normal((n, d))
    # the exact tracker is built once per matrix; past 2^14 nodes that costs minutes, so time the
    # steady state with the perron tracker (after freezing the exact one is the same table lookup)
    opt = PullDiagGT(A, rng.standard_normal((n, d)), lr=lr, rounds=R, tracker="exact" if n <= 2**14 else "perron")
    opt.step(lambda X: g_const)  # initialise (and build the tracker) outside the timing
    c = A.csr
    t_fixed = opt.tracker.frozen_at  # time the steady state (the tracker costs nothing after freezing)

    cur, nxt = opt._cur, opt._nxt

    def ours():
        _core.mix_power(c.indptr, c.indices, c.data, cur["xw"], R, nxt["x"], opt._scratch, check_indices=False)
        _core.gt_y_phase(c.indptr, c.indices, c.data, R, lr, nxt["x"], cur["y"], nxt["g"], cur["g"],
                         opt.tracker.scale(t_fixed + 1), opt.tracker.scale(t_fixed),
                         nxt["y"], cur["xw"], opt._psi, opt._scratch, check_indices=False)

    def step():  # the whole PullDiagGT.step: gradient copy and check, both phases, commit
        opt.step(lambda X: g_const)

    S = sp.csr_matrix(c)
    state = {"x": rng.standard_normal((n, d)), "y": rng.standard_normal((n, d)),
             "g_old": g_const, "g_new": g_const.copy(), "D_old": np.ones(n)}

    def scipy_plain(with_V=None):
        x = state["x"] - lr * state["y"]
        for _ in range(R):
            x = S @ x
        if with_V is not None:
            for _ in range(R):
                with_V[...] = S @ with_V
            D_new = np.diag(with_V).copy()
        else:
            D_new = state["D_old"]
        psi = state["y"] + state["g_new"] / D_new[:, None] - state["g_old"] / state["D_old"][:, None]
        for _ in range(R):
            psi = S @ psi
        state["x"], state["y"], state["D_old"] = x, psi, D_new

    contenders = {"rowstoch": ours, "step": step, "scipy": scipy_plain}
    if n * n * 8 <= V_MAX_BYTES:
        V = np.eye(n)
        contenders["scipy+V"] = lambda: scipy_plain(V)
    return contenders


def tracker_cost(n, R=1):
    A = topology.exponential(n)
    A.metrics()
    t = time.perf_counter()
    tr = DiagTracker(A, R, "exact")
    total = time.perf_counter() - t
    S = sp.csr_matrix(A.csr)
    V = np.eye(n)
    t = time.perf_counter()
    V = S @ V
    sparse_step = time.perf_counter() - t
    D = A.toarray()
    t = time.perf_counter()
    V = D @ V
    dense_step = time.perf_counter() - t
    t = time.perf_counter()
    for k in range(10**6):  # per-iteration cost after freezing: a table lookup
        tr.scale(tr.frozen_at + k)
        if k == 999:
            break
    lookup = (time.perf_counter() - t) / 1000
    return {"n": n, "frozen_at": tr.frozen_at, "freeze_total_s": total, "scipy_AV_step_s": sparse_step,
            "dense_AV_step_s": dense_step, "lookup_after_freeze_s": lookup}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--log2n", default="14,18")
    p.add_argument("--d", type=int, default=10)
    p.add_argument("--R", default="1,10")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--tracker-n", type=int, default=4096)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    info = machine_info()
    print(f"# {info['cpu']}, {info['cores']} cores, kernels on {_core.get_num_threads()} threads, OpenMP {info['build']['openmp']}")
    rows = []
    print("| n | d | R | rowstoch ms | step ms | scipy ms | scipy+V ms | speedup vs scipy | speedup vs scipy+V |")
    print("|---|---|---|---|---|---|---|---|---|")
    for log2n in map(int, args.log2n.split(",")):
        for R in map(int, args.R.split(",")):
            c = make_contenders(2**log2n, args.d, R)
            rounds = args.rounds if "scipy+V" not in c else 3
            med, _ = interleaved(c, rounds=rounds, min_time=0.05, min_calls=2 if "scipy+V" in c else 4)
            row = {"n": 2**log2n, "d": args.d, "R": R, "seconds": med}
            rows.append(row)
            v = med.get("scipy+V")
            print(f"| 2^{log2n} | {args.d} | {R} | {med['rowstoch'] * 1e3:.3f} | {med['step'] * 1e3:.3f} | "
                  f"{med['scipy'] * 1e3:.3f} | "
                  f"{'%.1f' % (v * 1e3) if v else 'n/a (V is n x n)'} | {med['scipy'] / med['rowstoch']:.2f}x | "
                  f"{'%.0fx' % (v / med['rowstoch']) if v else 'n/a'} |", flush=True)
    tc = tracker_cost(args.tracker_n)
    print(f"\nexact tracker, exponential({tc['n']}): frozen at k = {tc['frozen_at']}, total {tc['freeze_total_s']:.3f} s "
          f"(= {tc['freeze_total_s'] / tc['frozen_at'] * 1e3:.2f} ms per step until frozen, then "
          f"{tc['lookup_after_freeze_s'] * 1e9:.0f} ns per iteration); one V <- A V step: scipy {tc['scipy_AV_step_s']:.3f} s, "
          f"dense BLAS {tc['dense_AV_step_s']:.3f} s")
    if args.json:
        save_json(args.json, {"machine": info, "rows": rows, "tracker": tc})


if __name__ == "__main__":
    main()
