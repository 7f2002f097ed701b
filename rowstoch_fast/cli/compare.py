"""``rowstoch compare``: several algorithms on the same problem and budget (the harness: :mod:`rowstoch_fast.compare`).
"""

from __future__ import annotations

import os
import re
import shlex
import sys

from .._checks import did_you_mean
from .._signals import signals_held
from ..algorithms import REGISTRY
from .. import report
from ..errors import UsageError
from ..network import options as network_options
from ..topology import NAMES as TOPOLOGIES, PAPER_NAMES as PAPER_GRAPHS
from ._common import (_as_options, _check_objective_args, _check_objective_size, _check_out_folder, _error,
                      _list_option, _matrix_from_args, _metrics_module, _objective_from_args, _problem_rules,
                      _refuse_unread, _settings, drop_turned_off, dropped_unread, narrator, on_every_rank,
                      polled_barrier, progress_option, RanksDiffer, refuse_different_arguments, refuse_on_every_rank,
                      warn_unshared_launch, file_label, _graph_words, _objective_words, advice_as_written)


def _metric_list(text, key=None):
    """``--metric``: comma-separated metric names, each a built-in one, a ``node_*`` statistic or one that
    ``--metrics-module`` registered; one line naming the option otherwise, or ``key``, the experiment file's key
    that set them (``"FILE: [outputs] metrics"``), in its words (a list, or one string separated by commas)."""
    from ..runner import METRICS
    from ..user_metrics import NODE_QUANTITIES, NODE_STATISTICS, registered_metrics, resolve_metrics

    values = [v.strip() for v in str(text).split(",") if v.strip()]
    bad = []
    for value in values:
        try:
            resolve_metrics([value])
        except (TypeError, ValueError):
            bad.append(value)
    if bad or not values:  # (each name refused with the closest metric: an experiment file's metrics = ["subopt"]
        # had been told the command line's "comma-separated list", no "did you mean", helper 219)
        known = (*METRICS, *registered_metrics())
        named = ", ".join(repr(name) + _closest(name, known) for name in bad) or "nothing"
        choices = (f"{', '.join(known)} or node_<{'|'.join(NODE_STATISTICS)}>_<{'|'.join(NODE_QUANTITIES)}> (a "
                   "metric of your own: --metrics-module FILE), the first one that falls to 0 (it is tuned on and "
                   "ranked)")
        raise UsageError(f"--metric must be a comma-separated list of {choices}; got {named}" if key is None else
                         f"{key}: unknown metric{'s' if len(bad) > 1 else ''} {named}; give a list (or one string "
                         f"separated by commas) of {choices}")
    return list(dict.fromkeys(values))


def _closest(name, choices):
    """``" (did you mean 'x'?)"``: the choice :func:`did_you_mean` finds for a mistyped ``name``, else the one
    choice that begins with it (``subopt``: suboptimality, too short for a near miss), else ``""``."""
    begun = [choice for choice in choices if name and choice.startswith(name)]
    return did_you_mean(name, choices) or (f" (did you mean {begun[0]!r}?)" if len(begun) == 1 else "")


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
            raise UsageError(f"--lr must be one number for all, or NAME=VALUE,... (several --lr join with commas), "
                             f"got {part!r}" + (f" in {text!r}" if text.strip() != part else ""))
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


def _jobs(args):
    """``--jobs`` (default: the cores; one with --backend mpi, where the ranks are the parallelism, and cupy)."""
    from ..compare import default_jobs

    if args.jobs is None:
        return 1 if args.backend in ("mpi", "cupy") else default_jobs()
    if args.backend == "mpi" and args.jobs > 1:
        raise UsageError("--jobs runs methods in parallel processes; with --backend mpi the ranks of mpiexec are "
                         "the parallelism (drop --jobs)")
    return args.jobs


def cmd_compare(args):
    """``rowstoch compare``: several algorithms, same problem, seeds and communication budget (130 when
    interrupted: :func:`main` makes it 143 after a SIGTERM). A refusal of what an experiment file set names the
    file and its key (:func:`_as_in_the_file`)."""
    try:
        return _compare(args)
    except UsageError as exc:
        raise _as_in_the_file(args, exc) from None
    finally:
        try:
            if getattr(args, "left_from", None):  # (a resume ran in the comparison's own folder: the caller's again)
                try:
                    os.chdir(args.left_from)
                except OSError as exc:  # (the caller's folder removed meanwhile: the outputs are written)
                    print(f"rowstoch: warning: the folder the resume was run from cannot be entered again ({exc})",
                          file=sys.stderr)
        finally:
            if getattr(args, "ranks_wait", False):
                _wait_for_rank_zero()


def _wait_for_rank_zero():
    """Under MPI, once every rank is past the comparison's last collective (its last method run, or all stopped
    together): the ranks leave together, after rank 0 has written the outputs and let go of the folder, SIGINT and
    SIGTERM held meanwhile (then handed on), whichever way each leaves ``_compare`` (a signal in the lines after the
    last run raises KeyboardInterrupt there). A rank that left first, with 143 after a scheduler's SIGTERM, made
    mpiexec end rank 0 while it wrote the figures: the folder had no compare.png and kept its lock. (Polled, not a
    blocking barrier: the ranks waiting spin no core away from rank 0's writing; a second signal ends the wait.)"""
    import signal

    from .._signals import first, hold, put_back

    held = []

    class _Again(Exception):
        pass

    def handler(signum, frame):
        held.append(signum)
        if len(held) > 1:  # (a second signal: rank 0 may never come, it failed past the last collective)
            raise _Again

    previous = hold(handler)
    try:
        polled_barrier()
    except _Again:
        pass
    finally:
        put_back(previous)
    if held:
        signal.raise_signal(first(held))


def _compare(args):
    """``rowstoch compare``'s stages, each its own function: the start (:func:`_opened`), the options checked
    (:func:`_checked_options`), every graph and setting planned before anything runs (:func:`_planned_problems`),
    the output folder taken, the methods run setting by setting with each table written as they finish
    (:func:`_run_problems`), then the outputs (:func:`_write_results`)."""
    from .. import compare as cmp
    from ..compare.live import CLI_SHARE, CLI_TEXT_EVERY, LiveView
    from ..compare.outputs import ComparisonFolder, FolderInUse

    file_algorithms, root = _opened(args)
    say = narrator(args, root)  # what it is doing (quiet with -q)
    checked = _checked_options(args, root)
    problems, early = _planned_problems(args, checked, file_algorithms, root, say)
    metric = checked.metrics[0] if checked.metrics else cmp.default_metric(problems[0][6])
    checked.metrics = checked.metrics or [metric, "consensus_error"]
    live = LiveView(metric, checked.x_axis, path=os.path.join(args.out, "live.png"),  # (-q: the figure, no text
                    text=False if getattr(args, "quiet", False) else None,  # plot)
                    share=CLI_SHARE, text_every=CLI_TEXT_EVERY) if args.live and root else None
    tuned = _tuned_labels(args, problems, several=len(checked.settings) > 1)
    folder, refused = None, None
    # (--resume DIR --out OTHER: the comparison goes on into OTHER, a new output folder, DIR left as it is)
    into_itself = bool(args.resume) and os.path.abspath(args.out) == os.path.abspath(args.resume)
    if root:
        try:
            folder = ComparisonFolder(args.out, resume=into_itself, overwrite=args.overwrite)
        except FolderInUse as exc:
            refused = str(exc)
        except OSError as exc:  # (a folder that cannot be made: /proc/..., a name too long, a full disk)
            refused = f"--out {args.out!r} cannot be written: {exc.strerror or exc}"
    refuse_on_every_rank(args, refused)
    try:
        if root and not into_itself:  # the settings the results come from, beside them
            _write_experiment(args, problems, file_algorithms)
        elif root and ("--repeats" in args.given or args.repeats != args.saved_repeats):  # (more repetitions:
            # the count asked for is noted before they run, so that a plain resume of a growth killed before its
            # first row goes on with it, where it was forgotten; --repeats may still change it, a note and not the
            # settings, and --repeats at the settings' count removes it: helper 173)
            _update_experiment(args.out, growing=args.repeats if args.repeats != args.saved_repeats else None)
        for words in _left_out_words(args, problems) if root else ():  # (before the runs: which settings lack what)
            print(f"rowstoch: note: {words}", file=sys.stderr)
        if tuned:
            say(f"tuning the learning rate of {', '.join(tuned)} (no --lr for {'it' if len(tuned) == 1 else 'them'}"
                f"{'; each in the settings that run it' if args.left_out else ''}): "
                f"every rate of {cmp.TUNE_GRID[0]:g} .. {cmp.TUNE_GRID[-1]:g} over the whole budget in one batched "
                f"run, then refined, on {metric}; --lr NAME=VALUE fixes one", flush=True)
        frames, interrupted = _run_problems(args, problems, checked, metric, live, early, root, say)
        if live is not None:  # (the frames a call too soon after the last draw kept)
            live.flush()
        if not root:
            return 130 if interrupted else 0
        return _write_results(args, frames, interrupted, problems, checked, into_itself, say)
    finally:
        if folder is not None:
            folder.release()


