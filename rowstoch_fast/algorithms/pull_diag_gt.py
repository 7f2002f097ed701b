"""Pull-Diag-GT (eq. 7) and MG-Pull-Diag-GT (eq. 12) of the paper, on every backend."""

from __future__ import annotations

import numpy as np

from .._checks import MAX_ROUNDS, as_float_array, check_choice, check_int, check_tracker
from ..errors import DivergenceError
from ..network import weights_of
from ._base import Optimizer
from ._corrections import tracker_row

__all__ = ["PullDiagGT"]

FORMS = ("atc", "frost")


def _initial_step_error(node):
    return DivergenceError(f"x0 - lr * g0 is not finite at node {node} (lr too large?)", iteration=0, node=node,
                           what="iterate")


class PullDiagGT(Optimizer):
    r"""(MG-)Pull-Diag-GT: gradient tracking over a row-stochastic network, one ``step`` at a time.

    Implements, for :math:`t = 0, 1, \dots` (eq. 12; eq. 7 is ``rounds=1``):

    .. math::

        x_{t+1} &= A^R (x_t - \mathrm{lr}\, y_t) \\
        g_{t+1} &= \mathrm{grad\_fn}(x_{t+1}) \\
        y_{t+1} &= A^R (y_t + D_{t+1}^{-1} g_{t+1} - D_t^{-1} g_t)

    with :math:`D_t = \mathrm{Diag}(A^{tR})` (:math:`D_0 = I`) and :math:`y_0 = g_0 = \mathrm{grad\_fn}(x_0)`.
    ``form="frost"`` is the non-ATC form of FROST (Xin, Xi & Khan 2019):

    .. math::

        x_{t+1} &= A^R x_t - \mathrm{lr}\, y_t \\
        y_{t+1} &= A^R y_t + D_{t+1}^{-1} g_{t+1} - D_t^{-1} g_t

    where ``lr`` may also be one step size per node (shape ``(n,)``).
    On the CPU the ATC y phase is one fused compiled kernel; no step allocates.

    Over a network whose matrices vary (a :class:`~rowstoch_fast.network.Schedule`, losses, sleep), :math:`D_t`
    is the diagonal of the product of the matrices used, :math:`\mathrm{Diag}(A_{t-1} \cdots A_0)`: it tends to
    the weights of the product started at 0, not the ones started at :math:`t` that tracking needs (they depend on
    the matrices to come), so the method is exact on a static network only; over a period-2 schedule it stops
    0.02-0.44 from the minimiser (the networks guide).

    Parameters
    ----------
    A : MixingMatrix or array_like
        The row-stochastic mixing matrix (anything :class:`MixingMatrix` accepts).
    x0 : array_like, shape (d,), (n, d) or (reps, n, d)
        Initial models: a vector broadcast to every node, one row per node, or
        ``reps`` independent repetitions run together (they share every pass
        over the CSR structure and the tracker). A CuPy array runs on its GPU.
    lr : float (or array of shape (n,) with ``form="frost"``)
        Step size ``alpha > 0``.
    rounds : int, default 1
        Gossip steps ``R`` per communication phase. ``R > 1`` is MG-Pull-Diag-GT:
        ``grad_fn`` should then return the average of ``R`` stochastic gradients
        (eq. 12b), so that samples and communication rounds per iteration match.
    tracker : {"exact", "perron"}, default "exact"
        ``"exact"`` follows ``Diag(A^(tR))`` as the paper does (computed once
        per matrix, frozen once it equals ``pi`` in float64); ``"perron"`` uses
        ``diag(pi)`` from ``t = 1`` on (the exact tracker's limit), for very
        large ``n``.
    backend : {"auto", "cpu", "cupy", "mpi"}, default "auto"
        ``"auto"`` picks from the type of ``x0`` (a CuPy array selects
        ``"cupy"``); ``"mpi"`` partitions the nodes over the MPI ranks (every
        rank passes the full ``A`` and ``x0``; ``x`` and ``grad_fn`` see the
        rank's rows, :attr:`local_nodes`).
    check_finite : bool, default True
        Raise :class:`DivergenceError` as soon as a gradient or iterate is NaN/Inf.
    comm, partition : optional
        Backend ``"mpi"`` only: the communicator (default ``MPI.COMM_WORLD``)
        and the owner rank of every node (default: contiguous blocks).
    form : {"atc", "frost"}, default "atc"
        The paper's adapt-then-combine updates, or FROST's.

    Notes
    -----
    Memory: nine blocks of ``n x (reps * d)`` values of ``A.dtype`` (iterates,
    trackers, gradients, the next iterate's input, each twice, and a work
    block; ten with ``rounds > 1``), plus the exact tracker's table. A request that cannot fit raises
    MemoryError before anything is allocated.

    Thread safety: one optimizer must be stepped by one thread at a time (a
    concurrent ``step`` raises RuntimeError); several optimizers may run in
    parallel threads on the same :class:`MixingMatrix`.

    Examples
    --------
    Minimise ``(1/n) sum_i 1/2 ||x - b_i||^2`` over the directed exponential graph:

    >>> import numpy as np
    >>> from rowstoch_fast import PullDiagGT, topology
    >>> A = topology.exponential(8)
    >>> b = np.arange(8.0)[:, None]
    >>> opt = PullDiagGT(A, np.zeros(1), lr=0.1)
    >>> for _ in range(300):
    ...     _ = opt.step(lambda X: X - b)
    >>> np.allclose(opt.x, b.mean())
    True
    """

    name = "pull-diag-gt"
    family = "gradient tracking (Pull-Diag)"
    matrices = ("A",)
    state = ("x", "y", "g", "xw")
    scratch = 2
    hyper = ("lr", "rounds", "tracker")
    saved_options = ("form",)
    multi_round = True
    order = 0
    exact = True
    mg_listed = True

    def __init__(self, A, x0, lr, rounds=1, tracker="exact", backend="auto", *, check_finite=True, comm=None,
                 partition=None, form="atc"):
        self.form = form  # (checked in _start, on every MPI rank: a bad one on one rank had hung the others)
        if isinstance(form, str) and form == "frost":  # no x - lr y block, one work block
            self.state, self.scratch = ("x", "y", "g"), 1
        elif isinstance(rounds, (int, np.integer)) and rounds == 1:  # one gossip pass per phase: no ping-pong
            self.scratch = 1  # buffer (any other rounds is checked in _start)
        self._start(x0, {"A": A}, backend, check_finite, comm, partition, keywords={"form": form}, lr=lr,
                    rounds=rounds, tracker=tracker)
        self._tracker = self._ops.tracker(weights_of(self.A), self.rounds, tracker)
        if self.form == "frost":
            self._psi, self._scratch = self._work[0], None
            self._lr_changed()
        elif self.rounds == 1:
            self._psi = self._work[0]
            self._scratch = self._ops.xp.empty((0, self._reps * self._d), dtype=self._ops.dtype)
        else:
            self._psi, self._scratch = self._work

    @classmethod
    def _check_options(cls, options):
        super()._check_options(options)
        if "form" in options:
            check_choice(options["form"], "form", FORMS, f"form must be 'atc' or 'frost', got {options['form']!r}")

    @classmethod
    def _saved_options_of(cls, options, state):
        """A state saved before ``form`` was: the FROST form's has no ``xw`` block (it was refused as missing one)."""
        if "form" not in options and cls.saved_options and "xw" not in state and "x" in state:
            options = dict(options, form="frost")
        return options

    @classmethod
    def takes_rates_per_node(cls, **hyper):
        return hyper.get("form", getattr(cls, "form", "atc")) == "frost"

    def _check_lr(self, lr):
        if self.form == "frost" and np.ndim(lr) == 1:
            lr_given = lr
            lr = as_float_array(lr, "lr", np.float64, ndim=1)
            if lr.shape[0] != self._nodes_hint:
                raise ValueError(f"lr has {lr.shape[0]} per-node values but A has {self._nodes_hint} nodes")
            if (lr <= 0).any():
                raise ValueError(f"lr must be positive at every node, got {lr.min()} at node {int(np.argmin(lr))}")
            if np.may_share_memory(lr, lr_given):  # (the caller's array had been kept: changed afterwards, opt.lr
                # and state_dict() said the new rates while the steps ran at the old ones, helper 267)
                lr = lr.copy()
            lr.setflags(write=False)
            return lr
        return super()._check_lr(lr)

    def _check_hyper(self, lr, rounds, tracker):
        self.lr = lr = self._check_lr(lr)
        self.rounds = check_int(rounds, "rounds", minimum=1, maximum=MAX_ROUNDS)
        check_tracker(tracker)
        return {"lr": lr, "rounds": self.rounds, "tracker": tracker}

    @property
    def tracker(self):
        """The diagonal tracker (``.kind``: ``"exact"`` or ``"perron"``; ``.scale(t)``: ``1 / diag(D_t)``)."""
        return self._tracker

    @property
    def y(self):
        """Gradient trackers ``y_t`` (read-only view, valid until the next step)."""
        return self._state_view("y")

    def gather_y(self):
        """The full ``y`` on the root process (None on the other MPI ranks)."""
        return self.gather_state("y")

    @classmethod
    def default_lr(cls, n):
        """The paper's ``0.05 / n``: ``y`` follows the sum of the gradients, not their average."""
        return 0.05 / check_int(n, "n", minimum=1)

    def gradient_sum_tracker(self, gradient):
        """``(y, g)`` of every node (``pi^T y_t = pi^T D_t^{-1} g_t``, about ``1^T g_t``: eq. 9), on the root;
        collective under MPI."""
        return self.gather_state("y", copy=False), self.gather(gradient, copy=False)

    def _traffic_per_iteration(self):
        w = self._reps * self._d
        if self.form == "frost":  # x and y leave in the same round
            return [("A", self.rounds, 2 * w)]
        return [("A", 2 * self.rounds, w)]  # the y phase needs g(x_{t+1}): its own R exchanges

    # ------------------------------------------------------------------ the equations
    def _initialize(self, grad_fn):
        cur, ops = self._cur, self._ops
        self._gradient(grad_fn, cur["x"], cur["g"], 0)
        cur["y"][...] = cur["g"]
        if self.form == "frost":
            return
        finite = ops.combine(cur["xw"], [1.0, self._lr_coef()], [cur["x"], cur["y"]])
        if self._check_finite:
            self._verify(finite, lambda: _initial_step_error(ops.first_nonfinite(cur["xw"])))

    def _advance(self, grad_fn, cur, nxt, t):
        if self.form == "frost":
            return self._advance_frost(grad_fn, cur, nxt, t)
        ops, A, R = self._ops, self.A, self.rounds
        ops.mix(A, cur["xw"], nxt["x"], R, self._scratch)  # x_{t+1} = A^R (x_t - lr y_t)
        self._gradient(grad_fn, nxt["x"], nxt["g"], t + 1)
        lr = self.lr  # (read after the gradients: a rate assigned between ask and tell is the rate from them on,
        # as the unfused branch's _lr_coef reads it; read before, it had waited an iteration, helper 209)
        s_new = self._tracker.scale(t + 1)
        fused = getattr(ops, "gt_y_phase", None) if self._static and np.ndim(lr) == 0 else None  # (one rate)
        if fused is not None:  # y_{t+1} and x_{t+1} - lr y_{t+1} in one compiled phase
            finite = fused(A, R, lr, nxt["x"], cur["y"], nxt["g"], cur["g"], s_new, self._tracker.scale(t),
                           nxt["y"], nxt["xw"], self._psi, self._scratch)
        else:
            ops.combine(self._psi, [1.0, s_new, tracker_row(self, t, -1.0)], [cur["y"], nxt["g"], cur["g"]],
                        check=False)
            ops.mix(A, self._psi, nxt["y"], R, self._scratch)  # y_{t+1} = A^R psi
            finite = ops.combine(nxt["xw"], [1.0, self._lr_coef()], [nxt["x"], nxt["y"]])
        self._check_iterates(finite, t, nxt["x"], nxt["y"], nxt["xw"])

    def _advance_frost(self, grad_fn, cur, nxt, t):
        ops, A, R = self._ops, self.A, self.rounds
        step = self._lr_coef() if self._lr_vector is None else self._lr_vector
        ops.mix(A, cur["x"], nxt["x"], R, self._psi)
        finite = ops.combine(nxt["x"], [1.0, step], [nxt["x"], cur["y"]])  # x_{t+1} = A^R x_t - lr y_t
        self._check_iterates(finite, t, nxt["x"])
        self._gradient(grad_fn, nxt["x"], nxt["g"], t + 1)
        ops.mix(A, cur["y"], nxt["y"], R, self._psi)
        finite = ops.combine(nxt["y"], [1.0, self._tracker.scale(t + 1), tracker_row(self, t, -1.0)],
                             [nxt["y"], nxt["g"], cur["g"]])
        self._check_iterates(finite, t, nxt["y"])

    def _lr_changed(self, state=True):
        if state:
            self._settle()
        if self.form == "atc" and state:
            self._ops.combine(self._cur["xw"], [1.0, self._lr_coef()], [self._cur["x"], self._cur["y"]])
        else:  # (one rate per node; a rate, or one per replica, goes through _lr_coef)
            self._lr_vector = None if np.ndim(self.lr) != 1 else self._ops.vector(-np.asarray(self.lr))
