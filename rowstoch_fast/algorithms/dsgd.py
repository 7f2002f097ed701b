"""DSGD over a row-stochastic network without correction (adapt-then-combine)."""

from __future__ import annotations

from ._base import Optimizer

__all__ = ["DSGD"]


class DSGD(Optimizer):
    r"""Decentralized SGD with a row-stochastic ``A`` and no correction.

    Implements (adapt then combine):

    .. math::

        x_{k+1} = A (x_k - \mathrm{lr}\, g(x_k))

    It converges to a neighbourhood of the minimiser of the **pi-weighted**
    problem ``sum_i pi_i f_i``, not of ``(1/n) sum_i f_i``: the bias that the
    Pull-Diag correction removes (shown in the tests and in ``rowstoch compare``).

    Parameters
    ----------
    A : MixingMatrix or array_like
        Row-stochastic (self loops not required).
    x0 : array_like, shape (d,), (n, d) or (reps, n, d)
    lr : float
    backend, check_finite, comm, partition
        As in :class:`~rowstoch_fast.PullDiagGT`.

    Examples
    --------
    >>> import numpy as np
    >>> from rowstoch_fast import DSGD, topology
    >>> A = topology.erdos_renyi(6, 0.5, seed=1)
    >>> b = np.arange(6.0)[:, None]
    >>> opt = DSGD(A, np.zeros(1), lr=0.001)
    >>> for _ in range(20000):
    ...     _ = opt.step(lambda X: X - b)
    >>> bool(abs(opt.x.mean() - A.pi @ b[:, 0]) < 0.05)  # the pi-weighted mean, not 2.5
    True
    """

    name = "dsgd"
    family = "decentralized gradient"
    order = 30
    bias = "pi-weighted"
    in_robustness = False  # (the robustness experiment's table: the tracking and push-sum methods, as published)
    state = ("x",)
    scratch = 2

    def __init__(self, A, x0, lr, backend="auto", *, check_finite=True, comm=None, partition=None):
        self._start(x0, {"A": A}, backend, check_finite, comm, partition, lr=lr)

    def _traffic_per_iteration(self):
        return [("A", 1, self._reps * self._d)]

    def _advance(self, grad_fn, cur, nxt, t):
        g, w = self._work
        g = self._gradient_read(grad_fn, cur["x"], g, t, checked_next=True)
        finite = self._ops.combine(w, [1.0, self._lr_coef()], [cur["x"], g])
        self._check_iterates(finite, t, w)
        self._ops.mix(self.A, w, nxt["x"])
