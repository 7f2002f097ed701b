"""ABm (Xin & Khan 2019): Push-Pull (the AB algorithm) with heavy-ball momentum, over directed graphs."""

from __future__ import annotations

from .._checks import check_positive_float
from ._base import Optimizer

__all__ = ["ABm"]


class ABm(Optimizer):
    r"""ABm: gradient tracking with a row-stochastic ``A``, a column-stochastic ``C`` and heavy-ball momentum.

    Implements, with :math:`x_{-1} = x_0` and :math:`y_0 = g(x_0)`:

    .. math::

        x_{k+1} &= A x_k - \mathrm{lr}\, y_k + \mathrm{momentum}\, (x_k - x_{k-1}) \\
        y_{k+1} &= C y_k + g(x_{k+1}) - g(x_k)

    ``momentum = 0`` is the AB algorithm (Push-Pull without adapt-then-combine); the momentum term
    accelerates it on ill-conditioned problems (Xin & Khan 2019). Exact: ``1^T y_k = 1^T g(x_k)``.

    Parameters
    ----------
    A : MixingMatrix or array_like
        Row-stochastic (mixes the models).
    C : MixingMatrix or array_like
        Column-stochastic on the same nodes (mixes the trackers), e.g. ``mixing.out_degree_weights(A)``.
    x0 : array_like, shape (d,), (n, d) or (reps, n, d)
    lr : float
    momentum : float, default 0.2
        The heavy-ball weight, in [0, 1). (0.5 left no stable step size at all on the paper's 16-node ring
        with its stochastic logistic problem, where 0.2 tunes like Push-Pull.)
    backend, check_finite, comm, partition
        As in :class:`~rowstoch_fast.PullDiagGT`.

    References
    ----------
    R. Xin and U. A. Khan, "Distributed heavy-ball: A generalization and acceleration of first-order methods
    with gradient tracking", IEEE Trans. Autom. Control 65(6), 2020 (arXiv:1808.02942, 2018).

    Examples
    --------
    >>> import numpy as np
    >>> from rowstoch_fast import ABm, topology
    >>> A = topology.ring(6)
    >>> C = topology.ring(6, stochastic="column")
    >>> b = np.arange(6.0)[:, None]
    >>> opt = ABm(A, C, np.zeros(1), lr=0.1, momentum=0.3)
    >>> for _ in range(1000):
    ...     _ = opt.step(lambda X: X - b)
    >>> bool(np.allclose(opt.x, b.mean()))
    True
    """

    name = "abm"
    family = "gradient tracking, momentum"
    order = 45
    exact = True
    matrices = ("A", "C")
    state = ("x", "x_prev", "y", "g")
    scratch = 1
    hyper = ("lr", "momentum")

    def __init__(self, A, C, x0, lr, momentum=0.2, backend="auto", *, check_finite=True, comm=None,
                 partition=None):
        self._start(x0, {"A": A, "C": C}, backend, check_finite, comm, partition, lr=lr, momentum=momentum)

    def _check_hyper(self, lr, momentum):
        self.lr = self._check_lr(lr)
        self.momentum = check_positive_float(momentum, "momentum", allow_zero=True)
        if self.momentum >= 1:
            raise ValueError(f"momentum must be in [0, 1), got {self.momentum}")
        return {"lr": self.lr, "momentum": self.momentum}

    def _initialize(self, grad_fn):
        self._cur["x_prev"][...] = self._cur["x"]
        self._initial_gradient(grad_fn, tracker="y")

    def _advance(self, grad_fn, cur, nxt, t):
        ops, b = self._ops, self.momentum
        ops.mix(self.A, cur["x"], nxt["x"])
        finite = ops.combine(nxt["x"], [1.0, self._lr_coef(), b, -b], [nxt["x"], cur["y"], cur["x"], cur["x_prev"]])
        self._check_iterates(finite, t, nxt["x"])
        self._carry_as(cur, nxt, {"x_prev": "x"})  # (a GPU's copy: a launch, frozen after a failed check)
        self._gradient(grad_fn, nxt["x"], nxt["g"], t + 1)
        ops.mix(self.C, cur["y"], nxt["y"])
        finite = ops.combine(nxt["y"], [1.0, 1.0, -1.0], [nxt["y"], nxt["g"], cur["g"]])
        self._check_iterates(finite, t, nxt["y"])
