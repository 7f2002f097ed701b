"""Federated methods: a server and ``n`` clients on the engine of the decentralized ones.

Every client is a node (a row of ``x``); the server is not a node: its model ``s`` is kept as a state block
(replicated on every row, so that it lives where the clients' rows live: one process, a GPU, or the MPI ranks).
One iteration is one local gradient step of the participating clients, a round is ``K`` of them (as the
local-update methods count: :class:`~._local.LocalSteps`):

- at a round's first step every client's row holds the server model ``s``;
- the clients chosen for the round (``participation``: a fraction of the ``n``, ``floor(participation n)`` of
  them and at least one, drawn uniformly without replacement by a counter-based hash of ``(seed, round)``, the
  same on every process and backend) take their
  local steps ``y <- y - lr d_i(y)``, the others keep ``s`` (they compute nothing: their rows' gradients are
  evaluated, as the oracle gives every node's, and not used; a NaN among them is still the oracle's error where
  the gradients are checked, ``check_finite``, and never reaches the server where they are not);
- at the round's last step the chosen clients upload, the server updates ``s`` (a method's own rule), and every
  row gets the new ``s`` (the download).

So ``x`` at the end of every round is the server model on every row, and the harness's metrics of the nodes'
models are those of the server's. The choice of clients is keyed on the method's ``seed``, not on the replica or
the run's seed: the repetitions of a comparison share it, as they share a network model's losses and sleep (keyed
on its own seed), and differ in their gradients' noise; give ``seed`` to draw another sequence. A round counts as one communication round; :meth:`traffic` counts an upload
and a download per chosen client (of the blocks a method sends).

The client selection is the method's own (a hyperparameter), not a network layer: a federated method has no
mixing matrix (:attr:`matrices` is empty, as for the centralized baseline), so the network models of
``rowstoch compare`` (losses, sleep, compression, delays) do not apply to it.
"""

from __future__ import annotations

import numpy as np

from .._checks import check_int, check_positive_float
from .._hashing import uniform_hash
from ._local import DEFAULT_LOCAL_STEPS, LocalSteps

__all__ = ["Federated"]

#: The last key of the selection's hashes (the networks' draws have node ids there, below 2^62; ProxSkip's coins
#: 2^62 + 1).
_SELECTION_KEY = 2**62 + 2


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

    def _check_federated(self, n, lr, local_steps=DEFAULT_LOCAL_STEPS, participation=1.0, client_steps=None, seed=0):
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
        self._selection = (-1, None, None)  # (round, this process's rows' 0/1 vector, the mask of all clients)
        return {"n": n, "lr": self.lr, "local_steps": self.local_steps, "participation": self.participation,
                "client_steps": None if self.client_steps is None else self.client_steps.tolist(), "seed": self.seed}

    def _check_client_steps(self, client_steps, n):
        """None (every client takes ``K`` steps a round), or the steps ``tau_i`` of each client: ``n`` integers in
        ``1 .. K`` (heterogeneous devices; a client idles for the rest of the round)."""
        if client_steps is None:
            return None
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
        return {"n": A.n}

    @staticmethod
    def clients_for(n, participation):
        """The clients of a round: ``floor(participation n)``, at least one (McMahan et al.'s ``max(C K, 1)``, and
        decent-bench's rule; a fraction within 1e-9 of a count is that count)."""
        return max(1, int(np.floor(participation * n + 1e-9)))

    @staticmethod
    def chosen(n, clients_per_round, seed, r):
        """The clients of round ``r``: a boolean mask of ``n``, ``clients_per_round`` of them, uniformly without
        replacement (the smallest of a counter-based hash of ``(seed, r, i)``; every client where all take
        part)."""
        if clients_per_round >= n:
            return np.ones(n, dtype=bool)
        keys = uniform_hash(seed, np.int64(r), np.arange(n, dtype=np.int64), _SELECTION_KEY)
        mask = np.zeros(n, dtype=bool)
        mask[np.argsort(keys, kind="stable")[:clients_per_round]] = True
        return mask

    def _round_selection(self, t):
        """Round ``t // K``'s chosen clients: this process's rows of them as a 0/1 vector of the backend, and the
        mask of all ``n`` (host), made once a round."""
        r = t // self.local_steps
        if self._selection[0] != r:
            mask = self.chosen(self.n, self.clients_per_round, self.seed, r)
            self._selection = (r, self._ops.vector(mask.astype(np.float64)), mask)
        return self._selection[1], self._selection[2]

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
            total += int(self.client_steps[self.chosen(self.n, self.clients_per_round, self.seed, r)].sum())
        self._steps_taken = (t // K, total)
        partial = np.minimum(self.client_steps, t % K)[self.chosen(self.n, self.clients_per_round, self.seed, t // K)]
        return (total + int(partial.sum())) * batch / self.n

    def _inverse_steps(self, t):
        """The per-row ``1 / tau_i`` of round ``t // K`` (``1 / K`` for every client by default) as a coefficient."""
        if self.client_steps is None:
            return 1.0 / self.local_steps
        return self._ops.vector(1.0 / self.client_steps.astype(np.float64))

    # ------------------------------------------------------------------ the step
    def _initialize(self, grad_fn):
        """Round 0 starts from ``s_0``, the mean of the rows of ``x0``, on every client."""
        x = self._cur["x"]
        x[...] = self._ops.sum_rows(x) / self.n
        self._cur["server"][...] = x

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
            for name in self.state[1:]:
                ops.combine(nxt[name], [1.0], [cur[name]], check=False)
            self._verified_last(finite, nxt["x"], t + 1)
            return
        chosen, _ = self._round_selection(t)
        u = self._work[2]
        ops.combine(u, [1.0, -1.0], [nxt["x"], cur["server"]], check=False)  # u_i = y_i - s (chosen clients)
        self._aggregate(cur, nxt, chosen, u, t)  # the server's update: nxt["server"] and the other blocks, checked
        ops.combine(nxt["x"], [1.0], [nxt["server"]], check=False)  # the download: every row holds the new s

    def _mean_of_chosen(self, u):
        """``(1 / |S|) sum_{i in S} u_i``, shape (w,): the server's average of the chosen clients' uploads ``u``,
        whose other rows are 0 (a client not chosen kept ``s``: ``u_i = s - s``), as a column sum (row after row
        whatever the width: the replicas' bits are those of separate runs)."""
        return self._ops.sum_rows(u) / self.clients_per_round

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
