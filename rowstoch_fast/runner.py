"""Experiment runner: an algorithm on an objective, recorded, resumable, interruptible."""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import textwrap
import time
import warnings
from dataclasses import dataclass

import numpy as np

from . import _core, _progress, backends
from ._checks import (MAX_KEY, MAX_ROUNDS, check_bool, check_caption, check_choice, check_int, check_step_size,
                      check_tracker, did_you_mean, load_npz_file, precision_of, require_memory)
from ._metric_names import METRICS, TEST_METRICS  # (the metrics of every record, in order; the test ones)
from ._progress import bar as progress_bar
from ._files import atomic_write, check_path, file_target
from ._signals import first, hold, put_back, signals_held, sigterm_as_interrupt
from .algorithms import REGISTRY
from .algorithms import names as _algorithm_names
from .errors import DivergenceError, NetworkIgnoredWarning
from .mixing import MixingMatrix
from .objectives import Objective, Oracle, batch_of, optimum_of, past_rounding, value_rounding
from .user_metrics import MetricState, linear_scale, resolve_metrics

logger = logging.getLogger(__name__)

__all__ = ["Algorithm", "History", "algorithm_options", "run", "config_mismatch", "record_metrics", "record_schedule",
           "round_schedule", "build_replicas"]

#: /2 adds the run's configuration (checked on resume); /3 the records' suboptimality, distance and
#: grad_norm_mean (a /2 checkpoint is resumed with those NaN in its earlier records); /1 checkpoints cannot be
#: checked and are refused. A /3 checkpoint names its records' columns (``columns``: the test metrics and the
#: extra metrics, :mod:`rowstoch_fast.user_metrics`); one without that entry has those of :data:`_COLUMNS_3`.
CHECKPOINT_FORMAT = "rowstoch_fast.checkpoint/3"
#: The metrics a /2 checkpoint's records lack (after its first five).
_ADDED_IN_3 = 3
#: What a record holds before its metrics.
_HEAD = ("iteration", "communication_rounds", "samples", "rep")
#: The columns of the records of a /3 checkpoint that does not name them.
_COLUMNS_3 = (*_HEAD, *METRICS[:8], "wall_seconds")
#: The horizontal axes a record has.
AXES = ("communication_rounds", "iteration", "samples")


def record_schedule(iterations, points):
    """The iterations a run of ``iterations`` records at for about ``points`` records: ``0``, every
    ``max(1, iterations // points)`` and the last (the harness's records: evenly spaced, so that a figure against
    communication rounds and the end of the run are both covered)."""
    iterations, points = check_int(iterations, "iterations", minimum=0), check_int(points, "points", minimum=0)
    every = max(1, iterations // max(1, points))
    return sorted({0, iterations, *range(0, iterations + 1, every)})


def round_schedule(iterations, budget, points):
    """:func:`record_schedule` for a run of ``iterations`` iterations on a budget of ``budget`` communication rounds:
    at the ends of rounds where a round is ``K`` iterations (``iterations = K * budget``, local steps: what a method
    has after a round, not half-way through one), evenly spaced otherwise."""
    if iterations > budget > 0 and iterations % budget == 0:
        per_round = iterations // budget
        return [per_round * r for r in record_schedule(budget, points)]
    return record_schedule(iterations, points)


def check_metric(metric, name="metric", choices=METRICS):
    """``metric`` if it is one of ``choices`` (a record's metrics), else a ValueError listing them."""
    if not isinstance(metric, str) or metric not in choices:
        raise ValueError(f"{name} must be one of {', '.join(choices)}, got {metric!r}")
    return metric


#: Settings that may differ between a checkpoint and the run that resumes it; every other entry of the
#: configuration must be equal.
RESUMABLE = ("iterations", "lr", "record_every", "record_at")
#: Warn when the recorded gradient norm grows by more than this factor over a run (divergence without NaN).
GROWTH_WARNING = 1e3
#: The most checkpoints a run writes by default (``checkpoint_every``): each writes every record so far, and one
#: every ten records had made a run of a record an iteration quadratic (helper 231: 20,000 iterations 4.1 s
#: without a checkpoint, 205 s with one; 10^5 would have written about a terabyte).
CHECKPOINTS = 100
#: Bytes a recorded value takes at the records' peak, checked against the free memory before a run: a row's Python
#: float and its slot (32), and the frame built from the rows beside them at the end. Helper 231 measured 54-85 per
#: value (863-1,355 bytes per record and repetition) where 32 had been checked: a run past the free memory computed
#: its 150,000 iterations and ended in NumPy's allocation error.
RECORD_BYTES = 96


#: Constructor arguments that :meth:`Algorithm.build` sets itself (not hyperparameters a user passes through).
_BUILT = {"self", "A", "C", "W", "n", "x0", "lr", "rounds", "tracker", "backend", "comm", "partition"}


def _check_method(method, name="method"):
    """``method`` if it names an algorithm of the registry, else a TypeError / ValueError naming ``name``."""
    if not isinstance(method, str):
        raise TypeError(f"{name} must be an algorithm's name (str, one of rowstoch_fast.algorithms.REGISTRY), got "
                        f"{type(method).__name__} {method!r}")
    if method not in REGISTRY:
        raise ValueError(f"{name} must be a registered algorithm, got {method!r}{did_you_mean(method, REGISTRY)}: "
                         f"one of {', '.join(sorted(REGISTRY))}")  # (the suggestion first: it had come after a
        # list of 52 names, 545 characters, and a new user read none, helper 246)
    return method


def algorithm_options(method):
    """The hyperparameters ``method``'s constructor takes beyond ``lr``, ``rounds`` and ``tracker`` (``form``,
    ``check_finite``, ...): what :class:`Algorithm` and ``compare(hyper=...)`` pass through."""
    import inspect

    params = inspect.signature(REGISTRY[_check_method(method)].__init__).parameters
    return tuple(name for name, p in params.items()
                 if name not in _BUILT and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))


@dataclass(frozen=True, init=False)
class Algorithm:
    """What to run: an algorithm of :data:`rowstoch_fast.algorithms.REGISTRY` on a network with a step size.

    Parameters
    ----------
    A : MixingMatrix or network
        The row-stochastic network (a time-varying one of :mod:`rowstoch_fast.network`
        too, on the CPU backend); algorithms that mix with a column-stochastic
        ``C`` get the same graph with out-degree weights
        (:func:`~rowstoch_fast.mixing.out_degree_weights`, and the same losses).
    lr : float or array_like of shape (n,)
        The step size; one per node for FROST (``method="frost"``, or Pull-Diag-GT with ``form="frost"``), its
        uncoordinated step sizes.
    rounds : int, default 1
        ``1`` is Pull-Diag-GT (eq. 7); ``R > 1`` is MG-Pull-Diag-GT (eq. 12),
        whose oracle then averages ``R`` mini-batches per iteration (and the
        same for the other multi-round methods, e.g. ``"push-diging"``).
    tracker : {"exact", "perron"}
        For the methods with a Pull-Diag tracker.
    backend : {"auto", "cpu", "cupy", "mpi"}
        ``"cupy"`` runs on the GPU (records copy to the host); ``"mpi"`` partitions the nodes over the MPI
        ranks (run under ``mpiexec``); rank 0 records the metrics.
    method : str, default "pull-diag-gt"
        A name of :data:`~rowstoch_fast.algorithms.REGISTRY` (``"frost"``, ``"push-pull"``, ...).
    **hyper
        Any other hyperparameter of the method's constructor, passed through
        (:func:`algorithm_options` lists them, e.g. ``form="frost"`` for
        Pull-Diag-GT); an unknown one is a ValueError naming those it takes.

    Examples
    --------
    >>> from rowstoch_fast import topology
    >>> Algorithm(topology.exponential(8), lr=0.01).name
    'pull-diag-gt'
    >>> Algorithm.mg_pull_diag_gt(topology.exponential(8), lr=0.01).rounds  # ceil(3 (1 + ln 8) / 0.5)
    19
    """

    A: MixingMatrix
    lr: float
    rounds: int = 1
    tracker: str = "exact"
    backend: str = "auto"
    method: str = "pull-diag-gt"
    hyper: tuple = ()

    def __init__(self, A, lr, rounds=1, tracker="exact", backend="auto", method="pull-diag-gt", **hyper):
        for name, value in (("A", A), ("lr", lr), ("rounds", rounds), ("tracker", tracker), ("backend", backend),
                            ("method", method), ("hyper", tuple(sorted(hyper.items())))):
            object.__setattr__(self, name, value)
        self.__post_init__()

    @property
    def options(self):
        """The hyperparameters passed through, as a dict."""
        return dict(self.hyper)

    def _key(self):
        """The fields, with a rate array (one per node or replica) as its shape and values: what ``==`` and
        ``hash`` compare (the generated ones compared arrays: "truth value of an array is ambiguous")."""
        lr = self.lr if np.ndim(self.lr) == 0 else (np.shape(self.lr), tuple(np.ravel(self.lr).tolist()))
        return (self.A, lr, self.rounds, self.tracker, self.backend, self.method, self.hyper)

    def __eq__(self, other):
        if not isinstance(other, Algorithm):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __post_init__(self):
        from .network import Network

        if not isinstance(self.A, (MixingMatrix, Network)):
            raise TypeError(f"A must be a MixingMatrix or a network (rowstoch_fast.network), got {type(self.A).__name__}")
        if isinstance(self.method, str) and self.method.startswith("mg-") and self.method[3:] in REGISTRY:
            raise ValueError(f"method {self.method!r} is a comparison's label: here the method is "
                             f"method={self.method[3:]!r} with rounds=R (its R gossip rounds per iteration)")
        _check_method(self.method)
        check_int(self.rounds, "rounds", minimum=1)
        if self.rounds > 1 and not REGISTRY[self.method].multi_round:
            raise ValueError(f"{self.method} takes one gossip round per iteration, got rounds = {self.rounds}")
        check_tracker(self.tracker)
        check_choice(self.backend, "backend", backends.BACKENDS)  # (an array had raised "truth value ... is ambiguous")
        if self.tracker != "exact" and "tracker" not in REGISTRY[self.method].hyper:  # it would be ignored
            raise ValueError(f"tracker={self.tracker!r} is for the methods with a Pull-Diag tracker; {self.method} "
                             "has none")
        takes = algorithm_options(self.method)
        unknown = [name for name, _ in self.hyper if name not in takes]
        if unknown:
            raise ValueError(f"{self.method} takes no hyperparameter {unknown[0]!r}"
                             + (f" (it takes {', '.join(takes)})" if takes else " (it takes lr only)"))
        per_node = np.ndim(self.lr) == 1 and self.optimizer.takes_rates_per_node(**self.options)  # (FROST's)
        if not per_node:
            object.__setattr__(self, "lr", check_step_size(self.lr))  # (one rate, or one per replica)
        if self.hyper or per_node:  # their values too, before anything is built (a comparison's other methods ran
            # first); a rate per node as the optimizer's own checks judge it
            self.optimizer.check_hyper(self.A.n, self.lr, rounds=self.rounds, tracker=self.tracker, **self.options)
        if per_node:
            lr = np.array(self.lr, dtype=np.float64)
            lr.flags.writeable = False
            object.__setattr__(self, "lr", lr)

    @classmethod
    def pull_diag_gt(cls, A, lr, tracker="exact"):
        """Pull-Diag-GT (one gossip round per iteration)."""
        return cls(A, lr, 1, tracker)

    @classmethod
    def mg_pull_diag_gt(cls, A, lr, rounds=None, tracker="exact"):
        """MG-Pull-Diag-GT with ``rounds`` gossips (default: Theorem 3's recommendation)."""
        return cls(A, lr, A.metrics().recommended_rounds() if rounds is None else rounds, tracker)

    @property
    def name(self):
        """The method's name, ``"mg-<method>(R=...)"`` with several rounds (``"mg-pull-diag-gt(R=19)"``)."""
        return self.method if self.rounds == 1 else f"mg-{self.method}(R={self.rounds})"

    @property
    def optimizer(self):
        """The optimizer class."""
        return REGISTRY[self.method]

    def build(self, x0, **extra):
        """The optimizer starting at ``x0`` (``extra``: more constructor keywords, e.g. the objective's
        ``regularizer`` for a proximal method)."""
        return self.optimizer.build(self.A, x0, self.lr, rounds=self.rounds, tracker=self.tracker,
                                    backend=self.backend, **self.options, **extra)

    def resume(self, state, lr=None, objective=None):
        """The optimizer of a ``state_dict``, on this algorithm's matrices and backend (a proximal method's
        regularizer: the algorithm's, else ``objective``'s: a user's :class:`~rowstoch_fast.composite.Prox` is not
        rebuilt from the state)."""
        cls = self.optimizer
        matrices = {k: v for k, v in cls.problem_matrices(self.A).items() if k in cls.matrices}
        extra = {**cls.objective_options(objective), **{k: v for k, v in self.options.items() if k == "regularizer"}}
        return cls.from_state_dict(state, **matrices, lr=lr, backend=self.backend, **extra)


