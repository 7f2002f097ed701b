"""LT-ADMM (Ren, Bastianello, Johansson & Parisini 2025): the relaxed consensus ADMM with local training, its link
variables summed per node (exact on a static undirected network)."""

from __future__ import annotations

import numpy as np

from .._checks import check_positive_float
from ..mixing import MixingMatrix
from ..network import Network
from ._base import Optimizer
from ._local import DEFAULT_LOCAL_STEPS, LocalSteps

__all__ = ["LTADMM"]


def check_relaxation(relaxation):
    """The relaxation ``alpha`` of the link update, in (0, 1), or raise naming ``relaxation``."""
    a = check_positive_float(relaxation, "relaxation")
    if a >= 1.0:
        raise ValueError(f"relaxation must be in (0, 1) (alpha of the relaxed ADMM's link update; 1 is Peaceman-"
                         f"Rachford, which these methods' analyses exclude), got {a!r}")
    return a


class LinkSums:
    """What LT-ADMM and ATG share: relaxed-ADMM link variables ``z_ij`` (one per directed link, updated with the
    message ``z_ji - 2 rho w_ij v_j`` of the neighbour) kept as two sums per node, and the static symmetric ``W``
    that makes those sums exact.

    With ``s_ij = z_ij + z_ji`` and ``d_ij = z_ij - z_ji``, the link update ``z_ij+ = (1 - a) z_ij - a z_ji + 2 a
    rho_ij v_j`` (``rho_ij = rho w_ij = rho_ji``) is ``s_ij+ = (1 - 2a) s_ij + 2 a rho_ij (v_i + v_j)`` and ``d_ij+ =
    d_ij + 2 a rho_ij (v_j - v_i)``, so node ``i``'s sums ``z_i = sum_j z_ij = (S_i + D_i) / 2`` and ``e_i = D_i =
    sum_j (z_ij - z_ji)`` follow from ``(W v)_i`` alone (``d_i = 1 - w_ii = sum_{j != i} w_ij``):

    .. math::

        z_{k+1} &= (1 - 2a)\\, z_k + a\\, e_k + 2 a \\rho\\, (W v - \\mathrm{diag}(W)\\, v) \\\\
        e_{k+1} &= e_k + 2 a \\rho\\, (W v - v)

    This holds where every link carries its message every round, both ways (a lost message leaves one ``z_ij``
    as it was and changes its node's sum differently), so only a static ``W`` is taken."""

    symmetric = True
    matrices = ("W",)

    @classmethod
    def _static(cls, W):
        """``W`` as a static matrix (a network that never changes: its matrix), or ValueError naming it."""
        if isinstance(W, Network):
            static = W.static
            if static is None:
                raise ValueError(f"{cls.__name__}: W must be a static symmetric doubly stochastic matrix (each "
                                 f"node keeps the sums of its link variables, exact only when every link carries "
                                 f"its message every round, both ways): losses, sleep, schedules, delays and "
                                 f"message layers are refused; got {W!r}")
            return static
        return W

    @classmethod
    def applies_to(cls, A):
        """A static symmetric doubly stochastic W (an undirected graph's weights, every link used every round): the
        link variables are summed per node, exact only there; losses, sleep, schedules, delays and message layers
        are refused."""
        if isinstance(A, Network):
            A = A.static
        return isinstance(A, MixingMatrix) and super().applies_to(A)

    def _row_coef(self, key, values):
        """A per-row coefficient of :meth:`Backend.combine` made once (``values(w_ii)`` of this process's rows: the
        penalty and relaxation are fixed once built)."""
        cache = self.__dict__.setdefault("_row_coefs", {})
        if key not in cache:
            cache[key] = self._ops.vector(values(np.asarray(self._diagonal(), dtype=np.float64)))
        return cache[key]

    def _link_sums(self, v, wv, z, e, z_next, e_next, t):
        """``z_next``, ``e_next`` from ``z``, ``e`` and the message ``v`` (``wv = W v``, mixed by the caller): the
        equations of the class docstring; DivergenceError for iteration ``t + 1`` on NaN/Inf."""
        ops, a, rho = self._ops, self.relaxation, self.penalty
        own = self._row_coef("own", lambda wii: -2.0 * a * rho * wii)
        finite = ops.combine(z_next, [1.0 - 2.0 * a, a, 2.0 * a * rho, own], [z, e, wv, v])
        self._check_iterates(finite, t, z_next)
        finite = ops.combine(e_next, [1.0, 2.0 * a * rho, -2.0 * a * rho], [e, wv, v])
        self._check_iterates(finite, t, e_next)


