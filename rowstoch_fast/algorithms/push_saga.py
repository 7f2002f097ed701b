"""Push-SAGA (Qureshi, Xin, Kar & Khan 2022): SAGA's variance-reduced gradients, gradient tracking and push-sum over
a column-stochastic C, for finite sums on directed graphs."""

from __future__ import annotations

from ._corrections import PushWeights
from .gt_saga import GTSAGA

__all__ = ["PushSAGA"]


class PushSAGA(GTSAGA):
    r"""Push-SAGA: :class:`~rowstoch_fast.GTSAGA`'s estimates on a directed graph, de-biased by push-sum.

    For ``f_i = (1/m) sum_l f_il``, node ``i`` keeps the table of the last gradient of each of its ``m`` samples
    (taken at the points :math:`\phi_{il}`) and their mean, as GT-SAGA. With :math:`x_0 = z_0`, :math:`v_0 = 1`,
    every :math:`\phi_{il} = z_0` and :math:`w_0 = g_0 = \nabla f_i(z_0)` (the table's mean), per iteration, one
    sample ``s`` per node drawn uniformly, adapt then combine over a column-stochastic ``C``:

    .. math::

        x_{k+1} &= C (x_k - \mathrm{lr}\, w_k) \\
        v_{k+1} &= C v_k, \qquad z_{k+1} = x_{k+1} / v_{k+1} \\
        g_{k+1} &= \nabla f_{is}(z_{k+1}) - \nabla f_{is}(\phi_{is}) + \frac{1}{m} \sum_l \nabla f_{il}(\phi_{il}),
            \qquad \text{then } \phi_{is} = z_{k+1} \\
        w_{k+1} &= C (w_k + g_{k+1} - g_k)

    ``z`` (the de-biased model) is what ``opt.x`` shows and where the gradients are taken. The estimate is
    unbiased and its variance vanishes as the iterates converge: the paper shows linear convergence to the
    minimiser itself on a smooth strongly convex finite sum over any strongly connected directed graph, for
    ``lr`` small enough (its bound is of order ``1 / (L kappa^2 ...)``: in practice tune it), where SGP and
    stochastic ADD-OPT stall at a noise floor. One sampled gradient per node and iteration (and ``m`` for the
    table at iteration 0). The variant: adapt then combine (both ``x`` and ``w`` mixed after their local update),
    as the authors' Push-SAGA; :class:`~rowstoch_fast.ADDOPT` is the combine-then-adapt form of the same tracking
    with full gradients. An iteration sends ``x`` with its weight ``v``, then ``w``: one communication round,
    as for every adapt-then-combine tracker (:attr:`communication_rounds`); :meth:`traffic` counts both.

    Parameters
    ----------
    C : MixingMatrix or array_like
        Column-stochastic (e.g. ``topology.exponential(n, stochastic="column")``).
    x0 : array_like, shape (d,), (n, d) or (reps, n, d)
    lr : float
    backend, check_finite, comm, partition
        As in :class:`~rowstoch_fast.PullDiagGT`. Memory: the table, as :class:`~rowstoch_fast.GTSAGA`'s.

    Notes
    -----
    :meth:`step` takes a per-sample oracle, as :class:`~rowstoch_fast.GTSAGA` (its Notes).

    References
    ----------
    M. I. Qureshi, R. Xin, S. Kar and U. A. Khan, "Push-SAGA: A decentralized stochastic algorithm with variance
    reduction over directed graphs", IEEE Control Systems Letters 6, 2022 (arXiv:2008.06082).

    Examples
    --------
    >>> import numpy as np
    >>> from rowstoch_fast import PushSAGA, topology
    >>> from rowstoch_fast.objectives import LeastSquares
    >>> f = LeastSquares.synthetic(n=6, samples_per_node=5, d=2, seed=0)
    >>> opt = PushSAGA(topology.exponential(6, stochastic="column"), f.x0(), lr=0.02)
    >>> oracle = f.oracle(seed=1)
    >>> for _ in range(3000):
    ...     _ = opt.step(oracle)
    >>> bool(np.abs(opt.x - f.optimum().x).max() < 1e-8)  # exact on a directed graph, one sample per iteration
    True
    """

    name = "push-saga"
    family = "gradient tracking, variance-reduced (push-sum)"
    order = 56
    matrices = ("C",)
    state = ("x", "v", "z", "w", "g", "mean")
    narrow = ("v",)
    push_sum_weights = "v"
    model = "z"

    def __init__(self, C, x0, lr, backend="auto", *, check_finite=True, comm=None, partition=None):
        self._start(x0, {"C": C}, backend, check_finite, comm, partition, lr=lr)
        self._table = None
        self._weights = PushWeights(self._ops, self.C, 1)

    def _traffic_per_iteration(self):
        w = self._reps * self._d
        return [("C", 1, w + 1), ("C", 1, w)]  # x with its push-sum weight v, then w

    def _initialize(self, grad_fn):
        cur = self._cur
        cur["x"][...] = cur["z"]
        cur["v"][...] = 1.0
        self._initial_table(grad_fn, cur["z"])  # every table point at z_0, g_0 their mean
        cur["w"][...] = cur["g"]

    def _advance(self, grad_fn, cur, nxt, t):
        ops, C = self._ops, self.C
        fresh, old = self._work
        ops.combine(fresh, [1.0, self._lr_coef()], [cur["x"], cur["w"]], check=False)
        ops.mix(C, fresh, nxt["x"])  # x_{k+1} = C (x_k - lr w_k)
        self._weights.advance(cur["v"], nxt["v"], t)
        finite = ops.combine(nxt["z"], [self._weights.inverse(nxt["v"])], [nxt["x"]])  # z = x / v (checked where
        self._check_iterates(finite, t, nxt["z"])  # it stays: a NaN or Inf of x_{k+1} reaches it)
        idx = self._saga_estimate(self._oracle(grad_fn), nxt["z"], cur, nxt, t)  # g_{k+1} at z_{k+1}
        finite = ops.combine(old, [1.0, 1.0, -1.0], [cur["w"], nxt["g"], cur["g"]])
        ops.mix(C, old, nxt["w"])  # w_{k+1} = C (w_k + g_{k+1} - g_k)
        self._check_iterates(finite, t, nxt["w"], old)  # (its combine's check; the node: where the mix took it)
        ops.put_samples(self._table, idx, fresh)  # (last: a failed step leaves the table as it was)
