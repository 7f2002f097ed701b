"""The benchmark harness: several algorithms on one problem, the same seeds and the same communication budget.

:func:`compare` runs each algorithm with :func:`~rowstoch_fast.run` (repetitions batched), for as many
iterations as its budget of communication rounds allows (an MG method spends ``R`` rounds and ``R``
mini-batches per iteration, as in eq. 14), and returns one pandas frame of everything it recorded.
:func:`summary` turns it into the comparison table and :func:`plot` into the figure (the metric against
communication rounds, one line per algorithm, the spread over repetitions as a band). ``rowstoch compare``
is the same from the command line.
"""

from __future__ import annotations

import math
import os
import time
import warnings

import numpy as np

from . import algorithms as _algorithms
from ._checks import MAX_KEY, check_int
from .algorithms import REGISTRY, method_of
from .errors import DivergenceError
from .network import base_matrix, weights_of
from .runner import Algorithm, check_metric, check_takes, run

__all__ = ["ALGORITHMS", "default_algorithms", "write_outputs", "json_tuning", "compare", "default_metric", "frame_metric",
           "parse_algorithms", "summary", "format_summary",
           "plot", "tune_lr", "TUNE_GRID"]

#: What ``rowstoch compare`` runs by default: every registered algorithm in listing order, with ``mg-NAME``
#: (Theorem 3's rounds) beside the methods that list it (:func:`rowstoch_fast.algorithms.labels`; ``compare``
#: reads the registry when called, so an algorithm registered later is in its default too).
ALGORITHMS = tuple(_algorithms.labels())
#: The learning rates ``tune=True`` tries: 1e-4 .. 10 in steps of sqrt(10) (methods that track the sum of the
#: gradients, the Pull-Diag family, run at about 1/n of the rate of those that track their average).
TUNE_GRID = tuple(float(v) for v in np.logspace(-4, 1, 11))
#: An MG method that fits fewer iterations than this into the budget gets a warning (its R is too large for it).
MIN_ITERATIONS = 10


def default_algorithms(A, objective=None):
    """What :func:`compare` runs on ``A`` when not told: every registered algorithm that runs on it (an undirected
    network's methods only where ``A`` is doubly stochastic, or losses / sleep over a symmetric doubly stochastic
    matrix: the undirected rule) and on ``objective``'s gradients (GT-SAGA only on a
    finite sum), in listing order, with the ``mg-`` forms listed."""
    return _algorithms.labels(lambda cls: cls.applies_to(A) and (objective is None or cls.takes_objective(objective)))


def parse_algorithms(names, A, mg_rounds=None):
    """``[(label, method, rounds)]`` for algorithm names: a registry name, or ``"mg-" + name`` for a
    multi-round method with ``mg_rounds`` rounds (default: Theorem 3's ``A.metrics().recommended_rounds()``)."""
    if isinstance(names, str):
        names = [s.strip() for s in names.split(",") if s.strip()]
    elif not isinstance(names, (list, tuple)):
        raise TypeError(f"algorithms must be names (a list, or one comma-separated string), got "
                        f"{type(names).__name__}")
    if not names:
        raise ValueError("algorithms: give at least one algorithm")
    bad = [v for v in names if not isinstance(v, str)]
    if bad:
        raise TypeError(f"algorithms: every name must be a string, got {type(bad[0]).__name__} {bad[0]!r}")
    out = []
    for label in names:
        method, rounds = label, 1
        if method_of(label) != label:
            method = method_of(label)
            if method not in REGISTRY or not REGISTRY[method].multi_round:
                multi = [k for k in _algorithms.labels(every_mg=True) if k.startswith("mg-")]
                raise ValueError(f"algorithms: {label!r} is not a multi-round method (those are {', '.join(multi)})")
            rounds = (check_int(mg_rounds, "mg_rounds", minimum=1) if mg_rounds is not None
                      else base_matrix(A).metrics().recommended_rounds())  # (a network: its links' metrics)
        elif label not in REGISTRY:
            known = _algorithms.labels(every_mg=True)
            raise ValueError(f"algorithms: unknown algorithm {label!r}; choose from {', '.join(known)}")
        if label in (lbl for lbl, _, _ in out):
            raise ValueError(f"algorithms: {label!r} is listed twice")
        cls = REGISTRY[method]
        if not cls.applies_to(A):
            if "W" in cls.matrices and not cls.applies_to(weights_of(A)):  # (the weights, not the messages)
                raise ValueError(f"algorithms: {label!r} runs on an undirected network's doubly stochastic W, and this "
                                 f"network is not one (build it with directed=False, weights='metropolis'; on the "
                                 f"command line --undirected --weights metropolis)")
            takes = " ".join((cls.applies_to.__doc__ or "").split()).split(". ")[0].rstrip(".")
            raise ValueError(f"algorithms: {label!r} does not run on this network ({type(A).__name__}); it takes: "
                             f"{takes}")
        out.append((label, method, int(rounds)))
    return out


