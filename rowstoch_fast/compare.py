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
import time
import warnings

import numpy as np

from ._checks import check_int
from .algorithms import REGISTRY
from .errors import DivergenceError
from .runner import Algorithm, check_metric, run

__all__ = ["ALGORITHMS", "compare", "parse_algorithms", "summary", "plot", "tune_lr", "TUNE_GRID"]

#: What ``rowstoch compare`` runs by default: the registry, and MG-Pull-Diag-GT with Theorem 3's rounds.
ALGORITHMS = ("pull-diag-gt", "mg-pull-diag-gt", "frost", "pull-diag-gd", "dsgd", "push-pull", "push-diging", "sgp",
              "centralized")
#: The learning rates ``tune=True`` tries: 1e-4 .. 10 in steps of sqrt(10) (methods that track the sum of the
#: gradients, the Pull-Diag family, run at about 1/n of the rate of those that track their average).
TUNE_GRID = tuple(float(v) for v in np.logspace(-4, 1, 11))
#: An MG method that fits fewer iterations than this into the budget gets a warning (its R is too large for it).
MIN_ITERATIONS = 10


def parse_algorithms(names, A, mg_rounds=None):
    """``[(label, method, rounds)]`` for algorithm names: a registry name, or ``"mg-" + name`` for a
    multi-round method with ``mg_rounds`` rounds (default: Theorem 3's ``A.metrics().recommended_rounds()``)."""
    if isinstance(names, str):
        names = [s.strip() for s in names.split(",") if s.strip()]
    if not names:
        raise ValueError("algorithms: give at least one algorithm")
    out = []
    for label in names:
        method, rounds = label, 1
        if label.startswith("mg-") and label not in REGISTRY:
            method = label[3:]
            if method not in REGISTRY or not REGISTRY[method].multi_round:
                multi = sorted("mg-" + k for k, c in REGISTRY.items() if c.multi_round)
                raise ValueError(f"algorithms: {label!r} is not a multi-round method (those are {', '.join(multi)})")
            rounds = (check_int(mg_rounds, "mg_rounds", minimum=1) if mg_rounds is not None
                      else A.metrics().recommended_rounds())
        elif label not in REGISTRY:
            known = sorted(REGISTRY) + sorted("mg-" + k for k, c in REGISTRY.items() if c.multi_round)
            raise ValueError(f"algorithms: unknown algorithm {label!r}; choose from {', '.join(known)}")
        if label in (lbl for lbl, _, _ in out):
            raise ValueError(f"algorithms: {label!r} is listed twice")
        out.append((label, method, int(rounds)))
    return out


