"""SONATA over digraphs (Scutari & Sun 2019): push-sum gradient tracking with a proximal (linearised-surrogate) step,
for ``(1/n) sum_i f_i + r`` over a column-stochastic network."""

from __future__ import annotations

from .._checks import check_positive_float
from ._base import Optimizer
from ._corrections import PushWeights

__all__ = ["SONATA"]


class SONATA(Optimizer):
    r"""SONATA over a directed graph: perturbed push-sum gradient tracking with a proximal step at every node.

    Implements the paper's SONATA (a local step on a convex surrogate, then perturbed push-sum consensus of the
    models and of the gradient trackers) with the linearised surrogate
    :math:`\tilde f_i(x; x_i) = \nabla f_i(x_i)^\top (x - x_i) + \tau \|x - x_i\|^2 / 2` (the
    proximal-linear choice, ``tau = n / lr`` below), :math:`\mathrm{prox} = \mathrm{prox}_{\mathrm{lr}\, r}`, the
    push-sum weights :math:`\phi_0 = 1`, :math:`y_0 = g(x_0)` and :math:`\Phi_k = \mathrm{Diag}(\phi_k)`:

    .. math::

        \tilde x_k &= \mathrm{prox}(x_k - \mathrm{lr}\, y_k) \\
        \phi_{k+1} &= C \phi_k \\
        x_{k+1} &= \Phi_{k+1}^{-1} C \Phi_k (x_k + \alpha (\tilde x_k - x_k)) \\
        y_{k+1} &= \Phi_{k+1}^{-1} C (\Phi_k y_k + g(x_{k+1}) - g(x_k))

    The problem is written as the package's ``(1/n) sum_i f_i + r``: the paper's ``sum_i f_i + G`` with
    ``G = n r``, whose local step (S.2) is ``prox_{G / tau}(x_i - I y_i / tau)`` (``I = n`` agents): with
    ``tau = n / lr`` it is the step above (equivalently ``tau = 1 / lr`` for the paper's ``f_i / n`` and ``G = r``). ``1^T Phi_k y_k = 1^T g(x_k)`` at every ``k`` (``C`` is column-stochastic), so a fixed point has
    ``y_i = (1/n) sum_j grad f_j(x*)`` and ``x* = prox(x* - lr y)``: the composite minimiser, reached exactly
    with a constant step (tests: to 1e-9 on a lasso and a group lasso over a directed graph, against the
    composite solver of :mod:`rowstoch_fast.composite`). An iteration sends twice, one exchange after the other:
    the models (with ``phi``), then the trackers, which need ``g(x_{k+1})`` (adapt-then-combine tracking). Like
    Pull-Diag-GT's and AugDGM's two exchanges, that is one communication round (the paper's convention:
    :attr:`communication_rounds`); :meth:`traffic` counts both messages.

    Without a regularizer and with ``alpha = 1`` this is Push-DIGing with its tracker updated before it is mixed
    (``u_{k+1} = C (u_k - lr Phi_k y_k)``, ``u_k = Phi_k x_k``; a test checks it).

    Step sizes. Scutari & Sun prove asymptotic convergence to stationary points with a diminishing ``alpha`` and
    a sublinear rate with a constant one small enough, for ``tau`` (here ``n / lr``) large enough for the
    surrogate to be strongly convex; Sun, Scutari & Daneshmand revisit the method with constant steps and prove
    a linear rate when ``sum_i f_i`` is strongly convex. Neither gives a closed-form bound for a given ``C``: as
    for every tracking method here, ``lr`` small against ``1 / L`` and the network's mixing. Measured: on the
    directed 6-ring with out-degree weights and ``L = 1`` it reaches 1e-13 in 1,000 iterations at
    ``lr = 0.05`` and diverges at ``lr = 0.1``, where :class:`~rowstoch_fast.PushDIGing` (its tracker mixed
    before it is updated) still converges; without a regularizer ``alpha`` scales the step (``alpha = 0.5,
    lr = 0.1`` runs as ``alpha = 1, lr = 0.05``). ``alpha = 1`` by default: ours (the papers leave ``alpha`` to
    tuning; with ``alpha = 1`` each node sends its proximal point itself).

    Parameters
    ----------
    C : MixingMatrix or array_like
        Column-stochastic (e.g. ``topology.ring(n, stochastic="column")``).
    x0 : array_like, shape (d,), (n, d) or (reps, n, d)
    lr : float
        The proximal step, ``n / tau`` of the paper's surrogate (``1 / tau`` for its ``f_i / n``).
    alpha : float, default 1.0
        The step along ``x_tilde - x`` (the paper's ``alpha``), in ``(0, 1]``.
    regularizer : Regularizer, optional
        ``r`` (:mod:`rowstoch_fast.composite`: :class:`~rowstoch_fast.composite.L1`, ...); None: ``r = 0``.
    backend, check_finite, comm, partition
        As in :class:`~rowstoch_fast.PullDiagGT`.

    References
    ----------
    G. Scutari and Y. Sun, "Distributed nonconvex constrained optimization over time-varying digraphs",
    Math. Program. 176, 2019; Y. Sun, G. Scutari and A. Daneshmand, "Distributed optimization based on gradient
    tracking revisited: enhancing convergence rate via surrogation", SIAM J. Optim. 32(2), 2022.

    Examples
    --------
    >>> import numpy as np
    >>> from rowstoch_fast import SONATA, topology
    >>> from rowstoch_fast.composite import L1
    >>> C = topology.ring(6, stochastic="column")
    >>> b = np.arange(6.0)[:, None]  # f_i(x) = (x - b_i)^2 / 2: F = mean + 1.0 |x| has x* = 2.5 - 1.0
    >>> opt = SONATA(C, np.zeros(1), lr=0.05, regularizer=L1(1.0))
    >>> for _ in range(1000):
    ...     _ = opt.step(lambda X: X - b)
    >>> bool(np.allclose(opt.x, 1.5))
    True
    """

    name = "sonata"
    family = "proximal gradient tracking (push-sum)"
    order = 67
    exact = True
    composite = True
    matrices = ("C",)
    state = ("x", "v", "w", "g")  # w = Phi y: the trackers' push-sum numerators (y = w / phi)
    narrow = ("v",)
    push_sum_weights = "v"
    hyper = ("lr", "alpha", "regularizer")
    scratch = 2
    # Not in the paper preset nor the robustness experiment: the paper's problems are smooth and its baselines
    # published ones (this method's smooth form, an adapt-then-combine Push-DIGing, is neither); name it to run it.
    in_paper_preset = False
    in_robustness = False

    def __init__(self, C, x0, lr, alpha=1.0, backend="auto", *, regularizer=None, check_finite=True, comm=None,
                 partition=None):
        self._start(x0, {"C": C}, backend, check_finite, comm, partition, lr=lr, alpha=alpha,
                    regularizer=regularizer)
        self._weights = PushWeights(self._ops, self.C, 1)

    def _check_hyper(self, lr, alpha, regularizer=None):
        self.lr = self._check_lr(lr)
        self.alpha = check_positive_float(alpha, "alpha")
        if self.alpha > 1:
            raise ValueError(f"alpha must be in (0, 1], got {self.alpha}")
        self.regularizer, saved = self._check_regularizer(regularizer)
        return {"lr": self.lr, "alpha": self.alpha, "regularizer": saved}

    def _traffic_per_iteration(self):
        w = self._reps * self._d
        return [("C", 1, w + 1), ("C", 1, w)]  # (x's message with phi, then y's)

    def _initialize(self, grad_fn):
        cur = self._cur
        cur["v"][...] = 1.0
        self._initial_gradient(grad_fn, tracker="w")  # (phi_0 = 1: w_0 = y_0 = g_0)

    def _advance(self, grad_fn, cur, nxt, t):
        ops, C, a = self._ops, self.C, self.alpha
        p, q = self._work
        phi = cur["v"][:, 0]
        inv = self._weights.inverse(cur["v"])
        # p = x_k - lr y_k, y_k = w_k / phi_k (in two passes with one rate or one per replica: the same rounding,
        # so that replicas equal separate runs bit for bit)
        ops.combine(p, [inv], [cur["w"]], check=False)
        finite = ops.combine(p, [1.0, self._lr_coef()], [cur["x"], p])
        self._check_iterates(finite, t, p)
        self._prox(p, q, t)  # x_tilde_k = prox(p)
        if a == 1.0:  # q <- Phi_k (x_k + alpha (x_tilde_k - x_k))
            ops.combine(q, [phi], [q], check=False)
        else:
            ops.combine(q, [(1.0 - a) * phi, a * phi], [cur["x"], q], check=False)
        ops.mix(C, q, nxt["x"])
        self._weights.advance(cur["v"], nxt["v"], t)  # phi_{k+1} = C phi_k
        finite = ops.combine(nxt["x"], [self._weights.inverse(nxt["v"])], [nxt["x"]])  # x_{k+1} = C q / phi_{k+1}
        self._check_iterates(finite, t, nxt["x"])
        self._gradient(grad_fn, nxt["x"], nxt["g"], t + 1)
        finite = ops.combine(p, [1.0, 1.0, -1.0], [cur["w"], nxt["g"], cur["g"]])
        self._check_iterates(finite, t, p)
        ops.mix(C, p, nxt["w"])  # w_{k+1} = Phi_{k+1} y_{k+1} = C (w_k + g_{k+1} - g_k)
