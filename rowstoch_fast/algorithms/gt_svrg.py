"""GT-SVRG (Xin, Khan & Kar 2020): gradient tracking over a doubly stochastic W with SVRG's variance-reduced
gradients, for finite-sum objectives."""

from __future__ import annotations

import numpy as np

from .._checks import check_int
from ._base import Optimizer
from .gt_saga import GTSAGA

__all__ = ["GTSVRG"]


class GTSVRG(Optimizer):
    r"""GT-SVRG: DIGing's gradient tracking fed with SVRG's variance-reduced gradient estimates.

    For ``f_i = (1/m) sum_l f_il``, node ``i`` keeps a snapshot :math:`\tau_i` and its full local gradient,
    refreshed every ``T`` iterations (the outer loop); per iteration it draws one sample ``s`` uniformly. With
    :math:`\tau = x_0` and :math:`y_0 = v_0 = \nabla f_i(x_0)`:

    .. math::

        x_{k+1} &= W x_k - \mathrm{lr}\, y_k \\
        (\tau, \mathrm{full}) &\leftarrow (x_{k+1}, \nabla f_i(x_{k+1})) \quad \text{if } (k + 1) \bmod T = 0
            \qquad (m \text{ sample gradients}) \\
        v_{k+1} &= \nabla f_{is}(x_{k+1}) - \nabla f_{is}(\tau) + \mathrm{full} \\
        y_{k+1} &= W y_k + v_{k+1} - v_k

    Like :class:`~rowstoch_fast.GTSAGA` it converges linearly to the minimiser with a constant step on a smooth
    strongly convex finite sum, with memory of two blocks per node instead of SAGA's ``m`` (and, while it takes a
    snapshot, a chunk of sample gradients of at most 16 MB), at the price of a
    full local gradient every ``T`` iterations: ``2`` sample gradients per iteration and ``m`` per snapshot
    (the ``samples`` axis counts them).

    Parameters
    ----------
    W : MixingMatrix or array_like
        Doubly stochastic (see :class:`~rowstoch_fast.DGD`).
    x0 : array_like, shape (d,), (n, d) or (reps, n, d)
    lr : float
    snapshot_every : int, default 0
        ``T``, the iterations of an outer loop; 0: the samples per node ``m`` (one pass over the local data per
        outer loop, the usual choice).
    backend, check_finite, comm, partition
        As in :class:`~rowstoch_fast.PullDiagGT`.

    Notes
    -----
    :meth:`step` takes a per-sample oracle, as :class:`~rowstoch_fast.GTSAGA` does (see its Notes); the full
    local gradient is the mean of the ``m`` sample gradients at the snapshot.

    References
    ----------
    R. Xin, U. A. Khan and S. Kar, "Variance-reduced decentralized stochastic optimization with accelerated
    convergence", IEEE Trans. Signal Process. 68, 2020 (arXiv:1912.04230).

    Examples
    --------
    >>> import numpy as np
    >>> from rowstoch_fast import GTSVRG, topology
    >>> from rowstoch_fast.objectives import LeastSquares
    >>> f = LeastSquares.synthetic(n=6, samples_per_node=8, d=3, seed=0)
    >>> W = topology.ring(6, directed=False, weights="metropolis")
    >>> opt = GTSVRG(W, f.x0(), lr=0.02)
    >>> oracle = f.oracle(seed=1)
    >>> for _ in range(3000):
    ...     _ = opt.step(oracle)
    >>> bool(np.abs(opt.x - f.optimum().x).max() < 1e-8)
    True
    """

    name = "gt-svrg"
    family = "gradient tracking, variance-reduced"
    order = 126
    exact = True
    matrices = ("W",)
    state = ("x", "y", "v", "tau", "full")
    hyper = ("lr", "snapshot_every")
    scratch = 2
    gradients = "samples"

    def __init__(self, W, x0, lr, backend="auto", *, snapshot_every=0, check_finite=True, comm=None, partition=None):
        self._start(x0, {"W": W}, backend, check_finite, comm, partition, lr=lr, snapshot_every=snapshot_every)
        self._m = None

    def _check_hyper(self, lr, snapshot_every=0):
        self.lr = self._check_lr(lr)
        self.snapshot_every = check_int(snapshot_every, "snapshot_every", minimum=0)
        return {"lr": self.lr, "snapshot_every": self.snapshot_every}

    _oracle = GTSAGA._oracle

    _traffic_per_iteration = GTSAGA._traffic_per_iteration

    def _save_extra(self):
        """``m``, the samples per node (what ``samples_drawn`` counts the snapshots with)."""
        return {"samples_per_node": np.array(self._m if self._m is not None else 0)}

    def _load_extra(self, state):
        m = int(np.asarray(state.get("samples_per_node", 0)))
        self._m = m or None

    def _period(self, oracle=None):
        """``T``: ``snapshot_every``, or the samples per node."""
        if self.snapshot_every:
            return self.snapshot_every
        if self._m is None and oracle is not None:
            self._m = int(oracle.samples)
        return self._m

    def samples_drawn(self, batch=1):
        """Two sample gradients per iteration, and ``m`` per snapshot (that of ``x_0`` included)."""
        m, T = self._m or 0, self._period() or 1
        return 2 * self.iteration + m * (1 + self.iteration // T) if m else 2 * self.iteration

    def _full_gradient(self, oracle, x_buf, out, iteration):
        """``out <- (1/m) sum_l grad f_il(x_buf)`` (m sample gradients)."""
        m = int(oracle.samples)
        work = self._work[0]

        def add(s):
            if s == 0:
                self._ops.combine(out, [1.0 / m], [work], check=False)
            else:
                self._ops.combine(out, [1.0, 1.0 / m], [out, work], check=False)

        self._each_sample(oracle, x_buf, lambda s: work, iteration, add)

    def _initialize(self, grad_fn):
        oracle, cur = self._oracle(grad_fn), self._cur
        self._m = int(oracle.samples)
        cur["tau"][...] = cur["x"]
        self._full_gradient(oracle, cur["x"], cur["full"], 0)
        cur["v"][...] = cur["full"]
        cur["y"][...] = cur["full"]

    def _advance(self, grad_fn, cur, nxt, t):
        ops, oracle = self._ops, self._oracle(grad_fn)
        fresh, old = self._work
        ops.mix(self.W, cur["x"], nxt["x"])
        finite = ops.combine(nxt["x"], [1.0, self._lr_coef()], [nxt["x"], cur["y"]])  # x_{k+1} = W x_k - lr y_k
        self._check_iterates(finite, t, nxt["x"])
        if (t + 1) % self._period(oracle) == 0:  # a new snapshot at x_{k+1}
            ops.combine(nxt["tau"], [1.0], [nxt["x"]], check=False)
            self._full_gradient(oracle, nxt["tau"], nxt["full"], t + 1)
        else:
            self._carry(cur, nxt, "tau", "full")
        drawn = []

        def sampled(X):
            G, idx = oracle.sample(X)
            drawn.append(idx)
            return G

        self._gradient(sampled, nxt["x"], fresh, t + 1)  # grad f_is(x_{k+1})
        idx = drawn[-1]
        self._gradient(lambda X: oracle.sample_gradient(X, idx), nxt["tau"], old, t + 1)  # grad f_is(tau)
        finite = ops.combine(nxt["v"], [1.0, -1.0, 1.0], [fresh, old, nxt["full"]])
        self._check_iterates(finite, t, nxt["v"])
        ops.mix(self.W, cur["y"], nxt["y"])
        finite = ops.combine(nxt["y"], [1.0, 1.0, -1.0], [nxt["y"], nxt["v"], cur["v"]])
        self._check_iterates(finite, t, nxt["y"])
