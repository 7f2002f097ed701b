"""A comparison's plan: everything :func:`~rowstoch_fast.compare.compare` needs, checked once before anything runs.

The problem (network, objective, metric), the methods (each one's label, registry name, gossip rounds, given rate
or rates to try, hyperparameters), the budget, repetitions and seeds, what is recorded and where a run's checkpoint
goes. :func:`make_plan` validates every argument and names the first that is wrong; the executor
(:mod:`.execute`) then runs a plan without checking anything again.
"""

from __future__ import annotations

import json
import math
import os
import unicodedata
import warnings
from dataclasses import dataclass, field, replace

import numpy as np

from .. import algorithms as _algorithms
from .._metric_names import RANKED_METRICS  # (the metrics a comparison ranks by; the tables' notes read it too)
from .. import backends
from .._checks import (MAX_KEY, MAX_ROUNDS, check_choice, check_int, check_not_subnormal, check_text, check_tracker,
                       did_you_mean, finite_float, fmt_bytes, require_memory)
from ..algorithms import REGISTRY, method_of
from ..backends import BACKENDS, one_process
from ..mixing import MixingMatrix, as_matrix
from ..network import Network, base_matrix, describe, first_difference, redrawn, weights_of
from .._metric_names import METRICS
from ..runner import Algorithm, check_shown_metrics, check_takes, round_schedule, warn_network_ignored
from ..objectives import batch_of, optimum_of

__all__ = ["Method", "Plan", "make_plan", "default_algorithms", "parse_algorithms", "not_running", "default_metric",
           "TUNE_GRID", "MIN_ITERATIONS", "check_shown_metrics"]

#: The learning rates the tuner tries first: 1e-4 .. 10 in steps of sqrt(10) (methods that track the sum of the
#: gradients, the Pull-Diag family, run at about 1/n of the rate of those that track their average); it then
#: refines around the best of them (:mod:`.tuning`).
TUNE_GRID = tuple(float(v) for v in np.logspace(-4, 1, 11))
#: An MG method that fits fewer iterations than this into the budget gets a warning (its R is too large for it).
MIN_ITERATIONS = 10


def check_ranked_metric(metric, objective):
    """``metric`` if a comparison on ``objective`` can rank by it (:data:`RANKED_METRICS`, and ``suboptimality``
    / ``distance`` only where the objective knows its optimum; an extra metric registered ``ranked=True``, as its
    :class:`~rowstoch_fast.user_metrics.Metric`), else a ValueError saying why."""
    from ..user_metrics import resolve_metrics

    metric = resolve_metrics([metric], "metric")[0]
    if not isinstance(metric, str):
        if not metric.ranked:
            raise ValueError(f"metric {metric.name!r} cannot be tuned on or ranked by: it was not registered "
                             f"ranked=True (for a measure positive at the start that falls to 0 at the solution); "
                             f"rank by one of {', '.join(RANKED_METRICS)} and show {metric.name!r} beside it "
                             "(metrics=...)")
        return metric
    if metric not in RANKED_METRICS:
        raise ValueError(f"metric {metric!r} cannot be tuned on or ranked by (it does not fall from its start to 0 "
                         f"at the solution); rank by one of {', '.join(RANKED_METRICS)} and show {metric!r} beside "
                         "it (metrics=...)")
    if metric in ("suboptimality", "distance") and optimum_of(objective) is None:
        raise ValueError(f"metric {metric!r} needs the objective's optimum, and {type(objective).__name__} knows "
                         "none: rank by grad_norm_mean")
    return metric


def default_metric(objective):
    """The metric a biased method cannot game: ``"suboptimality"`` (``f(x_bar) - f*``) where the objective knows
    its optimum, else ``"grad_norm_mean"`` (``||grad f(x_bar)||``)."""
    from ..objectives import Objective

    if not isinstance(objective, Objective):
        raise TypeError(f"objective must be an Objective of rowstoch_fast.objectives, got {type(objective).__name__}")
    return "suboptimality" if optimum_of(objective) is not None else "grad_norm_mean"