def _opened(args):
    """The start of ``rowstoch compare`` on every rank: the experiment file read (first: a resumed comparison's
    backend is its experiment.json's), this process's MPI rank, the notes on what the file leaves unused, and the
    metrics module loaded. Returns the file's algorithm tables and whether this process prints and writes (rank
    0, or the only one)."""
    args.before_mpi = True  # (a refusal here, on one rank of an MPI launch, aborts it: the others are in MPI_Init)
    file_algorithms = _read_experiment_file(args)
    args.before_mpi = False
    root = True
    if args.backend == "mpi":  # every rank runs; rank 0 prints and writes
        try:
            from mpi4py import MPI
        except ImportError:
            raise UsageError("--backend mpi needs mpi4py: pip install 'rowstoch_fast[mpi]'") from None
        root = MPI.COMM_WORLD.Get_rank() == 0
    refuse_different_arguments(args)
    if root and getattr(args, "lost_tuning", None):
        print(f"rowstoch: warning: --resume {args.lost_tuning!r} holds records but no lr.json: the tuning records "
              "of the methods it keeps are lost (their rates and statuses are compare.csv's); the new lr.json "
              "leaves them out", file=sys.stderr)
    if root and getattr(args, "unused_tables", None):
        tables = args.unused_tables
        print(f"rowstoch: note: --algorithms leaves out {', '.join(tables)} of {args.file_name} (the command line "
              f"wins): {'its settings are' if len(tables) == 1 else 'their settings are'} not used", file=sys.stderr)
    for option, key in getattr(args, "replaced_keys", ()) if root else ():
        print(f"rowstoch: note: {option} replaces {key} of {args.file_name} (the command line wins)", file=sys.stderr)
    warn_unshared_launch(args)
    on_every_rank(args, _metrics_module, args)  # (its metrics are --metric choices; a resumed comparison's file,
    # from experiment.json)
    return file_algorithms, root


def _checked_options(args, root):
    """Every option of ``rowstoch compare`` that needs no problem built, checked (one line naming the option
    otherwise). Returns them read: ``settings`` (the network settings, :func:`_settings`), ``metrics`` (``--metric``'s
    list, or None: the objective's default), ``x_axis``, ``cost`` (``--cost-weights``), ``formats`` (the figures'),
    ``jobs``, ``progress`` and ``topologies`` (the graphs' names)."""
    from types import SimpleNamespace

    from .. import compare as cmp

    if args.algorithms is not None and not args.algorithms.replace(",", "").strip():
        raise UsageError("--algorithms is empty; name at least one algorithm ('rowstoch algorithms' lists them)")
    names = [a.strip() for a in args.algorithms.split(",")] if args.algorithms else list(cmp.ALGORITHMS)
    written = {str(token).split("=", 1)[0] for token in getattr(args, "argv", []) if str(token).startswith("--")}
    if args.mg_rounds is not None and args.mg_rounds < 1:  # (a file's, dropped below unread: checked first)
        raise UsageError(f"--mg-rounds must be >= 1 (gossip rounds per iteration), got {args.mg_rounds}")
    if "--mg-rounds" in getattr(args, "file_keys", {}) and "--mg-rounds" not in written and \
            "--algorithms" in written and not any(a.startswith("mg-") for a in names):  # (the file's R, for mg-*
        # methods the command line left out: `--preset paper --algorithms pull-diag-gt` was refused, naming the
        # shipped file; a file's own methods
        # without one: refused as its other unread keys are, helper 266)
        args.mg_rounds = None
        args.given.discard("--mg-rounds")
    _refuse_unread(args, _problem_rules(args) + [
        (("--mg-rounds",), not any(a.startswith("mg-") for a in names), "without an mg-* algorithm")])
    _check_objective_args(args)
    try:
        settings = _settings(args)
    except UsageError as exc:
        raise _as_in_the_file(args, exc) from None
    metrics = _metric_list(args.metric, _file_key(args, "--metric")) if args.metric is not None else None
    x_axis = str(args.x).strip()
    if x_axis not in report.AXES:  # (one value: "a comma-separated list" had been said of a bad one, helper 261)
        raise UsageError(f"--x takes one of {', '.join(report.AXES)}, got {args.x!r}")
    cost = getattr(args, "cost_weights", None)
    if x_axis != "cost" and cost is not None and dropped_unread(args, ["--cost-weights"], "without --x cost"):
        cost = None
    if (x_axis == "cost") != (cost is not None):
        raise UsageError("--x cost needs --cost-weights (e.g. gradient=1,round=100)" if cost is None
                         else "--cost-weights is read with --x cost only")
    if cost is not None:
        try:
            report.check_cost_weights(cost)
        except ValueError as exc:
            raise UsageError(f"--cost-weights: {exc}") from None
    formats = _figure_formats(args)
    file_keys = getattr(args, "file_keys", {})
    if not formats and not args.live and "--x" in args.given and "--format" in args.given and x_axis != "cost" \
            and ("--x" not in file_keys or "--format" in file_keys):  # (accepted and ignored, helper 261; cost is a
        # column of compare.csv too; a file's x beside the command line's --format none is not: the shipped
        # examples all set x, and `--format none` had been refused on each, helper 266)
        raise UsageError("--x is not read with --format none: it is the figures' axis, and none is drawn")
    if formats or args.live:  # (the figures come last: a backend that cannot load is refused before the work)
        try:
            report.check_backend()
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    if args.backend == "cupy":  # (before the folder is made: a machine without a usable GPU had been refused once
        # experiment.json was written, and the corrected command then "not empty", helper 266)
        from ..backends import resolve_backend

        try:
            resolve_backend("cupy")
        except RuntimeError as exc:
            raise UsageError(f"--backend cupy: {exc}") from None
    jobs = _jobs(args)
    if root:
        _check_out_folder(args.out)
    progress = progress_option(args)
    topologies = args.topology if isinstance(args.topology, list) else [args.topology]
    twice = sorted({name for name in topologies if topologies.count(name) > 1})
    if twice and not args.matrix:  # (each graph's records go under its name: a graph twice merged two runs in one)
        raise UsageError(f"--topology names {', '.join(map(repr, twice))} twice")
    for name in ([] if args.matrix else topologies):
        if name not in TOPOLOGIES + PAPER_GRAPHS:
            raise UsageError(f"unknown topology {name!r}{did_you_mean(name, TOPOLOGIES + PAPER_GRAPHS)}; choose from "
                             f"{', '.join(TOPOLOGIES + PAPER_GRAPHS)}")
    dropped = {}  # (_common.dropped_unread: the file's keys by why they are not read)
    for option, why in getattr(args, "dropped_keys", ()) if root else ():
        dropped.setdefault(why, []).append(f"[communication] {args.file_communication[option]}" if option in
                                           args.file_communication else args.file_keys.get(option, option))
    for why, keys in dropped.items():
        keys = ", ".join(keys[:-1]) + " and " + keys[-1] if len(keys) > 1 else keys[0]
        print(f"rowstoch: note: {keys} of {args.file_name} {'is' if ' and ' not in keys else 'are'} not "
              f"read {why}: dropped (the command line wins)", file=sys.stderr)
    return SimpleNamespace(settings=settings, metrics=metrics, x_axis=x_axis, cost=cost, formats=formats, jobs=jobs,
                           progress=progress, topologies=topologies)


def _planned_problems(args, checked, file_algorithms, root, say):
    """Every graph, setting, objective, algorithm and rate checked, and each setting's comparison planned
    (:func:`~rowstoch_fast.compare.make_plan`: memory too), before anything runs or is written. Returns the
    problems, one tuple ``(graph, setting, its options, A, specs, lr, f, lr sources, hyper, algorithms)`` a graph
    and setting, and the warnings printed while planning (a budget that holds few of a method's iterations: the
    run's own is then not printed again). ``checked.jobs`` is lowered where that many processes do not fit."""
    from .. import compare as cmp

    problems, args.graph_words, args.left_out = [], {}, {}
    early = set()
    try:
        for gname in [file_label(args.matrix)] if args.matrix else checked.topologies:
            args.topology = gname
            base = on_every_rank(args, _matrix_from_args, args)
            args.graph_words[gname] = _graph_words(args, gname, base)
            _check_objective_size(args, base.n)
            f = on_every_rank(args, _objective_from_args, args, base.n)
            built = [(sname, ns, network_options.build(base, ns)) for sname, ns in checked.settings]
            _methods_apart(args, gname, f, built)
            for sname, ns, A in built:
                _check_resumed_data(args, gname + (f" / {sname}" if sname else ""), A, f)
                chosen = args.algorithms or ",".join(cmp.default_algorithms(A, f))  # (default: what runs on A, f)
                try:
                    specs = cmp.parse_algorithms(chosen, A, args.mg_rounds)
                except ValueError as exc:  # (of several graphs, the one it refuses: "this network" had named none,
                    # and its advice, followed, met the other graph's refusal, helper 266)
                    if len(checked.topologies) < 2 or args.matrix:
                        raise
                    raise ValueError(str(exc).replace("this network", f"the graph {gname}")) from None
                lr, sources, hyper = _rates_and_hyper(args, specs, A, f, file_algorithms)
                _refuse_earlier_records(args, gname, sname if len(checked.settings) > 1 else None, specs, hyper)
                _plan_fitting(args, checked, A, f, chosen, specs, lr, sources, hyper, root, early, say)
                problems.append((gname, sname, ns, A, specs, lr, f, sources, hyper, chosen))
    except UsageError as exc:  # (worded already: an experiment file's key; a layer's option, here)
        raise _as_in_the_file(args, exc) from None
    except (ValueError, TypeError) as exc:
        raise UsageError(_as_options(str(exc), _COMPARE_OPTIONS)) from exc
    topologies = checked.topologies
    args.topology = topologies if len(topologies) > 1 else topologies[0]
    return problems, early


