"""Decentralized ADMM (Shi, Ling, Yuan, Wu & Yin 2014): each node solves its local problem exactly, through its
local proximal operator."""

from __future__ import annotations

import numpy as np

from ._base import Optimizer

__all__ = ["ADMM"]


class ADMM(Optimizer):
    r"""Decentralized (consensus) ADMM: an exact local proximal step per iteration and a dual update.

    The reference's iteration, ``x_i^{k+1} = argmin_x f_i(x) + c d_i ||x||^2 - x^T (c (d_i x_i^k + sum_j
    x_j^k) - alpha_i^k)``, ``alpha_i^{k+1} = alpha_i^k + c (d_i x_i^{k+1} - sum_j x_j^{k+1})``, with each link
    weighted by ``w_ij`` (``d_i = sum_{j != i} w_ij = 1 - w_ii``, ``sum_j w_ij x_j``), ``c = 1 / (2 lr)`` and the
    scaled dual ``beta = alpha / c`` (``beta_0 = 0``), is:

    .. math::

        u_0 &= W x_0 \qquad \text{(iteration 0: a communication round, no prox)} \\
        x_{k+1} &= \mathrm{prox}_{t_i f_i}\left(\frac{u_k + (1 - 2 w_{ii}) x_k - \beta_k}{2 d_i}\right),
            \qquad t_i = \mathrm{lr} / d_i \\
        u_{k+1} &= W x_{k+1} \qquad \text{(one round)} \\
        \beta_{k+1} &= \beta_k + x_{k+1} - u_{k+1}

    ``prox_{t f_i}(v) = argmin_x f_i(x) + ||x - v||^2 / (2t)`` comes from the oracle: :meth:`step` takes an
    objective's oracle (``objective.oracle()``, whose ``prox(V, step)`` is
    :meth:`~rowstoch_fast.objectives.Objective.prox_local`: closed forms for ``Quadratic`` and ``LeastSquares``,
    Newton's method for ``LogisticL2``), or any object with such a ``prox``. No gradient is taken (the harness's
    ``samples`` axis counts each local solve as one pass over the node's data, ``samples_per_node``; a Newton
    solve takes several). Converges to the
    minimiser of ``(1/n) sum_i f_i`` for convex ``f_i`` and any ``lr > 0`` (linearly for strongly convex ones,
    Theorem 3.2). decent-bench's ``ADMM`` (penalty ``rho``, relaxation 0.5, the unweighted Laplacian) is the
    reference's with ``c = rho / 2``: this class on ``W = I - L / kappa`` with ``lr = 1 / (kappa rho)``; its step
    ``k`` is this class's iteration ``k + 1`` from ``x0 = 0`` (its first ``x`` ignores ``x0``; measured equal to
    2.2e-15 over 1,000 iterations: bench/decent_bench_vr.py).

    Parameters
    ----------
    W : MixingMatrix or array_like
        Doubly stochastic and symmetric (see :class:`~rowstoch_fast.DGD`), no node with ``w_ii = 1``.
    x0 : array_like, shape (d,), (n, d) or (reps, n, d)
    lr : float
        ``1 / (2c)``: the local problems' proximal step is ``lr / d_i``.
    backend, check_finite, comm, partition
        As in :class:`~rowstoch_fast.PullDiagGT`.

    References
    ----------
    W. Shi, Q. Ling, K. Yuan, G. Wu and W. Yin, "On the linear convergence of the ADMM in decentralized consensus
    optimization", IEEE Trans. Signal Process. 62(7), 2014.

    Examples
    --------
    >>> import numpy as np
    >>> from rowstoch_fast import ADMM, topology
    >>> from rowstoch_fast.objectives import LeastSquares
    >>> f = LeastSquares.synthetic(n=6, samples_per_node=8, d=3, seed=0)
    >>> opt = ADMM(topology.ring(6, directed=False, weights="metropolis"), f.x0(), lr=0.5)
    >>> oracle = f.oracle()
    >>> for _ in range(300):
    ...     _ = opt.step(oracle)
    >>> bool(np.abs(opt.x - f.optimum().x).max() < 1e-10)
    True
    """

    name = "admm"
    family = "ADMM"
    order = 179
    exact = True
    matrices = ("W",)
    symmetric = True
    state = ("x", "beta", "u")
    scratch = 1
    #: :meth:`step` takes an oracle with ``prox(V, step)`` (the objectives' ``oracle()``), not gradients.
    gradients = "prox"
    gradient_free_iterations = 1  # (iteration 0 sends x_0)
    stable_for_any_lr = True

    def __init__(self, W, x0, lr, backend="auto", *, check_finite=True, comm=None, partition=None):
        self._start(x0, {"W": W}, backend, check_finite, comm, partition, lr=lr)
        degree = _degree(self.W)  # (of the matrix under any layer or schedule: one wrapped in losses or delays, or
        # a schedule whose first matrix left a node alone, had divided by d_i = 0 and blamed the rate)
        if degree is not None and (degree <= 0).any():
            where = "a single node has none" if degree.size == 1 else \
                f"node {int(np.argmax(degree <= 0))} has w_ii = 1 in its matrix"
            raise ValueError(f"ADMM needs every node to have a neighbour (d_i = 1 - w_ii > 0, its local problems' "
                             f"weight): {where}")
        self._degree = degree

    @classmethod
    def applies_to(cls, A):
        """As every undirected network's method, where no node is without a neighbour (``d_i = 1 - w_ii > 0``):
        ``rowstoch compare --n 1`` had ended in ADMM's refusal, its default list taking it."""
        if not super().applies_to(A):
            return False
        degree = _degree(A)
        return degree is None or bool((degree > 0).all())

    @classmethod
    def takes_objective(cls, objective):
        """Objectives with a local proximal operator (``has_local_prox``), without a regularizer."""
        return bool(getattr(objective, "has_local_prox", False)) and getattr(objective, "regularizer", None) is None

    def _oracle(self, grad_fn):
        if not callable(getattr(grad_fn, "prox", None)):
            raise TypeError(f"ADMM steps with an oracle that has prox(V, step) (an objective's oracle(): Quadratic, "
                            f"LeastSquares, LogisticL2); got {type(grad_fn).__name__}")
        return grad_fn

    def _local_degree(self):
        """``d_i`` of this process's rows (a time-varying W: that of its first matrix)."""
        local = self._ops.local_nodes
        return self._degree if local is None else self._degree[local]

    def samples_drawn(self, batch=1):
        """One pass over the node's data per local solve (``samples_per_node`` of the oracle's objective, else
        ``batch``), none at iteration 0."""
        return max(0, self.iteration - 1) * (self.__dict__.get("_pass") or batch)

    def _advance(self, grad_fn, cur, nxt, t):
        ops = self._ops
        if t == 0:  # u_0 = W x_0
            ops.mix(self.W, cur["x"], nxt["u"])
            self._carry(cur, nxt, "x", "beta")
            return
        oracle = self._oracle(grad_fn)
        self._pass = getattr(getattr(oracle, "objective", None), "samples_per_node", None)
        (v,) = self._work
        d = self._local_degree()
        half = ops.vector(0.5 / d)
        finite = ops.combine(v, [half, ops.vector((1.0 - 2.0 * (1.0 - d)) * 0.5 / d), ops.vector(-0.5 / d)],
                             [cur["u"], cur["x"], cur["beta"]])
        self._check_iterates(finite, t, v)
        lr = self.lr
        step = (np.reshape(lr, (-1, 1)) if np.ndim(lr) else lr) / d  # (reps, rows) or (rows,)
        def local_prox(V):
            return oracle.prox(V, step)
        local_prox.call_kind = "local_prox"
        self._gradient(local_prox, v, nxt["x"], t)  # x_{k+1} = prox_{t f}(v)
        ops.mix(self.W, nxt["x"], nxt["u"])
        finite = ops.combine(nxt["beta"], [1.0, 1.0, -1.0], [cur["beta"], nxt["x"], nxt["u"]])
        self._check_iterates(finite, t, nxt["beta"])


def _degree(W):
    """``d_i = 1 - w_ii`` of the (first) matrix under ``W``'s layers or schedule, or None where it has none here."""
    from ..network import source_matrices

    try:
        first = source_matrices(W)[0]
    except (AttributeError, TypeError, ValueError, IndexError):  # (not a network: refused by the checks it meets)
        return None
    csr = getattr(first, "csr", None)
    return None if csr is None else 1.0 - csr.diagonal()
