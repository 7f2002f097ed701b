"""``rowstoch run``: one algorithm on one objective over one network.
"""

from __future__ import annotations

import os
import shlex
import sys
import time

import numpy as np

from .._checks import did_you_mean
from ..algorithms import method_of, REGISTRY
from ..errors import MetricValueError, NetworkIgnoredWarning, UsageError
from ..network import losses_of, options as network_options
from ..report import times_text
from ..topology import NAMES as TOPOLOGIES, PAPER_NAMES as PAPER_GRAPHS
from ._common import (_algorithm_names, _check_objective_args, _check_objective_size, _error, _graph_words,
                      _matrix_from_args, _metrics_module, _objective_from_args, _objective_words, _one_setting,
                      _problem_rules, _refuse_unread, _stage, _topology_n, _writable_file, _writable_folder,
                      default_lr, narrator, progress_option, on_every_rank, refuse_different_arguments,
                      refuse_on_every_rank, warn_unshared_launch, file_label, advice_as_written)


#: The graph's options that a method which averages exactly (federated, centralized) reads no more than the
#: number of nodes of (a matrix file, which sets the clients' number and the data's split, is not warned about).
_GRAPH_OPTIONS = ("--topology", "--undirected", "--weights")


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
            names = TOPOLOGIES + PAPER_GRAPHS
            raise UsageError(f"unknown topology {args.topology!r}{did_you_mean(args.topology, names)}; choose from "
                             f"{', '.join(names)}")
        _check_objective_size(args, n)
    if args.resume and os.path.isdir(args.resume):  # (a folder had been said not to exist)
        raise UsageError(f"--resume {args.resume!r} is a folder: give the checkpoint's file (e.g. run.npz)")
    if args.resume and not os.path.exists(args.resume):
        raise UsageError(f"--resume {args.resume!r} does not exist")


def _hyper_option(args):
    """``--hyper NAME=VALUE`` (repeated) as constructor keywords: each value read as JSON (a number, a boolean, a
    list), else as text; a malformed or repeated one refused in one line."""
    import json

    out = {}
    for item in getattr(args, "hyper", None) or ():
        name, sep, text = item.partition("=")
        name = name.strip()
        if not sep or not name.isidentifier():
            raise UsageError(f"--hyper takes NAME=VALUE (e.g. local_steps=8), got {item!r}")
        if name in out or name in ("lr", "rounds", "tracker", "backend", "method", "A"):
            raise UsageError(f"--hyper {name}: " + ("given twice" if name in out else
                                                    "the network: use --topology or --matrix" if name == "A" else
                                                    f"use --{name}"))
        try:
            out[name] = json.loads(text)
        except ValueError:
            out[name] = _numbers_list(text)
    return out


def _numbers_list(text):
    """``text`` as a list where it is numbers separated by commas (``1,2,3,4``: the per-node form ``--bits`` and
    ``--k`` take; helper 204's ``client_steps=1,2,3,4`` had been read as text, "got shape ()"), else as text."""
    import json

    try:
        values = json.loads(f"[{text}]")
    except ValueError:
        return text.strip()
    numbers = len(values) > 1 and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
    return values if numbers else text.strip()


def _run_config(args):
    """The options that identify a run: stored in its checkpoint and compared on --resume."""
    keys = ("topology", "n", "matrix", "normalize", "objective", "total", "batch", "d", "rho", "heterogeneity",
            "sigma", "data_seed", "backend", "dtype")  # (the objective's data is also in the checkpoint's
    # fingerprint of it)
    config = {k: getattr(args, k) for k in keys}
    config.update(network_options.record(args))  # (each layer's keys; those added later only where in use)
    if args.objective in ("logistic-l2", "least-squares", "lasso"):  # (added later: the others' checkpoints keep
        config.update(lam=args.lam, samples_per_node=args.samples_per_node)  # their keys)
    if args.objective == "lasso":
        config.update(l1=args.l1)
    if getattr(args, "test_samples", 0):  # (added later: recorded only where in use)
        config.update(test_samples=args.test_samples)
    if (getattr(args, "split", None) or "contiguous") != "contiguous":
        config.update(split=args.split)
    if getattr(args, "hyper", None):
        config.update(hyper=sorted(args.hyper))
    if args.undirected or args.weights != "in-degree":
        config.update(undirected=args.undirected, weights=args.weights)
    if args.matrix:
        config["topology"] = config["n"] = None
    else:
        config["n"] = _topology_n(args)  # the default (16) and an explicit --n 16 are the same run
    return {"cli": config}


