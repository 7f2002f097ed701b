"""The benchmark harness: several algorithms on one problem, the same seeds and the same communication budget.

:func:`compare` checks its arguments once into a plan (:mod:`.plan`), runs it (:mod:`.execute`: each method's
rate tuned by :mod:`.tuning` where it is not given, then evaluated; in parallel processes with ``jobs``), judges
every run (:mod:`.verdict`: its status, a diagnosis when it is not ``ok`` or ends near a bar, ranks that only
separate what the repetitions can tell apart) and returns one pandas frame of everything it recorded.
:func:`summary` turns it into the comparison table (:mod:`.tables`), :func:`plot` into the figure and
:func:`write_outputs` writes every file of ``rowstoch compare`` (:mod:`.outputs`); :class:`LiveView` and
:func:`text_plot` show a comparison as its methods finish (:mod:`.live`, ``rowstoch compare --live``).
"""

from __future__ import annotations

import contextlib
import os

from .. import algorithms as _algorithms, backends
from .._checks import check_int as _check_int
from ..backends import on_the_root
from ..runner import warn_if_below_optimum
from .execute import Outcome, default_jobs, execute, run_method
from .live import LiveView, text_plot
from .outputs import FolderLock, json_tuning, plot, read_outputs, write_outputs, write_tables
from .plan import (MIN_ITERATIONS, TUNE_GRID, Method, Plan, check_rates, default_algorithms, default_metric, identity,
                   make_plan, parse_algorithms)
from .tables import empirical_rate, format_summary, frame_metric, summary
from .tuning import (CONVERGED, STABILITY_FACTOR, TUNE_POINTS, TUNE_REPEATS, TUNE_SEED_OFFSET, UNTUNABLE,
                     NoStableRate, converged_for, judge)
from .verdict import NO_PROGRESS, STATUSES, ranks

__all__ = ["ALGORITHMS", "STATUSES", "TUNE_GRID", "compare", "default_algorithms", "default_metric", "format_summary",
           "frame_metric", "json_tuning", "make_plan", "parse_algorithms", "plot", "summary", "tune_lr",
           "write_outputs", "NoStableRate", "execute", "default_jobs", "Plan", "Method", "Outcome", "ranks",
           "judge", "run_method", "CONVERGED", "STABILITY_FACTOR", "NO_PROGRESS", "TUNE_POINTS", "TUNE_REPEATS",
           "TUNE_SEED_OFFSET", "UNTUNABLE", "MIN_ITERATIONS", "check_rates", "write_tables", "LiveView", "text_plot",
           "empirical_rate", "read_outputs"]

#: What ``rowstoch compare`` runs by default: every registered algorithm in listing order, with ``mg-NAME``
#: (Theorem 3's rounds) beside the methods that list it (:func:`rowstoch_fast.algorithms.labels`; ``compare``
#: reads the registry when called, so an algorithm registered later is in its default too).
ALGORITHMS = tuple(_algorithms.labels())


def tune_lr(A, objective, label, method, rounds, budget, *, grid=TUNE_GRID, seed=0, tracker="exact", backend="auto",
            metric=None, hyper=None):
    """The best stable rate of ``grid`` for one method over the whole ``budget`` of communication rounds, refined
    around it (:func:`rowstoch_fast.compare.tuning.tune`: every candidate a replica of one batched run).

    Parameters
    ----------
    A : MixingMatrix or network
    objective : Objective
    label : str
        The method's name in the tables (``"mg-pull-diag-gt"``).
    method : str
        Its registry name (``"pull-diag-gt"``).
    rounds : int
        Gossip rounds per iteration.
    budget : int
        Communication rounds.
    grid : sequence of float
        The rates tried first (default :data:`TUNE_GRID`, 1e-4 .. 10).
    seed : int
        The comparison's seed: the tuning draws ``seed + TUNE_SEED_OFFSET``'s streams.
    tracker, backend, hyper
        As in :func:`compare`.
    metric : str, optional
        What is minimised (default :func:`default_metric`; a metric you registered ``ranked=True`` too).

    Returns
    -------
    lr : float
    record : dict
        Every candidate's score, why it was rejected and its trajectory (``record["stages"]``).

    Raises
    ------
    NoStableRate
        When every rate tried is rejected (a ValueError).
    """
    for value, name in ((label, "label"), (method, "method")):  # (None had met str's methods)
        if not isinstance(value, str):
            raise TypeError(f"{name} must be a str (the method's {'label' if name == 'label' else 'registry name'}), "
                            f"got {type(value).__name__} {value!r}")
    budget = _check_int(budget, "budget", minimum=1)  # (make_plan's check had named its rounds_budget)
    rounds = _check_int(rounds, "rounds", minimum=1)
    plan = make_plan(A, objective, [label], budget, tune=True, repeats=1, seed=seed, tracker=tracker,
                     backend=backend, mg_rounds=rounds if label.startswith("mg-") else None, metric=metric,
                     hyper={label: dict(hyper or {})} if hyper else None, grid=grid)
    m = plan.methods[0]
    if m.method != method or m.rounds != rounds:
        raise ValueError(f"tune_lr: {label!r} is {m.method} with {m.rounds} round(s), not {method} with {rounds}")
    from .tuning import tune

    return tune(plan.network, plan.objective, m, plan.budget, plan.ranked, seed=plan.seed, backend=plan.backend,
                grid=plan.grid)