def _refuse_earlier_records(args, gname, sname, specs, hyper):
    """A resumed comparison of an earlier version (experiment.json without this version's ``own_draws``) that kept
    records of a method that draws of its own (:meth:`~rowstoch_fast.algorithms.Optimizer.draws_for`: a federated
    method's clients) is refused: its repetitions had shared the draws, this version's each draw their own, and a
    table of both would mix them unsaid (helper 268); as is one that kept records of FedPD or FedLT, which it
    measured by their clients' mean model (helper 276)."""
    if not getattr(args, "resume", None) or getattr(args, "own_draws", OWN_DRAWS) == OWN_DRAWS:
        return
    previous = _previous_of(args, gname, sname)
    kept = set(previous["algorithm"]) if previous is not None and "algorithm" in previous.columns else set()
    measured = [label for label, method, _ in specs if label in kept and
                not getattr(REGISTRY[method], "download_model", True)]
    if measured:  # (FedPD's and FedLT's records had been of their clients' mean, helpers 273, 276)
        raise UsageError(f"--resume {args.resume!r} was written by an earlier version, which measured "
                         f"{', '.join(measured)} by the mean of the clients' own models; this version measures "
                         "the server's model, the model the method hands over, and its records would mix the two: "
                         "start a new comparison")
    drawing = [label for label, method, _ in specs if label in kept and args.own_draws is None and
               REGISTRY[method].draws_for((hyper or {}).get(label, {}))]  # (a version of "per repetition" drew
    # anew all but FedPD with skipped rounds, which the measure refuses)
    if drawing:
        raise UsageError(f"--resume {args.resume!r} was written by an earlier version, whose repetitions of "
                         f"{', '.join(drawing)} all drew the same clients; this version draws them anew in each "
                         "repetition, and its records would mix the two: start a new comparison")


def _rates_and_hyper(args, specs, A, f, file_algorithms):
    """The rates (``--lr``, else the experiment file's), where each came from, and the file's other
    hyper-parameters of one setting's methods, checked (each method takes ``f``; the file's values by the
    method's constructor) before anything runs. Returns ``(lr, sources, hyper)``."""
    from .. import compare as cmp
    from ..runner import check_takes

    labels = [label for label, _, _ in specs]
    if "--tracker" in args.given and not any("tracker" in REGISTRY[m].hyper for _, m, _ in specs):
        raise UsageError(f"--tracker is not read by {', '.join(labels)} (only the methods with a "
                         f"Pull-Diag tracker take one: 'rowstoch algorithms' lists them)")
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
    for label, method, rounds in specs:
        check_takes(REGISTRY[method], f, label)
        if label in hyper:  # the file's values, checked by the constructor before anything runs
            _check_file_hyper(args.config, label, REGISTRY[method], rounds, hyper[label], args.tracker, A.n)
    return lr, sources, hyper


def _plan_fitting(args, checked, A, f, chosen, specs, lr, sources, hyper, root, early, say):
    """One setting's comparison planned (:func:`~rowstoch_fast.compare.make_plan`: every check, memory too), its
    budget's warning printed now (and added to ``early``), before the tuning and not after it (helper 246's
    MG-Pull-Diag-GT of Theorem 3's R = 698 on the paper's ring had been told it ran 2 iterations once every method
    had run). Where the default ``--jobs`` (the cores: as many processes as fit, each with its copy of the problem
    and its methods' blocks) does not fit in memory, fewer: ``checked.jobs`` lowered and said; a ``--jobs`` given is
    refused as it is."""
    import warnings

    from .. import compare as cmp
    from ..composite import UNCONVERGED_WORDS

    metrics, asked = checked.metrics, checked.jobs
    while True:
        try:
            with warnings.catch_warnings(record=True) as planned:
                warnings.simplefilter("always", RuntimeWarning)
                cmp.make_plan(A, f, chosen, args.rounds_budget, lr=lr, repeats=args.repeats, seed=args.seed,
                              tracker=args.tracker, backend=args.backend, mg_rounds=args.mg_rounds,
                              metric=metrics[0] if metrics else None, metrics=metrics, lr_source=sources or None,
                              hyper=hyper or None, jobs=checked.jobs)
            for w in planned:
                said = str(w.message)
                if ("runs only" in said or UNCONVERGED_WORDS in said) and root and said not in early:
                    early.add(said)
                    print(f"rowstoch: warning: {said}", file=sys.stderr)
            break
        except MemoryError:
            if args.jobs is not None or min(checked.jobs, len(specs)) <= 1:
                raise
            checked.jobs = min(checked.jobs, len(specs)) - 1
    if checked.jobs < asked:
        say(f"--jobs {checked.jobs}: {min(asked, len(specs))} processes (each with its copy of the problem and "
            f"its methods' blocks) do not fit in the memory available")


def _tuned_labels(args, problems, several):
    """The methods whose rate is tuned in some graph or setting (no ``--lr`` for them, and not kept from a
    resumed comparison there, where it keeps its rate), in order, each once."""
    tuned = []
    for gname, sname, _, _, specs, lr, *_ in problems:
        previous = _previous_of(args, gname, sname if several else None)
        kept = set(previous["algorithm"]) if previous is not None and "algorithm" in previous.columns else set()
        tuned += [label for label, _, _ in specs if not isinstance(lr, float) and label not in (lr or {})
                  and label not in kept and label not in tuned]
    return tuned


def _run_problems(args, problems, checked, metric, live, early, root, say):
    """Each graph and setting's methods run (:func:`~rowstoch_fast.compare.compare`), each method's results written
    as it finishes (every table replaced atomically), each setting's summary printed. Returns the frames of the
    settings that ran and whether the comparison was interrupted. An error writes what finished, then is
    raised."""
    import warnings

    from .. import compare as cmp
    from ..compare.outputs import slugs
    from ..composite import UNCONVERGED_WORDS
    from ..runner import BELOW_OPTIMUM_WORDS

    show = print if root else (lambda *a, **k: None)  # its results
    metrics, cost, several = checked.metrics, checked.cost, len(checked.settings) > 1
    frames, interrupted, warned = [], False, set(early)
    rows_cache = {}  # (each finished method's summary row, computed once: the tables are rewritten after each
    # method, and ranking them all again from their records cost the default comparison 2.6 s of 4.4)
    places = slugs([gname + (f", {sname}" if sname else "") for gname, sname, *_ in problems],
                   os.path.join(args.out, "checkpoints"))  # (their checkpoints' folders)
    jobs = checked.jobs
    for gname, sname, ns, A, specs, lr, f, sources, hyper, chosen in problems:
        where = gname + (f", {sname}" if sname else "")
        say(f"{where} (n = {A.n}, {network_options.words(ns)}): {_counted(len(specs), 'algorithm')}, "
            f"{_counted(args.rounds_budget, 'communication round')} each, {_counted(args.repeats, 'repetition')}, "
            f"ranked by {metric}"
            + (f", {jobs} processes" if jobs > 1 and len(specs) > 1 else ""), flush=True)

        def labelled(frame, gname=gname, sname=sname):
            frame = frame.copy() if cost is None else report.with_cost(frame, cost)
            frame.insert(0, "graph", gname)
            if several:
                frame.insert(1, "setting", sname)
            return frame  # (a kept method's tuning record too: the previous frame's, _previous_of)

        def write_so_far(frame):  # each method's results as it finishes, every table replaced atomically
            if root and len(frame):
                now = frames + [labelled(frame)]
                cmp.write_tables(now, args.out, metrics, caption=_caption(args, problems),
                                 kept=_not_reached(args, now), cache=rows_cache)
                if live is not None:
                    live(now)

        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", RuntimeWarning)
                try:
                    frame = cmp.compare(A, f, chosen, args.rounds_budget, lr=lr, repeats=args.repeats,
                                        seed=args.seed, tracker=args.tracker, backend=args.backend,
                                        mg_rounds=args.mg_rounds, progress=checked.progress, metric=metric,
                                        metrics=metrics, lr_source=sources or None, hyper=hyper or None,
                                        checkpoint_dir=os.path.join(args.out, "checkpoints", places[where]),
                                        previous=_previous_of(args, gname, sname if several else None),
                                        jobs=jobs, on_result=write_so_far,
                                        log=lambda line: say("  " + line, flush=True))
                    # (under MPI, past the comparison's last collective: a signal from here on, on any rank,
                    # is held until rank 0 has written, and the ranks leave together: _wait_for_rank_zero)
                    args.ranks_wait = args.backend == "mpi" and (
                        (gname, sname) == problems[-1][:2] or bool(frame.attrs.get("interrupted")))
                except Exception as exc:  # what finished (exc.frame, earlier settings) is written, then the error
                    # (under MPI, an error of rank 0's alone in the last setting, its last table unwritable: the
                    # others wait for it as they would have for its outputs)
                    args.ranks_wait = args.backend == "mpi" and (gname, sname) == problems[-1][:2]
                    if live is not None:
                        live.flush()
                    _write_finished_comparison(frames, getattr(exc, "frame", None), labelled, args, root,
                                               metrics, problems, checked.x_axis, checked.formats)
                    raise
        except (ValueError, TypeError, RuntimeError) as exc:
            raise UsageError(_as_options(str(exc), _COMPARE_OPTIONS)) from exc
        for w in caught:  # the budget warning, the methods that run without the network model; a diverging or
            # growing baseline is reported in the table instead
            said = str(w.message)
            key = said.split(" not run over")[0]  # (the methods it names: once a comparison, whatever the
            # layers of each setting; it was repeated for every setting of a sweep)
            if ("runs only" in said or "communication model" in said or BELOW_OPTIMUM_WORDS in said
                    or UNCONVERGED_WORDS in said) and root and key not in warned:  # (f*'s solver that ran out: the
                # optimum only that accurate, which no table says; dropped here, helper 265)
                warned.add(key)
                print(f"rowstoch: warning: {said}", file=sys.stderr)
        if len(frame):
            frame = labelled(frame)
            frames.append(frame)
            beside = metrics[1:] if args.metric is not None else ()  # (those asked for, printed beside)
            if getattr(args, "quiet", False) and len(problems) > 1:  # (-q: which graph and setting, still)
                show(f"{where}:")
            show(cmp.format_summary(_one_section(cmp.summary(frame, metrics=beside))), flush=True)
        if frame.attrs.get("interrupted"):
            interrupted = True
            break
    return frames, interrupted