def default_algorithms(A, objective=None):
    """What :func:`compare` runs on ``A`` when not told: every registered algorithm that runs on it (an undirected
    network's methods only where ``A`` is doubly stochastic, or losses / sleep over a symmetric doubly stochastic
    matrix: the undirected rule) and on ``objective``'s gradients (GT-SAGA only on a
    finite sum), in listing order, with the ``mg-`` forms listed; the federated methods (a server and clients,
    not the network) only where named."""
    if not isinstance(A, (MixingMatrix, Network)):  # (an array read as a matrix; None had listed every algorithm)
        A = as_matrix(A)
    chosen = _algorithms.labels(lambda cls: not cls.federated and cls.applies_to(A)
                                and (objective is None or cls.takes_objective(objective)))
    if not chosen and objective is not None:  # (say why: nothing runs on this network and objective together)
        takers = _algorithms.names(lambda cls: cls.takes_objective(objective))
        raise ValueError(f"no algorithm runs on this network and this objective: the methods that take "
                         f"{type(objective).__name__}'s {'regularizer' if getattr(objective, 'regularizer', None) else 'oracle'} "
                         f"({', '.join(takers) or 'none'}) need another network (an undirected graph's doubly "
                         "stochastic weights: --undirected --weights metropolis)")
    return chosen


def _refusal(cls, A):
    """Why the algorithm ``cls`` does not run on ``A``, as a key its refusals are grouped by, or None where it
    runs: ``("unfit", why)`` where ``A``'s layers refuse it (losses or delays it cannot take, said why), ``"W"``
    where ``A``'s weights are not a ``W`` it takes (the weights, not the messages), else the first sentence of its
    ``applies_to``'s docstring."""
    if cls.applies_to(A):
        return None
    unfit = cls._unfit(A) if "W" in cls.matrices else ""
    if unfit:
        return ("unfit", unfit)
    if "W" in cls.matrices and not cls.applies_to(weights_of(A)):
        return "W"
    return " ".join((cls.applies_to.__doc__ or "").split()).split(". ")[0].rstrip(".")


def not_running(labels, A):
    """The methods among ``labels`` (registry names, ``mg-`` forms) that do not run on ``A``, by reason:
    ``{why: [label, ...]}``, ``why`` in words without advice (the advice depends on what the caller can change).
    ``rowstoch compare`` says with it which default methods each setting of a sweep leaves out, and which setting
    refuses a method asked for: a sweep's sections had differed silently, and a refusal in one setting had named
    neither the setting nor a fitting remedy (helper 233). A name not in the registry is left to
    :func:`parse_algorithms` to refuse."""
    refused = {}
    for label in labels:
        cls = REGISTRY.get(method_of(label))
        reason = None if cls is None else _refusal(cls, A)
        if reason is not None:
            refused.setdefault(reason, []).append(label)
    said = {}
    for reason, group in refused.items():
        they = "it runs" if len(group) == 1 else "they run"
        words = (f"{they} only on a doubly stochastic W, or losses or sleep over a symmetric one, and this network "
                 "is neither" if reason == "W" else
                 reason[1].split(": ")[0] if isinstance(reason, tuple) else  # (the layer's reason, not its advice)
                 f"{'it takes' if len(group) == 1 else 'they take'}: {reason}")
        said.setdefault(words, []).extend(group)
    return said


def parse_algorithms(names, A, mg_rounds=None):
    """``[(label, method, rounds)]`` for algorithm names: a registry name, or ``"mg-" + name`` for a
    multi-round method with ``mg_rounds`` rounds (default: Theorem 3's ``A.metrics().recommended_rounds()``)."""
    if isinstance(names, str):
        parts = [s.strip() for s in names.split(",")]
        if names.strip() and not all(parts):  # (a name typed and lost: "a,,b" or "a,b,")
            raise ValueError(f"algorithms: an empty name in {names!r} (two commas in a row, or one at an end)")
        names = [s for s in parts if s]
    elif not isinstance(names, (list, tuple)):
        raise TypeError(f"algorithms must be names (a list, or one comma-separated string), got "
                        f"{type(names).__name__}")
    if not names:
        raise ValueError("algorithms: give at least one algorithm")
    bad = [v for v in names if not isinstance(v, str)]
    if bad:
        raise TypeError(f"algorithms: every name must be a string, got {type(bad[0]).__name__} {bad[0]!r}")
    out, refused, seen = [], {}, set()
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
            raise ValueError(f"algorithms: unknown algorithm {label!r}{did_you_mean(label, known)}; choose from "
                             f"{', '.join(known)}")
        if label in seen:
            raise ValueError(f"algorithms: {label!r} is listed twice")
        seen.add(label)
        reason = _refusal(REGISTRY[method], A)
        if reason is not None:  # (every such method named at once, by reason: helper 158 met them one try at a
            # time)
            refused.setdefault(reason, []).append(label)
            continue
        out.append((label, method, int(rounds)))
    if refused:
        said = []
        for reason, labels in refused.items():
            one, named = len(labels) == 1, ", ".join(map(repr, labels))
            said.append(f"{named} {'runs' if one else 'run'} on an undirected network's doubly stochastic W, and "
                        f"this network is not one (build it with directed=False, weights='metropolis'; on the "
                        f"command line --undirected --weights metropolis)" if reason == "W" else
                        f"{named} {'does' if one else 'do'} not run on this network: {reason[1]}"
                        if isinstance(reason, tuple) else
                        f"{named} {'does' if one else 'do'} not run on this network ({type(A).__name__}); "
                        f"{'it takes' if one else 'they take'}: {reason}")
        raise ValueError("algorithms: " + "; ".join(said))
    return out


