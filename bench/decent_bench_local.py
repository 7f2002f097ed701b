"""Side by side with decent-bench 0.3.0: K-GT, LED, DLM, ProxSkip and Wang & Elia.

Run with a Python >= 3.13 environment that has both packages (decent-bench needs 3.13)::

    ~/.pyenv/versions/3.13.0/bin/python -m venv /tmp/db313
    /tmp/db313/bin/pip install decent-bench==0.3.0 /path/to/rowstoch_fast
    /tmp/db313/bin/python bench/decent_bench_local.py [--rounds 1000] [--lr 0.05] [--K 4]

The setup is the one of ``bench/decent_bench_prox.py``: least squares (n = 8 nodes, undirected ring,
Metropolis weights, d = 5, m = 20 rows per node, f_i(x) = ||A_i x - b_i||^2 / (2 m), the scaling of
decent-bench's ``LinearRegressionCost``), the same W, x0 (one random row per node), steps and data for both.

Conventions adapted here (the setup only, never either package's code):

* K-GT and LED: ours count ONE gradient step per iteration (a round = ``K`` iterations, communication at the
  last of them); decent-bench's ``step`` is one round of ``K`` local steps. decent-bench's round ``r`` is
  compared with our iteration ``r K``. (Between rounds ours hold the local iterate for K-GT and the round's
  model, unchanged, for LED; the script checks both against NumPy during the first round.)
* DLM: ours uses the weighted Laplacian ``I - W`` and a penalty ``c``; decent-bench's the unweighted ``L`` and
  ``rho``. Ours runs on ``W = I - L / kappa`` (kappa = max degree + 1, doubly stochastic and symmetric) with
  ``c = kappa rho``, ``lr = mu``. decent-bench 0.3.0's ``DLM`` adds received messages in place (one message
  object is shared by all receivers, see /tmp/decent_bench_notes.md section 4) and so computes wrong
  neighbour sums on a ring; the reference is a subclass of it with the sums done out of place
  (``DLMOutOfPlace`` below, NOT decent-bench code). The shipped class is run too, to show how far it is off.
* ProxSkip: ours draws its coins from ``ProxSkip.coins(seed, p, T)``; decent-bench calls ``random.random()``
  once per ``step`` (``theta = random.random() < p``). The script replaces the ``random`` module seen by
  decent-bench's ``_prox_skip`` with one that returns 0.0 where our coin is True and 1.0 where it is False.
* Both DLMs' iteration 0 only communicates (no gradient, no primal update): iteration k is compared with k.

Printed: max |x_ours - x_db| over all nodes and coordinates at rounds 1, 10, 100, 1000 (iterations for
ProxSkip, DLM, Wang & Elia), max |x - x*| of each at the end (x* = the least-squares minimiser of
(1/n) sum_i f_i, closed form), and the wall time per round (iteration) of each, gradient included.
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
from _decent_bench import CHECKPOINTS, dbp, db_x, grad_fn_for, iop, make_network, make_problem  # noqa: E402

import decent_bench.algorithms.p2p._prox_skip as db_prox_skip_module  # noqa: E402

import rowstoch_fast as rsf



# ---------------------------------------------------------------------------------------------------------
# problem (as in decent_bench_prox.py)
# ---------------------------------------------------------------------------------------------------------






# ---------------------------------------------------------------------------------------------------------
# decent-bench DLM with the neighbour sums done out of place (NOT decent-bench code: a fix of 0.3.0's aliasing)
# ---------------------------------------------------------------------------------------------------------
@dataclass(eq=False)
class DLMOutOfPlace(dbp.DLM):
    """decent-bench 0.3.0 DLM, ``_sum_messages`` without ``+=`` on a received (shared) message."""

    name: str = "DLM (out-of-place sums)"

    def _sum_messages(self, i):
        s = None
        for v in i.messages().values():
            s = v if s is None else s + v
        return s


class _CoinRandom:
    """Stands in for the ``random`` module inside decent-bench's ``_prox_skip``: ``random()`` is 0.0 where the
    coin is True (then ``0.0 < p``) and 1.0 where it is False (``1.0 < p`` is False for p <= 1)."""

    def __init__(self, coins: np.ndarray):
        self.coins, self.calls = coins, 0

    def random(self) -> float:
        c = self.coins[self.calls]
        self.calls += 1
        return 0.0 if c else 1.0


# ---------------------------------------------------------------------------------------------------------
# runners
# ---------------------------------------------------------------------------------------------------------


def run_db(make_alg, A, b, W, X0, rounds: int, before=lambda: None) -> tuple[dict[int, np.ndarray], float]:
    """Iterates at the checkpoints (resuming with run(start_iteration=...)), then a timed fresh run."""
    net = make_network(A, b, W)
    alg = make_alg({ag: iop.from_numpy(X0[k]) for k, ag in enumerate(net.agents())})
    before()
    out, done = {}, 0
    for c in sorted({c for c in CHECKPOINTS if c <= rounds} | {rounds}):
        with np.errstate(all="ignore"):
            alg.run(net, c, start_iteration=done)
        out[c], done = db_x(net), c
    net = make_network(A, b, W)
    alg = make_alg({ag: iop.from_numpy(X0[k]) for k, ag in enumerate(net.agents())})
    before()
    t0 = time.perf_counter()
    with np.errstate(all="ignore"):
        alg.run(net, rounds)
    return out, (time.perf_counter() - t0) / rounds


def run_ours(make_opt, grad, X0, rounds: int, per_round: int = 1) -> tuple[dict[int, np.ndarray], float]:
    """Ours after ``r * per_round`` iterations, keyed by r; time per round."""
    opt = make_opt(X0.copy())
    out = {}
    for r in range(1, rounds + 1):
        for _ in range(per_round):
            opt.step(grad)
        if r in CHECKPOINTS or r == rounds:
            out[r] = np.array(opt.x, dtype=float, copy=True)
    opt = make_opt(X0.copy())
    t0 = time.perf_counter()
    for _ in range(rounds * per_round):
        opt.step(grad)
    return out, (time.perf_counter() - t0) / rounds


def report(label: str, unit: str, ours: dict, mine_t: float, db: dict, db_t: float, x_star: np.ndarray) -> None:
    diffs = "  ".join(f"{unit}={k}: {np.max(np.abs(ours[k] - db[k])):.2e}" for k in sorted(ours))
    last = max(ours)
    print(f"  {label:44s} max|ours - db|  {diffs}")
    print(f"  {'':44s} max|x_{last} - x*|: ours {np.max(np.abs(ours[last] - x_star)):.1e}, "
          f"db {np.max(np.abs(db[last] - x_star)):.1e} | time/{unit}: ours {mine_t * 1e6:8.1f} us, "
          f"decent-bench {db_t * 1e6:8.1f} us (x{db_t / mine_t:.0f})")


def first_round_semantics(Wm, W, grad, X0, lr, K, eta_s, beta) -> None:
    """Ours' x at the intermediate iterations of the first round, against NumPy (K-GT: the local iterate;
    LED: x0 unchanged) and at the round's end against the round's equations."""
    kgt = rsf.KGT(Wm, X0.copy(), lr, local_steps=K, server_lr=eta_s)
    led = rsf.LED(Wm, X0.copy(), lr, local_steps=K, dual_step=beta)
    xl, phi, dk, dl = X0.copy(), X0.copy(), 0.0, 0.0
    for s in range(K):
        xl = xl - lr * grad(xl)  # c_0 = 0, y_0 = 0
        phi = phi - lr * grad(phi)
        kgt.step(grad)
        led.step(grad)
        if s < K - 1:
            dk = max(dk, np.max(np.abs(kgt.x - xl)))
            dl = max(dl, np.max(np.abs(led.x - X0)))
    ek = np.max(np.abs(kgt.x - W @ (X0 - eta_s * (X0 - xl))))
    el = np.max(np.abs(led.x - W @ phi))
    print(f"  first round, ours vs NumPy: K-GT x at steps 1..K-1 = local iterate: {dk:.1e}, at step K = "
          f"W (x0 - eta_s (x0 - x_loc)): {ek:.1e}; LED x at steps 1..tau-1 = x0: {dl:.1e}, at step tau = W phi: "
          f"{el:.1e}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=1000, help="rounds (K-GT, LED) / iterations (the others)")
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--d", type=int, default=5)
    ap.add_argument("--m", type=int, default=20, help="rows of A_i per node")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--K", type=int, default=4, help="local steps of K-GT and LED")
    ap.add_argument("--eta-s", type=float, default=1.0, help="K-GT server step")
    ap.add_argument("--led-beta", type=float, default=None, help="LED dual step (default 1 / (2 K))")
    ap.add_argument("--p", type=float, default=0.25, help="ProxSkip communication probability (beta = p)")
    ap.add_argument("--chi", type=float, default=1.0)
    ap.add_argument("--coin-seed", type=int, default=0)
    ap.add_argument("--rho", type=float, default=1.0, help="decent-bench DLM penalty")
    ap.add_argument("--mu", type=float, default=0.05, help="DLM step")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", default="", help="comma list of kgt,led,dlm,proxskip,wangelia")
    args = ap.parse_args()
    only = set(filter(None, args.only.split(",")))
    want = (lambda k: not only or k in only)
    R, K = args.rounds, args.K
    led_beta = 0.5 / K if args.led_beta is None else args.led_beta

    from importlib.metadata import version

    print(f"decent-bench {version('decent-bench')}, rowstoch_fast {version('rowstoch_fast')}, numpy {np.__version__}")
    A, b, X0 = make_problem(args.n, args.d, args.m, args.seed)
    grad = grad_fn_for(A, b)
    Wm = rsf.topology.ring(args.n, directed=False, weights="metropolis")
    W = np.asarray(Wm.toarray(), dtype=float)
    L = max(np.linalg.eigvalsh(A[i].T @ A[i] / args.m)[-1] for i in range(args.n))
    x_star = np.linalg.lstsq(A.reshape(-1, args.d), b.reshape(-1), rcond=None)[0]
    print(f"problem: n={args.n} ring (Metropolis), d={args.d}, m={args.m} rows/node, f_i = ||A_i x - b_i||^2/(2m), "
          f"L={L:.2f}, x0 = random (n, d), seed={args.seed}; x* = lstsq of the stacked rows")

    if want("kgt") or want("led"):
        first_round_semantics(Wm, W, grad, X0, args.lr, K, args.eta_s, led_beta)

    if want("kgt"):
        print(f"\nK-GT: lr={args.lr}, K={K}, eta_s={args.eta_s}; db round r <-> our iteration r*K")
        db, db_t = run_db(lambda x0: dbp.KGT(num_local_steps=K, step_size=args.lr, aux_step_size=args.eta_s, x0=x0),
                          A, b, W, X0, R)
        ours, t = run_ours(lambda X: rsf.KGT(Wm, X, args.lr, local_steps=K, server_lr=args.eta_s), grad, X0, R, K)
        report("KGT vs db.KGT", "round", ours, t, db, db_t, x_star)

    if want("led"):
        print(f"\nLED: lr={args.lr}, tau={K}, beta={led_beta}; db round r <-> our iteration r*tau")
        db, db_t = run_db(lambda x0: dbp.LED(num_local_steps=K, step_size=args.lr, aux_step_size=led_beta, x0=x0),
                          A, b, W, X0, R)
        ours, t = run_ours(lambda X: rsf.LED(Wm, X, args.lr, local_steps=K, dual_step=led_beta), grad, X0, R, K)
        report("LED vs db.LED", "round", ours, t, db, db_t, x_star)

    if want("dlm"):
        G = nx.cycle_graph(args.n)
        Lap = nx.laplacian_matrix(G, nodelist=list(G.nodes())).toarray().astype(float)
        kappa = float(Lap.diagonal().max() + 1)
        Wd = np.eye(args.n) - Lap / kappa
        assert np.allclose(Wd, Wd.T) and np.allclose(Wd.sum(0), 1) and np.allclose(Wd.sum(1), 1) and Wd.min() >= 0
        Wdm = rsf.MixingMatrix(Wd, stochastic="doubly")
        c = kappa * args.rho
        print(f"\nDLM: decent-bench mu={args.mu}, rho={args.rho} (unweighted L); ours W = I - L/{kappa:g} "
              f"(max|W_DLM - W_Metropolis| = {np.max(np.abs(Wd - W)):.1e}), penalty c = kappa rho = {c:g}, lr = mu")
        ours, t = run_ours(lambda X: rsf.DLM(Wdm, X, args.mu, penalty=c), grad, X0, R)
        db, db_t = run_db(lambda x0: DLMOutOfPlace(step_size=args.mu, penalty=args.rho, x0=x0), A, b, W, X0, R)
        report("DLM vs db.DLM + out-of-place sums", "it", ours, t, db, db_t, x_star)
        db, db_t = run_db(lambda x0: dbp.DLM(step_size=args.mu, penalty=args.rho, x0=x0), A, b, W, X0, R)
        report("DLM vs db.DLM AS SHIPPED (in-place sums)", "it", ours, t, db, db_t, x_star)

    if want("proxskip"):
        coins = rsf.ProxSkip.coins(args.coin_seed, args.p, R + 1)
        print(f"\nProxSkip: lr={args.lr}, p={args.p}, beta=p, chi={args.chi}, coin seed {args.coin_seed}: "
              f"{int(coins[:R].sum())} rounds in {R} iterations; decent-bench's random.random() replaced by our coins")
        real_random = db_prox_skip_module.random
        state = {}

        def patch():
            state["r"] = _CoinRandom(coins)
            db_prox_skip_module.random = state["r"]

        try:
            db, db_t = run_db(lambda x0: dbp.ProxSkip(step_size=args.lr, aux_step_size=args.p, comm_probability=args.p,
                                                      chi=args.chi, x0=x0), A, b, W, X0, R, before=patch)
        finally:
            db_prox_skip_module.random = real_random
        assert state["r"].calls == R, state["r"].calls
        make = lambda X: rsf.ProxSkip(Wm, X, args.lr, comm_probability=args.p, dual_step=args.p, chi=args.chi,
                                      seed=args.coin_seed)
        ours, t = run_ours(make, grad, X0, R)
        o = make(X0.copy())
        for _ in range(R):
            o.step(grad)
        print(f"  ours: {o.communication_rounds} communication rounds in {R} iterations")
        report("ProxSkip vs db.ProxSkip (same coins)", "it", ours, t, db, db_t, x_star)

    if want("wangelia"):
        print(f"\nWang & Elia: lr={args.lr}")
        db, db_t = run_db(lambda x0: dbp.WangElia(step_size=args.lr, x0=x0), A, b, W, X0, R)
        ours, t = run_ours(lambda X: rsf.WangElia(Wm, X, args.lr), grad, X0, R)
        report("WangElia vs db.WangElia", "it", ours, t, db, db_t, x_star)


if __name__ == "__main__":
    main()
