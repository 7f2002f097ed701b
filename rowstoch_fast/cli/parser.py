"""The ``rowstoch`` command's parser: every subcommand and its options (the network layers' from their registry).
"""

from __future__ import annotations

import argparse
import re

from .._checks import nonnegative_int as _nonnegative_int, positive_int as _positive_int, seed_option as _seed, TRACKERS
from ..io import EDGE_LIST_HELP
from ..network import options as network_options
from ..topology import DIRECTED_NAMES as DIRECTED_TOPOLOGIES
from ._common import _algorithm_names, DEFAULT_BATCH, DEFAULT_TOTAL, OBJECTIVES
from .compare import cmd_compare
from .info import cmd_algorithms, cmd_demo, cmd_metrics, cmd_topologies
from .reproduce import FIGURES, cmd_reproduce
from .run import cmd_run


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Each option's default in its help (unless it has none or the help says it), descriptions as written."""

    def _get_help_string(self, action):
        text = action.help or ""
        if "default" in text or any(action.default is v for v in (None, False, argparse.SUPPRESS)) \
                or not action.option_strings:  # (identity: a default of 0 equals False, and went unsaid)
            return text
        return text + " (default: %(default)s)"


class _Joined(argparse.Action):
    """An option whose values, given several times, join with commas (``--lr dsgd=0.1 --lr sgp=0.1`` is ``--lr
    dsgd=0.1,sgp=0.1``; the last one alone was kept, and dsgd tuned without a word: helper 159)."""

    def __call__(self, parser, namespace, values, option_string=None):
        before = getattr(namespace, self.dest, None)
        setattr(namespace, self.dest, values if before is None else f"{before},{values}")


def _output_options():
    """``-q`` / ``-v`` and the progress bars, on every command (a parent parser)."""
    parent = argparse.ArgumentParser(add_help=False)
    out = parent.add_argument_group("messages")
    talk = out.add_mutually_exclusive_group()
    talk.add_argument("-q", "--quiet", action="store_true",
                      help="results, warnings and errors only: no progress bars, no narration")
    talk.add_argument("-v", "--verbose", action="count", default=0,
                      help="also the library's log (the rowstoch_fast logger at INFO; -vv: DEBUG)")
    bars = out.add_mutually_exclusive_group()
    bars.add_argument("--progress", action="store_true", help="progress bars even without a terminal")
    bars.add_argument("--no-progress", action="store_true",
                      help="no progress bars (without a terminal there are none anyway)")
    return parent


def _network_options(parser, every=False):
    """The options that build the network (``run``, ``compare``; ``every``: ``metrics``, whose ``--topology``
    may be, and is by default, ``all``, and whose ``--seed`` draws the random topologies alone): one set, so that
    ``metrics`` takes ``--undirected --weights`` as the commands that run on the network do (helper 219)."""
    net = parser.add_argument_group("network")
    net.add_argument("--topology", default="all" if every else "exponential",
                     help="network; 'rowstoch topologies' lists them" + (", or 'all'" if every else ""))
    net.add_argument("--n", type=_positive_int, default=None, help="number of nodes (default 16; not for paper-*)")
    net.add_argument("--matrix", help="matrix file instead of --topology: .npz (scipy sparse), .mtx, .npy (dense) "
                                      "or an edge list (see 'rowstoch metrics --help')")
    net.add_argument("--normalize", action=argparse.BooleanOptionalAction, default=False,
                     help="divide each row of --matrix by its sum (otherwise rows must sum to 1" + (
                         ")" if every else "; --no-normalize: an experiment file's normalize = true off)"))
    net.add_argument("--undirected", action=argparse.BooleanOptionalAction, default=False,
                     help="link the edges of a directed topology (" + ", ".join(DIRECTED_TOPOLOGIES) + ") both ways")
    net.add_argument("--weights", choices=["in-degree", "metropolis"], default="in-degree",
                     help="in-degree: the paper's rule; metropolis: the doubly stochastic Metropolis-Hastings W of an "
                          "undirected graph (with --undirected for the directed topologies)")
    net.add_argument("--seed", type=_seed, default=0, help="seed of random topologies" if every else
                     "seed of the gradient streams and of random topologies")