@dataclass(frozen=True)
class Method:
    """One method of a comparison: its label in the tables, registry name, gossip rounds per iteration,
    constructor options (``tracker`` included), and its rate (None: tuned) with where the rate comes from."""

    label: str
    method: str
    rounds: int
    options: dict = field(default_factory=dict)
    lr: float = None
    lr_source: str = "tuned"

    @property
    def draws(self):
        """Whether it draws from its own ``seed`` (:meth:`~rowstoch_fast.algorithms.Optimizer.draws_for`: a
        federated method's clients, ProxSkip's coins)."""
        return REGISTRY[self.method].draws_for(self.options)

    def redrawn(self, shift):
        """This method on draws of its own where it :attr:`draws`: its ``seed`` + ``shift`` (repetition ``r``'s, as
        the network :func:`~rowstoch_fast.network.redrawn` by ``r``; ProxSkip's iterations follow its coins), itself
        otherwise."""
        if not shift or not self.draws:
            return self
        return replace(self, options=REGISTRY[self.method].redrawn_options(self.options, shift))

    def algorithm(self, A, lr, backend, **extra):
        """The :class:`~rowstoch_fast.Algorithm` of this method on ``A`` at ``lr``."""
        options = dict(self.options)
        return Algorithm(A, lr, rounds=self.rounds, tracker=options.pop("tracker", "exact"), backend=backend,
                         method=self.method, **options, **extra)

    def iterations(self, budget):
        """The iterations a budget of communication rounds allows (``R`` rounds each; ``K`` local steps per round
        for a local-update method: its class's :meth:`~rowstoch_fast.algorithms.Optimizer.iterations_for`)."""
        iterations = max(1, REGISTRY[self.method].iterations_for(budget, self.rounds, self.options))
        if iterations > MAX_ROUNDS:  # (a local_steps of 10^20 ran towards 4e21 iterations, never ending)
            steps = " or its local_steps" if "local_steps" in REGISTRY[self.method].hyper else ""
            raise ValueError(f"{self.label}: a budget of {budget} rounds is {iterations} of its iterations, more than "
                             f"the 2^62 a run counts; lower the budget{steps}")  # (helper 266: dsgd had been
            # told of local steps it has none of)
        return iterations


@dataclass(frozen=True)
class Plan:
    """A validated comparison (:func:`make_plan`): run by :func:`~rowstoch_fast.compare.execute.execute`."""

    network: object
    objective: object
    methods: tuple
    budget: int
    repeats: int
    seed: int
    metric: str
    metrics: tuple  # recorded by the evaluation runs (the ranked metric first): names and extra metrics (Metric)
    points: int
    backend: str
    grid: tuple
    checkpoint_dir: str = None
    previous: dict = field(default_factory=dict)  # label -> an earlier comparison's records of it
    tuned: dict = field(default_factory=dict)  # label -> the earlier comparison's tuning record of it (its rate's)

    def schedule(self, method):
        """The iterations the evaluation run of ``method`` records at: at the ends of rounds for a method of ``K``
        iterations a round (local steps: what it has after a round, not half-way through one), evenly spaced
        otherwise."""
        return round_schedule(method.iterations(self.budget), self.budget, self.points)

    @property
    def ranked(self):
        """The ranked metric as the runs record it: its name, or its :class:`~rowstoch_fast.user_metrics.Metric`."""
        return self.metrics[0]

    @property
    def extra_metrics(self):
        """``{name: properties}`` of the extra metrics recorded (:class:`~rowstoch_fast.user_metrics.Metric`)."""
        return {m.name: m.properties() for m in self.metrics if not isinstance(m, str)}


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