def check_takes(cls, objective, label=None):
    """A ValueError unless the algorithm ``cls`` runs on ``objective``'s gradients (a method of per-sample
    gradients needs a finite sum) and regularizer (a composite objective needs a proximal method)."""
    r = getattr(objective, "regularizer", None)
    if r is not None and not cls.composite:
        proximal = ", ".join(_algorithm_names(lambda c: c.composite and c.takes_objective(objective)))
        raise ValueError(f"algorithm {label or cls.name!r} has no proximal step, and the objective has the "
                         f"regularizer {r!r}: it would minimise another function; the proximal methods are "
                         f"{proximal}")
    if not cls.takes_objective(objective):
        if cls.gradients == "prox":
            raise ValueError(f"algorithm {label or cls.name!r} takes the local proximal operators of an objective "
                             f"without a regularizer (Quadratic, LeastSquares, LogisticL2); {type(objective).__name__} "
                             "has none")
        raise ValueError(f"algorithm {label or cls.name!r} takes per-sample gradients of a finite-sum objective "
                         f"(LeastSquares, NonconvexLogistic, LogisticL2); {type(objective).__name__} has none")


class History:
    """Recorded metrics of a run: one row per (record, repetition).

    Columns: ``iteration``, ``communication_rounds``, ``samples`` (per node),
    ``rep``, ``grad_norm`` (the paper's ``||(1/n) sum_i grad f_i(x_i)||``, Appendix
    E.2: zero at any point where the local gradients cancel, a biased method's
    fixed point included), ``grad_norm_centroid`` (``||grad f(pi^T x)||``), ``loss``
    (``(1/n) sum_i f_i(x_i)``, each node at its own model: it can fall below
    ``f*``), ``consensus_error`` (``||x - 1 pi^T x||_F``; here and in
    ``grad_norm_centroid``, ``pi`` is the optimizer's
    :meth:`~rowstoch_fast.algorithms.Optimizer.centroid_weights`: ``A``'s
    Perron vector on a static network, ``1/n`` for the push-sum methods and on
    a network whose matrix changes, lossy or sleepy, which has no fixed one), ``descent_deviation``
    (``||pi^T y - 1^T g||``, eq. 9), ``suboptimality`` (``f(x_bar) - f*`` at
    the plain mean ``x_bar`` of the node models, where the objective knows its
    :meth:`~rowstoch_fast.objectives.Objective.optimum`, else NaN), ``distance``
    (the mean over nodes of ``||x_i - x*||``, likewise), ``grad_norm_mean``
    (``||grad f(x_bar)||``), ``test_loss``, ``test_accuracy`` (classification)
    and ``test_mse`` (regression) of the mean model ``x_bar`` on the
    objective's held-out data (NaN without :attr:`~rowstoch_fast.objectives.Objective.test_data`;
    :meth:`~rowstoch_fast.objectives.Objective.test_metrics` defines them),
    ``wall_seconds``, then one column per extra metric the run recorded
    (:mod:`rowstoch_fast.user_metrics`: metrics you define, ``node_*``
    statistics; :attr:`extra`).

    Attributes
    ----------
    frame : pandas.DataFrame
        The raw rows.
    interrupted : bool
        True when the run stopped early on Ctrl-C; the rows are those recorded.
    diverged : bool
        True when the run stopped on a :class:`~rowstoch_fast.DivergenceError`
        (``meta["diverged"]`` says where); the rows are those recorded before.
    meta : dict
        Algorithm, objective and run settings (``meta["config"]``: what a
        checkpoint must match to be resumed; ``meta["extra_metrics"]``: the
        extra metrics' names and properties).
    extra : tuple of str
        The extra metrics' columns (after ``wall_seconds``), in order.
    """

    def __init__(self, rows, meta=None, interrupted=False, diverged=False):
        import pandas as pd

        self.meta = dict(meta or {})
        self.extra = tuple(self.meta.get("extra_metrics", {}))
        self.frame = pd.DataFrame(rows, columns=[*_HEAD, *METRICS, "wall_seconds", *self.extra])
        self.interrupted = bool(interrupted)
        self.diverged = bool(diverged)

    @property
    def overflowed(self):
        """The metrics among ``grad_norm``, ``loss`` and ``consensus_error`` whose last record (the mean over
        repetitions) is infinite, or NaN where the first was finite: iterates that stayed finite but grew past what
        the metrics can square, or an objective whose value or gradient turned NaN at finite iterates. Only the
        metrics the run recorded count (``meta["recorded"]``, where it chose some: a run resumed with fewer has
        NaN where its checkpoint's records have values)."""
        if not len(self.frame):
            return []
        at = self.frame["iteration"]
        first, last = self.frame.loc[at == at.min()], self.frame.loc[at == at.max()]
        recorded = self.meta.get("recorded", METRICS)
        with np.errstate(invalid="ignore", over="ignore"):
            return [m for m in ("grad_norm", "loss", "consensus_error") if m in recorded and (
                np.isinf(last[m].mean()) or (np.isnan(last[m].mean()) and np.isfinite(first[m].mean())))]

    @property
    def status(self):
        """How the run ended, as ``rowstoch run`` says it and history.json holds it: ``"interrupted"`` (stopped
        early: Ctrl-C, SIGTERM), ``"diverged"`` (stopped on a :class:`~rowstoch_fast.DivergenceError`; or ended
        with a gradient norm or loss grown past the runner's warning, ``meta["grew"]``; or with metrics that
        overflowed, :attr:`overflowed`) or ``"done"``."""
        if self.interrupted:
            return "interrupted"
        return "diverged" if self.diverged or self.meta.get("grew") or self.overflowed else "done"

    @property
    def metrics(self):
        """Every metric column: :data:`METRICS`, then :attr:`extra`."""
        return METRICS + self.extra

    def __len__(self):
        return len(self.frame)

    def __repr__(self):
        flag = ", interrupted" if self.interrupted else (", diverged" if self.diverged else "")
        return f"History({len(self.frame)} rows, {self.frame['rep'].nunique() if len(self.frame) else 0} repetitions{flag})"

    def summary(self):
        """Mean and standard deviation over repetitions for every recorded iteration."""
        g = self.frame.groupby("iteration", sort=True)
        out = g[["communication_rounds", "samples", "wall_seconds"]].max()
        for m in self.metrics:
            out[m] = g[m].mean()
            out[m + "_std"] = g[m].std(ddof=1)
        return out.reset_index()

    def _check_recorded(self, metric):
        """``metric`` checked as one of :attr:`metrics` the run recorded: a run that chose its metrics
        (``meta["recorded"]``) holds NaN for the others, which ``final`` had returned and ``plot`` drawn as an
        empty plot, without a word (helper 193)."""
        check_metric(metric, choices=self.metrics)
        recorded = self.meta.get("recorded")
        if recorded is not None and metric not in recorded and metric not in self.extra and metric in METRICS:
            raise ValueError(f"this run did not record {metric!r} (it recorded {', '.join(recorded)}): "
                             f"run(..., metrics=[..., {metric!r}]) records it")
        return metric

    def final(self, metric="grad_norm"):
        """Mean of ``metric`` over repetitions at the last recorded iteration."""
        self._check_recorded(metric)
        last = self.frame["iteration"].max()
        return float(self.frame.loc[self.frame["iteration"] == last, metric].mean())

    def to_csv(self, path, summary=True):
        """Write the summary (or the raw rows) as CSV (whole: through a temporary file renamed over it)."""
        table = self.summary() if check_bool(summary, "summary") else self.frame
        atomic_write(os.fspath(path), lambda f: table.to_csv(f, index=False))

    def to_json(self, path):
        """Write metadata, summary and raw rows as one (strict) JSON document: a metric an algorithm does not
        have (``descent_deviation`` outside the Pull-Diag-GT family) or a diverged one is ``null``; ``status`` is
        :attr:`status` and ``diverged`` whether it says so (a run that grew past the runner's warning had been
        written ``"diverged": false`` where ``rowstoch run`` said it diverged)."""
        status = self.status
        payload = {"meta": self.meta, "status": status, "interrupted": self.interrupted,
                   "diverged": status == "diverged", "summary": self.summary(), "rows": self.frame}
        atomic_write(os.fspath(path), lambda f: f.write(_json_with_columns(payload)))  # (whole)

    @classmethod
    def load(cls, path):
        """The History that :meth:`to_json` wrote (:meth:`save` and ``rowstoch run`` too): ``path`` the
        ``history.json`` or the folder holding it. Its rows, meta and how the run ended come back as they were
        written; a value JSON cannot hold (NaN, an infinite one: written ``null``) comes back NaN, so a run whose
        metrics overflowed reads as :attr:`overflowed` still.

        >>> import tempfile
        >>> from rowstoch_fast import Algorithm, History, run, topology
        >>> from rowstoch_fast.objectives import Quadratic
        >>> h = run(Algorithm(topology.ring(4), lr=0.1), Quadratic.random(4, 3, seed=0), 20, progress=False)
        >>> folder = tempfile.mkdtemp()
        >>> _ = h.save(folder)
        >>> back = History.load(folder)
        >>> back.frame.equals(h.frame), back.status, back.meta["algorithm"]
        (True, 'done', 'pull-diag-gt')
        """
        import pandas as pd

        path = check_path(path)
        if os.path.isdir(path):
            path = os.path.join(path, cls.FILES[1])
        with open(path, encoding="utf-8") as fh:  # (FileNotFoundError, naming it)
            try:
                payload = json.load(fh)
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                raise ValueError(f"{path} is not a history.json ({type(exc).__name__}: {exc})") from None
        if not isinstance(payload, dict) or not isinstance(payload.get("rows"), dict) \
                or not isinstance(payload.get("meta"), dict):
            raise ValueError(f"{path} is not a history.json: it lacks the 'rows' and 'meta' that History.to_json "
                             "writes")
        meta = payload["meta"]
        interrupted = payload.get("interrupted", False)
        if not isinstance(interrupted, bool):  # (the string "no" had read as an interrupted run, helper 192)
            raise ValueError(f"{path} is not a history.json: its 'interrupted' is {interrupted!r}, not true or false")
        try:
            h = cls([], meta, interrupted=interrupted, diverged=bool(meta.get("diverged")))
        except (TypeError, ValueError) as exc:  # (meta["extra_metrics"] = 3: "'int' object is not iterable")
            raise ValueError(f"{path} is not a history.json: its meta cannot be read ({exc})") from None
        rows = payload["rows"]
        missing = [c for c in h.frame.columns if c not in rows]
        if missing:
            raise ValueError(f"{path}: its rows lack {', '.join(missing)}")
        scalar = next((c for c in h.frame.columns if not isinstance(rows[c], list)), None)
        if scalar is not None:
            raise ValueError(f"{path} is not a history.json: its rows' {scalar} is {type(rows[scalar]).__name__}, "
                             "not a list of values")
        if len({len(rows[c]) for c in h.frame.columns}) > 1:
            raise ValueError(f"{path}: its rows' columns differ in length")
        columns = {}
        for c in h.frame.columns:
            listed = rows[c]
            try:
                if listed and all(isinstance(v, int) and not isinstance(v, bool) for v in listed):
                    values = np.array(listed, dtype=np.int64)  # (counts as written: int64, as they were)
                else:
                    values = np.array([np.nan if v is None else v for v in listed], dtype=np.float64)
            except (TypeError, ValueError, OverflowError) as exc:  # (a string, a list in a record, 2**70)
                raise ValueError(f"{path} is not a history.json: its rows' {c} holds a value that is no number or "
                                 f"out of range ({exc})") from None
            if c in ("iteration", "rep"):  # (0.5 had become 0; null and 2**70 failed deep inside pandas)
                with np.errstate(invalid="ignore"):
                    bad = ~(np.isfinite(values) & (values == np.round(values)) & (values >= 0))
                if bad.any():
                    raise ValueError(f"{path} is not a history.json: its rows' {c} holds "
                                     f"{listed[int(np.flatnonzero(bad)[0])]!r}, not a count")
                values = values.astype(np.int64)
            columns[c] = values
        if not len(columns[h.frame.columns[0]]):  # (no records: the columns as a new History has them)
            return h
        h.frame = pd.DataFrame(columns)
        return h

    #: What :meth:`save` writes: the summary, everything, and (with matplotlib) the figure.
    FILES = ("history.csv", "history.json", "grad_norm.png")

    def save(self, folder, title=None, label=None):
        """Write what ``rowstoch run`` writes into ``folder`` (:attr:`FILES`): history.csv (the summary),
        history.json (everything) and, with matplotlib and where the run recorded the gradient norm, grad_norm.png
        (``title`` over it, ``label`` in its legend). Returns the names written."""
        from .report import axes_for, pyplot

        table, document, figure = self.FILES
        title, label = check_caption(title, "title"), check_caption(label, "label")  # (before anything is written:
        # "cost in $ and x_$" had failed in the figure after the CSV and JSON, naming nothing, helper 218)
        folder = check_path(folder, "folder") or "."
        if os.path.exists(folder) and not os.path.isdir(folder):
            raise NotADirectoryError(f"folder {folder!r} is a file; History.save writes a folder of files")
        os.makedirs(folder, exist_ok=True)  # (a folder not made yet, as ``rowstoch run --out`` makes it)
        with signals_held():  # (the files written together: a SIGTERM in the JSON's writing left it 0 bytes, and
            # --resume took the folder for another run's)
            self.to_csv(os.path.join(folder, table))
            self.to_json(os.path.join(folder, document))
            written = [table, document]
            try:
                pyplot()  # (a notebook's backend is left as it is: Agg only where pyplot was not imported)
            except ImportError:
                return written
            recorded = self.meta.get("recorded")
            if recorded is not None and "grad_norm" not in recorded:  # (the figure is of the gradient norm: a run
                # that chose other metrics had its CSV and JSON written, then raised "did not record 'grad_norm'")
                return written
            with axes_for(None, (5, 3.5), os.path.join(folder, figure), dpi=120) as ax:
                self.plot("grad_norm", ax=ax, label=label)
                if title:  # (wrapped: a setting's title of 110 characters ran off both sides of the figure)
                    ax.set_title(textwrap.fill(title, 54), fontsize="medium")
        return written + [figure]

    def plot(self, metric="grad_norm", ax=None, x="communication_rounds", label=None, path=None, **kwargs):
        """Plot the mean of ``metric`` (log scale) with a band of one standard deviation.

        Needs matplotlib (a dependency of the package). Returns the
        Axes: in a script call ``matplotlib.pyplot.show()`` to see it, or pass
        ``path`` to save the figure there (PNG, PDF, SVG by its suffix; a PDF's
        fonts as TrueType, Type 42, which venues require). A figure made here
        and saved to ``path`` is closed once saved (a loop of saved plots had
        kept every figure open); its Axes stays usable (``ax.figure.savefig``).

        Parameters
        ----------
        metric : str
            A metric column of :attr:`frame` (see the class docstring; an extra
            metric too, on a linear axis where higher is better, e.g. an accuracy).
        ax : matplotlib Axes, optional
            Draw into it (to overlay several runs); a new figure otherwise.
        x : str
            The horizontal axis: ``"communication_rounds"``, ``"iteration"`` or ``"samples"``.
        label : str, optional
            Legend entry (default: the algorithm's name).
        path : str, optional
            Save the figure to this file.
        **kwargs
            Passed to ``ax.plot`` for the mean's line (``color``, ``linestyle``, ``marker``, ...).
        """
        self._check_recorded(metric)
        check_metric(x, "x", AXES)
        log = not linear_scale(metric, self.meta.get("extra_metrics"))
        if path is not None:
            check_path(path)
        from .report import axes_for

        s = self.summary()
        with axes_for(ax, (5, 3.5), path, dpi=120) as ax:
            self._draw(ax, s, metric, x, label, log, kwargs)
        return ax

    def _draw(self, ax, s, metric, x, label, log, kwargs):
        """The mean of ``metric`` against ``x`` from the summary ``s``, its band, the axes' scale and labels (a
        linear scale, and a note, where no record is finite and positive: a log scale of none raised)."""
        from .report import spread_within

        values = s[metric].to_numpy(dtype=np.float64)
        if log and not (np.isfinite(values) & (values > 0)).any():  # (every record NaN, infinite or <= 0: a run
            # that diverged at its start, or whose metric overflowed; matplotlib refused to log-scale them)
            shown = [np.asarray(ln.get_ydata(), dtype=np.float64) for ln in ax.get_lines()]
            if not any((np.isfinite(y) & (y > 0)).any() for y in shown):  # (overlaid on runs that have some: the
                # panel stays theirs, on its log scale)
                log = False
                ax.text(0.5, 0.5, f"linear scale: no finite positive {metric} recorded", transform=ax.transAxes,
                        ha="center", va="center")
        line = ax.plot(s[x], s[metric], label=label or self.meta.get("algorithm"), **kwargs)[0]
        records = self.frame.groupby("iteration", sort=True)[metric]  # (the summary's rows, in its order)
        lo, hi = spread_within(s[metric], s[metric + "_std"], records.min().to_numpy(dtype=np.float64),
                               records.max().to_numpy(dtype=np.float64))  # (clipped at 1e-300 on a log panel, the
        # band reached the bottom of the axis, decades below every record)
        ax.fill_between(s[x], lo, hi, color=line.get_color(), alpha=0.2)
        ax.set_yscale("log" if log else "linear")
        ax.set_xlabel(x.replace("_", " "))
        ax.set_ylabel(metric.replace("_", " "))
        ax.legend(loc="best", fontsize="small")