#: The files that mark a folder as a comparison's (``rowstoch compare --out``), which ``rowstoch run`` does not
#: write into.
COMPARISON_FILES = ("compare.csv", "experiment.json")


def _refuse_earlier_run(args):
    """An --out holding an earlier run's history is refused (its results would be replaced without a word), unless
    --overwrite, or --resume of that same run (its history.json records the same settings: a run going on from its
    checkpoint writes where it wrote before)."""
    import json

    from ..runner import History

    if not os.path.isdir(args.out):
        return
    comparison = [name for name in COMPARISON_FILES if os.path.exists(os.path.join(args.out, name))]
    if comparison:  # (not even with --overwrite, which replaces a run's files alone: a run's history had been
        # written beside a comparison's compare.csv, helper 246; `rowstoch compare` refuses any folder not empty)
        raise UsageError(f"--out {args.out!r} holds a comparison ({', '.join(comparison)}): choose another folder "
                         "for the run")
    if args.overwrite:
        return
    found = [name for name in History.FILES if os.path.exists(os.path.join(args.out, name))]
    if not found:
        return
    if args.resume:
        damaged = None
        try:
            with open(os.path.join(args.out, "history.json")) as fh:
                saved = json.load(fh)["meta"]["config"]["cli"]
        except FileNotFoundError:
            saved = None
        except (OSError, ValueError, KeyError, TypeError) as exc:  # (not another run's settings: none readable)
            saved, damaged = None, exc
        if saved == json.loads(json.dumps(_run_config(args)["cli"], default=str)):
            return
        if damaged is not None:
            raise UsageError(f"--out {args.out!r}: its history.json cannot be read ({type(damaged).__name__}: "
                             f"{damaged}), so whose run it holds is unknown: pass --overwrite to resume into it "
                             "and replace it, or choose another folder")
        raise UsageError(f"--out {args.out!r} holds the results of another run ({', '.join(found)}; its settings "
                         f"differ from this one's): resume into the folder the run wrote, choose another, or pass "
                         f"--overwrite to replace them")
    raise UsageError(f"--out {args.out!r} holds the results of an earlier run ({', '.join(found)}): choose "
                     f"another folder, or pass --overwrite to replace them")


def _lock(folder):
    """``--out``'s lock (:class:`~rowstoch_fast.compare.outputs.FolderLock`), a folder that cannot hold it said as
    one not writable (a read-only --out had ended in a traceback, helper 187)."""
    from ..compare.outputs import FolderLock

    try:
        return FolderLock(folder, option="--out", clean=False, holder="run")
    except OSError as exc:
        raise UsageError(f"--out {folder!r} is not writable: {exc.strerror or exc}") from None