def check_rates(lr, labels):
    """``lr`` (None, one number, or ``{label: number}``) as ``{label: float}``, each finite and > 0."""
    if lr is None:
        return {}
    one = not isinstance(lr, dict)  # (one number for every method: named as given, not as the first method's;
    # helper 164: --lr nan read "lr: pull-diag-gt = nan" where no method had been named)
    given = {label: lr for label in labels} if one else _check_label_dict(lr, "lr", labels)
    rates = {}
    for label, value in given.items():
        name = "lr" if one else f"lr: {label}"
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise TypeError(f"{name} must be a number, got {type(value).__name__} {value!r}")
        if not (np.isfinite(value) and value > 0):
            raise ValueError(f"{name} = {float(value)} must be a finite number > 0")
        rates[label] = float(value)
    return rates


def _check_grid(grid):
    if isinstance(grid, (str, bytes)) or not hasattr(grid, "__iter__"):
        raise TypeError(f"grid must be a sequence of learning rates (numbers > 0), got {type(grid).__name__} "
                        f"{grid!r}")
    bad = [v for v in grid if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer,
                                                                                   np.floating))]
    if bad:
        raise TypeError(f"grid: every learning rate must be a number, got {type(bad[0]).__name__} {bad[0]!r}")
    grid = tuple(sorted({finite_float(v, "grid's learning rate") for v in grid}))  # (10**400: a bare OverflowError)
    if not grid:
        raise ValueError("grid: give at least one learning rate")
    if not all(np.isfinite(v) and v > 0 for v in grid):
        raise ValueError(f"grid: every learning rate must be a finite number > 0, got {grid}")
    for v in grid:  # (refused up front, as compare(lr=...) refuses it: the tuner had refused it on reaching it, with
        # a float32 run's advice "use a larger lr or float64" for a float64 run, naming lr, helper 218)
        check_not_subnormal(v, "grid: the learning rate")
    return grid


def identity(network, objective, seed, rounds_budget, methods=None, points=None, metrics=None):
    """What an earlier comparison's records must share with this one to be kept beside its runs (``frame.attrs``
    of :func:`~rowstoch_fast.compare.compare`'s frame): the network (its layers' parameters and seeds, down to a
    fingerprint of each matrix), the objective, the seed and the budget; with ``methods`` (:class:`Method`), each
    one's gossip rounds and options (its tracker and hyperparameters), the records' ``points`` and the
    ``metrics`` recorded (their names): a repetition added under another tracker, hyperparameter or record
    schedule was put in one frame with the earlier ones."""
    described = objective.describe() if hasattr(objective, "describe") else type(objective).__name__
    out = {"network": describe(network), "objective": described, "seed": seed, "rounds_budget": rounds_budget}
    if methods is not None:
        out["methods"] = {m.label: {"rounds": m.rounds, **_settings(m)} for m in methods}
        out["points"] = points
        names = [getattr(m, "name", m) for m in metrics]
        out["metrics"] = names[:1] + sorted(set(names[1:]))  # (the ranked one, then the others in any order)
    return out


def _settings(method):
    """A method's options as they act: its constructor's defaults filled in (``momentum=0.2`` spelled out is ABM's
    default: the same run), and NumPy values as Python's."""
    import inspect

    empty = inspect.Parameter.empty
    params = inspect.signature(REGISTRY[method.method].__init__).parameters
    out = {key: params[key].default for key in REGISTRY[method.method].hyper
           if key in params and params[key].default is not empty}
    for key, value in method.options.items():
        out[key] = value.item() if isinstance(value, np.generic) else value.tolist() \
            if isinstance(value, np.ndarray) else value
    return out


#: Columns of a comparison's records that are never missing (a row cut mid-way leaves them empty; the status is
#: written last but for the diagnosis).
_BOOKKEEPING = ("iteration", "rep", "communication_rounds", "messages", "bytes", "gradient_evaluations", "status")


def _check_whole(label, part):
    """Refuses the records ``part`` of a run that finished (not interrupted, not diverged: their repetitions all end
    at the same iteration, with as many records; the caller checks that iteration) where they are not whole. compare.csv is written whole, but
    one cut outside the package (an interrupted copy) lost the last record of a repetition, and ``--resume`` then
    ranked that repetition by an earlier record, exit 0 (helper 168); a row cut mid-way lost its counts."""
    counts, ends = part.groupby("rep").size(), part.groupby("rep")["iteration"].max()
    missing = [c for c in _BOOKKEEPING if c in part.columns and part[c].isna().any()]
    short = ends[ends < ends.max()]
    if missing or counts.min() != counts.max() or len(short):
        what = (f"empty {', '.join(missing)} in a row" if missing else
                f"repetition {int(short.index[0])} ends at iteration {int(short.iloc[0])} of {int(ends.max())}"
                if len(short) else f"{counts.min()} records in repetition {int(counts.idxmin())} against "
                f"{counts.max()} in repetition {int(counts.idxmax())}")
        raise ValueError(f"previous: the earlier comparison's records of {label} are not whole ({what}): they were "
                         "cut short or edited after it wrote them; start a new comparison (or, resuming a folder, "
                         "remove its compare.csv: --resume then runs its methods again)")