def _write_results(args, frames, interrupted, problems, checked, into_itself, say):
    """Rank 0's outputs of a comparison that ran: the tables, figures and settings written together (a signal
    then ends the command), or, where nothing finished, what the folder holds and how to go on. Returns the exit
    status: 130 when interrupted."""
    from .. import compare as cmp

    if not frames:  # (the settings and the runs' states are written: "nothing written" had sent helper 219 to
        # run the command again, refused for an --out not empty)
        print(f"rowstoch: interrupted before any algorithm finished: no results yet; {args.out} holds "
              f"{' and '.join(_beside(args.out)) or 'the comparison'}: --resume {shlex.quote(args.out)} continues "
              "it",  # (quoted as a shell takes it: a folder with a space, helper 220)
              file=sys.stderr)
        return 130
    titles = _titles(args, frames, problems)
    with signals_held():  # (the tables, figures and settings written together: a signal then ends the command)
        kept = _not_reached(args, frames) if interrupted else None
        written = cmp.write_outputs(frames, args.out, checked.metrics, checked.x_axis, checked.formats,
                                    caption=_caption(args, problems) + (_unfinished(frames, kept, problems)
                                                                        if interrupted else ""), titles=titles,
                                    kept=kept)
        # (finished: every method of this comparison was reached; records of none of them are not carried on)
        if into_itself and not interrupted:  # (once they all ran: the settings say what compare.csv holds)
            _update_experiment(args.out, args.repeats)  # (the copy too: experiment.json may say them already)
        beside = _beside(args.out)
        (print if interrupted else say)(f"wrote {', '.join(os.path.join(args.out, n) for n in written)}"
                                        + (f"; beside them {' and '.join(beside)}" if beside else "")
                                        + (" (interrupted: what finished; --resume continues it)" if interrupted
                                           else ""))
    return 130 if interrupted else 0


def _beside(out):
    """What a comparison's folder ``out`` holds besides its results, in words: ``["experiment.json (the settings)",
    "checkpoints/ (the runs' states, for --resume)"]``, those that exist."""
    return [f"{name} ({what})" for name, what in (("experiment.json", "the settings"),
                                                  ("checkpoints/", "the runs' states, for --resume"))
            if os.path.exists(os.path.join(out, name))]


def _methods_apart(args, gname, f, built):
    """The methods that some settings of a sweep run and others do not, on the graph ``gname`` (``built``:
    ``[(setting, its args, its network)]``). Asked for (--algorithms): every one runs in every setting, and one
    that a setting refuses and another runs is refused naming that setting (the refusal for the network as a whole
    had advised ``--undirected --weights metropolis`` for dgd on the directed ring, which runs it at loss 0). Not
    asked for: the default methods each setting leaves out, by reason, into ``args.left_out[gname, setting]`` (said
    on the terminal and in the caption: the sections of a sweep had differed silently, 26 methods at loss 0 and 17
    at loss 0.1, helper 233)."""
    from ..algorithms import labels as listed
    from ..compare.plan import default_algorithms, not_running

    if len(built) < 2:
        return
    if args.algorithms:
        said = []
        for label in dict.fromkeys(s.strip() for s in args.algorithms.split(",") if s.strip()):
            refused = [(sname, why) for sname, _, A in built for why in not_running([label], A)]
            if refused and len(refused) < len(built):  # (refused everywhere: parse_algorithms's refusal, its
                # advice for another network)
                runs = [sname for sname, _, _ in built if sname not in dict(refused)]
                said.append(f"{label!r} does not run in the setting{'s' if len(refused) > 1 else ''} "
                            f"{', '.join(sname for sname, _ in refused)} ({refused[0][1]}), only in {', '.join(runs)}")
        if said:
            raise UsageError("--algorithms: " + "; ".join(said) + ": each method asked for runs in every setting; "
                             "drop it from --algorithms (without --algorithms each setting runs the default methods "
                             "that run there), or the settings that refuse it from the sweep")
        return
    defaults = {sname: default_algorithms(A, f) for sname, _, A in built}
    every = [label for label in listed() if any(label in labels for labels in defaults.values())]
    for sname, _, A in built:
        lacking = [label for label in every if label not in defaults[sname]]
        if lacking:
            args.left_out[gname, sname] = (len(every), not_running(lacking, A))


def _left_out_words(args, problems):
    """One line per setting of ``problems`` that leaves default methods out (:func:`_methods_apart`): how many of
    the default methods of its graph, why, and which."""
    graphs = {gname for gname, *_ in problems}
    lines = []
    for (gname, sname), (total, reasons) in getattr(args, "left_out", {}).items():
        where = f"{gname}, {sname}" if len(graphs) > 1 else sname
        head = f"{where}: {sum(map(len, reasons.values()))} of the {total} default methods left out"
        lines.append(f"{head} ({next(iter(reasons))}): {', '.join(next(iter(reasons.values())))}"
                     if len(reasons) == 1 else
                     head + ": " + "; ".join(f"{', '.join(labels)} ({why})" for why, labels in reasons.items()))
    return lines


def _counted(count, noun):
    """``"1 algorithm"``, ``"2 algorithms"`` (the narration had said "1 algorithms", helper 219)."""
    return f"{count} {noun}{'s' if count != 1 else ''}"


def _one_section(table):
    """A summary of one graph and setting without those columns (printed under its own heading)."""
    from ..compare import tables

    return table.drop(columns=[g for g in tables.GROUPS if g in table.columns])


#: The most nodes of the dense stand-in network an experiment file's hyperparameters are checked on.
_STAND_IN_NODES = 256


def _check_file_hyper(path, label, cls, rounds, values, tracker, nodes):
    """``[algorithms.LABEL]``'s hyperparameters as ``cls``'s constructor checks them, on a stand-in every algorithm
    takes (the network's ``nodes``, up to :data:`_STAND_IN_NODES`; past that, as many as a per-node list holds, or
    4; their values, not the problem), refused naming the file and table; they were refused once the comparison ran,
    after other methods had written their results."""
    import numpy as np

    from ..mixing import MixingMatrix

    n = nodes if nodes <= _STAND_IN_NODES else next((len(v) for v in values.values() if isinstance(v, list)), 4)
    stand_in = MixingMatrix(np.full((n, n), 1.0 / n), stochastic="doubly")  # (symmetric, doubly stochastic)
    values = dict(values)
    try:
        cls.build(stand_in, np.zeros((n, 1)), 1e-3, rounds=values.pop("rounds", rounds),
                  tracker=values.pop("tracker", tracker), **values)
    except (ValueError, TypeError) as exc:
        raise UsageError(f"{path}: [algorithms.{label}] {exc}") from None



