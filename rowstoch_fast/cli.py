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


def _metrics_table(named):
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
    if args.matrix:
        named = [(os.path.basename(args.matrix), load_matrix(args.matrix))]
    elif args.topology == "all":
        named = [(t, build_topology(t, args.n, args.seed)) for t in TOPOLOGIES if t != "grid" or _is_square(args.n)]
        named += [(p, build_topology(p, 16)) for p in PAPER_GRAPHS]
    else:
        named = [(args.topology, build_topology(args.topology, args.n, args.seed))]
    print(_metrics_table(named))
    return 0


def _is_square(n):
    return int(round(np.sqrt(n))) ** 2 == n


def cmd_demo(args):
    graphs = topology.paper_graphs()
    named = [("exponential-16", topology.exponential(16))] + [(f"paper-{k}", v) for k, v in graphs.items()]
    print("Network metrics of the paper's 16-node graphs (Section 2.2, Appendix E.1):")
    print(_metrics_table(named))
    return 0


def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def make_parser():
    p = argparse.ArgumentParser(prog="rowstoch", description="Decentralized optimization over row-stochastic networks.")
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("demo", help="run the main job on the embedded default")
    d.set_defaults(func=cmd_demo)
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
