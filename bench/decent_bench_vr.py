"""Side by side with decent-bench 0.3.0: ADMM, DiNNO, GT-SAGA (both forms) and GT-SARAH.

Run (from the repository root) with a Python >= 3.13 environment that has both packages::

    /tmp/db313/bin/pip install --force-reinstall --no-deps /path/to/rowstoch_fast
    /tmp/db313/bin/python bench/decent_bench_vr.py [--iters 1000] [--only admm,dinno,saga,sarah]

Setup as in ``decent_bench_prox.py`` / ``decent_bench_local.py``: n = 8 undirected ring, Metropolis W (= I - L/3,
so ``W = I - L / kappa`` with kappa = 3 is the same matrix), d = 5, m = 20 rows per node,
f_i = ||A_i x - b_i||^2 / (2m) (decent-bench ``LinearRegressionCost``; ours
``rowstoch_fast.objectives.LeastSquares(H, y, n)``), the same x0 for both.

1. ADMM: ours ``ADMM(W, x0, lr = 1/(kappa rho))`` stepped with ``f.oracle()`` (its ``prox``) against decent-bench
   ``ADMM(penalty=rho)`` (relaxation 0.5, z0 = 0). x0 = 0 for both: decent-bench's first x ignores x0
   (x_1 = prox(r_i * sum z0) = prox(0)), and ours spends iteration 0 on a communication round (u_0 = W x_0) with
   no prox, so **decent-bench after k steps <-> ours after k + 1 steps**.
2. DiNNO: ours ``DiNNO(W, x0, lr, local_steps=B, penalty=kappa rho)`` against decent-bench's DiNNO with its
   neighbour sums done out of place (``DiNNOOutOfPlace`` below; 0.3.0's adds received messages in place, see
   decent_bench_local.py's DLM). decent-bench round r <-> our iteration r B. The shipped DiNNO is run too.
3. GT-SAGA: decent-bench ``GT_SAGA`` (batch size 1) with its batch sampling replaced, in this script only, by our
   draws (agent i's k-th batch = ``draw_samples(m, (n,), k, seed)[i]``, what ``f.oracle(seed).sample`` draws at
   its k-th call), against ours ``GTSAGAATC`` (two draws per iteration, as decent-bench's); ours ``GTSAGA`` (the
   reference's form) is shown beside it by its distance to the minimiser only.
4. GT-SARAH: decent-bench ``GT_SARAH(num_local_steps=q)`` (one step = one outer loop = 1 + q state updates), same
   draws, against ours ``GTSARAH(inner_steps=q)`` after (q + 1) s iterations.

Printed: max |x_ours - x_db| over all nodes and coordinates at several iteration counts, max |x - x*| of both at
the last (x* = the least-squares solution of the stacked rows), and wall time per iteration (ours) / per
decent-bench step (``Algorithm.run``, snapshot every step, its default).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import networkx as nx
import numpy as np

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _decent_bench import (CHECKPOINTS, LinearRegressionCost, P2PNetwork, dbp, db_x, iop,  # noqa: E402
                           make_problem)
from _decent_bench import make_network as _make_network  # noqa: E402

import rowstoch_fast as rsf
from rowstoch_fast.objectives import LeastSquares, draw_samples



# ---------------------------------------------------------------------------------------------------------
# problem (as in decent_bench_prox.py)
# ---------------------------------------------------------------------------------------------------------


class DrawnLinearRegressionCost(LinearRegressionCost):
    """decent-bench's ``LinearRegressionCost`` whose ``indices="batch"`` batches are given: the k-th one is
    ``[draws[k]]`` (NOT decent-bench code: replaces its epoch-style random batches by our draws)."""

    def __init__(self, dataset, draws: np.ndarray):
        super().__init__(dataset, batch_size=1)
        self._draws, self.draw_calls = draws, 0

    def _sample_batch_indices(self, indices="batch"):
        if isinstance(indices, str) and indices == "batch":
            self._last_batch_used = [int(self._draws[self.draw_calls])]
            self.draw_calls += 1
            return self._last_batch_used
        return super()._sample_batch_indices(indices)

    def _get_batch_data(self, indices="batch"):
        """decent-bench 0.3.0's, with ``b`` kept 1-d: its ``iop.squeeze`` makes a one-sample batch's ``b`` 0-d, and
        then ``gradient(x)`` (reduction "mean") raises in ``matmul(A.T, b)`` for every batch of size 1 (a bug
        of ``_linear_regression_cost.py:295``; ``reduction=None`` is not affected)."""
        A, ATA, b = super()._get_batch_data(indices)
        return A, ATA, iop.reshape(b, (-1,)) if len(iop.shape(b)) == 0 else b


def make_network(A: np.ndarray, b: np.ndarray, W: np.ndarray, draws: np.ndarray | None = None) -> P2PNetwork:
    """The shared network; ``draws``: (K, n) sample indices, column i for agent i (then batch size 1 with those
    batches)."""
    if draws is None:
        return _make_network(A, b, W)
    return _make_network(A, b, W, cost=lambda i, data: DrawnLinearRegressionCost(data, draws[:, i]))




# ---------------------------------------------------------------------------------------------------------
# decent-bench DiNNO with the neighbour sums done out of place (NOT decent-bench code: a fix of 0.3.0's aliasing)
# ---------------------------------------------------------------------------------------------------------
def _sum_messages(agent):
    s = None
    for v in agent.messages().values():
        s = v if s is None else s + v  # never += on a received (shared) message
    return s


@dataclass(eq=False)
class DiNNOOutOfPlace(dbp.DiNNO):
    """decent-bench 0.3.0 DiNNO (``_dinno.py:90-135``) with ``s = s + v`` / ``s / 2`` instead of ``+=`` / ``/=``."""

    name: str = "DiNNO (out-of-place sums)"

    def _auxiliary_update(self, agent) -> None:
        s = _sum_messages(agent)
        if s is not None:
            agent.aux_vars["p"] = agent.aux_vars["p"] + self.penalty * (agent.x * len(agent.messages()) - s)

    def _local_training(self, agent) -> None:
        psi = iop.copy(agent.x)
        nb = _sum_messages(agent) / 2.0
        deg = len(agent.messages())
        for _ in range(self.num_local_steps):
            grad = agent.cost.gradient(psi) + agent.aux_vars["p"] + 2.0 * self.penalty * ((psi - agent.x / 2) * deg - nb)
            psi = psi - self.step_size * grad
        agent.x = psi


# ---------------------------------------------------------------------------------------------------------
# runners
# ---------------------------------------------------------------------------------------------------------


def run_db(make_alg, make_net, X0, steps: int, checkpoints) -> tuple[dict[int, np.ndarray], float]:
    """Iterates after the checkpoint numbers of steps (resuming with run(start_iteration=...)), then a timed
    fresh run. ``X0 = None``: the algorithm's default x0 (zeros)."""
    def fresh():
        net = make_net()
        x0 = None if X0 is None else {ag: iop.from_numpy(X0[k]) for k, ag in enumerate(net.agents())}
        return net, make_alg(x0)

    net, alg = fresh()
    out, done = {}, 0
    for c in sorted({c for c in checkpoints if c <= steps} | {steps}):
        with np.errstate(all="ignore"):
            alg.run(net, c, start_iteration=done)
        out[c], done = db_x(net), c
    net, alg = fresh()
    t0 = time.perf_counter()
    with np.errstate(all="ignore"):
        alg.run(net, steps)
    return out, (time.perf_counter() - t0) / steps


