"""K-GT (Liu, Lin, Koloskova & Stich 2024): gradient tracking with K local steps per communication round."""

from __future__ import annotations

import numpy as np

from .._checks import check_positive_float
from ._base import Optimizer
from ._local import DEFAULT_LOCAL_STEPS, LocalSteps

__all__ = ["KGT"]


class KGT(LocalSteps, Optimizer):
    r"""K-GT: local steps corrected by a tracked gradient difference, so the drift of heterogeneous data cancels.

    Implements the reference's Algorithm 1 with one local gradient step per iteration ``t`` (round
    ``r = t // K``, local step ``t % K``), :math:`c_0 = 0`:

    .. math::

        x_{t+1} = x_t - \mathrm{lr}\, (g(x_t) + c_r) \qquad \text{(a local step)}

    and at the round's last step, with :math:`x_r` the model at the round's start and
    :math:`u = x_r - x_{t+1}` (:math:`= K\, \mathrm{lr}\, z_r`):

    .. math::

        c_{r+1} &= c_r - (u - W u) / (K\, \mathrm{lr}) \qquad (= c_r - z_r + W z_r) \\
        x_{t+1} &= W (x_r - \mathrm{lr}_s\, u) \qquad (= W (x_r - K\, \mathrm{lr}_s\, \mathrm{lr}\, z_r))

    The round sends two blocks (``x_r - lr_s u`` and ``z``), counted as one message of ``2 d`` values per link.
    With ``K = 1`` and ``lr_s = 1`` it is gradient tracking ``x+ = W (x - lr y)``, ``y+ = W y + g(x+) - g(x)``
    (``y = g + c``). Exact: converges to the minimiser of ``(1/n) sum_i f_i`` with any ``K`` (Theorem 3: for
    ``lr`` small enough, ``O(1 / (K L))``, the rate independent of the data's heterogeneity).

    Gradients and communication are counted apart, as for :class:`~rowstoch_fast.LocalDSGD`: ``iteration``
    counts gradient steps; ``rowstoch compare`` gives it ``K`` per round of its budget.

    Parameters
    ----------
    W : MixingMatrix or array_like
        Doubly stochastic (see :class:`~rowstoch_fast.DGD`).
    x0 : array_like, shape (d,), (n, d) or (reps, n, d)
    lr : float
        The local step ``eta_c``.
    local_steps : int, default 4
        ``K >= 1``.
    server_lr : float, default 1.0
        ``eta_s > 0``, the step of the round's combination (the reference's "server" step; 1: the nodes take the
        mixed local models).
    backend, check_finite, comm, partition
        As in :class:`~rowstoch_fast.PullDiagGT`.

    References
    ----------
    Y. Liu, T. Lin, A. Koloskova and S. U. Stich, "Decentralized gradient tracking with local steps",
    Optimization Methods and Software, 2024.

    Examples
    --------
    >>> import numpy as np
    >>> from rowstoch_fast import KGT, topology
    >>> W = topology.ring(6, directed=False, weights="metropolis")
    >>> b = np.arange(6.0)[:, None]
    >>> opt = KGT(W, np.zeros(1), lr=0.1, local_steps=4)
    >>> for _ in range(2000):
    ...     _ = opt.step(lambda X: X - b)
    >>> opt.communication_rounds, bool(np.allclose(opt.x, b.mean()))
    (500, True)
    """

    name = "k-gt"
    family = "gradient tracking, local updates"
    order = 128
    exact = True
    matrices = ("W",)
    in_paper_preset = False
    in_robustness = False
    state = ("x", "c", "x_round")
    hyper = ("lr", "local_steps", "server_lr")
    scratch = 3

    def __init__(self, W, x0, lr, backend="auto", *, local_steps=DEFAULT_LOCAL_STEPS, server_lr=1.0,
                 check_finite=True, comm=None, partition=None):
        self._start(x0, {"W": W}, backend, check_finite, comm, partition, lr=lr, local_steps=local_steps,
                    server_lr=server_lr)

    def _check_hyper(self, lr, local_steps=DEFAULT_LOCAL_STEPS, server_lr=1.0):
        self.lr = self._check_lr(lr)
        self.local_steps = self._check_local_steps(local_steps)
        self.server_lr = check_positive_float(server_lr, "server_lr")
        return {"lr": self.lr, "local_steps": self.local_steps, "server_lr": self.server_lr}



    def _traffic_per_iteration(self):
        return [("W", 1, 2 * self._reps * self._d)]  # (the combined model and z, in the same round)

    def _advance(self, grad_fn, cur, nxt, t):
        ops = self._ops
        g, u, w = self._work
        start = self._round_starts(t)
        if start:
            self._carry_as(cur, nxt, {"x_round": "x"})
        else:
            self._carry(cur, nxt, "x_round")
        g = self._gradient_read(grad_fn, cur["x"], g, t, checked_next=True)
        talks = self._talks(t)
        # (lr_s = 1: the round mixes the local models themselves, so a round's last local step goes to w, mixed
        # from there: x_r - lr_s u = x_local; two block passes less than forming it)
        local = w if talks and self.server_lr == 1.0 else nxt["x"]
        finite = ops.combine(local, [1.0, self._lr_coef(), self._lr_coef()], [cur["x"], g, cur["c"]])
        self._check_iterates(finite, t, local)
        if not talks:
            self._carry(cur, nxt, "c")
            self._verified_last(finite, nxt["x"], t + 1)
            return
        inv = self._inverse_lr_coef(1.0 / self.local_steps)
        ops.combine(u, [1.0, -1.0], [nxt["x_round"], local], check=False)  # u = x_r - x_local
        if local is not w:
            ops.combine(w, [1.0, -self.server_lr], [nxt["x_round"], u], check=False)  # x_r - lr_s u
        ops.mix(self.W, w, nxt["x"])
        ops.mix(self.W, u, w)
        finite = ops.combine(nxt["c"], [1.0, -inv, inv], [cur["c"], u, w])
        self._check_iterates(finite, t, nxt["x"], nxt["c"])
