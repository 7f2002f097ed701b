"""Centralized (parallel) SGD: the exact average of the n gradients every step."""

from __future__ import annotations

import numpy as np

from .._checks import check_int
from ._base import Optimizer

__all__ = ["CentralizedSGD"]


class CentralizedSGD(Optimizer):
    r"""Parallel SGD with exact averaging: the ideal that linear speedup is measured against.

    Implements, with every node holding the same model :math:`x` (:math:`x_0`: the
    average of the rows of ``x0``):

    .. math::

        x_{k+1} = x_k - \mathrm{lr}\, \frac{1}{n} \sum_i g_i(x_k)

    Each step is one all-reduce (counted as one communication round; its
    traffic as ``2 (n - 1)`` messages, a reduce and a broadcast).

    Parameters
    ----------
    n : int
        Number of nodes (workers).
    x0 : array_like, shape (d,), (n, d) or (reps, n, d)
    lr : float
    backend, check_finite, comm, partition
        As in :class:`~rowstoch_fast.PullDiagGT`.

    Examples
    --------
    >>> import numpy as np
    >>> from rowstoch_fast import CentralizedSGD
    >>> b = np.arange(4.0)[:, None]
    >>> opt = CentralizedSGD(4, np.zeros(1), lr=0.5)
    >>> for _ in range(60):
    ...     _ = opt.step(lambda X: X - b)
    >>> bool(np.allclose(opt.x, 1.5))
    True
    """

    name = "centralized"
    family = "baseline (exact averaging)"
    order = 90
    exact = True
    matrices = ()
    state = ("x",)
    scratch = 1
    hyper = ("n", "lr")

    def __init__(self, n, x0, lr, backend="auto", *, check_finite=True, comm=None, partition=None):
        self._start(x0, {}, backend, check_finite, comm, partition, n=n, lr=lr)

    def _check_hyper(self, n, lr):
        self.lr = self._check_lr(lr)
        return {"n": check_int(n, "n", minimum=1), "lr": self.lr}

    @classmethod
    def problem_matrices(cls, A):
        return {"n": A.n}

    def _traffic_per_iteration(self):
        return [(2 * (self.n - 1), 1, self._reps * self._d)]  # links, not a matrix: a reduce and a broadcast

    def _initialize(self, grad_fn):
        x = self._cur["x"]
        x[...] = self._ops.sum_rows(x) / self.n

    def _advance(self, grad_fn, cur, nxt, t):
        g = self._gradient_read(grad_fn, cur["x"], self._work[0], t)
        mean = self._ops.sum_rows(g) / self.n  # the all-reduce
        with np.errstate(over="ignore", invalid="ignore"):  # reported as DivergenceError below
            finite = self._ops.copy_in(nxt["x"], cur["x"] - self._lr_coef(1.0) * mean[None, :])  # a GPU defers the check
        self._check_iterates(finite, t, nxt["x"])