def _json_with_columns(payload):
    """``payload`` as strict JSON text laid out as ``json.dump(..., indent=1)`` lays it out, but each column of its
    DataFrames (``{name: [values]}``) on one line, written by the C encoder (the pure-Python one that ``indent``
    takes had written 300,000 records in ~25 s while the signals that would stop it waited, helper 263); NaN and
    infinite values as ``null``."""
    columns = []

    def marked(frame):  # (each column a mark JSON writes as "\u0000column k\u0000", its values put there after)
        out = {}
        for name in frame.columns:
            out[str(name)] = f"\x00column {len(columns)}\x00"
            columns.append(_column_values(frame[name].to_numpy()))
        return out

    skeleton = {k: marked(v) if hasattr(v, "columns") else v for k, v in payload.items()}
    text = json.dumps(_finite_or_none(skeleton), indent=1, default=_json_default, allow_nan=False)
    return re.sub(r'"\\u0000column (\d+)\\u0000"',
                  lambda m: json.dumps(columns[int(m.group(1))], default=_json_default, allow_nan=False), text)


def _column_values(values):
    """A column's values as a list JSON takes: NaN and infinite floats as None."""
    if values.dtype.kind == "f":
        out = values.astype(np.float64).astype(object)  # (Python floats, printed as repr prints them)
        out[~np.isfinite(values)] = None
        return out.tolist()
    if values.dtype.kind in "iub":
        return values.tolist()
    return _finite_or_none([v.item() if isinstance(v, np.generic) else v for v in values])


def _finite_or_none(o):
    """``o`` with every NaN/Inf float replaced by None (JSON has no NaN)."""
    if isinstance(o, dict):
        return {k: _finite_or_none(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_finite_or_none(v) for v in o]
    if isinstance(o, (float, np.floating)) and not np.isfinite(o):
        return None
    return o


def _json_default(o):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)


def record_metrics(opt, objective, oracle, metrics=METRICS, transform=None):
    """``{metric: values}``, one value per replica, of the optimizer's current iterate (``metrics`` among
    :data:`METRICS`, the others NaN; each costs up to a pass over the data, and metrics that share a pass share
    it; the test metrics cost a product with the test data, and only where the objective holds some); None on
    the MPI ranks that do not record (every process must call it: the gathers are collective).
    ``metrics`` may also hold extra metrics (:class:`~rowstoch_fast.user_metrics.Metric`, from
    :func:`~rowstoch_fast.user_metrics.resolve_metrics`): each is called once per replica and returned under its
    name. ``transform(x)``: the models to measure instead of the gathered ``x`` (user-shaped, every node, on the
    root), e.g. with diverged replicas set aside."""
    # every process takes part in the gathers (collective under MPI); the root alone records, on the host
    x = opt.gather_output(copy=transform is not None)  # read only here: no copies where the state is on the host
    if transform is not None and x is not None:
        x = transform(x)
    pair = opt.gradient_sum_tracker(oracle.last) if oracle.last is not None and "descent_deviation" in metrics else None
    deviation = pair is not None  # (the same on every rank: a method of the algorithm)
    y, g = pair if deviation else (None, None)
    # the root measures; a metric of the user's that raises there is raised on every process (the others waited
    # in the next collective)
    return opt.on_every_process(_measured, opt, objective, oracle, metrics, x, deviation, y, g)


def _measured(opt, objective, oracle, metrics, x, deviation, y, g):
    """:func:`record_metrics`'s values of the gathered ``x`` on the root (None elsewhere)."""
    if not opt.is_root:
        return None
    pi = opt.centroid_weights()
    X = x if x.ndim == 3 else x[None]
    wanted = {m for m in metrics if isinstance(m, str)}
    best = optimum_of(objective) if {"suboptimality", "distance"} & wanted else None
    dtype = precision_of(objective)  # (a float64 model beyond a float32 objective's range records inf, as a NaN)
    per_call = _replicas_per_call(objective, X.shape[0])
    out = {}
    with np.errstate(over="ignore", invalid="ignore"):  # a diverging run records inf; _warn_if_growing says so
        if {"suboptimality", "grad_norm_mean"} & wanted:  # one pass at the mean of the node models
            if best is not None:
                f_mean, g_mean = _where_finite(objective.value_and_gradient_at, X.mean(axis=1), dtype,
                                              per_call, pair=True)
                out["suboptimality"] = f_mean - best.value
            else:  # (the gradient alone: the same bits, no values to compute)
                g_mean = _where_finite(_gradient_at(objective), X.mean(axis=1), dtype, per_call)
            out["grad_norm_mean"] = np.linalg.norm(objective.stationarity(X.mean(axis=1), g_mean), axis=-1)
        if best is not None and "distance" in wanted:
            out["distance"] = np.linalg.norm(X - best.x, axis=-1).mean(axis=-1)
        if {"grad_norm", "loss"} & wanted:
            G_full, L = _where_finite(objective.evaluate, X, dtype, per_call, pair=True)  # (one pass: both metrics)
            out["grad_norm"] = np.linalg.norm(objective.stationarity(X.mean(axis=1), G_full.mean(axis=-2)), axis=-1)
            out["loss"] = L.mean(axis=-1)
        centroid = np.einsum("n,rnd->rd", pi, X)
        if "grad_norm_centroid" in wanted:
            out["grad_norm_centroid"] = np.atleast_1d(
                _where_finite(objective.gradient_norm_at, centroid, dtype, per_call))
        if "consensus_error" in wanted:
            out["consensus_error"] = np.linalg.norm((X - centroid[:, None, :]).reshape(X.shape[0], -1), axis=1)
        if deviation and "descent_deviation" in wanted:
            out["descent_deviation"] = np.linalg.norm(
                np.einsum("n,rnd->rd", pi, y.reshape(X.shape)) - g.reshape(X.shape).sum(axis=1), axis=1)
        if set(TEST_METRICS) & wanted and getattr(objective, "test_data", None) is not None:
            out.update(_test_metrics(objective, X.mean(axis=1)))
    missing = np.full(X.shape[0], np.nan)
    values = {m: np.asarray(out.get(m, missing), dtype=np.float64) for m in METRICS}
    extra = [m for m in metrics if not isinstance(m, str)]
    if extra:
        values.update(_extra_metrics(extra, opt, objective, oracle, X))
    return values


def _gradient_at(objective):
    """``objective.gradient_at``, or the gradient of ``value_and_gradient_at`` for an objective without one."""
    fn = getattr(objective, "gradient_at", None)
    return fn if fn is not None else (lambda x: objective.value_and_gradient_at(x)[1])


def _test_metrics(objective, x_bar):
    """The test metrics of the mean models ``x_bar`` (one per replica): a replica whose mean is not finite
    records an infinite loss and error and a NaN accuracy. A chunk of replicas a call where one call would pass
    :data:`RECORD_CALL_WORK` (test samples x d a replica: 2,000 replicas of 20,000 test samples had been one
    call, helper 264)."""
    ok = np.isfinite(x_bar).all(axis=1)
    points = np.where(ok[:, None], x_bar, 0.0)
    size = _per_call(len(points), int(np.size(objective.test_data[0])))  # (a replica: test samples x d)
    parts = [objective.test_metrics(points[a:a + size]) for a in range(0, len(points), size)]
    out = {m: np.concatenate([np.atleast_1d(p[m]) for p in parts]) for m in parts[0]}
    return {m: np.where(ok, v, np.nan if m == "test_accuracy" else np.inf) for m, v in out.items()}


def _extra_metrics(extra, opt, objective, oracle, X):
    """``{name: values}`` of the extra metrics (each called once per replica with its read-only state)."""
    X = X.view()
    X.flags.writeable = False  # (a view of the optimizer's own state on the CPU: read-only to the metrics)
    x_bar = X.mean(axis=1)
    x_bar.flags.writeable = False
    head = dict(iteration=int(opt.iteration), communication_rounds=int(opt.communication_rounds),
                samples=float(opt.samples_drawn(batch_of(objective))), objective=objective)
    first = int(getattr(oracle, "rep_offset", 0))
    states = [MetricState(x=X[r], x_bar=x_bar[r], rep=first + r, algorithm=opt, replica=r, **head)
              for r in range(X.shape[0])]
    before = _untouched(opt)
    out = {}
    with np.errstate(over="ignore", invalid="ignore"):
        for m in extra:
            out[m.name] = np.array([m.measure(state) for state in states], dtype=np.float64)
            if _untouched(opt) != before:  # (a metric that stepped the optimizer, or set its lr or x: the run went
                # on from there, "done", its records every other iteration, helper 196)
                raise RuntimeError(f"metric {m.name!r} changed the optimizer it was given (stepped it, or set its lr, "
                                   "x or state): a metric reads state.algorithm, never changes it; copy what it "
                                   "needs (e.g. state.algorithm.state_dict()) and work on the copy")
    return out


