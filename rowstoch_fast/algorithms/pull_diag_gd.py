"""Pull-Diag gradient descent (Mai & Abed 2016): DGD over a row-stochastic network, corrected by Diag(A^k)."""

from __future__ import annotations

import numpy as np

from .._checks import check_int, check_tracker
from ..network import weights_of
from ._base import Optimizer
from ._corrections import tracker_row

__all__ = ["PullDiagGD"]


class PullDiagGD(Optimizer):
    r"""Pull-Diag-GD: decentralized gradient descent with the Pull-Diag correction.

    Implements, with :math:`D_k = \mathrm{Diag}(A^k)` (:math:`D_0 = I`):

    .. math::

        x_{k+1} = A x_k - \mathrm{lr}\, D_k^{-1} g(x_k)

    With a constant ``lr`` it converges to an ``O(lr)`` neighbourhood of the
    minimiser of ``(1/n) sum_i f_i`` (not to it: no gradient tracking) on a
    static network; over varying matrices ``D_k`` follows the product from
    iteration 0, as :class:`~rowstoch_fast.PullDiagGT`'s does, and the point
    it settles near is biased whatever ``lr``.

    Parameters
    ----------
    A : MixingMatrix or array_like
        Row-stochastic, with self loops for the exact ``D_k`` (else ValueError;
        ``tracker="perron"`` needs none).
    x0 : array_like, shape (d,), (n, d) or (reps, n, d)
    lr : float
    tracker : {"exact", "perron"}, default "exact"
    backend, check_finite, comm, partition
        As in :class:`~rowstoch_fast.PullDiagGT`.

    Examples
    --------
    >>> import numpy as np
    >>> from rowstoch_fast import PullDiagGD, topology
    >>> b = np.arange(4.0)[:, None]
    >>> opt = PullDiagGD(topology.ring(4), np.zeros(1), lr=0.01)
    >>> for _ in range(3000):
    ...     _ = opt.step(lambda X: X - b)
    >>> bool(abs(opt.x.mean() - b.mean()) < 0.05)
    True
    """

    name = "pull-diag-gd"
    family = "decentralized gradient (Pull-Diag)"
    state = ("x",)
    scratch = 1
    hyper = ("lr", "tracker")
    order = 20
    in_robustness = False  # (the robustness experiment's table: the tracking and push-sum methods, as published)

    @classmethod
    def default_lr(cls, n):
        """The paper's ``0.05 / n``, as for Pull-Diag-GT (its corrected gradient is about ``n`` times larger)."""
        return 0.05 / check_int(n, "n", minimum=1)

    def __init__(self, A, x0, lr, tracker="exact", backend="auto", *, check_finite=True, comm=None, partition=None):
        self._start(x0, {"A": A}, backend, check_finite, comm, partition, lr=lr, tracker=tracker)
        self._tracker = self._ops.tracker(weights_of(self.A), 1, tracker)

    def _check_hyper(self, lr, tracker):
        self.lr = self._check_lr(lr)
        check_tracker(tracker)
        return {"lr": self.lr, "tracker": tracker}

    def _traffic_per_iteration(self):
        return [("A", 1, self._reps * self._d)]

    def _advance(self, grad_fn, cur, nxt, t):
        g = self._gradient_read(grad_fn, cur["x"], self._work[0], t, checked_next=True)
        self._ops.mix(self.A, cur["x"], nxt["x"])
        step = tracker_row(self, t, -self.lr) if np.ndim(self.lr) == 0 else (  # -lr D_t^{-1}, one value per node
            tracker_row(self, t, 1.0)[:, None] * self._lr_coef())  # (one rate per replica: per node and column)
        finite = self._ops.combine(nxt["x"], [1.0, step], [nxt["x"], g])
        self._check_iterates(finite, t, nxt["x"])
