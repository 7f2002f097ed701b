"""The ``rowstoch`` command line.

``rowstoch demo`` runs the main job on an embedded default; ``rowstoch metrics``
prints the network metrics of a topology or a matrix file. Bad arguments end
with a one-line message and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

from . import topology
from .mixing import MixingMatrix

TOPOLOGIES = ("exponential", "ring", "grid", "geometric", "nearest_neighbor", "erdos_renyi", "complete", "star")
PAPER_GRAPHS = ("paper-ring", "paper-grid", "paper-geometric", "paper-nearest_neighbor")


class UsageError(Exception):
    """A bad argument or input file: reported as one line, exit status 2."""


def build_topology(name, n, seed=0):
    """Build a named topology on ``n`` nodes (CLI defaults for the extra parameters)."""
    if name.startswith("paper-"):
        key = name[len("paper-"):]
        graphs = topology.paper_graphs()
        if key not in graphs:
            raise UsageError(f"unknown paper graph {name!r}; choose from {', '.join(PAPER_GRAPHS)}")
        return graphs[key]
    if name == "grid":
        side = int(round(np.sqrt(n)))
        if side * side != n:
            raise UsageError(f"--topology grid needs a square --n, got {n}")
        return topology.grid(side, side)
    builders = {
        "exponential": lambda: topology.exponential(n),
        "ring": lambda: topology.ring(n),
        "geometric": lambda: topology.geometric(n, radius=min(1.5, 2.0 * np.sqrt(np.log(max(n, 2)) / n)), seed=seed),
        "nearest_neighbor": lambda: topology.nearest_neighbor(n, min(3, n - 1), seed=seed),
        "erdos_renyi": lambda: topology.erdos_renyi(n, min(1.0, 2.0 * np.log(max(n, 2)) / n), seed=seed),
        "complete": lambda: topology.complete(n),
        "star": lambda: topology.star(n),
    }
    if name not in builders:
        raise UsageError(f"unknown topology {name!r}; choose from {', '.join(TOPOLOGIES + PAPER_GRAPHS)}")
    try:
        return builders[name]()
    except (ValueError, TypeError) as exc:
        raise UsageError(f"cannot build {name} with n={n}: {exc}") from exc


def load_matrix(path):
    """Read a mixing matrix from .npz (scipy sparse), .mtx (Matrix Market), .npy (dense) or an edge list."""
    import scipy.io
    import scipy.sparse as sp

    if not os.path.exists(path):
        raise UsageError(f"matrix file {path!r} does not exist")
    try:
        if path.endswith(".npz"):
            W = sp.load_npz(path)
        elif path.endswith(".mtx"):
            W = scipy.io.mmread(path)
        elif path.endswith(".npy"):
            W = np.load(path, allow_pickle=False)
        else:  # edge list: "j i [weight]" per line, j sends to i
            rows = np.loadtxt(path, ndmin=2, comments="#")
            if rows.shape[1] not in (2, 3):
                raise UsageError(f"edge list {path!r} must have 2 or 3 columns (src dst [weight]), got {rows.shape[1]}")
            edges = rows[:, :2]
            if not np.all(edges == np.round(edges)) or (edges < 0).any():
                raise UsageError(f"edge list {path!r} must hold non-negative integer node ids")
            edges = edges.astype(np.int64)
            n = int(edges.max()) + 1 if edges.size else 0
            weights = rows[:, 2] if rows.shape[1] == 3 else "in-degree"
            return MixingMatrix.from_edges(n, edges, weights)
        return MixingMatrix(W, normalize=not np.allclose(np.asarray(W.sum(axis=1)).ravel(), 1.0, rtol=1e-12, atol=0))
    except UsageError:
        raise
    except (ValueError, TypeError, OSError) as exc:
        raise UsageError(f"cannot use matrix file {path!r}: {exc}") from exc


def metrics_table(named):
    """A text table of the metrics of ``(name, MixingMatrix)`` pairs."""
    header = f"{'graph':<24}{'n':>8}{'beta':>10}{'1-beta':>10}{'kappa':>10}{'R (Thm 3)':>11}{'loops':>7}"
    lines = [header, "-" * len(header)]
    for name, A in named:
        m = A.metrics()
        lines.append(
            f"{name:<24}{m.n:>8}{m.beta:>10.4f}{m.spectral_gap:>10.4f}{m.kappa:>10.4f}"
            f"{m.recommended_rounds():>11}{'yes' if m.self_loops else 'no':>7}"
        )
    return "\n".join(lines)


def cmd_metrics(args):
    """``rowstoch metrics``: the metrics table of a topology, all topologies, or a matrix file."""
    if args.matrix:
        named = [(os.path.basename(args.matrix), load_matrix(args.matrix))]
    elif args.topology == "all":
        named = [(t, build_topology(t, args.n, args.seed)) for t in TOPOLOGIES if t != "grid" or _is_square(args.n)]
        named += [(p, build_topology(p, 16)) for p in PAPER_GRAPHS]
    else:
        named = [(args.topology, build_topology(args.topology, args.n, args.seed))]
    print(metrics_table(named))
    return 0


def _is_square(n):
    return int(round(np.sqrt(n))) ** 2 == n


def cmd_demo(args):
    """``rowstoch demo``: the main job on the embedded default (see :func:`rowstoch_fast.experiments.demo`)."""
    from .experiments import demo

    demo(args.out, progress=not args.no_progress)
    return 0


def _matrix_from_args(args):
    if args.matrix:
        return load_matrix(args.matrix)
    return build_topology(args.topology, args.n, args.seed)


def cmd_run(args):
    """``rowstoch run``: one algorithm on one objective and network; writes CSV, JSON and PNG."""
    from .gt import DivergenceError
    from .objectives import NonconvexLogistic, Quadratic
    from .runner import Algorithm, run

    A = _matrix_from_args(args)
    try:
        if args.objective == "logistic":
            f = NonconvexLogistic.synthetic(A.n, total=args.total, d=args.d, rho=args.rho, batch=args.batch,
                                            seed=args.data_seed, heterogeneity=args.heterogeneity)
        else:
            f = Quadratic.random(A.n, args.d, seed=args.data_seed, sigma=args.sigma)
        if args.algorithm == "pull-diag-gt" and args.rounds not in (None, 1):
            raise UsageError("--algorithm pull-diag-gt takes --rounds 1; use mg-pull-diag-gt for R > 1")
        rounds = args.rounds or (A.metrics().recommended_rounds() if args.algorithm == "mg-pull-diag-gt" else 1)
        algo = Algorithm(A, args.lr, rounds=rounds, tracker=args.tracker, backend=args.backend)
    except (ValueError, TypeError) as exc:
        raise UsageError(str(exc)) from exc
    root = True
    if args.backend == "mpi":
        try:
            from mpi4py import MPI
        except ImportError:
            raise UsageError("--backend mpi needs mpi4py: pip install 'rowstoch_fast[mpi]'") from None
        root = MPI.COMM_WORLD.Get_rank() == 0
    if root:
        os.makedirs(args.out, exist_ok=True)
    try:
        h = run(algo, f, args.iterations, record_every=args.record_every, repeats=args.repeats, seed=args.seed,
                progress=not args.no_progress, checkpoint=args.checkpoint, resume=args.resume)
    except DivergenceError as exc:
        print(f"rowstoch: diverged: {exc}", file=sys.stderr)
        return 3
    except (FileNotFoundError, ValueError, RuntimeError, MemoryError) as exc:
        raise UsageError(str(exc)) from exc
    if not root:  # under MPI, rank 0 writes the outputs
        return 0
    h.to_csv(os.path.join(args.out, "history.csv"))
    h.to_json(os.path.join(args.out, "history.json"))
    written = ["history.csv", "history.json"]
    try:
        import matplotlib

        matplotlib.use("Agg")
        ax = h.plot("grad_norm")
        ax.figure.tight_layout()
        ax.figure.savefig(os.path.join(args.out, "grad_norm.png"), dpi=120)
        written.append("grad_norm.png")
    except ImportError:
        pass
    s = h.summary().iloc[-1]
    status = "interrupted" if h.interrupted else "done"
    print(f"{algo.name} on {args.topology if not args.matrix else args.matrix} (n={A.n}), {status} at iteration "
          f"{int(s['iteration'])} ({int(s['communication_rounds'])} communication rounds, {s['wall_seconds']:.1f} s)")
    print(f"  grad norm {s['grad_norm']:.4e} +- {s['grad_norm_std']:.1e}   loss {s['loss']:.6f}   "
          f"consensus error {s['consensus_error']:.3e}")
    if "communication" in h.meta:
        for c in h.meta["communication"]:
            print(f"  rank {c['rank']}: {c['nodes']} nodes, {c['messages'] / max(1, h.meta['completed_iterations']):.1f} "
                  f"messages and {c['bytes_sent'] / max(1, h.meta['completed_iterations']):.0f} bytes sent per iteration")
    print(f"  wrote {', '.join(os.path.join(args.out, w) for w in written)}")
    return 130 if h.interrupted else 0


def cmd_reproduce(args):
    """``rowstoch reproduce FIGURE``: one of the paper's experiments."""
    from . import experiments

    if args.figure == "pull-diag":
        experiments.reproduce_pull_diag(args.out)
    elif args.figure == "linear-speedup":
        experiments.reproduce_linear_speedup(args.out, iterations=args.iterations or 4000, repeats=args.repeats or 20,
                                             progress=not args.no_progress)
    else:
        experiments.reproduce_multi_gossip(args.out, communication_rounds=args.iterations or 2000,
                                           repeats=args.repeats or 5, progress=not args.no_progress)
    return 0


