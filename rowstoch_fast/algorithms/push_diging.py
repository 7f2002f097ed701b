"""Push-DIGing (Nedic, Olshevsky & Shi 2017) and its multi-gossip form over a column-stochastic network."""

from __future__ import annotations

from .._checks import MAX_ROUNDS, check_int
from ._base import Optimizer
from ._corrections import PushWeights

__all__ = ["PushDIGing"]


class PushDIGing(Optimizer):
    r"""Push-DIGing: gradient tracking with push-sum de-biasing over a column-stochastic ``C``.

    Implements, with :math:`u_0 = x_0`, :math:`v_0 = 1`, :math:`y_0 = g(x_0)` and :math:`R`
    gossip steps per communication phase (``R = 1``: Push-DIGing; ``R > 1``:
    MG-Push-DIGing, whose ``grad_fn`` then averages ``R`` samples):

    .. math::

        u_{k+1} &= C^R (u_k - \mathrm{lr}\, y_k) \\
        v_{k+1} &= C^R v_k \\
        x_{k+1} &= u_{k+1} / v_{k+1} \\
        y_{k+1} &= C^R y_k + g(x_{k+1}) - g(x_k)

    ``x`` (the de-biased model) is what ``opt.x`` shows and ``grad_fn`` sees.
    The push-sum weights ``v_k = C^(kR) 1`` do not depend on the data: once
    they reach a floating-point fixed point they are no longer mixed (the
    same bits as mixing them on).

    Parameters
    ----------
    C : MixingMatrix or array_like
        Column-stochastic (e.g. ``topology.ring(n, stochastic="column")``).
    x0 : array_like, shape (d,), (n, d) or (reps, n, d)
    lr : float
    rounds : int, default 1
    backend, check_finite, comm, partition
        As in :class:`~rowstoch_fast.PullDiagGT`.

    Examples
    --------
    >>> import numpy as np
    >>> from rowstoch_fast import PushDIGing, topology
    >>> b = np.arange(6.0)[:, None]
    >>> opt = PushDIGing(topology.ring(6, stochastic="column"), np.zeros(1), lr=0.1)
    >>> for _ in range(1000):
    ...     _ = opt.step(lambda X: X - b)
    >>> bool(np.allclose(opt.x, b.mean()))
    True
    """

    name = "push-diging"
    family = "gradient tracking (push-sum)"
    order = 50
    exact = True
    matrices = ("C",)
    state = ("u", "v", "x", "y", "g")
    narrow = ("v",)
    push_sum_weights = "v"
    scratch = 2
    hyper = ("lr", "rounds")
    multi_round = True

    def __init__(self, C, x0, lr, rounds=1, backend="auto", *, check_finite=True, comm=None, partition=None):
        self._start(x0, {"C": C}, backend, check_finite, comm, partition, lr=lr, rounds=rounds)
        self._weights = PushWeights(self._ops, self.C, self.rounds)

    def _check_hyper(self, lr, rounds):
        self.lr = self._check_lr(lr)
        self.rounds = check_int(rounds, "rounds", minimum=1, maximum=MAX_ROUNDS)
        return {"lr": self.lr, "rounds": self.rounds}

    def _traffic_per_iteration(self):
        w = self._reps * self._d
        return [("C", self.rounds, 2 * w + 1)]  # u, y and the push-sum weight v travel together

    def _initialize(self, grad_fn):
        cur = self._cur
        cur["u"][...] = cur["x"]
        cur["v"][...] = 1.0
        self._gradient(grad_fn, cur["x"], cur["g"], 0)
        cur["y"][...] = cur["g"]

    def _advance(self, grad_fn, cur, nxt, t):
        ops, C, R = self._ops, self.C, self.rounds
        w, work = self._work
        finite = ops.combine(w, [1.0, self._lr_coef()], [cur["u"], cur["y"]])
        self._check_iterates(finite, t, w)
        ops.mix(C, w, nxt["u"], R, work)  # u_{k+1} = C^R (u_k - lr y_k)
        self._weights.advance(cur["v"], nxt["v"], t)
        finite = ops.combine(nxt["x"], [self._weights.inverse(nxt["v"])], [nxt["u"]])  # x_{k+1} = u_{k+1} / v_{k+1}
        self._check_iterates(finite, t, nxt["x"])
        self._gradient(grad_fn, nxt["x"], nxt["g"], t + 1)
        ops.mix(C, cur["y"], nxt["y"], R, work)
        finite = ops.combine(nxt["y"], [1.0, 1.0, -1.0], [nxt["y"], nxt["g"], cur["g"]])
        self._check_iterates(finite, t, nxt["y"])
