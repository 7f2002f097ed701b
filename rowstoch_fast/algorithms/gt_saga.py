"""GT-SAGA (Xin, Khan & Kar 2020): gradient tracking over a doubly stochastic W with SAGA's variance-reduced
gradients, for finite-sum objectives."""

from __future__ import annotations

import numpy as np

from .._checks import fmt_bytes
from ._base import Optimizer

__all__ = ["GTSAGA"]


class GTSAGA(Optimizer):
    r"""GT-SAGA: DIGing's gradient tracking fed with SAGA's variance-reduced gradient estimates.

    For ``f_i = (1/m) sum_l f_il``, node ``i`` keeps a table of the last gradient of each of its ``m``
    samples (at the point ``z_il`` where it was computed) and their mean. Per iteration it draws one sample
    ``s`` uniformly; with :math:`y_0 = g_0 = \nabla f_i(x_0)` and every :math:`z_{il} = x_0`:

    .. math::

        x_{k+1} &= W x_k - \mathrm{lr}\, y_k \\
        g_{k+1} &= \nabla f_{is}(x_{k+1}) - \nabla f_{is}(z_{is}) + \frac{1}{m} \sum_l \nabla f_{il}(z_{il}),
            \qquad \text{then } z_{is} = x_{k+1} \\
        y_{k+1} &= W y_k + g_{k+1} - g_k

    ``g_k`` is an unbiased estimate of ``grad f_i(x_k)`` whose variance vanishes as the iterates converge, so a
    constant step converges linearly to the minimiser itself on a smooth strongly convex finite sum, where
    DIGing with sampled gradients stalls at a noise floor. One sampled gradient per node and iteration (and
    ``m`` for the table at iteration 0).

    Parameters
    ----------
    W : MixingMatrix or array_like
        Doubly stochastic (see :class:`~rowstoch_fast.DGD`).
    x0 : array_like, shape (d,), (n, d) or (reps, n, d)
    lr : float
    backend, check_finite, comm, partition
        As in :class:`~rowstoch_fast.PullDiagGT`. Memory: the table, ``m`` values of ``reps * d`` per node, on
        top of the iterates (checked before it is allocated).

    Notes
    -----
    :meth:`step` takes a per-sample oracle instead of ``grad_fn(X)``: an object with ``samples`` (``m``),
    ``sample_gradient(X, idx)`` (the gradients of samples ``idx[..., i]`` at ``X[..., i, :]``) and
    ``sample(X) -> (G, idx)`` (one uniform draw per node and repetition, and its gradients):
    :meth:`Objective.oracle() <rowstoch_fast.objectives.Objective.oracle>` of a finite-sum objective
    (:class:`~rowstoch_fast.objectives.LeastSquares`, ``NonconvexLogistic``, ``LogisticL2``), or
    :class:`~rowstoch_fast.objectives.SampleOracle` around a function. A plain ``grad_fn(X)`` is refused.

    References
    ----------
    R. Xin, U. A. Khan and S. Kar, "Variance-reduced decentralized stochastic optimization with accelerated
    convergence", IEEE Trans. Signal Process. 68, 2020 (arXiv:1912.04230).

    Examples
    --------
    >>> import numpy as np
    >>> from rowstoch_fast import GTSAGA, topology
    >>> from rowstoch_fast.objectives import LeastSquares
    >>> f = LeastSquares.synthetic(n=6, samples_per_node=5, d=2, seed=0)
    >>> W = topology.ring(6, directed=False, weights="metropolis")
    >>> opt = GTSAGA(W, f.x0(), lr=0.02)
    >>> oracle = f.oracle(seed=1)
    >>> for _ in range(3000):
    ...     _ = opt.step(oracle)
    >>> bool(np.abs(opt.x - f.optimum().x).max() < 1e-8)  # exact, from one sampled gradient per iteration
    True
    """

    name = "gt-saga"
    family = "gradient tracking, variance-reduced"
    order = 125
    exact = True
    matrices = ("W",)
    state = ("x", "y", "g", "mean")
    scratch = 2
    #: :meth:`step` takes a per-sample oracle (see the class's Notes); the runner passes its objective's.
    gradients = "samples"

    def __init__(self, W, x0, lr, backend="auto", *, check_finite=True, comm=None, partition=None):
        self._start(x0, {"W": W}, backend, check_finite, comm, partition, lr=lr)
        self._table = None

    def _traffic_per_iteration(self):
        return [("W", 1, 2 * self._reps * self._d)]  # x and y leave in the same round, as DIGing's

    def samples_drawn(self, batch=1):
        """One sample per iteration, after the ``m`` of the table (``batch`` does not apply)."""
        return (0 if self._table is None else self._table.shape[0]) + self.iteration

    def _oracle(self, grad_fn):
        """``grad_fn`` as a per-sample oracle, or a TypeError saying what GT-SAGA needs."""
        if not all(hasattr(grad_fn, k) for k in ("samples", "sample", "sample_gradient")) or grad_fn.samples is None:
            objective = getattr(grad_fn, "objective", None)
            what = (f"an oracle of {type(objective).__name__} (no per-sample gradients)" if objective is not None
                    else f"a {type(grad_fn).__name__}")
            raise TypeError(f"{type(self).__name__} steps with a per-sample oracle (samples, sample(X), sample_gradient(X, idx)): "
                            f"a finite-sum objective's oracle (LeastSquares, NonconvexLogistic, LogisticL2) or "
                            f"objectives.SampleOracle(sample_grad, samples); got {what}")
        return grad_fn

    def _allocate_table(self, m):
        ops, rows = self._ops, self._shape[-2]
        nbytes = m * rows * self._reps * self._d * ops.dtype.itemsize
        what = (f"{type(self).__name__}'s table of {m} samples x {rows} nodes x {self._reps * self._d} values "
                f"({fmt_bytes(nbytes)})")
        hint = "use float32, fewer repetitions or fewer samples per node"
        ops.require_memory(nbytes, what, hint)  # (a GPU's free memory on the device: refused before allocating)
        self._table = ops.xp.zeros((m, rows, self._reps, self._d), dtype=ops.dtype)

    def _entry(self, s):
        """Sample ``s``'s gradients in the table, as a node-major block (a view)."""
        return self._table[s].reshape(self._table.shape[1], -1)

    def _initialize(self, grad_fn):
        self._initial_table(grad_fn, self._cur["x"])  # every z_il = x_0
        self._cur["y"][...] = self._cur["g"]

    def _initial_table(self, grad_fn, x0):
        """Iteration 0: the table of every sample's gradient at ``x0``, its mean, and ``g_0`` that mean."""
        oracle, cur = self._oracle(grad_fn), self._cur
        self._allocate_table(int(oracle.samples))
        self._each_sample(oracle, x0, self._entry, 0)
        cur["mean"][...] = self._table.mean(axis=0).reshape(cur["mean"].shape)
        cur["g"][...] = cur["mean"]

    def _advance(self, grad_fn, cur, nxt, t):
        ops, oracle = self._ops, self._oracle(grad_fn)
        ops.mix(self.W, cur["x"], nxt["x"])
        finite = ops.combine(nxt["x"], [1.0, self._lr_coef()], [nxt["x"], cur["y"]])  # x_{k+1} = W x_k - lr y_k
        self._check_iterates(finite, t, nxt["x"])
        idx = self._saga_estimate(oracle, nxt["x"], cur, nxt, t)  # g_{k+1} at x_{k+1}, the mean moved
        ops.mix(self.W, cur["y"], nxt["y"])
        finite = ops.combine(nxt["y"], [1.0, 1.0, -1.0], [nxt["y"], nxt["g"], cur["g"]])
        self._check_iterates(finite, t, nxt["y"])
        ops.put_samples(self._table, idx, self._work[0])  # z_is = x_{k+1} (last: a failed step leaves the table
        # as it was)

    def _sampled(self, oracle, x_buf, out, iteration):
        """``out <- grad f_is(x_buf)`` for a fresh draw ``s``; returns the draw."""
        drawn = []

        def sampled(X):
            G, idx = oracle.sample(X)
            drawn.append(idx)
            return G

        self._gradient(sampled, x_buf, out, iteration)
        return drawn[-1]

    def _saga_estimate(self, oracle, x_buf, cur, nxt, t):
        """SAGA's estimate at ``x_buf`` into ``nxt["g"]`` (checked) and the table's mean moved to ``nxt["mean"]``:
        ``g = grad f_is(x) - table[s] + mean``, ``mean += (grad f_is(x) - table[s]) / m``, the draw's fresh
        gradients left in the first work block, for the step's last act: ``put_samples`` (so that a failed step
        leaves the table as it was); returns the draw."""
        ops, (fresh, old) = self._ops, self._work
        idx = self._sampled(oracle, x_buf, fresh, t + 1)  # grad f_is(x)
        ops.take_samples(self._table, idx, old)  # the table's entry of sample s
        finite = ops.combine(nxt["g"], [1.0, -1.0, 1.0], [fresh, old, cur["mean"]])
        self._check_iterates(finite, t, nxt["g"])
        self._move_mean(cur, nxt, fresh, old, t)
        return idx

    def _move_mean(self, cur, nxt, fresh, old, t):
        """The table's mean after one entry goes from ``old`` to ``fresh``: ``mean += (fresh - old) / m``, checked
        (a state block: never kept non-finite)."""
        m = self._table.shape[0]
        finite = self._ops.combine(nxt["mean"], [1.0, 1.0 / m, -1.0 / m], [cur["mean"], fresh, old])
        self._check_iterates(finite, t, nxt["mean"])

    def _save_extra(self):
        if self._table is None:
            return {}
        entries = [self._ops.gather(self._entry(s)) for s in range(self._table.shape[0])]  # (collective)
        return {"table": None if entries[0] is None else np.stack(entries)}

    def _load_extra(self, state):
        if not self._initialized:
            return
        if "table" not in state:
            name = type(self).__name__
            raise ValueError(f"state is missing 'table' ({name}'s per-sample gradients); pass the dict returned by "
                             f"{name}.state_dict()")
        table = np.asarray(state["table"])
        expected = (self.n, self._reps * self._d)
        if table.ndim != 3 or table.shape[1:] != expected or table.shape[0] < 1:
            raise ValueError(f"state['table'] must have shape (m,) + {expected} (m >= 1 samples), got {table.shape}")
        self._allocate_table(table.shape[0])
        for s in range(table.shape[0]):
            self._entry(s)[...] = self._ops.local(table[s])