def _algorithm_options(group):
    group.add_argument("--tracker", choices=list(TRACKERS), default="exact",
                       help="D_t = Diag(A^(tR)) as in the paper, or its limit diag(pi) (for very large n)")
    group.add_argument("--backend", choices=["cpu", "cupy", "mpi"], default="cpu",
                       help="cupy: run on the GPU; mpi: partition the nodes over the ranks of mpiexec -n P rowstoch")


def _objective_options(parser):
    obj = parser.add_argument_group("objective")
    obj.add_argument("--objective", choices=OBJECTIVES, default="logistic",
                     help="logistic: the paper's nonconvex logistic regression (Appendix E.2); logistic-l2: the same "
                          "data with a ridge term --lam (strongly convex, x* known); least-squares: heterogeneous "
                          "synthetic least squares (x* known); lasso: the same least squares plus --l1 ||x||_1 (a composite "
                          "problem: the proximal methods run it, x* computed); quadratic: a random separable quadratic")
    obj.add_argument("--total", type=_positive_int, default=DEFAULT_TOTAL,
                     help=f"samples in all, split evenly over the nodes (logistic, logistic-l2; divisible by n; "
                          f"default {DEFAULT_TOTAL}, lowered to a multiple of n)")
    obj.add_argument("--batch", type=_positive_int, default=DEFAULT_BATCH,
                     help=f"mini-batch per node and gradient (logistic, logistic-l2; default {DEFAULT_BATCH}, or a "
                          "data file's samples per node where they are fewer)")
    obj.add_argument("--samples-per-node", type=_positive_int, default=32,
                     help="rows of each node's least-squares problem (least-squares, lasso; full-batch gradients)")
    obj.add_argument("--d", type=_positive_int, default=10, help="dimension of x")
    obj.add_argument("--rho", type=float, default=0.01, help="weight of the nonconvex regulariser (logistic)")
    obj.add_argument("--lam", type=float, default=0.01, help="weight of the ridge term (logistic-l2), > 0")
    obj.add_argument("--l1", type=float, default=0.1, help="weight of the l1 term (lasso), >= 0")
    obj.add_argument("--heterogeneity", type=float, default=None,
                     help="spread of the nodes' own x* (0 = iid data; default 0 for logistic, the paper's, and 1 for "
                          "logistic-l2, least-squares and lasso)")
    obj.add_argument("--sigma", type=float, default=0.0, help="gradient noise (quadratic)")
    obj.add_argument("--data-seed", type=_seed, default=42, help="seed of the synthetic data")
    obj.add_argument("--test-samples", type=_nonnegative_int, default=0,
                     help="held-out samples of the synthetic data's law, drawn after it (logistic, logistic-l2, "
                          "least-squares, lasso): the records' test_loss and test_accuracy (logistic) or test_mse "
                          "(least squares) of the nodes' mean model; 0: none (those metrics NaN)")
    obj.add_argument("--split", default="contiguous",
                     help="how the training samples go to the nodes (logistic, logistic-l2): contiguous (node i the i-th "
                          "block, as drawn or as in --data-file), iid (shuffled), sorted (the i-th block of the samples "
                          "sorted by label: label skew, most nodes one label only), classes:K (K classes per node, cut to "
                          "equal sizes); rowstoch_fast.datasets.split_samples")
    obj.add_argument("--data-file", default=None,
                     help="the data instead of the synthetic set (logistic, logistic-l2, least-squares, lasso): an .npz with "
                          "H (one sample per row) and y (one target per row; -1 / +1 for the logistic problems), "
                          "its rows shared evenly by the nodes in order; H_test and y_test beside them, a held-out "
                          "test set (the test_* metrics)")


