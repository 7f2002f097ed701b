"""R-FAST (Zhu, Tian, Huang, Xu & He 2023): Push-Pull gradient tracking that survives lost messages, the
models pulled from the last values that arrived and the trackers pushed as running sums per link."""

from __future__ import annotations

from ..network import Network, base_matrix, fixed_links
from ._base import Optimizer

__all__ = ["RFAST"]


class RFAST(Optimizer):
    r"""Robust gradient tracking over directed links that lose messages (R-FAST, synchronous form).

    Push-Pull's update (:class:`~rowstoch_fast.PushPull`) with both of its exchanges made robust to a lost
    message. Each node sends ``v_j = x_j - lr y_j`` to the nodes that pull from it; a receiver mixes with the
    **last** ``v_j`` that arrived on each link (a buffer ``b_ij``, starting at ``x0_j``). The trackers are
    pushed as **running sums** per link, as in robust push-sum
    (:class:`~rowstoch_fast.RobustGradientPush`): ``p_ij`` is the tracker mass sent on ``j -> i`` and not
    received yet, and a message that arrives delivers all of it. Per round :math:`k`, with :math:`y_0 = g(x_0)`:

    .. math::

        v_k &= x_k - \mathrm{lr}\, y_k \\
        b_{ij} &= v_{k,j} \qquad \text{where } j \to i \text{ arrived (self loops always)} \\
        x_{k+1,i} &= \sum_j A_{ij} b_{ij} \\
        p_{ij} &\leftarrow p_{ij} + C_{ij} y_{k,j} \qquad \text{(every link } j \to i, \ i \ne j \text{)} \\
        y_{k+1,i} &= C_{ii} y_{k,i} + \sum_{j \to i \text{ arrived}} p_{ij} + g_i(x_{k+1}) - g_i(x_k),
            \qquad \text{then } p_{ij} = 0 \text{ where it arrived}

    The tracker's mass is never lost (``1^T y_k + sum_ij p_ij = 1^T g(x_k)``), so the method stays exact
    under loss where Push-Pull's trackers drift. Without losses it is Push-Pull (to rounding: the buffers are
    kept as running sums of the changes ``A[i, j] (v_j^k - v_j^{k-1})``, which the compiled running-sum pass
    delivers, so ``x`` carries the rounding of one addition per iteration). The paper's algorithm is
    asynchronous (each node wakes at its own pace, delayed messages); this is its synchronous round, every
    node active. Under message layers (:mod:`rowstoch_fast.network`'s ``Compressed``, ``Noisy``, ``Delayed``)
    both exchanges carry what those make of their running sums, as in
    :class:`~rowstoch_fast.RobustGradientPush`: the changes ``v_j^k - v_j^{k-1}`` and the tracker shares
    compressed by their sender (the buffers then follow ``Q``'s sums, not ``v``: the method is no longer
    exact), a delayed link delivering up to its newest message that has arrived (the buffer holds that
    message's ``v``; the tracker mass sent since waits), noise on a received running sum telescoping.

    Parameters
    ----------
    A : MixingMatrix, array_like or network
        Row-stochastic (pulls the models), or a ``Lossy`` network (Bernoulli or Gilbert-Elliott) over one; under
        compression, noise and delays or not.
    C : MixingMatrix, array_like or network
        Column-stochastic on the same nodes (pushes the trackers), or a ``Lossy`` network over one; e.g.
        ``mixing.out_degree_weights(A)`` or ``net.map(out_degree_weights)`` (the same links, the same losses:
        a lost packet loses both of a link's messages). Sleeping nodes (``Sleepy``) silence their links for the
        iteration (their messages wait; they take their own step); schedules are refused: the buffers and running
        sums need a fixed set of links.
    x0 : array_like, shape (d,), (n, d) or (reps, n, d)
    lr : float
    backend, check_finite, comm, partition
        As in :class:`~rowstoch_fast.PullDiagGT`. Memory: per stored weight of ``A`` and of ``C``, two per-link
        blocks of ``reps * d`` values (the buffers' undelivered changes and the undelivered tracker mass,
        double-buffered for the atomic commit).

    References
    ----------
    Z. Zhu, Y. Tian, Y. Huang, J. Xu and S. He, "R-FAST: Robust fully-asynchronous stochastic gradient
    tracking over general topology", IEEE Trans. Signal Inf. Process. Netw. 10, 2024 (arXiv:2307.11617);
    S. Pu, W. Shi, J. Xu and A. Nedic, "Push-pull gradient methods for distributed optimization in
    networks", IEEE Trans. Autom. Control 66(1), 2021.

    Examples
    --------
    >>> import numpy as np
    >>> from rowstoch_fast import RFAST, topology
    >>> from rowstoch_fast.mixing import out_degree_weights
    >>> from rowstoch_fast.network import Lossy
    >>> A = Lossy(topology.ring(6), 0.3, seed=1)  # 30% of the messages lost
    >>> b = np.arange(6.0)[:, None]
    >>> opt = RFAST(A, A.map(out_degree_weights), np.zeros(1), lr=0.1)
    >>> for _ in range(6000):
    ...     _ = opt.step(lambda X: X - b)
    >>> bool(np.allclose(opt.x, b.mean()))  # exact, in spite of the losses
    True
    """

    name = "r-fast"
    family = "gradient tracking, loss-robust"
    order = 66
    exact = True
    matrices = ("A", "C")
    state = ("x", "v", "y", "g")
    scratch = 1
    per_link_state = True

    def __init__(self, A, C, x0, lr, backend="auto", *, check_finite=True, comm=None, partition=None):
        for name, M in (("A", A), ("C", C)):  # (before anything is allocated)
            if not fixed_links(M):
                raise ValueError(f"RFAST: {name} must be a static matrix or a Lossy or Sleepy network over one, "
                                 f"under compression, noise or delays or not (the buffers and running sums need a "
                                 f"fixed set of links), got {M!r}")
        self._start(x0, {"A": A, "C": C}, backend, check_finite, comm, partition, lr=lr)
        width = self._reps * self._d
        ops = self._ops
        self._nets, self._links, self._pending = {}, {}, {}
        for name in self.matrices:
            M = self._mats[name]
            self._nets[name] = M if isinstance(M, Network) else None
            self._links[name] = base_matrix(M) if isinstance(M, Network) else M
        self._require_link_memory([(self._links[name], width) for name in self.matrices] * 2)
        for name in self.matrices:
            self._pending[name] = [ops.link_zeros(self._links[name], width) for _ in range(2)]

    def _traffic_per_iteration(self):
        w = self._reps * self._d
        return [("A", 1, w), ("C", 1, w)]

    @classmethod
    def applies_to(cls, A):
        """A static matrix, or a network that reports arrivals over one (Lossy over a MixingMatrix), under message
        layers or not."""
        return fixed_links(A)

    def _initialize(self, grad_fn):
        self._cur["v"][...] = self._cur["x"]  # the buffers start at x0: b_ij = x0_j
        self._initial_gradient(grad_fn, tracker="y")

    def _advance(self, grad_fn, cur, nxt, t):
        ops, change = self._ops, self._work[0]
        finite = ops.combine(nxt["v"], [1.0, self._lr_coef()], [cur["x"], cur["y"]])  # v_k = x_k - lr y_k
        self._check_iterates(finite, t, nxt["v"])
        ops.combine(change, [1.0, -1.0], [nxt["v"], cur["v"]], check=False)  # what the buffers miss
        (pa, pa_next), (pc, pc_next) = self._turn("A", t), self._turn("C", t)
        ops.running_sums(self._links["A"], self._nets["A"], t, 0, [(change, nxt["x"], pa, pa_next)])
        if t == 0:  # the buffers before the first round: A x0 (what x_k is for k >= 1)
            ops.mix(self._links["A"], cur["x"], change)
            base = change
        else:
            base = cur["x"]
        finite = ops.combine(nxt["x"], [1.0, 1.0], [nxt["x"], base])  # x_{k+1} = sum_j A[i, j] b_ij
        self._check_iterates(finite, t, nxt["x"])
        self._gradient(grad_fn, nxt["x"], nxt["g"], t + 1)
        ops.running_sums(self._links["C"], self._nets["C"], t, 0, [(cur["y"], nxt["y"], pc, pc_next)])
        finite = ops.combine(nxt["y"], [1.0, 1.0, -1.0], [nxt["y"], nxt["g"], cur["g"]])
        self._check_iterates(finite, t, nxt["y"])

    def _turn(self, name, t):
        """Matrix ``name``'s per-link block of step ``t`` and the one it writes."""
        blocks = self._pending[name]
        return blocks[t % 2], blocks[(t + 1) % 2]

    def _save_extra(self):
        out = {}
        for name in self.matrices:
            out[f"pending_{name}"] = self._ops.gather_links(self._links[name], self._turn(name, self.iteration)[0])
        return out

    def _load_extra(self, state):
        keys = [f"pending_{name}" for name in self.matrices]
        if any(k not in state for k in keys):
            raise ValueError(f"state is missing {keys} (the per-link undelivered changes and tracker mass); pass the "
                             f"dict returned by RFAST.state_dict()")
        for name, key in zip(self.matrices, keys):
            block = self._ops.xp.empty_like(self._turn(name, self.iteration)[0])  # (a new block: backends know
            # their per-link blocks by identity)
            block[...] = self._ops.scatter_links(self._links[name], state[key])
            self._pending[name][self.iteration % 2] = block
