"""Exact Diffusion (Yuan, Ying, Zhao & Sayed 2019) over a doubly stochastic W."""

from __future__ import annotations

from ._base import Optimizer

__all__ = ["ExactDiffusion"]


class ExactDiffusion(Optimizer):
    r"""Exact Diffusion: adapt, correct, combine, with ``W_bar = (I + W) / 2``.

    Implements, with :math:`\bar W = (I + W) / 2` and :math:`\psi_0 = x_0`:

    .. math::

        \psi_{k+1} &= x_k - \mathrm{lr}\, g(x_k) \qquad \text{(adapt)} \\
        \phi_{k+1} &= \psi_{k+1} + x_k - \psi_k \qquad \text{(correct)} \\
        x_{k+1} &= \bar W \phi_{k+1} \qquad \text{(combine)}

    Eliminating ``psi`` gives, from the second step on,
    ``x_{k+2} = W_bar (2 x_{k+1} - x_k - lr (g(x_{k+1}) - g(x_k)))``: the recursion of
    :class:`~rowstoch_fast.NIDS` with ``W_tilde = W_bar``. The two coincide there and differ in their first
    step, ``x_1 = W_bar (x_0 - lr g(x_0))`` here and ``x_0 - lr g(x_0)`` for NIDS (a test checks both).

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
    K. Yuan, B. Ying, X. Zhao and A. H. Sayed, "Exact diffusion for distributed optimization and learning,
    Part I: Algorithm development", IEEE Trans. Signal Process. 67(3), 2019.

    Examples
    --------
    >>> import numpy as np
    >>> from rowstoch_fast import ExactDiffusion, topology
    >>> W = topology.ring(6, directed=False, weights="metropolis")
    >>> b = np.arange(6.0)[:, None]
    >>> opt = ExactDiffusion(W, np.zeros(1), lr=0.5)
    >>> for _ in range(1000):
    ...     _ = opt.step(lambda X: X - b)
    >>> bool(np.allclose(opt.x, b.mean()))
    True
    """

    name = "exact-diffusion"
    family = "primal-dual"
    order = 160
    exact = True
    matrices = ("W",)
    symmetric = True
    state = ("x", "g", "psi")
    scratch = 2

    def __init__(self, W, x0, lr, backend="auto", *, check_finite=True, comm=None, partition=None):
        self._start(x0, {"W": W}, backend, check_finite, comm, partition, lr=lr)

    def _initialize(self, grad_fn):
        self._initial_gradient(grad_fn)
        self._cur["psi"][...] = self._cur["x"]

    def _advance(self, grad_fn, cur, nxt, t):
        ops = self._ops
        phi, wphi = self._work
        finite = ops.combine(nxt["psi"], [1.0, self._lr_coef()], [cur["x"], cur["g"]])  # psi_{k+1}
        self._check_iterates(finite, t, nxt["psi"])
        ops.combine(phi, [1.0, 1.0, -1.0], [nxt["psi"], cur["x"], cur["psi"]], check=False)  # phi_{k+1}
        ops.mix(self.W, phi, wphi)
        finite = ops.combine(nxt["x"], [0.5, 0.5], [phi, wphi])  # x_{k+1} = (phi + W phi) / 2
        self._check_iterates(finite, t, nxt["x"])
        self._gradient(grad_fn, nxt["x"], nxt["g"], t + 1)
