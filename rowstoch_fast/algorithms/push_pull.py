"""Push-Pull (Pu, Shi, Xu & Nedic 2020): pull the models with A, push the gradient trackers with C."""

from __future__ import annotations

from ._base import Optimizer

__all__ = ["PushPull"]


class PushPull(Optimizer):
    r"""Push-Pull gradient tracking with a row-stochastic ``A`` and a column-stochastic ``C``.

    Implements, with :math:`y_0 = g(x_0)`:

    .. math::

        x_{k+1} &= A (x_k - \mathrm{lr}\, y_k) \\
        y_{k+1} &= C y_k + g(x_{k+1}) - g(x_k)

    Parameters
    ----------
    A : MixingMatrix or array_like
        Row-stochastic (pulls the models).
    C : MixingMatrix or array_like
        Column-stochastic (pushes the trackers; ``1^T y_k = 1^T g(x_k)``), on
        the same nodes; e.g. ``mixing.out_degree_weights(A)``.
    x0 : array_like, shape (d,), (n, d) or (reps, n, d)
    lr : float
    backend, check_finite, comm, partition
        As in :class:`~rowstoch_fast.PullDiagGT`.

    Examples
    --------
    >>> import numpy as np
    >>> from rowstoch_fast import PushPull, topology
    >>> A = topology.ring(6)
    >>> C = topology.ring(6, stochastic="column")
    >>> b = np.arange(6.0)[:, None]
    >>> opt = PushPull(A, C, np.zeros(1), lr=0.1)
    >>> for _ in range(1000):
    ...     _ = opt.step(lambda X: X - b)
    >>> bool(np.allclose(opt.x, b.mean()))
    True
    """

    name = "push-pull"
    family = "gradient tracking"
    order = 40
    exact = True
    matrices = ("A", "C")
    state = ("x", "y", "g")
    scratch = 1

    def __init__(self, A, C, x0, lr, backend="auto", *, check_finite=True, comm=None, partition=None):
        self._start(x0, {"A": A, "C": C}, backend, check_finite, comm, partition, lr=lr)

    def _traffic_per_iteration(self):
        w = self._reps * self._d
        return [("A", 1, w), ("C", 1, w)]

    def _initialize(self, grad_fn):
        cur = self._cur
        self._gradient(grad_fn, cur["x"], cur["g"], 0)
        cur["y"][...] = cur["g"]

    def _advance(self, grad_fn, cur, nxt, t):
        ops, w = self._ops, self._work[0]
        finite = ops.combine(w, [1.0, self._lr_coef()], [cur["x"], cur["y"]])
        self._check_iterates(finite, t, w)
        ops.mix(self.A, w, nxt["x"])  # x_{k+1} = A (x_k - lr y_k)
        self._gradient(grad_fn, nxt["x"], nxt["g"], t + 1)
        ops.mix(self.C, cur["y"], nxt["y"])
        finite = ops.combine(nxt["y"], [1.0, 1.0, -1.0], [nxt["y"], nxt["g"], cur["g"]])
        self._check_iterates(finite, t, nxt["y"])