def _untouched(opt):
    """What a metric must leave as it found it: the optimizer's iteration and state (its ask/tell token: ``x`` set,
    a resume) and its hyperparameters (each by identity: an assignment makes a new one)."""
    token = opt._state_token() if hasattr(opt, "_state_token") else (getattr(opt, "iteration", None),)
    return token, tuple((k, id(v)) for k, v in getattr(opt, "_hyper", {}).items())


#: The multiply-adds one call of a record may ask of the objective (replicas x nodes x samples x d): where its
#: replicas would ask more, their points are measured a chunk of replicas at a time, so that a record of many
#: replicas on large data answers Ctrl-C and SIGTERM between chunks (a record of 100,000 replicas, 51,200 samples a
#: node, had been one compiled call of ~100 s that no signal stopped, helper 261). About 0.1 s of the logistic pass.
RECORD_CALL_WORK = 1 << 27


def _replicas_per_call(objective, replicas):
    """How many replicas' points one call of a record gives the objective (:data:`RECORD_CALL_WORK`): all of them,
    or a multiple of 8 (the replicas the compiled passes take together), at least 1. An objective's pass costs about
    ``n d`` times its samples a node (``d`` for one without samples: a quadratic's matrices)."""
    try:
        n, d = int(getattr(objective, "n", 1) or 1), int(getattr(objective, "d", 1) or 1)
        per = n * d * max(1, int(getattr(objective, "samples_per_node", 0) or 0) or d)
    except (TypeError, ValueError, OverflowError):  # (an objective of the user's with sizes of its own kind)
        return replicas
    return _per_call(replicas, per)


def _per_call(replicas, work):
    """The replicas one call of a record takes where each asks ``work`` multiply-adds: all of them within
    :data:`RECORD_CALL_WORK`, else a multiple of 8 (the replicas the compiled passes take together), at least 1."""
    size = max(1, RECORD_CALL_WORK // max(1, work))
    return replicas if size >= replicas else (size - size % 8 if size >= 8 else size)


def _where_finite(fn, P, dtype=np.float64, per_call=None, pair=False):
    """``fn(P)`` for a block of points, one per replica (the first axis), where a replica's point that is not
    finite in ``dtype``, the objective's (the mean of huge but finite models overflows; a float64 model beyond a
    float32 objective's range), gets inf in every output instead of the objective's refusal of a non-finite
    input: a diverging replica records inf, and the others their values. ``per_call``: the replicas one call of
    ``fn`` takes at most (:func:`_replicas_per_call`; the outputs of its calls are joined along the first axis:
    the same values, each replica's point measured alone by the package's objectives). ``pair``: ``fn`` returns
    two outputs (a tuple, or a list of an objective of the user's), each joined and set to inf apart."""
    if per_call is not None and P.shape[0] > per_call:
        parts = [_where_finite(fn, P[a:a + per_call], dtype, pair=pair) for a in range(0, P.shape[0], per_call)]
        if pair:
            return tuple(np.concatenate([np.atleast_1d(p[k]) for p in parts]) for k in range(2))
        return np.concatenate([np.atleast_1d(p) for p in parts])
    ok = (np.abs(P) <= np.finfo(dtype).max).reshape(P.shape[0], -1).all(axis=1)  # (NaN and inf compare false)
    if ok.all():
        return fn(P)

    def rows(v, value):  # the replicas' points or outputs v, value where a replica's point is not finite
        return np.where(ok.reshape((-1,) + (1,) * (np.ndim(v) - 1)), v, value)

    out = fn(rows(P, 0.0))
    return tuple(rows(v, np.inf) for v in out) if pair or isinstance(out, tuple) else rows(out, np.inf)


def _record(opt, objective, oracle, rows, t0_wall, metrics=METRICS):
    """Append the metrics of the current iterate to ``rows`` (those not in ``metrics`` as NaN: each costs up to a
    pass over the data), the extra metrics of ``metrics`` after ``wall_seconds``; returns the seconds it took."""
    if opt.is_root and {"suboptimality", "distance"} & {m for m in metrics if isinstance(m, str)}:  # (f*: a solve
        try:  # once, not a record's cost)
            optimum_of(objective)
        except Exception:  # noqa: BLE001 - raised again inside the record, on every process (under MPI the others
            pass  # wait in its gather: raised here, on the root alone, it had left them waiting)
    start = time.perf_counter()
    values = record_metrics(opt, objective, oracle, metrics)
    if values is None:
        return time.perf_counter() - start
    wall = time.perf_counter() - t0_wall
    columns = [values[m] for m in METRICS]
    extra = [values[m.name] for m in metrics if not isinstance(m, str)]
    head = (opt.iteration, opt.communication_rounds, opt.samples_drawn(batch_of(objective)))
    rows.extend([(*head, oracle.rep_offset + r, *(float(c[r]) for c in columns), wall, *(float(c[r]) for c in extra))
                 for r in range(len(columns[0]))])
    return time.perf_counter() - start


def build_replicas(algorithm, objective, repeats, x0=None):
    """``algorithm``'s optimizer on ``repeats`` replicas of the start ``x0`` (default ``objective.x0()``; shape
    (d,) or (n, d)) in the network's precision (the one every method with a matrix runs in), its memory checked
    first."""
    dtype = precision_of(algorithm.A)  # (a method without a matrix takes x0's: the federated ones ran a float32
    # network in float64, given objective.x0()'s float64 start, beside the others in float32)
    name = "x0"
    if x0 is None:  # (an objective of the user's whose x0() has another length than its d had run a problem of
        # that size, recorded without the metrics that would have refused it, helper 196)
        x0, name = objective.x0(), f"{type(objective).__name__}.x0()"
    # (a wrong shape was refused later, inside the objective, as "X must have shape")
    kind = np.asarray(x0).dtype.kind
    if kind not in "fiu":  # (complex: its imaginary part had been dropped, with NumPy's warning only)
        raise TypeError(f"{name} must be a real array, got dtype {np.asarray(x0).dtype}")
    x0, n, d = np.asarray(x0, dtype=dtype), algorithm.A.n, getattr(objective, "d", None)
    if not ((x0.ndim == 1 or (x0.ndim == 2 and x0.shape[0] == n)) and (d is None or x0.shape[-1] == d)):
        raise ValueError(f"{name} must have shape (d,) or (n, d) = ({n}, {d if d is not None else 'd'}), got "
                         f"{x0.shape}")
    if x0.ndim == 1:
        x0 = np.broadcast_to(x0, (algorithm.A.n, x0.shape[0]))
    if repeats > 1 or np.ndim(algorithm.lr) == 3:  # (one rate per replica: replicas even of one)
        if repeats * x0.size >= 2**62:  # (NumPy's "iterator is too large", naming nothing)
            raise MemoryError(f"run(repeats={repeats}): {repeats} x {x0.size} values, more than memory can index; "
                              "lower repeats")
        x0 = np.broadcast_to(x0, (repeats,) + x0.shape)
    backends.require_block_memory(algorithm.backend, x0, 4 * 8 * x0.size,  # (a GPU's memory for "cupy")
                                  f"run(repeats={repeats}) (at least four {x0.shape} blocks of iterates)",
                                  "lower repeats")
    extra = algorithm.optimizer.objective_options(objective)  # (a proximal method: the objective's regularizer)
    if algorithm.options.get("regularizer") is not None and getattr(objective, "regularizer", None) is None:
        raise ValueError(f"the algorithm has the regularizer {algorithm.options['regularizer']!r} but the objective "
                         "has none: the run would minimise f + r and be measured on f; give the objective the "
                         "regularizer instead (objective + r)")
    for key, value in extra.items():
        if key in algorithm.options and algorithm.options[key] != value:
            raise ValueError(f"the algorithm's {key} {algorithm.options[key]!r} is not the objective's {value!r}: "
                             f"the run would minimise another function than the one it measures")
    extra = {k: v for k, v in extra.items() if k not in algorithm.options}
    return algorithm.build(backends.to_backend(algorithm.backend, x0), **extra)  # the one explicit copy to a GPU


def _check_writable_folder(path, name):
    """The folder of ``path`` exists and can be written, checked before a run (a checkpoint that cannot be
    written was only a warning at its first save, maybe hours in)."""
    folder = os.path.dirname(os.path.abspath(os.fspath(path)))
    if os.path.isdir(path):
        raise IsADirectoryError(f"{name} {os.fspath(path)!r} is a folder; give a file name in it, such as "
                                f"{os.path.join(os.fspath(path), 'ck.npz')!r}")
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"{name} {os.fspath(path)!r}: its folder {folder!r} does not exist")
    if not os.access(folder, os.W_OK):
        raise PermissionError(f"{name} {os.fspath(path)!r}: its folder {folder!r} is not writable")


#: Under MPI, how often (iterations) the processes agree whether a signal asked them to stop.
AGREE_EVERY = 16


class _AgreedStop:
    """Under MPI, Ctrl-C (SIGINT), SIGTERM and SIGHUP held from the start of a run to its end, and the processes told of
    them together.

    mpiexec delivers a signal to each rank at its own moment: each broke off at another point and waited in
    another collective (rank 0 in a gather, rank 1 in a broadcast), a hang that lost what was computed since the
    last checkpoint. The signal is held (a signal ignored stays ignored); after the set-up, every
    :data:`AGREE_EVERY` iterations and at the last one the ranks ask which signal any holds
    (:meth:`~rowstoch_fast.algorithms.Optimizer.first_on_any_process`; SIGTERM before SIGINT), and all stop at the
    same iteration: each hands it to its former handler (the command's SIGTERM: exit 143; Python's SIGINT:
    KeyboardInterrupt) and the run ends interrupted, with its checkpoint. Where that handler is the default one
    (a script's SIGTERM), the signal is raised again once the run has saved what it computed, on every rank, and
    ends the processes as it would have. A signal held after the last agreement (the run's closing records and
    checkpoint) is agreed on by :meth:`finish`, after the run's last collective: the run then reports itself
    interrupted. One process: nothing is held, and a SIGTERM left to its default stops the run as Ctrl-C does,
    then ends the process once the run saved what it computed (:func:`~rowstoch_fast._signals.sigterm_as_interrupt`;
    a handler of the program's own is left to decide); outside the main thread, nothing changes."""

    def __init__(self, backend, last):
        import threading

        self.opt, self.last, self.held, self.previous, self.again = None, last, [], {}, None
        self.restore = {}  # (the handlers put back: held_between_runs' where it held, not the one handed on)
        self.active = not backends.one_process(backend) and threading.current_thread() is threading.main_thread()
        self.alone = None

    def __enter__(self):
        if not self.active:  # (one process: a script's SIGTERM stops the run, which saves, then ends the process)
            self.alone = sigterm_as_interrupt()
            self.alone.__enter__()
        else:
            def held(signum, frame):
                self.held.append(signum)

            self.restore = hold(held)
            for signum, current in self.restore.items():
                outer = getattr(current, "between", None)  # (a comparison's hold between its runs: its held signal
                # is agreed on here, and handed where it would have gone)
                if outer is not None:
                    self.held.extend(outer.take())
                self.previous[signum] = current if outer is None else outer.previous[signum]
        return self

    def check(self, iteration, now=False):
        """Raise KeyboardInterrupt on every process at once where any holds a signal (collective every
        :data:`AGREE_EVERY` iterations, at the run's last and, ``now``, at once)."""
        if self.active and (now or iteration % AGREE_EVERY == 0 or iteration == self.last) and self._agreed():
            raise KeyboardInterrupt

    def finish(self):
        """Whether any process held a signal since the last agreement (collective: after the run's last one); the
        signal handed on as :meth:`check` does."""
        if not self.active:
            return False
        try:
            return self._agreed()
        except KeyboardInterrupt:  # (the former handler's: the run is over, it is reported interrupted)
            return True

    def _agreed(self):
        """Whether a process holds a signal (collective), handed to this process's former handler if so."""
        import signal

        mine = first(self.held)
        signum = self.opt.first_on_any_process(None if mine is None else int(mine))
        if signum is None:
            return False
        self.held.clear()  # (handed on once: a later agreement does not call the handler again)
        former = self.previous.get(signum)
        if former is signal.SIG_DFL or former is None and signum != signal.SIGINT:
            self.again = signum  # (raised again on the way out, the handlers put back: the process ends)
        elif callable(former):
            former(signum, None)  # (the command's SIGTERM: it remembers it, and raises KeyboardInterrupt)
        return True

    def __exit__(self, *exc):
        import signal

        put_back(self.restore)
        if self.again is not None:
            signal.raise_signal(self.again)
        if self.alone is not None:
            alone, self.alone = self.alone, None
            alone.__exit__(None, None, None)
        return False