def _not_reached(args, frames):
    """The records of the comparison ``--resume`` continues whose graph, setting and algorithm ``frames`` do not
    hold yet (None where there are none): written on into compare.csv until the run reaches them."""
    import pandas as pd

    previous = getattr(args, "previous", None)
    if previous is None or not len(previous) or "algorithm" not in previous.columns:
        return None
    keys = [c for c in ("graph", "setting", "algorithm") if c in previous.columns]
    done = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=keys)

    def key(frame):
        present = [c for c in keys if c in frame.columns]
        return pd.MultiIndex.from_frame(frame[present].astype(object).fillna("").astype(str))

    if not set(keys) <= set(done.columns):
        rest = previous.copy()
    else:
        rest = previous[~key(previous).isin(key(done))].copy()
    rest.attrs["rates"] = getattr(args, "previous_tuning", None) or {}  # (their lr.json entries: written on too)
    return rest if len(rest) else None


def _rows_of(frame, gname, sname=None):
    """The rows of graph ``gname`` (and setting ``sname``) of a comparison's records (a ``graph`` column)."""
    part = frame[frame["graph"].astype(str) == str(gname)]
    if sname is not None and "setting" in part.columns:
        part = part[part["setting"].astype(object).fillna("").astype(str) == str(sname)]
    return part


def _previous_of(args, gname, sname=None):
    """The records of graph ``gname`` (and setting ``sname``) of the comparison ``--resume`` continues (None
    otherwise)."""
    previous = getattr(args, "previous", None)
    if previous is None or "graph" not in previous.columns:
        return None
    part = _rows_of(previous, gname, sname)
    if len(part):  # (the tuning that chose each kept rate, lr.json's: the tables and tuning.png keep it, and a run
        # interrupted in its evaluation is judged with it again, where its diagnosis had lost the rates tried)
        from ..compare.outputs import _title, tuning_from_json

        saved = ((getattr(args, "previous_tuning", None) or {}).get(_title(part)) or {}).get("tuning") or {}
        part.attrs["tuning"] = {label: tuning_from_json(record) for label, record in saved.items()}
    part = part.drop(columns=[c for c in ("graph", "setting") if c in part.columns])
    part.attrs["identity_checked_by"] = "experiment.json"  # (_read_resumed_comparison compared the settings)
    return part if len(part) else None


#: ``rowstoch compare`` options that a file's settings map to (its dest -> the option written).
_FILE_OPTIONS = {"objective": "--objective", "metric": "--metric", "format": "--format"}


def _read_experiment_file(args):
    """``--config FILE`` / ``--preset NAME``: the file's settings become the options not written on the command line
    (those win); returns its ``{algorithm: settings}``."""
    from .. import config

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
        options, algorithms, raw = config.load(path, named_elsewhere="--algorithms" in args.given)
    except config.ConfigError as exc:
        raise UsageError(str(exc)) from None
    args.config_file = os.path.abspath(path)
    flags = {name: flag for name, flag, _ in network_options.spellings()}  # (the layers' options as declared)
    keys = {name: key for name, _, key in network_options.spellings()}
    where = {dest: f"[{table}] {key}" for table, body in config.schema().items() for key, (dest, _) in body.items()}
    args.file_name, args.file_communication, args.file_keys = os.fspath(path), {}, {}
    def flag_of(dest):
        return _FILE_OPTIONS.get(dest) or flags.get(dest) or "--" + dest.replace("_", "-")

    written = set(args.given) | {"--" + o[len("--no-"):] for o in args.given if o.startswith("--no-")}  # (the
    # options on the command line, --no-X writing --X: named as flags in a refusal; every other option the file
    # could set by its key; helper 181: a file's undirected = true turned off by --no-undirected was refused with
    # "add [network] undirected")
    args.file_spelling = {flag_of(dest): name for dest, name in where.items() if flag_of(dest) not in written}
    args.command_line, args.file_defaults = written, {}  # (a file's option that a choice of the command line leaves
    # unread is dropped: _common.dropped_unread)
    for dest, value in options.items():
        option = flag_of(dest)
        if option not in args.given and "--no-" + option[2:] not in args.given:  # (--no-undirected wins too)
            if dest in ("matrix", "data_file"):
                value = _file_relative(value, path)
            elif dest in keys and isinstance(value, str) and "@" in value:  # (per-node values from a file: @FILE)
                items = network_options.split_items(value, lambda f: os.path.isfile(_file_relative(f, path)))
                value = ",".join("@" + _file_relative(item[1:], path) if item.startswith("@") else item
                                 for item in items)
            args.file_defaults[option] = (dest, getattr(args, dest, None))
            setattr(args, dest, value)
            args.given.add(option)  # set: the rules on options that would not be read apply to it too
            if dest in keys:  # (a refusal of its value names its key: _as_in_the_file)
                args.file_communication[option] = keys[dest]
            elif dest in where:
                args.file_keys[option] = args.file_keys[dest] = where[dest]  # (the flag, and the name a library
                # message starts with: "batch must be >= 1")
    replaced = []  # (the command line wins over the file's tables too: --tracker and --mg-rounds had lost to a
    # table's tracker and rounds without a word, and experiment.json named the setting that did not run, helper 266)
    for option, key in (("--tracker", "tracker"), ("--mg-rounds", "rounds")):
        if option in written:
            for name, table in algorithms.items():
                if key in table and (key != "rounds" or name.startswith("mg-")):
                    del table[key]
                    replaced.append((option, f"[algorithms.{name}] {key}"))
    args.replaced_keys = replaced
    if args.file_defaults and not _file_reads_its_keys(args, options, flag_of, written):  # (a file that leaves a key
        # unread by itself: refused as before, naming the key, whatever the command line writes; helper 271)
        args.file_defaults = {}
    if "--algorithms" not in args.given:
        args.algorithms = ",".join(algorithms)
        args.file_keys["--algorithms"] = "[algorithms]"
    else:  # (the command line wins: the file's tables of the algorithms it leaves out are said, not dropped unsaid,
        # helper 219: their lr and rounds had vanished)
        chosen = {name.strip() for name in (args.algorithms or "").split(",")}
        args.unused_tables = [f"[algorithms.{name}]" for name in raw.get("algorithms", {}) if name not in chosen]
    return algorithms


def _file_reads_its_keys(args, options, flag_of, written):
    """Whether the experiment file's own choices read every key it sets: ``args`` with each option the command line
    wrote (``written``) put back to the file's value (``options``, by destination; ``flag_of`` its option) or, where
    the file set none, to the command's default, checked by the rules that refuse an unread option (the problem's,
    the network layers', ``--cost-weights``'; False where the defaults are not known). Only then may
    :func:`._common.dropped_unread` drop a key that a choice of the command line leaves unread: a file's ``k``
    without a ``compress``, its ``samples_per_node`` beside the same ``--objective`` it names, its ``topology``
    beside its own ``matrix`` had been dropped as if the command line had replaced their choice (helper 271)."""
    import argparse

    defaults = getattr(args, "command_defaults", None)  # (the parser's: cli.main sets them)
    if not defaults:
        return False
    alone = argparse.Namespace(**vars(args))
    for dest in defaults:
        if flag_of(dest) in written:
            setattr(alone, dest, options[dest] if dest in options else defaults[dest])
    alone.given = {flag_of(dest) for dest in options}
    alone.file_defaults = {}  # (refused, not dropped)
    try:
        _refuse_unread(alone, _problem_rules(alone))
        network_options.settings(alone, alone.given)
    except Exception:  # noqa: BLE001 - a key unread, or a value refused: the file alone is not sound
        return False
    return (alone.x == "cost") == (alone.cost_weights is not None)


def _file_relative(value, path):
    """A relative path an experiment file names (``matrix``, ``data_file``, a per-node ``@FILE``): from the current
    folder, as on the command line, or else from the file's own folder (where a file kept beside its data finds
    it, wherever it is run from)."""
    if not isinstance(value, str) or os.path.isabs(value) or os.path.exists(value):
        return value
    beside = os.path.join(os.path.dirname(os.path.abspath(path)), value)
    return beside if os.path.exists(beside) else value


def _file_key(args, option):
    """``"FILE: [table] key"``: the experiment file's key that set ``option`` (not written on the command line), or
    None."""
    key = getattr(args, "file_keys", {}).get(option)
    return None if key is None else f"{args.file_name}: {key}"