def run_ours(make_opt, steps: int, checkpoints, per: int = 1, offset: int = 0):
    """``make_opt() -> (opt, oracle)``. Ours after ``offset + c * per`` iterations, keyed by c; time per
    iteration (over ``offset + steps * per`` iterations)."""
    opt, oracle = make_opt()
    out = {}
    for _ in range(offset):
        opt.step(oracle)
    for c in range(1, steps + 1):
        for _ in range(per):
            opt.step(oracle)
        if c in checkpoints or c == steps:
            out[c] = np.array(opt.x, dtype=float, copy=True)
    opt, oracle = make_opt()
    total = offset + steps * per
    t0 = time.perf_counter()
    for _ in range(total):
        opt.step(oracle)
    return out, (time.perf_counter() - t0) / total


def report(label: str, unit: str, ours: dict, t_ours: float, db: dict, t_db: float, x_star: np.ndarray,
           ours_unit: str = "it") -> None:
    diffs = "  ".join(f"{unit}={k}: {np.max(np.abs(ours[k] - db[k])):.2e}" for k in sorted(ours))
    last = max(ours)
    print(f"  {label:46s} max|ours - db|  {diffs}")
    print(f"  {'':46s} max|x - x*| at {unit}={last}: ours {np.max(np.abs(ours[last] - x_star)):.1e}, "
          f"db {np.max(np.abs(db[last] - x_star)):.1e} | time: ours {t_ours * 1e6:7.1f} us/{ours_unit}, "
          f"db {t_db * 1e6:8.1f} us/{unit}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iters", type=int, default=1000, help="decent-bench steps (ADMM, GT-SAGA), rounds (DiNNO), "
                    "outer loops (GT-SARAH: ~iters / (q + 1) by default)")
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--d", type=int, default=5)
    ap.add_argument("--m", type=int, default=20, help="rows of A_i per node")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rho", type=float, default=1.0, help="decent-bench ADMM penalty")
    ap.add_argument("--dinno-rho", type=float, default=0.5, help="decent-bench DiNNO penalty")
    ap.add_argument("--dinno-lr", type=float, default=0.02)
    ap.add_argument("--B", type=int, default=4, help="DiNNO local steps")
    ap.add_argument("--saga-lr", type=float, default=0.02)
    ap.add_argument("--sarah-lr", type=float, default=0.02)
    ap.add_argument("--q", type=int, default=9, help="GT-SARAH inner steps")
    ap.add_argument("--sarah-outer", type=int, default=0, help="GT-SARAH outer loops (0: iters // (q + 1))")
    ap.add_argument("--draw-seed", type=int, default=1, help="seed of our sample draws (f.oracle(seed))")
    ap.add_argument("--only", default="", help="comma list of admm,dinno,saga,sarah")
    args = ap.parse_args()
    only = set(filter(None, args.only.split(",")))
    want = (lambda k: not only or k in only)
    K, n, d, m = args.iters, args.n, args.d, args.m

    from importlib.metadata import version

    print(f"decent-bench {version('decent-bench')}, rowstoch_fast {version('rowstoch_fast')}, numpy {np.__version__}")
    A, b, X0 = make_problem(n, d, m, args.seed)
    f = LeastSquares(A.reshape(-1, d), b.reshape(-1), n)
    Wm = rsf.topology.ring(n, directed=False, weights="metropolis")
    W = np.asarray(Wm.toarray(), dtype=float)
    G = nx.cycle_graph(n)
    Lap = nx.laplacian_matrix(G, nodelist=list(G.nodes())).toarray().astype(float)
    kappa = float(Lap.diagonal().max() + 1)
    Wk = np.eye(n) - Lap / kappa
    Wkm = rsf.MixingMatrix(Wk, stochastic="doubly")
    x_star = np.linalg.lstsq(A.reshape(-1, d), b.reshape(-1), rcond=None)[0]
    assert np.allclose(x_star, f.optimum().x, atol=1e-12)
    Ls = max(np.max(np.sum(A[i] ** 2, axis=1)) for i in range(n))
    print(f"problem: n={n} ring, d={d}, m={m} rows/node, f_i = ||A_i x - b_i||^2/(2m), seed={args.seed}, "
          f"max per-sample L = {Ls:.1f}; W = I - L/{kappa:g} (max|W - W_Metropolis| = {np.max(np.abs(Wk - W)):.1e});"
          f" x* = lstsq of the stacked rows")

    if want("admm"):
        lr = 1.0 / (kappa * args.rho)
        print(f"\nADMM: decent-bench rho={args.rho}, relaxation 0.5, x0=None (0); ours W = I - L/{kappa:g}, "
              f"lr = 1/(kappa rho) = {lr:.6g}, x0 = 0; db step k <-> ours iteration k + 1")
        db, t_db = run_db(lambda x0: dbp.ADMM(penalty=args.rho, relaxation=0.5, x0=x0),
                          lambda: make_network(A, b, W), None, K, CHECKPOINTS)
        Z = np.zeros((n, d))
        ours, t = run_ours(lambda: (rsf.ADMM(Wkm, Z, lr), f.oracle()), K, CHECKPOINTS, offset=1)
        report("ADMM(k+1 its) vs db.ADMM(k steps)", "k", ours, t, db, t_db, x_star)
        ours0, _ = run_ours(lambda: (rsf.ADMM(Wkm, Z, lr), f.oracle()), K, CHECKPOINTS, offset=0)
        print(f"  (without the offset, ours after k vs db after k: max|diff| at k=1: "
              f"{np.max(np.abs(ours0[1] - db[1])):.1e}, k=10: {np.max(np.abs(ours0[10] - db[10])):.1e})")
        # a non-zero x0: decent-bench ignores it (its x_1 = prox(0)); ours starts from it
        dbX, _ = run_db(lambda x0: dbp.ADMM(penalty=args.rho, relaxation=0.5, x0=x0),
                        lambda: make_network(A, b, W), X0, 10, (1, 10))
        print(f"  with x0 = random for both: max|db(x0=X0) - db(x0=None)| after 10 steps = "
              f"{np.max(np.abs(dbX[10] - db[10])):.1e} (decent-bench ignores x0 once z0 = 0)")

    if want("dinno"):
        B, rho = args.B, args.dinno_rho
        c = kappa * rho
        print(f"\nDiNNO: decent-bench step={args.dinno_lr}, B={B}, rho={rho} (unweighted sums); ours W = I - L/{kappa:g}, "
              f"penalty = kappa rho = {c:g}, local_steps = B; db round r <-> ours iteration r*B")
        make = lambda: (rsf.DiNNO(Wkm, X0.copy(), args.dinno_lr, local_steps=B, penalty=c), f.full_gradient)
        ours, t = run_ours(make, K, CHECKPOINTS, per=B)
        db, t_db = run_db(lambda x0: DiNNOOutOfPlace(step_size=args.dinno_lr, num_local_steps=B, penalty=rho, x0=x0),
                          lambda: make_network(A, b, W), X0, K, CHECKPOINTS)
        report("DiNNO vs db.DiNNO + out-of-place sums", "r", ours, t * B, db, t_db, x_star, "r")
        db, t_db = run_db(lambda x0: dbp.DiNNO(step_size=args.dinno_lr, num_local_steps=B, penalty=rho, x0=x0),
                          lambda: make_network(A, b, W), X0, K, CHECKPOINTS)
        report("DiNNO vs db.DiNNO AS SHIPPED (in-place sums)", "r", ours, t * B, db, t_db, x_star, "r")

    def draws_for(calls):
        return np.stack([draw_samples(m, (n,), k, args.draw_seed) for k in range(calls)])

    if want("saga"):
        lr = args.saga_lr
        print(f"\nGT-SAGA: lr={lr}, batch 1, draw seed {args.draw_seed}; decent-bench's batches = our draws "
              f"(2 per iteration: estimate at x_k, table refresh at x_(k+1))")
        draws = draws_for(2 * K)
        db, t_db = run_db(lambda x0: dbp.GT_SAGA(step_size=lr, x0=x0), lambda: make_network(A, b, W, draws),
                          X0, K, CHECKPOINTS)
        ours, t = run_ours(lambda: (rsf.GTSAGAATC(Wm, X0.copy(), lr), f.oracle(seed=args.draw_seed)), K, CHECKPOINTS)
        report("GTSAGAATC vs db.GT_SAGA (same draws)", "k", ours, t, db, t_db, x_star)
        ref, t_ref = run_ours(lambda: (rsf.GTSAGA(Wm, X0.copy(), lr), f.oracle(seed=args.draw_seed)), K, CHECKPOINTS)
        dist = "  ".join(f"k={k}: {np.max(np.abs(ref[k] - x_star)):.1e}" for k in sorted(ref))
        dist_db = "  ".join(f"k={k}: {np.max(np.abs(db[k] - x_star)):.1e}" for k in sorted(db))
        print(f"  ours GTSAGA (reference form, 1 draw + 1 round per it) max|x - x*|  {dist}  ({t_ref * 1e6:.1f} us/it)")
        print(f"  db GT_SAGA  (ATC, 2 draws + 2 messages per it)        max|x - x*|  {dist_db}")

    if want("sarah"):
        q, lr = args.q, args.sarah_lr
        S = args.sarah_outer or max(1, K // (q + 1))
        cps = sorted({1, 2, 10, S // 2, S} - {0})
        print(f"\nGT-SARAH: lr={lr}, q={q}, {S} outer loops = {S * (q + 1)} of our iterations; decent-bench's batches "
              f"= our draws (q per outer loop); db outer loop s <-> ours iteration s*(q+1)")
        draws = draws_for(S * q)
        db, t_db = run_db(lambda x0: dbp.GT_SARAH(num_local_steps=q, step_size=lr, x0=x0),
                          lambda: make_network(A, b, W, draws), X0, S, cps)
        ours, t = run_ours(lambda: (rsf.GTSARAH(Wm, X0.copy(), lr, inner_steps=q), f.oracle(seed=args.draw_seed)),
                           S, cps, per=q + 1)
        report("GTSARAH vs db.GT_SARAH (same draws)", "s", ours, t * (q + 1), db, t_db, x_star, "s")


if __name__ == "__main__":
    main()
