"""Side by side with decent-bench 0.3.0: PG-EXTRA, prox-NIDS and prox Exact Diffusion.

Run with a Python >= 3.13 environment that has both packages (decent-bench needs 3.13)::

    ~/.pyenv/versions/3.13.0/bin/python -m venv /tmp/db313
    /tmp/db313/bin/pip install decent-bench==0.3.0 /path/to/rowstoch_fast
    /tmp/db313/bin/python bench/decent_bench_prox.py [--iters 1000] [--lam 0.1] [--lr 0.1]

What it does, on one least-squares problem (n = 8 nodes, undirected ring, Metropolis weights, d = 5,
f_i(x) = ||A_i x - b_i||^2 / (2 m), the scaling of decent-bench's ``LinearRegressionCost``), with the same W,
x0 (one random row per node), step and data for both packages:

1. Looks for decent-bench's counterparts of PG-EXTRA / prox-NIDS / prox Exact Diffusion. decent-bench 0.3.0
   has none: its p2p ``EXTRA``, ``NIDS`` and ``ED`` take no regularizer and never call a prox.
2. Part A (r = 0, a like-for-like comparison of shipped code): decent-bench ``EXTRA`` / ``NIDS`` / ``ED``
   against ours ``EXTRA`` and ``PGEXTRA(regularizer=None)``, ``NIDS`` and ``ProxNIDS(None)``,
   ``ExactDiffusion`` and ``ProxExactDiffusion(None)``.
3. Part B (r = lam ||x||_1): checks that decent-bench's ``L1RegularizerCost.proximal(v, penalty=lr * lam)`` is
   our ``L1(lam).prox(v, step=lr)``, then compares ours with decent-bench's EXTRA / NIDS / ED *extended by this
   script* (subclasses below) with that prox per the papers' equations. Those subclasses are NOT part of
   decent-bench; they reuse its network, messages, gradients and prox only. Both are also measured against
   the centralized composite minimiser (proximal gradient on (1/n) sum_i f_i + r).

Printed: max |x_ours - x_db| over all nodes and coordinates at iterations 1, 10, 100, 1000 (``x_k`` = the
models after k steps in both packages), and the wall time per iteration of each (gradient included; for
decent-bench, ``Algorithm.run`` with agents snapshotting every iteration, its default).
"""

from __future__ import annotations

import argparse
import inspect
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _decent_bench import (CHECKPOINTS, L1RegularizerCost, P2PNetwork, dbp, db_x, decent_bench, grad_fn_for,  # noqa: E402
                           iop, make_network, make_problem)

import rowstoch_fast as rsf
from rowstoch_fast.composite import L1



# ---------------------------------------------------------------------------------------------------------
# problem
# ---------------------------------------------------------------------------------------------------------






def composite_minimiser(A: np.ndarray, b: np.ndarray, lam: float, iters: int = 50000) -> np.ndarray:
    """FISTA on (1/n) sum_i ||A_i x - b_i||^2 / (2m) + lam ||x||_1."""
    n, m, d = A.shape
    H = np.einsum("imd,ime->de", A, A) / (n * m)
    c = np.einsum("imd,im->d", A, b) / (n * m)
    t = 1.0 / np.linalg.eigvalsh(H)[-1]
    x = y = np.zeros(d)
    s = 1.0
    for _ in range(iters):
        v = y - t * (H @ y - c)
        x_new = np.sign(v) * np.maximum(np.abs(v) - t * lam, 0.0)
        s_new = (1 + np.sqrt(1 + 4 * s * s)) / 2
        y = x_new + (s - 1) / s_new * (x_new - x)
        x, s = x_new, s_new
    return x


# ---------------------------------------------------------------------------------------------------------
# decent-bench's EXTRA / NIDS / ED with a prox step added BY THIS SCRIPT (not part of decent-bench)
# ---------------------------------------------------------------------------------------------------------
def _mix(M: Any, i: Any, own: Any, channel: str = "default") -> Any:
    s = M[i, i] * own  # a fresh array; then accumulate (never in place on a received message)
    for j, v in i.messages(channel).items():
        s = s + M[i, j] * v
    return s


