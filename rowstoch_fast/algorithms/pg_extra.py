"""PG-EXTRA (Shi, Ling, Wu & Yin 2015): EXTRA with a proximal step, for ``(1/n) sum_i f_i + r``."""

from __future__ import annotations

from ._base import Optimizer

__all__ = ["PGEXTRA"]


class PGEXTRA(Optimizer):
    r"""PG-EXTRA: the proximal-gradient EXTRA, exact on composite problems ``(1/n) sum_i f_i(x) + r(x)``.

    Implements, with :math:`\tilde W = (I + W) / 2` (the paper's recommended choice) and
    :math:`\mathrm{prox} = \mathrm{prox}_{\mathrm{lr}\, r}`:

    .. math::

        z_1 &= W x_0 - \mathrm{lr}\, g(x_0) \\
        z_{k+2} &= W x_{k+1} + z_{k+1} - \tilde W x_k - \mathrm{lr}\, (g(x_{k+1}) - g(x_k)) \\
        x_k &= \mathrm{prox}(z_k)

    (the paper's eqs. (3a)-(3b), ``z_k`` its ``x^{k+1/2}``). Without a regularizer ``z_k = x_k`` and this is
    :class:`~rowstoch_fast.EXTRA` (a test checks it iterate by iterate). One round per iteration (``W x_k`` is kept
    from the step before). For convex ``f_i`` with ``L``-Lipschitz gradients and ``lr < 2 lambda_min(W_tilde) / L``
    the models converge to a minimiser of the composite problem (Theorem 1: ``o(1/k)`` in the fixed-point
    residual), linearly under strong convexity of ``f``.

    Parameters
    ----------
    W : MixingMatrix or array_like
        Doubly stochastic and symmetric (see :class:`~rowstoch_fast.DGD`).
    x0 : array_like, shape (d,), (n, d) or (reps, n, d)
    lr : float
    regularizer : Regularizer, optional
        ``r`` (:mod:`rowstoch_fast.composite`: :class:`~rowstoch_fast.composite.L1`, ...); None: ``r = 0``.
    backend, check_finite, comm, partition
        As in :class:`~rowstoch_fast.PullDiagGT`.

    References
    ----------
    W. Shi, Q. Ling, G. Wu and W. Yin, "A proximal gradient algorithm for decentralized composite optimization",
    IEEE Trans. Signal Process. 63(22), 2015.

    Examples
    --------
    >>> import numpy as np
    >>> from rowstoch_fast import PGEXTRA, topology
    >>> from rowstoch_fast.composite import L1
    >>> W = topology.ring(6, directed=False, weights="metropolis")
    >>> b = np.arange(6.0)[:, None]  # f_i(x) = (x - b_i)^2 / 2: F = mean + 1.0 |x| has x* = 2.5 - 1.0
    >>> opt = PGEXTRA(W, np.zeros(1), lr=0.3, regularizer=L1(1.0))
    >>> for _ in range(1000):
    ...     _ = opt.step(lambda X: X - b)
    >>> bool(np.allclose(opt.x, 1.5))
    True
    """

    name = "pg-extra"
    family = "proximal primal-dual"
    order = 170
    exact = True
    composite = True
    matrices = ("W",)
    symmetric = True
    state = ("x", "z", "g", "x_prev", "wx_prev", "g_prev")
    hyper = ("lr", "regularizer")
    scratch = 1

    def __init__(self, W, x0, lr, backend="auto", *, regularizer=None, check_finite=True, comm=None,
                 partition=None):
        self._start(x0, {"W": W}, backend, check_finite, comm, partition, lr=lr, regularizer=regularizer)

    def _check_hyper(self, lr, regularizer=None):
        self.lr = self._check_lr(lr)
        self.regularizer, saved = self._check_regularizer(regularizer)
        return {"lr": self.lr, "regularizer": saved}

    def _initialize(self, grad_fn):
        self._initial_gradient(grad_fn)
        self._cur["z"][...] = self._cur["x"]

    def _advance(self, grad_fn, cur, nxt, t):
        ops, lr, neg = self._ops, self._lr_coef(1.0), self._lr_coef()
        (wx,) = self._work
        ops.mix(self.W, cur["x"], wx)  # W x_k
        if t == 0:  # z_1 = W x_0 - lr g_0
            finite = ops.combine(nxt["z"], [1.0, neg], [wx, cur["g"]])
        else:  # z_{k+1} = W x_k + z_k - (x_{k-1} + W x_{k-1}) / 2 - lr (g_k - g_{k-1})
            ops.combine(nxt["z"], [1.0, 1.0, -0.5, -0.5], [wx, cur["z"], cur["x_prev"], cur["wx_prev"]], check=False)
            finite = ops.combine(nxt["z"], [1.0, neg, lr], [nxt["z"], cur["g"], cur["g_prev"]])
        self._check_iterates(finite, t, nxt["z"])
        self._prox(nxt["z"], nxt["x"], t)  # x_{k+1} = prox(z_{k+1})
        self._gradient(grad_fn, nxt["x"], nxt["g"], t + 1)
        # (copies through the backend, as launches that a failed deferred check freezes with the rest)
        ops.combine(nxt["wx_prev"], [1.0], [wx], check=False)
        self._carry_as(cur, nxt, {"x_prev": "x", "g_prev": "g"})