def _same(a, b):
    """Whether the paths ``a`` and ``b`` name one file or folder (by their absolute paths where one is missing)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)


def _refuse_earlier_checkpoint(args):
    """A --checkpoint file that exists is refused (another run's checkpoint would be replaced at the first save,
    and that run could no longer resume), unless the run resumes from it or --overwrite."""
    if os.path.isdir(args.checkpoint):  # (--checkpoint naming --out, made just before: "already exists", helper 185)
        what = " (--out)" if _same(args.checkpoint, args.out) else ""
        raise UsageError(f"--checkpoint {args.checkpoint!r} is a folder{what}: give a file name for the checkpoint "
                         "(e.g. run.npz)")
    from ..runner import History

    output = next((name for name in History.FILES if _same(args.checkpoint, os.path.join(args.out, name))), None)
    if output is not None:  # (history.json had been written over the checkpoint at the run's end)
        raise UsageError(f"--checkpoint {args.checkpoint!r} is one of the run's own outputs ({output} in --out "
                         f"{args.out!r}), which would replace it: give the checkpoint another name (e.g. run.npz)")
    if args.overwrite or not os.path.exists(args.checkpoint):
        return
    if args.resume and os.path.exists(args.resume) and os.path.samefile(args.resume, args.checkpoint):
        return
    raise UsageError(f"--checkpoint {args.checkpoint!r} already exists (a run's checkpoint would replace it): resume "
                     f"from it (--resume {args.checkpoint}), choose another file, or pass --overwrite to replace it")


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
    """The history's files; the figure's title the setting as a comparison's says it: the graph (directed or not),
    n and its weights, the objective and the network model (it had said "exponential (n = 16), logistic" of a run
    over 10% losses, and "1 repetition(s)")."""
    graph = file_label(args.matrix) if args.matrix else args.topology
    said, _, weights = _graph_words(args, graph, A)
    repeats = int(h.meta.get("repeats", 1))
    title = (f"{said} (n = {A.n}, {weights}), {_objective_words(args)}, {network_options.words(args)}"
             + (f", {repeats} repetitions" if repeats > 1 else ""))
    return h.save(folder, title=title,
                  label=f"{algo.name}, lr = {algo.lr:g}" + ("" if h.status == "done" else f" ({h.status})"))


#: From this many nodes the exact tracker is built under a set-up line of its own (the powers of A over every
#: column: about 25 s at 4,096 nodes and 21 minutes at 16,384 on one thread of the VM).
_SAID_TRACKER = 4096


def cmd_run(args):
    """``rowstoch run``: one algorithm on one objective and network; writes CSV, JSON and PNG. Its ``--out`` is
    locked while it runs (:class:`~rowstoch_fast.compare.outputs.FolderLock`): two runs into one folder had both
    found it empty at their start, and the last to finish replaced the other's history (helper 185)."""
    locks = []
    try:
        return _cmd_run(args, locks)
    finally:
        for lock in locks:
            lock.release()