class _Once(argparse._StoreAction):
    """A value option given twice is refused, naming both values: the last one alone was kept without a word
    (``--algorithms dsgd --algorithms dgd`` ran dgd, ``--loss 0.1 --loss 0.2`` one setting, helper 192); an option
    that takes a list takes it comma-separated in one (``--loss 0.1,0.2``), and ``--lr`` of ``compare`` joins its
    repeats (:class:`_Joined`)."""

    def __call__(self, parser, namespace, values, option_string=None):
        given = getattr(parser, "_given", None)
        if given is not None:
            if self in given and given[self] != values:  # (the same value again: a wrapper's default and its
                # user's, alike, helper 194)
                raise argparse.ArgumentError(self, f"given twice ({given[self]}, then {values}): give it once"
                                             + (" (several values: comma-separated in one)"
                                                if re.search(r"\bcomma\b", self.help or "")
                                                or ",..." in str(self.metavar or "") else ""))
            given[self] = values
        super().__call__(parser, namespace, values, option_string)


class _Parser(argparse.ArgumentParser):
    """argparse with the command's error format: one line, ``rowstoch: error: ...``, exit 2 (the usage is a
    ``--help`` away instead of printed above it); options are spelled out (no abbreviations: ``--record 5``
    would have set ``--record-every``, ``--network lossy`` was read as ``--network-seed``)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        self.register("action", None, _Once)
        self.register("action", "store", _Once)

    def parse_known_args(self, args=None, namespace=None):
        self._given = {}  # (each parse: the value options given so far, _Once)
        return super().parse_known_args(args, namespace)

    def error(self, message):
        self.exit(2, f"rowstoch: error: {message} (see {self.prog} --help)\n")

    def parse_args(self, args=None, namespace=None):
        """argparse's, with an unknown option of a command said by that command, with the closest of its options
        (helper 149: ``compare --algorithm pull-diag-gt`` read "unrecognized arguments ... (see rowstoch --help)")."""
        namespace, extras = self.parse_known_args(args, namespace)
        if extras:
            from .._checks import did_you_mean

            commands = [a for a in self._actions if isinstance(a, argparse._SubParsersAction)]
            command = commands[0].choices.get(getattr(namespace, "command", None)) if commands else None
            where = command or self
            unknown = next((e.split("=", 1)[0] for e in extras if e.startswith("--")), None)
            options = [o for a in where._actions for o in a.option_strings if o.startswith("--")]
            begun = [o for o in options if unknown and o.startswith(unknown + "-")]  # (an option's first words:
            # "--rounds" had been told "--mg-rounds", the closest spelling, for "--rounds-budget")
            hint = (f" (did you mean {begun[0]!r}?)" if len(begun) == 1 else
                    f" (did you mean one of {', '.join(begun)}?)" if begun else
                    did_you_mean(unknown, options) if unknown else "")
            where.error(f"unrecognized arguments: {' '.join(extras)}{hint}")
        return namespace

    def _check_value(self, action, value):  # (a choice mistyped: the closest one named, as compare's lists do)
        if action.choices is not None and value not in action.choices:
            from .._checks import did_you_mean

            raise argparse.ArgumentError(action, f"invalid choice: {value!r}{did_you_mean(value, action.choices)} "
                                                 f"(choose from {', '.join(map(str, action.choices))})")
        super()._check_value(action, value)


def make_parser():
    """The argparse parser of the ``rowstoch`` command; a network layer's option spelled as one of the command's
    own refused, naming it (a layer's ``Option("lr", ...)`` had ended every command, ``rowstoch algorithms`` too,
    with argparse's "conflicting option string: --lr", and one whose destination only was another option's would
    have set it: helper 238)."""
    try:
        p = _make_parser()
    except argparse.ArgumentError as exc:
        flag = str(exc).rpartition(": ")[2].split(",")[0].strip()
        cls = network_options.owner(flag)
        if cls is None:
            raise
        raise TypeError(f"{cls.__qualname__}: its option {flag} is the command line's own {flag}; spell it otherwise "
                        "(a layer's options join rowstoch run's and compare's)") from None
    for command in ("run", "compare"):
        actions = _subcommand(p, command)._actions
        for opt in [*network_options.declared(), network_options.NETWORK_SEED]:
            other = next((a for a in actions if a.dest == opt.name and opt.flag not in a.option_strings), None)
            if other is not None:
                cls = network_options.owner(opt.name)
                raise TypeError(f"{cls.__qualname__ if cls else 'a layer'}: its option {opt.name!r} has the "
                                f"destination of the command line's own {'/'.join(other.option_strings)}; name it "
                                "otherwise")
    return p


def _subcommand(parser, name):
    """The sub-parser of ``rowstoch NAME``."""
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[name]


def _make_parser():
    from .. import __version__

    p = _Parser(
        prog="rowstoch", formatter_class=_Formatter,
        description="Decentralized optimization over row-stochastic (directed) networks: Pull-Diag, Pull-Diag-GT "
                    "and MG-Pull-Diag-GT on fast kernels.",
        epilog="Threads: the kernels use OMP_NUM_THREADS threads (default: all cores). Exit status: 0 done, "
               "2 bad arguments or input, 3 diverged, 130 interrupted (Ctrl-C), 143 terminated (SIGTERM), 129 hung up "
               "(SIGHUP: the terminal closed); an interrupted, terminated or hung-up run or comparison keeps what "
               "finished (--resume).")
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    common = [_output_options()]
    d = sub.add_parser("demo", parents=common, formatter_class=_Formatter,
                       help="check the paper's claims on its 16-node graphs in one run (under a minute)",
                       description="Metrics of the paper's 16-node graphs, then Pull-Diag-GT vs MG-Pull-Diag-GT "
                                   "(R = 1, 5, 10) on them, each of Figure 3's claims judged; writes "
                                   "multi_gossip.png, multi_gossip.csv and multi_gossip_verdict.csv into --out "
                                   "(default ./rowstoch-demo; an earlier demo's files there are replaced).")
    d.add_argument("--out", default="rowstoch-demo",
                   help="output folder (the default's files are replaced at each demo); another folder holding the "
                        "files of a `rowstoch reproduce multi-gossip` run is refused unless --overwrite")
    d.add_argument("--overwrite", action="store_true",
                   help="replace the multi-gossip files of a reproduction in --out")
    d.set_defaults(func=cmd_demo)

    r = sub.add_parser("run", parents=common, formatter_class=_Formatter,
                       help="run one algorithm on an objective over a network",
                       description="One algorithm on one objective over one network; writes history.csv, "
                                   "history.json and grad_norm.png into --out.")
    _network_options(r)
    alg = r.add_argument_group("algorithm")
    alg.add_argument("--algorithm", choices=_algorithm_names(), default="pull-diag-gt", metavar="NAME",
                     help="pull-diag-gt (eq. 7), mg-pull-diag-gt (eq. 12) or a baseline: "
                          + ", ".join(_algorithm_names()[2:]))
    alg.add_argument("--rounds", type=_positive_int, default=None,
                     help="gossip rounds R per iteration (mg-* methods; default Theorem 3's R)")
    alg.add_argument("--lr", type=float, default=None,
                     help="step size alpha (default 0.05 / n for the Pull-Diag family, whose tracker follows the sum "
                          "of the gradients, 0.05 for the others); stable values scale like 1/n on the logistic "
                          "problem (the paper: 5e-2 at n = 1, 3e-3 at n = 16, 1e-4 at n = 512)")
    alg.add_argument("--hyper", action="append", default=None, metavar="NAME=VALUE",
                     help="another hyperparameter of the algorithm's constructor, once per flag: e.g. --hyper "
                          "local_steps=8 --hyper participation=0.5 --hyper client_steps=[1,2,3,4] (a value is read "
                          "as JSON: a number, true / false, a list; numbers with commas, 1,2,3,4, as a list; "
                          "otherwise as text); help(rowstoch_fast.<class>) "
                          "lists them")
    _algorithm_options(alg)
    alg.add_argument("--dtype", choices=["float64", "float32"], default="float64",
                     help="value type of the matrix, the iterates and the objective (float32: half the memory)")
    _objective_options(r)
    network_options.add_arguments(r)
    rn = r.add_argument_group("run")
    rn.add_argument("--iterations", type=_nonnegative_int, default=1000, help="iterations T (R T gossip rounds)")
    rn.add_argument("--repeats", type=_positive_int, default=1, help="independent repetitions, batched")
    rn.add_argument("--record-every", type=_positive_int, default=None,
                    help="record the metrics every this many iterations (default iterations / 100; for a "
                         "method of K local steps a round, the nearest multiple of K)")
    rn.add_argument("--checkpoint", help="write an atomic .npz checkpoint here (periodically, on Ctrl-C, at the end); "
                                         "a file that exists is refused unless --resume names it or --overwrite")
    rn.add_argument("--resume", help="continue from this checkpoint (same options; only --iterations, --lr and "
                                     "--record-every may change)")
    rn.add_argument("--metrics-module", default=None, metavar="FILE",
                    help="a Python file that registers metrics of your own (rowstoch_fast.register_metric): each is "
                         "recorded, a column of history.csv and history.json")
    rn.add_argument("--metric", default=None, metavar="NAME[,...]",
                    help="more metrics to record beside the built-in ones, columns of history.csv and history.json: "
                         "a statistic over the nodes node_<mean|std|min|max|median>_<quantity>, an oracle-call "
                         "counter (gradient_calls, ...), messages_received, messages_dropped (a lossy network), a "
                         "federated metric (client_drift, participation_fairness)")
    rn.add_argument("--out", default="results",
                    help="output folder; one that holds an earlier run's history is refused unless --resume or "
                         "--overwrite")
    rn.add_argument("--overwrite", action="store_true", help="replace the history of an earlier run in --out")
    r.set_defaults(func=cmd_run)

    c = sub.add_parser("compare", parents=common, formatter_class=_Formatter,
                       help="compare algorithms on one problem with the same communication budget",
                       description="Several algorithms on the same problem, seeds and budget of communication "
                                   "rounds, each at its own learning rate (given, or tuned); writes compare.csv "
                                   "(every record), summary.csv / .md / .tex (final values, best in bold, status), "
                                   "lr.json (rates, sources, every tuning score), compare.png (a panel per metric) "
                                   "and tuning.png (tuning-GRAPH_SETTING.png each where there are several) into "
                                   "--out and prints the table.")
    c.add_argument("--preset", choices=["paper"],
                   help="paper: the 4 paper graphs x every registered method for directed graphs that the preset "
                        "takes (13 today) on the paper's synthetic problem, each rate tuned (the shipped file "
                        "presets/paper.toml)")
    c.add_argument("--resume", default=None, metavar="DIR",
                   help="continue the comparison whose --out folder is DIR: what finished is kept, an interrupted run "
                        "goes on from its checkpoint, and a larger --repeats adds only the missing repetitions")
    c.add_argument("--config", default=None,
                   help="an experiment file (TOML): network(s), objective, algorithms with their own settings, "
                        "budget, seeds, outputs; options written on the command line win over it")
    _network_options(c)
    network_options.add_arguments(c)
    calg = c.add_argument_group("algorithms")
    calg.add_argument("--algorithms", default=None,
                      help="comma-separated (default: every algorithm that runs on the network, 'rowstoch "
                           "algorithms' lists them); mg-NAME runs NAME with --mg-rounds (default "
                           "Theorem 3's R) rounds")
    calg.add_argument("--rounds-budget", type=_positive_int, default=2000,
                      help="communication rounds per algorithm (an MG method: budget / R iterations)")
    calg.add_argument("--lr", default=None, action=_Joined,
                      help="learning rates: NAME=VALUE,... per algorithm (or in several --lr), or one number for "
                           "all; the algorithms without one are tuned (every rate of 1e-4 .. 10 over the whole "
                           "budget in one batched run, refined)")
    calg.add_argument("--tune", action="store_true",
                      help="tune every rate not given by --lr (the default; kept for older scripts)")
    calg.add_argument("--mg-rounds", type=_positive_int, default=None,
                      help="R of the mg-* methods (default: Theorem 3's R for the graph)")
    _algorithm_options(calg)
    _objective_options(c)
    crn = c.add_argument_group("run")
    crn.add_argument("--repeats", type=_positive_int, default=5, help="repetitions (the band in the figure)")
    out = c.add_argument_group("outputs")
    out.add_argument("--metric", default=None,
                     help="comma-separated metrics for the figure's panels and the tables (default: suboptimality "
                          "where the objective knows f*, else grad_norm_mean, then consensus_error); the first is "
                          "tuned on and ranked (one that falls to 0: not loss, consensus_error or a test metric); "
                          "any of " + ", ".join(("suboptimality", "distance", "consensus_error", "grad_norm_mean",
                                                 "grad_norm", "grad_norm_centroid", "loss", "test_loss",
                                                 "test_accuracy", "test_mse"))
                          + ", a statistic over the nodes node_<mean|std|min|max|median>_<quantity> (quantities: "
                          "local_loss, suboptimality, distance, test_loss, test_accuracy, test_mse), an oracle-call "
                          "counter (gradient_calls, sample_gradient_calls, prox_calls, local_prox_calls: per node), "
                          "the messages a lossy network delivered or dropped (messages_received, messages_dropped), "
                          "a federated method's (client_drift, participation_fairness; shown, never ranked) "
                          "or a metric of --metrics-module")
    out.add_argument("--metrics-module", default=None, metavar="FILE",
                     help="a Python file that registers metrics of your own (rowstoch_fast.register_metric): their "
                          "names become --metric choices (the first only if registered ranked=True)")
    out.add_argument("--x", default="rounds",
                     help="the figure's horizontal axis: rounds, gradients, bytes, seconds or cost (--cost-weights)")
    out.add_argument("--cost-weights", default=None, metavar="UNIT=W,...",
                     help="with --x cost: the cost of each operation, e.g. gradient=1,round=100 (units: gradient "
                          "evaluation, round, message, byte; the axis is their weighted sum over all nodes)")
    out.add_argument("--format", default=None,
                     help="figure formats, comma-separated: png (300 dpi), pdf, svg; or none, the tables alone "
                          "(default: the environment variable ROWSTOCH_FORMAT, else png)")
    out.add_argument("--live", action="store_true",
                     help="as each method finishes: the figure so far in OUT/live.png (and a window that refreshes "
                          "where matplotlib has a display), else a text plot of the ranked metric on the terminal (at most once "
                          "a minute, and at the end)")
    crn.add_argument("--jobs", type=_positive_int, default=None,
                     help="run the methods in this many processes (default: the environment variable "
                          "ROWSTOCH_JOBS, else the cores; 1 with --backend mpi or cupy); the results are those of "
                          "one process")
    crn.add_argument("--out", default="compare",
                     help="output folder; one that is not empty is refused unless --resume or --overwrite (which "
                          "replaces a comparison's own files alone)")
    crn.add_argument("--overwrite", action="store_true",
                     help="replace the results of an earlier comparison in --out")
    c.set_defaults(func=cmd_compare)

    rp = sub.add_parser("reproduce", parents=common, formatter_class=_Formatter,
                        help="reproduce a figure of the paper")
    rp.add_argument("figure", choices=list(FIGURES),
                    help="; ".join(f"{k}: {v}" for k, v in FIGURES.items()))
    rp.add_argument("--out", default="results",
                    help="output folder; one that holds an earlier run of the figure is refused unless --overwrite")
    rp.add_argument("--overwrite", action="store_true",
                    help="remove the files of an earlier run of the figure in --out first")
    rp.add_argument("--iterations", type=_positive_int, default=None,
                    help="iterations (communication rounds for multi-gossip, mnist-*, cifar10-resnet and "
                         "robustness: at least one iteration of the largest R, 10 for multi-gossip and the neural "
                         "figures, 5 for robustness); default the paper's (linear-speedup: 8000 on exponential graphs, "
                         "20000 on rings, enough to leave the transient)")
    rp.add_argument("--graphs", default=None,
                    help="linear-speedup: the halves of Figure 2, comma-separated: exponential, ring (default both)")
    rp.add_argument("--rates", choices=["default", "paper"], default="default",
                    help="linear-speedup: this command's rates (the research code's on exponential graphs, n alpha = "
                         "0.05 on rings) or the paper's printed ones (n alpha = 0.512 on exponential graphs, 0.002 "
                         "on rings)")
    rp.add_argument("--data", choices=["digits", "mnist"], default="digits",
                    help="mnist-*: scikit-learn's bundled digits, or MNIST from --data-dir")
    rp.add_argument("--data-dir", default=None,
                    help="mnist-*: MNIST on disk: a folder with the four IDX files (train-images-idx3-ubyte or "
                         "train-images.idx3-ubyte, gzipped or not; also in its raw/ or MNIST/raw/) or Keras's "
                         "mnist.npz; cifar10-resnet: the folder of CIFAR-10's batches (python or binary version)")
    rp.add_argument("--synthetic", action="store_true",
                    help="cifar10-resnet: train on generated CIFAR-10-shaped images instead of --data-dir's batches")
    rp.add_argument("--width", type=_positive_int, default=64,
                    help="cifar10-resnet: ResNet-18's first stage width (64: ResNet-18 itself; 4-8: the same network "
                         "narrower, for a CPU)")
    rp.add_argument("--alpha", type=float, default=None,
                    help="mnist-mlp: Dirichlet(alpha) label skew over the nodes instead of an IID split")
    rp.add_argument("--repeats", type=_positive_int, default=None, help="repetitions; default the paper's")
    rp.add_argument("--seed", type=_seed, default=0,
                    help="linear-speedup, multi-gossip, robustness, communication, k-gt-local-steps: the seed of the "
                         "runs' streams and the networks' draws (communication and k-gt-local-steps: of their data "
                         "too)")
    rp.add_argument("--data-seed", type=_seed, default=None,
                    help="linear-speedup, multi-gossip, robustness: the draw of the synthetic logistic problem "
                         "(default 42, the paper's instance); another draws another instance of the same problem")
    rp.add_argument("--axis", choices=["batches", "rounds", "both"], default="batches",
                    help="mnist-*: the budget (--iterations) and the figure's axis in batches, the paper's (every "
                         "method the same batches, MG gossiping R rounds per batch), or in communication rounds "
                         "(MG: R rounds and R mini-batches per iteration, T / R iterations), or both side by side")
    rp.set_defaults(func=cmd_reproduce)

    m = sub.add_parser("metrics", parents=common, formatter_class=_Formatter,
                       help="network metrics (beta, kappa, recommended R) of a topology or matrix file",
                       description="beta (1 - beta is the generalized spectral gap), kappa (equilibrium skewness), "
                                   "Theorem 3's number of gossip rounds R, and whether every node has a self loop.",
                       epilog=EDGE_LIST_HELP + ".")
    _network_options(m, every=True)
    m.set_defaults(func=cmd_metrics)

    t = sub.add_parser("topologies", parents=common, help="list the networks --topology accepts")
    t.set_defaults(func=cmd_topologies)
    a = sub.add_parser("algorithms", parents=common, help="list the algorithms (--algorithm, --algorithms)")
    a.set_defaults(func=cmd_algorithms)
    return p