@dataclass(eq=False)
class ScriptPGEXTRA(dbp.EXTRA):
    """decent-bench EXTRA + prox (Shi et al. 2015, eqs. (3a)-(3b)); z = x^{k+1/2}."""

    regularizer: Any = None
    name: str = "PG-EXTRA (script)"

    def initialize(self, network: P2PNetwork) -> None:
        super().initialize(network)
        for i in network.agents():
            i.aux_vars["z"] = iop.copy(i.x)

    def step(self, network: P2PNetwork, iteration: int) -> None:
        a, W, prox = self.step_size, self.W, self.regularizer.proximal
        for i in network.active_agents():
            network.broadcast(i, i.x)
        for i in network.active_agents():
            Wx = _mix(W, i, i.x)
            if iteration == 0:  # z_1 = W x_0 - a g(x_0)
                z = Wx - a * i.cost.gradient(i.x)
            else:  # z_{k+1} = W x_k + z_k - W~ x_{k-1} - a (g(x_k) - g(x_{k-1})),  W~ = (I + W) / 2
                xo = i.aux_vars["x_old"]
                z = (Wx + i.aux_vars["z"] - 0.5 * xo - 0.5 * i.aux_vars["x_cons"]
                     - a * (i.cost.gradient(i.x) - i.cost.gradient(xo)))
            i.aux_vars["x_cons"], i.aux_vars["x_old"], i.aux_vars["z"] = Wx, i.x, z
            i.x = prox(z, penalty=a)


@dataclass(eq=False)
class ScriptProxNIDS(dbp.NIDS):
    """decent-bench NIDS + prox (Li, Shi, Yan 2019, Alg. 1 with c = 1/(2a), i.e. W~ = (I + W) / 2)."""

    regularizer: Any = None
    name: str = "prox-NIDS (script)"

    def step(self, network: P2PNetwork, iteration: int) -> None:
        a, prox = self.step_size, self.regularizer.proximal
        if iteration == 0:  # z_1 = x_0 - a g(x_0), no communication
            for i in network.active_agents():
                i.aux_vars["g"] = i.cost.gradient(i.x)
                i.aux_vars["z"] = i.x - a * i.aux_vars["g"]
                i.aux_vars["x_old"], i.x = i.x, prox(i.aux_vars["z"], penalty=a)
            return
        for i in network.active_agents():
            i.aux_vars["g_old"], i.aux_vars["g"] = i.aux_vars["g"], i.cost.gradient(i.x)
            i.aux_vars["y"] = 2 * i.x - i.aux_vars["x_old"] - a * (i.aux_vars["g"] - i.aux_vars["g_old"])
            network.broadcast(i, i.aux_vars["y"])
        for i in network.active_agents():  # z_{k+1} = z_k - x_k + W~ (2 x_k - x_{k-1} - a (g_k - g_{k-1}))
            i.aux_vars["z"] = i.aux_vars["z"] - i.x + _mix(self.W_tilde, i, i.aux_vars["y"])
            i.aux_vars["x_old"], i.x = i.x, prox(i.aux_vars["z"], penalty=a)


@dataclass(eq=False)
class ScriptProxED(dbp.ED):
    """decent-bench ED + prox, PUDA form (Alghunaim et al. 2021): A = W_bar, B^2 = I - W_bar, C = 0."""

    regularizer: Any = None
    name: str = "prox-ED (script)"

    def initialize(self, network: P2PNetwork) -> None:
        super().initialize(network)  # note: ED.initialize already evaluates g(x_0) once (kept for parity)
        for i in network.agents():
            i.aux_vars["q"] = iop.zeros_like(i.x)

    def step(self, network: P2PNetwork, _: int) -> None:
        a, prox = self.step_size, self.regularizer.proximal
        for i in network.active_agents():  # z_{k+1} = x_k - a g(x_k) - q_k
            i.aux_vars["zz"] = i.x - a * i.cost.gradient(i.x) - i.aux_vars["q"]
            network.broadcast(i, i.aux_vars["zz"])
        for i in network.active_agents():  # q += z - W_bar z ;  x = prox(W_bar z)
            Wz = _mix(self.W, i, i.aux_vars["zz"])
            i.aux_vars["q"] = i.aux_vars["q"] + i.aux_vars["zz"] - Wz
            i.x = prox(Wz, penalty=a)


