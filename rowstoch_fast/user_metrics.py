"""Metrics beyond the built-in ones: functions users define, and statistics of a per-node quantity over the nodes.

A metric you define is a function ``metric(state) -> float`` of a :class:`MetricState` (one repetition's models
at a recorded iteration: ``x``, ``x_bar``, ``iteration``, ``communication_rounds``, ``samples``, ``rep``,
``objective``). Register it by name (:func:`register_metric`, or a file of such registrations:
:func:`load_metrics_module`, ``rowstoch compare --metrics-module FILE``) or pass the function itself: then
:func:`rowstoch_fast.run` (``metrics=[..., "name"]``), :class:`~rowstoch_fast.History` (a column, its CSV and
JSON, :meth:`~rowstoch_fast.History.plot`) and :func:`rowstoch_fast.compare.compare` (``metrics=`` and, for a
metric registered ``ranked=True``, ``metric=``) record and show it like a built-in one. It is called once per
repetition at each record, and only in the runs that ask for it.

Statistics over the nodes (:data:`NODE_STATISTICS` of :data:`NODE_QUANTITIES`) are metrics of the same kind,
named ``node_<statistic>_<quantity>``: ``node_min_test_accuracy`` is the lowest test accuracy of a node's own
model, ``node_std_local_loss`` the spread of the local losses ``f_i(x_i)``, ``node_min_participation`` the fewest
rounds a client of a federated method took part in.

The federated metrics (:data:`FEDERATED_METRICS`: ``client_drift``, ``participation_fairness``; NaN for a method
that is not federated) read the method itself (:attr:`MetricState.algorithm`): see
:mod:`rowstoch_fast.algorithms._federated`. So do the oracle-call counters (:data:`CALL_METRICS`:
``gradient_calls``, ``sample_gradient_calls``, ``prox_calls``, ``local_prox_calls``, per node, of the iterations
done: :attr:`~rowstoch_fast.algorithms.Optimizer.calls`) and of messages (:data:`MESSAGE_METRICS`:
``messages_received``, ``messages_dropped``: what the network's losses let through and dropped of the messages
sent, :meth:`~rowstoch_fast.algorithms.Optimizer.messages_dropped`).

Examples
--------
>>> import numpy as np
>>> from rowstoch_fast import Algorithm, run, topology
>>> from rowstoch_fast.objectives import Quadratic
>>> f = Quadratic.random(8, 3, seed=0)
>>> def spread(state):  # the largest distance of a node's model from the mean model
...     return float(np.abs(state.x - state.x_bar).max())
>>> h = run(Algorithm(topology.exponential(8), 0.1), f, 20, record_every=10, progress=False,
...         metrics=["grad_norm", spread, "node_max_distance"])
>>> list(h.frame.columns[-2:]), bool(h.frame["spread"].iloc[0] < 1e-15 < h.frame["spread"].iloc[-1])
(['spread', 'node_max_distance'], True)
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
import numbers
import os
import re
import sys
from dataclasses import dataclass

import numpy as np

from ._checks import check_bool, check_regular_file
from ._metric_names import CALL_KINDS, METRICS
from .errors import MetricValueError
from .objectives import optimum_of

__all__ = ["Metric", "MetricState", "register_metric", "unregister_metric", "registered_metrics",
           "load_metrics_module", "resolve_metrics", "higher_is_better", "linear_scale", "NODE_STATISTICS",
           "NODE_QUANTITIES", "FEDERATED_METRICS", "CALL_METRICS", "MESSAGE_METRICS", "COUNTS", "unranked",
           "RESERVED"]

#: Columns of a run's records and of a comparison's frame and tables that no metric may be named (beside the
#: built-in metrics, :data:`rowstoch_fast.runner.METRICS`, and the ``node_*`` statistics).
RESERVED = frozenset({
    "iteration", "communication_rounds", "samples", "rep", "wall_seconds", "algorithm", "lr", "lr_source",
    "rounds_per_iteration", "messages", "bytes", "gradient_evaluations", "diverged", "total_wall_seconds",
    "status", "diagnosis", "graph", "setting", "iterations", "final", "final_std", "rank", "rank_shared"})
#: The statistics over the nodes a ``node_<statistic>_<quantity>`` metric takes.
NODE_STATISTICS = {"mean": np.mean, "std": np.std, "min": np.min, "max": np.max, "median": np.median}
#: The per-node quantities of the ``node_*`` metrics, and what each is for node ``i`` (model ``x_i``: the
#: :attr:`MetricState.x` row, a federated method's server model on every row, whose statistics over the nodes are
#: then one model's).
NODE_QUANTITIES = {
    "local_loss": "f_i(x_i): its own function at its own model (a pass over the data)",
    "suboptimality": "f(x_i) - f*: the whole objective at its model (n passes over the data; NaN without f*)",
    "distance": "||x_i - x*|| (NaN where the objective knows no x*)",
    "test_loss": "the test loss of its model (NaN without test data)",
    "test_accuracy": "the test accuracy of its model (classification; NaN otherwise)",
    "test_mse": "the test mean squared error of its model (regression; NaN otherwise)",
    "participation": "the rounds done that chose client i (a federated method; NaN otherwise)",
}
#: The metrics of a federated method (NaN for the others), and what each is.
FEDERATED_METRICS = {
    "client_drift": "the mean distance ||y_i - s|| of the last round's chosen clients' models, at the end of their "
                    "local steps, from the server model s they were sent (FedPD, FedLT: from the server's model, "
                    "their steps starting at their own; Federated.client_drift)",
    "participation_fairness": "Jain's index (sum c_i)^2 / (n sum c_i^2) of how often each client was chosen so far: "
                              "1 for equal turns (Federated.participation_fairness)",
}
#: The oracle-call counters, per node, of the iterations done (:attr:`~rowstoch_fast.algorithms.Optimizer.calls`),
#: and what one call is: ``gradient_calls``, ``sample_gradient_calls``, ``prox_calls``, ``local_prox_calls``.
CALL_METRICS = {f"{kind}_calls": text for kind, text in CALL_KINDS.items()}
#: The messages the network delivered and dropped so far (of those ``traffic()`` counts as sent: the ``messages``
#: column), from the losses' own draws (:meth:`~rowstoch_fast.algorithms.Optimizer.messages_dropped`).
MESSAGE_METRICS = {
    "messages_received": "the messages that arrived: those sent (the messages column) less those lost",
    "messages_dropped": "the messages the network's losses dropped (Optimizer.messages_dropped; 0 without losses)",
}
#: The metrics that count what a run did (calls, messages): shown in the tables, never marked best (fewer calls or
#: messages dropped say nothing of a method by themselves).
COUNTS = frozenset(CALL_METRICS) | frozenset(MESSAGE_METRICS)


def unranked(name):
    """Whether the metric ``name`` describes a run rather than grades it, shown beside the others and never ranked
    or bolded: the :data:`COUNTS`, and a federated method's (the clients' drift grows with the rate and the local
    steps, so its lowest was the smallest rate's, bolded as best; the fairness of the turns and the counts of each
    client's, ``node_<statistic>_participation``, follow the selection rule and the participation: the method that
    took fewer clients a round had been bolded, helpers 273, 274)."""
    return name in COUNTS or name in FEDERATED_METRICS or str(name).startswith("node_") and \
        str(name).endswith("_participation")


_NODE_NAME = re.compile(r"node_(%s)_(%s)$" % ("|".join(NODE_STATISTICS), "|".join(NODE_QUANTITIES)))
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*$")
#: Built-in metrics where a higher value is better (tables rank the largest first; figures use a linear axis).
_HIGHER = frozenset({"test_accuracy", "participation_fairness"})

_REGISTRY = {}  # name -> Metric
_LOADED = {}  # module name -> (path, names it registered): the files of load_metrics_module


@dataclass(frozen=True, eq=False, init=False)
class MetricState:
    """What a metric you define is called with: one repetition's models at a recorded iteration (read-only).

    Attributes
    ----------
    x : numpy.ndarray, shape (n, d)
        Every node's model (a read-only view: valid during the call only; copy what you keep): what the method
        hands over, the server's model on every row for a federated method (its clients' own models are
        ``algorithm.gather_x()``).
    x_bar : numpy.ndarray, shape (d,)
        Their plain mean (the point ``suboptimality`` and the test metrics are measured at).
    iteration : int
    communication_rounds : int
    samples : float
        Samples each node has drawn so far (the ``samples`` column; an average over the clients for a federated
        method, whose clients not chosen draw none).
    rep : int
        The repetition (the ``rep`` column; a tuning run's replica index).
    objective : Objective
        The problem (its data, :meth:`~rowstoch_fast.objectives.Objective.optimum`,
        :attr:`~rowstoch_fast.objectives.Objective.test_data`, ...).
    algorithm : Optimizer or None
        The method that made the models (read it, never step it; None where the caller gives none): the
        federated metrics read their clients' participation and drift from it.
    replica : int
        Which of its replicas ``x`` is (0 without replicas).
    """

    __slots__ = ("x", "x_bar", "iteration", "communication_rounds", "samples", "rep", "objective", "algorithm",
                 "replica")
    x: np.ndarray
    x_bar: np.ndarray
    iteration: int
    communication_rounds: int
    samples: float
    rep: int
    objective: object
    algorithm: object
    replica: int

    def __init__(self, x, x_bar, iteration, communication_rounds, samples, rep, objective, algorithm=None,
                 replica=0):
        for name, value in zip(self.__slots__, (x, x_bar, iteration, communication_rounds, samples, rep, objective,
                                                algorithm, replica)):
            object.__setattr__(self, name, value)


def _check_name(name):
    """``name`` if a metric may take it, else a TypeError / ValueError saying why."""
    if not isinstance(name, str):
        raise TypeError(f"a metric's name must be a string, got {type(name).__name__} {name!r}")
    if not _NAME.match(name):
        raise ValueError(f"metric name {name!r} must be a Python identifier (letters, digits and _): it becomes a "
                         "column of the records and a --metric choice")
    if name in METRICS or _NODE_NAME.match(name) or name in FEDERATED_METRICS or name in CALL_METRICS or \
            name in MESSAGE_METRICS:
        raise ValueError(f"metric name {name!r} is a built-in metric's; choose another")
    if name in RESERVED or name.endswith(("_std", "_best")):
        raise ValueError(f"metric name {name!r} is taken by a column of the records or tables (or ends in _std / "
                         "_best, as the tables' columns of a metric do); choose another")
    return name


class Metric:
    """A metric beyond the built-in ones: a name, a function ``fn(state) -> float`` of a :class:`MetricState`,
    and how to read it.

    Parameters
    ----------
    name : str
        Its column (a Python identifier, not a built-in metric's or a column's of the records: :data:`RESERVED`).
    fn : callable
        ``fn(state) -> float``: one real number (NaN allowed) per repetition and record.
    lower_is_better : bool, default True
        False for an accuracy: tables then mark the largest value best, and figures draw it on a linear axis.
    ranked : bool, default False
        Whether a comparison may tune on and rank by it (``compare(metric=name)``): only for a metric that is
        positive at the start and falls to 0 at the solution (the verdict's rules: no progress above half its
        start, diverged above 1000 times it; ranks on its logarithm), e.g. an error to a known point.
    log_scale : bool, optional
        Its figures' vertical axis (default: logarithmic where lower is better, else linear).

    Raises
    ------
    TypeError, ValueError
        A name a metric may not take, ``fn`` not callable, or ``ranked`` without ``lower_is_better``.
    """

    __slots__ = ("name", "fn", "lower_is_better", "ranked", "log_scale")

    def __init__(self, name, fn, lower_is_better=True, ranked=False, log_scale=None):
        if not callable(fn):
            raise TypeError(f"metric {name!r}: fn must be callable as fn(state) -> float, got {type(fn).__name__}")
        for flag, value in (("lower_is_better", lower_is_better), ("ranked", ranked)):
            if not isinstance(value, (bool, np.bool_)):
                raise TypeError(f"metric {name!r}: {flag} must be True or False, got {value!r}")
        if log_scale is not None and not isinstance(log_scale, (bool, np.bool_)):
            raise TypeError(f"metric {name!r}: log_scale must be True, False or None, got {log_scale!r}")
        if ranked and not lower_is_better:
            raise ValueError(f"metric {name!r}: a ranked metric falls to 0 at the solution (lower is better); "
                             "give ranked=False, or lower_is_better=True")
        builtin = (isinstance(fn, _NodeStatistic) and bool(_NODE_NAME.match(str(name)))  # (a node_* metric's own)
                   or isinstance(fn, _AlgorithmMetric) and fn.name == name)
        object.__setattr__(self, "name", name if builtin else _check_name(name))
        object.__setattr__(self, "fn", fn)
        object.__setattr__(self, "lower_is_better", bool(lower_is_better))
        object.__setattr__(self, "ranked", bool(ranked))
        object.__setattr__(self, "log_scale", bool(lower_is_better) if log_scale is None else bool(log_scale))

    def __setattr__(self, name, value):
        raise AttributeError("a Metric is read-only")

    def __repr__(self):
        return (f"Metric({self.name!r}, {getattr(self.fn, '__qualname__', self.fn)!r}, "
                f"lower_is_better={self.lower_is_better}, ranked={self.ranked})")

    def __eq__(self, other):
        return isinstance(other, Metric) and self._key() == other._key()

    def __hash__(self):
        return hash(self.name)

    def _key(self):
        return self.name, self.fn, self.lower_is_better, self.ranked, self.log_scale

    def __reduce__(self):  # a function of a file loaded by load_metrics_module travels as (file, its name)
        module = getattr(self.fn, "__module__", None)
        if module in _LOADED:
            return _from_file, (_LOADED[module][0], self.fn.__qualname__, self.name, self.lower_is_better,
                                self.ranked, self.log_scale)
        return Metric, self._key()

    def properties(self):
        """How to read it, as a plain dict (what a run's ``meta["extra_metrics"]`` holds per metric)."""
        return {"lower_is_better": self.lower_is_better, "ranked": self.ranked, "log_scale": self.log_scale}

    def measure(self, state):
        """``fn(state)`` as a float; its error, or a value that is not one real number, is raised naming the
        metric (a RuntimeError from the function's own exception, a :class:`~rowstoch_fast.errors.MetricValueError`,
        a TypeError, for the value)."""
        try:
            value = self.fn(state)
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - re-raised naming the metric (a sys.exit(0) in
            # it had ended the command as a success, its records unwritten, helper 185)
            raise RuntimeError(f"metric {self.name!r} raised {type(exc).__name__}: {exc}") from exc
        if isinstance(value, numbers.Real) and not isinstance(value, np.ndarray):  # (any real number: a Fraction,
            # an int past int64 such as 2**70, had been refused as "not one real number")
            try:
                return float(value)
            except (OverflowError, TypeError, ValueError) as exc:
                raise MetricValueError(f"metric {self.name!r} must return one real number that a float holds, got "
                                       f"{type(value).__name__} {value!r:.60} ({exc})") from None
        if (not isinstance(value, np.ndarray) or np.ndim(value) != 0
                or np.asarray(value).dtype.kind not in "biuf"):
            raise MetricValueError(f"metric {self.name!r} must return one real number, got {type(value).__name__} "
                            f"{np.shape(value) if np.ndim(value) else value!r}")
        return float(value)


def _from_file(path, qualname, name, lower_is_better, ranked, log_scale):
    """The metric ``qualname`` of the file ``path`` (loaded here if it was not): a pickled :class:`Metric`."""
    load_metrics_module(path)
    module = sys.modules[_module_name(os.path.abspath(path))]
    fn = module
    for part in qualname.split("."):
        fn = getattr(fn, part)
    return Metric(name, fn, lower_is_better, ranked, log_scale)


def register_metric(name, fn=None, *, lower_is_better=True, ranked=False, log_scale=None, replace=False):
    """Register ``fn(state) -> float`` as the metric ``name``: then ``run(metrics=[..., name])``,
    ``compare(metrics=[..., name])`` and ``rowstoch compare --metric ...,name`` (with ``--metrics-module``)
    record it. Use it as a decorator too (``@register_metric("name")``).

    Parameters
    ----------
    name : str
        A Python identifier that is neither a built-in metric's nor a column's of the records (:data:`RESERVED`).
    fn : callable, optional
        ``fn(state) -> float`` of a :class:`MetricState` (omitted: a decorator is returned).
    lower_is_better, ranked, log_scale
        As in :class:`Metric` (``ranked=True``: a comparison may tune on and rank by it).
    replace : bool, default False
        Replace another function registered under ``name`` (the same function registered again, e.g. a
        notebook's cell run twice, replaces it anyway).

    Returns
    -------
    callable
        ``fn`` itself (a decorator keeps the function as it is).

    Raises
    ------
    ValueError
        A built-in metric's name, a column's, or a name another function holds (without ``replace``).

    Examples
    --------
    >>> import numpy as np
    >>> @register_metric("max_abs_model")
    ... def max_abs_model(state):
    ...     return float(np.abs(state.x).max())
    >>> "max_abs_model" in registered_metrics()
    True
    >>> unregister_metric("max_abs_model")
    """
    if fn is None:
        def decorate(f):
            register_metric(name, f, lower_is_better=lower_is_better, ranked=ranked, log_scale=log_scale,
                            replace=replace)
            return f
        return decorate
    metric = Metric(name, fn, lower_is_better, ranked, log_scale)
    replace = check_bool(replace, "replace")
    old = _REGISTRY.get(name)
    if old is not None and not replace and _where(old.fn) != _where(fn):
        raise ValueError(f"metric {name!r} is already registered (by {_where(old.fn)}); choose another name, or "
                         "pass replace=True")
    _REGISTRY[name] = metric
    for module, (path, names) in _LOADED.items():  # (a file being loaded: what it registers)
        if module == getattr(fn, "__module__", None) and name not in names:
            names.append(name)
    return fn


def _where(fn):
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


def unregister_metric(name):
    """Remove the metric ``name`` from the registry (a ValueError if none is registered so)."""
    if name not in _REGISTRY:
        raise ValueError(f"no metric {name!r} is registered")
    del _REGISTRY[name]


def registered_metrics():
    """``{name: Metric}`` of the metrics registered so far (a copy)."""
    return dict(_REGISTRY)


def _module_name(path):
    return "rowstoch_fast_metrics_" + hashlib.sha1(path.encode()).hexdigest()[:12]


def load_metrics_module(path):
    """Run the Python file ``path`` once (its :func:`register_metric` calls register its metrics) and return the
    names it registered, in order. A file loaded before is not run again. Its functions then also reach the
    worker processes of ``compare(jobs=...)`` (each loads the file).

    Parameters
    ----------
    path : str or os.PathLike
        The file (``rowstoch compare --metrics-module FILE``).

    Returns
    -------
    tuple of str
        The names it registered.

    Raises
    ------
    FileNotFoundError
        Where there is no such file.
    IsADirectoryError, ValueError
        Where ``path`` is a folder, or something else that is not a regular
        file (a device, a FIFO).
    Exception
        Whatever the file raises (a SyntaxError, a name a metric may not take, ...).
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be the path of a Python file (str), got {type(path).__name__} {path!r}")
    path = os.path.abspath(os.fspath(path))
    name = _module_name(path)
    if name in _LOADED:
        return tuple(_LOADED[name][1])
    check_regular_file(path, "metrics module", "give the Python file in it")  # (a folder or a device had "not
    # existed", helper 218)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None:  # (no loader for the suffix: importlib's own "'NoneType' object has no attribute 'loader'")
        raise ValueError(f"metrics module {path!r} is not a Python file: give it the suffix .py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    _LOADED[name] = (path, [])
    try:
        spec.loader.exec_module(module)
    except SystemExit as exc:  # (a sys.exit in the file: the command had ended with its code, saying nothing)
        del sys.modules[name], _LOADED[name]
        raise RuntimeError(f"metrics module {path!r} called sys.exit({exc.code!r}) as it was loaded") from None
    except BaseException:
        del sys.modules[name], _LOADED[name]
        raise
    return tuple(_LOADED[name][1])


class _NodeStatistic:
    """``node_<statistic>_<quantity>``: a statistic over the nodes of a per-node quantity of one replica."""

    def __init__(self, statistic, quantity):
        self.statistic, self.quantity = statistic, quantity

    def __reduce__(self):
        return _NodeStatistic, (self.statistic, self.quantity)

    def __eq__(self, other):
        return isinstance(other, _NodeStatistic) and (self.statistic, self.quantity) == (other.statistic,
                                                                                          other.quantity)

    def __hash__(self):
        return hash((self.statistic, self.quantity))

    def __call__(self, state):
        values = self.values(state)
        return math.nan if values is None else float(NODE_STATISTICS[self.statistic](values))

    def values(self, state):
        """The quantity of every node (None where the objective cannot say)."""
        f, x = state.objective, state.x
        if self.quantity == "local_loss":
            return f.loss(np.ascontiguousarray(x))
        if self.quantity == "participation":
            opt = state.algorithm
            return opt.participation_counts().astype(np.float64) if getattr(opt, "federated", False) else None
        if self.quantity in ("distance", "suboptimality"):
            best = optimum_of(f)
            if best is None:
                return None
            if self.quantity == "distance":
                return np.linalg.norm(x - best.x, axis=-1)
            return f.value_and_gradient_at(x)[0] - best.value  # (x: n points, each against every node's f_i)
        return f.test_metrics(x).get(self.quantity)


class _AlgorithmMetric:
    """A built-in metric read off the method of the state (:attr:`MetricState.algorithm`), known by its name (which
    is what pickling, equality and hashing go by)."""

    def __init__(self, name):
        self.name = name

    def __reduce__(self):
        return type(self), (self.name,)

    def __eq__(self, other):
        return type(other) is type(self) and self.name == other.name

    def __hash__(self):
        return hash(self.name)


class _FederatedMetric(_AlgorithmMetric):
    """A metric of :data:`FEDERATED_METRICS`: read off the federated method of the state (NaN for another)."""

    def __call__(self, state):
        opt = state.algorithm
        if not getattr(opt, "federated", False):
            return math.nan
        if self.name == "client_drift":
            return float(np.atleast_1d(opt.client_drift())[state.replica])
        return opt.participation_fairness()


class _CallCount(_AlgorithmMetric):
    """A metric of :data:`CALL_METRICS` (``<kind>_calls``): the optimizer's count of one kind of oracle call."""

    def __call__(self, state):
        return float(state.algorithm.calls[self.name[:-len("_calls")]])


class _MessageCount(_AlgorithmMetric):
    """A metric of :data:`MESSAGE_METRICS`: the messages the optimizer's network delivered or dropped so far."""

    def __call__(self, state):
        dropped = state.algorithm.messages_dropped()
        return float(dropped if self.name == "messages_dropped" else state.algorithm.traffic()["messages"] - dropped)


def _count_metric(name):
    """The :class:`Metric` of a :data:`CALL_METRICS` or :data:`MESSAGE_METRICS` name, or None."""
    if name in MESSAGE_METRICS:  # (their direction: more received, fewer dropped; never marked best: COUNTS)
        return Metric(name, _MessageCount(name), lower_is_better=name == "messages_dropped", log_scale=False)
    if name not in CALL_METRICS:
        return None
    return Metric(name, _CallCount(name), lower_is_better=True, log_scale=False)


def _federated_metric(name):
    """The :class:`Metric` of a :data:`FEDERATED_METRICS` name, or None."""
    if name not in FEDERATED_METRICS:
        return None
    return Metric(name, _FederatedMetric(name), lower_is_better=name not in _HIGHER)


def _node_metric(name):
    """The :class:`Metric` of a ``node_*`` name, or None."""
    found = _NODE_NAME.match(name)
    if not found:
        return None
    statistic, quantity = found.groups()
    higher = quantity in _HIGHER and statistic != "std"
    return Metric(name, _NodeStatistic(statistic, quantity), lower_is_better=not higher)


def resolve_metrics(metrics, argument="metrics"):
    """``metrics`` as a tuple of built-in metric names (str) and :class:`Metric` objects, in order, repeats
    dropped: each entry a built-in name, a ``node_*`` name, a registered name, a :class:`Metric` or a function
    (recorded under its ``__name__``). A TypeError or ValueError names ``argument`` and what is wrong."""
    if isinstance(metrics, (str, Metric)) or callable(metrics):
        raise TypeError(f"{argument} must be a sequence of metric names or functions, got {metrics!r}")
    try:
        entries = [_resolve_one(m, argument) for m in metrics]
    except TypeError as exc:
        if "not iterable" in str(exc):
            raise TypeError(f"{argument} must be a sequence of metric names or functions, got "
                            f"{type(metrics).__name__}") from None
        raise
    out = {}
    for entry in entries:
        key = entry if isinstance(entry, str) else entry.name
        if key in out and out[key] != entry:
            raise ValueError(f"{argument}: two different metrics are named {key!r}")
        out.setdefault(key, entry)
    return tuple(out.values())


def _resolve_one(m, argument):
    if isinstance(m, str):
        if m in METRICS:
            return m
        found = _REGISTRY.get(m) or _node_metric(m) or _federated_metric(m) or _count_metric(m)
        if found is None:
            registered = f" ({', '.join(_REGISTRY)})" if _REGISTRY else ""
            raise ValueError(f"{argument} must be one of {', '.join(METRICS)}, a statistic over the nodes "
                             f"node_<{'|'.join(NODE_STATISTICS)}>_<{'|'.join(NODE_QUANTITIES)}>, a federated metric "
                             f"({', '.join(FEDERATED_METRICS)}), an oracle-call counter ({', '.join(CALL_METRICS)}), a "
                             f"count of messages ({', '.join(MESSAGE_METRICS)}) or a metric you registered "
                             "(register_metric)"
                             f"{registered}, got {m!r}")
        return found
    if isinstance(m, Metric):
        return m
    if callable(m):
        name = getattr(m, "__name__", None)
        if not isinstance(name, str) or not _NAME.match(name):
            raise ValueError(f"{argument}: a function is recorded under its __name__, and {name!r} is not a name "
                             "(a lambda?): def it, or register it (rowstoch_fast.register_metric('name', fn))")
        return Metric(name, m)
    raise TypeError(f"{argument}: every metric must be a name or a function fn(state) -> float, got "
                    f"{type(m).__name__} {m!r}")


def _properties(name, given=None):
    """The properties of the metric ``name``: ``given`` (``{name: properties}``, e.g. a run's
    ``meta["extra_metrics"]``), else the registry's, the ``node_*`` rule or the built-in ones."""
    if given and name in given:
        return given[name]
    found = _REGISTRY.get(name) or (_node_metric(name) or _federated_metric(name) or _count_metric(name)
                                    if isinstance(name, str) else None)
    if found is not None:
        return found.properties()
    higher = name in _HIGHER
    return {"lower_is_better": not higher, "ranked": False, "log_scale": not higher}


def higher_is_better(name, given=None):
    """Whether a higher value of the metric ``name`` is better (``test_accuracy``; a metric registered with
    ``lower_is_better=False``; ``given``: ``{name: properties}`` that take precedence)."""
    return not _properties(name, given)["lower_is_better"]


def linear_scale(name, given=None):
    """Whether the metric ``name`` is drawn on a linear vertical axis (``test_accuracy``, and a metric registered
    so) rather than a logarithmic one."""
    return not _properties(name, given)["log_scale"]