class held_between_runs:
    """Under MPI, Ctrl-C, SIGTERM and SIGHUP held between the runs of a sequence (a comparison's methods, its tuner's
    stages), where no run's agreement (:class:`_AgreedStop`) holds them: a signal that reached the root while it
    wrote a method's tables broke it off there while the other ranks waited in the next run's first collective.
    The next run takes a held signal over and agrees on it after its set-up; one held after the last run is agreed
    on at the end (collective), and handed to the handler it would have met. One process, or outside the main
    thread: nothing is held."""

    def __init__(self, backend):
        import threading

        self.active = not backends.one_process(backend) and threading.current_thread() is threading.main_thread()
        self.held, self.previous = [], {}

    def take(self):
        """The signals held so far (each once), for a run's agreement."""
        taken, self.held[:] = list(self.held), []
        return taken

    def __enter__(self):
        if self.active:
            def held(signum, frame):
                self.held.append(signum)

            held.between = self
            self.previous = hold(held)
        return self

    def __exit__(self, kind, *exc):
        import signal

        put_back(self.previous)
        if not self.active or kind is not None:  # (an error or an interruption already on its way, on every rank)
            return False
        from mpi4py import MPI

        signum = MPI.COMM_WORLD.allreduce(int(first(self.held) or 0), op=MPI.MAX)  # (SIGTERM 15, SIGINT 2, SIGHUP 1: first's)
        if signum:
            former = self.previous.get(signum)
            if callable(former):
                former(signum, None)
            elif signum in self.previous:
                signal.raise_signal(signum)
        return False


@contextlib.contextmanager
def agreed_stop(backend, last):
    """The signal agreement of a run of ``last`` iterations on ``backend`` (:class:`_AgreedStop`: under MPI, Ctrl-C,
    SIGTERM and SIGHUP held and the processes stopped together; elsewhere nothing is held), for a loop of the harness's
    own (the tuner's runs): set its ``opt`` once built, call ``check(iteration)`` after each step and
    ``finish()`` after the run's last collective. With one process, a SIGTERM left to its default stops the run as
    Ctrl-C does (:func:`~rowstoch_fast._signals.sigterm_as_interrupt`)."""
    agreed = _AgreedStop(backend, last)
    try:
        agreed.__enter__()
        yield agreed
    finally:
        agreed.__exit__()


def _save_checkpoint(path, opt, oracle, rows, meta, wall_offset):
    # collective under MPI: every process gathers, the root writes
    try:
        opt_state, last = opt.state_dict(), (opt.gather(oracle.last) if oracle.last is not None else None)
    except MemoryError as exc:  # (a copy of the state, a delayed network's history of max_delay + 1 blocks too,
        # beside the state itself: at --max-delay 10^6 the last checkpoint's ended the finished run, helper 231)
        if not backends.one_process(opt.backend):
            raise  # (the other ranks are in the collective: raised, not left waiting on a rank that went on)
        warnings.warn(f"could not write checkpoint {path!r} (out of memory copying the state: {exc}); the run goes "
                      "on and the previous checkpoint (if any) is kept", RuntimeWarning, stacklevel=3)
        return
    if not opt.is_root:
        return
    state = {"opt/" + k: v for k, v in opt_state.items()}
    state.update({
        "format": np.array(CHECKPOINT_FORMAT),
        "oracle_iteration": np.array(oracle.iteration),
        "oracle_seed": np.array(oracle.seed),
        "oracle_batches": np.array(oracle.batches),
        "rows": np.array(json.dumps(rows)),
        "columns": np.array(json.dumps(_columns(meta))),
        "meta": np.array(json.dumps(meta, default=_json_default)),
        "wall_offset": np.array(wall_offset),
    })
    if last is not None:
        state["oracle_last"] = last
    with signals_held():  # a Ctrl-C or SIGTERM waits for the file (NumPy 1.x left the archive half-open, and its
        # cleanup complained); under MPI it goes on to the run's agreement
        tmp = None
        try:
            try:
                target = file_target(path, "checkpoint")  # (through a link; a device put there since the run's
                # check refused, not replaced: helper 218)
            except ValueError as exc:  # (as a write that failed: only this one, not a bug below, helper 222)
                raise OSError(str(exc)) from None
            tmp = f"{target}.tmp-{os.getpid()}"
            with open(tmp, "wb") as f:
                np.savez(f, **state)
                f.flush()
                os.fsync(f.fileno())
                f.close()
                os.replace(tmp, target)  # atomic: a reader sees the old or the new checkpoint, never half of one
        except OSError as exc:  # disk full, folder gone: keep running, keep the last good checkpoint
            try:
                if tmp is not None:
                    os.remove(tmp)
            except OSError:
                pass
            warnings.warn(f"could not write checkpoint {path!r} ({exc}); the run goes on and the previous "
                          "checkpoint (if any) is kept", RuntimeWarning, stacklevel=3)


def _unchecked_divergence(opt, exc):
    """The :class:`DivergenceError` of a run built with ``check_finite=False`` whose iterates left the finite
    numbers unstopped, until the objective refused them (``exc``, a ValueError: "X must be finite"), or None. Where
    every node's rows are this process's only: across processes a rank whose rows are finite would not raise, and
    the ranks would not agree."""
    if opt.check_finite or opt.local_nodes is not None or not isinstance(exc, ValueError):
        return None
    X = opt.gather_x(copy=False)  # (a host array)
    bad = np.argwhere(~np.isfinite(X))
    if not len(bad):
        return None
    node = int(bad[0][-2]) if X.ndim >= 2 else 0
    lr = opt.lr if np.ndim(opt.lr) == 0 else "per node" if np.ndim(opt.lr) == 1 else "per replica"
    return DivergenceError(f"iterates became non-finite by iteration {opt.iteration}, first at node {node} (lr = "
                           f"{lr} too large?); check_finite=False did not stop the run when they did, so its state is "
                           f"not the last finite one", iteration=opt.iteration, node=node, what="iterate")


class _Marks:
    """The iterations a run records at: every ``every``-th from 0 and the last, or those of ``at`` (a set's
    membership without the set: a run of 10^9 iterations recorded at each held 10^9 integers before its first
    step)."""

    def __init__(self, iterations, every, at=None):
        self.iterations, self.every, self.at = iterations, every, None if at is None else frozenset(at)

    def __contains__(self, k):
        if self.at is not None:
            return k in self.at
        return 0 <= k <= self.iterations and (k % self.every == 0 or k == self.iterations)


def _columns(meta):
    """The columns of a run's records (what its checkpoint names them)."""
    return [*_HEAD, *METRICS, "wall_seconds", *meta.get("extra_metrics", {})]


#: What an objective's description says of how its data were made (beside their fingerprint): a checkpoint of an
#: older version that lacks one of them resumes (experiment.json's objective had dropped them under --split).
_PROVENANCE = ("generator", "total", "seed", "heterogeneity", "noise", "split", "split_seed")


def config_mismatch(saved, current, prefix=""):
    """The first differing entry of two run configurations, as ``(key, saved, current)``, or None.

    Keys in :data:`RESUMABLE` may differ. Nested dicts are compared entry by entry
    (keys ``"objective.batch"`` and the like). A key one side lacks matches None or False on the other (an option
    recorded only where it is in use, or recorded by an older version beside another that was).
    """
    for key in sorted(set(saved) | set(current)):
        if key in RESUMABLE:
            continue
        a, b = saved.get(key), current.get(key)
        if (key not in saved or key not in current) and all(v is None or v is False for v in (a, b)):
            continue
        if not prefix and key == "tracker" and b is None and a == "exact":  # (a method without a tracker: an older
            # version recorded the default)
            continue
        if prefix == "objective." and key not in saved and key in _PROVENANCE:  # (an older version's record of
            # the data said less of how they were made; their fingerprint, data_sha1, is compared)
            continue
        if isinstance(a, dict) and isinstance(b, dict):
            found = config_mismatch(a, b, prefix + key + ".")
            if found:
                return found
        elif a != b and not (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)):
            return prefix + key, a, b  # (a NaN is its own: "made with a = nan but this run has a = nan", helper 196)
    return None


def _load_checkpoint(path, algorithm, config, objective=None, columns=None):
    """``(optimizer, data, rows)`` of the checkpoint ``path``, its records in ``columns`` (this run's: a metric
    it lacks is NaN in them; one of the checkpoint's that this run does not record is refused)."""
    data = load_npz_file(path, "checkpoint")
    fmt = str(data.get("format"))
    older = fmt == "rowstoch_fast.checkpoint/2"  # its records lack the metrics added in /3
    if fmt != CHECKPOINT_FORMAT and not older:
        if fmt.startswith("rowstoch_fast.checkpoint/"):
            raise ValueError(f"resume: checkpoint {path!r} has format {fmt!r}, written by an older version that did "
                             f"not record the run's configuration; it cannot be resumed safely (expected "
                             f"{CHECKPOINT_FORMAT!r})")
        raise ValueError(f"resume: {path!r} is not a rowstoch_fast checkpoint")
    try:
        meta = json.loads(str(data["meta"]))
        if not isinstance(meta, dict):  # (valid JSON of another kind had met an AttributeError on .get)
            raise ValueError(f"its meta is {type(meta).__name__} {str(data['meta'])[:40]!r}, not a JSON object")
        saved = meta.get("config", {})
        if not isinstance(saved, dict):
            raise ValueError(f"its meta's config is {type(saved).__name__}, not a JSON object")
        rows = json.loads(str(data["rows"]))
        if not isinstance(rows, list) or not all(isinstance(r, list) for r in rows):
            raise ValueError("its records are not a list of rows")
        odd = next((v for r in rows for v in r if isinstance(v, bool) or not isinstance(v, (int, float))), None)
        if odd is not None:  # (a string had met "'>' not supported between instances of 'str' and 'int'")
            raise ValueError(f"its records hold {type(odd).__name__} {str(odd)[:40]!r}, not a number")
        rows = [tuple(r) for r in rows]
        if older:  # (the three metrics of /3 after its first five)
            rows = [r[:9] + (math.nan,) * _ADDED_IN_3 + r[9:] for r in rows]
        stored = json.loads(str(data["columns"])) if "columns" in data else list(_COLUMNS_3)
        if any(len(r) != len(stored) for r in rows):
            raise ValueError(f"its records do not have the {len(stored)} columns it names")
        state = {k[4:]: v for k, v in data.items() if k.startswith("opt/")}
        if int(data["oracle_iteration"]) < 0:
            raise ValueError(f"oracle_iteration = {int(data['oracle_iteration'])} is negative")
        float(data["wall_offset"])
    except (KeyError, ValueError, TypeError) as exc:
        raise ValueError(f"resume: checkpoint {path!r} is damaged ({exc})") from None
    if columns is not None:
        dropped = [c for c in stored if c not in columns]
        if dropped:
            raise ValueError(f"resume: checkpoint {path!r} recorded the metric {dropped[0]!r}, which this run does "
                             f"not: resume it with that metric too (run(metrics=[..., {dropped[0]!r}]), the same "
                             "function; on the command line --metrics-module), or start again")
        where = {c: k for k, c in enumerate(stored)}
        rows = [tuple(r[where[c]] if c in where else math.nan for c in columns) for r in rows]
    if "measured" in config and "measured" not in saved:  # (an earlier version's: resumed where its records were
        # of the models this version measures)
        if not _measured_anew(algorithm, saved):
            config = {k: v for k, v in config.items() if k != "measured"}
    diff = config_mismatch(saved, config)
    if diff and diff[0] == "measured":  # (a version whose records of the method were of other models)
        raise ValueError(f"resume: checkpoint {path!r} was written by an earlier version, which measured "
                         f"{config.get('algorithm', 'the method')} by its clients' models; this version measures "
                         f"{MEASURED}, the model the method hands over, and the records would mix the two: start the "
                         "run again")
    if diff:
        key, old, new = diff
        raise ValueError(f"resume: checkpoint {path!r} was made with {key} = {old!r} but this run has {key} = "
                         f"{new!r}; only {', '.join(RESUMABLE)} may change when a run is resumed")
    saved = np.asarray(state.get("lr", algorithm.lr))
    lr = None if saved.shape == np.shape(algorithm.lr) and np.array_equal(saved, algorithm.lr) else algorithm.lr
    return algorithm.resume(state, lr, objective), data, rows


