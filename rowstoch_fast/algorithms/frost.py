"""FROST (Xin, Xi & Khan 2019): gradient tracking over a row-stochastic network, non-ATC form."""

from __future__ import annotations

from .pull_diag_gt import PullDiagGT

__all__ = ["FROST"]


class FROST(PullDiagGT):
    r"""FROST: Fast Row-stochastic Optimization with uncoordinated STep-sizes.

    Implements, with :math:`D_k = \mathrm{Diag}(A^k)` (:math:`D_0 = I`) and :math:`y_0 = g(x_0)`:

    .. math::

        x_{k+1} &= A x_k - \mathrm{lr}\, y_k \\
        y_{k+1} &= A y_k + D_{k+1}^{-1} g(x_{k+1}) - D_k^{-1} g(x_k)

    It is :class:`PullDiagGT` with ``form="frost"`` and one gossip round: the
    same tracker, the same backends. ``lr`` may be one step size per node
    (array of shape ``(n,)``, the "uncoordinated step sizes"). Exact on a
    static network only, as :class:`PullDiagGT` (over varying matrices
    :math:`D_k` follows the product from iteration 0).

    Parameters
    ----------
    A : MixingMatrix or array_like
        Row-stochastic. ``D_k`` needs positive diagonals of ``A^k``: without
        self loops the exact tracker raises ValueError (use
        ``tracker="perron"``).
    x0, backend, check_finite, comm, partition
        As in :class:`PullDiagGT`.
    lr : float or array_like of shape (n,)
    tracker : {"exact", "perron"}, default "exact"

    Examples
    --------
    >>> import numpy as np
    >>> from rowstoch_fast import FROST, topology
    >>> b = np.arange(6.0)[:, None]
    >>> opt = FROST(topology.ring(6), np.zeros(1), lr=0.05)
    >>> for _ in range(2000):
    ...     _ = opt.step(lambda X: X - b)
    >>> bool(np.allclose(opt.x, b.mean()))
    True
    """

    name = "frost"
    family = "gradient tracking (row-stochastic)"
    state = ("x", "y", "g")
    scratch = 1
    hyper = ("lr", "tracker")
    saved_options = ()  # (its form is always "frost")
    form = "frost"  # (what the constructor sets: check_hyper's probe reads it)
    multi_round = False
    order = 10
    exact = True
    mg_listed = False

    def __init__(self, A, x0, lr, tracker="exact", backend="auto", *, check_finite=True, comm=None, partition=None):
        super().__init__(A, x0, lr, 1, tracker, backend, check_finite=check_finite, comm=comm, partition=partition,
                         form="frost")

    def gradient_sum_tracker(self, gradient):
        """None: FROST's ``y`` is mixed before its correction is added, so eq. 9's identity is not its own."""
        return None

    def _check_hyper(self, lr, rounds=1, tracker="exact"):  # (rounds: always one; the default tells check_hyper)
        checked = super()._check_hyper(lr, rounds, tracker)
        return {"lr": checked["lr"], "tracker": checked["tracker"]}
