"""Nodes that are not always awake: :class:`Sleepy` and its activation models (Bernoulli, Markov, Poisson,
cyclic).
"""

from __future__ import annotations

import numpy as np

from .._checks import (check_choice, check_int, check_positive_float, MAX_KEY, per_node_text, per_node_values,
                       positive_int)
from .._hashing import MAX_T, uniform_hash
from ..errors import UsageError
from ..mixing import MixingMatrix
from ._rounds import _base_entries, _keep_empty_rows, _materialise, _undirected_entries, _with_diagonal
from .base import (_own_draws, _under_messages, advance_two_state, as_network, checked_round, jump_two_state,
                   MAX_ACTIVATION_STEPS, Network, two_state_path)
from .options import ends, node_option, node_spec, node_values, Option, recorded, refused, shown


#: Iterations of activation drawn at once when they are asked in order (the Bernoulli and Poisson masks, the Markov
#: chains' states), at most 2^20 values.
ACTIVATION_AHEAD = 64


class Sleepy(Network):
    """Nodes that are not always active: a sleeping node neither sends nor receives (its row is ``e_i^T`` for that
    iteration, and its messages count as lost); it still takes its own local step (its gradient, and its
    tracker's update on what it holds), as a device cut off from the network would. Who is awake at iteration
    ``t`` follows an activation model, drawn from the counter-based hash of ``(seed, t, node)`` (every backend,
    MPI rank and resume draws the same):

    - ``"bernoulli"`` (default): each node awake with probability ``q``, independently per iteration;
    - ``"markov"``: each node a two-state chain, awake -> asleep with probability ``p_sleep`` and asleep -> awake
      with ``p_wake`` per iteration, starting from its stationary law (awake with ``p_wake / (p_sleep + p_wake)``;
      a far iteration is read backwards from it, about ``ln(n) / |p_wake - p_sleep|`` draws a node);
    - ``"poisson"``: each node a Poisson clock of ``rate`` ticks per iteration, awake in iterations where it ticks
      (probability ``1 - exp(-rate)``, independently: in discrete iterations, Bernoulli with that ``q``);
    - ``"cyclic"``: node ``i`` awake when ``(i - t) % period == 0`` (``n / period`` nodes per iteration, in turn);
      only ``period = 1`` is accepted: with more groups no two linked nodes of different groups are ever awake
      together, so the network never mixes (refused, naming why).

    ``q = 1`` (always awake) is the base network itself, bit for bit. Sleep composes with losses
    (``Sleepy(Lossy(A, 0.1), 0.9)``) and schedules.

    Parameters
    ----------
    A : MixingMatrix or network
    q : float in (0, 1], or an array of n of them, optional
        ``"bernoulli"``'s probability of being awake (required there; not taken by the other models); an array
        gives each node its own (heterogeneous devices; equal values are the single number's draws, bit for bit).
    seed : int
    model : {"bernoulli", "markov", "poisson", "cyclic"}
    p_sleep, p_wake : float in (0, 1]
        ``"markov"``'s transition probabilities.
    rate : float > 0, or an array of n of them
        ``"poisson"``'s ticks per iteration (one per node: each node its own clock).
    period : int >= 1
        ``"cyclic"``'s number of groups.

    Examples
    --------
    >>> from rowstoch_fast import topology
    >>> from rowstoch_fast.network import Sleepy
    >>> Sleepy(topology.ring(6), model="poisson", rate=0.5, seed=1).awake(1).tolist()
    [False, False, False, False, True, True]
    >>> net = Sleepy(topology.ring(100), model="markov", p_sleep=0.1, p_wake=0.3, seed=2)
    >>> bool(0.6 < net.awake(50).mean() < 0.9)  # stationary: awake three quarters of the time
    True
    """

    layer = "sleepy"
    order = 20
    acts_on = "links"
    keeps_symmetry = True
    loses = "puts nodes to sleep (what is sent to a sleeping node is lost)"

    MODELS = ("bernoulli", "markov", "poisson", "cyclic")
    _TAKES = {"bernoulli": ("q",), "markov": ("p_sleep", "p_wake"), "poisson": ("rate",), "cyclic": ("period",)}

    def __init__(self, A, q=None, seed=0, *, model="bernoulli", p_sleep=None, p_wake=None, rate=None, period=None):
        self.base = _under_messages(as_network(A), "Sleepy")
        self.n, self.stochastic = self.base.n, self.base.stochastic
        check_choice(model, "model", self.MODELS)
        given = {"q": q, "p_sleep": p_sleep, "p_wake": p_wake, "rate": rate, "period": period}
        needed = self._TAKES[model]
        extra = [k for k, v in given.items() if v is not None and k not in needed]
        if extra:
            raise ValueError(f"model {model!r} takes {', '.join(needed)}, not {', '.join(extra)}")
        missing = [k for k in needed if given[k] is None]
        if missing:
            raise ValueError(f"model {model!r} needs {', '.join(missing)}")
        self.model = model
        per_node = {"q": per_node_values(q, "q", self.n, lambda v: (v > 0) & (v <= 1), "in (0, 1]"),
                    "rate": per_node_values(rate, "rate", self.n, lambda v: v > 0, "finite and > 0")}
        for key in ("p_sleep", "p_wake", "period"):
            if np.ndim(given[key]) != 0:
                raise ValueError(f"{key} must be one number (one per node: q of the bernoulli model, rate of the "
                                 f"poisson model), got an array of shape {np.shape(given[key])}")
        for key in ("q", "p_sleep", "p_wake"):
            value = given[key]
            if key in per_node and per_node[key] is not None:
                value = per_node[key]
            elif value is not None:
                value = check_positive_float(value, key)
                if value > 1:
                    raise ValueError(f"{key} must be in (0, 1], got {value}")
            setattr(self, key, value)
        self.rate = per_node["rate"] if per_node["rate"] is not None else \
            None if rate is None else check_positive_float(rate, "rate")
        self.period = None if period is None else check_int(period, "period", minimum=1, maximum=2**62)
        self.seed = check_int(seed, "seed", minimum=0, maximum=MAX_KEY)
        if self.model == "cyclic" and self.period > 1:
            # A link is used only when both its ends are awake, so only between nodes equal modulo period: over a
            # period the groups never hear from each other (on a ring every round is the identity).
            raise ValueError(f"Sleepy(model='cyclic', period={self.period}) never mixes: a sleeping node neither "
                             f"sends nor receives, so a message goes only between two nodes awake together, i.e. "
                             f"equal modulo period, and the {min(self.period, self.n)} groups never hear from each "
                             "other (no network is jointly connected under it); use period=1 (the base network) or "
                             "the bernoulli, poisson or markov model")
        if self.model == "markov" and self.p_sleep == 1 and self.p_wake == 1:
            # Every node changes state every iteration: those that start awake and those that start asleep are
            # two fixed groups, never awake together (cyclic's period 2 with the groups drawn).
            raise ValueError("Sleepy(model='markov', p_sleep=1, p_wake=1) never mixes: every node changes state "
                             "every iteration, so the nodes that start awake and those that start asleep are two "
                             "fixed groups never awake together, and they never hear from each other; lower p_sleep "
                             "or p_wake")
        _own_draws(self)

    @property
    def lossless(self):
        """Every node awake in every iteration (``q = 1``; the cyclic model's one group): nothing is lost to sleep."""
        return (self.model == "bernoulli" and bool(np.all(self.q == 1))) or (self.model == "cyclic" and self.period == 1)

    @property
    def static(self):
        base = self.base if isinstance(self.base, MixingMatrix) else self.base.static
        return base if self.lossless else None

    def plan(self, t):
        if isinstance(self.base, MixingMatrix):
            matrix_of, seed, p, chain = (lambda r: self.base), 0, 0.0, None
        else:
            inner = self.base.plan(t)
            if inner is None or inner[3] is not None:
                return None
            matrix_of, seed, p, _, chain = inner
        return matrix_of, seed, p, self.awake(t), chain

    def _parameters(self):
        return {"model": self.model, **{k: getattr(self, k) for k in self._TAKES[self.model]}}

    def describe(self):
        """:meth:`Network.describe` with the model's own parameters only (``"bernoulli"``: ``q``, as before the
        other models existed, so that older checkpoints resume)."""
        out = super().describe()
        for key in ("q", "p_sleep", "p_wake", "rate", "period"):
            if out.get(key) is None:
                out.pop(key, None)
        if out.get("model") == "bernoulli":
            out.pop("model")
        return out

    @property
    def draws(self):  # (a cyclic schedule, or every node awake, is the same for every seed)
        return self.model != "cyclic" and not (self.model == "bernoulli" and np.all(np.asarray(self.q) == 1))

    def _twin(self, base, seed):
        return type(self)(base, seed=seed, **self._parameters())

    def map(self, f):
        base = f(self.base) if isinstance(self.base, MixingMatrix) else self.base.map(f)
        twin = Sleepy(base, seed=self.seed, **self._parameters())
        twin._draws = self._shared_draws()  # (the same nodes asleep: drawn once for both, e.g. Push-Pull's A and C)
        return twin

    def _shared_draws(self):
        """The draws this network keeps between calls (the last mask, the Markov chains' states), shared with the
        twins :meth:`map` makes: their awake nodes are the same draws."""
        return self.__dict__.setdefault("_draws", {})

    def arrived(self, t, r, indptr, indices, row_ids=None, col_ids=None):
        """Which messages of round ``r`` of iteration ``t`` arrive (see :meth:`Lossy.arrived`): those of the base
        network (its losses, where it reports arrivals) between two awake nodes; a self loop always. For the
        methods that follow messages one by one (running sums: :class:`~rowstoch_fast.RobustGradientPush`,
        :class:`~rowstoch_fast.RFAST`) a sleeping node's links are silent for the iteration: what it would send
        and what is sent to it waits on the links, and it takes its own step with what it holds."""
        if not self.reports_arrivals:
            raise ValueError(f"{self!r}: per-message arrivals need a static matrix under the sleep and losses (a "
                             "fixed set of links), not a schedule or another network")
        t, r = checked_round(t, r)
        if isinstance(self.base, MixingMatrix):
            arrived = np.ones(len(indices), dtype=bool)
        else:
            arrived = self.base.arrived(t, r, indptr, indices, row_ids=row_ids, col_ids=col_ids)
        rows = np.repeat(np.arange(len(indptr) - 1, dtype=np.int64), np.diff(indptr))
        gi = rows if row_ids is None else np.asarray(row_ids)[rows]
        gj = np.asarray(indices, dtype=np.int64) if col_ids is None else np.asarray(col_ids)[indices]
        awake = self.awake(t)
        return arrived & ((awake[gi] & awake[gj]) | (gi == gj))

    @property
    def reports_arrivals(self):
        """Over a static matrix, or over a layer that reports arrivals (:attr:`Network.reports_arrivals`: losses
        over one) and puts no node to sleep itself (the per-link passes read one awake mask, this layer's)."""
        base = self.base
        return isinstance(base, MixingMatrix) or (bool(getattr(base, "reports_arrivals", False))
                                                  and not hasattr(base, "awake"))

    def senders(self, t):
        """The nodes awake at ``t`` (a sleeping node sends nothing), and among them its base's senders."""
        below = super().senders(t)
        return self.awake(t) if below is None else self.awake(t) & below

    def awake(self, t):
        """Boolean mask of the nodes awake at iteration ``t`` (read-only; the last one is kept: an iteration's
        phases ask for it several times)."""
        t = check_int(t, "t", minimum=0, maximum=MAX_T)
        draws = self._shared_draws()
        cached = draws.get("awake")
        if cached is None or cached[0] != t:
            mask = self._draw(t)
            if not (isinstance(mask, np.ndarray) and mask.dtype == bool):
                raise TypeError(self._drawn_wrong(t, mask))
            if mask.shape != (self.n,):
                raise ValueError(self._drawn_wrong(t, mask))
            mask.flags.writeable = False
            cached = draws["awake"] = (t, mask)
        return cached[1]

    def _drawn_wrong(self, t, mask):
        """What is wrong with ``mask``, returned by ``_draw(t)`` (a subclass's own: helper 238's returned a list,
        which had ended in ``AttributeError: 'list' object has no attribute 'flags'``)."""
        got = (f"an array of {mask.dtype} and shape {mask.shape}" if isinstance(mask, np.ndarray)
               else f"a {type(mask).__name__}")
        return (f"{type(self).__qualname__}._draw({t}) must return a bool ndarray of shape ({self.n},) (which "
                f"nodes are awake), got {got}")

    def _draw(self, t):
        nodes = np.arange(self.n)
        if self.model == "cyclic":
            return (nodes - t) % self.period == 0
        if self.model == "markov":
            return self._markov(t)
        q = self.q if self.model == "bernoulli" else -np.expm1(-self.rate)  # (poisson: 1 - exp(-rate))
        draws = self._shared_draws()
        kept = self._ahead(t)
        if kept is not None:
            return kept
        last = draws.get("awake")
        if last is None or last[0] != t - 1:  # (out of order: this one alone)
            return uniform_hash(self.seed, 2**60 + t, nodes) < q
        steps = self._steps_ahead(t)
        masks = uniform_hash(self.seed, 2**60 + steps[:, None], nodes) < q
        draws["ahead"] = (t, masks)
        return masks[0].copy()

    def _ahead(self, t):
        """The activation of ``t`` where it was drawn ahead (a copy), else None."""
        ahead = self._shared_draws().get("ahead")  # (first iteration, the masks of it and the next ones)
        if ahead is not None and ahead[0] <= t < ahead[0] + len(ahead[1]):
            return ahead[1][t - ahead[0]].copy()
        return None

    def _steps_ahead(self, t):
        """The iterations drawn at once from ``t`` on (:data:`ACTIVATION_AHEAD`, at most 2^20 values)."""
        return np.arange(t, t + max(1, min(ACTIVATION_AHEAD, 2**20 // self.n)), dtype=np.int64)

    def _markov(self, t):
        """The chains' states at ``t`` (``_reference.awake_mask``): from the last state computed (or the stationary
        draw at 0) with the draws ``uniform_hash(seed, 2^60 + s, node)``, or, far ahead, read from ``t``
        backwards (:func:`~rowstoch_fast.network.base.jump_two_state`: about ``ln(n) / |p_wake - p_sleep|``
        iterations whatever ``t``). Asked in order (an optimizer's steps), the states of the next
        :data:`ACTIVATION_AHEAD` iterations are drawn at once and kept (:func:`~rowstoch_fast.network.base.
        two_state_path`: the same states as one iteration at a time). With ``p_sleep = p_wake`` every draw counts:
        more than ``MAX_ACTIVATION_STEPS`` node-iterations are refused, naming ``t`` and the bound."""
        draws = self._shared_draws()
        kept = self._ahead(t)
        if kept is not None:
            return kept
        last = draws.get("chain")
        if last is None or last[0] > t:
            start, state = 0, uniform_hash(self.seed, 2**62 + 1, np.arange(self.n)) < \
                self.p_wake / (self.p_sleep + self.p_wake)
        else:
            start, state = last
        nodes = np.arange(self.n)
        if t == start + 1:  # (in order: this iteration and the next ones at once)
            steps = self._steps_ahead(t)
            states = two_state_path(state, uniform_hash(self.seed, 2**60 + steps[:, None], nodes), self.p_sleep,
                                    self.p_wake)
            draws["ahead"], draws["chain"] = (t, states), (int(steps[-1]), states[-1])
            return states[0].copy()
        per_iteration = max(self.n, 16)  # (below 16 nodes an iteration costs as 16)
        if t - start > 4096:
            jumped = jump_two_state(state, start + 1, t, lambda s: uniform_hash(self.seed, 2**60 + s[:, None], nodes),
                                    self.p_sleep, self.p_wake, MAX_ACTIVATION_STEPS // per_iteration)
            if jumped is not None:
                draws["chain"] = (t, jumped)
                return jumped.copy()
        if (t - start) * per_iteration > MAX_ACTIVATION_STEPS:
            raise ValueError(f"t = {t}: with p_sleep = {self.p_sleep} and p_wake = {self.p_wake} the activation chains' "
                             f"states depend on every draw since iteration {start} (|p_wake - p_sleep| is the chance "
                             f"an iteration fixes a state); {t - start} iterations of {self.n} chains is more than "
                             f"{MAX_ACTIVATION_STEPS:.0e} steps (a minute of NumPy): ask for the iterations in order")
        block = max(1, 2**20 // self.n)  # iterations drawn at once (8 MB of draws)
        for first in range(start + 1, t + 1, block):
            steps = np.arange(first, min(first + block, t + 1), dtype=np.int64)
            u = uniform_hash(self.seed, 2**60 + steps[:, None], nodes)
            state = advance_two_state(state, u, self.p_sleep, self.p_wake)
        draws["chain"] = (t, state)
        return state.copy()

    def _entries(self, t, r):
        csr, weights = _base_entries(self.base, t, r)
        awake = self.awake(t)
        if awake.all():
            return csr, weights
        if self.stochastic == "doubly":  # (the undirected rule: a link used when both ends are awake)
            rows = np.repeat(np.arange(self.n, dtype=np.int64), np.diff(csr.indptr))
            gone = ~(awake[rows] & awake[csr.indices]) & (rows != csr.indices)
            return _undirected_entries(csr, weights, gone, asleep=~awake)
        rows = np.repeat(np.arange(self.n, dtype=np.int64), np.diff(csr.indptr))
        cols = csr.indices
        w = (csr.data if weights is None else weights).copy()
        if self.stochastic == "row":
            w[~awake[cols] & (rows != cols)] = 0.0  # a sleeping sender's message does not arrive
            asleep = ~awake[rows]
            w[asleep] = np.where(rows[asleep] == cols[asleep], 1.0, 0.0)  # a sleeping receiver keeps its x
            return _keep_empty_rows(csr, w.astype(csr.dtype))  # (also one without a self loop)
        w[~awake[rows] & (rows != cols)] = 0.0  # nothing reaches a sleeping receiver
        asleep = ~awake[cols]
        w[asleep] = np.where(rows[asleep] == cols[asleep], 1.0, 0.0)  # a sleeping sender keeps its mass
        has_loop = np.zeros(self.n, dtype=bool)
        has_loop[rows[rows == cols]] = True
        missing = np.flatnonzero(~awake & ~has_loop)
        if missing.size:  # a sleeping sender without a self loop gets one (weight 1: it keeps its mass)
            return _with_diagonal(csr, w.astype(csr.dtype), missing)
        return csr, w.astype(csr.dtype)

    def matrix(self, t, r=0):
        t, r = checked_round(t, r)
        return _materialise(self, *self._entries(t, r), t, r)

    def __repr__(self):
        args = ", ".join(f"{k}={per_node_text(v)}" for k, v in self._parameters().items() if k != "model")
        model = "" if self.model == "bernoulli" else f", model={self.model!r}"
        return f"Sleepy({self.base!r}, {args}, seed={self.seed}{model})"

    # ---- its options (rowstoch run / compare, [communication] in an experiment file)
    listed = 20
    SEED_FLAGS = ("--awake", "--activation")
    DRAWN = "sleep"
    OPTIONS = (
        Option("awake", float, 1.0, "probability that a node is awake in an iteration (a sleeping node neither "
                                    "sends nor receives, and takes its own local step); one per node: FIRST..LAST "
                                    "or @FILE",
               cli_type=node_option("--awake"), toml_kind="float|nodes"),
        Option("activation", str, "bernoulli",
               "who is awake per iteration (network.Sleepy): bernoulli (--awake), markov (a chain per node: "
               "--p-sleep, --p-wake), poisson (clocks of --rate ticks per iteration), cyclic (--period groups in "
               "turn; period 1 only: more groups never hear from each other)", choices=MODELS),
        Option("p_sleep", float, None, "markov: P(awake -> asleep) per iteration"),
        Option("p_wake", float, None, "markov: P(asleep -> awake) per iteration"),
        Option("rate", float, None, "poisson: each node's ticks per iteration (one per node: FIRST..LAST or @FILE)",
               cli_type=node_option("--rate"), toml_kind="float|nodes"),
        Option("period", int, None, "cyclic: the number of groups", cli_type=positive_int),
    )
    _MODEL_OPTIONS = ("p_sleep", "p_wake", "rate", "period")  # (bernoulli's q is --awake)

    @classmethod
    def examples(cls, base):
        return {"sleepy": cls(base, 0.7, seed=3), "markov": cls(base, seed=4, model="markov", p_sleep=0.3, p_wake=0.5),
                "poisson": cls(base, seed=5, model="poisson", rate=0.8),
                "per-node-activation": cls(base, np.linspace(0.5, 1.0, base.n), seed=6)}  # (heterogeneous devices)

    @classmethod
    def options_in_use(cls, ns):
        return ns.activation != "bernoulli" or ns.awake != 1.0

    @classmethod
    def options_drawn(cls, ns):
        return cls.DRAWN if cls.options_in_use(ns) and ns.activation != "cyclic" else None  # (cyclic: no draw)

    @classmethod
    def check_options(cls, ns, d=None):
        ns.awake, ns.rate = node_spec(ns.awake, "--awake"), node_spec(ns.rate, "--rate")
        if not (0.0 < ends(ns.awake)[0] and ends(ns.awake)[1] <= 1.0):
            raise UsageError(f"--awake must be in (0, 1], got {refused(ns.awake, lambda v: (v > 0) & (v <= 1))}")
        flags = {opt.name: opt.flag for opt in Sleepy.OPTIONS}  # (as declared)
        for name in cls._MODEL_OPTIONS:
            option, value = flags[name], getattr(ns, name)
            if (value is None) == (name in cls._TAKES[ns.activation]):
                owner = next(model for model, takes in cls._TAKES.items() if name in takes)
                raise UsageError(f"{option} goes with --activation {owner}" if value is not None
                                 else f"--activation {ns.activation} needs {option}")
            if name.startswith("p_") and value is not None and not 0.0 < value <= 1.0:
                raise UsageError(f"{option} must be in (0, 1], got {value}")
            if name == "rate" and value is not None and not (np.isfinite(ends(value)).all() and ends(value)[0] > 0):
                raise UsageError(f"--rate must be a finite number > 0, got {refused(value, lambda v: v > 0)}")
        if ns.activation != "bernoulli" and ns.awake != 1.0:
            raise UsageError(f"--awake goes with --activation bernoulli, not {ns.activation}")

    @classmethod
    def from_options(cls, net, ns, seed):
        if ns.activation == "bernoulli":
            return cls(net, node_values(node_spec(ns.awake, "--awake"), net.n, "--awake"), seed=seed)
        kw = {k: getattr(ns, k) for k in cls._MODEL_OPTIONS if getattr(ns, k) is not None}
        if "rate" in kw:
            kw["rate"] = node_values(node_spec(kw["rate"], "--rate"), net.n, "--rate")
        return cls(net, seed=seed, model=ns.activation, **kw)

    @classmethod
    def options_words(cls, ns):
        if ns.activation != "bernoulli":
            extra = ", ".join(f"{k} {getattr(ns, k)}" for k in cls._TAKES[ns.activation])
            return f"{ns.activation} activation ({extra})"
        return f"nodes awake with probability {shown(ns.awake)}" if ns.awake != 1.0 else None

    @classmethod
    def options_record(cls, ns):
        out = {"awake": recorded(ns.awake)}
        if ns.activation != "bernoulli":  # (added later: the others' checkpoints keep their keys)
            out.update({k: recorded(getattr(ns, k)) for k in ("activation", *cls._MODEL_OPTIONS)})
        return out
