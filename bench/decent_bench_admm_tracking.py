"""Side by side with decent-bench 0.3.0: LT-ADMM, LT-ADMM-VR and ATG (ADMM-tracking gradient).

Run (from the repository root) with a Python >= 3.13 environment that has decent-bench::

    /tmp/db313/bin/python bench/decent_bench_admm_tracking.py [--rounds 1000] [--ours-python python3]

Where that environment's ``rowstoch_fast`` has no ``LTADMM`` / ``ATG`` (an older copy installed there), our side runs
in a subprocess of ``--ours-python`` (default: ``python3``, whose ``rowstoch_fast`` is this checkout), fed the same
data through a temporary ``.npz``; ``--ours-only IN OUT`` is that subprocess's mode.

Setup as in ``decent_bench_local.py`` / ``decent_bench_vr.py``: n = 8 undirected ring, Metropolis W (= I - L/3, so
``W = I - L / kappa`` with kappa = 3 is the same matrix), d = 5, m = 20 rows per node, f_i = ||A_i x - b_i||^2 / (2m)
(decent-bench ``LinearRegressionCost``), one random start row per node, the same for both.

Conventions adapted here (the setup only, never either package's code):

* Both decent-bench methods keep one variable ``z_ij`` per link and use unweighted neighbour sums with penalty
  ``rho``; ours weight each link by ``w_ij`` (penalty ``rho w_ij``) and keep two sums per node. On
  ``W = I - L / kappa``, ``w_ij = 1 / kappa`` on every link, so ours with ``penalty = kappa rho`` is decent-bench's.
* LT-ADMM: decent-bench starts ``z_ij,0 = x0_i``, ours at ``penalty w_ij x0_i`` (= its ``rho x0_i``): the same at
  ``rho = 1`` (its default, used here; ``--lt-rho 2`` shows the start's difference, gone by round 1000).
  decent-bench's ``step`` is one round of ``tau`` local steps; ours take one gradient step per iteration, so
  decent-bench's round ``r`` is compared with our iteration ``r tau``. Ours send ``x_r`` at the start
  of round ``r`` (the first sends ``x_0``); decent-bench at the end of round ``r - 1``: the same messages.
* LT-ADMM-VR: as LT-ADMM, with one sample per node and local step (decent-bench ``batch_size=1``, its default
  ``v2=True``); decent-bench's batches are replaced by our draws (agent i's k-th batch = ``draw_samples(m, (n,), k,
  seed)[i]``, what ``LeastSquares(...).oracle(seed).sample`` draws at its k-th call), and the refresh of the table
  at the new ``phi`` uses the same sample (explicit indices in both).
* ATG: our ``lr = gamma delta`` (the step along the tracked gradient), ``gamma``, ``relaxation``, ``z0 = 0`` for
  both; decent-bench's step ``k`` is our iteration ``k``.

Printed: max |x_ours - x_db| over all nodes and coordinates after 1, 10, 100, 1000 rounds (iterations for ATG), max
|x - x*| of each at the end (x* = the least-squares minimiser of (1/n) sum_i f_i), and the wall time per round
(iteration) of each, gradient included.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

CHECKPOINTS = (1, 10, 100, 1000)


# ---------------------------------------------------------------------------------------------------------
# ours (any Python whose rowstoch_fast has LTADMM and ATG)
# ---------------------------------------------------------------------------------------------------------
def grad_fn_for(A: np.ndarray, b: np.ndarray):
    """Row ``i``: ``(1/m) A_i^T (A_i x_i - b_i)``."""
    m = A.shape[1]

    def grad(X: np.ndarray) -> np.ndarray:
        return np.einsum("imd,im->id", A, np.einsum("imd,id->im", A, X) - b) / m

    return grad


def run_ours(make_opt, grad, X0, rounds: int, per_round: int) -> tuple[dict, float]:
    """Ours after ``r * per_round`` iterations at the checkpoints, keyed by r; then a timed fresh run (per round).
    ``grad=None``: ``make_opt`` returns ``(opt, grad)`` (an oracle whose draws start with the optimizer)."""
    def fresh():
        made = make_opt(X0.copy())
        return made if grad is None else (made, grad)

    opt, g = fresh()
    out = {}
    for r in range(1, rounds + 1):
        for _ in range(per_round):
            opt.step(g)
        if r in CHECKPOINTS or r == rounds:
            out[r] = np.array(opt.x, dtype=float, copy=True)
    opt, g = fresh()
    t0 = time.perf_counter()
    for _ in range(rounds * per_round):
        opt.step(g)
    return out, (time.perf_counter() - t0) / rounds


def ours_side(cfg: dict) -> dict:
    """Our LT-ADMM and ATG on the problem in ``cfg``: ``{"lt:<r>": x, ..., "lt_t": s/round, "atg:...", "atg_t"}``."""
    import rowstoch_fast as rsf

    A, b, X0, W = cfg["A"], cfg["b"], cfg["X0"], cfg["W"]
    R, tau, kappa = int(cfg["rounds"]), int(cfg["tau"]), float(cfg["kappa"])
    Wm = rsf.MixingMatrix(W, stochastic="doubly")
    grad = grad_fn_for(A, b)
    out = {"version": np.array(rsf.__file__)}
    lt, t = run_ours(lambda X: rsf.LTADMM(Wm, X, float(cfg["lt_lr"]), local_steps=tau, penalty=kappa * float(
        cfg["lt_rho"]), relaxation=float(cfg["lt_alpha"]), dual_step=float(cfg["lt_beta"])), grad, X0, R, tau)
    out.update({f"lt:{k}": v for k, v in lt.items()}, lt_t=np.array(t))
    from rowstoch_fast.objectives import LeastSquares, draw_samples

    n, m, d = A.shape
    f = LeastSquares(A.reshape(-1, d), b.reshape(-1), n)
    vrx, t = run_ours(lambda X: (rsf.LTADMMVR(Wm, X, float(cfg["lt_lr"]), local_steps=tau, penalty=kappa * float(
        cfg["lt_rho"]), relaxation=float(cfg["lt_alpha"]), dual_step=float(cfg["lt_beta"])),
        f.oracle(seed=int(cfg["draw_seed"]))), None, X0, R, tau)
    out.update({f"vr:{k}": v for k, v in vrx.items()}, vr_t=np.array(t),
               vr_draws=np.stack([draw_samples(m, (n,), k, int(cfg["draw_seed"])) for k in range(R * tau)]))
    lr = float(cfg["atg_gamma"]) * float(cfg["atg_delta"])  # (our lr: the step along s, gamma delta)
    atg, t = run_ours(lambda X: rsf.ATG(Wm, X, lr, penalty=kappa * float(cfg["atg_rho"]),
                                        relaxation=float(cfg["atg_alpha"]), gamma=float(cfg["atg_gamma"])),
                      grad, X0, R, 1)
    out.update({f"atg:{k}": v for k, v in atg.items()}, atg_t=np.array(t))
    return out


def ours_in(python: str, cfg: dict, side, script: str, needs: tuple[str, ...]) -> dict:
    """``side(cfg)`` here if this ``rowstoch_fast`` has every class in ``needs``, else in a subprocess of ``python``
    running ``script --ours-only IN OUT`` (the same data through a temporary ``.npz``)."""
    try:
        import rowstoch_fast as rsf

        if all(hasattr(rsf, name) for name in needs):
            return side(cfg)
    except ImportError:
        pass
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = os.path.join(tmp, "in.npz"), os.path.join(tmp, "out.npz")
        np.savez(src, **cfg)
        subprocess.run([python, os.path.abspath(script), "--ours-only", src, dst], check=True)
        with np.load(dst) as f:
            return {k: f[k] for k in f.files}


def ours_via(python: str, cfg: dict) -> dict:
    """:func:`ours_side` through :func:`ours_in`."""
    return ours_in(python, cfg, ours_side, __file__, ("LTADMM", "LTADMMVR", "ATG"))


# ---------------------------------------------------------------------------------------------------------
# decent-bench (Python >= 3.13)
# ---------------------------------------------------------------------------------------------------------
def drawn_cost(data, draws: np.ndarray):
    """decent-bench's ``LinearRegressionCost`` (batch size 1) whose k-th ``indices="batch"`` batch is ``[draws[k]]``
    (our draws in place of its random batches; NOT decent-bench code), with a one-sample batch's ``b`` kept 1-d
    (0.3.0's ``iop.squeeze`` makes it 0-d, and ``gradient(x)`` then raises: see decent_bench_vr.py)."""
    from _decent_bench import LinearRegressionCost, iop

    cost = LinearRegressionCost(data, batch_size=1)
    sample, get = cost._sample_batch_indices, cost._get_batch_data
    calls = iter(draws)

    def sample_batch(indices="batch"):
        if isinstance(indices, str) and indices == "batch":
            cost._last_batch_used = [int(next(calls))]
            return cost._last_batch_used
        return sample(indices)

    def batch_data(indices="batch"):
        A_, ATA, b_ = get(indices)
        return A_, ATA, iop.reshape(b_, (-1,)) if len(iop.shape(b_)) == 0 else b_

    cost._sample_batch_indices, cost._get_batch_data = sample_batch, batch_data
    return cost


def run_db(make_alg, A, b, W, X0, rounds: int, cost=None) -> tuple[dict, float]:
    """decent-bench's models at the checkpoints (resuming with run(start_iteration=...)), then a timed fresh run
    (``cost``: agent costs for ``make_network``, made afresh for each run)."""
    from _decent_bench import db_x, iop, make_network

    net = make_network(A, b, W, cost)
    alg = make_alg({ag: iop.from_numpy(X0[k]) for k, ag in enumerate(net.agents())})
    out, done = {}, 0
    for c in sorted({c for c in CHECKPOINTS if c <= rounds} | {rounds}):
        with np.errstate(all="ignore"):
            alg.run(net, c, start_iteration=done)
        out[c], done = db_x(net), c
    net = make_network(A, b, W, cost)
    alg = make_alg({ag: iop.from_numpy(X0[k]) for k, ag in enumerate(net.agents())})
    t0 = time.perf_counter()
    with np.errstate(all="ignore"):
        alg.run(net, rounds)
    return out, (time.perf_counter() - t0) / rounds


def report(label: str, unit: str, ours: dict, mine_t: float, db: dict, db_t: float, x_star: np.ndarray) -> None:
    diffs = "  ".join(f"{unit}={k}: {np.max(np.abs(ours[k] - db[k])):.2e}" for k in sorted(ours))
    last = max(ours)
    print(f"  {label:34s} max|ours - db|  {diffs}")
    print(f"  {'':34s} max|x_{last} - x*|: ours {np.max(np.abs(ours[last] - x_star)):.1e}, "
          f"db {np.max(np.abs(db[last] - x_star)):.1e} | time/{unit}: ours {mine_t * 1e6:8.1f} us, "
          f"decent-bench {db_t * 1e6:8.1f} us (x{db_t / mine_t:.0f})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ours-only", nargs=2, metavar=("IN", "OUT"), help=argparse.SUPPRESS)
    ap.add_argument("--ours-python", default="python3", help="a Python whose rowstoch_fast has LTADMM and ATG")
    ap.add_argument("--rounds", type=int, default=1000, help="rounds (LT-ADMM) / iterations (ATG)")
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--d", type=int, default=5)
    ap.add_argument("--m", type=int, default=20, help="rows of A_i per node")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tau", type=int, default=5, help="LT-ADMM local steps (decent-bench's default 5)")
    ap.add_argument("--lt-lr", type=float, default=0.05, help="LT-ADMM gamma")
    ap.add_argument("--lt-beta", type=float, default=0.05, help="LT-ADMM beta")
    ap.add_argument("--lt-rho", type=float, default=1.0, help="LT-ADMM decent-bench penalty (z_ij,0 agree at 1)")
    ap.add_argument("--lt-alpha", type=float, default=0.5)
    ap.add_argument("--draw-seed", type=int, default=1, help="seed of the sample draws of LT-ADMM-VR")
    ap.add_argument("--atg-delta", type=float, default=0.5, help="ATG delta (our lr = gamma delta)")
    ap.add_argument("--atg-gamma", type=float, default=0.3)
    ap.add_argument("--atg-rho", type=float, default=1.0)
    ap.add_argument("--atg-alpha", type=float, default=0.5)
    args = ap.parse_args()
    if args.ours_only:
        with np.load(args.ours_only[0]) as f:
            cfg = {k: f[k] for k in f.files}
        np.savez(args.ours_only[1], **ours_side(cfg))
        return

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import networkx as nx
    from _decent_bench import dbp, make_problem  # (exits with a message without decent-bench)
    from importlib.metadata import version

    R, tau = args.rounds, args.tau
    A, b, X0 = make_problem(args.n, args.d, args.m, args.seed)
    G = nx.cycle_graph(args.n)
    Lap = nx.laplacian_matrix(G, nodelist=list(G.nodes())).toarray().astype(float)
    kappa = float(Lap.diagonal().max() + 1)
    W = np.eye(args.n) - Lap / kappa
    assert np.allclose(W, W.T) and np.allclose(W.sum(0), 1) and W.min() >= 0
    x_star = np.linalg.lstsq(A.reshape(-1, args.d), b.reshape(-1), rcond=None)[0]
    L = max(np.linalg.eigvalsh(A[i].T @ A[i] / args.m)[-1] for i in range(args.n))
    cfg = {"A": A, "b": b, "X0": X0, "W": W, "rounds": R, "tau": tau, "kappa": kappa, "lt_lr": args.lt_lr,
           "lt_beta": args.lt_beta, "lt_rho": args.lt_rho, "lt_alpha": args.lt_alpha, "atg_delta": args.atg_delta,
           "atg_gamma": args.atg_gamma, "atg_rho": args.atg_rho, "atg_alpha": args.atg_alpha,
           "draw_seed": args.draw_seed}
    print(f"decent-bench {version('decent-bench')}, numpy {np.__version__}, Python {sys.version.split()[0]}")
    print(f"problem: n={args.n} ring, W = I - L/{kappa:g} (the Metropolis weights), d={args.d}, m={args.m} rows/node, "
          f"f_i = ||A_i x - b_i||^2/(2m), L={L:.2f}, x0 = random (n, d), seed={args.seed}")
    ours = ours_via(args.ours_python, cfg)
    print(f"ours: rowstoch_fast at {ours.pop('version')}")

    print(f"\nLT-ADMM: gamma={args.lt_lr}, beta={args.lt_beta}, tau={tau}, rho={args.lt_rho} (ours penalty "
          f"{kappa * args.lt_rho:g}), alpha={args.lt_alpha}; db round r <-> our iteration r*tau")
    db, db_t = run_db(lambda x0: dbp.LT_ADMM(num_local_steps=tau, step_size=args.lt_lr, aux_step_size=args.lt_beta,
                                             penalty=args.lt_rho, relaxation=args.lt_alpha, x0=x0), A, b, W, X0, R)
    mine = {int(k.split(":")[1]): v for k, v in ours.items() if k.startswith("lt:")}
    report("LTADMM vs db.LT_ADMM", "round", mine, float(ours["lt_t"]), db, db_t, x_star)

    print(f"\nLT-ADMM-VR: as LT-ADMM, batch 1 (decent-bench v2=True), draw seed {args.draw_seed}; decent-bench's "
          f"batches = our draws (one per local step; the table refresh at the new phi: the same sample)")
    draws = ours.pop("vr_draws")  # (drawn on our side: rowstoch_fast may not import in this Python)
    db, db_t = run_db(lambda x0: dbp.LT_ADMM_VR(num_local_steps=tau, step_size=args.lt_lr, aux_step_size=args.lt_beta,
                                                penalty=args.lt_rho, relaxation=args.lt_alpha, x0=x0), A, b, W, X0, R,
                      cost=lambda i, data: drawn_cost(data, draws[:, i]))
    mine = {int(k.split(":")[1]): v for k, v in ours.items() if k.startswith("vr:")}
    report("LTADMMVR vs db.LT_ADMM_VR (same draws)", "round", mine, float(ours["vr_t"]), db, db_t, x_star)

    print(f"\nATG: delta={args.atg_delta} (our lr = gamma delta = {args.atg_gamma * args.atg_delta:g}), "
          f"gamma={args.atg_gamma}, rho={args.atg_rho} (ours penalty {kappa * args.atg_rho:g}), "
          f"alpha={args.atg_alpha}, z0 = 0; db step k <-> our iteration k")
    db, db_t = run_db(lambda x0: dbp.ATG(penalty=args.atg_rho, relaxation=args.atg_alpha, gamma=args.atg_gamma,
                                         delta=args.atg_delta, x0=x0), A, b, W, X0, R)
    mine = {int(k.split(":")[1]): v for k, v in ours.items() if k.startswith("atg:")}
    report("ATG vs db.ATG", "it", mine, float(ours["atg_t"]), db, db_t, x_star)


if __name__ == "__main__":
    main()