# ---------------------------------------------------------------------------------------------------------
# runners
# ---------------------------------------------------------------------------------------------------------


def run_db(make_alg, A, b, W, X0, iters: int) -> tuple[dict[int, np.ndarray], float]:
    """Iterates at the checkpoints (resuming with run(start_iteration=...)), then a timed fresh run."""
    net = make_network(A, b, W)
    alg = make_alg({ag: iop.from_numpy(X0[k]) for k, ag in enumerate(net.agents())})
    out, done = {}, 0
    for c in [c for c in CHECKPOINTS if c <= iters] + ([iters] if iters not in CHECKPOINTS else []):
        alg.run(net, c, start_iteration=done)
        out[c], done = db_x(net), c
    net = make_network(A, b, W)
    alg = make_alg({ag: iop.from_numpy(X0[k]) for k, ag in enumerate(net.agents())})
    t0 = time.perf_counter()
    alg.run(net, iters)
    return out, (time.perf_counter() - t0) / iters


def run_ours(make_opt, grad, X0, iters: int) -> tuple[dict[int, np.ndarray], float]:
    opt = make_opt(X0.copy())
    out = {}
    for k in range(1, iters + 1):
        opt.step(grad)
        if k in CHECKPOINTS or k == iters:
            out[k] = np.array(opt.x, dtype=float, copy=True)
    opt = make_opt(X0.copy())
    t0 = time.perf_counter()
    for _ in range(iters):
        opt.step(grad)
    return out, (time.perf_counter() - t0) / iters


