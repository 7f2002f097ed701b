"""DGD (Nedic & Ozdaglar 2009) over an undirected network's doubly stochastic W, combine-then-adapt."""

from __future__ import annotations

from ._base import Optimizer

__all__ = ["DGD"]


class DGD(Optimizer):
    r"""Decentralized gradient descent with a doubly stochastic ``W`` (combine then adapt).

    Implements:

    .. math::

        x_{k+1} = W x_k - \mathrm{lr}\, g(x_k)

    With a constant step it reaches a neighbourhood of the minimiser of ``(1/n) sum_i f_i`` of size O(lr)
    (Yuan, Ling & Yin 2016); the exact methods of an undirected network (:class:`~rowstoch_fast.EXTRA`,
    :class:`~rowstoch_fast.NIDS`, :class:`~rowstoch_fast.DIGing`) remove that error.

    Parameters
    ----------
    W : MixingMatrix or array_like
        Doubly stochastic (an undirected graph's, e.g.
        ``topology.ring(n, directed=False, weights="metropolis")`` or ``mixing.metropolis_weights(A)``); a
        matrix whose rows or columns do not sum to 1 is refused, naming the first.
    x0 : array_like, shape (d,), (n, d) or (reps, n, d)
    lr : float
    backend, check_finite, comm, partition
        As in :class:`~rowstoch_fast.PullDiagGT`.

    Examples
    --------
    >>> import numpy as np
    >>> from rowstoch_fast import DGD, topology
    >>> W = topology.ring(6, directed=False, weights="metropolis")
    >>> b = np.arange(6.0)[:, None]
    >>> opt = DGD(W, np.zeros(1), lr=0.01)
    >>> for _ in range(3000):
    ...     _ = opt.step(lambda X: X - b)
    >>> bool(abs(opt.x.mean() - b.mean()) < 1e-6), bool(np.ptp(opt.x) < 0.2)  # O(lr) disagreement
    (True, True)
    """

    name = "dgd"
    family = "decentralized gradient"
    order = 110
    matrices = ("W",)
    state = ("x",)
    scratch = 2

    def __init__(self, W, x0, lr, backend="auto", *, check_finite=True, comm=None, partition=None):
        self._start(x0, {"W": W}, backend, check_finite, comm, partition, lr=lr)

    def _advance(self, grad_fn, cur, nxt, t):
        g, wx = self._work
        g = self._gradient_read(grad_fn, cur["x"], g, t, checked_next=True)
        self._ops.mix(self.W, cur["x"], wx)
        finite = self._ops.combine(nxt["x"], [1.0, self._lr_coef()], [wx, g])
        self._check_iterates(finite, t, nxt["x"])