def compare(A, objective, algorithms=None, rounds_budget=2000, *, lr=None, tune=True, repeats=5, seed=0,
            tracker="exact", backend="auto", mg_rounds=None, points=25, progress=True, log=None, metric=None,
            metrics=None, lr_source=None, hyper=None, checkpoint_dir=None, previous=None, jobs=1, grid=TUNE_GRID,
            on_result=None):
    """Run several algorithms on one problem with the same communication budget; one frame of every record.

    Parameters
    ----------
    A : MixingMatrix or network
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
        Tune each missing learning rate (:mod:`rowstoch_fast.compare.tuning`: every
        rate of ``grid`` over the whole budget as one batched run, on seeds
        disjoint from the repetitions, judged on its whole trajectory, then refined
        around the best); False makes a missing rate an error.
    metric : str, optional
        What tuning minimises, what is ranked, and the default of :func:`summary`
        and :func:`plot`: default :func:`default_metric` (``suboptimality`` where
        the objective knows ``f*``, else ``grad_norm_mean``); a metric you
        registered with ``ranked=True`` too
        (:func:`~rowstoch_fast.user_metrics.register_metric`; others are refused:
        the verdict's rules need a metric that falls to 0).
    metrics : sequence of str or callable, optional
        What the evaluation runs record (``metric`` first; default ``metric`` and
        ``consensus_error``): each costs up to one pass over the data per record,
        the others are NaN. Extra metrics too (a registered name, a function
        ``fn(state) -> float``, a ``node_*`` statistic:
        :mod:`rowstoch_fast.user_metrics`), each a column of the frame, in the
        tables and figures; with ``jobs > 1`` a function must be importable by
        the worker processes (defined at the top level of a module or of a file
        loaded by :func:`~rowstoch_fast.user_metrics.load_metrics_module`).
    lr_source : dict, optional
        ``{label: text}``: where a given rate comes from (default ``"given"``),
        shown in the tables beside ``"tuned"``. A method that no rate tried keeps
        stable runs at the rate that ended lowest (the smallest tried where every
        one diverged or ran off), its source ``"none stable"``
        (with which rates failed and how), its status the evaluation's (``ok``
        and ranked where its repetitions end ok there, their records' level at
        the end below half their start); the comparison goes on.
        A tuned rate that the evaluation finds diverged or unstable runs again
        at the best stable rate of its tuning a fifth of a decade below it at
        least (once more below that where it fails too:
        :data:`~rowstoch_fast.compare.verdict.RETRIES`): its source ``"next
        stable"``, its diagnosis what the tuned rate did
        (:func:`~rowstoch_fast.compare.verdict.next_stable`).
    checkpoint_dir : str, optional
        A folder for one checkpoint per evaluation run (``<label>.npz``, written
        periodically, on Ctrl-C / SIGTERM and at the end): what ``previous`` resumes.
        The comparison's own folder, made (with its missing parents) before the
        first run, as the command line's ``--out`` is, and locked while the
        comparison runs (under MPI by rank 0): a second comparison on the same
        folder is refused with a :class:`~rowstoch_fast.compare.outputs.FolderInUse`
        (a ValueError); :func:`~rowstoch_fast.run`'s ``checkpoint``, a file, needs
        its folder to exist instead.
    previous : pandas.DataFrame, optional
        The frame of an earlier (interrupted, or smaller) comparison of the same
        problem (its ``attrs["identity"]``, where it has one, is compared: a
        frame of another network, objective, seed or budget is refused): its
        finished runs are kept as they are (and their rates), a run
        it left ``interrupted`` goes on from its checkpoint in ``checkpoint_dir``,
        and a run with fewer repetitions than ``repeats`` gets only the missing
        ones (each equal to what it would have been in one run).
    hyper : dict, optional
        ``{label: {name: value}}``: per-algorithm settings: ``tracker``, ``rounds``
        (an ``mg-`` method's own ``R``) and any hyperparameter of the method's
        constructor (:func:`~rowstoch_fast.runner.algorithm_options`).
    repeats, seed, tracker, backend
        As in :func:`~rowstoch_fast.run` and :class:`~rowstoch_fast.Algorithm`; a ``tracker`` other than
        ``"exact"`` is for the methods with a Pull-Diag tracker, and refused where none of ``algorithms`` has one.
    mg_rounds : int, optional
        ``R`` of the ``mg-`` methods (default: Theorem 3's recommendation).
    points : int
        Records per evaluation run (evenly spaced, and the last).
    progress : bool or "always"
        Progress bars (one over the algorithms, one per run) where someone
        watches them (a terminal, a notebook); ``"always"`` anywhere.
    log : callable, optional
        Receives a line per chosen learning rate and per finished algorithm.
    jobs : int, default 1
        Run the methods in this many processes (:func:`default_jobs`: ``ROWSTOCH_JOBS``
        or the cores); the results are those of a serial run.
    grid : sequence of float
        The rates the tuner tries first (default :data:`TUNE_GRID`).
    on_result : callable, optional
        ``on_result(frame)`` with the records of the methods finished so far (in
        the order of ``algorithms``), each time one finishes: to write them as
        they come.

    Returns
    -------
    pandas.DataFrame
        The runs' records (see :class:`~rowstoch_fast.History`) with the columns
        ``algorithm``, ``lr``, ``lr_source``, ``rounds_per_iteration``,
        ``messages``, ``bytes``, ``gradient_evaluations``, ``diverged``,
        ``total_wall_seconds``, ``status`` (:data:`STATUSES`) and ``diagnosis``;
        ``frame.attrs`` holds ``"lr"`` (the rates used), ``"lr_source"``,
        ``"tuning"`` (every candidate's score and trajectory; read-only: copies
        of the frame share it rather than copy it), ``"status"``,
        ``"diagnosis"``, ``"metric"``, ``"extra_metrics"`` (the extra metrics'
        properties), ``"identity"`` (the network, objective, seed and budget:
        what ``previous`` must share) and ``"interrupted"`` (a Ctrl-C or SIGTERM
        stopped the comparison; the frame holds what finished).

        A Ctrl-C does not raise: the comparison returns what finished, with
        the run it stopped ``interrupted`` (saved in ``checkpoint_dir``, where
        given). A script that runs several comparisons stops on it itself
        (``if frame.attrs["interrupted"]: break``). SIGTERM (a job scheduler's,
        ``timeout``'s) stops it the same way; where the program set no handler
        for SIGTERM, the process then ends, as SIGTERM asks, once the
        checkpoints are saved (a loop had gone on to the next comparison), and
        nothing is returned: what finished is what ``on_result`` was given
        (and ``checkpoint_dir`` holds). A script that would rather save the
        returned frame sets its own handler
        (``signal.signal(signal.SIGTERM, signal.default_int_handler)``: then
        SIGTERM is a Ctrl-C).

    Raises
    ------
    ValueError
        A setting no method can take (e.g. ``tracker="perron"`` where no method reads a tracker), a rate or
        budget out of range, an objective of another size than the network; what is refused names the argument.

    Examples
    --------
    >>> from rowstoch_fast import topology
    >>> from rowstoch_fast.objectives import Quadratic
    >>> frame = compare(topology.exponential(8), Quadratic.random(8, 3, seed=0), "pull-diag-gt,push-pull", 40,
    ...                 lr=0.05, repeats=2, progress=False)
    >>> summary(frame)[["algorithm", "communication_rounds", "status"]].values.tolist()
    [['pull-diag-gt', 40, 'ok'], ['push-pull', 40, 'ok']]
    """
    from .. import _progress

    with backends.checked_on_every_process(backend):  # (under MPI a rank's refusal is every rank's: an unknown
        # method or a bad budget on one rank had left the others waiting in its first run's agreement, helper 203)
        if log is not None and not callable(log):
            raise TypeError(f"log must be a callable that takes a line, got {type(log).__name__}")
        if on_result is not None and not callable(on_result):
            raise TypeError(f"on_result must be a callable that takes a frame, got {type(on_result).__name__}")
        jobs = _check_int(jobs, "jobs", minimum=1)
        progress = _progress.check(progress)
        plan = make_plan(A, objective, algorithms, rounds_budget, lr=lr, tune=tune, repeats=repeats, seed=seed,
                         tracker=tracker, backend=backend, mg_rounds=mg_rounds, points=points, metric=metric,
                         metrics=metrics, lr_source=lr_source, hyper=hyper, checkpoint_dir=checkpoint_dir,
                         previous=previous, grid=grid, jobs=jobs)
        if tracker != "exact" and not any("tracker" in _algorithms.REGISTRY[m.method].hyper for m in plan.methods):
            raise ValueError(f"tracker={tracker!r} is not read by {', '.join(m.label for m in plan.methods)} (only the "
                             "methods with a Pull-Diag tracker take one: 'rowstoch algorithms' lists them)")
        if plan.checkpoint_dir is not None:
            try:
                os.makedirs(plan.checkpoint_dir, exist_ok=True)
            except OSError as exc:  # (a file of that name: a bare "[Errno 17] File exists")
                raise type(exc)(f"checkpoint_dir {os.fspath(plan.checkpoint_dir)!r} cannot be made a folder: "
                                f"{exc.strerror or exc}" + (" (a file has that name)" if os.path.isfile(
                                    plan.checkpoint_dir) else "")) from None
    backends.check_same_on_every_process(plan.backend, {  # (collective under MPI; another folder on one rank had
        # taken its checkpoints apart from rank 0's, or paired their collectives wrongly, helper 203)
        "checkpoint_dir": None if plan.checkpoint_dir is None else os.fspath(plan.checkpoint_dir), "jobs": jobs},
        "the comparison's checkpoint_dir and jobs")
    finished = []

    def collect(outcome):
        finished.append(outcome)
        if on_result is not None:
            on_result(assemble(plan, finished))

    with _checkpoint_lock(plan):
        outcomes, interrupted, error = execute(plan, jobs=jobs, progress=progress, log=log, on_outcome=collect)
    frame = assemble(plan, outcomes, interrupted)
    if error is not None:
        try:
            error.frame = frame  # the algorithms that finished before it
        except AttributeError:  # pragma: no cover - an exception type without attributes
            pass
        raise error
    return frame


