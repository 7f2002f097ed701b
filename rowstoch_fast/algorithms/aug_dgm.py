"""AugDGM / ATC-DIGing (Xu, Zhu, Soh & Xie 2015; Nedic, Olshevsky, Shi & Uribe 2017): adapt-then-combine
gradient tracking over a doubly stochastic W."""

from __future__ import annotations

from ._base import Optimizer

__all__ = ["AugDGM"]


class AugDGM(Optimizer):
    r"""AugDGM (ATC-DIGing): gradient tracking with both updates adapted before they are combined.

    Implements, with :math:`y_0 = g(x_0)`:

    .. math::

        x_{k+1} &= W (x_k - \mathrm{lr}\, y_k) \\
        y_{k+1} &= W (y_k + g(x_{k+1}) - g(x_k))

    Exact like :class:`~rowstoch_fast.DIGing`, and stable at larger steps (the adapt-then-combine form); two
    exchanges per iteration, one after the other (``y`` needs ``g(x_{k+1})``): one communication round, as the
    paper counts Pull-Diag-GT's (:attr:`~rowstoch_fast.algorithms.Optimizer.communication_rounds`); :meth:`traffic`
    counts both messages.

    Parameters
    ----------
    W : MixingMatrix or array_like
        Doubly stochastic (see :class:`~rowstoch_fast.DGD`).
    x0 : array_like, shape (d,), (n, d) or (reps, n, d)
    lr : float
    backend, check_finite, comm, partition
        As in :class:`~rowstoch_fast.PullDiagGT`.

    Examples
    --------
    >>> import numpy as np
    >>> from rowstoch_fast import AugDGM, topology
    >>> W = topology.ring(6, directed=False, weights="metropolis")
    >>> b = np.arange(6.0)[:, None]
    >>> opt = AugDGM(W, np.zeros(1), lr=0.2)
    >>> for _ in range(1000):
    ...     _ = opt.step(lambda X: X - b)
    >>> bool(np.allclose(opt.x, b.mean()))
    True
    """

    name = "aug-dgm"
    family = "gradient tracking"
    order = 130
    exact = True
    matrices = ("W",)
    state = ("x", "y", "g")
    scratch = 1

    def __init__(self, W, x0, lr, backend="auto", *, check_finite=True, comm=None, partition=None):
        self._start(x0, {"W": W}, backend, check_finite, comm, partition, lr=lr)

    def _traffic_per_iteration(self):
        return [("W", 2, self._reps * self._d)]

    def _initialize(self, grad_fn):
        self._initial_gradient(grad_fn, tracker="y")

    def _advance(self, grad_fn, cur, nxt, t):
        ops, w = self._ops, self._work[0]
        finite = ops.combine(w, [1.0, self._lr_coef()], [cur["x"], cur["y"]])
        self._check_iterates(finite, t, w)
        ops.mix(self.W, w, nxt["x"])  # x_{k+1} = W (x_k - lr y_k)
        self._gradient(grad_fn, nxt["x"], nxt["g"], t + 1)
        finite = ops.combine(w, [1.0, 1.0, -1.0], [cur["y"], nxt["g"], cur["g"]])
        self._check_iterates(finite, t, w)
        ops.mix(self.W, w, nxt["y"])  # y_{k+1} = W (y_k + g_{k+1} - g_k)