def _as_in_the_file(args, exc):
    """A refusal in the words of the experiment file that set what it refuses: where it names an option the file's
    ``[communication]`` table set (not written on the command line), ``FILE: [communication] ...`` with each layer
    option it names spelled as its key (as declared: ``Option.key``), those written on the command line as their
    flags; where it names an option of another table, ``FILE: ...`` with that option as ``[table] key``; else
    ``exc`` itself. An "add --X" where ``--no-X`` was written (with or without a file) is "drop --no-X"; the
    library's advice on building the network is in the words of the route that sets it (:func:`._common.
    advice_as_written`), with or without a file."""
    text = str(exc)
    undone, dropped = drop_turned_off(text, args.given)  # (before the file's words, which name those flags as flags)
    if dropped and not isinstance(exc, RanksDiffer):
        exc, text = UsageError(undone), undone
    advised = advice_as_written(args, text)  # (the library's advice on the network: the file's keys where it set
    # them, before its other words, which name the options' flags as "[network] undirected" and no value)
    if advised != text and not isinstance(exc, RanksDiffer):
        exc, text = UsageError(advised), advised
    if (getattr(args, "file_name", None) is None or text.startswith(f"{args.file_name}:")
            or isinstance(exc, RanksDiffer)):  # (the ranks' commands, each as written: not the file's words)
        return exc
    hyper = re.match(r"hyper: ([^:\s]+): (.*)", text, re.S)  # (the command line's hyperparameters are the file's)
    if hyper:
        body = re.sub(r"\b(\w+)=('[^']*')", r"\1 = \2", hyper.group(2))  # (its key as written: tracker = 'perron')
        return UsageError(f"{args.file_name}: [algorithms.{hyper.group(1)}] {body}")
    flag = r"(?<![\w-])--[a-z][\w-]*(?![\w-])"
    named = [m for m in re.findall(flag, text) if m not in dropped]
    taken = getattr(args, "file_communication", {})
    if any(m in taken for m in named):  # a layer's option: its key as declared, those on the command line as flags
        written = args.given - set(taken)
        keys = {f: k for _, f, k in network_options.spellings() if f not in written}
        return UsageError(f"{args.file_name}: [communication] "
                          + re.sub(flag, lambda m: keys.get(m.group(0), m.group(0)), text))
    other = getattr(args, "file_keys", {})  # (another table's key: "FILE: [run] rounds_budget must be ...")
    spelled = {**getattr(args, "file_spelling", {}), **other}  # (and a key the file left out: "add --undirected"
    # is "add [network] undirected" to the author of a file)
    first = re.match(r"(?:unknown )?([a-z_]+)\b", text)  # ("batch must be ...", "unknown topology 'rign' ...")
    if any(m in args.given and m not in other for m in named) or named and not any(m in spelled for m in named):
        # (an option written on the command line: the message in its words, but for the keys the file set beside
        # it: "--matrix" beside the file's [network] had named the file's topology and n as flags, helper 185)
        written = {str(t).split("=", 1)[0] for t in getattr(args, "argv", ()) if str(t).startswith("--")}
        set_there = [m for m in named if m in other and m not in written]
        if not set_there:
            return exc
        return UsageError(f"{args.file_name}: "
                          + re.sub(flag, lambda m: other[m.group(0)] if m.group(0) in set_there else m.group(0), text))
    text = re.sub(flag, lambda m: spelled.get(m.group(0), m.group(0)), text)
    keyword = r"\b([a-z_]+)=('[^']*')"  # (the library's words: tracker='perron', which the file sets as a key)
    key_of = {name: spelled.get("--" + name.replace("_", "-")) for name, _ in re.findall(keyword, text)}
    said = [name for name, key in key_of.items() if key]
    text = re.sub(keyword, lambda m: f"{key_of[m.group(1)]} = {m.group(2)}" if key_of[m.group(1)] else m.group(0),
                  text)
    if first and first.group(1) in other and not any(m in other for m in named) and not said:
        return UsageError(f"{args.file_name}: {other[first.group(1)]}: {text}")
    return UsageError(f"{args.file_name}: {text}")  # (at least the file: "cannot build exponential with n=-3")


#: What may be written beside ``--resume DIR`` (the rest is the comparison's own, in DIR/experiment.json).
_RESUME_OPTIONS = ("--resume", "--repeats", "--no-progress", "--progress", "--out", "--jobs")


#: The copy of a comparison's settings that ``--resume`` checks experiment.json against (an edit is refused).
_FROZEN = ".rowstoch-settings.json"
#: experiment.json's note of the repetitions a resume has begun to add (``--resume DIR --repeats N``, not finished).
_GROWING = "growing_to"
_KEEP = object()  # (_update_experiment's growing not given: the note left as it is)


def _read_resumed_comparison(args):
    """``--resume DIR``: the settings of the comparison in DIR (its experiment.json) become the options, and its
    records (compare.csv) what is kept; returns its ``{algorithm: settings}``. Settings edited in experiment.json
    since the comparison started are refused, naming the key (only ``repeats`` may grow)."""
    import json

    import pandas as pd

    from ..compare.outputs import read_records

    folder = args.resume
    if not os.path.isdir(folder):
        raise UsageError(f"--resume {folder!r} is not a folder (the --out folder of a comparison)")
    if not os.path.isfile(os.path.join(folder, "experiment.json")):
        raise UsageError(f"--resume {folder!r} holds no experiment.json: it is not the --out folder of a comparison")
    other = sorted(o for o in args.given if o.startswith("--") and o not in _RESUME_OPTIONS)
    if other:
        raise UsageError(f"--resume continues the comparison {folder!r} with its own settings (experiment.json): "
                         f"drop {', '.join(other)} (only --repeats, for more repetitions, may change)")
    def read(name, how):  # (each file named where it cannot be read: a cut lr.json was blamed on the other two)
        try:
            return how(os.path.join(folder, name))
        except (OSError, ValueError, KeyError) as exc:
            raise UsageError(f"--resume {folder!r}: its {name} cannot be read ({exc}); start a new comparison") \
                from None

    def read_json(path):
        with open(path) as fh:
            return json.load(fh)

    saved = read("experiment.json", read_json)
    settings = saved.get("settings") if isinstance(saved, dict) else None
    if not (isinstance(settings, dict) and {"rounds_budget", "repeats"} <= set(settings)):  # (a list had ended in
        # a traceback, and {"settings": {"n": 8}} had run the whole default comparison into the folder: helper 168)
        raise UsageError(f"--resume {folder!r}: its experiment.json is not a comparison's (no settings with "
                         "rounds_budget and repeats): it is not the --out folder of a comparison")
    algorithms = saved.get("algorithms") or {}
    args.own_draws = saved.get("own_draws")  # (None: a version whose repetitions shared a method's own draws)
    records = os.path.join(folder, "compare.csv")  # (none yet: killed before any method finished)
    previous = read("compare.csv", read_records) \
        if os.path.isfile(records) else pd.DataFrame()
    if os.path.isfile(os.path.join(folder, "lr.json")):  # (the kept methods' tuning records: written on with theirs)
        args.previous_tuning = read("lr.json", read_json)
    elif len(previous) and "tuned" in set(previous.get("lr_source", pd.Series(dtype=object)).astype(str)):
        # (lr.json is written before compare.csv: removed since. The kept methods' rates and statuses are
        # compare.csv's, the tuning records of those tuned are gone: said, where lr.json was rewritten silently)
        args.lost_tuning = folder
    frozen = read(_FROZEN, read_json) if os.path.isfile(os.path.join(folder, _FROZEN)) else None
    if frozen is not None and not (isinstance(frozen, dict) and isinstance(frozen.get("settings"), dict)):
        raise UsageError(f"--resume {folder!r}: its {_FROZEN} is not the copy of a comparison's settings (no "
                         "settings in it); start a new comparison")
    if frozen is None and len(previous):  # (without the copy an edit of experiment.json cannot be told: a seed
        # edited ran one method on other streams beside the others' kept records, one table: helper 168)
        raise UsageError(f"--resume {folder!r}: its {_FROZEN} (the settings the comparison started with, which an "
                         "edited experiment.json is checked against) is missing, and compare.csv holds records; "
                         "start a new comparison (copy a folder with its dotfiles to resume it elsewhere)")
    if frozen is not None:
        for key in sorted(set(frozen["settings"]) | set(settings)):
            old, new = frozen["settings"].get(key), settings.get(key)
            if old != new and not (key == "repeats" and isinstance(new, int) and new > old):
                raise UsageError(f"--resume {folder!r}: its experiment.json was edited: {key} = {new!r}, but the "
                                 f"comparison ran with {key} = {old!r}; only repeats may grow (start a new "
                                 f"comparison for other settings)")
        if frozen.get("algorithms", {}) != algorithms:
            from ..network import first_difference

            key, old, new = first_difference(frozen.get("algorithms", {}), algorithms, "algorithms.") or \
                ("algorithms", frozen.get("algorithms"), algorithms)
            raise UsageError(f"--resume {folder!r}: its experiment.json was edited: {key} = {new!r}, but the "
                             f"comparison ran with {key} = {old!r}; only repeats may grow (start a new comparison "
                             "for other settings)")
    # a layer of the user's own, registered by the launcher that started the comparison: resumed without it, its
    # setting had been dropped silently and the runs went on over reliable links (helper 238); one installed but not
    # set is no matter (its options' defaults are in every experiment.json, helper 239). A folder written before
    # "layers" was: its settings this command lacks that are set
    from ..network.base import LAYERS

    used = saved.get("layers")
    missing = [name for name in used if name not in LAYERS] if isinstance(used, list) else sorted(
        key for key in set(settings) - {*_SETTINGS, *network_options.names(), *_SETTINGS_AFTER}
        if settings[key] not in (None, False))
    if missing:
        what = (f"the comparison ran over the network layer {missing[0]!r}, which no module imported here registers"
                if isinstance(used, list) else
                f"its experiment.json sets {missing[0]} = {settings[missing[0]]!r}, which no option of this command "
                "has")
        raise UsageError(f"--resume {folder!r}: {what}; resume it the way it was started, with the module that "
                         "registers that layer imported")
    jobs = saved.get("jobs")
    if "--jobs" not in args.given and type(jobs) is int and jobs >= 1:  # (the start's, where it gave one: a
        # comparison begun with --jobs 1, one copy of the problem in memory, had resumed on every core, helper 238)
        args.jobs = jobs
    held = int(previous.groupby("algorithm")["rep"].nunique().max()) if len(previous) and \
        {"algorithm", "rep"} <= set(previous.columns) else 0  # (an interrupted growth: more than the settings')
    for key, value in settings.items():
        if key == "repeats":
            args.saved_repeats = value
            if "--repeats" in args.given:
                if args.repeats < max(value, held):
                    raise UsageError(f"--repeats {args.repeats} is fewer than the {max(value, held)} repetitions the "
                                     f"comparison holds; it can only grow")
                continue
            growing = saved.get(_GROWING, value)  # (a growth begun: a plain resume goes on with it, rows or none)
            if not (isinstance(growing, int) and not isinstance(growing, bool) and growing >= value):
                raise UsageError(f"--resume {folder!r}: its experiment.json's {_GROWING} = {growing!r} is not a "
                                 f"count of repetitions of at least repeats = {value!r}; remove it, or give "
                                 "--repeats")
            value = max(value, held, growing)  # (a repetition compare.csv holds is never dropped)
        setattr(args, key, value)
    _run_where_it_ran(args, saved.get("folder"))
    files, now = saved.get("node_files", {}), network_options.node_files(args)
    for item in sorted(set(files) | set(now)):  # (a file of values per node: the text names it, not what it holds)
        if files.get(item) != now.get(item):
            raise UsageError(f"--resume {folder!r}: {item} holds other values than when the comparison started "
                             f"(their digest was {files.get(item)}, it is {now.get(item)} now); put its values back, "
                             "or start a new comparison")
    if "--out" not in args.given:
        args.out = args.resume
    args.previous = previous if len(previous) else None
    args.saved_graphs = saved.get("graphs") or {}
    return algorithms


