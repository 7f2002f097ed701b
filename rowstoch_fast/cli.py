"""The ``rowstoch`` command line.

``rowstoch demo`` runs the main job on an embedded default; ``rowstoch metrics``
prints the network metrics of a topology or a matrix file. Bad arguments end
with a one-line message and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time

import numpy as np

from .algorithms import REGISTRY, labels, method_of
from ._checks import TRACKERS, nonnegative_int as _nonnegative_int, positive_int as _positive_int, require_memory
from ._checks import seed_option as _seed
from .errors import UsageError
from .io import EDGE_LIST_HELP, load_data_file, load_matrix
from .metrics import metrics_memory, metrics_table
from .network import options as network_options
from .topology import DIRECTED_NAMES as DIRECTED_TOPOLOGIES
from .topology import NAMES as TOPOLOGIES
from .topology import PAPER_NAMES as PAPER_GRAPHS
from .topology import by_name as build_topology


def _topology_n(args):
    """``--n`` (16 when not given); a paper graph refuses any other n instead of ignoring it."""
    if args.topology.startswith("paper-") and args.n not in (None, 16):
        raise UsageError(f"--topology {args.topology} is the paper's 16-node graph; it takes no --n (got {args.n})")
    return 16 if args.n is None else args.n


def cmd_metrics(args):
    """``rowstoch metrics``: the metrics table of a topology, all topologies, or a matrix file."""
    _refuse_unread(args, _matrix_rules(args, ("--topology", "--n", "--seed")))
    if args.matrix:
        named = [(os.path.basename(args.matrix), load_matrix(args.matrix, args.normalize))]
    elif args.topology == "all":
        n = 16 if args.n is None else args.n
        named = [(t, build_topology(t, n, args.seed)) for t in TOPOLOGIES if t != "grid" or _is_square(n)]
        named += [(p, build_topology(p, 16)) for p in PAPER_GRAPHS]  # the paper's graphs have 16 nodes (column n)
    else:
        n = _topology_n(args)
        # refused before the network is built (which can take seconds at such sizes)
        require_memory(metrics_memory(n), f"the metrics of a network of n = {n} nodes")
        named = [(args.topology, build_topology(args.topology, n, args.seed))]
    print(metrics_table(named))
    return 0


def cmd_topologies(args):
    """``rowstoch topologies``: the networks ``--topology`` accepts, one line each."""
    for name in TOPOLOGIES + PAPER_GRAPHS:
        print(f"{name:<24}{TOPOLOGY_HELP[name]}")
    return 0


def cmd_algorithms(args):
    """``rowstoch algorithms``: the registered algorithms, one line each (from the registry and each class's
    docstring)."""
    kinds = {"A": "row-stochastic A", "C": "column-stochastic C", "W": "doubly stochastic W"}
    print(f"{'name':<22}{'class':<20}{'mixes with':<42}{'converges to (constant step)'}")
    for label in labels(every_mg=True):
        cls = REGISTRY[method_of(label)]
        mixes = " + ".join(kinds[m] for m in cls.matrices) or "exact averaging"
        if cls.symmetric:
            mixes = mixes.replace("doubly stochastic", "symmetric")
        if label != cls.name:
            mixes += ", R rounds"
        goal = "the minimiser" if cls.exact else f"{cls.bias} minimiser" if cls.bias else "O(lr) of the minimiser"
        print(f"{label:<22}{cls.__name__:<20}{mixes:<42}{goal}")
    print("\n(help(rowstoch_fast.<class>) gives each one's equations and reference)")
    return 0


def _is_square(n):
    return int(round(np.sqrt(n))) ** 2 == n


def cmd_demo(args):
    """``rowstoch demo``: the main job on the embedded default (see :func:`rowstoch_fast.experiments.demo`)."""
    from .experiments import demo

    out = _writable_folder(args.out, "--out")
    print(f"rowstoch demo: writing its figure and table to {out}/ (choose with --out)")
    demo(args.out, progress=not args.no_progress)
    return 0


def _writable_folder(path, option):
    """Create ``path`` if needed and prove it writable now (before any computation); its absolute path."""
    import tempfile

    if os.path.exists(path) and not os.path.isdir(path):
        raise UsageError(f"{option} {path!r} exists and is not a folder")
    try:
        os.makedirs(path, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".rowstoch-write-test-"):
            pass
    except OSError as exc:
        raise UsageError(f"{option} {path!r} is not writable: {exc.strerror or exc}") from None
    return os.path.abspath(path)


def _writable_file(path, option):
    """The folder of ``path`` must be writable (checked before the run, not after it)."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise UsageError(f"{option} {path!r} is a folder; give a file name such as {os.path.join(path, 'ck.npz')!r}")
    _writable_folder(folder, option + " (its folder)")


def _matrix_from_args(args):
    if args.matrix:
        return load_matrix(args.matrix, args.normalize)
    return build_topology(args.topology, _topology_n(args), args.seed, undirected=getattr(args, "undirected", False),
                          weights=getattr(args, "weights", "in-degree"))


def _check_run_args(args):
    """Cheap checks of ``rowstoch run``'s options, before any network, data or folder is built."""
    _one_setting(args)
    method = method_of(args.algorithm)
    _refuse_unread(args, _problem_rules(args) + [
        (("--tracker",), "tracker" not in REGISTRY[method].hyper, f"by {args.algorithm} (it has no diagonal tracker)")])
    if not args.matrix and getattr(args, "d", None) and not getattr(args, "data_file", None):
        for layer in network_options.in_use(args):  # (before --out is made)
            layer.check_sizes(args, _topology_n(args), args.repeats * args.d, np.dtype(args.dtype).itemsize)
    if args.lr is not None and not (np.isfinite(args.lr) and args.lr > 0):
        raise UsageError(f"--lr must be a finite number > 0, got {args.lr}")
    if not args.algorithm.startswith("mg-") and args.rounds not in (None, 1):
        raise UsageError(f"--algorithm {args.algorithm} takes --rounds 1; use mg-{args.algorithm} for R > 1"
                         if "mg-" + args.algorithm in _algorithm_names() else
                         f"--algorithm {args.algorithm} takes one gossip round per iteration (--rounds 1)")
    _check_objective_args(args)
    if not args.matrix:
        n = _topology_n(args)
        if args.topology not in TOPOLOGIES + PAPER_GRAPHS:
            raise UsageError(f"unknown topology {args.topology!r}; choose from {', '.join(TOPOLOGIES + PAPER_GRAPHS)}")
        _check_objective_size(args, n)
    if args.resume and not os.path.exists(args.resume):
        raise UsageError(f"--resume {args.resume!r} does not exist")


def _check_objective_size(args, n):
    if not args.objective.startswith("logistic") or getattr(args, "data_file", None):  # (a file: when it is read)
        return
    if args.total % n:
        raise UsageError(f"--total {args.total} samples must be divisible by the {n} nodes (e.g. --total {n * max(1, args.total // n)})")
    if args.batch > args.total // n:
        raise UsageError(f"--batch {args.batch} exceeds the {args.total // n} samples per node (--total / n)")


def _run_config(args):
    """The options that identify a run: stored in its checkpoint and compared on --resume."""
    keys = ("topology", "n", "matrix", "normalize", "objective", "total", "batch", "d", "rho", "heterogeneity",
            "sigma", "data_seed", "backend", "dtype")  # (the objective's data is also in the checkpoint's
    # fingerprint of it)
    config = {k: getattr(args, k) for k in keys}
    config.update(network_options.record(args))  # (each layer's keys; those added later only where in use)
    if args.objective in ("logistic-l2", "least-squares"):  # (added later: the others' checkpoints keep their keys)
        config.update(lam=args.lam, samples_per_node=args.samples_per_node)
    if args.undirected or args.weights != "in-degree":
        config.update(undirected=args.undirected, weights=args.weights)
    if args.matrix:
        config["topology"] = config["n"] = None
    else:
        config["n"] = _topology_n(args)  # the default (16) and an explicit --n 16 are the same run
    return {"cli": config}


