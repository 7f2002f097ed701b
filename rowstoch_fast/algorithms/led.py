"""LED (Alghunaim 2024): local exact diffusion, tau local steps with a dual correction per round."""

from __future__ import annotations

from .._checks import check_positive_float
from ._base import Optimizer
from ._local import DEFAULT_LOCAL_STEPS, LocalSteps

__all__ = ["LED"]


class LED(LocalSteps, Optimizer):
    r"""Local Exact-Diffusion: exact diffusion with ``tau`` local primal steps per communication round.

    Implements the reference's Algorithm 1 with one local gradient step per iteration ``t`` (round
    ``r = t // tau``), :math:`y_0 = 0`, :math:`\phi` starting each round at the model :math:`x_r`:

    .. math::

        \phi_{s+1} &= \phi_s - \mathrm{lr}\, g(\phi_s) - \beta\, y_r
            \qquad (s = 0, \dots, \tau - 1, \ \phi_0 = x_r) \\
        x_{r+1} &= W \phi_\tau \qquad \text{(a communication round)} \\
        y_{r+1} &= y_r + \phi_\tau - x_{r+1}

    The model ``x`` the optimizer shows is the node's current iterate, as for the other local-update methods:
    ``phi_s`` inside a round, ``x_{r+1}`` after its last step (where the gradients are taken, what ``ask``
    returns).
    Exact: the dual ``y`` removes the drift of heterogeneous data, so the models converge to the minimiser of
    ``(1/n) sum_i f_i`` with any ``tau`` (Theorem 1, strongly convex ``f``, ``lr`` and ``beta`` small enough).
    Gradients and communication are counted apart (``iteration`` counts gradient steps).

    Parameters
    ----------
    W : MixingMatrix or array_like
        Symmetric and doubly stochastic: an undirected graph's weights, as exact diffusion's analysis assumes. A
        directed graph's doubly stochastic weights are refused: an eigenvalue ``1 - eps`` of ``W`` with ``eps``
        not real gives the recursion's ``lr -> 0`` limit (``beta = 1 / (2 tau)``) a mode of modulus about ``1 +
        |Re sqrt(-eps / 2)|`` > 1 a round, so small steps diverge (the directed ring of 16 nodes: 1.21 a round;
        ``lr`` from 1e-5 to 0.03 diverges within 20,000 iterations on a quadratic, 0.1 converges).
    x0 : array_like, shape (d,), (n, d) or (reps, n, d)
    lr : float
        ``alpha``, the local gradient step.
    local_steps : int, default 4
        ``tau >= 1``.
    dual_step : float, optional
        ``beta > 0``; default ``1 / (2 tau)`` (this package's choice: the dual enters every one of a round's
        ``tau`` steps; on the tests' problems ``1 / tau`` was stable and ``2 / tau`` diverged).
    backend, check_finite, comm, partition
        As in :class:`~rowstoch_fast.PullDiagGT`.

    References
    ----------
    S. A. Alghunaim, "Local exact-diffusion for decentralized optimization and learning", IEEE Trans. Automat.
    Control, 2024.

    Examples
    --------
    >>> import numpy as np
    >>> from rowstoch_fast import LED, topology
    >>> W = topology.ring(6, directed=False, weights="metropolis")
    >>> b = np.arange(6.0)[:, None]
    >>> opt = LED(W, np.zeros(1), lr=0.1, local_steps=4)
    >>> for _ in range(4000):
    ...     _ = opt.step(lambda X: X - b)
    >>> opt.communication_rounds, bool(np.allclose(opt.x, b.mean()))
    (1000, True)
    """

    name = "led"
    family = "primal-dual, local updates"
    order = 165
    exact = True
    matrices = ("W",)
    symmetric = True
    needs_timely = True  # (a delay of one round makes small steps diverge)
    in_paper_preset = False
    in_robustness = False
    state = ("x", "y")  # (x: phi inside a round, the mixed model at its end)
    hyper = ("lr", "local_steps", "dual_step")
    scratch = 2

    def __init__(self, W, x0, lr, backend="auto", *, local_steps=DEFAULT_LOCAL_STEPS, dual_step=None,
                 check_finite=True, comm=None, partition=None):
        self._start(x0, {"W": W}, backend, check_finite, comm, partition, lr=lr, local_steps=local_steps,
                    dual_step=dual_step)

    def _check_hyper(self, lr, local_steps=DEFAULT_LOCAL_STEPS, dual_step=None):
        self.lr = self._check_lr(lr)
        self.local_steps = self._check_local_steps(local_steps)
        self.dual_step = (0.5 / self.local_steps if dual_step is None
                          else check_positive_float(dual_step, "dual_step"))
        return {"lr": self.lr, "local_steps": self.local_steps, "dual_step": self.dual_step}



    def _advance(self, grad_fn, cur, nxt, t):
        ops = self._ops
        g, w = self._work
        g = self._gradient_read(grad_fn, cur["x"], g, t, checked_next=True)
        talks = self._talks(t)
        phi = w if talks else nxt["x"]  # (phi_{s+1}: the round's last one is mixed into x)
        finite = ops.combine(phi, [1.0, self._lr_coef(), -self.dual_step], [cur["x"], g, cur["y"]])
        self._check_iterates(finite, t, phi)
        if not talks:
            self._carry(cur, nxt, "y")
            self._verified_last(finite, nxt["x"], t + 1)
            return
        ops.mix(self.W, phi, nxt["x"])  # x_{r+1} = W phi_tau
        finite = ops.combine(nxt["y"], [1.0, 1.0, -1.0], [cur["y"], phi, nxt["x"]])
        self._check_iterates(finite, t, nxt["x"], nxt["y"])
