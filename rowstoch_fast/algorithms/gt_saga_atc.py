"""GT-SAGA in the adapt-then-combine form (the variant decent-bench 0.3.0 computes), beside :class:`GTSAGA`."""

from __future__ import annotations

from .gt_saga import GTSAGA

__all__ = ["GTSAGAATC"]


class GTSAGAATC(GTSAGA):
    r"""GT-SAGA, adapt then combine: both the tracker and the model mix after their local update, and the table is
    refreshed from a second draw at the new point.

    With the table :math:`z_{il}` of every sample's gradient at :math:`x_0`, its mean, :math:`y_0 = 0` and
    :math:`g_{-1} = 0`, per iteration (one sample per node and draw, uniformly):

    .. math::

        g_k &= \nabla f_{is}(x_k) - z_{is} + \frac{1}{m} \sum_l z_{il}
            \qquad \text{(a fresh draw } s \text{ at } x_k \text{)} \\
        y_{k+1} &= W (y_k + g_k - g_{k-1}) \\
        x_{k+1} &= W (x_k - \mathrm{lr}\, y_{k+1}) \\
        z_{is'} &= \nabla f_{is'}(x_{k+1})
            \qquad \text{(a second fresh draw } s' \text{, the table refreshed)}

    :class:`GTSAGA` is the reference's form (``x+ = W x - lr y``, one draw, the estimate's own sample refreshing the
    table); this one takes two sample gradients per iteration, the estimate's and the refresh's, both unbiased, as
    decent-bench 0.3.0's GT-SAGA does (its batch of one). Exact, like GT-SAGA, for ``lr`` small enough. An
    iteration sends twice (``y`` is mixed before ``x`` uses it): one communication round, as for every
    adapt-then-combine tracker (:attr:`communication_rounds`); :meth:`traffic` counts both messages.

    Parameters
    ----------
    W, x0, lr, backend, check_finite, comm, partition
        As in :class:`~rowstoch_fast.GTSAGA` (a per-sample oracle to :meth:`step`).

    References
    ----------
    R. Xin, U. A. Khan and S. Kar, "Variance-reduced decentralized stochastic optimization with accelerated
    convergence", IEEE Trans. Signal Process. 68, 2020 (arXiv:1912.04230).

    Examples
    --------
    >>> import numpy as np
    >>> from rowstoch_fast import GTSAGAATC, topology
    >>> from rowstoch_fast.objectives import LeastSquares
    >>> f = LeastSquares.synthetic(n=6, samples_per_node=8, d=3, seed=0)
    >>> opt = GTSAGAATC(topology.ring(6, directed=False, weights="metropolis"), f.x0(), lr=0.02)
    >>> oracle = f.oracle(seed=1)
    >>> for _ in range(4000):
    ...     _ = opt.step(oracle)
    >>> bool(np.abs(opt.x - f.optimum().x).max() < 1e-8)
    True
    """

    name = "gt-saga-atc"
    order = 124

    def _traffic_per_iteration(self):
        return [("W", 2, self._reps * self._d)]  # (y, then x: d values each)

    def samples_drawn(self, batch=1):
        """Two sample gradients per iteration, after the ``m`` of the table."""
        return (0 if self._table is None else self._table.shape[0]) + 2 * self.iteration

    def _initialize(self, grad_fn):
        super()._initialize(grad_fn)
        self._cur["g"][...] = 0.0  # (g_{-1} = 0, y_0 = 0)
        self._cur["y"][...] = 0.0

    def _advance(self, grad_fn, cur, nxt, t):
        ops, oracle = self._ops, self._oracle(grad_fn)
        fresh, old = self._work
        idx = self._sampled(oracle, cur["x"], fresh, t)  # grad f_is(x_k)
        ops.take_samples(self._table, idx, old)  # z_is
        finite = ops.combine(nxt["g"], [1.0, -1.0, 1.0], [fresh, old, cur["mean"]])  # g_k
        self._check_iterates(finite, t, nxt["g"])
        ops.combine(old, [1.0, 1.0, -1.0], [cur["y"], nxt["g"], cur["g"]], check=False)
        ops.mix(self.W, old, nxt["y"])  # y_{k+1} = W (y_k + g_k - g_{k-1})
        finite = ops.combine(nxt["x"], [1.0, self._lr_coef()], [cur["x"], nxt["y"]])  # (checked where it stays:
        self._check_iterates(finite, t, nxt["x"])  # a deferred check reads its node there)
        ops.mix(self.W, nxt["x"], old)
        ops.combine(nxt["x"], [1.0], [old], check=False)  # x_{k+1} = W (x_k - lr y_{k+1})
        idx2 = self._sampled(oracle, nxt["x"], fresh, t + 1)  # grad f_is'(x_{k+1}): the refresh
        ops.take_samples(self._table, idx2, old)
        self._move_mean(cur, nxt, fresh, old, t)
        ops.put_samples(self._table, idx2, fresh)  # (last: a failed step leaves the table as it was)