def _write_outputs(h, args, A, algo):
    """CSV, JSON and PNG into --out; on a late write failure into a fresh temporary folder instead."""
    import tempfile

    names = []
    try:
        names = _write_history(h, args.out, args, A, algo)
        return args.out, names, None
    except OSError as exc:
        fallback = tempfile.mkdtemp(prefix="rowstoch-results-")
        names = _write_history(h, fallback, args, A, algo)
        return fallback, names, exc


def _write_history(h, folder, args, A, algo):
    graph = os.path.basename(args.matrix) if args.matrix else args.topology
    return h.save(folder, title=f"{graph} (n = {A.n}), {args.objective}, {h.meta['repeats']} repetition(s)",
                  label=f"{algo.name}, lr = {algo.lr:g}" + (" (diverged)" if h.diverged else ""))


def cmd_run(args):
    """``rowstoch run``: one algorithm on one objective and network; writes CSV, JSON and PNG."""
    import warnings

    from .errors import DivergenceError
    from .runner import Algorithm, check_takes, run

    _check_run_args(args)
    started = time.perf_counter()
    root = True
    if args.backend == "mpi":
        try:
            from mpi4py import MPI
        except ImportError:
            raise UsageError("--backend mpi needs mpi4py: pip install 'rowstoch_fast[mpi]'") from None
        root = MPI.COMM_WORLD.Get_rank() == 0
    if root:  # before any computation: an unwritable --out or --checkpoint must not cost the run
        _writable_folder(args.out, "--out")
        if args.checkpoint:
            _writable_file(args.checkpoint, "--checkpoint")
    stage = _stage(root and not args.no_progress)
    stage(f"set-up: the network ({args.matrix or args.topology})")
    A = _matrix_from_args(args)
    if args.dtype == "float32":
        A = A.astype(np.float32)
    if args.matrix:  # a topology's n was checked above; a file's is known only now
        _check_objective_size(args, A.n)
    try:
        stage(f"set-up: the {args.objective} objective on {A.n} nodes")
        f = _objective_from_args(args, A.n)
        stage(None)
        prepared = time.perf_counter() - started  # network and objective
        mg = args.algorithm.startswith("mg-")
        rounds = args.rounds or (A.metrics().recommended_rounds() if mg else 1)
        method = args.algorithm[3:] if mg else args.algorithm
        lr = args.lr if args.lr is not None else default_lr(method, A.n)
        algo = Algorithm(network_options.build(A, args), lr, rounds=rounds, tracker=args.tracker, backend=args.backend,
                         method=method)
        check_takes(algo.optimizer, f, args.algorithm)
    except (ValueError, TypeError) as exc:
        raise UsageError(str(exc)) from exc
    ignored = [o.flag for o in network_options.declared() if o.flag in args.given]
    if not REGISTRY[method].matrices and ignored and root:
        print(f"rowstoch: warning: {' and '.join(ignored)} {'does' if len(ignored) == 1 else 'do'} not affect "
              f"{method}: it averages exactly, without the network", file=sys.stderr)
    diverged = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RuntimeWarning)
        try:
            h = run(algo, f, args.iterations, record_every=args.record_every, repeats=args.repeats, seed=args.seed,
                    progress=not args.no_progress, checkpoint=args.checkpoint, resume=args.resume,
                    config=_run_config(args))
        except DivergenceError as exc:
            diverged, h = exc, getattr(exc, "history", None)
        except Exception as exc:
            _write_what_was_recorded(exc, args, A, algo, root)
            if isinstance(exc, (FileNotFoundError, ValueError, RuntimeError)):
                raise UsageError(str(exc)) from exc
            raise
    for message in dict.fromkeys(str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)):
        print(f"rowstoch: warning: {message}", file=sys.stderr)  # each once (NumPy repeats its overflow notes)
    if not root or h is None:  # under MPI, rank 0 writes the outputs
        return 3 if diverged else 0
    folder, written, write_error = _write_outputs(h, args, A, algo)
    paths = ", ".join(os.path.join(folder, w) for w in written)
    if write_error is not None:
        print(f"rowstoch: error: could not write to --out {args.out!r} ({write_error}); the results are in {paths}",
              file=sys.stderr)
    if diverged is not None:
        print(f"rowstoch: diverged: {diverged}", file=sys.stderr)
        print(f"rowstoch: the {len(h.frame)} rows recorded before it are in {paths} (marked diverged)", file=sys.stderr)
        return 3
    s = h.summary().iloc[-1]
    reached = int(h.meta.get("completed_iterations", s["iteration"]))  # Ctrl-C: where it stopped, not the last record
    status = "interrupted" if h.interrupted else "done"
    print(f"{algo.name} (lr {algo.lr:g}) on {args.topology if not args.matrix else args.matrix} (n={A.n}), {status} at iteration "
          f"{reached} ({reached * algo.rounds} communication rounds, {s['wall_seconds']:.1f} s; "
          f"set-up {prepared + h.meta.get('setup_seconds', 0.0):.1f} s)")
    last = f" (at iteration {int(s['iteration'])}, the last recorded)" if reached != int(s["iteration"]) else ""
    print(f"  grad norm {s['grad_norm']:.4e} +- {s['grad_norm_std']:.1e}   loss {s['loss']:.6f}   "
          f"consensus error {s['consensus_error']:.3e}"
          + (f"   f(x_bar) - f* {s['suboptimality']:.3e}" if np.isfinite(s["suboptimality"]) else "") + last)
    if "communication" in h.meta:
        for c in h.meta["communication"]:
            print(f"  rank {c['rank']}: {c['nodes']} nodes, {c['messages'] / max(1, h.meta['completed_iterations']):.1f} "
                  f"messages and {c['bytes_sent'] / max(1, h.meta['completed_iterations']):.0f} bytes sent per iteration")
    print(f"  wrote {paths}")
    if write_error is not None:
        return 2
    return 130 if h.interrupted else 0


def _write_what_was_recorded(exc, args, A, algo, root):
    """The records a run that raised carries (``exc.history``) go to ``--out`` before the error is reported."""
    h = getattr(exc, "history", None)
    if not root or h is None or h.frame.empty:
        return
    folder, written, _ = _write_outputs(h, args, A, algo)  # (into a temporary folder if --out fails)
    _error(f"the {len(h.frame)} rows recorded before the error are in "
           f"{', '.join(os.path.join(folder, w) for w in written)}")


def _stage(enabled):
    """``stage(text)`` shows what the set-up is doing on stderr at once (the run's own bar follows);
    ``stage(None)`` clears the line."""
    if not enabled:
        return lambda text: None
    shown = _shown_stage

    def stage(text):
        line = "" if text is None else f"rowstoch: {text} ..."
        sys.stderr.write("\r" + line.ljust(shown[0]) + ("\r" if text is None else ""))
        sys.stderr.flush()
        shown[0] = len(line)

    return stage


_shown_stage = [0]  # the length of the set-up line on stderr now (0: none)


def _error(text):
    """Print ``rowstoch: text`` on a line of its own (a set-up line still shown is cleared first)."""
    if _shown_stage[0]:
        sys.stderr.write("\r" + " " * _shown_stage[0] + "\r")
        _shown_stage[0] = 0
    print(f"rowstoch: {text}", file=sys.stderr)