def _cmd_run(args, locks):
    import warnings

    from ..errors import DivergenceError
    from ..runner import METRICS, Algorithm, check_takes, run

    if args.backend == "mpi":  # (before any other collective: ranks given other arguments meet none of them)
        try:
            import mpi4py  # noqa: F401
        except ImportError:
            raise UsageError("--backend mpi needs mpi4py: pip install 'rowstoch_fast[mpi]'") from None
    refuse_different_arguments(args)
    on_every_rank(args, _check_run_args, args)  # (a --resume file that one rank's disk lacked had left the others
    # waiting, helper 203)
    warn_unshared_launch(args)
    extra = on_every_rank(args, _metrics_module, args)  # (every metric the file registers is recorded)
    if args.metric:  # (more of the built-in families: node statistics, counters, federated metrics)
        from ..user_metrics import resolve_metrics

        asked = [name.strip() for name in args.metric.split(",") if name.strip()]
        if not asked:  # (--metric , and --metric " " had been taken as nothing, --metric "" refused)
            raise UsageError(f"--metric was given no metric name ({args.metric!r}): give one or more, separated by "
                             "commas, or leave the option out")
        try:
            resolve_metrics(asked, "--metric")
        except (TypeError, ValueError) as exc:
            raise UsageError(str(exc)) from None
        extra = tuple(dict.fromkeys([*extra, *(name for name in asked if name not in METRICS)]))
    started = time.perf_counter()
    root = True
    if args.backend == "mpi":
        try:
            from mpi4py import MPI
        except ImportError:
            raise UsageError("--backend mpi needs mpi4py: pip install 'rowstoch_fast[mpi]'") from None
        root = MPI.COMM_WORLD.Get_rank() == 0
    refused = None
    if root:  # before any computation: an unwritable --out or --checkpoint must not cost the run
        try:
            from ..compare.outputs import FolderInUse

            _writable_folder(args.out, "--out")
            locks.append(_lock(args.out))  # (before the look for an earlier run's files: two runs had both found none)
            _refuse_earlier_run(args)
            if args.checkpoint:
                _refuse_earlier_checkpoint(args)
                _writable_file(args.checkpoint, "--checkpoint")
        except (UsageError, FolderInUse) as exc:
            refused = str(exc)
    refuse_on_every_rank(args, refused)
    progress = progress_option(args)
    say = narrator(args, root)
    stage = _stage(root and (progress == "always" or (progress and sys.stderr.isatty())))
    stage(f"set-up: the network ({args.matrix or args.topology})")
    A = on_every_rank(args, _matrix_from_args, args)
    if args.dtype == "float32":
        A = A.astype(np.float32)
    if args.matrix:  # a topology's n was checked above; a file's is known only now
        _check_objective_size(args, A.n)
    try:
        stage(f"set-up: the {args.objective} objective on {A.n} nodes")
        f = on_every_rank(args, _objective_from_args, args, A.n)
        mg = args.algorithm.startswith("mg-")
        rounds = args.rounds or (A.metrics().recommended_rounds() if mg else 1)
        method = args.algorithm[3:] if mg else args.algorithm
        lr = args.lr if args.lr is not None else default_lr(method, A.n)
        network = network_options.build(A, args)
        if args.tracker == "exact" and "tracker" in REGISTRY[method].hyper and network is A and A.n >= _SAID_TRACKER \
                and args.backend != "mpi":  # (built here, under its line, and kept on A for the run: at 2^14 nodes
            # it took 21 minutes of a silent set-up)
            from ..tracker import DiagTracker

            stage(f"set-up: the exact tracker's diag(A^k) over all {A.n} columns (minutes on many nodes; "
                  "--tracker perron needs none)")
            DiagTracker(A, rounds)
        stage(None)
        prepared = time.perf_counter() - started  # network, objective (and the exact tracker built here)
        algo = Algorithm(network, lr, rounds=rounds, tracker=args.tracker, backend=args.backend,
                         method=method, **_hyper_option(args))
        check_takes(algo.optimizer, f, args.algorithm)
        if args.metric:  # (one that no record of this run can hold: refused, not a column of NaN)
            from ..runner import check_shown_metrics

            check_shown_metrics([m.strip() for m in args.metric.split(",") if m.strip()], f,
                                [(args.algorithm, method, rounds)])
    except (ValueError, TypeError) as exc:
        raise UsageError(advice_as_written(args, str(exc))) from exc  # (the command line's words: helper 220)
    used = {o.flag for layer in network_options.in_use(args) for o in layer.OPTIONS}
    ignored = [flag for flag in _GRAPH_OPTIONS if flag in args.given] + \
        [o.flag for o in network_options.declared() if o.flag in args.given and o.flag in used]
    if not REGISTRY[method].matrices and ignored and root:
        named = " and ".join(filter(None, (", ".join(ignored[:-1]), ignored[-1])))
        graph = any(flag in _GRAPH_OPTIONS for flag in ignored)
        print(f"rowstoch: warning: {named} {'does' if len(ignored) == 1 else 'do'} not affect "
              f"{method}{' beyond the number of nodes' if graph else ''}: it averages exactly, without the network",
              file=sys.stderr)
    diverged = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RuntimeWarning)
        try:
            h = run(algo, f, args.iterations, record_every=args.record_every, repeats=args.repeats, seed=args.seed,
                    progress=progress, checkpoint=args.checkpoint, resume=args.resume,
                    config=_run_config(args), metrics=(*METRICS, *extra) if extra else None)
        except DivergenceError as exc:
            diverged, h = exc, getattr(exc, "history", None)
        except Exception as exc:
            _write_what_was_recorded(exc, args, A, algo, root)
            if isinstance(exc, (FileNotFoundError, ValueError, RuntimeError, MetricValueError)) or (
                    isinstance(exc, TypeError) and getattr(exc, "history", None) is None):  # (a TypeError before the
                # first step: a --hyper value of the wrong type, which the method checks as it is built; one later,
                # from a kernel or a metric of the user's, keeps its traceback)
                raise UsageError(advice_as_written(args, str(exc))) from exc
            raise
    for message in dict.fromkeys(str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)
                                 and not issubclass(w.category, NetworkIgnoredWarning)):  # (said above, by flag)
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
        rows = len(h.frame)
        if h.meta.get("diverged", {}).get("at_start"):  # (nothing recorded: the start's row, its metrics NaN)
            print(f"rowstoch: it diverged at its start, before a step: {paths} hold its start (metrics NaN, marked "
                  "diverged)", file=sys.stderr)
        else:
            print(f"rowstoch: the {rows} row{'s' if rows != 1 else ''} recorded before it "
                  f"{'are' if rows != 1 else 'is'} in {paths} (marked diverged)", file=sys.stderr)
        return 3
    s = h.summary().iloc[-1]
    reached = int(h.meta.get("completed_iterations", s["iteration"]))  # Ctrl-C: where it stopped, not the last record
    # a run whose iterates stayed finite but whose metrics overflowed (1e200 squared) diverged all the same, as one
    # whose gradient norm or loss grew past the runner's warning (compare's diverged; a rate of 100 took the loss to
    # 2e241 and ended "done", exit 0): History.status
    blown, grew, status = h.overflowed, h.meta.get("grew"), h.status
    rounds_run = int(h.meta.get("completed_rounds", s["communication_rounds"]))
    steps = _hyper_option(args).get("local_steps", getattr(algo.optimizer, "local_steps", None))  # (the class's
    # default where not given)
    if rounds_run == 0 and reached > 0 and steps and not h.interrupted:  # (helper 185: a local method's first round
        # falls past the run, "0 communication rounds" the only word of it)
        print(f"rowstoch: warning: no communication round in {reached} iterations: {args.algorithm} communicates at "
              f"the last of every local_steps = {steps} iterations (raise --iterations, or lower local_steps)",
              file=sys.stderr)
    model = network_options.words(args)  # (helper 202: "on exponential (n=16)" of a run over 10% losses)
    print(f"{algo.name} (lr {algo.lr:g}) on {args.topology if not args.matrix else args.matrix} (n={A.n}"
          f"{'' if model == 'reliable links' else ', ' + model}), {status} at iteration "
          f"{reached} ({int(h.meta.get('completed_rounds', s['communication_rounds']))} communication rounds, "
          f"{s['wall_seconds']:.1f} s; "
          f"set-up {prepared + h.meta.get('setup_seconds', 0.0):.1f} s)")
    last = f" (at iteration {int(s['iteration'])}, the last recorded)" if reached != int(s["iteration"]) else ""
    spread = f" +- {s['grad_norm_std']:.1e}" if h.meta.get("repeats", 1) > 1 else " (1 run)"
    print(f"  grad norm {s['grad_norm']:.4e}{spread}   loss {s['loss']:.6g}   "
          f"consensus error {s['consensus_error']:.3e}"
          + (f"   f(x_bar) - f* {s['suboptimality']:.3e}" if np.isfinite(s["suboptimality"]) else "") + last)
    if "communication" in h.meta:
        for c in h.meta["communication"]:
            print(f"  rank {c['rank']}: {c['nodes']} nodes, {c['messages'] / max(1, h.meta['completed_iterations']):.1f} "
                  f"messages and {c['bytes_sent'] / max(1, h.meta['completed_iterations']):.0f} bytes sent per iteration")
    say(f"  wrote {paths}")
    if h.interrupted and getattr(args, "checkpoint", None):  # (helper 189: "interrupted at iteration 6768", nothing
        # of how to go on)
        print(f"rowstoch: interrupted: its checkpoint {args.checkpoint!r} holds iteration {reached}; the same command "
              f"with --resume {shlex.quote(args.checkpoint)} continues it", file=sys.stderr)
    if not (h.interrupted or blown or grew):
        notes = _no_progress_notes(h, lossy=bool(losses_of(network)), algorithm=args.algorithm)
        for line in notes or _judged_notes(h, network, f, method, rounds, args.tracker):
            print(f"rowstoch: note: {line}", file=sys.stderr)
    if write_error is not None:
        return 2
    if blown and not h.interrupted:
        last = h.frame.loc[h.frame["iteration"] == h.frame["iteration"].max(), blown].mean()
        why = ("infinite (the iterates grew past what the metrics can square); try a smaller --lr"
               if np.isinf(last).all() else "not finite (NaN at finite iterates: the objective's value or gradient, "
               "or iterates past what the metrics can square); try a smaller --lr")
        print(f"rowstoch: diverged: the last record's {' and '.join(m.replace('_', ' ') for m in blown)} "
              f"{'is' if len(blown) == 1 else 'are'} {why}", file=sys.stderr)
        return 3
    if grew and not h.interrupted:  # (said as the warning above; the status and exit code say it too)
        print(f"rowstoch: diverged: {grew.split(': the run diverges')[0]}; try a smaller --lr", file=sys.stderr)
        return 3
    return 130 if h.interrupted else 0


