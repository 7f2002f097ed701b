"""Messages lost on the links: :class:`Lossy` (independent, or bursty: a Gilbert-Elliott chain per link).
"""

from __future__ import annotations

import math
import threading

import numpy as np

from .._checks import check_int, check_positive_float, did_you_mean, MAX_KEY, per_node_text, per_node_values
from ..errors import UsageError
from ..mixing import MixingMatrix
from ._rounds import _base_entries, _base_matrix, _keep_empty_rows, _materialise, _undirected_entries
from .base import _own_draws, _under_messages, as_network, checked_round, MAX_CHAIN_STEPS, Network
from .options import (ends, node_spec, node_values, NODE_VALUES_HELP, NodeValues, Option, recorded, refused,
                      setting_key, shown, split_items)
from .schedule import Schedule


class Lossy(Network):
    """Each message (edge ``j -> i``, ``j != i``) of each gossip round is lost independently.

    Parameters
    ----------
    A : MixingMatrix or network
        The network whose messages get lost.
    p : float, or an array of n of them
        Loss probability in [0, 1) (``model="bernoulli"``), or the loss
        probability in the bad state, in [0, 1] (``"gilbert-elliott"``; the
        classic channel is ``p = 1``). An array gives each node its own, the
        probability that a message it sends is lost (heterogeneous devices, as
        decent-bench's per-agent drop schemes: the sender's); equal values are
        the single number's draws, bit for bit.
    seed : int
        Seed of the counter-based draws.
    model : {"bernoulli", "gilbert-elliott"}
        Independent losses, or bursty ones: each edge is a two-state Markov
        chain over the iterations (good -> bad with ``p_bad``, bad -> good
        with ``p_recover``, from its stationary distribution at iteration 0),
        losing each round's message with probability ``p`` in the bad state.
    p_bad, p_recover : float
        The chain's transition probabilities (``"gilbert-elliott"`` only).
    """

    layer = "lossy"
    order = 10
    acts_on = "links"
    keeps_symmetry = True
    loses = "loses messages"

    def __init__(self, A, p, seed=0, model="bernoulli", p_bad=None, p_recover=None):
        self.base = _under_messages(as_network(A), "Lossy")
        self.n, self.stochastic = self.base.n, self.base.stochastic
        if not isinstance(model, str) or model not in ("bernoulli", "gilbert-elliott"):  # (first: p's bounds are
            # the model's, and a misspelt one had blamed p)
            raise ValueError(f"model must be 'bernoulli' or 'gilbert-elliott', got {model!r}"
                             f"{did_you_mean(model, ('bernoulli', 'gilbert-elliott'))}")
        top = 1.0 if model == "gilbert-elliott" else np.nextafter(1.0, 0.0)
        each = per_node_values(p, "p", self.n, lambda v: (v >= 0) & (v <= top),
                               "in [0, 1) (gilbert-elliott: [0, 1], the loss in the bad state)")
        self.p = each if each is not None else check_positive_float(p, "p", allow_zero=True)
        if each is None and self.p >= 1 and not (model == "gilbert-elliott" and self.p == 1):
            raise ValueError(f"p must be in [0, 1) (gilbert-elliott: [0, 1], the loss in the bad state), got {self.p}")
        self.seed = check_int(seed, "seed", minimum=0, maximum=MAX_KEY)
        self.model = model
        if model == "gilbert-elliott":
            if p_bad is None or p_recover is None:
                raise ValueError("model='gilbert-elliott' needs p_bad and p_recover")
            self.p_bad = check_positive_float(p_bad, "p_bad")
            self.p_recover = check_positive_float(p_recover, "p_recover")
            if self.p_bad > 1 or self.p_recover > 1:
                raise ValueError("p_bad and p_recover must be probabilities")
        elif p_bad is not None or p_recover is not None:
            raise ValueError("p_bad and p_recover are parameters of model='gilbert-elliott'")
        _own_draws(self)

    def link_draws(self, t, r):
        """``(seed, t, r, p)`` where a per-link sweep may draw the round's losses itself with the hash of
        :meth:`arrived` (Bernoulli losses right over a static matrix, one ``p``: the CPU's compact running sums,
        the device's ``link_arrivals``), else None (the network draws them: :meth:`arrived`)."""
        if type(self) is not Lossy or self.model != "bernoulli" or not self.reports_arrivals or self.per_node:
            return None
        if self.seed >= 2**63 or t >= 2**63 or r >= 2**63:  # (the sweeps take them as int64)
            return None
        return (self.seed, t, r, self.p)

    def arrived(self, t, r, indptr, indices, row_ids=None, col_ids=None):
        """Which messages of round ``r`` of iteration ``t`` arrive, for a CSR share of the static matrix under
        this network (one bool per stored entry ``(i, j)``, the message ``j -> i``; a self loop always
        arrives): the draws the losses themselves use (:meth:`matrix`, the compiled passes, every backend),
        hashed on the global node ids ``row_ids[i]`` / ``col_ids[j]`` of an MPI rank's share. What the
        running-sum algorithms (:class:`~rowstoch_fast.RobustGradientPush`) deliver by."""
        if not self.reports_arrivals:
            raise ValueError(f"{self!r}: per-message arrivals need a static matrix under the losses (a fixed set "
                             "of links), not a schedule or another network")
        t, r = checked_round(t, r)
        return ~self._lost_entries(t, r, indptr, indices, row_ids, col_ids)

    @property
    def reports_arrivals(self):
        """Over a static matrix (a fixed set of links: :meth:`arrived` draws its entries' losses); not over a
        schedule or another layer."""
        return isinstance(self.base, MixingMatrix)

    def _lost_entries(self, t, r, indptr, indices, row_ids=None, col_ids=None):
        """Which stored entries' messages are lost in round ``r`` of iteration ``t`` (never a self loop): the
        compiled draws (``_core.lost_links``, the hash of :func:`uniform_hash` in C++; the NumPy transcription is
        ``_reference.lost_links``)."""
        from .. import _core

        bad = self.bad_states(indptr, indices, t, row_ids=row_ids, col_ids=col_ids) \
            if self.model == "gilbert-elliott" else None
        ids = {} if row_ids is None else {"row_ids": np.ascontiguousarray(row_ids, dtype=np.int64),
                                          "col_ids": np.ascontiguousarray(col_ids, dtype=np.int64)}
        return _core.lost_links(indptr, indices, self.seed, t, r, self.p, bad=bad, **ids).view(bool)

    def _lost(self, csr, t, r):
        return self._lost_entries(t, r, csr.indptr, csr.indices)

    def lost_keys(self, t, r):
        """:meth:`Network.lost_keys`: the messages ``j -> i`` this layer's draws of round ``r`` of iteration ``t``
        drop on the links of its base's round, with those its base's own losses drop (each once)."""
        inner = super().lost_keys(t, r)
        if self.lossless:
            return inner
        csr, _ = _base_entries(self.base, t, r)
        lost = self._lost(csr, t, r)
        rows = np.repeat(np.arange(csr.shape[0], dtype=np.int64), np.diff(csr.indptr))
        keys = rows[lost] * np.int64(self.n) + np.asarray(csr.indices, dtype=np.int64)[lost]
        return np.union1d(keys, inner)

    def _lost_back(self, csr, t, r):
        """Which stored entries' links lost their other message (``i -> j`` of the entry ``(i, j)``) in round
        ``r`` of iteration ``t``: the same draws (and chains), receiver and sender swapped."""
        return self._lost_entries(t, r, *self._back_links(csr.indptr, csr.indices))

    def _back_links(self, indptr, indices, row_ids=None, col_ids=None):
        """The other message of each stored entry of a CSR share (``i -> j`` of the entry ``(i, j)``, global ids
        ``row_ids`` / ``col_ids``) as links of their own, one row per entry: ``(indptr, indices, row_ids,
        col_ids)`` to draw or advance them by. Kept per share (with the share's arrays, so that no other array
        takes their ids), so that their Gilbert-Elliott chains are kept between calls like the others'."""
        cache = self.__dict__.setdefault("_back", {})
        key = (id(indptr), id(indices), id(row_ids), id(col_ids))
        if key not in cache:
            if len(cache) > 16:
                cache.clear()
            every = np.arange(len(indices) + 1, dtype=np.int64)
            rows = np.repeat(np.arange(len(indptr) - 1, dtype=np.int64), np.diff(indptr))
            cols = np.asarray(indices, dtype=np.int64)
            receivers = cols if col_ids is None else np.asarray(col_ids, dtype=np.int64)[cols]
            senders = rows if row_ids is None else np.asarray(row_ids, dtype=np.int64)[rows]
            cache[key] = ((every, every[:-1].copy(), receivers, senders), (indptr, indices, row_ids, col_ids))
        return cache[key][0]

    def gates(self, indptr, indices, t, row_ids=None, col_ids=None, symmetric=False):
        """The Gilbert-Elliott gates of a round's compiled pass (``bad=`` of ``_core.mix_lossy``): :meth:`bad_states`
        (bit 0), and under the undirected rule (``symmetric``) the states of each entry's other message (bit 1)."""
        bad = self.bad_states(indptr, indices, t, row_ids=row_ids, col_ids=col_ids)
        if not symmetric:
            return bad
        every, index, receivers, senders = self._back_links(indptr, indices, row_ids, col_ids)
        back = self.bad_states(every, index, t, row_ids=receivers, col_ids=senders)
        return bad | (back << 1)

    @property
    def static(self):
        base = self.base if isinstance(self.base, MixingMatrix) else self.base.static
        return base if self.lossless and self.model == "bernoulli" else None

    @property
    def lossless(self):
        """Whether no message can be lost (``p`` is 0, for every node)."""
        return bool(np.all(self.p == 0))

    @property
    def per_node(self):
        """Whether ``p`` is one per node (an array; every backend's compiled pass takes it: the CPU's, MPI's and the
        CuPy backend's kernels)."""
        return np.ndim(self.p) != 0

    def plan(self, t):
        if not isinstance(self.base, (MixingMatrix, Schedule)):
            return None
        base = self.base
        chain = self if self.model == "gilbert-elliott" else None
        return (lambda r: _base_matrix(base, t, r)), self.seed, self.p, None, chain

    def chain_states(self, owner, size, t, advance, zeros=np.zeros, scans_back=False):
        """The Gilbert-Elliott state (uint8, 1 = bad; ``size`` of them) of the stored entries of ``owner`` (a
        CSR share, host or device) at iteration ``t``, kept between calls: ``advance(bad, start, t, init)``
        moves them from iteration ``start - 1`` to ``t`` (``init``: from the stationary draw, ``start = 0``),
        from the last call on, or from iteration 0 the first time and when ``t`` goes back. The chains'
        definition: ``_reference.gilbert_elliott_states``. ``scans_back``: ``advance`` reads the transitions from
        ``t`` backwards and stops at each entry's last constant one (``_core.ge_advance``: about ``1 / |p_bad -
        p_recover|`` steps an entry); else it walks every iteration. More than ``MAX_CHAIN_STEPS`` steps are
        refused, naming ``t`` and the bound."""
        chains = self.__dict__.setdefault("_chains", {})
        # one copy per thread: two optimizers sharing this network in two threads advanced one array in place,
        # without the GIL, while the other read it (their iterates differed from sequential runs)
        key = (id(owner), threading.get_ident())
        last, bad, _ = chains.get(key, (None, None, None))
        steps = t + 1 if bad is None or last > t else t - last
        gap = abs(self.p_bad - self.p_recover) if scans_back else 0.0
        walked = steps if gap == 0 else min(steps, 8.0 / gap)  # (per entry: 1 / gap expected)
        if walked * max(size, 1) > MAX_CHAIN_STEPS:
            why = "p_bad = p_recover: no transition fixes a state, every one counts" if scans_back else \
                "one iteration at a time"
            raise ValueError(f"t = {t}: the Gilbert-Elliott chains advance from their last use "
                             f"({'the start' if bad is None or last > t else f'iteration {last}'}) {why}; {steps} "
                             f"iterations of {size} chains is {steps * size:.2e} steps, more than "
                             f"{MAX_CHAIN_STEPS:.0e} (a minute): ask for the iterations in order")
        if bad is None or last > t:
            bad = zeros(size, dtype=np.uint8)
            advance(bad, 0, t, True)
        elif last < t:
            advance(bad, last + 1, t, False)
        chains[key] = (t, bad, owner)  # (owner kept alive: its id stays unique)
        return bad

    def bad_states(self, indptr, indices, t, row_ids=None, col_ids=None):
        """:meth:`chain_states` of a host CSR share, advanced by ``_core.ge_advance`` (``row_ids`` /
        ``col_ids``: the global node ids of an MPI rank's share)."""
        from .. import _core

        def advance(bad, start, stop, init):
            _core.ge_advance(indptr, indices, bad, self.seed, start, stop, self.p_bad, self.p_recover, init=init,
                             row_ids=row_ids, col_ids=col_ids)
        return self.chain_states(indices, len(indices), t, advance, scans_back=True)

    def map(self, f):
        base = f(self.base) if isinstance(self.base, MixingMatrix) else self.base.map(f)
        return Lossy(base, self.p, seed=self.seed, model=self.model, **self._model_parameters())

    @property
    def draws(self):
        return not self.lossless

    def _twin(self, base, seed):
        return type(self)(base, self.p, seed=seed, model=self.model, **self._model_parameters())

    def _model_parameters(self):
        return {"p_bad": self.p_bad, "p_recover": self.p_recover} if self.model == "gilbert-elliott" else {}

    def _entries(self, t, r):
        csr, weights = _base_entries(self.base, t, r)
        if self.lossless:
            return csr, weights
        lost = self._lost(csr, t, r)
        if self.stochastic == "doubly":  # (the undirected rule: a link used when both its messages arrived)
            return _undirected_entries(csr, weights, lost | self._lost_back(csr, t, r))
        if not lost.any():
            return csr, weights
        w = np.where(lost, 0.0, csr.data if weights is None else weights).astype(csr.dtype)
        return _keep_empty_rows(csr, w) if self.stochastic == "row" else (csr, w)

    def matrix(self, t, r=0):
        t, r = checked_round(t, r)
        return _materialise(self, *self._entries(t, r), t, r)

    def __repr__(self):
        extra = f", p_bad={self.p_bad}, p_recover={self.p_recover}" if self.model == "gilbert-elliott" else ""
        return f"Lossy({self.base!r}, p={per_node_text(self.p)}, seed={self.seed}, model={self.model!r}{extra})"

    # ---- its options (rowstoch run / compare, [communication] in an experiment file)
    MODELS = ("bernoulli", "gilbert-elliott")
    listed = 10
    SEED_FLAGS = ("--loss",)
    DRAWN = "losses"
    OPTIONS = (
        Option("loss", "float|list", "0",
               "probability that a message is lost (row-stochastic receivers renormalise over what arrived; "
               "push-based senders lose the mass); with --loss-model gilbert-elliott: the loss probability in the "
               "bad state; compare: several, comma-separated (one setting each, a column of the table); one per "
               "node (the sender's): FIRST..LAST or @FILE", metavar="P[,...]",
               item_help="a list: one setting each; an item is " + NODE_VALUES_HELP),
        Option("loss_model", str, "bernoulli", "independent losses, or bursty ones (a good/bad chain per link)",
               choices=MODELS),
        Option("p_bad", float, None, "gilbert-elliott: P(good -> bad) per iteration"),
        Option("p_recover", float, None, "gilbert-elliott: P(bad -> good) per iteration"),
    )

    @classmethod
    def examples(cls, base):
        return {"lossy": cls(base, 0.3, seed=1),
                "bursty": cls(base, 0.9, seed=2, model="gilbert-elliott", p_bad=0.2, p_recover=0.3),
                "per-node-loss": cls(base, np.linspace(0.0, 0.6, base.n), seed=7)}  # (heterogeneous devices: the sender's)

    @classmethod
    def options_in_use(cls, ns):
        return bool(ns.loss) or ns.loss_model != "bernoulli"

    @classmethod
    def options_seeded(cls, ns):
        return ns.loss != 0

    @classmethod
    def check_options(cls, ns, d=None):
        ns.loss = node_spec(ns.loss, "--loss")
        low, high = ends(ns.loss)
        bursty = ns.loss_model == "gilbert-elliott"
        if not (0.0 <= low and (high < 1.0 or (high == 1.0 and bursty))):
            shown_value = refused(ns.loss, lambda v: (v >= 0) & ((v < 1) | ((v == 1) & bursty)))
            raise UsageError(f"--loss must be in [0, 1) (gilbert-elliott: [0, 1]), got {shown_value}")
        if bursty != (ns.p_bad is not None and ns.p_recover is not None) or (not bursty and (ns.p_bad or ns.p_recover)):
            raise UsageError("--loss-model gilbert-elliott needs --p-bad and --p-recover (and they go with it only)")
        for name in ("p_bad", "p_recover"):
            value = getattr(ns, name)
            if value is not None and not 0.0 < value <= 1.0:
                raise UsageError(f"--{name.replace('_', '-')} must be in (0, 1], got {value}")

    @classmethod
    def from_options(cls, net, ns, seed):
        kw = {"p_bad": ns.p_bad, "p_recover": ns.p_recover} if ns.loss_model == "gilbert-elliott" else {}
        return cls(net, node_values(node_spec(ns.loss, "--loss"), net.n, "--loss"), seed=seed, model=ns.loss_model,
                   **kw)

    @classmethod
    def options_words(cls, ns):
        if ns.loss_model == "gilbert-elliott":
            return (f"bursty losses ({shown(ns.loss)} in the bad state, p_bad {ns.p_bad:g}, p_recover "
                    f"{ns.p_recover:g})")
        if isinstance(ns.loss, NodeValues):
            return f"messages lost with probability {ns.loss} per node (the sender's)"
        return f"{100 * ns.loss:.6g}% of messages lost" if ns.loss else None  # (it had read "0.1 of messages lost")

    @classmethod
    def options_record(cls, ns):
        return {"loss": recorded(ns.loss), "loss_model": ns.loss_model, "p_bad": ns.p_bad, "p_recover": ns.p_recover}

    @classmethod
    def sweep(cls, ns, given):
        """``--loss`` as one setting per comma-separated rate (each a number, or one per node: ``FIRST..LAST``,
        ``@FILE``)."""
        values = []
        for part in split_items(ns.loss):
            try:
                values.append(node_spec(part, "--loss"))
            except UsageError:
                try:
                    number = float(part)
                except ValueError:
                    number = 0.0
                if part.startswith("@") or ".." in part or not math.isfinite(number):  # (what is wrong with it)
                    raise
                raise UsageError(f"--loss must be a number or comma-separated numbers (an item may give one per "
                                 f"node: FIRST..LAST or @FILE), got {ns.loss!r}") from None
        if len(values) != len({setting_key(v) for v in values}):
            raise UsageError(f"--loss {ns.loss!r} names a rate twice")
        return [{"loss": v} for v in values]

    @classmethod
    def sweep_label(cls, ns):
        return f"loss {shown(ns.loss)}"
