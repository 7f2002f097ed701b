"""EXTRA (Shi, Ling, Wu & Yin 2015): an exact first-order method over a doubly stochastic W."""

from __future__ import annotations

from ._base import Optimizer

__all__ = ["EXTRA"]


class EXTRA(Optimizer):
    r"""EXTRA: decentralized gradient descent with the correction that makes a constant step exact.

    Implements, with :math:`\tilde W = (I + W) / 2` and the usual first step:

    .. math::

        x_1 &= W x_0 - \mathrm{lr}\, g(x_0) \\
        x_{k+2} &= (I + W) x_{k+1} - \tilde W x_k - \mathrm{lr}\, (g(x_{k+1}) - g(x_k))

    One round per iteration (``W x_k`` is kept from the step before); converges to the minimiser of
    ``(1/n) sum_i f_i`` (linearly for strongly convex ``f``, for ``lr`` below about ``lambda_min(W_tilde) / L``).

    Parameters
    ----------
    W : MixingMatrix or array_like
        Doubly stochastic (see :class:`~rowstoch_fast.DGD`).
    x0 : array_like, shape (d,), (n, d) or (reps, n, d)
    lr : float
    backend, check_finite, comm, partition
        As in :class:`~rowstoch_fast.PullDiagGT`.

    References
    ----------
    W. Shi, Q. Ling, G. Wu and W. Yin, "EXTRA: An exact first-order algorithm for decentralized consensus
    optimization", SIAM J. Optim. 25(2), 2015.

    Examples
    --------
    >>> import numpy as np
    >>> from rowstoch_fast import EXTRA, topology
    >>> W = topology.ring(6, directed=False, weights="metropolis")
    >>> b = np.arange(6.0)[:, None]
    >>> opt = EXTRA(W, np.zeros(1), lr=0.2)
    >>> for _ in range(1000):
    ...     _ = opt.step(lambda X: X - b)
    >>> bool(np.allclose(opt.x, b.mean()))
    True
    """

    name = "extra"
    family = "primal-dual"
    order = 140
    exact = True
    matrices = ("W",)
    symmetric = True
    state = ("x", "g", "x_prev", "wx_prev", "g_prev")
    scratch = 2

    def __init__(self, W, x0, lr, backend="auto", *, check_finite=True, comm=None, partition=None):
        self._start(x0, {"W": W}, backend, check_finite, comm, partition, lr=lr)

    def _initialize(self, grad_fn):
        self._initial_gradient(grad_fn)

    def _advance(self, grad_fn, cur, nxt, t):
        ops, lr, neg = self._ops, self._lr_coef(1.0), self._lr_coef()
        wx, w = self._work
        ops.mix(self.W, cur["x"], wx)  # W x_k
        if t == 0:  # x_1 = W x_0 - lr g_0
            finite = ops.combine(nxt["x"], [1.0, neg], [wx, cur["g"]])
        else:  # x_{k+1} = x_k + W x_k - (x_{k-1} + W x_{k-1}) / 2 - lr (g_k - g_{k-1})
            ops.combine(w, [1.0, 1.0, neg, lr], [cur["x"], wx, cur["g"], cur["g_prev"]], check=False)
            finite = ops.combine(nxt["x"], [1.0, -0.5, -0.5], [w, cur["x_prev"], cur["wx_prev"]])
        self._check_iterates(finite, t, nxt["x"])
        self._gradient(grad_fn, nxt["x"], nxt["g"], t + 1)
        # (copies through the backend, as launches that a failed deferred check freezes with the rest)
        ops.combine(nxt["wx_prev"], [1.0], [wx], check=False)
        self._carry_as(cur, nxt, {"x_prev": "x", "g_prev": "g"})
