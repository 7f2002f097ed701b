"""Local DSGD (Koloskova, Loizou, Boreiri, Jaggi & Stich 2020): ``K`` local gradient steps between gossip rounds."""

from __future__ import annotations

from ._base import Optimizer
from ._local import DEFAULT_LOCAL_STEPS, LocalSteps

__all__ = ["LocalDSGD"]


class LocalDSGD(LocalSteps, Optimizer):
    r"""Decentralized SGD with local updates: every node takes ``K`` gradient steps on its own, then the nodes
    gossip once.

    Implements, with one gradient step per iteration :math:`t` (from 0):

    .. math::

        v_t &= x_t - \mathrm{lr}\, g(x_t) \\
        x_{t+1} &= \begin{cases}
            A v_t & \text{if } (t + 1) \bmod K = 0 \quad \text{(a communication round)} \\
            v_t & \text{otherwise} \quad \text{(a local step)}
        \end{cases}

    With ``K = 1`` this is :class:`~rowstoch_fast.DSGD` (``x+ = A (x - lr g(x))``; a test checks it). Over a
    doubly stochastic ``W`` it is the local decentralized SGD of the reference's unified analysis (its
    Example 2, local SGD over a fixed topology, ``tau = K``); over a row-stochastic ``A`` it goes, like DSGD, to a
    neighbourhood of the **pi-weighted** minimiser, and with data that differ between nodes the local steps
    widen that neighbourhood (client drift, ``O(lr K)``).

    Gradients and communication are counted apart: ``iteration`` counts gradient steps, and
    :attr:`communication_rounds` and :meth:`traffic` only the rounds (``iteration // K``); ``rowstoch compare``
    gives it ``K`` iterations per round of its budget, so its ``gradients`` axis shows the ``K`` times more
    computation.

    Parameters
    ----------
    A : MixingMatrix or array_like
        Row-stochastic (a doubly stochastic ``W`` too).
    x0 : array_like, shape (d,), (n, d) or (reps, n, d)
    lr : float
    local_steps : int, default 4
        ``K >= 1``, the gradient steps per communication round.
    backend, check_finite, comm, partition
        As in :class:`~rowstoch_fast.PullDiagGT`.

    References
    ----------
    A. Koloskova, N. Loizou, S. Boreiri, M. Jaggi and S. U. Stich, "A unified theory of decentralized SGD with
    changing topology and local updates", ICML 2020.

    Examples
    --------
    >>> import numpy as np
    >>> from rowstoch_fast import LocalDSGD, topology
    >>> W = topology.ring(6, directed=False, weights="metropolis")
    >>> b = np.arange(6.0)[:, None]
    >>> opt = LocalDSGD(W, np.zeros(1), lr=0.01, local_steps=4)
    >>> for _ in range(8000):
    ...     _ = opt.step(lambda X: X - b)
    >>> opt.communication_rounds, bool(abs(opt.x.mean() - 2.5) < 0.05)
    (2000, True)
    """

    name = "local-dsgd"
    family = "decentralized gradient, local updates"
    order = 35
    bias = "pi-weighted"
    in_paper_preset = False  # (a local-update method: the paper compares one gradient per round)
    in_robustness = False
    state = ("x",)
    hyper = ("lr", "local_steps")
    scratch = 2

    def __init__(self, A, x0, lr, backend="auto", *, local_steps=DEFAULT_LOCAL_STEPS, check_finite=True, comm=None,
                 partition=None):
        self._start(x0, {"A": A}, backend, check_finite, comm, partition, lr=lr, local_steps=local_steps)

    def _check_hyper(self, lr, local_steps=DEFAULT_LOCAL_STEPS):
        self.lr = self._check_lr(lr)
        self.local_steps = self._check_local_steps(local_steps)
        return {"lr": self.lr, "local_steps": self.local_steps}


    def _traffic_per_iteration(self):
        return [("A", 1, self._reps * self._d)]

    def _advance(self, grad_fn, cur, nxt, t):
        g, v = self._work
        g = self._gradient_read(grad_fn, cur["x"], g, t, checked_next=True)  # (both branches combine it, checked)
        if not self._talks(t):  # a local step: x_{t+1} = x_t - lr g
            finite = self._ops.combine(nxt["x"], [1.0, self._lr_coef()], [cur["x"], g])
            self._check_iterates(finite, t, nxt["x"])
            self._verified_last(finite, nxt["x"], t + 1)
            return
        finite = self._ops.combine(v, [1.0, self._lr_coef()], [cur["x"], g])
        self._check_iterates(finite, t, v)
        self._ops.mix(self.A, v, nxt["x"])