def check_shown_metrics(metrics, objective, specs, probe=True):
    """A ValueError naming the first of ``metrics`` that no run of the methods ``specs`` (``(label, method,
    rounds)``) can record (it would be a column of NaN beside runs called ok): a test metric the objective does not
    compute (no test data, or a metric of the other task: ``test_accuracy`` of a regression), a federated metric
    where no method is federated (:func:`run` with metrics asked for, a comparison, ``rowstoch run --metric``).
    ``probe=False`` checks the test metrics against the presence of test data alone (no pass over it: a run's
    test metrics cost nothing until recorded)."""
    from .user_metrics import FEDERATED_METRICS

    names = [getattr(m, "name", m) for m in metrics]
    tested = [m for m in names if m in TEST_METRICS]
    if tested:
        test_data = getattr(objective, "test_data", None)
        computed = (set(objective.test_metrics(np.zeros(np.shape(test_data[0])[-1]))) if probe else set(tested)) \
            if test_data is not None else set()
        for m in tested:
            if m not in computed:
                raise ValueError(f"metric {m!r} does not apply: {type(objective).__name__} "
                                 + (f"computes {', '.join(sorted(computed))} on its test data" if computed else
                                    "holds no test data"))
    optimal = [m for m in names if m in ("suboptimality", "distance")]
    if optimal and optimum_of(objective) is None:  # (its column had come back empty, the run accepted)
        raise ValueError(f"metric {optimal[0]!r} does not apply: it needs the objective's optimum, and "
                         f"{type(objective).__name__} knows none (show grad_norm_mean instead)")
    federated = [m for m in names if m in FEDERATED_METRICS or str(m).endswith("_participation")]
    if federated and not any(REGISTRY[method].federated for _, method, _ in specs):
        raise ValueError(f"metric {federated[0]!r} is a federated method's (its clients and server): none of "
                         f"{', '.join(label for label, _, _ in specs)} is federated")


def layers_said(net):
    """A network's communication layers in words, the outer first (``"Compressed over Lossy"``)."""
    from .network import Network

    names = []
    while isinstance(net, Network):
        names.append(type(net).__name__)
        net = getattr(net, "base", None)
    return " over ".join(names)


def warn_network_ignored(A, apart, stacklevel=2):
    """Warn (:class:`~rowstoch_fast.errors.NetworkIgnoredWarning`) that the methods ``apart`` (labels), which
    average exactly, do not run over the communication model of ``A`` where it has one (a
    :class:`~rowstoch_fast.network.Network`); ``stacklevel`` as :func:`warnings.warn`'s in the caller.
    Helper 192: ``run`` of FedAvg over ``Noisy(Lossy(ring, 0.5), 0.5)`` gave the plain ring's results, bit for
    bit, without a word (``compare`` and ``rowstoch run`` said so)."""
    from .network import Network

    if not apart or not isinstance(A, Network):
        return
    one = len(apart) == 1
    warnings.warn(f"{', '.join(apart)} {'does' if one else 'do'} not run over the network's communication model "
                  f"({layers_said(A)}): {'it averages' if one else 'they average'} exactly, through a server or an "
                  "all-reduce, so neither the graph (beyond its number of nodes) nor the losses, compression, noise "
                  f"and delays touch {'it' if one else 'them'}", NetworkIgnoredWarning, stacklevel=stacklevel + 1)