def _run_where_it_ran(args, ran_in):
    """A comparison resumed from another folder than the one it was started in (experiment.json's ``folder``):
    the relative paths its settings name (``--matrix``, ``--data-file``, a per-node ``@FILE``) are read from where
    it ran, as when it started (they were read from the caller's folder: a job script resuming from its own folder
    was refused "matrix file 'A.npy' does not exist", or read another file of that name). The process works in that
    folder until :func:`cmd_compare` returns (--resume and --out, named from the caller's, made absolute first);
    where that folder is gone, paths are read from the caller's folder, as before."""
    if not isinstance(ran_in, str) or not os.path.isdir(ran_in):
        missing = [f"--{dest.replace('_', '-')} {value!r}" for dest, value in
                   (("matrix", getattr(args, "matrix", None)), ("data_file", getattr(args, "data_file", None)))
                   if isinstance(value, str) and not os.path.isabs(value) and not os.path.exists(value)]
        if missing:  # (else the loader's bare "does not exist")
            where = (f"was started in {ran_in!r}, which is gone" if isinstance(ran_in, str) else
                     "does not say where it was started (its experiment.json is older than that record)")
            what = "is a relative path that does" if len(missing) == 1 else "are relative paths that do"
            raise UsageError(f"--resume {args.resume!r}: {' and '.join(missing)} {what} not exist here, and the "
                             f"comparison {where}: resume it from the folder it was started in")
        return
    here = os.getcwd()
    if os.path.samefile(ran_in, here):
        return
    args.resume = os.path.abspath(args.resume)
    if args.out is not None:
        args.out = os.path.abspath(args.out)
    args.left_from = here
    os.chdir(ran_in)


def _digests(described):
    """``{"objective.data_sha1": ..., "network.base.sha1": ...}``: the fingerprints of what a comparison read from
    files or drew (its data, its matrices), from the ``describe()`` dicts of its objective and network."""
    out = {}

    def walk(value, path):
        if isinstance(value, dict):
            for key, item in value.items():
                walk(item, f"{path}.{key}")
        elif path.endswith("sha1"):
            out[path.lstrip(".")] = value

    walk(described, "")
    return out


def _check_resumed_data(args, title, A, f):
    """``--resume``: a UsageError where the data or a matrix of ``title`` (a graph, and setting) is not what the
    comparison ran on (experiment.json's fingerprints): a --data-file or --matrix edited since had the kept methods'
    records put in one table with runs on the new one."""
    from ..network import describe

    saved = (getattr(args, "saved_graphs", None) or {}).get(title)
    if not saved or not args.resume:
        return
    then = _digests({"objective": saved.get("objective"), "network": saved.get("fingerprint")})
    now = _digests({"objective": f.describe(), "network": describe(A)})
    for key in then:
        if key in now and then[key] != now[key]:
            what = "data" if key.startswith("objective") else "matrix"
            raise UsageError(f"--resume {args.resume!r}: {title}'s {what} is not what the comparison ran on ({key} "
                             f"was {then[key]}, it is {now[key]} now: {'--data-file' if what == 'data' else '--matrix'}"
                             f" changed since?); put it back, or start a new comparison")


#: The options experiment.json records (the resolved settings of a comparison): these, the network layers' options
#: (read from the registry when it is written: a layer registered after this module loaded is in), then
#: :data:`_SETTINGS_AFTER`.
_SETTINGS = ("config_file", "topology", "n", "matrix", "normalize", "undirected", "weights", "objective", "total",
             "batch", "samples_per_node", "d", "rho", "lam", "l1", "heterogeneity", "sigma", "data_seed", "data_file",
             "test_samples", "metrics_module", "split", "algorithms")
_SETTINGS_AFTER = ("rounds_budget", "lr", "mg_rounds", "tracker", "backend", "repeats", "seed", "metric", "x",
                   "cost_weights", "format")


#: experiment.json's note of how a method's own draws (a federated method's clients) go over the repetitions: each
#: repetition on the method's seed + r (:meth:`~rowstoch_fast.algorithms.Optimizer.redrawn_options`), FedPD's with
#: skipped rounds too (on the coins of its seed). Absent in a comparison of an earlier version, whose repetitions
#: shared them; "per repetition" in one whose FedPD with skipped rounds shared its clients.
OWN_DRAWS = "per repetition, FedPD's skipped rounds too"


def _write_experiment(args, problems, file_algorithms):
    """experiment.json in --out: the resolved settings (every option, the file's algorithms), the package version
    and build_info(), so that the results say what made them; and the copy --resume checks it against."""
    import json

    from .. import __version__, build_info
    from ..compare.outputs import atomic_write
    from ..network import describe

    keys = (*_SETTINGS, *network_options.names(), *_SETTINGS_AFTER)
    settings = json.loads(json.dumps({k: getattr(args, k, None) for k in keys}, default=str))
    graphs = {}
    for g, sname, ns, A, specs, _, f, _, _, _ in problems:
        graphs[g + (f" / {sname}" if sname else "")] = {"n": A.n, "network": network_options.words(ns),
                                                         "algorithms": [label for label, _, _ in specs],
                                                         "objective": f.describe(), "fingerprint": describe(A)}
    document = {"settings": settings, "algorithms": file_algorithms, "graphs": graphs,
                "layers": network_options.set_apart(args),  # (what a resume without their modules refuses)
                "node_files": network_options.node_files(args), "folder": os.getcwd(), "version": __version__,
                "build_info": build_info(), "argv": getattr(args, "argv", sys.argv[1:]),
                "jobs": args.jobs,  # (--jobs as given, or as a resume took it: a resume's own argv has none)
                "own_draws": OWN_DRAWS}
    atomic_write(os.path.join(args.out, "experiment.json"),
                 lambda fh: json.dump(document, fh, indent=1, default=str))
    atomic_write(os.path.join(args.out, _FROZEN),
                 lambda fh: json.dump({"settings": settings, "algorithms": file_algorithms}, fh, default=str))


def _figure_formats(args):
    """``--format``'s figure formats (none: ``[]``, the tables alone), its default the environment variable
    ``ROWSTOCH_FORMAT`` where it is set, else png; ``args.format`` becomes the text resolved (experiment.json records
    it: a resume draws what the comparison drew)."""
    text, option = args.format, "--format"
    if text is None:
        text = os.environ.get("ROWSTOCH_FORMAT", "").strip() or "png"
        option = "the environment variable ROWSTOCH_FORMAT (the default of --format)"
    values = [v.strip().lower() for v in str(text).split(",") if v.strip()]
    args.format = ",".join(values) or str(text)  # (as written, in lower case: " PNG" is png)
    if "none" in values:
        if len(values) > 1:
            raise UsageError(f"{option}: none (the tables alone, no figure) takes no other format; got {text!r}")
        return []
    return _list_option(args.format, option, report.FORMATS)