def _one_run(A, objective, label, method, rounds, lr, budget, *, repeats, seed, tracker, backend, points, progress,
             hyper=None, metrics=None, checkpoint=None, resume=None, first_repeat=0):
    """(frame rows of one algorithm, its status) for one learning rate."""
    if "tracker" not in REGISTRY[method].hyper:  # compare's tracker is for the methods that have one
        tracker = "exact"
    hyper = dict(hyper or {})
    tracker = hyper.pop("tracker", tracker)
    hyper.pop("rounds", None)  # (already in ``rounds``)
    algo = Algorithm(A, lr, rounds=rounds, tracker=tracker, backend=backend, method=method, **hyper)
    iterations = max(1, budget // rounds)
    diverged = False
    start = time.perf_counter()
    try:
        h = run(algo, objective, iterations, record_every=max(1, iterations // points), repeats=repeats, seed=seed,
                progress=progress, metrics=metrics, checkpoint=checkpoint, resume=resume, first_repeat=first_repeat)
    except DivergenceError as exc:
        h, diverged = exc.history, True
    wall = time.perf_counter() - start
    frame = h.frame.copy()
    done = max(1, h.meta.get("completed_iterations", iterations))
    traffic = h.meta.get("traffic", {"messages": 0, "bytes": 0})
    frame.insert(0, "algorithm", label)
    frame["lr"] = lr
    frame["rounds_per_iteration"] = rounds
    frame["messages"] = frame["iteration"] * traffic["messages"] / done
    frame["bytes"] = frame["iteration"] * traffic["bytes"] / done
    frame["gradient_evaluations"] = frame["samples"] * A.n  # mini-batch samples over all nodes
    # a run whose gradient or loss grew a thousandfold diverges, NaN or not (the runner warned about it)
    diverged = diverged or bool(h.meta.get("grew"))
    frame["diverged"] = diverged
    frame["total_wall_seconds"] = wall
    status = "diverged" if diverged else "interrupted" if h.interrupted else "done"
    frame["status"] = status
    return frame, status


#: The tuning runs draw their mini-batches from ``seed + TUNE_SEED_OFFSET`` (wrapped to 64 bits): streams that no
#: evaluation repetition of the comparison (``seed``, repetitions 0 .. repeats-1) ever draws.
TUNE_SEED_OFFSET = 0x5EED_0000_0000
#: A candidate whose metric ends more than this factor above its own minimum over the run is rejected.
STABILITY_FACTOR = 2.0
#: A metric below this fraction of its start has converged (to rounding, for the exact methods): the stability
#: check does not compare values below it.
CONVERGED = 1e-12
#: Successive halving: the share of the budget of each rung (the last is the whole budget) ...
RUNG_FRACTIONS = (1 / 16, 1 / 4, 1.0)
#: ... and how many candidates each rung but the last keeps for the next (two reach the whole budget).
RUNG_KEEP = (4, 2)
#: Records per tuning run (the stability check reads them).
TUNE_POINTS = 20
#: Repetitions per tuning run (batched: they share every pass over the network), judged on their mean: one
#: repetition ranked the rates of a stochastic problem's noise floor by chance.
TUNE_REPEATS = 2


def default_metric(objective):
    """The metric a biased method cannot game: ``"suboptimality"`` (``f(x_bar) - f*``) where the objective knows
    its optimum, else ``"grad_norm_mean"`` (``||grad f(x_bar)||``)."""
    return "suboptimality" if objective.optimum() is not None else "grad_norm_mean"


def _judge(frame, status, metric):
    """``(score, why)`` of one tuning run: its final ``metric`` and None, or inf and why it is rejected.

    The run is rejected when it diverged, when its end is not finite or above its start, and when it ends more
    than :data:`STABILITY_FACTOR` times above its own minimum (a rate that is best at some horizon and then blows
    up). "End" and "minimum" are read on the running mean of three consecutive records, so that one noisy record
    of a stochastic run's plateau decides nothing.
    """
    if status == "diverged":
        return math.inf, "diverged"
    values = frame[metric].to_numpy(dtype=np.float64)
    if not np.isfinite(values[-1]):
        return math.inf, "diverged"
    smooth = np.convolve(values, np.ones(3) / 3, mode="valid") if len(values) >= 3 else values
    if smooth[-1] > values[0]:
        return math.inf, "no progress"
    # below CONVERGED (relative to the start) a run has converged to rounding: those values count as equal
    floor = max(CONVERGED * abs(values[0]), 1e-300)
    low, end = max(float(np.nanmin(smooth)), floor), max(float(smooth[-1]), floor)
    if end > STABILITY_FACTOR * low:
        return math.inf, f"unstable (ends {end / low:.3g}x above its minimum)"
    return max(float(values[-1]), 0.0), None


class NoStableRate(ValueError):
    """:func:`tune_lr` found no stable rate on the grid (``.record``: every candidate's score and why it was
    rejected; ``.grid``)."""


#: ``lr_source`` of an algorithm that no rate of the grid kept stable: :func:`compare` runs it at the grid's smallest.
UNTUNABLE = "none stable"


def tune_lr(A, objective, label, method, rounds, budget, *, grid=TUNE_GRID, seed=0, tracker="exact", backend="auto",
            metric=None, hyper=None):
    """A learning rate of ``grid`` that is stable over the whole ``budget``, by successive halving.

    Every rate runs a sixteenth of the budget (:data:`RUNG_FRACTIONS`; at least
    ten iterations), the best four a quarter, the best two of those the whole
    budget (:data:`RUNG_KEEP`); the rate with the smallest final ``metric`` on the
    whole budget wins. A run that diverges, ends above its start, or ends more
    than :data:`STABILITY_FACTOR` times above its own minimum is rejected at any
    rung (a rate that is best at a short horizon and then climbs never wins);
    where every candidate of a rung is rejected, the next stable candidates of
    the rungs before run that rung in turn.
    The tuning runs use :data:`TUNE_REPEATS` repetitions (judged on their mean)
    on seeds disjoint from the comparison's (``seed + TUNE_SEED_OFFSET``).

    Returns
    -------
    lr : float
    record : dict
        ``{"metric", "seed", "chosen", "rungs": [{"rounds", "scores": {lr: score},
        "rejected": {lr: why}}]}``: every candidate's score at every rung
        (``inf`` where rejected).

    Raises
    ------
    NoStableRate
        When every rate of the grid is rejected (a ValueError).
    """
    metric = check_metric(metric or default_metric(objective))
    grid = tuple(float(v) for v in grid)
    if not grid:
        raise ValueError("grid: give at least one learning rate")
    tune_seed = (int(seed) + TUNE_SEED_OFFSET) % (MAX_KEY + 1)
    shortest = rounds * min(MIN_ITERATIONS, max(1, budget // rounds))  # a rung runs at least 10 iterations
    horizons = sorted({min(budget, max(shortest, math.floor(budget * f + 1e-9))) for f in RUNG_FRACTIONS})
    record = {"metric": metric, "seed": tune_seed, "rungs": [], "chosen": None}

    def rung(horizon, candidates):
        scores, rejected = {}, {}
        for lr in candidates:
            with warnings.catch_warnings():  # a candidate that grows is judged below, not warned about
                warnings.simplefilter("ignore", RuntimeWarning)
                frame, status = _one_run(A, objective, label, method, rounds, lr, horizon, repeats=TUNE_REPEATS,
                                         seed=tune_seed, tracker=tracker, backend=backend, points=TUNE_POINTS,
                                         progress=False, hyper=hyper, metrics=(metric,))
            if status == "interrupted":  # the runner caught a Ctrl-C: stop tuning (compare keeps what finished)
                raise KeyboardInterrupt
            with np.errstate(invalid="ignore", over="ignore"):
                mean = frame.groupby("iteration", sort=True)[[metric]].mean()
            scores[lr], why = _judge(mean, status, metric)
            if why:
                rejected[lr] = why
        record["rungs"].append({"rounds": horizon, "scores": scores, "rejected": rejected})
        return sorted((lr for lr in candidates if lr not in rejected), key=lambda lr: (scores[lr], -lr))

    ranked, candidates, waiting = [], list(grid), []
    for i, horizon in enumerate(horizons):
        ranked = rung(horizon, candidates)
        while not ranked and waiting:  # every candidate of this rung rejected: the next in line of the one before
            candidates, waiting = waiting[:1], waiting[1:]
            ranked = rung(horizon, candidates)
        if not ranked:
            break
        if i + 1 < len(horizons):
            keep = RUNG_KEEP[min(i, len(RUNG_KEEP) - 1)]
            candidates, waiting = ranked[:keep], ranked[keep:] + waiting
    if not ranked:
        exc = NoStableRate(f"tune: {label} diverged, made no progress or was unstable at every learning rate of the "
                           f"grid ({grid[0]:g} .. {grid[-1]:g}); give its lr (--lr {label}=VALUE)")
        exc.record, exc.grid = record, grid
        raise exc
    record["chosen"] = ranked[0]
    return ranked[0], record


def compare(A, objective, algorithms=None, rounds_budget=2000, *, lr=None, tune=True, repeats=5, seed=0,
            tracker="exact", backend="auto", mg_rounds=None, points=50, progress=True, log=None, metric=None,
            lr_source=None, hyper=None, checkpoint_dir=None, previous=None):
    """Run several algorithms on one problem with the same communication budget; one frame of every record.

    Parameters
    ----------
    A : MixingMatrix
        The row-stochastic network (column-stochastic methods get the same graph
        with out-degree weights).
    objective : Objective
        The problem (e.g. :meth:`LogisticL2.synthetic`); every algorithm gets the
        same data, start and gradient streams (``seed``).
    algorithms : sequence of str or str, optional
        Names (see :func:`parse_algorithms`); a comma-separated string works too. Default: every registered
        algorithm that runs on ``A`` (:func:`default_algorithms`, read from the registry at the call).
    rounds_budget : int
        Communication rounds per algorithm: ``rounds_budget // R`` iterations.
    lr : float or dict, optional
        One learning rate for all, or ``{label: lr}`` (each algorithm its own: the
        stable rates of methods that track the sum of the gradients are about
        ``1/n`` of the others'). Labels missing are tuned.
    tune : bool, default True
        Tune each missing learning rate (:func:`tune_lr`: successive halving over
        :data:`TUNE_GRID`, stable over the whole budget, on seeds disjoint from the
        repetitions); False makes a missing rate an error.
    metric : str, optional
        What tuning minimises and the default of :func:`summary` and :func:`plot`:
        default :func:`default_metric` (``suboptimality`` where the objective knows
        ``f*``, else ``grad_norm_mean``).
    lr_source : dict, optional
        ``{label: text}``: where a given rate comes from (default ``"given"``),
        shown in the tables beside ``"tuned"``. An algorithm whose every rate of
        the grid diverges or is unstable (on a harsh network: losses, compression,
        delays) runs at the grid's smallest, its source ``"none stable"``; the
        comparison goes on.
    checkpoint_dir : str, optional
        A folder for one checkpoint per algorithm's run (``<label>.npz``, written
        periodically, on Ctrl-C and at the end): what ``previous`` resumes.
    previous : pandas.DataFrame, optional
        The frame of an earlier (interrupted, or smaller) comparison of the same
        problem: its finished runs are kept as they are (and their rates), a run
        it left ``interrupted`` goes on from its checkpoint in ``checkpoint_dir``,
        and a run with fewer repetitions than ``repeats`` gets only the missing
        ones (each equal to what it would have been in one run).
    hyper : dict, optional
        ``{label: {name: value}}``: per-algorithm settings: ``tracker``, ``rounds``
        (an ``mg-`` method's own ``R``) and any hyperparameter of the method's
        constructor (:func:`~rowstoch_fast.runner.algorithm_options`).
    repeats, seed, tracker, backend
        As in :func:`~rowstoch_fast.run` and :class:`~rowstoch_fast.Algorithm`.
    mg_rounds : int, optional
        ``R`` of the ``mg-`` methods (default: Theorem 3's recommendation).
    points : int
        Records per run (about).
    progress : bool
        Progress bars (one over the algorithms, one per run).
    log : callable, optional
        Receives a line per chosen learning rate and per finished algorithm.

    Returns
    -------
    pandas.DataFrame
        The runs' records (see :class:`~rowstoch_fast.History`) with the columns
        ``algorithm``, ``lr``, ``lr_source``, ``rounds_per_iteration``,
        ``messages``, ``bytes``, ``gradient_evaluations``, ``diverged``,
        ``total_wall_seconds``, ``status`` (``done``/``diverged``/``interrupted``);
        ``frame.attrs`` holds ``"lr"`` (the rates used), ``"lr_source"``,
        ``"tuning"`` (every candidate's score, :func:`tune_lr`), ``"status"``,
        ``"metric"`` and ``"interrupted"`` (a Ctrl-C stopped the comparison; the
        frame holds what finished).

    Examples
    --------
    >>> from rowstoch_fast import topology
    >>> from rowstoch_fast.objectives import Quadratic
    >>> frame = compare(topology.exponential(8), Quadratic.random(8, 3, seed=0), "pull-diag-gt,push-pull", 40,
    ...                 lr=0.05, repeats=2, progress=False)
    >>> summary(frame)[["algorithm", "communication_rounds", "status"]].values.tolist()
    [['pull-diag-gt', 40, 'ok'], ['push-pull', 40, 'ok']]
    """
    import pandas as pd

    from .mixing import MixingMatrix
    from .network import Network
    from .objectives import Objective

    if not isinstance(A, (MixingMatrix, Network)):
        raise TypeError(f"A must be a MixingMatrix or a network (rowstoch_fast.network), got {type(A).__name__}")
    if not isinstance(objective, Objective):
        raise TypeError(f"objective must be an Objective of rowstoch_fast.objectives, got {type(objective).__name__}")
    if objective.n != A.n:
        raise ValueError(f"objective has n = {objective.n} nodes but the network has {A.n}")
    if log is not None and not callable(log):
        raise TypeError(f"log must be a callable that takes a line, got {type(log).__name__}")
    rounds_budget = check_int(rounds_budget, "rounds_budget", minimum=1)
    points = check_int(points, "points", minimum=1)
    repeats = check_int(repeats, "repeats", minimum=1)
    seed = check_int(seed, "seed", minimum=0, maximum=MAX_KEY)
    if not isinstance(tune, (bool, np.bool_)):
        raise TypeError(f"tune must be True or False, got {tune!r}")
    metric = check_metric(metric if metric is not None else default_metric(objective))
    specs = parse_algorithms(default_algorithms(A, objective) if algorithms is None else algorithms, A, mg_rounds)
    for label, method, _ in specs:
        check_takes(REGISTRY[method], objective, label)
    labels = [label for label, _, _ in specs]
    hyper = _check_label_dict(hyper, "hyper", labels)
    specs = [(label, method, hyper.get(label, {}).get("rounds", rounds)) for label, method, rounds in specs]
    for label, method, rounds in specs:  # every hyperparameter checked before anything runs
        options = dict(hyper.get(label, {}))
        options.pop("rounds", None)
        try:
            Algorithm(A, 1.0, rounds=check_int(rounds, "rounds", minimum=1),
                      tracker=options.pop("tracker", tracker), backend=backend, method=method, **options)
        except (ValueError, TypeError) as exc:
            raise type(exc)(f"hyper: {label}: {exc}") from None
    for label, _, rounds in specs:
        if rounds_budget < rounds:  # one iteration would already spend more than the budget
            raise ValueError(f"rounds_budget = {rounds_budget} is less than one iteration of {label} (R = {rounds} "
                             "rounds); raise the budget or pass mg_rounds")
        if rounds_budget // rounds < MIN_ITERATIONS:
            warnings.warn(f"{label} runs only {rounds_budget // rounds} iterations: R = {rounds} rounds each"
                          f"{' (Theorem 3)' if mg_rounds is None else ''} out of a budget of {rounds_budget}; "
                          "raise the budget or pass mg_rounds (--mg-rounds)", RuntimeWarning, stacklevel=2)
    rates = _check_rates(lr, labels)
    sources = {label: "given" for label in rates}
    for label, text in _check_label_dict(lr_source, "lr_source", labels).items():
        if label not in rates:
            raise ValueError(f"lr_source: {label} has no given lr")
        sources[label] = str(text)
    earlier = _earlier_runs(previous, labels)
    for label, part in earlier.items():  # an earlier comparison's rates are kept (its runs go on with them)
        if label in rates and rates[label] != float(part["lr"].iloc[0]):
            raise ValueError(f"lr: {label} = {rates[label]:g}, but the earlier comparison ran it at "
                             f"{float(part['lr'].iloc[0]):g}; keep its rate or start a new comparison")
        rates.setdefault(label, float(part["lr"].iloc[0]))
        sources.setdefault(label, str(part["lr_source"].iloc[0]) if "lr_source" in part.columns else "given")
    if checkpoint_dir is not None:
        os.makedirs(checkpoint_dir, exist_ok=True)
    missing = [label for label in labels if label not in rates]
    if missing and not tune:
        raise ValueError(f"lr: no learning rate for {', '.join(missing)}; give one (lr=... or "
                         f"--lr {missing[0]}=0.01) or let them be tuned (tune=True)")
    log = log or (lambda line: None)
    frames, tuning, status, interrupted, failed = [], {}, {}, False, None
    bar = _bar(progress, len(specs))
    try:
        for label, method, rounds in specs:
            if bar is not None:
                bar.set_description(label + ("" if label in rates else " (tuning)"))
            if label not in rates:
                try:
                    rates[label], tuning[label] = tune_lr(A, objective, label, method, rounds, rounds_budget,
                                                          seed=seed, tracker=tracker, backend=backend, metric=metric,
                                                          hyper=hyper.get(label))
                    sources[label] = "tuned"
                    log(f"tuned {label}: lr = {rates[label]:g}")
                except NoStableRate as exc:  # (on a harsh network: the comparison goes on, the table says so)
                    rates[label], tuning[label], sources[label] = exc.grid[0], exc.record, UNTUNABLE
                    log(f"{label}: no rate of the grid ({exc.grid[0]:g} .. {exc.grid[-1]:g}) stays stable: run at "
                        f"{exc.grid[0]:g}, the smallest (lr source: {UNTUNABLE!r})")
            frame, status[label] = _evaluate(A, objective, label, method, rounds, rates[label], rounds_budget,
                                             earlier.get(label), checkpoint_dir, repeats=repeats, seed=seed,
                                             tracker=tracker, backend=backend, points=points, progress=progress,
                                             hyper=hyper.get(label), log=log)
            frame["lr_source"] = sources[label]
            frames.append(frame)
            log(f"{label}: {status[label]} ({frame['total_wall_seconds'].iloc[0]:.1f} s)")
            if status[label] == "interrupted":  # the runner caught a Ctrl-C: keep what finished, stop here
                interrupted = True
                break
            if bar is not None:
                bar.update(1)
    except KeyboardInterrupt:
        interrupted = True
    except Exception as exc:  # noqa: BLE001 - one algorithm's run failed: the finished ones go with the error
        failed = exc
    finally:
        if bar is not None:
            bar.close()
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    frame.attrs.update(lr={k: rates[k] for k in status}, lr_source={k: sources[k] for k in status}, tuning=tuning,
                       status=status, interrupted=interrupted, rounds_budget=rounds_budget, repeats=repeats,
                       seed=seed, metric=metric)
    if failed is not None:
        try:
            failed.frame = frame  # the algorithms that finished before it
        except AttributeError:  # pragma: no cover - an exception type without attributes
            pass
        raise failed
    return frame


def _earlier_runs(previous, labels):
    """``{label: rows}`` of an earlier comparison's frame (for the labels compared now)."""
    if previous is None or not len(previous):
        return {}
    if "algorithm" not in getattr(previous, "columns", ()) or "rep" not in previous.columns:
        raise ValueError("previous must be the frame of an earlier compare() (columns algorithm, rep, ...)")
    return {label: part for label, part in previous.groupby("algorithm", sort=False) if label in labels}


def _evaluate(A, objective, label, method, rounds, lr, budget, earlier, checkpoint_dir, *, repeats, log, **run_kw):
    """(frame, status) of one algorithm's evaluation: a new run, or an earlier one kept, resumed from its
    checkpoint, or given the repetitions it lacks."""
    import pandas as pd

    path = None if checkpoint_dir is None else os.path.join(checkpoint_dir, f"{label}.npz")
    if earlier is None:
        return _one_run(A, objective, label, method, rounds, lr, budget, repeats=repeats, checkpoint=path, **run_kw)
    status = str(earlier["status"].iloc[0]) if "status" in earlier.columns else "done"
    done = int(earlier["rep"].nunique())
    parts = [earlier]
    if status == "interrupted":  # goes on from its checkpoint (with the repetitions it had), or again from 0
        resume = path if path is not None and os.path.exists(path) else None
        log(f"{label}: " + ("resumed from its checkpoint" if resume else "no checkpoint: run again"))
        frame, status = _one_run(A, objective, label, method, rounds, lr, budget, repeats=done, checkpoint=path,
                                 resume=resume, **run_kw)
        parts = [frame]
    else:
        log(f"{label}: kept from the earlier comparison ({status}, {done} repetitions)")
    if status == "done" and done < repeats:  # the repetitions it lacks, on their own streams
        frame, status = _one_run(A, objective, label, method, rounds, lr, budget, repeats=repeats - done,
                                 first_repeat=done, **run_kw)
        parts.append(frame)
        log(f"{label}: {repeats - done} more repetitions")
    frame = pd.concat(parts, ignore_index=True)
    frame = frame[frame["rep"] < repeats] if status != "interrupted" else frame
    frame = frame.assign(status=status, diverged=status == "diverged",
                         total_wall_seconds=sum(float(p["total_wall_seconds"].iloc[0]) for p in parts))
    return frame.sort_values(["iteration", "rep"], kind="stable").reset_index(drop=True), status


def _check_label_dict(value, name, labels):
    """``value`` as a dict keyed by labels among ``labels`` (None: empty)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise TypeError(f"{name} must be a dict {{algorithm: ...}}, got {type(value).__name__}")
    unknown = [str(k) for k in value if k not in labels]
    if unknown:
        raise ValueError(f"{name}: {', '.join(sorted(unknown))} is not among the algorithms compared "
                         f"({', '.join(labels)})")
    return dict(value)


def _check_rates(lr, labels):
    """``lr`` (None, one number, or ``{label: number}``) as ``{label: float}``, each finite and > 0."""
    if lr is None:
        return {}
    given = _check_label_dict(lr, "lr", labels) if isinstance(lr, dict) else {label: lr for label in labels}
    rates = {}
    for label, value in given.items():
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise TypeError(f"lr: {label} must be a number, got {type(value).__name__} {value!r}")
        if not (np.isfinite(value) and value > 0):
            raise ValueError(f"lr: {label} = {float(value)} must be a finite number > 0")
        rates[label] = float(value)
    return rates


def frame_metric(frame):
    """The default metric of a comparison's frame: the one it was tuned on (``frame.attrs["metric"]``), or for a
    frame read back from CSV ``suboptimality`` where it was recorded, else ``grad_norm_mean``."""
    metric = getattr(frame, "attrs", {}).get("metric")
    if metric:
        return metric
    cols = getattr(frame, "columns", ())
    if "suboptimality" in cols and np.isfinite(frame["suboptimality"].to_numpy(dtype=np.float64)).any():
        return "suboptimality"
    return "grad_norm_mean" if "grad_norm_mean" in cols else "grad_norm"


def _check_frame(frame, metrics):
    """``frame`` is what :func:`compare` returns (a History's frame has no ``algorithm`` column) and ``metrics``
    among its metrics."""
    for metric in metrics:
        check_metric(metric)
    needed = ("algorithm", "lr", "rounds_per_iteration", "iteration", "communication_rounds", "diverged", *metrics)
    missing = [c for c in needed if c not in getattr(frame, "columns", ())]
    if missing:
        raise ValueError(f"frame must be the table compare() returns; it has no column {', '.join(missing)}")


def _run_status(runs):
    """``ok`` / ``diverged`` / ``interrupted`` of one algorithm's records."""
    if "status" in runs.columns:
        status = str(runs["status"].iloc[0])
        return "ok" if status == "done" else status
    return "diverged" if bool(runs["diverged"].iloc[0]) else "ok"


def summary(frame, metric=None, metrics=()):
    """One row per algorithm: the final ``metric`` (mean and spread over repetitions), its rank and what it cost.

    Parameters
    ----------
    frame : pandas.DataFrame
        What :func:`compare` returns.
    metric : str, optional
        The ranked metric (default :func:`frame_metric`: the comparison's own,
        ``suboptimality`` where ``f*`` is known).
    metrics : sequence of str
        More metrics to report beside it (columns ``<metric>`` and ``<metric>_std``).

    Returns
    -------
    pandas.DataFrame
        Columns ``algorithm``, ``lr``, ``lr_source``, ``rounds_per_iteration``,
        ``iterations``, ``communication_rounds``, ``final`` and ``final_std``
        (``metric``), ``<m>`` and ``<m>_std`` for ``metric`` and each of
        ``metrics``, ``messages``, ``bytes``, ``gradient_evaluations``,
        ``wall_seconds``, ``diverged``, ``status`` (``ok``, ``diverged`` or
        ``interrupted``), ``rank`` (1 = the smallest final ``metric`` among the
        runs that finished; none for the others) and ``<m>_best`` (the best
        finished run of each metric). Values within rounding of the run's scale
        (:data:`CONVERGED` times the metric's largest record) count as equal.
        ``table.attrs["metric"]`` names ``metric``.
    """
    import pandas as pd

    metric = metric or frame_metric(frame)
    shown = list(dict.fromkeys([metric, *metrics]))
    _check_frame(frame, shown)
    rows = []
    for label, runs in frame.groupby("algorithm", sort=False):
        last = runs[runs["iteration"] == runs["iteration"].max()]
        row = {"algorithm": label, "lr": float(runs["lr"].iloc[0]),
               "lr_source": str(runs["lr_source"].iloc[0]) if "lr_source" in runs.columns else "",
               "rounds_per_iteration": int(runs["rounds_per_iteration"].iloc[0]),
               "iterations": int(last["iteration"].iloc[0]),
               "communication_rounds": int(last["communication_rounds"].iloc[0])}
        with np.errstate(invalid="ignore", over="ignore"):  # a diverged run's records hold inf
            for m in shown:
                row[m], row[m + "_std"] = float(last[m].mean()), float(last[m].std(ddof=0))
        row["final"], row["final_std"] = row[metric], row[metric + "_std"]
        row.update({"messages": int(last["messages"].iloc[0]), "bytes": int(last["bytes"].iloc[0]),
                    "gradient_evaluations": int(last["gradient_evaluations"].iloc[0]),
                    "wall_seconds": float(runs["total_wall_seconds"].iloc[0]),
                    "diverged": bool(runs["diverged"].iloc[0]), "status": _run_status(runs)})
        rows.append(row)
    table = pd.DataFrame(rows)
    if len(table):
        ok = table["status"] == "ok"
        for m in shown:
            # values within rounding of the runs' scale (CONVERGED times the largest record of a finished run) are
            # equal: two exact methods at 1e-16 and 3e-16 tie
            finished = frame[m][frame["algorithm"].isin(table["algorithm"][ok])].to_numpy(dtype=np.float64)
            with np.errstate(invalid="ignore", over="ignore"):
                scale = np.max(np.abs(finished), initial=0.0, where=np.isfinite(finished))
            clipped = table[m].where(ok & np.isfinite(table[m])).clip(lower=CONVERGED * scale)
            table[m + "_best"] = clipped == clipped.min()
            if m == metric:
                table["rank"] = pd.Series(clipped.rank(method="min"), dtype="Int64")
    table.attrs["metric"] = metric
    return table


def format_summary(table, metric=None):
    """The summary as an aligned text table (what ``rowstoch compare`` prints)."""
    metric = metric or table.attrs.get("metric", "final")
    width = max([9, *(len(s) + 2 for s in table["lr_source"] if s)]) if len(table) else 9  # a long source fits
    head = (f"{'algorithm':<22} {'rank':>4} {'lr':>8} {'(source)':<{width}} {'R':>3} {'rounds':>7} "
            f"{metric + ' (final)':>24} {'messages':>10} {'bytes':>10} {'grad evals':>11} {'wall s':>7}  status")
    lines = [head, "-" * len(head)]
    for r in table.itertuples():
        final = f"{r.final:.3e} +- {r.final_std:.1e}"
        rank = "-" if r.rank is None or r.rank is np.nan or str(r.rank) == "<NA>" else str(int(r.rank))
        source = f"({r.lr_source})" if r.lr_source else ""
        lines.append(f"{r.algorithm:<22} {rank:>4} {r.lr:>8.2g} {source:<{width}} "
                     f"{r.rounds_per_iteration:>3} {r.communication_rounds:>7} {final:>24} {_si(r.messages):>10} "
                     f"{_si(r.bytes):>10} {_si(r.gradient_evaluations):>11} {r.wall_seconds:>7.1f}  {r.status}")
    return "\n".join(lines)


def _si(v):
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= scale:
            return f"{v / scale:.2f}{unit}"
    return f"{v:.0f}"


def plot(frame, metric=None, ax=None, title=None, path=None, x="rounds"):
    """``metric`` against the ``x`` axis (``rounds``, ``gradients``, ``bytes`` or ``seconds``), one line per
    algorithm (mean over repetitions, a band of one standard deviation; colour-blind-safe colours, markers
    and line styles); needs matplotlib. Returns the Axes; ``path`` saves the figure (300 dpi)."""
    from . import report

    metric = metric or frame_metric(frame)
    _check_frame(frame, [metric])
    report.check_axis(x)
    plt = report.pyplot()
    if ax is None:
        _, ax = plt.subplots(figsize=(6.4, 4.2))
    report.draw(ax, frame, metric, x)
    ax.legend(loc="best", fontsize="small")
    if title:
        ax.set_title(title)
    if path is not None:
        ax.figure.tight_layout()
        ax.figure.savefig(path, dpi=report.DPI)
    return ax


def _bar(enabled, total):
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover
        return None
    return tqdm(total=total, unit="algorithm", leave=False)


def write_outputs(frames, folder, metrics=(), x="rounds", formats=("png",), caption=None):
    """Write what ``rowstoch compare`` writes for the frames of :func:`compare` (one per graph) into ``folder``:
    compare.csv (every record), summary.csv / .md / .tex (final values, ranks, status; ``caption`` for the
    LaTeX table), lr.json (the rates, their sources and every tuning candidate's score) and the figures
    (``metrics`` beside the ranked one, against ``x``, in ``formats``; without matplotlib none). Returns the
    names written."""
    import json

    import pandas as pd

    from . import report

    os.makedirs(folder, exist_ok=True)
    pd.concat(frames, ignore_index=True).to_csv(os.path.join(folder, "compare.csv"), index=False)
    metric = frames[0].attrs.get("metric") or frame_metric(frames[0])
    shown = list(dict.fromkeys([metric, *metrics]))
    tables = []
    for frame in frames:
        t = summary(frame, metric, metrics=shown)
        t.insert(0, "graph", frame["graph"].iloc[0])
        tables.append(t)
    table = pd.concat(tables, ignore_index=True)
    table.attrs["metric"] = metric
    table.to_csv(os.path.join(folder, "summary.csv"), index=False)
    shown_table = table if len(frames) > 1 else table.drop(columns="graph")
    with open(os.path.join(folder, "summary.md"), "w") as fh:
        fh.write(report.to_markdown(shown_table, shown))
    with open(os.path.join(folder, "summary.tex"), "w") as fh:
        fh.write(report.to_latex(shown_table, shown, caption=caption))
    with open(os.path.join(folder, "lr.json"), "w") as fh:
        json.dump({fr["graph"].iloc[0]: {"metric": metric, "lr": fr.attrs["lr"], "source": fr.attrs["lr_source"],
                                         "tuning": json_tuning(fr.attrs["tuning"])} for fr in frames},
                  fh, indent=1, default=str)
    written = ["compare.csv", "summary.csv", "summary.md", "summary.tex", "lr.json"]
    try:
        plt = report.pyplot()
    except ImportError:
        return written
    fig = report.figure(frames, shown, x, path=os.path.join(folder, "compare"), formats=formats,
                        titles=[fr["graph"].iloc[0] for fr in frames])
    plt.close(fig)
    written += [f"compare.{fmt}" for fmt in formats]
    for fr in frames:
        if fr.attrs["tuning"]:
            name = "tuning" if len(frames) == 1 else f"tuning-{fr['graph'].iloc[0]}"
            plt.close(report.tuning_figure(fr.attrs["tuning"], path=os.path.join(folder, name)))
            written.append(name + ".png")
    return written


def json_tuning(tuning):
    """``frame.attrs["tuning"]`` for JSON: rates as text keys, rejected candidates' scores as null."""
    out = {}
    for label, record in tuning.items():
        out[label] = {**{k: v for k, v in record.items() if k != "rungs"},
                      "rungs": [{"rounds": rung["rounds"],
                                 "scores": {f"{lr:g}": (s if np.isfinite(s) else None)
                                            for lr, s in rung["scores"].items()},
                                 "rejected": {f"{lr:g}": why for lr, why in rung["rejected"].items()}}
                                for rung in record["rungs"]]}
    return out