def _one_run(A, objective, label, method, rounds, lr, budget, *, repeats, seed, tracker, backend, points, progress):
    """(frame rows of one algorithm, its status) for one learning rate."""
    if "tracker" not in REGISTRY[method].hyper:  # compare's tracker is for the methods that have one
        tracker = "exact"
    algo = Algorithm(A, lr, rounds=rounds, tracker=tracker, backend=backend, method=method)
    iterations = max(1, budget // rounds)
    diverged = False
    start = time.perf_counter()
    try:
        h = run(algo, objective, iterations, record_every=max(1, iterations // points), repeats=repeats, seed=seed,
                progress=progress)
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
    frame["diverged"] = diverged
    frame["total_wall_seconds"] = wall
    return frame, ("diverged" if diverged else "interrupted" if h.interrupted else "done")


def _check_fraction(fraction):
    """``tune_fraction``: the tuning runs' share of the budget, in (0, 1]."""
    if not (isinstance(fraction, (int, float)) and 0 < fraction <= 1):
        raise ValueError(f"tune_fraction must be a number in (0, 1], got {fraction!r}")


def tune_lr(A, objective, label, method, rounds, budget, *, grid=TUNE_GRID, seed=0, tracker="exact", backend="auto",
            metric="grad_norm", fraction=0.1):
    """The learning rate of ``grid`` with the smallest final ``metric`` on a short run (``fraction`` of
    ``budget``, one repetition); the runs that diverge or end above where they started are out. Returns
    ``(lr, {lr: final metric})``. Where the metric plateaus early (a stochastic problem's noise floor), a tenth
    of the budget can rank the rates by noise: tune on more of it (``fraction=1``)."""
    _check_fraction(fraction)
    check_metric(metric)
    grid = tuple(grid)
    if not grid:
        raise ValueError("grid: give at least one learning rate")
    scores = {}
    short = max(rounds, math.floor(budget * fraction + 1e-9))
    for lr in grid:
        frame, status = _one_run(A, objective, label, method, rounds, lr, short, repeats=1, seed=seed,
                                 tracker=tracker, backend=backend, points=4, progress=False)
        if status == "interrupted":  # the runner caught a Ctrl-C: stop tuning (compare keeps what finished)
            raise KeyboardInterrupt
        first, last = frame[metric].iloc[0], frame[metric].iloc[-1]
        scores[lr] = float(last) if status == "done" and np.isfinite(last) and last <= first else math.inf
    best = min(scores, key=lambda k: (scores[k], -k))
    if not np.isfinite(scores[best]):
        raise ValueError(f"tune: {label} diverged or made no progress at every learning rate of the grid "
                         f"({grid[0]:g} .. {grid[-1]:g})")
    return best, scores


def compare(A, objective, algorithms=ALGORITHMS, rounds_budget=2000, *, lr=None, tune=False, repeats=5, seed=0,
            tracker="exact", backend="auto", mg_rounds=None, points=50, progress=True, log=None, tune_fraction=0.1):
    """Run several algorithms on one problem with the same communication budget; one frame of every record.

    Parameters
    ----------
    A : MixingMatrix
        The row-stochastic network (column-stochastic methods get the same graph
        with out-degree weights).
    objective : Objective
        The problem (e.g. :meth:`NonconvexLogistic.synthetic`); every algorithm
        gets the same data, start and gradient streams (``seed``).
    algorithms : sequence of str or str
        Names (see :func:`parse_algorithms`); a comma-separated string works too.
    rounds_budget : int
        Communication rounds per algorithm: ``rounds_budget // R`` iterations.
    lr : float or dict, optional
        One learning rate for all, or ``{label: lr}``; labels missing from the
        dict are tuned when ``tune`` is True (else ValueError).
    tune : bool
        Pick each missing learning rate on a short run over :data:`TUNE_GRID`.
    tune_fraction : float
        The tuning runs' share of ``rounds_budget`` (default a tenth; see :func:`tune_lr`).
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
        ``algorithm``, ``lr``, ``rounds_per_iteration``, ``messages``, ``bytes``,
        ``gradient_evaluations``, ``diverged``, ``total_wall_seconds``;
        ``frame.attrs`` holds ``"lr"`` (the rates used), ``"tuning"`` (the scores
        of tuned ones), ``"status"`` (``done``/``diverged``/``interrupted`` per
        algorithm) and ``"interrupted"`` (a Ctrl-C stopped the comparison; the
        frame holds what finished).

    Examples
    --------
    >>> from rowstoch_fast import topology
    >>> from rowstoch_fast.objectives import Quadratic
    >>> frame = compare(topology.exponential(8), Quadratic.random(8, 3, seed=0), "pull-diag-gt,push-pull", 40,
    ...                 lr=0.05, repeats=2, progress=False)
    >>> summary(frame)[["algorithm", "communication_rounds"]].values.tolist()
    [['pull-diag-gt', 40], ['push-pull', 40]]
    """
    import pandas as pd

    rounds_budget = check_int(rounds_budget, "rounds_budget", minimum=1)
    points = check_int(points, "points", minimum=1)
    specs = parse_algorithms(algorithms, A, mg_rounds)
    for label, _, rounds in specs:
        if rounds_budget < rounds:  # one iteration would already spend more than the budget
            raise ValueError(f"rounds_budget = {rounds_budget} is less than one iteration of {label} (R = {rounds} "
                             "rounds); raise the budget or pass mg_rounds")
        if rounds_budget // rounds < MIN_ITERATIONS:
            warnings.warn(f"{label} runs only {rounds_budget // rounds} iterations: R = {rounds} rounds each"
                          f"{' (Theorem 3)' if mg_rounds is None else ''} out of a budget of {rounds_budget}; "
                          "raise the budget or pass mg_rounds (--mg-rounds)", RuntimeWarning, stacklevel=2)
    rates = dict(lr) if isinstance(lr, dict) else ({} if lr is None else {label: float(lr) for label, _, _ in specs})
    unknown = set(rates) - {label for label, _, _ in specs}
    if unknown:
        raise ValueError(f"lr: {', '.join(sorted(unknown))} is not among the algorithms compared")
    missing = [label for label, _, _ in specs if label not in rates]
    if missing and not tune:
        raise ValueError(f"lr: no learning rate for {', '.join(missing)}; give one (lr=... or "
                         f"--lr {missing[0]}=0.01) or tune them (tune=True, --tune)")
    for label, value in rates.items():
        if not (np.isfinite(value) and value > 0):
            raise ValueError(f"lr: {label} = {value} must be a finite number > 0")
    if missing:
        _check_fraction(tune_fraction)
    log = log or (lambda line: None)
    frames, tuning, status, interrupted, failed = [], {}, {}, False, None
    bar = _bar(progress, len(specs))
    try:
        for label, method, rounds in specs:
            if bar is not None:
                bar.set_description(label)
            if label not in rates:
                rates[label], tuning[label] = tune_lr(A, objective, label, method, rounds, rounds_budget, seed=seed,
                                                      tracker=tracker, backend=backend, fraction=tune_fraction)
                log(f"tuned {label}: lr = {rates[label]:g}")
            frame, status[label] = _one_run(A, objective, label, method, rounds, rates[label], rounds_budget,
                                            repeats=repeats, seed=seed, tracker=tracker, backend=backend,
                                            points=points, progress=progress)
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
    frame.attrs.update(lr={k: rates[k] for k in status}, tuning=tuning, status=status, interrupted=interrupted,
                       rounds_budget=rounds_budget, repeats=repeats, seed=seed)
    if failed is not None:
        try:
            failed.frame = frame  # the algorithms that finished before it
        except AttributeError:  # pragma: no cover - an exception type without attributes
            pass
        raise failed
    return frame


def _check_frame(frame, metric):
    """``frame`` is what :func:`compare` returns (a History's frame has no ``algorithm`` column) and ``metric``
    one of its metrics."""
    check_metric(metric)
    needed = ("algorithm", "lr", "rounds_per_iteration", "iteration", "communication_rounds", "diverged", metric)
    missing = [c for c in needed if c not in getattr(frame, "columns", ())]
    if missing:
        raise ValueError(f"frame must be the table compare() returns; it has no column {', '.join(missing)}")


def summary(frame, metric="grad_norm"):
    """One row per algorithm: the final ``metric`` (mean and spread over repetitions) and what it cost.

    Columns: ``algorithm``, ``lr``, ``rounds_per_iteration``, ``iterations``,
    ``communication_rounds``, ``final`` (mean of ``metric`` at the last record),
    ``final_std``, ``messages``, ``bytes``, ``gradient_evaluations``,
    ``wall_seconds``, ``diverged``.
    """
    import pandas as pd

    _check_frame(frame, metric)
    rows = []
    for label, runs in frame.groupby("algorithm", sort=False):
        last = runs[runs["iteration"] == runs["iteration"].max()]
        with np.errstate(invalid="ignore", over="ignore"):  # a diverged run's records hold inf
            final, spread = float(last[metric].mean()), float(last[metric].std(ddof=0))
        rows.append({"algorithm": label, "lr": float(runs["lr"].iloc[0]),
                     "rounds_per_iteration": int(runs["rounds_per_iteration"].iloc[0]),
                     "iterations": int(last["iteration"].iloc[0]),
                     "communication_rounds": int(last["communication_rounds"].iloc[0]),
                     "final": final, "final_std": spread,
                     "messages": int(last["messages"].iloc[0]), "bytes": int(last["bytes"].iloc[0]),
                     "gradient_evaluations": int(last["gradient_evaluations"].iloc[0]),
                     "wall_seconds": float(runs["total_wall_seconds"].iloc[0]),
                     "diverged": bool(runs["diverged"].iloc[0])})
    return pd.DataFrame(rows)


def format_summary(table, metric="grad_norm"):
    """The summary as an aligned text table (what ``rowstoch compare`` prints)."""
    head = (f"{'algorithm':<22} {'lr':>8} {'R':>3} {'rounds':>7} {metric + ' (final)':>22} {'messages':>10} "
            f"{'bytes':>10} {'grad evals':>11} {'wall s':>7}  status")
    lines = [head, "-" * len(head)]
    for r in table.itertuples():
        final = f"{r.final:.3e} +- {r.final_std:.1e}"
        lines.append(f"{r.algorithm:<22} {r.lr:>8.2g} {r.rounds_per_iteration:>3} {r.communication_rounds:>7} "
                     f"{final:>22} {_si(r.messages):>10} {_si(r.bytes):>10} {_si(r.gradient_evaluations):>11} "
                     f"{r.wall_seconds:>7.1f}  {'diverged' if r.diverged else 'ok'}")
    return "\n".join(lines)


def _si(v):
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= scale:
            return f"{v / scale:.2f}{unit}"
    return f"{v:.0f}"


def plot(frame, metric="grad_norm", ax=None, title=None, path=None):
    """The metric against communication rounds, one line per algorithm (mean over repetitions, a band of one
    standard deviation); needs matplotlib. Returns the Axes; ``path`` saves the figure."""
    _check_frame(frame, metric)
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("plot needs matplotlib: pip install 'rowstoch_fast[plot]'") from exc
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4.5))
    for label, runs in frame.groupby("algorithm", sort=False):
        g = runs.groupby("communication_rounds", sort=True)[metric]
        with np.errstate(invalid="ignore", over="ignore"):
            mean, std = g.mean(), g.std(ddof=0).fillna(0)
        diverged = " (diverged)" if runs["diverged"].iloc[0] else ""
        line = ax.plot(mean.index, mean.values, label=f"{label}, lr {runs['lr'].iloc[0]:.2g}{diverged}")[0]
        ax.fill_between(mean.index, np.clip(mean - std, 1e-300, None), mean + std, color=line.get_color(), alpha=0.15)
    ax.set_yscale("log")
    ax.set_xlabel("communication rounds")
    ax.set_ylabel(metric.replace("_", " "))
    ax.legend(loc="best", fontsize="small")
    if title:
        ax.set_title(title)
    if path is not None:
        ax.figure.tight_layout()
        ax.figure.savefig(path, dpi=120)
    return ax


def _bar(enabled, total):
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover
        return None
    return tqdm(total=total, unit="algorithm", leave=False)
