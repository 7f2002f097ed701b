"""Robust (stochastic) gradient-push (Spiridonoff, Olshevsky & Paschalidis 2020): push-sum with running sums
per link, so that a lost message's mass arrives with the next message that does."""

from __future__ import annotations

from ..network import Network, base_matrix, fixed_links
from ._base import Optimizer

__all__ = ["RobustGradientPush"]


class RobustGradientPush(Optimizer):
    r"""Gradient-push whose push-sum survives lost messages: each link carries running sums.

    SGP's update (:class:`~rowstoch_fast.SGP`), with the push-sum mixing ``(x, w) <- C (x, w)`` replaced by
    running sums per link ``j -> i``: the sender adds its share ``C[i, j] (h_j, w_j)`` to what it has sent
    on that link so far, and the receiver, when a message arrives, takes everything the link has accumulated
    since the last message that arrived (the difference of the two running sums). With ``p_ij`` the mass
    sent on ``j -> i`` and not yet received, per round:

    .. math::

        h_k &= x_k - \mathrm{lr}\, g(z_k) \\
        p_{ij} &\leftarrow p_{ij} + C_{ij} (h_{k,j}, w_{k,j}) \qquad \text{(every link } j \to i, \ i \ne j \text{)} \\
        (x_{k+1}, w_{k+1})_i &= C_{ii} (h_{k,i}, w_{k,i}) + \sum_{j \to i \text{ arrived}} p_{ij},
            \qquad \text{then } p_{ij} = 0 \text{ where it arrived} \\
        z_{k+1} &= x_{k+1} / w_{k+1}

    No mass is ever lost (``sum_i (x_i, w_i) + sum_ij p_ij`` is what plain push-sum would hold without
    losses), so the weights do not drain the way SGP's do under loss. Without losses this is SGP exactly.
    On a network with losses it takes :class:`~rowstoch_fast.network.Lossy` (Bernoulli or Gilbert-Elliott)
    over a static column-stochastic ``C``: the messages that arrive are the network's own draws
    (:meth:`~rowstoch_fast.network.Lossy.arrived`), the same on every backend and under MPI.

    Under message layers (:mod:`rowstoch_fast.network`'s ``Compressed``, ``Noisy``, ``Delayed``) the links
    carry what those make of the running sums: a sender's share is ``C[i, j] Q(h_j, w_j)`` (the increments
    compressed, the compression's error is mass made or lost, as for any plain method under compression; its
    own share exact); a delayed link delivers the running sum of its newest message that has arrived (the mass
    sent since stays on the link); noise on a received running sum stays with the receiver's copy of it, so it
    telescopes (taken now, given back with the next message): no mass is made or lost by delays or noise.

    Parameters
    ----------
    C : MixingMatrix, array_like or network
        Column-stochastic, or a ``Lossy`` network over one, with sleeping nodes (``Sleepy``: a sleeping node's
        links are silent for the iteration, what it sends and what is sent to it waits on them; it takes its own
        step) and under compression, noise and delays or not. Schedules are refused: the running sums need a
        fixed set of links.
    x0 : array_like, shape (d,), (n, d) or (reps, n, d)
    lr : float
    backend, check_finite, comm, partition
        As in :class:`~rowstoch_fast.PullDiagGT`. Memory: two per-link blocks of ``reps * d + 1`` values
        per stored weight of ``C`` (the undelivered mass, double-buffered for the atomic commit).

    References
    ----------
    A. Spiridonoff, A. Olshevsky and I. Ch. Paschalidis, "Robust asynchronous stochastic gradient-push:
    asymptotically optimal and network-independent performance for strongly convex functions", JMLR 21(58),
    2020; C. N. Hadjicostis, A. D. Dominguez-Garcia and N. H. Vaidya, "Resilient average consensus in the
    presence of heterogeneous packet dropping links", IEEE Trans. Autom. Control 61(6), 2016 (the running
    sums).

    Examples
    --------
    >>> import numpy as np
    >>> from rowstoch_fast import RobustGradientPush, topology
    >>> from rowstoch_fast.network import Lossy
    >>> C = Lossy(topology.ring(6, stochastic="column"), 0.3, seed=1)  # 30% of the messages lost
    >>> b = np.arange(6.0)[:, None]
    >>> opt = RobustGradientPush(C, np.zeros(1), lr=0.01)
    >>> for _ in range(3000):
    ...     _ = opt.step(lambda X: X - b)
    >>> bool(abs(opt.x.mean() - b.mean()) < 0.1)
    True
    """

    name = "robust-gradient-push"
    family = "decentralized gradient (push-sum), loss-robust"
    order = 65
    matrices = ("C",)
    state = ("x", "w", "z")
    narrow = ("w",)
    model = "z"
    scratch = 1
    push_sum_weights = "w"
    per_link_state = True

    def __init__(self, C, x0, lr, backend="auto", *, check_finite=True, comm=None, partition=None):
        if not fixed_links(C):  # (before anything is allocated)
            raise ValueError(f"RobustGradientPush: C must be a static column-stochastic matrix or a Lossy or Sleepy "
                             f"network over one, under compression, noise or delays or not (the running sums need a "
                             f"fixed set of links), got {C!r}")
        self._start(x0, {"C": C}, backend, check_finite, comm, partition, lr=lr)
        net = self.C if isinstance(self.C, Network) else None
        self._net, self._links = net, base_matrix(self.C) if net is not None else self.C
        width = self._reps * self._d
        ops = self._ops
        self._require_link_memory([(self._links, width), (self._links, 1)] * 2)
        self._pending = [(ops.link_zeros(self._links, width), ops.link_zeros(self._links, 1)) for _ in range(2)]

    def _traffic_per_iteration(self):
        return [("C", 1, self._reps * self._d + 1)]  # the running sums of x and of the weight, one message

    @classmethod
    def applies_to(cls, A):
        """A static matrix, or a network that reports arrivals over one (Lossy over a MixingMatrix), under message
        layers or not."""
        return fixed_links(A)

    def _initialize(self, grad_fn):
        cur = self._cur
        cur["x"][...] = cur["z"]
        cur["w"][...] = 1.0

    def _advance(self, grad_fn, cur, nxt, t):
        ops, h = self._ops, self._work[0]
        self._gradient(grad_fn, cur["z"], h, t)
        finite = ops.combine(h, [1.0, self._lr_coef()], [cur["x"], h])  # h_k = x_k - lr g(z_k)
        self._check_iterates(finite, t, h)
        (px, pw), (px_next, pw_next) = self._pending[t % 2], self._pending[(t + 1) % 2]
        ops.running_sums(self._links, self._net, t, 0, [(h, nxt["x"], px, px_next), (cur["w"], nxt["w"], pw, pw_next)])
        finite = ops.combine(nxt["z"], [1.0 / nxt["w"][:, 0]], [nxt["x"]])  # z_{k+1} = x_{k+1} / w_{k+1}
        self._check_iterates(finite, t, nxt["z"])

    def _save_extra(self):
        px, pw = self._pending[self.iteration % 2]
        full_x, full_w = self._ops.gather_links(self._links, px), self._ops.gather_links(self._links, pw)
        return {"pending_x": full_x, "pending_w": full_w}

    def _load_extra(self, state):
        if "pending_x" not in state:
            raise ValueError("state is missing ['pending_x', 'pending_w'] (the per-link undelivered mass); pass the "
                             "dict returned by RobustGradientPush.state_dict()")
        px, pw = self._pending[self.iteration % 2]
        xp = self._ops.xp
        px, pw = xp.empty_like(px), xp.empty_like(pw)  # (new blocks: a backend knows its blocks by identity)
        px[...] = self._ops.scatter_links(self._links, state["pending_x"])
        pw[...] = self._ops.scatter_links(self._links, state["pending_w"])
        self._pending[self.iteration % 2] = (px, pw)