class LTADMM(LinkSums, LocalSteps, Optimizer):
    r"""LT-ADMM: the relaxed consensus ADMM whose local problem is solved approximately by ``tau`` gradient steps.

    Implements the reference's Algorithm 1 with full gradients, as decent-bench 0.3.0 reads it, each link
    weighted by ``w_ij`` (penalty ``rho w_ij``; ``d_i = 1 - w_ii``), ``z_{ij,0} = \rho w_{ij} x_{0,i}`` and one
    local gradient step per iteration. Round ``r`` starts by sending ``x_r`` (a communication round at the first
    of every ``tau`` iterations; the first sends ``x_0``, from which the link variables start), which updates the
    link sums of :class:`LinkSums` (``z = sum_j z_ij``, ``e = sum_j (z_ij - z_ji)``) with ``v = x_r``:

    .. math::

        z_r &= (1 - 2\alpha)\, z_{r-1} + \alpha\, e_{r-1} + 2 \alpha \rho\, (W x_r - \mathrm{diag}(W)\, x_r),
            \qquad e_r = e_{r-1} + 2 \alpha \rho\, (W x_r - x_r) \\
        c_r &= \rho\, d_i\, x_r - z_r \qquad (z_0 = \rho d_i x_0,\ e_0 = \rho (x_0 - W x_0),\ c_0 = 0) \\
        \phi_{s+1} &= \phi_s - \mathrm{lr}\, g(\phi_s) - \beta\, c_r
            \qquad (s = 0, \dots, \tau - 1,\ \phi_0 = x_r) \\
        x_{r+1} &= \phi_\tau

    (``beta c_r`` is the gradient of the local augmented Lagrangian's penalty ``rho d_i ||x||^2 / 2 - x^T z_r``,
    taken at ``x_r`` once per round.) The link form, one ``z_ij`` per directed link updated by
    ``z_ij <- (1 - alpha) z_ij - alpha (z_ji - 2 rho w_ij x_j)``, is the dense twin
    (:func:`rowstoch_fast._reference.lt_admm`); this class keeps two sums per node instead of one variable per link,
    which is the same on a static symmetric ``W`` (a network with losses, sleep or a schedule is refused: see
    :class:`LinkSums`). The model the optimizer shows is the current iterate ``phi``. decent-bench's ``LT_ADMM``
    (the unweighted neighbour sums, ``rho``, ``z_ij,0 = x0_i``) is this class on ``W = I - L / kappa`` with
    ``penalty = kappa rho`` where its ``rho = 1`` (its default; another ``rho`` starts its ``z_ij`` at ``x0_i``,
    this class at ``rho x0_i``), its round ``r`` this class's iteration ``r tau``
    (bench/decent_bench_admm_tracking.py).

    Exact with full gradients: at a fixed point the local map ``phi -> phi - lr g(phi) - beta c`` returns to its
    start after ``tau`` steps, which for strongly convex ``f_i`` and ``lr < 2 / L`` (a contraction) means
    ``lr g_i(x) + beta c_i = 0`` at every step; the link sums then force consensus (``W x = x``) and
    ``sum_i c_i = 0``, so ``sum_i g_i(x) = 0``.
    The reference proves convergence to a neighbourhood of the minimiser with stochastic gradients (exact with its
    variance-reduced variant, :class:`~rowstoch_fast.LTADMMVR`) for ``lr``, ``beta`` small enough. Gradients and
    communication are counted apart, as for :class:`~rowstoch_fast.LocalDSGD`.

    Parameters
    ----------
    W : MixingMatrix or array_like
        Static, doubly stochastic and symmetric (see :class:`~rowstoch_fast.DGD`).
    x0 : array_like, shape (d,), (n, d) or (reps, n, d)
    lr : float
        ``gamma``, the local gradient step.
    local_steps : int, default 4
        ``tau >= 1`` (the package's default for local-update methods; decent-bench's is 5).
    penalty : float, default 1.0
        ``rho > 0``; each link's penalty is ``rho w_ij`` (decent-bench's default ``rho = 1`` on its unweighted
        links is ``penalty = kappa`` on ``W = I - L / kappa``).
    relaxation : float, default 0.5
        ``alpha`` in (0, 1) (decent-bench's default; 0.5 is the plain ADMM).
    dual_step : float, optional
        ``beta > 0``, the step on the penalty's gradient; default ``lr`` (decent-bench's defaults are equal,
        ``gamma = beta = 0.01``: then each local step is a gradient step on the local augmented Lagrangian with
        its penalty linearised at ``x_r``).
    backend, check_finite, comm, partition
        As in :class:`~rowstoch_fast.PullDiagGT`.

    References
    ----------
    X. Ren, N. Bastianello, K. H. Johansson and T. Parisini, "Communication-efficient stochastic distributed
    learning", arXiv:2501.13516, 2025 (LT-ADMM and LT-ADMM-VR).

    Examples
    --------
    >>> import numpy as np
    >>> from rowstoch_fast import LTADMM, topology
    >>> W = topology.ring(6, directed=False, weights="metropolis")
    >>> b = np.arange(6.0)[:, None]
    >>> opt = LTADMM(W, np.zeros(1), lr=0.1, local_steps=4, penalty=2.0)
    >>> for _ in range(4000):
    ...     _ = opt.step(lambda X: X - b)
    >>> opt.communication_rounds, bool(np.allclose(opt.x, b.mean()))
    (1000, True)
    """

    name = "lt-admm"
    family = "ADMM, local updates"
    order = 182
    exact = True
    in_robustness = False
    state = ("x", "z", "e", "c")  # (x: phi inside a round)
    hyper = ("lr", "local_steps", "penalty", "relaxation", "dual_step")
    scratch = 2

    def __init__(self, W, x0, lr, backend="auto", *, local_steps=DEFAULT_LOCAL_STEPS, penalty=1.0, relaxation=0.5,
                 dual_step=None, check_finite=True, comm=None, partition=None):
        self._start(x0, {"W": self._static(W)}, backend, check_finite, comm, partition, lr=lr,
                    local_steps=local_steps, penalty=penalty, relaxation=relaxation, dual_step=dual_step)

    def _check_hyper(self, lr, local_steps=DEFAULT_LOCAL_STEPS, penalty=1.0, relaxation=0.5, dual_step=None):
        self.lr = self._check_lr(lr)
        self.local_steps = self._check_local_steps(local_steps)
        self.penalty = check_positive_float(penalty, "penalty")
        self.relaxation = check_relaxation(relaxation)
        self.dual_step = None if dual_step is None else check_positive_float(dual_step, "dual_step")
        return {"lr": self.lr, "local_steps": self.local_steps, "penalty": self.penalty,
                "relaxation": self.relaxation, "dual_step": self.dual_step}

    def _talks(self, t):
        """A round starts (and sends ``x_r``) at the first of its ``tau`` iterations."""
        return self._round_starts(t)

    def _talking_iterations(self):
        return -(-self.iteration // self.local_steps)

    def _advance(self, grad_fn, cur, nxt, t):
        ops, rho = self._ops, self.penalty
        wx = self._work[1]
        if self._round_starts(t):  # x_r sent: the link sums, then c_r
            ops.mix(self.W, cur["x"], wx)
            if t == 0:  # z_ij,0 = rho w_ij x0_i: z_0 = rho d x0, e_0 = rho (x0 - W x0)
                ops.combine(nxt["z"], [self._row_coef("rho d", lambda wii: rho * (1.0 - wii))], [cur["x"]],
                            check=False)
                finite = ops.combine(nxt["e"], [rho, -rho], [cur["x"], wx])
                self._check_iterates(finite, t, nxt["e"])
            else:
                self._link_sums(cur["x"], wx, cur["z"], cur["e"], nxt["z"], nxt["e"], t)
            ops.combine(nxt["c"], [self._row_coef("rho d", lambda wii: rho * (1.0 - wii)), -1.0],
                        [cur["x"], nxt["z"]], check=False)
        else:
            self._carry(cur, nxt, "z", "e", "c")
        g = self._local_gradient(grad_fn, cur, nxt, t)
        beta = self._lr_coef() if self.dual_step is None else -self.dual_step
        finite = ops.combine(nxt["x"], [1.0, self._lr_coef(), beta], [cur["x"], g, nxt["c"]])
        self._check_iterates(finite, t, nxt["x"])
        self._verified_last(finite, nxt["x"], t + 1)
        self._after_local_step(grad_fn, cur, nxt, t)

    def _local_gradient(self, grad_fn, cur, nxt, t):
        """The gradient (estimate) of the local step from ``phi = cur["x"]``: here ``g(phi)``."""
        return self._gradient_read(grad_fn, cur["x"], self._work[0], t)

    def _after_local_step(self, grad_fn, cur, nxt, t):
        """What a variant does once ``phi`` has moved to ``nxt["x"]``: here nothing."""