def _checkpoint_lock(plan):
    """The lock of ``plan.checkpoint_dir`` while the comparison runs
    (:class:`~rowstoch_fast.compare.outputs.FolderLock`; under MPI taken by rank 0, its refusal raised on every
    rank), or a context that holds nothing."""
    if plan.checkpoint_dir is None or _starting_a_worker():
        return contextlib.nullcontext()
    lock = on_the_root(plan.backend, lambda: FolderLock(plan.checkpoint_dir, option="checkpoint_dir"))
    return lock if lock is not None else contextlib.nullcontext()


def _starting_a_worker():
    """Whether this process is a ``jobs > 1`` worker running the script again as it starts (a script without
    ``if __name__ == "__main__":``): the folder is its parent's, and the error to show is multiprocessing's."""
    import multiprocessing

    return bool(getattr(multiprocessing.current_process(), "_inheriting", False))


class _Shared(dict):
    """A dict that pandas' propagation of ``frame.attrs`` passes on instead of deep-copying it (every operation on
    a frame copies its attrs: the tuning records of 19 methods took seconds a comparison). Treated as read-only."""

    def __deepcopy__(self, memo):
        return self


def assemble(plan, outcomes, interrupted=False):
    """The frame of a comparison's outcomes, in the plan's order, with its attributes."""
    import pandas as pd

    order = {m.label: i for i, m in enumerate(plan.methods)}
    outcomes = sorted(outcomes, key=lambda o: order[o.label])
    frame = pd.concat([o.frame for o in outcomes], ignore_index=True) if outcomes else pd.DataFrame()
    frame.attrs.update(lr={o.label: o.lr for o in outcomes}, lr_source={o.label: o.lr_source for o in outcomes},
                       tuning=_Shared({o.label: o.tuning for o in outcomes if o.tuning is not None}),
                       status={o.label: o.status for o in outcomes},
                       diagnosis={o.label: o.diagnosis for o in outcomes if o.diagnosis},
                       interrupted=interrupted, rounds_budget=plan.budget, repeats=plan.repeats, seed=plan.seed,
                       metric=plan.metric, extra_metrics=plan.extra_metrics,
                       converged={"": converged_for(plan.objective),  # (the rounding of a metric: summary's ranks)
                                  "suboptimality": converged_for(plan.objective, "suboptimality")},
                       identity=_Shared(identity(plan.network, plan.objective, plan.seed, plan.budget, plan.methods,
                                                 plan.points, plan.metrics)))
    warn_if_below_optimum(frame, plan.objective, stacklevel=4)  # (once, of every method's records)
    return frame