#: A run's loss alone ending this many times above its start is noted (:func:`_no_progress_notes`), its gradient
#: norm falling or not.
LOSS_NOTED = 10.0
#: The methods made for lost messages, suggested on a lossy network (the one that ran left out).
LOSS_ROBUST = ("robust-gradient-push", "r-fast")


def _judged_notes(h, network, objective, method, rounds, tracker):
    """The line of a run that a comparison would not call ``ok`` (its gradient norm judged by
    :func:`~rowstoch_fast.compare.method.judge_run`: a climb back from its lowest level, an end above half its
    start), where :func:`_no_progress_notes` said nothing; [] otherwise."""
    from ..compare.method import judge_run

    if "grad_norm" not in h.frame.columns or not np.isfinite(h.frame["grad_norm"].to_numpy(np.float64)).any():
        return []
    try:
        status, diagnosis = judge_run(h, network, objective, method, rounds, tracker)
    except Exception:  # noqa: BLE001 - a diagnosis never fails a run that finished
        return []
    return [] if status == "ok" else [f"by `rowstoch compare`'s rules, read on the gradient norm, this run is "
                                      f"{status}: {diagnosis}"]


def _no_progress_notes(h, lossy=False, algorithm=None):
    """Lines for a run that ended ``done`` without progress: its loss or gradient norm (the mean over its
    repetitions) ended above its start (the gradient norm, the loss beside it; the loss alone where it ended
    :data:`LOSS_NOTED` times above it), or went past a thousandfold it on the way (the runner's ``diverged`` is a
    thousandfold at the end); ``lossy``: its network loses messages (the loss-robust methods suggested but
    ``algorithm``, the one that ran). Helper 189: Pull-Diag-GT over 10% losses ended "done", exit 0, its loss
    0.683 -> 2.66 and growing (33.9 by 4,000 iterations); at lr 1 on a ring its loss went to 2,150x its start and
    ended at 679x, both unsaid. Helper 190: R-FAST at lr 30 over 50% losses, its loss 97x its start while its
    gradient norm fell, unsaid; R-FAST told to try R-FAST."""
    from ..runner import GROWTH_WARNING

    table = h.summary()
    above, lines = {}, []
    for name, words in (("loss", "loss"), ("grad_norm", "gradient norm")):
        if name not in table.columns or len(table) < 2:
            continue
        values = table[name].to_numpy(np.float64)
        start, end = float(values[0]), float(values[-1])
        if not (np.isfinite(values).all() and start > 0):
            continue
        k = int(np.argmax(values))
        if values[k] > GROWTH_WARNING * start:
            lines.append(f"the {words} went to {times_text(values[k] / start)} its start by iteration "
                         f"{int(table['iteration'].iloc[k])} and ended at {times_text(end / start)} it; try a smaller --lr")
        elif end > start:
            above[name] = f"the {words} ({start:.4g} -> {end:.4g}, {times_text(end / start)})"
            if name == "loss" and end > LOSS_NOTED * start:
                above["loud"] = True
    # (the loss alone above its start: a tracker's early scale spreads the nodes' models while their gradients
    # fall, the default Pull-Diag-GT on a ring of 16 at 300 iterations, loss 2.4x its start; not said short of
    # LOSS_NOTED)
    if "grad_norm" in above or above.pop("loud", False):
        said = [above[n] for n in ("loss", "grad_norm") if n in above]
        others = [m for m in LOSS_ROBUST if m != algorithm]
        lines.append(f"{' and '.join(said)} ended above {'its' if len(said) == 1 else 'their'} start: no progress "
                     f"at this rate (try a smaller --lr; `rowstoch compare` tunes it"
                     + (f"; on a network that loses messages, {' and '.join(others)} "
                        f"{'is' if len(others) == 1 else 'are'} made for it)" if lossy and others else ")"))
    return lines


def _write_what_was_recorded(exc, args, A, algo, root):
    """The records a run that raised carries (``exc.history``) go to ``--out`` before the error is reported."""
    h = getattr(exc, "history", None)
    if not root or h is None or h.frame.empty:
        return
    folder, written, _ = _write_outputs(h, args, A, algo)  # (into a temporary folder if --out fails)
    _error(f"the {len(h.frame)} rows recorded before the error are in "
           f"{', '.join(os.path.join(folder, w) for w in written)}")