def _default_spacing(algorithm, iterations):
    """``record_every``'s default: ``iterations // 100``, a multiple of a local-update method's ``K`` local steps a
    round (its records at rounds' ends: helper 273 found 50 of FedAvg's 101 records inside rounds, the mean of
    half-done local models that no client or server holds, the consensus error 0.42 there against 1e-15)."""
    from .algorithms._local import LocalSteps

    every = max(1, iterations // 100)
    if issubclass(algorithm.optimizer, LocalSteps):  # (not its iterations_for: FedPD's skipped rounds set those)
        K = _round_length(algorithm)
        every = max(K, round(every / K) * K)
    return every


def _round_length(algorithm):
    """A local-update method's iterations a round: its ``local_steps``."""
    from .algorithms._local import DEFAULT_LOCAL_STEPS

    return int(algorithm.options.get("local_steps", DEFAULT_LOCAL_STEPS))


#: What a run's configuration says of a method whose records are of its :attr:`~rowstoch_fast.algorithms.Optimizer.
#: output` (a federated method's server model): an earlier version's checkpoint, without it, is resumed only where
#: its records were of the same models (:func:`_measured_anew` of its configuration).
MEASURED = "the server's model"


def _measured_anew(algorithm, config):
    """Whether an earlier version measured the records of ``config`` (a run's configuration: its iterations and
    record spacing) at other models: a federated method's where its clients keep their own (FedPD, FedLT: their
    mean had been measured) or where a record falls inside a round (the chosen clients' half-done local models had
    been)."""
    cls = algorithm.optimizer
    if cls.output is None:
        return False
    if not cls.download_model:
        return True
    K = _round_length(algorithm)
    return bool(int(config.get("record_every", K)) % K or int(config.get("iterations", 0)) % K
                or any(int(k) % K for k in config.get("record_at") or ()))


def warn_if_draws_shared(cls, options, repeats, stacklevel=2):
    """Warn (RuntimeWarning) where ``repeats`` replicas of the method ``cls`` with the hyperparameters ``options``
    share draws of its own (a federated method's clients, chosen where ``participation`` is below 1):
    keyed on its ``seed``, not on the replica, so their spread leaves the draws out (helper 273: three repetitions
    of FedAvg at participation 0.5 ended at one value, +- 0, whatever the run's seed). ``rowstoch compare`` runs such
    a method's repetitions one at a time, on ``seed + r``."""
    if repeats > 1 and cls.draws_for(options):
        warnings.warn(f"{cls.__name__}'s {repeats} repetitions share one draw of its clients (they follow its seed, "
                      f"{options.get('seed', 0)}, not the repetition): their spread leaves the clients' draws out; "
                      "run each repetition with seed + r for it (as rowstoch compare does: "
                      f"{cls.__name__}.redrawn_options(options, r))", RuntimeWarning,
                      stacklevel=stacklevel + 1)


def run(algorithm, objective, iterations, *, record_every=None, repeats=1, seed=0, x0=None, progress=True,
        checkpoint=None, checkpoint_every=None, resume=None, config=None, metrics=None, first_repeat=0,
        record_at=None, _metrics_checked=False, _record_stop=True):
    """Run ``algorithm`` on ``objective`` for ``iterations`` iterations and record its metrics.

    Repetitions are batched into one stepper (they share every pass over the
    network). Ctrl-C stops the run cleanly: the returned history holds what was
    recorded and a record of the iteration it stopped at, off the schedule (not
    where a record of the run took more than :data:`STOP_RECORD_SECONDS`: a
    warning says so; ``history.interrupted`` is True), and, with ``checkpoint``, the state is
    saved so ``resume`` continues it (its records those of the schedule). A script that calls ``run`` in a
    loop stops the loop on ``history.interrupted`` itself. SIGTERM (what a job
    scheduler or ``timeout`` sends) stops the run the same way; where the
    program set no handler for it, the process then ends, as SIGTERM asks, once
    the checkpoint is saved.

    Parameters
    ----------
    algorithm : Algorithm
    objective : Objective
    iterations : int
        Total iterations ``T`` (communication rounds are ``R T``).
    record_every : int, optional
        Record the metrics every this many iterations (default ``iterations // 100``, for a method of ``K`` local
        steps a round the nearest multiple of ``K``: its records at rounds' ends) and at the last one.
    record_at : sequence of int, optional
        Record exactly at these iterations (instead of ``record_every``; e.g.
        :func:`record_schedule`); 0 and ``iterations`` are always recorded.
    repeats : int, default 1
        Independent repetitions (different mini-batch streams).
    seed : int, default 0
        Seed of the stochastic gradient streams.
    x0 : array_like, optional
        Start, shape (d,) or (n, d); defaults to ``objective.x0()``. Not with ``resume``.
    progress : bool or "always", default True
        A tqdm progress bar where someone watches it (stderr a terminal, or a
        notebook); ``"always"`` shows it anywhere, False never.
    checkpoint : str, optional
        Path of an ``.npz`` checkpoint, written atomically every
        ``checkpoint_every`` iterations, on Ctrl-C and at the end. Its folder
        must exist (FileNotFoundError before the first step: a mistyped folder
        is not made).
    checkpoint_every : int, optional
        Iterations between checkpoints (default ``10 * record_every``, and at
        least ``iterations / 100``: each checkpoint writes every record so
        far); only with ``checkpoint``.
    resume : str, optional
        Continue from this checkpoint; the continued run is bit-identical to
        an uninterrupted one. The checkpoint must come from the same
        configuration (network, algorithm, objective and its data, ``seed``,
        ``repeats``); only ``iterations``, the algorithm's ``lr`` and
        ``record_every`` may change, else ValueError names the first field that
        differs and both values.
    config : dict, optional
        Extra settings that identify the run (the CLI passes its options);
        stored in the checkpoint and compared on resume like the others.
    first_repeat : int, default 0
        The repetitions are ``first_repeat .. first_repeat + repeats - 1`` (their
        gradient streams and the ``rep`` column): more repetitions of an earlier
        run, each equal to what it would have been in one batched run where the
        network draws nothing per value sent (compression's and noise's draws
        follow a replica's position in its block). The network's draws are the
        same for every replica: ``rowstoch compare`` runs repetition ``r`` alone
        on :func:`~rowstoch_fast.network.redrawn` ``(network, r)`` where the
        network draws.
    metrics : sequence of str or callable, optional
        Record only these of :data:`METRICS` (the others are NaN): each costs up
        to one pass over the data per record (the harness's tuning runs record
        the one they are judged on; the test metrics a product with the test
        data, where the objective holds some). Default: all of them. Extra
        metrics go here too, each a column after ``wall_seconds``: a metric you
        define (a function ``fn(state) -> float``, recorded under its name, or
        the name of one registered with
        :func:`~rowstoch_fast.user_metrics.register_metric`) or a ``node_*``
        statistic over the nodes (:mod:`rowstoch_fast.user_metrics`); they are
        computed only when asked for. A resumed run must record the extra
        metrics its checkpoint recorded (else ValueError).

    Returns
    -------
    History
        The same on every MPI rank (rank 0 records, then shares the rows).

    Raises
    ------
    DivergenceError
        When an iterate or gradient becomes NaN/Inf; ``exc.history`` holds the
        rows recorded until then (``history.diverged`` is True).

    Warns
    -----
    RuntimeWarning
        When the recorded gradient norm or loss grows by more than
        ``GROWTH_WARNING`` (1e3) times over the run: divergence without NaN
        (``lr`` too large?).

    Examples
    --------
    >>> from rowstoch_fast import topology
    >>> from rowstoch_fast.objectives import NonconvexLogistic
    >>> f = NonconvexLogistic.synthetic(n=8, total=1600, batch=20, seed=0)
    >>> h = run(Algorithm(topology.exponential(8), lr=0.05), f, 50, record_every=25, progress=False)
    >>> list(h.summary()["iteration"])
    [0, 25, 50]
    """
    if not isinstance(algorithm, Algorithm):
        raise TypeError(_not_an_algorithm(algorithm))
    with backends.checked_on_every_process(algorithm.backend):  # (under MPI a rank's refusal is every rank's: a
        # bad iterations or metric on one rank had left the others waiting in the settings' agreement, helper 203)
        if not isinstance(objective, Objective):
            raise TypeError(f"objective must be an Objective of rowstoch_fast.objectives (or a subclass), got "
                            f"{type(objective).__name__}")
        if config is not None and not isinstance(config, dict):
            raise TypeError(f"config must be a dict of the run's settings, got {type(config).__name__}")
        if checkpoint is not None:
            check_path(checkpoint, "checkpoint")
        if resume is not None:
            check_path(resume, "resume")
            if os.path.isdir(resume):  # (a folder had been said not to exist)
                raise IsADirectoryError(f"checkpoint {os.fspath(resume)!r} is a folder: give the checkpoint's file "
                                        "(e.g. run.npz)")
            if not os.path.isfile(resume):  # (here, where every MPI rank hears of it: helper 203)
                raise FileNotFoundError(f"checkpoint {os.fspath(resume)!r} does not exist")
            if x0 is not None:  # (it had been ignored without a word: the run goes on from the checkpoint's iterates,
                # helper 193)
                raise ValueError("x0 is not read with resume: the run goes on from the checkpoint's iterates (leave x0 "
                                 "out, or start a new run from x0 without resume)")
        if checkpoint_every is not None and not checkpoint:
            raise ValueError("checkpoint_every needs checkpoint (the path of the file to write)")
        if checkpoint and backends.one_process(algorithm.backend):  # (under MPI rank 0 writes it, and a check
            # failing on one rank alone would leave the others waiting)
            _check_writable_folder(checkpoint, "checkpoint")
            file_target(checkpoint, "checkpoint")  # (a device or FIFO there: refused before the run)
        if objective.n != algorithm.A.n:
            raise ValueError(f"objective has n = {objective.n} nodes but the network has {algorithm.A.n}")
        batch_of(objective)  # (an objective of the user's: its batch, before anything runs)
        check_takes(algorithm.optimizer, objective)
        warn_network_ignored(algorithm.A, [algorithm.method] if not algorithm.optimizer.matrices else [], stacklevel=2)
        iterations = check_int(iterations, "iterations", minimum=0, maximum=MAX_ROUNDS)  # (as compare's budget)
        repeats = check_int(repeats, "repeats", minimum=1)
        first_repeat = check_int(first_repeat, "first_repeat", minimum=0, maximum=2**62)
        warn_if_draws_shared(algorithm.optimizer, algorithm.options, repeats, stacklevel=2)
        progress = _progress.check(progress)
        if metrics is None:
            metrics = METRICS
        else:
            if isinstance(metrics, str):
                raise TypeError(f"metrics must be a sequence of metric names, got the string {metrics!r}")
            metrics = resolve_metrics(metrics)
            names = [getattr(m, "name", m) for m in metrics]
            asked = names if not set(METRICS) <= set(names) else [m for m in names if m not in METRICS]  # (the
            # default's, which hold NaN where they do not apply, and more beside them: those more)
            if not _metrics_checked:  # (a comparison checked its metrics against all its methods: a federated one's
                # client_drift is NaN beside DSGD there, as the table shows)
                check_shown_metrics(asked, objective, [(algorithm.name, algorithm.method, algorithm.rounds)],
                                    probe=False)  # (a
                # column of NaN had come back, helper 193: test_accuracy without test data, client_drift of DSGD)
        extra = {m.name: m.properties() for m in metrics if not isinstance(m, str)}
        seed = check_int(seed, "seed", minimum=0, maximum=MAX_KEY)
        if record_at is not None:
            if record_every is not None:
                raise ValueError("give record_every or record_at, not both")
            if isinstance(record_at, (str, bytes)) or not hasattr(record_at, "__iter__") \
                    or isinstance(record_at, np.ndarray) and record_at.ndim == 0:  # (np.ndim would first copy a range)
                raise TypeError(f"record_at must be a sequence of iterations, got {type(record_at).__name__}")
            if hasattr(record_at, "__len__") and backends.one_process(algorithm.backend):  # (before it is made a set:
                # range(0, 10**9, 10) took minutes and gigabytes, then a bare MemoryError; under MPI a rank's refusal
                # alone would leave the others waiting)
                try:
                    len(record_at)
                except OverflowError:  # (range(0, 10**20): more entries than an index holds)
                    raise MemoryError(f"record_at holds more than {2**63 - 1} iterations; record at fewer "
                                      "iterations") from None
                require_memory(len(record_at) * repeats * (len(METRICS) + 8) * 32,
                               f"record_at of {len(record_at)} iterations ({len(record_at)} records x {repeats} "
                               "repetitions)", "record at fewer iterations or run fewer repetitions")
            marks = {check_int(int(k) if isinstance(k, np.integer) else k, "record_at", minimum=0, maximum=iterations)
                     for k in record_at}
            record_at = sorted(marks | {0, iterations})
            record_every = max(1, iterations // max(1, len(record_at) - 1))  # (the checkpoints' default spacing)
        record_every = _default_spacing(algorithm, iterations) if record_every is None else \
            check_int(record_every, "record_every", minimum=1)
        checkpoint_every = max(record_every * 10, -(-iterations // CHECKPOINTS)) if checkpoint_every is None else \
            check_int(checkpoint_every, "checkpoint_every", minimum=1)
        due = _Marks(iterations, record_every, record_at)
        meta = {"algorithm": algorithm.name, "lr": algorithm.lr, "rounds": algorithm.rounds,
                "tracker": algorithm.tracker if "tracker" in REGISTRY[algorithm.method].hyper else None,  # (none
                # said for a method without a tracker: history.json had said "exact" for DSGD, helper 261)
                "n": algorithm.A.n, "objective": type(objective).__name__,
                "iterations": iterations, "repeats": repeats, "seed": seed, "record_every": record_every,
                **({"extra_metrics": extra} if extra else {}),
                **({} if metrics is METRICS else {"recorded": [m for m in metrics if isinstance(m, str)]})}
        identity = {"algorithm": algorithm.name, "rounds": algorithm.rounds, "tracker": meta["tracker"],
                    **({"hyper": algorithm.options} if algorithm.hyper else {}),
                    "lr": algorithm.lr, "n": algorithm.A.n, "repeats": repeats, "seed": seed,
                    **({"first_repeat": first_repeat} if first_repeat else {}),
                    "iterations": iterations, "record_every": record_every,
                    **({"record_at": record_at} if record_at is not None else {}),
                    "objective": objective.describe() if hasattr(objective, "describe") else type(objective).__name__,
                    **({"measured": MEASURED} if algorithm.optimizer.output is not None else {}), **(config or {})}
        meta["config"] = json.loads(json.dumps(identity, default=_json_default))  # as a checkpoint will hold it
    backends.check_same_on_every_process(algorithm.backend, {  # (collective under MPI: a checkpoint on one rank
        # alone had paired its gather with another rank's other collective, helper 203)
        "checkpoint": None if checkpoint is None else os.fspath(checkpoint), "checkpoint_every": checkpoint_every,
        "resume": None if resume is None else os.fspath(resume)}, "the run's checkpoint settings")
    agreed = _AgreedStop(algorithm.backend, iterations)  # (under MPI: a signal, from here on, stops every process
    # at the same iteration)
    try:
        agreed.__enter__()
        try:
            opt, oracle, rows, t0, bar, last = _set_up(algorithm, objective, iterations, repeats, x0, seed,
                                                       first_repeat, resume, meta, due, record_at, record_every,
                                                       metrics, progress)
        except DivergenceError as exc:  # (the gradients at the start: the error carries its history as every
            # DivergenceError of a run does, compare() read it and raised AttributeError: the start's record of each
            # repetition, its metrics NaN, as they are at a non-finite gradient)
            meta["completed_iterations"] = 0
            meta["diverged"] = {"iteration": exc.iteration, "node": exc.node, "what": exc.what, "message": str(exc),
                                "at_start": True}
            exc.history = History([(0, 0, 0, first_repeat + r, *[math.nan] * len(METRICS), 0.0,
                                    *[math.nan] * len(extra or ())) for r in range(repeats)], meta, diverged=True)
            raise
        agreed.opt = opt
        interrupted = False
        diverged = failed = None
        first = opt.iteration  # (recorded above, or by the run resumed)
        try:
            ours = isinstance(oracle, Oracle)  # (an objective's own oracle: its call count alone is put back)
            agreed.check(opt.iteration, now=True)  # (a signal held during the set-up)
            while opt.iteration < iterations:
                drawn = (oracle.iteration, oracle.last) if ours else (oracle.iteration,)
                before = opt.iteration
                try:
                    opt.step(oracle)
                except KeyboardInterrupt:  # mid-step: the optimizer kept its state (atomic commit), so must the
                    # oracle, or a resume draws ahead; after the commit (the step's return path) both stay
                    if opt.iteration == before:
                        if ours:
                            oracle.iteration, oracle.last = drawn
                        else:
                            oracle.iteration = drawn[0]
                    raise
                if bar is not None:
                    bar.update(1)
                if opt.iteration in due:
                    last = _record(opt, objective, oracle, rows, t0, metrics)
                if checkpoint and opt.iteration % checkpoint_every == 0:
                    _save_checkpoint(checkpoint, opt, oracle, rows, meta, time.perf_counter() - t0)
                agreed.check(opt.iteration)
        except KeyboardInterrupt:
            interrupted = True
        except DivergenceError as exc:
            diverged = exc
        except Exception as exc:  # noqa: BLE001 - grad_fn's own error, out of memory, ...: re-raised below
            diverged = _unchecked_divergence(opt, exc)
            failed = exc if diverged is None else None
        finally:
            if bar is not None:
                bar.close()
        if diverged is not None and opt.iteration not in due and opt.iteration != first:
            # the last finite state, recorded (collective under MPI: every process stopped at the same step): a run
            # that diverged between two records, or before the first, does not end on an older record (its start)
            _record(opt, objective, oracle, rows, t0, metrics)
        if failed is not None:
            failed = in_rounds_words(failed, opt)
            _keep_on_failure(failed, opt, oracle, rows, meta, checkpoint, time.perf_counter() - t0)
            raise failed
        meta["completed_iterations"] = opt.iteration
        meta["completed_rounds"] = opt.communication_rounds
        meta["traffic"] = opt.traffic()
        meta["traffic_per_repetition"] = opt.traffic(per_replica=True)  # (one repetition's bytes: the comparisons')
        logger.info("%s: %s at iteration %d after %.2f s (%d records)", meta["algorithm"],
                    "interrupted" if interrupted else "diverged" if diverged is not None else "done", opt.iteration,
                    time.perf_counter() - t0, len(rows))
        rows = opt.share(rows)  # under MPI rank 0 recorded: every rank returns the same history
        if diverged is not None:
            # the optimizer keeps its last finite state but the oracle has drawn past it: the last periodic
            # checkpoint (if any) stays the one to resume from; what was recorded goes with the exception
            meta["diverged"] = {"iteration": diverged.iteration, "node": diverged.node, "what": diverged.what,
                                "message": str(diverged)}
            diverged.history = History(rows, meta, diverged=True)
            agreed.finish()  # (every process is here: a signal held since the last agreement is not dropped)
            raise diverged
        if checkpoint:
            try:
                _save_checkpoint(checkpoint, opt, oracle, rows, meta, time.perf_counter() - t0)
            except Exception as exc:  # (out of memory gathering the state, a full disk: the run's records had
                # gone with it, every one lost; they go with the error, as for a run that raised)
                exc.history = History(rows, meta)
                raise
        if interrupted and _record_stop and rows and rows[-1][0] != opt.iteration:
            rows = _record_where_stopped(opt, objective, oracle, rows, t0, metrics, last)
        grew = _warn_if_growing(rows, algorithm.lr)
        if grew:  # (compare marks such a run diverged)
            meta["grew"] = grew
        per_process = opt.process_stats()  # collective under MPI
        if per_process is not None and len(per_process) > 1:
            meta["ranks"] = len(per_process)
            meta["communication"] = per_process
        interrupted = agreed.finish() or interrupted  # (a signal held since the last agreement: collective)
        history = History(rows, meta, interrupted=interrupted)
        warn_if_below_optimum(history.frame, objective)
        return history
    finally:
        agreed.__exit__()


def _not_an_algorithm(value):
    """What run() says of an ``algorithm`` that is not an :class:`Algorithm`: an optimizer (a class of the
    registry, or one built) or a method's name is told how to make one."""
    from .algorithms import Optimizer

    kind = value if isinstance(value, type) else type(value)
    if isinstance(value, str):
        if value not in REGISTRY:
            return (f"algorithm must be an Algorithm, got the string {value!r}, which names no method either "
                    f"('rowstoch algorithms' lists them: {', '.join(sorted(REGISTRY)[:4])}, ...)")
        name, what = repr(value), f"the method name {value!r}"
    elif issubclass(kind, Optimizer):
        name = next((repr(m) for m, cls in REGISTRY.items() if cls is kind), "...")
        what = f"the optimizer {'class ' if isinstance(value, type) else ''}{kind.__name__}"
    else:
        return f"algorithm must be an Algorithm, got {kind.__name__}"
    return (f"algorithm must be an Algorithm, got {what}: run() builds the optimizer from "
            f"rowstoch_fast.Algorithm(A, lr, method={name}) (an optimizer you built is stepped by its own "
            "step(oracle))")


def _set_up(algorithm, objective, iterations, repeats, x0, seed, first_repeat, resume, meta, due, record_at,
            record_every, metrics, progress):
    """:func:`run`'s set-up: the settings checked on every process, the optimizer built (or restored from
    ``resume``), the oracle, the first record. Returns ``(opt, oracle, rows, t0, bar)``."""
    from .network import describe

    backends.check_same_on_every_process(  # (collective under MPI, before anything is built; the network's digest,
        # a pass over its weights, only there)
        algorithm.backend, lambda: {**meta["config"], "network": describe(algorithm.A)}, "the run's settings")
    # the bar covers the set-up too (the optimizer's tracker and the first record can take a while at large n)
    bar = progress_bar(progress, iterations, 0, meta["algorithm"] + " (set-up)")
    setup_start = time.perf_counter()
    if resume is not None:
        opt, data, rows = _load_checkpoint(resume, algorithm, meta["config"], objective,  # under MPI every rank
                                           _columns(meta))  # reads it
        wall_offset = float(data["wall_offset"])
        if opt.iteration > iterations:  # it would have stopped at once and reported the checkpoint's end
            if bar is not None:
                bar.close()
            raise ValueError(f"resume: checkpoint {resume!r} is at iteration {opt.iteration}, past iterations = "
                             f"{iterations}; ask for at least {opt.iteration} iterations")
    else:
        opt = build_replicas(algorithm, objective, repeats, x0)
        rows, wall_offset = [], 0.0
    meta["resumed_wall_seconds"] = wall_offset  # (the time before the checkpoint: a resumed run's own is the sum)
    opt.growth_limit = None  # (the run's records say it, with the loss: _warn_if_growing)
    # each process draws the samples of its own nodes (all of them without MPI)
    oracle = objective.oracle(seed=seed, batches=opt.rounds, nodes=opt.local_nodes, rep_offset=first_repeat)
    if bar is not None and not opt.is_root:  # under MPI rank 0 alone shows progress
        bar.close()
        bar = None
    if resume is not None:
        oracle.iteration = int(data["oracle_iteration"])
        last = data.get("oracle_last")
        oracle.last = None if last is None else opt.scatter(last)
    else:
        initialize(opt, oracle)
    meta["setup_seconds"] = time.perf_counter() - setup_start  # optimizer, tracker, first gradients, GPU kernels
    logger.info("%s (lr %g) on the %s backend, %d nodes, %d repetitions, %d threads: set up in %.2f s, %s at "
                "iteration %d", meta["algorithm"], algorithm.lr if np.ndim(algorithm.lr) == 0 else float("nan"),
                opt.backend, opt.n, repeats, _core.get_num_threads(), meta["setup_seconds"],
                "resumed" if resume is not None else "starting", opt.iteration)
    records = len(record_at) if record_at is not None else iterations // record_every + 2
    require_memory(records * repeats * len(_columns(meta)) * RECORD_BYTES,
                   f"a record every {record_every} of {iterations} iterations ({records} records x {repeats} "
                   "repetitions)",
                   "record less often (a larger record_every, --record-every) or fewer repetitions")
    t0 = time.perf_counter() - wall_offset
    seconds = 0.0  # (the record's: an interrupted run's record where it stopped is taken where records are quick)
    if resume is None or (opt.iteration in due and not any(row[0] == opt.iteration for row in rows)):
        # (a resumed run whose record of this iteration was cut short by the interruption takes it now: its
        # records are those of an uninterrupted run)
        seconds = _record(opt, objective, oracle, rows, t0, metrics)
        if resume is None:
            _warn_overflowing_start(objective, rows, metrics, x0)
            _warn_unmeasured(objective, rows, metrics)
    if bar is not None:
        bar.n = bar.last_print_n = opt.iteration
        bar.set_description(meta["algorithm"], refresh=True)
    return opt, oracle, rows, t0, bar, seconds


#: The metrics every objective defines at any finite point (the others: NaN where it has no optimum, no test data,
#: or the method no tracker): NaN at the start is the objective's doing.
_ALWAYS_DEFINED = ("grad_norm", "grad_norm_centroid", "grad_norm_mean", "loss")


def _at_start(rows, metrics, test):
    """The metrics of ``metrics`` that every objective defines at the start (:data:`_ALWAYS_DEFINED`) whose value in
    the start's record passes ``test`` in every repetition."""
    start = [r for r in rows if r[0] == 0]
    return [m for m in _ALWAYS_DEFINED if m in metrics and start
            and all(test(r[4 + METRICS.index(m)]) for r in start)]


def _warn_overflowing_start(objective, rows, metrics, x0):
    """A RuntimeWarning naming ``x0`` (or the objective's start) where the start's record (finite iterates) holds
    inf in a metric every objective defines there, in every repetition: its values overflow the metrics (an x0 of
    1e300 had recorded inf in every row, the run "done" and not diverged, not a word). A warning, not a refusal: the
    iterates are finite, and a run from 1e160 comes back into range (helper 217)."""
    inf = _at_start(rows, metrics, math.isinf)
    if inf:
        name = "x0" if x0 is not None else f"the start ({type(objective).__name__}.x0())"
        start_values = np.asarray(x0 if x0 is not None else objective.x0(), dtype=np.float64)
        largest = float(np.max(np.abs(start_values))) if start_values.size else 0.0
        warnings.warn(f"{name}: the metrics at the start overflow to inf ({', '.join(inf)}): its largest entry, "
                      f"{largest:.3g}, is too large for {type(objective).__name__} to be measured; the records read inf "
                      "until the iterates come back into range (start from smaller values)", RuntimeWarning,
                      stacklevel=4)


def _warn_unmeasured(objective, rows, metrics):
    """A RuntimeWarning where the start's record (finite iterates: ``x0``, checked) holds NaN in a metric that every
    objective defines there, in every repetition: an objective of the user's whose ``full_gradient`` (or ``loss``)
    returns NaN had every record of the gradient norms NaN, the run "done", not a word (helper 196)."""
    nan = _at_start(rows, metrics, math.isnan)
    if nan:
        kinds = [k for k, there in (("loss", "loss" in nan), ("gradients", any(m != "loss" for m in nan))) if there]
        warnings.warn(f"{', '.join(nan)} {'is' if len(nan) == 1 else 'are'} NaN at the start (iteration 0, finite "
                      f"iterates): {type(objective).__name__}'s {' and '.join(kinds)} return NaN there, and every "
                      f"record of {'it' if len(nan) == 1 else 'them'} will be NaN", RuntimeWarning, stacklevel=4)


#: An interrupted run in one process takes its record where it stopped where the run's last record took at most
#: this many seconds (f*'s solve not counted): a stop is asked to be quick (a scheduler's SIGTERM is followed by a
#: SIGKILL), and a record of 20,000 replicas on 51,200 samples a node takes a minute.
STOP_RECORD_SECONDS = 3.0


def _record_where_stopped(opt, objective, oracle, rows, t0, metrics, last=0.0):
    """``rows`` with a record of the iteration an interrupted run stopped at (not in its checkpoint, whose records
    stay those of an uninterrupted run): a run of 10^9 iterations stopped after hours had kept its start's record
    alone. Collective under MPI (every process stopped at the same iteration, :class:`_AgreedStop`, a second signal
    held meanwhile): the records shared again, as every process returns the same history. A second Ctrl-C in one
    process, or a metric that fails there (one defined on the schedule's iterations only), leaves the records as
    they were, the run interrupted as it was (helper 239). In one process, where the run's last record took more
    than :data:`STOP_RECORD_SECONDS` (``last``; a resumed run that took none yet: 0), none is taken, and a warning
    says so."""
    if last > STOP_RECORD_SECONDS and backends.one_process(opt.backend):  # (under MPI the ranks' clocks could
        # decide apart, and the record is collective)
        warnings.warn(f"the run was interrupted at iteration {opt.iteration}; its records end at iteration "
                      f"{rows[-1][0]}: its last record took {last:.1f} s, and a stop is asked to be quick",
                      RuntimeWarning, stacklevel=3)
        return rows
    try:
        _record(opt, objective, oracle, rows, t0, metrics)
    except KeyboardInterrupt:
        pass
    except Exception as exc:  # noqa: BLE001 - the run is reported interrupted, with what it recorded
        warnings.warn(f"the record of iteration {opt.iteration}, where the run was interrupted, failed ("
                      f"{type(exc).__name__}: {exc}); its records end at iteration {rows[-1][0]}", RuntimeWarning,
                      stacklevel=3)  # (the caller of run)
    return opt.share(rows)


def initialize(opt, oracle):
    """``opt.initialize(oracle)``, a refusal of the gradients' mini-batches said of the rounds that set them
    (:func:`in_rounds_words`): the runner's and the tuner's runs."""
    try:
        opt.initialize(oracle)
    except (ValueError, MemoryError) as exc:
        said = in_rounds_words(exc, opt)
        if said is exc:
            raise
        raise said from None


def in_rounds_words(exc, opt):
    """A gradient's refusal of its mini-batches in the words of the ``rounds`` that set them: a multi-round
    method's oracle averages ``rounds`` mini-batches per call (eq. 12b), and ``rounds=10**9`` was refused as
    "batches = 1000000000 ...; lower batches or batch", an argument the caller never gave."""
    text = str(exc)
    if opt.rounds > 1 and type(exc) in (ValueError, MemoryError) and re.match(rf"batches = {opt.rounds}\b", text):
        return type(exc)(f"rounds = {opt.rounds}: each gradient averages {opt.rounds} mini-batches (eq. 12b), and "
                          + text.replace("lower batches or batch", "lower rounds or the batch").replace(
                              "lower batches", "lower the rounds"))
    return exc


def _keep_on_failure(exc, opt, oracle, rows, meta, checkpoint, wall):
    """What a run that raised had recorded goes with the exception (``exc.history``) and, with ``checkpoint``,
    the state at its last completed iteration is saved, as on Ctrl-C (one process only: under MPI the other
    ranks may not be there to take part, and the last periodic checkpoint stays)."""
    meta["completed_iterations"] = opt.iteration
    meta["failed"] = f"{type(exc).__name__}: {exc}"
    if checkpoint and backends.one_process(opt.backend):
        try:
            _save_checkpoint(checkpoint, opt, oracle, rows, meta, wall)
        except Exception:  # noqa: BLE001 - the run's own error is the one to report
            pass
    try:
        exc.history = History(rows, meta, interrupted=True)
    except AttributeError:  # pragma: no cover - an exception type without attributes
        pass


#: The start of :func:`warn_if_below_optimum`'s message (a comparison's runs leave it to the comparison).
BELOW_OPTIMUM_WORDS = "fell below the f*"


def warn_if_below_optimum(frame, objective, stacklevel=3):
    """RuntimeWarning where a recorded ``f(x_bar)`` (``frame``'s suboptimality) fell below the ``f*`` the
    objective's optimum gives by more than rounding (:func:`~rowstoch_fast.objectives.past_rounding`, from the
    run's start: relative to ``max(1, |f*|)`` alone, data in small units, a lasso's start 2.7e-10 above f*, never
    warned of an f* off by 1.4e-13, helper 265; the dtype's rounding: in float32 f(x_bar) rounds to 7e-9 steps at
    ``|f*| = 0.1``, and every run warned; none where the loss cannot measure it): that ``f*`` is not the minimum (an
    objective of the user's whose ``_solve`` was off by 1e-3 had every method "below the optimum", and a biased one
    tied with the exact ones)."""
    if "suboptimality" not in frame or not len(frame):
        return
    low = frame["suboptimality"].min()
    if not np.isfinite(low):  # (not recorded: the optimum is not asked for, nor computed, for a warning)
        return
    try:
        best = optimum_of(objective)  # (computed already, for the records)
    except Exception:  # (a warning never loses a run)
        return
    if best is None:
        return
    first = frame["suboptimality"][frame["iteration"] == frame["iteration"].min()] if "iteration" in frame else \
        frame["suboptimality"].iloc[:1]
    start = float(np.nanmax(first.to_numpy(dtype=np.float64), initial=-np.inf))  # (f(x0) - f*)
    if low >= -value_rounding(objective) * abs(best.value):  # (rounding of f* itself: within any bar, no pass)
        return
    try:  # (the loss's own rounding near x*, measured around f(x*): not around f*, whose error it would count)
        at = best._replace(value=float(objective.value_and_gradient_at(np.asarray(best.x, dtype=np.float64))[0]))
    except Exception:  # noqa: BLE001 - a warning never loses a run
        return
    if not past_rounding(objective, at, -low, start, unmeasured=False):
        return
    warnings.warn(f"{type(objective).__name__}: f(x_bar) {BELOW_OPTIMUM_WORDS} = {best.value:.10g} of its optimum() "
                  "by more than rounding: that is not its minimum (check its _solve() or optimum()), and the "
                  "suboptimality measures no accuracy", RuntimeWarning, stacklevel=stacklevel)


def _smaller_than(lr, position):
    """What to try after a run at ``lr`` (one rate, one per replica: ``position``'s, or one per node) grew."""
    if np.ndim(lr) == 1:  # (FROST's rates per node: the largest is the first suspect)
        return f"smaller rates per node than these (the largest {float(np.max(lr)):g}, at node {int(np.argmax(lr))})"
    return f"a smaller lr than {float(np.ravel(lr)[min(position, np.size(lr) - 1)]):g}"


def _warn_if_growing(rows, lr):
    """RuntimeWarning when a repetition's gradient norm or loss grew by more than GROWTH_WARNING over the run; the
    warning's text is returned (None when nothing grew).

    The loss counts only when it rose (a loss that falls from near 0 to a negative
    minimum, as a quadratic's does, is progress), measured against ``max(|first|, 1e-3)``.
    """
    first, last = {}, {}
    for row in rows:
        first.setdefault(row[3], row)
        last[row[3]] = row
    for position, (rep, a) in enumerate(first.items()):
        b = last[rep]
        grew = []
        if a[4] > 0 and b[4] > GROWTH_WARNING * a[4]:
            grew.append(f"the gradient norm from {a[4]:.3g} to {b[4]:.3g}")
        if b[6] - a[6] > GROWTH_WARNING * max(abs(a[6]), 1e-3):
            grew.append(f"the loss from {a[6]:.3g} to {b[6]:.3g}")
        if grew:
            message = (f"{' and '.join(grew)} (iteration {a[0]} to {b[0]}, repetition {rep}): the run diverges "
                       f"without NaN; try {_smaller_than(lr, position)}")
            warnings.warn(message, RuntimeWarning, stacklevel=3)
            return message
    return None

