"""DLM (Ling, Shi, Wu & Ribeiro 2015): decentralized linearized ADMM over an undirected network."""

from __future__ import annotations

from .._checks import check_positive_float
from ._base import Optimizer

__all__ = ["DLM"]


class DLM(Optimizer):
    r"""DLM: the decentralized ADMM with its local problem linearized, a first-order primal-dual method.

    Implements, with the weighted Laplacian ``L = I - W`` (``(L x)_i = sum_j w_ij (x_i - x_j)`` in exact
    arithmetic: each link's consensus constraint penalised by ``c w_ij``; computed as ``x - W x``), the dual
    :math:`\alpha_0 = 0` and a uniform step ``lr``:

    .. math::

        s_0 &= L x_0 \qquad \text{(iteration 0: a communication round, no gradient)} \\
        x_{k+1} &= x_k - \mathrm{lr}\, (g(x_k) + c\, s_k + \alpha_k) \\
        s_{k+1} &= L x_{k+1} \qquad \text{(one round)} \\
        \alpha_{k+1} &= \alpha_k + c\, s_{k+1}

    The reference's update ``x_{k+1} = x_k - (g + c L x_k + alpha_k) / (2 c d_i + rho)`` with the unweighted
    Laplacian is this one with ``L`` scaled and a step ``lr = 1 / (2 c d_i + rho)``: on a regular graph with
    uniform weights, ``rho = 1 / lr - 2 c d``. decent-bench's DLM (``mu``, ``rho``, unweighted Laplacian) is
    this class on ``W = I - L_unweighted / kappa`` with ``c = kappa rho`` (and ``lr = mu``). Converges to the
    minimiser of ``(1/n) sum_i f_i`` for strongly convex ``f_i`` and ``lr`` small enough (Theorem 1: linearly);
    iteration 0 sends ``x_0`` and computes no gradient (ask/tell's first ``ask`` runs it). ``x - W x`` is not exactly
    0 at consensus in floating point (its rounding scales with ``|x|``), and the dual accumulates it: the models
    settle about 1e-13 from the minimiser (measured: 2.3e-14 after 1,000 iterations, 1.3e-13 after 20,000, on an
    8-node ring; bench/RESULTS.md section 23), where a sum of differences would stay at 1e-15.

    Parameters
    ----------
    W : MixingMatrix or array_like
        Doubly stochastic and symmetric (see :class:`~rowstoch_fast.DGD`).
    x0 : array_like, shape (d,), (n, d) or (reps, n, d)
    lr : float
        The step ``mu`` (``1 / (2 c d_i + rho)`` of the reference).
    penalty : float, default 1.0
        ``c > 0``, the augmented Lagrangian's penalty on each link (times its weight ``w_ij``).
    backend, check_finite, comm, partition
        As in :class:`~rowstoch_fast.PullDiagGT`.

    References
    ----------
    Q. Ling, W. Shi, G. Wu and A. Ribeiro, "DLM: Decentralized linearized alternating direction method of
    multipliers", IEEE Trans. Signal Process. 63(15), 2015.

    Examples
    --------
    >>> import numpy as np
    >>> from rowstoch_fast import DLM, topology
    >>> W = topology.ring(6, directed=False, weights="metropolis")
    >>> b = np.arange(6.0)[:, None]
    >>> opt = DLM(W, np.zeros(1), lr=0.3, penalty=1.0)
    >>> for _ in range(2000):
    ...     _ = opt.step(lambda X: X - b)
    >>> bool(np.allclose(opt.x, b.mean()))
    True
    """

    name = "dlm"
    family = "ADMM (linearized)"
    order = 180
    exact = True
    matrices = ("W",)
    symmetric = True
    state = ("x", "alpha", "s")
    hyper = ("lr", "penalty")
    scratch = 2

    def __init__(self, W, x0, lr, backend="auto", *, penalty=1.0, check_finite=True, comm=None, partition=None):
        self._start(x0, {"W": W}, backend, check_finite, comm, partition, lr=lr, penalty=penalty)

    def _check_hyper(self, lr, penalty=1.0):
        self.lr = self._check_lr(lr)
        self.penalty = check_positive_float(penalty, "penalty")
        return {"lr": self.lr, "penalty": self.penalty}

    gradient_free_iterations = 1  # (iteration 0 sends x_0 and computes no gradient)

    def _laplacian(self, src, out):
        """``out <- L src = src - W src`` (one round)."""
        (w, _) = self._work
        self._ops.mix(self.W, src, w)
        return self._ops.combine(out, [1.0, -1.0], [src, w])

    def _advance(self, grad_fn, cur, nxt, t):
        ops, c = self._ops, self.penalty
        if t == 0:  # s_0 = L x_0; x and alpha (0) as they are
            finite = self._laplacian(cur["x"], nxt["s"])
            self._check_iterates(finite, t, nxt["s"])
            self._carry(cur, nxt, "x", "alpha")
            return
        (_, g) = self._work
        g = self._gradient_read(grad_fn, cur["x"], g, t, checked_next=True)
        finite = ops.combine(nxt["x"], [1.0, self._lr_coef(), self._lr_coef(-c), self._lr_coef()],
                             [cur["x"], g, cur["s"], cur["alpha"]])
        self._check_iterates(finite, t, nxt["x"])
        self._laplacian(nxt["x"], nxt["s"])
        finite = ops.combine(nxt["alpha"], [1.0, c], [cur["alpha"], nxt["s"]])
        self._check_iterates(finite, t, nxt["alpha"])
