"""NIDS (Li, Shi & Yan 2019): network-independent step sizes over a doubly stochastic W."""

from __future__ import annotations

from ._base import Optimizer

__all__ = ["NIDS"]


class NIDS(Optimizer):
    r"""NIDS: an exact method whose step size does not depend on the network.

    Implements, with :math:`\tilde W = (I + W) / 2` and the usual first step:

    .. math::

        x_1 &= x_0 - \mathrm{lr}\, g(x_0) \\
        x_{k+2} &= \tilde W (2 x_{k+1} - x_k - \mathrm{lr}\, (g(x_{k+1}) - g(x_k)))

    Converges for ``lr < 2 / L`` on any connected undirected graph (the centralized method's bound). From its
    second step on, this is the recursion of :class:`~rowstoch_fast.ExactDiffusion` with the same
    ``W_tilde``: the two differ only in their first step (NIDS does not mix there; Exact Diffusion does).
    The first step sends nothing: :attr:`communication_rounds` and :meth:`traffic` count ``iteration - 1``
    rounds.

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
    Z. Li, W. Shi and M. Yan, "A decentralized proximal-gradient method with network independent step-sizes
    and separated convergence rates", IEEE Trans. Signal Process. 67(17), 2019.

    Examples
    --------
    >>> import numpy as np
    >>> from rowstoch_fast import NIDS, topology
    >>> W = topology.ring(6, directed=False, weights="metropolis")
    >>> b = np.arange(6.0)[:, None]
    >>> opt = NIDS(W, np.zeros(1), lr=0.5)
    >>> for _ in range(1000):
    ...     _ = opt.step(lambda X: X - b)
    >>> bool(np.allclose(opt.x, b.mean()))
    True
    """

    name = "nids"
    family = "primal-dual"
    order = 150
    exact = True
    matrices = ("W",)
    symmetric = True
    state = ("x", "g", "x_prev", "g_prev")
    scratch = 2
    silent_iterations = 1

    def __init__(self, W, x0, lr, backend="auto", *, check_finite=True, comm=None, partition=None):
        self._start(x0, {"W": W}, backend, check_finite, comm, partition, lr=lr)

    def _initialize(self, grad_fn):
        self._initial_gradient(grad_fn)

    def _advance(self, grad_fn, cur, nxt, t):
        ops, lr, neg = self._ops, self._lr_coef(1.0), self._lr_coef()
        z, wz = self._work
        if t == 0:  # x_1 = x_0 - lr g_0
            finite = ops.combine(nxt["x"], [1.0, neg], [cur["x"], cur["g"]])
        else:  # x_{k+1} = W_tilde z, z = 2 x_k - x_{k-1} - lr (g_k - g_{k-1})
            ops.combine(z, [2.0, -1.0, neg, lr], [cur["x"], cur["x_prev"], cur["g"], cur["g_prev"]], check=False)
            ops.mix(self.W, z, wz)
            finite = ops.combine(nxt["x"], [0.5, 0.5], [z, wz])
        self._check_iterates(finite, t, nxt["x"])
        self._gradient(grad_fn, nxt["x"], nxt["g"], t + 1)
        # (copies through the backend, as launches that a failed deferred check freezes with the rest)
        self._carry_as(cur, nxt, {"x_prev": "x", "g_prev": "g"})
