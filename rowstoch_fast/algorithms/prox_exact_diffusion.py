"""Proximal Exact Diffusion (Alghunaim, Ryu, Yuan & Sayed 2021): Exact Diffusion for ``(1/n) sum_i f_i + r``."""

from __future__ import annotations

from ._base import Optimizer
from .pg_extra import PGEXTRA

__all__ = ["ProxExactDiffusion"]


class ProxExactDiffusion(Optimizer):
    r"""Exact Diffusion with a proximal step, as the unified primal-dual algorithm (PUDA) of Alghunaim et al.
    writes it with ``A = W_bar = (I + W) / 2``, ``B^2 = I - W_bar`` and ``C = 0``.

    PUDA's ``z_k = x_{k-1} - lr g(x_{k-1}) - B y_{k-1}``, ``y_k = y_{k-1} + B z_k``, ``x_k = prox(A z_k)``, with
    ``q = B y`` in place of the dual ``y`` (no square root of a matrix is formed), :math:`q_0 = 0` and
    :math:`\bar W = (I + W) / 2`:

    .. math::

        z_{k+1} &= x_k - \mathrm{lr}\, g(x_k) - q_k \\
        q_{k+1} &= q_k + z_{k+1} - \bar W z_{k+1} \\
        x_{k+1} &= \mathrm{prox}(\bar W z_{k+1}), \qquad \mathrm{prox} = \mathrm{prox}_{\mathrm{lr}\, r}

    Without a regularizer this is :class:`~rowstoch_fast.ExactDiffusion` (eliminating ``q`` gives its recursion
    ``x_{k+2} = W_bar (2 x_{k+1} - x_k - lr (g(x_{k+1}) - g(x_k)))`` and first step ``x_1 = W_bar (x_0 - lr
    g(x_0))``; a test checks it iterate by iterate). One round per iteration. Linear convergence to the composite
    minimiser for strongly convex ``f`` and ``lr < 2 / L`` (Theorem 1 of the reference, with a common ``r``).

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
    S. A. Alghunaim, E. K. Ryu, K. Yuan and A. H. Sayed, "Decentralized proximal gradient algorithms with linear
    convergence rates", IEEE Trans. Automat. Control 66(6), 2021.

    Examples
    --------
    >>> import numpy as np
    >>> from rowstoch_fast import ProxExactDiffusion, topology
    >>> from rowstoch_fast.composite import L1
    >>> W = topology.ring(6, directed=False, weights="metropolis")
    >>> b = np.arange(6.0)[:, None]
    >>> opt = ProxExactDiffusion(W, np.zeros(1), lr=0.5, regularizer=L1(1.0))
    >>> for _ in range(1000):
    ...     _ = opt.step(lambda X: X - b)
    >>> bool(np.allclose(opt.x, 1.5))
    True
    """

    name = "prox-exact-diffusion"
    family = "proximal primal-dual"
    order = 172
    exact = True
    composite = True
    matrices = ("W",)
    symmetric = True
    state = ("x", "g", "q")
    hyper = ("lr", "regularizer")
    scratch = 3

    def __init__(self, W, x0, lr, backend="auto", *, regularizer=None, check_finite=True, comm=None,
                 partition=None):
        self._start(x0, {"W": W}, backend, check_finite, comm, partition, lr=lr, regularizer=regularizer)

    _check_hyper = PGEXTRA._check_hyper

    def _initialize(self, grad_fn):
        self._initial_gradient(grad_fn)  # (q_0 = 0: the blocks start at zero)

    def _advance(self, grad_fn, cur, nxt, t):
        ops = self._ops
        z, wz, v = self._work
        finite = ops.combine(z, [1.0, self._lr_coef(), -1.0], [cur["x"], cur["g"], cur["q"]])  # z_{k+1}
        self._check_iterates(finite, t, z)
        ops.mix(self.W, z, wz)
        ops.combine(nxt["q"], [1.0, 0.5, -0.5], [cur["q"], z, wz], check=False)  # q + (I - W_bar) z
        finite = ops.combine(v, [0.5, 0.5], [z, wz])  # W_bar z_{k+1}
        self._check_iterates(finite, t, v)
        self._prox(v, nxt["x"], t)
        self._gradient(grad_fn, nxt["x"], nxt["g"], t + 1)
