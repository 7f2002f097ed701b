"""ADD-OPT (Xi, Mai, Xin & Khan 2018): accelerated distributed directed optimization with push-sum."""

from __future__ import annotations

from ._base import Optimizer
from ._corrections import PushWeights

__all__ = ["ADDOPT"]


class ADDOPT(Optimizer):
    r"""ADD-OPT: gradient tracking with push-sum de-biasing over a column-stochastic ``C`` (directed graphs).

    Implements, with :math:`x_0 = z_0`, :math:`v_0 = 1`, :math:`w_0 = g(z_0)`:

    .. math::

        x_{k+1} &= C x_k - \mathrm{lr}\, w_k \\
        v_{k+1} &= C v_k \\
        z_{k+1} &= x_{k+1} / v_{k+1} \\
        w_{k+1} &= C w_k + g(z_{k+1}) - g(z_k)

    ``z`` (the de-biased model) is what ``opt.x`` shows and ``grad_fn`` sees. It differs from
    :class:`~rowstoch_fast.PushDIGing` in where the step enters (after mixing here, before it there). ``x``,
    ``w`` and ``v`` travel in the same round.

    Parameters
    ----------
    C : MixingMatrix or array_like
        Column-stochastic (e.g. ``topology.exponential(n, stochastic="column")``).
    x0 : array_like, shape (d,), (n, d) or (reps, n, d)
    lr : float
    backend, check_finite, comm, partition
        As in :class:`~rowstoch_fast.PullDiagGT`.

    References
    ----------
    C. Xi, V. S. Mai, R. Xin, E. Abed and U. A. Khan, "Linear convergence in optimization over directed
    graphs with row-stochastic matrices", IEEE Trans. Autom. Control 63(10), 2018; C. Xi, R. Xin and U. A.
    Khan, "ADD-OPT: Accelerated distributed directed optimization", IEEE Trans. Autom. Control 63(5), 2018.

    Examples
    --------
    >>> import numpy as np
    >>> from rowstoch_fast import ADDOPT, topology
    >>> b = np.arange(6.0)[:, None]
    >>> opt = ADDOPT(topology.ring(6, stochastic="column"), np.zeros(1), lr=0.1)
    >>> for _ in range(1000):
    ...     _ = opt.step(lambda X: X - b)
    >>> bool(np.allclose(opt.x, b.mean()))
    True
    """

    name = "add-opt"
    family = "gradient tracking (push-sum)"
    order = 55
    exact = True
    matrices = ("C",)
    state = ("x", "v", "z", "w", "g")
    narrow = ("v",)
    push_sum_weights = "v"
    model = "z"
    scratch = 0

    def __init__(self, C, x0, lr, backend="auto", *, check_finite=True, comm=None, partition=None):
        self._start(x0, {"C": C}, backend, check_finite, comm, partition, lr=lr)
        self._weights = PushWeights(self._ops, self.C, 1)

    def _traffic_per_iteration(self):
        return [("C", 1, 2 * self._reps * self._d + 1)]  # x, w and the push-sum weight v travel together

    def _initialize(self, grad_fn):
        cur = self._cur
        cur["x"][...] = cur["z"]
        cur["v"][...] = 1.0
        self._initial_gradient(grad_fn, tracker="w")

    def _advance(self, grad_fn, cur, nxt, t):
        ops, C = self._ops, self.C
        ops.mix(C, cur["x"], nxt["x"])
        finite = ops.combine(nxt["x"], [1.0, self._lr_coef()], [nxt["x"], cur["w"]])  # x_{k+1} = C x_k - lr w_k
        self._check_iterates(finite, t, nxt["x"])
        self._weights.advance(cur["v"], nxt["v"], t)
        finite = ops.combine(nxt["z"], [self._weights.inverse(nxt["v"])], [nxt["x"]])  # z = x / v
        self._check_iterates(finite, t, nxt["z"])
        self._gradient(grad_fn, nxt["z"], nxt["g"], t + 1)
        ops.mix(C, cur["w"], nxt["w"])
        finite = ops.combine(nxt["w"], [1.0, 1.0, -1.0], [nxt["w"], nxt["g"], cur["g"]])
        self._check_iterates(finite, t, nxt["w"])