def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def _nonnegative_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {value}")
    return value


def make_parser():
    """The argparse parser of the ``rowstoch`` command."""
    p = argparse.ArgumentParser(prog="rowstoch", description="Decentralized optimization over row-stochastic networks.")
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("demo", help="run the main job on the embedded default")
    d.add_argument("--out", default="rowstoch-demo", help="output folder (default rowstoch-demo)")
    d.add_argument("--no-progress", action="store_true", help="no progress bars")
    d.set_defaults(func=cmd_demo)
    r = sub.add_parser("run", help="run (MG-)Pull-Diag-GT on an objective over a network")
    r.add_argument("--topology", default="exponential", help="network (see 'metrics --help')")
    r.add_argument("--n", type=_positive_int, default=16)
    r.add_argument("--matrix", help="matrix file instead of --topology")
    r.add_argument("--algorithm", choices=["pull-diag-gt", "mg-pull-diag-gt"], default="pull-diag-gt")
    r.add_argument("--rounds", type=_positive_int, default=None, help="gossip rounds R (mg: default Theorem 3's)")
    r.add_argument("--lr", type=float, default=1e-3)
    r.add_argument("--tracker", choices=["exact", "perron"], default="exact")
    r.add_argument("--backend", choices=["cpu", "cupy", "mpi"], default="cpu",
                   help="cupy: run on the GPU; mpi: partition the nodes over the ranks of mpiexec -n P rowstoch run")
    r.add_argument("--iterations", type=_nonnegative_int, default=1000)
    r.add_argument("--repeats", type=_positive_int, default=1)
    r.add_argument("--record-every", type=_positive_int, default=None)
    r.add_argument("--objective", choices=["logistic", "quadratic"], default="logistic")
    r.add_argument("--total", type=_positive_int, default=204800, help="samples in all (logistic)")
    r.add_argument("--batch", type=_positive_int, default=200)
    r.add_argument("--d", type=_positive_int, default=10)
    r.add_argument("--rho", type=float, default=0.01)
    r.add_argument("--heterogeneity", type=float, default=0.0)
    r.add_argument("--sigma", type=float, default=0.0, help="gradient noise (quadratic)")
    r.add_argument("--seed", type=int, default=0, help="seed of the gradient streams and random topologies")
    r.add_argument("--data-seed", type=int, default=42)
    r.add_argument("--checkpoint", help="write an atomic .npz checkpoint here")
    r.add_argument("--resume", help="continue from this checkpoint")
    r.add_argument("--out", default="results")
    r.add_argument("--no-progress", action="store_true")
    r.set_defaults(func=cmd_run)
    rp = sub.add_parser("reproduce", help="reproduce a figure of the paper")
    rp.add_argument("figure", choices=["pull-diag", "linear-speedup", "multi-gossip"])
    rp.add_argument("--out", default="results")
    rp.add_argument("--iterations", type=_positive_int, default=None, help="iterations (communication rounds for multi-gossip)")
    rp.add_argument("--repeats", type=_positive_int, default=None)
    rp.add_argument("--no-progress", action="store_true")
    rp.set_defaults(func=cmd_reproduce)
    m = sub.add_parser("metrics", help="network metrics (beta, kappa, recommended R) of a topology or matrix file")
    m.add_argument("--topology", default="all", help=f"one of {', '.join(TOPOLOGIES + PAPER_GRAPHS)}, or 'all'")
    m.add_argument("--n", type=_positive_int, default=16, help="number of nodes (default 16)")
    m.add_argument("--seed", type=int, default=0, help="seed of random topologies")
    m.add_argument("--matrix", help="matrix file: .npz (scipy sparse), .mtx, .npy or an edge list 'src dst [w]'")
    m.set_defaults(func=cmd_metrics)
    return p


def main(argv=None):
    """Entry point of the ``rowstoch`` command."""
    parser = make_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except UsageError as exc:
        print(f"rowstoch: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("rowstoch: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