def report(label: str, ours: dict, mine_t: float, db: dict, db_t: float, x_star: np.ndarray | None) -> None:
    diffs = "  ".join(f"k={k}: {np.max(np.abs(ours[k] - db[k])):.2e}" for k in sorted(ours))
    last = max(ours)
    tail = ""
    if x_star is not None:
        tail = (f"  | max|x_{last} - x*|: ours {np.max(np.abs(ours[last] - x_star)):.1e},"
                f" db {np.max(np.abs(db[last] - x_star)):.1e}")
    print(f"  {label:52s} max|ours - db|  {diffs}")
    print(f"  {'':52s} time/iter: ours {mine_t * 1e6:8.1f} us, decent-bench {db_t * 1e6:8.1f} us"
          f" (x{db_t / mine_t:.0f}){tail}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iters", type=int, default=1000)
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--d", type=int, default=5)
    ap.add_argument("--m", type=int, default=20, help="rows of A_i per node")
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--lam", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    print(f"decent-bench {getattr(decent_bench, '__version__', None) or _dist_version('decent-bench')}, "
          f"rowstoch_fast {getattr(rsf, '__version__', '?')}, numpy {np.__version__}")
    A, b, X0 = make_problem(args.n, args.d, args.m, args.seed)
    grad = grad_fn_for(A, b)
    Wm = rsf.topology.ring(args.n, directed=False, weights="metropolis")
    W = np.asarray(Wm.toarray(), dtype=float)
    L = max(np.linalg.eigvalsh(A[i].T @ A[i] / args.m)[-1] for i in range(args.n))
    print(f"problem: n={args.n} ring (Metropolis), d={args.d}, m={args.m} rows/node, f_i = ||A_i x - b_i||^2/(2m),"
          f" L={L:.2f}, lr={args.lr}, lam={args.lam}, iters={args.iters}, x0 = random (n, d), seed={args.seed}")

    # 1. does decent-bench have the prox methods?
    names = [nm for nm in dir(dbp) if not nm.startswith("_")]
    cand = [nm for nm in names if any(t in nm.lower() for t in ("prox", "pg", "puda", "composite"))]
    uses_prox = {nm: "proximal" in inspect.getsource(getattr(dbp, nm)) for nm in ("EXTRA", "NIDS", "ED")}
    print(f"\ndecent-bench p2p algorithms: {', '.join(names)}")
    print(f"  names containing prox/pg/puda/composite: {cand}  (ProxSkip is prox-free: consensus 'prox' only)")
    print(f"  EXTRA/NIDS/ED call a proximal operator: {uses_prox}")
    print("  => no PG-EXTRA, prox-NIDS or prox Exact Diffusion in decent-bench; Part A compares the r = 0 methods.")

    # 2. Part A: r = 0
    x_star0 = np.linalg.lstsq(A.reshape(-1, args.d), b.reshape(-1), rcond=None)[0]
    print("\nPart A: r = 0, decent-bench's shipped EXTRA / NIDS / ED vs ours")
    pairs = [
        ("EXTRA", lambda x0: dbp.EXTRA(step_size=args.lr, x0=x0),
         [("EXTRA", lambda X: rsf.EXTRA(Wm, X, args.lr)),
          ("PGEXTRA(regularizer=None)", lambda X: rsf.PGEXTRA(Wm, X, args.lr))]),
        ("NIDS", lambda x0: dbp.NIDS(step_size=args.lr, x0=x0),
         [("NIDS", lambda X: rsf.NIDS(Wm, X, args.lr)),
          ("ProxNIDS(regularizer=None)", lambda X: rsf.ProxNIDS(Wm, X, args.lr))]),
        ("ED", lambda x0: dbp.ED(step_size=args.lr, x0=x0),
         [("ExactDiffusion", lambda X: rsf.ExactDiffusion(Wm, X, args.lr)),
          ("ProxExactDiffusion(regularizer=None)", lambda X: rsf.ProxExactDiffusion(Wm, X, args.lr))]),
    ]
    for db_name, make_db, ours_list in pairs:
        db, db_t = run_db(make_db, A, b, W, X0, args.iters)
        for our_name, make_ours in ours_list:
            ours, t = run_ours(make_ours, grad, X0, args.iters)
            report(f"{our_name} vs db.{db_name}", ours, t, db, db_t, x_star0)

    # 3. Part B: r = lam ||x||_1
    reg_db = args.lam * L1RegularizerCost((args.d,))
    v = np.linspace(-1, 1, 11)
    pd = np.asarray(iop.to_numpy(reg_db.proximal(iop.from_numpy(v), penalty=args.lr)))
    po = L1(args.lam).prox(v, step=args.lr)
    print(f"\nPart B: r = {args.lam} ||x||_1.  prox conventions: max|db (lam*L1RegularizerCost).proximal(v, lr)"
          f" - ours L1(lam).prox(v, lr)| = {np.max(np.abs(pd - po)):.1e}")
    print("  decent-bench has no prox method: compared with ITS EXTRA/NIDS/ED + a prox added by THIS SCRIPT")
    x_star = composite_minimiser(A, b, args.lam)
    print(f"  centralized minimiser of (1/n) sum f_i + lam|x|_1: {np.array2string(x_star, precision=4)}")
    prox_pairs = [
        ("PGEXTRA vs db.EXTRA+prox (script)", lambda x0: ScriptPGEXTRA(step_size=args.lr, x0=x0, regularizer=reg_db),
         lambda X: rsf.PGEXTRA(Wm, X, args.lr, regularizer=L1(args.lam))),
        ("ProxNIDS vs db.NIDS+prox (script)", lambda x0: ScriptProxNIDS(step_size=args.lr, x0=x0, regularizer=reg_db),
         lambda X: rsf.ProxNIDS(Wm, X, args.lr, regularizer=L1(args.lam))),
        ("ProxExactDiffusion vs db.ED+prox (script)",
         lambda x0: ScriptProxED(step_size=args.lr, x0=x0, regularizer=reg_db),
         lambda X: rsf.ProxExactDiffusion(Wm, X, args.lr, regularizer=L1(args.lam))),
    ]
    for label, make_db, make_ours in prox_pairs:
        db, db_t = run_db(make_db, A, b, W, X0, args.iters)
        ours, t = run_ours(make_ours, grad, X0, args.iters)
        report(label, ours, t, db, db_t, x_star)


def _dist_version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "?"


if __name__ == "__main__":
    main()
