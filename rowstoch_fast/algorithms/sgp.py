"""Stochastic gradient push (Assran, Loizou, Ballas & Rabbat 2019) over a column-stochastic network."""

from __future__ import annotations

from ._base import Optimizer
from ._corrections import PushWeights

__all__ = ["SGP"]


class SGP(Optimizer):
    r"""SGP: push-sum SGD over a column-stochastic ``C``.

    Implements, with :math:`x_0 = z_0` and push-sum weights :math:`w_0 = 1`:

    .. math::

        h_k &= x_k - \mathrm{lr}\, g(z_k) \\
        x_{k+1} &= C h_k \\
        w_{k+1} &= C w_k \\
        z_{k+1} &= x_{k+1} / w_{k+1}

    The push-sum weights ``w_k = C^k 1`` do not depend on the data: once they
    reach a floating-point fixed point they are no longer mixed (the same
    bits). The model each node uses (``opt.x``, what ``grad_fn`` sees) is ``z``. With
    a constant ``lr`` it reaches an ``O(lr)`` neighbourhood of the minimiser of
    ``(1/n) sum_i f_i`` (no gradient tracking).

    Parameters
    ----------
    C : MixingMatrix or array_like
        Column-stochastic.
    x0 : array_like, shape (d,), (n, d) or (reps, n, d)
    lr : float
    backend, check_finite, comm, partition
        As in :class:`~rowstoch_fast.PullDiagGT`.

    Examples
    --------
    >>> import numpy as np
    >>> from rowstoch_fast import SGP, topology
    >>> b = np.arange(6.0)[:, None]
    >>> opt = SGP(topology.ring(6, stochastic="column"), np.zeros(1), lr=0.01)
    >>> for _ in range(3000):
    ...     _ = opt.step(lambda X: X - b)
    >>> bool(abs(opt.x.mean() - b.mean()) < 0.05)
    True
    """

    name = "sgp"
    family = "decentralized gradient (push-sum)"
    order = 60
    matrices = ("C",)
    state = ("x", "w", "z")
    narrow = ("w",)
    push_sum_weights = "w"
    model = "z"
    scratch = 2

    def __init__(self, C, x0, lr, backend="auto", *, check_finite=True, comm=None, partition=None):
        self._start(x0, {"C": C}, backend, check_finite, comm, partition, lr=lr)
        self._weights = PushWeights(self._ops, self.C, 1)

    def _traffic_per_iteration(self):
        return [("C", 1, self._reps * self._d + 1)]  # h and the weight w travel together

    def _initialize(self, grad_fn):
        self._cur["x"][...] = self._cur["z"]
        self._cur["w"][...] = 1.0

    def _advance(self, grad_fn, cur, nxt, t):
        ops, C = self._ops, self.C
        g, h = self._work
        g = self._gradient_read(grad_fn, cur["z"], g, t, checked_next=True)
        finite = ops.combine(h, [1.0, self._lr_coef()], [cur["x"], g])
        self._check_iterates(finite, t, h)
        ops.mix(C, h, nxt["x"])
        self._weights.advance(cur["w"], nxt["w"], t)
        finite = ops.combine(nxt["z"], [self._weights.inverse(nxt["w"])], [nxt["x"]])
        self._check_iterates(finite, t, nxt["z"])
