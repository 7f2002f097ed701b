"""``rowstoch metrics``, ``topologies``, ``algorithms`` and ``demo``.
"""

from __future__ import annotations

import os
import sys
import textwrap

from .._checks import require_memory
from ..algorithms import labels, method_of, REGISTRY
from ..metrics import metrics_memory, metrics_table
from ..topology import by_name as build_topology, NAMES as TOPOLOGIES, PAPER_NAMES as PAPER_GRAPHS, SEEDED_NAMES
from ._common import (_matrix_from_args, _matrix_rules, load_matrix_option, _refuse_unread, _topology_n,
                      _writable_folder, narrator, progress_option, refuse_shared_launch, TOPOLOGY_HELP, file_label)

def cmd_metrics(args):
    """``rowstoch metrics``: the metrics table of a topology, all topologies, or a matrix file."""
    _refuse_unread(args, _matrix_rules(args, ("--topology", "--n", "--seed")) + [
        (("--seed",), not args.matrix and args.topology not in (*SEEDED_NAMES, "all"),
         f"with --topology {args.topology}: it draws nothing (--seed picks the draw of {', '.join(SEEDED_NAMES)})"),
        (("--undirected", "--weights"), not args.matrix and args.topology == "all",
         "with --topology all (name one topology)")])
    # (ignored without a word, helper 193)
    if args.matrix:
        named = [(file_label(args.matrix), load_matrix_option(args.matrix, args.normalize))]
    elif args.topology == "all":
        n = 16 if args.n is None else args.n
        named, skipped = [], []
        for t in TOPOLOGIES:  # (those that cannot be built at n left out, and said: --n 5 had been refused whole,
            try:  # naming the torus's square n, and --n 1 the nearest-neighbour graph's k, helper 185)
                named.append((t, build_topology(t, n, args.seed)))
            except (ValueError, MemoryError) as exc:  # (too large at n too: complete(100000)'s 447 GiB had ended
                # the whole table after 35 s, the others built, helper 231)
                skipped.append(f"{t} ({str(exc).replace('--topology ' + t + ' ', '')})")
        if skipped:
            print(f"rowstoch: note: not built at --n {n}: {'; '.join(skipped)}", file=sys.stderr)
        named += [(p, build_topology(p, 16)) for p in PAPER_GRAPHS]  # the paper's graphs have 16 nodes (column n)
    else:
        n = _topology_n(args)
        # refused before the network is built (which can take seconds at such sizes)
        require_memory(metrics_memory(n), f"the metrics of a network of n = {n} nodes")
        named = [(args.topology, _matrix_from_args(args))]  # (--undirected and --weights as compare reads them)
    print(metrics_table(named))
    if not getattr(args, "quiet", False):  # (-q: the table alone, for a script that reads it)
        print(textwrap.fill(METRICS_KEY, 100, break_on_hyphens=False))
    return 0


#: What the columns of ``rowstoch metrics`` mean (helper 223: "R (Thm 3)" and "loops" were said nowhere a new user
#: looks).
METRICS_KEY = ("beta = ||A - 1 pi^T||_pi (1 - beta: the generalized spectral gap); kappa = max pi / min pi (the "
               "equilibrium skewness); R (Thm 3): the gossip rounds per iteration Theorem 3 recommends for "
               "MG-Pull-Diag-GT; loops: whether every node keeps a self loop")


def cmd_topologies(args):
    """``rowstoch topologies``: the networks ``--topology`` accepts, one line each."""
    for name in TOPOLOGIES + PAPER_GRAPHS:
        print(f"{name:<24}{TOPOLOGY_HELP[name]}")
    return 0


def cmd_algorithms(args):
    """``rowstoch algorithms``: the registered algorithms, one line each (from the registry and each class's
    docstring)."""
    kinds = {"A": "row-stochastic A", "C": "column-stochastic C", "W": "doubly stochastic W"}
    print(f"{'name':<22}{'class':<20}{'mixes with':<42}{'converges to (constant step, static network)'}")
    for label in labels(every_mg=True):
        cls = REGISTRY[method_of(label)]
        mixes = " + ".join(kinds[m] for m in cls.matrices) or ("a server and its clients" if cls.federated else "exact averaging")
        if cls.symmetric:
            mixes = mixes.replace("doubly stochastic", "symmetric")
        if label != cls.name:
            mixes += ", R rounds"
        goal = "the minimiser" if cls.exact else f"{cls.bias} minimiser" if cls.bias else "O(lr) of the minimiser"
        print(f"{label:<22}{cls.__name__:<20}{mixes:<42}{goal}{cls.goal_conditions}")
    print("\n(help(rowstoch_fast.<class>) gives each one's equations and reference)")
    return 0


def cmd_demo(args):
    """``rowstoch demo``: the main job on the embedded default (see :func:`rowstoch_fast.experiments.demo`)."""
    from ..experiments import demo

    from .reproduce import DEMO_MARKER, earlier_outputs

    refuse_shared_launch("rowstoch demo")
    marker = os.path.join(args.out, DEMO_MARKER)  # (an earlier demo's files are replaced, a reproduction's are not:
    # `demo --out DIR` had replaced a `reproduce multi-gossip --out DIR` run's files, the same names, helper 185)
    mine = os.path.exists(marker) or "--out" not in getattr(args, "given", ())  # (its own default folder: always)
    earlier_outputs(args.out, "multi-gossip", overwrite=args.overwrite or mine, words="rowstoch reproduce multi-gossip")
    out = _writable_folder(args.out, "--out")
    with open(marker, "w") as fh:
        fh.write("rowstoch demo writes here: its next run replaces its files\n")
    say = narrator(args)
    say(f"rowstoch demo: writing its figure and table to {out}/ (choose with --out)")
    demo(args.out, progress=progress_option(args))
    return 0