def default_lr(method, n):
    """``rowstoch run``'s step size without ``--lr``: the paper's ``0.05 / n`` for methods whose tracker follows
    the sum of the gradients (the Pull-Diag family), 0.05 for the others."""
    return REGISTRY[method].default_lr(n)


def _objective_from_args(args, n):
    from .objectives import LeastSquares, LogisticL2, NonconvexLogistic, Quadratic

    dtype = np.float32 if getattr(args, "dtype", "float64") == "float32" else np.float64
    if getattr(args, "data_file", None):  # the nodes share the file's rows evenly, node i the i-th block
        H, y = load_data_file(args.data_file, args.objective)
        if len(y) % n:
            raise UsageError(f"--data-file has {len(y)} rows, which the {n} nodes cannot share evenly")
        if args.objective == "least-squares":
            return LeastSquares(H, y, n)
        if args.objective == "logistic-l2":
            return LogisticL2(H, y, n, lam=args.lam, batch=min(args.batch, len(y) // n), dtype=dtype)
        return NonconvexLogistic(H, y, n, rho=args.rho, batch=min(args.batch, len(y) // n), dtype=dtype)
    if args.objective == "logistic":
        return NonconvexLogistic.synthetic(n, total=args.total, d=args.d, rho=args.rho, batch=args.batch,
                                           seed=args.data_seed, heterogeneity=args.heterogeneity, dtype=dtype)
    if args.objective == "logistic-l2":
        return LogisticL2.synthetic(n, total=args.total, d=args.d, lam=args.lam, batch=args.batch,
                                    seed=args.data_seed, heterogeneity=args.heterogeneity, dtype=dtype)
    if args.objective == "least-squares":
        return LeastSquares.synthetic(n, samples_per_node=args.samples_per_node, d=args.d,
                                      heterogeneity=args.heterogeneity, seed=args.data_seed)
    return Quadratic.random(n, args.d, seed=args.data_seed, sigma=args.sigma, dtype=dtype)


def _check_objective_args(args):
    """The objective's options: defaults that depend on ``--objective`` filled in, values checked."""
    if args.heterogeneity is None:
        args.heterogeneity = 0.0 if args.objective in ("logistic", "quadratic") else 1.0
    for name in ("rho", "heterogeneity", "sigma"):
        value = getattr(args, name)
        if not (np.isfinite(value) and value >= 0):
            raise UsageError(f"--{name} must be a finite number >= 0, got {value}")
    if not (np.isfinite(args.lam) and args.lam > 0):
        raise UsageError(f"--lam must be a finite number > 0, got {args.lam}")
    if args.objective == "least-squares" and getattr(args, "dtype", "float64") != "float64":
        raise UsageError("--objective least-squares runs in float64 only (drop --dtype)")


def _parse_lr(text, labels):
    """``--lr``: None, one number for all, or ``NAME=VALUE,...``."""
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        pass
    rates = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = part.partition("=")
        if not sep:
            raise UsageError(f"--lr must be a number or NAME=VALUE,..., got {part!r}")
        if name.strip() not in labels:
            raise UsageError(f"--lr names {name.strip()!r}, which is not in --algorithms ({', '.join(labels)})")
        if name.strip() in rates:
            raise UsageError(f"--lr gives {name.strip()} twice")
        try:
            rates[name.strip()] = float(value)
        except ValueError:
            raise UsageError(f"--lr {name.strip()}={value!r} is not a number") from None
    return rates




#: compare()'s arguments and the options of ``rowstoch compare`` that set them
_COMPARE_OPTIONS = {"algorithms": "--algorithms", "rounds_budget": "--rounds-budget", "lr": "--lr",
                    "mg_rounds": "--mg-rounds", "repeats": "--repeats", "metric": "--metric"}


def _as_options(message, options):
    """An error of the Python API as the command line's: the argument names it mentions (``rounds_budget =
    5 ...``) become the options that set them (``--rounds-budget = 5 ...``)."""
    return re.sub(r"(?<![\w-])(" + "|".join(options) + r")(?![\w-])", lambda m: options[m.group(1)], message)


def _check_out_folder(path, option="--out"):
    """``path`` can be created or written (checked without creating anything: a folder appears only when there
    is something to write in it)."""
    path = os.path.abspath(path)
    if os.path.exists(path) and not os.path.isdir(path):
        raise UsageError(f"{option} {path!r} exists and is not a folder")
    parent = path
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent) or not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {path!r} is not writable ({parent!r} is not a writable folder)")
    return path


def _list_option(text, option, choices):
    """A comma-separated option's values, each among ``choices`` (one line naming the option otherwise)."""
    values = [v.strip() for v in str(text).split(",") if v.strip()]
    bad = [v for v in values if v not in choices]
    if bad or not values:
        raise UsageError(f"{option} must be a comma-separated list of {', '.join(choices)}; got "
                         f"{', '.join(map(repr, bad)) if bad else 'nothing'}")
    return list(dict.fromkeys(values))


def _settings(args):
    """``[(label, args of one setting)]``: the communication settings the sweepable options list (one, labelled
    "", without lists), every one checked (:func:`rowstoch_fast.network.options.settings`)."""
    return network_options.settings(args, args.given)


def _one_setting(args):
    """``rowstoch run``'s one communication setting: each sweepable option (``--loss``, ``--compress``) a single
    value."""
    settings = _settings(args)
    if len(settings) > 1:
        swept = " and one ".join(o.flag for o in network_options.declared() if isinstance(o.kind, str))
        raise UsageError(f"rowstoch run takes one {swept} item; rowstoch compare takes several")
    ns = settings[0][1]
    for name in network_options.names():
        setattr(args, name, getattr(ns, name))


def _jobs(args):
    """``--jobs`` (default: the cores; one with --backend mpi, where the ranks are the parallelism, and cupy)."""
    from .compare import default_jobs

    if args.jobs is None:
        return 1 if args.backend in ("mpi", "cupy") else default_jobs()
    if args.backend == "mpi" and args.jobs > 1:
        raise UsageError("--jobs runs methods in parallel processes; with --backend mpi the ranks of mpiexec are "
                         "the parallelism (drop --jobs)")
    return args.jobs


class _Terminated:
    """SIGTERM, as a job scheduler sends it, handled like Ctrl-C (the run in progress saves its checkpoint and what
    finished is written) and remembered, so that the command ends with 143 instead of 130."""

    def __init__(self):
        self.received = False
        self.previous = None

    def __enter__(self):
        import signal
        import threading

        if threading.current_thread() is threading.main_thread():
            def terminate(signum, frame):
                self.received = True
                raise KeyboardInterrupt

            self.previous = signal.signal(signal.SIGTERM, terminate)
        return self

    def __exit__(self, *exc):
        import signal

        if self.previous is not None:
            signal.signal(signal.SIGTERM, self.previous)
        return False


def cmd_compare(args):
    """``rowstoch compare``: several algorithms, same problem, seeds and communication budget (130 when
    interrupted: :func:`main` makes it 143 after a SIGTERM)."""
    import warnings

    from . import compare as cmp
    from . import report
    from .compare.outputs import ComparisonFolder, FolderInUse
    from .runner import METRICS, check_takes

    root = True
    if args.backend == "mpi":  # every rank runs; rank 0 prints and writes
        try:
            from mpi4py import MPI
        except ImportError:
            raise UsageError("--backend mpi needs mpi4py: pip install 'rowstoch_fast[mpi]'") from None
        root = MPI.COMM_WORLD.Get_rank() == 0
    say = print if root else (lambda *a, **k: None)
    file_algorithms = _read_experiment_file(args)
    if args.algorithms is not None and not args.algorithms.replace(",", "").strip():
        raise UsageError("--algorithms is empty; name at least one algorithm ('rowstoch algorithms' lists them)")
    names = [a.strip() for a in args.algorithms.split(",")] if args.algorithms else list(cmp.ALGORITHMS)
    _refuse_unread(args, _problem_rules(args) + [
        (("--mg-rounds",), not any(a.startswith("mg-") for a in names), "without an mg-* algorithm")])
    _check_objective_args(args)
    settings = _settings(args)
    metrics = _list_option(args.metric, "--metric", METRICS) if args.metric is not None else None
    x_axis = _list_option(args.x, "--x", tuple(report.AXES))
    if len(x_axis) != 1:
        raise UsageError(f"--x takes one of {', '.join(report.AXES)}, got {args.x!r}")
    formats = _list_option(args.format, "--format", report.FORMATS)
    jobs = _jobs(args)
    if root:
        _check_out_folder(args.out)
    progress = _progress_wanted(args)
    topologies = args.topology if isinstance(args.topology, list) else [args.topology]
    for name in ([] if args.matrix else topologies):
        if name not in TOPOLOGIES + PAPER_GRAPHS:
            raise UsageError(f"unknown topology {name!r}; choose from {', '.join(TOPOLOGIES + PAPER_GRAPHS)}")
    # every graph, setting, objective, algorithm and rate is checked before anything runs or is written
    problems = []
    try:
        for gname in [os.path.basename(args.matrix)] if args.matrix else topologies:
            args.topology = gname
            base = _matrix_from_args(args)
            _check_objective_size(args, base.n)
            f = _objective_from_args(args, base.n)
            for sname, ns in settings:
                A = network_options.build(base, ns)
                chosen = args.algorithms or ",".join(cmp.default_algorithms(A, f))  # (default: what runs on A, f)
                specs = cmp.parse_algorithms(chosen, A, args.mg_rounds)
                labels = [label for label, _, _ in specs]
                lr = _parse_lr(args.lr, labels)
                if file_algorithms and not isinstance(lr, float):  # the file's rates, unless --lr gives them
                    lr = {**{k: v["lr"] for k, v in file_algorithms.items() if "lr" in v and k in labels},
                          **(lr or {})}
                cmp.check_rates(lr, labels)
                sources = {k: v["lr_source"] for k, v in file_algorithms.items()
                           if "lr_source" in v and isinstance(lr, dict) and lr.get(k) == v.get("lr")}
                hyper = {k: {h: x for h, x in v.items() if h not in ("lr", "lr_source")}
                         for k, v in file_algorithms.items()}
                hyper = {k: v for k, v in hyper.items() if v and k in labels}
                for label, method, _ in specs:
                    check_takes(REGISTRY[method], f, label)
                with warnings.catch_warnings():  # (the budget's warning is printed once, by the run)
                    warnings.simplefilter("ignore", RuntimeWarning)
                    cmp.make_plan(A, f, chosen, args.rounds_budget, lr=lr, repeats=args.repeats, seed=args.seed,
                                  tracker=args.tracker, backend=args.backend, mg_rounds=args.mg_rounds,
                                  metric=metrics[0] if metrics else None, metrics=metrics,
                                  lr_source=sources or None, hyper=hyper or None)  # (every check, memory too)
                problems.append((gname, sname, ns, A, specs, lr, f, sources, hyper, chosen))
    except (ValueError, TypeError) as exc:
        raise UsageError(_as_options(str(exc), _COMPARE_OPTIONS)) from exc
    args.topology = topologies if len(topologies) > 1 else topologies[0]
    metric = metrics[0] if metrics else cmp.default_metric(problems[0][6])
    metrics = metrics or [metric, "consensus_error"]
    tuned = [label for label, _, _ in problems[0][4] if not isinstance(problems[0][5], float)
             and label not in (problems[0][5] or {})]
    several = len(settings) > 1
    folder, refused = None, None
    if root:
        try:
            folder = ComparisonFolder(args.out, resume=bool(args.resume), overwrite=args.overwrite)
        except FolderInUse as exc:
            refused = str(exc)
    if args.backend == "mpi":  # (every rank stops, or none: the others would wait in the first collective)
        from mpi4py import MPI

        refused = MPI.COMM_WORLD.bcast(refused, root=0)
    if refused:
        raise UsageError(refused)
    try:
        if root and not args.resume:  # the settings the results come from, beside them
            _write_experiment(args, problems, file_algorithms)
        if tuned:
            say(f"tuning the learning rate of {', '.join(tuned)} (no --lr for {'it' if len(tuned) == 1 else 'them'}): "
                f"every rate of {cmp.TUNE_GRID[0]:g} .. {cmp.TUNE_GRID[-1]:g} over the whole budget in one batched "
                f"run, then refined, on {metric}; --lr NAME=VALUE fixes one", flush=True)
        frames, interrupted = [], False
        for gname, sname, ns, A, specs, lr, f, sources, hyper, chosen in problems:
            where = gname + (f", {sname}" if sname else "")
            say(f"{where} (n = {A.n}, {network_options.words(ns)}): {len(specs)} algorithms, {args.rounds_budget} "
                f"communication rounds each, {args.repeats} repetitions, ranked by {metric}"
                + (f", {jobs} processes" if jobs > 1 and len(specs) > 1 else ""), flush=True)

            def labelled(frame, gname=gname, sname=sname):
                frame = frame.copy()
                frame.insert(0, "graph", gname)
                if several:
                    frame.insert(1, "setting", sname)
                return frame

            def write_so_far(frame):  # each method's results as it finishes, every table replaced atomically
                if root and len(frame):
                    cmp.write_tables(frames + [labelled(frame)], args.out, metrics, caption=_caption(args, problems))

            try:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always", RuntimeWarning)
                    try:
                        frame = cmp.compare(A, f, chosen, args.rounds_budget, lr=lr, repeats=args.repeats,
                                            seed=args.seed, tracker=args.tracker, backend=args.backend,
                                            mg_rounds=args.mg_rounds, progress=progress, metric=metric,
                                            metrics=metrics, lr_source=sources or None, hyper=hyper or None,
                                            checkpoint_dir=os.path.join(args.out, "checkpoints", _slug(where)),
                                            previous=_previous_of(args, gname, sname if several else None),
                                            jobs=jobs, on_result=write_so_far,
                                            log=lambda line: say("  " + line, flush=True))
                    except Exception as exc:  # what finished (exc.frame, earlier settings) is written, then the error
                        _write_finished_comparison(frames, getattr(exc, "frame", None), labelled, args, root,
                                                   metrics, problems)
                        raise
            except (ValueError, TypeError, RuntimeError) as exc:
                raise UsageError(_as_options(str(exc), _COMPARE_OPTIONS)) from exc
            for w in caught:  # the budget warning; a diverging or growing baseline is reported in the table instead
                if "runs only" in str(w.message) and root:
                    print(f"rowstoch: warning: {w.message}", file=sys.stderr)
            if len(frame):
                frame = labelled(frame)
                frames.append(frame)
                say(cmp.format_summary(_one_section(cmp.summary(frame))), flush=True)
            if frame.attrs.get("interrupted"):
                interrupted = True
                break
        if not root:
            return 130 if interrupted else 0
        if not frames:
            print("rowstoch: interrupted before any algorithm finished; nothing written", file=sys.stderr)
            return 130
        titles = [_figure_title(args, g, ns, A.n) for _, (g, _, ns, A, *_) in zip(frames, problems)]
        written = cmp.write_outputs(frames, args.out, metrics, x_axis[0], formats, caption=_caption(args, problems),
                                    titles=titles)
        print(f"wrote {', '.join(os.path.join(args.out, n) for n in written)}"
              + (" (interrupted: what finished; --resume continues it)" if interrupted else ""))
        return 130 if interrupted else 0
    finally:
        if folder is not None:
            folder.release()


def _one_section(table):
    """A summary of one graph and setting without those columns (printed under its own heading)."""
    from .compare import tables

    return table.drop(columns=[g for g in tables.GROUPS if g in table.columns])


def _slug(text):
    return re.sub(r"[^A-Za-z0-9._+-]+", "_", text)


def _progress_wanted(args):
    """Progress bars only where someone watches: on a terminal (``--progress`` forces them, ``--no-progress``
    drops them); a log file gets none inside its tables."""
    if getattr(args, "no_progress", False):
        return False
    if getattr(args, "progress", False):
        return True
    return sys.stderr.isatty()


def _previous_of(args, gname, sname=None):
    """The records of graph ``gname`` (and setting ``sname``) of the comparison ``--resume`` continues (None
    otherwise)."""
    previous = getattr(args, "previous", None)
    if previous is None or "graph" not in previous.columns:
        return None
    part = previous[previous["graph"].astype(str) == str(gname)]
    if sname is not None and "setting" in part.columns:
        part = part[part["setting"].fillna("").astype(str) == sname]
    part = part.drop(columns=[c for c in ("graph", "setting") if c in part.columns])
    return part if len(part) else None


#: ``rowstoch compare`` options that a file's settings map to (its dest -> the option written).
_FILE_OPTIONS = {"objective": "--objective", "metric": "--metric", "format": "--format"}


def _read_experiment_file(args):
    """``--config FILE`` / ``--preset NAME``: the file's settings become the options not written on the command line
    (those win); returns its ``{algorithm: settings}``."""
    from . import config

    if args.resume:
        return _read_resumed_comparison(args)
    if args.preset and args.config:
        raise UsageError("--preset and --config both name an experiment file; give one")
    if not (args.preset or args.config):
        return {}
    if args.preset:
        network = [o for o in ("--topology", "--n", "--matrix", "--undirected", "--weights") if o in args.given]
        if network:
            raise UsageError(f"--preset {args.preset} runs the paper's four 16-node graphs; drop {', '.join(network)}")
    path = config.preset_path(args.preset) if args.preset else args.config
    try:
        options, algorithms, _ = config.load(path)
    except config.ConfigError as exc:
        raise UsageError(str(exc)) from None
    args.config_file = os.path.abspath(path)
    for dest, value in options.items():
        option = _FILE_OPTIONS.get(dest, "--" + dest.replace("_", "-"))
        if option not in args.given:
            setattr(args, dest, value)
            args.given.add(option)  # set: the rules on options that would not be read apply to it too
    if "--algorithms" not in args.given:
        args.algorithms = ",".join(algorithms)
    return algorithms


#: What may be written beside ``--resume DIR`` (the rest is the comparison's own, in DIR/experiment.json).
_RESUME_OPTIONS = ("--resume", "--repeats", "--no-progress", "--progress", "--out", "--jobs")
#: The copy of a comparison's settings that ``--resume`` checks experiment.json against (an edit is refused).
_FROZEN = ".rowstoch-settings.json"


def _read_resumed_comparison(args):
    """``--resume DIR``: the settings of the comparison in DIR (its experiment.json) become the options, and its
    records (compare.csv) what is kept; returns its ``{algorithm: settings}``. Settings edited in experiment.json
    since the comparison started are refused, naming the key (only ``repeats`` may grow)."""
    import json

    import pandas as pd

    folder = args.resume
    if not os.path.isdir(folder):
        raise UsageError(f"--resume {folder!r} is not a folder (the --out folder of a comparison)")
    if not os.path.isfile(os.path.join(folder, "experiment.json")):
        raise UsageError(f"--resume {folder!r} holds no experiment.json: it is not the --out folder of a comparison")
    other = sorted(o for o in args.given if o.startswith("--") and o not in _RESUME_OPTIONS)
    if other:
        raise UsageError(f"--resume continues the comparison {folder!r} with its own settings (experiment.json): "
                         f"drop {', '.join(other)} (only --repeats, for more repetitions, may change)")
    try:
        with open(os.path.join(folder, "experiment.json")) as fh:
            saved = json.load(fh)
        settings, algorithms = saved["settings"], saved.get("algorithms") or {}
        records = os.path.join(folder, "compare.csv")  # (none yet: killed before any method finished)
        previous = pd.read_csv(records) if os.path.isfile(records) else pd.DataFrame()
        frozen = None
        if os.path.isfile(os.path.join(folder, _FROZEN)):
            with open(os.path.join(folder, _FROZEN)) as fh:
                frozen = json.load(fh)
    except (OSError, ValueError, KeyError) as exc:
        raise UsageError(f"--resume {folder!r}: its experiment.json or compare.csv cannot be read ({exc})") from None
    if frozen is not None:
        for key in sorted(set(frozen["settings"]) | set(settings)):
            old, new = frozen["settings"].get(key), settings.get(key)
            if old != new and not (key == "repeats" and isinstance(new, int) and new > old):
                raise UsageError(f"--resume {folder!r}: its experiment.json was edited: {key} = {new!r}, but the "
                                 f"comparison ran with {key} = {old!r}; only repeats may grow (start a new "
                                 f"comparison for other settings)")
        if frozen.get("algorithms", {}) != algorithms:
            raise UsageError(f"--resume {folder!r}: its experiment.json was edited: the algorithms' settings differ "
                             f"from those the comparison ran with")
    for key, value in settings.items():
        if key == "repeats" and "--repeats" in args.given:
            if args.repeats < value:
                raise UsageError(f"--repeats {args.repeats} is fewer than the {value} the comparison ran; it can only "
                                 "grow")
            continue
        setattr(args, key, value)
    if "--out" not in args.given:
        args.out = folder
    args.previous = previous if len(previous) else None
    return algorithms


#: The options experiment.json records (the resolved settings of a comparison).
_SETTINGS = ("config_file", "topology", "n", "matrix", "normalize", "undirected", "weights", "objective", "total",
             "batch", "samples_per_node", "d", "rho", "lam", "heterogeneity", "sigma", "data_seed", "data_file",
             "algorithms", *network_options.names(), "rounds_budget", "lr", "mg_rounds", "tracker", "backend", "repeats", "seed", "metric", "x", "format")


def _write_experiment(args, problems, file_algorithms):
    """experiment.json in --out: the resolved settings (every option, the file's algorithms), the package version
    and build_info(), so that the results say what made them; and the copy --resume checks it against."""
    import json

    from . import __version__, build_info
    from .compare.outputs import atomic_write

    settings = json.loads(json.dumps({k: getattr(args, k, None) for k in _SETTINGS}, default=str))
    graphs = {}
    for g, sname, ns, A, specs, _, f, _, _, _ in problems:
        graphs[g + (f" / {sname}" if sname else "")] = {"n": A.n, "network": network_options.words(ns),
                                                         "algorithms": [label for label, _, _ in specs],
                                                         "objective": f.describe()}
    document = {"settings": settings, "algorithms": file_algorithms, "graphs": graphs, "version": __version__,
                "build_info": build_info(), "argv": sys.argv[1:]}
    atomic_write(os.path.join(args.out, "experiment.json"),
                 lambda fh: json.dump(document, fh, indent=1, default=str))
    atomic_write(os.path.join(args.out, _FROZEN),
                 lambda fh: json.dump({"settings": settings, "algorithms": file_algorithms}, fh, default=str))


def _objective_words(args):
    """The problem in words (the objective and its size)."""
    words = {"logistic": "nonconvex logistic regression", "logistic-l2": "L2-regularised logistic regression",
             "least-squares": "least squares", "quadratic": "a random quadratic"}[args.objective]
    if getattr(args, "data_file", None):
        return f"{words} on {os.path.basename(args.data_file)}"
    return f"{words} (d = {args.d})"


def _caption(args, problems):
    """The LaTeX table's caption of a comparison: the problem, n, the graph(s) and the full network model."""
    graphs = list(dict.fromkeys(g for g, *_ in problems))
    models = list(dict.fromkeys(network_options.words(p[2]) for p in problems))
    n = sorted({p[3].n for p in problems})
    where = (f"the {graphs[0]} graph" if len(graphs) == 1 else "the graphs " + ", ".join(graphs)) + \
        f" (n = {', '.join(map(str, n))})"
    network = models[0] if len(models) == 1 else "the settings of the table (" + "; ".join(models) + ")"
    return (f"{_objective_words(args)} on {where}, {network}: final values after {args.rounds_budget} communication "
            f"rounds, mean and standard deviation over {args.repeats} repetitions. Ranks are shared where the "
            f"repetitions cannot tell methods apart; rank 1 in bold; only runs that ended ok are ranked.")


def _figure_title(args, graph, ns, n):
    """A figure panel's title: the graph, n, the objective and the network model."""
    return f"{graph} (n = {n}), {_objective_words(args)}, {network_options.words(ns)}"


def _write_finished_comparison(frames, partial, labelled, args, root, metrics, problems):
    """Before a comparison's error is reported: the settings that finished and the algorithms of this one."""
    if partial is not None and len(partial):
        frames = frames + [labelled(partial)]
    if frames and root:
        from .compare import write_outputs

        write_outputs(frames, args.out, metrics, "rounds", ["png"], caption=_caption(args, problems))
        _error(f"the algorithms that finished before the error are in {os.path.join(args.out, 'compare.csv')}")


#: The options each figure of ``rowstoch reproduce`` reads.
_REPRODUCE_OPTIONS = {"pull-diag": (), "linear-speedup": ("--iterations", "--repeats"),
                      "robustness": ("--iterations", "--repeats"), "multi-gossip": ("--iterations", "--repeats"),
                      "communication": ("--iterations", "--repeats"),
                      "mnist-mlp": ("--iterations", "--repeats", "--data", "--data-dir", "--alpha", "--axis")}


def cmd_reproduce(args):
    """``rowstoch reproduce FIGURE``: one of the paper's experiments."""
    from . import experiments

    reads = _REPRODUCE_OPTIONS[args.figure]
    unread = [o for o in ("--iterations", "--repeats", "--data", "--data-dir", "--alpha", "--axis")
              if o in args.given and o not in reads]
    if unread:  # they were ignored: another run than the one asked for
        raise UsageError(f"reproduce {args.figure} takes no {' or '.join(unread)}"
                         + (f" (it takes {', '.join(reads)})" if reads else ""))
    if args.data_dir and args.data != "mnist":
        raise UsageError("--data-dir is read with --data mnist only (digits need no files)")
    _writable_folder(args.out, "--out")
    if args.figure == "pull-diag":
        experiments.reproduce_pull_diag(args.out)
    elif args.figure == "linear-speedup":
        experiments.reproduce_linear_speedup(args.out, iterations=args.iterations or 4000, repeats=args.repeats or 20,
                                             progress=not args.no_progress)
    elif args.figure == "robustness":
        experiments.reproduce_robustness(args.out, rounds_budget=args.iterations or 1000, repeats=args.repeats or 10,
                                         progress=not args.no_progress)
    elif args.figure == "communication":
        experiments.reproduce_communication(args.out, rounds_budget=args.iterations or 1000,
                                            repeats=args.repeats or 3, progress=not args.no_progress)
    elif args.figure == "mnist-mlp":
        import importlib.util

        if importlib.util.find_spec("torch") is None:
            raise UsageError("reproduce mnist-mlp needs PyTorch: pip install 'rowstoch_fast[torch]'")
        if args.data == "mnist" and not args.data_dir:
            raise UsageError("--data mnist reads the four MNIST IDX files from --data-dir (nothing is downloaded)")
        try:
            experiments.reproduce_mnist_mlp(args.out, data=args.data, data_dir=args.data_dir,
                                            communication_rounds=args.iterations or 2000, repeats=args.repeats or 3,
                                            alpha=args.alpha, progress=not args.no_progress, axis=args.axis)
        except (FileNotFoundError, ValueError) as exc:
            raise UsageError(str(exc)) from exc
    else:
        experiments.reproduce_multi_gossip(args.out, communication_rounds=args.iterations or 2000,
                                           repeats=args.repeats or 5, progress=not args.no_progress)
    return 0


TOPOLOGY_HELP = {
    "exponential": "directed exponential graph: i sends to i + 2^k (mod n); the paper's graph for any n",
    "ring": "directed ring: i sends to i + 1 (mod n); --undirected: i - 1, i, i + 1",
    "grid": "undirected sqrt(n) x sqrt(n) grid (n must be a square)",
    "torus": "undirected sqrt(n) x sqrt(n) torus: the grid wrapped around (n must be a square)",
    "geometric": "random geometric graph in the unit square (radius ~ 2 sqrt(ln n / n), --seed)",
    "nearest_neighbor": "each node linked both ways to its 3 nearest random neighbours (--seed)",
    "erdos_renyi": "directed Erdos-Renyi graph, p = 2 ln n / n, repaired to be strongly connected (--seed); "
                   "--undirected: redrawn until connected",
    "complete": "complete graph, A = 1 1^T / n",
    "star": "undirected star around node 0",
    "paper-ring": "the paper's 16-node directed ring (Appendix E.1)",
    "paper-grid": "the paper's 16-node grid (Appendix E.1)",
    "paper-geometric": "the paper's 16-node geometric graph (Appendix E.1)",
    "paper-nearest_neighbor": "the paper's 16-node nearest-neighbour graph (Appendix E.1)",
}


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Each option's default in its help (unless it has none or the help says it), descriptions as written."""

    def _get_help_string(self, action):
        text = action.help or ""
        if "default" in text or action.default in (None, False, argparse.SUPPRESS) or not action.option_strings:
            return text
        return text + " (default: %(default)s)"


def _algorithm_names():
    return labels(every_mg=True)


def _network_options(parser):
    net = parser.add_argument_group("network")
    net.add_argument("--topology", default="exponential", help="network; 'rowstoch topologies' lists them")
    net.add_argument("--n", type=_positive_int, default=None, help="number of nodes (default 16; not for paper-*)")
    net.add_argument("--matrix", help="matrix file instead of --topology: .npz (scipy sparse), .mtx, .npy (dense) "
                                      "or an edge list (see 'rowstoch metrics --help')")
    net.add_argument("--normalize", action="store_true",
                     help="divide each row of --matrix by its sum (otherwise rows must sum to 1)")
    net.add_argument("--undirected", action="store_true",
                     help="link the edges of a directed topology (" + ", ".join(DIRECTED_TOPOLOGIES) + ") both ways")
    net.add_argument("--weights", choices=["in-degree", "metropolis"], default="in-degree",
                     help="in-degree: the paper's rule; metropolis: the doubly stochastic Metropolis-Hastings W of an "
                          "undirected graph (with --undirected for the directed topologies)")
    net.add_argument("--seed", type=_seed, default=0,
                     help="seed of the gradient streams and of random topologies")


def _algorithm_options(group):
    group.add_argument("--tracker", choices=list(TRACKERS), default="exact",
                       help="D_t = Diag(A^(tR)) as in the paper, or its limit diag(pi) (for very large n)")
    group.add_argument("--backend", choices=["cpu", "cupy", "mpi"], default="cpu",
                       help="cupy: run on the GPU; mpi: partition the nodes over the ranks of mpiexec -n P rowstoch")


#: ``--objective`` choices: the paper's nonconvex problem and the problems with a known minimiser.
OBJECTIVES = ("logistic", "logistic-l2", "least-squares", "quadratic")


def _objective_options(parser):
    obj = parser.add_argument_group("objective")
    obj.add_argument("--objective", choices=OBJECTIVES, default="logistic",
                     help="logistic: the paper's nonconvex logistic regression (Appendix E.2); logistic-l2: the same "
                          "data with a ridge term --lam (strongly convex, x* known); least-squares: heterogeneous "
                          "synthetic least squares (x* known); quadratic: a random separable quadratic")
    obj.add_argument("--total", type=_positive_int, default=204800,
                     help="samples in all, split evenly over the nodes (logistic, logistic-l2; divisible by n)")
    obj.add_argument("--batch", type=_positive_int, default=200,
                     help="mini-batch per node and gradient (logistic, logistic-l2)")
    obj.add_argument("--samples-per-node", type=_positive_int, default=32,
                     help="rows of each node's least-squares problem (full-batch gradients)")
    obj.add_argument("--d", type=_positive_int, default=10, help="dimension of x")
    obj.add_argument("--rho", type=float, default=0.01, help="weight of the nonconvex regulariser (logistic)")
    obj.add_argument("--lam", type=float, default=0.01, help="weight of the ridge term (logistic-l2), > 0")
    obj.add_argument("--heterogeneity", type=float, default=None,
                     help="spread of the nodes' own x* (0 = iid data; default 0 for logistic, the paper's, and 1 for "
                          "logistic-l2 and least-squares)")
    obj.add_argument("--sigma", type=float, default=0.0, help="gradient noise (quadratic)")
    obj.add_argument("--data-seed", type=_seed, default=42, help="seed of the synthetic data")
    obj.add_argument("--data-file", default=None,
                     help="the data instead of the synthetic set (logistic, logistic-l2, least-squares): an .npz with "
                          "H (one sample per row) and y (one target per row; -1 / +1 for the logistic problems), "
                          "its rows shared evenly by the nodes in order")


class _Parser(argparse.ArgumentParser):
    """argparse with the command's error format: one line, ``rowstoch: error: ...``, exit 2 (the usage is a
    ``--help`` away instead of printed above it); options are spelled out (no abbreviations: ``--record 5``
    would have set ``--record-every``, ``--network lossy`` was read as ``--network-seed``)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message):
        self.exit(2, f"rowstoch: error: {message} (see {self.prog} --help)\n")


def make_parser():
    """The argparse parser of the ``rowstoch`` command."""
    from . import __version__

    p = _Parser(
        prog="rowstoch", formatter_class=_Formatter,
        description="Decentralized optimization over row-stochastic (directed) networks: Pull-Diag, Pull-Diag-GT "
                    "and MG-Pull-Diag-GT on fast kernels.",
        epilog="Threads: the kernels use OMP_NUM_THREADS threads (default: all cores). Exit status: 0 done, "
               "2 bad arguments or input, 3 diverged, 130 interrupted.")
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    d = sub.add_parser("demo", formatter_class=_Formatter, help="run the main job on the embedded default",
                       description="Metrics of the paper's 16-node graphs, then Pull-Diag-GT vs MG-Pull-Diag-GT "
                                   "(R = 1, 5, 10) on them; writes multi_gossip.png and multi_gossip.csv.")
    d.add_argument("--out", default="rowstoch-demo", help="output folder")
    d.add_argument("--no-progress", action="store_true", help="no progress bars")
    d.set_defaults(func=cmd_demo)

    r = sub.add_parser("run", formatter_class=_Formatter, help="run one algorithm on an objective over a network",
                       description="One algorithm on one objective over one network; writes history.csv, "
                                   "history.json and grad_norm.png into --out.")
    _network_options(r)
    alg = r.add_argument_group("algorithm")
    alg.add_argument("--algorithm", choices=_algorithm_names(), default="pull-diag-gt", metavar="NAME",
                     help="pull-diag-gt (eq. 8), mg-pull-diag-gt (eq. 14) or a baseline: "
                          + ", ".join(_algorithm_names()[2:]))
    alg.add_argument("--rounds", type=_positive_int, default=None,
                     help="gossip rounds R per iteration (mg-* methods; default Theorem 3's R)")
    alg.add_argument("--lr", type=float, default=None,
                     help="step size alpha (default 0.05 / n for the Pull-Diag family, whose tracker follows the sum "
                          "of the gradients, 0.05 for the others); stable values scale like 1/n on the logistic "
                          "problem (the paper: 5e-2 at n = 1, 3e-3 at n = 16, 1e-4 at n = 512)")
    _algorithm_options(alg)
    alg.add_argument("--dtype", choices=["float64", "float32"], default="float64",
                     help="value type of the matrix, the iterates and the objective (float32: half the memory)")
    _objective_options(r)
    network_options.add_arguments(r)
    rn = r.add_argument_group("run")
    rn.add_argument("--iterations", type=_nonnegative_int, default=1000, help="iterations T (R T gossip rounds)")
    rn.add_argument("--repeats", type=_positive_int, default=1, help="independent repetitions, batched")
    rn.add_argument("--record-every", type=_positive_int, default=None,
                    help="record the metrics every this many iterations (default iterations / 100)")
    rn.add_argument("--checkpoint", help="write an atomic .npz checkpoint here (periodically, on Ctrl-C, at the end)")
    rn.add_argument("--resume", help="continue from this checkpoint (same options; only --iterations, --lr and "
                                     "--record-every may change)")
    rn.add_argument("--out", default="results", help="output folder")
    rn.add_argument("--no-progress", action="store_true", help="no progress bar")
    r.set_defaults(func=cmd_run)

    c = sub.add_parser("compare", formatter_class=_Formatter,
                       help="compare algorithms on one problem with the same communication budget",
                       description="Several algorithms on the same problem, seeds and budget of communication "
                                   "rounds, each at its own learning rate (given, or tuned); writes compare.csv "
                                   "(every record), summary.csv / .md / .tex (final values, best in bold, status), "
                                   "lr.json (rates, sources, every tuning score), compare.png (a panel per metric) "
                                   "and tuning.png into --out and prints the table.")
    c.add_argument("--preset", choices=["paper"],
                   help="paper: the 4 paper graphs x the nine algorithms on the paper's synthetic problem, each rate "
                        "tuned (the shipped file presets/paper.toml)")
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
    calg.add_argument("--lr", default=None,
                      help="learning rates: NAME=VALUE,... per algorithm, or one number for all; the algorithms "
                           "without one are tuned (every rate of 1e-4 .. 10 over the whole budget in one batched run, refined)")
    calg.add_argument("--tune", action="store_true",
                      help="tune every rate not given by --lr (the default; kept for older scripts)")
    calg.add_argument("--mg-rounds", type=_positive_int, default=None, help="R of the mg-* methods")
    _algorithm_options(calg)
    _objective_options(c)
    crn = c.add_argument_group("run")
    crn.add_argument("--repeats", type=_positive_int, default=5, help="repetitions (the band in the figure)")
    out = c.add_argument_group("outputs")
    out.add_argument("--metric", default=None,
                     help="comma-separated metrics for the figure's panels and the tables (default: suboptimality "
                          "where the objective knows f*, else grad_norm_mean, then consensus_error); the first is "
                          "tuned on and ranked (one that falls to 0: not loss or consensus_error); any of "
                          + ", ".join(("suboptimality", "distance", "consensus_error", "grad_norm_mean", "grad_norm",
                                       "loss")))
    out.add_argument("--x", default="rounds", help="the figure's horizontal axis: rounds, gradients, bytes or seconds")
    out.add_argument("--format", default="png", help="figure formats, comma-separated: png (300 dpi), pdf, svg")
    crn.add_argument("--jobs", type=_positive_int, default=None,
                     help="run the methods in this many processes (default: the cores; 1 with --backend mpi or "
                          "cupy); the results are those of one process")
    crn.add_argument("--out", default="compare",
                     help="output folder; one that holds results is refused unless --resume or --overwrite")
    crn.add_argument("--overwrite", action="store_true",
                     help="replace the results of an earlier comparison in --out")
    bars = crn.add_mutually_exclusive_group()
    bars.add_argument("--progress", action="store_true", help="progress bars even without a terminal")
    bars.add_argument("--no-progress", action="store_true",
                      help="no progress bars (without a terminal there are none anyway)")
    c.set_defaults(func=cmd_compare)

    rp = sub.add_parser("reproduce", formatter_class=_Formatter, help="reproduce a figure of the paper")
    rp.add_argument("figure", choices=["pull-diag", "linear-speedup", "multi-gossip", "mnist-mlp", "robustness",
                                       "communication"],
                    help="pull-diag: Figure 1; linear-speedup: Figure 2; multi-gossip: Figure 3's synthetic analogue; "
                         "mnist-mlp: Figure 3's neural network (a four-layer MLP through PyTorch; digits by default); "
                         "robustness: the algorithms under message loss; communication: under compressed messages "
                         "(accuracy against bytes; neither in the paper)")
    rp.add_argument("--out", default="results", help="output folder")
    rp.add_argument("--iterations", type=_positive_int, default=None,
                    help="iterations (communication rounds for multi-gossip, mnist-mlp and robustness); default the "
                         "paper's")
    rp.add_argument("--data", choices=["digits", "mnist"], default="digits",
                    help="mnist-mlp: scikit-learn's bundled digits, or MNIST from --data-dir")
    rp.add_argument("--data-dir", default=None, help="mnist-mlp: the folder with MNIST's four IDX files")
    rp.add_argument("--alpha", type=float, default=None,
                    help="mnist-mlp: Dirichlet(alpha) label skew over the nodes instead of an IID split")
    rp.add_argument("--repeats", type=_positive_int, default=None, help="repetitions; default the paper's")
    rp.add_argument("--axis", choices=["batches", "rounds", "both"], default="batches",
                    help="mnist-mlp: the budget (--iterations) and the figure's axis in batches, the paper's (every "
                         "method the same batches, MG gossiping R rounds per batch), or in communication rounds "
                         "(MG: R rounds and R mini-batches per iteration, T / R iterations), or both side by side")
    rp.add_argument("--no-progress", action="store_true", help="no progress bars")
    rp.set_defaults(func=cmd_reproduce)

    m = sub.add_parser("metrics", formatter_class=_Formatter,
                       help="network metrics (beta, kappa, recommended R) of a topology or matrix file",
                       description="beta (1 - beta is the generalized spectral gap), kappa (equilibrium skewness), "
                                   "Theorem 3's number of gossip rounds R, and whether every node has a self loop.",
                       epilog=EDGE_LIST_HELP + ".")
    m.add_argument("--topology", default="all",
                   help="a network ('rowstoch topologies' lists them) or 'all'")
    m.add_argument("--n", type=_positive_int, default=None, help="number of nodes (default 16; not for paper-*)")
    m.add_argument("--seed", type=_seed, default=0, help="seed of random topologies")
    m.add_argument("--matrix", help="matrix file: .npz (scipy sparse), .mtx, .npy (dense) or an edge list")
    m.add_argument("--normalize", action="store_true",
                   help="divide each row of --matrix by its sum (otherwise rows must sum to 1)")
    m.set_defaults(func=cmd_metrics)

    t = sub.add_parser("topologies", help="list the networks --topology accepts")
    t.set_defaults(func=cmd_topologies)
    a = sub.add_parser("algorithms", help="list the algorithms (--algorithm, --algorithms)")
    a.set_defaults(func=cmd_algorithms)
    return p


def _refuse_unread(args, rules):
    """UsageError for an option written on the command line that the run would not read: ``rules`` holds
    ``(options, unread, why)`` (ignoring it would run something other than what was asked for)."""
    for options, unread, why in rules:
        written = [o for o in options if o in args.given]
        if written and unread:
            raise UsageError(f"{' and '.join(written)} {'is' if len(written) == 1 else 'are'} not read {why}")


def _matrix_rules(args, network_options=("--topology", "--n")):
    """``--normalize`` needs ``--matrix``; the options that build a network are not read with one."""
    return [(("--normalize",), not args.matrix, "without --matrix"),
            ((*network_options, "--undirected", "--weights"), bool(args.matrix),
             "with --matrix (the file is the network)")]


def _problem_rules(args):
    """What ``run`` and ``compare`` share: the objective's options and the network's."""
    obj = f"with --objective {args.objective}"
    return [(("--total", "--batch"), not args.objective.startswith("logistic"), obj),
            (("--rho",), args.objective != "logistic", obj),
            (("--lam",), args.objective != "logistic-l2", obj),
            (("--samples-per-node",), args.objective != "least-squares", obj),
            (("--heterogeneity",), args.objective == "quadratic", obj),
            (("--data-file",), args.objective == "quadratic", obj),
            (("--total", "--heterogeneity", "--data-seed", "--samples-per-node", "--d"),
             bool(getattr(args, "data_file", None)), "with --data-file (the file is the data)"),
            (("--sigma",), args.objective != "quadratic", obj + " (its noise is the mini-batch)"
             if args.objective.startswith("logistic") else obj),
            *_matrix_rules(args)]


#: Python keywords in the library's messages and the options that set them on the command line.
_KEYWORD_OPTIONS = {"tracker='perron'": "--tracker perron", "tracker='exact'": "--tracker exact"}


def main(argv=None):
    """Entry point of the ``rowstoch`` command."""
    parser = make_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(argv)
    # the options written out (abbreviations are off, so each appears as itself)
    args.given = {str(token).split("=", 1)[0] for token in argv if str(token).startswith("--")}
    with _Terminated() as terminated:  # every command: SIGTERM (a job scheduler's) ends it as Ctrl-C does
        code = _call(args, terminated)
        if code == 130 and terminated.received:  # (a command that saved what finished returns 130)
            code = 143
            _error("terminated (SIGTERM)")
        return code


def _call(args, terminated):
    """The command ``args.func`` run, its exceptions turned into one line and an exit code."""
    try:
        return args.func(args)
    except UsageError as exc:
        text = str(exc)
        for keyword, option in _KEYWORD_OPTIONS.items():  # the library's advice, in the command line's words
            text = text.replace(keyword, option)
        _error(f"error: {text}")
        return 2
    except MemoryError as exc:
        text = _as_options(str(exc), {o.name: o.flag for o in network_options.declared() if "_" in o.name})
        # (the library's names, as options: "use a smaller max_delay")
        _error(f"error: out of memory: {text}")
        return 2
    except KeyboardInterrupt:
        if terminated.received:
            return 130  # (main says "terminated" and returns 143)
        _error("interrupted")
        return 130
    except BrokenPipeError:  # the reader went away (rowstoch metrics | head): stop quietly
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 141


if __name__ == "__main__":
    sys.exit(main())
