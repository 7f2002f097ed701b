"""DIGing (Nedic, Olshevsky & Shi 2017; Qu & Li 2018): gradient tracking over a doubly stochastic W."""

from __future__ import annotations

from ._base import Optimizer

__all__ = ["DIGing"]


class DIGing(Optimizer):
    r"""DIGing: distributed inexact gradient tracking with a doubly stochastic ``W``.

    Implements, with :math:`y_0 = g(x_0)`:

    .. math::

        x_{k+1} &= W x_k - \mathrm{lr}\, y_k \\
        y_{k+1} &= W y_k + g(x_{k+1}) - g(x_k)

    ``1^T y_k = 1^T g(x_k)`` at every ``k``, so a constant step converges to the minimiser of
    ``(1/n) sum_i f_i`` itself (linearly for strongly convex ``f``). ``x_k`` and ``y_k`` travel in the same
    round.

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
    >>> from rowstoch_fast import DIGing, topology
    >>> W = topology.ring(6, directed=False, weights="metropolis")
    >>> b = np.arange(6.0)[:, None]
    >>> opt = DIGing(W, np.zeros(1), lr=0.1)
    >>> for _ in range(1000):
    ...     _ = opt.step(lambda X: X - b)
    >>> bool(np.allclose(opt.x, b.mean()))
    True
    """

    name = "diging"
    family = "gradient tracking"
    order = 120
    exact = True
    matrices = ("W",)
    state = ("x", "y", "g")

    def __init__(self, W, x0, lr, backend="auto", *, check_finite=True, comm=None, partition=None):
        self._start(x0, {"W": W}, backend, check_finite, comm, partition, lr=lr)

    def _traffic_per_iteration(self):
        return [("W", 1, 2 * self._reps * self._d)]  # x and y leave in the same round

    def _initialize(self, grad_fn):
        self._initial_gradient(grad_fn, tracker="y")

    def _advance(self, grad_fn, cur, nxt, t):
        ops = self._ops
        ops.mix(self.W, cur["x"], nxt["x"])
        finite = ops.combine(nxt["x"], [1.0, self._lr_coef()], [nxt["x"], cur["y"]])  # x_{k+1} = W x_k - lr y_k
        self._check_iterates(finite, t, nxt["x"])
        self._gradient(grad_fn, nxt["x"], nxt["g"], t + 1)
        ops.mix(self.W, cur["y"], nxt["y"])
        finite = ops.combine(nxt["y"], [1.0, 1.0, -1.0], [nxt["y"], nxt["g"], cur["g"]])
        self._check_iterates(finite, t, nxt["y"])
