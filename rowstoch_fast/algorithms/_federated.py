r"""Federated methods: a server and ``n`` clients on the engine of the decentralized ones.

Every client is a node (a row of ``x``); the server is not a node: its model ``s`` is kept as a state block
(replicated on every row, so that it lives where the clients' rows live: one process, a GPU, or the MPI ranks).
One iteration is one local gradient step of the participating clients, a round is ``K`` of them (as the
local-update methods count: :class:`~._local.LocalSteps`):

- at a round's first step every client's row holds the server model ``s``;
- the clients chosen for the round (``participation``: a fraction of the ``n``, ``floor(participation n)`` of
  them and at least one, chosen by the rule ``selection`` below from a counter-based hash of ``(seed, round)``,
  the same on every process and backend) take their local steps :math:`y \leftarrow y - \mathrm{lr}\, d_i(y)`,
  the others keep :math:`s` (they compute nothing: their rows' gradients are evaluated, as the oracle gives every
  node's, and not used; a NaN among them is still the oracle's error where the gradients are checked,
  ``check_finite``, and never reaches the server where they are not);
- at the round's last step the chosen clients upload, the server updates ``s`` (a method's own rule), and every
  row gets the new ``s`` (the download).

So ``x`` at the end of every round is the server model on every row. The harness measures the server's model
(:attr:`~rowstoch_fast.algorithms.Optimizer.output`), at a round's end and inside a round alike (a record inside a
round had measured the chosen clients' half-done local models, helper 273). The primal-dual methods
(:class:`~rowstoch_fast.FedPD`, :class:`~rowstoch_fast.FedLT`: ``download_model = False``) differ: each client keeps
its own model from round to round (a row of ``x``, where its next local steps start; every row starts at its row of
``x0``), the server's broadcast goes into the state block ``"server"`` alone, and the harness measures it, the model
the method hands over (the clients' mean, which no one holds, had been measured: under partial participation
FedPD's was 15-100x closer to x* than its server's model, helper 273).

The selection rules (``selection``; each draws :math:`m` = ``floor(participation n)`` clients a round, all of them
where :math:`m = n`):

- ``"uniform"``: uniformly without replacement (the ``m`` smallest of ``n`` hashes of ``(seed, round, i)``);
  McMahan et al. 2017's rule.
- ``"size"``: with probability proportional to ``client_weights`` (e.g. each client's number of samples),
  without replacement, one after the other (successive sampling, as ``numpy.random.choice(replace=False, p=w /
  sum(w))`` and decent-bench 0.3.0's ``DataSizeSelection``): the :math:`m` smallest of :math:`E_i / w_i` with
  :math:`E_i = -\log(1 - u_i)` the exponential variates of the hashes :math:`u_i` (P. S. Efraimidis and P. G.
  Spirakis, "Weighted random sampling with a reservoir", Information Processing Letters 97, 2006). FedProx (Li,
  Sahu, Zaheer et al. 2020) and Li, Huang, Yang, Wang & Zhang ("On the convergence of FedAvg on non-IID data", ICLR
  2020, Scheme I) sample by :math:`p_i = n_i / N` with replacement: then the server's plain average is unbiased for
  :math:`\sum_i p_i f_i`; drawn without replacement, as here, it is where :math:`m = 1`.
- ``"fair"``: the ``m`` clients chosen least often so far, ties to the one chosen least recently, then to a fixed
  order (a permutation of the clients drawn from ``seed``): a deterministic round robin, round :math:`r` taking the
  clients at positions :math:`r m, \dots, r m + m - 1` (mod :math:`n`) of the order, so that after any number of
  rounds the counts of two clients differ by at most one (decent-bench's ``FairSelection``, a count-based
  simplification of the fairness-aware selection of Y. Shi, Z. Liu, Z. Shi and H. Yu, ICME 2023; its ties go by the
  clients' listing order, which on a label-sorted split would tie the turns to the labels).

A "high loss" rule (Power-of-Choice: Y. J. Cho, J. Wang and G. Joshi, "Client selection in federated learning:
convergence analysis and power-of-choice selection strategies", arXiv:2010.01243, 2020: sample :math:`d \ge m`
candidates, take the :math:`m` whose local loss at :math:`s` is highest) is not offered: these methods see the
clients' gradients only (the oracle ``grad_fn(X)``, a batch of them with the ask / tell interface), never their
losses, and a choice that depends on the data would need them before the round's first step (an extra evaluation
per candidate and round, which the oracle does not offer), a gather of the ``n`` values across the MPI ranks each
round, and a record of past choices to resume and to count :meth:`samples_drawn` (every rule here is a function of
``(seed, round)``).

What the harness can record of them (:meth:`Federated.participation_counts`, :meth:`Federated.client_drift`, and
the metrics ``client_drift``, ``participation_fairness`` and ``node_<statistic>_participation`` of
:mod:`rowstoch_fast.user_metrics`): how often each client was chosen in the rounds done, Jain's fairness index of
those counts, and the client drift, the mean distance :math:`\|y_i - s\|` of the chosen clients' local models at
the end of a round's local steps from the server model :math:`s` they were sent (FedPD's and FedLT's clients
start their steps from their own models: their drift is from the server's model all the same, and so counts how
far apart the clients' models are too, helper 273).

The choice of clients is keyed on the method's ``seed``, not on the replica or the run's seed: the replicas of one
optimizer (``rf.run``'s repetitions) share it. ``rowstoch compare`` runs repetition ``r`` of a method that draws
(:meth:`draws_for`: ``participation`` below 1) one at a time on ``seed + r``, as it runs it on a network redrawn by
``r``, and each stream of its tuner on a seed of its own (one run a stream), so that the repetitions' spread covers
the clients' draws (they had all drawn the same clients: the table said ``+- 0`` where the draw moved the final value
6x, helper 266). A round counts as one communication round; :meth:`traffic` counts an upload and a download per
chosen client (of the blocks a method sends).

The client selection is the method's own (a hyperparameter), not a network layer: a federated method has no
mixing matrix (:attr:`matrices` is empty, as for the centralized baseline), so the network models of
``rowstoch compare`` (losses, sleep, compression, delays) do not apply to it.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from .._checks import check_choice, check_int, check_positive_float
from .._hashing import uniform_hash
from ._local import DEFAULT_LOCAL_STEPS, LocalSteps

__all__ = ["Federated", "SELECTIONS", "FEDERATED_HYPER"]

#: The last key of the selection's hashes (the networks' draws have node ids there, below 2^62; ProxSkip's coins
#: 2^62 + 1).
_SELECTION_KEY = 2**62 + 2
#: The last key of the fixed order of the ``"fair"`` rule's ties.
_ORDER_KEY = 2**62 + 3
#: The client-selection rules (the module's docstring).
SELECTIONS = ("uniform", "size", "fair")
#: The hyperparameters of every federated method, first in its ``hyper`` (``seed`` comes last).
FEDERATED_HYPER = ("n", "lr", "local_steps", "participation", "client_steps", "selection", "client_weights")


class Federated(LocalSteps):
    """Mixed into a federated method (before :class:`~rowstoch_fast.algorithms.Optimizer`): clients, a server,
    local steps, partial participation.

    A method defines :meth:`_aggregate` (the server's update at a round's end) and, where its clients do not take
    plain gradient steps, :meth:`_direction` (their local step), and its state blocks beyond ``("x", "server")`` (client blocks, changed by the chosen clients
    at a round's end, and server blocks, replicated on every row); every block it does not write in a step is
    carried over.
    """

    matrices = ()
    federated = True
    in_paper_preset = False
    in_robustness = False
    #: Blocks a chosen client sends the server at a round's end, and the server every chosen client at its start
    #: (:meth:`traffic`): the model, or the model and a control variate (SCAFFOLD).
    upload_blocks = 1
    download_blocks = 1
    #: Whether every row of ``x`` gets the server model at a round's end (and a chosen client starts its local
    #: steps from it); False: each client keeps its own model (FedPD, FedLT), the server's is a state block only.
    download_model = True
    #: The block the harness measures (:attr:`~rowstoch_fast.algorithms.Optimizer.output`): the server's model on
    #: every row, inside a round too (where the rows of ``x`` are the chosen clients' half-done local models).
    output = "server"
    #: (:attr:`~rowstoch_fast.algorithms.Optimizer.goal_conditions`) Steps of unequal length (``client_steps``)
    #: weigh the clients by them, and clients chosen by size (``selection="size"``, drawn without replacement) by
    #: their inclusion rates: the local steps' average then moves towards another point, O(1) away whatever the
    #: rate (helper 273: FedAvg 1.15 from x* at lr 0.01 and 0.001 alike); FedNova corrects the first, the exact
    #: methods both.
    goal_conditions = " (equal local steps, uniform or fair selection; another point otherwise)"

    @classmethod
    def draws_for(cls, options=None):
        """Whether its clients are drawn (:meth:`~rowstoch_fast.algorithms.Optimizer.draws_for`): ``participation``
        below 1 (every selection rule, the fair one's order too, follows ``seed``)."""
        return float((options or {}).get("participation", 1.0)) < 1.0

    def _check_federated(self, n, lr, local_steps=DEFAULT_LOCAL_STEPS, participation=1.0, client_steps=None,
                         selection="uniform", client_weights=None, seed=0):
        """Check the hyperparameters every federated method has, set them, and return them as ``state_dict``
        saves them."""
        n = check_int(n, "n", minimum=1)
        self.lr = self._check_lr(lr)
        self.local_steps = self._check_local_steps(local_steps)
        p = check_positive_float(participation, "participation")
        if p > 1.0:
            raise ValueError(f"participation must be a fraction of the clients in (0, 1], got {participation!r}")
        self.participation = p
        self.clients_per_round = self.clients_for(n, p)
        self.seed = check_int(seed, "seed", minimum=0, maximum=2**63 - 1)
        self.client_steps = self._check_client_steps(client_steps, n)
        check_choice(selection, "selection", SELECTIONS)
        self.selection = selection
        self.client_weights = self._check_client_weights(client_weights, n, selection)
        self._selection = (-1, None, None)  # (round, this process's rows' 0/1 vector, the mask of all clients)
        self._drift = None  # the last round's client drift, one per replica (a backend vector; None before it)
        return {"n": n, "lr": self.lr, "local_steps": self.local_steps, "participation": self.participation,
                "client_steps": None if self.client_steps is None else self.client_steps.tolist(),
                "selection": self.selection,
                "client_weights": None if self.client_weights is None else self.client_weights.tolist(),
                "seed": self.seed}

    @staticmethod
    def _check_client_weights(client_weights, n, selection):
        """None, or ``n`` positive finite numbers (``selection="size"``: each client's weight, e.g. its sample
        count; None there: equal weights)."""
        if client_weights is None:
            return None
        if selection != "size":
            raise ValueError(f'client_weights are the weights of selection="size", not of selection={selection!r}')
        try:
            raw = np.asarray(client_weights)
            w = None if raw.dtype.kind == "c" else np.asarray(raw, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"client_weights must be {n} positive numbers (one per client), got "
                             f"{client_weights!r}") from None
        numbers_only = raw.dtype.kind in "iuf" or raw.dtype.kind == "O" and all(
            isinstance(v, numbers.Number) and not isinstance(v, (bool, complex)) for v in raw.ravel())  # (Fractions,
        # Decimals)
        if w is None or not numbers_only:  # (their imaginary parts had been dropped with a ComplexWarning alone,
            # helper 204; strings were read as numbers, and True as 1, helper 273)
            raise TypeError(f"client_weights must be {n} positive real numbers (one per client), got "
                            f"{'complex ' if raw.dtype.kind == 'c' else ''}dtype {raw.dtype}")
        if w.shape != (n,):
            raise ValueError(f"client_weights must be {n} positive finite numbers (one per client), got shape "
                             f"{w.shape}")
        bad = np.flatnonzero(~(np.isfinite(w) & (w > 0)))
        if bad.size:
            raise ValueError(f"client_weights must be positive and finite, got client_weights[{bad[0]}] = "
                             f"{float(w[bad[0]])!r}")
        return w

    def _check_client_steps(self, client_steps, n):
        """None (every client takes ``K`` steps a round), or the steps ``tau_i`` of each client: ``n`` integers in
        ``1 .. K`` (heterogeneous devices; a client idles for the rest of the round)."""
        if client_steps is None:
            return None
        if isinstance(client_steps, str):  # (helper 273: "1..4", the per-node form of the network options, had been
            # answered "got shape ()")
            raise ValueError(f"client_steps must be {n} integers (one per client: a sequence, client_steps=1,2,... "
                             f"on the command line), got the string {client_steps!r} (the FIRST..LAST and @FILE "
                             f"forms of the network options are not read here)")
        try:
            tau = np.asarray(client_steps)
        except ValueError:  # (a ragged sequence)
            raise ValueError(f"client_steps must be {n} integers (one per client), got a ragged sequence") from None
        if tau.shape != (n,) or tau.dtype.kind not in "iu" and not (
                tau.dtype.kind == "f" and np.all(np.isfinite(tau)) and np.all(tau == np.round(tau))):
            raise ValueError(f"client_steps must be {n} integers (one per client), got "
                             f"{'shape ' + str(tau.shape) if tau.shape != (n,) else 'dtype ' + str(tau.dtype)}")
        tau = tau.astype(np.int64)
        if tau.min() < 1 or tau.max() > self.local_steps:
            bad = int(np.flatnonzero((tau < 1) | (tau > self.local_steps))[0])
            raise ValueError(f"client_steps must lie in 1 .. local_steps = {self.local_steps}, got client_steps[{bad}] "
                             f"= {int(tau[bad])}")
        return tau

    @classmethod
    def problem_matrices(cls, A):
        """``{"n": clients}``: a network's node count, or the number of clients itself (an int)."""
        if isinstance(A, numbers.Integral) and not isinstance(A, bool):
            return {"n": int(A)}
        if not isinstance(getattr(A, "n", None), numbers.Integral):
            raise TypeError(f"{cls.__name__} takes the number of clients n, or a network of n nodes, got "
                            f"{type(A).__name__}")
        return {"n": A.n}

    @staticmethod
    def clients_for(n, participation):
        """The clients of a round: ``floor(participation n)``, at least one (McMahan et al.'s ``max(C K, 1)``, and
        decent-bench's rule; a fraction within 1e-9 of a count is that count)."""
        return max(1, int(np.floor(participation * n + 1e-9)))

    @staticmethod
    def chosen(n, clients_per_round, seed, r, selection="uniform", client_weights=None):
        r"""The clients of round ``r``: a boolean mask of ``n``, ``clients_per_round`` of them by the rule
        ``selection`` (the module's docstring; every client where all take part): ``"uniform"``, the smallest of a
        counter-based hash :math:`u_i` of ``(seed, r, i)``; ``"size"``, the smallest :math:`-\log(1 - u_i) / w_i`
        (``client_weights``, equal where None); ``"fair"``, the round robin over a permutation drawn from
        ``seed``."""
        m = clients_per_round
        if m >= n:
            return np.ones(n, dtype=bool)
        mask = np.zeros(n, dtype=bool)
        if selection == "fair":
            start = (int(r) * m) % n
            mask[Federated.fair_order(n, seed)[(start + np.arange(m)) % n]] = True
            return mask
        keys = uniform_hash(seed, np.int64(r), np.arange(n, dtype=np.int64), _SELECTION_KEY)
        if selection == "size":
            keys = -np.log1p(-keys) / (1.0 if client_weights is None else np.asarray(client_weights, np.float64))
        mask[np.argsort(keys, kind="stable")[:m]] = True
        return mask

    @staticmethod
    def fair_order(n, seed):
        """The fixed order of the ``"fair"`` rule's round robin: a permutation of the ``n`` clients (the sorted
        hashes of ``(seed, i)``)."""
        keys = uniform_hash(seed, np.int64(0), np.arange(n, dtype=np.int64), _ORDER_KEY)
        return np.argsort(keys, kind="stable")

    def _chosen(self, r):
        """:meth:`chosen` of round ``r`` with this method's rule."""
        return self.chosen(self.n, self.clients_per_round, self.seed, r, self.selection, self.client_weights)

    def _round_selection(self, t):
        """Round ``t // K``'s chosen clients: this process's rows of them as a 0/1 vector of the backend, and the
        mask of all ``n`` (host), made once a round."""
        r = t // self.local_steps
        if self._selection[0] != r:
            mask = self._chosen(r)
            self._selection = (r, self._ops.vector(mask.astype(np.float64)), mask)
        return self._selection[1], self._selection[2]

    # ------------------------------------------------------------------ what the harness records of them
    def participation_counts(self):
        """How many of the rounds done so far (:attr:`communication_rounds`, ``iteration // K``) chose each
        client: ``n`` integers summing to ``rounds * clients_per_round`` (a host array, the same on every
        process; counted once per round, incrementally)."""
        n, m, R = self.n, self.clients_per_round, self.iteration // self.local_steps
        if m >= n:
            return np.full(n, R, dtype=np.int64)
        if self.selection == "fair":  # position p of the order is taken ceil((R m - p) / n) times in R rounds
            counts = np.empty(n, dtype=np.int64)
            counts[self.fair_order(n, self.seed)] = np.maximum(0, -((np.arange(n) - R * m) // n))
            return counts
        done, counts = self.__dict__.get("_counted", (0, np.zeros(n, dtype=np.int64)))
        if done > R:
            done, counts = 0, np.zeros(n, dtype=np.int64)
        counts = counts.copy()
        for r in range(done, R):
            counts += self._chosen(r)
        self._counted = (R, counts)
        return counts.copy()

    def participation_fairness(self):
        r"""Jain's fairness index of :meth:`participation_counts`, :math:`(\sum_i c_i)^2 / (n \sum_i c_i^2)`: 1 where
        every client was chosen equally often, ``1 / n`` where one client took every turn (R. Jain, D. Chiu and
        W. Hawe, DEC-TR-301, 1984); NaN before the first round ends."""
        c = self.participation_counts().astype(np.float64)
        total = float((c * c).sum())
        return math.nan if total == 0.0 else float(c.sum() ** 2 / (self.n * total))

    def client_drift(self):
        r"""The client drift of the last round done, one value per replica (shape ``(reps,)``, or ``()`` without
        replicas): the mean over the round's chosen clients of :math:`\|y_i - s\|_2`, their models at the end of
        their local steps against the server model :math:`s` they were sent (what SCAFFOLD's correction removes:
        Karimireddy et al. 2020, section 3; FedPD's and FedLT's clients start from their own models, and their drift
        is from :math:`s` all the same); NaN before the first round ends (and after a resume, until the next
        one)."""
        shape = (self._reps,) if len(self._shape) == 3 else ()
        if self._drift is None:
            return np.full(shape, math.nan)
        d = self._drift
        return np.asarray(d.get() if hasattr(d, "get") else d, dtype=np.float64).reshape(shape)

    def _measure_drift(self, u):
        """Keep the client drift of the round whose uploads are ``u`` (rows ``y_i - s`` of the chosen clients, 0
        of the others): the column sums of the rows' norms per replica over the chosen (a reduction across the
        MPI ranks, on the device on a GPU: nothing is copied to the host here)."""
        xp = self._ops.xp
        with np.errstate(over="ignore", invalid="ignore"):  # (a diverging round: its drift is inf or NaN)
            norms = xp.sqrt((u * u).reshape(u.shape[0], self._reps, self._d).sum(axis=2))
            self._drift = self._ops.sum_rows(norms) / self.clients_per_round

    def _stepping(self, t):
        """The per-row 0/1 coefficient of local step ``t``: the round's chosen clients whose ``tau_i`` steps are
        not done yet."""
        chosen, mask = self._round_selection(t)
        if self.client_steps is None:
            return chosen
        return self._ops.vector((mask & (t % self.local_steps < self.client_steps)).astype(np.float64))

    def _traffic_per_iteration(self):
        w = self._reps * self._d
        return [(self.clients_per_round, 1, self.upload_blocks * w),  # the uploads and the downloads, apart:
                (self.clients_per_round, 1, self.download_blocks * w)]  # (SCAFFOLD's are of two blocks each)

    def samples_drawn(self, batch=1):
        """Samples drawn so far per client, on average over the ``n`` (a client not chosen, or done with its
        ``tau_i`` steps, computes nothing): ``batch`` times the local steps the clients took, over ``n``; what
        ``rowstoch compare``'s gradient evaluations count."""
        K, t = self.local_steps, self.iteration
        if self.client_steps is None:
            return t * self.clients_per_round * batch / self.n
        done, total = self.__dict__.get("_steps_taken", (0, 0))  # (full rounds counted, their steps): incremental
        if done > t // K:
            done, total = 0, 0
        for r in range(done, t // K):
            total += int(self.client_steps[self._chosen(r)].sum())
        self._steps_taken = (t // K, total)
        partial = np.minimum(self.client_steps, t % K)[self._chosen(t // K)]
        return (total + int(partial.sum())) * batch / self.n

    def _inverse_steps(self, t):
        """The per-row ``1 / tau_i`` of round ``t // K`` (``1 / K`` for every client by default) as a coefficient."""
        if self.client_steps is None:
            return 1.0 / self.local_steps
        return self._ops.vector(1.0 / self.client_steps.astype(np.float64))

    # ------------------------------------------------------------------ the step
    def _initialize(self, grad_fn):
        """The server starts at ``s_0``, the mean of the rows of ``x0``; round 0 from ``s_0`` on every client (a
        method that keeps the clients' models: each from its row of ``x0``, and :meth:`_start_clients`)."""
        x, server = self._cur["x"], self._cur["server"]
        if self.download_model:
            x[...] = self._first_server()
            server[...] = x
            return
        server[...] = self._first_server()[None, :]
        self._start_clients(self._cur)

    def _output_block(self):
        """The server's model; before the first step, ``s_0`` (the mean of the rows of ``x0``, which the first step
        puts there: the block had read 0, helper 276)."""
        if self._initialized:
            return self._cur["server"]
        block = self._ops.xp.empty_like(self._cur["server"])
        block[...] = self._first_server()[None, :]
        return block

    def _first_server(self):
        """``s_0``, the mean of the rows of ``x0`` (of ``x`` before the first step)."""
        return self._ops.sum_rows(self._cur["x"]) / self.n

    def _start_clients(self, cur):
        """The clients' blocks before round 0 where they keep their models (the blocks start at 0 otherwise)."""

    def _advance(self, grad_fn, cur, nxt, t):
        ops = self._ops
        g, step = self._work[0], self._work[1]
        g = self._gradient_read(grad_fn, cur["x"], g, t)
        self._direction(g, cur, step)  # step <- -lr d_i(y)
        stepping = self._stepping(t)
        if self.clients_per_round < self.n or self.client_steps is not None:  # a client that takes no step adds
            step[...] = ops.xp.where(stepping[:, None] > 0, step, 0.0)  # nothing (0, not 0 x a NaN of its own)
        finite = ops.combine(nxt["x"], [1.0, stepping], [cur["x"], step])
        self._check_iterates(finite, t, nxt["x"])
        if not self._talks(t):
            self._without_round(cur, nxt, finite, t)
            return
        chosen, _ = self._round_selection(t)
        u = self._work[2]
        ops.combine(u, [1.0, -1.0], [nxt["x"], cur["server"]], check=False)  # u_i = y_i - s (chosen clients)
        if not self.download_model:  # (the others hold their own models: not an upload, 0)
            u[...] = ops.xp.where(chosen[:, None] > 0, u, 0.0)
        self._measure_drift(u)
        self._aggregate(cur, nxt, chosen, u, t)  # the server's update: nxt["server"] and the other blocks, checked
        if self.download_model:
            ops.combine(nxt["x"], [1.0], [nxt["server"]], check=False)  # the download: every row holds the new s

    def _without_round(self, cur, nxt, finite, t):
        """The rest of an iteration that sends nothing (a local step; ``finite``: whether the new models are):
        every block but ``x`` as it was."""
        self._carry(cur, nxt, *self.state[1:])
        self._verified_last(finite, nxt["x"], t + 1)

    def _mean_of_chosen(self, u):
        """``(1 / |S|) sum_{i in S} u_i``, shape (w,): the server's average of the chosen clients' uploads ``u``,
        whose other rows are 0 (a client not chosen kept ``s``: ``u_i = s - s``), as a column sum (row after row
        whatever the width: the replicas' bits are those of separate runs)."""
        return self._ops.sum_rows(u) / self.clients_per_round

    def _where_chosen(self, name, nxt, chosen, value, other, t):
        """``nxt[name] <- value`` (a row of width ``w``, broadcast) on the chosen clients' rows, ``other`` (a block)
        on the others'; DivergenceError for iteration ``t + 1`` where it is not finite."""
        out, xp = nxt[name], self._ops.xp
        self._check_iterates(self._ops.copy_in(out, xp.where(chosen[:, None] > 0, value[None, :], other)), t, out)

    def _step_server(self, cur, nxt, u, t, rate=1.0):
        """``s <- s + rate (1/|S|) sum_{i in S} u_i``: the server moves by the chosen clients' average update."""
        self._server_to("server", nxt, cur["server"][0] + rate * self._mean_of_chosen(u), t)

    def _server_to(self, name, nxt, value, t):
        """``nxt[name] <- value`` broadcast down the rows (a server block); DivergenceError for iteration ``t + 1``
        where it is not finite."""
        out = nxt[name]
        self._check_iterates(self._ops.copy_in(out, self._ops.xp.broadcast_to(value[None, :], out.shape)), t, out)

    def _direction(self, g, cur, step):
        """``step <- -lr d_i``: the clients' local step at their models ``cur["x"]`` with gradients ``g`` (local
        SGD: ``d_i = g``; FedProx, SCAFFOLD and FedDyn correct it)."""
        self._ops.combine(step, [self._lr_coef()], [g], check=False)

    def _aggregate(self, cur, nxt, chosen, u, t):
        """The server's update at a round's end from the chosen clients' ``u_i = y_i - s`` (``chosen``: per-row 0/1):
        write ``nxt["server"]`` and every other block but ``x``, each checked (:meth:`_server_to`,
        :meth:`_check_iterates`)."""
        raise NotImplementedError