def _earlier_runs(previous, labels, same):
    """``{label: rows}`` of an earlier comparison's frame (for the labels compared now), refused where its
    ``attrs`` say it compared another problem than ``same`` (:func:`identity`; a frame read back from a file has
    none: the command line compares its experiment.json instead)."""
    if previous is not None and not hasattr(previous, "columns"):  # (0 had met len())
        raise TypeError(f"previous must be the frame of an earlier compare(), got {type(previous).__name__}")
    if previous is None or not len(previous):
        return {}
    if "algorithm" not in getattr(previous, "columns", ()) or "rep" not in previous.columns:
        raise ValueError("previous must be the frame of an earlier compare() (columns algorithm, rep, ...)")
    attrs = getattr(previous, "attrs", {})
    saved = attrs.get("identity")
    if saved is None and not attrs.get("identity_checked_by"):  # (the command line checked its experiment.json)
        warnings.warn("previous carries no record of the problem it compared (a frame read back from a file keeps "
                      "none): its network, objective, seed and budget are not checked against this comparison's; "
                      "pass the frame compare() returned, or rowstoch compare --resume, which checks them",
                      UserWarning, stacklevel=4)
    if saved is not None:  # (its runs would go on, or be added to, on another network or problem: silently)
        saved, same = (json.loads(json.dumps(d, default=str)) for d in (saved, same))
        kept = set(saved.get("methods", {})) & set(same.get("methods", {})) & set(labels)
        for d in (saved, same):  # (the methods both compare; an identity of an older version names none, and
            # where none is kept, nothing of its records is mixed with this comparison's)
            if "methods" in d:
                d["methods"] = {label: d["methods"][label] for label in kept}
            for key in ("methods", "points", "metrics"):
                if key not in saved or not kept:
                    d.pop(key, None)
        found = first_difference(saved, same)
        if found:
            field_, old, new = found
            raise ValueError(f"previous: the earlier comparison ran with {field_.rstrip('.')} = {old!r}, this one "
                             f"has {new!r}; resume it with the same network, objective, seed, budget, methods' "
                             "settings, points and metrics, or start a new comparison")
    return {label: part for label, part in previous.groupby("algorithm", sort=False) if label in labels}


def _metric_entries(ranked, metrics):
    """The evaluation runs' metrics: ``ranked`` first, then ``metrics`` (names, or extra metrics:
    :func:`~rowstoch_fast.user_metrics.resolve_metrics`), each once."""
    from ..user_metrics import resolve_metrics

    metrics = resolve_metrics(metrics)
    name = getattr(ranked, "name", ranked)
    return (ranked, *(m for m in metrics if getattr(m, "name", m) != name))


def held_bytes(*objects):
    """The bytes of a worker process's copy of ``objects`` (a problem: its objective and network): the size of
    their pickle, counted as it is made (protocol 5, arrays out of band: no copy is made), so every array is
    counted wherever it is held, a view as its own elements; 0 where they cannot be pickled (a process could not
    take them at all: :func:`~rowstoch_fast.compare.processes.execute_in_processes` says so)."""
    import pickle

    class _Count:
        size = 0

        def write(self, chunk):
            self.size += memoryview(chunk).nbytes

    count, buffers = _Count(), []
    try:
        pickle.Pickler(count, protocol=5, buffer_callback=buffers.append).dump(objects)
    except Exception:  # noqa: BLE001 - unpicklable: nothing a worker could hold
        return 0
    return count.size + sum(buffer.raw().nbytes for buffer in buffers)


def _one_line_label(text, name):
    """``text`` (a label a table prints: a rate's source) as a string, refused where it holds a control character
    (a new line, a tab), a line or paragraph separator, or a bidirectional embedding, override or isolate (a
    right-to-left override): those had gone into the terminal's table and the Markdown one as they were, breaking
    their rows (helper 192)."""
    text = check_text(text, name)
    bad = next((c for c in text if unicodedata.category(c) in ("Cc", "Zl", "Zp") or unicodedata.bidirectional(c) in
                ("LRE", "RLE", "LRO", "RLO", "PDF", "LRI", "RLI", "FSI", "PDI")), None)  # (controls, line and
    # paragraph separators, the bidirectional embeddings and overrides: not an emoji's zero-width joiner)
    if bad is not None:
        raise ValueError(f"{name} must be one line of printable text, got {text!r} (it holds {bad!r}, "
                         f"U+{ord(bad):04X})")
    return text