def _update_experiment(folder, repeats=None, growing=_KEEP):
    """A comparison resumed into its folder and finished: with more repetitions (``repeats``), its experiment.json
    (and the copy --resume checks it against) say so; where experiment.json does not say where the comparison
    runs (an earlier version's), it records this working directory, where the resume read its relative paths
    (a later resume from elsewhere was told to resume from the folder it was started in, which nothing named).
    The rest as the comparison started. With ``growing`` (before a resume into its folder runs): experiment.json
    alone, its note of the repetitions the resume begins to add (``growing_to``, beside its settings, until they
    all ran; ``None`` removes it)."""
    import json

    from ..compare.outputs import atomic_write

    for name in ("experiment.json",) if growing is not _KEEP else ("experiment.json", _FROZEN):
        path = os.path.join(folder, name)
        if not os.path.isfile(path):
            continue
        with open(path) as fh:
            document = json.load(fh)
        before = json.dumps(document, sort_keys=True, default=str)
        if repeats is not None:
            document["settings"]["repeats"] = repeats
            document.pop(_GROWING, None)
        if growing is not _KEEP:
            document.pop(_GROWING, None)
            if growing is not None:
                document[_GROWING] = growing
        if name == "experiment.json":
            document.setdefault("folder", os.getcwd())
        if json.dumps(document, sort_keys=True, default=str) != before:
            atomic_write(path, lambda fh, document=document: json.dump(document, fh, indent=1, default=str))


def _caption(args, problems):
    """The LaTeX table's caption of a comparison: the problem, n, the graph(s) and the full network model."""
    graphs = list(dict.fromkeys(g for g, *_ in problems))
    models = list(dict.fromkeys(network_options.words(p[2]) for p in problems))
    n = sorted({p[3].n for p in problems})
    said = [args.graph_words[g] for g in graphs]
    rules = list(dict.fromkeys(w for *_, w in said))
    if len(rules) > 1:  # (each graph its weights: the preset's caption listed three rules for four graphs without
        # saying which went with which, helper 184)
        where = "the graphs " + ", ".join(f"{g} ({w})" for g, *_, w in said) + f" (n = {', '.join(map(str, n))})"
    else:
        where = (f"the {said[0][1]}" if len(graphs) == 1 else "the graphs " + ", ".join(g for g, *_ in said)) + \
            f" (n = {', '.join(map(str, n))}, {rules[0]})"
    network = models[0] if len(models) == 1 else "the settings of the table (" + "; ".join(models) + ")"
    ranked = report.ranks_caption(args.repeats, args.repeats, max(len(p[4]) for p in problems), args.rounds_budget)
    return (f"{_objective_words(args)} on {where}, {network}: {ranked[0].lower()}{ranked[1:]}"  # (report's words: the
            # API's default caption; a table of one method and one repetition had read "every rank is shared")
            + (" R: gossip rounds per iteration (a multi-round method's several)."  # (helper 158 read it as the
               if any(label.startswith("mg-") for p in problems for label, *_ in p[4]) else "")  # repetitions)
            + (_own_draws(problems) if args.repeats > 1 else "") + _exact_averaging_words(problems)
            + "".join(f" {words[0].upper()}{words[1:]}." for words in _left_out_words(args, problems)))  # (a
    # sweep's sections of different methods said where they are read: helper 233)


def _exact_averaging_words(problems):
    """The caption's sentences on the methods that average exactly (a federated method, the centralized baseline):
    where a setting has a communication model, those it does not reach (their rows are reliable links' whatever the
    caption's "20% of messages lost" said, helper 273), and each federated method's clients (how many a round, how
    chosen, the local steps: the table had said none of it, and FedAvg at 30% ranked beside methods at 100%)."""
    from ..algorithms import REGISTRY
    from ..algorithms._local import DEFAULT_LOCAL_STEPS

    said, rounds = [], []
    for gname, sname, ns, A, specs, _, _, _, hyper, _ in problems:
        where = f"{gname}{', ' + sname if sname else ''}: " if len(problems) > 1 else ""
        apart = [label for label, method, _ in specs if not REGISTRY[method].matrices]
        if apart and network_options.words(ns) != "reliable links":
            said.append(where + ("No method here runs over the network's model" if len(apart) == len(specs) else
                                 f"Not over the network's model: {', '.join(apart)}")
                        + " (they average exactly, through a server or an all-reduce, as over reliable links)")
        clients = []
        for label, method, _ in specs:
            cls, options = REGISTRY[method], hyper.get(label, {})
            if not getattr(cls, "federated", False):
                continue
            m = cls.clients_for(A.n, float(options.get("participation", 1.0)))
            rule = {"uniform": "uniformly", "size": "by size", "fair": "in turn"}[options.get("selection", "uniform")]
            clients.append(f"{label} {'all ' + str(A.n) if m >= A.n else f'{m} of {A.n} ({rule})'}, K = "
                           f"{options.get('local_steps', DEFAULT_LOCAL_STEPS)} local steps"
                           + (" (client_steps of their own)" if options.get("client_steps") is not None else ""))
        if clients:
            rounds.append((where, "Clients a round: " + "; ".join(clients)))
    if len({text for _, text in rounds}) == 1:  # (the same in every setting: once, a --loss 0,0.2 sweep's too)
        rounds = [("", rounds[0][1])]
    said += [where + text for where, text in rounds]
    return "".join(f" {words}." for words in dict.fromkeys(said))  # (a label keeps its case: "Fedavg" had read)


def _unfinished(frames, kept, problems):
    """After an interruption, the caption's sentence naming the methods its tables (of ``frames``) lack, graph and
    setting by graph and setting (cut off while tuning, or not reached; those an earlier run finished, whose
    records compare.csv keeps, ``kept`` (:func:`_not_reached`), said apart), or "": the tables of an interrupted
    comparison had looked complete, the first method ranked 1 in bold, and only the console said that others were
    missing (helper 165)."""
    import pandas as pd

    def labels_of(frame, gname, sname):
        if frame is None or not len(frame) or "graph" not in frame.columns:
            return set()
        return set(_rows_of(frame, gname, sname)["algorithm"])

    done = pd.concat(frames, ignore_index=True) if frames else None
    parts, earlier = [], []
    for gname, sname, _, _, specs, *_ in problems:
        labels = [label for label, *_ in specs]
        have, old = labels_of(done, gname, sname), labels_of(kept, gname, sname)
        lacking = [label for label in labels if label not in have]
        if not lacking:
            continue
        where = f"{gname}{', ' + sname if sname else ''}: " if len(problems) > 1 else ""
        parts.append(where + ("every method" if len(lacking) == len(labels) else ", ".join(lacking)))
        earlier += [where + label for label in lacking if label in old]
    if not parts:
        return ""
    return (f" Interrupted: not in this table: {'; '.join(parts)} (--resume continues the comparison)"
            + (f"; the records of {', '.join(earlier)} from an earlier run are kept in compare.csv" if earlier
               else "") + ".")


def _own_draws(problems):
    """What the repetitions resample besides their gradients: a network's losses, sleep, delays, compression and
    noise are drawn from seeds, so a comparison runs each repetition on a draw of its own (the network redrawn by
    its number, one repetition at a time) and the spread covers the network's draws; the caption says so where a
    setting draws (in a sweep where not every one does, for those that do)."""
    each = [network_options.drawn(p[2]) for p in problems]
    drawn = list(dict.fromkeys(w for words in each for w in words))
    if not drawn:
        return ""
    where = "" if all(each) else "In the settings that draw them, e"
    return (f" {where or 'E'}ach repetition runs on its own draw of the network's {' and '.join(drawn)} "
            "(--network-seed plus the repetition's number).")


def _titles(args, frames, problems):
    """The figure rows' titles of ``frames`` (one per graph or setting, in the order of ``problems``)."""
    return [_figure_title(args, g, ns, A.n) for _, (g, _, ns, A, *_) in zip(frames, problems)]


def _figure_title(args, graph, ns, n):
    """A figure panel's title: the graph (directed or not), n and its weights, the objective and the network
    model."""
    said, _, weights = args.graph_words[graph]
    return report.escape_mathtext(f"{said} (n = {n}, {weights}), {_objective_words(args)}, "
                                  f"{network_options.words(ns)}")  # (a file's "$" drawn as it is, helper 236)


def _write_finished_comparison(frames, partial, labelled, args, root, metrics, problems, x, formats):
    """Before a comparison's error is reported: the settings that finished and the algorithms of this one, in the
    figure formats and on the x axis asked for (``x``, ``formats``: a PNG in rounds had been drawn whatever
    ``--format`` and ``--x`` said, helper 214)."""
    if partial is not None and len(partial):
        frames = frames + [labelled(partial)]
    if frames and root:
        from ..compare import write_outputs

        with signals_held():  # (written together, as a finished comparison's are)
            write_outputs(frames, args.out, metrics, x, formats, caption=_caption(args, problems),
                          titles=_titles(args, frames, problems), kept=_not_reached(args, frames))
        _error(f"the algorithms that finished before the error are in {os.path.join(args.out, 'compare.csv')}")
