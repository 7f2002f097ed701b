"""Prox-NIDS (Li, Shi & Yan 2019): NIDS with its proximal step, for ``(1/n) sum_i f_i + r``."""

from __future__ import annotations

from ._base import Optimizer
from .pg_extra import PGEXTRA

__all__ = ["ProxNIDS"]


class ProxNIDS(Optimizer):
    r"""NIDS as its paper states it: the proximal method with network-independent step sizes.

    Implements the paper's Algorithm 1 with :math:`\tilde W = (I + W) / 2` (its ``c = 1/2``; the choice of
    :class:`~rowstoch_fast.NIDS`) and :math:`\mathrm{prox} = \mathrm{prox}_{\mathrm{lr}\, r}`:

    .. math::

        z_1 &= x_0 - \mathrm{lr}\, g(x_0) \\
        z_{k+2} &= z_{k+1} - x_{k+1} + \tilde W (2 x_{k+1} - x_k - \mathrm{lr}\, (g(x_{k+1}) - g(x_k))) \\
        x_k &= \mathrm{prox}(z_k)

    Without a regularizer ``z_k = x_k`` and this is :class:`~rowstoch_fast.NIDS` (a test checks it). Converges for
    ``lr < 2 / L`` on any connected undirected graph (Theorem 1; linearly when ``f`` is strongly convex). The
    first step sends nothing (:attr:`communication_rounds` counts ``iteration - 1``).

    Parameters
    ----------
    W : MixingMatrix or array_like
        Doubly stochastic and symmetric (see :class:`~rowstoch_fast.DGD`).
    x0 : array_like, shape (d,), (n, d) or (reps, n, d)
    lr : float
    regularizer : Regularizer, optional
        ``r`` (:mod:`rowstoch_fast.composite`); None: ``r = 0``.
    backend, check_finite, comm, partition
        As in :class:`~rowstoch_fast.PullDiagGT`.

    References
    ----------
    Z. Li, W. Shi and M. Yan, "A decentralized proximal-gradient method with network independent step-sizes
    and separated convergence rates", IEEE Trans. Signal Process. 67(17), 2019.

    Examples
    --------
    >>> import numpy as np
    >>> from rowstoch_fast import ProxNIDS, topology
    >>> from rowstoch_fast.composite import Box
    >>> W = topology.ring(6, directed=False, weights="metropolis")
    >>> b = np.arange(6.0)[:, None]  # the mean 2.5 lies outside the box [0, 1]: x* = 1
    >>> opt = ProxNIDS(W, np.zeros(1), lr=0.5, regularizer=Box(0.0, 1.0))
    >>> for _ in range(1000):
    ...     _ = opt.step(lambda X: X - b)
    >>> bool(np.allclose(opt.x, 1.0))
    True
    """

    name = "prox-nids"
    family = "proximal primal-dual"
    order = 171
    exact = True
    composite = True
    matrices = ("W",)
    symmetric = True
    state = ("x", "z", "g", "x_prev", "g_prev")
    hyper = ("lr", "regularizer")
    scratch = 2
    silent_iterations = 1

    def __init__(self, W, x0, lr, backend="auto", *, regularizer=None, check_finite=True, comm=None,
                 partition=None):
        self._start(x0, {"W": W}, backend, check_finite, comm, partition, lr=lr, regularizer=regularizer)

    _check_hyper = PGEXTRA._check_hyper
    _initialize = PGEXTRA._initialize

    def _advance(self, grad_fn, cur, nxt, t):
        ops, lr, neg = self._ops, self._lr_coef(1.0), self._lr_coef()
        u, wu = self._work
        if t == 0:  # z_1 = x_0 - lr g_0
            finite = ops.combine(nxt["z"], [1.0, neg], [cur["x"], cur["g"]])
        else:  # z_{k+1} = z_k - x_k + W_tilde u, u = 2 x_k - x_{k-1} - lr (g_k - g_{k-1})
            ops.combine(u, [2.0, -1.0, neg, lr], [cur["x"], cur["x_prev"], cur["g"], cur["g_prev"]], check=False)
            ops.mix(self.W, u, wu)
            finite = ops.combine(nxt["z"], [1.0, -1.0, 0.5, 0.5], [cur["z"], cur["x"], u, wu])
        self._check_iterates(finite, t, nxt["z"])
        self._prox(nxt["z"], nxt["x"], t)
        self._gradient(grad_fn, nxt["x"], nxt["g"], t + 1)
        self._carry_as(cur, nxt, {"x_prev": "x", "g_prev": "g"})