def make_plan(A, objective, algorithms=None, rounds_budget=2000, *, lr=None, tune=True, repeats=5, seed=0,
              tracker="exact", backend="auto", mg_rounds=None, points=25, metric=None, metrics=None, lr_source=None,
              hyper=None, checkpoint_dir=None, previous=None, grid=TUNE_GRID, jobs=1):
    """Check every argument of :func:`~rowstoch_fast.compare.compare` and return its :class:`Plan` (the
    arguments as :func:`~rowstoch_fast.compare.compare` documents them; ``jobs``, the processes that will run
    its methods at once, for the memory they need together). A ValueError or TypeError names the first argument
    that is wrong, a MemoryError a comparison that cannot fit; nothing has run."""
    from ..objectives import Objective

    if not isinstance(A, (MixingMatrix, Network)):
        raise TypeError(f"A must be a MixingMatrix or a network (rowstoch_fast.network), got {type(A).__name__}")
    if not isinstance(objective, Objective):
        raise TypeError(f"objective must be an Objective of rowstoch_fast.objectives, got {type(objective).__name__}")
    if objective.n != A.n:
        raise ValueError(f"objective has n = {objective.n} nodes but the network has {A.n}")
    batch_of(objective)  # (an objective of the user's: its batch, before anything runs)
    try:
        redrawn(A, 1)  # (each repetition runs on a draw of its own: a layer that cannot be drawn anew, before any run)
    except TypeError as exc:
        raise TypeError(f"A: {exc}") from None
    check_choice(backend, "backend", BACKENDS)
    check_tracker(tracker)  # (and mg_rounds: checked where no method reads them too, as any argument)
    if mg_rounds is not None:
        check_int(mg_rounds, "mg_rounds", minimum=1, maximum=MAX_ROUNDS)
    rounds_budget = check_int(rounds_budget, "rounds_budget", minimum=1)
    points = check_int(points, "points", minimum=1)
    repeats = check_int(repeats, "repeats", minimum=1)
    seed = check_int(seed, "seed", minimum=0, maximum=MAX_KEY)
    if not isinstance(tune, (bool, np.bool_)):
        raise TypeError(f"tune must be True or False, got {tune!r}")
    ranked = check_ranked_metric(metric if metric is not None else default_metric(objective), objective)
    metric = getattr(ranked, "name", ranked)
    if metrics is None:
        metrics = (ranked, "consensus_error")
    elif isinstance(metrics, str):
        raise TypeError(f"metrics must be a sequence of metric names, got the string {metrics!r}")
    metrics = _metric_entries(ranked, metrics)
    grid = _check_grid(grid)
    specs = parse_algorithms(default_algorithms(A, objective) if algorithms is None else algorithms, A, mg_rounds)
    check_shown_metrics(metrics, objective, specs)
    for label, method, _ in specs:
        check_takes(REGISTRY[method], objective, label)
    labels = [label for label, _, _ in specs]
    warn_network_ignored(A, [label for label, method, _ in specs if not REGISTRY[method].matrices], stacklevel=3)
    hyper = _check_label_dict(hyper, "hyper", labels)
    for label, options in hyper.items():
        if not isinstance(options, dict):
            raise TypeError(f"hyper: {label} must be a dict of its keyword arguments (e.g. {{'rounds': 3}}), got "
                            f"{type(options).__name__} {options!r}")
        own = next((key for key in ("lr", "backend", "method", "A") if key in options), None)
        if own is not None:  # (Python's "got multiple values for argument 'lr'", helper 193)
            raise ValueError(f"hyper: {label}: {own!r} is compare()'s own argument"
                             + (f" (lr={{{label!r}: ...}})" if own == "lr" else ""))
    methods = []
    for label, method, rounds in specs:  # every hyperparameter checked before anything runs
        options = dict(hyper.get(label, {}))
        rounds = options.pop("rounds", rounds)
        options.setdefault("tracker", tracker)
        if "tracker" not in REGISTRY[method].hyper:  # compare's tracker is for the methods that have one
            if "tracker" in hyper.get(label, {}) and options["tracker"] != "exact":
                raise ValueError(f"hyper: {label}: tracker={options['tracker']!r} is for the methods with a "
                                 f"Pull-Diag tracker; {method} has none")
            options.pop("tracker")
        try:
            m = Method(label, method, check_int(rounds, "rounds", minimum=1), options)
            m.algorithm(A, 1.0, backend)
        except (ValueError, TypeError) as exc:
            raise type(exc)(f"hyper: {label}: {exc}") from None
        if options.get("tracker", "exact") != "exact" and isinstance(A, Network) and A.static is None:
            # (refused when the tracker was built: after `rowstoch compare` had made its folder, and had run and
            # written the settings before a lossy one)
            from ..tracker import NetworkTracker

            try:
                NetworkTracker.check(A, options["tracker"], max_bytes=math.inf)
            except ValueError as exc:
                raise ValueError(f"hyper: {label}: {exc}" if "tracker" in hyper.get(label, {}) else str(exc)) \
                    from None
        methods.append(m)
    for m in methods:
        if rounds_budget < m.rounds:  # one iteration would already spend more than the budget
            if "rounds" in hyper.get(m.label, {}):  # (its own rounds: "lower its rounds (mg_rounds)" had named the
                # option that does not set them, and a file's author followed it to the same refusal, helper 266)
                raise ValueError(f"hyper: {m.label}: rounds = {m.rounds} is more than the budget of {rounds_budget} "
                                 "rounds (one iteration would spend more than all of it); raise the budget or lower "
                                 "its rounds")
            given = mg_rounds is not None  # (helper 231: "or pass --mg-rounds" to one who had)
            raise ValueError(f"rounds_budget = {rounds_budget} is less than one iteration of {m.label} (R = "
                             f"{m.rounds} rounds); raise the budget or " + ("lower its rounds (mg_rounds)" if given
                                                                           else "pass fewer rounds (mg_rounds)"))
        if m.iterations(rounds_budget) < MIN_ITERATIONS:
            derived = mg_rounds is None and "rounds" not in hyper.get(m.label, {})  # (Theorem 3's R, or given)
            each = (f": R = {m.rounds} rounds each{' (Theorem 3)' if derived else ''}," if m.rounds > 1
                    else "")  # (Theorem 3's R is the multi-round methods'; helper 164: DSGD's warning cited it)
            k = m.iterations(rounds_budget)
            warnings.warn(f"{m.label} runs only {k} iteration{'s' if k != 1 else ''}{each} out of a budget of "
                          f"{rounds_budget} round{'s' if rounds_budget != 1 else ''}; raise the budget" +
                          ((" or pass mg_rounds (--mg-rounds)" if derived or mg_rounds is not None else
                            " or give it fewer rounds") if m.rounds > 1 else ""), RuntimeWarning, stacklevel=3)
    rates = check_rates(lr, labels)
    sources = {label: "given" for label in rates}
    for label, text in _check_label_dict(lr_source, "lr_source", labels).items():
        if label not in rates:
            raise ValueError(f"lr_source: {label} has no given lr")
        sources[label] = _one_line_label(text, f"lr_source of {label}")
    earlier = _earlier_runs(previous, labels, identity(A, objective, seed, rounds_budget, methods, points, metrics))
    by_label = {m.label: m for m in methods}
    for label, part in earlier.items():  # an earlier comparison's rates are kept (its runs go on with them)
        status = str(part["status"].iloc[0]) if "status" in part.columns else "ok"
        planned = by_label[label].iterations(rounds_budget)
        if status not in ("interrupted", "diverged"):
            _check_whole(label, part)
        ran = int(part["iteration"].max())
        if status not in ("interrupted", "diverged") and ran != planned:  # (a finished run of another length: an
            # earlier version ran NIDS one iteration short of the budget of rounds; its kept rows were then read as
            # a repetition that stopped, "diverged")
            raise ValueError(f"previous: the earlier comparison ran {label} for {ran} iterations, this one runs it "
                             f"{planned} for the same budget of {rounds_budget} rounds (an earlier version of the "
                             "package, another budget, or records cut short); start a new comparison")
        done = int(part["rep"].nunique())
        if done > repeats:  # (its records would be cut: never silently)
            raise ValueError(f"repeats = {repeats} is fewer than the {done} repetitions the earlier comparison holds "
                             f"of {label}; pass repeats >= {done} (an earlier comparison's records are never dropped)")
        if label in rates and rates[label] != float(part["lr"].iloc[0]):
            raise ValueError(f"lr: {label} = {rates[label]:g}, but the earlier comparison ran it at "
                             f"{float(part['lr'].iloc[0]):g}; keep its rate or start a new comparison")
        rates.setdefault(label, float(part["lr"].iloc[0]))
        sources.setdefault(label, str(part["lr_source"].iloc[0]) if "lr_source" in part.columns else "given")
    missing = [label for label in labels if label not in rates]
    if missing and not tune:
        raise ValueError(f"lr: no learning rate for {', '.join(missing)}; give one (lr=... or "
                         f"--lr {missing[0]}=0.01) or let them be tuned (tune=True)")
    # the largest blocks the runs will hold (each state block twice, and the work blocks, of the widest method), as
    # many at once as processes run methods, refused before anything runs: at 2^20 nodes a comparison made its
    # folder, then ran a minute before the first method's blocks were refused, advising fewer repetitions
    d = int(np.shape(objective.x0())[-1]) if np.ndim(objective.x0()) else 1
    tuned = [m for m in methods if m.label not in rates]
    replicas = max(repeats, 2 * len(grid) if tuned else 1)
    jobs = check_int(jobs, "jobs", minimum=1)
    if not one_process(backend) and jobs > 1:  # (the workers had died in MPI_Init, told "out of memory?", helper
        # 203; the command line's words)
        raise ValueError("jobs > 1 runs methods in parallel processes; with backend='mpi' the ranks of mpiexec are "
                         "the parallelism (jobs=1)")
    at_once = min(jobs, len(methods))
    each = sorted((2 * sum(name not in cls.narrow for name in cls.state) + cls.scratch  # (as Optimizer allocates
                   for cls in (_algorithms.REGISTRY[m.method] for m in methods)), reverse=True)  # them)
    blocks = sum(each[:at_once])  # (the widest methods, as many as run at once)
    nodes = backends.nodes_per_process(backend, A.n)  # (under MPI each rank holds its share)
    hint = (f"give the rates of {', '.join(m.label for m in tuned[:3])}{', ...' if len(tuned) > 3 else ''} (lr=..., "
            f"--lr NAME=VALUE): the tuner runs its {len(grid)} rates x 2 streams as {2 * len(grid)} replicas"
            if tuned and 2 * len(grid) > repeats else "lower repeats")
    if at_once > 1:
        hint += f", or run fewer methods at once (jobs = {jobs})"
    # with jobs > 1 each worker process holds its own copy of the problem (the data), three at its peak (the bytes
    # the process start reads, the payload, the plan unpickled from it: a worker of a 134 MB least-squares problem
    # peaked at 476 MB): 8 workers of a 2 GB data file would take 48 GB beside the one process holding it
    held = held_bytes(objective, A) if at_once > 1 else 0
    if held:
        hint += "; jobs = 1 holds the problem once, in this process"
    require_memory(blocks * 8 * nodes * replicas * d + 3 * at_once * held,
                   f"the runs' iterates ({nodes} nodes x {replicas} replicas x d = {d} x {blocks} blocks"
                   + (f" of {at_once} methods at once" if at_once > 1 else "") + ")"
                   + (f" and {at_once} worker processes' copies of the problem ({fmt_bytes(held)} each, three times "
                      "while it is read)" if held else ""), hint)
    records = min(points, max(m.iterations(rounds_budget) for m in methods)) + 2  # (a run's records, each held as
    # its schedule's set and list and as rows of every repetition: points = 10^8 was a bare MemoryError)
    require_memory(records * repeats * (len(METRICS) + 8 + len(metrics)) * 32,
                   f"points = {points} records of each run ({records} x {repeats} repetitions)",
                   "record fewer points (points=) or run fewer repetitions")
    if checkpoint_dir is not None:
        if not isinstance(checkpoint_dir, (str, os.PathLike)):
            raise TypeError(f"checkpoint_dir must be a folder's path (str or os.PathLike), got "
                            f"{type(checkpoint_dir).__name__} {checkpoint_dir!r}")
        checkpoint_dir = os.fspath(checkpoint_dir)
    methods = tuple(Method(m.label, m.method, m.rounds, m.options, rates.get(m.label), sources.get(m.label, "tuned"))
                    for m in methods)
    tuned = {label: record for label, record in (getattr(previous, "attrs", None) or {}).get("tuning", {}).items()
             if label in earlier and record}  # (what chose a kept rate: its diagnosis and the tables say it again)
    return Plan(A, objective, methods, rounds_budget, repeats, seed, metric, metrics, points, backend, grid,
                checkpoint_dir, earlier, tuned)

