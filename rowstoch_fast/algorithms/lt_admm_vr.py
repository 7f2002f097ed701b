"""LT-ADMM-VR (Ren, Bastianello, Johansson & Parisini 2025): LT-ADMM whose local steps use a SAGA-type
variance-reduced gradient estimate, for finite-sum objectives (exact with sampled gradients)."""

from __future__ import annotations

from ._local import DEFAULT_LOCAL_STEPS
from .gt_saga import GTSAGA
from .lt_admm import LTADMM

__all__ = ["LTADMMVR"]


class LTADMMVR(LTADMM):
    r"""LT-ADMM-VR: :class:`~rowstoch_fast.LTADMM` with a per-sample gradient table in its local steps.

    For ``f_i = (1/m) sum_h f_ih``, node ``i`` keeps the gradient ``r_ih`` of every sample (all taken at ``x_0``
    to start) and their mean. Each local step draws one sample ``s`` uniformly at ``phi``, steps with the SAGA
    estimate, and then refreshes that sample's entry at the new ``phi`` (decent-bench 0.3.0's ``LT_ADMM_VR``
    with its default ``v2=True``, the table kept across rounds, batch size 1):

    .. math::

        v_s &= \nabla f_{is}(\phi_s) - r_{is} + \frac{1}{m} \sum_h r_{ih} \\
        \phi_{s+1} &= \phi_s - \mathrm{lr}\, v_s - \beta\, c_r \\
        r_{is} &\leftarrow \nabla f_{is}(\phi_{s+1})

    and the rounds, link sums and ``c_r`` exactly as :class:`~rowstoch_fast.LTADMM`'s (one round of ``x_r``
    every ``tau`` iterations, a static symmetric ``W``). Two sample gradients per iteration after the ``m`` of the
    table (the ``samples`` axis counts them); the memory of the table is ``m`` blocks per node, as
    :class:`~rowstoch_fast.GTSAGA`'s.

    Exact: at a fixed point the table holds the gradients at the common minimiser ``x*``, so ``v`` is the full
    local gradient there and the LT-ADMM argument applies; the reference proves convergence to a stationary
    (optimal, for convex problems) point for ``lr``, ``beta`` small enough. decent-bench's ``v2=False`` variant
    (every entry recomputed at ``x_r`` at the start of each round, ``m`` sample gradients a round) is not
    provided. The entry refreshed after a step is that of the sample just drawn, at the new ``phi``, as
    decent-bench writes it (one more sample gradient; SAGA's usual table keeps the gradient just computed).

    Parameters
    ----------
    W : MixingMatrix or array_like
        Static, doubly stochastic and symmetric (see :class:`~rowstoch_fast.LTADMM`).
    x0 : array_like, shape (d,), (n, d) or (reps, n, d)
    lr : float
        ``gamma``, the local gradient step.
    local_steps, penalty, relaxation, dual_step
        As in :class:`~rowstoch_fast.LTADMM` (defaults ``tau = 4``, ``rho = 1``, ``alpha = 0.5``, ``beta = lr``).
    backend, check_finite, comm, partition
        As in :class:`~rowstoch_fast.PullDiagGT`.

    Notes
    -----
    :meth:`step` takes a per-sample oracle, as :class:`~rowstoch_fast.GTSAGA` does (see its Notes).

    References
    ----------
    X. Ren, N. Bastianello, K. H. Johansson and T. Parisini, "Communication-efficient stochastic distributed
    learning", arXiv:2501.13516, 2025 (LT-ADMM-VR).

    Examples
    --------
    >>> import numpy as np
    >>> from rowstoch_fast import LTADMMVR, topology
    >>> from rowstoch_fast.objectives import LeastSquares
    >>> f = LeastSquares.synthetic(n=6, samples_per_node=8, d=3, seed=0)
    >>> W = topology.ring(6, directed=False, weights="metropolis")
    >>> opt = LTADMMVR(W, f.x0(), lr=0.02, local_steps=4)
    >>> oracle = f.oracle(seed=1)
    >>> for _ in range(8000):
    ...     _ = opt.step(oracle)
    >>> bool(np.abs(opt.x - f.optimum().x).max() < 1e-8)
    True
    """

    name = "lt-admm-vr"
    family = "ADMM, local updates, variance-reduced"
    order = 184
    state = ("x", "z", "e", "c", "mean")  # (x: phi inside a round; mean: the table's)
    scratch = 3
    gradients = "samples"

    def __init__(self, W, x0, lr, backend="auto", *, local_steps=DEFAULT_LOCAL_STEPS, penalty=1.0, relaxation=0.5,
                 dual_step=None, check_finite=True, comm=None, partition=None):
        super().__init__(W, x0, lr, backend, local_steps=local_steps, penalty=penalty, relaxation=relaxation,
                         dual_step=dual_step, check_finite=check_finite, comm=comm, partition=partition)
        self._table = None
        self._drawn = None  # (this local step's sample ids, for the refresh after it)

    _oracle = GTSAGA._oracle
    _allocate_table = GTSAGA._allocate_table
    _entry = GTSAGA._entry
    _save_extra = GTSAGA._save_extra
    _load_extra = GTSAGA._load_extra
    _sampled = GTSAGA._sampled
    _move_mean = GTSAGA._move_mean

    def samples_drawn(self, batch=1):
        """Two sample gradients per iteration (the estimate's and the refresh), after the ``m`` of the table."""
        return (0 if self._table is None else self._table.shape[0]) + 2 * self.iteration

    def _initialize(self, grad_fn):
        oracle, cur = self._oracle(grad_fn), self._cur
        self._allocate_table(int(oracle.samples))
        self._each_sample(oracle, cur["x"], self._entry, 0)  # every r_ih at x_0
        cur["mean"][...] = self._table.mean(axis=0).reshape(cur["mean"].shape)

    def _local_gradient(self, grad_fn, cur, nxt, t):
        ops, oracle = self._ops, self._oracle(grad_fn)
        v, old, fresh = self._work  # (old: the W x_r block, free once c_r is made)
        self._drawn = self._sampled(oracle, cur["x"], fresh, t)  # grad f_is(phi)
        ops.take_samples(self._table, self._drawn, old)  # r_is
        finite = ops.combine(v, [1.0, -1.0, 1.0], [fresh, old, cur["mean"]])
        self._check_iterates(finite, t, v)
        return v

    def _after_local_step(self, grad_fn, cur, nxt, t):
        ops, oracle, idx = self._ops, self._oracle(grad_fn), self._drawn
        _, old, fresh = self._work
        self._gradient(lambda X: oracle.sample_gradient(X, idx), nxt["x"], fresh, t + 1)  # grad f_is(phi+)
        self._move_mean(cur, nxt, fresh, old, t)
        ops.put_samples(self._table, idx, fresh)  # (last: a failed step leaves the table as it was)

