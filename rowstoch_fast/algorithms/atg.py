"""ATG (Carnevale, Bastianello, Notarstefano & Carli 2025): gradient tracking whose consensus is a relaxed ADMM, its
link variables summed per node (exact on a static undirected network)."""

from __future__ import annotations

from .._checks import check_positive_float
from ._base import Optimizer
from .lt_admm import LinkSums, check_relaxation

__all__ = ["ATG"]


class ATG(LinkSums, Optimizer):
    r"""ADMM-Tracking Gradient: a relaxed consensus ADMM tracks the average model and the average gradient.

    Implements the reference's method as decent-bench 0.3.0 writes it, each link weighted by ``w_ij`` (penalty
    ``rho w_ij``; ``d_i = 1 - w_ii``), the link variables ``z^y_{ij,0} = z^s_{ij,0} = 0``, one gradient and one
    communication round per iteration. With the link sums of :class:`LinkSums` (``z = sum_j z_ij``,
    ``e = sum_j (z_ij - z_ji)``, one pair for ``y`` and one for ``s``, all 0 at the start):

    .. math::

        y_k &= \frac{x_k + z^y_k}{1 + \rho d_i}, \qquad s_k = \frac{g(x_k) + z^s_k}{1 + \rho d_i} \\
        x_{k+1} &= (1 - \gamma)\, x_k + \gamma\, y_k - \mathrm{lr}\, s_k \qquad (\mathrm{lr} = \gamma \delta) \\
        z^v_{k+1} &= (1 - 2\alpha)\, z^v_k + \alpha\, e^v_k + 2 \alpha \rho\, (W v_k - \mathrm{diag}(W)\, v_k),
            \qquad e^v_{k+1} = e^v_k + 2 \alpha \rho\, (W v_k - v_k) \qquad (v = y, s)

    ``y`` and ``s`` are one ADMM iteration on the consensus problems whose solutions are the averages of ``x`` and
    of the gradients, so ``s`` tracks ``(1/n) sum_i g_i``. One round sends ``y`` and ``s`` (counted as one message
    of ``2 d`` values per link). The link form, one pair ``(z^y_ij, z^s_ij)`` per directed link updated by
    ``z_ij <- (1 - alpha) z_ij - alpha (z_ji - 2 rho w_ij v_j)``, is the dense twin
    (:func:`rowstoch_fast._reference.atg`); this class keeps two sums per node per quantity instead, the same on a
    static symmetric ``W`` (losses, sleep and schedules are refused: see :class:`LinkSums`; the reference's
    asynchronous and lossy analysis needs the per-link form). decent-bench's ``ATG`` (unweighted neighbour sums,
    ``rho``, ``delta``) is this class on ``W = I - L / kappa`` with ``penalty = kappa rho`` and ``lr = gamma delta``,
    its step ``k`` this class's iteration ``k`` (bench/decent_bench_admm_tracking.py).

    Exact: converges linearly to the minimiser of ``(1/n) sum_i f_i`` for strongly convex ``f_i`` when ``gamma``
    and ``lr`` are small enough (the reference's Theorem; no closed-form bound); at a fixed point the ADMM makes
    ``y`` and ``s`` the averages of ``x`` and of the gradients, and ``gamma x = gamma y - lr s`` then needs
    ``s = 0``.

    Parameters
    ----------
    W : MixingMatrix or array_like
        Static, doubly stochastic and symmetric (see :class:`~rowstoch_fast.DGD`).
    x0 : array_like, shape (d,), (n, d) or (reps, n, d)
    lr : float
        ``gamma delta``, the step along the tracked gradient ``s`` (the reference's ``delta`` times ``gamma``: the
        step ``x`` takes along ``s``, as other methods' ``lr`` along their gradient, so that one rate means the same
        to the harness whatever ``gamma``).
    penalty : float, default 1.0
        ``rho > 0``; each link's penalty is ``rho w_ij`` (decent-bench's default ``rho = 1`` on its unweighted
        links is ``penalty = kappa`` on ``W = I - L / kappa``).
    relaxation : float, default 0.5
        ``alpha`` in (0, 1) (decent-bench's default).
    gamma : float, default 0.1
        ``gamma`` in (0, 1], the step of ``x`` towards the ADMM's average ``y`` (decent-bench's default).
    backend, check_finite, comm, partition
        As in :class:`~rowstoch_fast.PullDiagGT`.

    References
    ----------
    G. Carnevale, N. Bastianello, G. Notarstefano and R. Carli, "ADMM-tracking gradient for distributed
    optimization over asynchronous and unreliable networks", IEEE Trans. Automat. Control, 2025
    (arXiv:2309.14142).

    Examples
    --------
    >>> import numpy as np
    >>> from rowstoch_fast import ATG, topology
    >>> W = topology.ring(6, directed=False, weights="metropolis")
    >>> b = np.arange(6.0)[:, None]
    >>> opt = ATG(W, np.zeros(1), lr=0.25, gamma=0.5, penalty=2.0)
    >>> for _ in range(3000):
    ...     _ = opt.step(lambda X: X - b)
    >>> bool(np.allclose(opt.x, b.mean()))
    True
    """

    name = "atg"
    family = "gradient tracking (ADMM)"
    order = 183
    exact = True
    in_robustness = False
    state = ("x", "zy", "ey", "zs", "es")
    hyper = ("lr", "penalty", "relaxation", "gamma")
    scratch = 4

    def __init__(self, W, x0, lr, backend="auto", *, penalty=1.0, relaxation=0.5, gamma=0.1, check_finite=True,
                 comm=None, partition=None):
        self._start(x0, {"W": self._static(W)}, backend, check_finite, comm, partition, lr=lr, penalty=penalty,
                    relaxation=relaxation, gamma=gamma)

    def _check_hyper(self, lr, penalty=1.0, relaxation=0.5, gamma=0.1):
        self.lr = self._check_lr(lr)
        self.penalty = check_positive_float(penalty, "penalty")
        self.relaxation = check_relaxation(relaxation)
        self.gamma = check_positive_float(gamma, "gamma")
        if self.gamma > 1.0:
            raise ValueError(f"gamma must be in (0, 1] (x moves a fraction gamma of the way to y), got "
                             f"{self.gamma!r}")
        return {"lr": self.lr, "penalty": self.penalty, "relaxation": self.relaxation, "gamma": self.gamma}

    def _traffic_per_iteration(self):
        return [("W", 1, 2 * self._reps * self._d)]  # (y and s, in the same round)

    def _advance(self, grad_fn, cur, nxt, t):
        ops, gamma = self._ops, self.gamma
        g, y, s, w = self._work
        g = self._gradient_read(grad_fn, cur["x"], g, t, checked_next=True)
        k = self._row_coef("scale", lambda wii: 1.0 / (1.0 + self.penalty * (1.0 - wii)))  # 1 / (1 + rho d_i)
        ops.combine(y, [k, k], [cur["x"], cur["zy"]], check=False)
        ops.combine(s, [k, k], [g, cur["zs"]], check=False)
        finite = ops.combine(nxt["x"], [1.0 - gamma, gamma, self._lr_coef()], [cur["x"], y, s])
        self._check_iterates(finite, t, nxt["x"])
        for v, z, e in ((y, "zy", "ey"), (s, "zs", "es")):
            ops.mix(self.W, v, w)
            self._link_sums(v, w, cur[z], cur[e], nxt[z], nxt[e], t)
        self._verified_last(finite, nxt["x"], t + 1)
