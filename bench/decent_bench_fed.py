"""Side by side with decent-bench 0.3.0: FedAvg, FedProx, SCAFFOLD, FedDyn, FedNova, FedOpt (adam / adagrad / yogi),
FedPD and FedLT.

Run (from the repository root) with a Python >= 3.13 environment that has both packages::

    /tmp/db313/bin/pip install --force-reinstall --no-deps /path/to/rowstoch_fast
    /tmp/db313/bin/python bench/decent_bench_fed.py [--rounds 200] [--repeats 5] [--participation 0.5]

The problem: n = 12 clients, d = 8, m = 30 rows per client, f_i(x) = ||A_i x - b_i||^2 / (2 m) (decent-bench's
``LinearRegressionCost``, full batch: its ``batch_size="all"`` default, so both runs are deterministic), made
heterogeneous (client i's rows scaled by s_i in [0.5, 1.5] and its targets from its own x_true + delta_i); one
random start row per client for both (ours' server starts at their mean, decent-bench's too: its server's x0 is
inferred as the clients' mean).

Conventions adapted here (the setup only, never either package's code):

* Counts: ours take ONE local step per iteration (a round = ``K`` iterations, the server's update at the last);
  decent-bench's ``step`` is one round. Its round r is compared with our iteration r K, server model against
  server model: its ``server().x`` (read in ``Algorithm.run``'s ``progress_callback``, after every round) against
  our ``x[0]`` (every row of ours holds the server model after a round).
* Names: decent-bench ``step_size`` = ours ``lr``, ``num_local_steps`` = ``local_steps`` (a dict per client =
  ``client_steps``, ``local_steps = max``), ``server_step_size`` = ``server_lr``, ``penalty`` = ``mu`` (FedProx) /
  ``alpha`` (FedDyn), ``beta_1`` / ``beta_2`` / ``epsilon`` = ``beta1`` / ``beta2`` / ``tau``; FedAdam / FedAdagrad /
  FedYogi = ``FedOpt(server_optimizer="adam" / "adagrad" / "yogi")``.
* Gradients: ours are computed as decent-bench's (``(A_i^T A_i x - A_i^T b_i) / m``, the products precomputed with
  the same NumPy calls, the batched matmul giving the same bits as its per-agent one), so the gradients agree
  bit for bit at equal points and any difference comes from the methods' own arithmetic.
* Partial participation: decent-bench's ``UniformSelection`` draws with ``random.sample``; here it is replaced by
  ``OurSelection`` (below, NOT decent-bench code), a ``ClientSelectionScheme`` returning round r's clients of ours,
  ``Federated.chosen(n, clients_per_round, seed, r)``.

FedPD and FedLT keep each client's model from round to round (ours: the rows of ``x``; decent-bench: each client's
``x``), so for them the clients' models are compared, all ``n`` rows, after every round (``s`` below stands for
them); both start each client at its row of ``X0`` (and FedLT's ``z_i`` there: decent-bench's ``z0 = x0``), FedPD's
centres at the server's ``x0``, the clients' mean. Names: ``penalty`` = ``eta`` (FedPD) / ``rho`` (FedLT);
decent-bench's FedPD takes no selection scheme (every client, ``skip_probability = 0``), so it runs with every
client only.

Printed per method: the max over all rounds of the relative difference ||s_ours - s_db||_inf / ||s_db||_inf of the
server models after every round, the same at the last round, max |s - x*| of each at the end (x* = the minimiser
of (1/n) sum_i f_i), and the time per round of each (median of ``--repeats`` fresh timed runs of all the rounds,
ours and decent-bench's interleaved; decent-bench's ``Algorithm.run`` snapshots every round, its default).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _decent_bench import dbf, db_server, db_x, iop, make_fed_network  # noqa: E402

from decent_bench.schemes import ClientSelectionScheme  # noqa: E402

import rowstoch_fast as rsf  # noqa: E402
from rowstoch_fast.algorithms._federated import Federated  # noqa: E402


# ---------------------------------------------------------------------------------------------------------
# problem
# ---------------------------------------------------------------------------------------------------------
def make_fed_problem(n: int, d: int, m: int, seed: int, hetero: float):
    """``(A, b, X0)``: client i's rows scaled by ``s_i`` in [0.5, 1.5], its targets ``A_i (x_true + delta_i) +
    noise`` with ``delta_i ~ hetero N(0, I)``; ``X0`` one random row per client."""
    rng = np.random.default_rng(seed)
    scale = rng.uniform(0.5, 1.5, n)
    A = rng.standard_normal((n, m, d)) * scale[:, None, None]
    x_true = np.where(rng.random(d) < 0.5, 0.0, rng.standard_normal(d))
    x_i = x_true + hetero * rng.standard_normal((n, d))
    b = np.einsum("imd,id->im", A, x_i) + 0.1 * rng.standard_normal((n, m))
    X0 = rng.standard_normal((n, d))
    return A, b, X0


def grad_like_decent_bench(A: np.ndarray, b: np.ndarray):
    """Our ``grad_fn(X)``: row i, ``(A_i^T A_i x_i - A_i^T b_i) / m`` as decent-bench's ``LinearRegressionCost``
    computes it (``(ATA @ x - A.T @ b) / len(batch)``), with ``ATA_i = A_i.T @ A_i``, ``A_i.T @ b_i`` per client."""
    n, m, _ = A.shape
    ATA = np.stack([A[i].T @ A[i] for i in range(n)])
    Atb = np.stack([A[i].T @ b[i] for i in range(n)])

    def grad(X: np.ndarray) -> np.ndarray:
        return (np.matmul(ATA, X[:, :, None])[:, :, 0] - Atb) / m

    return grad


class OurSelection(ClientSelectionScheme):
    """decent-bench client selection returning ours (NOT decent-bench code): round ``r``'s clients are
    ``Federated.chosen(n, per_round, seed, r)`` (client k = the network's k-th client = our row k)."""

    def __init__(self, per_round: int, seed: int):
        self.per_round, self.seed, self.calls = per_round, seed, 0
        self._index: dict | None = None

    def bind(self, clients) -> "OurSelection":
        self._index = {c: k for k, c in enumerate(clients)}
        self.n = len(clients)
        return self

    def select(self, clients, iteration):
        self.calls += 1
        mask = Federated.chosen(self.n, self.per_round, self.seed, iteration)
        return [c for c in clients if mask[self._index[c]]]


# ---------------------------------------------------------------------------------------------------------
# runners
# ---------------------------------------------------------------------------------------------------------
def run_db(make_alg, A, b, X0, rounds: int, select: OurSelection | None, clients: bool = False):
    """decent-bench's server model after every round, (rounds, d) (``clients``: its clients' models, (rounds, n,
    d)), and a fresh network + algorithm maker."""

    def fresh():
        net = make_fed_network(A, b)
        x0 = {c: iop.from_numpy(X0[k].copy()) for k, c in enumerate(net.clients())}
        sel = None if select is None else OurSelection(select.per_round, select.seed).bind(net.clients())
        return net, make_alg(x0, sel), sel

    net, alg, sel = fresh()
    out = []
    with np.errstate(all="ignore"):
        alg.run(net, rounds, progress_callback=lambda k: out.append(db_x(net) if clients else db_server(net)))
    if sel is not None:
        assert sel.calls == rounds, (sel.calls, rounds)
    return np.array(out), fresh


def run_ours(make_opt, grad, X0, rounds: int, clients: bool = False):
    """Ours' server model after every round, (rounds, d), checked to be on every row (``clients``: the rows, the
    clients' own models, (rounds, n, d))."""
    opt = make_opt(X0.copy())
    K = opt.local_steps
    out = []
    for _ in range(rounds):
        for _ in range(K):
            opt.step(grad)
        x = np.asarray(opt.x, dtype=float)
        if clients:
            out.append(x.copy())
            continue
        assert np.all(x == x[0]), "the rows of x differ after a round"
        out.append(x[0].copy())
    assert opt.communication_rounds == rounds, (opt.communication_rounds, rounds)
    return np.array(out)


def time_both(make_opt, grad, X0, db_fresh, rounds: int, repeats: int):
    """Median seconds per round of ours and of decent-bench's, ``repeats`` fresh runs each, interleaved."""
    ours, db = [], []
    if repeats <= 0:
        return float("nan"), float("nan")
    for _ in range(repeats):
        opt = make_opt(X0.copy())
        steps = rounds * opt.local_steps
        t0 = time.perf_counter()
        for _ in range(steps):
            opt.step(grad)
        ours.append((time.perf_counter() - t0) / rounds)
        net, alg, _ = db_fresh()
        t0 = time.perf_counter()
        with np.errstate(all="ignore"):
            alg.run(net, rounds)
        db.append((time.perf_counter() - t0) / rounds)
    return float(np.median(ours)), float(np.median(db))


def first_round_semantics(n, grad, X0, lr, K, per_round, seed) -> None:
    """Ours' rows during round 0 (FedAvg, ``per_round`` clients), against NumPy: after local step k < K the chosen
    rows hold their local iterate, the others the server model ``s_0`` (the mean of ``X0``); after step K every row
    holds the average of the chosen clients' models."""
    opt = rsf.FedAvg(n, X0.copy(), lr, local_steps=K, participation=per_round / n, seed=seed)
    mask = Federated.chosen(n, per_round, seed, 0)
    s0 = X0.sum(axis=0) / n
    y = np.tile(s0, (n, 1))
    worst = 0.0
    for k in range(K):
        y = y - lr * grad(y)
        opt.step(grad)
        want = np.where(mask[:, None], y, s0) if k < K - 1 else np.tile(y[mask].mean(axis=0), (n, 1))
        worst = max(worst, float(np.max(np.abs(np.asarray(opt.x) - want))))
    print(f"  first round of ours (FedAvg, {per_round} of {n} clients), rows against NumPy: {worst:.1e}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=5, help="timed runs of each package (medians, interleaved; 0: no timing)")
    ap.add_argument("--n", type=int, default=12, help="clients")
    ap.add_argument("--d", type=int, default=8)
    ap.add_argument("--m", type=int, default=30, help="rows of A_i per client")
    ap.add_argument("--hetero", type=float, default=1.0, help="spread of the clients' own x_true + delta_i")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--K", type=int, default=5, help="local steps")
    ap.add_argument("--client-steps", default="", help="FedNova's heterogeneous tau_i, comma list (default: "
                    "1 .. K cycled over the clients)")
    ap.add_argument("--mu", type=float, default=0.1, help="FedProx penalty")
    ap.add_argument("--alpha", type=float, default=0.1, help="FedDyn penalty")
    ap.add_argument("--eta", type=float, default=1.0, help="FedPD penalty")
    ap.add_argument("--rho", type=float, default=1.0, help="FedLT penalty")
    ap.add_argument("--scaffold-server-lr", type=float, default=0.8)
    ap.add_argument("--server-lr", type=float, default=0.05, help="FedOpt server step")
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.99)
    ap.add_argument("--tau", type=float, default=1e-3, help="FedOpt adaptivity (decent-bench epsilon)")
    ap.add_argument("--participation", default="1.0,0.5", help="comma list of fractions (0.5: 6 of the 12)")
    ap.add_argument("--selection-seed", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", default="", help="comma list of fedavg,fedprox,scaffold,feddyn,fednova,fednova-het,"
                    "fedadam,fedadagrad,fedyogi,fedpd,fedlt")
    args = ap.parse_args()
    only = set(filter(None, args.only.split(",")))
    R, K, n, lr = args.rounds, args.K, args.n, args.lr
    if args.client_steps:
        tau = np.array([int(v) for v in args.client_steps.split(",")])
    else:
        tau = np.arange(n) % K + 1
    assert tau.shape == (n,) and tau.min() >= 1

    from importlib.metadata import version

    print(f"decent-bench {version('decent-bench')}, rowstoch_fast {version('rowstoch_fast')}, numpy {np.__version__}, "
          f"Python {sys.version.split()[0]}; nproc {os.cpu_count()}, load {os.getloadavg()[0]:.2f}")
    A, b, X0 = make_fed_problem(n, args.d, args.m, args.seed, args.hetero)
    grad = grad_like_decent_bench(A, b)
    H = np.einsum("imd,ime->de", A, A) / (n * args.m)
    x_star = np.linalg.solve(H, np.einsum("imd,im->d", A, b) / (n * args.m))
    L = max(np.linalg.eigvalsh(A[i].T @ A[i] / args.m)[-1] for i in range(n))
    x_loc = np.stack([np.linalg.solve(A[i].T @ A[i], A[i].T @ b[i]) for i in range(n)])
    print(f"problem: n={n} clients, d={args.d}, m={args.m} rows/client, f_i = ||A_i x - b_i||^2/(2m), L_max={L:.2f}, "
          f"heterogeneity max_i |x_i* - x*| = {np.max(np.abs(x_loc - x_star)):.2f}; x0 random (n, d), seed={args.seed}; "
          f"lr={lr}, K={K}, {R} rounds")
    print(f"FedNova heterogeneous steps tau_i = {tau.tolist()} (local_steps = {int(tau.max())})")

    # name: (ours' maker (X, participation, seed) -> opt, decent-bench's maker (x0, selection) -> alg)
    def sel_kw(sel):
        return {} if sel is None else {"selection_scheme": sel}

    Kh = int(tau.max())
    methods = {
        "fedavg": ("FedAvg",
                   lambda X, p, s: rsf.FedAvg(n, X, lr, local_steps=K, participation=p, seed=s),
                   lambda x0, sel: dbf.FedAvg(step_size=lr, num_local_steps=K, x0=x0, **sel_kw(sel))),
        "fedprox": (f"FedProx (mu {args.mu})",
                    lambda X, p, s: rsf.FedProx(n, X, lr, local_steps=K, mu=args.mu, participation=p, seed=s),
                    lambda x0, sel: dbf.FedProx(step_size=lr, num_local_steps=K, penalty=args.mu, x0=x0,
                                                **sel_kw(sel))),
        "scaffold": (f"SCAFFOLD (server_lr {args.scaffold_server_lr})",
                     lambda X, p, s: rsf.Scaffold(n, X, lr, local_steps=K, server_lr=args.scaffold_server_lr,
                                                  participation=p, seed=s),
                     lambda x0, sel: dbf.Scaffold(step_size=lr, num_local_steps=K,
                                                  server_step_size=args.scaffold_server_lr, x0=x0, **sel_kw(sel))),
        "feddyn": (f"FedDyn (alpha {args.alpha})",
                   lambda X, p, s: rsf.FedDyn(n, X, lr, local_steps=K, alpha=args.alpha, participation=p, seed=s),
                   lambda x0, sel: dbf.FedDyn(step_size=lr, num_local_steps=K, penalty=args.alpha, x0=x0,
                                              **sel_kw(sel))),
        "fednova": ("FedNova (tau_i = K)",
                    lambda X, p, s: rsf.FedNova(n, X, lr, local_steps=K, participation=p, seed=s),
                    lambda x0, sel: dbf.FedNova(step_size=lr, num_local_steps=K, x0=x0, **sel_kw(sel))),
        "fednova-het": ("FedNova (tau_i = 1..K)",
                        lambda X, p, s: rsf.FedNova(n, X, lr, local_steps=Kh, client_steps=tau, participation=p,
                                                    seed=s),
                        lambda x0, sel: dbf.FedNova(step_size=lr, x0=x0, num_local_steps={
                            c: int(tau[k]) for k, c in enumerate(x0)}, **sel_kw(sel))),
    }
    for opt_name, cls in (("adam", dbf.FedAdam), ("adagrad", dbf.FedAdagrad), ("yogi", dbf.FedYogi)):
        extra = {} if opt_name == "adagrad" else {"beta_2": args.beta2}
        methods["fed" + opt_name] = (
            f"FedOpt {opt_name} (server_lr {args.server_lr})",
            lambda X, p, s, o=opt_name: rsf.FedOpt(n, X, lr, local_steps=K, server_optimizer=o,
                                                   server_lr=args.server_lr, beta1=args.beta1, beta2=args.beta2,
                                                   tau=args.tau, participation=p, seed=s),
            lambda x0, sel, c=cls, e=extra: c(step_size=lr, num_local_steps=K, server_step_size=args.server_lr,
                                              beta_1=args.beta1, epsilon=args.tau, x0=x0, **e, **sel_kw(sel)))
    methods["fedpd"] = (f"FedPD (eta {args.eta})",
                        lambda X, p, s: rsf.FedPD(n, X, lr, local_steps=K, eta=args.eta, participation=p, seed=s),
                        lambda x0, sel: dbf.FedPD(step_size=lr, num_local_steps=K, penalty=args.eta, x0=x0))
    methods["fedlt"] = (f"FedLT (rho {args.rho})",
                        lambda X, p, s: rsf.FedLT(n, X, lr, local_steps=K, rho=args.rho, participation=p, seed=s),
                        lambda x0, sel: dbf.FedLT(step_size=lr, num_local_steps=K, penalty=args.rho, x0=x0,
                                                  **({"selection_scheme": sel} if sel is not None else {})))
    own = {"fedpd", "fedlt"}  # (each client keeps its model: the clients' models compared)
    first_round_semantics(n, grad, X0, lr, K, max(1, n // 2), args.selection_seed)
    rows = []
    for p in [float(v) for v in args.participation.split(",")]:
        per_round = max(1, int(round(p * n)))
        print(f"\nparticipation {p} ({per_round} of {n} clients a round"
              + ("" if per_round == n else f", ours' selection with seed {args.selection_seed} given to decent-bench")
              + ")")
        print(f"  {'method':30s} {'max rel diff':>12s} {'at last':>9s} {'|s-x*| ours':>11s} {'|s-x*| db':>9s} "
              f"{'ours us/rnd':>11s} {'db us/rnd':>9s} {'db/ours':>7s}")
        for key, (label, make_ours, make_db) in methods.items():
            if only and key not in only:
                continue
            seed = args.selection_seed
            make_opt = (lambda X, mk=make_ours: mk(X, p, seed))
            sel = None if per_round == n else OurSelection(per_round, seed)
            if key == "fedpd" and sel is not None:  # (decent-bench's FedPD takes no selection scheme)
                continue
            if sel is not None:
                assert make_opt(X0.copy()).clients_per_round == per_round
            s_ours = run_ours(make_opt, grad, X0, R, clients=key in own)
            s_db, fresh = run_db(make_db, A, b, X0, R, sel, clients=key in own)
            flat_o, flat_d = s_ours.reshape(R, -1), s_db.reshape(R, -1)
            rel = np.max(np.abs(flat_o - flat_d), axis=1) / np.max(np.abs(flat_d), axis=1)
            t_ours, t_db = time_both(make_opt, grad, X0, fresh, R, args.repeats)
            e_o, e_d = np.max(np.abs(s_ours[-1] - x_star)), np.max(np.abs(s_db[-1] - x_star))
            print(f"  {label:30s} {rel.max():12.1e} {rel[-1]:9.1e} {e_o:11.1e} {e_d:9.1e} {t_ours * 1e6:11.0f} "
                  f"{t_db * 1e6:9.0f} {t_db / t_ours:7.1f}", flush=True)
            rows.append((p, label, rel.max(), rel[-1], e_o, e_d, t_ours, t_db))
    print("\nmarkdown:")
    print("| participation | method | max rel. diff (all rounds) | at round R | max|s_R - x*| ours / db | "
          "time per round ours / db |")
    print("|---|---|---|---|---|---|")
    for p, label, r_max, r_last, e_o, e_d, t_o, t_d in rows:
        print(f"| {p:g} | {label} | {r_max:.1e} | {r_last:.1e} | {e_o:.1e} / {e_d:.1e} | "
              f"{t_o * 1e6:.0f} / {t_d * 1e6:.0f} us (x{t_d / t_o:.1f}) |")


if __name__ == "__main__":
    main()
